#!/usr/bin/env python3
"""Two overlapping profile requests each contain exactly the samples of their own window.

Request A covers [0 s, 4 s), request B [1.5 s, 3.5 s) (times from A's start). Four processes burn
CPU only between fixed wall-clock instants:

    X  [0.3, 1.2)   inside A only           -> in A, never in B
    Y  [1.8, 3.2)   inside both             -> exactly the same samples in A and in B
    Z  [5.0, 5.6)   after both              -> in neither
    W  [0.3, 3.7)   across B's edges        -> more in A than in B

The checks are exact (zero, equal), so they hold however loaded the host is. Y's sample count is
also compared with its CPU time (rusage) times the frequency, and each profile's own time and
duration (pprof time_nanos, duration_nanos) with when it was requested."""
import datetime
import os
import re
import subprocess
import threading
import time

from profdtest import Daemon, cc, check, fetch_profile, finish, log, pprof, require_bpf, tmpdir, traces

PHASE_SRC = r"""
#include <stdlib.h>
#include <time.h>
volatile unsigned long sink;
static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}
__attribute__((noinline)) void profd_phase_spin(void)
{
        for (int i = 0; i < 20000; i++)
                sink += i;
        __asm__ volatile("");
}
/* Sleeps until START, burns CPU until END (CLOCK_REALTIME seconds), exits. */
int main(int argc, char **argv)
{
        double start = atof(argv[1]), end = atof(argv[2]);
        struct timespec ts = { .tv_sec = (time_t)start, .tv_nsec = (long)((start - (time_t)start) * 1e9) };
        while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) != 0)
                ;
        while (now() < end)
                profd_phase_spin();
        return 0;
}
"""

FREQ = 99


def window_of(path):
    """(start, duration) in seconds from the profile's header, as go tool pprof -raw prints it."""
    out = pprof("-raw", path).stdout
    t = re.search(r"^Time: (\d+-\d+-\d+ \d+:\d+:\d+)\.(\d+) \+0000 UTC$", out, re.M)
    dur = re.search(r"^Duration: ([0-9.]+)$", out, re.M)
    if not t or not dur:
        return None, None
    start = datetime.datetime.strptime(t.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return start.timestamp() + float("0." + t.group(2)), float(dur.group(1))
# Z starts a second after A's end: a window's end is cut by a timer on the daemon's loop, which may
# run late if something stalls the loop; that lateness is measured separately below.
PHASES = {"X": (0.3, 1.2), "Y": (1.8, 3.2), "Z": (5.0, 5.6), "W": (0.3, 3.7)}


def main():
    require_bpf()
    work = tmpdir()
    prog = cc(PHASE_SRC, os.path.join(work, "e2e-phase"), ["-O1", "-fno-omit-frame-pointer"])

    with Daemon("--frequency", str(FREQ)) as d:
        base = time.time() + 1.0
        procs = {n: subprocess.Popen([prog, "%.6f" % (base + a), "%.6f" % (base + b)]) for n, (a, b) in PHASES.items()}
        results = {}

        def request(name, at, seconds):
            time.sleep(max(0, base + at - time.time()))
            results[name] = fetch_profile(d, seconds)

        ta = threading.Thread(target=request, args=("A", 0, 4))
        tb = threading.Thread(target=request, args=("B", 1.5, 2))
        ta.start()
        tb.start()
        rusage = {}
        for n, p in procs.items():
            _, _, ru = os.wait4(p.pid, 0)
            rusage[n] = ru.ru_utime + ru.ru_stime
        ta.join()
        tb.join()

        counts = {}
        for r in ("A", "B"):
            ts = traces(results[r])
            for n, p in procs.items():
                counts[r, n] = sum(t.value for t in ts if t.labels.get("pid") == [str(p.pid)])
        for n in PHASES:
            log("%s %s: %d samples in A, %d in B; %.2f s CPU" % (n, PHASES[n], counts["A", n], counts["B", n], rusage[n]))

        for r, at, seconds in (("A", 0, 4), ("B", 1.5, 2)):
            start, dur = window_of(results[r])
            if start is None:
                check(False, "profile %s has time and duration" % r)
                continue
            log("%s: window starts %.3f s after it was requested, lasts %.2f s (asked %d s)"
                % (r, start - (base + at), dur, seconds))
            # The end is cut by a timer on the daemon's loop: never early; late only by however long
            # something held the loop, which must stay well under a drain interval.
            check(seconds - 0.02 <= dur <= seconds + 1.0, "%s lasts %d s (%.2f s)" % (r, seconds, dur))
            check(-0.05 <= start - (base + at) <= 0.5, "%s starts when it was requested" % r)

        check(counts["A", "X"] > 0, "X (busy only before B started) is in A")
        check(counts["B", "X"] == 0, "X is not in B (B holds nothing from before its window)")
        check(counts["A", "Y"] > 0 and counts["A", "Y"] == counts["B", "Y"],
              "Y (busy only inside both windows) has exactly the same samples in A and B (%d, %d)"
              % (counts["A", "Y"], counts["B", "Y"]))
        check(counts["A", "Z"] == 0 and counts["B", "Z"] == 0, "Z (busy only after both windows) is in neither")
        check(counts["A", "W"] > counts["B", "W"] > 0, "W (busy across B's edges) has more samples in A than in B")
        expected = rusage["Y"] * FREQ
        # Timer-driven sampling attributes whole periods: a few samples either way, more when the
        # host has more runnable threads than CPUs.
        check(abs(counts["B", "Y"] - expected) <= 0.25 * expected + 5,
              "Y's samples match its CPU time x frequency (%d vs %.0f)" % (counts["B", "Y"], expected))
    finish()


if __name__ == "__main__":
    main()
