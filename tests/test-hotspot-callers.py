#!/usr/bin/env python3
"""Never a wrong Java caller: a flag-less JVM whose compiled code calls tiny compiled methods at a
high rate, so that many samples land where a frame is not whole (a compiled method's prologue
before its frame is complete, its epilogue after the frame is popped, the vtable stub between
caller and callee, the interpreter's entry into a method).

Callers.drive calls Op.apply through a megamorphic virtual call (four receiver classes, so C2
does not inline it) 100000 times per call, and main calls drive in a loop. The only possible
pairs, innermost first, are OpX.apply <- Callers.drive <- Callers.main. Every sample of the JVM
must show Java frames only in those pairs (adjacent: nothing skipped, no self-recursion, no
callee below its caller); a stack may end early at a frame profd cannot step from (marked
"[unwind stopped: ...]"), but >= 80% of the samples must reach start_thread. /metrics must show
the epilogue and unsure cases were met (the test reaches them)."""
import os
import shutil
import subprocess
import time

import profdtest as t

CALLERS_JAVA = """abstract class Op {
    abstract long apply(long x);
}

class OpA extends Op { long apply(long x) { return x * 31 + 7; } }
class OpB extends Op { long apply(long x) { return (x ^ 0x5bd1e995L) + 3; } }
class OpC extends Op { long apply(long x) { return x + (x >>> 7); } }
class OpD extends Op { long apply(long x) { return x * 17 - 1; } }

public class Callers {
    static long drive(Op[] ops, long x) {
        long s = 0;
        for (int i = 0; i < 100000; i++)
            s += ops[i & 3].apply(x + i);
        return s;
    }

    public static void main(String[] args) {
        Op[] ops = { new OpA(), new OpB(), new OpC(), new OpD() };
        long sum = 0;
        for (long i = 0; ; i++) {
            sum += drive(ops, i);
            if (i == Long.MAX_VALUE)
                System.out.println(sum);
        }
    }
}
"""
APPLY = ("OpA.apply", "OpB.apply", "OpC.apply", "OpD.apply")
# What may stand directly below each Java frame of this program.
CALLER = {name: "Callers.drive" for name in APPLY}
CALLER["Callers.drive"] = "Callers.main"


# How a thread's stack ends (hotspot-jdks adds a root's unsymbolized libc).
THREAD_TAILS = [["start_thread", "__clone3"], ["start_thread", "clone"], ["start_thread", "__clone"]]


def java_name(frame):
    return frame.split(" ")[0]


def check_stacks(traces, what):
    """(samples, complete, wrong pairs) of the JVM's profile; logs an example of each problem."""
    total = complete = 0
    wrong, short = [], []
    for tr in traces:
        names = [java_name(f) for f in tr.frames]
        total += tr.value
        mine = [i for i, n in enumerate(names) if n in CALLER or n == "Callers.main"]
        bad = None
        for i in mine:
            n = names[i]
            below = names[i + 1] if i + 1 < len(names) else None
            if n == "Callers.main":
                if any(m in CALLER or m == "Callers.main" for m in names[i + 1:]):
                    bad = "Callers.main called by a Java frame of the program"
            elif below is None or below == "[unwind":
                continue  # an honest end
            elif below != CALLER[n]:
                bad = "%s called by %s" % (n, below)
        if bad:
            wrong.append((tr.value, bad, tr.frames))
        elif names and names[-2:] in THREAD_TAILS and "JavaMain" in names:
            complete += tr.value
        else:
            short.append((tr.value, tr.frames))
    n_wrong = sum(v for v, _, _ in wrong)
    t.log("%s: %d samples, %d reach start_thread, %d with a wrong caller" % (what, total, complete, n_wrong))
    for v, frames in sorted(short, key=lambda x: -x[0])[:4]:
        t.log("  %d samples end early:\n    %s" % (v, "\n    ".join(frames)))
    for v, why, frames in wrong[:3]:
        t.log("  %d samples: %s:\n    %s" % (v, why, "\n    ".join(frames)))
    return total, complete, n_wrong


def main():
    t.require_bpf()
    if not shutil.which("go"):
        t.skip("go (golang-go) is not installed: the profile is read with go tool pprof")
    if not (shutil.which("java") and shutil.which("javac")):
        t.skip("java, javac (openjdk-17-jdk-headless) are not installed")
    had_hsperfdata = os.path.exists("/tmp/hsperfdata_root")
    work = t.tmpdir()
    with open(os.path.join(work, "Callers.java"), "w") as f:
        f.write(CALLERS_JAVA)
    subprocess.run(["javac", "-d", work, os.path.join(work, "Callers.java")], check=True, timeout=120)
    java = None
    try:
        with t.Daemon("--frequency", "997") as d:
            java = subprocess.Popen(["java", "-cp", work, "Callers"], stdout=subprocess.DEVNULL)
            time.sleep(3)  # drive and the apply methods compiled by C2 by then
            path = t.fetch_profile(d, 8, "&pid=%d" % java.pid)
            total, complete, wrong = check_stacks(t.traces(path), "JDK on the host")
            t.check(total >= 500, "at least 500 samples of the JVM (%d)" % total)
            t.check(wrong == 0, "no sample shows a Java frame with a caller it does not have (%d do)" % wrong)
            t.check(total > 0 and complete >= 0.8 * total,
                    ">= 80%% of the samples reach start_thread (%d of %d)" % (complete, total))
            text = d.get("/metrics")[2].decode()
            counts = {k: t.metric(text, "profd_hotspot_bpf_frames_total", '{kind="%s"}' % k)
                      for k in ("compiled", "epilogue", "unsure", "interpreted")}
            t.log("/metrics: HotSpot frames %s" % counts)
            t.check(counts["compiled"] > 1000, "/metrics: compiled frames taken (%d)" % counts["compiled"])
            t.check(counts["epilogue"] > 0, "/metrics: samples in compiled epilogues met (%d)" % counts["epilogue"])
    finally:
        if java and java.poll() is None:
            java.kill()
            java.wait()
        if not had_hsperfdata:
            shutil.rmtree("/tmp/hsperfdata_root", ignore_errors=True)
    t.finish()


if __name__ == "__main__":
    main()
