#!/usr/bin/env python3
"""Java code churn: no sample names a method that could not be on its stack.

Classes of the same shape (Gen0..Gen5, each work() at its own lines), each loaded by a throw-away
class loader, called by its own caller (Churn.run0..run5) until C2 compiles work(), then handed a
Shape of a type the compiled code never saw (an uncommon trap: deoptimized, compiled again), then
unloaded with its loader (System.gc()): the next class's methods and nmethods take the freed
metaspace and code cache (HotSpot reuses a freed class's metaspace at once: the next class's
Klass and Method often sit at the same addresses). Debian 12's OpenJDK 17, no JVM flags, profd at
199 Hz, two JVMs (CHURN_RUNS). Checked: a GenK frame only under Churn.runK and within
GenK.java's lines of work(), a Churn.runK only under GenK frames; the JVM did unload the classes;
frames that could not be named are counted on /metrics, not named.

An interpreted frame is recorded as (Method*, bci), and a new class's method often takes an
unloaded one's Method*: names are bound at the drain, and a drain in which the JVM's class
unloading counter moved names none of that JVM's Java frames (counted). Compiled frames are also
checked by compile id (hotspot-scopes.c)."""
import os
import re
import shutil
import subprocess
import time

import profdtest as t

CHURN_CLASSES = 6
CHURN_PAD = 9  # blank lines per class number before work(): each class's lines its own
# Two JVMs, one after the other. "fast": a class unloaded every 200 ms, interpreted only (-Xint:
# where a freed Method* is taken by the next class's method; without the unloading epoch ~40% of
# its Gen samples were named after another class), so every drain sees classes unloaded and its
# Java frames stay unnamed. "slow": rounds outlast two drains (~1 s each), so each round leaves a
# drain whose frames are named, read again after each unloading.
CHURN_RUNS = (("fast", 18, 200, ["-Xint"], 0), ("slow", 4, 2100, [], 20))


def gen_java(k):
    return "\n".join(["public class Gen%d implements Work {" % k] + [""] * (CHURN_PAD * k) + [
        "    public long work(long x, Shape s) { // @begin",
        "        long y = x;",
        "        for (int i = 0; i < 5000; i++)",
        "            y = y * 6364136223846793005L + s.area(i) + %d;" % k,
        "        return y;",
        "    } // @end",
        "}", ""])


def churn_java():
    runs = "\n".join("""
    static long run%d(Work w, Shape s, long ns) {
        long end = System.nanoTime() + ns, y = 0;
        while (System.nanoTime() < end)
            y += w.work(y, s);
        return y;
    }""" % k for k in range(CHURN_CLASSES))
    cases = "\n".join("            case %d: sink += run%d(w, s, ns); break;" % (k, k) for k in range(CHURN_CLASSES))
    return """import java.io.File;
import java.lang.management.ManagementFactory;
import java.net.URL;
import java.net.URLClassLoader;

final class ShapeA implements Shape { public long area(long i) { return i * 3; } }
final class ShapeB implements Shape { public long area(long i) { return i ^ 5; } }

public class Churn {
    static volatile long sink;
%s

    static void run(int k, Work w, Shape s, long ns) {
        switch (k) {
%s
        }
    }

    // args: directory of the Gen classes, rounds, milliseconds per round
    public static void main(String[] args) throws Exception {
        URL[] gen = {new File(args[0]).toURI().toURL()};
        int rounds = Integer.parseInt(args[1]);
        long ns = Long.parseLong(args[2]) * 1000000L;
        for (int r = 0; r < rounds; r++) {
            int k = r %% %d;
            URLClassLoader loader = new URLClassLoader(gen, Churn.class.getClassLoader());
            Work w = (Work) loader.loadClass("Gen" + k).getDeclaredConstructor().newInstance();
            // one type of Shape, then another: the compiled work() meets a type it never saw
            run(k, w, new ShapeA(), ns / 2);
            run(k, w, new ShapeB(), ns / 2);
            w = null;
            loader.close();
            loader = null;
            System.gc(); // the class and its loader unloaded, their compiled code freed
        }
        System.out.println("unloaded " + ManagementFactory.getClassLoadingMXBean().getUnloadedClassCount());
    }
}
""" % (runs, cases, CHURN_CLASSES)


def build_churn(work):
    with open(os.path.join(work, "Work.java"), "w") as f:
        f.write("public interface Work { long work(long x, Shape s); }\n")
    with open(os.path.join(work, "Shape.java"), "w") as f:
        f.write("public interface Shape { long area(long i); }\n")
    with open(os.path.join(work, "Churn.java"), "w") as f:
        f.write(churn_java())
    gen = os.path.join(work, "gen")  # not on the class path: only the throw-away loaders find them
    os.makedirs(gen)
    for k in range(CHURN_CLASSES):
        with open(os.path.join(gen, "Gen%d.java" % k), "w") as f:
            f.write(gen_java(k))
    subprocess.run(["javac", "-d", work] + [os.path.join(work, n) for n in ("Churn.java", "Work.java", "Shape.java")],
                   check=True, timeout=120)
    subprocess.run(["javac", "-cp", work, "-d", gen] +
                   [os.path.join(gen, "Gen%d.java" % k) for k in range(CHURN_CLASSES)], check=True, timeout=120)
    return gen


def gen_lines(k):
    src = gen_java(k).split("\n")
    first = next(i for i, l in enumerate(src) if "@begin" in l) + 1
    last = next(i for i, l in enumerate(src) if "@end" in l) + 1
    return first, last


