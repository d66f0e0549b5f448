#!/usr/bin/env python3
"""profd on aarch64, in a Debian arm64 guest under qemu-system-aarch64 (test-arm64-guest.py
5.10|6.1|6.12 [runtimes]): cross-builds profd (tests/arm64-cross-build.sh into BUILD/aarch64-cross, reusing
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
             frames; the window starts once the script's start-up (imports) is over
With the argument "runtimes" (meson test arm64-guest-runtimes-6.12) the guest runs these two instead,
in a boot of their own (their root, a JRE and libnode, is ~250 MiB more in the initramfs):
  java       (Debian 12's arm64 openjdk-17-jre-headless, from .debs, no JVM flags) a thread runs
             Chain.work -> Chain.outer -> Chain.middle -> Chain.hot, C2-compiled with the callees
             inlined once warm: >= 95% of the samples in Chain.hot show that chain, each frame with
             its source line, down to start_thread
  node       (Debian 12's arm64 nodejs 18/libnode108, from .debs) outer -> middle -> hot, hot
             optimized: >= 95% of the samples in hot show outer;middle;hot named (the script as their
             file), down to _start; its worker thread runs test-v8-stacks.py's osr.js (level2's loop
             on-stack-replaced with level3 inlined, calling hot): >= 95% of the samples in that hot
             show level1;level2;level3;hot with the callers at their calls' lines, down to the
             worker's thread (node::worker::Worker::Run), some with level3 inlined"""
import glob
import os
import re
import shutil
import subprocess
import sys
import time

from profdtest import BUILD, SRC, check, finish, go_env, load_test, log, skip, tmpdir, traces

# the Go program of test-go-stacks.py (three goroutines: allocating, reading the clock, computing)
# and the frames Go's tracebacks end at
GO_STACKS = load_test("test-go-stacks.py")

KERNEL = sys.argv[1] if len(sys.argv) > 1 else "6.1"
CACHE = os.environ.get("PROFD_ARM64_CACHE", "/var/cache/profd-tests/arm64")
CROSS_BUILD = os.path.join(BUILD, "aarch64-cross")
THRESHOLD = 0.99
# All programs run at once in one guest (two CPUs, ~13 busy threads): each gets ~1/6 of a CPU, ~300
# samples at 99 Hz in the window; fewer than MIN_SAMPLES means the program was hardly sampled.
WINDOW = 25
MIN_SAMPLES = 150
# Scenarios of `test-arm64-guest.py KERNEL runtimes` (meson test arm64-guest-runtimes-6.12): their
# root (a JRE, libnode) doubles the initramfs, a boot of their own.
RUNTIMES = ("java", "node")
BY_HAND = ()
# The JVM's thread shares its process's samples with the JIT compilers and GC threads.
MIN_JAVA = 100
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
    # judged by judge_java / judge_node (their own chains: lines, inlined frames)
    "java": (["-cp", "/", "Chain"] + RUN, []),
    "node": (["/chain.js"] + RUN, []),
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


def debian_root(name, packages, marker):
    """An arm64 root of Debian 12's packages (only those named: their libc is the cross-build's),
    made once under CACHE/NAME-root from .debs downloaded into CACHE/debs-NAME."""
    root = os.path.join(CACHE, name + "-root")
    if os.path.exists(os.path.join(root, marker)):
        return root
    debs = os.path.join(CACHE, "debs-" + name)
    os.makedirs(debs, exist_ok=True)
    apt = [os.path.join(SRC, "tests", "arm64", "apt-arm64.sh"), CACHE, "bookworm"]
    subprocess.run(apt + ["apt-get", "update"], capture_output=True)
    r = subprocess.run(apt + ["apt-get", "download"] + packages, cwd=debs, capture_output=True, text=True)
    if r.returncode != 0:
        skip("Debian 12's arm64 %s cannot be downloaded (no network/mirror?): %s" % (packages[0], r.stderr[-300:]))
    tmp = root + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for deb in glob.glob(os.path.join(debs, "*.deb")):
        subprocess.run(["dpkg-deb", "-x", deb, tmp], check=True)
    os.rename(tmp, root)
    return root


def copy_libs(root, extra, patterns):
    """The shared libraries of root matching patterns into extra's /lib/aarch64-linux-gnu."""
    dest = os.path.join(extra, "lib", "aarch64-linux-gnu")
    os.makedirs(dest, exist_ok=True)
    for pat in patterns:
        for so in glob.glob(os.path.join(root, "*lib", "aarch64-linux-gnu", pat)) + \
                glob.glob(os.path.join(root, "usr", "lib", "aarch64-linux-gnu", pat)):
            if not os.path.lexists(os.path.join(dest, os.path.basename(so))):
                shutil.copy2(so, dest, follow_symlinks=False)


