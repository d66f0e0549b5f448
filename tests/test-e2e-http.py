#!/usr/bin/env python3
"""HTTP behaviour of the real daemon: every bad query gets its status and a one-line reason with
X-Go-Pprof (and go tool pprof shows it), too many concurrent profiles get 503, the index and
/healthz answer, /metrics carries the promised families in valid Prometheus text, and the daemon
keeps serving throughout."""
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

from profdtest import PROFD, Daemon, check, fetch_profile, finish, log, pprof, require_bpf, traces

BAD = [
    # (path, status, words the reason must contain)
    ("/debug/pprof/profile?seconds=abc", 400, "seconds"),
    ("/debug/pprof/profile?seconds=0", 400, "seconds"),
    ("/debug/pprof/profile?seconds=-5", 400, "seconds"),
    ("/debug/pprof/profile?seconds=1.5", 400, "seconds"),
    ("/debug/pprof/profile?seconds=", 400, "seconds"),
    ("/debug/pprof/profile?seconds=11", 400, "maximum"),
    ("/debug/pprof/profile?seconds=99999999999999999999", 400, "maximum"),
    ("/debug/pprof/profile?labels=comm,nosuchlabel", 400, "nosuchlabel"),
    ("/debug/pprof/profile?seconds=1&colour=red", 400, "colour"),
    ("/debug/pprof/nosuchprofile", 404, "Unknown profile"),
    ("/nosuchpath", 404, "unknown path"),
]

# Families /metrics promises (samples, drops by reason, map fill, drain time, requests, daemon).
PROMISED = [
    "profd_bpf_samples_total", "profd_bpf_recorded_samples_total", "profd_bpf_drops_total",
    "profd_bpf_map_entries", "profd_bpf_map_max_entries", "profd_drain_seconds",
    "profd_http_requests_total", "profd_http_profiles_in_flight", "profd_http_profile_build_seconds",
    "profd_aggregator_buckets", "profd_aggregator_stacks", "profd_event_loop_lag_seconds",
    "profd_event_loop_stalls_total",
    # The daemon itself: the standard families of Prometheus client libraries.
    "process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
    "process_open_fds", "process_max_fds", "process_start_time_seconds",
]

LINE = re.compile(r'^((?:profd|process)_[a-zA-Z0-9_]+)(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*")*\})? '
                  r'(-?[0-9.eE+-]+|NaN|\+Inf|-Inf)$')


def metrics(d):
    st, hdr, body = d.get("/metrics")
    return st, hdr, body.decode()


def flags():
    """Bad flags: one clear line naming the flag, exit 2, before anything is loaded."""
    for args, words in ((["--bogus"], "--bogus"), (["--frequency", "abc"], "--frequency"),
                        (["--labels", "comm,nope"], "nope"), (["--unwind-table-memory", "12Q"], "--unwind-table-memory"),
                        (["--http-address", ":99999"], "--http-address"), (["--max-seconds"], "--max-seconds")):
        r = subprocess.run([PROFD, *args], capture_output=True, text=True, timeout=10)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2 and len(lines) == 1 and words in lines[0],
              "profd %s: exit 2 with one line naming it (got %d: %r)" % (" ".join(args), r.returncode, r.stderr))
    r = subprocess.run([PROFD, "--help"], capture_output=True, text=True, timeout=10)
    check(r.returncode == 0 and "--http-address" in r.stdout and "--frequency" in r.stdout, "--help lists the flags")
    r = subprocess.run([PROFD, "--version"], capture_output=True, text=True, timeout=10)
    check(r.returncode == 0 and r.stdout.startswith("profd "), "--version prints the version")


