#!/usr/bin/env python3
"""sd_notify protocol against a real notify socket, as systemd would run profd (Type=notify,
WatchdogSec=): READY=1 only once /healthz answers, STATUS= summaries, WATCHDOG=1 pings from the
event loop, STOPPING=1 and exit 0 within 5 s of SIGTERM."""
import os
import signal
import socket
import struct
import subprocess
import time

from profdtest import (PROFD, check, finish, free_port, http_get, log, require_bpf, skip, tmpdir)

WATCHDOG_USEC = 1_000_000  # sd-event pings every 1/4..1/2 of this: several per second


def main():
    require_bpf()
    if not os.path.exists(PROFD):
        skip("profd is not built")

    d = tmpdir()
    path = os.path.join(d, "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    # Like systemd: only trust messages whose sender credentials say they come from profd.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    sock.settimeout(0.05)

    port = free_port()
    env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC=str(WATCHDOG_USEC))
    env.pop("WATCHDOG_PID", None)
    logpath = os.path.join(d, "profd.log")
    logf = open(logpath, "w")
    cmd = [PROFD, "--http-address", "127.0.0.1:%d" % port]
    log("starting: NOTIFY_SOCKET=%s WATCHDOG_USEC=%d %s" % (path, WATCHDOG_USEC, " ".join(cmd)))
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env)

    msgs = []  # (time, pid, {key: value})

    def receive(until):
        while time.time() < until:
            try:
                data, anc, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(12))
            except socket.timeout:
                return
            pid = None
            for level, typ, cdata in anc:
                if level == socket.SOL_SOCKET and typ == socket.SCM_CREDENTIALS:
                    pid = struct.unpack("iII", cdata[:12])[0]
            fields = {}
            for line in data.decode("utf-8", "replace").split("\n"):
                if "=" in line:
                    k, v = line.split("=", 1)
                    fields[k] = v
            msgs.append((time.time(), pid, fields))
            return fields

    def dump_log():
        logf.flush()
        with open(logpath) as f:
            log("---- profd log ----\n" + f.read()[-10000:] + "---- end profd log ----")

    # READY=1 must come only once the daemon really serves: the instant it arrives, /healthz has
    # to answer 200 already.
    ready_at = None
    healthz_at_ready = None
    deadline = time.time() + 30
    while time.time() < deadline and ready_at is None:
        if proc.poll() is not None:
            break
        f = receive(time.time() + 0.1)
        if f and f.get("READY") == "1":
            ready_at = time.time()
            try:
                healthz_at_ready = http_get("http://127.0.0.1:%d/healthz" % port, timeout=5)[0]
            except OSError as e:
                healthz_at_ready = str(e)
    if not check(ready_at is not None, "READY=1 received within 30 s"):
        dump_log()
        proc.kill()
        proc.wait()
        finish()
    check(healthz_at_ready == 200, "/healthz answers 200 at the moment READY=1 arrives (got %s)" % healthz_at_ready)
    check(all(p == proc.pid for _, p, _ in msgs), "every notification comes from profd's pid %d" % proc.pid)

    # Watch the running daemon for a while: watchdog pings and status refreshes.
    t0 = time.time()
    while time.time() < t0 + 7:
        receive(t0 + 7)
    watch = [m for m in msgs if m[0] >= t0]
    pings = [m for m in watch if m[2].get("WATCHDOG") == "1"]
    log("%d WATCHDOG=1 in %.1f s" % (len(pings), time.time() - t0))
    check(len(pings) >= 7, "WATCHDOG=1 keeps coming (>= 1 per second with WATCHDOG_USEC=1s; got %d in 7 s)" % len(pings))
    gaps = [b[0] - a[0] for a, b in zip(pings, pings[1:])]
    if gaps:
        check(max(gaps) < WATCHDOG_USEC / 1e6, "largest gap between pings %.2f s < watchdog interval" % max(gaps))
    statuses = [m[2]["STATUS"] for m in msgs if "STATUS" in m[2]]
    log("STATUS lines: %r" % statuses[-3:])
    check(any("samples/s" in s and "processes" in s for s in statuses),
          "STATUS= summarises processes, tables and samples/s")
    check(len([m for m in watch if "STATUS" in m[2]]) >= 1, "STATUS= is refreshed while running")

    # Shutdown.
    proc.send_signal(signal.SIGTERM)
    t_term = time.time()
    try:
        rc = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    took = time.time() - t_term
    receive(time.time() + 0.3)
    while receive(time.time() + 0.1):
        pass
    log("exit %d after %.2f s" % (rc, took))
    check(rc == 0, "exit code 0 after SIGTERM (got %d)" % rc)
    check(took < 5, "exits within 5 s of SIGTERM (%.2f s)" % took)
    stopping = [m for m in msgs if m[2].get("STOPPING") == "1"]
    check(len(stopping) == 1 and stopping[0][0] >= t_term, "STOPPING=1 sent once, after SIGTERM")
    if rc != 0:
        dump_log()
    logf.close()
    finish()


if __name__ == "__main__":
    main()
