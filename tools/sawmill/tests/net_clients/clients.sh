# The guest side of tools/sawmill/tests/net_clients.rs, run by /bin/busybox sh as the Linux
# system's first process. $1: the port of the host's HTTP server (QEMU's gateway 10.0.2.2).
# nc -l first (the sleep lets it reach listen); the UDP echo answering is the host's sign that
# both are up; after the host's "quit" the guest fetches with wget and prints both checksums.
/bin/busybox nc -l -p 5000 > /data/recv.bin < /dev/null &
nc=$!
/bin/busybox sleep 1
/udp_echo 5001 || exit 1
wait $nc || echo "clients: nc -l failed"
/bin/busybox wget -q -O /data/got.bin "http://10.0.2.2:$1/file.bin" || echo "clients: wget failed"
/bin/busybox sha256sum /data/recv.bin /data/got.bin
sync
echo "clients: done"
