#!/usr/bin/env python3
"""profd on aarch64, in a Debian arm64 guest under qemu-system-aarch64 (test-arm64-guest.py
5.10|6.1|6.12): cross-builds profd (tests/arm64-cross-build.sh into BUILD/aarch64-cross, reusing
its arm64 root and kernel BTF under /var/cache/profd-tests/arm64), builds scen-recursion for
aarch64 statically with -O2 -fomit-frame-pointer (only CFI can unwind it: main -> rec_start ->
rec_descend x300 -> rec_leaf, ~30 KiB of stack, the whole tail-call chain), runs it in the guest
with tests/arm64-guest.sh (TCG, -cpu max: pointer authentication on) and checks with
`go tool pprof -traces` that >= 99% of its samples carry the complete chain
rec_leaf;rec_descend x300;rec_start;main ... _start, with those names."""
import os
import re
import subprocess
import sys
import time

from profdtest import BUILD, SRC, check, finish, log, skip, tmpdir, traces

KERNEL = sys.argv[1] if len(sys.argv) > 1 else "6.1"
CACHE = os.environ.get("PROFD_ARM64_CACHE", "/var/cache/profd-tests/arm64")
CROSS_BUILD = os.path.join(BUILD, "aarch64-cross")
THRESHOLD = 0.99
MIN_SAMPLES = 200  # ~6 s at 99 Hz on one of two CPUs: fewer means the program was hardly sampled
CHAIN = re.compile(r"(?:^|;)rec_leaf;(?:rec_descend;){300}rec_start;main;(?:[^;]+;)*?_start$")


def main():
    for tool in ("qemu-system-aarch64", "aarch64-linux-gnu-gcc", "cpio"):
        if subprocess.run(["sh", "-c", "command -v " + tool], capture_output=True).returncode != 0:
            skip("%s missing: install qemu-system-arm, gcc-aarch64-linux-gnu, cpio "
                 "(docs/debian-packages-tests.txt)" % tool)
    t0 = time.monotonic()
    env = dict(os.environ, PROFD_ARM64_BUILD=CROSS_BUILD, PROFD_ARM64_CACHE=CACHE, PROFD_SKIP_INSTALL="1")
    r = subprocess.run([os.path.join(SRC, "tests", "arm64-cross-build.sh"), "daemon/profd"], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        check(False, "cross-build for aarch64: %s" % (r.stdout + r.stderr)[-3000:])
        finish()
    log("cross-build: %.0f s" % (time.monotonic() - t0))

    d = tmpdir()
    prog = os.path.join(d, "scen-recursion")
    r = subprocess.run(["aarch64-linux-gnu-gcc", "--sysroot=" + os.path.join(CACHE, "sysroot"), "-O2",
                        "-fomit-frame-pointer", "-fasynchronous-unwind-tables", "-g", "-static",
                        "-I" + os.path.join(SRC, "tests", "scenarios"),
                        os.path.join(SRC, "tests", "scenarios", "recursion.c"), "-o", prog],
                       capture_output=True, text=True)
    if not check(r.returncode == 0, "static aarch64 scen-recursion builds: %s" % r.stderr[-1000:]):
        finish()

    out = os.path.join(d, "profile.pb.gz")
    t1 = time.monotonic()
    r = subprocess.run([os.path.join(SRC, "tests", "arm64-guest.sh"), "--kernel", KERNEL, "--out", out,
                        "--seconds", "6", "--build", CROSS_BUILD, "--cache", CACHE, prog, "40"],
                       capture_output=True, text=True, timeout=900)
    log(r.stderr.strip()[-3000:])
    if not check(r.returncode == 0 and os.path.exists(out), "guest %s returned a profile" % KERNEL):
        finish()
    log("guest %s: %.0f s" % (KERNEL, time.monotonic() - t1))

    mine = [t for t in traces(out) if t.labels.get("comm") == ["prog"]]
    total = sum(t.value for t in mine)
    good = sum(t.value for t in mine if CHAIN.search(";".join(f for f in t.frames if not f.endswith(" (inline)"))))
    for t in sorted(mine, key=lambda t: -t.value)[:8]:
        if not CHAIN.search(";".join(f for f in t.frames if not f.endswith(" (inline)"))):
            log("incomplete (%d): %s" % (t.value, ";".join(t.frames)[:600]))
    check(total >= MIN_SAMPLES, "scen-recursion sampled in the %s guest: %d samples (>= %d)" %
          (KERNEL, total, MIN_SAMPLES))
    check(total and good >= THRESHOLD * total,
          "%d of %d samples (%.1f%%) carry rec_leaf;rec_descend x300;rec_start;main..._start (>= %.0f%%)"
          % (good, total, 100.0 * good / max(total, 1), THRESHOLD * 100))
    finish()


if __name__ == "__main__":
    main()
