#!/usr/bin/env python3
"""JavaScript frames of Node.js, read in BPF and named at the drain, merged with native frames, on
Debian 12's node 18 (its libnode.so.108 holds V8 and its metadata; tests/lib/debiannode.py), run
with no flag at all.

The script's main thread calls level1 -> level2 -> level3 -> hot once; hot loops until the end
(interpreted callers in Ignition frames, hot itself optimized by on-stack replacement). A worker
thread runs the same script. Per thread kind, among the samples whose stack holds hot:
- >= 95% show level1;level2;level3;hot in that order, adjacent, each with the script as its file,
  and the interpreted callers each at the line of its call (a "// @NAME" marker in the script:
  the line comes from the frame's bytecode offset through V8's source position table);
- >= 95% reach the native bottom of their thread (_start via node::Start for the main thread,
  start_thread for the worker), native frames outermost;
and /metrics counts the process as found, with frames named."""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
import profdtest as t
import debiannode

WINDOW_S = 6
CHAIN = ["level1", "level2", "level3", "hot"]

SCRIPT = r"""
const { Worker, isMainThread } = require('worker_threads');
function hot(ms) {
  const end = Date.now() + ms;
  let s = 0;
  while (Date.now() < end) for (let i = 0; i < 100000; i++) s = (s + i * i) % 1000003;
  return s;
}
function level3(ms) {
  return hot(ms); // @level3
}
function level2(ms) {
  const r = level3(ms); // @level2
  return r;
}
function level1(ms) {
  let r = 0;
  r += level2(ms); // @level1
  return r;
}
if (isMainThread) {
  new Worker(__filename);
  console.log("ready");
}
level1(60000);
"""


SCRIPT_PATH = []  # the script's path, once written
# The line each interpreted caller must show: its "// @name" marker's.
MARKERS = {name: i + 1 for i, text in enumerate(SCRIPT.split("\n"))
           for name in re.findall(r"// @(\w+)", text)}
LINED = ["level1", "level2", "level3"]


def bodies(script):
    """name -> the lines of its function's body ("function name(" to the next "}" line)."""
    lines, out = script.split("\n"), {}
    for i, text in enumerate(lines):
        m = re.match(r"^function (\w+)\(", text)
        if m:
            end = next(j for j in range(i, len(lines)) if lines[j] == "}")
            out[m.group(1)] = range(i + 1, end + 2)
    return out


BODIES = bodies(SCRIPT)


def frame_of(frame):
    """pprof -lines frame "name file[:line]" -> (name, file, line or 0): JavaScript frames have the
    script as file, with a line where V8's source positions give one; native ones a source line when
    their debug info says."""
    for path in SCRIPT_PATH:
        if frame.endswith(" " + path):
            return frame[:-len(path) - 1], path, 0
    m = re.match(r"^(.*) (\S+):(\d+)$", frame)
    return (m.group(1), m.group(2), int(m.group(3))) if m else (frame, "", 0)


def name_of(frame):
    """(name, file) of a pprof -lines frame."""
    return frame_of(frame)[:2]


