#!/usr/bin/env python3
"""Samples taken inside exec keep their kernel frames and no user frame. A program touches 64 MiB
of heap, then execs another program (the same file, told by its argument) that touches its own
and execs again, 10 times: each exec tears down the previous image's memory after the new address
space is in place, a window of milliseconds in which the task's saved user registers are the old
program's while its memory is the new one's (and the daemon's mappings of the pid the old
program's until the exec hook deletes them): a user stack walked there could name an old pc
against the new image. profd samples it alone at 999 Hz. Checks, from the pprof fetched over HTTP and
/metrics: samples were taken in that window (profd_bpf_unwind_stops_total{reason="in_exec"}), each of
them a kernel stack (exec's) ending in "[unwind stopped: process in exec]" with no user frame
below. (Each image also spins for 200 ms in ew_spin: the window has the programs' own samples.)"""
import os
import subprocess

from profdtest import Daemon, cc, check, fetch_profile, finish, log, metric, require_bpf, tmpdir, traces

EXECS = 10
MIB = 64
MARKER = "[unwind stopped: process in exec]"

SRC = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
__attribute__((noinline)) void ew_touch(char *p, size_t n) { for (size_t i = 0; i < n; i += 4096) p[i] = (char)i; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
/* CPU for 200 ms: samples of each image, once profd knows it */
__attribute__((noinline)) unsigned long ew_spin(void) {
        unsigned long x = 1;
        for (double end = now() + 0.2; now() < end;)
                for (int i = 0; i < 10000; i++) x = x * 6364136223846793005ul + 1;
        return x;
}
int main(int argc, char **argv) {
        int left = atoi(argv[1]);
        size_t n = (size_t)atoi(argv[2]) << 20;
        char *p = malloc(n), arg[16];
        if (!p) return 1;
        ew_touch(p, n);
        if (ew_spin() == 42) return 2;
        if (left <= 0) return 0;
        snprintf(arg, sizeof(arg), "%d", left - 1);
        execl(argv[0], argv[0], arg, argv[2], (char *)NULL); /* its absolute path: the same comm */
        return 1;
}
"""


def main():
    require_bpf()
    exe = cc(SRC, os.path.join(tmpdir(), "exec-window"), flags=("-O2", "-g"))
    # Only this program is sampled (--comm): the check needs its samples, not the machine's.
    with Daemon("--frequency", "999", "--comm", "exec-window", "--labels", "comm,pid") as d:
        before = metric(d.get("/metrics")[2].decode(), "profd_bpf_unwind_stops_total", '{reason="in_exec"}')
        proc = subprocess.Popen([exe, str(EXECS), str(MIB)])
        path = fetch_profile(d, 8, "&pid=%d" % proc.pid)
        proc.wait()
        after = metric(d.get("/metrics")[2].decode(), "profd_bpf_unwind_stops_total", '{reason="in_exec"}')
    in_exec = user_below = 0
    got = traces(path)
    log("%d stacks in the profile, %d samples" % (len(got), sum(tr.value for tr in got)))
    for tr in got:
        if MARKER in tr.frames:
            in_exec += tr.value
            # the marker ends the stack: nothing after it (no user frame)
            if tr.frames.index(MARKER) != len(tr.frames) - 1:
                user_below += tr.value
                log("  in exec, with frames below the marker: %s" % ";".join(tr.frames))
    log("samples in exec %d (counted %d)" % (in_exec, after - before))
    check(proc.returncode == 0, "the program exec'd %d times and ended well (%s)" % (EXECS, proc.returncode))
    check(after - before > 0, "/metrics: samples inside exec counted (%d)" % (after - before))
    check(in_exec > 0, "the profile has samples inside exec, marked (%d)" % in_exec)
    check(user_below == 0, "no sample inside exec has a user frame (%d)" % user_below)
    total = sum(tr.value for tr in got)
    check(total >= 300, "the programs were sampled (%d samples)" % total)
    finish()


if __name__ == "__main__":
    main()
