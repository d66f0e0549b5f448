#!/usr/bin/env python3
"""The first scrape after start, with many processes on the host, is complete and correct.

profd symbolizes the stacks a window already holds while the window is still open (the symbol
warmer), so that the build at its end has little left to do. This checks what that must not change,
on the very first request of a fresh daemon with 100 extra processes running a small program (half
of them from a copy of their own)
(not a timing check: bench/first-scrape.py measures the time):

- every extra process that ran is in the profile, under its own pid, with its function named
  (first_scrape_busy);
- the same window asked again from the history (?start=&end=, same window) gives exactly the same
  samples per process: the warmer changed nothing but when the work was done;
- the warmer ran during the window (profd_symbol_warmer_* on /metrics) and only then: an idle
  daemon does no warming."""
import os
import re
import signal
import subprocess
import time

from profdtest import Daemon, cc, check, finish, log, require_bpf, tmpdir, traces

BUSY_SRC = r"""
#include <time.h>
#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) void first_scrape_busy(void)
{
        struct timespec a, b;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        do {
                for (int i = 0; i < 10000; i++)
                        sink += i;
                clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        } while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 4000000L);
}
int main(void)
{
        for (;;) {
                first_scrape_busy();
                usleep(400000);
        }
}
"""

N = 100
FREQ = 99
SECONDS = 8


def metric(text, name):
    m = re.search(r"^%s ([0-9.eE+-]+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    require_bpf()
    work = tmpdir()
    busy = cc(BUSY_SRC, os.path.join(work, "fs-busy"), ["-O1", "-fno-omit-frame-pointer"])
    # Half of them run their own copy: more files to read and symbolize on the first build.
    procs = []
    try:
        for i in range(N):
            exe = busy
            if i % 2:
                exe = os.path.join(work, "fs-busy-%03d" % i)
                subprocess.run(["cp", busy, exe], check=True)
            procs.append(subprocess.Popen([exe]))
        time.sleep(1.0)
        with Daemon("--frequency", str(FREQ), "--max-seconds", "30") as d:
            _, _, body = d.get("/metrics")
            idle = metric(body.decode(), "profd_symbol_warmer_samples_total")
            check(idle == 0, "an idle daemon warms nothing (profd_symbol_warmer_samples_total %s)" % idle)

            before = {p.pid: cpu_seconds(p.pid) for p in procs}
            st, hdr, body = d.get("/debug/pprof/profile?seconds=%d" % SECONDS, timeout=SECONDS + 60)
            after = {p.pid: cpu_seconds(p.pid) for p in procs}
            check(st == 200, "the first scrape is served (%d)" % st)
            first = os.path.join(work, "first.pb.gz")
            with open(first, "wb") as f:
                f.write(body)
            _, _, mbody = d.get("/metrics")
            mtext = mbody.decode()
            warmed = metric(mtext, "profd_symbol_warmer_samples_total")
            frames = metric(mtext, "profd_symbol_warmer_frames_total")
            log("warmer: %s samples, %s frames, longest step %s s" % (
                warmed, frames, metric(mtext, "profd_symbol_warmer_step_max_seconds")))
            check(warmed and warmed > 0 and frames and frames > 0, "the warmer ran while the window was open")

            # The same window again, from the history: built with every cache warm.
            st2, _, body2 = d.get("/debug/pprof/profile?start=%s&end=%s" % (
                hdr.get("x-profd-window-start"), hdr.get("x-profd-window-end")), timeout=60)
            check(st2 == 200, "the same window is served again from the history (%d)" % st2)
            again = os.path.join(work, "again.pb.gz")
            with open(again, "wb") as f:
                f.write(body2)

            _, _, mbody = d.get("/metrics")
            time.sleep(1.5)
            _, _, mbody2 = d.get("/metrics")
            check(metric(mbody.decode(), "profd_symbol_warmer_samples_total") ==
                  metric(mbody2.decode(), "profd_symbol_warmer_samples_total"),
                  "no warming once no window is open")

        pids = {str(p.pid) for p in procs}
        per_pid, named, per_pid2 = {}, {}, {}
        for t in traces(first):
            pid = (t.labels.get("pid") or [""])[0]
            if pid in pids:
                per_pid[pid] = per_pid.get(pid, 0) + t.value
                if "first_scrape_busy" in t.frames:
                    named[pid] = named.get(pid, 0) + t.value
        for t in traces(again):
            pid = (t.labels.get("pid") or [""])[0]
            if pid in pids:
                per_pid2[pid] = per_pid2.get(pid, 0) + t.value
        # >= 3 sampling periods of CPU: in the profile but for bad luck (e^-3 = 5 %).
        ran = [p for p in procs if after[p.pid] - before[p.pid] >= 3.0 / FREQ]
        seen = [p for p in ran if str(p.pid) in per_pid]
        log("%d of %d processes used >= %.0f ms of CPU in the window; %d of those are in the profile" %
            (len(ran), N, 3000.0 / FREQ, len(seen)))
        check(len(ran) >= N // 4 and len(seen) >= 0.8 * len(ran),
              "the processes that ran are in the first profile (%d of %d)" % (len(seen), len(ran)))
        total = sum(per_pid.values())
        named_total = sum(named.values())
        check(total > 0 and named_total >= 0.9 * total,
              "their samples are symbolized: first_scrape_busy in %d of %d" % (named_total, total))
        # (Sample counts against CPU time are e2e-windows' and past-windows' business.)
        log("%d samples of the extra processes, %.2f s of their CPU time" % (
            total, sum(after[p.pid] - before[p.pid] for p in procs)))
        check(per_pid == per_pid2, "the same window from the history has exactly the same samples per process")
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
        for p in procs:
            p.wait()
    finish()


if __name__ == "__main__":
    main()
