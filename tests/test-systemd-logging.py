#!/usr/bin/env python3
"""Journal-friendly logging: with JOURNAL_STREAM naming profd's stderr, every line carries a
syslog "<N>" prefix so journald keeps its priority; with JOURNAL_STREAM naming another stream (a
redirected child), none; --log-level filters by priority; a bad --log-level is one line, exit 2."""
import os
import re
import signal
import subprocess

from profdtest import PROFD, check, finish, free_port, log, require_bpf, skip, tmpdir, wait_healthy


def run_profd(args, journal_stream_of_stderr, seconds=3):
    """Runs profd until /healthz answers (or it exits), then SIGTERM. Returns (rc, stderr text)."""
    d = tmpdir()
    errpath = os.path.join(d, "stderr")
    port = free_port()
    with open(errpath, "w") as err:
        st = os.fstat(err.fileno())
        env = dict(os.environ)
        if journal_stream_of_stderr is True:
            env["JOURNAL_STREAM"] = "%d:%d" % (st.st_dev, st.st_ino)
        elif journal_stream_of_stderr:
            env["JOURNAL_STREAM"] = journal_stream_of_stderr
        else:
            env.pop("JOURNAL_STREAM", None)
        p = subprocess.Popen([PROFD, "--http-address", "127.0.0.1:%d" % port, *args], stdout=subprocess.DEVNULL,
                             stderr=err, env=env)
        wait_healthy(port, p)
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=15)
    with open(errpath) as f:
        return rc, f.read()


def main():
    require_bpf()
    if not os.path.exists(PROFD):
        skip("profd is not built")

    rc, out = run_profd([], True)
    lines = [l for l in out.splitlines() if l]
    log("journal stream:\n" + out)
    check(rc == 0, "exit 0")
    check(len(lines) >= 2 and all(re.match(r"^<[0-7]>", l) for l in lines),
          "with JOURNAL_STREAM = stderr, every line has a <N> priority prefix")
    check(any(l.startswith("<6>") for l in lines), "informational lines are <6>")

    rc, out = run_profd([], "1:1")
    lines = [l for l in out.splitlines() if l]
    check(rc == 0 and lines and not any(re.match(r"^<[0-7]>", l) for l in lines),
          "with JOURNAL_STREAM naming another stream, no prefixes")

    rc, out = run_profd(["--log-level", "debug"], True)
    check(any(l.startswith("<7>") for l in out.splitlines()), "--log-level debug adds <7> lines")

    rc, out = run_profd(["--log-level", "warning"], True)
    lines = [l for l in out.splitlines() if l]
    log("--log-level warning:\n" + out)
    check(rc == 0 and not any(re.match(r"^<[5-7]>", l) for l in lines),
          "--log-level warning: no notice, info or debug lines")

    r = subprocess.run([PROFD, "--log-level", "chatty"], capture_output=True, text=True, timeout=10)
    check(r.returncode == 2, "bad --log-level: exit 2 (got %d)" % r.returncode)
    check(len(r.stderr.strip().splitlines()) == 1 and "--log-level" in r.stderr,
          "bad --log-level: one line naming the flag: %r" % r.stderr.strip())
    finish()


if __name__ == "__main__":
    main()
