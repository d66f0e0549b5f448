#!/usr/bin/env python3
"""CPython frames, walked in BPF and spliced into native stacks, on real interpreters.

One program with known call chains runs at once on:
- Debian 12's python3.11, started before profd (found by the start-up scan);
- Debian 12's libpython3.11 embedded in a C program (no "python" executable);
- Debian 11's python3.9, Debian 13's python3.13 and Debian 14's (testing, "forky") python3.14, in
  their debootstrapped roots through chroot (tests/lib/debianroot.py; processes in another root, as
  in a container), started after profd.

Its main thread recurses six levels into either a pure-Python loop or json.dumps (C extension _json
below Python frames); a second thread matches a regular expression (C extension _sre). The profile
of that window is fetched as a past window after every interpreter has exited, so the code objects'
names must have been read while they ran. Per runtime:
- >= 95% of the process's samples carry the expected Python frames, outermost first, in order;
- >= 95% reach the native bottom of their thread (_start, or clone/clone3 for the second thread);
- >= 95% have their Python frames between native frames, in place of the eval function's frames
  (an eval function whose frames are not recognised leaves them at the stack's root end);
- >= 80% reach the leaf function (the walk is not cut short);
- native frames sit where they run: the _json / _sre C frames are leafward of the Python frame
  that called them, Py_RunMain / PyRun_SimpleString rootward of <module>;
- the line of every frame of the recursion is the line of its call in the source, the leaf's the
  lines of its loop.
On 3.14 a second program makes the code objects of a call chain immortal: a _PyStackRef to an
immortal object carries a tag bit, so their frames' f_executable is the code's address + 1. The
calling frame's line must still be that of its call: the call's argument is on the next line, the
line an instruction index one short (the tag not masked) gives.
A fourth interpreter whose version profd does not know (Debian 11's python3.9 installed under the
name python3.7) gets native frames only, and /metrics counts it as an unsupported version."""
import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import debianroot
import profdtest
from profdtest import Daemon, check, cc, finish, log, require_bpf, skip, tmpdir, traces

WINDOW_S = 8

APP = r'''import json, re, sys, threading, time

DATA = [{"k%d" % i: [i, str(i), {"x": i * 1.5}]} for i in range(2000)]
TEXT = "ab" * 3000 + "c"
PAT = re.compile(r"(a|b)*d")


def spin(deadline):
    n = 0
    while time.monotonic() < deadline:  # SPIN_LOOP
        n += 1  # SPIN_BODY
    return n


def dump(deadline):
    while time.monotonic() < deadline:  # DUMP_LOOP
        json.dumps(DATA)  # DUMP_CALL


def recurse(n, leaf, deadline):
    if n == 0:
        return leaf(deadline)  # LEAF_CALL
    return recurse(n - 1, leaf, deadline)  # RECURSE_CALL


def worker(stop):
    while not stop.is_set():  # WORKER_LOOP
        PAT.match(TEXT)  # WORKER_CALL


def main():
    stop = threading.Event()
    t = threading.Thread(target=worker, args=(stop,), name="pyworker")
    t.start()
    print("ready", flush=True)
    while True:
        recurse(5, spin, time.monotonic() + 0.1)  # MAIN_SPIN
        recurse(5, dump, time.monotonic() + 0.1)  # MAIN_DUMP


main()  # MODULE_CALL
'''

# The instruction before a frame's CALL (LOAD_FAST x) is on the line after the call's.
TAGGED_APP = r'''import ctypes, sys


def leaf(x):
    while x:  # TAGGED_LOOP
        pass


def middle(x):
    return leaf(  # TAGGED_CALL
        x)


for f in (leaf, middle):
    ctypes.c_ssize_t.from_address(id(f.__code__)).value = 3 << 30  # immortal (3.12+)
print("ready" if all(sys._is_immortal(f.__code__) for f in (leaf, middle)) else "not immortal", flush=True)
middle(True)
'''

EMBED_C = r'''
#include <Python.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
        FILE *f = fopen(argv[1], "r");
        if (!f)
                return 2;
        Py_Initialize();
        int r = PyRun_SimpleFile(f, argv[1]);
        Py_Finalize();
        return r == 0 ? 0 : 1;
}
'''


def line_of(marker, app=APP):
    for i, l in enumerate(app.splitlines(), 1):
        if "# " + marker in l:
            return i
    raise KeyError(marker)


RECURSION = ["<module>", "main"] + ["recurse"] * 6
CHAIN_SPIN = RECURSION + ["spin"]
CHAIN_DUMP = RECURSION + ["dump", "dumps", "encode", "iterencode"]
CHAIN_WORKER = ["_bootstrap", "_bootstrap_inner", "run", "worker"]