def main():
    require_bpf()
    flags()
    launched = time.time()
    with Daemon("--max-seconds", "10", "--max-concurrent-profiles", "2") as d:
        for path, status, words in BAD:
            st, hdr, body = d.get(path)
            text = body.decode(errors="replace")
            ok = (st == status and hdr.get("x-go-pprof") == "1" and hdr.get("content-type", "").startswith("text/plain")
                  and text.endswith("\n") and text.count("\n") == 1 and words in text)
            check(ok, "%s -> %d with a one-line reason mentioning '%s' (got %d %r)" % (path, status, words, st, text))
            st, _, _ = d.get("/healthz")
            check(st == 200, "daemon still healthy after %s" % path)

        # Profiles profd lacks (collectors ask for them by default) get net/http/pprof's own answer to
        # a profile the Go runtime lacks: 404, "Unknown profile\n", text/plain, X-Go-Pprof: 1.
        for name in ("heap", "goroutine", "mutex", "block", "allocs", "threadcreate", "trace", "cmdline",
                     "delta_heap", "heap/extra", "profile/"):
            for method in ("GET", "POST"):
                req = urllib.request.Request(d.base + "/debug/pprof/" + name + "?seconds=1", method=method,
                                             data=b"" if method == "POST" else None)
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        st, hdr, body = r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
                except urllib.error.HTTPError as e:
                    st, hdr, body = e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()
                check(st == 404 and body == b"Unknown profile\n"
                      and hdr.get("content-type") == "text/plain; charset=utf-8" and hdr.get("x-go-pprof") == "1"
                      and hdr.get("x-content-type-options") == "nosniff" and "content-disposition" not in hdr,
                      "%s /debug/pprof/%s -> 404 'Unknown profile' as net/http/pprof (got %d %r %r)"
                      % (method, name, st, body[:80], hdr))
        r = pprof("-raw", d.base + "/debug/pprof/heap", check_rc=False)
        check(r.returncode != 0 and "Unknown profile" in r.stderr,
              "go tool pprof on /debug/pprof/heap prints 'Unknown profile' (%r)" % r.stderr[-300:])

        # go tool pprof shows the reason (it prints the body when X-Go-Pprof is set).
        r = pprof("-raw", d.base + "/debug/pprof/profile?seconds=abc", check_rc=False)
        check(r.returncode != 0 and "not an integer" in r.stderr,
              "go tool pprof fails on a bad query and prints profd's reason")
        if "not an integer" not in r.stderr:
            log(r.stderr[-2000:])

        # Too many concurrent profiles: 503, while the running ones complete normally.
        results = []

        def run():
            st, _, body = d.get("/debug/pprof/profile?seconds=3")
            results.append((st, body))
        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        st, hdr, body = d.get("/debug/pprof/profile?seconds=1")
        check(st == 503 and hdr.get("x-go-pprof") == "1" and b"too many" in body,
              "a third concurrent profile gets 503 'too many ...' (got %d %r)" % (st, body[:100]))
        t0 = time.time()
        st, _, _ = d.get("/healthz")
        check(st == 200 and time.time() - t0 < 1, "/healthz answers at once while profiles are waiting")
        st, _, text = metrics(d)
        check(st == 200 and re.search(r"^profd_http_profiles_in_flight 2$", text, re.M) is not None,
              "/metrics answers meanwhile and shows 2 profiles in flight")
        for t in threads:
            t.join()
        check(len(results) == 2 and all(s == 200 and b[:2] == b"\x1f\x8b" for s, b in results),
              "the two admitted profiles are served gzipped")

        # Still serving real profiles after all of that.
        path = fetch_profile(d, 1)
        check(traces(path) is not None, "a 1 s profile after the bad queries parses with go tool pprof")
        st, hdr, body = d.get("/debug/pprof/profile?seconds=1")
        check(st == 200 and hdr.get("content-type") == "application/octet-stream" and body[:2] == b"\x1f\x8b",
              "profiles are gzipped with Content-Type application/octet-stream")

        # Index page links the endpoints.
        st, hdr, body = d.get("/debug/pprof/")
        check(st == 200 and hdr.get("content-type", "").startswith("text/html") and b"/debug/pprof/profile" in body
              and b"/metrics" in body, "/debug/pprof/ is an HTML index linking the endpoints")

        # /metrics: promised names, valid text format, request counters by endpoint and code.
        st, hdr, text = metrics(d)
        check(st == 200 and hdr.get("content-type", "").startswith("text/plain"), "/metrics is text/plain")
        names = set()
        typed = set()
        bad_lines = []
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                typed.add(line.split()[2])
                continue
            if line.startswith("#") or not line:
                continue
            m = LINE.match(line)
            if not m:
                bad_lines.append(line)
                continue
            names.add(m.group(1))
        check(not bad_lines, "every /metrics sample line is valid Prometheus text (bad: %s)" % bad_lines[:3])

        def family(n):
            return re.sub(r"_(sum|count|bucket)$", "", n)
        untyped = sorted(n for n in names if n not in typed and family(n) not in typed)
        check(not untyped, "every metric family has a TYPE line (missing: %s)" % untyped[:5])
        for p in PROMISED:
            check(any(n == p or n.startswith(p + "_") for n in names), "/metrics has %s" % p)
        check(re.search(r'^profd_bpf_drops_total\{reason="[a-z_]+"\} \d+$', text, re.M) is not None,
              "drops are broken down by reason")
        m = re.search(r'^profd_http_requests_total\{endpoint="/debug/pprof/profile",code="400"\} (\d+)$', text, re.M)
        n400 = sum(1 for p, s, _ in BAD if s == 400)
        check(m is not None and int(m.group(1)) >= n400,
              "profile 400s are counted by endpoint and code (%s, at least %d)" % (m and m.group(1), n400))
        check(re.search(r'^profd_http_requests_total\{endpoint="unknown",code="404"\} [1-9]', text, re.M) is not None,
              "unknown paths are counted under one endpoint label")
        # Prometheus' own linter: naming (units last, counters _total), HELP, types.
        lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        check(lint.returncode == 0 and not (lint.stdout + lint.stderr).strip(),
              "promtool check metrics accepts /metrics with no complaint (%r)" % (lint.stdout + lint.stderr)[:500])
        m = re.search(r"^process_start_time_seconds ([0-9.]+)$", text, re.M)
        check(m is not None and launched - 1.5 <= float(m.group(1)) <= launched + 30,
              "process_start_time_seconds is when the daemon started (%s, launched at %.2f)" % (m and m.group(1), launched))
        m = re.search(r"^process_open_fds (\d+)$", text, re.M)
        n = len(os.listdir("/proc/%d/fd" % d.proc.pid))
        check(m is not None and abs(int(m.group(1)) - n) <= 8,
              "process_open_fds matches the daemon's /proc/PID/fd (%s vs %d)" % (m and m.group(1), n))
        m = re.search(r"^profd_bpf_samples_total (\d+)", text, re.M)
        check(m is not None and int(m.group(1)) > 0, "samples are being counted")

        # SIGTERM with a profile waiting: the client is told why, the daemon exits 0 within 5 s.
        waiting = {}

        def wait_profile():
            waiting["r"] = d.get("/debug/pprof/profile?seconds=8", timeout=30)
        t = threading.Thread(target=wait_profile)
        t.start()
        time.sleep(1)
        t0 = time.time()
        d.proc.send_signal(signal.SIGTERM)
        try:
            rc = d.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        took = time.time() - t0
        t.join()
        check(rc == 0, "SIGTERM: exit status 0 within 5 s (got %s after %.2f s)" % (rc, took))
        st, hdr, body = waiting.get("r", (None, {}, b""))
        check(st == 503 and b"shutting down" in body and hdr.get("x-go-pprof") == "1",
              "a profile still waiting at shutdown gets 503 'profd is shutting down' (got %s %r)" % (st, body[:80]))
    finish()


if __name__ == "__main__":
    main()