def check_kind(what, traces, script, bottom):
    with_hot = [(c, f) for c, f in traces if any(name_of(x)[0] == "hot" for x in f)]
    total = sum(c for c, _ in with_hot)
    if not t.check(total >= 60, "%s: %d samples in hot (>= 60)" % (what, total)):
        for c, frames in sorted(traces, key=lambda x: -x[0])[:2]:
            t.log("   %d: %s" % (c, " | ".join(frames)))
        return
    chain_ok = bottom_ok = lines_ok = 0
    bad, bad_lines, outside, hot_lines = [], [], 0, {}
    for c, frames in with_hot:
        names = [frame_of(x) for x in frames]  # leaf first
        root_first = list(reversed(names))
        ok = lined = False
        for i in range(len(root_first) - len(CHAIN) + 1):
            if [n for n, _, _ in root_first[i:i + len(CHAIN)]] == CHAIN and \
                    all(f == script for _, f, _ in root_first[i:i + len(CHAIN)]):
                ok = True
                lined = all(line == MARKERS[n] for n, _, line in root_first[i:i + len(CHAIN)] if n in LINED)
                break
        chain_ok += c if ok else 0
        lines_ok += c if lined else 0
        # Any line shown must lie in its function's body: never another place's line.
        if any(line and n in BODIES and line not in BODIES[n] for n, f, line in names if f == script):
            outside += c
        for n, f, line in names:
            if n == "hot" and f == script:
                hot_lines[line] = hot_lines.get(line, 0) + c
        if not ok:
            bad.append((c, [n for n, _, _ in root_first]))
        elif not lined:
            bad_lines.append((c, ["%s:%d" % (n, line) for n, _, line in root_first if n in CHAIN]))
        bottom_ok += c if any(n == bottom for n, _, _ in root_first[:4]) else 0
    t.check(chain_ok >= 0.95 * total, "%s: %d of %d samples in hot show %s in order, file %s"
            % (what, chain_ok, total, ";".join(CHAIN), script))
    for c, stack in sorted(bad, reverse=True)[:3]:
        t.log("   without the chain (%d): %s" % (c, ";".join(stack)))
    t.check(lines_ok >= 0.95 * total, "%s: %d of %d samples in hot show %s at lines %s" % (
        what, lines_ok, total, ";".join(LINED), ";".join(str(MARKERS[n]) for n in LINED)))
    t.log("   %s: hot's lines (0: none) %s" % (what, sorted(hot_lines.items())))
    t.check(outside == 0, "%s: %d samples show a JavaScript line outside its function" % (what, outside))
    for c, stack in sorted(bad_lines, reverse=True)[:3]:
        t.log("   wrong lines (%d): %s" % (c, ";".join(stack)))
    t.check(bottom_ok >= 0.95 * total, "%s: %d of %d samples reach %s at their root"
            % (what, bottom_ok, total, bottom))


def check_name_cache(what, metrics):
    """The same functions, drain after drain: named from the cache (v8-name-cache.h) after the
    first drain, with far fewer remote reads than naming each time."""
    hits = t.metric(metrics, 'profd_v8_name_cache_lookups_total{result="hit"}')
    misses = t.metric(metrics, 'profd_v8_name_cache_lookups_total{result="miss"}')
    frames = sum(t.metric(metrics, 'profd_v8_frames_named_total{result="%s"}' % r)
                 for r in ("named", "not_a_function", "read_failed"))
    reads = t.metric(metrics, "profd_v8_remote_reads_total")
    drains = t.metric(metrics, "profd_drain_seconds_count")
    t.log("%s: %d JavaScript frames named in %d drains with %d remote reads (%.1f a frame); name cache: "
          "%d hits, %d misses" % (what, frames, drains, reads, reads / max(frames, 1), hits, misses))
    t.check(hits > misses, "%s: most JavaScript frames named from the cache across drains (%d hits, %d misses)"
            % (what, hits, misses))


def main():
    t.require_bpf()
    try:
        base = debiannode.ensure_node18(log=t.log)
    except debiannode.NodeUnavailable as e:
        t.skip("Debian 12's node 18 cannot be had here: %s" % e)
    script = os.path.join(t.tmpdir(), "chain.js")
    with open(script, "w") as f:
        f.write(SCRIPT)
    SCRIPT_PATH.append(script)
    created = debiannode.make_mount_target()
    proc = None
    try:
        with t.Daemon("--frequency", "199", "--labels", "comm,pid,tid") as d:
            proc = subprocess.Popen(debiannode.command(base, [script]), stdout=subprocess.PIPE, text=True)
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
        debiannode.remove_mount_target(created)

    for line in metrics.splitlines():
        if line.startswith(("profd_v8_", "profd_remote_reads_total", "profd_drain_seconds_count")):
            t.log("   " + line)
    found = re.search(r'^profd_v8_detections_total\{outcome="found"\} (\d+)', metrics, re.M)
    t.check(found and int(found.group(1)) >= 1, "/metrics: node 18's V8 found (%s)" % (found and found.group(1)))
    named = re.search(r'^profd_v8_frames_named_total\{result="named"\} (\d+)', metrics, re.M)
    t.check(named and int(named.group(1)) > 0, "/metrics: JavaScript frames named (%s)" % (named and named.group(1)))

    check_name_cache("node 18", metrics)

    main_t, worker_t = [], []
    for tr in t.traces(path, lines=True):
        names = [name_of(x)[0] for x in tr.frames]
        (worker_t if "start_thread" in names else main_t).append((tr.value, tr.frames))
    check_kind("main thread", main_t, script, "_start")
    check_kind("worker thread", worker_t, script, "start_thread")
    t.finish()


if __name__ == "__main__":
    main()
