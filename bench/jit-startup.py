#!/usr/bin/env python3
"""How much of a JIT runtime's start-up profd can unwind: node runs 3 s of JavaScript that keeps
compiling new functions (new Function in a loop: V8 maps and flips code pages all along), under
profd at 99 Hz, with anonymous executable memory tracked (the default) and without it
(PROFD_MMAP_HOOK=0: found on the next refresh or the unwinder's unknown-pc report, at most once a
second per process). Prints, per run and as medians, the share of node's samples that stopped at
"pc outside any mapping" (or at a process not yet known) in the pprof fetched over HTTP.

    meson test -C build --benchmark jit-startup -v     (or: bench/jit-startup.py --runs 5)"""
import argparse
import os
import shutil
import statistics
import subprocess
import threading
import time

from profdtest import Daemon, fetch_profile, log, require_bpf, traces

SCRIPT = r"""
const end = Date.now() + 3000;
let acc = 0, i = 0;
while (Date.now() < end) {
    const f = new Function('x', 'let s = ' + i + '; for (let k = 0; k < 3000; k++) s = (s * 31 + x + k) | 0; return s;');
    for (let j = 0; j < 40; j++) acc = (acc + f(j)) | 0;
    i++;
}
console.log(i, acc);
"""


def one_run(node, env):
    with Daemon("--frequency", "99", "--labels", "comm,pid", env=env) as dm:
        time.sleep(2)  # start-up scan and its table builds
        box = {}

        def start():
            time.sleep(0.5)
            box["p"] = subprocess.Popen([node, "-e", SCRIPT], stdout=subprocess.DEVNULL)
            box["p"].wait()

        th = threading.Thread(target=start)
        th.start()
        path = fetch_profile(dm, 5)
        th.join()
    pid = box["p"].pid
    total = outside = 0
    for tr in traces(path):
        if int(tr.labels.get("pid", ["0"])[0] or 0) != pid:
            continue
        stack = ";".join(tr.frames)
        total += tr.value
        if "outside any mapping" in stack or "not yet known" in stack:
            outside += tr.value
    return total, outside


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    require_bpf()
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        log("SKIP: node is not installed (Debian package nodejs)")
        return
    res = {}
    for label, hook in (("tracked", "1"), ("PROFD_MMAP_HOOK=0", "0")):
        shares = []
        for _ in range(args.runs):
            total, outside = one_run(node, dict(os.environ, PROFD_MMAP_HOOK=hook))
            if total < 50:
                log("%-18s node samples %4d: too few to count (machine busy?), run left out" % (label, total))
                continue
            share = 100.0 * outside / max(total, 1)
            shares.append(share)
            log("%-18s node samples %4d, outside any mapping %4d (%.1f%%)" % (label, total, outside, share))
        res[label] = statistics.median(shares) if shares else float("nan")
    log("node first 3 s, median share of samples outside any mapping: tracked %.1f%%, "
        "PROFD_MMAP_HOOK=0 %.1f%%" % (res["tracked"], res["PROFD_MMAP_HOOK=0"]))


if __name__ == "__main__":
    main()
