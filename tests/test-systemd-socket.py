#!/usr/bin/env python3
"""Socket activation: systemd-socket-activate owns the listening socket and execs profd with
LISTEN_FDS=1 on the first connection (as profd.socket does); profd must serve on that socket, not
open its own, and a real profile must come back through it."""
import os
import shutil
import signal
import socket
import subprocess
import time

from profdtest import (PROFD, cc, check, fetch_profile, finish, free_port, http_get, log, pprof, require_bpf,
                       skip, tmpdir, traces, wait_healthy)

# -O0: every function, the leaf too, keeps a frame pointer (gcc omits it in leaves otherwise).
SPIN = r"""
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) unsigned long spin_leaf(unsigned long x)
{
        for (int i = 0; i < 200000; i++)
                x = x * 6364136223846793005UL + 1442695040888963407UL;
        return x;
}
__attribute__((noinline)) unsigned long spin_mid(unsigned long x)
{
        x = spin_leaf(x);
        __asm__ volatile("" ::: "memory");
        return x + 1;
}
int main(int argc, char **argv)
{
        time_t end = time(NULL) + atoi(argv[1]);
        volatile unsigned long acc = 1;
        while (time(NULL) < end)
                acc = spin_mid(acc);
        return (int)(acc & 0);
}
"""


class Activated:
    """fetch_profile() target: profd behind the socket systemd-socket-activate listens on."""

    def __init__(self, port):
        self.port = port

    def get(self, path, timeout=120):
        return http_get("http://127.0.0.1:%d%s" % (self.port, path), timeout=timeout)


def port_open(port):
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def main():
    require_bpf()
    if not os.path.exists(PROFD):
        skip("profd is not built")
    activate = shutil.which("systemd-socket-activate")
    if not activate:
        skip("systemd-socket-activate (package systemd) is not installed")

    d = tmpdir()
    spin = cc(SPIN, os.path.join(d, "sockact-spin"), flags=("-O0", "-g", "-fno-omit-frame-pointer"))
    port, other = free_port(), free_port()
    logpath = os.path.join(d, "profd.log")
    logf = open(logpath, "w")
    # --http-address names a different port: under socket activation it must be ignored.
    cmd = [activate, "-l", "127.0.0.1:%d" % port, PROFD, "--http-address", "127.0.0.1:%d" % other]
    log("starting: " + " ".join(cmd))
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
    spinner = None
    try:
        # The first connection makes systemd-socket-activate exec profd; it waits in the backlog.
        if not check(wait_healthy(port, proc, request_timeout=10), "/healthz answers 200 on the activated socket"):
            raise RuntimeError("profd did not come up under socket activation")
        exe = os.readlink("/proc/%d/exe" % proc.pid)
        check(os.path.basename(exe) == "profd", "the activated process is profd (%s)" % exe)
        check(not port_open(other), "profd did not open its own listener on --http-address")

        spinner = subprocess.Popen([spin, "8"])
        time.sleep(0.5)
        prof = fetch_profile(Activated(port), 3)
        top = pprof("-top", prof)
        check(top.returncode == 0, "go tool pprof -top reads the profile served on the activated socket")
        ts = traces(prof)
        mine = [t for t in ts if t.labels.get("pid") == [str(spinner.pid)]]
        log("spinner traces: %r" % mine[:3])
        check(sum(t.value for t in mine) > 0, "the profile contains samples of the spinner (pid %d)" % spinner.pid)
        check(any(t.frames[:2] == ["spin_leaf", "spin_mid"] for t in mine),
              "its stacks are unwound and named (spin_leaf <- spin_mid)")
    finally:
        if spinner:
            spinner.kill()
            spinner.wait()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
            check(rc == 0, "exit 0 after SIGTERM (got %d)" % rc)
        logf.close()
    with open(logpath) as f:
        out = f.read()
    log("---- profd log ----\n" + out[-5000:] + "---- end profd log ----")
    finish()


if __name__ == "__main__":
    main()
