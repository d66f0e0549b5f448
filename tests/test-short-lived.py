#!/usr/bin/env python3
"""Short-lived processes get complete stacks: a program built without frame pointers
(-O2 -fomit-frame-pointer) that computes for ~300 ms in sl_leaf <- sl_c <- sl_b <- sl_a <- main is
exec'd 12 times in a row while profd samples at 99 Hz. Every run is a new process that profd learns
of from its exec event; from the second run on its executable's unwind table is cached, so its
stacks must be complete from the first samples. Checks, from the pprof fetched over HTTP and read
with `go tool pprof -traces`: >= 90% of the samples of the cached runs (and of all runs) carry the
whole chain down to _start. Prints per-run figures and the exec-to-ready histogram from /metrics."""
import collections
import os
import re
import subprocess
import threading
import time

from profdtest import Daemon, cc, check, fetch_profile, finish, log, require_bpf, tmpdir, traces

RUNS = 12
WORK_MS = 300
FREQUENCY = 99
BELOW_MAIN = r"main;(?:[^;]+;)*?__libc_start[^;]*;(?:[^;]+;)*?_start"
CHAIN = re.compile(r"(?:^|;)sl_leaf;sl_c;sl_b;sl_a;" + BELOW_MAIN + "$")
CLOCK = re.compile(r"(?:^|;)(?:__)?clock_gettime;" + BELOW_MAIN + "$")

SRC = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
__attribute__((noinline)) unsigned long sl_leaf(unsigned long x) { for (int i = 0; i < 200000; i++) x = x * 6364136223846793005ul + 1442695040888963407ul; return x; }
__attribute__((noinline)) unsigned long sl_c(unsigned long x) { return sl_leaf(x) + 3; }
__attribute__((noinline)) unsigned long sl_b(unsigned long x) { return sl_c(x) ^ 5; }
__attribute__((noinline)) unsigned long sl_a(unsigned long x) { return sl_b(x) + 7; }
int main(int argc, char **argv) {
        double end = now() + atoi(argv[1]) / 1000.0;
        unsigned long x = 1;
        while (now() < end) x = sl_a(x);
        return x == 42;
}
"""


def libc_debug_file():
    """libc's Debian debug file (package libc6-dbg), or None."""
    out = subprocess.run(["readelf", "-n", "/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6"],
                         capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]{2})([0-9a-f]+)", out)
    path = m and "/usr/lib/debug/.build-id/%s/%s.debug" % (m.group(1), m.group(2))
    return path if path and os.path.exists(path) else None


def main():
    require_bpf()
    d = tmpdir()
    exe = cc(SRC, os.path.join(d, "short-lived"), flags=("-O2", "-fomit-frame-pointer", "-g"))
    pids = []

    def runner():
        time.sleep(0.5)
        for _ in range(RUNS):
            p = subprocess.Popen([exe, str(WORK_MS)])
            pids.append(p.pid)
            p.wait()

    with Daemon("--frequency", str(FREQUENCY), "--labels", "comm,pid") as dm:
        time.sleep(2)  # start-up scan and its table builds
        t = threading.Thread(target=runner)
        t.start()
        seconds = int(0.5 + RUNS * WORK_MS / 1000.0 + 2.5)
        path = fetch_profile(dm, seconds)
        t.join()
        _, _, metrics = dm.get("/metrics")

    per_pid = collections.defaultdict(lambda: [0, 0])  # pid -> [complete, total]
    incomplete = collections.Counter()
    for tr in traces(path):
        pid = int(tr.labels.get("pid", ["0"])[0] or 0)
        if pid not in pids:
            continue
        stack = ";".join(tr.frames)
        ok = bool(CHAIN.search(stack) or CLOCK.search(stack))
        per_pid[pid][0] += tr.value if ok else 0
        per_pid[pid][1] += tr.value
        if not ok:
            incomplete[stack] += tr.value
    for i, pid in enumerate(pids):
        c, n = per_pid[pid]
        log("  run %2d pid %d: %d/%d samples complete%s" % (i + 1, pid, c, n, "  (new executable)" if i == 0 else ""))
    for stack, n in incomplete.most_common(5):
        log("  incomplete x%d: %s" % (n, stack))
    cached = [per_pid[p] for p in pids[1:]]
    c = sum(x[0] for x in cached)
    n = sum(x[1] for x in cached)
    check(len(pids) == RUNS, "%d runs of ~%d ms" % (RUNS, WORK_MS))
    check(n >= 40, "enough samples of the cached runs (%d)" % n)
    check(n and c / n >= 0.90, ">= 90%% of the cached runs' samples complete down to _start: %d/%d = %.1f%%"
          % (c, n, 100.0 * c / max(n, 1)))
    ca = sum(x[0] for x in per_pid.values())
    na = sum(x[1] for x in per_pid.values())
    check(na and ca / na >= 0.90, ">= 90%% of all runs' samples complete (first run builds the table): "
          "%d/%d = %.1f%%" % (ca, na, 100.0 * ca / max(na, 1)))
    text = metrics.decode()
    for l in text.splitlines():
        if l.startswith(("profd_proc_tracker_exec_ready_seconds", "profd_proc_tracker_exec_never_ready",
                         "profd_symbolizer_dwarf_open", "profd_symbolizer_dwarf_inflat",
                         "profd_symbolizer_dwarf_deferred", "profd_event_loop_lag_max")):
            log("  " + l)
    # libc's debug file (libc6-dbg, a test dependency) has 8 MiB of compressed DWARF: the symbol
    # warmer, naming these samples while they come, must have had it inflated off the loop rather
    # than hold the loop ~0.1 s while process events wait.
    if libc_debug_file():
        m = re.search(r'^profd_symbolizer_dwarf_inflations_total\{result="taken"\} (\d+)', text, re.M)
        check(m and int(m.group(1)) >= 1, "libc's compressed DWARF was inflated off the event loop and opened "
              "from the copy (%s)" % (m.group(1) if m else "no metric"))
    finish()


if __name__ == "__main__":
    main()
