#!/usr/bin/env python3
"""Debug files of stripped binaries fetched from debuginfod, through the whole daemon (real BPF
samples, real HTTP, Debian's own debuginfod server, go tool pprof):

- a stripped C program whose debug file (objcopy --only-keep-debug) exists only on a debuginfod
  server the test starts on 127.0.0.1: after the fetch its hot functions are named with file:line
  and its inlined frame, in go tool pprof, with no local debug file anywhere; a program whose debug
  file was made smaller with dwz (as Debian's are) gets its inline frame from the dwz file, which
  profd fetches next by the build ID the debug file names; the fetches are counted,
  the cache directory holds it, and a profd started again with the server gone still names them
  from that directory; an older file over the cache's size bound is evicted at start;
- profd as an unprivileged user with the unit's capabilities and its own cache directory (as
  under DynamicUser= and CacheDirectory=): the fetched files are its user's, and used, the dwz
  file too;
- a slow server (6 s): the profile made meanwhile comes at once with the program unnamed, a later
  one names it;
- a server that hangs (never answers), one that answers with another program's debug file
  (another build ID), one that answers garbage: profiles and /metrics keep answering at once while
  they do, nothing of the program is named, each case is counted by result, the wrong files are
  removed from the cache, the build ID is not asked again (one request per server), and the event
  loop is never held for as long as a fetch; profd exits at once on SIGTERM while a fetch hangs.

The hostile servers are small http.server instances in this process."""
import http.server
import os
import re
import shutil
import signal
import socketserver
import subprocess
import threading
import time

from profdtest import (BUILD, PROFD, Daemon, cc, check, fetch_profile, finish, free_port, http_get, log, pprof,
                       require_bpf, skip, tmpdir, traces, unwind_ready)

C_SRC = r"""
#include <stdlib.h>
#include <time.h>
volatile unsigned long sink;
/* Most of the time is spent here, inlined into the leaf. */
static inline __attribute__((always_inline)) unsigned long dbgd_inlined_step(unsigned long i)
{
        unsigned long x = i;
        for (int k = 0; k < 64; k++)
                x = x * 2654435761u + (x >> 7);
        return x;
}
__attribute__((noinline)) void dbgd_hot_leaf(int n)
{
        for (int i = 0; i < n; i++)
                sink += dbgd_inlined_step((unsigned long)i);
}
__attribute__((noinline)) void dbgd_hot_mid(int n)
{
        dbgd_hot_leaf(n);
        sink++;
}
int main(int argc, char **argv)
{
        struct timespec ts;
        double end;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        end = ts.tv_sec + ts.tv_nsec / 1e9 + atof(argv[1]);
        do {
                dbgd_hot_mid(2000);
                clock_gettime(CLOCK_MONOTONIC, &ts);
        } while (ts.tv_sec + ts.tv_nsec / 1e9 < end);
        return 0;
}
"""

# Debian's debug files are made smaller with dwz: DWARF two programs share (here the inline function
# and its struct) moves to one file that each debug file names by build ID (.gnu_debugaltlink).
COMMON_H = r"""
struct dwz_state { unsigned long a, b, c; double d[4]; const char *name; };
static inline __attribute__((always_inline)) unsigned long dwz_shared_mix(struct dwz_state *s, unsigned long x)
{
        for (int k = 0; k < 64; k++)
                x = x * 2654435761u + (x >> 7) + s->a;
        return x;
}
"""

DWZ_SRC = r"""
#include <stdlib.h>
#include <time.h>
#include "dwz-common.h"
volatile unsigned long sink;
struct dwz_state state = {.a = 1};
__attribute__((noinline)) void dwz_hot_leaf(int n)
{
        for (int i = 0; i < n; i++)
                sink += dwz_shared_mix(&state, (unsigned long)i);
}
int main(int argc, char **argv)
{
        struct timespec ts;
        double end;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        end = ts.tv_sec + ts.tv_nsec / 1e9 + atof(argv[1]);
        do {
                dwz_hot_leaf(2000);
                clock_gettime(CLOCK_MONOTONIC, &ts);
        } while (ts.tv_sec + ts.tv_nsec / 1e9 < end);
        return 0;
}
"""

DWZ_OTHER_SRC = r"""
#include "dwz-common.h"
struct dwz_state other = {.a = 2};
int main(int argc, char **argv) { return (int)dwz_shared_mix(&other, (unsigned long)argc); }
"""

