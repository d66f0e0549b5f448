#!/usr/bin/env python3
"""Past windows (?start=, ?end=) are served at once from the history, over real HTTP.

A process burns CPU only during [1, 3) s after a base instant. Once that is over, profd is asked
for windows that already ended:

    P  [0, 4)   covers the burst              -> all of its samples (CPU time x frequency)
    Q  [5, 8)   after it, disjoint            -> none of them
    R  [0, 2) and [2, 4), consecutive        -> they meet at one boundary and together hold
                                                 exactly P's samples (no gap, no double count)

as unix seconds and as RFC 3339, for pprof and for folded stacks; each answer comes at once and
says the window it served (X-Profd-Window-Start/End, pprof time and duration). Then the errors:
malformed times, a window in the future, one older than the history (the answer names the range
held), contradictory parameters."""
import datetime
import os
import re
import subprocess
import time

from profdtest import Daemon, cc, check, finish, log, require_bpf, tmpdir, traces

SPIN_SRC = r"""
#include <stdlib.h>
#include <time.h>
volatile unsigned long sink;
static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}
__attribute__((noinline)) void profd_past_spin(void)
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
                profd_past_spin();
        return 0;
}
"""

FREQ = 99
MAX_SECONDS = 10


def rfc3339(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(s):
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{9})Z$", s or "")
    if not m:
        return None
    t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return t.timestamp() + int(m.group(2)) / 1e9


def spin_samples(path, pid):
    return sum(t.value for t in traces(path) if t.labels.get("pid") == [str(pid)])


def past(d, query, name):
    """GET a past window: (status, served start, served end, body, seconds taken, path)."""
    t0 = time.time()
    st, hdr, body = d.get("/debug/pprof/profile?" + query, timeout=60)
    took = time.time() - t0
    path = os.path.join(tmpdir(), name + ".pb.gz")
    with open(path, "wb") as f:
        f.write(body)
    return (st, parse_rfc3339(hdr.get("x-profd-window-start")), parse_rfc3339(hdr.get("x-profd-window-end")),
            body, took, path)


