#!/usr/bin/env python3
"""V8's post-mortem metadata (daemon/runtimes/v8-offsets.c) and the names of V8 heap objects
(daemon/runtimes/v8-objects.c) against real Node.js builds: Debian 12's node 18 (its libnode.so.108,
downloaded once by tests/lib/debiannode.py), Debian 13's node 20 and Debian 14's node 24 (V8 13.6)
in their Debian roots (tests/lib/noderoot.py, made once) and the machine's own /usr/bin/node when it
is one.

The metadata must be found and sane (frame slots below the frame pointer, 8-byte tagged words,
distinct types and frame markers). Then node runs a script that prints the addresses of its
functions (%DebugPrint, and gc() so that they stay where they are: flags the test needs, profd
does not) and waits; each address is named through the remote memory path with nothing but the metadata: the
names and the script must be the ones the script gave, for functions still lazy (name in the
SharedFunctionInfo) and compiled ones (name in the ScopeInfo, after inline or hashed locals), and
an object that is not a function must be refused, never named."""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
import profdtest as t
import debiannode
import noderoot

DUMP = os.path.join(t.BUILD, "tests", "v8-offsets-dump")

MANY = 80  # context locals: above V8's 75 kept inline, so the names go to a hash table
SCRIPT = r"""
function hotLoop(n) { let s = 0; for (let i = 0; i < n; i++) s += i; return s; }
function lazyNeverCalled() { return 1; }
function withLocals(a) { let x = 1, y = 2; return () => x + y + a; }
function manyLocals() { %s; return () => %s; }
const arrowNamed = () => 42;
const obj = { method() { return 1; } };
class Klass { work() { return 2; } }
const anonymous = (() => function () {})();
const notAFunction = [1, 2, 3];
hotLoop(10); withLocals(1)(); manyLocals()(); arrowNamed(); obj.method(); new Klass().work(); anonymous();
gc(); gc(); // the objects in old space: a scavenge would move them after their address was printed
for (const [name, v] of [["hotLoop", hotLoop], ["lazyNeverCalled", lazyNeverCalled],
                         ["withLocals", withLocals], ["manyLocals", manyLocals],
                         ["arrowNamed", arrowNamed], ["method", obj.method],
                         ["work", Klass.prototype.work], ["", anonymous], ["!array", notAFunction]]) {
  console.log("NAME " + name);
  %%DebugPrint(v);
}
console.log("READY");
setTimeout(() => {}, 60000);
""" % ("; ".join("let v%d = %d" % (i, i) for i in range(MANY)), " + ".join("v%d" % i for i in range(MANY)))


def probe(path):
    out = subprocess.run([DUMP, "--elf", path], stdout=subprocess.PIPE, text=True, check=True).stdout
    values = {}
    for line in out.splitlines():
        k, v = line.split(" ", 1)
        values[k] = v
    return values


def check_metadata(label, v):
    if not t.check(v.get("result") == "OK", "%s: metadata found and described (%s, %s v8dbg symbols)"
                   % (label, v.get("result"), v.get("symbols"))):
        return False
    n = {k: int(x) for k, x in v.items() if k not in ("result", "symbols", "bytecode_sizes") and x != "NONE"}
    t.check(int(v["symbols"]) > 100, "%s: a full metadata set (%s symbols)" % (label, v["symbols"]))
    t.check(n["off_fp_function"] < 0 and n["off_fp_context"] < 0 and n["off_fp_function"] != n["off_fp_context"]
            and n["off_fp_function"] % 8 == 0 and n["off_fp_context"] % 8 == 0,
            "%s: frame slots below fp, 8-byte aligned (function %d, context %d)"
            % (label, n["off_fp_function"], n["off_fp_context"]))
    t.check(n.get("TaggedSize") == 8 and n["HeapObjectTag"] == 1 and n["SmiTag"] == 0,
            "%s: 8-byte tagged words, heap objects tagged 1, Smis 0" % label)
    types = [n[k] for k in n if k.startswith("type_")]
    t.check(len(types) == len(set(types)) and all(0 < x < 65536 for x in types),
            "%s: instance types distinct uint16 %s" % (label, types))
    frames = [n[k] for k in n if k.startswith("frametype_")]
    t.check(len(frames) == len(set(frames)) and all(0 < x < 64 for x in frames),
            "%s: frame types distinct and small %s" % (label, frames))
    members = [n[k] for k in n if k.startswith("class_")]
    t.check(all(0 <= x < 256 and x % 2 == 0 for x in members), "%s: member offsets inside objects" % label)
    # Node.js's own modules' sources are external strings (their lines and script names need them).
    t.check(n.get("class_ExternalString__resource__Object", 0) >= 16 and "ExternalStringTag" in n
            and n["ExternalStringTag"] not in (n["SeqStringTag"], n["ConsStringTag"]),
            "%s: external strings described (resource at %s, tag %s)"
            % (label, n.get("class_ExternalString__resource__Object"), n.get("ExternalStringTag")))
    return True


