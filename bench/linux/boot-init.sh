#!/bin/busybox sh
# /init of the Linux boot benchmark's initramfs (linux.boot.to_prompt, issue 14): a busybox
# initramfs booting to a login shell's prompt on the serial console, the usual minimal way.
# tools/sawmill/src/bench/boot.rs writes it with /bin/busybox, /bin/stamp and /etc/profile
# (the same profile as sawmill's boot image: it stamps the time and powers off).
/bin/busybox --install -s /bin
export PATH=/bin:/usr/bin:/sbin:/usr/sbin HOME=/root TERM=vt100

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

# A session with the console's real device (ttyS0) as its controlling terminal, as sawmill's
# login shell has: job control on.
cd /
exec setsid cttyhack sh -l
