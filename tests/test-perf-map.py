#!/usr/bin/env python3
"""JIT frames are named from the perf maps runtimes write (/tmp/perf-PID.map), and perf maps a
process controls never block profd nor lead it elsewhere.

- node --perf-basic-prof running a hot JS function: of the node process's samples whose leaf is in
  JIT memory (anonymous executable memory), at least 80% carry a JS function name, the hot
  function's among them, and their mapping is the perf map file;
- OpenJDK 17 with -XX:+PreserveFramePointer, `jcmd PID Compiler.perfmap` after warm-up: the hot
  Java method is named;
- python3.13 -X perf (Debian trixie's, when its root is cached) in its own root, mount and pid
  namespace with a private /tmp: its functions are named through the perf trampolines;
- node exiting before the profile window ends: its JIT frames are still named;
- a process in its own pid namespace: named from /tmp/perf-NSPID.map, the pid it sees;
- a process in its own root and pid namespace: named from the map in its root;
- processes of `nobody` spinning in anonymous executable memory whose perf map is a FIFO, a symlink
  to /etc/shadow, a sparse 4 GiB file, garbage lines around one valid line, or a file of another
  user: the profile request completes, the valid line names its frame, the others name nothing,
  /metrics counts each by reason, /healthz answers.

node's JavaScript frames are read by the V8 walk where it runs (it wins over perf maps); this test
runs profd with --no-v8-frames so that node exercises the perf map path.

Every /tmp/perf-PID.map the test causes is removed at the end."""
import os
import re
import shutil
import signal
import subprocess
import threading
import time

from profdtest import Daemon, cc, check, fetch_profile, finish, log, pprof, require_bpf, skip, tmpdir, unwind_ready

NOBODY = 65534
AS_NOBODY = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups", "--inh-caps=-all"]
WINDOW_S = 5

HOT_JS = r"""
function hot(n) { let s = 0; for (let i = 0; i < n; i++) { s += (i * 7) % 13; } return s; }
const end = Date.now() + Number(process.argv[2]) * 1000; let t = 0;
while (Date.now() < end) t += hot(1000000);
console.log(t);
"""

HOT_PY = r"""
import sys, time
def hot_python_fn(n):
    s = 0
    for i in range(n):
        s += i * 7 % 13
    return s
end = time.time() + float(sys.argv[1])
while time.time() < end:
    hot_python_fn(100000)
"""

# CPython 3.12+ (-X perf) runs in Debian trixie's root (tests/lib/debianroot.py, cached by the
# python-offsets test), in its own mount and pid namespace with a private /tmp: a container.
TRIXIE = os.path.join(os.environ.get("PROFD_TEST_ROOTS") or "/var/cache/profd-tests/roots", "trixie")
PY_IN_ROOT = ("mount -t tmpfs tmpfs \"$0/tmp\" && cp \"$1\" \"$0/tmp/hot.py\" && "
              "exec chroot \"$0\" /usr/bin/python3.13 -X perf /tmp/hot.py 30")

HOT_JAVA = r"""
public class Hot {
    static long hotLoop(long n) { long s = 0; for (long i = 0; i < n; i++) { s += (i * 7) % 13; } return s; }
    public static void main(String[] a) {
        long end = System.currentTimeMillis() + Long.parseLong(a[0]) * 1000; long t = 0;
        while (System.currentTimeMillis() < end) t += hotLoop(1000000);
        System.out.println(t);
    }
}
"""

