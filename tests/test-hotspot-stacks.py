#!/usr/bin/env python3
"""Java stacks with no JVM flags: interpreted HotSpot frames walked in BPF (bpf/hotspot.bpf.h),
named by the daemon (symbolizer/hotspot-symbols.c), merged with the native frames around them.

Debian 12's OpenJDK 17 runs, with no flags, a chain of Java methods that are each called once
(so they stay interpreted): main -> a -> b -> c -> Deflater.deflate -> Deflater.deflate, which
calls into zlib through JNI and spends its time there. One JVM is started before profd (found by
its start-up scan), one after. In profd's profile of each, >= 95% of the samples whose leaf is in
libz must show, in order: zlib's deflate, the JNI function, the two Deflater.deflate frames (with
their file java/util/zip/Deflater.java), Deflate.c, .b, .a and .main with the lines of the source
below, then the JVM's own C++ frames down to start_thread. /metrics must count the interpreted
frames and every Java frame of these JVMs must be named.

Then a hot loop compiled by C2 (Hot): >= 95% of its samples must have a named Java frame of Hot
on top (its nmethod found in the code heap's segment map, stepped by its frame size) and reach
start_thread."""
import os
import re
import shutil
import subprocess
import time

import profdtest as t

DEFLATE_JAVA = """import java.util.zip.Deflater;

public class Deflate {
    static byte[] out = new byte[1 << 20];

    static long c(byte[] data) {
        Deflater d = new Deflater(9);
        d.setInput(data);
        d.finish();
        long n = 0;
        while (!d.finished())
            n += d.deflate(out);
        d.end();
        return n;
    }

    static long b(byte[] data) {
        return c(data) + 1;
    }

    static long a(byte[] data) {
        return b(data) + 1;
    }

    static byte[] fill(int size) {
        byte[] data = new byte[size];
        long x = 12345;
        for (int i = 0; i < size; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            data[i] = (byte) ('a' + ((x >>> 59) & 7));
        }
        return data;
    }

    public static void main(String[] args) {
        byte[] data = fill(32 << 20);
        long sum = 0;
        for (int i = 0; i < 1000; i++)
            sum += a(data);
        System.out.println(sum);
    }
}
"""
# The Java frames of the chain, innermost first, as "name file:line" (pprof -lines).
CHAIN = ["Deflate.c Deflate.java:12", "Deflate.b Deflate.java:18", "Deflate.a Deflate.java:22",
         "Deflate.main Deflate.java:39"]


HOT_JAVA = """public class Hot {
    static long leaf(long x) {
        long s = 0;
        for (int i = 0; i < 1000; i++)
            s += (x ^ i) * 31 + (s >>> 3);
        return s;
    }

    static long mid(long x) {
        return leaf(x) + leaf(x + 1);
    }

    public static void main(String[] args) {
        long sum = 0;
        for (long i = 0; ; i++) {
            sum += mid(i);
            if (i == Long.MAX_VALUE)
                System.out.println(sum);
        }
    }
}
"""


# How a thread's stack ends: glibc's start_thread and clone. hotspot-jdks adds the ending of a root
# whose libc has no symbols (Debian's libc6 is stripped; its debug symbols are not installed there).
THREAD_TAILS = [["start_thread", "__clone3"], ["start_thread", "clone"], ["start_thread", "__clone"]]


def check_compiled(d, java):
    """A hot loop compiled by C2 (its callees inlined into main's OSR compilation, or compiled on
    their own): the leaf must be a named Java frame of Hot, stepped by its nmethod's frame size
    down through the call stub to start_thread."""
    path = t.fetch_profile(d, 3, "&pid=%d" % java.pid)
    traces = t.traces(path)
    total = sum(tr.value for tr in traces)
    good = 0
    example = None
    for tr in traces:
        names = [f.split(" ")[0] for f in tr.frames]
        user = [n for n in names if not n.startswith(("asm_", "irqentry", "__irq", "sysvec"))]
        ok = bool(user) and user[0].startswith("Hot.") and "start_thread" in names and "JavaMain" in names
        if ok:
            good += tr.value
        else:
            example = example or tr.frames
    t.log("compiled: %d of %d samples have a named Hot frame at the top, down to start_thread" % (good, total))
    if example:
        t.log("  a stack that does not:\n    " + "\n    ".join(example))
    t.check(total >= 10 and good >= 0.95 * total,
            "compiled code: >= 95%% of the samples name Hot's compiled method and reach start_thread "
            "(%d of %d)" % (good, total))


