#!/usr/bin/env python3
"""How soon after exec a new process is unwindable, under exec churn: a program whose executable is
already in the table pool (built without frame pointers, so the unwinder needs its table) is run
back to back, ~30 ms each, while another loop execs /bin/true as fast as it can, under profd at
499 Hz (the same load as tests/test-exec-ready.py). Prints:
- per process: samples lost to "unwind table not ready" (table_pending) or "process not yet known"
  (unknown_pid): mean, median, p90, and the share of all samples; the share that stopped at "pc
  outside any mapping" (pushed before the loader mapped the libraries);
- exec to ready (every mapping of the new image with its table in the pool) from profd's own
  histogram (profd_proc_tracker_exec_ready_seconds, bucket bounds): median and p90.

    bench/exec-ready.py [--runs 3] [--profd OTHER/daemon/profd]   (compare another build)"""
import argparse
import os
import re
import statistics
import subprocess
import threading
import time

from profdtest import PROFD, Daemon, cc, fetch_profile, log, require_bpf, tmpdir, traces

def _test_module():
    """tests/test-exec-ready.py: the bench runs the test's own program and load."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "test-exec-ready.py")
    spec = importlib.util.spec_from_file_location("test_exec_ready", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SRC = _test_module().SRC
LOST = ("unwind table not ready", "process not yet known")
OUTSIDE = "pc outside any mapping"


def exec_ready_buckets(metrics):
    out = {}
    for m in re.finditer(r'^profd_proc_tracker_exec_ready_seconds_bucket\{le="([^"]+)"\} (\d+)$', metrics, re.M):
        out[m.group(1)] = int(m.group(2))
    return out


def quantile_from_buckets(before, after, q):
    bounds = [b for b in after if b != "+Inf"]
    bounds.sort(key=float)
    bounds.append("+Inf")
    total = after["+Inf"] - before.get("+Inf", 0)
    if total <= 0:
        return None, 0
    for b in bounds:
        if after[b] - before.get(b, 0) >= q * total:
            return b, total
    return "+Inf", total


def measure(exe, binary, seconds=6, work_ms=30, parallel=1, frequency=499):
    """One run; returns (per-process [lost, outside, total] list, ready median, ready p90, n ready)."""
    pids = []
    stop = threading.Event()

    def runner():
        while not stop.is_set():
            ps = [subprocess.Popen([exe, str(work_ms)]) for _ in range(parallel)]
            pids.extend(p.pid for p in ps)
            for p in ps:
                p.wait()

    def churn():
        while not stop.is_set():
            subprocess.run(["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do /bin/true; done"])

    with Daemon("--frequency", str(frequency), "--labels", "comm,pid", binary=binary) as dm:
        time.sleep(2)
        subprocess.run([exe, "50"])  # the executable's table goes into the pool
        time.sleep(1)
        _, _, m0 = dm.get("/metrics")
        ths = [threading.Thread(target=runner), threading.Thread(target=churn)]
        for th in ths:
            th.start()
        path = fetch_profile(dm, seconds)
        stop.set()
        for th in ths:
            th.join()
        _, _, m1 = dm.get("/metrics")
    per = {p: [0, 0, 0] for p in pids}
    for tr in traces(path):
        pid = int(tr.labels.get("pid", ["0"])[0] or 0)
        if pid not in per:
            continue
        stack = ";".join(tr.frames)
        per[pid][2] += tr.value
        if any(s in stack for s in LOST):
            per[pid][0] += tr.value
        elif OUTSIDE in stack:
            per[pid][1] += tr.value
    b0, b1 = exec_ready_buckets(m0.decode()), exec_ready_buckets(m1.decode())
    med, n = quantile_from_buckets(b0, b1, 0.5)
    p90, _ = quantile_from_buckets(b0, b1, 0.9)
    return [v for v in per.values() if v[2] > 0], med, p90, n


def summarize(label, per, med, p90, n):
    lost = [v[0] for v in per]
    outside = [v[1] for v in per]
    total = sum(v[2] for v in per)
    lost.sort()
    log("%s: %d processes, %d samples; lost to table_pending/unknown_pid per process: mean %.2f, median %s, "
        "p90 %s, %.1f%% of samples; outside any mapping %.1f%%; exec->ready (histogram bounds, %d execs): "
        "median <= %s s, p90 <= %s s"
        % (label, len(per), total, statistics.mean(lost) if lost else 0, statistics.median(lost) if lost else "-",
           lost[int(0.9 * (len(lost) - 1))] if lost else "-", 100.0 * sum(lost) / max(total, 1),
           100.0 * sum(outside) / max(total, 1), n, med, p90))
    return 100.0 * sum(lost) / max(total, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profd", default=None, help="another profd build to compare")
    args = ap.parse_args()
    require_bpf()
    exe = cc(SRC, os.path.join(tmpdir(), "exec-ready"), flags=("-O2", "-fomit-frame-pointer", "-g"))
    builds = [("this build", PROFD)] + ([("other build", args.profd)] if args.profd else [])
    for label, binary in builds:
        for i in range(args.runs):
            summarize("%s run %d" % (label, i + 1), *measure(exe, binary))


if __name__ == "__main__":
    main()
