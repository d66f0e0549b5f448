#!/usr/bin/env python3
"""A file that claims another file's GNU build ID poisons nothing: unwind tables, the table pool
and symbols are shared only between mappings of the same file (device, inode, size, times).

Two builds of one library with the same forced --build-id: the genuine one (root's, in a root
directory) names its hot function genuine_hot_fn; the forged one (nobody's, in nobody's
directory) has the very same code at the very same addresses, but names it forged_hot_fn_ and
carries garbage CFI there (the CFA 4 KiB off). nobody's process maps the forged one first and
runs it until its unwind table is built and its symbols are cached (a profile of it is taken).
Then a root process runs genuine_hot_fn. Checks, from the pprof of that second window: root's
samples are named genuine_hot_fn with the whole chain main ... _start below it (no
"[unwind stopped" marker), and nobody's still read forged_hot_fn_."""
import os
import re
import subprocess
import time

import shutil

from profdtest import (Daemon, cc, check, fetch_profile, finish, log, require_bpf, skip, tmpdir, traces,
                       unwind_ready)

NOBODY = 65534
AS_NOBODY = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups", "--inh-caps=-all"]
FREQUENCY = 99
BELOW_MAIN = r"main;(?:[^;]+;)*?__libc_start[^;]*;(?:[^;]+;)*?_start"

# A leaf without stack use: its CFA is rsp+8 throughout, unless HACK moves it (an assembler
# directive only: the code is the same byte for byte).
LIB = r"""
__attribute__((noinline)) unsigned long NAME(unsigned long n)
{
        unsigned long s = 0;
        __asm__ volatile(HACK);
        for (unsigned long i = 0; i < n; i++)
                s += (i * 7) ^ (s >> 3);
        return s;
}
"""

# argv: library, function, seconds; then waits on stdin (the test kills it).
RUNNER = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}
int main(int argc, char **argv)
{
        void *h = dlopen(argv[1], RTLD_NOW);
        unsigned long (*fn)(unsigned long), s = 0;
        double end;
        if (!h || !(fn = (unsigned long (*)(unsigned long))dlsym(h, argv[2])))
                return 2;
        printf("loaded\n");
        fflush(stdout);
        end = now() + atof(argv[3]);
        while (now() < end)
                s += fn(2000000);
        printf("done %lu\n", s);
        fflush(stdout);
        pause();
        return 0;
}
"""


def fn_addr(lib, name):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    m = re.search(r"^([0-9a-f]+) T %s$" % name, out, re.M)
    return int(m.group(1), 16) if m else None


def build_id(lib):
    out = subprocess.run(["readelf", "-n", lib], capture_output=True, text=True, check=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else None


def pid_stacks(path, pid):
    return [(t.value, ";".join(t.frames)) for t in traces(path) if t.labels.get("pid") == [str(pid)]]


def main():
    require_bpf()
    if not shutil.which("setpriv"):
        skip("setpriv (util-linux) is not installed")
    d = tmpdir()
    os.chmod(d, 0o755)
    root_dir, own = os.path.join(d, "root"), os.path.join(d, "own")
    os.makedirs(root_dir)
    os.makedirs(own)
    bid = os.urandom(20).hex()
    flags = ("-shared", "-fPIC", "-O2", "-Wl,--build-id=0x" + bid)
    genuine = cc(LIB, os.path.join(root_dir, "libhot.so"), flags=(*flags, "-DNAME=genuine_hot_fn", '-DHACK=""'))
    forged = cc(LIB, os.path.join(own, "libhot.so"),
                flags=(*flags, "-DNAME=forged_hot_fn_", '-DHACK=".cfi_adjust_cfa_offset 4096"'))
    runner = cc(RUNNER, os.path.join(d, "runner"), flags=("-O2",), libs=("-ldl",))
    for p in (d, root_dir, own):
        os.chmod(p, 0o755)
    for n in os.listdir(own):
        os.chown(os.path.join(own, n), NOBODY, NOBODY)
    os.chown(own, NOBODY, NOBODY)
    check(build_id(genuine) == bid and build_id(forged) == bid, "both libraries carry build ID %s" % bid)
    ga, fa = fn_addr(genuine, "genuine_hot_fn"), fn_addr(forged, "forged_hot_fn_")
    check(ga is not None and ga == fa, "the forged function sits where the genuine one does (%s, %s)"
          % (hex(ga or 0), hex(fa or 0)))
    with open(genuine, "rb") as g, open(forged, "rb") as f:
        gb, fb = g.read(), f.read()
    check(gb != fb, "the two files differ (names, CFI)")

    procs = []
    with Daemon("--frequency", str(FREQUENCY), "--labels", "pid") as dm:
        try:
            # nobody's forged copy first: its table gets built and its symbols cached.
            att = subprocess.Popen(AS_NOBODY + [runner, forged, "forged_hot_fn_", "600"], stdout=subprocess.PIPE,
                                   text=True)
            procs.append(att)
            check(att.stdout.readline().strip() == "loaded", "nobody loaded the forged library")
            unwind_ready(dm, att.pid, "/own/libhot.so", "forged library")
            p1 = fetch_profile(dm, 3)
            st = pid_stacks(p1, att.pid)
            n_forged = sum(v for v, s in st if s.startswith("forged_hot_fn_"))
            n_whole = sum(v for v, s in st if re.match(r"^forged_hot_fn_;" + BELOW_MAIN + "$", s))
            check(n_forged > 0, "nobody's samples read forged_hot_fn_ (its own file's name): %d" % n_forged)
            # The garbage CFI does its harm where it belongs: otherwise this test could not fail.
            check(n_whole * 2 < n_forged, "the forged CFI breaks nobody's own stacks (%d of %d whole)"
                  % (n_whole, n_forged))

            # Then root's genuine library, with the same build ID.
            vic = subprocess.Popen([runner, genuine, "genuine_hot_fn", "600"], stdout=subprocess.PIPE, text=True)
            procs.append(vic)
            check(vic.stdout.readline().strip() == "loaded", "root loaded the genuine library")
            unwind_ready(dm, vic.pid, "/root/libhot.so", "genuine library")
            p2 = fetch_profile(dm, 4)
            st = pid_stacks(p2, vic.pid)
            total = sum(v for v, _ in st)
            leaf = sum(v for v, s in st if s.startswith("genuine_hot_fn;"))
            complete = sum(v for v, s in st if re.match(r"^genuine_hot_fn;" + BELOW_MAIN + "$", s))
            forged_names = sum(v for v, s in st if "forged_hot_fn_" in s)
            stopped = sum(v for v, s in st if "[unwind stopped" in s)
            log("root's samples: %d, in genuine_hot_fn %d, complete %d, forged names %d, stopped %d"
                % (total, leaf, complete, forged_names, stopped))
            for v, s in sorted(st, reverse=True)[:5]:
                log("  %5d %s" % (v, s))
            check(leaf >= 20, "root's samples are named genuine_hot_fn (%d of %d)" % (leaf, total))
            check(forged_names == 0, "none of root's samples carry the forged name (%d)" % forged_names)
            check(complete > 0 and complete * 100 >= total * 90,
                  "root's stacks are complete down to _start (%d of %d; %d stopped)" % (complete, total, stopped))
            st = pid_stacks(p2, att.pid)
            n_forged = sum(v for v, s in st if s.startswith("forged_hot_fn_"))
            check(n_forged > 0, "nobody's samples still read forged_hot_fn_ (%d)" % n_forged)
        finally:
            for p in procs:
                p.kill()
                p.wait()
    finish()


if __name__ == "__main__":
    main()
