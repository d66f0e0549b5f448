#!/usr/bin/env python3
"""Python frames are never named after the wrong code object, and frames of import time and of
processes that exit right after their last sample are named.

A module's <module> code object is freed as soon as its import ran, and its memory is soon another
code object's; a process's memory is gone when it exits. profd reads code objects as soon as BPF
reports a new stack with them, and names a frame only when the object it read has the fingerprint
BPF took at the sample (bpf/profd-python.h).

On each interpreter (Debian 12's python3.11; Debian 11's 3.9, 13's 3.13 and forky's 3.14 in their
debootstrapped roots, tests/lib/debianroot.py):
- imports: one process imports 300 generated modules in turn, each spending ~15 ms in its module
  body and defining a dozen functions of distinctive names and lines (so that freed code objects'
  memory is reused by others), then calls one of them for ~4 ms. Before each import it names its
  thread after the interpreter and the module (prctl), so every sample says which module ran. Checked: no frame carries another
  module's name, the frame that importlib's _call_with_frames_removed runs is that module's
  <module> (or unnamed) at the line of a module-level statement, and >= 95% of those frames are
  named.
- short processes: eight processes each run their hot functions for 300 ms, sleep 100 ms and exit;
  >= 95% of their Python frames are named.
The profile is fetched as a past window after every process exited."""
import os
import re
import shutil
import subprocess
import tempfile
import time

import debianroot
import profdtest
from profdtest import Daemon, check, finish, log, require_bpf, skip, tmpdir, traces

N_MODULES = 300
N_SHORT = 8

MAIN = r'''import ctypes, importlib, sys
sys.path.insert(0, sys.argv[1])
libc = ctypes.CDLL(None)
for i in range(%d):
    libc.prctl(15, ("%%simp%%03d" %% (sys.argv[2], i)).encode(), 0, 0, 0)
    m = importlib.import_module("m%%03d" %% i)
    getattr(m, "work_%%03d" %% i)()
libc.prctl(15, b"done", 0, 0, 0)
''' % N_MODULES

SHORT = r'''import ctypes, sys, time
ctypes.CDLL(None).prctl(15, ("%sshort%s" % (sys.argv[2], sys.argv[1])).encode(), 0, 0, 0)


def hot_a(n):
    return n + 1


def hot_b(n):
    for _ in range(50):
        n = hot_a(n)
    return n


def main():
    d = time.monotonic() + 0.3
    n = 0
    while time.monotonic() < d:
        n = hot_b(n)
    return n


main()
time.sleep(0.1)
'''


def module_source(i):
    """Module i: padding so that its lines are its own, a dozen functions, a work function, and a
    loop in the module body. Returns (text, top-level statement lines)."""
    lines = ["# module %03d" % i] + ["# pad"] * (i % 13) + ["import time", ""]
    for k in range(12):
        lines += ["def f_%03d_%d(x):" % (i, k), "    y = x + %d" % k, "    return y", ""]
    lines += ["def work_%03d():" % i, "    d = time.monotonic() + 0.004", "    n = 0",
              "    while time.monotonic() < d:", "        n = f_%03d_0(n)" % i, "    return n", ""]
    lines += ["_d = time.monotonic() + 0.015", "while time.monotonic() < _d:", "    _x = %d" % i, ""]
    top = {n for n, l in enumerate(lines, 1) if l and not l.startswith("#")}
    # The body of the module-level loop runs at module level too.
    top.add(len(lines) - 1)
    return "\n".join(lines) + "\n", top


def write_programs(directory):
    os.makedirs(directory, exist_ok=True)
    tops = {}
    for i in range(N_MODULES):
        text, top = module_source(i)
        with open(os.path.join(directory, "m%03d.py" % i), "w") as f:
            f.write(text)
        tops[i] = top
    with open(os.path.join(directory, "main.py"), "w") as f:
        f.write(MAIN)
    with open(os.path.join(directory, "short.py"), "w") as f:
        f.write(SHORT)
    return tops


class Interpreter:
    def __init__(self, tag, name, argv, host_dir, inside_dir):
        self.tag, self.name, self.argv, self.host_dir, self.inside_dir = tag, name, argv, host_dir, inside_dir
        self.tops = write_programs(host_dir)
        self.off_lines = []  # module body lines outside its statements
        self.short_pids = []

    def run(self):
        t0 = time.monotonic()
        p = subprocess.run(self.argv + [os.path.join(self.inside_dir, "main.py"), self.inside_dir, self.tag],
                           capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, "%s: the import program ran (%.1f s)%s"
              % (self.name, time.monotonic() - t0, "" if p.returncode == 0 else ": " + p.stderr[-1500:]))
        for k in range(N_SHORT):
            p = subprocess.run(self.argv + [os.path.join(self.inside_dir, "short.py"), "%02d" % k, self.tag],
                               capture_output=True, text=True, timeout=60)
            check(p.returncode == 0, "%s: short process %d ran%s"
                  % (self.name, k, "" if p.returncode == 0 else ": " + p.stderr[-1500:]))


FRAME = re.compile(r"^(.*?)\s+(<frozen [^>]*>|\S+):(\d+)$")


def parse_frame(text):
    """'name file:line' (go tool pprof -traces -lines) -> (name, file, line)."""
    m = FRAME.match(text)
    return (m.group(1), m.group(2), int(m.group(3))) if m else (text, None, 0)


def is_python(frame):
    name, file, _ = frame
    return name.startswith("[python]") or (file is not None and (file.endswith(".py") or file.startswith("<frozen")))


