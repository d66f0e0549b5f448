#!/usr/bin/env python3
"""Go programs unwind across Go's stack switches, to the goroutine's or thread's outermost frame.

A Go program (built with Debian's golang-go, once as is and once stripped with -ldflags=-s -w,
which leaves only .gopclntab) runs three goroutines: one allocating hard (mallocgc -> systemstack
-> GC assist and background mark work on the g0 stack), one reading the clock (time.now calls the
vDSO on the g0 stack), one computing. profd samples it at 199 Hz for 8 s; the folded
output is read over HTTP. Checks, per build:
  - at most 2% of the samples stop early ("[unwind stopped: ...]"; before profd followed Go's
    stack switches, 5-13% of a Go program's samples ended there);
  - every other sample's outermost frame is one Go's own tracebacks end at (runtime.goexit,
    runtime.mstart, runtime.mcall, runtime.rt0_go, or runtime.clone in a starting thread): nothing
    is walked below runtime.mstart;
  - samples that went through runtime.systemstack reach the goroutine below it: main.allocLoop
    under runtime.systemstack, down to runtime.goexit;
  - the vDSO clock samples reach main.clockLoop and runtime.goexit."""
import os
import re
import shutil
import subprocess
import time

from profdtest import (DWARF_INFLATE_MIN_BYTES, Daemon, check, compressed_dwarf_bytes, finish, go_env, log, metric,
                       require_bpf, skip, tmpdir)

SRC = r"""
package main

import (
	"os"
	"strconv"
	"time"
)

var sink []byte
var keep [][]byte

//go:noinline
func allocLoop() {
	for {
		for i := 0; i < 1000; i++ {
			sink = make([]byte, 4096+i)
			if i%10 == 0 {
				keep = append(keep, sink)
			}
		}
		if len(keep) > 20000 {
			keep = nil
		}
	}
}

var t0 int64

//go:noinline
func clockLoop() {
	for {
		t0 += time.Now().UnixNano() & 1
	}
}

//go:noinline
func spin(n int) int {
	x := 1
	for i := 0; i < n; i++ {
		x = x*31 + i
	}
	return x
}

//go:noinline
func computeLoop() {
	for {
		t0 += int64(spin(1000000) & 1)
	}
}

func main() {
	secs, _ := strconv.Atoi(os.Args[1])
	go allocLoop()
	go clockLoop()
	go computeLoop()
	time.Sleep(time.Duration(secs) * time.Second)
}
"""

OUTERMOST = ("runtime.goexit", "runtime.mstart", "runtime.mcall", "runtime.rt0_go", "runtime.clone")
SECONDS = 8


def build(d, name, ldflags):
    src = os.path.join(d, "main.go")
    with open(src, "w") as f:
        f.write(SRC)
    exe = os.path.join(d, name)
    env = go_env()
    env["GO111MODULE"] = "off"
    env["GOPATH"] = os.path.join(d, "gopath")
    subprocess.run(["go", "build", "-o", exe, "-ldflags=" + ldflags, src], check=True, env=env, cwd=d,
                   timeout=300)
    return exe


def profile(dm, exe, what):
    p = subprocess.Popen([exe, str(SECONDS + 6)])
    try:
        time.sleep(2)  # the process is read and its table built
        st, _, body = dm.get("/debug/pprof/profile?seconds=%d&format=folded&labels=&pid=%d" % (SECONDS, p.pid),
                             timeout=SECONDS + 60)
    finally:
        p.kill()
        p.wait()
    check(st == 200, "%s: folded profile fetched (%d)" % (what, st))
    stacks = []
    for line in body.decode(errors="replace").splitlines():
        m = re.match(r"^(.*) (\d+)$", line)
        if m:
            frames = m.group(1).split(";")[1:]  # the first is the comm
            # .symtab names Go's assembly functions with their ABI ("runtime.goexit.abi0");
            # .gopclntab, which the stripped build has, does not.
            frames = [re.sub(r"\.abi0$", "", f) for f in frames if not f.endswith("_[k]")]
            stacks.append((frames, int(m.group(2))))
    return stacks


def judge(stacks, what):
    total = sum(n for _, n in stacks)
    check(total >= 200, "%s: %d samples (want >= 200)" % (what, total))
    if total == 0:
        return
    stopped = sum(n for f, n in stacks if f and f[0].startswith("[unwind stopped"))
    reasons = {}
    for f, n in stacks:
        if f and f[0].startswith("[unwind stopped"):
            reasons[f[0]] = reasons.get(f[0], 0) + n
    log("%s: %d samples, %d stopped early %s" % (what, total, stopped, reasons))
    check(stopped <= 0.02 * total, "%s: <= 2%% of samples stop early (%.1f%%)" % (what, 100.0 * stopped / total))

    user = [(f, n) for f, n in stacks if f and not f[0].startswith("[unwind stopped")]
    bad_root = {}
    for f, n in user:
        if f[0] not in OUTERMOST:
            bad_root[f[0]] = bad_root.get(f[0], 0) + n
    n_bad = sum(bad_root.values())
    log("%s: outermost frames not Go's: %s" % (what, sorted(bad_root.items(), key=lambda x: -x[1])[:8]))
    check(n_bad <= 0.01 * total, "%s: complete stacks end at Go's outermost frames (%d of %d do not)"
          % (what, n_bad, total))

    def has(f, *names):
        i = 0
        for x in f:
            if i < len(names) and x == names[i]:
                i += 1
        return i == len(names)

    switched = sum(n for f, n in user if "runtime.systemstack" in f)
    crossed = sum(n for f, n in user if has(f, "runtime.goexit", "main.allocLoop", "runtime.systemstack"))
    log("%s: %d samples through runtime.systemstack, %d of them under main.allocLoop" % (what, switched, crossed))
    check(switched > 0, "%s: samples on the g0 stack through runtime.systemstack (%d)" % (what, switched))
    check(crossed > 0, "%s: the goroutine below systemstack is reached: goexit;main.allocLoop;...;"
          "runtime.systemstack (%d)" % (what, crossed))
    clock = sum(n for f, n in user if has(f, "runtime.goexit", "main.clockLoop", "time.now") and
                any("vdso" in x for x in f))
    check(clock > 0, "%s: vDSO clock samples reach main.clockLoop and runtime.goexit (%d)" % (what, clock))


def main():
    require_bpf()
    if not shutil.which("go"):
        skip("go (golang-go) is not installed: cannot build the Go program")
    d = tmpdir()
    plain = build(d, "gowork", "")
    stripped = build(d, "gowork-stripped", "-s -w")
    with Daemon("--frequency", "199") as dm:
        time.sleep(1)
        judge(profile(dm, plain, "go build"), "go build")
        judge(profile(dm, stripped, "go build -ldflags='-s -w'"), "go build -ldflags='-s -w'")
        _, _, metrics = dm.get("/metrics")
    # Go compresses its DWARF: profd inflates it off the event loop when there is enough of it.
    dwarf = compressed_dwarf_bytes(plain)
    taken = metric(metrics.decode(), 'profd_symbolizer_dwarf_inflations_total{result="taken"}')
    if dwarf >= DWARF_INFLATE_MIN_BYTES:
        check(taken >= 1, "the Go program's %d bytes of compressed DWARF were inflated off the event loop "
              "and opened from the copy (taken: %s)" % (dwarf, taken))
    else:
        log("note: the Go program has %d bytes of compressed DWARF, under what profd inflates apart" % dwarf)
    finish()


if __name__ == "__main__":
    main()