# The Java scenario: a thread runs work -> outer -> middle -> hot (hot walks a linked list: not a
# counted loop, its back-edge keeps a safepoint poll and with it a PcDesc saying which inlined
# methods run there); it makes JAVA_READY once warm (C2 has compiled work's loop by then under TCG).
JAVA = """import java.io.File;

public class Chain {
    static final class Node {
        final long v;
        final Node next;
        Node(long v, Node next) { this.v = v; this.next = next; }
    }
    static Node list;

    static long hot(long x) {
        for (Node p = list; p != null; p = p.next) x = x * 6364136223846793005L + p.v; // @hot
        return x;
    }

    static long middle(long x) {
        return hot(x) ^ 0x9e3779b97f4a7c15L; // @middle
    }

    static long outer(long x) {
        return middle(x) + 1; // @outer
    }

    static void work(long warm_ns) throws Exception {
        long s = 0, t0 = System.nanoTime();
        boolean ready = false;
        for (long k = 0; ; k++) {
            s = outer(s); // @work
            if (!ready && (k & 1023) == 0 && System.nanoTime() - t0 > warm_ns) {
                new File("/tmp/chain-java.ready").createNewFile();
                ready = true;
            }
        }
    }

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < 300; i++)
            list = new Node(i, list);
        Thread t = new Thread(() -> {
            try {
                work(JAVA_WARM_S * 1000000000L); // @lambda
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        t.start();
        t.join();
    }
}
"""
JAVA_READY = "/tmp/chain-java.ready"
JAVA_WARM_S = 10
JAVA_HOME = "usr/lib/jvm/java-17-openjdk-arm64"


def line_of(text, mark):
    return next(i for i, l in enumerate(text.split("\n"), 1) if mark in l)


def stage_java(extra, d):
    """Debian 12's arm64 JRE in extra at its own path (its java runs there: the JVM finds its home
    by it), the libraries it needs, and /Chain.class compiled here. Returns its java."""
    root = debian_root("java", ["openjdk-17-jre-headless", "zlib1g", "libstdc++6", "libgcc-s1"],
                       os.path.join(JAVA_HOME, "lib", "server", "libjvm.so"))
    home = os.path.join(extra, JAVA_HOME)
    # what a headless JVM loads (not the AWT/sound/font libraries), and its configuration (lib/
    # and conf/ are partly links into /etc)
    shutil.copytree(os.path.join(root, JAVA_HOME), home, symlinks=True,
                    ignore=shutil.ignore_patterns("libawt*", "libfontmanager*", "libjsound*", "libmlib*",
                                                  "libjavajpeg*", "liblcms*", "libsplashscreen*", "man",
                                                  "ct.sym", "src.zip", "classes_nocoops.jsa", "libsaproc*"))
    shutil.copytree(os.path.join(root, "etc"), os.path.join(extra, "etc"), symlinks=True, dirs_exist_ok=True)
    copy_libs(root, extra, ["libz.so*", "libstdc++.so*", "libgcc_s.so*"])
    # libjvm.so's own (dlopen'ed: the guest copies only what java itself needs)
    copy_libs(os.path.join(CACHE, "sysroot"), extra, ["libm.so*", "libdl.so*", "libpthread.so*", "librt.so*"])
    src = os.path.join(d, "java-src")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(src, "Chain.java"), "w") as f:
        f.write(JAVA.replace("JAVA_WARM_S", str(JAVA_WARM_S)))
    r = subprocess.run(["javac", "--release", "17", "-g", "-d", extra, os.path.join(src, "Chain.java")],
                       capture_output=True, text=True, timeout=300)
    if not check(r.returncode == 0, "javac Chain.java: %s" % r.stderr[-1000:]):
        return None
    return os.path.join(home, "bin", "java")


