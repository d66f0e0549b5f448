#!/usr/bin/env python3
"""Symbolization through the whole daemon: real BPF samples of a C++ program built with -g whose
hot loop is inlined, whose binary is deleted while it runs and which exits before the window
ends. Read with the real `go tool pprof -raw` / `-traces`:

- inline frames appear as extra lines (innermost first) with file:line, the outer function with
  its call line; names are demangled;
- the mapping carries the binary's GNU build ID, its path and [FN][FL][LN][IN];
- ids are dense and every sample has the kernel/user order and labels profd promises."""
import os
import re
import subprocess
import time

from profdtest import (Daemon, cc, check, fetch_profile, finish, log, pprof, require_bpf, tmpdir, traces,
                       unwind_ready)

SRC = r"""
#include <stdlib.h>
#include <time.h>

volatile unsigned long sink;

namespace profd_sym {
static inline __attribute__((always_inline)) void inner(int n)
{
        for (int i = 0; i < n; i++)       // LINE_INNER_LOOP
                sink += (unsigned long)i * 7;
}
struct Worker {
        __attribute__((noinline)) static void run(int n);
};
__attribute__((noinline)) void Worker::run(int n)
{
        inner(n); // LINE_CALL_INNER
        __asm__ volatile("");
}
}

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
                profd_sym::Worker::run(200000); // LINE_CALL_RUN
        return 0;
}
"""

# Calls libc through IBT's .plt.sec (lazy binding: the first call of each goes through .plt):
# samples in the PLT stubs must read strlen@plt / abs@plt, as objdump and gdb name them, not the
# symbol before the PLT (_init, which perf 6.1 shows). Its callers include glibc's __libc_start_main, versioned in
# libc6-dbg's .symtab (__libc_start_main@@GLIBC_2.34): shown without the version.
PLT_SRC = r"""
#include <stdlib.h>
#include <string.h>
#include <time.h>
volatile size_t sink;
static char buf[64] = "a string for strlen to measure";
__attribute__((noinline)) void plt_hot(void)
{
        for (int i = 0; i < 1000; i++)
                sink += strlen(buf) + (size_t)abs(i - 5);
}
int main(int argc, char **argv)
{
        struct timespec ts;
        double end;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        end = ts.tv_sec + ts.tv_nsec / 1e9 + atof(argv[1]);
        do {
                plt_hot();
                clock_gettime(CLOCK_MONOTONIC, &ts);
        } while (ts.tv_sec + ts.tv_nsec / 1e9 < end);
        return 0;
}
"""

# Built without .eh_frame for its own code and stripped: the only unwind information for df_* is
# the .debug_frame in its separate debug file, found by build ID under the process' root (a mount
# namespace where /usr/lib/debug is a bind mount only it sees); for the unwind tables and, as
# it has no .symtab left, for the names too (so it runs past the window: a process' root is
# only reachable while it lives).
DF_SRC = r"""
#include <stdlib.h>
#include <time.h>
volatile unsigned long sink;
__attribute__((noinline)) void df_leaf(int n) { for (int i = 0; i < n; i++) sink += (unsigned long)i * 7; }
__attribute__((noinline)) void df_mid(int n) { df_leaf(n); sink++; }
__attribute__((noinline)) void df_outer(int n) { df_mid(n); sink++; }
int main(int argc, char **argv)
{
        struct timespec ts;
        double end;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        end = ts.tv_sec + ts.tv_nsec / 1e9 + atof(argv[1]);
        do {
                df_outer(100000);
                clock_gettime(CLOCK_MONOTONIC, &ts);
        } while (ts.tv_sec + ts.tv_nsec / 1e9 < end);
        return 0;
}
"""


def split_debug(prog, debugroot):
    """objcopy the DWARF (with .debug_frame) and .symtab to DEBUGROOT/.build-id/xx/rest.debug;
    strip prog of both (its functions are named only from the debug file)."""
    bid = build_id(prog)
    d = os.path.join(debugroot, ".build-id", bid[:2])
    os.makedirs(d, exist_ok=True)
    subprocess.run(["objcopy", "--only-keep-debug", prog, os.path.join(d, bid[2:] + ".debug")], check=True)
    subprocess.run(["objcopy", "--strip-all", prog], check=True)


