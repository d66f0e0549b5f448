#!/usr/bin/env python3
"""Hostile HTTP clients against the real daemon, over real sockets from several loopback addresses
(127.0.0.0/8 is all loopback), the clients running as an unprivileged user:

- a crowd of idle and half-sent connections: other clients are served at once, one address cannot
  hold more than its per-client limit, the crowd is closed by the request timeout (10 s), and
  everything works afterwards;
- the connection limit filled from one address (per-client limit off) and released at once, or
  timing out together: the listener is watched again and /healthz answers at once (before, it
  stayed dead until restart);
- 8 profile requests for 60 s whose clients leave: their slots are free at once for the next
  request, and /metrics counts the cancellations;
- 1,000 query parameters, 16 KiB and 64 KiB request targets, 2,000 headers: a clear 4xx within 2 s
  (libmicrohttpd 0.9.75 used to answer nothing);
- the liveness check: with the connection limit and the listen queue held by one address, HTTP
  really stops answering everybody; the daemon notices through its own probe and withholds
  WATCHDOG=1 (read from a real NOTIFY_SOCKET) while its loop still runs (STATUS= keeps coming), and
  pings again once HTTP answers."""
import json
import os
import selectors
import socket
import sys
import time

HOSTILE_FLAG = "--hostile-clients"


# ---- the hostile clients: this script again, as an unprivileged user ---------------------------

def hostile_main():
    """Reads one JSON command per line on stdin, answers one JSON line on stdout. Keeps its sockets
    between commands."""
    conns = []  # dicts: sock, src, t (connect time), closed_at (server closed it), answered

    def poll(timeout):
        sel = selectors.DefaultSelector()
        live = [c for c in conns if c["closed_at"] is None and c["sock"] is not None]
        for c in live:
            sel.register(c["sock"], selectors.EVENT_READ, c)
        deadline = time.monotonic() + timeout
        while live:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for key, _ in sel.select(left):
                c = key.data
                try:
                    data = c["sock"].recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    c["answered"] = True
                    continue
                c["closed_at"] = time.monotonic()
                sel.unregister(c["sock"])
                live.remove(c)
        sel.close()
        return live

    def summary():
        by = {}
        for c in conns:
            s = by.setdefault(c["src"], {"open": 0, "closed": 0, "answered": 0})
            s["closed" if c["closed_at"] is not None else "open"] += 1
            s["answered"] += 1 if c["answered"] else 0
        return by

    payloads = {
        "idle": b"",
        "half": b"GET /healthz HTTP/1.1\r\nHost: x\r\nUser-Agent: half-",
        "profile": b"GET /debug/pprof/profile?seconds=60 HTTP/1.1\r\nHost: x\r\n\r\n",
    }
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        reply = {}
        if op == "open":
            pending = []
            failed = 0
            for g in cmd["groups"]:
                for i in range(g["n"]):
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    s.setblocking(False)
                    s.bind((g["src"], 0))
                    err = s.connect_ex(("127.0.0.1", cmd["port"]))
                    if err not in (0, 115):  # EINPROGRESS
                        failed += 1
                        s.close()
                        continue
                    c = {"sock": s, "src": g["src"], "t": time.monotonic(), "closed_at": None,
                         "answered": False, "mode": g["mode"]}
                    conns.append(c)
                    pending.append(c)
            # Connected once writable (the kernel completes the handshake of queued ones too).
            sel = selectors.DefaultSelector()
            for c in pending:
                sel.register(c["sock"], selectors.EVENT_WRITE, c)
            deadline = time.monotonic() + 5
            while pending and time.monotonic() < deadline:
                for key, _ in sel.select(0.5):
                    c = key.data
                    sel.unregister(c["sock"])
                    pending.remove(c)
                    if c["sock"].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        failed += 1
                        c["closed_at"] = time.monotonic()
                        continue
                    data = payloads[c["mode"]]
                    if data:
                        try:
                            c["sock"].send(data)
                        except OSError:
                            pass
            sel.close()
            reply = {"failed": failed + len(pending)}
        elif op == "status":
            poll(cmd.get("wait", 0))
            reply = summary()
        elif op == "wait_closed":
            t0 = time.monotonic()
            live = poll(cmd["timeout"])
            ages = [c["closed_at"] - c["t"] for c in conns if c["closed_at"] is not None]
            reply = {"open": len(live), "elapsed": time.monotonic() - t0,
                     "min_age": min(ages) if ages else None, "max_age": max(ages) if ages else None}
        elif op == "close":
            for c in conns:
                c["sock"].close()
            reply = {"closed": len(conns)}
            conns.clear()
        elif op == "exit":
            break
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__" and sys.argv[1:2] == [HOSTILE_FLAG]:
    # Nothing else of the test here: the unprivileged user cannot use its session directory.
    sys.exit(hostile_main())

