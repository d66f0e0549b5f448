#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# A Go binary stripped with -ldflags='-s -w' keeps only .gopclntab: its table must equal the one
# of the same program built with symbols and DWARF (which unwind-tables-reference checks against
# Go's own CFI), and must have real frames (on arm64: return addresses saved at CFA-N).
# Usage: test-go-stripped.sh DUMP FULL STRIPPED [MACHINE]
set -eu
dump=$1 full=$2 stripped=$3 machine=${4:-x86-64}
fail() { echo "FAIL: $*" >&2; exit 1; }
if readelf -S "$stripped" | grep -q '\.debug_\|\.symtab'; then
        fail "$stripped still has .symtab or DWARF"
fi
"$dump" --stats "$stripped" | grep -qx "machine: $machine" || fail "$stripped: not built as $machine"
a=$("$dump" --text "$full") || fail "$full: no table"
b=$("$dump" --text "$stripped") || fail "$stripped: no table"
[ "$a" = "$b" ] || fail "tables of $full and $stripped differ"
rows=$(printf '%s\n' "$b" | wc -l)
[ "$rows" -ge 1000 ] || fail "$stripped: only $rows rows"
if [ "$machine" = aarch64 ]; then
        saved=$(printf '%s\n' "$b" | grep -c ' ra:c-' || true)
        [ "$saved" -ge 500 ] || fail "$stripped: only $saved rows with a saved return address"
fi
echo "$stripped: $rows rows, equal to the unstripped build's"
