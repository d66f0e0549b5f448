#!/usr/bin/env python3
"""profd on aarch64, in a Debian arm64 guest under qemu-system-aarch64 (test-arm64-guest.py
5.10|6.1|6.12): cross-builds profd (tests/arm64-cross-build.sh into BUILD/aarch64-cross, reusing
its arm64 root and kernel BTF under /var/cache/profd-tests/arm64), builds scenario programs for
aarch64 with -O2 -fomit-frame-pointer (only CFI can unwind them), runs all of them at once in ONE
guest with tests/arm64-guest.sh --run ... (TCG, -cpu max: pointer authentication on), one profile
window for all, and checks with `go tool pprof -traces` that >= 99% of each program's samples
(told apart by comm) carry one of its complete chains, with those names:
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
             thread's chain
  exceptions (static C++) exc_catch_leaf;exc_hot_loop[.cold];main ... _start, or throwing/catching
             in libgcc's unwinder above exc_thrower/exc_hot_loop
  dlopen     (dynamic) dl_module_leaf;dl_module_mid;dl_module_entry;dl_run;main ... _start in a
             module dlopen'ed after profd started
  go         (static, Debian's Go with GOARCH=arm64: test-go-stacks.py's program) the outermost frame
             is one Go's own tracebacks end at (runtime.goexit, mstart, mcall, rt0_go, clone)
  python     (dynamic: Debian 12's arm64 python3.11 and its minimal standard library, from .debs)
             pychain.c;pychain.b;pychain.a;pychain.<module>;PyEval_EvalCode ... Py_BytesMain ...
             _start: the Python frames, named from their code objects, in place of the eval function's
             frames; the window starts once the script's start-up (imports) is over"""
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time

from profdtest import BUILD, SRC, check, finish, go_env, log, skip, tmpdir, traces

# the Go program of test-go-stacks.py (three goroutines: allocating, reading the clock, computing)
# and the frames Go's tracebacks end at
_spec = importlib.util.spec_from_file_location("go_stacks", os.path.join(os.path.dirname(os.path.abspath(__file__)), "test-go-stacks.py"))
GO_STACKS = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(GO_STACKS)

