#!/usr/bin/env python3
"""Benchmark: unwind-table build vs `readelf --debug-dump=frames-interp`, same files, same run.

Usage: bench/unwind-tables-bench.py DUMP [FILE...]
  DUMP: build/unwind-tables/profd-unwind-dump; FILE default: libLLVM-14.so.1 and libc.so.6.
  Files that do not exist are reported and left out.
Or: meson test -C BUILD --benchmark unwind-tables-libllvm --verbose

Every process is pinned to one CPU. For each file it prints rows, bytes/row, build time (the
library's own clock, min and median of 7 runs), the dump process' wall time, readelf's wall time
(min of 3), their ratio, and memory: the builder's peak heap and the dump process' max RSS (which
also counts the file pages it touched) against the final table size."""
import os
import statistics
import subprocess
import sys
import time

DEFAULT_FILES = ['/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1', '/lib/x86_64-linux-gnu/libc.so.6']
RUNS, READELF_RUNS = 7, 3


def pin():
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})


def stats(dump, path):
    t0 = time.perf_counter()
    out = subprocess.run([dump, '--stats', '--no-debug-file', path], check=True, capture_output=True,
                         text=True, preexec_fn=pin).stdout
    wall = (time.perf_counter() - t0) * 1000
    d = dict(line.split(': ', 1) for line in out.splitlines() if ': ' in line)
    return d, wall


def readelf_ms(path):
    # readelf exits 1 on warnings (libc.so.6 has some); the time is what matters here
    t0 = time.perf_counter()
    subprocess.run(['readelf', '--debug-dump=frames-interp', path], check=False, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, preexec_fn=pin)
    return (time.perf_counter() - t0) * 1000


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    dump = sys.argv[1]
    files = sys.argv[2:] or DEFAULT_FILES
    for f in files:
        if not os.path.exists(f):
            print(f'{f}: not present, not measured')
    files = [f for f in files if os.path.exists(f)]
    if not files:
        print('SKIP: none of the benchmark files is installed')
        return 77
    for path in files:
        runs = [stats(dump, path) for _ in range(RUNS)]
        d = runs[-1][0]
        build = sorted(float(r[0]['build_ms']) for r in runs)
        walls = sorted(r[1] for r in runs)
        ref = min(readelf_ms(path) for _ in range(READELF_RUNS))
        rows, nbytes = int(d['rows']), int(d['bytes'])
        peak = int(d['build_peak_heap_bytes'])
        rss = max(int(r[0]['max_rss_kb']) for r in runs) * 1024
        print(f'{path}:')
        print(f'  rows {rows}, rules {d["rules"]}, fdes {d["fdes"]}, unsupported {d["unsupported"]}'
              f' (cfa {d["unsupported_cfa"]}, ra {d["unsupported_ra"]}, rbp {d["unsupported_rbp"]})')
        print(f'  table {nbytes} bytes = {nbytes / rows:.2f} bytes/row all-in')
        print(f'  build_ms min {build[0]:.1f} median {statistics.median(build):.1f}; '
              f'dump process wall min {walls[0]:.1f} ms')
        print(f'  readelf --debug-dump=frames-interp wall min {ref:.1f} ms')
        print(f'  speed-up: {ref / build[0]:.1f}x (build_ms), {ref / walls[0]:.1f}x (whole process)')
        print(f'  memory: builder peak heap {peak} bytes = {peak / nbytes:.2f}x the table; '
              f'process max RSS {rss} bytes = {rss / nbytes:.2f}x the table')
    return 0


if __name__ == '__main__':
    sys.exit(main())
