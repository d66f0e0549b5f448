#!/usr/bin/env python3
"""BPF cost per sample on arm64, in a Debian arm64 guest under qemu TCG (bench/arm64-bpf-cost.py
[5.10|6.1|6.12], default 6.12), measured as bench-overhead.py does on x86-64: for each program,
tests/arm64-guest.sh --bpf-stats starts it first, runs profd with --pid on it and
kernel.bpf_stats_enabled=1, and reports the entry program's run_time_ns and run_cnt (tail calls
included) with profd_bpf_recorded_samples_total. A program that only sleeps gives the cost of a
sample profd does not want (other pid, idle), which is subtracted from the others':
    per sample = (run_time_ns - (run_cnt - recorded) * not_wanted) / recorded
Programs: a sleeper, scen-plain (8 user frames) and scen-recursion (305), static, -O2
-fomit-frame-pointer. Figures are emulated (TCG): compare shapes, not absolute numbers
(docs/performance.md)."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from profdtest import BUILD, SRC, log, tmpdir  # noqa: E402

KERNEL = sys.argv[1] if len(sys.argv) > 1 else "6.12"
CACHE = os.environ.get("PROFD_ARM64_CACHE", "/var/cache/profd-tests/arm64")
CROSS_BUILD = os.path.join(BUILD, "aarch64-cross")
SLEEPER = "#include <unistd.h>\nint main(void) { for (;;) pause(); }\n"


def build(d, name, source):
    out = os.path.join(d, name)
    subprocess.run(["aarch64-linux-gnu-gcc", "--sysroot=" + os.path.join(CACHE, "sysroot"), "-O2",
                    "-fomit-frame-pointer", "-fasynchronous-unwind-tables", "-g", "-static",
                    "-I" + os.path.join(SRC, "tests", "scenarios"), source, "-o", out], check=True)
    return out


def measure(prog):
    r = subprocess.run([os.path.join(SRC, "tests", "arm64-guest.sh"), "--kernel", KERNEL, "--bpf-stats",
                        "--seconds", "10", "--out", os.path.join(os.path.dirname(prog), "p.pb.gz"),
                        "--build", CROSS_BUILD, "--cache", CACHE, prog, "60"],
                       capture_output=True, text=True, timeout=900)
    m = re.search(r"BPF-STATS prog_type 7: run_cnt (\d+) run_time_ns (\d+)", r.stderr)
    rec = re.search(r"profd_bpf_recorded_samples_total (\d+)", r.stderr)
    if not m or not rec:
        sys.exit("no BPF stats from the guest:\n" + r.stderr[-3000:])
    return int(m.group(1)), int(m.group(2)), int(rec.group(1))


def main():
    env = dict(os.environ, PROFD_ARM64_BUILD=CROSS_BUILD, PROFD_ARM64_CACHE=CACHE, PROFD_SKIP_INSTALL="1")
    subprocess.run([os.path.join(SRC, "tests", "arm64-cross-build.sh"), "daemon/profd"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    d = tmpdir()
    with open(os.path.join(d, "sleeper.c"), "w") as f:
        f.write(SLEEPER)
    sleeper = build(d, "sleeper", os.path.join(d, "sleeper.c"))
    cnt, ns, _ = measure(sleeper)
    base = ns / cnt
    log("kernel %s under qemu TCG; not wanted: %.1f us per sample (%d runs)" % (KERNEL, base / 1000, cnt))
    for name in ("plain", "recursion"):
        prog = build(d, "scen-" + name, os.path.join(SRC, "tests", "scenarios", name + ".c"))
        cnt, ns, rec = measure(prog)
        log("scen-%s: %.1f us per recorded sample (%d recorded of %d runs, %.1f ms in all)"
            % (name, (ns - (cnt - rec) * base) / rec / 1000, rec, cnt, ns / 1e6))


if __name__ == "__main__":
    main()
