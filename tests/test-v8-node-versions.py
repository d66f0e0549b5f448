#!/usr/bin/env python3
"""JavaScript frames with no flags on Debian's newer Node.js builds: nodejs 20 (V8 11.3) of Debian 13
"trixie" and nodejs 24 (V8 13.6) of Debian 14 "forky", each in a Debian root of its own
(tests/lib/noderoot.py: a copy of the release's root with nodejs installed by its own apt, made
once and cached), run in a mount namespace with that root as its / (as in a container).

For each: the check of v8-stacks (tests/test-v8-stacks.py): the main thread and a worker thread
run level1 -> level2 -> level3 -> hot; among the samples in hot, >= 95% show the chain in order
with the script as file, and >= 95% reach the thread's native bottom (_start, start_thread);
/metrics counts the process's V8 as found. In the same window, a second node runs v8-stacks'
calls.js: JavaScript -> C -> JavaScript through a Node-API addon (built once here with Debian 12's
headers: Node-API is a stable ABI) and through JSON.parse's reviver, checked as there
(check_calls); a third v8-stacks' inlined.js (check_inlined), a fourth its internal.js
(check_internal), a fifth its osr.js, started before profd (found by its first scan): level2's loop
on-stack-replaced with level3 inlined, calling hot in a frame of its own (check_osr). A root that cannot be made (archive unreachable) is skipped loudly; the test fails
when none ran."""
import os
import re
import shutil
import subprocess
import time

import debiannode
import noderoot
import profdtest as t

# (name, suite, libnode soname)
NODES = [
    ("node 20", "trixie", "libnode.so.115"),
    ("node 24", "forky", "libnode.so.137"),
]


