# The guest side of tools/sawmill/tests/net_clients.rs, run by /bin/busybox sh as the Linux
# system's first process. $1: the port of the host's HTTP server (QEMU's gateway 10.0.2.2).
# nc -l first (the sleep lets it reach listen); the UDP echo answering is the host's sign that
# both are up (the echo holds 256 more UDP sockets: the stack serves the host with them open); after the host's "quit" the guest fetches with wget and prints both checksums,
# then resolves the host by name (nslookup, wget) through the host's DNS responder.
/bin/busybox nc -l -p 5000 > /data/recv.bin < /dev/null &
nc=$!
/bin/busybox sleep 1
/udp_echo 5001 256 || exit 1
wait $nc || echo "clients: nc -l failed"
/bin/busybox wget -q -O /data/got.bin "http://10.0.2.2:$1/file.bin" || echo "clients: wget failed"
# Names: the image's resolv.conf names QEMU's DNS (10.0.2.3); the host's test responder is at
# 10.0.2.2:53 (the host's 127.0.0.1:53), asked directly by nslookup and through resolv.conf by
# wget (glibc's resolver in busybox).
echo "clients: resolv.conf: $(/bin/busybox cat /etc/resolv.conf)"
/bin/busybox nslookup sawmill-host.test 10.0.2.2 || echo "clients: nslookup failed"
echo "nameserver 10.0.2.2" > /etc/resolv.conf
/bin/busybox wget -q -O /data/named.txt "http://sawmill-host.test:$1/named.txt" || echo "clients: wget by name failed"
echo "clients: by name: $(/bin/busybox cat /data/named.txt)"
/bin/busybox sha256sum /data/recv.bin /data/got.bin
sync
echo "clients: done"
