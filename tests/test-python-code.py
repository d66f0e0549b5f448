#!/usr/bin/env python3
"""profd's CPython code object cache (daemon/runtimes/python-code.c) against real interpreters.

CPython 3.11 of this machine, 3.9 of Debian 11 "bullseye", 3.13 of Debian 13 "trixie" and 3.14 of
Debian 14 "forky" (in the roots tests/lib/debianroot.py caches, run through chroot) each import a module with code objects
of every kind of name (a nested function, a method, names in Latin-1, UCS-2 and UCS-4 text, a
function whose line table needs multi-byte entries, one whose line table is too large to keep)
and print, as JSON, the address of each code object, of the code and str types, and for every
instruction index (in the units BPF stores: bytes for 3.9, code units from 3.10) the line the
interpreter itself gives it (dis.findlinestarts for 3.9, co_lines() from 3.10).

tests/test-python-code.c (linking the daemon's objects) then reads each code object from the live
process with the offsets profd has for it (the table's entry; for 3.13+ python_offsets_from_debug()
of the bytes at _PyRuntime in /proc/PID/mem) and must give every name, file, first line and line
as the interpreter does; memory that is no code object must give an error, never a name; a cache
of 2 entries must evict the least recently used; and once the process exited, what was read must
still resolve from the cache alone, while what was not gives an error.

Interpreters built apart from Debian that the machine has (pyenv's ~/.pyenv/versions/3.X.Y) are
checked the same way: the only live check of 3.10's line table and of the 3.8 and 3.12 entries
(no Debian release ships them), and of 3.13.0's _Py_DebugOffsets. Their absence is noted, not a
SKIP."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import profdtest as t
import debianroot

TOOL = os.path.join(t.BUILD, "tests", "test-python-code")
INSTR_UNKNOWN = 0xffff
MAX_LINE_TABLE = 64 << 10

# The offsets test knows how to find _PyRuntime in a running process from the ELF's symbols.
offsets_test = t.load_test("test-python-offsets.py")

# A module with names of every str kind (Latin-1, UCS-2, UCS-4), a method, a nested function, and
# line jumps and columns big enough for the multi-byte forms of every line table format.
MODULE = '''# -*- coding: utf-8 -*-
def größe(x):
    y = x + 1
    return y * 2


def 函数(a):
    return [a
            for _ in range(3)]


def 𠀀():
    return 1


class Outer:
    def method(self, v):
        total = 0
        for i in range(v):
            total += i
        return total


def outer():
    def inner(z):
        return z + 1
    return inner


def far(a):
    b = a
''' + "\n" * 300 + '''    c = (b, ''' + "b + " * 80 + '''b)
''' + "\n" * 140 + '''    if c:
        return c
    return None
'''

PROGRAM = '''
import dis, json, sys
sys.path.insert(0, %(dir)r)
import pycode_mod as m

huge_src = "def huge():\\n" + "    x = 1\\n" * 40000
# A line table of a few KiB, walked from the checkpoints the cache keeps every 512 bytes: lines
# with gaps, long lines (columns past 127), loops (jumps back).
mid_src = "def mid(a):\\n" + "".join(
    ("    x" + str(k) + " = a + " + str(k) + "\\n") + ("\\n" * (k %% 13) if k %% 5 == 0 else "")
    + ("    y = (a, " + "a + " * 50 + "a)\\n" if k %% 11 == 0 else "")
    + ("    for i in range(2):\\n        a += i\\n" if k %% 17 == 0 else "")
    for k in range(800))
namespace = {}
exec(compile(huge_src, "<huge>", "exec"), namespace)
exec(compile(mid_src, "<mid>", "exec"), namespace)
funcs = [m.größe, m.函数, getattr(m, "\\U00020000"), m.Outer.method, m.outer(), m.far, namespace["huge"],
         namespace["mid"]]
codes = [f.__code__ for f in funcs] + [sys._getframe().f_code]


def table(co):
    return co.co_linetable if sys.version_info >= (3, 10) else co.co_lnotab


def lines(co, limit):
    n = min(len(co.co_code), limit)
    if sys.version_info >= (3, 10):
        units = [0] * (n // 2)
        for start, end, line in co.co_lines():
            for off in range(start, min(end, n), 2):
                units[off // 2] = line or 0
        return list(enumerate(units))
    # Before 3.10: the line of the last line start at or before the offset.
    starts = list(dis.findlinestarts(co))
    out, line, k = [], 0, 0
    for off in range(0, n, 2):
        while k < len(starts) and starts[k][0] <= off:
            line = starts[k][1]
            k += 1
        out.append((off, line))
    return out


bogus = 12345678901234
print(json.dumps({
    "version": list(sys.version_info[:2]),
    "code_type": id(type(codes[0])),
    "str_type": id(str),
    "int": id(bogus),
    "str": id("profd"),
    "codes": [{"addr": id(co), "name": getattr(co, "co_qualname", co.co_name), "file": co.co_filename,
               "first": co.co_firstlineno, "table_len": len(table(co)),
               "lines": lines(co, 1 << 30 if len(table(co)) <= %(max)d else 100)} for co in codes],
}), flush=True)
sys.stdin.readline()
'''


def symbol_address(pid, elf, name):
    """Address of dynamic symbol name of elf in process pid: moved by the load bias if PIE or a
    library (what the daemon does for _PyRuntime, PyCode_Type, PyUnicode_Type)."""
    value, e_type = offsets_test.elf_symbol(elf, name)
    if e_type == 2:  # ET_EXEC
        return value
    base = os.path.basename(elf)
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and os.path.basename(parts[5]) == base and int(parts[2], 16) == 0:
                return int(parts[0].split("-")[0], 16) + value
    raise ValueError("%s is not mapped in %d" % (base, pid))


class Tool:
    """The C side: one command, one answer."""

    def __init__(self):
        self.p = subprocess.Popen([TOOL], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, *words):
        self.p.stdin.write(" ".join(str(w) for w in words) + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().rstrip("\n")

    def metrics(self):
        self.p.stdin.write("metrics\n")
        self.p.stdin.flush()
        values = {}
        for line in iter(self.p.stdout.readline, ""):
            line = line.rstrip("\n")
            if line == "end":
                break
            if not line.startswith("#"):
                key, value = line.rsplit(" ", 1)
                values[key] = int(value)
        return values

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def parse(answer):
    """ok LINE FIRST\\tNAME\\tFILE -> (line, first, name, file); error X -> X."""
    if answer.startswith("ok "):
        head, name, file = answer[3:].split("\t")
        line, first = head.split()
        return int(line), int(first), name, file
    return answer.split(" ", 1)[-1]


def check_runtime(ver, root, binary, elf):
    """ver: what binary (a path inside root) runs; elf: the file with _PyRuntime (host path)."""
    path = elf
    vt = tuple(int(x) for x in ver.split("."))
    # The module and program must be inside the root for a chrooted interpreter.
    host_dir = tempfile.mkdtemp(prefix="profd-pycode-", dir=t.SESSION if root == "/" else os.path.join(root, "tmp"))
    inner_dir = "/" + os.path.relpath(host_dir, root)
    tool = Tool()
    proc = None
    try:
        os.chmod(host_dir, 0o755)
        with open(os.path.join(host_dir, "pycode_mod.py"), "w", encoding="utf-8") as f:
            f.write(MODULE)
        cmd = [binary, "-S", "-B", "-c", PROGRAM % {"dir": inner_dir, "max": MAX_LINE_TABLE}]
        if root != "/":
            cmd = ["chroot", root] + cmd
        env = dict(os.environ, PYTHONIOENCODING="utf-8", PYTHONUTF8="1")
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        out = proc.stdout.readline()
        if not t.check(out, "%s: the program printed its code objects" % ver):
            return
        info = json.loads(out)
        pid = proc.pid
        t.check(info["version"] == [int(x) for x in ver.split(".")], "%s: runs %s" % (ver, info["version"]))

        # Only 3.13+ reads its offsets from the process (_Py_DebugOffsets at _PyRuntime).
        runtime = offsets_test.runtime_address(pid, path) if vt >= (3, 13) else 0
        answer = tool.ask("offsets", pid, *ver.split("."), runtime)
        if not t.check(answer.startswith("ok " + ver), "%s: offsets for the process: %s" % (ver, answer)):
            return
        start = int(tool.ask("start", pid).split()[1])
        # The types the daemon passes come from the interpreter's exported symbols.
        ctype, stype = symbol_address(pid, path, "PyCode_Type"), symbol_address(pid, path, "PyUnicode_Type")
        t.check((ctype, stype) == (info["code_type"], info["str_type"]),
                "%s: PyCode_Type and PyUnicode_Type (dynamic symbols) are id(code type), id(str)" % ver)
        codes = info["codes"]

        def resolve(addr, instr, pid=pid, start=start, ctype=ctype, stype=stype):
            return parse(tool.ask("resolve", pid, start, ctype, stype, addr, instr))

        # Every instruction of every code object, read from the live process (then cached).
        for c in codes:
            too_large = c["table_len"] > MAX_LINE_TABLE
            wrong, n = [], 0
            for instr, line in c["lines"]:
                want = 0 if too_large else line
                got = resolve(c["addr"], instr)
                n += 1
                if got != (want, c["first"], c["name"], c["file"]):
                    wrong.append((instr, got, want))
            t.check(not wrong, "%s: %s (%s:%d, line table %d bytes%s): %d instructions resolved%s"
                    % (ver, c["name"], c["file"], c["first"], c["table_len"],
                       ", too large: lines unknown" if too_large else "", n,
                       "" if not wrong else "; wrong (instr, got, want): %s" % wrong[:5]))
            got = resolve(c["addr"], INSTR_UNKNOWN)
            t.check(got == (0, c["first"], c["name"], c["file"]),
                    "%s: %s with a saturated instruction index: name, no line (%s)" % (ver, c["name"], got))
        names = [c["name"] for c in codes]
        want_names = ["größe", "函数", "\U00020000", "Outer.method", "outer.<locals>.inner", "far", "huge",
                      "mid", "<module>"]
        if vt < (3, 11):  # no co_qualname before 3.11
            want_names[3:5] = ["method", "inner"]
        t.check(names == want_names, "%s: the interpreter's names are those expected: %s" % (ver, names))
        t.check(any(c["table_len"] > MAX_LINE_TABLE for c in codes),
                "%s: one line table is over %d bytes (%s)" % (ver, MAX_LINE_TABLE, [c["table_len"] for c in codes]))
        t.check(1024 <= codes[7]["table_len"] <= MAX_LINE_TABLE,
                "%s: mid() has a line table of several strides: %d bytes" % (ver, codes[7]["table_len"]))
        t.check(max(l for _, l in codes[5]["lines"]) - codes[5]["first"] > 400,
                "%s: far() spans lines far apart (multi-byte line table entries)" % ver)

        # Memory that is not a code object: an error, never a name.
        for what, addr in (("an int", info["int"]), ("a str", info["str"]), ("the code type", ctype)):
            got = resolve(addr, 0)
            t.check(got == "EBADMSG", "%s: %s as a code object: %s" % (ver, what, got))
        got = resolve(8, 0)
        t.check(got == "EFAULT", "%s: an unmapped address as a code object: %s" % (ver, got))
        got = resolve(codes[0]["addr"] + 8, 0)  # inside an object, not at its start
        t.check(got == "EBADMSG", "%s: an address inside a code object: %s" % (ver, got))
        # The right code object, but strings checked against the wrong type: no name.
        tool2 = Tool()
        tool2.ask("offsets", pid, *ver.split("."), runtime)
        got = parse(tool2.ask("resolve", pid, start, ctype, ctype, codes[0]["addr"], 0))
        t.check(got == "EBADMSG", "%s: a name that is not a str of the runtime: %s" % (ver, got))
        # The right code object of another process (start time of another): gone, not cached.
        got = parse(tool2.ask("resolve", pid, start + 1, ctype, stype, codes[0]["addr"], 0))
        t.check(got == "ESRCH", "%s: a reused pid (other start time): %s" % (ver, got))
        # A cache of 2 entries keeps the 2 used last.
        t.check(tool2.ask("new", 2, 0) == "ok", "%s: a cache of 2 entries" % ver)
        for c in codes[:3]:
            resolve_ok = parse(tool2.ask("resolve", pid, start, ctype, stype, c["addr"], 0))
            t.check(isinstance(resolve_ok, tuple), "%s: small cache reads %s" % (ver, c["name"]))
        got = [parse(tool2.ask("lookup", pid, start, c["addr"], 0)) for c in codes[:3]]
        t.check(got[0] == "ENOENT" and all(isinstance(g, tuple) for g in got[1:]),
                "%s: the least recently used entry was evicted: %s" % (ver, got))
        m2 = tool2.metrics()
        t.check(m2.get("profd_python_code_evictions_total") == 1 and m2.get("profd_python_code_entries") == 2,
                "%s: small cache metrics: evictions %s, entries %s" % (ver, m2.get("profd_python_code_evictions_total"),
                                                                       m2.get("profd_python_code_entries")))
        tool2.close()

        # The process exits: what was read still resolves, from the cache alone.
        proc.stdin.close()
        proc.wait(timeout=10)
        proc.stdout.close()
        proc = None
        t.check(not os.path.exists("/proc/%d" % pid) or tool.ask("start", pid) != "ok %d" % start,
                "%s: the process exited" % ver)
        wrong = []
        for c in codes:
            for instr, line in c["lines"][:200]:
                want = (0 if c["table_len"] > MAX_LINE_TABLE else line, c["first"], c["name"], c["file"])
                for cmd in ("lookup", "resolve"):
                    if cmd == "lookup":
                        got = parse(tool.ask("lookup", pid, start, c["addr"], instr))
                    else:
                        got = resolve(c["addr"], instr)
                    if got != want:
                        wrong.append((cmd, c["name"], instr, got, want))
        t.check(not wrong, "%s: after the exit every code object still resolves from the cache%s"
                % (ver, "" if not wrong else ": " + str(wrong[:5])))
        got = resolve(info["int"] + 64, 0)
        t.check(got == "ESRCH", "%s: an address never read, after the exit: %s" % (ver, got))
        got = parse(tool.ask("lookup", pid, start, info["int"] + 64, 0))
        t.check(got == "ENOENT", "%s: lookup of an address never read: %s" % (ver, got))

        m = tool.metrics()
        t.log("%s: %s" % (ver, {k.replace("profd_python_code_", ""): v for k, v in m.items() if v}))
        n = len(codes)
        t.check(m.get("profd_python_code_entries") == n, "%s: %d entries cached" % (ver, n))
        t.check(m.get('profd_python_code_lookups_total{result="read"}') == n,
                "%s: each code object read from the process once" % ver)
        t.check(m.get('profd_python_code_lookups_total{result="cache"}', 0) > 1000,
                "%s: the rest from the cache" % ver)
        t.check(m.get('profd_python_code_errors_total{reason="bad_object"}') == 4,
                "%s: 4 bad objects counted" % ver)
        t.check(m.get('profd_python_code_errors_total{reason="unreadable"}') == 1,
                "%s: 1 unreadable address counted" % ver)
        t.check(m.get('profd_python_code_errors_total{reason="gone"}') == 1, "%s: 1 gone counted" % ver)
        t.check(m.get("profd_python_code_line_tables_too_large_total") == 1,
                "%s: 1 line table too large counted" % ver)
        t.check(m.get('profd_python_code_lookups_total{result="miss"}') == 1, "%s: 1 cache miss counted" % ver)
        t.check(0 < m.get("profd_python_code_bytes", 0) < 1 << 20, "%s: bytes %s" % (ver, m.get("profd_python_code_bytes")))
    finally:
        if proc:
            proc.kill()
            proc.wait()
        tool.close()
        shutil.rmtree(host_dir, ignore_errors=True)


def other_builds():
    """[(version, binary, file with _PyRuntime)] of interpreters built apart from Debian that this
    machine happens to have (pyenv's ~/.pyenv/versions/3.X.Y), for versions no Debian release
    ships (3.8, 3.10, 3.12) and other releases of those that one does (3.13.0, the first 3.13)."""
    found = []
    for d in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*"))):
        m = re.fullmatch(r"3\.(\d+)\.\d+", os.path.basename(d))
        if not m or int(m.group(1)) < 8 or int(m.group(1)) > 13:
            continue
        ver = "3." + m.group(1)
        binary = os.path.join(d, "bin", "python" + ver)
        lib = os.path.join(d, "lib", "libpython%s.so.1.0" % ver)
        if os.path.exists(binary):
            found.append((ver, binary, lib if os.path.exists(lib) else binary, os.path.basename(d)))
    return found


def main():
    if not os.path.exists(TOOL):
        t.skip("%s is not built (ninja -C build)" % TOOL)
    if os.geteuid() != 0:
        t.skip("needs root (chroot, reading other processes' memory)")
    checked, skipped = [], []
    for ver, suite in (("3.11", None), ("3.9", "bullseye"), ("3.13", "trixie"), ("3.14", "forky")):
        binary = "/usr/bin/python" + ver
        if suite is None:
            root = "/"
        else:
            try:
                root = debianroot.ensure_root(suite, t.log)
            except debianroot.RootUnavailable as e:
                skipped.append("%s (%s root): %s" % (ver, suite, e))
                continue
        if not os.path.exists(os.path.join(root, binary.lstrip("/"))):
            skipped.append("%s: %s not installed" % (ver, binary))
            continue
        check_runtime(ver, root, binary, os.path.join(root, binary.lstrip("/")))
        checked.append(ver)
    # More builds when the machine has them: not needed to pass, but the only live check of the
    # 3.10 line table and of the 3.8 / 3.12 table entries.
    for ver, binary, elf, release in other_builds():
        t.log("%s: %s (%s)" % (ver, binary, release))
        check_runtime(ver, "/", binary, elf)
        checked.append(release + " (" + binary + ")")
    if not any(v.startswith("3.10.") for v in checked):
        t.log("NOTE: no CPython 3.10 on this machine: its line table format went unchecked")
    t.log("checked against CPython %s" % (", ".join(checked) or "(none)"))
    if skipped and not t._failures:
        t.skip("runtimes not checked:\n  " + "\n  ".join(skipped))
    t.finish()


if __name__ == "__main__":
    main()
