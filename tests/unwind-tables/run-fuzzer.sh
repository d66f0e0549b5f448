#!/bin/sh
# Runs the libFuzzer target: first once over the committed seed corpus and regression cases (they
# always run), then for SECONDS of fresh fuzzing. New corpus entries go to the build dir only.
# Usage: run-fuzzer.sh FUZZER SOURCE_DIR SECONDS
set -u
fuzzer=$1 src=$2 secs=$3
work=$(dirname "$fuzzer")/fuzz-unwind-table.work
mkdir -p "$work/corpus" "$work/artifacts"

# LeakSanitizer needs ptrace; where that is forbidden (some containers) run without leak checks.
leaks=1
"$fuzzer" -runs=0 "$src/fuzz-corpus" "$src/malformed" > "$work/seed.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "LeakSanitizer has encountered a fatal error" "$work/seed.log"; then
        echo "NOTE: LeakSanitizer cannot run here (ptrace denied): fuzzing without leak detection"
        leaks=0
        "$fuzzer" -detect_leaks=0 -runs=0 "$src/fuzz-corpus" "$src/malformed" > "$work/seed.log" 2>&1
        rc=$?
fi
if [ $rc -ne 0 ]; then
        cat "$work/seed.log"
        echo "FAIL: a committed input (fuzz-corpus/ or malformed/) fails"
        exit 1
fi
tail -n 1 "$work/seed.log"

"$fuzzer" -detect_leaks=$leaks -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
        -artifact_prefix="$work/artifacts/" "$work/corpus" "$src/fuzz-corpus" > "$work/run.log" 2>&1
rc=$?
tail -n 25 "$work/run.log"
if [ $rc -ne 0 ] || ls "$work/artifacts/"* > /dev/null 2>&1; then
        echo "FAIL: fuzzer exit $rc; crash inputs in $work/artifacts: add them to $src/malformed/ once fixed"
        ls -l "$work/artifacts/"
        exit 1
fi
exit 0