def check_imports(it, samples):
    """samples: [(count, thread_name, frames leaf first)] of the import process."""
    wrong, examples = 0, []
    at_module = named_right = unnamed = 0
    for count, thread, frames in samples:
        m = re.match(r"^%simp(\d{3})$" % it.tag, thread or "")
        if not m:
            continue
        running = int(m.group(1))
        py = [f for f in reversed(frames) if is_python(f)]  # outermost first
        bad = None
        for name, file, line in py:
            mm = re.match(r"^m(\d{3})\.", name)
            if mm and int(mm.group(1)) != running:
                bad = "%s (%s:%d) while m%03d ran" % (name, file, line, running)
        for k, f in enumerate(py[:-1]):
            if not f[0].endswith("._call_with_frames_removed"):
                continue
            name, file, line = py[k + 1]
            at_module += count
            if name.startswith("[python]"):
                unnamed += count
            elif name == "m%03d.<module>" % running and file.endswith("/m%03d.py" % running):
                named_right += count
                if line not in it.tops[running]:
                    it.off_lines.append(line)
            else:
                bad = "%s (%s:%d) run by importlib while m%03d was imported" % (name, file, line, running)
        if bad:
            wrong += count
            examples.append(bad)
    log("%s imports: %d samples at the module position: %d named right, %d unnamed, %d wrong"
        % (it.name, at_module, named_right, unnamed, wrong))
    check(not it.off_lines, "%s: named module frames are at a line of a module-level statement (%d are not: %s)"
          % (it.name, len(it.off_lines), sorted(set(it.off_lines))[:5]))
    check(at_module >= 100, "%s: %d samples of module bodies (>= 100)" % (it.name, at_module))
    check(wrong == 0, "%s: no Python frame carries another code object's name (%d wrong%s)"
          % (it.name, wrong, ": e.g. " + "; ".join(examples[:4]) if examples else ""))
    check(at_module and named_right >= 0.95 * at_module,
          "%s: import-time frames named <module> of the right file at a line of its body: %d of %d (>= 95%%)"
          % (it.name, named_right, at_module))


def check_short(it, samples):
    total = named = 0
    wrong = []
    for count, thread, frames in samples:
        if not re.match(r"^%sshort\d\d$" % it.tag, thread or ""):
            continue
        for name, file, line in (f for f in frames if is_python(f)):
            total += count
            if not name.startswith("[python]"):
                named += count
                if re.match(r"^short\.", name) and not (file or "").endswith("/short.py"):
                    wrong.append(name)
    log("%s short processes: %d Python frames, %d named" % (it.name, total, named))
    check(total >= 100, "%s: %d Python frames of the short processes (>= 100)" % (it.name, total))
    check(total and named >= 0.95 * total, "%s: Python frames of processes that exit 100 ms after their last "
          "sample named: %d of %d (>= 95%%)" % (it.name, named, total))
    check(not wrong, "%s: short.py's frames name short.py (%s)" % (it.name, wrong[:3]))


def main():
    require_bpf()
    if not shutil.which("go"):
        skip("go (golang-go) is not installed: the profile is read with go tool pprof")
    roots, missing = debianroot.ensure_roots(("bullseye", "trixie", "forky"), log)
    work = tmpdir()
    cleanup = []
    its = [Interpreter("i0", "python3.11", ["/usr/bin/python3.11"], os.path.join(work, "py311"),
                       os.path.join(work, "py311"))]
    for suite, ver in (("bullseye", "3.9"), ("trixie", "3.13"), ("forky", "3.14")):
        if suite not in roots:
            continue
        d = tempfile.mkdtemp(prefix="profd-pyimports-", dir=os.path.join(roots[suite], "tmp"))
        cleanup.append(d)
        its.append(Interpreter("i%d" % len(its), "python" + ver, ["chroot", roots[suite], "/usr/bin/python" + ver], d,
                               "/tmp/" + os.path.basename(d)))
    path = os.path.join(work, "cpu.pb.gz")
    try:
        with Daemon("--frequency", "499", "--labels", "comm,pid,thread_name") as d:
            start = time.time()
            for it in its:
                it.run()
            end = time.time()
            time.sleep(1.5)  # the last interval is drained
            st, _, body = d.get("/debug/pprof/profile?start=%.3f&end=%.3f" % (start, end))
            check(st == 200, "past window after every process exited: %d" % st)
            with open(path, "wb") as f:
                f.write(body)
            _, _, metrics = d.get("/metrics")
            metrics = metrics.decode()
    finally:
        for c in cleanup:
            shutil.rmtree(c, ignore_errors=True)
    for m in re.findall(r"^profd_(?:python_code_errors_total|python_stack_report\w+|python_frames_without_\w+|remote_read\w+|event_loop\w+)\S* \S+$",
                        metrics, re.M):
        log(m)
    shutil.copy(path, "/tmp/pyimports.pb.gz") if os.environ.get("PROFD_KEEP") else None
    samples = []
    for tr in traces(path, lines=True):
        labels = {k: v[0] for k, v in tr.labels.items()}
        samples.append((tr.value, labels.get("thread_name"), [parse_frame(f) for f in tr.frames]))
    for it in its:
        # Thread names say which interpreter, which program and which module ran.
        check_imports(it, samples)
        check_short(it, samples)
    if missing:
        log("NOT CHECKED: " + "; ".join(missing))
        if not profdtest._failures:
            skip("not checked: " + "; ".join(missing))
    finish()


if __name__ == "__main__":
    main()
