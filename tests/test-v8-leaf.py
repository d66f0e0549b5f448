#!/usr/bin/env python3
"""No JavaScript frame named wrongly when the interrupted function is in its prologue or epilogue
(its frame not pushed yet, or popped already): there the frame pointer is still its caller's, and
the caller's slots would name the function's pc after the caller.

Debian 12's node 18 (tests/lib/debiannode.py), with inlining off so that every call pushes a
frame, runs driver -> mid -> leafA / leafB, tiny functions called some ten million times a second,
so that many samples land in their prologues and epilogues. No function here calls itself, and
leafA and leafB call no JavaScript function: among the samples, no JavaScript frame may have a
caller (the frame below it) that the program does not have: no mid;mid, driver;driver, leafA;mid
..., whatever the count. Also counted: the samples whose leaf function is named (leafA, leafB) must
be many (>= 20 in 6 s, the calls are most of the work), and BPF must report interrupted frames it
left unnamed (profd_v8_bpf_frames_total{outcome="leaf_unsure"})."""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
import profdtest as t
import debiannode

WINDOW_S = 6
JS = {"driver", "mid", "leafA", "leafB"}
# caller -> callees the program has among its JavaScript functions
CALLS = {"driver": {"mid"}, "mid": {"leafA", "leafB"}, "leafA": set(), "leafB": set()}

SCRIPT = r"""
function leafA(x) { return (x + 7) | 0; }
function leafB(x) { return (x ^ 5) | 0; }
function mid(n) {
  let s = 0;
  for (let i = 0; i < n; i++) { s = leafA(s); s = leafB(s); }
  return s;
}
function driver() {
  let t = 0;
  for (;;) t = (t + mid(1000)) | 0;
}
console.log("ready");
driver();
"""


def name_of(frame, script):
    return frame[:-len(script) - 1] if frame.endswith(" " + script) else None


def main():
    t.require_bpf()
    try:
        base = debiannode.ensure_node18(log=t.log)
    except debiannode.NodeUnavailable as e:
        t.skip("Debian 12's node 18 cannot be had here: %s" % e)
    script = os.path.join(t.tmpdir(), "calls.js")
    with open(script, "w") as f:
        f.write(SCRIPT)
    created = not os.path.isdir("/usr/share/nodejs")
    if created:
        os.makedirs("/usr/share/nodejs")
    proc = None
    try:
        with t.Daemon("--frequency", "499") as d:
            proc = subprocess.Popen(debiannode.command(base, ["--max-inlined-bytecode-size=0", script]),
                                    stdout=subprocess.PIPE, text=True)
            t.check(proc.stdout.readline().strip() == "ready", "node 18 started")
            t.unwind_ready(d, proc.pid, "libnode.so.108", "node 18")
            time.sleep(1)
            path = t.fetch_profile(d, WINDOW_S, "&pid=%d" % proc.pid)
            _, _, metrics = d.get("/metrics")
            metrics = metrics.decode()
    finally:
        if proc:
            proc.kill()
            proc.wait()
        if created:
            os.rmdir("/usr/share/nodejs")

    for line in metrics.splitlines():
        if line.startswith("profd_v8_"):
            t.log("   " + line)
    unsure = re.search(r'^profd_v8_bpf_frames_total\{outcome="leaf_unsure"\} (\d+)', metrics, re.M)
    t.check(unsure and int(unsure.group(1)) > 0,
            "/metrics: interrupted frames left unnamed (%s)" % (unsure and unsure.group(1)))

    total = leaves = 0
    wrong = {}
    for tr in t.traces(path, lines=True):
        names = [name_of(x, script) for x in tr.frames]  # leaf first
        total += tr.value
        if names and names[0] in ("leafA", "leafB"):
            leaves += tr.value
        for callee, caller in zip(names, names[1:]):
            if caller in JS and callee in JS and callee not in CALLS[caller]:
                key = "%s;%s" % (caller, callee)
                wrong[key] = wrong.get(key, 0) + tr.value
    for tr in sorted(t.traces(path, lines=True), key=lambda x: -x.value)[:6]:
        t.log("   %d: %s" % (tr.value, ";".join(reversed([name_of(x, script) or x.split(" ")[0]
                                                         for x in tr.frames[:6]]))))
    t.log("   %d samples, %d with leafA or leafB as leaf" % (total, leaves))
    t.check(total >= 100, "%d samples of node (>= 100)" % total)
    t.check(not wrong, "no JavaScript caller;callee pair the program does not have (%s)"
            % ", ".join("%s: %d" % kv for kv in sorted(wrong.items())))
    t.check(leaves >= 20, "%d samples named leafA or leafB where they run (>= 20)" % leaves)
    t.finish()


main()