KERNEL = sys.argv[1] if len(sys.argv) > 1 else "6.1"
CACHE = os.environ.get("PROFD_ARM64_CACHE", "/var/cache/profd-tests/arm64")
CROSS_BUILD = os.path.join(BUILD, "aarch64-cross")
THRESHOLD = 0.99
# All programs run at once in one guest (two CPUs, ~13 busy threads): each gets ~1/6 of a CPU, ~300
# samples at 99 Hz in the window; fewer than MIN_SAMPLES means the program was hardly sampled.
WINDOW = 25
MIN_SAMPLES = 150
RUN = ["600"]  # seconds: the programs outlive the window (the guest kills them after it)
BELOW_MAIN = r"main;(?:[^;]+;)*?__libc_start[^;]*;(?:[^;]+;)*?_start"
# name -> (program arguments, chains: leaf first, matched at the bottom of the ';'-joined stack,
# frames above allowed (kernel, clock reads) unless the chain starts with ^)
SCENARIOS = {
    "recursion": (RUN, [r"rec_leaf;(?:rec_descend;){300}rec_start;" + BELOW_MAIN]),
    # the same with pointer authentication (paciasp/autiasp): signed return addresses on the stack
    "recursion-pac": (RUN, [r"rec_leaf;(?:rec_descend;){300}rec_start;" + BELOW_MAIN]),
    # in the handler (one frame for the trampoline), or in the interrupted computation with no
    # handler frame or trampoline above it (a lost signal frame must not pass as that); the
    # trampoline is the vDSO's __kernel_rt_sigreturn
    "signal": (RUN, [r"sig_handler;__kernel_rt_sigreturn;sig_compute_leaf;sig_compute;" + BELOW_MAIN,
                        r"^(?:(?!sig_|\[)[^;]*;)*sig_compute_leaf;sig_compute;" + BELOW_MAIN,
                        # in rt_sigreturn (kernel frames), the trampoline, the interrupted frames
                        # (the pc just past the svc is the end of the 8-byte symbol: [[vdso]])
                        r"^(?:(?!sig_|\[)[^;]*;)*(?:__kernel_rt_sigreturn|\[\[vdso\]\]);sig_compute_leaf;sig_compute;"
                        + BELOW_MAIN]),
    # linked with Debian 13's libc.a (glibc 2.41, built with -mbranch-protection=standard: its
    # __libc_start_call_main signs its return address too), the program with it as well
    "recursion-trixie": (RUN, [r"rec_leaf;(?:rec_descend;){300}rec_start;" + BELOW_MAIN]),
    # dynamic, built by the cross-build (meson): into libscen-shlib.so through the PLT and back
    # through a callback; bookworm's arm64 libc.so.6 and ld.so from the arm64 root
    "shlib": (RUN, [r"shlib_lib_leaf;shlib_lib_mid;shlib_lib_entry;shlib_caller;" + BELOW_MAIN,
                       r"shlib_callback_leaf;shlib_callback;shlib_lib_mid;shlib_lib_entry;shlib_caller;" + BELOW_MAIN,
                       r"(?:__)?clock_gettime;" + BELOW_MAIN,
                       # a sample in the callers themselves (no shlib_ frame above the first one)
                       r"^(?:(?!shlib_|\[)[^;]*;)*(?:(?:(?:(?:shlib_callback;)?shlib_lib_mid;)?shlib_lib_entry;)?"
                       r"shlib_caller;)?" + BELOW_MAIN]),
    # C++ throw/catch in the hot loop, the work in the catch block (.cold fragment), some samples
    # in libgcc's unwinder (static: libstdc++/libgcc from the cross g++)
    "exceptions": (RUN, [r"exc_catch_leaf;exc_hot_loop(?:\.cold)?;" + BELOW_MAIN,
                         r"[^;]+;exc_thrower(?:\.cold)?;exc_hot_loop;" + BELOW_MAIN,
                         r"exc_hot_loop(?:\.cold)?;" + BELOW_MAIN]),
    # dynamic, built by the cross-build: the module dlopen'ed (at once) from / in the guest
    "dlopen": (RUN + ["/scen-dlopen-module.so", "0"],
               [r"dl_module_leaf;dl_module_mid;dl_module_entry;dl_run;" + BELOW_MAIN,
                r"(?:__)?clock_gettime;" + BELOW_MAIN,
                # a sample in the callers themselves (no dl_ frame above the first one)
                r"^(?:(?!dl_|\[)[^;]*;)*(?:(?:(?:dl_module_mid;)?dl_module_entry;)?dl_run;)?" + BELOW_MAIN]),
    # static, GOARCH=arm64: judged by its outermost frame (one Go's tracebacks end at), see judge()
    "go": (RUN, []),
    # python3.11 -S /pychain.py: a -> b -> c, c's loop reads the clock (native frames above c)
    "python": (["-S", "/pychain.py"] + RUN,
               [r"^(?:(?!pychain\.|\[unwind|\[trunc|\[unknown|\[python\])[^;]*;)*pychain\.c;pychain\.b;pychain\.a;pychain\.<module>;PyEval_EvalCode;"
                r"(?:[^;]+;)*?Py_RunMain;Py_BytesMain;(?:[^;]+;)*?__libc_start[^;]*;(?:[^;]+;)*?_start"]),
    "threads": (RUN, [r"thr_worker_leaf;thr_worker_mid;thr_worker;start_thread;thread_start",
                         r"thr_main_leaf;thr_main_work;" + BELOW_MAIN,
                         r"(?:__)?clock_gettime;thr_worker;start_thread;thread_start",
                         r"(?:__)?clock_gettime;" + BELOW_MAIN,  # main's loop reads the clock
                         # a sample in the callers themselves (no thr_ frame above the first one)
                         r"^(?:(?!thr_|\[)[^;]*;)*(?:thr_worker_mid;)?thr_worker;start_thread;thread_start",
                         r"^(?:(?!thr_|\[)[^;]*;)*(?:thr_main_work;)?" + BELOW_MAIN]),
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


def python_root():
    """An arm64 root of Debian 12's python3.11-minimal and what it needs (libc6, libpython3.11-minimal:
    the interpreter is linked with libpython statically; the minimal standard library), made once
    under CACHE: the guest runs /usr/bin/python3.11 of it, dynamically linked."""
    root = os.path.join(CACHE, "python-root")
    if os.path.exists(os.path.join(root, "usr", "bin", "python3.11")):
        return root
    debs = os.path.join(CACHE, "debs-python")
    os.makedirs(debs, exist_ok=True)
    apt = [os.path.join(SRC, "tests", "arm64", "apt-arm64.sh"), CACHE, "bookworm"]
    subprocess.run(apt + ["apt-get", "update"], capture_output=True)
    r = subprocess.run(apt + ["apt-get", "-s", "install", "--no-install-recommends", "python3.11-minimal"],
                       capture_output=True, text=True)
    pkgs = re.findall(r"^Inst (\S+)", r.stdout, re.M)
    if r.returncode != 0 or "python3.11-minimal" not in pkgs:
        skip("Debian 12's arm64 python3.11-minimal cannot be resolved (no network/mirror?): %s" % r.stderr[-300:])
    r = subprocess.run(apt + ["apt-get", "download"] + pkgs, cwd=debs, capture_output=True, text=True)
    if r.returncode != 0:
        skip("Debian 12's arm64 python3.11-minimal cannot be downloaded (no network/mirror?): %s" % r.stderr[-300:])
    tmp = root + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for deb in glob.glob(os.path.join(debs, "*.deb")):
        subprocess.run(["dpkg-deb", "-x", deb, tmp], check=True)
    os.rename(tmp, root)
    return root


# The Python scenario: a -> b -> c, c computing and reading the clock (a native call above it); it
# makes READY_FILE once its start-up is over, the window starts then.
PYCHAIN = r'''import sys
import time

READY_FILE = "/tmp/pychain.ready"


def c(deadline):
    n = 0
    while time.monotonic() < deadline:
        for i in range(500):
            n += i * i
    return n


def b(deadline):
    return c(deadline)


def a(deadline):
    open(READY_FILE, "w").close()
    return b(deadline)


a(time.monotonic() + float(sys.argv[1]))
'''
PYCHAIN_READY = "/tmp/pychain.ready"


def stage_python(extra):
    """python3.11 of python_root() (its path), its standard library in extra (compiled here when this
    machine's python3 is 3.11 too: the guest need not write .pyc files under TCG) and /pychain.py."""
    root = python_root()
    lib = os.path.join(extra, "usr", "lib", "python3.11")
    # sitecustomize.py is an absolute link into /etc (python3.11-minimal has no /etc): -S skips it
    shutil.copytree(os.path.join(root, "usr", "lib", "python3.11"), lib, symlinks=True,
                    ignore=shutil.ignore_patterns("sitecustomize.py"))
    if sys.version_info[:2] == (3, 11):
        subprocess.run([sys.executable, "-m", "compileall", "-q", lib], capture_output=True)
    # libexpat.so.1: python3.11 links it; the cross-build's arm64 root does not have it
    for so in glob.glob(os.path.join(root, "*lib", "aarch64-linux-gnu", "libexpat.so*")):
        dest = os.path.join(extra, "lib", "aarch64-linux-gnu")
        os.makedirs(dest, exist_ok=True)
        shutil.copy2(so, dest, follow_symlinks=False)
    with open(os.path.join(extra, "pychain.py"), "w") as f:
        f.write(PYCHAIN)
    return os.path.join(root, "usr", "bin", "python3.11")


# libgcc's uw_install_context_1 writes the landing pad's registers into _Unwind_RaiseException's
# register save slots before its epilogue restores them (__builtin_eh_return): a sample there finds
# a return address into exc_hot_loop with the CFA of a frame that is being torn down, and the walk
# goes wrong after it, as any CFI unwinder's would (x86-64: ~1% of the samples, and perf records the
# same stacks, docs/performance.md). Those samples are told apart and may be at most TORN of the
# program's; the rest must be complete.
# (Go's runtime.asyncPreempt, a call a signal handler injected, and runtime.morestack are walked
# through since GO_PREEMPT and GO_MORESTACK rows: no allowance; docs/unwinder.md.)
TORN = {"exceptions": (re.compile(r"(?:^|;)(?:uw_install_context_1;)?_Unwind_RaiseException;exc_hot_loop;"
                                  r"\[unknown\][^;]*;\[unwind stopped: [^;]*\]$"), 0.05)}


def build(d, name, args):
    """Builds scenario name for aarch64 into d (or takes it from the cross-build): its path, or None."""
    source, _, variant = name.partition("-")
    if name == "python":  # Debian's, from its arm64 .debs
        return stage_python(os.path.join(d, "extra"))
    if name in ("shlib", "dlopen"):  # dynamic: built by the cross-build (meson)
        return os.path.join(CROSS_BUILD, "tests", "scenarios", "scen-" + name)
    # comm is the first 15 characters of the name: unique for each scenario
    prog = os.path.join(d, name if variant else "scen-" + name)
    env = None
    if name == "go":
        with open(os.path.join(d, "main.go"), "w") as f:
            f.write(GO_STACKS.SRC)
        env = go_env()
        env.update(GO111MODULE="off", GOPATH=os.path.join(d, "gopath"), GOOS="linux", GOARCH="arm64",
                   CGO_ENABLED="0")
        cmd = ["go", "build", "-o", prog, os.path.join(d, "main.go")]
    else:
        sysroot = trixie_root() if variant == "trixie" else os.path.join(CACHE, "sysroot")
        flags = {"pac": ["-mbranch-protection=pac-ret"], "trixie": ["-mbranch-protection=standard"]}.get(variant, [])
        cxx = source == "exceptions"
        cmd = (["aarch64-linux-gnu-g++" if cxx else "aarch64-linux-gnu-gcc", "--sysroot=" + sysroot, "-O2",
                "-fomit-frame-pointer", "-fasynchronous-unwind-tables", "-g", "-static", "-pthread"] + flags +
               ["-I" + os.path.join(SRC, "tests", "scenarios"),
                os.path.join(SRC, "tests", "scenarios", source + (".cc" if cxx else ".c")), "-o", prog])
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=d, timeout=600)
    if not check(r.returncode == 0, "static aarch64 %s builds: %s" % (name, r.stderr[-1000:])):
        return None
    return prog