# The Node scenario: outer -> middle -> hot, hot looping (optimized by on-stack replacement); it
# makes NODE_READY at once (node's start-up is its own: the window starts after it).
NODE = r"""'use strict';
const fs = require('fs');
function hot(ms) {
  const end = Date.now() + ms;
  let s = 0;
  while (Date.now() < end) for (let i = 0; i < 20000; i++) s = (s + i * i) % 1000003;
  return s;
}
function middle(ms) { return hot(ms); }
function outer(ms) { fs.writeFileSync('/tmp/chain-node.ready', ''); return middle(ms); }
new (require('worker_threads').Worker)('/osr.js', { argv: [process.argv[2]] });
outer(Number(process.argv[2]) * 1000);
"""
NODE_READY = "/tmp/chain-node.ready"
# Its worker thread runs v8-stacks' osr.js chain (level2's loop on-stack-replaced by TurboFan with
# level3 inlined, calling hot in a frame of its own), for as long. The worker makes NODE_OSR_READY
# as it starts level1: a new isolate's start-up under TCG can outlast the window on a slow host.
V8_STACKS = load_test("test-v8-stacks.py")
NODE_OSR_READY = "/tmp/osr-node.ready"
NODE_OSR = V8_STACKS.OSR_SCRIPT.replace('console.log("ready");\nlevel1(60000);',
                                        "require('fs').writeFileSync('%s', '');\n"
                                        "level1(Number(process.argv[2]) * 1000);" % NODE_OSR_READY)
assert NODE_OSR != V8_STACKS.OSR_SCRIPT


def stage_node(extra):
    """Debian 12's arm64 node 18 (libnode.so.108 holds V8) and its libraries in extra, /chain.js.
    Returns its node (copied to /node with its libraries by the guest)."""
    # Debian's node loads some of its builtins from /usr/share/nodejs (node-cjs-module-lexer, ...)
    root = debian_root("node", ["nodejs", "libnode108", "libc-ares2", "libstdc++6", "libicu72",
                                "libnghttp2-14", "libssl3", "libuv1", "zlib1g", "libbrotli1", "libgcc-s1",
                                "node-cjs-module-lexer", "node-acorn", "node-undici", "node-busboy", "node-xtend"],
                       os.path.join("usr", "share", "nodejs", "cjs-module-lexer", "lexer.js"))
    shutil.copytree(os.path.join(root, "usr", "share", "nodejs"), os.path.join(extra, "usr", "share", "nodejs"),
                    symlinks=True, dirs_exist_ok=True)
    copy_libs(root, extra, ["libnode.so*", "libcares.so*", "libstdc++.so*", "libicu*.so*", "libnghttp2.so*",
                            "libssl.so*", "libcrypto.so*", "libuv.so*", "libz.so*", "libbrotli*.so*",
                            "libgcc_s.so*"])
    with open(os.path.join(extra, "chain.js"), "w") as f:
        f.write(NODE)
    with open(os.path.join(extra, "osr.js"), "w") as f:
        f.write(NODE_OSR)
    return os.path.join(root, "usr", "bin", "node")


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
    if name == "java":
        return stage_java(os.path.join(d, "extra"), d)
    if name == "node":
        return stage_node(os.path.join(d, "extra"))
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


def java_chain():
    """(name, Chain.java:line) innermost first; other frames may stand between them (the lambda's)."""
    return [(n, "Chain.java:%d" % line_of(JAVA, "// @" + m)) for n, m in
            (("Chain.hot", "hot"), ("Chain.middle", "middle"), ("Chain.outer", "outer"), ("Chain.work", "work"))] + \
        [("java.lang.Thread.run", None)]


def java_frame(frame):
    """"Chain.hot Chain.java:13 (inline)" -> (name, "Chain.java:13", inlined)."""
    inlined = frame.endswith(" (inline)")
    frame = frame[:-len(" (inline)")] if inlined else frame
    m = re.match(r"^(.*?) (\S+):(\d+)$", frame)
    if m:
        return m.group(1), os.path.basename(m.group(2)) + ":" + m.group(3), inlined
    return frame.split("(")[0] if not frame.startswith("[") else frame.split(" ")[0], None, inlined


def java_whole(frames):
    """None when frames (innermost first) hold the chain in order with its lines down to
    start_thread, else why not."""
    got = [java_frame(f) for f in frames]
    # start_thread and thread_start: unnamed in bookworm's arm64 libc.so.6 (no .symtab, no debug
    # link the guest has), so the thread's start is HotSpot's thread_native_entry and libc below
    bottom = [n for n, _, _ in got[-3:]]
    if not (bottom == ["thread_native_entry", "[libc.so.6]", "[libc.so.6]"] or
            bottom[-2:] == ["start_thread", "thread_start"]):
        return "does not end at start_thread"
    pos = 0
    for name, line in java_chain():
        while pos < len(got) and got[pos][0] != name:
            pos += 1
        if pos == len(got):
            return "no %s (in order)" % name
        if line and got[pos][1] != line:
            return "%s at %s, not %s" % (name, got[pos][1], line)
    return None


