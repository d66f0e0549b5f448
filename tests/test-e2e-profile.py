#!/usr/bin/env python3
"""End to end: real BPF sampling, real HTTP, read with the real `go tool pprof`.

- a frame-pointer program with a known call chain: complete stacks, leaf first, named, labelled;
- `go tool pprof -top URL` fetching from profd itself;
- ?labels= overrides --labels for one request;
- kernel frames (below the user frames) for a syscall-heavy program;
- a process that exits in the middle of the window is still named."""
import os
import subprocess
import threading
import time

from profdtest import (Daemon, cc, check, fetch_profile, finish, log, pprof, require_bpf, skip, tmpdir,
                       traces)

CHAIN_SRC = r"""
#include <stdlib.h>
#include <time.h>

volatile unsigned long sink;

/* The empty asm after each call keeps the compiler from turning it into a tail jump, which would
 * drop the caller's frame from the chain this test expects. */
__attribute__((noinline)) void profd_e2e_leaf(void)
{
        for (int i = 0; i < 200000; i++)
                sink += (unsigned long)i * 7;
        __asm__ volatile("");
}
__attribute__((noinline)) void profd_e2e_level3(void) { profd_e2e_leaf(); __asm__ volatile(""); }
__attribute__((noinline)) void profd_e2e_level2(void) { profd_e2e_level3(); __asm__ volatile(""); }
__attribute__((noinline)) void profd_e2e_level1(void) { profd_e2e_level2(); __asm__ volatile(""); }

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
        double end = now() + atof(argv[1]);
        while (now() < end)
                profd_e2e_level1();
        return 0;
}
"""

SYSCALL_SRC = r"""
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 20];

__attribute__((noinline)) void profd_e2e_reader(int fd)
{
        /* Reading /dev/zero spends nearly all its time in the kernel clearing the buffer. */
        if (read(fd, buf, sizeof(buf)) < 0)
                exit(1);
        __asm__ volatile("");
}

int main(int argc, char **argv)
{
        int fd = open("/dev/zero", O_RDONLY);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double end = ts.tv_sec + ts.tv_nsec / 1e9 + atof(argv[1]);
        for (;;) {
                profd_e2e_reader(fd);
                clock_gettime(CLOCK_MONOTONIC, &ts);
                if (ts.tv_sec + ts.tv_nsec / 1e9 > end)
                        break;
        }
        return 0;
}
"""

# clang: gcc 12 ignores -mno-omit-leaf-frame-pointer for the leaf here, which would hide its caller.
CFLAGS = ["-O1", "-g", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer", "-fno-inline",
          "-fno-optimize-sibling-calls"]
COMPILER = "clang"
CHAIN = ["profd_e2e_leaf", "profd_e2e_level3", "profd_e2e_level2", "profd_e2e_level1", "main"]
# Present in the syscall path of every x86-64 kernel profd supports (6.1 and later).
KERNEL_SYSCALL_FRAMES = {"do_syscall_64", "entry_SYSCALL_64_after_hwframe", "entry_SYSCALL_64"}


def fetch_async(d, seconds, extra=""):
    """Starts a profile request now; returns a function that waits for and returns the path."""
    result = {}

    def run():
        try:
            result["path"] = fetch_profile(d, seconds, extra)
        except Exception as e:  # reported by the caller
            result["error"] = e

    t = threading.Thread(target=run)
    t.start()

    def wait():
        t.join()
        if "error" in result:
            raise result["error"]
        return result["path"]
    return wait


def of_pid(ts, pid):
    return [t for t in ts if t.labels.get("pid") == [str(pid)]]


