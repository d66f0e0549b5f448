#!/usr/bin/env python3
"""Compiled Java frames with the methods inlined into them, lines, JNI and a thread pool, with no
JVM flags. Inline.hot (a loop over a linked list: not a counted loop, so its back-edge keeps a
safepoint poll and, with it, a PcDesc that says which methods run there) is called by Inline.middle, called by Inline.fromC, which a C
library (built here, loaded with System.loadLibrary) calls back millions of times from the native
method Inline.viaC; viaC is called by Inline.outer, called by Inline.task, run by a thread pool
(ExecutorService) once per task: fromC is compiled (C2 inlines middle and hot into it), outer and
task stay interpreted. In the JVM started after profd a thread of another C library, attached to
the JVM (AttachCurrentThread), calls fromC too. For a JVM started before profd, one started after and one in its own pid and
mount namespaces (unshare -p -m -f --mount-proc: pid 1 there, as in a container), >= 95% of the
samples whose leaf is Inline.hot must show the whole chain in order, each frame with the line of
the source that runs (hot and middle as inlined lines of fromC's location), down to the pool's
worker thread and start_thread. /metrics must count compiled frames named with their inlined
methods."""
import os
import re
import shutil
import subprocess
import time

import profdtest as t

# rare()'s body: 40 statements, ~400 bytes of bytecode.
RARE_BODY = "\n".join("        x = x * %dL + %dL;" % (31 + 2 * i, 7 + i) for i in range(40))

JAVA = """import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

public class Inline {
    static native long viaC(long n);
    static native void startAttached();

    static final class Node {
        final long v;
        final Node next;
        Node(long v, Node next) { this.v = v; this.next = next; }
    }
    static Node list;

    static long hot(long x) {
        for (Node p = list; p != null; p = p.next) x = x * 6364136223846793005L + p.v; return x + rare(x); // @hot
    }

    // Too big to be inlined (over C2's FreqInlineSize, 325 bytes of bytecode), almost never past
    // its test: its call gives the loop's last instructions a PcDesc of hot's to be named by.
    static long rare(long x) {
        if (x != 0x5deece66dL)
            return 0;
@RARE_BODY@
        return x;
    }

    static long middle(long x) {
        return hot(x) ^ 0x9e3779b97f4a7c15L; // @middle
    }

    static long fromC(long x) {
        return middle(x) + 1; // @fromC
    }

    static long outer(long n) {
        return viaC(n); // @outer
    }

    static long task(long n) {
        return outer(n); // @task
    }

    public static void main(String[] args) throws Exception {
        System.loadLibrary("inlinejni");
        for (int i = 0; i < 300; i++)
            list = new Node(i, list);
        if (args.length > 0) { // a native thread attached to the JVM calls fromC too
            System.loadLibrary("inlineattach");
            startAttached();
        }
        ExecutorService pool = Executors.newFixedThreadPool(2);
        long sum = 0;
        for (long k = 0; ; k++) {
            final long n = 2000000;
            sum += pool.submit(() -> task(n)).get(); // @submit
            if (k == Long.MAX_VALUE)
                System.out.println(sum);
        }
    }
}
""".replace("@RARE_BODY@", RARE_BODY)

C = """#include <jni.h>

/* Calls Inline.fromC n times: Java -> C -> Java. */
JNIEXPORT jlong JNICALL Java_Inline_viaC(JNIEnv *env, jclass cls, jlong n)
{
        jmethodID m = (*env)->GetStaticMethodID(env, cls, "fromC", "(J)J");
        jlong s = 0;

        for (jlong i = 0; i < n; i++)
                s += (*env)->CallStaticLongMethod(env, cls, m, i); /* @callback */
        return s;
}
"""

# A thread of the C library, attached to the JVM (AttachCurrentThread), calling Inline.fromC in a
# loop. Apart from the test's library: pthread_create of the host's libc is not in bullseye's.
ATTACH_C = """#include <jni.h>
#include <pthread.h>

static JavaVM *vm;
static jclass cls;

static void *attached(void *arg)
{
        JNIEnv *env;
        jmethodID m;
        volatile jlong s = 0;

        if ((*vm)->AttachCurrentThread(vm, (void **)&env, arg) != 0)
                return NULL;
        m = (*env)->GetStaticMethodID(env, cls, "fromC", "(J)J");
        for (jlong i = 0; s != -1; i++)
                s += (*env)->CallStaticLongMethod(env, cls, m, i); /* @attached */
        return NULL;
}

JNIEXPORT void JNICALL Java_Inline_startAttached(JNIEnv *env, jclass c)
{
        pthread_t t;

        (*env)->GetJavaVM(env, &vm);
        cls = (*env)->NewGlobalRef(env, c);
        pthread_create(&t, NULL, attached, NULL);
}
"""

THREAD_TAILS = [["start_thread", "__clone3"], ["start_thread", "clone"], ["start_thread", "__clone"]]


