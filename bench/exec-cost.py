#!/usr/bin/env python3
"""What an exec costs profd: a clean `ninja -j2` build of a copy of profd's own source tree (some
700 compiler, linker and generator processes) with profd running at its defaults, and the same
build without profd. Prints per run: execs profd saw (profd_process_events_received_total
{type="exec"}), profd's CPU time during the build (utime+stime of /proc/PID/stat), CPU per exec,
the share of one core, the part of it spent building unwind tables of files never seen before,
and the build's wall time without and with profd (ratio). Then, from the same time without the build
just before it (--idle seconds: the neighbours' execs, profd's own timers and drains), the build's
own execs and profd's CPU per exec of them (table builds left out): the per-exec figure freed from
what goes on anyway. Then the same build once more with the same profd, which now knows the build's
programs, as a profd that has run for a while on a build host does: all of its CPU per exec, table
builds included (few or none are left), and its share of a core.

Before each build, the same profd runs a loop of known executables only (--loop N times `gcc -c` of
a small file, each 3 execs: the driver, cc1, as; their tables were built in a warm-up round
first): no table builds, so its CPU per exec is what an exec of a known program costs; as for the
build, the quiet --idle seconds before it are subtracted where the neighbours were steady. Every
per-exec figure divides profd's CPU by all the execs profd saw on the host in that time, the
neighbours' included: profd pays for each of them, so a busy machine does not inflate the figure
the way subtracting a guess of the neighbours' share would. With --profd the two builds alternate,
the first one swapped each run, and the summary gives the median of each.

    bench/exec-cost.py [--runs 2] [--port 7422] [--idle 10] [--loop 200] [--no-build] [--profd OTHER/daemon/profd]

--no-build measures the loop alone (minutes instead of the build's tens of minutes on a busy host).
--no-runtimes runs profd without Python, V8 and HotSpot frame walks: on a host with such neighbours
their memory reads (hundreds a second, counted beside each figure) can outweigh the execs' cost.

The copy and its `meson setup` are made once, outside the measured part; each measured build is
`ninja clean` then `ninja -j2`. Everything goes under the test session folder, removed at exit."""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import time

from profdtest import PROFD, SRC, Daemon, log, proc_cpu_seconds, require_bpf, tmpdir


def copy_tree(dst):
    """profd's sources without build folders or git metadata."""
    def ignore(folder, names):
        return [n for n in names if n == ".git" or (folder == os.path.abspath(SRC) and n.startswith("build"))]
    shutil.copytree(os.path.abspath(SRC), dst, ignore=ignore, symlinks=True)


def exec_count(metrics):
    m = re.search(r'^profd_process_events_received_total\{type="exec"\} (\d+)$', metrics, re.M)
    return int(m.group(1)) if m else 0


def build_seconds(metrics):
    """Unwind table builds: files never seen before (new binaries of this build and of whatever
    else the machine runs), a cost per new file rather than per exec."""
    m = re.search(r'^profd_exe_cache_build_cpu_seconds_total ([0-9.e+-]+)$', metrics, re.M)
    return float(m.group(1)) if m else 0.0


def remote_reads(metrics):
    """Reads of other processes' memory (Python, Java, node neighbours' stacks): no exec cost, but
    on a busy host they can be most of profd's CPU, so each figure says how many there were."""
    return sum(int(v) for v in re.findall(r'^profd_remote_reads_total\{result="[a-z]+"\} (\d+)$', metrics, re.M))