# Maps a page of anonymous executable memory holding "jmp ." and prints its address; once told to
# (a line on stdin), spins there until killed. Every victim uses the same address where it can:
# each must still be named from its own map only.
VICTIM = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/mman.h>
int main(void)
{
        char line[16];
        unsigned char *p = mmap((void *)0x7e0000000000, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED)
                p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
                return 1;
        p[0] = 0xeb; /* jmp . */
        p[1] = 0xfe;
        printf("%lx\n", (unsigned long)p);
        fflush(stdout);
        if (!fgets(line, sizeof(line), stdin))
                return 2;
        ((void (*)(void))p)();
        return 0;
}
"""


def perf_map(pid):
    return "/tmp/perf-%d.map" % pid


def raw_profile(path):
    """go tool pprof -raw: samples as (count, pid, [location ids]), locations {id: (mapping id, name)},
    mappings {id: filename}."""
    out = pprof("-raw", path).stdout
    samples, locations, mappings = [], {}, {}
    section = None
    for line in out.split("\n"):
        if line in ("Samples:", "Locations", "Mappings"):
            section = line
            continue
        if section == "Samples:":
            m = re.match(r"^\s+(\d+)\s+\d+: ([\d ]+)$", line)
            if m:
                samples.append([int(m.group(1)), None, [int(x) for x in m.group(2).split()]])
                continue
            m = re.match(r"^\s+pid:\[(\d+)", line)
            if m and samples:
                samples[-1][1] = int(m.group(1))
        elif section == "Locations":
            m = re.match(r"^\s*(\d+): 0x[0-9a-f]+(?: M=(\d+))?(?: (.*) \S*:-?\d+ s=\d+)?", line)
            if m:
                locations[int(m.group(1))] = (int(m.group(2) or 0), (m.group(3) or "").strip())
        elif section == "Mappings":
            m = re.match(r"^(\d+): 0x[0-9a-f]+/0x[0-9a-f]+/0x[0-9a-f]+ (\S+)", line)
            if m:
                mappings[int(m.group(1))] = m.group(2)
    return samples, locations, mappings


def user_leaf(sample, locations, mappings):
    """(mapping filename, function name) of the sample's first user frame."""
    for loc in sample[2]:
        mid, name = locations.get(loc, (0, ""))
        if mappings.get(mid) != "[kernel.kallsyms]":
            return mappings.get(mid, ""), name
    return "", ""


def jit_leaves(prof, pid):
    """[(count, mapping, name)] of pid's samples whose leaf is in anonymous executable memory."""
    samples, locations, mappings = prof
    out = []
    for s in samples:
        if s[1] != pid:
            continue
        mapping, name = user_leaf(s, locations, mappings)
        if mapping == "[anon]" or mapping.startswith("/tmp/perf-"):
            out.append((s[0], mapping, name))
    return out


