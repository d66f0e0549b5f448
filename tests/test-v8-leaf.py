#!/usr/bin/env python3
"""No JavaScript frame named wrongly when the interrupted function is in its prologue or epilogue
(its frame not pushed yet, or popped already): there the frame pointer is still its caller's, and
the caller's slots would name the function's pc after the caller.

Debian 12's node 18 (tests/lib/debiannode.py), and Debian 13's node 20 and 14's node 24 in their
Debian roots (tests/lib/noderoot.py), with inlining off so that every call pushes a
frame, runs driver -> mid -> leafA / leafB, tiny functions called some ten million times a second,
so that many samples land in their prologues and epilogues. No function here calls itself, and
leafA and leafB call no JavaScript function: among the samples, no JavaScript frame may have a
caller (the frame below it) that the program does not have: no mid;mid, driver;driver, leafA;mid
..., whatever the count. Also counted: the samples whose leaf function is named (leafA, leafB) must
be many (>= 20 in 6 s, the calls are most of the work), and BPF must report interrupted frames it
left unnamed (profd_v8_bpf_frames_total{outcome="leaf_unsure"}).

Then, on node 20 and 24 with no flags, BIG_SCRIPT: hot, a function with a 120-statement loop body
(TurboFan code with spill slots it never writes before its loop), called by level3 from level2's
loop, which calls Date.now() too. The top of hot's frame then holds an old return address (node 20:
into Runtime_DateCurrentTime, from a Date.now() made below level2's frame before), which BPF cannot
tell from a frame not pushed yet: the daemon names such a leaf only when its pc is in the
function's own Code. Nearly all samples of level2 must show hot (>= 90%: none did before; what the
old slot holds depends on the calls made before, so the script's shape matters), and none a
caller;callee pair or line the program does not have."""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
import profdtest as t
import debiannode
import noderoot

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


def frame_of(frame, script):
    """pprof -lines frame "name file[:line]" -> (name, line or 0), name None when not script's: a
    frame of optimized code has a line too (runtimes/v8-code.h), an interpreted one mostly."""
    if frame.endswith(" (inline)"):
        frame = frame[:-len(" (inline)")]
    if frame.endswith(" " + script):
        return frame[:-len(script) - 1], 0
    m = re.match(r"^(.*) (\S+):(\d+)$", frame)
    return (m.group(1), int(m.group(3))) if m and m.group(2) == script else (None, 0)


def name_of(frame, script):
    return frame_of(frame, script)[0]


def bodies(script):
    """name -> the lines of its function: "function name(" to its closing "}" (the same line for a
    one-line function)."""
    lines, out = script.split("\n"), {}
    for i, text in enumerate(lines):
        m = re.match(r"^function (\w+)\(", text)
        if m:
            end = i if text.endswith("}") else next(j for j in range(i, len(lines)) if lines[j] == "}")
            out[m.group(1)] = range(i + 1, end + 2)
    return out


BODIES = bodies(SCRIPT)


def profile_of(label, start, lib):
    """start(): node (stdout piped) that prints "ready"; its profile's path and profd's /metrics."""
    proc = None
    try:
        with t.Daemon("--frequency", "499") as d:
            proc = start()
            t.check(proc.stdout.readline().strip() == "ready", "%s started" % label)
            t.unwind_ready(d, proc.pid, lib, label)
            time.sleep(1)
            path = t.fetch_profile(d, WINDOW_S, "&pid=%d" % proc.pid)
            _, _, metrics = d.get("/metrics")
            return path, metrics.decode()
    finally:
        if proc:
            proc.kill()
            proc.wait()


def wrong_pairs_and_lines(tr, script, calls, bodies, wrong, wrong_lines):
    """Adds trace tr's JavaScript caller;callee pairs the program does not have to wrong, and its
    frames at a line outside their function to wrong_lines (both: key -> samples)."""
    names = [name_of(x, script) for x in tr.frames]  # leaf first
    for x in tr.frames:
        name, line = frame_of(x, script)
        if name in calls and line and line not in bodies[name]:
            key = "%s:%d" % (name, line)
            wrong_lines[key] = wrong_lines.get(key, 0) + tr.value
    for callee, caller in zip(names, names[1:]):
        if caller in calls and callee in calls and callee not in calls[caller]:
            key = "%s;%s" % (caller, callee)
            wrong[key] = wrong.get(key, 0) + tr.value
    return names


def check_run(label, start, script, lib):
    """start(): node running SCRIPT (stdout piped); script: its path as node sees it."""
    path, metrics = profile_of(label, start, lib)

    for line in metrics.splitlines():
        if line.startswith("profd_v8_bpf"):
            t.log("   " + line)
    unsure = re.search(r'^profd_v8_bpf_frames_total\{outcome="leaf_unsure"\} (\d+)', metrics, re.M)
    t.check(unsure and int(unsure.group(1)) > 0,
            "%s: /metrics: interrupted frames left unnamed (%s)" % (label, unsure and unsure.group(1)))

    total = leaves = lined = 0
    wrong, wrong_lines = {}, {}
    for tr in t.traces(path, lines=True):
        names = wrong_pairs_and_lines(tr, script, CALLS, BODIES, wrong, wrong_lines)
        total += tr.value
        if names and names[0] in ("leafA", "leafB"):
            leaves += tr.value
            lined += tr.value if frame_of(tr.frames[0], script)[1] else 0
    for tr in sorted(t.traces(path, lines=True), key=lambda x: -x.value)[:6]:
        t.log("   %d: %s" % (tr.value, ";".join(reversed([name_of(x, script) or x.split(" ")[0]
                                                         for x in tr.frames[:6]]))))
    t.log("   %s: %d samples, %d with leafA or leafB as leaf (%d of them with a line)" % (label, total, leaves,
                                                                                          lined))
    t.check(total >= 100, "%s: %d samples of node (>= 100)" % (label, total))
    t.check(not wrong, "%s: no JavaScript caller;callee pair the program does not have (%s)"
            % (label, ", ".join("%s: %d" % kv for kv in sorted(wrong.items()))))
    t.check(not wrong_lines, "%s: no JavaScript frame at a line outside its function (%s)"
            % (label, ", ".join("%s: %d" % kv for kv in sorted(wrong_lines.items()))))
    t.check(leaves >= 20, "%s: %d samples named leafA or leafB where they run (>= 20)" % (label, leaves))


