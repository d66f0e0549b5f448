#!/usr/bin/env python3
"""HotSpot's vmStructs tables as profd reads them (daemon/runtimes/hotspot-vmstructs.c, through
remote-memory.c), against the JDK's own Serviceability Agent.

Debian 12's OpenJDK 17 is started with no flags. tests/hotspot-vmstructs-dump reads its four
tables (gHotSpotVMStructs, gHotSpotVMTypes, gHotSpotVMIntConstants, gHotSpotVMLongConstants) from
the process's memory, as the daemon does; `jhsdb clhsdb --pid` (the SA, which reads the same
tables its own way, through ptrace) prints them with vmstructsdump, intConstant and longConstant.
Every non-static field, every constant and every type of profd's reading must be the SA's, and
the SA's must all be in profd's; the offsets given to the walker (hotspot-offsets.c) must be the
SA's values of the fields they name, and the static fields it needs must lie in libjvm's memory.

Then the interpreter frames: a JVM sleeping at the end of a chain of interpreted methods
(main -> a -> b -> c -> Thread.sleep) has each Java thread's frames walked by tests/hotspot-jstack
from the thread's last Java frame down the frame pointers, with the Method* and bytecode pointer
slots hotspot-offsets.c gives for this architecture, and named by daemon/runtimes/hotspot-method.c:
class, method, bytecode index and line must be what `jhsdb jstack` (the SA) says for every frame
of every thread whose frames are all interpreted, and a pointer that is not a method must give an
error, never a name.

Then the daemon: with a JVM started before profd and a second one started after, each is found
once (however often their mappings are read again), the tables of their one libjvm file are read
once, and the one that exits is forgotten."""
import glob
import os
import re
import shutil
import subprocess
import time

import profdtest as t

DUMP = os.path.join(t.BUILD, "tests", "hotspot-vmstructs-dump")

SPIN_JAVA = """
public class Spin {
    public static void main(String[] args) throws Exception {
        Thread.sleep(300000);
    }
}
"""

# Walker offset -> the SA's (type, field) or constant it must equal.
EXPECT = {
    "method_const_method": ("field", "Method", "_constMethod"),
    "const_method_constants": ("field", "ConstMethod", "_constants"),
    "const_method_flags": ("field", "ConstMethod", "_flags"),
    "const_method_code_size": ("field", "ConstMethod", "_code_size"),
    "const_method_name_index": ("field", "ConstMethod", "_name_index"),
    "const_method_signature_index": ("field", "ConstMethod", "_signature_index"),
    "const_method_sizeof": ("type", "ConstMethod"),
    "const_method_has_linenumber_table": ("int", "ConstMethod::_has_linenumber_table"),
    "constant_pool_pool_holder": ("field", "ConstantPool", "_pool_holder"),
    "constant_pool_source_file_name_index": ("field", "ConstantPool", "_source_file_name_index"),
    "constant_pool_sizeof": ("type", "ConstantPool"),
    "klass_name": ("field", "Klass", "_name"),
    "symbol_length": ("field", "Symbol", "_length"),
    "symbol_body": ("field", "Symbol", "_body"),
    "stub_queue_stub_buffer": ("field", "StubQueue", "_stub_buffer"),
    "stub_queue_buffer_limit": ("field", "StubQueue", "_buffer_limit"),
    "frame_interpreter_sender_sp": ("int", "frame::interpreter_frame_sender_sp_offset"),
    "frame_interpreter_last_sp": ("int", "frame::interpreter_frame_last_sp_offset"),
    "code_blob_frame_size": ("field", "CodeBlob", "_frame_size"),
    "compiled_method_method": ("field", "CompiledMethod", "_method"),
}


