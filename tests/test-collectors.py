#!/usr/bin/env python3
"""The requests the configurations of docs/collectors.md make, sent to a real profd over HTTP.

Grafana Alloy (pyroscope.scrape, scrape_interval 15s, delta = true, params labels=comm,unit) and
Parca (scrape_interval 15s, scrape_timeout 18s, delta: true, params labels: [comm,unit]) send,
byte for byte as Go's url.Values.Encode writes them:

    GET /debug/pprof/profile?labels=comm%2Cunit&seconds=14   User-Agent: Alloy/...
    GET /debug/pprof/profile?labels=comm%2Cunit&seconds=15   User-Agent: conprof/...

Both run at once (as two collectors scraping one host would) against a daemon whose own default
labels are comm,pid. Each answer is checked the way its collector checks it (status 200; for Alloy
Content-Type application/octet-stream and a gzip body, not text) and must be complete within the
collector's timeout (Alloy: scrape_timeout + scrape_interval - 1 s = 24 s; Parca: 18 s), and then
read with go tool pprof: the window asked, only the comm and unit labels (no pid series), a busy
process present under its comm. The profiles the collectors' defaults would also ask for answer
Go's 404 "Unknown profile". The off-CPU jobs (profd --off-cpu) send the same to /debug/pprof/offcpu;
their answers have samples/count, off_cpu/nanoseconds and a sleeping process with about the
window's length off CPU."""
import http.client
import os
import re
import subprocess
import threading
import time

from profdtest import Daemon, cc, check, finish, log, pprof, require_bpf, tmpdir, traces

SPIN_SRC = r"""
volatile unsigned long sink;
__attribute__((noinline)) void collector_spin(void)
{
        for (int i = 0; i < 20000; i++)
                sink += i;
}
int main(void)
{
        for (;;)
                collector_spin();
}
"""

WAIT_SRC = r"""
#include <time.h>
__attribute__((noinline)) void collector_wait(void)
{
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, 0);
}
int main(void)
{
        for (;;)
                collector_wait();
}
"""

COLLECTORS = {
    # name: (request target, headers, collector timeout in s)
    "alloy": ("/debug/pprof/profile?labels=comm%2Cunit&seconds=14",
              {"User-Agent": "Alloy/v1.5.1 (linux; binary)", "Accept-Encoding": "gzip"}, 24.0),
    "parca": ("/debug/pprof/profile?labels=comm%2Cunit&seconds=15",
              {"User-Agent": "conprof/v0.24.0", "Accept-Encoding": "gzip"}, 18.0),
    # The off-CPU jobs of docs/collectors.md (profile.custom "offcpu" / pprof_config offcpu).
    "alloy-offcpu": ("/debug/pprof/offcpu?labels=comm%2Cunit&seconds=14",
                     {"User-Agent": "Alloy/v1.5.1 (linux; binary)", "Accept-Encoding": "gzip"}, 24.0),
    "parca-offcpu": ("/debug/pprof/offcpu?labels=comm%2Cunit&seconds=15",
                     {"User-Agent": "conprof/v0.24.0", "Accept-Encoding": "gzip"}, 18.0),
}
# What the collectors' defaults would add, had the configurations not turned them off.
DEFAULT_PATHS = ["/debug/pprof/allocs", "/debug/pprof/heap", "/debug/pprof/block", "/debug/pprof/goroutine",
                 "/debug/pprof/mutex", "/debug/pprof/delta_heap", "/debug/pprof/fgprof"]


def request(port, target, headers, timeout):
    """One GET as the collectors make it (Go's client: HTTP/1.1, keep-alive). (status, headers,
    body, seconds)."""
    t0 = time.time()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", target, headers=headers)
        r = conn.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body, time.time() - t0
    finally:
        conn.close()


