#!/usr/bin/env python3
"""One naming path: pprof, folded stacks and the flame graph name every frame of one past window
(?start=&end=) identically.

While profd runs, programs whose stacks hold every kind of frame burn CPU for a few seconds:
    native      built with -g, calling getppid() (kernel frames under user ones)
    stripped    the same program stripped: known by its build ID, so pprof leaves its frames
                unnamed (address kept) where the text outputs print the placeholder
    nobuildid   stripped and linked without a build ID: the placeholder everywhere
    jit         code in anonymous memory named from /tmp/perf-PID.map
    deep        recursion 700 deep: the stack ends in a "[truncated: N+ frames]" marker
    python3     Python frames (code objects) above the interpreter's native frames
After they exited, the window they ran in is fetched three ways. For each of these programs, the
multiset of (process name, stack) with sample counts must be the same from pprof (go tool pprof
-traces), from ?format=folded and from the flame graph page's data, frame by frame; the only
translations are the folded "_[k]" kernel suffix and pprof's address-only frames (left unnamed),
which the text outputs print as their "[unknown] PATH+0xOFF" placeholder."""
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter

from profdtest import Daemon, cc, check, finish, log, require_bpf, tmpdir, traces, unwind_ready

SECONDS = 4

NATIVE = r"""
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) void names_leaf(void) { for (int i = 0; i < 100000; i++) sink += i * 7; }
__attribute__((noinline)) void names_syscalls(void) { for (int i = 0; i < 300; i++) sink += getppid(); }
__attribute__((noinline)) void names_middle(void) { names_leaf(); names_syscalls(); }
int main(int argc, char **argv)
{
        char go;
        if (read(0, &go, 1) != 1)
                return 1;
        double end = time(NULL) + atof(argv[1]);
        while (time(NULL) < end)
                names_middle();
        return 0;
}
"""

DEEP = r"""
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
volatile unsigned long sink;
double end;
__attribute__((noinline)) void deep_spin(void) { while (time(NULL) < end) for (int i = 0; i < 100000; i++) sink += i; }
__attribute__((noinline)) void deep_recurse(int n) { if (n == 0) deep_spin(); else deep_recurse(n - 1); sink++; }
int main(int argc, char **argv)
{
        char go;
        if (read(0, &go, 1) != 1)
                return 1;
        end = time(NULL) + atof(argv[1]);
        deep_recurse(700);
        return 0;
}
"""

# Code copied into anonymous executable memory, named by the perf map the program writes (as a
# JIT does): push %rbp; mov %rsp,%rbp; mov %rdi,%rax; 1: dec %rax; jnz 1b; pop %rbp; ret
JIT = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static const uint8_t code[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0x89, 0xf8, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0x5d, 0xc3};
typedef uint64_t (*fn)(uint64_t);
volatile uint64_t sink;
__attribute__((noinline)) void jit_names_caller(fn f) { sink += f(2000000); }
int main(int argc, char **argv)
{
        char go;
        if (read(0, &go, 1) != 1)
                return 1;
        double end = time(NULL) + atof(argv[1]);
        uint8_t *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        char path[64];
        if (p == MAP_FAILED)
                return 1;
        memcpy(p, code, sizeof(code));
        snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
        FILE *f = fopen(path, "w");
        if (!f)
                return 1;
        fprintf(f, "%lx %zx jit_names_hot_fn\n", (unsigned long)p, sizeof(code));
        fclose(f);
        while (time(NULL) < end)
                jit_names_caller((fn)p);
        return 0;
}
"""

PYTHON = r"""
import sys, time
sys.stdin.read(1)
def py_names_leaf():
    s = 0
    for i in range(20000):
        s += i * 7
    return s
def py_names_recurse(n):
    return py_names_leaf() if n == 0 else py_names_recurse(n - 1)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    py_names_recurse(5)
