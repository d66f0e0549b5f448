#!/usr/bin/env python3
"""Attribution: processes placed in real cgroups this test creates (a systemd-unit-like
system.slice/profd-demo-PID.service and a docker-like system.slice/docker-<64 hex>.scope) get
`unit` and `container_id` pprof labels; ?unit= / ?pid= / ?comm= cut a window after the fact;
format=folded has the known call chain root first; --unit and --pid filter in BPF (only that
workload appears and profd_bpf_filtered_samples_total rises)."""
import hashlib
import os
import re
import subprocess
import sys
import threading
import time

from profdtest import (Daemon, cc, check, fetch_profile, finish, log, require_bpf, skip, tmpdir, traces)

SECONDS = 2

PROGRAM = r"""
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) void NAME_leaf(void) { for (int i = 0; i < 100000; i++) sink += i * 7; }
__attribute__((noinline)) void NAME_middle(void) { NAME_leaf(); sink++; }
__attribute__((noinline)) void NAME_outer(void) { NAME_middle(); sink++; }
int main(int argc, char **argv)
{
        int secs = argc > 1 ? atoi(argv[1]) : 60;
        time_t end = time(NULL) + secs;
        while (time(NULL) < end)
                NAME_outer();
        return 0;
}
"""


def cgroup2_root():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            if post.split(" ")[0] == "cgroup2":
                return pre.split(" ")[4].replace("\\040", " ")
    return None


def make_cgroup(path, created):
    parts = []
    p = path
    while not os.path.isdir(p):
        parts.append(p)
        p = os.path.dirname(p)
    for d in reversed(parts):
        os.mkdir(d)
        created.append(d)


def spawn_in(cgroup, argv):
    def enter():
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    return subprocess.Popen(argv, preexec_fn=enter)


def labels_of(tr, key):
    return tr.labels.get(key, [])


def has(trs, fn):
    return [t for t in trs if any(fn in f for f in t.frames)]


def metric(d, name):
    st, _, body = d.get("/metrics")
    m = re.search(r"^%s(?:\{[^}]*\})? ([0-9.e+]+)$" % re.escape(name), body.decode(), re.M)
    return float(m.group(1)) if m else None


