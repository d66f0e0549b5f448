#!/usr/bin/env python3
"""Short-lived forked children are symbolized from their parent's snapshot: a program started
after profd forks 120 children one after the other; each burns ~25 ms of CPU in fc_burn() and
exits without exec'ing. Nothing ever reads a child's /proc/PID/maps (the tracker copies the
parent's unwind entries at fork), so before the process table copied the parent's snapshot at fork
the children's frames came out as unnamed addresses. Checks, from the pprof fetched over HTTP and
read with `go tool pprof -traces`: >= 95% of the children's samples name fc_burn.

Then children that share their parent's memory, as posix_spawn makes them (clone with CLONE_VM |
CLONE_VFORK on a stack of their own): the daemon writes no unwind entries for them and BPF unwinds
them with their parent's (same mm). 60 of them each burn ~25 ms under a 12-deep recursion built
without frame pointers, so only the parent's DWARF tables can reach the clone frame: >= 95% of
their samples taken once the parent's table is ready hold the whole recursion and end at glibc's
clone without an "[unwind stopped" frame, and the shared-memory counters moved."""
import collections
import os
import re
import subprocess
import time

from profdtest import Daemon, cc, check, fetch_profile, finish, log, require_bpf, tmpdir, traces

CHILDREN = 120
VM_CHILDREN = 60
DEPTH = 12
BURN_MS = 25
FREQUENCY = 99
# Frames of a child's return from fork (kernel and glibc) and of its exit: samples there are the
# child's own time outside fc_burn, not a frame missed.
FORK_EXIT = {"ret_from_fork", "ret_from_fork_asm", "_Fork", "__fork", "__libc_fork", "arch_fork (inline)",
             "do_exit", "_exit"}