def judge_java(out, pid):
    """Samples whose leaf is Chain.hot: >= 95% show the whole chain with lines; C2 inlined it."""
    hot = ok = inlined = 0
    bad = {}
    for tr in traces(out, lines=True):
        if tr.labels.get("pid") != [str(pid)] or not tr.frames or not tr.frames[0].startswith("Chain.hot "):
            continue
        hot += tr.value
        why = java_whole(tr.frames)
        if why is None:
            ok += tr.value
        else:
            bad[why] = bad.get(why, 0) + tr.value
            if bad[why] == tr.value:
                log("java incomplete (%s): %s" % (why, ";".join(tr.frames)[:700]))
        inlined += tr.value if tr.frames[0].endswith(" (inline)") else 0
    log("java: %d samples in Chain.hot, %d with the whole chain, %d in C2 code with hot inlined" % (hot, ok, inlined))
    check(hot >= MIN_JAVA, "java sampled in Chain.hot in the %s guest: %d samples (>= %d)" % (KERNEL, hot, MIN_JAVA))
    check(hot and ok >= 0.95 * hot, "java: %d of %d samples in Chain.hot (%.1f%%) show the whole chain with lines "
          "(>= 95%%)" % (ok, hot, 100.0 * ok / max(hot, 1)))
    check(inlined > 0, "java: samples in Chain.hot inlined by C2 (%d)" % inlined)


def judge_node(out, pid):
    """Samples of the main thread with a frame of the script: >= 95% show outer;middle;hot (the
    script as file) and reach _start."""
    total = ok = with_lines = 0
    for tr in traces(out, lines=True):
        if tr.labels.get("pid") != [str(pid)] or tr.labels.get("comm") != ["node"]:
            continue
        # "name /chain.js", or "name /chain.js:LINE" for interpreted frames
        js = [m.groups() for m in (re.match(r"^(\S+) /chain\.js(?::(\d+))?$", f) for f in tr.frames) if m]
        if not js:
            continue
        total += tr.value
        # hot the innermost frame of the script, called by middle, called by outer; a caller's line,
        # when there is one, is that of its call (NODE: middle's on line 9, outer's on line 10)
        names = [n for n, _ in js[:3]]
        lines = {n: l for n, l in js[1:3]}
        right_lines = all(lines.get(n) in (None, want) for n, want in (("middle", "9"), ("outer", "10")))
        whole = (names == ["hot", "middle", "outer"] and right_lines
                 and any(re.match(r"_start(?: |$)", f) for f in tr.frames[-3:]))
        ok += tr.value if whole else 0
        with_lines += tr.value if whole and None not in lines.values() else 0
        if not whole:
            log("node incomplete (%d): %s" % (tr.value, ";".join(tr.frames)[:700]))
    check(with_lines >= 0.5 * max(total, 1), "node: %d of %d samples carry middle's and outer's call lines (>= 50%%)"
          % (with_lines, total))
    check(total >= MIN_SAMPLES, "node sampled in the %s guest: %d samples in the script (>= %d)" % (KERNEL, total, MIN_SAMPLES))
    check(total and ok >= 0.95 * total, "node: %d of %d samples in the script (%.1f%%) show outer;middle;hot "
          "down to _start (>= 95%%)" % (ok, total, 100.0 * ok / max(total, 1)))