OTHER_SRC = r"""
int other_function(int x) { return x * 3; }
int main(int argc, char **argv) { return other_function(argc); }
"""


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else None


def make_dwz(work, served):
    """A stripped program whose debug file refers to a dwz file; both go to served."""
    with open(os.path.join(work, "dwz-common.h"), "w") as f:
        f.write(COMMON_H)
    prog = cc(DWZ_SRC, os.path.join(work, "dwz-prog"), ["-O2", "-g", "-I", work])
    other = cc(DWZ_OTHER_SRC, os.path.join(work, "dwz-other"), ["-O2", "-g", "-I", work])
    common = os.path.join(served, "dwz-common.debug")
    subprocess.run(["dwz", "-m", common, "-M", "/usr/lib/debug/.dwz/profd-test-dwz-common.debug", prog, other],
                   check=True)
    subprocess.run(["objcopy", "--only-keep-debug", prog, os.path.join(served, "dwz-prog.debug")], check=True)
    subprocess.run(["strip", "--strip-all", prog], check=True)
    sections = subprocess.run(["readelf", "-SW", os.path.join(served, "dwz-prog.debug")], capture_output=True,
                              text=True).stdout
    check(".gnu_debugaltlink" in sections and build_id(common) is not None,
          "dwz-prog's debug file names a dwz file (%s)" % build_id(common))
    return prog


def make_stripped(work, src, name):
    """A program compiled with DWARF, its debug file, and the program stripped of both."""
    prog = cc(src, os.path.join(work, name), ["-O2", "-g", "-fno-omit-frame-pointer"])
    debug = os.path.join(work, name + ".debug")
    subprocess.run(["objcopy", "--only-keep-debug", prog, debug], check=True)
    subprocess.run(["strip", "--strip-all", prog], check=True)
    sections = subprocess.run(["readelf", "-SW", prog], capture_output=True, text=True).stdout
    check(".symtab" not in sections and ".debug_info" not in sections and build_id(prog) == build_id(debug),
          "%s is stripped and keeps the build ID of its debug file" % name)
    return prog, debug