def go_frames(t):
    # .symtab names Go's assembly functions with their ABI ("runtime.goexit.abi0")
    return [re.sub(r"\.abi0$", "", f) for f in t.frames if not f.endswith(" (inline)")]


GO_OUTERMOST = GO_STACKS.OUTERMOST


def in_order(frames, *names):
    """names appear in frames in this order (others between them allowed)."""
    i = 0
    for f in frames:
        if i < len(names) and f == names[i]:
            i += 1
    return i == len(names)


def judge(out, name, prog, chains):
    comm = os.path.basename(prog)[:15]
    if name == "go":
        # the root is one of those Go's own tracebacks end at, nothing stopped early
        def complete(t):
            f = go_frames(t)
            # newstack on g0 after it descheduled the goroutine (m.curg nil): Go's tracebacks end
            # at morestack too
            return bool(f) and not any(x.startswith("[unwind stopped") for x in f) and (
                f[-1] in GO_OUTERMOST or f[-2:] == ["runtime.newstack", "runtime.morestack"])
    else:
        def complete(t):
            stack = ";".join(f for f in t.frames if not f.endswith(" (inline)"))
            return any(c.search(stack) for c in chains)

    mine = [t for t in traces(out) if t.labels.get("comm") == [comm]]
    if name in TORN:
        rx, limit = TORN[name]
        all_n = sum(t.value for t in mine)
        torn = sum(t.value for t in mine if rx.search(";".join(t.frames)))
        check(torn <= limit * max(all_n, 1), "%s: %d of %d samples in a known unwinding gap "
              "(<= %.0f%%)" % (name, torn, all_n, limit * 100))
        mine = [t for t in mine if not rx.search(";".join(t.frames))]
    total = sum(t.value for t in mine)
    good = sum(t.value for t in mine if complete(t))
    for t in sorted((t for t in mine if not complete(t)), key=lambda t: -t.value)[:8]:
        log("%s incomplete (%d): %s" % (name, t.value, ";".join(t.frames)[:600]))
    if name == "go":
        switched = sum(t.value for t in mine if "runtime.systemstack" in go_frames(t))
        crossed = sum(t.value for t in mine if complete(t) and
                      in_order(go_frames(t)[::-1], "runtime.goexit", "main.allocLoop", "runtime.systemstack"))
        log("go: %d samples through runtime.systemstack, %d of them complete, %d reach main.allocLoop" %
            (switched, sum(t.value for t in mine if "runtime.systemstack" in go_frames(t) and complete(t)), crossed))
        for fn in ("runtime.asyncPreempt", "runtime.morestack"):
            through = sorted((t for t in mine if fn in go_frames(t)), key=lambda t: -t.value)
            log("go: %d samples through %s, %d of them complete%s" % (
                sum(t.value for t in through), fn, sum(t.value for t in through if complete(t)),
                ", e.g. " + ";".join(go_frames(through[0]))[:500] if through else ""))
        # the g0 stack's callers are on the goroutine's (g.m.curg.sched.bp, x28 = g)
        check(crossed > 0, "go: samples on the g0 stack reach the goroutine: goexit;main.allocLoop;...;"
              "runtime.systemstack (%d)" % crossed)
    check(total >= MIN_SAMPLES, "%s sampled in the %s guest: %d samples (>= %d)" % (name, KERNEL, total, MIN_SAMPLES))
    check(total and good >= THRESHOLD * total, "%s: %d of %d samples (%.1f%%) complete (>= %.0f%%)"
          % (name, good, total, 100.0 * good / max(total, 1), THRESHOLD * 100))