def parse_sa(text):
    """jhsdb's lines: type NAME SUPER isOop isInt isUnsigned SIZE; field TYPE NAME TYPESTRING
    isStatic OFFSET ADDRESS (the type string may be quoted, with spaces); intConstant/longConstant
    NAME VALUE."""
    types, fields, ints, longs = {}, {}, {}, {}
    for line in text.splitlines():
        line = re.sub(r"^(hsdb> )+", "", line)
        w = line.split()
        if not w:
            continue
        if w[0] == "type" and len(w) >= 7:
            types[" ".join(w[1:-5]).strip('"')] = (w[-5], int(w[-1]))
        elif w[0] == "field":
            m = re.match(r'field (\S+) (\S+) (".*"|\S+) (true|false) (-?\d+) (0x[0-9a-f]+)$', line)
            if m and m.group(4) == "false":
                fields[(m.group(1), m.group(2))] = int(m.group(5))
        elif w[0] == "intConstant" and len(w) == 3:
            ints[w[1]] = int(w[2])
        elif w[0] == "longConstant" and len(w) == 3:
            longs[w[1]] = int(w[2])
    return types, fields, ints, longs


def parse_ours(text):
    types, fields, statics, ints, longs, offsets, misc = {}, {}, {}, {}, {}, {}, {}
    for line in text.splitlines():
        w = line.split("\t") if "\t" in line else line.split(" ")
        if w[0] == "type":
            types[w[1]] = (w[2], int(w[3]))
        elif w[0] == "field":
            # The type string may have spaces: the last two words are static-ness and value.
            if w[-2] == "static":
                statics[(w[1], w[2])] = int(w[-1], 16)
            else:
                fields[(w[1], w[2])] = int(w[-1])
        elif w[0] == "intConstant":
            ints[w[1]] = int(w[2])
        elif w[0] == "longConstant":
            longs[w[1]] = int(w[2])
        elif w[0] == "offset":
            offsets[w[1]] = int(w[2])
        elif w[0] in ("offsets", "reads", "static"):
            misc[w[0] if w[0] != "static" else "static " + w[1]] = " ".join(w[1:] if w[0] != "static" else w[2:])
    return types, fields, statics, ints, longs, offsets, misc


def libjvm_ranges(pid):
    out = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            if line.rstrip().endswith("/libjvm.so"):
                a, b = line.split()[0].split("-")
                out.append((int(a, 16), int(b, 16)))
    # The .bss of libjvm follows its last file mapping, anonymous.
    with open("/proc/%d/maps" % pid) as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.rstrip().endswith("/libjvm.so") and not lines[i + 1].rstrip().endswith("libjvm.so"):
            a, b = lines[i + 1].split()[0].split("-")
            if len(lines[i + 1].split()) == 5:
                out.append((int(a, 16), int(b, 16)))
    return out


CHAIN_JAVA = """
public class Chain {
    static void c(int n) throws Exception {
        Thread.sleep(300000);
    }

    static void b(int n) throws Exception {
        int x = n * 2;
        c(x + 1);
    }

    static void a(int n) throws Exception {
        b(n + 1);
    }

    public static void main(String[] args) throws Exception {
        a(0);
    }
}
"""
# Chain's own frames, innermost first, as the source above has them: (method, line); a native
# method has no line.
CHAIN = [("java.lang.Thread.sleep", 0), ("Chain.c", 4), ("Chain.b", 9), ("Chain.a", 13), ("Chain.main", 17)]
JSTACK = os.path.join(t.BUILD, "tests", "hotspot-jstack")


def sa_stacks(pid, jhsdb="jhsdb"):
    """jhsdb jstack: tid -> [(class.method, bci, line or 0)] of the threads whose frames are all
    interpreted."""
    r = subprocess.run([jhsdb, "jstack", "--pid", str(pid)], capture_output=True, text=True, timeout=180)
    stacks, tid = {}, None
    for line in r.stdout.splitlines():
        m = re.search(r" nid=(0x[0-9a-f]+|\d+) ", line)  # hex up to JDK 20, decimal since
        if m:
            tid = int(m.group(1), 0)
            stacks[tid] = []
            continue
        m = re.match(r" - (\S+)\(.*\) @bci=(\d+)(?:, line=(\d+))? \((\w+) frame\)$", line)
        if m and tid is not None:
            stacks[tid].append((m.group(1), int(m.group(2)), int(m.group(3) or 0), m.group(4)))
    return {k: [f[:3] for f in v] for k, v in stacks.items() if v and all(f[3] == "Interpreted" for f in v)}


