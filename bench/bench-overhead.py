#!/usr/bin/env python3
"""Benchmark (prints figures, never fails on them; recorded in docs/performance.md).

1. Workload overhead at 99 Hz: bench-workload (CPU-bound, -O2 -fomit-frame-pointer, a 20-frame
   stack) alone, under profd (sampling every CPU, DWARF unwinding) and under
   `perf record --call-graph dwarf -F 99`, interleaved in the same run, several rounds. Throughput
   is work units per second of the workload's own CPU time (so other load on the machine matters
   less) and per wall second; the overhead is alone / profiled - 1. The profiler's own CPU time
   over the run is printed too.
2. BPF cost per sample for a 20-, 100- and 300-frame stack: kernel.bpf_stats_enabled=1, profd
   with --pid WORKLOAD, the entry program's run_time_ns / run_cnt (tail calls run inside the entry
   program's accounting). Samples of other processes (filtered out at once in BPF) are counted in
   run_cnt too: their cost is measured first, with --pid pointing at a sleeping process, and
   subtracted. The workload's sample count and stack depth come from the profile over HTTP.
   --frequency sets the sampling rate of this part (99 Hz by default; at 999 Hz the caches the
   program touches stay warmer between two samples of a CPU); --repeat measures every native
   depth that many times, alternating, and prints each figure and their median (this VM's noise
   is larger than the differences looked for).
   The same for Debian's python3.11 and Debian 12's node 18 at the bottom of 20 and 100 Python /
   JavaScript frames, with their runtime's walk and without it (--no-python-frames,
   --no-v8-frames), and for OpenJDK 17's 50-frame Java stacks, interpreted and compiled
   (--no-java-frames), with the daemon's side for Java (its CPU, drain time,
   profd_memory_bytes{owner="java_names"}).

    PROFD_BUILD_DIR=build PYTHONPATH=tests/lib python3 bench/bench-overhead.py [--seconds S] [--rounds N]
        [--skip-overhead] [--runtimes native,python,node,java] [--frequency HZ] [--repeat N]
or  meson test -C build --benchmark overhead"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import threading
import time

from profdtest import BUILD, Daemon, fetch_profile, log, metric, require_bpf, tmpdir, traces

WORKLOAD = os.path.join(BUILD, "bench", "bench-workload")
FREQUENCY = 99
# bench-workload's stack is DEPTH + 6 frames (see bench/workload.c)
DEPTH_20, DEPTH_100, DEPTH_300 = 14, 94, 294
SETTLE_S = 3.0   # after profd is healthy: its start-up scan and table builds are done
STATS_SYSCTL = "/proc/sys/kernel/bpf_stats_enabled"


def parse_workload(out):
    m = re.search(r"units (\d+) wall ([0-9.]+) cpu ([0-9.]+) per_cpu_second ([0-9.]+) per_wall_second ([0-9.]+)",
                  out)
    if not m:
        raise RuntimeError("bench-workload printed no result: %r" % out[-300:])
    return {"units": int(m.group(1)), "wall": float(m.group(2)), "cpu": float(m.group(3)),
            "per_cpu": float(m.group(4)), "per_wall": float(m.group(5))}


def proc_cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_alone(seconds, depth):
    r = subprocess.run([WORKLOAD, str(seconds), str(depth)], capture_output=True, text=True, check=True)
    res = parse_workload(r.stdout)
    res["profiler_cpu"] = 0.0
    return res


def run_under_profd(seconds, depth):
    with Daemon("--frequency", str(FREQUENCY)) as d:
        time.sleep(SETTLE_S)
        c0 = proc_cpu_seconds(d.proc.pid)
        r = subprocess.run([WORKLOAD, str(seconds), str(depth)], capture_output=True, text=True, check=True)
        c1 = proc_cpu_seconds(d.proc.pid)
    res = parse_workload(r.stdout)
    res["profiler_cpu"] = c1 - c0
    return res


def run_under_perf(seconds, depth, work):
    out = os.path.join(work, "perf.data")
    p = subprocess.Popen(["perf", "record", "-q", "-o", out, "-F", str(FREQUENCY), "--call-graph", "dwarf", "--",
                          WORKLOAD, str(seconds), str(depth)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    stdout = p.stdout.read()
    if p.returncode != 0:
        raise RuntimeError("perf record failed: " + p.stderr.read()[-300:])
    res = parse_workload(stdout)
    # rusage of perf covers the workload it waited for: perf's own share is the rest
    res["profiler_cpu"] = ru.ru_utime + ru.ru_stime - res["cpu"]
    res["perf_data_mb"] = os.path.getsize(out) / 2**20
    os.unlink(out)
    return res


def overhead(args, work):
    log("== workload overhead at %d Hz: bench-workload %s s, %d-frame stack, %d rounds"
        % (FREQUENCY, args.seconds, DEPTH_20 + 6, args.rounds))
    runs = {"alone": [], "profd": [], "perf": []}
    order = ["alone", "profd", "perf"]
    for rnd in range(args.rounds):
        for kind in order[rnd % 3:] + order[:rnd % 3]:   # rotate: drift hits every kind alike
            if kind == "alone":
                r = run_alone(args.seconds, DEPTH_20)
            elif kind == "profd":
                r = run_under_profd(args.seconds, DEPTH_20)
            else:
                r = run_under_perf(args.seconds, DEPTH_20, work)
            runs[kind].append(r)
            log("  round %d %-5s  %10.1f units/cpu-s  %10.1f units/wall-s  workload cpu %.2f s  profiler cpu %.2f s"
                % (rnd + 1, kind, r["per_cpu"], r["per_wall"], r["cpu"], r["profiler_cpu"]))
    base_cpu = statistics.median(r["per_cpu"] for r in runs["alone"])
    base_wall = statistics.median(r["per_wall"] for r in runs["alone"])
    log("\n  %-6s %14s %10s %14s %10s %16s" % ("", "units/cpu-s", "overhead", "units/wall-s", "overhead",
                                               "profiler cpu/s"))
    for kind in order:
        pc = statistics.median(r["per_cpu"] for r in runs[kind])
        pw = statistics.median(r["per_wall"] for r in runs[kind])
        prof = statistics.median(r["profiler_cpu"] / r["wall"] for r in runs[kind])
        spread = (max(r["per_cpu"] for r in runs[kind]) - min(r["per_cpu"] for r in runs[kind])) / pc
        log("  %-6s %14.1f %9.2f%% %14.1f %9.2f%% %15.2f%%   (spread of units/cpu-s %.1f%%)"
            % (kind, pc, 100 * (base_cpu / pc - 1), pw, 100 * (base_wall / pw - 1), 100 * prof, 100 * spread))
    if runs["perf"]:
        log("  perf.data written per run: %.1f MiB" % statistics.median(r["perf_data_mb"] for r in runs["perf"]))
    return runs


# ---- BPF ns per sample ----------------------------------------------------------------------------

def prog_ids(pid):
    ids = set()
    for fd in os.listdir("/proc/%d/fdinfo" % pid):
        try:
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                m = re.search(r"^prog_id:\s*(\d+)", f.read(), re.M)
        except OSError:
            continue
        if m:
            ids.add(int(m.group(1)))
    return ids


def entry_stats(pid):
    """(run_time_ns, run_cnt) of this daemon's perf_event entry program profd_sample."""
    for i in prog_ids(pid):
        r = subprocess.run(["bpftool", "prog", "show", "id", str(i), "-j"], capture_output=True, text=True)
        if r.returncode != 0:
            continue
        p = json.loads(r.stdout)
        if p.get("name") == "profd_sample":
            return p.get("run_time_ns", 0), p.get("run_cnt", 0)
    raise RuntimeError("profd_sample not found among profd's BPF programs")