def metric(text, name, labels=""):
    m = re.search(r"^%s%s (\d+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return int(m.group(1)) if m else -1


def wait_for(cond, timeout):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return True
        time.sleep(0.1)
    return False


def map_has_path(path, needle):
    try:
        with open(path, errors="replace") as f:
            return needle in f.read()
    except OSError:
        return False


def map_has(pid, needle):
    return map_has_path(perf_map(pid), needle)


def locations_name(prof, loc):
    """(mapping filename, function name) of a location."""
    _, locations, mappings = prof
    mid, name = locations.get(loc, (0, ""))
    return mappings.get(mid, ""), name


def stop_java(java):
    """SIGTERM: the JVM's own shutdown removes its attach socket (/tmp/.java_pidPID, made by jcmd)
    and /tmp/hsperfdata_USER/PID; SIGKILL would leave them."""
    if java.poll() is None:
        java.terminate()
        try:
            java.wait(timeout=20)
        except subprocess.TimeoutExpired:
            java.kill()
            java.wait()


def main():
    require_bpf()
    if not shutil.which("node"):
        skip("node (Debian's nodejs) is not installed")
    if not (shutil.which("java") and shutil.which("javac") and shutil.which("jcmd")):
        skip("java, javac, jcmd (openjdk-17-jdk-headless) are not installed")
    if not shutil.which("setpriv"):
        skip("setpriv (util-linux) is not installed")

    # Every JVM (javac, jcmd, java) makes /tmp/hsperfdata_USER and leaves it, empty, at exit.
    had_hsperfdata = os.path.exists("/tmp/hsperfdata_root")
    work = tmpdir()
    os.chmod(work, 0o755)
    js = os.path.join(work, "hot.js")
    with open(js, "w") as f:
        f.write(HOT_JS)
    with open(os.path.join(work, "Hot.java"), "w") as f:
        f.write(HOT_JAVA)
    subprocess.run(["javac", "-d", work, os.path.join(work, "Hot.java")], check=True, timeout=120)
    victim = cc(VICTIM, os.path.join(work, "victim"))
    os.chmod(victim, 0o755)

    procs, pids, strays = [], [], []
    java = None
    try:
        # --no-v8-frames: node's JavaScript frames are named from its perf map here, not by the
        # V8 walk, which wins where it runs (tests/test-v8-stacks.py).
        with Daemon("--frequency", "99", "--labels", "pid", "--no-v8-frames") as d:
            # -- node and the JVM, profiled together in one window. In the test's own folder: node
            # --perf-basic-prof also writes V8 logs (isolate-*-v8.log) where it runs.
            node = subprocess.Popen(["node", "--perf-basic-prof", js, "30"], stdout=subprocess.DEVNULL, cwd=work)
            java = subprocess.Popen(["java", "-XX:+PreserveFramePointer", "-cp", work, "Hot", "30"],
                                    stdout=subprocess.DEVNULL, cwd=work)
            procs += [node, java]
            pids += [node.pid, java.pid]
            py = py_host = None
            if os.path.exists(os.path.join(TRIXIE, ".profd-root-stamp")) and \
                    os.path.exists(os.path.join(TRIXIE, "usr/bin/python3.13")):
                script = os.path.join(work, "hot.py")
                with open(script, "w") as f:
                    f.write(HOT_PY)
                py = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--pid", "--fork",
                                       "--kill-child", "sh", "-c", PY_IN_ROOT, TRIXIE, script])
                procs.append(py)
                wait_for(lambda: os.path.exists("/proc/%d/task/%d/children" % (py.pid, py.pid)) and
                         open("/proc/%d/task/%d/children" % (py.pid, py.pid)).read().strip(), 10)
                with open("/proc/%d/task/%d/children" % (py.pid, py.pid)) as f:
                    py_host = int(f.read().split()[0])
                strays.append(py_host)
                check(wait_for(lambda: map_has_path("/proc/%d/root/tmp/perf-1.map" % py_host, "hot_python_fn"),
                               20), "python -X perf writes /tmp/perf-1.map in its root")
                # Its frames reach the trampolines once the interpreter's unwind table is built.
                unwind_ready(d, py_host, "/usr/bin/python3.13", "python3.13")
            else:
                log("=" * 70 + "\nSKIP (part): no cached Debian trixie root at %s for python3.13 -X perf "
                    "(python3 tests/lib/debianroot.py trixie builds it)\n" % TRIXIE + "=" * 70)
            # The hot function is optimized within a second or two of spinning.
            check(wait_for(lambda: map_has(node.pid, "hot"), 20),
                  "node writes %s with the hot function" % perf_map(node.pid))
            time.sleep(2)  # JVM warm-up: hotLoop compiled by C2
            r = subprocess.run(["jcmd", str(java.pid), "Compiler.perfmap"], capture_output=True, text=True,
                               timeout=60)
            check(r.returncode == 0 and map_has(java.pid, "Hot.hotLoop"),
                  "jcmd Compiler.perfmap writes %s with Hot.hotLoop (%s)" % (perf_map(java.pid),
                                                                           r.stdout.strip()[-200:]))
            # A third process, node again, exits before the window ends: its JIT frames are named
            # from what profd read while it ran.
            result = {}
            req = threading.Thread(target=lambda: result.update(path=fetch_profile(d, WINDOW_S + 1)))
            req.start()
            short = subprocess.Popen(["node", "--perf-basic-prof", js, "30"], stdout=subprocess.DEVNULL, cwd=work)
            procs.append(short)
            pids.append(short.pid)
            check(wait_for(lambda: map_has(short.pid, "hot"), 10),
                  "short-lived node writes %s with the hot function" % perf_map(short.pid))
            time.sleep(3)
            short.kill()
            short.wait()
            check(req.is_alive(), "short-lived node exited before the profile was made")
            req.join()
            prof = raw_profile(result["path"])
            if py:
                py_frames = [(c, [locations_name(prof, l) for l in locs])
                             for c, pid, locs in prof[0] if pid == py_host]
                py_total = sum(c for c, _ in py_frames)
                py_named = sum(c for c, names in py_frames
                               if any(re.match(r"^py::hot_python_fn:/tmp/hot\.py$", n) for _, n in names))
                py_maps = {m for _, names in py_frames for m, n in names if n.startswith("py::")}
                log("python -X perf: %d samples, %d through py::hot_python_fn; mappings %s; top: %s"
                    % (py_total, py_named, sorted(py_maps), sorted(py_frames, reverse=True)[:2]))
                check(py_named >= 10 and py_named >= 0.5 * py_total,
                      "python -X perf in a container: py::hot_python_fn named in most samples (%d of %d)"
                      % (py_named, py_total))
                check(py_maps == {"/tmp/perf-1.map"}, "python -X perf: named from its own /tmp/perf-1.map")

            jit = jit_leaves(prof, node.pid)
            total = sum(c for c, _, _ in jit)
            named = sum(c for c, _, n in jit if n and not n.startswith("[unknown]"))
            log("node: %d samples with the leaf in JIT memory, %d named; top: %s"
                % (total, named, sorted(jit, reverse=True)[:5]))
            check(total >= 20, "node: samples in JIT memory (%d) >= 20" % total)
            check(total > 0 and named >= 0.8 * total,
                  "node: >= 80%% of the samples in JIT memory named (%d of %d)" % (named, total))
            hot = [(c, m, n) for c, m, n in jit if re.match(r"^(LazyCompile|JS):[*~^+]?hot\b", n)]
            check(hot, "node: the hot JS function is named (JS:*hot or LazyCompile:*hot)")
            check(all(m == perf_map(node.pid) for _, m, _ in hot),
                  "node: its mapping is the perf map file %s (%s)" % (perf_map(node.pid),
                                                                       sorted({m for _, m, _ in hot})))

            jjit = jit_leaves(prof, java.pid)
            jtotal = sum(c for c, _, _ in jjit)
            jnamed = sum(c for c, _, n in jjit if n and not n.startswith("[unknown]"))
            log("java: %d samples with the leaf in JIT memory, %d named; top: %s"
                % (jtotal, jnamed, sorted(jjit, reverse=True)[:5]))
            # Compiled code of a HotSpot JVM is walked and named by profd itself (bpf/hotspot.bpf.h),
            # which wins over the perf map: such frames have no mapping. The map names the rest.
            jwalk = [(s[0], user_leaf(s, prof[1], prof[2])) for s in prof[0] if s[1] == java.pid]
            jwalk = [(c, n) for c, (m, n) in jwalk if m == "" and n.startswith("Hot.")]
            log("java: %d samples with a leaf Java frame of profd's HotSpot walk: %s"
                % (sum(c for c, _ in jwalk), sorted(jwalk, reverse=True)[:3]))
            check(any("Hot.hotLoop" in n for _, _, n in jjit) or any(n == "Hot.hotLoop" for _, n in jwalk),
                  "java: the hot method Hot.hotLoop is named (by the perf map or by the HotSpot walk)")

            sjit = jit_leaves(prof, short.pid)
            if not sjit:
                leaves = {}
                for s in prof[0]:
                    if s[1] == short.pid:
                        k = user_leaf(s, prof[1], prof[2])
                        leaves[k] = leaves.get(k, 0) + s[0]
                log("exited node: leaves %s" % sorted(leaves.items(), key=lambda x: -x[1])[:8])
            stotal = sum(c for c, _, _ in sjit)
            snamed = sum(c for c, _, n in sjit if n and not n.startswith("[unknown]"))
            log("exited node: %d samples with the leaf in JIT memory, %d named" % (stotal, snamed))
            check(stotal >= 10 and snamed >= 0.8 * stotal,
                  "exited node: >= 80%% of its samples in JIT memory named after it exited (%d of %d)"
                  % (snamed, stotal))

            node.kill()
            node.wait()
            stop_java(java)

            # -- a process in its own pid namespace: its map is /tmp/perf-NSPID.map, NSPID the pid
            # it sees (1 here), not ours.
            ns = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", victim], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
            procs.append(ns)
            ns_addr = int(ns.stdout.readline(), 16)
            ns_host = ns_inner = None
            with open("/proc/%d/task/%d/children" % (ns.pid, ns.pid)) as f:
                ns_host = int(f.read().split()[0])
            with open("/proc/%d/status" % ns_host) as f:
                for line in f:
                    if line.startswith("NSpid:"):
                        ns_inner = int(line.split()[-1])
            pids += [ns_host, ns_inner]
            strays.append(ns_host)
            check(ns_inner != ns_host, "pid namespace: pid %d is %d inside" % (ns_host, ns_inner))
            with open(perf_map(ns_inner), "wb") as f:
                f.write(b"%x 2 nspid_victim_fn\n" % ns_addr)
            with open(perf_map(ns_host), "wb") as f:
                f.write(b"%x 2 host_pid_fn\n" % ns_addr)
            ns.stdin.write("go\n")
            ns.stdin.flush()

            # -- a process in its own root and pid namespace (a container): its map is in its root
            # (ROOT/tmp/perf-1.map), not in ours (where the process above has its /tmp/perf-1.map).
            croot = tmpdir()
            os.chmod(croot, 0o755)
            os.mkdir(os.path.join(croot, "tmp"))
            cc(VICTIM, os.path.join(croot, "victim"), flags=("-static",))
            ct = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "--root=" + croot, "/victim"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            procs.append(ct)
            ct_addr = int(ct.stdout.readline(), 16)
            with open("/proc/%d/task/%d/children" % (ct.pid, ct.pid)) as f:
                ct_host = int(f.read().split()[0])
            pids.append(ct_host)
            strays.append(ct_host)
            with open(os.path.join(croot, "tmp", "perf-1.map"), "wb") as f:
                f.write(b"%x 2 container_victim_fn\n" % ct_addr)
            with open(perf_map(ct_host), "wb") as f:
                f.write(b"%x 2 host_pid_fn\n" % ct_addr)
            ct.stdin.write("go\n")
            ct.stdin.flush()

            # -- hostile perf maps of processes of nobody.
            victims = {}
            for case in ("fifo", "symlink", "huge", "garbage", "other_owner"):
                v = subprocess.Popen([*AS_NOBODY, victim], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
                procs.append(v)
                pids.append(v.pid)
                addr = int(v.stdout.readline(), 16)
                path = perf_map(v.pid)
                if case == "fifo":
                    os.mkfifo(path)
                    os.chown(path, NOBODY, NOBODY)
                elif case == "symlink":
                    os.symlink("/etc/shadow", path)
                    os.lchown(path, NOBODY, NOBODY)
                elif case == "huge":
                    with open(path, "wb") as f:
                        f.truncate(4 << 30)
                    os.chown(path, NOBODY, NOBODY)
                elif case == "garbage":
                    with open(path, "wb") as f:
                        f.write(b"zz 10 not_hex\n1 2\n%x 0 size_zero\n-5 3 negative\n%x 2\n\x00\xff\x01\n"
                                % (addr, addr))
                        f.write(b"A" * 10000 + b"\n")
                        f.write(b"%x 2 garbage_victim_fn\n" % addr)
                        f.write(b"ff 1 trailing line without a newline")
                    os.chown(path, NOBODY, NOBODY)
                else:
                    with open(path, "wb") as f:
                        f.write(b"%x 2 forged_name\n" % addr)
                    os.chown(path, 1234, 1234)
                v.stdin.write("go\n")
                v.stdin.flush()
                victims[case] = v.pid
            t0 = time.monotonic()
            prof = raw_profile(fetch_profile(d, 3))
            elapsed = time.monotonic() - t0
            check(elapsed < 3 + 30, "profile over hostile perf maps answered in %.1f s" % elapsed)
            st, _, _ = d.get("/healthz", timeout=10)
            check(st == 200, "/healthz answers after hostile perf maps")
            names = {}
            for case, pid in victims.items():
                leaves = jit_leaves(prof, pid)
                names[case] = {n for _, _, n in leaves}
                log("%s: %s" % (case, sorted(names[case])))
                check(leaves, "%s: the victim was sampled in its anonymous executable memory" % case)
            ns_names = {(m, n) for _, m, n in jit_leaves(prof, ns_host)}
            log("pid namespace: %s" % sorted(ns_names))
            check(ns_names == {(perf_map(ns_inner), "nspid_victim_fn")},
                  "pid namespace: named from %s, the pid the process sees" % perf_map(ns_inner))
            ct_names = {(m, n) for _, m, n in jit_leaves(prof, ct_host)}
            log("container: %s" % sorted(ct_names))
            check(ct_names == {("/tmp/perf-1.map", "container_victim_fn")},
                  "container: named from the map in its own root")
            check(names["garbage"] == {"garbage_victim_fn"},
                  "garbage: the one valid line names the frame among malformed ones")
            for case in ("fifo", "symlink", "huge", "other_owner"):
                check(all(n.startswith("[unknown] [anon]") for n in names[case]),
                      "%s: nothing named from a refused perf map" % case)
            _, _, body = d.get("/metrics", timeout=10)
            text = body.decode()
            for line in text.split("\n"):
                if line.startswith("profd_perf_map_"):
                    log("  " + line)
            check(metric(text, "profd_perf_map_errors_total", '{reason="not_regular"}') >= 1,
                  "metrics: the FIFO counted as not_regular")
            check(metric(text, "profd_perf_map_errors_total", '{reason="symlink"}') >= 1,
                  "metrics: the symlink counted")
            check(metric(text, "profd_perf_map_errors_total", '{reason="not_owner"}') >= 1,
                  "metrics: another user's file counted as not_owner")
            # zz.., "1 2", size 0, -5, no name, binary, 10000 A's, and the huge file's first line.
            check(metric(text, "profd_perf_map_lines_malformed_total") >= 8,
                  "metrics: malformed lines counted")
            check(metric(text, "profd_perf_map_entries") >= 1, "metrics: entries loaded")
            check(metric(text, "profd_perf_map_skipped_bytes_total") >= (4 << 30) - (1 << 20),
                  "metrics: the sparse 4 GiB file skipped after one step, not read")
            check(0 < metric(text, "profd_perf_map_read_bytes_total") < 64 << 20, "metrics: bytes read bounded")
            check(metric(text, "profd_perf_map_reads_total", '{kind="full"}') >= 3, "metrics: files read")
            check(metric(text, "profd_perf_map_entries_dropped_total", '{reason="process_cap"}') >= 0,
                  "metrics: entries dropped by cap are reported")
            check(metric(text, "profd_symbolizer_lookups_total", '{space="user",result="perf_map"}') >= 1,
                  "metrics: user frames named from perf maps")
            rss = 0
            with open("/proc/%d/status" % d.proc.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1])
            log("profd RSS %d kB" % rss)
            check(metric(text, "profd_perf_map_bytes") < 64 << 20, "perf map memory stays bounded")
    finally:
        if java:
            stop_java(java)
            for leftover in ("/tmp/.java_pid%d" % java.pid, "/tmp/hsperfdata_root/%d" % java.pid):
                try:
                    os.unlink(leftover)
                except FileNotFoundError:
                    pass
        if not had_hsperfdata:
            try:
                os.rmdir("/tmp/hsperfdata_root")
            except OSError:
                pass
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in pids:
            try:
                os.unlink(perf_map(pid))
            except FileNotFoundError:
                pass
    finish()


if __name__ == "__main__":
    main()
