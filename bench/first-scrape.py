#!/usr/bin/env python3
"""Benchmark (prints figures, never fails on them; recorded in docs/performance.md).

How long the first scrape after profd starts takes to build, on a host with 300 extra processes
that each run a little (so that every one of them is in the profile). Parca leaves about a second
between a window's end and its scrape timeout (scrape_timeout = seconds + 1 s... by default), so
what matters is the time from the window's end (X-Profd-Window-End) to the last byte of the
response, for the very first request: nothing symbolized yet, no process read before.

Each round: spawn the processes, start profd, ask for ?seconds=N at once, time it; then a second
request on the same daemon (caches warm) for comparison. The processes run two small C programs
(busy 1 ms every 500 ms: 0.6 CPU in all, without exec churn); with --distinct N, N of them run
their own copy of the binary, so that each brings its own executable to read, build unwind tables
for and symbolize.

    PROFD_BUILD_DIR=build PYTHONPATH=tests/lib python3 bench/first-scrape.py [--processes 300]
        [--seconds 10] [--rounds 3] [--frequency 19]
or  meson test -C build --benchmark first-scrape"""
import argparse
import datetime
import os
import re
import shutil
import signal
import statistics
import subprocess
import time

from profdtest import Daemon, cc, log, require_bpf, tmpdir

BUSY_SRC = r"""
#include <time.h>
#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) void first_scrape_busy(void)
{
        struct timespec a, b;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        do {
                for (int i = 0; i < 10000; i++)
                        sink += i;
                clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        } while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < BUSY_NS);
}
int main(void)
{
        for (;;) {
                first_scrape_busy();
                usleep(PERIOD_US);
        }
}
"""


def parse_rfc3339(s):
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{9})Z$", s or "")
    if not m:
        return None
    t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return t.timestamp() + int(m.group(2)) / 1e9


def spawn(n, work, busy_ms, period_ms, distinct):
    """n processes; the first `distinct` each run their own copy of the executable (a file of its
    own to read, build unwind tables for and symbolize). Returns the Popen list."""
    busy = cc(BUSY_SRC, os.path.join(work, "fs-busy"), ["-O1", "-DBUSY_NS=%dL" % (busy_ms * 1000000),
                                                        "-DPERIOD_US=%d" % (period_ms * 1000)])
    # A second program, linked differently (libm, libpthread calls), so that not every process
    # maps the same files.
    other = cc(BUSY_SRC.replace("sink += i;", "sink += (unsigned long)sqrt((double)i);")
               .replace("#include <time.h>", "#include <math.h>\n#include <time.h>"),
               os.path.join(work, "fs-busy-m"), ["-O0", "-DBUSY_NS=%dL" % (busy_ms * 1000000),
                                                  "-DPERIOD_US=%d" % (period_ms * 1000)], libs=["-lm"])
    procs = []
    for i in range(n):
        exe = busy if i % 2 == 0 else other
        if i < distinct:
            copy = os.path.join(work, "fs-%03d" % i)
            shutil.copy(exe, copy)
            exe = copy
        argv = [exe]
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return procs


def scrape(d, seconds):
    t0 = time.time()
    st, hdr, body = d.get("/debug/pprof/profile?seconds=%d" % seconds, timeout=seconds + 60)
    done = time.time()
    end = parse_rfc3339(hdr.get("x-profd-window-end"))
    if st != 200 or end is None:
        raise RuntimeError("scrape failed: %d %r" % (st, body[:200]))
    return done - end, done - t0, len(body)


def metric(d, name):
    _, _, body = d.get("/metrics")
    m = re.search(r"^%s(?:\{[^}]*\})? ([0-9.eE+-]+)$" % re.escape(name), body.decode(), re.M)
    return float(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=300)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--frequency", type=int, default=19)
    ap.add_argument("--distinct", type=int, default=0,
                    help="how many of the processes run their own copy of their executable")
    ap.add_argument("--profd", help="another build's daemon/profd to compare")
    args = ap.parse_args()
    require_bpf()

    first, second, sizes, pids_in = [], [], [], []
    for rnd in range(args.rounds):
        work = tmpdir()
        procs = spawn(args.processes, work, busy_ms=1, period_ms=500, distinct=args.distinct)
        try:
            time.sleep(1.0)
            kw = {"binary": args.profd} if args.profd else {}
            with Daemon("--frequency", str(args.frequency), "--max-seconds", str(max(args.seconds, 30)), **kw) as d:
                build, total, size = scrape(d, args.seconds)
                first.append(build)
                sizes.append(size)
                b2, _, _ = scrape(d, args.seconds)
                second.append(b2)
                log("round %d: first scrape built %.3f s after its window's end (%.1f s in all, %d KiB); "
                    "second %.3f s; profd_http_profile_build_max_seconds %s"
                    % (rnd + 1, build, total, size // 1024, b2, metric(d, "profd_http_profile_build_max_seconds")))
        finally:
            for p in procs:
                p.send_signal(signal.SIGKILL)
            for p in procs:
                p.wait()
    print("first-scrape: %d extra processes (%d with an executable of their own), %d s window, %d Hz, "
          "%d rounds" % (args.processes, args.distinct, args.seconds, args.frequency, args.rounds))
    print("  first scrape, window end -> response complete: median %.3f s, max %.3f s (all: %s)"
          % (statistics.median(first), max(first), " ".join("%.3f" % x for x in first)))
    print("  second scrape (warm):                          median %.3f s, max %.3f s"
          % (statistics.median(second), max(second)))
    print("  profile size: median %d KiB" % (statistics.median(sizes) // 1024))


if __name__ == "__main__":
    main()
