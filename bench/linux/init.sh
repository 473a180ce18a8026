#!/bin/busybox sh
# /init of the Linux baseline initramfs (sawmill benchmark suite, issue 7).
# tools/sawmill/src/bench/linux.rs copies this file to /init and writes
# /modules.load: one module file per line, in load order (dependencies first).
/bin/busybox --install -s /bin
export PATH=/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

echo "LINIT loading modules"
while read -r mod; do
    [ -n "$mod" ] || continue
    if ! insmod "$mod"; then
        echo "LINIT error: insmod $mod failed"
    fi
done < /modules.load

n=0
while [ ! -b /dev/vda ]; do
    n=$((n + 1))
    if [ "$n" -gt 200 ]; then
        echo "LINIT error: /dev/vda did not appear"
        poweroff -f
    fi
    sleep 0.1
done

# Mounted read-write with the default options (relatime), as a normal Linux
# system would; the ext4 driver serves the ext2 file system.
mkdir -p /mnt
if ! mount -t ext2 /dev/vda /mnt; then
    echo "LINIT error: mount /dev/vda failed"
    poweroff -f
fi

# The network figures: loopback up; the NIC (QEMU's user network) with the address its DHCP
# would give, statically; the host's UDP sink's address is in /lbench.sink.
ip link set lo up
ip addr add 10.0.2.15/24 dev eth0 && ip link set eth0 up || echo "LINIT error: no eth0"
ip route add default via 10.0.2.2

echo "LINIT running lbench"
/lbench /mnt --sink="$(cat /lbench.sink)"
echo "LINIT lbench exited with status $?"
umount /mnt
poweroff -f