def ours_stacks(pid):
    r = subprocess.run([JSTACK, str(pid)], capture_output=True, text=True, timeout=60)
    stacks, tid, shifted = {}, None, None
    for line in r.stdout.splitlines():
        w = line.split(" ")
        if w[0] == "thread":
            tid = int(w[1])
            stacks[tid] = []
        elif w[0] == "frame" and tid is not None:
            if w[3] == "error":
                stacks[tid].append(("error " + w[4], int(w[2]), 0))
            else:
                stacks[tid].append((w[3], int(w[2]), int(w[-1].rsplit(":", 1)[1])))
        elif w[0] == "shifted":
            shifted = int(w[1])
    return stacks, shifted


def check_interpreted(work, jdk="java"):
    """jdk: "java" (the default JDK, whose javac builds Chain) or another JDK's home."""
    java_bin = "java" if jdk == "java" else os.path.join(jdk, "bin", "java")
    jhsdb = "jhsdb" if jdk == "java" else os.path.join(jdk, "bin", "jhsdb")
    t.log("-- interpreted frames of %s" % java_bin)
    if not os.path.exists(os.path.join(work, "Chain.class")):
        with open(os.path.join(work, "Chain.java"), "w") as f:
            f.write(CHAIN_JAVA)
        subprocess.run(["javac", "-d", work, os.path.join(work, "Chain.java")], check=True, timeout=120)
    java = subprocess.Popen([java_bin, "-cp", work, "Chain"])
    try:
        ours, shifted, deadline = {}, None, time.monotonic() + 30
        while time.monotonic() < deadline:
            ours, shifted = ours_stacks(java.pid)
            if any([f[0] for f in s] == [c[0] for c in CHAIN] for s in ours.values()):
                break
            time.sleep(0.3)
        # JDK 21+ sleep through Thread.sleepNanos and sleepNanos0 below Thread.sleep.
        chain = [[f for f in s if not f[0].startswith("java.lang.Thread.sleepNanos")] for s in ours.values()
                 if s and s[0][0].startswith("java.lang.Thread.sleep")]
        # Thread.sleep is native up to JDK 20 (no line), Java since.
        t.check(len(chain) == 1 and [(f[0], f[2]) for f in chain[0]][1:] == CHAIN[1:] and
                chain[0][0][0] == CHAIN[0][0],
                "the main thread's interpreted frames are the chain, in order, with their lines: %s" % chain)
        sa = sa_stacks(java.pid, jhsdb)
        for tid, frames in sa.items():
            t.check(ours.get(tid) == frames, "thread %d: profd's frames %s are the SA's %s"
                    % (tid, ours.get(tid), frames))
        t.check(len(sa) >= 3, "%d threads of interpreted frames compared with jhsdb jstack" % len(sa))
        t.check(shifted is not None and shifted != 0, "a Method* + 8 is not named (error %s)" % shifted)
    finally:
        java.terminate()
        java.wait(timeout=30)


def metric(text, name, labels=""):
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else None