def filtered_cost(seconds, frequency=FREQUENCY):
    """ns per run of the entry program when the sample is not wanted (idle CPU or other process)."""
    sleeper = subprocess.Popen(["sleep", str(seconds + 30)])
    try:
        with Daemon("--frequency", str(frequency), "--pid", str(sleeper.pid)) as d:
            time.sleep(SETTLE_S)
            t0, n0 = entry_stats(d.proc.pid)
            time.sleep(seconds)
            t1, n1 = entry_stats(d.proc.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
    return (t1 - t0) / max(n1 - n0, 1), n1 - n0


def sample_cost(seconds, depth, c_filtered, cmd=None, daemon_args=(), extra=None, ready_s=0.0,
                frequency=FREQUENCY):
    """extra (a dict), when given, receives the daemon's side over the measured run: "cpu" (its CPU
    seconds), "drains" and "drain_s" (profd_drain_seconds: the interval callback, which reads the
    names of new runtime frames, included) and the /metrics text at the end. ready_s: how long the
    workload runs before profd starts (a JVM's warm-up)."""
    cmd = cmd or [WORKLOAD, str(seconds + SETTLE_S + 60), str(depth)]  # killed at the end
    w = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(ready_s)
        with Daemon("--frequency", str(frequency), "--pid", str(w.pid), *daemon_args) as d:
            time.sleep(SETTLE_S)
            result = {}

            def fetch():
                result["path"] = fetch_profile(d, seconds)

            def drains():
                text = d.get("/metrics")[2].decode()
                return text, metric(text, "profd_drain_seconds_count"), metric(text, "profd_drain_seconds_sum")
            t = threading.Thread(target=fetch)
            _, dn0, ds0 = drains()
            c0 = proc_cpu_seconds(d.proc.pid)
            t0, n0 = entry_stats(d.proc.pid)
            t.start()
            t.join()
            t1, n1 = entry_stats(d.proc.pid)
            c1 = proc_cpu_seconds(d.proc.pid)
            text, dn1, ds1 = drains()
            if extra is not None:
                extra.update(cpu=c1 - c0, drains=dn1 - dn0, drain_s=ds1 - ds0, metrics=text)
    finally:
        w.kill()
        w.wait()
    mine = [tr for tr in traces(result["path"]) if tr.labels.get("pid") == [str(w.pid)]]
    ours = sum(tr.value for tr in mine)
    depths = sorted({len(user_frames(tr.frames)) for tr in mine})
    runs = n1 - n0
    if ours == 0:
        raise RuntimeError("no samples of the workload in the profile")
    ns = (t1 - t0 - (runs - ours) * c_filtered) / ours
    return ns, ours, runs, depths


def kernel_symbols():
    try:
        with open("/proc/kallsyms") as f:
            return {l.split()[2] for l in f if len(l.split()) >= 3}
    except OSError:
        return set()


KSYMS = kernel_symbols()


def user_frames(frames):
    """Real user frames of a pprof stack: no kernel frames (listed above the user ones), no inlined."""
    frames = [f for f in frames if not f.endswith(" (inline)")]
    i = 0
    while i < len(frames) - 1 and (frames[i] in KSYMS or frames[i].startswith("bpf_prog_")):
        i += 1
    return frames[i:]


def bpf_cost(args):
    log("\n== BPF cost per sample (kernel.bpf_stats_enabled, entry program run_time_ns / run_cnt)")
    try:
        with open(STATS_SYSCTL) as f:
            old = f.read().strip()
        with open(STATS_SYSCTL, "w") as f:
            f.write("1")
    except OSError as e:
        log("  cannot enable %s: %s (figures not measured)" % (STATS_SYSCTL, e))
        return
    try:
        c_filtered, n = filtered_cost(args.seconds, args.frequency)
        log("  sample not wanted (idle CPU / filtered pid), %d Hz: %.0f ns per run (%d runs)"
            % (args.frequency, c_filtered, n))
        if "native" in args.runtimes:
            native_cost(args, c_filtered)
        if "python" in args.runtimes:
            python_cost(args, c_filtered)
        if "node" in args.runtimes:
            node_cost(args, c_filtered)
        if "java" in args.runtimes:
            java_cost(args, c_filtered)
    finally:
        with open(STATS_SYSCTL, "w") as f:
            f.write(old)


def native_cost(args, c_filtered):
    """bench-workload at 20, 100 and 300 frames, args.repeat rounds alternating the depths (the
    machine's drift hits every depth alike), each figure printed, then the medians."""
    figures = {d: [] for d in (DEPTH_20, DEPTH_100, DEPTH_300)}
    for rnd in range(args.repeat):
        for depth in figures:
            ns, ours, runs, depths = sample_cost(args.seconds, depth, c_filtered, frequency=args.frequency)
            figures[depth].append(ns)
            log("  %3d-frame stack: %7.0f ns per sample (%d workload samples of %d runs; user frames seen %s; "
                "load %s)" % (depth + 6, ns, ours, runs, depths[-3:], open("/proc/loadavg").read().split()[0]))
    if args.repeat > 1:
        for depth, v in figures.items():
            log("  %3d-frame stack, %d Hz: median %.0f ns, min %.0f, max %.0f over %d runs"
                % (depth + 6, args.frequency, statistics.median(v), min(v), max(v), len(v)))
    per_frame = (statistics.median(figures[DEPTH_300]) - statistics.median(figures[DEPTH_20])) / (DEPTH_300 - DEPTH_20)
    log("  per frame (300 - 20 frames, medians): %.1f ns; fixed (20 frames less 20 x per frame): %.0f ns"
        % (per_frame, statistics.median(figures[DEPTH_20]) - 20 * per_frame))


PY_DEEP = """
import sys, time
def deep(n):
    if n == 0:
        t = time.monotonic()
        while time.monotonic() - t < 3600:
            pass
    return deep(n - 1)
deep(int(sys.argv[1]))
"""


def python_cost(args, c_filtered):
    """Debian's python3.11 spinning at the bottom of a recursion of N Python frames: BPF cost per
    sample with the Python walk and without it (--no-python-frames: native frames only)."""
    if not os.path.exists("/usr/bin/python3.11"):
        log("  /usr/bin/python3.11 missing: Python figures not measured")
        return
    script = os.path.join(tmpdir(), "deep.py")
    with open(script, "w") as f:
        f.write(PY_DEEP)
    for n in (20, 100):
        for walk in (True, False):
            ns, ours, runs, depths = sample_cost(args.seconds, 0, c_filtered, frequency=args.frequency,
                                                 cmd=["/usr/bin/python3.11", script, str(n - 2)],
                                                 daemon_args=() if walk else ("--no-python-frames",))
            log("  python3.11, %3d Python frames, %s: %7.0f ns per sample (%d samples; frames seen %s)"
                % (n, "Python walk " if walk else "native only", ns, ours, depths[-3:]))


JS_DEEP = """
function deep(n) {
  if (n === 0) {
    const end = Date.now() + 3600e3;
    let s = 0;
    while (Date.now() < end) for (let i = 0; i < 100000; i++) s = (s + i * i) % 1000003;
    return s;
  }
  return deep(n - 1) + 1;
}
deep(+process.argv[2]);
"""


def node_cost(args, c_filtered):
    """Debian 12's node 18 (tests/lib/debiannode.py) spinning at the bottom of a recursion of N
    JavaScript frames (deep(): interpreted callers, the bottom one optimized on stack): BPF cost per
    sample with the V8 walk and without it (--no-v8-frames: the same frame-pointer steps through
    V8's code, no slot reads)."""
    try:
        import debiannode
        base = debiannode.ensure_node18(log=log)
    except Exception as e:  # noqa: BLE001 -- any reason: the figures are just not measured
        log("  Debian 12's node 18 unavailable (%s): Node.js figures not measured" % e)
        return
    script = os.path.join(tmpdir(), "deep.js")
    with open(script, "w") as f:
        f.write(JS_DEEP)
    created = debiannode.make_mount_target()
    try:
        for n in (20, 100):
            for walk in (True, False):
                # deep(n - 1) runs n frames of deep; the script's module wrapper and node's loader
                # add ~9 JavaScript frames below them.
                ns, ours, runs, depths = sample_cost(args.seconds, 0, c_filtered, frequency=args.frequency,
                                                     cmd=debiannode.command(base, [script, str(n - 1)]),
                                                     daemon_args=() if walk else ("--no-v8-frames",))
                log("  node 18, %3d JavaScript frames, %s: %7.0f ns per sample (%d samples; frames seen %s)"
                    % (n, "V8 walk    " if walk else "native only", ns, ours, depths[-3:]))
    finally:
        debiannode.remove_mount_target(created)


JAVA_DEEP = """
public class Deep {
    static volatile long sink;

    // n + 1 frames of deep under main; the innermost spins for spin iterations.
    static long deep(int n, long spin) {
        if (n == 0) {
            long s = 0;
            for (long i = 0; i < spin; i++)
                s += (s >>> 3) ^ i;
            return s;
        }
        return deep(n - 1, spin) + 1;
    }

    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        // warm-up: deep called often enough for C2 to compile it (interpreted with -Xint)
        for (int i = 0; i < Integer.parseInt(args[1]); i++)
            sink += deep(n, 10);
        sink += deep(n, Long.MAX_VALUE);
    }
}
"""

JAVA_NAMES = """
import javax.tools.ToolProvider;

// The JDK's compiler compiling one file over and over: thousands of methods, for the memory of
// their names.
public class Names {
    public static void main(String[] args) {
        var javac = ToolProvider.getSystemJavaCompiler();
        for (;;)
            javac.run(null, null, null, "-d", args[0], args[1]);
    }
}
"""
JAVA_FRAMES = 50
JAVA_WARMUP_CALLS = 20000   # x 50 calls of deep: far past C2's thresholds
JAVA_WARMUP_S = 4.0         # JVM start-up and C2 compiling deep before profd starts


def java_cost(args, c_filtered):
    """Debian 12's OpenJDK 17 spinning at the bottom of 50 Java frames (main and 49 deep),
    interpreted (-Xint) and compiled by C2 after a warm-up (deep not inlined into itself, so 50
    physical frames): BPF per sample with the HotSpot walk and without it (--no-java-frames),
    against bench-workload's native 50-frame stack. Then the daemon's side: its CPU and drain time
    with and without the walk, and the memory of Java names (profd_memory_bytes{owner="java_names"})
    for these JVMs and for one running javac in a loop (thousands of methods)."""
    if not (shutil.which("java") and shutil.which("javac")):
        log("  java, javac (openjdk-17-jdk-headless) missing: Java figures not measured")
        return
    work = tmpdir()
    for name, src in (("Deep", JAVA_DEEP), ("Names", JAVA_NAMES)):
        with open(os.path.join(work, name + ".java"), "w") as f:
            f.write(src)
        subprocess.run(["javac", "-d", work, os.path.join(work, name + ".java")], check=True, timeout=300)
    ns, ours, runs, depths = sample_cost(args.seconds, JAVA_FRAMES - 6, c_filtered, frequency=args.frequency)
    log("  native, %d frames (bench-workload): %7.0f ns per sample (%d samples; frames seen %s)"
        % (JAVA_FRAMES, ns, ours, depths[-3:]))
    java = ["java", "-XX:+UseSerialGC", "-XX:CompileCommand=quiet", "-XX:CompileCommand=dontinline,Deep::deep",
            "-cp", work]
    for mode, flags in (("interpreted", ["-Xint"]), ("compiled", [])):
        for walk in (True, False):
            extra = {}
            ns, ours, runs, depths = sample_cost(
                args.seconds, 0, c_filtered, frequency=args.frequency,
                cmd=java + flags + ["Deep", str(JAVA_FRAMES - 2), str(JAVA_WARMUP_CALLS)],
                daemon_args=() if walk else ("--no-java-frames",), extra=extra,
                ready_s=JAVA_WARMUP_S if mode == "compiled" else 1.0)
            m = extra["metrics"]
            log("  java 17, %d frames %-11s %s: %7.0f ns per sample (%d samples; frames seen %s); daemon "
                "%.0f ms CPU, %d drains %.2f ms each; java_names %d bytes, %d frames, %d stubs; "
                "compiled frames stale %d"
                % (JAVA_FRAMES, mode, "Java walk   " if walk else "native only", ns, ours, depths[-3:],
                   1000 * extra["cpu"], extra["drains"], 1000 * extra["drain_s"] / max(extra["drains"], 1),
                   metric(m, "profd_memory_bytes", '{owner="java_names"}'), metric(m, "profd_hotspot_frames"),
                   metric(m, "profd_hotspot_stubs"),
                   metric(m, "profd_hotspot_compiled_frames_total", '{result="stale"}')))
    for walk in (True, False):
        extra = {}
        ns, ours, runs, depths = sample_cost(
            max(args.seconds, 15), 0, c_filtered, frequency=args.frequency,
            cmd=["java", "-cp", work, "Names", work, os.path.join(work, "Deep.java")],
            daemon_args=() if walk else ("--no-java-frames",), extra=extra, ready_s=1.0)
        m = extra["metrics"]
        log("  java 17 running javac in a loop, %s: %7.0f ns per sample (%d samples; deepest %s); daemon "
            "%.0f ms CPU, %d drains %.2f ms each; java_names %d bytes (%d frames %d bytes, %d stubs), RSS %.1f MiB"
            % ("Java walk  " if walk else "native only", ns, ours, depths[-1:], 1000 * extra["cpu"],
               extra["drains"], 1000 * extra["drain_s"] / max(extra["drains"], 1),
               metric(m, "profd_memory_bytes", '{owner="java_names"}'), metric(m, "profd_hotspot_frames"),
               metric(m, "profd_hotspot_frames_bytes"), metric(m, "profd_hotspot_stubs"),
               metric(m, "process_resident_memory_bytes") / 2**20))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0, help="per measured run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--skip-bpf-cost", action="store_true")
    ap.add_argument("--runtimes", default="native,python,node,java",
                    help="stacks whose BPF cost is measured, comma-separated: native (20 and 300 frames), "
                    "python, node, java")
    ap.add_argument("--frequency", type=int, default=FREQUENCY,
                    help="sampling rate of the BPF cost part (the overhead part stays at %d Hz)" % FREQUENCY)
    ap.add_argument("--repeat", type=int, default=1, help="rounds of the native BPF cost figures")
    args = ap.parse_args()
    require_bpf()
    if not os.path.exists(WORKLOAD):
        raise SystemExit("build bench-workload first: " + WORKLOAD)
    if not shutil.which("perf"):
        raise SystemExit("perf (linux-perf) is needed as the comparison")
    log("machine: %d CPUs, load average %s" % (os.cpu_count(), open("/proc/loadavg").read().split()[:3]))
    work = tmpdir()
    if not args.skip_overhead:
        overhead(args, work)
    args.runtimes = args.runtimes.split(",")
    if not args.skip_bpf_cost:
        bpf_cost(args)
    log("\nload average at the end: %s" % open("/proc/loadavg").read().split()[:3])


if __name__ == "__main__":
    main()
