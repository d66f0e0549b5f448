#!/usr/bin/env python3
"""Short-lived forked children are symbolized from their parent's snapshot: a program started
after profd forks 120 children one after the other; each burns ~25 ms of CPU in fc_burn() and
exits without exec'ing. Nothing ever reads a child's /proc/PID/maps (the tracker copies the
parent's unwind entries at fork), so before the process table copied the parent's snapshot at fork
the children's frames came out as unnamed addresses. Checks, from the pprof fetched over HTTP and
read with `go tool pprof -traces`: >= 95% of the children's samples name fc_burn."""
import collections
import os
import re
import subprocess
import time

from profdtest import Daemon, cc, check, fetch_profile, finish, log, require_bpf, tmpdir, traces

CHILDREN = 120
BURN_MS = 25
FREQUENCY = 99

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
    out = os.path.join(d, "children.txt")

    with Daemon("--frequency", str(FREQUENCY), "--labels", "comm,pid") as dm:
        time.sleep(2)  # start-up scan and its table builds
        seconds = int(1 + CHILDREN * BURN_MS / 1000.0 + 2)
        with open(out, "w") as f:
            parent = subprocess.Popen([exe, str(CHILDREN), str(BURN_MS)], stdout=f)
            path = fetch_profile(dm, seconds)
            parent.wait()
        _, _, metrics = dm.get("/metrics")

    with open(out) as f:
        children = {int(l) for l in f if l.strip()}
    named = collections.Counter()
    total = collections.Counter()
    unnamed = collections.Counter()
    for tr in traces(path):
        pid = int(tr.labels.get("pid", ["0"])[0] or 0)
        if pid not in children:
            continue
        total[pid] += tr.value
        if "fc_burn" in tr.frames:
            named[pid] += tr.value
        else:
            unnamed[";".join(tr.frames)] += tr.value
    n, c = sum(total.values()), sum(named.values())
    log("children %d, sampled %d; samples %d, naming fc_burn %d" % (len(children), len(total), n, c))
    for stack, k in unnamed.most_common(5):
        log("  without fc_burn x%d: %s" % (k, stack))
    for l in metrics.decode().splitlines():
        if l.startswith(("profd_process_table_fork_copies_total", "profd_proc_tracker_forks_copied_total")):
            log("  " + l)
    check(len(children) == CHILDREN, "%d children forked" % len(children))
    check(n >= 60, "enough samples of the children (%d)" % n)
    check(n and c / n >= 0.95, ">= 95%% of the children's samples name fc_burn: %d/%d = %.1f%%"
          % (c, n, 100.0 * c / max(n, 1)))
    finish()


if __name__ == "__main__":
    main()
