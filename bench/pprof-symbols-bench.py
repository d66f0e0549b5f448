#!/usr/bin/env python3
"""Benchmark (prints figures, never fails on them; recorded in docs/symbolization.md).

How a whole-host profile names its frames, and what it weighs: while a mixed workload runs (a
bash loop and a clang compile loop - stripped Debian binaries, bash and libLLVM -, python3, xz),
one or more profd binaries (--profd, repeatable: e.g. an older build next to this one) each serve
a profile of the same window, fetched at the same time. Reported per binary: locations with a
function, placeholders among them ("[unknown] ..."), locations left without a function for
downstream symbolization, mappings with has_functions false, and the profile's size gzipped and
raw. The profile is decoded here (a minimal protobuf reader), not by go tool pprof, which would
symbolize what profd left unnamed.

    PROFD_BUILD_DIR=build PYTHONPATH=tests/lib python3 bench/pprof-symbols-bench.py \\
        [--seconds S] [--labels comm,pid] [--profd OTHER/daemon/profd ...]
or  meson test -C build --benchmark pprof-symbols"""
import argparse
import gzip
import os
import subprocess
import threading
import time

from profdtest import PROFD, Daemon, fetch_profile, log, require_bpf, tmpdir

C_SRC = r"""
#include <stdio.h>
struct point { double x, y; };
static double dot(struct point a, struct point b) { return a.x * b.x + a.y * b.y; }
int main(void) { struct point p = {1, 2}; printf("%f\n", dot(p, p)); return 0; }
"""


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
    """(field number, wire type, value) of one message: ints for varints, bytes otherwise;
    packed repeated varints come as bytes."""
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


def summarize(data):
    raw = gzip.decompress(data)
    strings, mappings, locations, functions = [], {}, [], {}
    for num, _, v in fields(raw):
        if num == 6:
            strings.append(v.decode("utf-8", "replace"))
        elif num == 3:
            m = {n: x for n, _, x in fields(v)}
            mappings[m.get(1, 0)] = m
        elif num == 4:
            loc = {"mapping": 0, "functions": []}
            for n, _, x in fields(v):
                if n == 2:
                    loc["mapping"] = x
                elif n == 4:
                    loc["functions"].append({k: y for k, _, y in fields(x)}.get(1, 0))
            locations.append(loc)
        elif num == 5:
            f = {n: x for n, _, x in fields(v)}
            functions[f.get(1, 0)] = f.get(2, 0)
    named = sum(1 for loc in locations if loc["functions"])
    placeholders = sum(1 for loc in locations if loc["functions"] and
                       strings[functions[loc["functions"][0]]].startswith("[unknown]"))
    unnamed = [loc for loc in locations if not loc["functions"]]
    kinds = {}
    for loc in locations:
        if loc["functions"]:
            name = strings[functions[loc["functions"][0]]]
            if name.startswith("[unknown]"):
                kind = ("[unknown] PATH+0xOFF" if name.startswith("[unknown] /") else
                        "anonymous memory" if name.startswith("[unknown] [anon]") else
                        "kernel" if "kernel" in name else "no mapping" if name.startswith("[unknown] 0x") else
                        name.split("+")[0])
                kinds[kind] = kinds.get(kind, 0) + 1
    by_file = {}
    for loc in unnamed + [loc for loc in locations if loc["functions"] and
                          strings[functions[loc["functions"][0]]].startswith("[unknown] /")]:
        m = mappings.get(loc["mapping"])
        name = os.path.basename(strings[m.get(5, 0)]) if m else "(none)"
        by_file[name] = by_file.get(name, 0) + 1
    return {
        "gzip": len(data), "raw": len(raw), "locations": len(locations), "named": named,
        "placeholders": placeholders, "unnamed": len(unnamed),
        "mappings": len(mappings), "mappings_unsymbolized": sum(1 for m in mappings.values() if not m.get(7)),
        "placeholder_kinds": sorted(kinds.items(), key=lambda kv: -kv[1]),
        "top_files": sorted(by_file.items(), key=lambda kv: -kv[1])[:6],
    }


def workload(seconds, work):
    src = os.path.join(work, "w.c")
    with open(src, "w") as f:
        f.write(C_SRC)
    blob = os.path.join(work, "blob")
    with open(blob, "wb") as f:
        f.write(os.urandom(1 << 20) * 8)
    end = time.time() + seconds
    return [
        subprocess.Popen(["bash", "-c", "i=0; while [ $SECONDS -lt %d ]; do i=$((i+1)); s=${i}x; done" % seconds]),
        subprocess.Popen(["bash", "-c", "while [ $SECONDS -lt %d ]; do clang -O2 -c -o /dev/null '%s'; done"
                          % (seconds, src)]),
        subprocess.Popen(["python3", "-c", "import time\nd={}\nwhile time.time() < %f:\n"
                          "    d[len(d) %% 1000] = str(len(d)) * 3\n" % end]),
        subprocess.Popen(["bash", "-c", "while [ $SECONDS -lt %d ]; do xz -1 -T1 -c '%s' >/dev/null; done"
                          % (seconds, blob)]),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--labels", default="comm,pid")
    ap.add_argument("--profd", action="append", default=[])
    a = ap.parse_args()
    require_bpf()
    binaries = [PROFD] + a.profd
    work = tmpdir()
    daemons = [Daemon("--frequency", "99", "--labels", a.labels, binary=b) for b in binaries]
    for d in daemons:
        d.__enter__()
    try:
        time.sleep(3)  # start-up scans and unwind tables settle
        procs = workload(a.seconds + 6, work)
        time.sleep(2)
        results = [None] * len(daemons)

        def get(i):
            results[i] = fetch_profile(daemons[i], a.seconds, "&labels=" + a.labels)

        threads = [threading.Thread(target=get, args=(i,)) for i in range(len(daemons))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for p in procs:
            p.wait()
    finally:
        for d in daemons:
            d.__exit__(None, None, None)
    for b, path in zip(binaries, results):
        with open(path, "rb") as f:
            s = summarize(f.read())
        log("%s:" % b)
        log("  %d bytes gzipped, %d raw; %d mappings (%d has_functions false)"
            % (s["gzip"], s["raw"], s["mappings"], s["mappings_unsymbolized"]))
        log("  %d locations: %d with a function (%d of them placeholders \"[unknown] ...\"), "
            "%d without (left to downstream symbolization)"
            % (s["locations"], s["named"], s["placeholders"], s["unnamed"]))
        log("  placeholders: %s" % ", ".join("%s %d" % kv for kv in s["placeholder_kinds"]))
        log("  unnamed file frames by file: %s" % ", ".join("%s %d" % kv for kv in s["top_files"]))


if __name__ == "__main__":
    main()
