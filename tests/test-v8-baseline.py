#!/usr/bin/env python3
"""Lines of baseline (Sparkplug) JavaScript frames: node 18 (Debian 12, tests/lib/debiannode.py), 20
(Debian 13) and 24 (Debian 14) in their roots (tests/lib/noderoot.py), all three at once, each
running test-v8-stacks' chain script (level1 -> level2 -> level3 -> hot, and a worker thread doing
the same) with every function compiled by Sparkplug at its first call and never optimized
(--always-sparkplug, and --no-opt or --max-opt=1: flags the test needs to pin the tier, not profd).

A baseline frame's line comes from its pc: the bytecode offset table of its Code walked alongside
its bytecodes, whose lengths profd reads from the build (node 18 and 20 export V8's table of them;
node 24's is found in its .rodata: daemon/runtimes/v8-baseline.h). Per version and thread, among
the samples in hot: >= 95% show the chain in order with level1..level3 each at the line of its call
(the "// @name" markers), no line outside its function, down to _start or start_thread; and
/metrics counts baseline frames given a line and none whose offset table and bytecodes disagreed."""
import importlib.util
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
import profdtest as t
import debiannode
import noderoot

# name, Debian suite (None: node 18 of Debian 12 on this machine), its libnode, the flags that keep
# every function in Sparkplug code (node 18 has no --max-opt).
NODES = [("node 18", None, "libnode.so.108", ["--always-sparkplug", "--no-opt"]),
         ("node 20", "trixie", "libnode.so.115", ["--always-sparkplug", "--max-opt=1"]),
         ("node 24", "forky", "libnode.so.137", ["--always-sparkplug", "--max-opt=1"])]


def load(name):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    spec = importlib.util.spec_from_file_location(name.replace("-", "_")[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    t.require_bpf()
    if not shutil.which("unshare"):
        t.skip("unshare (util-linux) is not installed")
    stacks = load("test-v8-stacks.py")
    runs = []  # (name, lib, starter (flags -> process), script path as node sees it, folder to remove)
    try:
        base = debiannode.ensure_node18(log=t.log)
        folder = t.tmpdir()
        script = os.path.join(folder, "chain.js")
        with open(script, "w") as f:
            f.write(stacks.SCRIPT)
        runs.append(("node 18", "libnode.so.108",
                     lambda flags, s=script: subprocess.Popen(debiannode.command(base, flags + [s]),
                                                              stdout=subprocess.PIPE, text=True),
                     script, None))
    except debiannode.NodeUnavailable as e:
        t.log("SKIPPING node 18: Debian 12's node 18 cannot be had here: %s" % e)
    for name, suite, lib, _ in NODES[1:]:
        try:
            root = noderoot.ensure(suite, log=t.log)
        except noderoot.RootUnavailable as e:
            t.log("SKIPPING %s: %s" % (name, e))
            continue
        folder = os.path.join(root, "tmp", "profd-v8-baseline-%d" % os.getpid())
        os.makedirs(folder)
        with open(os.path.join(folder, "chain.js"), "w") as f:
            f.write(stacks.SCRIPT)
        inner = "/" + os.path.relpath(os.path.join(folder, "chain.js"), root)
        runs.append((name, lib, lambda flags, r=root, s=inner: noderoot.in_root(r, ["/usr/bin/node"] + flags + [s],
                                                                               stdout=subprocess.PIPE, text=True),
                     inner, folder))
    if not runs:
        t.skip("no Node.js could be had (Debian archive unreachable?)")
    flags = {name: f for name, _, _, f in NODES}
    created = debiannode.make_mount_target()
    procs = []
    try:
        with t.Daemon("--frequency", "199", "--labels", "comm,pid,tid") as d:
            for name, _, start, _, _ in runs:
                procs.append(start(flags[name]))
            for (name, lib, _, _, _), p in zip(runs, procs):
                t.check(p.stdout.readline().strip() == "ready", "%s started" % name)
                t.unwind_ready(d, p.pid, lib, name)
            time.sleep(1)
            path = t.fetch_profile(d, stacks.WINDOW_S, "".join("&pid=%d" % p.pid for p in procs))
            metrics = d.get("/metrics")[2].decode()
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for run in runs:
            if run[4]:
                shutil.rmtree(run[4], ignore_errors=True)
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
    for (name, _, _, script, _), p in zip(runs, procs):
        stacks.SCRIPT_PATH[:] = [script]
        main_t, worker_t = by_pid[p.pid]
        stacks.check_kind("%s (Sparkplug) main thread" % name, main_t, script, "_start")
        stacks.check_kind("%s (Sparkplug) worker thread" % name, worker_t, script, "start_thread")
    baseline = t.metric(metrics, 'profd_v8_lines_total{result="baseline_line"}')
    interpreted = t.metric(metrics, 'profd_v8_lines_total{result="line"}')
    t.check(baseline > 0 and baseline >= 10 * interpreted,
            "/metrics: the lines come from baseline frames (%d baseline, %d interpreted)" % (baseline, interpreted))
    for reason in ("baseline_mismatch", "baseline"):
        n = t.metric(metrics, 'profd_v8_lines_total{result="%s"}' % reason)
        t.check(n == 0, "/metrics: no baseline frame without a line for %s (%d)" % (reason, n))
    t.finish()


if __name__ == "__main__":
    main()