def main():
    require_bpf()
    work = tmpdir()
    chain = cc(CHAIN_SRC, os.path.join(work, "e2e-chain"), CFLAGS, compiler=COMPILER)
    sysc = cc(SYSCALL_SRC, os.path.join(work, "e2e-syscall"), CFLAGS, compiler=COMPILER)
    short = os.path.join(work, "e2e-short")
    os.link(chain, short)  # same code, another comm

    with Daemon("--frequency", "99") as d:
        # 1. Known call chain, default labels (comm, pid).
        prog = subprocess.Popen([chain, "6"])
        time.sleep(0.3)
        path = fetch_profile(d, 3)
        prog.wait()
        ts = of_pid(traces(path), prog.pid)
        total = sum(t.value for t in ts)
        log("e2e-chain: %d samples in %d traces" % (total, len(ts)))
        # How much CPU it gets depends on the host's load; even a tenth of a CPU gives ~30 samples.
        check(total >= 10, "the busy frame-pointer program is sampled (%d samples in 3 s at 99 Hz)" % total)
        complete = sum(t.value for t in ts if t.frames[:len(CHAIN)] == CHAIN)
        if ts:
            log("most common stack: %s" % max(ts, key=lambda t: t.value).frames)
        check(total > 0 and complete >= 0.9 * total,
              "stacks are complete and leaf first (%s): %d of %d samples" % (" <- ".join(CHAIN), complete, total))
        # Invariant: complete to the entry point, or visibly marked where the unwinder stopped.
        ended = sum(t.value for t in ts if t.frames and (t.frames[-1] == "_start" or t.frames[-1].startswith("[")))
        to_start = sum(t.value for t in ts if t.frames and t.frames[-1] == "_start")
        log("%d of %d samples unwind to _start" % (to_start, total))
        check(ended == total, "every stack ends at _start or at a visible '[...]' marker")
        check(all(t.labels.get("comm") == ["e2e-chain"] for t in ts), "every sample carries comm=e2e-chain")
        check(all(set(t.labels) == {"comm", "pid"} for t in ts), "default labels are exactly comm and pid")

        # 2. go tool pprof fetching from profd itself, as a user runs it: it symbolizes what profd
        # left unnamed (stripped system binaries) locally and asks profd's /debug/pprof/symbol.
        prog = subprocess.Popen([chain, "4"])
        r = pprof("-top", d.base + "/debug/pprof/profile?seconds=2", check_rc=False, symbolize=True)
        prog.wait()
        check(r.returncode == 0, "go tool pprof -top http://127.0.0.1:PORT/debug/pprof/profile?seconds=2 succeeds")
        check("profd_e2e_leaf" in r.stdout, "the -top listing names the busy function")
        if r.returncode != 0 or "profd_e2e_leaf" not in r.stdout:
            log(r.stdout[-3000:] + r.stderr[-3000:])

        # 3. ?labels= overrides --labels for one request.
        prog = subprocess.Popen([chain, "4"])
        time.sleep(0.2)
        path = fetch_profile(d, 2, "&labels=tid,thread_name")
        prog.wait()
        ts = [t for t in traces(path) if t.frames[:1] == ["profd_e2e_leaf"]]
        check(len(ts) > 0 and all(set(t.labels) == {"tid", "thread_name"} for t in ts),
              "labels=tid,thread_name gives exactly those labels")
        check(any(t.labels.get("tid") == [str(prog.pid)] and t.labels.get("thread_name") == ["e2e-chain"]
                  for t in ts), "tid and thread_name have the program's values")
        path = fetch_profile(d, 1, "&labels=")
        check(all(not t.labels for t in traces(path)), "labels= (empty) gives samples without labels")

        # 4. Kernel frames under a syscall-heavy program, user frames below them.
        prog = subprocess.Popen([sysc, "4"])
        time.sleep(0.2)
        path = fetch_profile(d, 2)
        prog.wait()
        ts = of_pid(traces(path), prog.pid)
        total = sum(t.value for t in ts)
        with_kernel = [t for t in ts if KERNEL_SYSCALL_FRAMES & set(t.frames)]
        nk = sum(t.value for t in with_kernel)
        log("e2e-syscall: %d samples, %d with syscall entry frames" % (total, nk))
        if with_kernel:
            log("example kernel stack: %s" % max(with_kernel, key=lambda t: t.value).frames)
        check(total > 0 and nk >= 0.5 * total, "most samples of the syscall-heavy program have kernel frames")

        def kernel_then_user(t):
            idx = [i for i, f in enumerate(t.frames) if f in KERNEL_SYSCALL_FRAMES]
            return idx and "main" in t.frames and max(idx) < t.frames.index("main")
        check(any(kernel_then_user(t) for t in with_kernel),
              "kernel frames come first (leaf), then the user frames down to main")

        # 5. A process that exits in the middle of the window is still named.
        wait = fetch_async(d, 4)
        time.sleep(0.5)
        gone = subprocess.Popen([short, "1.5"])
        _, _, ru = os.wait4(gone.pid, 0)
        gone_cpu = ru.ru_utime + ru.ru_stime
        path = wait()
        ts = of_pid(traces(path), gone.pid)
        total = sum(t.value for t in ts)
        named = sum(t.value for t in ts if t.frames[:len(CHAIN)] == CHAIN)
        if ts:
            log("its most common stack: %s" % max(ts, key=lambda t: t.value).frames)
        # Its whole life is inside the window: all its CPU time must be there, counted at 99 Hz.
        check(total > 0 and abs(total - gone_cpu * 99) <= 0.25 * gone_cpu * 99 + 5,
              "the short-lived process is in the profile with all its samples (%d for %.2f s CPU)" % (total, gone_cpu))
        # Between fork and exec the child still runs python's code under python's comm: those few
        # samples are not the program's. Every sample of the program itself keeps its comm.
        own = [t for t in ts if t.frames[:len(CHAIN)] == CHAIN]
        others = [t for t in ts if t not in own]
        for t in others:
            log("  sample not of the program's code: %s %s" % (t.labels.get("comm"), t.frames[:6]))
        check(own and all(t.labels.get("comm") == ["e2e-short"] for t in own),
              "it keeps its comm label after exiting")
        check(total > 0 and named >= 0.9 * total,
              "its frames are symbolized after it exited (%d of %d samples with the full named chain)" % (named, total))
    finish()


if __name__ == "__main__":
    main()