BIG_SCRIPT = ("function hot(n) {\n  let s = 0;\n  for (let i = 0; i < n; i++) {\n" +
              "".join("    s = (s + i * %d) %% 1000003;\n" % k for k in range(3, 123)) +
              """  }
  return s;
}
function level3(n) {
  return hot(n) + 1;
}
function level2(ms) {
  const end = Date.now() + ms;
  let s = 0;
  while (Date.now() < end) {
    s += level3(200);
  }
  return s;
}
function level1(ms) {
  let r = 0;
  r += level2(ms);
  return r;
}
console.log("ready");
level1(60000);
""")
BIG_BODIES = bodies(BIG_SCRIPT)
# level3 runs in its own frame or inlined into level2's on-stack-replaced code: either way between
# level2 and hot (that code's frame is lined from the Code, with level3 inlined at its call of hot)
BIG_CALLS = {"level1": {"level2"}, "level2": {"level3"}, "level3": {"hot"}, "hot": set()}


def check_big(label, start, script, lib):
    """BIG_SCRIPT's hot named where it runs, though its frame's top looks like a return address."""
    path, metrics = profile_of(label + " (big)", start, lib)

    for line in metrics.splitlines():
        if line.startswith("profd_v8_bpf") or "leaf_unsure" in line:
            t.log("   " + line)
    level2 = named = 0
    wrong, wrong_lines = {}, {}
    for tr in t.traces(path, lines=True):
        names = [name_of(x, script) for x in tr.frames]  # leaf first
        if "level2" not in names:
            continue
        wrong_pairs_and_lines(tr, script, BIG_CALLS, BIG_BODIES, wrong, wrong_lines)
        level2 += tr.value
        named += tr.value if "hot" in names else 0
    for tr in sorted(t.traces(path, lines=True), key=lambda x: -x.value)[:4]:
        t.log("   %d: %s" % (tr.value, ";".join(reversed([name_of(x, script) or x.split(" ")[0]
                                                         for x in tr.frames[:5]]))))
    t.check(level2 >= 100, "%s (big): %d samples in level2 (>= 100)" % (label, level2))
    t.check(named * 10 >= level2 * 9, "%s (big): %d of %d samples in level2 show hot (>= 90%%)"
            % (label, named, level2))
    t.check(not wrong, "%s (big): no JavaScript caller;callee pair the program does not have (%s)"
            % (label, ", ".join("%s: %d" % kv for kv in sorted(wrong.items()))))
    t.check(not wrong_lines, "%s (big): no JavaScript frame at a line outside its function (%s)"
            % (label, ", ".join("%s: %d" % kv for kv in sorted(wrong_lines.items()))))


def main():
    t.require_bpf()
    ran = 0
    try:
        base = debiannode.ensure_node18(log=t.log)
    except debiannode.NodeUnavailable as e:
        base = None
        t.log("SKIPPING node 18: Debian 12's node 18 cannot be had here: %s" % e)
    if base:
        script = os.path.join(t.tmpdir(), "calls.js")
        with open(script, "w") as f:
            f.write(SCRIPT)
        created = debiannode.make_mount_target()
        try:
            check_run("node 18", lambda: subprocess.Popen(
                debiannode.command(base, ["--max-inlined-bytecode-size=0", script]), stdout=subprocess.PIPE,
                text=True), script, "libnode.so.108")
        finally:
            debiannode.remove_mount_target(created)
        ran += 1
    # Debian 13's node 20 and 14's node 24 (Maglev code) in their roots (tests/lib/noderoot.py).
    for label, suite, soname in (("node 20", "trixie", "libnode.so.115"), ("node 24", "forky", "libnode.so.137")):
        try:
            root = noderoot.ensure(suite, log=t.log)
        except noderoot.RootUnavailable as e:
            t.log("SKIPPING %s: %s" % (label, e))
            continue
        work = os.path.join(root, "tmp", "profd-v8-leaf-%d" % os.getpid())
        os.makedirs(work)
        inner = "/" + os.path.relpath(os.path.join(work, "calls.js"), root)
        big = "/" + os.path.relpath(os.path.join(work, "big.js"), root)
        with open(os.path.join(work, "calls.js"), "w") as f:
            f.write(SCRIPT)
        with open(os.path.join(work, "big.js"), "w") as f:
            f.write(BIG_SCRIPT)
        try:
            check_run(label, lambda: noderoot.in_root(
                root, ["/usr/bin/node", "--max-inlined-bytecode-size=0", inner], stdout=subprocess.PIPE,
                text=True), inner, soname)
            check_big(label, lambda: noderoot.in_root(
                root, ["/usr/bin/node", big], stdout=subprocess.PIPE, text=True), big, soname)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        ran += 1
    if ran == 0:
        t.skip("no Node.js build could be had here")
    t.finish()


main()
