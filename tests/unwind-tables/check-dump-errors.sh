#!/bin/sh
# profd-unwind-dump on bad input: exit 1 with exactly one line on stderr naming the file, nothing
# on stdout, never a signal. Also checks a missing file and a directory.
# Usage: check-dump-errors.sh DUMP FILE...
set -u
dump=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for f in "$@" "$tmp/does-not-exist" "$tmp"; do
        "$dump" --stats "$f" > "$tmp/out" 2> "$tmp/err"
        rc=$?
        lines=$(wc -l < "$tmp/err")
        if [ $rc -ne 1 ] || [ "$lines" -ne 1 ] || [ -s "$tmp/out" ] || ! grep -qF -- "$f" "$tmp/err"; then
                echo "FAIL $f: exit $rc, $lines stderr lines:"
                cat "$tmp/err"
                fail=1
        else
                echo "ok   $(cat "$tmp/err")"
        fi
done
exit $fail
