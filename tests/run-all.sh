#!/bin/bash
# Installs what profd needs (Debian 12 packages), builds, and runs every test.
# Ends with the line "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."

if [ "${PROFD_SKIP_INSTALL:-0}" != 1 ]; then
        export DEBIAN_FRONTEND=noninteractive
        pkgs=$(sed 's/#.*//' docs/debian-packages.txt docs/debian-packages-tests.txt)
        echo "run-all: installing $(echo $pkgs | wc -w) Debian packages (docs/debian-packages*.txt):" \
                "~4 minutes on a fresh machine, seconds once they are installed"
        aptlog=$(mktemp)
        # shellcheck disable=SC2086
        if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends $pkgs; } >"$aptlog" 2>&1; then
                tail -n 30 "$aptlog"
                rm -f "$aptlog"
                echo "run-all: apt-get failed"
                echo "0 passed, 1 failed, 0 skipped"
                exit 1
        fi
        rm -f "$aptlog"
else
        echo "run-all: PROFD_SKIP_INSTALL=1: not installing packages"
fi

builddir=${BUILDDIR:-build}
if [ ! -f "$builddir/build.ninja" ]; then
        meson setup "$builddir" || exit 1
fi
echo "run-all: building in $builddir"
meson compile -C "$builddir" || { echo "build failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
echo "run-all: running the tests (~8 minutes; one at a time: they sample the whole machine)"

log=$(mktemp)
meson test -C "$builddir" --print-errorlogs --num-processes 1 "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

get() { sed -n "s/^$1: *\([0-9]\+\).*/\1/p" "$log" | tail -n 1; }
ok=$(get Ok); fail=$(get Fail); skip=$(get Skipped); xfail=$(get 'Expected Fail')
upass=$(get 'Unexpected Pass'); timeout=$(get Timeout)
ok=${ok:-0}; fail=$(( ${fail:-0} + ${upass:-0} + ${timeout:-0} )); skip=${skip:-0}; ok=$(( ok + ${xfail:-0} ))
if [ "$skip" -gt 0 ]; then
        echo "SKIPPED TESTS:"; grep -E '^ *[0-9]+/[0-9]+ .* SKIP' "$log"
fi
rm -f "$log"
if [ "$status" -ne 0 ] && [ "$fail" -eq 0 ]; then fail=1; fi
echo "$ok passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
