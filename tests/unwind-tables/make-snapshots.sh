#!/bin/sh
# Regenerates the committed snapshot binaries (only when a fixture source changes; Debian 12
# gcc 12.2 / binutils 2.40) and, with --text DUMP, their expected dump text.
# Usage: tests/unwind-tables/make-snapshots.sh [--binaries] [--text build/unwind-tables/profd-unwind-dump]
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
        --text)
                for f in snapshots/*.elf; do
                        "$2" --text "$f" > "${f%.elf}.txt"
                done
                shift 2;;
        *) echo "unknown argument $1" >&2; exit 2;;
        esac
done