class Runtime:
    def __init__(self, name, cmd, root=None, app_dir=None, comm=None):
        self.name, self.cmd, self.root, self.app_dir, self.comm = name, cmd, root, app_dir, comm
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            raise RuntimeError("%s did not start: %r %s" % (self.name, line, err[-2000:]))
        log("%s: pid %d" % (self.name, self.proc.pid))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def write_app(directory):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "app.py")
    with open(path, "w") as f:
        f.write(APP)
    return path


def parse_frame(text):
    """'name file:line' (go tool pprof -traces -lines) -> (name, file, line)."""
    m = re.match(r"^(.*\S)\s+(\S+):(\d+)$", text)
    if m:
        return m.group(1), m.group(2), int(m.group(3))
    return text, None, 0


def short(name):
    """Last component of a Python frame's module.qualname: 'threading.Thread.run' -> 'run'."""
    return name.rsplit(".", 1)[-1]


def traces_with_lines(path):
    """[(count, labels {key: value}, frames [(name, file, line)] leaf first)]."""
    return [(tr.value, {k: v[0] for k, v in tr.labels.items()}, [parse_frame(f) for f in tr.frames])
            for tr in traces(path, lines=True)]


def is_python(frame, app_files):
    name, file, _ = frame
    return file is not None and (file in app_files or file.endswith(".py"))


def check_runtime(rt, samples, app_file):
    """samples: [(count, frames leaf first)] of rt's process."""
    total = sum(c for c, _ in samples)
    if not check(total >= 100, "%s: %d samples of its process (>= 100)" % (rt.name, total)):
        return
    in_order = bottom = leaf = in_place = with_py = 0
    c_below = {"dump": [0, 0], "worker": [0, 0]}
    line_errors = []
    for count, frames in samples:
        outer = list(reversed(frames))  # outermost first
        py = [f for f in outer if f[1] is not None and f[1].endswith(".py")]
        names = [short(f[0]) for f in py]
        worker = bool(names) and names[0] == "_bootstrap"
        chains = [CHAIN_WORKER] if worker else [CHAIN_SPIN, CHAIN_DUMP]
        if len(names) >= 2 and any(names == ch[:len(names)] for ch in chains):
            in_order += count
        if any(names[:len(ch)] == ch for ch in ([CHAIN_WORKER] if worker else [CHAIN_SPIN, RECURSION + ["dump"]])):
            leaf += count
        natives = [f[0] for f in outer if not (f[1] is not None and f[1].endswith(".py"))]
        complete = not any(n.startswith("[unwind stopped") or n.startswith("[truncated") for n in natives)
        # Python frames take the place of the eval function's frames: the outermost frame is native.
        if py:
            with_py += count
            in_place += count if not (outer[0][1] is not None and outer[0][1].endswith(".py")) else 0
        # A thread starts in libc's clone3 (named where libc has symbols: not in the Debian 13 root).
        if complete and natives and (natives[0] == "_start" if not worker else
                                     "clone" in natives[0] or natives[0] == "[libc.so.6]"):
            bottom += count
        # C frames leafward of the Python frame that called them.
        key = "worker" if worker else ("dump" if "dump" in names else None)
        if key and names and names[-1] == (CHAIN_WORKER[-1] if worker else "iterencode"):
            idx = max(i for i, f in enumerate(outer) if f[1] is not None and f[1].endswith(".py"))
            c_frames = [f[0] for f in outer[idx + 1:]]
            c_below[key][0] += count
            # Named where the interpreter has symbols (Debian 12's, with python3.11-dbg), the
            # extension's file or the interpreter's where not.
            if c_frames:
                c_below[key][1] += count
        # Lines of the app's own frames.
        app = [(short(f[0]), f[2]) for f in py if f[1] == app_file]
        for i, (n, ln) in enumerate(app):
            nxt = app[i + 1][0] if i + 1 < len(app) else None
            if n == "<module>":
                ok = ln == line_of("MODULE_CALL")
            elif n == "main":
                ok = ln in (line_of("MAIN_SPIN"), line_of("MAIN_DUMP")) or nxt is None
            elif n == "recurse":
                ok = ln == (line_of("RECURSE_CALL") if nxt == "recurse" else line_of("LEAF_CALL")) or nxt is None
            elif n == "spin":
                ok = ln in (line_of("SPIN_LOOP"), line_of("SPIN_BODY"), line_of("SPIN_LOOP") - 1,
                            line_of("SPIN_BODY") + 1)
            elif n == "dump":
                ok = ln in (line_of("DUMP_LOOP"), line_of("DUMP_CALL"))
            elif n == "worker":
                ok = ln in (line_of("WORKER_LOOP"), line_of("WORKER_CALL"))
            else:
                ok = True
            if not ok:
                line_errors.append((n, ln, [a for a in app]))
    share = lambda n: 100.0 * n / total
    check(share(in_order) >= 95, "%s: %.1f%% of %d samples have the expected Python frames in order (>= 95%%)"
          % (rt.name, share(in_order), total))
    check(share(bottom) >= 95, "%s: %.1f%% reach the native bottom of their thread (>= 95%%)"
          % (rt.name, share(bottom)))
    check(with_py and in_place >= 0.95 * with_py, "%s: %.1f%% of %d samples with Python frames have them "
          "spliced between native frames (>= 95%%)" % (rt.name, 100.0 * in_place / max(with_py, 1), with_py))
    check(share(leaf) >= 80, "%s: %.1f%% reach the leaf function (>= 80%%)" % (rt.name, share(leaf)))
    for key, (n, with_c) in c_below.items():
        check(n > 0 and with_c >= 0.5 * n, "%s: %s: C-extension frames below the calling Python frame in "
              "%d of %d samples (>= 50%%)" % (rt.name, key, with_c, n))
    bad = sum(1 for _ in line_errors)
    check(bad <= 0.01 * len(samples) + 1, "%s: frame lines match the source (%d of %d stacks wrong%s)"
          % (rt.name, bad, len(samples), (": e.g. %s" % (line_errors[:3],)) if bad else ""))


