#!/usr/bin/env python3
"""Samples taken inside exec keep their kernel frames and no user frame. A program touches 64 MiB
of heap, then execs another program (the same file, told by its argument) that touches its own
and execs again, 10 times: each exec tears down the previous image's memory after the new address
space is in place, a window of milliseconds in which the task's saved user registers are the old
program's while its memory is the new one's (and the daemon's mappings of the pid the old
program's until the exec hook deletes them): a user stack walked there could name an old pc
against the new image. profd samples at 999 Hz. Checks, from the pprof fetched over HTTP and
/metrics: samples were taken in that window (profd_bpf_unwind_stops_total{reason="in_exec"}), each of
them a kernel stack (exec's) ending in "[unwind stopped: process in exec]" with no user frame
below, and the programs' own samples (in ew_touch, after each exec) whole down to main."""
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
__attribute__((noinline)) void ew_touch(char *p, size_t n) { for (size_t i = 0; i < n; i += 4096) p[i] = (char)i; }
int main(int argc, char **argv) {
        int left = atoi(argv[1]);
        size_t n = (size_t)atoi(argv[2]) << 20;
        char *p = malloc(n), arg[16];
        if (!p) return 1;
        ew_touch(p, n);
        if (left <= 0) return 0;
        snprintf(arg, sizeof(arg), "%d", left - 1);
        execl("/proc/self/exe", argv[0], arg, argv[2], (char *)NULL);
        return 1;
}
"""


def main():
    require_bpf()
    exe = cc(SRC, os.path.join(tmpdir(), "exec-window"), flags=("-O2", "-g"))
    with Daemon("--frequency", "999", "--labels", "comm,pid") as d:
        before = metric(d.get("/metrics")[2].decode(), "profd_bpf_unwind_stops_total", '{reason="in_exec"}')
        proc = subprocess.Popen([exe, str(EXECS), str(MIB)])
        path = fetch_profile(d, 8, "&pid=%d" % proc.pid)
        proc.wait()
        after = metric(d.get("/metrics")[2].decode(), "profd_bpf_unwind_stops_total", '{reason="in_exec"}')
    in_exec = user_below = own = whole = 0
    for tr in traces(path):
        if MARKER in tr.frames:
            in_exec += tr.value
            # the marker ends the stack: nothing after it (no user frame)
            if tr.frames.index(MARKER) != len(tr.frames) - 1:
                user_below += tr.value
                log("  in exec, with frames below the marker: %s" % ";".join(tr.frames))
        elif "ew_touch" in tr.frames:
            own += tr.value
            whole += tr.value if "main" in tr.frames else 0
    log("samples in exec %d (counted %d); in ew_touch %d, %d of them down to main" %
        (in_exec, after - before, own, whole))
    check(proc.returncode == 0, "the program exec'd %d times and ended well (%s)" % (EXECS, proc.returncode))
    check(after - before > 0, "/metrics: samples inside exec counted (%d)" % (after - before))
    check(in_exec > 0, "the profile has samples inside exec, marked (%d)" % in_exec)
    check(user_below == 0, "no sample inside exec has a user frame (%d)" % user_below)
    check(own >= 100 and whole >= 0.95 * own, "the programs' own samples are whole: %d of %d down to main" %
          (whole, own))
    finish()


if __name__ == "__main__":
    main()
