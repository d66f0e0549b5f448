#!/usr/bin/env python3
"""Benchmark (prints figures, never fails on them; recorded in docs/performance.md and
docs/off-cpu.md): what off-CPU recording costs context-switch-heavy and service-like loads.

Modes, interleaved in every round: no profiler; profd without --off-cpu; profd --off-cpu (default
threshold); profd --off-cpu --off-cpu-threshold 10000. Loads: `perf bench sched pipe` pinned to
CPU 0 (two tasks ping-ponging over pipes: nothing but context switches; ops/s) and bench/service-load (client and
worker threads over socketpairs, ~20 us of CPU per request, one in eight also waits 1 ms;
requests/s). The overhead is alone / profiled - 1, medians over the rounds. With
kernel.bpf_stats_enabled (set for the run, restored after) the off-CPU programs' own time per
context switch (sched_switch with its tail calls, plus sched_waking) is printed too.

    PROFD_BUILD_DIR=build PYTHONPATH=tests/lib python3 bench/offcpu-cost.py [--rounds N]
or  meson test -C build --benchmark offcpu-cost"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import time

from profdtest import BUILD, Daemon, log, require_bpf

SERVICE = os.path.join(BUILD, "bench", "bench-service-load")
STATS_SYSCTL = "/proc/sys/kernel/bpf_stats_enabled"
SETTLE_S = 3.0
MODES = [
    ("alone", None),
    ("profd", []),
    ("profd --off-cpu", ["--off-cpu"]),
    ("profd --off-cpu --off-cpu-threshold 10000", ["--off-cpu", "--off-cpu-threshold", "10000"]),
]


def pipe_ops(loops):
    # Both tasks on one CPU: every op is two context switches on that CPU, and no cross-CPU wakeup
    # (whose speed depends on how idle the other CPUs are, i.e. on the machine's other load).
    r = subprocess.run(["taskset", "-c", "0", "perf", "bench", "sched", "pipe", "-l", str(loops)],
                       capture_output=True, text=True, check=True)
    m = re.search(r"(\d+) ops/sec", r.stdout)
    if not m:
        raise RuntimeError("perf bench printed no ops/sec: %r" % r.stdout[-300:])
    return float(m.group(1))


def service_rps(seconds):
    r = subprocess.run([SERVICE, str(seconds)], capture_output=True, text=True, check=True)
    m = re.search(r"per_second ([0-9.]+)", r.stdout)
    if not m:
        raise RuntimeError("service-load printed no result: %r" % r.stdout[-300:])
    return float(m.group(1))


def switch_prog_stats():
    """(run_time_ns, run_cnt) of the off-CPU programs, or None: the time of the sched_switch program
    (with its tail calls) and of the sched_waking one, the count of the sched_switch one."""
    if not shutil.which("bpftool"):
        return None
    r = subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True, text=True)
    try:
        progs = json.loads(r.stdout)
    except ValueError:
        return None
    ns = cnt = None
    for p in progs:
        name = p.get("name", "")
        if name.startswith("profd_offcpu_sw"):
            cnt = p.get("run_cnt", 0)
        if name.startswith(("profd_offcpu_sw", "profd_offcpu_wa")):
            ns = (ns or 0) + p.get("run_time_ns", 0)
    return (ns, cnt) if cnt is not None else None


def metric(d, name):
    st, _, body = d.get("/metrics")
    m = re.search(r"^%s ([0-9.e+]+)$" % re.escape(name), body.decode(), re.M)
    return float(m.group(1)) if m else None


def stats_delta(s0, s1, u0, u1, w0, w1):
    if not (s0 and s1 and s1[1] > s0[1]):
        return None
    return {"ns_per_switch": (s1[0] - s0[0]) / (s1[1] - s0[1]), "switches": s1[1] - s0[1],
            "unwound": u1 - u0, "started": w1 - w0}


def one(args, loops, service_s):
    """(pipe ops/s, service req/s, BPF figures during the pipe run, during the service run)."""
    if args is None:
        return pipe_ops(loops), service_rps(service_s), None, None

    def snap(d):
        return (switch_prog_stats(), metric(d, "profd_offcpu_waits_unwound_total") or 0,
                metric(d, "profd_offcpu_waits_started_total") or 0)

    with Daemon(*args) as d:
        time.sleep(SETTLE_S)
        a = snap(d)
        ops = pipe_ops(loops)
        b = snap(d)
        rps = service_rps(service_s)
        c = snap(d)
    return (ops, rps, stats_delta(a[0], b[0], a[1], b[1], a[2], b[2]),
            stats_delta(b[0], c[0], b[1], c[1], b[2], c[2]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loops", type=int, default=300000, help="perf bench sched pipe -l")
    ap.add_argument("--service-seconds", type=float, default=4)
    a = ap.parse_args()
    require_bpf()
    if not shutil.which("perf"):
        log("SKIP: perf (linux-perf) is not installed: no `perf bench sched pipe`")
        return
    stats_old = None
    if os.path.exists(STATS_SYSCTL):
        with open(STATS_SYSCTL) as f:
            stats_old = f.read().strip()
        with open(STATS_SYSCTL, "w") as f:
            f.write("1")
    res = {m: {"pipe": [], "service": [], "xpipe": [], "xservice": []} for m, _ in MODES}
    try:
        for r in range(a.rounds):
            for name, args in MODES:
                ops, rps, xp, xs = one(args, a.loops, a.service_seconds)
                res[name]["pipe"].append(ops)
                res[name]["service"].append(rps)
                line = "round %d %-45s pipe %9.0f ops/s  service %8.0f req/s" % (r + 1, name, ops, rps)
                for what, x in (("pipe", xp), ("service", xs)):
                    if x:
                        res[name]["x" + what].append(x)
                        line += "  [%s: BPF %.0f ns/switch, %d of %d waits unwound]" % (
                            what, x["ns_per_switch"], x["unwound"], x["started"])
                log(line)
    finally:
        if stats_old is not None:
            with open(STATS_SYSCTL, "w") as f:
                f.write(stats_old)

    base_pipe = statistics.median(res["alone"]["pipe"])
    base_svc = statistics.median(res["alone"]["service"])
    log("")
    log("%-45s %11s %7s %11s %7s %11s %11s" % ("mode (median of %d rounds)" % a.rounds, "pipe ops/s", "cost",
                                               "service r/s", "cost", "ns/sw pipe", "ns/sw svc"))

    def ns(name, what):
        x = res[name]["x" + what]
        return "%.0f" % statistics.median([e["ns_per_switch"] for e in x]) if x else "-"

    for name, _ in MODES:
        p = statistics.median(res[name]["pipe"])
        s = statistics.median(res[name]["service"])
        log("%-45s %11.0f %6.1f%% %11.0f %6.1f%% %11s %11s" % (name, p, 100 * (base_pipe / p - 1), s,
                                                               100 * (base_svc / s - 1), ns(name, "pipe"),
                                                               ns(name, "service")))
    # One pinned pipe op is two context switches on CPU 0.
    log("context switch alone (pinned pipe): %.0f ns" % (1e9 / base_pipe / 2))


if __name__ == "__main__":
    main()