class Hostile(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def hostile_server(kind, body=b"", only=None, delay=0):
    """A server on 127.0.0.1 that hangs, or answers 200 with body after delay seconds (404 for
    paths other than only, when given); counts requests by path."""
    requests = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            requests[self.path] = requests.get(self.path, 0) + 1
            # Other build IDs of the host's stripped files: "not found" at once, so they do not
            # keep the program's build ID waiting behind them for a fetch thread.
            if only and self.path != only:
                self.send_error(404)
                return
            if kind == "hang":
                time.sleep(3600)  # daemon thread: gone with the test
                return
            time.sleep(delay)
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = Hostile(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, requests


def metrics(d):
    st, _, body = d.get("/metrics", timeout=10)
    return body.decode() if st == 200 else ""


def metric(text, name, labels=""):
    m = re.search(r"^%s%s (\d+)" % (re.escape(name), re.escape("{%s}" % labels if labels else "")), text, re.M)
    return int(m.group(1)) if m else None


def fetches(d, result):
    return metric(metrics(d), "profd_debuginfod_fetches_total", 'result="%s"' % result) or 0


def wait_for(cond, timeout):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if cond():
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def prog_frames(path, pid):
    """The frames of pid's samples, "name file:line" (pprof -lines), leaf first, per trace."""
    return [t.frames for t in traces(path, lines=True) if t.labels.get("pid") == [str(pid)]]


PROFD_UID = 61234  # stands in for the unit's DynamicUser


def unit_capabilities():
    with open(os.path.join(BUILD, "systemd", "profd.service")) as f:
        return re.search(r"^AmbientCapabilities=(.*)$", f.read(), re.M).group(1).split()


def as_dynamic_user(work, url, dwz_prog):
    """profd as an unprivileged user holding the unit's capabilities, its cache directory its own
    (CacheDirectory=): the fetched files, the dwz file too, are that user's, and used."""
    if not shutil.which("setpriv"):
        log("(setpriv not installed: the unprivileged run is not checked)")
        return
    caps = ",".join("+" + c.lower().removeprefix("cap_") for c in unit_capabilities())
    capset = "-all," + caps
    prefix = ["setpriv", "--reuid=%d" % PROFD_UID, "--regid=%d" % PROFD_UID, "--clear-groups",
              "--inh-caps=" + capset, "--ambient-caps=" + capset, "--bounding-set=" + capset]
    d = tmpdir()
    os.chmod(d, 0o755)
    binary = os.path.join(d, "profd")
    shutil.copy(PROFD, binary)
    os.chmod(binary, 0o755)
    cache = os.path.join(d, "cache")
    os.mkdir(cache, 0o700)
    os.chown(cache, PROFD_UID, PROFD_UID)
    with Daemon("--frequency", "99", "--debuginfod-urls", url, "--debuginfod-cache", cache, prefix=prefix,
                binary=binary) as dm:
        q = subprocess.Popen([dwz_prog, "60"])
        try:
            unwind_ready(dm, q.pid, "dwz-prog", "dwz-prog (unprivileged profd)")
            timed_profile(dm, 1, "unprivileged")
            check(wait_for(lambda: fetches(dm, "ok") == 2, 30), "unprivileged: dwz-prog's 2 files were fetched")
            path = timed_profile(dm, 2, "unprivileged")
        finally:
            q.kill()
            q.wait()
    owners = {os.stat(os.path.join(cache, n, "debuginfo")).st_uid for n in os.listdir(cache)
              if os.path.isfile(os.path.join(cache, n, "debuginfo"))}
    frames = ["\n".join(f) for f in prog_frames(path, q.pid)]
    check(owners == {PROFD_UID} and any(f.startswith("dwz_shared_mix ") for f in frames),
          "unprivileged: the fetched files are profd's user's (%s) and the dwz file's inline frame is named" % owners)


def start_debuginfod(work, srcdir):
    port = free_port()
    db = os.path.join(work, "debuginfod.sqlite")
    logf = open(os.path.join(work, "debuginfod.log"), "w")
    # Listens on every address (0.188 has no option to choose); the test asks on 127.0.0.1.
    p = subprocess.Popen(["debuginfod", "-d", db, "-p", str(port), "-F", "-t", "1", "-g", "0", srcdir],
                         stdout=logf, stderr=subprocess.STDOUT)
    return p, port


def timed_profile(d, seconds, what):
    t0 = time.monotonic()
    path = fetch_profile(d, seconds, "&labels=pid")
    took = time.monotonic() - t0
    check(took < seconds + 8, "%s: a %d s profile answered in %.1f s" % (what, seconds, took))
    return path


def main():
    require_bpf()
    if not shutil.which("debuginfod"):
        skip("debuginfod (Debian package debuginfod) is not installed")
    if not shutil.which("go"):
        skip("go (golang-go) is not installed")
    if not shutil.which("dwz"):
        skip("dwz is not installed")
    work = tmpdir()
    prog, debug = make_stripped(work, C_SRC, "dbgd-prog")
    other, other_debug = make_stripped(work, OTHER_SRC, "dbgd-other")
    bid = build_id(prog)
    # The only copy of the debug file is the server's: nothing local names the program.
    served = os.path.join(work, "served")
    os.makedirs(served)
    shutil.move(debug, os.path.join(served, "dbgd-prog.debug"))
    dwz_prog = make_dwz(work, served)
    want_path = "/buildid/%s/debuginfo" % bid

    # --- Debian's debuginfod, serving the debug file ---
    server, port = start_debuginfod(work, served)
    url = "http://127.0.0.1:%d" % port
    try:
        ok = wait_for(lambda: http_get(url + want_path, timeout=5)[0] == 200, 60)
        check(ok, "debuginfod serves the debug file by build ID %s" % bid)
        cache = os.path.join(work, "cache")
        with Daemon("--frequency", "99", "--debuginfod-urls", url, "--debuginfod-cache", cache) as d:
            p = subprocess.Popen([prog, "60"])
            q = subprocess.Popen([dwz_prog, "60"])
            try:
                unwind_ready(d, p.pid, "dbgd-prog", "dbgd-prog")
                unwind_ready(d, q.pid, "dwz-prog", "dwz-prog")
                timed_profile(d, 2, "before the fetch")
                # dbgd-prog's, dwz-prog's, then the dwz file dwz-prog's debug file names.
                check(wait_for(lambda: fetches(d, "ok") == 3, 30), "the 3 debug files were fetched (result ok)")
                path = timed_profile(d, 3, "after the fetch")
                text = metrics(d)
            finally:
                for r in (p, q):
                    r.kill()
                    r.wait()
        frames = prog_frames(path, p.pid)
        log("a trace of the program: %s" % (frames[0] if frames else None))
        joined = ["\n".join(f) for f in frames]
        check(any(re.search(r"^dbgd_inlined_step \S*dbgd-prog\.c:\d+ \(inline\)\n"
                            r"dbgd_hot_leaf \S*dbgd-prog\.c:\d+\ndbgd_hot_mid \S*dbgd-prog\.c:\d+\n", j)
                  for j in joined),
              "the stripped program's frames: inlined step, leaf, mid, with file:line")
        dwz_frames = ["\n".join(f) for f in prog_frames(path, q.pid)]
        log("a trace of dwz-prog: %s" % (dwz_frames[0] if dwz_frames else None))
        check(any(re.search(r"^dwz_shared_mix \S*dwz-common\.h:\d+ \(inline\)\ndwz_hot_leaf \S*dwz-prog\.c:\d+\n"
                            r"main \S*dwz-prog\.c:\d+\n", j) for j in dwz_frames),
              "dwz-prog's frames: the inline function from the dwz file, leaf, main, with file:line")
        check(metric(text, "profd_debuginfod_fetched_bytes_total") == sum(
              os.path.getsize(os.path.join(served, n)) for n in os.listdir(served)), "fetched bytes counted")
        check(os.path.isfile(os.path.join(cache, bid, "debuginfo")), "the file is in the cache directory")
        check(metric(text, "profd_debuginfod_cache_files") == 3, "cache files counted")
        # go tool pprof as a user runs it on the saved profile: nothing at the program's path could
        # name anything (stripped), so the names are profd's.
        top = pprof("-top", path, symbolize=True).stdout
        check("dbgd_hot_leaf" in top and "dbgd_inlined_step" in top,
              "go tool pprof -top names the stripped program's functions with no local debug file")
        as_dynamic_user(work, url, dwz_prog)
    finally:
        server.terminate()
        server.wait()

    # --- restart with the server gone: names from the cache; an older file over the bound goes ---
    old = os.path.join(cache, "ab" * 20)
    os.makedirs(old)
    with open(os.path.join(old, "debuginfo"), "wb") as f:
        f.write(b"\0" * (2 << 20))
    time.sleep(0.05)
    for name in os.listdir(cache):  # the fetched files: a newer ctime than the filler
        if name != os.path.basename(old) and os.path.isfile(os.path.join(cache, name, "debuginfo")):
            os.utime(os.path.join(cache, name, "debuginfo"))
    with Daemon("--frequency", "99", "--debuginfod-urls", url, "--debuginfod-cache", cache,
                "--debuginfod-cache-size", "1M") as d:
        p = subprocess.Popen([prog, "30"])
        try:
            unwind_ready(d, p.pid, "dbgd-prog", "dbgd-prog")
            path = timed_profile(d, 3, "restarted")
            text = metrics(d)
        finally:
            p.kill()
            p.wait()
    check(not os.path.exists(os.path.join(old, "debuginfo")) and metric(text, "profd_debuginfod_cache_evicted_total") == 1,
          "the older file over the 1M bound was evicted at start")
    log("\n".join(l for l in text.split("\n") if l.startswith("profd_debuginfod")))
    check(any("dbgd_hot_leaf" in "\n".join(f) for f in prog_frames(path, p.pid)) and
          metric(text, "profd_debuginfod_fetches_total", 'result="ok"') == 0,
          "restarted without the server: named from the cache directory, nothing fetched")

    # --- hostile servers ---
    with open(other_debug, "rb") as f:
        other_bytes = f.read()
    cases = [("hang", b"", "timeout"), ("lying", other_bytes, "wrong_build_id"),
             ("garbage", os.urandom(70000), "not_elf")]
    for kind, body, result in cases:
        srv, requests = hostile_server("hang" if kind == "hang" else "answer", body, only=want_path)
        cache = os.path.join(work, "cache-" + kind)
        try:
            with Daemon("--frequency", "99", "--debuginfod-urls", "http://127.0.0.1:%d" % srv.server_address[1],
                        "--debuginfod-cache", cache, "--debuginfod-timeout", "4") as d:
                p = subprocess.Popen([prog, "60"])
                try:
                    unwind_ready(d, p.pid, "dbgd-prog", "dbgd-prog")
                    t0 = time.monotonic()
                    paths = [timed_profile(d, 2, kind)]
                    check(wait_for(lambda: requests.get(want_path, 0) >= 1, 20), "%s: the server was asked" % kind)
                    t1 = time.monotonic()
                    st, _, _ = d.get("/metrics", timeout=10)
                    check(st == 200 and time.monotonic() - t1 < 2, "%s: /metrics answers at once during the fetch"
                          % kind)
                    check(wait_for(lambda: fetches(d, result) == 1, 30), "%s: counted once as %s" % (kind, result))
                    asked = dict(requests)
                    paths.append(timed_profile(d, 2, kind))
                    paths.append(timed_profile(d, 2, kind))
                    text = metrics(d)
                finally:
                    p.kill()
                    p.wait()
            log("%s: requests %s, %.1f s" % (kind, requests, time.monotonic() - t0))
            # A fetch in the loop would have held it for the whole fetch (4 s when the server hangs).
            lag = re.search(r"^profd_event_loop_lag_max_seconds (\S+)$", text, re.M)
            check(lag is not None and float(lag.group(1)) < 3, "%s: the event loop was never held 3 s (longest %s s)"
                  % (kind, lag.group(1) if lag else None))
            # The whole host is profiled: other stripped files are asked for too.
            check(requests.get(want_path) == asked.get(want_path) == 1,
                  "%s: the program's build ID was asked once and not again" % kind)
            check(metric(text, "profd_debuginfod_fetches_total", 'result="ok"') == 0,
                  "%s: nothing fetched ok" % kind)
            named = [f for path in paths for t in prog_frames(path, p.pid) for f in t
                     if "dbgd_" in f or "other_function" in f]
            check(not named and all(prog_frames(path, p.pid) for path in paths),
                  "%s: profiles keep flowing, nothing of the program is named (%s)" % (kind, named[:3]))
            check(not os.path.exists(os.path.join(cache, bid, "debuginfo")) or
                  os.path.getsize(os.path.join(cache, bid, "debuginfo")) == 0,
                  "%s: no file left in the cache for the build ID" % kind)
        finally:
            srv.shutdown()
            srv.server_close()

    # --- a slow server: profiles do not wait for it, a later one has the names ---
    with open(os.path.join(served, "dbgd-prog.debug"), "rb") as f:
        srv, requests = hostile_server("answer", f.read(), only=want_path, delay=6)
    try:
        with Daemon("--frequency", "99", "--debuginfod-urls", "http://127.0.0.1:%d" % srv.server_address[1],
                    "--debuginfod-cache", os.path.join(work, "cache-slow")) as d:
            p = subprocess.Popen([prog, "60"])
            try:
                unwind_ready(d, p.pid, "dbgd-prog", "dbgd-prog")
                first = timed_profile(d, 2, "slow")
                wait_for(lambda: requests.get(want_path, 0) >= 1, 5)  # sent while the profile was made
                asked = requests.get(want_path, 0)
                check(wait_for(lambda: fetches(d, "ok") == 1, 30), "slow: the debug file arrived (result ok)")
                later = timed_profile(d, 2, "slow, after the fetch")
            finally:
                p.kill()
                p.wait()
        first_named = [f for t in prog_frames(first, p.pid) for f in t if "dbgd_" in f]
        check(asked == 1 and prog_frames(first, p.pid) and not first_named,
              "slow: the profile made while the server took 6 s came at once, the program unnamed")
        check(any("dbgd_hot_leaf" in f for t in prog_frames(later, p.pid) for f in t),
              "slow: a later profile names the program")
    finally:
        srv.shutdown()
        srv.server_close()

    # --- a fetch that hangs does not hold profd's exit either ---
    srv, requests = hostile_server("hang", only=want_path)
    try:
        with Daemon("--frequency", "99", "--debuginfod-urls", "http://127.0.0.1:%d" % srv.server_address[1],
                    "--debuginfod-cache", os.path.join(work, "cache-exit"), "--debuginfod-timeout", "600") as d:
            p = subprocess.Popen([prog, "60"])
            try:
                unwind_ready(d, p.pid, "dbgd-prog", "dbgd-prog")
                # The build ID is asked for when a profile first names the program's frames.
                for _ in range(5):
                    timed_profile(d, 1, "exit")
                    if wait_for(lambda: requests.get(want_path, 0) >= 1, 3):
                        break
                check(requests.get(want_path, 0) >= 1, "exit: the server was asked")
            finally:
                p.kill()
                p.wait()
            t0 = time.monotonic()
            d.proc.send_signal(signal.SIGTERM)
            try:
                d.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            took = time.monotonic() - t0
        check(d.proc.returncode == 0 and took < 5,
              "profd exits within 5 s of SIGTERM while a fetch hangs (%.1f s, status %s)" % (took, d.proc.returncode))
    finally:
        srv.shutdown()
        srv.server_close()
    finish()


if __name__ == "__main__":
    main()