def line_of(text, mark):
    for i, l in enumerate(text.split("\n")):
        if mark in l:
            return i + 1
    raise RuntimeError(mark)


def expected_chain(jvm_symbols=True):
    """(name, file:line or None, inlined) innermost first; other frames may stand between those
    after the first three (the JVM's own C++ frames and stubs between C and Java). jvm_symbols:
    the JVM's C++ frames are named (a libjvm.so without .symtab names only its exports)."""
    j = lambda m: "Inline.java:%d" % line_of(JAVA, m)
    return [f for f in [
        ("Inline.hot", j("@hot"), True),
        ("Inline.middle", j("@middle"), True),
        ("Inline.fromC", j("@fromC"), False),
        ("[jvm] *", None, False),  # the call stub that entered Java, named after its blob
        ("jni_CallStaticLongMethod", None, False) if jvm_symbols else None,
        ("Java_Inline_viaC", "inlinejni.c:%d" % line_of(C, "@callback"), False),
        ("Inline.viaC", None, False),
        ("Inline.outer", j("@outer"), False),
        ("Inline.task", j("@task"), False),
        ("Inline.lambda$main$0", j("@submit"), False),
        ("java.util.concurrent.FutureTask.run", None, False),
        ("java.util.concurrent.ThreadPoolExecutor.runWorker", None, False),
        ("java.lang.Thread.run", None, False),
        ("thread_native_entry(Thread*)", None, False) if jvm_symbols else None,
    ] if f]


def attached_chain():
    """The attached thread's: fromC's part, then the C thread down to start_thread."""
    return expected_chain()[:5] + [("attached", "inlinejni-attach.c:%d" % line_of(ATTACH_C, "@attached"), False)]


def parse(frame):
    """"Inline.hot Inline.java:8 (inline)" -> (name, "Inline.java:8", True)."""
    inlined = frame.endswith(" (inline)")
    if inlined:
        frame = frame[: -len(" (inline)")]
    m = re.match(r"^(.*?) (\S+:\d+)$", frame)
    if m:
        return m.group(1), os.path.basename(m.group(2).split(":")[0]) + ":" + m.group(2).split(":")[1], inlined
    return frame.split(" ")[0] if not frame.startswith("[") else frame, None, inlined


def whole(frames, chain):
    """Whether frames (innermost first) hold chain in order, with its lines, ending at start_thread;
    the reason when not. The first four are adjacent; a name ending in "*" is a prefix."""
    got = [parse(f) for f in frames]
    names = [g[0] for g in got]
    if names[-2:] not in THREAD_TAILS:
        return "does not end at start_thread"
    pos = 0
    for k, (name, line, inlined) in enumerate(chain):
        while pos < len(got) and not (got[pos][0] == name or
                                      (name.endswith("*") and got[pos][0].startswith(name[:-1]))):
            if k < 4:
                return "%s is not next (%s)" % (name, got[pos][0])  # the Java part is adjacent
            pos += 1
        if pos >= len(got):
            return "%s missing" % name
        if line and got[pos][1] != line:
            return "%s at %s, not %s" % (name, got[pos][1], line)
        if inlined and not got[pos][2]:
            return "%s is not an inlined line" % name
        pos += 1
    return None


def check_jvm(traces, pid, what, jvm_symbols=True, attached=False):
    """attached: the JVM runs the attached native thread too; each sample in Inline.hot must show
    the whole chain of its thread (the pool's or the attached one's), and both must be seen."""
    chain = expected_chain(jvm_symbols)
    hot = ok = ok_attached = 0
    bad = {}
    for tr in traces:
        if tr.labels.get("pid") != [str(pid)] or not tr.frames or not tr.frames[0].startswith("Inline.hot "):
            continue
        hot += tr.value
        why = whole(tr.frames, chain)
        if why is not None and attached and whole(tr.frames, attached_chain()) is None:
            ok_attached += tr.value
            continue
        if why is None:
            ok += tr.value
        else:
            bad.setdefault(why, [0, tr.frames])[0] += tr.value
    ok += ok_attached
    t.log("%s: %d samples in Inline.hot, %d with the whole chain (%d on the attached thread)" %
          (what, hot, ok, ok_attached))
    if attached:
        t.check(ok_attached >= 100, "%s: at least 100 samples in Inline.hot on the attached native thread (%d)" %
                (what, ok_attached))
    for why, (v, frames) in sorted(bad.items(), key=lambda x: -x[1][0])[:4]:
        t.log("  %d samples: %s:\n    %s" % (v, why, "\n    ".join(frames)))
    if hot < 200:  # where the JVM's samples went instead
        leaves = {}
        for tr in traces:
            if tr.labels.get("pid") == [str(pid)] and tr.frames:
                key = " <- ".join(tr.frames[:3])
                leaves[key] = leaves.get(key, 0) + tr.value
        for key, v in sorted(leaves.items(), key=lambda x: -x[1])[:8]:
            t.log("  leaf %d: %s" % (v, key))
    t.check(hot >= 200, "%s: at least 200 samples in Inline.hot (%d)" % (what, hot))
    t.check(hot > 0 and ok >= 0.95 * hot,
            "%s: >= 95%% of Inline.hot's samples show the whole chain with lines (%d of %d)" % (what, ok, hot))


