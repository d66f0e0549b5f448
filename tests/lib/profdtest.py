"""Helpers for profd's integration tests: run the real daemon, fetch over real HTTP, read the
result with the real `go tool pprof`. Exit code 77 means SKIP (meson), printed loudly."""
import contextlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

BUILD = os.environ.get("PROFD_BUILD_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "build")
SRC = os.environ.get("PROFD_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
PROFD = os.path.join(BUILD, "daemon", "profd")

_failures = []

# Everything a test writes goes under one folder of its own, removed when the test ends (pass, fail,
# skip, or meson's SIGTERM at a timeout); child processes (compilers, go tool pprof) use it as TMPDIR.
# World-traversable: units under test run as other users and read programs built here.
SESSION = tempfile.mkdtemp(prefix="profd-test-")
os.chmod(SESSION, 0o755)
os.environ["TMPDIR"] = SESSION
tempfile.tempdir = SESSION


def _remove_session():
    shutil.rmtree(SESSION, ignore_errors=True)


def _on_sigterm(signo, frame):
    sys.exit(128 + signo)  # runs atexit (and finally: blocks), unlike the default action


import atexit  # noqa: E402
atexit.register(_remove_session)
signal.signal(signal.SIGTERM, _on_sigterm)


def log(*a):
    print(*a, flush=True)


def skip(why):
    print("=" * 70 + "\nSKIP: " + why + "\n" + "=" * 70, flush=True)
    sys.exit(77)


def check(cond, what):
    """Record a failed expectation (the test continues, and fails at finish())."""
    if cond:
        log("ok   " + what)
    else:
        log("FAIL " + what)
        _failures.append(what)
    return cond


def finish():
    if _failures:
        log("%d check(s) failed:" % len(_failures))
        for f in _failures:
            log("  - " + f)
        sys.exit(1)
    log("all checks passed")
    sys.exit(0)


def proc_status_kb(pid, key):
    """A /proc/PID/status field in kB (VmRSS, VmHWM, ...); 0 when absent."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def proc_cpu_seconds(pid):
    """User + system CPU time of pid so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sanitized(binary=None):
    """True when profd is an AddressSanitizer build (meson -Db_sanitize=...): its RSS then holds
    ASan's shadow memory and says nothing about profd's own bounds."""
    try:
        out = subprocess.run(["ldd", binary or PROFD], capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return False
    return "libasan" in out


# profd inflates compressed DWARF in a thread of its own from this much on (dwarf-inflate.h).
DWARF_INFLATE_MIN_BYTES = 1 << 20


def compressed_dwarf_bytes(path):
    """What the compressed .debug_* sections (SHF_COMPRESSED) of the 64-bit ELF file at path take
    inflated, from their headers."""
    with open(path, "rb") as f:
        data = f.read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shnum, shstrndx = struct.unpack_from("<HH", data, 0x3c)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * 64) for i in range(shnum)]
    strtab = headers[shstrndx][4]
    total = 0
    for name_off, _, flags, _, offset, _, _, _, _, _ in headers:
        name = data[strtab + name_off:data.index(b"\0", strtab + name_off)]
        if flags & 0x800 and name.startswith(b".debug_"):  # SHF_COMPRESSED
            total += struct.unpack_from("<IIQQ", data, offset)[2]  # Elf64_Chdr.ch_size
    return total


def load_test(name):
    """Another test's module (tests/NAME, e.g. "test-v8-stacks.py"), loaded by path to use its
    programs and checks; its main() does not run."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", name)
    spec = importlib.util.spec_from_file_location(name.replace("-", "_")[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def require_bpf():
    if os.geteuid() != 0:
        skip("BPF tests need root (CAP_BPF, CAP_PERFMON)")
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        skip("kernel has no BTF at /sys/kernel/btf/vmlinux")


def free_port():
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tmpdir():
    return tempfile.mkdtemp(prefix="t-", dir=SESSION)


def cc(src, out, flags=(), compiler="gcc", libs=()):
    """Compile a scenario program; src may be a path or C source text."""
    if "\n" in src:
        path = out + (".cc" if compiler in ("g++", "clang++") else ".c")
        with open(path, "w") as f:
            f.write(src)
        src = path
    cmd = [compiler, *flags, "-o", out, src, *libs]
    subprocess.run(cmd, check=True)
    return out


def http_get(url, timeout=120):
    """Returns (status, headers dict lowercased, body bytes); never raises for HTTP errors."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def wait_healthy(port, proc=None, timeout=30, request_timeout=2, healthz=None):
    """Polls /healthz on the loopback port until it answers 200 (True); False once timeout seconds
    pass or proc (when given) exits. A socket-activated profd answers the first request only after
    it has started, so callers there pass a longer request_timeout. healthz(port, timeout), when
    given, asks instead and returns the status (HTTPS, client certificates)."""
    deadline = time.time() + timeout
    while time.time() < deadline and (proc is None or proc.poll() is None):
        try:
            if healthz:
                if healthz(port, request_timeout) == 200:
                    return True
            elif http_get("http://127.0.0.1:%d/healthz" % port, timeout=request_timeout)[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


# How long a started profd may take to answer /healthz 200: a few seconds on a quiet machine, but
# the verifier's work on the step programs (~800K instructions each) and the first scan of every
# process took over 30 s on a fresh machine with a load of 8.
DAEMON_HEALTHY_S = 90


class Daemon:
    """The real profd on a free loopback port. Use as a context manager."""

    def __init__(self, *args, port=None, env=None, prefix=(), binary=None, healthz=None):
        self.healthz = healthz  # see wait_healthy(); for profd serving HTTPS
        self.port = port or free_port()
        self.args = list(args)
        self.env = env
        self.prefix = list(prefix)  # e.g. a setpriv command line that runs profd
        self.binary = binary or PROFD
        self.proc = None
        self.logpath = os.path.join(tmpdir(), "profd.log")

    @property
    def base(self):
        return "http://127.0.0.1:%d" % self.port

    def __enter__(self):
        self.logf = open(self.logpath, "w")
        cmd = [*self.prefix, self.binary, "--http-address", "127.0.0.1:%d" % self.port, *self.args]
        log("starting: " + " ".join(cmd))
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT, env=self.env)
        t0 = time.monotonic()
        if wait_healthy(self.port, self.proc, timeout=DAEMON_HEALTHY_S, healthz=self.healthz):
            if time.monotonic() - t0 > 15:
                log("note: profd took %.0f s to become healthy" % (time.monotonic() - t0))
            return self
        self.dump_log()
        if self.proc.poll() is not None:
            raise RuntimeError("profd exited early with %d" % self.proc.returncode)
        # Not left running: __exit__ is not called when __enter__ raises.
        self.proc.kill()
        self.proc.wait()
        raise RuntimeError("profd did not become healthy in %d s" % DAEMON_HEALTHY_S)

    def get(self, path, timeout=120):
        return http_get(self.base + path, timeout=timeout)

    def dump_log(self):
        self.logf.flush()
        with open(self.logpath) as f:
            log("---- profd log ----\n" + f.read()[-20000:] + "---- end profd log ----")

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                log("FAIL profd did not exit within 10 s of SIGTERM")
                _failures.append("profd exits on SIGTERM")
        if exc and exc[0] is not None:
            self.dump_log()
        elif self.proc.returncode not in (0, None):
            self.dump_log()
        self.logf.close()
        return False


def go_env():
    env = dict(os.environ)
    env.setdefault("HOME", "/root")
    env["GOCACHE"] = os.path.join(SESSION, "gocache")
    env["PPROF_TMPDIR"] = SESSION
    env["PPROF_BINARY_PATH"] = "/nonexistent"  # never look for local binaries in $HOME/pprof
    return env


def pprof(*args, check_rc=True, symbolize=False, env=None):
    """go tool pprof ARGS. Without symbolize, it shows what profd wrote (-symbolize=none): pprof
    would otherwise name the frames profd left without a function from the files at their paths."""
    if not shutil.which("go"):
        skip("go (golang-go) is not installed: cannot check with go tool pprof")
    args = args if symbolize else ("-symbolize=none", *args)
    r = subprocess.run(["go", "tool", "pprof", *args], capture_output=True, text=True, env=env or go_env(),
                       timeout=300)
    if check_rc and r.returncode != 0:
        raise RuntimeError("go tool pprof %s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr))
    return r


class Trace:
    def __init__(self, value, labels, frames):
        self.value = value      # as printed, e.g. "10ms" -> we keep the raw text and a count
        self.labels = labels    # {key: [values]}
        self.frames = frames    # leaf first, function names

    def __repr__(self):
        return "Trace(%s, %s, %s)" % (self.value, self.labels, self.frames)


def _duration_ns(s):
    m = re.match(r"^([0-9.]+)(ns|us|µs|ms|s|min|hrs)?$", s)
    if not m:
        return 0
    mult = {"ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9, "min": 60e9, "hrs": 3600e9, None: 1}[m.group(2)]
    return float(m.group(1)) * mult


def traces(profile_path, sample_index="samples", lines=False):
    """Parse `go tool pprof -traces` into Trace objects (value is the sample count). lines: frames
    as "name file:line" (pprof -lines)."""
    r = pprof("-traces", *(("-lines",) if lines else ()), "-sample_index=" + sample_index, profile_path)
    out = []
    blocks = r.stdout.split("-----------+-------------------------------------------------------")
    for b in blocks[1:]:
        lines = [l for l in b.split("\n") if l.strip()]
        if not lines:
            continue
        labels, frames, value = {}, [], None
        for l in lines:
            # Label lines precede the value line: "%10s:  %s" (values joined by spaces; go 1.19
            # prints no brackets, older versions "[v1, v2]"). Kept whole: one value per key here.
            lm = re.match(r"^\s*(\S+):  (.*)$", l) if value is None else None
            if lm:
                v = lm.group(2).strip()
                if v.startswith("[") and v.endswith("]"):
                    v = v[1:-1]
                labels[lm.group(1)] = [v]
                continue
            m = re.match(r"^\s*(\S+)\s{2,}(\S.*)$", l) if value is None else None
            if value is None and m and not l.startswith("           "):
                value, first = m.group(1), m.group(2).strip()
                frames.append(first)
                continue
            frames.append(l.strip())
        if value is None:
            continue
        try:
            count = int(float(value))
        except ValueError:
            count = _duration_ns(value)
        out.append(Trace(count, labels, frames))
    return out


def stop_all(procs, timeout=20):
    """SIGTERM to every process still running (a JVM then removes its hsperfdata file), SIGKILL to
    any that has not exited within timeout seconds."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def metric(text, name, labels=""):
    """The value of name{labels} in /metrics text (labels as written there, e.g. '{kind="x"}'),
    0 when absent."""
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else 0


def fetch_profile(d, seconds, extra="", path=None):
    st, hdr, body = d.get("/debug/pprof/profile?seconds=%d%s" % (seconds, extra), timeout=seconds + 120)
    if st != 200:
        raise RuntimeError("profile request failed: %d %s" % (st, body[:200]))
    path = path or os.path.join(tmpdir(), "cpu.pb.gz")
    with open(path, "wb") as f:
        f.write(body)
    return path


def wait_settled(daemon, limit_s=20.0):
    """The start-up scan queues a table build for every executable on the host, and each build runs
    between the daemon's other work: a test about steady state starts once that backlog is gone
    (or after limit_s, said so)."""
    t0 = time.monotonic()
    queue = None
    while time.monotonic() - t0 < limit_s:
        st, _, body = daemon.get("/metrics", timeout=10)
        m = re.search(r"^profd_exe_cache_build_queue (\d+)", body.decode(errors="replace"), re.M) if st == 200 else None
        if not m:
            log("no profd_exe_cache_build_queue on /metrics: not waiting for start-up table builds")
            return
        queue = int(m.group(1))
        if queue == 0:
            log("start-up table builds done %.1f s after profd became healthy" % (time.monotonic() - t0))
            return
        time.sleep(0.2)
    log("start-up table builds still queued after %.0f s (%s): going on anyway" % (limit_s, queue))


def unwind_ready(daemon, pid, path_suffix, what, timeout_s=60):
    """Waits until profd says pid's unwind tables are in place (GET /debug/profd/process?pid=N:
    "state ready" and the mapping of path_suffix with its table), however busy the machine is.
    Records a failure with profd's last answer when that takes longer than timeout_s."""
    t0 = time.monotonic()
    text = ""
    want = re.compile(r"^mapping \S+ table .*" + re.escape(path_suffix) + r"$", re.M)
    while time.monotonic() - t0 < timeout_s:
        st, _, body = daemon.get("/debug/profd/process?pid=%d" % pid, timeout=10)
        text = body.decode(errors="replace")
        if st == 200 and re.search(r"^state ready$", text, re.M) and want.search(text):
            log("%s: unwind tables in place %.3f s after asking" % (what, time.monotonic() - t0))
            return True
        time.sleep(0.02)
    check(False, "%s: profd has pid %d's unwind tables in place within %d s; it says:\n%s"
          % (what, pid, timeout_s, text))
    return False
