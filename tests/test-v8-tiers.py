#!/usr/bin/env python3
"""Lines of JavaScript frames pinned to one tier, all at once in one profiling window: node 18
(Debian 12, tests/lib/debiannode.py), 20 (Debian 13) and 24 (Debian 14) in their roots
(tests/lib/noderoot.py) with every function compiled by Sparkplug at its first call and never
optimized (--always-sparkplug, and --no-opt or --max-opt=1), and node 24 with Maglev as its top tier
(--max-opt=2, --no-maglev-inlining). Flags the test needs to pin the tier; profd needs none.
Each runs test-v8-stacks' chain script (level1 -> level2 -> level3 -> hot, and a worker thread
doing the same); the Maglev run a variant where level3 calls hot over and over, so that hot runs
as Maglev's own Code.

A baseline frame's line comes from its pc: the bytecode offset table of its Code walked alongside
its bytecodes, whose lengths profd reads from the build (node 18 and 20 export V8's table of them;
node 24's is found in its .rodata: daemon/runtimes/v8-baseline.h). A Maglev frame's from its
Code's source positions, as TurboFan's. Per run and thread, among the samples in hot: >= 95% show
the chain in order with level1..level3 each at the line of its call (the "// @name" markers), no
line outside its function, down to _start or start_thread; and /metrics counts baseline frames
given a line, none whose offset table and bytecodes disagreed, and optimized frames given a line
(the Maglev run's: the others never optimize)."""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
import profdtest as t
import debiannode
import noderoot

SPARKPLUG_18 = ["--always-sparkplug", "--no-opt"]  # node 18 has no --max-opt
SPARKPLUG = ["--always-sparkplug", "--max-opt=1"]
# --no-maglev-inlining: else Maglev now and then inlines hot into level3's loop, recording no
# position inside it (hot then has no frame: 0 samples in hot, seen once in 5 runs).
MAGLEV = ["--max-opt=2", "--no-maglev-inlining"]
# The chain for Maglev: hot returns after a bounded loop and level3 calls it over and over, so that
# hot runs as a function Maglev compiled whole (its frame's pc in that Code: the source positions
# give its line). In the chain script hot never returns: Maglev only replaces its loop on the stack
# (on-stack replacement keeps the interpreter's frame and bytecode offset), and whether a frame of
# Maglev's own Code was ever sampled was a matter of timing (0 in ~1 of 4 runs).
MAGLEV_HOT = r"""function hot(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s = (s + i * i) % 1000003;
  return s;
}
function level3(ms) {
  const end = Date.now() + ms;
  let s = 0;
  while (Date.now() < end) s += hot(100000); // @level3
  return s;
}
"""


def maglev_script(chain):
    """The chain script with hot and level3 replaced by MAGLEV_HOT's."""
    start, end = chain.index("function hot("), chain.index("function level2(")
    return chain[:start] + MAGLEV_HOT + chain[end:]


# what, Debian suite (None: node 18 of Debian 12 on this machine), its libnode, node's flags, how the
# script is made from test-v8-stacks' chain script (None: as it is)
RUNS = [("node 18 (Sparkplug)", None, "libnode.so.108", SPARKPLUG_18, None),
        ("node 20 (Sparkplug)", "trixie", "libnode.so.115", SPARKPLUG, None),
        ("node 24 (Sparkplug)", "forky", "libnode.so.137", SPARKPLUG, None),
        ("node 24 (Maglev)", "forky", "libnode.so.137", MAGLEV, maglev_script)]


