#!/usr/bin/env python3
"""Soak: profd under sustained hostile churn from an unprivileged user, printing its RSS, open
descriptors, process-table memory, BPF map memory and CPU every 10 s. Not a test (it never fails
on figures); docs/operations.md records a run.

What runs, all as user nobody, for --minutes (default 10):
  - an exec storm (fork+exec /bin/true, 4 at a time), all along;
  - a dlopen/dlclose loop, all along;
  - every minute, a mapping storm: 100 processes mapping 2,000 distinct files each (~200-byte
    names), 300 ms each, 8 at a time.

    PROFD_BUILD_DIR=build PYTHONPATH=tests/lib python3 bench/soak.py [--minutes M] [-- PROFD_ARGS...]
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

from profdtest import SRC, Daemon, cc, log, proc_cpu_seconds, proc_status_kb, require_bpf, tmpdir

status_kb, cpu_seconds = proc_status_kb, proc_cpu_seconds

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]


def bpf_map_bytes(pid):
    """Sum of memlock over profd's BPF map descriptors (what the kernel charges for them)."""
    total, seen = 0, set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) != "anon_inode:bpf-map":
                continue
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                info = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
            map_id = info.get("map_id", fd).strip()
            if map_id not in seen:
                seen.add(map_id)
                total += int(info.get("memlock", "0").strip())
        except (OSError, ValueError):
            pass
    return total


def metric(d, name):
    st, _, body = d.get("/metrics", timeout=30)
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("profd_args", nargs="*")
    a = ap.parse_args()
    require_bpf()

    work = tmpdir()
    os.chmod(work, 0o755)
    churn = cc(os.path.join(SRC, "tests", "churn", "churn.c"), os.path.join(work, "churn"), flags=["-O2"],
               libs=["-ldl"])
    lib = cc(os.path.join(SRC, "tests", "churn", "churn-lib.c"), os.path.join(work, "libchurn.so"),
             flags=["-O2", "-shared", "-fPIC"])
    storm_dir = os.path.join(work, "storm")
    os.mkdir(storm_dir)
    shutil.copy(lib, os.path.join(storm_dir, "lib.so"))
    os.chown(storm_dir, 65534, 65534)

    seconds = a.minutes * 60
    with Daemon(*a.profd_args) as d:
        pid = d.proc.pid
        bg = [subprocess.Popen(NOBODY + [churn, "exec", str(seconds), "4"], stdout=subprocess.DEVNULL),
              subprocess.Popen(NOBODY + [churn, "dlopen", lib, str(seconds)], stdout=subprocess.DEVNULL)]
        storm, next_storm = None, 0.0
        t0 = time.monotonic()
        c_prev, t_prev = cpu_seconds(pid), t0
        peak = {"rss": 0, "fds": 0}
        log("%6s %8s %6s %12s %10s %6s" % ("t(s)", "RSS(MiB)", "fds", "table(MiB)", "BPF(MiB)", "CPU%"))
        while time.monotonic() - t0 < seconds:
            now = time.monotonic()
            if now - t0 >= next_storm and (storm is None or storm.poll() is not None):
                storm = subprocess.Popen(NOBODY + [churn, "storm", storm_dir, "2000", "100", "8", "300"],
                                         stdout=subprocess.DEVNULL)
                next_storm += 60
            time.sleep(10)
            c, t = cpu_seconds(pid), time.monotonic()
            rss = status_kb(pid, "VmRSS") / 1024
            fds = len(os.listdir("/proc/%d/fd" % pid))
            peak["rss"], peak["fds"] = max(peak["rss"], rss), max(peak["fds"], fds)
            log("%6.0f %8.1f %6d %12.1f %10.1f %6.1f" % (
                t - t0, rss, fds, metric(d, "profd_process_table_memory_bytes") / 2**20,
                bpf_map_bytes(pid) / 2**20, 100 * (c - c_prev) / (t - t_prev)))
            c_prev, t_prev = c, t
        for p in bg + ([storm] if storm else []):
            p.kill()
            p.wait()
        log("peak RSS %.1f MiB (VmHWM %.1f MiB), peak descriptors %d over %.0f minutes" % (
            peak["rss"], status_kb(pid, "VmHWM") / 1024, peak["fds"], a.minutes))


if __name__ == "__main__":
    sys.exit(main())
