#!/usr/bin/env python3
"""Off-CPU accuracy (--off-cpu, /debug/pprof/offcpu): a program whose threads wait in known call
chains - nanosleep, a pipe read, a mutex another thread holds, pread of a file whose page cache is
dropped before every read, and the threads that feed them - runs under profd. Per thread, the
off-CPU time the profile reports for the window is within +-10% of the truth (the window's length
minus the CPU time /proc/PID/task/TID/schedstat gives the thread over it), and >= 95% of it is
attributed to the thread's own chain. The waits are shorter and longer than the threshold, so both
the always-unwound and the sampled-and-weighted paths are checked, and one thread's 4 s sleeps span
the window's ends: only their part within the window counts. Without --off-cpu the endpoint
answers 503."""
import os
import re
import subprocess
import time

from profdtest import (Daemon, cc, check, finish, log, pprof, require_bpf, skip, tmpdir, traces)

# The page-cache thread's waits are short and few, most of them sampled and weighted: its estimate
# spread -3..+9% over 6 s windows and once -12% (CI, 2026-11-29); 10 s holds more of them.
SECONDS = 10
TOLERANCE = 0.10
ATTRIBUTED = 0.95

PROGRAM = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int pipefd[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const char *file_path;
static volatile unsigned long sink;

static void nap(long ns)
{
        struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
        nanosleep(&ts, NULL);
}

/* Each chain: THREAD_outer -> THREAD_leaf -> the blocking call. */
__attribute__((noinline)) void offcpu_sleep_leaf(void) { nap(10 * 1000000L); sink++; }
__attribute__((noinline)) void offcpu_sleep_outer(void) { offcpu_sleep_leaf(); sink++; }
static void *sleeper(void *a) { pthread_setname_np(pthread_self(), "t-sleep"); for (;;) offcpu_sleep_outer(); }

/* Waits of 4 s, longer than a cut interval: a window holds only the part within it. */
__attribute__((noinline)) void offcpu_long_leaf(void) { nap(4000 * 1000000L); sink++; }
__attribute__((noinline)) void offcpu_long_outer(void) { offcpu_long_leaf(); sink++; }
static void *longer(void *a) { pthread_setname_np(pthread_self(), "t-long"); for (;;) offcpu_long_outer(); }

/* Waits of ~0.1 ms, far below the threshold: unwound with probability ~0.1 and weighted. */
__attribute__((noinline)) void offcpu_short_leaf(void) { nap(50 * 1000L); sink++; }
__attribute__((noinline)) void offcpu_short_outer(void) { offcpu_short_leaf(); sink++; }
static void *shorty(void *a) { pthread_setname_np(pthread_self(), "t-short"); for (;;) offcpu_short_outer(); }

__attribute__((noinline)) void offcpu_writer_leaf(void) { nap(2 * 1000000L); if (write(pipefd[1], "x", 1) != 1) abort(); }
__attribute__((noinline)) void offcpu_writer_outer(void) { offcpu_writer_leaf(); sink++; }
static void *writer(void *a) { pthread_setname_np(pthread_self(), "t-writer"); for (;;) offcpu_writer_outer(); }

__attribute__((noinline)) void offcpu_pipe_leaf(void) { char c; if (read(pipefd[0], &c, 1) != 1) abort(); }
__attribute__((noinline)) void offcpu_pipe_outer(void) { offcpu_pipe_leaf(); sink++; }
static void *reader(void *a) { pthread_setname_np(pthread_self(), "t-pipe"); for (;;) offcpu_pipe_outer(); }

__attribute__((noinline)) void offcpu_holder_leaf(void) { nap(20 * 1000000L); }
__attribute__((noinline)) void offcpu_holder_outer(void)
{
        pthread_mutex_lock(&lock);
        offcpu_holder_leaf();
        pthread_mutex_unlock(&lock);
        nap(300 * 1000L); /* the waiter's turn (attributed to the holder's outer frame) */
}
static void *holder(void *a) { pthread_setname_np(pthread_self(), "t-holder"); for (;;) offcpu_holder_outer(); }

__attribute__((noinline)) void offcpu_mutex_leaf(void) { pthread_mutex_lock(&lock); pthread_mutex_unlock(&lock); }
__attribute__((noinline)) void offcpu_mutex_outer(void) { offcpu_mutex_leaf(); nap(100 * 1000L); }
static void *waiter(void *a) { pthread_setname_np(pthread_self(), "t-mutex"); for (;;) offcpu_mutex_outer(); }

__attribute__((noinline)) void offcpu_pcache_leaf(int fd, off_t off)
{
        char buf[4096];
        /* Dropped first, so the read waits for the disk. */
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        if (pread(fd, buf, sizeof(buf), off) != (ssize_t)sizeof(buf)) abort();
        sink += buf[0];
}
__attribute__((noinline)) void offcpu_pcache_outer(int fd, off_t off) { offcpu_pcache_leaf(fd, off); sink++; }
static void *pcache(void *a)
{
        int fd = open(file_path, O_RDONLY);
        unsigned seed = 1;
        pthread_setname_np(pthread_self(), "t-pcache");
        if (fd < 0) abort();
        for (;;) offcpu_pcache_outer(fd, (off_t)(rand_r(&seed) % 4096) * 4096);
}

int main(int argc, char **argv)
{
        pthread_t t;
        void *(*fns[])(void *) = {sleeper, longer, shorty, writer, reader, holder, waiter, pcache};
        file_path = argv[1];
        if (pipe(pipefd) < 0) return 1;
        for (unsigned i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
                pthread_create(&t, NULL, fns[i], NULL);
        printf("ready\n");
        fflush(stdout);
        pause();
        return 0;
}
"""

# Thread name -> the function its waits must be attributed to.
CHAINS = {
    "t-sleep": "offcpu_sleep_leaf",
    "t-short": "offcpu_short_leaf",
    "t-long": "offcpu_long_leaf",
    "t-writer": "offcpu_writer_leaf",
    "t-pipe": "offcpu_pipe_leaf",
    "t-holder": "offcpu_holder_outer",
    "t-mutex": "offcpu_mutex_outer",
    "t-pcache": "offcpu_pcache_leaf",
}


def threads_of(pid):
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                name = f.read().strip()
        except OSError:
            continue
        if name in CHAINS:
            out[name] = int(tid)
    return out


def cpu_ns(pid, tid):
    with open("/proc/%d/task/%d/schedstat" % (pid, tid)) as f:
        return int(f.read().split()[0])


def window_of(path):
    """(start, duration) of the profile in seconds, from its header."""
    r = pprof("-raw", path)
    dur = re.search(r"^Duration: ([0-9.]+)", r.stdout, re.M)
    return float(dur.group(1)) if dur else None


def main():
    require_bpf()
    if not os.path.exists("/proc/self/schedstat"):
        skip("no /proc/PID/schedstat (kernel without CONFIG_SCHEDSTATS/SCHED_INFO): no truth to compare with")
    work = tmpdir()
    prog = cc(PROGRAM, os.path.join(work, "offcpu-waits"), flags=("-O1", "-g", "-fno-omit-frame-pointer",
                                                                    "-fno-inline", "-pthread"))
    data = os.path.join(work, "data")
    with open(data, "wb") as f:
        f.write(os.urandom(4096 * 4096))
    if subprocess.run(["stat", "-f", "-c", "%T", data], capture_output=True, text=True).stdout.strip() == "tmpfs":
        log("(the data file is on tmpfs: its reads never wait for a disk; checked all the same)")

    with Daemon("--labels", "comm,pid,tid,thread_name") as plain:
        st, _, body = plain.get("/debug/pprof/offcpu?seconds=1")
        check(st == 503 and b"--off-cpu" in body, "without --off-cpu, /debug/pprof/offcpu answers 503 naming the flag")

    # --comm: only the test program is recorded, whatever else the machine runs meanwhile (its maps
    # filling with other processes' waits is counted, but would make the figures here depend on it).
    with Daemon("--off-cpu", "--comm", "offcpu-waits", "--labels", "comm,pid,tid,thread_name") as d:
        p = subprocess.Popen([prog, data], stdout=subprocess.PIPE, text=True)
        try:
            check(p.stdout.readline().strip() == "ready", "the waiting program started")
            # Its unwind tables are in place, and t-long's first 4 s wait, unwound before they were
            # (frame pointers only), has ended.
            time.sleep(5)
            tids = threads_of(p.pid)
            check(len(tids) == len(CHAINS), "all %d threads found: %s" % (len(CHAINS), sorted(tids)))

            before = {n: cpu_ns(p.pid, t) for n, t in tids.items()}
            t0 = time.monotonic()
            st, _, body = d.get("/debug/pprof/offcpu?seconds=%d&pid=%d" % (SECONDS, p.pid), timeout=SECONDS + 120)
            t1 = time.monotonic()
            after = {n: cpu_ns(p.pid, t) for n, t in tids.items()}
            check(st == 200, "/debug/pprof/offcpu answers 200")
            path = os.path.join(work, "offcpu.pb.gz")
            with open(path, "wb") as f:
                f.write(body)
        finally:
            p.kill()
            p.wait()

        r = pprof("-raw", path)
        check("samples/count off_cpu/nanoseconds" in r.stdout, "sample types are samples/count and off_cpu/nanoseconds")
        window = window_of(path)
        check(window and abs(window - SECONDS) < 1.5, "the window lasts about %d s (%s)" % (SECONDS, window))
        trs = traces(path, sample_index="off_cpu")
        check(len(trs) > 0, "the off-CPU profile has samples")
        states = {s for t in trs for s in t.labels.get("state", [])}
        check(states <= {"blocked", "preempted"} and "blocked" in states, "state labels: %s" % sorted(states))

        span = (t1 - t0)
        for name, fn in sorted(CHAINS.items()):
            tid = tids[name]
            mine = [t for t in trs if t.labels.get("thread_id", t.labels.get("tid", [""]))[0] == str(tid)]
            total = sum(t.value for t in mine)
            right = sum(t.value for t in mine if any(fn in f for f in t.frames))
            cpu_rate = (after[name] - before[name]) / (span * 1e9)
            truth = window * 1e9 * (1 - cpu_rate)
            log("%-9s tid %d: reported %.3f s off CPU, truth %.3f s (on CPU %.1f%%), %.1f%% in %s (%d stacks)" %
                (name, tid, total / 1e9, truth / 1e9, 100 * cpu_rate, 100 * right / total if total else 0, fn,
                 len(mine)))
            if abs(total - truth) > TOLERANCE * truth / 2:
                for t in sorted(mine, key=lambda t: -t.value)[:4]:
                    log("    %.3f s %s %s" % (t.value / 1e9, t.labels.get("state"), ";".join(t.frames[:4])))
            check(abs(total - truth) <= TOLERANCE * truth,
                  "%s: off-CPU total %.3f s within %d%% of the truth %.3f s" %
                  (name, total / 1e9, TOLERANCE * 100, truth / 1e9))
            check(total > 0 and right >= ATTRIBUTED * total,
                  "%s: >= %d%% of its off-CPU time in %s (%.1f%%)" %
                  (name, ATTRIBUTED * 100, fn, 100 * right / total if total else 0))

        st, _, body = d.get("/metrics")
        log("".join(l + "\n" for l in body.decode().splitlines()
                    if re.match(r"^profd_(offcpu_|aggregator_offcpu|drain_missing|bpf_drops)", l)))
        m = re.search(r"^profd_offcpu_waits_recorded_total (\d+)", body.decode(), re.M)
        check(m and int(m.group(1)) > 0, "profd_offcpu_waits_recorded_total counts the waits")
        m = re.search(r'^profd_offcpu_skipped_total\{reason="sampled_out"\} (\d+)', body.decode(), re.M)
        check(m and int(m.group(1)) > 0, "short waits were sampled (profd_offcpu_skipped_total{reason=\"sampled_out\"})")
        # t-short's waits last >= 50 us each: its time was carried by a sample of them, weighted.
        short_ns = sum(t.value for t in trs if t.labels.get("thread_name", [""])[0] == "t-short")
        short_n = sum(t.value for t in traces(path, sample_index="samples")
                      if t.labels.get("thread_name", [""])[0] == "t-short")
        log("t-short: %d waits recorded for %.3f s off CPU (at most %d waits)" % (short_n, short_ns / 1e9, short_ns / 50e3))
        check(0 < short_n < 0.5 * short_ns / 50e3, "t-short's waits were sampled, not all unwound")
    finish()


if __name__ == "__main__":
    main()