# ---- the test -----------------------------------------------------------------------------------

import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402

from profdtest import (Daemon, check, finish, http_get, log, require_bpf, skip,  # noqa: E402
                       tmpdir)

NOBODY = 65534
REQUEST_TIMEOUT_S = 10


class Hostile:
    """The hostile clients, in a child process running as nobody (setpriv)."""

    def __init__(self):
        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        # A copy nobody can read: the source tree may sit where only root can (e.g. /root).
        d = tmpdir()
        os.chmod(d, 0o755)
        script = os.path.join(d, "hostile-clients.py")
        shutil.copy(os.path.abspath(__file__), script)
        os.chmod(script, 0o644)
        cmd = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
               python, script, HOSTILE_FLAG]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     cwd="/", env={"PATH": "/usr/bin:/bin"})

    def __call__(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the hostile clients' process died (exit %s)" % self.proc.poll())
        return json.loads(line)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self(op="close")
            self(op="exit")
        except (OSError, RuntimeError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return False


def raw_get(port, path, src="127.0.0.10", timeout=2.0, head=b""):
    """One GET over a fresh socket from src: (status or None, body bytes, seconds, error)."""
    t0 = time.monotonic()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    data = b""
    try:
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + head + b"\r\n")
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError as e:
        return None, data, time.monotonic() - t0, "%s: %s" % (type(e).__name__, e)
    finally:
        s.close()
    m = re.match(rb"HTTP/1\.[01] (\d{3}) ", data)
    body = data.split(b"\r\n\r\n", 1)[-1]
    return (int(m.group(1)) if m else None), body, time.monotonic() - t0, None


def metrics(d):
    st, _, body = d.get("/metrics", timeout=10)
    if st != 200:
        raise RuntimeError("/metrics: %d" % st)
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def wait_until(what, cond, timeout):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    return None


# ---- (d) oversized queries --------------------------------------------------------------------

def oversized(d):
    many = b"/debug/pprof/profile?" + b"&".join(b"pid=%d" % (i + 1) for i in range(1000))
    cases = [
        ("1,000 query parameters (%d bytes)" % len(many), many, b"", 400, b"too many query parameters"),
        ("a 16 KiB request target", b"/debug/pprof/profile?comm=" + b"a" * 16384, b"", 414, b"too long"),
        ("16 KiB of 4,096 parameters", b"/debug/pprof/profile?" + b"&".join([b"a=b"] * 4096), b"", 414,
         b"too long"),
        ("a 64 KiB request target (beyond libmicrohttpd's buffer)", b"/x?" + b"a" * 65536, b"", 414, None),
        ("2,000 header lines", b"/healthz", b"".join(b"X-H%d: v\r\n" % i for i in range(2000)), 431, None),
    ]
    for what, path, head, want, words in cases:
        st, body, took, err = raw_get(d.port, path, head=head, timeout=5)
        log("%s: %s in %.3f s %r" % (what, st, took, body[:80] if st else err))
        check(st == want and took < 2 and (words is None or words in body),
              "%s: answered %d within 2 s (got %s in %.3f s: %r)" % (what, want, st, took, body[:120] or err))
    # The limit still lets every real query through: 16 values of each repeatable filter.
    q = "&".join(["pid=%d" % (i + 1) for i in range(16)] + ["comm=c%d" % i for i in range(16)] +
                 ["unit=u%d.service" % i for i in range(16)] + ["seconds=1", "labels=comm", "format=folded"])
    st, _, body = d.get("/debug/pprof/profile?" + q, timeout=30)
    check(st == 200, "a query with 51 parameters (16 each of pid, comm, unit) is served (got %d %r)"
          % (st, body[:100]))
    m = metrics(d)
    check(m.get('profd_http_requests_too_large_total{reason="parameters"}') == 1 and
          m.get('profd_http_requests_too_large_total{reason="target_bytes"}') == 2,
          "/metrics counts the oversized requests by reason (%r)"
          % {k: v for k, v in m.items() if "too_large" in k})


# ---- (a)+(b) a crowd of idle and half-sent connections ---------------------------------------

def crowd(d):
    per_client = 16
    # Meanwhile a profile window longer than both the request timeout and libmicrohttpd's own
    # (15 s): a parked request is subject to neither.
    long_window = {}

    def long_profile():
        t = time.monotonic()
        long_window["status"] = d.get("/debug/pprof/profile?seconds=16", timeout=60)[0]
        long_window["took"] = time.monotonic() - t
    waiter = threading.Thread(target=long_profile)
    waiter.start()
    # Not 127.0.0.1: the test's own requests (and the daemon's probe) come from there.
    srcs = ["127.0.0.%d" % i for i in range(2, 6)]
    groups = [{"src": s, "n": 20, "mode": mode} for s in srcs for mode in ("idle", "half")]
    with Hostile() as h:
        t_open = time.monotonic()
        r = h(op="open", port=d.port, groups=groups)
        check(r["failed"] == 0, "160 hostile connections from 4 addresses connect (%d failed)" % r["failed"])
        st = h(op="status", wait=1.0)
        log("hostile connections after 1 s: %r" % st)
        for s in srcs:
            check(st[s]["open"] == per_client and st[s]["closed"] == 40 - per_client,
                  "%s holds exactly %d connections, its other %d are closed at once (%r)"
                  % (s, per_client, 40 - per_client, st[s]))
        m = metrics(d)
        check(m.get('profd_http_connections_refused_total{reason="per_client_limit"}') == 4 * (40 - per_client),
              "/metrics counts the %d refused connections (%r)"
              % (4 * (40 - per_client), m.get('profd_http_connections_refused_total{reason="per_client_limit"}')))

        # Other clients are served meanwhile, at once; the crowd's own addresses are not.
        worst = 0
        for i in range(10):
            status, body, took, err = raw_get(d.port, b"/healthz", src="127.0.0.%d" % (10 + i))
            worst = max(worst, took)
            if not check(status == 200 and took < 2, "/healthz from 127.0.0.%d during the crowd: %s in %.3f s %s"
                         % (10 + i, status, took, err or "")):
                break
        log("/healthz during the crowd: slowest of 10 answers %.3f s" % worst)
        status, body, took, err = raw_get(d.port, b"/healthz", src=srcs[0])
        check(status is None, "/healthz from %s, at its limit, is closed unanswered (%s %s)" % (srcs[0], status, err))
        st, _, _ = d.get("/debug/pprof/profile?seconds=1", timeout=30)
        check(st == 200, "a profile request is served during the crowd (got %d)" % st)

        # The request timeout ends the crowd.
        r = h(op="wait_closed", timeout=REQUEST_TIMEOUT_S + 5)
        log("crowd closed by the server: %r" % r)
        check(r["open"] == 0, "every hostile connection is closed by the server within %d s (%d left)"
              % (REQUEST_TIMEOUT_S + 5, r["open"]))
        check(r["max_age"] is not None and REQUEST_TIMEOUT_S - 0.5 <= r["max_age"] < REQUEST_TIMEOUT_S + 2,
              "the connections it kept are closed %d s after connecting (oldest: %.2f s)"
              % (REQUEST_TIMEOUT_S, r["max_age"] or -1))
        log("crowd held its slots %.1f s after connecting" % (time.monotonic() - t_open))
    m = metrics(d)
    check(m.get('profd_http_connections_timed_out_total{phase="request"}', 0) >= 4 * per_client,
          "/metrics counts the request timeouts (%r)" % m.get('profd_http_connections_timed_out_total{phase="request"}'))
    for s in srcs + ["127.0.0.10"]:
        status, _, took, err = raw_get(d.port, b"/healthz", src=s)
        check(status == 200, "/healthz from %s after the crowd: %s in %.3f s %s" % (s, status, took, err or ""))
    st, _, _ = d.get("/debug/pprof/profile?seconds=1", timeout=30)
    check(st == 200, "a profile request after the crowd: %d" % st)
    waiter.join()
    check(long_window.get("status") == 200 and long_window["took"] >= 16,
          "a 16 s profile window outlives both timeouts: %r" % long_window)


# ---- (c) waiting profile requests whose clients leave ---------------------------------------

def abandoned_profiles(d):
    with Hostile() as h:
        r = h(op="open", port=d.port, groups=[{"src": "127.0.0.3", "n": 8, "mode": "profile"}])
        check(r["failed"] == 0, "8 profile requests for seconds=60 sent")
        inflight = wait_until("8 in flight", lambda: metrics(d).get("profd_http_profiles_in_flight") == 8, 10)
        check(inflight, "8 profile requests in flight")
        st, _, body = d.get("/debug/pprof/profile?seconds=1", timeout=10)
        check(st == 503, "a 9th profile request gets 503 while they wait (got %d)" % st)
        before = metrics(d).get("profd_http_profiles_cancelled_total", 0)
        h(op="close")
        # At once: no waiting for the daemon to notice.
        t1 = time.monotonic()
        st, _, body = d.get("/debug/pprof/profile?seconds=1", timeout=30)
        took = time.monotonic() - t1
    check(st == 200 and took < 5, "a new profile request right after they left gets 200 (got %d in %.2f s: %r)"
          % (st, took, body[:100]))
    m = metrics(d)
    check(m.get("profd_http_profiles_cancelled_total", 0) - before == 8,
          "/metrics counts the 8 cancelled requests (%r)" % m.get("profd_http_profiles_cancelled_total"))
    check(m.get("profd_http_profiles_in_flight") == 0, "nothing left in flight")


# ---- the connection limit filled from one address ------------------------------------------

def full_server(d, limit):
    """The limit is taken by one address; the rest of its connections and /healthz queue."""
    # Released all at once: the case that left the listener unwatched for good.
    for rnd, mode in enumerate(("half", "idle", "half")):
        with Hostile() as h:
            h(op="open", port=d.port, groups=[{"src": "127.0.0.1", "n": limit + 20, "mode": mode}])
            st = h(op="status", wait=0.5)
            status, _, took, err = raw_get(d.port, b"/healthz", timeout=1)
            check(status is None, "round %d: with %d %s connections from one address the server is full: "
                  "/healthz waits (%s %s)" % (rnd, limit, mode, status, err))
            h(op="close")
            t0 = time.monotonic()
        status, _, took, err = raw_get(d.port, b"/healthz", timeout=5)
        after = time.monotonic() - t0
        check(status == 200 and after < 2, "round %d: once they all close, /healthz answers within 2 s "
              "(%s after %.3f s %s)" % (rnd, status, after, err or ""))
        log("round %d: server full with %r; /healthz answered %.3f s after the crowd closed" % (rnd, st, after))

    # Timing out together.
    with Hostile() as h:
        t0 = time.monotonic()
        h(op="open", port=d.port, groups=[{"src": "127.0.0.1", "n": limit, "mode": "idle"}])
        status = None
        while status != 200 and time.monotonic() - t0 < REQUEST_TIMEOUT_S + 10:
            status, _, took, err = raw_get(d.port, b"/healthz", timeout=1)
        after = time.monotonic() - t0
        log("idle crowd at the limit: /healthz answered again %.2f s after it connected" % after)
        check(status == 200 and after < REQUEST_TIMEOUT_S + 3,
              "after %d idle connections time out together, /healthz answers (%s after %.2f s)"
              % (limit, status, after))


# ---- (e) the liveness check ------------------------------------------------------------------

class NotifyReader(threading.Thread):
    def __init__(self, path):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.msgs = []  # (monotonic time, {key: value})
        self.stop = False

    def run(self):
        while not self.stop:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            fields = dict(l.split("=", 1) for l in data.decode("utf-8", "replace").split("\n") if "=" in l)
            self.msgs.append((time.monotonic(), fields))

    def times(self, key, since=0.0):
        return [t for t, f in list(self.msgs) if key in f and t >= since]


def liveness(d, notify, limit):
    pings = notify.times("WATCHDOG")
    check(len(pings) >= 4, "WATCHDOG=1 pings arrive while HTTP answers (%d)" % len(pings))
    m = metrics(d)
    check(m.get('profd_http_probes_total{result="answered"}', 0) >= 1,
          "the liveness probe has been answered (%r)" % m.get('profd_http_probes_total{result="answered"}'))
    st, _, _ = d.get("/healthz", timeout=5)
    check(st == 200, "/healthz answers before the fault")

    # The fault: one address (no per-client limit) holds every connection slot and has hundreds
    # more waiting in the listen queue, each batch living for the request timeout: nobody else,
    # the probe included, gets an answer for minutes.
    with Hostile() as h:
        t_fault = time.monotonic()
        r = h(op="open", port=d.port, groups=[{"src": "127.0.0.5", "n": limit + 700, "mode": "idle"}])
        check(r["failed"] == 0, "%d connections from one address are established or queued (%d failed)"
              % (limit + 700, r["failed"]))
        status, _, took, err = raw_get(d.port, b"/healthz", src="127.0.0.11", timeout=3)
        check(status is None, "HTTP is really stuck: /healthz from another address gets no answer in 3 s (%s %s)"
              % (status, err))

        # Pings stop within the bound (30 s from the first unanswered probe, which starts within
        # 5 s) plus a ping period; wait for a silence of twice WATCHDOG_USEC.
        silent_since = None
        while time.monotonic() - t_fault < 60:
            time.sleep(0.25)
            last = max(notify.times("WATCHDOG") or [0])
            if time.monotonic() - last >= 4:
                silent_since = last
                break
        stopped_after = (silent_since - t_fault) if silent_since else None
        log("last WATCHDOG=1 %.1f s after the fault began" % (stopped_after or -1))
        check(silent_since is not None and 25 <= stopped_after <= 40,
              "WATCHDOG=1 is withheld once HTTP has not answered for 30 s (last ping %s s after the fault)"
              % ("%.1f" % stopped_after if stopped_after is not None else "never stopped:"))
        # The loop itself runs on: STATUS= is refreshed every 5 s meanwhile.
        time.sleep(6)
        statuses = notify.times("STATUS", since=(silent_since or t_fault) + 0.5)
        check(len(statuses) >= 1 and len(notify.times("WATCHDOG", since=(silent_since or t_fault) + 0.5)) == 0,
              "while pings are withheld the loop still runs: %d STATUS= refreshes, no WATCHDOG=1" % len(statuses))
        h(op="close")
        t_release = time.monotonic()

    resumed = wait_until("pings resume", lambda: notify.times("WATCHDOG", since=t_release), 15)
    check(resumed, "WATCHDOG=1 resumes once HTTP answers again (%.1f s after the release)"
          % ((resumed[0] - t_release) if resumed else -1))
    st, _, _ = d.get("/healthz", timeout=5)
    check(st == 200, "/healthz answers after the fault")
    m = metrics(d)
    check(m.get("profd_watchdog_pings_withheld_total", 0) >= 4 and m.get("profd_watchdog_pings_total", 0) >= 4,
          "/metrics counts sent and withheld pings (%r sent, %r withheld)"
          % (m.get("profd_watchdog_pings_total"), m.get("profd_watchdog_pings_withheld_total")))
    check(m.get('profd_http_probes_total{result="timeout"}', 0) >= 5,
          "/metrics counts the unanswered probes (%r)" % m.get('profd_http_probes_total{result="timeout"}'))
    d.logf.flush()
    with open(d.logpath) as f:
        text = f.read()
    check("HTTP has not answered its liveness probe" in text and "Withholding the watchdog ping" in text,
          "the log says HTTP stopped answering and the ping is withheld")
    check("Watchdog pings resumed" in text, "the log says the pings resumed")


def main():
    require_bpf()
    if not shutil.which("setpriv"):
        skip("setpriv (util-linux) is not installed: the hostile clients must run unprivileged")
    if os.getuid() != 0:
        skip("needs root to run the hostile clients as another user")

    with Daemon() as d:
        log("== oversized queries ==")
        oversized(d)
        log("== a crowd of idle and half-sent connections ==")
        crowd(d)
        log("== profile requests whose clients leave ==")
        abandoned_profiles(d)

    # One address may fill the whole server: the smallest limit, no per-client limit.
    limit = 40
    path = os.path.join(tmpdir(), "notify")
    notify = NotifyReader(path)
    notify.start()
    env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="2000000")
    env.pop("WATCHDOG_PID", None)
    with Daemon("--http-max-connections", str(limit), "--http-max-connections-per-client", "0", env=env) as d:
        m = metrics(d)
        check(m.get("profd_http_connections_max") == limit and m.get("profd_http_connections_per_client_max") == 0,
              "the flags set the limits (%r)" % {k: v for k, v in m.items() if k.startswith("profd_http_connections_")})
        log("== the connection limit filled from one address ==")
        full_server(d, limit)
        log("== the liveness check ==")
        liveness(d, notify, limit)
    notify.stop = True
    finish()


if __name__ == "__main__":
    main()