def check_bytecode_sizes(label, path, v, exported):
    """V8's bytecode lengths (kBytecodeSizes, for baseline frames' lines: v8-baseline.h) found, from
    the symbol where the build exports it (exported), else by their shape in .rodata; and the search
    of .rodata alone finds the very table the symbol gives."""
    got = v.get("bytecode_sizes", "none 0 0").split()
    want_from = "symbol" if exported else "rodata"
    t.check(got[0] == want_from and 128 <= int(got[1]) <= 256,
            "%s: bytecode lengths from %s (%s, %s bytecodes)" % (label, want_from, got[0], got[1]))
    scan = subprocess.run([DUMP, "--rodata", path], stdout=subprocess.PIPE, text=True, check=True).stdout.split()
    t.check(scan[1:] == ["rodata"] + got[1:], "%s: the search of .rodata finds the same table (%s; %s)"
            % (label, " ".join(scan[1:]), " ".join(got[1:])))


def check_live(label, argv, lib, root=None):
    """root: node runs in that Debian root (noderoot.in_root), the script in its /tmp."""
    folder = os.path.join(root, "tmp", "profd-v8-offsets-%d" % os.getpid()) if root else t.tmpdir()
    os.makedirs(folder, exist_ok=True)
    script_host = os.path.join(folder, "functions.js")
    script = "/" + os.path.relpath(script_host, root) if root else script_host
    with open(script_host, "w") as f:
        f.write(SCRIPT)
    args = argv + ["--allow-natives-syntax", "--expose-gc", script]
    kw = dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    proc = noderoot.in_root(root, args, **kw) if root else subprocess.Popen(args, **kw)
    try:
        addrs, name = [], None
        deadline = time.time() + 60
        for line in proc.stdout:
            if line.startswith("NAME "):
                name = line[5:].rstrip("\n")
            m = re.match(r"DebugPrint: (0x[0-9a-f]+)", line)
            if m and name is not None:
                addrs.append((name, m.group(1)))
                name = None
            if line.startswith("READY") or time.time() > deadline:
                break
        if not t.check(len(addrs) == 9, "%s: node printed its 9 objects (%d)" % (label, len(addrs))):
            return
        pid = proc.pid  # unshare, sh and env exec in turn: node keeps the pid
        for want, addr in addrs:
            out = subprocess.run([DUMP, "--function", lib, str(pid), addr], stdout=subprocess.PIPE,
                                 text=True, check=True).stdout
            if want == "!array":
                t.check(out.strip() == "error EMEDIUMTYPE", "%s: an array is refused, not named (%s)"
                        % (label, out.strip()))
                continue
            got = dict(line.split(" ", 1) if " " in line else (line, "") for line in out.splitlines())
            t.check(got.get("function") == want and got.get("script") == script,
                    "%s: %s at %s named %r in %r (%s)" % (label, want or "<anonymous>", addr, got.get("function"),
                                                         got.get("script"), got.get("error", "")))
    finally:
        proc.kill()
        proc.wait()
        if root:
            shutil.rmtree(folder, ignore_errors=True)


def main():
    t.check(subprocess.run([DUMP, "--elf", "/bin/true"], stdout=subprocess.PIPE, text=True).stdout.strip()
            == "result ENOENT", "a program without V8 is not taken for one")
    t.check(subprocess.run([DUMP, "--rodata", "/bin/true"], stdout=subprocess.PIPE, text=True).stdout.strip()
            == "error ENOENT", "no bytecode length table is found in a program without V8")
    checked = []
    try:
        base = debiannode.ensure_node18(log=t.log)
    except debiannode.NodeUnavailable as e:
        base = None
        t.log("Debian 12's node 18 unavailable: %s" % e)
    if base:
        created = debiannode.make_mount_target()
        try:
            values = probe(debiannode.libnode(base))
            if check_metadata("node 18 (Debian 12)", values):
                check_bytecode_sizes("node 18 (Debian 12)", debiannode.libnode(base), values, True)
                check_live("node 18 (Debian 12)", debiannode.command(base, []), debiannode.libnode(base))
        finally:
            debiannode.remove_mount_target(created)
        checked.append("node 18")
    # Debian 13's node 20 and Debian 14's node 24 in their roots (made once by tests/lib/noderoot.py).
    for label, suite, soname in (("node 20 (Debian 13)", "trixie", "libnode.so.115"),
                                 ("node 24 (Debian 14)", "forky", "libnode.so.137")):
        try:
            root = noderoot.ensure(suite, log=t.log)
        except noderoot.RootUnavailable as e:
            t.log("SKIPPING %s: %s" % (label, e))
            continue
        lib = os.path.join(root, "usr/lib/x86_64-linux-gnu", soname)
        values = probe(lib)
        if check_metadata(label, values):
            # node 24's libnode exports few of V8's internal symbols, kBytecodeSizes not among them
            check_bytecode_sizes(label, lib, values, soname != "libnode.so.137")
            check_live(label, ["/usr/bin/node"], lib, root=root)
        checked.append(label)
    host = "/usr/bin/node"
    if os.path.exists(host) and probe(host).get("result") != "ENOENT":
        label = "host " + subprocess.run([host, "--version"], stdout=subprocess.PIPE, text=True).stdout.strip()
        if check_metadata(label, probe(host)):
            check_live(label, [host], host)
        checked.append(label)
    if not checked:
        t.skip("no Node.js build to check: Debian 12's node 18 cannot be downloaded and "
               "/usr/bin/node is not V8")
    t.finish()


main()
