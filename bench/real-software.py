#!/usr/bin/env python3
"""Benchmark (prints figures, never fails on them; recorded in docs/performance.md).

Real Debian programs, each profiled by profd and by `perf record --call-graph dwarf` at once: the
program's workload runs as the command of perf record (perf follows every process and thread it
starts), while one profd samples the whole host and serves the same window over HTTP (pprof with
pid and comm labels, decoded here). Both are cut to the same CLOCK_MONOTONIC window and to the
program's own processes (the pids perf saw running the program, whose comm is the program's).

Per program: samples; complete stacks (the outermost user frame is main's caller or below it:
__libc_start_call_main, __libc_start_main, _start - unnamed in a stripped executable -, or a
thread's clone/clone3, or Go's runtime.goexit/mstart/mcall/rt0_go/clone; a profd stack that ends
in its own "[unwind stopped: ...]" or "[truncated ...]" frame never is); mean and max depth in
user frames (inlined functions not counted: perf runs with --no-inline); leaf agreement (sum over
leaf functions of the smaller of the two tools' shares) and call-chain agreement (the same on the
leaf and its 4 callers, and on whole stacks down to main's caller), each next to what sampling noise alone leaves of it
(two samples of the same sizes drawn from the pooled distribution); the load average. perf copies
8 KiB of user stack per sample (its default), so its deeper stacks stop early; Go binaries as
Debian ships them have no .eh_frame or .debug_frame for perf to unwind with. Per program, the
most frequent stacks, the ends of incomplete ones, profd's markers and the /metrics counters that
moved are printed before the table.

Programs: python3, xz, sqlite3, cc1 (gcc -O2), clang -O2, postgres under pgbench, node, rg
(ripgrep; apt-get installed when missing) and gofmt. One that cannot run is skipped, loudly.
These are accuracy figures: on a busy machine the sample counts drop, the ratios hold.

    PROFD_BUILD_DIR=build PYTHONPATH=tests/lib python3 bench/real-software.py \\
        [--seconds S] [--only NAME,...] [--show N]
or  meson test -C build --benchmark real-software"""
import argparse
import collections
import gzip
import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time

from profdtest import Daemon, http_get, log, require_bpf, tmpdir

FREQUENCY = 99
WARMUP_S = 2.0      # from the workload's start to the window: processes read, tables placed
# Outermost frames a whole user stack ends at (names as normalized by norm()).
# Names as norm() leaves them (no leading underscores: __clone3 and clone3 are one address).
# __libc_start_call_main is main's caller: a stack that reaches it has all of the program's
# frames (perf's often stop there, one frame short of _start).
OUTERMOST = {"start", "libc_start_main", "libc_start_main_impl", "libc_start_call_main", "clone", "clone3",
             "runtime.goexit", "runtime.mstart", "runtime.mcall", "runtime.rt0_go", "runtime.clone"}
LIBC_START = {"libc_start_main", "libc_start_main_impl", "libc_start_call_main"}
ALIASES = {"cfree": "free"}
PG_BIN = "/usr/lib/postgresql/15/bin"


# ---- pprof, decoded (a minimal protobuf reader) --------------------------------------------------

def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def ints(wt, v):
    """A repeated varint field: packed (bytes) or one value."""
    if wt == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