"""

COMMS = ("native", "stripped", "nobuildid", "jitnames", "deepnames", "pynames")
KSUFFIX = "_[k]"


def build(d):
    bins = {}
    src = os.path.join(d, "native.c")
    with open(src, "w") as f:
        f.write(NATIVE)
    bins["native"] = cc(src, os.path.join(d, "native"), ["-g", "-O1"])
    bins["stripped"] = cc(src, os.path.join(d, "stripped"), ["-O1"])
    subprocess.run(["strip", bins["stripped"]], check=True)
    bins["nobuildid"] = cc(src, os.path.join(d, "nobuildid"), ["-O1", "-Wl,--build-id=none"])
    subprocess.run(["strip", bins["nobuildid"]], check=True)
    bins["jitnames"] = cc(JIT, os.path.join(d, "jitnames"), ["-O1", "-g"])
    bins["deepnames"] = cc(DEEP, os.path.join(d, "deepnames"), ["-O1", "-g", "-fno-optimize-sibling-calls"])
    py = os.path.join(d, "pynames.py")
    with open(py, "w") as f:
        f.write(PYTHON)
    return bins, py


def from_pprof(path):
    """(comm, stack root first) -> samples, from go tool pprof -traces. A frame pprof prints by its
    mapping's name alone is one profd left unnamed: "<addr:NAME>"."""
    out = Counter()
    for t in traces(path):
        comm = (t.labels.get("comm") or [""])[0]
        if comm not in COMMS:
            continue
        # pprof shows a location without a function by its mapping ("[stripped]") and marks
        # inlined functions "(inline)".
        frames = ["<addr:%s>" % f[1:-1] if re.fullmatch(r"\[[^\] ]+\]", f) else f.removesuffix(" (inline)")
                  for f in t.frames]
        out[(comm, tuple(reversed(frames)))] += t.value
    return out


def text_frame(f):
    """A folded / flame graph frame as pprof would show it: kernel names without their suffix;
    the placeholder of a frame pprof leaves unnamed is matched by normalize_unnamed()."""
    return f[: -len(KSUFFIX)] if f.endswith(KSUFFIX) else f


def from_folded(body):
    out = Counter()
    for line in body.decode().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if frames[0] in COMMS:
            out[(frames[0], tuple(text_frame(f) for f in frames[1:]))] += int(count)
    return out


def from_flamegraph(body):
    """The page's data: names, kinds, nodes in preorder as (name, value, children); a node's own
    samples are its value less its children's."""
    html = body.decode()
    m = re.search(r'(\{"title":.*?"nodes":\[[0-9,]*\]\})', html, re.S)
    if not m:
        return None, 0
    data = json.loads(m.group(1))
    names, nodes = data["names"], data["nodes"]
    out = Counter()
    pos = 0

    def walk(path):
        nonlocal pos
        name, value, nch = nodes[pos], nodes[pos + 1], nodes[pos + 2]
        pos += 3
        here = path + [names[name]]
        below = 0
        for _ in range(nch):
            below += walk(here)
        if value - below > 0 and len(here) > 1 and here[1] in COMMS:
            out[(here[1], tuple(here[2:]))] += value - below
        return value

    sys.setrecursionlimit(10000)
    walk([])
    return out, data.get("merged", 0)


def has_build_id(path, cache={}):
    if path not in cache:
        r = subprocess.run(["readelf", "-n", path], capture_output=True, text=True)
        cache[path] = "Build ID:" in r.stdout
    return cache[path]


def project_unnamed(text):
    """A text output's placeholder "[unknown] PATH+0xOFF" of a file with a build ID is the frame
    pprof leaves unnamed, shown by go tool pprof as "[BASENAME]": both become "<addr:BASENAME>"."""
    out = Counter()
    for (comm, frames), n in text.items():
        proj = []
        for f in frames:
            m = re.fullmatch(r"\[unknown\] (/\S+)\+0x[0-9a-f]+", f)
            proj.append("<addr:%s>" % os.path.basename(m.group(1)) if m and has_build_id(m.group(1)) else f)
        out[(comm, tuple(proj))] += n
    return out