def check_daemon(work, first):
    """first (a JVM) runs already; a second one starts once profd is up. Other JVMs of the
    machine count too: the checks are about these two, from profd's debug log, and /metrics."""
    with t.Daemon("--log-level", "debug") as d:
        second = subprocess.Popen(["java", "-cp", work, "Spin"])
        pids = (first.pid, second.pid)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with open(d.logpath) as f:
                    log = f.read()
                if all("pid %d runs HotSpot" % p in log for p in pids):
                    break
                time.sleep(0.5)
            # Mappings are read again as the JVMs load libraries and compile: still counted once.
            time.sleep(3)
            text = d.get("/metrics")[2].decode()
        finally:
            second.terminate()
            second.wait(timeout=30)
        with open(d.logpath) as f:
            log = f.read()
        for p in pids:
            lines = re.findall(r"pid %d runs HotSpot \((\S+)\): (\w+)" % p, log)
            t.check(len(lines) == 1 and lines[0][1] == "found",
                    "pid %d found as a HotSpot JVM, once: %s" % (p, lines))
        libjvm = os.path.realpath(os.path.join(os.path.dirname(os.path.realpath(shutil.which("java"))),
                                               "..", "lib", "server", "libjvm.so"))
        reads = re.findall(r"HotSpot (\S+): (\d+) fields", log)
        t.check(len([r for r in reads if os.path.realpath(r[0]) == libjvm]) == 1,
                "the tables of %s read once for both JVMs (%s)" % (libjvm, reads))
        n = metric(text, "profd_hotspot_processes")
        t.check(n is not None and n >= 2, "/metrics: profd_hotspot_processes counts both (%s)" % n)
        found = metric(text, "profd_hotspot_detections_total", '{outcome="found"}')
        t.check(found is not None and found >= 2, "/metrics: detections found %s" % found)
        pages = metric(text, "profd_hotspot_vmstructs_pages_read_total")
        t.check(pages and pages > 10, "/metrics: %s pages read for the tables" % pages)
        # The exit of the second is seen: it is forgotten (no longer among the processes).
        before = n
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and metric(text, "profd_hotspot_processes") >= before:
            time.sleep(0.5)
            text = d.get("/metrics")[2].decode()
        t.check(metric(text, "profd_hotspot_processes") < before, "/metrics: the JVM that exited is forgotten")


