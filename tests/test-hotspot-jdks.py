#!/usr/bin/env python3
"""Java stacks with no flags on Debian's other JDKs: OpenJDK 11 (bullseye), 21 and 25 (trixie), each
in a Debian root of its own, run in a mount namespace with that root as its / (as in a container).

The roots are copies of the Debian roots under /var/cache/profd-tests/roots (never modified) with
the JDKs installed by the root's own apt, made once and cached as ROOT-jdk next to them. For each
JDK: the interpreted chain of hotspot-stacks (Deflate: zlib, JNI, Deflater.deflate x2, Deflate.c,
.b, .a, .main with their lines, the JVM down to start_thread in >= 95% of the samples in zlib),
the callers check of hotspot-callers (no Java frame with a caller it does not have, >= 80% of
the samples complete), and the inlining check of hotspot-inlining (compiled Inline.hot with its
inlined callers and lines through JNI and a thread pool in >= 95% of its samples). A JDK whose root cannot be made (the archive unreachable) is skipped loudly;
the test fails when none ran."""
import os
import shutil
import subprocess
import time

import debianroot
import profdtest as t

ROOTS = debianroot.ROOTS_DIR
# (name, base root, package, java home in the root)
JDKS = [
    ("OpenJDK 11", "bullseye", "openjdk-11-jdk-headless", "/usr/lib/jvm/java-11-openjdk-amd64"),
    ("OpenJDK 21", "trixie", "openjdk-21-jdk-headless", "/usr/lib/jvm/java-21-openjdk-amd64"),
    ("OpenJDK 25", "trixie", "openjdk-25-jdk-headless", "/usr/lib/jvm/java-25-openjdk-amd64"),
]


def make_root(base, packages):
    """ROOTS/base-jdk with packages installed (tests/lib/debianroot.py; cached), or None."""
    try:
        return debianroot.ensure_derived(base, "jdk", packages, log=t.log)
    except debianroot.RootUnavailable as e:
        t.log("the %s-jdk root cannot be made: %s" % (base, e))
        return None


def main():
    t.require_bpf()
    if not shutil.which("go"):
        t.skip("go (golang-go) is not installed: the profile is read with go tool pprof")
    if not shutil.which("unshare"):
        t.skip("unshare (util-linux) is not installed")
    stacks = t.load_test("test-hotspot-stacks.py")
    callers = t.load_test("test-hotspot-callers.py")
    inlining = t.load_test("test-hotspot-inlining.py")
    # trixie's libc6 without its debug symbols: start_thread and clone are unnamed (but in libc).
    for mod in (stacks, callers, inlining):
        mod.THREAD_TAILS.append(["[libc.so.6]", "[libc.so.6]"])
    by_base = {}
    for _, base, pkg, _ in JDKS:
        by_base.setdefault(base, []).append(pkg)
    roots = {base: make_root(base, pkgs) for base, pkgs in by_base.items()}
    available = [(name, roots[base], home) for name, base, _, home in JDKS
                 if roots[base] and os.path.exists(os.path.join(roots[base], home.lstrip("/"), "bin/java"))]
    for name, base, _, _ in JDKS:
        if not roots[base]:
            t.log("SKIPPING %s: its root could not be made from %s/%s (archive unreachable?)" % (name, ROOTS, base))
    if not available:
        t.skip("no JDK root could be made (Debian archive unreachable?)")
    work = {}
    for name, root, home in available:
        d = os.path.join(root, "tmp", "profd-jdks-%d-%s" % (os.getpid(), name.split()[-1]))
        os.makedirs(d, exist_ok=True)
        work[name] = d
        inlining.build_jni(os.path.join(root, home.lstrip("/")), d)
        inner = "/" + os.path.relpath(d, root)
        sources = []
        for cls, src in (("Deflate", stacks.DEFLATE_JAVA), ("Callers", callers.CALLERS_JAVA),
                         ("Inline", inlining.JAVA)):
            with open(os.path.join(d, cls + ".java"), "w") as f:
                f.write(src)
            sources.append(inner + "/" + cls + ".java")
        # One javac for the three (each start of javac is seconds of JIT warm-up).
        p = debianroot.in_root(root, [home + "/bin/javac", "-d", inner] + sources)
        if p.wait(timeout=180) != 0:
            raise RuntimeError("%s: javac failed" % name)
    jvms = []
    try:
        with t.Daemon("--frequency", "997") as dmn:
            for name, root, home in available:
                inner = "/" + os.path.relpath(work[name], root)
                java = debianroot.in_root(root, [home + "/bin/java", "-cp", inner, "Deflate"], stdout=subprocess.DEVNULL)
                jvms.append(java)
                # The root's libjvm.so is new to profd: its tables are built first (seconds).
                t.unwind_ready(dmn, java.pid, "libjvm.so", name, timeout_s=120)
                time.sleep(2)  # 32 MiB of input made, then the chain runs
                stacks.check_profile(dmn, java, name)
                # What profd knows of the JVM (for a failure above: detection, tables, BPF counts).
                t.log("%s: profd's view of pid %d:\n%s" % (name, java.pid, dmn.get(
                    "/debug/profd/process?pid=%d" % java.pid)[2].decode(errors="replace")[:300]))
                t.log("\n".join(l for l in dmn.get("/metrics")[2].decode().splitlines()
                                 if l.startswith(("profd_hotspot_detections", "profd_hotspot_processes",
                                                  "profd_hotspot_bpf_frames")) and not l.endswith(" 0")))
                t.stop_all([java])
                java = debianroot.in_root(root, [home + "/bin/java", "-cp", inner, "Callers"], stdout=subprocess.DEVNULL)
                jvms.append(java)
                t.unwind_ready(dmn, java.pid, "libjvm.so", name, timeout_s=120)
                time.sleep(3)  # drive and the apply methods compiled by C2 by then
                path = t.fetch_profile(dmn, 5, "&pid=%d" % java.pid)
                total, complete, wrong = callers.check_stacks(t.traces(path), name)
                t.check(total >= 500, "%s: at least 500 samples of the JVM (%d)" % (name, total))
                t.check(wrong == 0, "%s: no Java frame with a caller it does not have (%d samples)" % (name, wrong))
                t.check(total > 0 and complete >= 0.8 * total,
                        "%s: >= 80%% of the samples reach start_thread (%d of %d)" % (name, complete, total))
                t.stop_all([java])
                java = debianroot.in_root(root, [home + "/bin/java", "-Djava.library.path=" + inner, "-cp", inner, "Inline"],
                               stdout=subprocess.DEVNULL)
                jvms.append(java)
                t.unwind_ready(dmn, java.pid, "libjvm.so", name, timeout_s=120)
                time.sleep(5)  # fromC compiled by C2 (middle and hot inlined) by then
                path = t.fetch_profile(dmn, 8, "&pid=%d" % java.pid)
                # The roots' libjvm.so have no .symtab: the JVM's C++ frames are unnamed.
                inlining.check_jvm(t.traces(path, lines=True), java.pid, name + " (inlining)", jvm_symbols=False)
                t.stop_all([java])
    finally:
        for j in jvms:
            t.stop_all([j])
        for d in work.values():
            shutil.rmtree(d, ignore_errors=True)
    t.finish()


if __name__ == "__main__":
    main()