def main():
    require_bpf()
    d = tmpdir()
    bins, py = build(d)
    with Daemon("--frequency", "99") as dmn:
        # Each program waits for a byte on stdin, so that its window starts with its unwind tables
        # in place and every stack is complete (or marked) however busy the machine is.
        procs = [subprocess.Popen([bins[c], str(SECONDS)], stdin=subprocess.PIPE) for c in COMMS[:-1]]
        # The interpreter runs under the name the comparison filters on.
        pyexe = os.path.join(d, "pynames")
        pyreal = os.path.realpath("/usr/bin/python3")
        os.symlink(pyreal, pyexe)
        procs.append(subprocess.Popen([pyexe, py, str(SECONDS)], stdin=subprocess.PIPE))
        for c, p in zip(COMMS, procs):
            unwind_ready(dmn, p.pid, os.path.basename(pyreal) if c == "pynames" else c, c)
        t0 = time.time()
        for p in procs:
            p.stdin.write(b"g")
            p.stdin.close()
        for p in procs:
            p.wait()
        t1 = time.time()
        for p in procs:
            check(p.returncode == 0, "%s ran and exited 0 (%s)" % (p.args[0], p.returncode))
        # The window is in the past: served from the history once it is drained.
        time.sleep(2.5)
        q = "start=%.3f&end=%.3f" % (t0, t1)
        st, _, body = dmn.get("/debug/pprof/profile?" + q, timeout=60)
        check(st == 200, "pprof of the past window: %d" % st)
        ppath = os.path.join(d, "window.pb.gz")
        with open(ppath, "wb") as f:
            f.write(body)
        st, _, folded_body = dmn.get("/debug/pprof/profile?%s&format=folded" % q, timeout=60)
        check(st == 200, "folded stacks of the past window: %d" % st)
        st, _, fg_body = dmn.get("/debug/pprof/flamegraph?" + q, timeout=60)
        check(st == 200, "flame graph of the past window: %d" % st)
    for p in procs:  # the JIT program's perf map: named, it is no longer needed
        try:
            os.unlink("/tmp/perf-%d.map" % p.pid)
        except FileNotFoundError:
            pass

    pp, folded = from_pprof(ppath), from_folded(folded_body)
    fg, merged = from_flamegraph(fg_body)
    check(fg is not None, "the flame graph page carries its data")
    fg = fg or Counter()
    check(merged == 0, "the flame graph merged no nodes (%d)" % merged)
    folded, fg = project_unnamed(folded), project_unnamed(fg)

    total = sum(pp.values())
    log("samples of the test programs: pprof %d, folded %d, flame graph %d" %
        (total, sum(folded.values()), sum(fg.values())))
    for comm in COMMS:
        n = sum(v for k, v in pp.items() if k[0] == comm)
        check(n >= 10, "%s: sampled in the window (%d samples)" % (comm, n))

    def has(comm, pred):
        return sum(v for k, v in folded.items() if k[0] == comm and any(pred(f) for f in k[1]))

    # Every kind of frame is there to be compared.
    check(has("native", lambda f: f == "names_leaf") > 0, "native frames named (names_leaf)")
    check(any(f.endswith(KSUFFIX) for line in folded_body.decode().splitlines()
              if line.startswith("native;") for f in line.split(";")), "folded marks kernel frames _[k]")
    check(b"[unknown] " + bins["stripped"].encode() + b"+0x" in folded_body,
          "stripped (build ID): the placeholder in the text outputs")
    check(sum(v for k, v in pp.items() if k[0] == "stripped" and "<addr:stripped>" in k[1]) > 0,
          "stripped (build ID): pprof leaves those frames unnamed, address kept")
    check(has("nobuildid", lambda f: f.startswith("[unknown] ") and "nobuildid" in f) > 0,
          "no build ID: the placeholder")
    check(has("jitnames", lambda f: f == "jit_names_hot_fn") > 0, "JIT frames named from the perf map")
    check(has("deepnames", lambda f: f.startswith("[truncated: ")) > 0, "deep stacks end in a truncation marker")
    check(has("pynames", lambda f: f.endswith("py_names_leaf")) > 0, "Python frames named")

    # The comparison itself: the same stacks with the same counts, frame by frame.
    for name, other in (("folded stacks", folded), ("the flame graph", fg)):
        diff_a, diff_b = pp - other, other - pp
        check(not diff_a and not diff_b,
              "pprof and %s name every sample's frames identically (%d stacks, %d samples)%s" %
              (name, len(pp), total, "" if not (diff_a or diff_b) else
               "\n only pprof: %s\n only %s: %s" % (list(diff_a.items())[:3], name, list(diff_b.items())[:3])))
    finish()


if __name__ == "__main__":
    main()