def check_churn(d, work, gen, what, rounds, round_ms, flags, min_named):
    """While classes come and go: every GenK frame under Churn.runK and within GenK's lines; each
    Churn.runK's frames above it of GenK only; the unloading really happened."""
    text0 = d.get("/metrics")[2].decode()
    churn = subprocess.Popen(["java"] + flags + ["-cp", work, "Churn", gen, str(rounds), str(round_ms)],
                             stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(1)
        path = t.fetch_profile(d, max(1, rounds * round_ms // 1000 - 1), "&pid=%d" % churn.pid)
        out = churn.communicate(timeout=60)[0]
    finally:
        churn.kill()
        churn.wait()
    text1 = d.get("/metrics")[2].decode()
    m = re.search(r"unloaded (\d+)", out)
    t.check(m and int(m.group(1)) >= rounds - 1,
            "churn %s: the JVM unloaded the throw-away classes (%s)" % (what, out.strip()))
    in_gen = bad = unnamed = 0
    example = None
    for tr in t.traces(path, lines=True):
        frames = [f[: -len(" (inline)")] if f.endswith(" (inline)") else f for f in tr.frames]
        unnamed += tr.value * sum(1 for f in frames if f.startswith("[java]"))
        gens = [(i, re.match(r"^Gen(\d+)\.(\S+) Gen(\d+)\.java:(\d+)$", f)) for i, f in enumerate(frames)
                if re.match(r"^Gen\d", f)]
        runs = [(i, int(re.match(r"^Churn\.run(\d+) ", f).group(1))) for i, f in enumerate(frames)
                if re.match(r"^Churn\.run\d+ ", f)]
        wrong = None
        for i, g in gens:
            if not g:
                wrong = "a Gen frame not named GenK.work GenK.java:LINE: %s" % frames[i]
                break
            k = int(g.group(1))
            first, last = gen_lines(k)
            below = [r for j, r in runs if j > i]
            if g.group(2) != "work" or int(g.group(3)) != k or not first <= int(g.group(4)) <= last:
                wrong = "%s: not Gen%d.work within Gen%d.java:%d-%d" % (frames[i], k, k, first, last)
            elif below and below[0] != k:
                wrong = "%s under Churn.run%d" % (frames[i], below[0])
            elif not below and not any(f.startswith("[java]") for f in frames[i + 1:]):
                # Only a named stack without its Churn.runK is wrong: a caller left unnamed
                # (its name forgotten, counted) may be the right one.
                wrong = "%s under no Churn.runK" % frames[i]
            if wrong:
                break
        for j, k in runs:
            above = [int(g.group(1)) for i, g in gens if g and i < j]
            if not wrong and above and above[-1] != k:
                wrong = "Churn.run%d under Gen%d" % (k, above[-1])
        if gens:
            in_gen += tr.value
        if wrong:
            bad += tr.value
            example = example or (wrong, tr.frames)
    counted = {r: t.metric(text1, "profd_hotspot_compiled_frames_total", '{result="%s"}' % r) -
               t.metric(text0, "profd_hotspot_compiled_frames_total", '{result="%s"}' % r)
               for r in ("inlined", "approximate", "method_only", "stale", "no_nmethod", "unreadable")}
    reads = {r: t.metric(text1, "profd_hotspot_method_reads_total", '{result="%s"}' % r) -
             t.metric(text0, "profd_hotspot_method_reads_total", '{result="%s"}' % r)
             for r in ("ok", "gone", "unreadable", "stale", "bad_method")}
    left = {r: t.metric(text1, "profd_hotspot_frames_unnamed_total", '{reason="%s"}' % r) -
            t.metric(text0, "profd_hotspot_frames_unnamed_total", '{reason="%s"}' % r)
            for r in ("classes_unloaded", "no_unload_counter", "no_memory", "no_process")}
    t.log("churn %s: %d samples in a Gen class, %d wrongly named, %d unnamed Java frames; compiled frames read %s; "
          "method reads %s; left unnamed %s" % (what, in_gen, bad, unnamed, counted, reads, left))
    if example:
        t.log("  %s:\n    %s" % (example[0], "\n    ".join(example[1])))
    if min_named:
        t.check(in_gen >= min_named, "churn %s: at least %d samples in the Gen classes named (%d)" %
                (what, min_named, in_gen))
    t.check(left["classes_unloaded"] > 0,
            "churn %s: frames of drains with classes unloaded are left unnamed, counted (%d)" %
            (what, left["classes_unloaded"]))
    t.check(bad == 0, "churn %s: no sample names a method that cannot be on its stack (%d do)" % (what, bad))
    not_named = sum(counted[r] for r in ("stale", "no_nmethod", "unreadable")) + \
        sum(reads[r] for r in ("gone", "unreadable", "stale", "bad_method")) + sum(left.values())
    t.check(unnamed == 0 or not_named > 0,
            "churn %s: unnamed Java frames (%d) are counted on /metrics (%d)" % (what, unnamed, not_named))


def main():
    t.require_bpf()
    if not shutil.which("go"):
        t.skip("go (golang-go) is not installed: the profile is read with go tool pprof")
    if not (shutil.which("java") and shutil.which("javac")):
        t.skip("java, javac (openjdk-17-jdk-headless) are not installed")
    had_hsperfdata = os.path.exists("/tmp/hsperfdata_root")
    work = t.tmpdir()
    gen = build_churn(work)
    try:
        with t.Daemon("--frequency", "199") as d:
            for run in CHURN_RUNS:
                check_churn(d, work, gen, *run)
    finally:
        if not had_hsperfdata:
            shutil.rmtree("/tmp/hsperfdata_root", ignore_errors=True)
    t.finish()


if __name__ == "__main__":
    main()
