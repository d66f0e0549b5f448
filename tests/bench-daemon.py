#!/usr/bin/env python3
"""Benchmark (prints figures, never fails on them): the daemon's own CPU and memory while the host
is idle and under a 4-thread CPU load, and how long a 30 s window takes to become a pprof.

    PROFD_BUILD_DIR=build python3 tests/bench-daemon.py [--frequency HZ] [--seconds S]

CPU is the daemon's on-CPU time from /proc/PID/schedstat over the measuring period (100% = one CPU);
RSS is VmRSS at the end and VmHWM (peak). The build time is profd's own
profd_http_profile_build_seconds (window drained -> body ready) plus the request's wall time."""
import argparse
import os
import re
import shutil
import signal
import subprocess
import time

from profdtest import Daemon, cc, log, require_bpf, tmpdir

LOAD_SRC = r"""
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
volatile unsigned long sink;
/* Varying depth gives many distinct stacks, as a real service would. */
__attribute__((noinline)) unsigned long work(int depth, unsigned seed)
{
        if (depth > 0)
                return work(depth - 1, seed * 1103515245u + 12345u) + 1;
        for (int i = 0; i < 20000; i++)
                sink += i ^ seed;
        return sink;
}
static double end;
static void *thread(void *arg)
{
        unsigned seed = (unsigned)(unsigned long)arg;
        struct timespec ts;
        for (;;) {
                seed = seed * 1103515245u + 12345u;
                work((seed >> 16) % 64, seed);
                clock_gettime(CLOCK_MONOTONIC, &ts);
                if (ts.tv_sec + ts.tv_nsec / 1e9 > end)
                        return NULL;
        }
}
int main(int argc, char **argv)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        end = ts.tv_sec + ts.tv_nsec / 1e9 + atof(argv[1]);
        int n = atoi(argv[2]);
        pthread_t t[64];
        for (long i = 0; i < n && i < 64; i++)
                pthread_create(&t[i], NULL, thread, (void *)(i + 1));
        for (int i = 0; i < n && i < 64; i++)
                pthread_join(t[i], NULL);
        return 0;
}
"""

def cpu_seconds(pid):
    # schedstat: nanoseconds on CPU (stat's utime/stime tick at 10 ms, too coarse for a daemon this idle).
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0]) / 1e9


def mem_kb(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def measure(d, seconds, what):
    c0, t0 = cpu_seconds(d.proc.pid), time.time()
    time.sleep(seconds)
    c1, t1 = cpu_seconds(d.proc.pid), time.time()
    m = mem_kb(d.proc.pid)
    pct = 100 * (c1 - c0) / (t1 - t0)
    log("%-28s daemon CPU %.2f%% of one CPU, RSS %.1f MiB (peak %.1f MiB)"
        % (what, pct, m["VmRSS"] / 1024, m["VmHWM"] / 1024))
    return pct, m


def metric(d, name):
    _, _, body = d.get("/metrics")
    m = re.search(r"^%s (\S+)$" % re.escape(name), body.decode(), re.M)
    return float(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frequency", type=int, default=19)
    ap.add_argument("--seconds", type=int, default=20, help="measuring period per phase")
    ap.add_argument("--window", type=int, default=30, help="profile window for the build time")
    a = ap.parse_args()
    require_bpf()
    load = cc(LOAD_SRC, os.path.join(tmpdir(), "bench-load"), ["-O1", "-fno-omit-frame-pointer", "-pthread"])
    log("host: %d CPUs, %s" % (os.cpu_count(), os.uname().release))

    with Daemon("--frequency", str(a.frequency)) as d:
        # Startup work first: unwind tables for every executable already running are built at idle
        # priority after the daemon is live; "idle" is measured once that queue is empty.
        t0 = time.time()
        time.sleep(2)  # the initial /proc scan runs on the loop once it is up
        while time.time() - t0 < 120 and (metric(d, "profd_exe_cache_build_queue") or 0) > 0:
            time.sleep(0.5)
        log("startup table builds done %.1f s after /healthz: %d tables, %.2f s building"
            % (time.time() - t0, metric(d, "profd_exe_cache_builds_total") or 0,
               metric(d, "profd_exe_cache_build_seconds_total") or 0))
        time.sleep(2)
        measure(d, a.seconds, "idle host (%d Hz):" % a.frequency)

        prog = subprocess.Popen([load, str(a.seconds + a.window + 15), "4"])
        time.sleep(2)
        measure(d, a.seconds, "4-thread load (%d Hz):" % a.frequency)

        import threading
        marks = {}
        # Daemon CPU from just before the window ends to the response: the cost of the build itself
        # (the wall time also includes waiting for CPU on a loaded host).
        timer = threading.Timer(a.window - 0.05, lambda: marks.__setitem__("c_end", cpu_seconds(d.proc.pid)))
        t0 = time.time()
        timer.start()
        st, _, body = d.get("/debug/pprof/profile?seconds=%d" % a.window, timeout=a.window + 120)
        wall = time.time() - t0
        c_done = cpu_seconds(d.proc.pid)
        timer.join()
        prog.kill()
        prog.wait()
        build = metric(d, "profd_http_profile_build_max_seconds")
        samples = metric(d, "profd_http_profile_samples_total")
        steps = metric(d, "profd_http_profile_build_steps_total")
        log("%d s profile under load: status %d, %d bytes, %d samples; response %.3f s after the window; "
            "build %.3f s wall in %d steps, %.3f s daemon CPU"
            % (a.window, st, len(body), samples or 0, wall - a.window, build or -1, steps or 0,
               c_done - marks.get("c_end", c_done)))

        log("event loop: longest hold %.3f s, holds >= 0.1 s: %d; longest profile build step %.3f s"
            % (metric(d, "profd_event_loop_lag_max_seconds") or -1,
               metric(d, 'profd_event_loop_stalls_total{over="0.1"}') or 0,
               metric(d, "profd_http_profile_build_step_max_seconds") or -1))

        time.sleep(2)
        t0 = time.time()
        c0 = cpu_seconds(d.proc.pid)
        st, _, body = d.get("/debug/pprof/profile?seconds=%d" % a.window, timeout=a.window + 120)
        log("%d s profile, host idle again (symbol caches warm): response %.3f s after the window, "
            "daemon CPU over the request %.3f s" % (a.window, time.time() - t0 - a.window, cpu_seconds(d.proc.pid) - c0))

    # Peer in the same run: perf record on every CPU at the same frequency under the same load
    # (profd stopped), frame-pointer and DWARF call graphs. perf's CPU includes writing its data file.
    if shutil.which("perf"):
        for mode in (["-g"], ["--call-graph", "dwarf"]):
            prog = subprocess.Popen([load, str(a.seconds + 4), "4"])
            time.sleep(1)
            out = os.path.join(tmpdir(), "perf.data")
            perf = subprocess.Popen(["perf", "record", "-q", "-F", str(a.frequency), "-a", *mode, "-o", out],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
            c0, t0 = cpu_seconds(perf.pid), time.time()
            time.sleep(a.seconds)
            c1, t1 = cpu_seconds(perf.pid), time.time()
            m = mem_kb(perf.pid)
            perf.send_signal(signal.SIGINT)
            perf.wait()
            prog.kill()
            prog.wait()
            log("%-28s perf record CPU %.2f%% of one CPU, RSS %.1f MiB, %.1f MiB data"
                % ("peer perf " + " ".join(mode) + ":", 100 * (c1 - c0) / (t1 - t0), m["VmRSS"] / 1024,
                   os.path.getsize(out) / 2**20))

if __name__ == "__main__":
    main()
