#!/usr/bin/env bash
# Installs what building and running sawmill needs, and nothing that is already there.
# Usage: scripts/setup.sh          # build, run and test
#        scripts/setup.sh bench    # additionally the Linux benchmark baseline
# Idempotent and non-interactive; apt-get needs root (sudo is used if we are not root).
set -euo pipefail

# gcc + libc6-dev: the C linker and C runtime rustc needs to link host programs (the tool, tests).
# grub-pc-bin, grub-common, xorriso, mtools: the test that boots the image through GRUB.
# busybox-static: the Linux system's root image and the Linux tests' oracle (/bin/busybox).
# musl-tools: musl-gcc, which builds the Linux test programs (tests/linux/*.c) statically,
# and the personality's own test programs (`cbins` of a scenario disk).
# curl: the host's HTTP client fetching from busybox httpd in the guest (tools/sawmill/tests/httpd.rs).
# netcat-openbsd: the host's `nc` sending to busybox `nc -l` in the guest (tests/net_clients.rs).
packages=(qemu-system-x86 e2fsprogs gcc libc6-dev grub-pc-bin grub-common xorriso mtools
          busybox-static musl-tools curl netcat-openbsd)
if [ "${1:-}" = "bench" ]; then
    packages+=(cpio linux-image-amd64)
fi

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

missing=()
for p in "${packages[@]}"; do
    installed "$p" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo=(sudo)
        else
            echo "setup: need root to install: ${missing[*]}" >&2
            exit 1
        fi
    fi
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
fi

if ! command -v rustup >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/rustup" ]; then
    PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v rustup >/dev/null 2>&1; then
    echo "setup: rustup not found; a stable Rust toolchain managed by rustup is required" >&2
    exit 1
fi
if ! rustup target list --installed | grep -qx x86_64-unknown-none; then
    echo "setup: adding Rust target x86_64-unknown-none"
    rustup target add x86_64-unknown-none
fi
for component in rustfmt clippy; do
    if ! rustup component list --installed | grep -q "^$component"; then
        echo "setup: adding Rust component $component"
        rustup component add "$component"
    fi
done
