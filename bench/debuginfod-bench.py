#!/usr/bin/env python3
"""Benchmark (prints figures, never fails on them; recorded in docs/performance.md).

What fetching debug files from debuginfod costs profd and how soon frames get names: N stripped
programs (each its own build ID, hot functions with DWARF in a debug file only Debian's debuginfod,
started here on a free port, serves) run under profd with --debuginfod-urls and a fresh cache.
Reported: per 2 s profile, the share of those programs' samples whose leaf is named; the time from
start until every program is named; fetches, bytes and fetch time from /metrics; the event loop's
longest hold; profd's RSS, threads and CPU, also for the same run with debuginfod off.

    PROFD_BUILD_DIR=build PYTHONPATH=tests/lib python3 bench/debuginfod-bench.py [--programs N]
or  meson test -C build --benchmark debuginfod"""
import argparse
import os
import re
import shutil
import subprocess
import time

from profdtest import (Daemon, cc, fetch_profile, free_port, http_get, log, proc_cpu_seconds, proc_status_kb,
                       require_bpf, skip, tmpdir, traces)

C_TEMPLATE = r"""
#include <stdlib.h>
#include <time.h>
volatile unsigned long sink;
static inline __attribute__((always_inline)) unsigned long step_%(n)d(unsigned long x)
{
        for (int k = 0; k < 64; k++)
                x = x * 2654435761u + (x >> 7);
        return x;
}
__attribute__((noinline)) void bench_leaf_%(n)d(int n)
{
        for (int i = 0; i < n; i++)
                sink += step_%(n)d((unsigned long)i);
}
int main(int argc, char **argv)
{
        struct timespec ts, req = {0, 20 * 1000 * 1000};
        double end;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        end = ts.tv_sec + ts.tv_nsec / 1e9 + atof(argv[1]);
        do {
                bench_leaf_%(n)d(20000); /* ~1 ms */
                nanosleep(&req, NULL); /* ~5%% of a CPU each: N programs share 2 CPUs with the rest */
                clock_gettime(CLOCK_MONOTONIC, &ts);
        } while (ts.tv_sec + ts.tv_nsec / 1e9 < end);
        return 0;
}
"""


def metric(text, name, labels=""):
    m = re.search(r"^%s%s (\S+)" % (re.escape(name), re.escape("{%s}" % labels if labels else "")), text, re.M)
    return float(m.group(1)) if m else 0.0


def run(args, work, progs, url):
    extra = ["--debuginfod-urls", url, "--debuginfod-cache", os.path.join(work, "cache-%d" % time.time_ns())] \
        if url else ["--debuginfod-urls", ""]
    rows = []
    with Daemon("--frequency", "99", *extra) as d:
        rss0 = proc_status_kb(d.proc.pid, "VmRSS")
        cpu0 = proc_cpu_seconds(d.proc.pid)
        t0 = time.monotonic()
        ps = [subprocess.Popen([p, str(args.seconds)]) for p in progs]
        all_named = None
        try:
            while time.monotonic() - t0 < args.seconds - 3:
                path = fetch_profile(d, 2, "&labels=pid")
                pids = {str(p.pid): i for i, p in enumerate(ps)}
                named = total = 0
                for t in traces(path):
                    if t.labels.get("pid", [None])[0] in pids:
                        # A frame profd left unnamed reads as its mapping (-symbolize=none): only the
                        # stripped programs have such frames here (libc has .dynsym names).
                        total += t.value
                        named += t.value if not any(re.match(r"^\[bench-prog-\d+\]$", f) for f in t.frames) else 0
                        if os.environ.get("BENCH_DEBUG"):
                            log(t.frames)
                share = named / total if total else 0
                rows.append((time.monotonic() - t0, share))
                if all_named is None and share > 0.95:
                    all_named = time.monotonic() - t0
            st, _, body = d.get("/metrics", timeout=10)
            text = body.decode()
            rss1 = proc_status_kb(d.proc.pid, "VmRSS")
            cpu1 = proc_cpu_seconds(d.proc.pid)
            threads = len(os.listdir("/proc/%d/task" % d.proc.pid))
            wall = time.monotonic() - t0
        finally:
            for p in ps:
                p.kill()
                p.wait()
    return rows, all_named, text, rss0, rss1, cpu1 - cpu0, wall, threads


def main():
    require_bpf()
    if not shutil.which("debuginfod"):
        skip("debuginfod is not installed")
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=10)
    ap.add_argument("--seconds", type=int, default=40)
    args = ap.parse_args()
    work = tmpdir()
    served = os.path.join(work, "served")
    os.makedirs(served)
    progs = []
    for n in range(args.programs):
        prog = cc(C_TEMPLATE % {"n": n}, os.path.join(work, "bench-prog-%d" % n), ["-O2", "-g"])
        subprocess.run(["objcopy", "--only-keep-debug", prog, os.path.join(served, "bench-prog-%d.debug" % n)],
                       check=True)
        subprocess.run(["strip", "--strip-all", prog], check=True)
        progs.append(prog)
    port = free_port()
    logf = open(os.path.join(work, "debuginfod.log"), "w")
    srv = subprocess.Popen(["debuginfod", "-d", os.path.join(work, "db.sqlite"), "-p", str(port), "-F", "-t", "1",
                            "-g", "0", served], stdout=logf, stderr=subprocess.STDOUT)
    url = "http://127.0.0.1:%d" % port
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            try:
                if http_get(url + "/metrics", timeout=5)[0] == 200 and \
                        b"scanned_files_total" in http_get(url + "/metrics", timeout=5)[2]:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        time.sleep(3)  # let the scan finish
        for what, u in (("debuginfod off", None), ("debuginfod on", url)):
            rows, all_named, text, rss0, rss1, cpu, wall, threads = run(args, work, progs, u)
            log("== %s, %d stripped programs" % (what, len(progs)))
            for t, share in rows:
                log("  profile ending at %5.1f s: %3.0f%% of their samples named" % (t, share * 100))
            log("  all named (>95%%) from the profile ending at: %s" % ("%.1f s" % all_named if all_named else "never"))
            ok = metric(text, "profd_debuginfod_fetches_total", 'result="ok"')
            others = sum(metric(text, "profd_debuginfod_fetches_total", 'result="%s"' % r)
                         for r in ("not_found", "timeout", "error", "wrong_build_id", "not_elf"))
            log("  fetches ok %d (others: %d), %.0f KB, fetch time %.3f s summed" % (
                ok, others, metric(text, "profd_debuginfod_fetched_bytes_total") / 1024,
                metric(text, "profd_debuginfod_fetch_seconds_total")))
            log("  event loop held at most %.3f s" % metric(text, "profd_event_loop_lag_max_seconds"))
            log("  executables opened %d, failed %d; lookups without a readable file %d" % (
                metric(text, "profd_symbolizer_executables_total", 'event="opened"'),
                metric(text, "profd_symbolizer_executables_total", 'event="failed"'),
                metric(text, "profd_symbolizer_lookups_total", 'space="user",result="no_file"')))
            log("  profd RSS %d -> %d KB, %d threads, CPU %.2f s in %.0f s" % (rss0, rss1, threads, cpu, wall))
    finally:
        srv.terminate()
        srv.wait()


if __name__ == "__main__":
    main()