def metric(text, name, labels=""):
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else None


def main():
    require_bpf()
    if not shutil.which("go"):
        skip("go (golang-go) is not installed: the profile is read with go tool pprof")
    roots, missing = debianroot.ensure_roots(("bullseye", "trixie", "forky"), log)
    work = tmpdir()
    runtimes, cleanup = [], []

    host_app = write_app(os.path.join(work, "host"))
    runtimes.append(Runtime("python3.11", ["/usr/bin/python3.11", host_app]))
    embed = os.path.join(work, "pyembed")
    flags = subprocess.run(["/usr/bin/python3.11-config", "--cflags", "--embed", "--ldflags"], capture_output=True,
                           text=True)
    if not check(flags.returncode == 0, "python3.11-config works (python3.11-dev, docs/debian-packages-tests.txt)"):
        pass
    else:
        src = os.path.join(work, "pyembed.c")
        with open(src, "w") as f:
            f.write(EMBED_C)
        subprocess.run(["gcc", "-O1", "-o", embed, src] + flags.stdout.split(), check=True)
        runtimes.append(Runtime("libpython3.11 embedded", [embed, write_app(os.path.join(work, "embed"))]))
    # Other builds of 3.8, 3.10 and 3.12 where the machine has them (pyenv): their offsets come
    # from CPython's headers only (no Debian release ships them).
    for ver in ("3.8", "3.10", "3.12"):
        exe = sorted(glob.glob("/root/.pyenv/versions/%s.*/bin/python%s" % (ver, ver)))
        if exe:
            runtimes.append(Runtime("python%s (%s)" % (ver, exe[-1]), [exe[-1], write_app(os.path.join(work, ver))]))
        else:
            log("no CPython %s build on this machine: not checked" % ver)
    for suite, ver in (("bullseye", "3.9"), ("trixie", "3.13"), ("forky", "3.14")):
        if suite not in roots:
            continue
        d = tempfile.mkdtemp(prefix="profd-pystacks-", dir=os.path.join(roots[suite], "tmp"))
        cleanup.append(d)
        write_app(d)
        inside = "/tmp/" + os.path.basename(d) + "/app.py"
        runtimes.append(Runtime("python" + ver, ["chroot", roots[suite], "/usr/bin/python" + ver, inside],
                                root=roots[suite], app_dir=inside))
    tagged = []
    if "forky" in roots:
        d = cleanup[-1]
        with open(os.path.join(d, "tagged.py"), "w") as f:
            f.write(TAGGED_APP)
        inside = "/tmp/" + os.path.basename(d) + "/tagged.py"
        tagged.append(Runtime("python3.14 immortal code", ["chroot", roots["forky"], "/usr/bin/python3.14", inside],
                              root=roots["forky"], app_dir=inside))
    # Layouts profd has no offsets for: Debian 11's 3.9 under another version's name, and Debian
    # 12's debug build (python3.11-dbg: Py_DEBUG objects carry two more pointers).
    unknowns = []
    if "bullseye" in roots:
        d = cleanup[0]
        shutil.copy2(os.path.join(roots["bullseye"], "usr/bin/python3.9"), os.path.join(d, "python3.7"))
        inside_dir = "/tmp/" + os.path.basename(d)
        unknowns.append(Runtime("python3.9 named python3.7", ["chroot", roots["bullseye"], "env", "PYTHONHOME=/usr",
                                                              inside_dir + "/python3.7", inside_dir + "/app.py"]))
    if check(os.path.exists("/usr/bin/python3.11d"), "python3.11d is installed (python3.11-dbg)"):
        unknowns.append(Runtime("python3.11d (debug build)", ["/usr/bin/python3.11d", host_app]))

    try:
        runtimes[0].start()  # before profd: found by the start-up scan
        with Daemon("--frequency", "199", "--labels", "comm,pid,tid") as d:
            for rt in runtimes[1:] + unknowns + tagged:
                rt.start()
            time.sleep(2)  # every process described to BPF
            start = time.time()
            time.sleep(WINDOW_S)
            end = time.time()
            for rt in runtimes + unknowns + tagged:
                rt.stop()
            time.sleep(1.5)  # the window is drained; every interpreter is gone
            st, _, body = d.get("/debug/pprof/profile?start=%.3f&end=%.3f" % (start, end))
            check(st == 200, "past window after every interpreter exited: %d" % st)
            path = os.path.join(work, "cpu.pb.gz")
            with open(path, "wb") as f:
                f.write(body)
            _, _, metrics = d.get("/metrics")
            metrics = metrics.decode()
    finally:
        for rt in runtimes + unknowns + tagged:
            rt.stop()
        for c in cleanup:
            shutil.rmtree(c, ignore_errors=True)

    shutil.copy(path, "/tmp/pystacks.pb.gz") if os.environ.get("PROFD_KEEP") else None
    traces = traces_with_lines(path)
    by_pid = {}
    for count, labels, frames in traces:
        by_pid.setdefault(labels.get("pid", ""), []).append((count, frames))
    for rt in runtimes:
        app_file = rt.app_dir or rt.cmd[-1]
        check_runtime(rt, by_pid.get(str(rt.proc.pid), []), app_file)
    for rt in tagged:
        samples = by_pid.get(str(rt.proc.pid), [])
        total = sum(c for c, _ in samples)
        chain = right = 0
        for count, frames in samples:
            app = [(short(f[0]), f[2]) for f in reversed(frames) if f[1] == rt.app_dir]
            if [n for n, _ in app] == ["<module>", "middle", "leaf"]:
                chain += count
                right += count if app[1][1] == line_of("TAGGED_CALL", TAGGED_APP) else 0
        check(total >= 20 and chain >= 0.95 * total and right == chain,
              "%s: %d samples, %d with <module> middle leaf (>= 95%%), middle at its call's line %d in %d"
              % (rt.name, total, chain, line_of("TAGGED_CALL", TAGGED_APP), right))
    for unknown in unknowns:
        samples = by_pid.get(str(unknown.proc.pid), [])
        total = sum(c for c, _ in samples)
        py = sum(c for c, fr in samples if any(f[1] is not None and f[1].endswith(".py") or
                                               f[0].startswith("[python]") for f in fr))
        evals = sum(c for c, fr in samples if any(f[0] == "_PyEval_EvalFrameDefault" for f in fr))
        check(total >= 50 and py == 0 and evals >= 0.9 * total,
              "%s: %d samples, %d with Python frames (0), %d through _PyEval_EvalFrameDefault"
              % (unknown.name, total, py, evals))
    if unknowns:
        n = metric(metrics, "profd_python_detections_total", '{outcome="unsupported_version"}')
        check(n == len(unknowns), "each unknown layout counted once on /metrics: %s of %d" % (n, len(unknowns)))
    walked = metric(metrics, "profd_python_stacks_walked_total")
    frames = metric(metrics, "profd_python_frames_read_total")
    check(walked and frames and frames > walked, "/metrics: %s Python stacks walked, %s frames read"
          % (walked, frames))
    for m in re.findall(r"^profd_python_stops_total\S* \S+$", metrics, re.M):
        log(m)
    if missing:
        log("NOT CHECKED: " + "; ".join(missing))
        if not profdtest._failures:
            skip("not checked: " + "; ".join(missing))
    finish()


if __name__ == "__main__":
    main()
