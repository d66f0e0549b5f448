#!/usr/bin/env python3
"""Memory soak: profd at its defaults on a host busy with real Debian software, scraped like a
collector, printing its RSS (anonymous / file / shared) and profd_memory_bytes by owner every
15 s next to the 128 MiB bound, then the peak and the final figures. Figures, never pass/fail;
docs/performance.md records runs.

What runs, for PROFD_BENCH_MINUTES (default 10) or --minutes:
  - a collector: /debug/pprof/profile?seconds=15 back to back, and /metrics every 15 s;
  - a copy of profd's source tree built with meson/ninja (gcc, and clang for the BPF objects),
    cleaned and built again, over and over;
  - python3 -m compileall -f over /usr/lib/python3 (into a private pycache) and pydoc, in a loop;
  - node -e CPU loops (every other one with --perf-basic-prof: a JIT perf map), 20 s each;
  - java running a small CPU-loop class, 20 s each (if a JDK is installed).

    PROFD_BUILD_DIR=build PYTHONPATH=tests/lib python3 bench/memory-soak.py [--minutes M]
        [--profd OTHER/daemon/profd] [--port 7433] [--wrap 'heaptrack -o FILE'] [-- PROFD_ARGS...]
    # or: meson test -C build --benchmark memory-soak
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

from profdtest import SRC, Daemon, http_get, log, proc_status_kb, require_bpf, tmpdir

BOUND_MIB = 128
PERIOD_S = 15

JAVA_LOOP = """
public class Loop {
    static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
    public static void main(String[] a) {
        long end = System.nanoTime() + Long.parseLong(a[0]) * 1000000000L, s = 0;
        while (System.nanoTime() < end) s += fib(25);
        System.out.println(s);
    }
}
"""

NODE_LOOP = ("function fib(n){return n<2?n:fib(n-1)+fib(n-2)}"
             "const end=Date.now()+%d*1000;let s=0;while(Date.now()<end)s+=fib(22);console.log(s)")


class Loop(threading.Thread):
    """Runs the commands make() returns, one after the other, until stopped."""

    def __init__(self, name, make, cwd=None, env=None):
        super().__init__(daemon=True, name=name)
        self.make, self.cwd, self.env = make, cwd, env
        self.stopping, self.proc, self.runs, self.pids = False, None, 0, []

    def run(self):
        while not self.stopping:
            for cmd in self.make():
                if self.stopping:
                    break
                self.proc = subprocess.Popen(["nice", "-n", "5", *cmd], cwd=self.cwd, env=self.env,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                             start_new_session=True)
                self.pids.append(self.proc.pid)
                self.proc.wait()
                self.runs += 1
            time.sleep(0.5)

    def stop(self):
        self.stopping = True
        p = self.proc
        if p and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()
        self.join(timeout=30)


class Collector(threading.Thread):
    """Back-to-back profile fetches, like Parca or Alloy with a 15 s profile duration."""

    def __init__(self, d):
        super().__init__(daemon=True, name="collector")
        self.d, self.stopping = d, False
        self.ok = self.failed = 0
        self.bytes = 0

    def run(self):
        while not self.stopping:
            try:
                st, _, body = self.d.get("/debug/pprof/profile?seconds=%d" % PERIOD_S, timeout=PERIOD_S + 60)
                if st == 200:
                    self.ok += 1
                    self.bytes += len(body)
                else:
                    self.failed += 1
            except OSError:
                self.failed += 1
                time.sleep(1)


def owners(d):
    """profd_memory_bytes by owner (empty for a build without the family)."""
    out = {}
    try:
        _, _, body = d.get("/metrics", timeout=30)
    except OSError:
        return out
    for line in body.decode().splitlines():
        if line.startswith('profd_memory_bytes{owner="'):
            name = line.split('"')[1]
            out[name] = float(line.split()[-1])
    return out


def rss_parts(pid):
    kb = {k: proc_status_kb(pid, k) for k in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM")}
    return {k: v / 1024 for k, v in kb.items()}


def daemon_pid(pid, name):
    """profd's own pid: the child of a wrapper (--wrap) when there is one. Without one, pid itself:
    profd forks helpers (the debuginfod worker) that run the same binary."""
    try:
        if os.path.basename(os.readlink("/proc/%d/exe" % pid)) == os.path.basename(name):
            return pid
    except OSError:
        pass
    for _ in range(100):
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            return pid
        for k in kids:
            try:
                if os.path.basename(os.readlink("/proc/%d/exe" % k)) == os.path.basename(name):
                    return k
            except OSError:
                pass
        if not kids:
            return pid
        time.sleep(0.1)
    return pid


def copy_tree(dst):
    """profd's sources as committed (no build directories), for the compile loop."""
    os.makedirs(dst)
    archive = subprocess.run(["git", "-C", SRC, "archive", "HEAD"], capture_output=True)
    if archive.returncode == 0:
        subprocess.run(["tar", "-x", "-C", dst], input=archive.stdout, check=True)
        return
    for name in os.listdir(SRC):
        if name.startswith(".") or name.startswith("build"):
            continue
        src = os.path.join(SRC, name)
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(dst, name))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=float(os.environ.get("PROFD_BENCH_MINUTES", "10")))
    ap.add_argument("--profd", help="another profd binary (default: this build's)")
    ap.add_argument("--port", type=int, default=int(os.environ.get("PROFD_BENCH_PORT", "7433")))
    ap.add_argument("--wrap", default="", help="a command profd runs under, e.g. 'heaptrack -o FILE'")
    ap.add_argument("profd_args", nargs="*")
    a = ap.parse_args()
    require_bpf()

    work = tmpdir()
    tree = os.path.join(work, "profd-src")
    copy_tree(tree)
    build = os.path.join(work, "profd-build")
    have_build = subprocess.run(["meson", "setup", build, tree], capture_output=True).returncode == 0
    pycache = os.path.join(work, "pycache")
    py_env = dict(os.environ, PYTHONPYCACHEPREFIX=pycache)
    java = shutil.which("java")
    if java:
        with open(os.path.join(work, "Loop.java"), "w") as f:
            f.write(JAVA_LOOP)
    node = shutil.which("node")
    node_runs = [0]

    def node_cmds():
        node_runs[0] += 1
        flags = ["--perf-basic-prof"] if node_runs[0] % 2 == 0 else []
        return [[node, *flags, "-e", NODE_LOOP % 20]]

    loops = []
    if have_build:
        loops.append(Loop("ninja", lambda: [["ninja", "-C", build, "-t", "clean"], ["ninja", "-C", build, "-j", "2"]]))
    else:
        log("meson setup of the copied tree failed: no compile loop")
    loops.append(Loop("python", lambda: [["python3", "-m", "compileall", "-f", "-q", "/usr/lib/python3"],
                                         ["python3", "-m", "pydoc", "-w", "json"]], cwd=work, env=py_env))
    if node:
        loops.append(Loop("node", node_cmds, cwd=work))
    if java:
        loops.append(Loop("java", lambda: [[java, "-Xmx64m", os.path.join(work, "Loop.java"), "20"]], cwd=work))
    log("workloads: %s; %.0f minutes; bound %d MiB" % (", ".join(l.name for l in loops), a.minutes, BOUND_MIB))

    with Daemon(*a.profd_args, port=a.port, binary=a.profd, prefix=a.wrap.split()) as d:
        pid = daemon_pid(d.proc.pid, a.profd or "profd")
        coll = Collector(d)
        for t in [coll, *loops]:
            t.start()
        t0 = time.monotonic()
        peak, peak_at, peak_owners, last = 0.0, 0.0, {}, {}
        log("%6s %8s %8s %8s %8s %6s  %s" % ("t(s)", "RSS", "anon", "file", "shmem", "bound", "owners (MiB)"))
        try:
            while time.monotonic() - t0 < a.minutes * 60:
                time.sleep(PERIOD_S)
                if d.proc.poll() is not None:
                    log("profd exited with %d" % d.proc.returncode)
                    break
                r, o = rss_parts(pid), owners(d)
                t = time.monotonic() - t0
                if r["VmRSS"] > peak:
                    peak, peak_at, peak_owners = r["VmRSS"], t, o
                last = (r, o)
                log("%6.0f %8.1f %8.1f %8.1f %8.1f %6s  %s" % (
                    t, r["VmRSS"], r["RssAnon"], r["RssFile"], r["RssShmem"],
                    "OVER" if r["VmRSS"] > BOUND_MIB else "ok",
                    " ".join("%s=%.1f" % (k, v / 2**20) for k, v in sorted(o.items(), key=lambda kv: -kv[1]))))
        finally:
            coll.stopping = True
            for l in loops:
                l.stop()
            for l in loops:
                if l.name == "node":  # the perf maps of --perf-basic-prof runs
                    for p in l.pids:
                        if os.path.exists("/tmp/perf-%d.map" % p):
                            os.unlink("/tmp/perf-%d.map" % p)
        if d.proc.poll() is not None:
            return 1
        try:
            _, _, body = d.get("/metrics", timeout=30)
            budget = [l for l in body.decode().splitlines()
                      if l.startswith(("profd_memory_budget_", "profd_memory_target_bytes",
                                       "profd_symbolizer_executables_closed_total", "profd_python_code_evictions_total",
                                       "process_cpu_seconds_total"))]
            log("memory budget: " + "; ".join(budget))
        except OSError:
            pass
        hwm = proc_status_kb(pid, "VmHWM") / 1024
        if pid != d.proc.pid:
            # Under a wrapper: profd itself is stopped here (the wrapper may not pass SIGTERM on).
            os.kill(pid, signal.SIGTERM)
        log("profiles fetched: %d (%.1f MiB), failed: %d; runs: %s" % (
            coll.ok, coll.bytes / 2**20, coll.failed, ", ".join("%s %d" % (l.name, l.runs) for l in loops)))
        log("peak RSS %.1f MiB at %.0f s (VmHWM %.1f MiB), bound %d MiB: %s" % (
            peak, peak_at, hwm, BOUND_MIB, "within" if hwm <= BOUND_MIB else "OVER"))
        if peak_owners:
            log("owners at the peak: " + ", ".join("%s %.1f MiB" % (k, v / 2**20) for k, v in
                                                   sorted(peak_owners.items(), key=lambda kv: -kv[1])))
        if last:
            r, o = last
            log("final RSS %.1f MiB (anon %.1f, file %.1f, shmem %.1f)%s" % (
                r["VmRSS"], r["RssAnon"], r["RssFile"], r["RssShmem"],
                "; owners: " + ", ".join("%s %.1f" % (k, v / 2**20) for k, v in
                                         sorted(o.items(), key=lambda kv: -kv[1])) if o else ""))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