def main():
    require_bpf()
    work = tmpdir()
    prog = cc(SPIN_SRC, os.path.join(work, "past-spin"), ["-O1", "-fno-omit-frame-pointer"])

    with Daemon("--frequency", str(FREQ), "--max-seconds", str(MAX_SECONDS)) as d:
        base = time.time() + 1.0
        p = subprocess.Popen([prog, "%.6f" % (base + 1), "%.6f" % (base + 3)])
        _, _, ru = os.wait4(p.pid, 0)
        cpu = ru.ru_utime + ru.ru_stime
        # A second burst inside Q (which starts at base + 5): a quiet host may have no other samples.
        qb = subprocess.Popen([prog, "%.6f" % (base + 5.5), "%.6f" % (base + 6.5)])
        qb.wait()
        # Everything asked below has ended (Q ends at base + 8).
        time.sleep(max(0, base + 8.3 - time.time()))

        st, s0, s1, body, took, p_path = past(d, "start=%.3f&end=%.3f" % (base, base + 4), "P")
        check(st == 200 and body[:2] == b"\x1f\x8b", "P (unix seconds) is served as gzipped pprof (%d, %d bytes)"
              % (st, len(body)))
        # Not a speed check: a 4 s window served before 4 s have passed was not waited for.
        check(took < 3.5, "P is answered at once (%.2f s), not after waiting its length" % took)
        check(s0 is not None and s1 is not None, "P states the window served (X-Profd-Window-Start/End)")
        if s0 is not None and s1 is not None:
            log("P asked [%.3f, %.3f), served [%.3f, %.3f)" % (base, base + 4, s0, s1))
            check(abs(s0 - base) <= 1.0 and abs(s1 - (base + 4)) <= 1.0,
                  "P's served window is the one asked moved to interval boundaries")
            r = subprocess.run(["go", "tool", "pprof", "-symbolize=none", "-raw", p_path], capture_output=True,
                               text=True)
            dur = re.search(r"^Duration: ([0-9.]+)", r.stdout, re.M)
            check(dur is not None and abs(float(dur.group(1)) - (s1 - s0)) < 0.01,
                  "the profile's duration is the served window's (%s vs %.3f)" % (dur and dur.group(1), s1 - s0))
        n_p = spin_samples(p_path, p.pid)
        expected = cpu * FREQ
        log("burst: %.2f s CPU, %d samples in P (expected ~%.0f)" % (cpu, n_p, expected))
        check(n_p > 0 and abs(n_p - expected) <= 0.25 * expected + 5,
              "P holds the burst's samples: CPU time x frequency (%d vs %.0f)" % (n_p, expected))

        st, q0, q1, body, _, q_path = past(d, "start=%s&seconds=3" % rfc3339(base + 5), "Q")
        check(st == 200, "Q (RFC 3339 start, seconds=3) is served (%d, %d bytes)" % (st, len(body)))
        check(q0 is not None and q0 > base + 3, "Q's served window starts after the burst (%s)" % q0)
        check(st == 200 and spin_samples(q_path, p.pid) == 0, "Q (after the burst) holds none of its samples")
        n_r = spin_samples(q_path, qb.pid) if st == 200 else 0
        check(n_r > 0, "Q holds the second burst, inside it (%d samples)" % n_r)

        # The same window asked by its end, with an offset ('+' sent as %2B).
        local = datetime.datetime.fromtimestamp(base + 4, datetime.timezone(datetime.timedelta(hours=2)))
        st, e0, e1, _, _, e_path = past(
            d, "end=%s&seconds=4" % local.strftime("%Y-%m-%dT%H:%M:%S.%f%%2B02:00"), "P-by-end")
        check(st == 200 and (e0, e1) == (s0, s1) and spin_samples(e_path, p.pid) == n_p,
              "end=RFC 3339 with an offset, seconds=4 serves exactly P")

        st1, a0, a1, _, _, r1 = past(d, "start=%.3f&end=%.3f" % (base, base + 2), "R1")
        st2, b0, b1, _, _, r2 = past(d, "start=%.3f&end=%.3f" % (base + 2, base + 4), "R2")
        check(st1 == 200 and st2 == 200 and a1 == b0 and (a0, b1) == (s0, s1),
              "consecutive windows meet at one boundary and span P ([%s, %s) + [%s, %s))" % (a0, a1, b0, b1))
        n1, n2 = spin_samples(r1, p.pid), spin_samples(r2, p.pid)
        check(n1 + n2 == n_p and n1 > 0 and n2 > 0,
              "consecutive windows hold exactly P's burst samples between them (%d + %d vs %d)" % (n1, n2, n_p))

        st, hdr, body = d.get("/debug/pprof/profile?start=%.3f&seconds=4&format=folded" % base)
        text = body.decode(errors="replace")
        check(st == 200 and "profd_past_spin" in text, "format=folded serves the past window too")
        st, hdr, body = d.get("/debug/pprof/flamegraph?start=%.3f&seconds=4" % base)
        check(st == 200 and parse_rfc3339(hdr.get("x-profd-window-start")) == s0, "the flame graph serves it too")

        # Errors: 400, one line, X-Go-Pprof, saying what is wrong.
        now = time.time()
        bad = [
            ("start=yesterday", "not a time"),
            ("start=2026-13-01T00:00:00Z", "not a time"),
            ("start=2026-02-30T00:00:00Z", "not a time"),
            ("end=12:00", "not a time"),
            ("start=%.0f&seconds=2" % (now + 60), "future"),
            ("start=%.0f&seconds=5" % (now - 2), "future"),
            ("start=%.0f&seconds=2" % (now - 100000), "older than the history kept"),
            ("start=%s" % rfc3339(base - 3600), "older than the history kept"),
            ("start=%.0f&end=%.0f" % (base + 2, base + 1), "after start"),
            ("start=%.0f&end=%.0f&seconds=1" % (base, base + 1), "two of"),
            ("start=%.0f&end=%.0f" % (base, base + MAX_SECONDS + 5), "--max-seconds"),
        ]
        for query, words in bad:
            st, hdr, body = d.get("/debug/pprof/profile?" + query)
            text = body.decode(errors="replace")
            check(st == 400 and hdr.get("x-go-pprof") == "1" and text.count("\n") == 1 and words in text,
                  "%s -> 400 '%s' (got %d %r)" % (query, words, st, text))
        st, _, body = d.get("/debug/pprof/profile?start=%.0f&seconds=2" % (now - 100000))
        m = re.search(r"available from (\S+) to (\S+)$", body.decode().strip())
        lo, hi = (parse_rfc3339(m.group(1)), parse_rfc3339(m.group(2))) if m else (None, None)
        check(lo is not None and hi is not None and lo <= base and hi >= base + 8 and hi <= time.time() + 1,
              "the answer names the history held, which covers the windows served (%s)" % body.decode().strip())
        st, _, _ = d.get("/healthz")
        check(st == 200, "daemon still healthy")
    finish()


if __name__ == "__main__":
    main()