VM_SRC = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static double burn_ms;
__attribute__((noinline)) unsigned long vm_burn(double ms) {
        double end = now() + ms / 1000.0;
        unsigned long x = 1;
        while (now() < end)
                for (int i = 0; i < 20000; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
        return x;
}
__attribute__((noinline)) unsigned long vm_deep(int n) {
        volatile char pad[24];
        pad[0] = (char)n;
        unsigned long r = n ? vm_deep(n - 1) : vm_burn(burn_ms);
        return r + pad[0];
}
static int child_main(void *arg) { _exit(vm_deep((int)(long)arg) == 42); }
int main(int argc, char **argv) {
        int n = atoi(argv[1]);
        burn_ms = atof(argv[2]);
        long depth = atol(argv[3]);
        size_t size = 256 * 1024;
        char *stack = malloc(size);
        if (!stack) return 1;
        /* the children run on this executable's unwind table: give its build (right after this
         * exec) a head start, so the samples measure the sharing, not the table's latency */
        usleep(500 * 1000);
        for (int i = 0; i < n; i++) {
                /* posix_spawn's clone: the parent waits until the child execs or exits */
                pid_t c = clone(child_main, stack + size, CLONE_VM | CLONE_VFORK | SIGCHLD, (void *)depth);
                if (c < 0) return 1;
                printf("%d\n", (int)c);
                fflush(stdout);
                waitpid(c, NULL, 0);
        }
        return 0;
}
"""

SRC = r"""
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
__attribute__((noinline)) unsigned long fc_burn(double ms) {
        double end = now() + ms / 1000.0;
        unsigned long x = 1;
        while (now() < end)
                for (int i = 0; i < 20000; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
        return x;
}
int main(int argc, char **argv) {
        int n = atoi(argv[1]);
        double ms = atof(argv[2]);
        for (int i = 0; i < n; i++) {
                pid_t c = fork();
                if (c < 0) return 1;
                if (c == 0) _exit(fc_burn(ms) == 42);
                printf("%d\n", (int)c);
                fflush(stdout);
                waitpid(c, NULL, 0);
        }
        return 0;
}
"""


def main():
    require_bpf()
    d = tmpdir()
    exe = cc(SRC, os.path.join(d, "fork-children"), flags=("-O2", "-fno-omit-frame-pointer", "-g"))
    vm_exe = cc(VM_SRC, os.path.join(d, "vm-children"), flags=("-O2", "-fomit-frame-pointer", "-g"))
    out = os.path.join(d, "children.txt")
    vm_out = os.path.join(d, "vm-children.txt")

    with Daemon("--frequency", str(FREQUENCY), "--labels", "comm,pid") as dm:
        time.sleep(2)  # start-up scan and its table builds
        seconds = int(1 + CHILDREN * BURN_MS / 1000.0 + 2)
        with open(out, "w") as f:
            parent = subprocess.Popen([exe, str(CHILDREN), str(BURN_MS)], stdout=f)
            path = fetch_profile(dm, seconds)
            parent.wait()
        seconds = int(1 + VM_CHILDREN * BURN_MS / 1000.0 + 2)
        with open(vm_out, "w") as f:
            parent = subprocess.Popen([vm_exe, str(VM_CHILDREN), str(BURN_MS), str(DEPTH)], stdout=f)
            vm_path = fetch_profile(dm, seconds)
            parent.wait()
        _, _, metrics = dm.get("/metrics")

    with open(out) as f:
        children = {int(l) for l in f if l.strip()}
    named = collections.Counter()
    total = collections.Counter()
    unnamed = collections.Counter()
    fork_exit = 0
    for tr in traces(path):
        pid = int(tr.labels.get("pid", ["0"])[0] or 0)
        if pid not in children:
            continue
        if any(f in FORK_EXIT for f in tr.frames):
            # the child returning from fork or exiting: its own time outside fc_burn
            fork_exit += tr.value
            continue
        total[pid] += tr.value
        if "fc_burn" in tr.frames:
            named[pid] += tr.value
        else:
            unnamed[";".join(tr.frames)] += tr.value
    n, c = sum(total.values()), sum(named.values())
    log("children %d, sampled %d; samples %d, naming fc_burn %d; %d more in fork's return or exit"
        % (len(children), len(total), n, c, fork_exit))
    for stack, k in unnamed.most_common(5):
        log("  without fc_burn x%d: %s" % (k, stack))
    values = {}
    for l in metrics.decode().splitlines():
        if l.startswith(("profd_process_table_fork_copies_total", "profd_proc_tracker_forks_copied_total",
                         "profd_proc_tracker_forks_shared_total", "profd_bpf_shared_mm_samples_total")):
            log("  " + l)
            values[l.split()[0]] = float(l.split()[1])

    with open(vm_out) as f:
        vm_children = {int(l) for l in f if l.strip()}
    vm_total = vm_whole = not_ready = vm_exit = 0
    broken = collections.Counter()
    for tr in traces(vm_path):
        pid = int(tr.labels.get("pid", ["0"])[0] or 0)
        if pid not in vm_children:
            continue
        if any(f.startswith("[unwind stopped: unwind table not ready") for f in tr.frames):
            # before the parent's table is built (exec-ready measures that latency), not sharing
            not_ready += tr.value
            continue
        if any(f in FORK_EXIT for f in tr.frames):
            # the child exiting: its own time outside vm_burn (after exit_mm() it has no user stack)
            vm_exit += tr.value
            continue
        vm_total += tr.value
        deep = tr.frames.count("vm_deep")
        if ("vm_burn" in tr.frames and deep == DEPTH + 1 and "child_main" in tr.frames
                and not any(f.startswith("[unwind stopped") for f in tr.frames)
                and tr.frames[-1] in ("clone", "__clone", "clone3", "__clone3", "__clone_internal")):
            vm_whole += tr.value
        else:
            broken[";".join(reversed(tr.frames))] += tr.value
    log("shared-memory children %d; samples %d, whole stacks %d; %d more before the parent's table was ready, "
        "%d more in exit" % (len(vm_children), vm_total, vm_whole, not_ready, vm_exit))
    for stack, k in broken.most_common(5):
        log("  not whole x%d: %s" % (k, stack))
    check(len(children) == CHILDREN, "%d children forked" % len(children))
    check(n >= 60, "enough samples of the children (%d)" % n)
    check(n and c / n >= 0.95, ">= 95%% of the children's samples name fc_burn: %d/%d = %.1f%%"
          % (c, n, 100.0 * c / max(n, 1)))
    check(len(vm_children) == VM_CHILDREN, "%d shared-memory children made" % len(vm_children))
    check(not_ready <= vm_total, "most samples came after the parent's table was ready (%d before)" % not_ready)
    check(vm_total >= 30, "enough samples of the shared-memory children (%d)" % vm_total)
    check(vm_total and vm_whole / vm_total >= 0.95,
          ">= 95%% of the shared-memory children's samples are whole down to clone: %d/%d = %.1f%%"
          % (vm_whole, vm_total, 100.0 * vm_whole / max(vm_total, 1)))
    check(values.get("profd_proc_tracker_forks_shared_total", 0) >= VM_CHILDREN,
          "forks sharing memory counted (%d)" % values.get("profd_proc_tracker_forks_shared_total", 0))
    check(values.get("profd_bpf_shared_mm_samples_total", 0) > 0,
          "their samples unwound with the parent's entries (%d)" % values.get("profd_bpf_shared_mm_samples_total", 0))
    finish()


if __name__ == "__main__":
    main()