def main():
    t.require_bpf()
    if not shutil.which("unshare"):
        t.skip("unshare (util-linux) is not installed")
    stacks = t.load_test("test-v8-stacks.py")
    runs = []  # (what, lib, starter: () -> process, script path as node sees it, script text)
    folders = []  # made in the roots, removed at the end
    base = None
    try:
        base = debiannode.ensure_node18(log=t.log)
    except debiannode.NodeUnavailable as e:
        t.log("SKIPPING node 18: Debian 12's node 18 cannot be had here: %s" % e)
    roots = {}
    for what, suite, lib, flags, make in RUNS:
        text = make(stacks.SCRIPT) if make else stacks.SCRIPT
        if suite is None:
            if not base:
                continue
            folder = t.tmpdir()
            script = os.path.join(folder, "chain-%d.js" % len(runs))
            with open(script, "w") as f:
                f.write(text)
            runs.append((what, lib, lambda fl=flags, s=script: subprocess.Popen(
                debiannode.command(base, fl + [s]), stdout=subprocess.PIPE, text=True), script, text))
            continue
        if suite not in roots:
            try:
                roots[suite] = noderoot.ensure(suite, log=t.log)
            except noderoot.RootUnavailable as e:
                t.log("SKIPPING %s: %s" % (what, e))
                roots[suite] = None
        root = roots[suite]
        if not root:
            continue
        folder = os.path.join(root, "tmp", "profd-v8-tiers-%d-%d" % (os.getpid(), len(runs)))
        os.makedirs(folder)
        folders.append(folder)
        with open(os.path.join(folder, "chain.js"), "w") as f:
            f.write(text)
        inner = "/" + os.path.relpath(os.path.join(folder, "chain.js"), root)
        runs.append((what, lib, lambda fl=flags, r=root, s=inner: noderoot.in_root(
            r, ["/usr/bin/node"] + fl + [s], stdout=subprocess.PIPE, text=True), inner, text))
    if not runs:
        t.skip("no Node.js could be had (Debian archive unreachable?)")
    created = debiannode.make_mount_target()
    procs = []
    try:
        with t.Daemon("--frequency", "199", "--labels", "comm,pid,tid") as d:
            for _, _, start, _, _ in runs:
                procs.append(start())
            for (what, lib, _, _, _), p in zip(runs, procs):
                t.check(p.stdout.readline().strip() == "ready", "%s started" % what)
                t.unwind_ready(d, p.pid, lib, what)
            time.sleep(1)
            path = t.fetch_profile(d, stacks.WINDOW_S, "".join("&pid=%d" % p.pid for p in procs))
            metrics = d.get("/metrics")[2].decode()
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        debiannode.remove_mount_target(created)

    for line in metrics.splitlines():
        if line.startswith("profd_v8_lines_total"):
            t.log("   " + line)
    by_pid = {p.pid: ([], []) for p in procs}
    for tr in t.traces(path, lines=True):
        pid = int(tr.labels.get("pid", ["0"])[0])
        if pid in by_pid:
            main_t, worker_t = by_pid[pid]
            (main_t if tr.labels.get("tid") == [str(pid)] else worker_t).append((tr.value, tr.frames))
    for (what, _, _, script, text), p in zip(runs, procs):
        stacks.SCRIPT_PATH[:] = [script]
        main_t, worker_t = by_pid[p.pid]
        marks, bodies = stacks.markers(text), stacks.bodies(text)
        stacks.check_kind("%s main thread" % what, main_t, script, "_start", marks, None, bodies)
        stacks.check_kind("%s worker thread" % what, worker_t, script, "start_thread", marks, None, bodies)
    baseline = t.metric(metrics, 'profd_v8_lines_total{result="baseline_line"}')
    t.check(baseline > 0, "/metrics: baseline frames given a line (%d)" % baseline)
    for reason in ("baseline_mismatch", "baseline"):
        n = t.metric(metrics, 'profd_v8_lines_total{result="%s"}' % reason)
        t.check(n == 0, "/metrics: no baseline frame without a line for %s (%d)" % (reason, n))
    if any(what.endswith("(Maglev)") for what, _, _, _, _ in runs):
        optimized = t.metric(metrics, 'profd_v8_lines_total{result="optimized_line"}')
        t.check(optimized > 0, "/metrics: optimized (Maglev) frames given a line (%d)" % optimized)
    t.finish()


if __name__ == "__main__":
    main()
