#!/bin/sh
# Regenerates the committed snapshot binaries (only when a fixture source changes; Debian 12
# gcc 12.2 / binutils 2.40, aarch64 ones with gcc-aarch64-linux-gnu) and, with --text DUMP, their expected dump text.
# Usage: tests/unwind-tables/make-snapshots.sh [--binaries] [--aarch64-binaries] [--text DUMP (absolute path)]
set -eu
cd "$(dirname "$0")"
asm_flags="-nostdlib -static -no-pie -Wl,--build-id=sha1 -Wl,-Ttext=0x40ffc0 -Wl,--section-start=.farcode=0x480000"
while [ $# -gt 0 ]; do
        case "$1" in
        --binaries)
                # shellcheck disable=SC2086
                gcc $asm_flags fixtures/cfi-zoo.S -o snapshots/cfi-zoo.elf
                # shellcheck disable=SC2086
                gcc -DDEBUG_FRAME_ONLY $asm_flags fixtures/cfi-zoo.S -o snapshots/cfi-zoo-debug-frame.elf
                gcc -O2 -fomit-frame-pointer -Wl,--build-id=sha1 fixtures/workload.c -o snapshots/workload-o2.elf
                gcc -O2 -fomit-frame-pointer -shared -fPIC -Wl,--build-id=sha1 fixtures/library.c \
                        -o snapshots/library-o2.so.elf
                shift;;
        --aarch64-binaries)
                # aarch64 (gcc-aarch64-linux-gnu): the hand-written zoo linked against a
                # one-function shared object for a .plt, and GCC's pac-ret output
                a64=$(mktemp -d)
                printf '\t.globl ext_func\n\t.type ext_func, %%function\next_func:\n\tret\n' >"$a64/ext.S"
                aarch64-linux-gnu-gcc -nostdlib -shared "$a64/ext.S" -o "$a64/libext.so"
                aarch64-linux-gnu-gcc -nostdlib -no-pie -Wl,--build-id=sha1 -Wl,-z,max-page-size=4096 -Wl,-Ttext=0x40ffc0 \
                        -Wl,--section-start=.farcode=0x480000 -Wl,--dynamic-linker=/lib/ld-linux-aarch64.so.1 \
                        fixtures/cfi-zoo-aarch64.S "$a64/libext.so" -o snapshots/cfi-zoo-aarch64.elf
                rm -r "$a64"
                aarch64-linux-gnu-gcc -O2 -fomit-frame-pointer -mbranch-protection=standard -ffreestanding \
                        -nostdlib -static -Wl,--build-id=sha1 fixtures/workload-aarch64.c \
                        -o snapshots/workload-pac-aarch64.elf
                shift;;
        --text)
                for f in snapshots/*.elf; do
                        "$2" --text "$f" > "${f%.elf}.txt"
                done
                shift 2;;
        *) echo "unknown argument $1" >&2; exit 2;;
        esac
done
