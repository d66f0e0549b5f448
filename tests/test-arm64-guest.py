#!/usr/bin/env python3
"""profd on aarch64, in a Debian arm64 guest under qemu-system-aarch64 (test-arm64-guest.py
5.10|6.1|6.12): cross-builds profd (tests/arm64-cross-build.sh into BUILD/aarch64-cross, reusing
its arm64 root and kernel BTF under /var/cache/profd-tests/arm64), builds scenario programs for
aarch64 statically with -O2 -fomit-frame-pointer (only CFI can unwind them), runs each in its own
guest with tests/arm64-guest.sh (TCG, -cpu max: pointer authentication on) and checks with
`go tool pprof -traces` that >= 99% of each program's samples carry one of its complete chains,
with those names:
  recursion  rec_leaf;rec_descend x300;rec_start;main ... _start (~30 KiB of stack, the whole
             tail-call chain); recursion-pac: the same built with -mbranch-protection=pac-ret
             (every saved return address signed); recursion-trixie: linked with Debian 13's
             PAC-enabled libc.a (its start code signs return addresses too)
  signal     sig_handler_leaf;sig_handler;__kernel_rt_sigreturn;sig_compute_leaf;sig_compute;main ...
             _start (the rt_sigframe at the vDSO's __kernel_rt_sigreturn), or the interrupted
             computation itself
  shlib      (dynamic: bookworm's arm64 libc.so.6 and ld.so) shlib_lib_leaf ... shlib_caller;main ...
             _start through the PLT into libscen-shlib.so, and back through a callback
  threads    thr_worker_leaf;thr_worker_mid;thr_worker;start_thread;thread_start and the main
             thread's chain"""
import glob
import os
import re
import shutil
import subprocess
import sys
import time

from profdtest import BUILD, SRC, check, finish, log, skip, tmpdir, traces

KERNEL = sys.argv[1] if len(sys.argv) > 1 else "6.1"
CACHE = os.environ.get("PROFD_ARM64_CACHE", "/var/cache/profd-tests/arm64")
CROSS_BUILD = os.path.join(BUILD, "aarch64-cross")
THRESHOLD = 0.99
MIN_SAMPLES = 200  # ~6 s at 99 Hz on one of two CPUs: fewer means the program was hardly sampled
BELOW_MAIN = r"main;(?:[^;]+;)*?__libc_start[^;]*;(?:[^;]+;)*?_start"
# name -> (program arguments, chains: leaf first, matched at the bottom of the ';'-joined stack,
# frames above allowed (kernel, clock reads) unless the chain starts with ^)
SCENARIOS = {
    "recursion": (["40"], [r"rec_leaf;(?:rec_descend;){300}rec_start;" + BELOW_MAIN]),
    # the same with pointer authentication (paciasp/autiasp): signed return addresses on the stack
    "recursion-pac": (["40"], [r"rec_leaf;(?:rec_descend;){300}rec_start;" + BELOW_MAIN]),
    # in the handler (one frame for the trampoline), or in the interrupted computation with no
    # handler frame or trampoline above it (a lost signal frame must not pass as that); the
    # trampoline is the vDSO's __kernel_rt_sigreturn
    "signal": (["40"], [r"sig_handler;__kernel_rt_sigreturn;sig_compute_leaf;sig_compute;" + BELOW_MAIN,
                        r"^(?:(?!sig_|\[)[^;]*;)*sig_compute_leaf;sig_compute;" + BELOW_MAIN,
                        # in rt_sigreturn (kernel frames), the trampoline, the interrupted frames
                        r"^(?:(?!sig_|\[)[^;]*;)*__kernel_rt_sigreturn;sig_compute_leaf;sig_compute;" + BELOW_MAIN]),
    # linked with Debian 13's libc.a (glibc 2.41, built with -mbranch-protection=standard: its
    # __libc_start_call_main signs its return address too), the program with it as well
    "recursion-trixie": (["40"], [r"rec_leaf;(?:rec_descend;){300}rec_start;" + BELOW_MAIN]),
    # dynamic, built by the cross-build (meson): into libscen-shlib.so through the PLT and back
    # through a callback; bookworm's arm64 libc.so.6 and ld.so from the arm64 root
    "shlib": (["40"], [r"shlib_lib_leaf;shlib_lib_mid;shlib_lib_entry;shlib_caller;" + BELOW_MAIN,
                       r"shlib_callback_leaf;shlib_callback;shlib_lib_mid;shlib_lib_entry;shlib_caller;" + BELOW_MAIN,
                       r"(?:__)?clock_gettime;" + BELOW_MAIN]),
    "threads": (["40"], [r"thr_worker_leaf;thr_worker_mid;thr_worker;start_thread;thread_start",
                         r"thr_main_leaf;thr_main_work;" + BELOW_MAIN,
                         r"(?:__)?clock_gettime;thr_worker;start_thread;thread_start",
                         r"(?:__)?clock_gettime;" + BELOW_MAIN]),  # main's loop reads the clock
}