def judge_node_osr(out, pid, stderr):
    """The worker's samples in osr.js's hot: >= 95% show hot;level3;level2;level1 with osr.js as file,
    the callers at their markers' lines (level2's from its on-stack-replaced Code, never the
    statement after its call), hot at a line of its body, down to the worker's thread function
    (node::worker::Worker::Run; below it bookworm's arm64 libc is unnamed in the guest); level3
    inlined in some; /metrics counting frames of on-stack-replaced code and optimized lines."""
    markers, bodies = V8_STACKS.OSR_MARKERS, V8_STACKS.OSR_BODIES
    chain = ["hot", "level3", "level2", "level1"]
    total = ok = inlined = outside = 0
    for tr in traces(out, lines=True):
        if tr.labels.get("pid") != [str(pid)]:
            continue
        js = [m.groups() for m in (re.match(r"^(\S+) /osr\.js(?::(\d+))?( \(inline\))?$", f) for f in tr.frames) if m]
        # whatever the tier (interpreted, baseline, optimized, an unsure leaf), a line shown lies in
        # its function
        if any(line and n in bodies and int(line) not in bodies[n] for n, line, _ in js):
            outside += tr.value
            log("node osr.js line outside its function (%d): %s" % (tr.value, ";".join(tr.frames)[:700]))
        if not js or js[0][0] != "hot":
            continue
        total += tr.value
        names = [n for n, _, _ in js[:4]]
        lines = {n: int(l) if l else 0 for n, l, _ in js[:4]}
        right = (names == chain and all(lines[n] == markers[n] for n in chain[1:])
                 and (lines["hot"] == 0 or lines["hot"] in bodies["hot"])
                 and any(f.startswith("node::worker::Worker::Run") for f in tr.frames[-4:]))
        ok += tr.value if right else 0
        inlined += tr.value if any(n == "level3" and inl for n, _, inl in js) else 0
        if not right:
            log("node osr.js wrong (%d): %s" % (tr.value, ";".join(tr.frames)[:700]))
    check(total >= MIN_SAMPLES, "node osr.js sampled in the %s guest: %d samples in hot (>= %d)"
          % (KERNEL, total, MIN_SAMPLES))
    check(total and ok >= 0.95 * total, "node osr.js: %d of %d samples in hot (%.1f%%) show level1;level2;level3;hot "
          "at lines %s down to node::worker::Worker::Run (>= 95%%)" % (ok, total, 100.0 * ok / max(total, 1),
                                                         ";".join(str(markers[n]) for n in reversed(chain[1:]))))
    check(outside == 0, "node osr.js: %d samples show a line outside its function" % outside)
    check(inlined > 0, "node osr.js: samples with level3 inlined into level2's on-stack-replaced code (%d of %d)"
          % (inlined, total))
    for name in ("profd_v8_osr_frames_total", 'profd_v8_lines_total{result="optimized_line"}'):
        m = re.search(r"^%s (\d+)" % re.escape(name), stderr, re.M)
        check(m and int(m.group(1)) > 0, "node: /metrics %s (%s)" % (name, m and m.group(1)))


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
    # "runtimes" (argv[2]): the JVM and node only, in a boot of their own; else the others.
    # PROFD_ARM64_SCENARIOS=a,b: only those (runs by hand)
    only = [n for n in os.environ.get("PROFD_ARM64_SCENARIOS", "").split(",") if n]
    if not only:
        only = [n for n in SCENARIOS if n not in BY_HAND and (n in RUNTIMES) == (sys.argv[2:3] == ["runtimes"])]
    for name in only:
        prog = build(d, name, SCENARIOS[name][0])
        if prog:
            progs[name] = prog
    out = os.path.join(d, "guest.pb.gz")
    t1 = time.monotonic()
    cmd = [os.path.join(SRC, "tests", "arm64-guest.sh"), "--kernel", KERNEL, "--out", out,
           "--seconds", str(WINDOW), "--build", CROSS_BUILD, "--cache", CACHE, "--extra", extra]
    for name, prog in progs.items():
        cmd += ["--run", " ".join([prog] + SCENARIOS[name][0])]
    for name, ready in (("python", PYCHAIN_READY), ("java", JAVA_READY), ("node", NODE_READY),
                        ("node", NODE_OSR_READY)):
        if name in progs:
            cmd += ["--ready", ready]
    if "java" in progs or "node" in progs:  # the root holds a JRE (~170 MiB) or libnode (~80)
        cmd += ["--memory", "2048"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    if os.environ.get("PROFD_ARM64_KEEP"):  # the profile, for a look by hand
        shutil.copy(out, os.environ["PROFD_ARM64_KEEP"])
    log(r.stderr.strip()[-9000:])
    if not check(r.returncode == 0 and os.path.exists(out), "guest %s returned a profile" % KERNEL):
        finish()
    log("guest %s, %d programs: %.0f s" % (KERNEL, len(progs), time.monotonic() - t1))
    pids = re.search(r"PROGRAM-PID((?: \d+)+)", r.stderr)
    pids = dict(zip(progs, pids.group(1).split())) if pids else {}
    for name, prog in progs.items():
        if name == "java":
            judge_java(out, pids.get(name))
        elif name == "node":
            judge_node(out, pids.get(name))
            judge_node_osr(out, pids.get(name), r.stderr)
        else:
            judge(out, name, prog, [re.compile((c if c.startswith("^") else r"(?:^|;)" + c) + "$")
                                    for c in SCENARIOS[name][1]])
    finish()


if __name__ == "__main__":
    main()