def main():
    require_bpf()
    work = tmpdir()
    spin = cc(SPIN_SRC, os.path.join(work, "collector-spin"), ["-O1", "-fno-omit-frame-pointer"])
    wait = cc(WAIT_SRC, os.path.join(work, "collector-wait"), ["-O1", "-fno-omit-frame-pointer"])
    p = subprocess.Popen([spin])
    pw = subprocess.Popen([wait])
    try:
        with Daemon("--labels", "comm,pid", "--max-seconds", "60", "--off-cpu") as d:
            results = {}

            def scrape(name):
                target, headers, timeout = COLLECTORS[name]
                try:
                    results[name] = request(d.port, target, headers, timeout)
                except Exception as e:  # a timeout is the collector giving up
                    results[name] = e
            threads = [threading.Thread(target=scrape, args=(n,)) for n in COLLECTORS]
            for t in threads:
                t.start()

            # Meanwhile: the defaults' other profiles, as net/http/pprof answers a missing one.
            for path in DEFAULT_PATHS:
                st, hdr, body, _ = request(d.port, path, {"User-Agent": "Alloy/v1.5.1 (linux; binary)"}, 10)
                check(st == 404 and body == b"Unknown profile\n" and hdr.get("x-go-pprof") == "1",
                      "%s -> 404 Unknown profile (got %d %r)" % (path, st, body[:60]))
            for t in threads:
                t.join()

            for name, (target, _, timeout) in COLLECTORS.items():
                res = results.get(name)
                if isinstance(res, Exception) or res is None:
                    check(False, "%s: %s answered within the collector's %.0f s timeout (%r)" % (name, target, timeout, res))
                    continue
                st, hdr, body, took = res
                seconds = int(re.search(r"seconds=(\d+)", target).group(1))
                log("%s: %d in %.2f s (window %d s), %d bytes, %s" % (name, st, took, seconds, len(body),
                                                                      hdr.get("content-type")))
                check(st == 200, "%s: %s -> 200" % (name, target))
                check(took < timeout, "%s: the answer is complete within the collector's timeout (%.2f s of %.0f s)"
                      % (name, took, timeout))
                check(hdr.get("content-type", "").startswith("application/octet-stream") and body[:2] == b"\x1f\x8b",
                      "%s: application/octet-stream, gzip body (as Alloy's validateProfileData wants)" % name)
                path = os.path.join(work, name + ".pb.gz")
                with open(path, "wb") as f:
                    f.write(body)
                raw = pprof("-raw", path).stdout
                dur = re.search(r"^Duration: ([0-9.]+)", raw, re.M)
                # go tool pprof prints three significant digits (14.95 s as 14.9).
                check(dur is not None and seconds - 0.15 <= float(dur.group(1)) <= seconds + 1.0,
                      "%s: the profile covers the %d s asked (%s)" % (name, seconds, dur and dur.group(1)))
                off = name.endswith("-offcpu")
                vtype = "off_cpu" if off else "cpu"
                check(re.search(r"^Samples:\s*\nsamples/count %s/nanoseconds" % vtype, raw, re.M) is not None,
                      "%s: sample types samples/count, %s/nanoseconds" % (name, vtype))
                ts = traces(path, sample_index=vtype if off else "samples")
                keys = set()
                for t in ts:
                    keys.update(t.labels)
                keys.discard("state")  # off-CPU: blocked|preempted, always there
                check(ts and keys <= {"comm", "unit"} and "comm" in keys,
                      "%s: labels=comm,unit overrides the daemon's comm,pid: no pid series (keys %s)"
                      % (name, sorted(keys)))
                if off:
                    waited = sum(t.value for t in ts if t.labels.get("comm") == ["collector-wait"]
                                 and "collector_wait" in t.frames)
                    check(waited > 0.8 * seconds * 1e9, "%s: the waiting process is in the profile under its comm "
                          "with about the window's length off CPU (%.2f s)" % (name, waited / 1e9))
                    continue
                spun = sum(t.value for t in ts if t.labels.get("comm") == ["collector-spin"]
                           and "collector_spin" in t.frames)
                check(spun > 0, "%s: the busy process is in the profile under its comm (%d samples)" % (name, spun))
    finally:
        for q in (p, pw):
            q.kill()
            q.wait()
    finish()


if __name__ == "__main__":
    main()
