#!/bin/sh
# Runs the libFuzzer target: first once over the committed seed corpus and regression cases (they
# always run), then for SECONDS of fresh fuzzing. New corpus entries go to the build dir only.
# Usage: run-fuzzer.sh FUZZER SOURCE_DIR SECONDS
set -u
fuzzer=$1 src=$2 secs=$3
work=$(dirname "$fuzzer")/fuzz-unwind-table.work
mkdir -p "$work/corpus" "$work/artifacts"
"$fuzzer" -runs=0 "$src/fuzz-corpus" "$src/malformed" || { echo "FAIL: a committed input crashes"; exit 1; }
"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 -print_final_stats=1 \
        -artifact_prefix="$work/artifacts/" "$work/corpus" "$src/fuzz-corpus" 2>&1 | tail -n 25
rc=$?
if ls "$work/artifacts/"* > /dev/null 2>&1; then
        echo "FAIL: crash inputs in $work/artifacts: add them to $src/malformed/ once fixed"
        ls -l "$work/artifacts/"
        exit 1
fi
exit $rc
