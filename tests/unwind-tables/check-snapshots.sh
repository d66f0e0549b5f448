#!/bin/sh
# Compares profd-unwind-dump --text of each committed fixture with its committed text.
# Usage: check-snapshots.sh DUMP SNAPSHOT_DIR NAME...   (NAME.elf -> NAME.txt)
# To accept a deliberate change: tests/unwind-tables/make-snapshots.sh --text DUMP, review the diff.
set -u
dump=$1 dir=$2
shift 2
fail=0
for name in "$@"; do
        if ! out=$("$dump" --text "$dir/$name.elf"); then
                echo "FAIL $name: profd-unwind-dump failed"
                fail=1
                continue
        fi
        if printf '%s\n' "$out" | diff -u "$dir/$name.txt" - > /tmp/unwind-snapshot-diff.$$; then
                echo "ok   $name ($(printf '%s\n' "$out" | wc -l) rows)"
        else
                echo "FAIL $name: dump differs from $dir/$name.txt:"
                cat /tmp/unwind-snapshot-diff.$$
                fail=1
        fi
        rm -f /tmp/unwind-snapshot-diff.$$
done
exit $fail
