#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# aarch64 PLT entries named "func@plt" as binutils' aarch64 objdump names them, on Debian's own
# arm64 libraries (bookworm's libc6, libstdc++6 and libLLVM-14, trixie's libc6 with BTI/PAC),
# mapped into the test process: test-symbolizer-elf --aarch64-plt.
# Usage: test-plt-arm64.sh TEST-SYMBOLIZER-ELF FETCH-SCRIPT
# The .debs are shared with unwind-tables-arm64-debs (/var/cache/profd-tests/arm64-debs,
# PROFD_ARM64_DEBS overrides); skips (77) only when the Debian mirror is unreachable.
set -eu
test_elf=$1 fetch=$2
cache=${PROFD_ARM64_DEBS:-/var/cache/profd-tests/arm64-debs}
if ! command -v aarch64-linux-gnu-objdump >/dev/null; then
        echo "FAIL: aarch64-linux-gnu-objdump missing (apt-get install binutils-aarch64-linux-gnu)" >&2
        exit 1
fi
sh "$fetch" "$cache" bookworm libc6 libstdc++6 libllvm14 || exit $?
sh "$fetch" "$cache" trixie libc6 || exit $?
b=$cache/bookworm/root t=$cache/trixie/root
exec "$test_elf" --aarch64-plt "$b/lib/aarch64-linux-gnu/libc.so.6" "$b/usr/lib/aarch64-linux-gnu/libstdc++.so.6" \
        "$b/usr/lib/aarch64-linux-gnu/libLLVM-14.so.1" "$t/usr/lib/aarch64-linux-gnu/libc.so.6"