def main():
    if os.geteuid() != 0:
        skip_why = "needs root (reads another process's memory; jhsdb attaches with ptrace)"
        t.skip(skip_why)
    if not (shutil.which("java") and shutil.which("javac") and shutil.which("jhsdb")):
        t.skip("java, javac, jhsdb (openjdk-17-jdk-headless) are not installed")

    # Every JVM (javac, java, jhsdb) makes /tmp/hsperfdata_USER and leaves it, empty, at exit.
    had_hsperfdata = os.path.exists("/tmp/hsperfdata_root")
    work = t.tmpdir()
    with open(os.path.join(work, "Spin.java"), "w") as f:
        f.write(SPIN_JAVA)
    subprocess.run(["javac", "-d", work, os.path.join(work, "Spin.java")], check=True, timeout=120)
    java = subprocess.Popen(["java", "-cp", work, "Spin"])
    try:
        # The tables are complete once libjvm's static initialisers ran: retry until they read.
        ours = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = subprocess.run([DUMP, str(java.pid)], capture_output=True, text=True, timeout=30)
            if r.returncode == 0 and "\noffsets " in r.stdout:
                ours = r.stdout
                break
            time.sleep(0.2)
        if not t.check(ours is not None, "hotspot-vmstructs-dump reads the tables of java (pid %d)" % java.pid):
            t.finish()
        time.sleep(1)  # let the VM finish starting before the SA stops it
        started = time.monotonic()
        sa = subprocess.run(["jhsdb", "clhsdb", "--pid", str(java.pid)],
                            input="vmstructsdump\nintConstant\nlongConstant\nquit\n",
                            capture_output=True, text=True, timeout=180)
        t.log("jhsdb clhsdb took %.1f s" % (time.monotonic() - started))
        sa_types, sa_fields, sa_ints, sa_longs = parse_sa(sa.stdout)
        types, fields, statics, ints, longs, offsets, misc = parse_ours(ours)
        t.log("profd read %d types, %d fields (%d static), %d int and %d long constants in %s page reads"
              % (len(types), len(fields) + len(statics), len(statics), len(ints), len(longs), misc.get("reads")))
        t.log("the SA printed %d types, %d non-static fields, %d int and %d long constants"
              % (len(sa_types), len(sa_fields), len(sa_ints), len(sa_longs)))
        t.check(len(sa_fields) > 500 and len(sa_ints) > 100 and len(sa_longs) > 10,
                "the SA printed the tables (%d fields)" % len(sa_fields))

        bad = [k for k in fields if sa_fields.get(k) != fields[k]]
        t.check(not bad, "every non-static field of profd's has the SA's offset (%d fields; differing: %s)"
                % (len(fields), bad[:5]))
        # The SA gives a type the fields of its superclasses too (GrowableArray<X> has
        # GrowableArrayBase's _len): a field is profd's when the type or one of its ancestors has it.
        def ancestors(ty):
            seen = []
            while ty in types and ty not in seen and len(seen) < 64:
                seen.append(ty)
                ty = types[ty][0]
            return seen or [ty]

        # Types the SA makes up itself (GrowableArray<CodeHeap*> from GrowableArrayBase, pointer
        # types from type strings) are not in the tables: their fields are not looked for.
        synthesized = [k for k in sa_fields if k[0] not in types]
        t.log("%d fields of %d types the SA made up itself: %s" % (
            len(synthesized), len(set(k[0] for k in synthesized)), sorted(set(k[0] for k in synthesized))[:8]))
        t.check(len(synthesized) < len(sa_fields) // 20, "the SA made up few of its fields (%d)" % len(synthesized))
        missing = [k for k in sa_fields if k[0] in types and
                   not any((a, k[1]) in fields and fields[(a, k[1])] == sa_fields[k] for a in ancestors(k[0]))]
        t.check(not missing, "every field the SA has, profd has, on the type or an ancestor (%d; missing: %s)"
                % (len(sa_fields), missing[:5]))
        bad = [k for k in types if k not in sa_types or sa_types[k] != types[k]]
        t.check(not bad, "every type of profd's has the SA's size and superclass (%d types; differing: %s)"
                % (len(types), [(k, types[k], sa_types.get(k)) for k in bad[:5]]))
        bad = [k for k in set(ints) | set(sa_ints) if ints.get(k) != sa_ints.get(k)]
        t.check(not bad, "int constants equal the SA's (%d; differing: %s)" % (len(ints), bad[:5]))
        bad = [k for k in set(longs) | set(sa_longs) if longs.get(k) != sa_longs.get(k)]
        t.check(not bad, "long constants equal the SA's (%d; differing: %s)" % (len(longs), bad[:5]))

        t.check(misc.get("offsets") == "ok", "the walker's offsets are complete (%s)" % misc.get("offsets"))
        for name, want in EXPECT.items():
            if want[0] == "field":
                sa_value = sa_fields.get((want[1], want[2]))
            elif want[0] == "type":
                sa_value = sa_types.get(want[1], (None, None))[1]
            else:
                sa_value = sa_ints.get(want[1])
            t.check(sa_value is not None and offsets.get(name) == sa_value,
                    "offset %s = %s, the SA's %s" % (name, offsets.get(name), sa_value))
        ranges = libjvm_ranges(java.pid)
        for name in ("interpreter_code", "code_cache_heaps"):
            addr = int(misc.get("static " + name, "0"), 16)
            t.check(any(a <= addr < b for a, b in ranges),
                    "static %s at 0x%x lies in libjvm's memory" % (name, addr))
        t.check(statics.get(("CodeCache", "_heaps")) == int(misc.get("static code_cache_heaps", "0"), 16),
                "CodeCache::_heaps of the table is the walker's")
        check_interpreted(work)
        # Other JDKs the machine has (not Debian's; e.g. a Temurin build) are checked the same way
        # when present: their tables, layout and line number encoding (JDK 21+: UNSIGNED5 without
        # 0 bytes).
        default = os.path.realpath(shutil.which("java"))
        for home in sorted(glob.glob("/usr/lib/jvm/*/")):
            if (os.path.exists(os.path.join(home, "bin", "jhsdb")) and not os.path.islink(home.rstrip("/"))
                    and not default.startswith(os.path.realpath(home))):
                check_interpreted(work, home)
        check_daemon(work, java)
    finally:
        java.terminate()
        try:
            java.wait(timeout=20)
        except subprocess.TimeoutExpired:
            java.kill()
            java.wait()
        if not had_hsperfdata:
            shutil.rmtree("/tmp/hsperfdata_root", ignore_errors=True)
    t.finish()


if __name__ == "__main__":
    main()