def main():
    require_bpf()
    root = cgroup2_root()
    if not root:
        skip("no cgroup v2 hierarchy mounted (neither unified nor hybrid layout)")
    log("cgroup2 root: " + root)

    tag = os.getpid()
    unit = "profd-demo-%d.service" % tag
    cid = hashlib.sha256(b"profd-test-%d" % tag).hexdigest()
    demo_cg = os.path.join(root, "system.slice", unit)
    ctr_cg = os.path.join(root, "system.slice", "docker-%s.scope" % cid)
    created = []
    procs = []
    try:
        try:
            make_cgroup(demo_cg, created)
            make_cgroup(ctr_cg, created)
        except OSError as e:
            skip("cannot create cgroups under %s: %s" % (root, e))

        d = tmpdir()
        demo = cc(PROGRAM.replace("NAME", "demo"), os.path.join(d, "attrdemo"), ["-O1", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer"])
        ctr = cc(PROGRAM.replace("NAME", "ctr"), os.path.join(d, "attrctr"), ["-O1", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer"])
        procs.append(spawn_in(demo_cg, [demo, "120"]))
        procs.append(spawn_in(ctr_cg, [ctr, "120"]))
        demo_pid, ctr_pid = procs[0].pid, procs[1].pid
        time.sleep(0.2)
        with open("/proc/%d/cgroup" % demo_pid) as f:
            log("demo cgroup: " + f.read().strip().replace("\n", " | "))

        with Daemon("--frequency", "99", "--labels", "comm,pid,unit,container_id") as dmn:
            # A unit that runs ~2 s and whose cgroup is removed before the 4 s window is rendered
            # is still named: ids are resolved at drain time and cached.
            short_unit = "profd-short-%d.service" % tag
            short_cg = os.path.join(root, "system.slice", short_unit)
            make_cgroup(short_cg, created)
            short = spawn_in(short_cg, [demo, "2"])

            def remove_short():
                short.wait()
                try:
                    os.rmdir(short_cg)
                    created.remove(short_cg)
                except OSError as e:
                    log("cannot remove %s: %s" % (short_cg, e))
            remover = threading.Thread(target=remove_short)
            remover.start()
            prof = fetch_profile(dmn, 4)
            remover.join()
            check(not os.path.exists(short_cg), "short-lived unit's cgroup was removed during the window")
            trs = traces(prof)
            short_t = [t for t in has(trs, "demo_leaf") if labels_of(t, "pid") == [str(short.pid)]]
            check(short_t and all(labels_of(t, "unit") == [short_unit] for t in short_t),
                  "removed unit still named: %s" % sorted({str(labels_of(t, 'unit')) for t in short_t}))
            # by pid: another run of this test may be sampled too (the daemon sees the host)
            demo_t = [t for t in has(trs, "demo_leaf") if labels_of(t, "pid") == [str(demo_pid)]]
            ctr_t = [t for t in has(trs, "ctr_leaf") if labels_of(t, "pid") == [str(ctr_pid)]]
            check(demo_t, "demo program sampled")
            check(ctr_t, "docker-like program sampled")
            check(demo_t and all(labels_of(t, "unit") == [unit] for t in demo_t),
                  "demo samples carry unit=%s (got %s)" % (unit, sorted({str(labels_of(t, 'unit')) for t in demo_t})))
            check(demo_t and all(not labels_of(t, "container_id") for t in demo_t), "demo samples have no container_id")
            check(ctr_t and all(labels_of(t, "container_id") == [cid] for t in ctr_t),
                  "docker-like samples carry container_id (got %s)" % sorted({str(labels_of(t, 'container_id')) for t in ctr_t}))
            check(ctr_t and all(labels_of(t, "unit") == ["docker-%s.scope" % cid] for t in ctr_t),
                  "docker-like samples carry the scope as unit")
            # demo_middle is not required: whether a frame-pointer walk from a leaf sees it
            # depends on the unwinder, not on attribution.
            chain = ["demo_leaf", "demo_outer", "main"]
            check(any([f for f in t.frames if f in chain] == chain for t in demo_t), "demo chain leaf first in pprof")

            # Per-request cuts.
            trs = traces(fetch_profile(dmn, SECONDS, "&unit=" + unit))
            check(has(trs, "demo_leaf") and not has(trs, "ctr_leaf"), "?unit= keeps only the demo unit")
            check(all(labels_of(t, "unit") == [unit] for t in trs), "?unit= every sample in the unit")
            trs = traces(fetch_profile(dmn, SECONDS, "&pid=%d" % ctr_pid))
            check(has(trs, "ctr_leaf") and not has(trs, "demo_leaf"), "?pid= keeps only that process")
            check(all(labels_of(t, "pid") == [str(ctr_pid)] for t in trs), "?pid= every sample of that pid")
            trs = traces(fetch_profile(dmn, SECONDS, "&comm=attrdemo"))
            check(has(trs, "demo_leaf") and not has(trs, "ctr_leaf"), "?comm= keeps only that name")
            st, _, body = dmn.get("/debug/pprof/profile?seconds=1&pid=abc")
            check(st == 400 and b"pid" in body, "?pid=abc is a 400 (%d %r)" % (st, body[:80]))

            # Folded stacks: one "frames count" line per stack, root first.
            st, hdr, body = dmn.get("/debug/pprof/profile?seconds=%d&format=folded" % SECONDS)
            check(st == 200 and hdr.get("content-type", "").startswith("text/plain"), "format=folded is text/plain")
            lines = body.decode("utf-8", "replace").splitlines()
            ok = all(re.match(r"^\S.* \d+$", l) for l in lines)
            check(lines and ok, "every folded line ends in a count (%d lines)" % len(lines))
            want = "attrdemo;"
            chain_line = [l for l in lines if l.startswith(want) and re.search(r";main;demo_outer;(demo_middle;)?demo_leaf \d+$", l)]
            check(chain_line, "folded has attrdemo;...;main;demo_outer;...;demo_leaf root first (%s)" % lines[:4])
            total = sum(int(l.rsplit(" ", 1)[1]) for l in lines)
            check(total > 0, "folded counts sum to %d" % total)

        # Filters in BPF.
        with Daemon("--frequency", "99", "--unit", unit, "--labels", "comm,pid,unit") as dmn:
            time.sleep(1)
            before = metric(dmn, "profd_bpf_filtered_samples_total")
            trs = traces(fetch_profile(dmn, SECONDS))
            after = metric(dmn, "profd_bpf_filtered_samples_total")
            check(has(trs, "demo_leaf"), "--unit: the unit's program is sampled")
            check(not has(trs, "ctr_leaf"), "--unit: the other program is not")
            check(all(labels_of(t, "unit") == [unit] for t in trs), "--unit: every sample is in the unit")
            check(after is not None and before is not None and after > before,
                  "--unit: profd_bpf_filtered_samples_total rises (%s -> %s)" % (before, after))
            # The unit restarts: new cgroup (new id), new process; the filter follows it.
            procs[0].kill()
            procs[0].wait()
            os.rmdir(demo_cg)
            os.mkdir(demo_cg)
            procs[0] = spawn_in(demo_cg, [demo, "120"])
            time.sleep(2.5)  # the daemon looks the unit up again every 2 s
            trs = traces(fetch_profile(dmn, SECONDS))
            check([t for t in has(trs, "demo_leaf") if labels_of(t, "pid") == [str(procs[0].pid)]],
                  "--unit follows a restarted unit (new cgroup id)")
            check(not has(trs, "ctr_leaf"), "--unit: after the restart still only the unit")
        with Daemon("--frequency", "99", "--pid", str(ctr_pid)) as dmn:
            trs = traces(fetch_profile(dmn, SECONDS))
            check(has(trs, "ctr_leaf") and not has(trs, "demo_leaf"), "--pid: only that process is sampled")
            check(all(labels_of(t, "pid") == [str(ctr_pid)] for t in trs), "--pid: every sample of that pid")
            check((metric(dmn, "profd_bpf_filtered_samples_total") or 0) > 0, "--pid: filtered samples counted")
        with Daemon("--frequency", "99", "--comm", "attrctr") as dmn:
            trs = traces(fetch_profile(dmn, SECONDS))
            check(has(trs, "ctr_leaf") and not has(trs, "demo_leaf"), "--comm: only that name is sampled")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for c in reversed(created):
            try:
                os.rmdir(c)
            except OSError as e:
                log("cannot remove %s: %s" % (c, e))
    finish()


if __name__ == "__main__":
    main()