CFLAGS = ["-O2", "-g", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer", "-fno-optimize-sibling-calls"]


def line_of(marker):
    for i, l in enumerate(SRC.lstrip("\n").split("\n"), 1):
        if marker in l:
            return i
    raise KeyError(marker)


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else None


def main():
    require_bpf()
    work = tmpdir()
    src = os.path.join(work, "sym.cc")
    with open(src, "w") as f:
        f.write(SRC.lstrip("\n"))
    prog = cc(src, os.path.join(work, "profd sym prog"), CFLAGS, compiler="clang++")
    bid = build_id(prog)
    check(bid is not None, "test program has a build ID (%s)" % bid)

    plt_prog = cc(PLT_SRC, os.path.join(work, "plt-prog"),
                  ["-O2", "-g", "-fno-builtin", "-fcf-protection=full", "-Wl,-z,ibtplt", "-Wl,-z,lazy"])

    df_prog = cc(DF_SRC, os.path.join(work, "df-prog"),
                 ["-O2", "-g", "-fomit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"])
    debugroot = os.path.join(work, "debugroot")
    split_debug(df_prog, debugroot)
    sections = subprocess.run(["readelf", "-SW", df_prog], capture_output=True, text=True).stdout
    check(".debug_frame" not in sections and ".symtab" not in sections,
          "df-prog keeps no .debug_frame and no .symtab of its own")
    ns_ok = subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0
    # The same code (another build ID: its DWARF names another source file) in profd's own mount
    # namespace, its debug file found through .gnu_debuglink next to the binary.
    link_prog = cc(DF_SRC, os.path.join(work, "df-link-prog"),
                   ["-O2", "-g", "-fomit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"])
    subprocess.run(["objcopy", "--only-keep-debug", link_prog, link_prog + ".debug"], check=True)
    subprocess.run(["objcopy", "--strip-debug", "--add-gnu-debuglink=" + link_prog + ".debug", link_prog],
                   check=True)
    check(build_id(link_prog) != build_id(df_prog), "the two debug-file programs have distinct build IDs")

    with Daemon("--frequency", "99", "--labels", "comm,pid,tid") as d:
        import threading

        cpu = {}

        def reap(q):
            """Waits for q and keeps the CPU time it used (what the samples must add up to)."""
            _, status, ru = os.wait4(q.pid, 0)
            q.returncode = os.waitstatus_to_exitcode(status)
            cpu[q.pid] = ru.ru_utime + ru.ru_stime

        def fetch_while(procs, holder):
            """One 4 s profile while procs run; returns when they all exited."""
            t = threading.Thread(target=lambda: holder.append(fetch_profile(d, 4)))
            t.start()
            reap(procs[0])
            t.join()
            for q in procs[1:]:
                reap(q)
            return holder[0]

        # Two CPU-bound programs per window at most: this is a 2-core machine.
        p = subprocess.Popen([prog, "2.5"])
        plt_p = subprocess.Popen([plt_prog, "3"])
        time.sleep(0.2)
        os.unlink(prog)  # from now on only /proc/PID/map_files (and profd's kept descriptor) reach it
        path = fetch_while([p, plt_p], [])

        # These two unwind only through their debug files' .debug_frame: the window starts once
        # profd has their tables in place, and they burn until it has been served (df-prog's root
        # is reachable only while it lives), then they are stopped.
        link_p = subprocess.Popen([link_prog, "60"])
        df_p = None
        if ns_ok:
            # /usr/lib/debug exists only where some -dbg package is installed: otherwise an overlay
            # on /usr (in that namespace alone) adds it, so the host's tree is never touched.
            upper, overlay_work = os.path.join(work, "usr-upper"), os.path.join(work, "usr-work")
            os.makedirs(os.path.join(upper, "lib", "debug"), exist_ok=True)
            os.makedirs(overlay_work, exist_ok=True)
            df_p = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c",
                                     "{ [ -d /usr/lib/debug ] || mount -t overlay overlay -o "
                                     "lowerdir=/usr,upperdir='%s',workdir='%s' /usr; } && "
                                     "mount --bind '%s' /usr/lib/debug && exec '%s' 60"
                                     % (upper, overlay_work, debugroot, df_prog)])
        try:
            unwind_ready(d, link_p.pid, "df-link-prog", "df-link-prog")
            if df_p:
                unwind_ready(d, df_p.pid, "df-prog", "df-prog")
            df_path = fetch_profile(d, 4)
        finally:
            for q in [link_p] + ([df_p] if df_p else []):
                q.kill()
                q.wait()

    raw = pprof("-raw", path).stdout
    ts = [t for t in traces(path) if t.labels.get("pid") == [str(p.pid)]]
    total = sum(t.value for t in ts)
    log("%d samples of the program in %d traces" % (total, len(ts)))
    # All its CPU time was inside the window, whatever share of a CPU a busy machine gave it.
    want_n = cpu[p.pid] * 99
    check(total >= 0.75 * want_n - 5, "the program is sampled although it exited and its binary is gone: %d "
          "samples for %.2f s of CPU at 99 Hz" % (total, cpu[p.pid]))

    want = ["profd_sym::inner(int)", "profd_sym::Worker::run(int)", "main"]
    good = sum(t.value for t in ts if t.frames[:3] == [want[0] + " (inline)", want[1], want[2]] or
               t.frames[:3] == want)
    if ts:
        log("most common stack: %s" % max(ts, key=lambda t: t.value).frames)
    check(total > 0 and good >= 0.8 * total,
          "stacks read inner (inlined) <- Worker::run <- main: %d of %d samples" % (good, total))
    check(any("(inline)" in f for t in ts for f in t.frames), "go tool pprof marks the inline frame")

    # Location lines: innermost first, the inlined loop at its lines (the for statement or its body:
    # which instructions the samples land on varies, the for line's few are often missed when the
    # machine is busy and the program gets few samples), the caller at the call site.
    loop_line = line_of("LINE_INNER_LOOP")
    loops = "sym.cc:(?:%d|%d)" % (loop_line, loop_line + 1)
    call_inner = "sym.cc:%d" % line_of("LINE_CALL_INNER")
    call_run = "sym.cc:%d" % line_of("LINE_CALL_RUN")
    loc_ok = re.search(r"profd_sym::inner\(int\) \S*" + loops + r" s=\d+.*\n\s+profd_sym::Worker::run\(int\) \S*"
                       + re.escape(call_inner), raw)
    check(loc_ok is not None, "a location has lines inner at %s then Worker::run at %s" % (loops, call_inner))
    check(re.search(r"\bmain \S*" + re.escape(call_run), raw) is not None, "main's frame is at the call, %s" % call_run)
    check("(_ZN9profd_sym6Worker3runEi)" in raw, "system_name keeps the mangled name")

    maps = [l for l in raw.split("\n") if "profd sym prog" in l and re.match(r"^\d+: 0x", l)]
    log("\n".join(maps))
    check(len(maps) >= 1, "a mapping for the deleted binary")
    check(any(bid in l for l in maps), "its build ID is the binary's (%s)" % bid)
    check(any(all(f in l for f in ("[FN]", "[FL]", "[LN]", "[IN]")) for l in maps),
          "it has functions, filenames, line numbers, inline frames")

    # PLT stubs and versioned glibc names, as SREs compare them with perf/gdb/objdump.
    pts = [t for t in traces(path) if t.labels.get("pid") == [str(plt_p.pid)]]
    plt_total = sum(t.value for t in pts)
    in_plt = sum(t.value for t in pts if t.frames[:1] in (["strlen@plt"], ["abs@plt"]) and t.frames[1:2] == ["plt_hot"])
    log("%d samples of the PLT program, %d in strlen@plt or abs@plt" % (plt_total, in_plt))
    if not in_plt:
        for t in sorted(pts, key=lambda t: -t.value)[:6]:
            log("  %d %s" % (t.value, t.frames))
    check(in_plt > 0, "samples in the PLT stubs read strlen@plt or abs@plt <- plt_hot (%d)" % in_plt)
    check(not any(f == "_init" for t in pts for f in t.frames), "no PLT sample is named after _init")
    versioned = sorted({f for t in pts + ts for f in t.frames if "@" in f and not f.endswith("@plt")})
    check(not versioned, "no frame carries a symbol version: %s" % versioned)
    check(any("__libc_start_main" in t.frames for t in pts), "__libc_start_main appears by its plain name")
    # The version is not kept in system_name either (go tool pprof -raw prints it in parentheses).
    vers = sorted(set(re.findall(r"\(([^()\s]+@@?GLIBC[^()\s]*)\)", raw)))
    check("__libc_start_main" in raw and not vers, "no system name carries a symbol version: %s" % vers[:5])

    # Unwinding through the separate debug file's .debug_frame: by build ID under /proc/PID/root,
    # and by .gnu_debuglink next to the binary.
    def check_df(pid, what):
        dts = [t for t in traces(df_path) if t.labels.get("pid") == [str(pid)]]
        total = sum(t.value for t in dts)
        full = sum(t.value for t in dts if t.frames[:4] == ["df_leaf", "df_mid", "df_outer", "main"]
                   and "_start" in t.frames)
        log("%d samples, %d unwound to _start (%s)" % (total, full, what))
        for t in sorted(dts, key=lambda t: -t.value)[:3]:
            log("  %d %s" % (t.value, t.frames))
        check(total >= 30 and full >= 0.6 * total,
              "no .eh_frame, .debug_frame only in %s: unwinds df_leaf <- df_mid <- df_outer <- main ... "
              "_start: %d of %d samples" % (what, full, total))
    check_df(link_p.pid, "a debug file named by .gnu_debuglink")
    if not ns_ok:
        log("=" * 70 + "\nNOT CHECKED: unshare -m is not permitted here (debug file under another "
            "mount namespace)\n" + "=" * 70)
    else:
        check_df(df_p.pid, "a build-ID debug file under its own mount namespace's /usr/lib/debug")
    if not loc_ok:
        log(raw[-6000:])
    finish()


if __name__ == "__main__":
    main()