def check_profile(d, java, what):
    path = t.fetch_profile(d, 4, "&pid=%d" % java.pid)
    traces = t.traces(path, lines=True)
    unnamed = [f for tr in traces for f in tr.frames if f.startswith("[java]")]
    t.check(not unnamed, "%s: every Java frame named (unnamed: %s)" % (what, unnamed[:3]))
    # Samples in zlib: its deflate among the innermost user frames (kernel frames may be above).
    in_zlib = [tr for tr in traces
               if any(f.split(" ")[0] == "deflate" or "libz.so" in f for f in tr.frames[:6])]
    total = sum(tr.value for tr in in_zlib)
    good = 0
    example = None
    for tr in in_zlib:
        names = [f.split(" ")[0] for f in tr.frames]
        try:
            jni = names.index("Java_java_util_zip_Deflater_deflateBytesBytes")
            first = tr.frames.index(CHAIN[0])
        except ValueError:
            example = example or tr.frames
            continue
        java_frames = [f for f in tr.frames[jni + 1:first] if f.startswith("java.util.zip.Deflater.deflate ")]
        ok = (tr.frames[first:first + len(CHAIN)] == CHAIN and len(java_frames) == 2 and
              all(" java/util/zip/Deflater.java:" in f for f in java_frames) and
              names[-2:] in THREAD_TAILS and
              "JavaMain" in names[first + len(CHAIN):])
        if ok:
            good += tr.value
        else:
            example = example or tr.frames
    t.log("%s: %d of %d samples in zlib show the whole chain" % (what, good, total))
    if example:
        t.log("  a stack that does not:\n    " + "\n    ".join(example))
    t.check(total >= 10, "%s: at least 10 samples in zlib (%d)" % (what, total))
    t.check(total > 0 and good >= 0.95 * total, "%s: >= 95%% of them show zlib, JNI, Deflater.deflate x2, "
            "Deflate.c:12, .b:18, .a:22, .main:39, then the JVM down to start_thread (%d of %d)"
            % (what, good, total))


def main():
    t.require_bpf()
    if not shutil.which("go"):
        t.skip("go (golang-go) is not installed: the profile is read with go tool pprof")
    if not (shutil.which("java") and shutil.which("javac")):
        t.skip("java, javac (openjdk-17-jdk-headless) are not installed")
    had_hsperfdata = os.path.exists("/tmp/hsperfdata_root")
    work = t.tmpdir()
    for name, src in (("Deflate", DEFLATE_JAVA), ("Hot", HOT_JAVA)):
        with open(os.path.join(work, name + ".java"), "w") as f:
            f.write(src)
    # One javac for both: each start of javac is seconds of JIT warm-up.
    subprocess.run(["javac", "-d", work, os.path.join(work, "Deflate.java"), os.path.join(work, "Hot.java")],
                   check=True, timeout=120)
    jvms = []
    try:
        before = subprocess.Popen(["java", "-cp", work, "Deflate"], stdout=subprocess.DEVNULL)
        jvms.append(before)
        time.sleep(2)
        with t.Daemon("--frequency", "199") as d:
            after = subprocess.Popen(["java", "-cp", work, "Deflate"], stdout=subprocess.DEVNULL)
            jvms.append(after)
            time.sleep(4)  # 32 MiB of input made, then the chain runs
            check_profile(d, before, "the JVM started before profd")
            check_profile(d, after, "the JVM started after profd")
            for j in jvms:
                j.terminate()
                j.wait(timeout=20)
            hot = subprocess.Popen(["java", "-cp", work, "Hot"], stdout=subprocess.DEVNULL)
            jvms.append(hot)
            time.sleep(4)  # compiled by then
            check_compiled(d, hot)
            text = d.get("/metrics")[2].decode()
            n = t.metric(text, "profd_hotspot_bpf_frames_total", '{kind="interpreted"}')
            t.check(n and n > 100, "/metrics: %s interpreted frames taken in BPF" % n)
            n = t.metric(text, "profd_hotspot_bpf_frames_total", '{kind="compiled"}')
            t.check(n and n > 10, "/metrics: %s compiled frames taken in BPF" % n)
            ok = t.metric(text, "profd_hotspot_method_reads_total", '{result="ok"}')
            t.check(ok and ok >= 12, "/metrics: %s Java frames read and named" % ok)
            # Failed reads are counted for every JVM of the machine (others may run and exit
            # meanwhile): logged; that these JVMs' frames were all named is checked above.
            t.log("/metrics: method reads " + ", ".join(
                "%s %s" % (r, t.metric(text, "profd_hotspot_method_reads_total", '{result="%s"}' % r))
                for r in ("ok", "gone", "unreadable", "stale", "bad_method")))
    finally:
        t.stop_all(jvms)
        if not had_hsperfdata:
            shutil.rmtree("/tmp/hsperfdata_root", ignore_errors=True)
    t.finish()


if __name__ == "__main__":
    main()