def child_of(pid, timeout_s=10):
    """The (host) pid of pid's first child, None when it has none within timeout_s."""
    end = time.time() + timeout_s
    while time.time() < end:
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                kids = f.read().split()
            if kids:
                return int(kids[0])
        except OSError:
            return None
        time.sleep(0.05)
    return None


def build_jni(java_home, work):
    """work/libinlinejni.so from C, against java_home's jni.h (it calls nothing of libc: it loads in
    a root of another Debian release too)."""
    with open(os.path.join(work, "inlinejni.c"), "w") as f:
        f.write(C)
    subprocess.run(["gcc", "-O1", "-g", "-fPIC", "-shared", "-I", os.path.join(java_home, "include"),
                    "-I", os.path.join(java_home, "include", "linux"), "-o",
                    os.path.join(work, "libinlinejni.so"), os.path.join(work, "inlinejni.c")],
                   check=True, timeout=120)


def main():
    t.require_bpf()
    if not shutil.which("go"):
        t.skip("go (golang-go) is not installed: the profile is read with go tool pprof")
    if not (shutil.which("java") and shutil.which("javac")):
        t.skip("java, javac (openjdk-17-jdk-headless) are not installed")
    if not shutil.which("gcc"):
        t.skip("gcc is not installed: the test's JNI library is built with it")
    java_home = os.path.dirname(os.path.dirname(os.path.realpath(shutil.which("javac"))))
    had_hsperfdata = os.path.exists("/tmp/hsperfdata_root")
    work = t.tmpdir()
    with open(os.path.join(work, "Inline.java"), "w") as f:
        f.write(JAVA)
    subprocess.run(["javac", "-d", work, os.path.join(work, "Inline.java")], check=True, timeout=120)
    build_jni(java_home, work)
    with open(os.path.join(work, "inlinejni-attach.c"), "w") as f:
        f.write(ATTACH_C)
    subprocess.run(["gcc", "-O1", "-g", "-fPIC", "-shared", "-pthread", "-I", os.path.join(java_home, "include"),
                    "-I", os.path.join(java_home, "include", "linux"), "-o",
                    os.path.join(work, "libinlineattach.so"), os.path.join(work, "inlinejni-attach.c")],
                   check=True, timeout=120)
    argv = ["java", "-Djava.library.path=" + work, "-cp", work, "Inline"]
    jvms = []
    contained = None
    try:
        jvms.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL))  # before profd
        with t.Daemon("--frequency", "499") as d:
            jvms.append(subprocess.Popen(argv + ["attach"], stdout=subprocess.DEVNULL))  # after
            # As in a container: a pid namespace (the JVM is its pid 1) and a mount namespace of
            # its own, with its own /proc.
            if shutil.which("unshare"):
                # --kill-child: the JVM goes with unshare (it would outlive a killed unshare).
                jvms.append(subprocess.Popen(["unshare", "-p", "-m", "-f", "--mount-proc", "--kill-child=TERM"] + argv,
                                             stdout=subprocess.DEVNULL))
                contained = child_of(jvms[-1].pid)
            else:
                t.log("SKIPPING the JVM in its own pid and mount namespaces: unshare (util-linux) is not installed")
            time.sleep(5)  # fromC compiled by C2 (middle and hot inlined) by then
            path = t.fetch_profile(d, 10)
            traces = t.traces(path, lines=True)
            check_jvm(traces, jvms[0].pid, "JVM started before profd")
            check_jvm(traces, jvms[1].pid, "JVM started after profd, with an attached native thread", attached=True)
            if contained:
                check_jvm(traces, contained, "JVM in its own pid and mount namespaces")
            elif shutil.which("unshare"):
                t.check(False, "the JVM in its own namespaces started (no child of unshare)")
            text = d.get("/metrics")[2].decode()
            counts = {k: t.metric(text, "profd_hotspot_compiled_frames_total", '{result="%s"}' % k)
                      for k in ("inlined", "approximate", "method_only", "stale", "no_nmethod", "unreadable")}
            t.log("/metrics: compiled frames %s" % counts)
            t.check(counts["inlined"] + counts["approximate"] > 0,
                    "/metrics: compiled frames named with their inlined methods")
    finally:
        # SIGTERM: a JVM that exits removes its /tmp/hsperfdata_root/PID (the contained one's is
        # named 1); SIGKILL only for one that does not.
        if contained:
            try:
                os.kill(contained, 15)
            except ProcessLookupError:
                pass
        t.stop_all(jvms)
        if not had_hsperfdata:
            shutil.rmtree("/tmp/hsperfdata_root", ignore_errors=True)
    t.finish()


if __name__ == "__main__":
    main()