def main():
    for tool in ("qemu-system-aarch64", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++", "cpio"):
        if subprocess.run(["sh", "-c", "command -v " + tool], capture_output=True).returncode != 0:
            skip("%s missing: install qemu-system-arm, gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu, cpio "
                 "(docs/debian-packages-tests.txt)" % tool)
    t0 = time.monotonic()
    env = dict(os.environ, PROFD_ARM64_BUILD=CROSS_BUILD, PROFD_ARM64_CACHE=CACHE, PROFD_SKIP_INSTALL="1")
    r = subprocess.run([os.path.join(SRC, "tests", "arm64-cross-build.sh"), "daemon/profd",
                        "tests/scenarios/scen-shlib:executable",
                        "tests/scenarios/scen-dlopen:executable", "tests/scenarios/scen-dlopen-module"], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        check(False, "cross-build for aarch64: %s" % (r.stdout + r.stderr)[-3000:])
        finish()
    log("cross-build: %.0f s" % (time.monotonic() - t0))

    d = tmpdir()
    # the module scen-dlopen loads and the Python scenario's files, at / in the guest
    extra = os.path.join(d, "extra")
    os.makedirs(extra)
    shutil.copy2(os.path.join(CROSS_BUILD, "tests", "scenarios", "scen-dlopen-module.so"), extra)
    progs = {}
    for name in SCENARIOS:
        prog = build(d, name, SCENARIOS[name][0])
        if prog:
            progs[name] = prog
    out = os.path.join(d, "guest.pb.gz")
    t1 = time.monotonic()
    cmd = [os.path.join(SRC, "tests", "arm64-guest.sh"), "--kernel", KERNEL, "--out", out,
           "--seconds", str(WINDOW), "--build", CROSS_BUILD, "--cache", CACHE, "--extra", extra]
    for name, prog in progs.items():
        cmd += ["--run", " ".join([prog] + SCENARIOS[name][0])]
    if "python" in progs:
        cmd += ["--ready", PYCHAIN_READY]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    log(r.stderr.strip()[-6000:])
    if not check(r.returncode == 0 and os.path.exists(out), "guest %s returned a profile" % KERNEL):
        finish()
    log("guest %s, %d programs: %.0f s" % (KERNEL, len(progs), time.monotonic() - t1))
    for name, prog in progs.items():
        judge(out, name, prog, [re.compile((c if c.startswith("^") else r"(?:^|;)" + c) + "$")
                                for c in SCENARIOS[name][1]])
    finish()


if __name__ == "__main__":
    main()
