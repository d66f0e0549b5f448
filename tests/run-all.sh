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
# The Debian roots of other releases the Python tests read (tests/lib/debianroot.py) are built
# here, once, before any test's timeout runs: on a fresh, loaded machine building the three took
# longer than the 300 s of the test that needed them first. A root that cannot be built is left
# to the tests, which say why.
if [ $# -eq 0 ] && [ "$(id -u)" = 0 ]; then
        echo "run-all: preparing the Debian roots the tests read (bullseye, trixie, forky):" \
                "~6 minutes on a fresh machine, cached in /var/cache/profd-tests/roots after"
        for suite in bullseye trixie forky; do
                python3 tests/lib/debianroot.py "$suite" >/dev/null ||
                        echo "run-all: the $suite root is not there; the tests that need it will say so"
        done
fi
echo "run-all: running the tests (~12 minutes; one at a time: they sample the whole machine)"

ok=0 fail=0 skip=0 skipped_lines=""
# Adds one meson test run's counts (its log in $1, its exit status in $2) to the totals.
tally() {
        local log=$1 status=$2 o f s x u t
        get() { sed -n "s/^$1: *\([0-9]\+\).*/\1/p" "$log" | tail -n 1; }
        o=$(get Ok); f=$(get Fail); s=$(get Skipped); x=$(get 'Expected Fail')
        u=$(get 'Unexpected Pass'); t=$(get Timeout)
        f=$(( ${f:-0} + ${u:-0} + ${t:-0} ))
        if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
        ok=$(( ok + ${o:-0} + ${x:-0} )); fail=$(( fail + f )); skip=$(( skip + ${s:-0} ))
        skipped_lines="$skipped_lines$(grep -E '^ *[0-9]+/[0-9]+ .* SKIP' "$log")"
}

# These run in the AddressSanitizer + UndefinedBehaviorSanitizer build instead of the plain one
# (each test runs once): the unit tests and the integration tests that feed profd hostile or
# varied input. With PROFD_SANITIZE=0, or when tests are named, they run in the plain build.
# short-lived is not among them: it measures how soon a new process's stacks are complete, and
# under ASan the loop is held 3-10 times longer (libdw's allocations for line tables and CUs go
# through ASan's allocator; its RSS keeps the memory budget closing executables, which are
# opened again), so a sanitized run measures ASan. jit-anon is not among them for the same reason:
# it measures how soon a new JIT range is known, and a sanitized profd gave 1-4% of JIT samples
# outside any mapping in most runs and 16-17% in one of three or four, with builds on the loop or
# on their thread alike (0.3% for the plain build).
sanitized="cgroup-resolver attribution-unit sampler table-pool exe-cache pprof symbolizer-proc dwarf-inflate
        symbolizer-elf proc-events proc-tracker proc-tracker-sys-exit aggregator options
        kernel-check systemd-log-ratelimit text-bounds unwind-tables-reference unwind-tables-malformed
        e2e-http http-hostile http-auth hostile-load hostile-files build-id-forgery
        e2e-profile pprof-symbols flamegraph past-windows first-scrape
        fork-children debuginfod"
# These run in both builds: util-basics checks glibc's malloc_trim() in the plain one, and its pid
# table and chained hash get ASan's eye in the other.
sanitized_too="util-basics"
sanitize=0
if [ $# -eq 0 ] && [ "${PROFD_SANITIZE:-1}" = 1 ]; then
        sanitize=1
        # Every other test, by name: meson test has no way to leave some out.
        set -- $(meson test -C "$builddir" --list 2>/dev/null | sed -n 's|^[^ ]* / ||p' |
                grep -vxF -f <(printf '%s\n' $sanitized))
        if [ $# -eq 0 ]; then
                echo "run-all: meson test --list gave no tests"
                echo "0 passed, 1 failed, 0 skipped"
                exit 1
        fi
fi

log=$(mktemp)
meson test -C "$builddir" --print-errorlogs --num-processes 1 "$@" 2>&1 | tee "$log"
tally "$log" "${PIPESTATUS[0]}"

# The same daemon and unit tests built with AddressSanitizer and UndefinedBehaviorSanitizer
# (meson's b_sanitize option): any report fails the run. Skipped when tests are named on the
# command line, or with PROFD_SANITIZE=0. Not here: the qemu kernel matrix (guests run the
# plain build), the unwinder unit tests (their sampled child programs are the instrumented
# test binary itself, whose PLT and exec behaviour ASan changes) and exec-ready (its bound on the
# samples lost right after exec measures how fast the daemon reacts: an instrumented one is slow).
if [ "$sanitize" = 1 ]; then
        sanbuild="$builddir-sanitize"
        echo "run-all: AddressSanitizer + UndefinedBehaviorSanitizer build in $sanbuild (~9 more minutes)"
        if [ ! -f "$sanbuild/build.ninja" ]; then
                meson setup "$sanbuild" -Db_sanitize=address,undefined -Db_lundef=false >/dev/null || fail=$((fail + 1))
        fi
        if meson compile -C "$sanbuild" >/dev/null; then
                sanlogs=$(mktemp -d)
                export ASAN_OPTIONS="log_path=$sanlogs/asan:abort_on_error=1:detect_leaks=1"
                export UBSAN_OPTIONS="log_path=$sanlogs/ubsan:print_stacktrace=1:halt_on_error=1"
                meson test -C "$sanbuild" --print-errorlogs --num-processes 1 $sanitized $sanitized_too \
                        2>&1 | tee "$log"
                tally "$log" "${PIPESTATUS[0]}"
                unset ASAN_OPTIONS UBSAN_OPTIONS
                if compgen -G "$sanlogs/*" >/dev/null; then
                        echo "run-all: SANITIZER REPORTS:"
                        cat "$sanlogs"/*
                        fail=$((fail + 1))
                else
                        echo "run-all: sanitizers: 0 reports"
                fi
                rm -rf "$sanlogs"
        else
                echo "run-all: the sanitizer build failed"
                fail=$((fail + 1))
        fi
fi

if [ "$skip" -gt 0 ]; then
        echo "SKIPPED TESTS:"; echo "$skipped_lines"
fi
rm -f "$log"
echo "$ok passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