def trixie_root():
    """An arm64 root of Debian 13's libc6-dev (and what it needs to link), for static programs
    linked with trixie's PAC-enabled libc.a; made once under CACHE."""
    root = os.path.join(CACHE, "trixie-root")
    if os.path.exists(os.path.join(root, "usr", "lib", "aarch64-linux-gnu", "libc.a")):
        return root
    debs = os.path.join(CACHE, "debs-trixie")
    os.makedirs(debs, exist_ok=True)
    apt = [os.path.join(SRC, "tests", "arm64", "apt-arm64.sh"), CACHE, "trixie"]
    subprocess.run(apt + ["apt-get", "update"], capture_output=True)
    r = subprocess.run(apt + ["apt-get", "download", "libc6-dev", "libc6", "linux-libc-dev", "libcrypt-dev"],
                       cwd=debs, capture_output=True, text=True)
    if r.returncode != 0:
        skip("Debian 13's arm64 libc6-dev cannot be downloaded (no network/mirror?): %s" % r.stderr[-300:])
    tmp = root + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for deb in glob.glob(os.path.join(debs, "*.deb")):
        subprocess.run(["dpkg-deb", "-x", deb, tmp], check=True)
    for dirpath, dirnames, filenames in os.walk(tmp):
        for n in dirnames + filenames:
            path = os.path.join(dirpath, n)
            if os.path.islink(path) and os.readlink(path).startswith("/"):
                target = root + os.readlink(path)
                os.unlink(path)
                os.symlink(target, path)
    os.rename(tmp, root)
    return root


def run_scenario(d, name, args, chains):
    prog = os.path.join(d, "scen-" + name)
    source, _, variant = name.partition("-")
    if name == "shlib":
        prog = os.path.join(CROSS_BUILD, "tests", "scenarios", "scen-shlib")
    sysroot = trixie_root() if variant == "trixie" else os.path.join(CACHE, "sysroot")
    flags = {"pac": ["-mbranch-protection=pac-ret"], "trixie": ["-mbranch-protection=standard"]}.get(variant, [])
    r = subprocess.CompletedProcess([], 0, "", "") if name == "shlib" else subprocess.run(
                       ["aarch64-linux-gnu-gcc", "--sysroot=" + sysroot, "-O2",
                        "-fomit-frame-pointer", "-fasynchronous-unwind-tables", "-g", "-static", "-pthread"]
                       + flags +
                       ["-I" + os.path.join(SRC, "tests", "scenarios"),
                        os.path.join(SRC, "tests", "scenarios", source + ".c"), "-o", prog],
                       capture_output=True, text=True)
    if not check(r.returncode == 0, "static aarch64 scen-%s builds: %s" % (name, r.stderr[-1000:])):
        return
    out = os.path.join(d, name + ".pb.gz")
    t1 = time.monotonic()
    r = subprocess.run([os.path.join(SRC, "tests", "arm64-guest.sh"), "--kernel", KERNEL, "--out", out,
                        "--seconds", "6", "--build", CROSS_BUILD, "--cache", CACHE, prog] + args,
                       capture_output=True, text=True, timeout=900)
    log(r.stderr.strip()[-3000:])
    if not check(r.returncode == 0 and os.path.exists(out), "guest %s returned a profile of scen-%s" % (KERNEL, name)):
        return
    log("guest %s, scen-%s: %.0f s" % (KERNEL, name, time.monotonic() - t1))

    def complete(t):
        stack = ";".join(f for f in t.frames if not f.endswith(" (inline)"))
        return any(c.search(stack) for c in chains)

    mine = [t for t in traces(out) if t.labels.get("comm") == [os.path.basename(prog)[:15]]]
    total = sum(t.value for t in mine)
    good = sum(t.value for t in mine if complete(t))
    for t in sorted((t for t in mine if not complete(t)), key=lambda t: -t.value)[:8]:
        log("incomplete (%d): %s" % (t.value, ";".join(t.frames)[:600]))
    check(total >= MIN_SAMPLES, "scen-%s sampled in the %s guest: %d samples (>= %d)" %
          (name, KERNEL, total, MIN_SAMPLES))
    check(total and good >= THRESHOLD * total, "scen-%s: %d of %d samples (%.1f%%) complete (>= %.0f%%)"
          % (name, good, total, 100.0 * good / max(total, 1), THRESHOLD * 100))


def main():
    for tool in ("qemu-system-aarch64", "aarch64-linux-gnu-gcc", "cpio"):
        if subprocess.run(["sh", "-c", "command -v " + tool], capture_output=True).returncode != 0:
            skip("%s missing: install qemu-system-arm, gcc-aarch64-linux-gnu, cpio "
                 "(docs/debian-packages-tests.txt)" % tool)
    t0 = time.monotonic()
    env = dict(os.environ, PROFD_ARM64_BUILD=CROSS_BUILD, PROFD_ARM64_CACHE=CACHE, PROFD_SKIP_INSTALL="1")
    r = subprocess.run([os.path.join(SRC, "tests", "arm64-cross-build.sh"), "daemon/profd",
                        "tests/scenarios/scen-shlib:executable"], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        check(False, "cross-build for aarch64: %s" % (r.stdout + r.stderr)[-3000:])
        finish()
    log("cross-build: %.0f s" % (time.monotonic() - t0))

    d = tmpdir()
    for name, (args, chains) in SCENARIOS.items():
        run_scenario(d, name, args, [re.compile((c if c.startswith("^") else r"(?:^|;)" + c) + "$") for c in chains])
    finish()


if __name__ == "__main__":
    main()
