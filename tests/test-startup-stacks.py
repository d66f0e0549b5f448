#!/usr/bin/env python3
"""The dynamic loader's own frames unwind completely: its start code and lazy binding.

A program linked with -z lazy against a generated shared library of 4000 exported functions
(whose pointer table needs 4000 symbol lookups when the loader relocates it) calls every one of
them once, so each run spends its first milliseconds in ld.so: relocating (ld.so's _start ->
_dl_start -> ... -> _dl_relocate_object) and resolving each first call (PLT ->
_dl_runtime_resolve_xsavec, whose CFA is based on rbx -> _dl_fixup). It is exec'd in a loop for 8 s
while profd samples at 999 Hz. From the folded output, among the samples profd could unwind with
tables (not the few of a process it had not read yet):
  - >= 90% of the samples in the loader's start code are complete and end at ld.so's _start or
    _dl_start_user (before: "[unwind stopped: no unwind info]": that code has no CFI);
  - >= 90% of the samples in _dl_runtime_resolve_* reach main, its caller (before: "[unwind
    stopped: unsupported unwind rule]" there, the rbx-based CFA).
ld.so's names come from glibc's debug file (libc6-dbg, in docs/debian-packages-tests.txt)."""
import os
import re
import subprocess
import threading
import time

from profdtest import Daemon, cc, check, finish, log, require_bpf, skip, tmpdir

N_FUNCS = 4000
SECONDS = 8
NOT_READ = ("process not yet known", "unwind table pending")


def sources(d):
    lib = os.path.join(d, "lib.c")
    with open(lib, "w") as f:
        for i in range(N_FUNCS):
            f.write("int lz_f%d(int x) { return x * %d + 1; }\n" % (i, i + 3))
        f.write("typedef int (*fn)(int);\nfn lz_table[] = {%s};\n" % ", ".join("lz_f%d" % i for i in range(N_FUNCS)))
    main = os.path.join(d, "main.c")
    with open(main, "w") as f:
        for i in range(N_FUNCS):
            f.write("int lz_f%d(int);\n" % i)
        f.write("int main(void) {\n  int x = 1;\n")
        for i in range(N_FUNCS):
            f.write("  x = lz_f%d(x);\n" % i)
        f.write("  return x == 42;\n}\n")
    return lib, main


def main():
    require_bpf()
    debug = "/usr/lib/debug/.build-id"
    if not os.path.isdir(debug):
        skip("glibc's debug file (libc6-dbg) is not installed: ld.so's functions have no names")
    d = tmpdir()
    lib, src = sources(d)
    so = os.path.join(d, "liblz.so")
    subprocess.run(["gcc", "-O1", "-fPIC", "-shared", "-o", so, lib], check=True)
    exe = os.path.join(d, "lazy-start")
    subprocess.run(["gcc", "-O1", "-fomit-frame-pointer", "-o", exe, src, so, "-Wl,-z,lazy",
                    "-Wl,-rpath," + d], check=True)

    stop = threading.Event()
    runs = [0]

    def loop():
        while not stop.is_set():
            subprocess.run([exe])
            runs[0] += 1

    with Daemon("--frequency", "999", "--comm", "lazy-start") as dm:
        time.sleep(1)
        t = threading.Thread(target=loop)
        t.start()
        try:
            st, _, body = dm.get("/debug/pprof/profile?seconds=%d&format=folded&labels=" % SECONDS,
                                 timeout=SECONDS + 60)
        finally:
            stop.set()
            t.join()
    check(st == 200, "folded profile fetched (%d)" % st)
    log("%d runs" % runs[0])

    start_code, resolve = [0, 0], [0, 0]  # [complete, all]
    reasons = {}
    for line in body.decode(errors="replace").splitlines():
        m = re.match(r"^(.*) (\d+)$", line)
        if not m:
            continue
        frames = [f for f in m.group(1).split(";")[1:] if not f.endswith("_[k]")]
        n = int(m.group(2))
        if not frames:
            continue
        stopped = frames[0].startswith("[unwind stopped")
        if stopped and any(r in frames[0] for r in NOT_READ):
            continue
        if any(f in ("_dl_relocate_object", "_dl_start", "dl_main", "_dl_sysdep_start") for f in frames):
            start_code[1] += n
            if not stopped and frames[0] in ("_start", "_dl_start_user"):
                start_code[0] += n
            elif stopped:
                reasons[frames[0]] = reasons.get(frames[0], 0) + n
        resolve_at = [i for i, f in enumerate(frames) if f.startswith("_dl_runtime_resolve")]
        if resolve_at:
            resolve[1] += n
            # main, the caller, is found through the rbx-based CFA. Whether the frames below main
            # are known depends on whether profd had read the process once libc was mapped,
            # which a process living a few ms may not give it time for.
            if "main" in frames[:resolve_at[0]]:
                resolve[0] += n
            else:
                reasons[frames[0]] = reasons.get(frames[0], 0) + n
    log("loader start code: %d of %d samples complete; _dl_runtime_resolve: %d of %d; stops: %s"
        % (start_code[0], start_code[1], resolve[0], resolve[1], reasons))
    check(start_code[1] >= 20, "samples in the loader's start code (%d, want >= 20)" % start_code[1])
    check(start_code[0] >= 0.9 * start_code[1], ">= 90%% of them end at ld.so's _start/_dl_start_user (%d of %d)"
          % (start_code[0], start_code[1]))
    check(resolve[1] >= 20, "samples in _dl_runtime_resolve (%d, want >= 20)" % resolve[1])
    check(resolve[0] >= 0.9 * resolve[1], ">= 90%% of them reach main through the rbx-based CFA (%d of %d)"
          % (resolve[0], resolve[1]))
    finish()


if __name__ == "__main__":
    main()