def run_one(stacks, name, root, lib, addon):
    work = os.path.join(root, "tmp", "profd-v8-%d" % os.getpid())
    os.makedirs(work)
    inner = "/" + os.path.relpath(os.path.join(work, "chain.js"), root)
    calls = "/" + os.path.relpath(os.path.join(work, "calls.js"), root)
    inlined = "/" + os.path.relpath(os.path.join(work, "inlined.js"), root)
    internal = "/" + os.path.relpath(os.path.join(work, "internal.js"), root)
    osr = "/" + os.path.relpath(os.path.join(work, "osr.js"), root)
    with open(os.path.join(work, "chain.js"), "w") as f:
        f.write(stacks.SCRIPT)
    with open(os.path.join(work, "calls.js"), "w") as f:
        f.write(stacks.CALLS_SCRIPT)
    with open(os.path.join(work, "inlined.js"), "w") as f:
        f.write(stacks.INLINED_SCRIPT)
    with open(os.path.join(work, "internal.js"), "w") as f:
        f.write(stacks.INTERNAL_SCRIPT)
    with open(os.path.join(work, "osr.js"), "w") as f:
        f.write(stacks.OSR_SCRIPT)
    shutil.copy(addon, os.path.join(work, "addon.node"))
    stacks.SCRIPT_PATH[:] = [inner, calls, inlined, internal, osr]
    proc = before = None
    procs = []
    try:
        # osr.js runs from before profd starts (found by its first scan), the others start after.
        before = noderoot.in_root(root, ["/usr/bin/node", osr], stdout=subprocess.PIPE, text=True)
        t.check(before.stdout.readline().strip() == "ready", "%s (osr.js) started before profd" % name)
        with t.Daemon("--frequency", "199", "--labels", "comm,pid,tid") as d:
            proc = noderoot.in_root(root, ["/usr/bin/node", inner], stdout=subprocess.PIPE, text=True)
            procs.append(proc)
            procs.append(noderoot.in_root(root, ["/usr/bin/node", calls, os.path.dirname(calls) + "/addon.node"],
                                          stdout=subprocess.PIPE, text=True))
            procs.append(noderoot.in_root(root, ["/usr/bin/node", inlined], stdout=subprocess.PIPE, text=True))
            procs.append(noderoot.in_root(root, ["/usr/bin/node", internal], stdout=subprocess.PIPE, text=True))
            procs.append(before)
            for p, what in zip(procs, (name, name + " (calls.js)", name + " (inlined.js)", name + " (internal.js)",
                                       name + " (osr.js, started before profd)")):
                if p is not before and not t.check(p.stdout.readline().strip() == "ready", "%s started" % what):
                    return
                t.unwind_ready(d, p.pid, lib, what)
            time.sleep(1)
            path = t.fetch_profile(d, stacks.WINDOW_S, "".join("&pid=%d" % p.pid for p in procs))
            _, _, metrics = d.get("/metrics")
            metrics = metrics.decode()
    finally:
        for p in procs + ([before] if before and before not in procs else []):
            p.kill()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)

    for line in metrics.splitlines():
        if line.startswith(("profd_v8_", "profd_remote_reads_total", "profd_drain_seconds_count")):
            t.log("   " + line)
    found = re.search(r'^profd_v8_detections_total\{outcome="found"\} (\d+)', metrics, re.M)
    t.check(found and int(found.group(1)) >= 1, "%s: /metrics: V8 found (%s)" % (name, found and found.group(1)))
    stacks.check_name_cache(name, metrics)
    by_pid = {p.pid: ([], []) for p in procs}
    for tr in t.traces(path, lines=True):
        pid = int(tr.labels.get("pid", ["0"])[0])
        if pid in by_pid:
            # The main thread's id is the process's.
            main_t, worker_t = by_pid[pid]
            (main_t if tr.labels.get("tid") == [str(pid)] else worker_t).append((tr.value, tr.frames))
    main_t, worker_t = by_pid[proc.pid]
    stacks.check_kind("%s main thread" % name, main_t, inner, "_start")
    stacks.check_kind("%s worker thread" % name, worker_t, inner, "start_thread")
    main_t, worker_t = by_pid[procs[1].pid]
    stacks.check_calls("%s calls.js main thread (addon)" % name, main_t, calls, stacks.ADDON_CHAIN, "_start")
    # Debian 14's libnode.so.137 exports few of V8's internal functions (147 of its 15389 dynamic
    # symbols, Builtin_JsonParse not among them): there the C++ builtin is
    # the library's unnamed frame, still required between the reviver and its caller.
    chain = stacks.PARSE_CHAIN if lib != "libnode.so.137" else \
        [n if n != "v8::internal::Builtin_JsonParse" else "[libnode.so.137]" for n in stacks.PARSE_CHAIN]
    stacks.check_calls("%s calls.js worker (JSON.parse)" % name, worker_t, calls, chain, "start_thread")
    stacks.check_inlined(name, by_pid[procs[2].pid][0], inlined, metrics)
    sources = stacks.internal_sources(lambda args, **kw: noderoot.in_root(root, ["/usr/bin/node"] + args, **kw))
    stacks.check_internal(name, by_pid[procs[3].pid][0], sources)
    stacks.check_osr(name, by_pid[procs[4].pid][0], osr, metrics)


def main():
    t.require_bpf()
    if not shutil.which("unshare"):
        t.skip("unshare (util-linux) is not installed")
    stacks = t.load_test("test-v8-stacks.py")
    try:
        include = debiannode.ensure_node18_headers(debiannode.ensure_node18(log=t.log), log=t.log)
    except debiannode.NodeUnavailable as e:
        t.skip("Debian 12's Node-API headers cannot be had here: %s" % e)
    addon = stacks.build_addon(include, os.path.join(t.tmpdir(), "addon.node"))
    ran = 0
    for name, suite, lib in NODES:
        t0 = time.monotonic()
        try:
            root = noderoot.ensure(suite, log=t.log)
        except noderoot.RootUnavailable as e:
            t.log("SKIPPING %s: %s" % (name, e))
            continue
        t.log("%s: root %s ready in %.1f s" % (name, root, time.monotonic() - t0))
        run_one(stacks, name, root, lib, addon)
        ran += 1
    if ran == 0:
        t.skip("no Node.js root could be made (Debian archive unreachable?)")
    t.finish()


main()