def pprof_samples(data):
    """[(pid, comm, user frames leaf first, marker, count)]: kernel frames dropped; marker is the
    frame profd ends an incomplete stack with ("[unwind stopped: ...]", "[truncated: ...]") or
    None."""
    raw = gzip.decompress(data)
    strings, sample_types, samples, locs, funcs, maps = [], [], [], {}, {}, {}
    for num, wt, v in fields(raw):
        if num == 1:
            st = {n: x for n, _, x in fields(v)}
            sample_types.append(st.get(1, 0))
        elif num == 2:
            samples.append(v)
        elif num == 3:
            m = {n: x for n, _, x in fields(v)}
            maps[m.get(1, 0)] = m.get(5, 0)
        elif num == 4:
            loc = {"mapping": 0, "lines": []}
            lid = 0
            for n, _, x in fields(v):
                if n == 1:
                    lid = x
                elif n == 2:
                    loc["mapping"] = x
                elif n == 4:
                    loc["lines"].append({k: y for k, _, y in fields(x)}.get(1, 0))
            locs[lid] = loc
        elif num == 5:
            f = {n: x for n, _, x in fields(v)}
            funcs[f.get(1, 0)] = f.get(2, 0)
        elif num == 6:
            strings.append(v.decode("utf-8", "replace"))
    idx = next((i for i, s in enumerate(sample_types) if strings[s] == "samples"), 0)
    kernel_maps = {mid for mid, fn in maps.items() if strings[fn].startswith("[kernel")}
    out = []
    for s in samples:
        ids, values, labels = [], [], {}
        for n, wt, x in fields(s):
            if n == 1:
                ids += ints(wt, x)
            elif n == 2:
                values += ints(wt, x)
            elif n == 3:
                lab = {k: y for k, _, y in fields(x)}
                labels[strings[lab.get(1, 0)]] = strings[lab[2]] if lab.get(2) else lab.get(3, 0)
        frames, marker = [], None
        for lid in ids:
            loc = locs[lid]
            if loc["mapping"] in kernel_maps:
                continue
            if not loc["lines"]:
                frames.append(unknown(strings[maps[loc["mapping"]]] if loc["mapping"] in maps else ""))
                continue
            # the last line is the function the others were inlined into: the real frame
            name = strings[funcs[loc["lines"][-1]]]
            if not loc["mapping"] and name.startswith("[") and not name.startswith("[unknown]"):
                marker = name
                continue
            frames.append(unknown(strings[maps[loc["mapping"]]]) if name.startswith("[unknown]") and
                          loc["mapping"] in maps else norm(name))
        out.append((int(labels.get("pid", 0) or 0), labels.get("comm", ""), frames, marker, values[idx]))
    return out


def unknown(path):
    """A frame neither tool could name, told apart by its file: "[unknown] cc1"."""
    base = os.path.basename(path)
    if re.fullmatch(r"perf-\d+\.map", base):           # perf's name for anonymous memory (JIT code)
        return "[unknown]"
    return "[unknown] " + base if base and not base.startswith("[") else "[unknown]"


def norm(name):
    """One spelling for a function from either tool."""
    name = name.strip()
    if name.startswith("[unknown]"):
        return "[unknown]"
    name = re.sub(r"@@?[A-Za-z0-9_.]+$", "", name)    # symbol versions
    m = re.search(r"(?<=[\w>\]])\(", name)           # C++ parameters: perf prints them (not
    if m:                                              # Go's "pkg.(*T).M")
        name = name[:m.start()]
    name = re.sub(r"::h[0-9a-f]{16}$", "", name)       # Rust's legacy hash
    name = re.sub(r"\.abi0$", "", name)                # Go assembly functions in .symtab
    # glibc names one address several ways (__GI___libc_open, __open, open; __libc_recv, __recv;
    # cfree, free) and the tools pick differently: compared without those prefixes.
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
        name = re.sub(r"^(?:__GI_)?_*(?:libc_(?!start))?", "", name) or name
        name = ALIASES.get(name, name)
    return name


# ---- perf ----------------------------------------------------------------------------------------