def build(bdir):
    subprocess.run(["ninja", "-C", bdir, "clean"], check=True, stdout=subprocess.DEVNULL)
    t0 = time.monotonic()
    subprocess.run(["ninja", "-C", bdir, "-j2"], check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t0


def tables_settled(dm):
    """Waits (up to 60 s) until no unwind table build is queued: start-up scans and warm-ups are
    not the measured part."""
    deadline = time.monotonic() + 60
    time.sleep(3)
    while time.monotonic() < deadline and re.search(r"^profd_exe_cache_build_queue [1-9]",
                                                    dm.get("/metrics")[2].decode(), re.M):
        time.sleep(0.5)
    time.sleep(2)


def compile_loop(src, obj, n):
    """n x `gcc -c`: the driver, cc1 and as, all known after the warm-up round."""
    for _ in range(n):
        subprocess.run(["gcc", "-O0", "-c", src, "-o", obj], check=True)


def loop_cost(dm, src, obj, n, idle):
    """profd's CPU per exec over a loop of known executables, all of the host's execs counted; and
    profd's CPU and the execs of the idle seconds before it."""
    compile_loop(src, obj, 3)  # new tables (cc1, as, ...) built here, outside the measured part
    tables_settled(dm)
    _, _, mi = dm.get("/metrics")
    cpui = proc_cpu_seconds(dm.proc.pid)
    time.sleep(idle)
    _, _, m0 = dm.get("/metrics")
    cpu0 = proc_cpu_seconds(dm.proc.pid)
    t0 = time.monotonic()
    compile_loop(src, obj, n)
    wall = time.monotonic() - t0
    cpu1 = proc_cpu_seconds(dm.proc.pid)
    _, _, m1 = dm.get("/metrics")
    mi, m0, m1 = mi.decode(), m0.decode(), m1.decode()
    quiet = (cpu0 - cpui - (build_seconds(m0) - build_seconds(mi)), exec_count(m0) - exec_count(mi))
    return (wall, cpu1 - cpu0, exec_count(m1) - exec_count(m0), build_seconds(m1) - build_seconds(m0),
            remote_reads(m1) - remote_reads(m0), quiet)


def with_profd(binary, bdir, port, idle, loop, src, with_build, args):
    with Daemon(*args, binary=binary, port=port) as dm:
        # The start-up scan and its table builds are not the build's cost: wait for them.
        tables_settled(dm)
        looped = loop_cost(dm, src, os.path.join(tmpdir(), "loop.o"), loop, idle) if loop else None
        if not with_build:
            return None, looped
        # The same time without the build first: profd's CPU and the execs it sees when only the
        # neighbours run (their execs, its own timers and drains), subtracted below.
        _, _, mi = dm.get("/metrics")
        cpui = proc_cpu_seconds(dm.proc.pid)
        time.sleep(idle)
        _, _, m0 = dm.get("/metrics")
        cpu0 = proc_cpu_seconds(dm.proc.pid)
        wall = build(bdir)
        cpu1 = proc_cpu_seconds(dm.proc.pid)
        _, _, m1 = dm.get("/metrics")
        # The same build again: a profd that has run for a while knows the build's programs
        # (compilers, linkers, generators), so this is what a build host pays for each build.
        tables_settled(dm)
        _, _, m2 = dm.get("/metrics")
        cpu2 = proc_cpu_seconds(dm.proc.pid)
        wall2 = build(bdir)
        cpu3 = proc_cpu_seconds(dm.proc.pid)
        _, _, m3 = dm.get("/metrics")
    mi, m0, m1, m2, m3 = mi.decode(), m0.decode(), m1.decode(), m2.decode(), m3.decode()
    quiet = (cpu0 - cpui, exec_count(m0) - exec_count(mi), build_seconds(m0) - build_seconds(mi))
    again = (wall2, cpu3 - cpu2, exec_count(m3) - exec_count(m2), build_seconds(m3) - build_seconds(m2))
    return (wall, cpu1 - cpu0, exec_count(m1) - exec_count(m0), build_seconds(m1) - build_seconds(m0), quiet,
            again), looped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--port", type=int, default=7422)
    ap.add_argument("--profd", default=None, help="another profd build to compare")
    ap.add_argument("--idle", type=float, default=10.0,
                    help="seconds measured without the build before each build with profd")
    ap.add_argument("--loop", type=int, default=200,
                    help="gcc -c runs of the known-executables loop before each build (0: none)")
    ap.add_argument("--no-runtimes", action="store_true",
                    help="profd without Python, V8 and HotSpot frames (no reads of the neighbours' memory)")
    ap.add_argument("--build", action=argparse.BooleanOptionalAction, default=True,
                    help="the clean build of profd's tree (--no-build: the loop alone)")
    args = ap.parse_args()
    if not args.build and not args.loop:
        ap.error("--no-build needs --loop N")
    require_bpf()
    src = os.path.join(tmpdir(), "profd-src")
    copy_tree(src)
    bdir = os.path.join(tmpdir(), "build")
    if args.build:
        subprocess.run(["meson", "setup", bdir, src], check=True, stdout=subprocess.DEVNULL)
        build(bdir)  # warm the page cache: the first build reads every header from disk
    small = os.path.join(tmpdir(), "loop.c")
    with open(small, "w") as f:
        f.write("int loop_add(int a, int b) { return a + b; }\n")
    profd_args = ["--no-python-frames", "--no-v8-frames", "--no-java-frames"] if args.no_runtimes else []
    builds = [("this build", PROFD)] + ([("other build", args.profd)] if args.profd else [])
    figures = {label: {"loop": [], "loop, quiet subtracted": [], "build": [], "build again": []}
               for label, _ in builds}
    for i in range(args.runs):
        base = build(bdir) if args.build else None
        # Alternate which build goes first: the machine's load drifts within a run.
        for label, binary in (builds if i % 2 == 0 else builds[::-1]):
            built, looped = with_profd(binary, bdir, args.port, args.idle, args.loop, small, args.build,
                                       profd_args)
            if looped:
                lwall, lcpu, lexecs, ltables, lreads, (qcpu, qexecs) = looped
                figures[label]["loop"].append(1000.0 * (lcpu - ltables) / max(lexecs, 1))
                log("run %d, %s: known executables (%d x gcc -c): %d execs in %.1f s; profd CPU %.3f s = "
                    "%.3f ms per exec (unwind table builds %.3f s left out), %.2f%% of one core; remote memory "
                    "reads %d (%.0f/s); load average %.1f"
                    % (i + 1, label, args.loop, lexecs, lwall, lcpu, figures[label]["loop"][-1], ltables,
                       100.0 * lcpu / lwall, lreads, lreads / lwall, os.getloadavg()[0]))
                # Less profd's CPU and the execs of the quiet time before, scaled to the loop's wall
                # time: what the loop's own execs added (3 per gcc -c).
                scale = lwall / args.idle
                own = lexecs - qexecs * scale
                quiet = "quiet %.0f s before: %.1f ms/s of profd CPU, %.1f execs/s" % (
                    args.idle, 1000.0 * qcpu / args.idle, qexecs / args.idle)
                own_cpu = (lcpu - ltables) - qcpu * scale
                if abs(own - 3 * args.loop) > 1.5 * args.loop or own_cpu <= 0:
                    # Neighbours' bursts in either window: the subtraction would say nothing.
                    log("run %d, %s: loop: %s; too busy to subtract" % (i + 1, label, quiet))
                else:
                    figures[label]["loop, quiet subtracted"].append(1000.0 * own_cpu / own)
                    log("run %d, %s: loop: %s; the loop's own: ~%.0f execs (%d made), ~%.3f ms of profd CPU "
                        "per exec" % (i + 1, label, quiet, own, 3 * args.loop,
                                      figures[label]["loop, quiet subtracted"][-1]))
            if not built:
                continue
            wall, cpu, execs, tables, (qcpu, qexecs, qtables), again = built
            figures[label]["build"].append(1000.0 * (cpu - tables) / max(execs, 1))
            log("run %d, %s: %d execs in %.1f s; profd CPU %.3f s = %.3f ms per exec, %.2f%% of one core "
                "(of which unwind table builds %.3f s; without them %.3f ms per exec); "
                "build wall %.1f s without profd, %.1f s with (ratio %.3f); load average %.1f"
                % (i + 1, label, execs, wall, cpu, 1000.0 * cpu / max(execs, 1), 100.0 * cpu / wall, tables,
                   1000.0 * (cpu - tables) / max(execs, 1), base, wall, wall / base, os.getloadavg()[0]))
            # What the build added: less the CPU and the execs of the quiet time, scaled to the build's
            # wall time (the neighbours' execs and profd's own timers and drains go on during it).
            scale = wall / args.idle
            bexecs = execs - qexecs * scale
            bcpu = (cpu - tables) - (qcpu - qtables) * scale
            quiet = "quiet %.0f s before: profd CPU %.3f s, %d execs (%.1f ms/s, %.1f execs/s)" % (
                args.idle, qcpu, qexecs, 1000.0 * qcpu / args.idle, qexecs / args.idle)
            if bexecs < execs / 2:
                # Neighbours' bursts: the quiet time is no measure of what went on during the build.
                log("run %d, %s: %s; too busy to subtract" % (i + 1, label, quiet))
            else:
                log("run %d, %s: %s; the build's own: ~%.0f execs, ~%.3f ms of profd CPU per exec without "
                    "table builds" % (i + 1, label, quiet, bexecs, 1000.0 * bcpu / bexecs))
            awall, acpu, aexecs, atables = again
            figures[label]["build again"].append(1000.0 * acpu / max(aexecs, 1))
            log("run %d, %s: the same build again, its programs known: %d execs in %.1f s; profd CPU %.3f s "
                "= %.3f ms per exec, table builds included (%.3f s), %.2f%% of one core; build wall ratio "
                "%.3f" % (i + 1, label, aexecs, awall, acpu, figures[label]["build again"][-1], atables,
                          100.0 * acpu / awall, awall / base))
    for label, _ in builds:
        for what, values in figures[label].items():
            if values:
                log("%s, %s: profd CPU per exec (%s) median %.3f ms of %s"
                    % (label, what, "table builds included" if what == "build again" else "table builds left out",
                       statistics.median(values), ", ".join("%.3f" % v for v in values)))


if __name__ == "__main__":
    main()
