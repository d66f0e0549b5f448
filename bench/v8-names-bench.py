#!/usr/bin/env python3
"""The cost of naming JavaScript frames at the drain, with names cached across drains (the default,
daemon/symbolizer/v8-name-cache.h) and without (PROFD_V8_NAME_CACHE=0): Debian 12's node 18
(tests/lib/debiannode.py) runs two workloads under profd at 199 Hz for --seconds, 2 s profiles
fetched back to back:
  chain: v8-stacks' level1 -> level2 -> level3 -> hot, main thread and a worker;
  many:  300 distinct functions, each called in turn through a dispatcher, three deep;
  inlined: v8-stacks' optimized chain (level2's on-stack-replacement code with level3 and hot
         inlined): optimized frames named through their Code, positions and inlining chains.
Prints per run: JavaScript frames named, remote reads per frame (profd_v8_remote_reads_total),
cache hits/misses/stale, drains and profd's CPU seconds over the run; the median of --runs.

    meson test -C build --benchmark v8-names -v     (or: bench/v8-names-bench.py --runs 3)"""
import argparse
import os
import re
import statistics
import subprocess
import time

import debiannode
from profdtest import Daemon, fetch_profile, log, proc_cpu_seconds, require_bpf, tmpdir

CHAIN = r"""
const { Worker, isMainThread } = require('worker_threads');
function hot(ms) {
  const end = Date.now() + ms;
  let s = 0;
  while (Date.now() < end) for (let i = 0; i < 100000; i++) s = (s + i * i) % 1000003;
  return s;
}
function level3(ms) { return hot(ms); }
function level2(ms) { return level3(ms); }
function level1(ms) { return level2(ms); }
if (isMainThread) new Worker(__filename);
level1(600000);
"""

N_MANY = 300
MANY = "function leaf(n) { let s = 0; for (let i = 0; i < n; i++) s = (s + i * i) % 1000003; return s; }\n"
MANY += "".join("function f%d(n) { return leaf(n) + %d; }\n" % (i, i) for i in range(N_MANY))
MANY += "const fns = [%s];\n" % ", ".join("f%d" % i for i in range(N_MANY))
MANY += "function dispatch(i, n) { return fns[i % fns.length](n); }\n"
MANY += "let acc = 0; for (let i = 0; ; i++) acc = (acc + dispatch(i, 20000)) | 0;\n"


INLINED = r"""
function hot(s, n) {
  for (let i = 0; i < n; i++) {
    s = (s + i * i) % 1000003;
  }
  return s;
}
function level3(s) { return hot(s, 2000); }
function level2(ms) {
  const end = Date.now() + ms;
  let s = 0;
  while (Date.now() < end) s = level3(s);
  return s;
}
function level1(ms) { return level2(ms); }
level1(600000);
"""


def metric_float(text, name):
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else 0.0


def metric(text, name):
    m = re.search(r"^%s (\d+)$" % re.escape(name), text, re.M)
    return int(m.group(1)) if m else 0


def one_run(base, script, seconds, cache):
    env = dict(os.environ)
    if not cache:
        env["PROFD_V8_NAME_CACHE"] = "0"
    with Daemon("--frequency", "199", env=env) as d:
        node = subprocess.Popen(debiannode.command(base, [script]), stdout=subprocess.DEVNULL)
        try:
            time.sleep(2)
            cpu0 = proc_cpu_seconds(d.proc.pid)
            t0 = time.monotonic()
            while time.monotonic() - t0 < seconds:
                fetch_profile(d, 2, "&pid=%d" % node.pid)
            cpu = proc_cpu_seconds(d.proc.pid) - cpu0
            _, _, body = d.get("/metrics")
        finally:
            node.kill()
            node.wait()
    text = body.decode()
    frames = sum(metric(text, 'profd_v8_frames_named_total{result="%s"}' % r)
                 for r in ("named", "not_a_function", "read_failed"))
    reads = metric(text, "profd_v8_remote_reads_total")
    return {"frames": frames, "reads": reads, "per_frame": reads / max(frames, 1),
            "unnamed": frames - metric(text, 'profd_v8_frames_named_total{result="named"}'),
            "hit": metric(text, 'profd_v8_name_cache_lookups_total{result="hit"}'),
            "miss": metric(text, 'profd_v8_name_cache_lookups_total{result="miss"}'),
            "stale": metric(text, 'profd_v8_name_cache_lookups_total{result="stale"}'),
            "drains": metric(text, "profd_drain_seconds_count"), "cpu": cpu,
            "lines": metric(text, 'profd_v8_lines_total{result="line"}'),
            "optimized": metric(text, 'profd_v8_lines_total{result="optimized_line"}'),
            "naming_s": metric_float(text, "profd_v8_naming_seconds_total")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--workloads", default="chain,many,inlined", help="comma-separated: chain, many, inlined")
    args = ap.parse_args()
    require_bpf()
    base = debiannode.ensure_node18(log=log)
    created = debiannode.make_mount_target()
    try:
        for name, src in (("chain", CHAIN), ("many", MANY), ("inlined", INLINED)):
            if name not in args.workloads.split(","):
                continue
            script = os.path.join(tmpdir(), name + ".js")
            with open(script, "w") as f:
                f.write(src)
            for cache in (False, True):
                runs = []
                for _ in range(args.runs):
                    r = one_run(base, script, args.seconds, cache)
                    log("%-5s cache %-3s: %6d frames (%d unnamed, %d with a line, %d optimized with a line), %7d "
                        "reads, %5.1f reads/frame, hits %d misses %d stale %d, %d drains, naming %.3f s, profd "
                        "CPU %.2f s"
                        % (name, "on" if cache else "off", r["frames"], r["unnamed"], r["lines"], r["optimized"],
                           r["reads"], r["per_frame"], r["hit"], r["miss"], r["stale"], r["drains"], r["naming_s"],
                           r["cpu"]))
                    runs.append(r)
                log("%-5s cache %-3s: median %.1f reads/frame, profd CPU %.2f s in %d s"
                    % (name, "on" if cache else "off", statistics.median(x["per_frame"] for x in runs),
                       statistics.median(x["cpu"] for x in runs), args.seconds))
    finally:
        debiannode.remove_mount_target(created)


main()
