#!/bin/sh
# Tables from separate debug files: a binary built without .eh_frame for its own code
# (-fno-asynchronous-unwind-tables -g: .debug_frame only) is stripped, and its .debug_frame found
# (1) by build ID under DEBUG_ROOT/usr/lib/debug/.build-id, compressed, and (2) by .gnu_debuglink
# in .debug/ next to it. Both must give exactly the rows of the unstripped binary; a debuglink
# file with the wrong CRC must be ignored.
# Usage: test-debug-file.sh DUMP GCC SOURCE.c
set -u
dump=$1 gcc=$2 src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
flags="-O2 -g -fomit-frame-pointer -fno-asynchronous-unwind-tables -fno-unwind-tables"

# (1) build-id
# shellcheck disable=SC2086
"$gcc" $flags -Wl,--build-id=sha1 "$src" -o "$tmp/full" || fail "compile"
id=$(readelf -n "$tmp/full" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
[ -n "$id" ] || fail "no build id"
dir="$tmp/root/usr/lib/debug/.build-id/$(echo "$id" | cut -c1-2)"
mkdir -p "$dir"
objcopy --only-keep-debug --compress-debug-sections=zlib "$tmp/full" "$dir/$(echo "$id" | cut -c3-).debug"
objcopy --strip-debug "$tmp/full" "$tmp/stripped"
readelf -S "$tmp/stripped" | grep -q debug_frame && fail "strip left .debug_frame"
readelf -S "$dir/$(echo "$id" | cut -c3-).debug" | grep -A1 debug_frame | grep -q C || fail "debug file not compressed"
"$dump" "$tmp/full" > "$tmp/full.txt" || fail "dump full"
"$dump" --debug-root "$tmp/root" "$tmp/stripped" > "$tmp/stripped.txt" || fail "dump stripped"
"$dump" --no-debug-file "$tmp/stripped" > "$tmp/nodebug.txt" || fail "dump --no-debug-file"
diff -u "$tmp/full.txt" "$tmp/stripped.txt" || fail "build-id debug file: rows differ from the unstripped binary"
cmp -s "$tmp/full.txt" "$tmp/nodebug.txt" && fail "without the debug file the rows should be fewer"
"$dump" --stats --debug-root "$tmp/root" "$tmp/stripped" | grep -q "^debug_file: $tmp/root/usr/lib/debug/.build-id/" \
        || fail "stats do not name the debug file"
echo "ok   build-id debug file: $(wc -l < "$tmp/full.txt") rows, $(wc -l < "$tmp/nodebug.txt") without it"

# (2) .gnu_debuglink, no build ID
mkdir -p "$tmp/app/.debug"
# shellcheck disable=SC2086
"$gcc" $flags -Wl,--build-id=none "$src" -o "$tmp/full2" || fail "compile"
objcopy --only-keep-debug "$tmp/full2" "$tmp/app/.debug/app.debug"
objcopy --strip-debug --add-gnu-debuglink="$tmp/app/.debug/app.debug" "$tmp/full2" "$tmp/app/app"
"$dump" "$tmp/full2" > "$tmp/full2.txt" || fail "dump full2"
"$dump" "$tmp/app/app" > "$tmp/app.txt" || fail "dump debuglinked"
diff -u "$tmp/full2.txt" "$tmp/app.txt" || fail "debuglink: rows differ from the unstripped binary"
"$dump" --stats "$tmp/app/app" | grep -q "^id_kind: xxh64+size" || fail "no build id: expected a content hash"
echo "ok   .gnu_debuglink debug file: $(wc -l < "$tmp/app.txt") rows"
# a debug file whose CRC does not match is not used
printf 'X' >> "$tmp/app/.debug/app.debug"
"$dump" "$tmp/app/app" > "$tmp/app-badcrc.txt" || fail "dump with bad CRC"
cmp -s "$tmp/full2.txt" "$tmp/app-badcrc.txt" && fail "a debug file with the wrong CRC was used"
echo "ok   debug file with a wrong CRC ignored"
exit 0