def perf_usable(d):
    if not shutil.which("perf"):
        return "perf is not installed (Debian package linux-perf)"
    r = subprocess.run(["perf", "record", "-q", "-o", os.path.join(d, "probe.data"), "--call-graph", "dwarf",
                        "-F", str(FREQUENCY), "--", "true"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return "perf record does not work here: " + (r.stderr.strip()[-400:] or "exit %d" % r.returncode)
    return None


def perf_samples(path, t_from, t_to):
    """[(pid, tid, thread comm, user frames leaf first)] of the samples in [t_from, t_to]."""
    r = subprocess.run(["perf", "script", "-i", path, "-F", "comm,pid,tid,time,ip,sym,dso", "--no-inline"],
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise RuntimeError("perf script failed: " + r.stderr[-400:])
    out = []
    for block in r.stdout.split("\n\n"):
        lines = [l for l in block.split("\n") if l.strip()]
        if not lines:
            continue
        m = re.match(r"^\s*(.*?)\s+(\d+)/(\d+)\s+([0-9.]+):", lines[0])
        if not m:
            continue
        t = float(m.group(4))
        if t < t_from or t > t_to:
            continue
        frames = []
        for l in lines[1:]:
            fm = re.match(r"^\s*[0-9a-f]+\s+(.*?)\s+\(([^()]*)\)\s*$", l)
            if not fm:
                continue
            sym, dso = fm.group(1), fm.group(2)
            if dso.startswith("[kernel") or dso == "[bpf_prog]" or sym.startswith("bpf_prog_"):
                continue
            frames.append(unknown(dso) if sym == "[unknown]" else norm(sym))
        out.append((int(m.group(2)), int(m.group(3)), m.group(1), frames))
    return out


# ---- workloads -----------------------------------------------------------------------------------

class Program:
    """name: shown; comm: the processes measured; prepare(work) -> argv run under perf, or raises
    Skip; the argv runs for `seconds` and exits. around(work, seconds) (optional) runs beside the
    window (pgbench), stop(work) ends what argv started when it does not end by itself."""

    def __init__(self, name, comm, prepare, need=(), around=None, stop=None):
        self.name, self.comm, self.prepare, self.need = name, comm, prepare, need
        self.around, self.stop = around, stop


class Skip(Exception):
    pass


def shell_loop(seconds, body):
    return ["sh", "-c", "end=$(( $(date +%%s) + %d )); while [ $(date +%%s) -lt $end ]; do %s; done"
            % (seconds, body)]


PY_SRC = r"""
import sys, time
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
def words(n):
    d = {}
    for i in range(n):
        k = "w%d" % (i % 997)
        d[k] = d.get(k, 0) + len(k)
    return sorted(d.items(), key=lambda kv: -kv[1])[:3]
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    fib(18)
    words(20000)
"""


def prep_python(work, seconds):
    path = os.path.join(work, "loop.py")
    with open(path, "w") as f:
        f.write(PY_SRC)
    return ["/usr/bin/python3", path, str(seconds)]


def prep_xz(work, seconds):
    import random
    rnd = random.Random(1)
    vocab = ["%s%d" % (w, i) for i, w in enumerate(["alpha", "beta", "gamma", "delta", "eps"] * 400)]
    path = os.path.join(work, "data.txt")
    with open(path, "w") as f:
        for _ in range(40):
            f.write(" ".join(rnd.choices(vocab, k=100000)) + "\n")
    return shell_loop(seconds, "xz -6 -T1 -c '%s' >/dev/null" % path)


SQL = """
CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c REAL);
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n LIMIT 200000)
INSERT INTO t SELECT x, printf('row%%d', x %% 1000), x * 0.5 FROM n;
CREATE INDEX tb ON t(b);
"""
SQL_QUERY = """
SELECT b, count(*), sum(c) FROM t GROUP BY b ORDER BY 3 DESC LIMIT 3;
SELECT count(*) FROM t t1 JOIN t t2 ON t1.b = t2.b WHERE t1.a %% 97 = 0 AND t2.a %% 89 = 0;
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n LIMIT 300000)
SELECT sum(length(printf('%%d-%%s', x, hex(x)))) FROM n;
"""


def prep_sqlite(work, seconds):
    if not shutil.which("sqlite3"):
        raise Skip("sqlite3 is not installed")
    path = os.path.join(work, "q.sql")
    with open(path, "w") as f:
        f.write((SQL + SQL_QUERY * 10) % ())
    return shell_loop(seconds, "sqlite3 :memory: < '%s' >/dev/null" % path)


def gen_c(work):
    """A C file that keeps cc1/clang busy ~1 s at -O2: many functions with loops, switches and
    calls between them."""
    path = os.path.join(work, "gen.c")
    with open(path, "w") as f:
        f.write("#include <string.h>\nstruct s { int a[16]; double d; char name[32]; };\n")
        for i in range(400):
            f.write("""
static int f%d_helper(struct s *p, int k) { int r = 0; for (int i = 0; i < 16; i++) r += p->a[i] * (k ^ i);
    return r + (int)p->d; }
int f%d(struct s *p, int n) {
    int acc = %d;
    for (int i = 0; i < n; i++) {
        switch ((i + acc) & 7) {
        case 0: acc += f%d_helper(p, i); break;
        case 1: acc ^= p->a[i & 15] << 2; break;
        case 2: p->d += acc * 0.5; break;
        case 3: memcpy(p->name, "abcdefgh", 8); acc += p->name[i & 7]; break;
        case 4: acc = acc * 31 + i; break;
        default: acc -= f%d_helper(p, acc & 15);
        }
    }
    return acc;
}
""" % (i, i, i, i, i))
    return path


def prep_cc1(work, seconds):
    src = gen_c(work)
    return shell_loop(seconds, "gcc -O2 -c -o /dev/null '%s'" % src)


def prep_clang(work, seconds):
    if not shutil.which("clang"):
        raise Skip("clang is not installed")
    src = gen_c(work)
    return shell_loop(seconds, "clang -O2 -c -o /dev/null '%s'" % src)


NODE_SRC = r"""
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
function words(n) { const m = new Map(); for (let i = 0; i < n; i++) { const k = 'w' + (i % 997);
  m.set(k, (m.get(k) || 0) + k.length); } return [...m.entries()].sort((a, b) => b[1] - a[1])[0]; }
const end = Date.now() + 1000 * Number(process.argv[2]);
while (Date.now() < end) { fib(20); words(20000); JSON.parse(JSON.stringify({a: [1, 2, 3], b: 'x'.repeat(100)})); }
"""


def prep_node(work, seconds):
    if not shutil.which("node"):
        raise Skip("node is not installed")
    path = os.path.join(work, "loop.js")
    with open(path, "w") as f:
        f.write(NODE_SRC)
    return ["node", path, str(seconds)]


def prep_rg(work, seconds):
    if not shutil.which("rg"):
        log("rg is not installed: apt-get install ripgrep")
        r = subprocess.run(["apt-get", "install", "-y", "-q", "ripgrep"], capture_output=True, text=True,
                           env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"), timeout=600)
        if r.returncode != 0 or not shutil.which("rg"):
            raise Skip("rg (ripgrep) is not installed and apt-get install failed: " + r.stderr[-300:])
    import random
    rnd = random.Random(2)
    vocab = ["fn", "let", "match", "struct", "impl", "value", "error", "result", "buffer", "index"]
    tree = os.path.join(work, "tree")
    for d in range(40):
        os.makedirs(os.path.join(tree, "d%d" % d))
        for k in range(50):
            with open(os.path.join(tree, "d%d" % d, "f%d.txt" % k), "w") as f:
                for _ in range(400):
                    f.write(" ".join(rnd.choices(vocab, k=12)) + " %d\n" % rnd.randrange(100000))
    # The tree 15 times over: each rg runs ~1 s, so its unwinding is measured rather than the first
    # milliseconds of a process (docs/performance.md has the figures of 80 ms runs).
    trees = " ".join(["'%s'" % tree] * 15)
    return shell_loop(seconds, "rg -c '(value|error)_?[0-9]{3}\\b|buffer index [0-9]+$' %s >/dev/null; "
                      "rg -i -c 'struct\\s+\\w+\\s+impl' %s >/dev/null" % (trees, trees))


def prep_gofmt(work, seconds):
    if not shutil.which("gofmt"):
        raise Skip("gofmt is not installed (golang-go)")
    tree = os.path.join(work, "gotree")
    for d in range(10):
        os.makedirs(os.path.join(tree, "p%d" % d))
        for k in range(20):
            with open(os.path.join(tree, "p%d" % d, "f%d.go" % k), "w") as f:
                f.write("package p%d\nimport \"fmt\"\n" % d)
                for i in range(60):
                    # badly formatted on purpose: gofmt has to rewrite it
                    f.write("type T%d_%d struct{A int;B string\nC []map[string]int}\n"
                            "func (t *T%d_%d) M(x int)(int,error){if x>0{for i:=0;i<x;i++{t.A+=i*%d}}\n"
                            "switch{case t.B==\"\":return 0,fmt.Errorf(\"e%%d\",x)\ndefault:t.C=append(t.C,"
                            "map[string]int{\"k\":x})}\nreturn t.A,nil}\n" % (k, i, k, i, i))
    return shell_loop(seconds, "gofmt -s '%s' >/dev/null" % tree)


class Postgres:
    """A private cluster in a temp dir, run as the postgres user; the server is the command perf
    records, pgbench (outside perf) drives it over its Unix socket."""

    def __init__(self):
        self.data = self.sock = None
        self.port = 54329

    def as_pg(self, *cmd):
        return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--", *cmd]

    def prepare(self, work, seconds):
        if not os.path.exists(os.path.join(PG_BIN, "postgres")) or not shutil.which("pgbench"):
            raise Skip("postgresql-15 (postgres, pgbench) is not installed")
        try:
            import pwd
            pw = pwd.getpwnam("postgres")
        except KeyError:
            raise Skip("no postgres user")
        base = os.path.join(work, "pg")
        os.makedirs(base)
        os.chown(base, pw.pw_uid, pw.pw_gid)
        os.chmod(work, 0o755)
        self.data, self.sock = os.path.join(base, "data"), base
        r = subprocess.run(self.as_pg(os.path.join(PG_BIN, "initdb"), "-D", self.data, "-A", "trust",
                                      "-U", "postgres", "--no-sync"), capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise Skip("initdb failed: " + r.stderr[-300:])
        return self.as_pg(os.path.join(PG_BIN, "postgres"), "-D", self.data, "-k", self.sock, "-p", str(self.port),
                          "-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off",
                          "-c", "shared_buffers=64MB")

    def pgbench(self, *args, timeout=600):
        return subprocess.run(self.as_pg("pgbench", "-h", self.sock, "-p", str(self.port), "-U", "postgres",
                                         *args, "postgres"), capture_output=True, text=True, timeout=timeout)

    def around(self, work, seconds):
        """Before the window: wait for the server, pgbench -i. Returns a thread that runs
        pgbench -T for the window."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if subprocess.run([os.path.join(PG_BIN, "pg_isready"), "-h", self.sock, "-p", str(self.port)],
                              capture_output=True).returncode == 0:
                break
            time.sleep(0.2)
        else:
            raise Skip("postgres did not accept connections within 60 s")
        r = self.pgbench("-i", "-q", "-s", "5")
        if r.returncode != 0:
            raise Skip("pgbench -i failed: " + r.stderr[-300:])
        result = {}

        def run():
            r = self.pgbench("-c", "2", "-j", "1", "-T", str(seconds))
            result["tps"] = re.findall(r"tps = [0-9.]+", r.stdout)
            result["rc"] = r.returncode
        t = threading.Thread(target=run)
        t.start()
        return t, result

    def stop(self, work):
        if self.data:
            subprocess.run(self.as_pg(os.path.join(PG_BIN, "pg_ctl"), "stop", "-D", self.data, "-m", "fast", "-w"),
                           capture_output=True, timeout=120)


PG = Postgres()
PROGRAMS = [
    Program("python3", "python3", prep_python),
    Program("xz", "xz", prep_xz),
    Program("sqlite3", "sqlite3", prep_sqlite),
    Program("cc1", "cc1", prep_cc1),
    Program("clang", "clang", prep_clang),
    Program("postgres", "postgres", PG.prepare, around=PG.around, stop=PG.stop),
    Program("node", "node", prep_node),
    Program("rg", "rg", prep_rg),
    Program("gofmt", "gofmt", prep_gofmt),
]


# ---- figures -------------------------------------------------------------------------------------

def complete(frames, marked_ok=True):
    """The stack reaches an entry point. In a stripped executable nothing names _start: the
    unnamed frame below __libc_start_main is it."""
    if not frames or not marked_ok:
        return False
    return frames[-1] in OUTERMOST or (len(frames) > 1 and frames[-1].startswith("[unknown]") and
                                       frames[-2] in LIBC_START)


def overlap(a, b):
    """Sum over keys of the smaller share: 1.0 when both distributions are the same."""
    ta, tb = sum(a.values()), sum(b.values())
    if not ta or not tb:
        return 0.0
    return sum(min(n / ta, b.get(k, 0) / tb) for k, n in a.items())


def noise_floor(a, b, draws=20):
    """The overlap two tools that agree perfectly would still show: two samples of the sizes of
    a and b drawn from their pooled distribution (sampling noise alone)."""
    pool = a + b
    keys, weights = list(pool), list(pool.values())
    na, nb = sum(a.values()), sum(b.values())
    if not na or not nb:
        return 0.0
    rnd = random.Random(3)
    total = 0.0
    for _ in range(draws):
        total += overlap(collections.Counter(rnd.choices(keys, weights, k=na)),
                         collections.Counter(rnd.choices(keys, weights, k=nb)))
    return total / draws


def figures(stacks):
    """stacks: [(frames leaf first, complete, count)]"""
    total = sum(n for _, _, n in stacks)
    comp = sum(n for f, c, n in stacks if c)
    depths = [(len(f), n) for f, _, n in stacks]
    leaves, chains, whole, roots = (collections.Counter() for _ in range(4))
    for f, c, n in stacks:
        leaves[f[0] if f else "[none]"] += n
        chains[tuple(f[:5])] += n
        # below main's caller only glibc's start-up (or an unnamed _start): perf often stops
        # short of it, which is not a disagreement on the program's stack
        whole[tuple(f[:f.index("libc_start_call_main") + 1] if "libc_start_call_main" in f else f)] += n
        if not c:
            roots[f[-1] if f else "[none]"] += n
    return {
        "samples": total, "complete": comp,
        "mean_depth": sum(d * n for d, n in depths) / total if total else 0.0,
        "max_depth": max((d for d, _ in depths), default=0),
        "leaves": leaves, "chains": chains, "whole": whole, "incomplete_roots": roots,
    }


def run_program(daemon, prog, seconds, work, show):
    log("\n=== %s" % prog.name)
    pwork = os.path.join(work, prog.name)
    os.makedirs(pwork)
    try:
        argv = prog.prepare(pwork, int(WARMUP_S + seconds + 3))
    except Skip as e:
        log("!" * 70 + "\nSKIPPED %s: %s\n" % (prog.name, e) + "!" * 70)
        return None
    data = os.path.join(pwork, "perf.data")
    perf = subprocess.Popen(["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "--call-graph", "dwarf",
                             "-F", str(FREQUENCY), "-o", data, "--", *argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    around = None
    body = None
    try:
        if prog.around:
            try:
                around = prog.around(pwork, seconds)
            except Skip as e:
                log("!" * 70 + "\nSKIPPED %s: %s\n" % (prog.name, e) + "!" * 70)
                return None
        else:
            time.sleep(WARMUP_S)
        if perf.poll() is not None:
            log("!" * 70 + "\nSKIPPED %s: the workload ended early (perf %d): %s\n"
                % (prog.name, perf.returncode, perf.stderr.read()[-400:]) + "!" * 70)
            return None
        t_from = time.monotonic()
        st, _, body = http_get(daemon.base + "/debug/pprof/profile?seconds=%d&labels=pid,comm&comm=%s"
                               % (seconds, prog.comm), timeout=seconds + 300)
        t_to = t_from + seconds
        if st != 200:
            log("!" * 70 + "\nSKIPPED %s: profd answered %d: %s\n" % (prog.name, st, body[:300]) + "!" * 70)
            return None
    finally:
        if around:
            around[0].join()
            log("pgbench: %s (exit %s)" % (" ".join(around[1].get("tps", [])), around[1].get("rc")))
        if prog.stop:
            prog.stop(pwork)
        try:
            perf.wait(timeout=seconds + 120)
        except subprocess.TimeoutExpired:
            os.killpg(perf.pid, signal.SIGTERM)
            perf.wait()
    if perf.returncode != 0:
        log("note: perf record exited %d: %s" % (perf.returncode, perf.stderr.read()[-300:]))
    t0 = time.monotonic()
    psamples = perf_samples(data, t_from, t_to)
    log("perf script: %d samples in the window, %.0f s" % (len(psamples), time.monotonic() - t0))
    os.unlink(data)
    # The program's processes: pids perf saw with the program's comm on their main thread.
    pids = {pid for pid, tid, comm, _ in psamples if pid == tid and comm == prog.comm}
    pids |= {pid for pid, tid, comm, _ in psamples if comm == prog.comm}
    perf_stacks = [(f, complete(f), 1) for pid, tid, comm, f in psamples
                   if pid in pids and (comm == prog.comm or pid != tid)]
    profd_all = pprof_samples(body)
    profd_stacks = [(f, complete(f, not marker), n) for pid, comm, f, marker, n in profd_all if pid in pids]
    markers = collections.Counter()
    for pid, comm, f, marker, n in profd_all:
        if pid in pids and marker:
            markers[marker] += n
    other = sum(n for pid, _, _, _, n in profd_all if pid not in pids)
    log("%d processes; profd samples of other processes named %s (not counted): %d"
        % (len(pids), prog.comm, other))
    a, b = figures(profd_stacks), figures(perf_stacks)
    res = {"name": prog.name, "profd": a, "perf": b,
           "leaf": overlap(a["leaves"], b["leaves"]), "chain5": overlap(a["chains"], b["chains"]),
           "whole": overlap(a["whole"], b["whole"])}
    for k in ("leaf", "chain5", "whole"):
        key = {"leaf": "leaves", "chain5": "chains", "whole": "whole"}[k]
        res[k + "_floor"] = noise_floor(a[key], b[key])
    for tool, fig in (("profd", a), ("perf", b)):
        log("%-5s %5d samples, %5.1f%% complete, depth mean %.1f max %d" % (
            tool, fig["samples"], 100.0 * fig["complete"] / max(fig["samples"], 1), fig["mean_depth"],
            fig["max_depth"]))
        log("      top leaves: %s" % ", ".join("%s %.1f%%" % (k, 100.0 * n / fig["samples"])
                                             for k, n in fig["leaves"].most_common(show)))
        for k, n in fig["whole"].most_common(2):
            f = list(reversed(k))
            if len(f) > 16:
                f = f[:6] + ["..%d frames.." % (len(f) - 12)] + f[-6:]
            log("      %4d  %s" % (n, ";".join(f)))
        if fig["incomplete_roots"]:
            log("      incomplete stacks end at: %s" % ", ".join(
                "%s %d" % kv for kv in fig["incomplete_roots"].most_common(show)))
    if markers:
        log("profd's own markers of incomplete stacks: %s" % ", ".join("%s %d" % kv for kv in markers.most_common()))
    log("agreement (sampling noise alone would give): leaf %.1f%% (%.1f%%), leaf+4 callers %.1f%% (%.1f%%), "
        "whole stack %.1f%% (%.1f%%)" % (100 * res["leaf"], 100 * res["leaf_floor"], 100 * res["chain5"],
                                         100 * res["chain5_floor"], 100 * res["whole"], 100 * res["whole_floor"]))
    return res


WATCH = re.compile(r"^(profd_bpf_unwind_stops_total|profd_bpf_drops_total|profd_bpf_errors_total|"
                   r"profd_bpf_unknown_pid_fp_total|profd_proc_tracker_errors_total|"
                   r"profd_proc_tracker_exec_never_ready_total|profd_proc_tracker_events_coalesced_total|"
                   r"profd_proc_tracker_reconciled_total|profd_proc_tracker_exec_ready_seconds_(?:sum|count)|"
                   r"profd_event_loop_stalls_total|profd_exe_cache_errors_total|profd_drain_missing_stacks_total|"
                   r"profd_aggregator_dropped_samples_total)(\{[^}]*\})? ([0-9.e+-]+)$")


def metrics(daemon):
    """profd's counters that say why stacks end early or processes are not known yet."""
    st, _, body = http_get(daemon.base + "/metrics", timeout=60)
    out = {}
    for line in body.decode(errors="replace").splitlines() if st == 200 else []:
        m = WATCH.match(line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def pct(a, b):
    return "%.1f" % (100.0 * a / b) if b else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--only", default="")
    ap.add_argument("--show", type=int, default=5, help="top leaves / incomplete roots shown per program")
    a = ap.parse_args()
    require_bpf()
    work = tmpdir()
    os.chmod(work, 0o755)
    why = perf_usable(work)
    if why:
        log("!" * 70 + "\nSKIP: " + why + "\n" + "!" * 70)
        raise SystemExit(77)
    only = [n for n in a.only.split(",") if n]
    progs = [p for p in PROGRAMS if not only or p.name in only]
    results = []
    # Native frames only: perf shows _PyEval_EvalFrameDefault where profd puts the Python frames
    # (docs/runtimes.md), and this compares native unwinding.
    with Daemon("--frequency", str(FREQUENCY), "--no-python-frames") as d:
        time.sleep(3)  # start-up scan and table builds
        for p in progs:
            before, load = metrics(d), loadavg()
            r = run_program(d, p, a.seconds, work, a.show)
            after = metrics(d)
            delta = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
            log("load average %.1f at the start; profd counters over the run: %s" % (
                load, ", ".join("%s %g" % kv for kv in sorted(delta.items())) or "none moved"))
            if r:
                r["load"] = load
                results.append(r)
    log("\nprofd vs perf --call-graph dwarf (8 KiB stack copy), %d Hz, %d s per program; "
        "accuracy figures (the machine may be shared: counts, not timings)" % (FREQUENCY, a.seconds))
    log("| program | samples profd / perf | complete % profd / perf | mean depth profd / perf "
        "| max depth profd / perf | leaf agreement % (noise) | leaf+4 callers % (noise) | whole stack % (noise) "
        "| load |")
    log("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        x, y = r["profd"], r["perf"]
        log("| %s | %d / %d | %s / %s | %.1f / %.1f | %d / %d | %.1f (%.1f) | %.1f (%.1f) | %.1f (%.1f) | %.0f |" % (
            r["name"], x["samples"], y["samples"], pct(x["complete"], x["samples"]),
            pct(y["complete"], y["samples"]), x["mean_depth"], y["mean_depth"], x["max_depth"], y["max_depth"],
            100 * r["leaf"], 100 * r["leaf_floor"], 100 * r["chain5"], 100 * r["chain5_floor"],
            100 * r["whole"], 100 * r["whole_floor"], r["load"]))
    skipped = [p.name for p in progs if p.name not in [r["name"] for r in results]]
    if skipped:
        log("skipped: %s" % ", ".join(skipped))


if __name__ == "__main__":
    main()
