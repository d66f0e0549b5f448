#!/bin/sh
# Cross-builds profd for aarch64 on an x86-64 Debian 12 machine, into build-aarch64/ (as root, from
# the source tree's folder):
#
#   tests/arm64-cross-build.sh [meson compile targets...]      (default: everything)
#
# 1. installs the host's build packages (docs/debian-packages.txt) and Debian's cross compiler
#    (gcc-aarch64-linux-gnu) unless PROFD_SKIP_INSTALL=1;
# 2. makes an arm64 root of Debian 12's -dev packages profd links (and everything they depend on):
#    downloaded with a private apt configuration and extracted with dpkg -x into CACHE/sysroot
#    (this machine's apt configuration and dpkg architectures are never touched);
# 3. cuts the BTF out of Debian 12's arm64 kernel Image (tests/arm64/kernel-btf.py) for vmlinux.h:
#    CO-RE relocates against the running kernel at load time, as with the host build;
# 4. meson setup build-aarch64 with tests/arm64/aarch64-linux-gnu.ini, then meson compile.
#
# CACHE is PROFD_ARM64_CACHE, default /var/cache/profd-tests/arm64. Repeated runs reuse it.
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${PROFD_ARM64_CACHE:-/var/cache/profd-tests/arm64}
BUILD=${PROFD_ARM64_BUILD:-$SRC/build-aarch64}
APT="$SRC/tests/arm64/apt-arm64.sh $CACHE"
# What the daemon links (daemon/meson.build's dependencies), as Debian 12 -dev packages.
DEV_PACKAGES="libc6-dev libbpf-dev libelf-dev libdw-dev zlib1g-dev libprotobuf-c-dev libmicrohttpd-dev
libgnutls28-dev libsystemd-dev libstdc++-12-dev libdebuginfod-dev"

if [ "${PROFD_SKIP_INSTALL:-0}" != 1 ]; then
        apt-get install -y --no-install-recommends $(sed 's/#.*//' "$SRC/docs/debian-packages.txt") \
                gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu python3 >/dev/null
fi
mkdir -p "$CACHE"

# -- 2. the arm64 root: the packages and their dependency closure (apt's own resolution against an
# empty dpkg status), extracted once; a stamp records which package set it holds.
SYSROOT=$CACHE/sysroot
stamp="$(echo $DEV_PACKAGES)"
if [ "$(cat "$SYSROOT/.profd-packages" 2>/dev/null)" != "$stamp" ]; then
        echo "arm64 root: apt-get update (bookworm, arm64) and download into $CACHE/debs" >&2
        $APT bookworm apt-get update >/dev/null
        pkgs=$($APT bookworm apt-get -s install --no-install-recommends $DEV_PACKAGES |
                awk '/^Inst /{ print $2 }')
        rm -rf "$CACHE/debs" "$SYSROOT"
        mkdir -p "$CACHE/debs" "$SYSROOT"
        (cd "$CACHE/debs" && $APT bookworm apt-get download $pkgs >/dev/null)
        for deb in "$CACHE"/debs/*.deb; do
                dpkg-deb -x "$deb" "$SYSROOT"
        done
        # Absolute symlinks (libfoo.so -> /lib/...) would point into this machine: relative ones.
        find "$SYSROOT" -type l -lname '/*' | while read -r l; do
                ln -sfn "$SYSROOT$(readlink "$l")" "$l"
        done
        echo "$stamp" >"$SYSROOT/.profd-packages"
fi

# -- 3. BTF of Debian 12's arm64 kernel.
BTF=$CACHE/vmlinux-arm64.btf
if [ ! -s "$BTF" ]; then
        mkdir -p "$CACHE/kernels"
        $APT bookworm apt-get update >/dev/null
        name=$($APT bookworm apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-arm64-unsigned$' |
                awk '{ print $1 }' | sort -t- -k4,4n | tail -1)
        [ -n "$name" ] || { echo "no linux-image-6.1.0-*-arm64-unsigned in bookworm" >&2; exit 1; }
        (cd "$CACHE/kernels" && $APT bookworm apt-get download "$name" >/dev/null)
        tmp=$(mktemp -d)
        dpkg-deb -x "$CACHE"/kernels/"$name"_*.deb "$tmp"
        python3 "$SRC/tests/arm64/kernel-btf.py" "$tmp"/boot/vmlinuz-* "$BTF.tmp"
        rm -rf "$tmp"
        bpftool btf dump file "$BTF.tmp" format c | grep -q 'struct user_pt_regs {' ||
                { echo "$BTF.tmp: not an arm64 kernel's BTF" >&2; exit 1; }
        mv "$BTF.tmp" "$BTF"
fi

# -- 4. configure and build.
cross=$CACHE/sysroot.ini
printf "[constants]\nsysroot = '%s'\n" "$SYSROOT" >"$cross"
if [ ! -f "$BUILD/build.ninja" ]; then
        meson setup "$BUILD" "$SRC" --cross-file "$SRC/tests/arm64/aarch64-linux-gnu.ini" --cross-file "$cross" \
                -Dvmlinux_btf="$BTF"
fi
meson compile -C "$BUILD" -j "${PROFD_JOBS:-2}" "$@"
