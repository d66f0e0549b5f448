#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# aarch64 unwind tables of Debian's own arm64 libraries, built and checked on this machine:
# bookworm's libc6, libstdc++6 and libLLVM-14 and trixie's libc6 (built with
# -mbranch-protection=standard: its CFI signs return addresses) row for row against libdw
# (test-unwind-reference), and the RA-signed flag against readelf (check-pac-state.py; trixie's
# libc must have signed rows).
# Usage: test-arm64-debs.sh TEST-REFERENCE DUMP SRCDIR
# The .debs are cached in /var/cache/profd-tests/arm64-debs (PROFD_ARM64_DEBS overrides); skips
# (77) only when the Debian mirror is unreachable.
set -eu
reference=$1 dump=$2 src=$3
cache=${PROFD_ARM64_DEBS:-/var/cache/profd-tests/arm64-debs}
fetch=$src/fetch-arm64-debs.sh
sh "$fetch" "$cache" bookworm libc6 libstdc++6 libllvm14 || exit $?
sh "$fetch" "$cache" trixie libc6 || exit $?
b=$cache/bookworm/root t=$cache/trixie/root
bookworm="$b/lib/aarch64-linux-gnu/libc.so.6 $b/usr/lib/aarch64-linux-gnu/libstdc++.so.6
 $b/usr/lib/aarch64-linux-gnu/libLLVM-14.so.1"
trixie=$t/usr/lib/aarch64-linux-gnu/libc.so.6
for f in $bookworm $trixie; do
        [ -f "$f" ] || { echo "FAIL: $f missing after unpacking" >&2; exit 1; }
done
# shellcheck disable=SC2086
"$reference" $bookworm $trixie
# shellcheck disable=SC2086
python3 "$src/check-pac-state.py" "$dump" $bookworm
python3 "$src/check-pac-state.py" "$dump" --expect-signed "$trixie"
