#!/usr/bin/env python3
"""Processes running when profd starts are known before their first sample.

Sampling starts only once every process found by the start-up scan has been read (mappings in the
unwind table pool, a CPython interpreter described to BPF). Two programs spin before profd starts:
a C program and python3.11. The profile of everything since before profd's start (a past window
whose start precedes the daemon's) must have:
- no sample of either ending in "[unwind stopped: process not yet known]";
- Python frames in >= 95% of the Python process's samples, from its first samples on.
Their unwind tables are built after sampling starts; samples taken before are marked
"unwind table not ready" (counted, not checked here)."""
import os
import re
import subprocess
import time

from profdtest import Daemon, cc, check, finish, log, require_bpf, skip, tmpdir, traces

SPIN_C = r'''
#include <stdio.h>
int main(void)
{
        volatile unsigned long n = 0;
        printf("ready\n");
        fflush(stdout);
        for (;;)
                n++;
}
'''

SPIN_PY = r'''import sys, time


def spin_at_start():
    n = 0
    while True:
        n += 1


print("ready", flush=True)
spin_at_start()
'''


def start(cmd):
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "ready":
        raise RuntimeError("%s did not start" % cmd)
    return p


def main():
    require_bpf()
    work = tmpdir()
    src = os.path.join(work, "spin.c")
    with open(src, "w") as f:
        f.write(SPIN_C)
    exe = os.path.join(work, "startspin")
    cc(src, exe, flags=("-O1",))
    app = os.path.join(work, "startspin.py")
    with open(app, "w") as f:
        f.write(SPIN_PY)
    procs = []
    try:
        procs.append(start([exe]))
        procs.append(start(["/usr/bin/python3.11", app]))
        t0 = time.time()
        with Daemon("--frequency", "499", "--labels", "comm,pid") as d:
            time.sleep(4)
            t1 = time.time()
            time.sleep(1.5)  # drained
            st, _, body = d.get("/debug/pprof/profile?start=%.3f&end=%.3f" % (t0, t1))
            m = re.search(r"available(?: from|:) (\S+) to", body.decode(errors="replace")) if st == 400 else None
            if m:  # the history begins when sampling began: from there
                log("history begins at %s" % m.group(1))
                st, _, body = d.get("/debug/pprof/profile?start=%s&end=%.3f" % (m.group(1), t1))
            check(st == 200, "profile from the first sample on: %d %s" % (st, body[:200] if st != 200 else ""))
            path = os.path.join(work, "cpu.pb.gz")
            with open(path, "wb") as f:
                f.write(body)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    by_pid = {}
    for tr in traces(path):
        by_pid.setdefault(tr.labels.get("pid", [""])[0], []).append(tr)
    for p, what in ((procs[0], "C program"), (procs[1], "python3.11")):
        samples = by_pid.get(str(p.pid), [])
        total = sum(t.value for t in samples)
        unknown = sum(t.value for t in samples if any("process not yet known" in f for f in t.frames))
        log("%s: %d samples, %d with the process not yet known" % (what, total, unknown))
        check(total >= 100, "%s running at start: %d samples (>= 100)" % (what, total))
        check(unknown == 0, "%s running at start: no sample before profd knew it (%d of %d)"
              % (what, unknown, total))
        if what == "python3.11":
            py = sum(t.value for t in samples if any(f.endswith("spin_at_start") for f in t.frames))
            check(total and py >= 0.95 * total, "python3.11 running at start: its Python frame named in %d of %d "
                  "samples from the first on (>= 95%%)" % (py, total))
    finish()


if __name__ == "__main__":
    main()
