#!/usr/bin/env python3
"""DWARF unwinding correctness on real processes built without frame pointers.

For each scenario program (tests/scenarios/, -O2 -fomit-frame-pointer): run it while profd samples
at 99 Hz, fetch /debug/pprof/profile?seconds=N over HTTP for the scenario's window, read it with
`go tool pprof -traces`, keep the scenario's pid, and check:

1. >= 99% of its samples carry a complete expected chain: leaf ... main, and below main the C
   runtime down to _start (threads: down to start_thread/clone3);
2. the same process recorded at the same time by `perf record --call-graph dwarf` agrees: >= 99%
   of profd's samples have a stack (leaf to main) that perf also recorded, and >= 99% of perf's
   samples have a stack profd also recorded. perf copies only 8 KiB of user stack per sample, so
   on deep stacks it stops early; such a perf stack is compared on the frames it has (a prefix of
   profd's), and counted and printed as truncated. profd must not truncate.

A failure prints the scenario's stacks from both tools, most frequent first.
Usage: test-unwind-scenarios.py [SCENARIO...]   (default: all)"""
import collections
import os
import re
import shutil
import subprocess
import sys
import threading
import time

from profdtest import (BUILD, Daemon, check, fetch_profile, finish, log, require_bpf, tmpdir, traces, unwind_ready,
                       wait_settled)

FREQUENCY = 99
WINDOW_S = 4             # profile window per scenario
WARMUP_S = 0.3           # from the go (tables in place) to the start of the window
THRESHOLD = 0.99
MIN_SAMPLES = 40         # below this a percentage means little (the machine may be very busy)
SCEN_DIR = os.path.join(BUILD, "tests", "scenarios")

# Below main: the C runtime's frames (names vary with symbols available), ending at _start.
BELOW_MAIN = r"main;(?:[^;]+;)*?__libc_start[^;]*;(?:[^;]+;)*?_start"
THREAD_BOTTOM = r"start_thread;(?:__)?clone3?"   # clone3 and __clone3 are one address
ONE_FRAME = r"[^;]+"     # the signal trampoline (__restore_rt; perf often cannot name it)
# The run loops read the clock between slices of work (a few ppm of the time natively; a syscall
# where the vDSO has no usable clock source): frames above the reader are libc's and the vDSO's.
CLOCK = r"(?:__)?clock_gettime;"


class Scenario:
    def __init__(self, name, own, chains, required=None, args=(), delay_s=0.0, doc="", agree_threshold=THRESHOLD):
        self.name = name
        self.own = own    # name prefix of the scenario's own functions
        # leaf-first regexes matched at the bottom of the ';'-joined stack; frames above the leaf
        # (kernel, vDSO clock reads) are allowed
        self.chains = [(label, re.compile(r"(?:^|;)" + rx + r"$")) for label, rx in chains]
        self.required = set(required if required is not None else [c[0] for c in chains])
        self.args = args
        self.delay_s = delay_s
        self.doc = doc
        # share of each tool's samples whose stack the other must also have recorded
        self.agree_threshold = agree_threshold

    @property
    def binary(self):
        return os.path.join(SCEN_DIR, "scen-" + self.name)


SCENARIOS = [
    Scenario("plain", "plain_", [("plain", r"plain_leaf;plain_c;plain_b;plain_a;" + BELOW_MAIN),
                                 ("clock read", CLOCK + BELOW_MAIN)], required=["plain"],
             doc="non-PIE executable, plain call chain"),
    Scenario("recursion", "rec_", [("recursion", r"rec_leaf;(?:rec_descend;){300}rec_start;" + BELOW_MAIN)],
             doc="300 recursive frames of 80 bytes each (~24 KiB of stack)"),
    Scenario("shlib", "shlib_", [
        ("into the library", r"shlib_lib_leaf;shlib_lib_mid;shlib_lib_entry;shlib_caller;" + BELOW_MAIN),
        ("and back (callback)", r"shlib_callback_leaf;shlib_callback;shlib_lib_mid;shlib_lib_entry;"
                                r"shlib_caller;" + BELOW_MAIN),
        ("clock read", CLOCK + BELOW_MAIN)], required=["into the library", "and back (callback)"],
             doc="executable -> libscen-shlib.so through the PLT, and back through a callback"),
    Scenario("pie", "pie_", [("pie", r"pie_leaf;pie_c;pie_b;pie_a;" + BELOW_MAIN),
                             ("clock read", CLOCK + BELOW_MAIN)], required=["pie"],
             doc="position-independent executable"),
    Scenario("indirect", "ind_", [
        ("square", r"ind_leaf;ind_op_square;ind_dispatch;" + BELOW_MAIN),
        ("cube", r"ind_leaf;ind_trampoline;ind_op_cube;ind_dispatch;" + BELOW_MAIN),
        ("clock read", CLOCK + BELOW_MAIN)], required=["square", "cube"],
             doc="calls through function pointer tables"),
    Scenario("threads", "thr_", [
        ("main thread", r"thr_main_leaf;thr_main_work;" + BELOW_MAIN),
        ("second thread", r"thr_worker_leaf;thr_worker_mid;thr_worker;" + THREAD_BOTTOM),
        ("clock read, main thread", CLOCK + BELOW_MAIN),
        ("clock read, second thread", CLOCK + r"thr_worker;" + THREAD_BOTTOM)],
             required=["main thread", "second thread"],
             doc="two threads burning at once with different chains"),
    Scenario("signal", "sig_", [
        ("in the handler", r"sig_handler_leaf;sig_handler;" + ONE_FRAME + r";sig_compute_leaf;sig_compute;"
                           + BELOW_MAIN),
        ("interrupted computation", r"sig_compute_leaf;sig_compute;" + BELOW_MAIN),
        ("handler in libc (clock, setitimer)", r"[^;]+;sig_handler;" + ONE_FRAME
                                               + r";sig_compute_leaf;sig_compute;" + BELOW_MAIN)],
             required=["in the handler", "interrupted computation"],
             doc="SIGALRM handler interrupting a computation: unwinding through the signal frame"),
    Scenario("exceptions", "exc_", [
        ("in the catch block", r"exc_catch_leaf;exc_hot_loop(?:\.cold)?;" + BELOW_MAIN),
        ("throwing", r"[^;]+;exc_thrower(?:\.cold)?;exc_hot_loop;" + BELOW_MAIN),
        ("catching", r"[^;]+;exc_hot_loop(?:\.cold)?;" + BELOW_MAIN)],
             required=["in the catch block"],
             doc="C++ throw/catch in the hot loop, work in the catch block (.cold fragment)",
             # At some pcs inside libgcc's _Unwind_RaiseException both tools record
             # [unknown];_Unwind_RaiseException;exc_hot_loop;exc_hot_loop;main (~1% of the samples;
             # they read the same .eh_frame). A stack that rare is in one tool's window and not the
             # other's by chance: seen 4 of 366 in perf's, 5 of 377 in profd's, in separate runs
             # under load.
             agree_threshold=0.98),
    Scenario("dlopen", "dl_", [("dlopen'd module", r"dl_module_leaf;dl_module_mid;dl_module_entry;dl_run;"
                                + BELOW_MAIN),
                               ("clock read", CLOCK + BELOW_MAIN)], required=["dlopen'd module"],
             args=(os.path.join(SCEN_DIR, "scen-dlopen-module.so"),), delay_s=0.7,
             doc="module dlopen'ed 0.7 s into the profile window, after profd started"),
]


def kernel_symbols():
    names = set()
    try:
        with open("/proc/kallsyms") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    names.add(parts[2])
    except OSError:
        pass
    return names


KSYMS = kernel_symbols()


def norm(name):
    """One spelling for a frame from either tool; None for an inlined function (perf runs with
    --no-inline: stacks are compared on real frames)."""
    name = name.strip()
    if name.endswith(" (inline)"):
        return None
    if name.startswith("[unknown]"):
        return "[unknown]"
    # A frame profd left without a function (a stripped library with a build ID): go tool pprof
    # prints the mapping's file name in brackets, "[libgcc_s.so.1]". profd's markers have a colon.
    if re.fullmatch(r"\[[^]:]+\]", name) and name != "[plt]":
        return "[unknown]"
    name = re.sub(r"@@?[A-Za-z0-9_.]+$", "", name)   # symbol versions: __libc_start_main@@GLIBC_2.34
    if "(" in name and not name.startswith("("):      # C++ signatures: perf prints them, pprof may not
        name = name[:name.index("(")]
    return name


def user_frames(frames):
    """profd puts kernel frames above the user frames; drop them by kernel symbol name."""
    frames = [f for f in frames if f is not None]
    i = 0
    while i < len(frames) - 1 and (frames[i] in KSYMS or frames[i].startswith("bpf_prog_")):
        i += 1
    return frames[i:]


def cut_at_main(frames):
    """The compared part of a stack: leaf to main (the C runtime below main is checked separately)."""
    return tuple(frames[:frames.index("main") + 1]) if "main" in frames else tuple(frames)


def complete_key(key):
    return bool(key) and (key[-1] == "main" or key[-1].lstrip("_") in ("clone3", "clone"))


def is_marker(f):
    """profd's visible end of an incomplete stack, e.g. "[unwind stopped: bad frame]"."""
    return f.startswith("[") and f != "[unknown]"


def frames_equal(a, b):
    # aliases at one address (clone3/__clone3) may be named either way; perf cannot name some
    # frames (no symbol covers the address), profd prints those as [unknown] too. A marker of an
    # incomplete stack only ever equals itself.
    if is_marker(a) or is_marker(b):
        return a == b
    return a.lstrip("_") == b.lstrip("_") or a == "[unknown]" or b == "[unknown]"


def key_matches(a, b, prefix_ok=False):
    """a equals b, or (prefix_ok) a is a leading part of b."""
    if len(a) != len(b) and not (prefix_ok and len(a) < len(b)):
        return False
    return all(frames_equal(x, y) for x, y in zip(a, b))


def stacks_match(profd_key, perf_key):
    """Same stack, or perf's stack is cut short (its 8 KiB stack copy) and is the top of profd's.
    profd gets no such allowance: an incomplete profd stack ends in a marker frame."""
    return key_matches(profd_key, perf_key) or \
        (not complete_key(perf_key) and key_matches(perf_key, profd_key, prefix_ok=True))


def own_part(key, own):
    """From the first of the scenario's own frames (or main) down: the part that must be right
    whatever library code sits above it."""
    for i, f in enumerate(key):
        if f == "main" or f.startswith(own):
            return key[i:]
    return ()


# A stack one tool has n samples of and the other none is a disagreement only when the other tool
# would have been expected to see it at least this often (Poisson: P(0) = e^-5 < 1%). Rarer stacks
# (e.g. the many leaves inside libgcc's unwinder) must agree from the scenario's own frames down:
# that part must be the bottom of a stack the other tool recorded.
RARE_EXPECTED = 5.0


def without_cold(key):
    # a rare sample may hit a function's hot part where the other tool only saw its .cold part
    return tuple(f[:-5] if f.endswith(".cold") else f for f in key)


def is_bottom_of(part, key):
    return len(part) <= len(key) and key_matches(without_cold(part), without_cold(key[len(key) - len(part):]))


def agreement(src, src_total, dst, dst_total, own, src_is_profd):
    """(samples of src with a stack dst has, of which matched only below their own frames,
    Counter of src's stacks dst does not have)"""
    dst_keys = list(dst)
    agree = rare = 0
    unmatched = collections.Counter()
    for k, n in src.items():
        if any(stacks_match(k, d) if src_is_profd else stacks_match(d, k) for d in dst_keys):
            agree += n
        elif n * dst_total / src_total < RARE_EXPECTED and own_part(k, own) and \
                any(is_bottom_of(own_part(k, own), d) for d in dst_keys):
            agree += n
            rare += n
        else:
            unmatched[k] += n
    return agree, rare, unmatched


def show(counter, total, title, limit=6):
    log("  " + title)
    for key, n in counter.most_common(limit):
        frames = list(key)
        if len(frames) > 24:
            frames = frames[:10] + ["... %d frames ..." % (len(frames) - 20)] + frames[-10:]
        log("    %5d (%5.1f%%)  %s" % (n, 100.0 * n / max(total, 1), ";".join(frames)))


# ---- perf ---------------------------------------------------------------------------------------

def perf_usable(d):
    if not shutil.which("perf"):
        return "perf is not installed (Debian package linux-perf)"
    out = os.path.join(d, "probe.data")
    r = subprocess.run(["perf", "record", "-q", "-o", out, "--call-graph", "dwarf", "-F", str(FREQUENCY),
                        "--", "true"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return "perf record does not work here: " + (r.stderr.strip()[-400:] or "exit %d" % r.returncode)
    return None


def perf_start(pid, out):
    # the default dwarf stack copy (8 KiB), as perf is usually run; CLOCK_MONOTONIC timestamps, so
    # samples can be cut to profd's window (time.monotonic())
    return subprocess.Popen(["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "--call-graph", "dwarf",
                             "-F", str(FREQUENCY), "-o", out, "-p", str(pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def perf_wait_attached(perf, timeout_s=20):
    """perf record -p follows threads created after its events are open (inherit), not before: a
    program told to go (it then starts its threads) before perf got that far has threads perf
    never sees. Waits for perf's perf_event descriptors."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and perf.poll() is None:
        try:
            fds = os.listdir("/proc/%d/fd" % perf.pid)
            if any(os.readlink("/proc/%d/fd/%s" % (perf.pid, fd)) == "anon_inode:[perf_event]" for fd in fds):
                time.sleep(0.3)  # the remaining CPUs' events and the mmaps follow at once
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def perf_samples(path, t_from, t_to):
    """[(tid, user frames leaf first)] of the samples taken in [t_from, t_to]."""
    r = subprocess.run(["perf", "script", "-i", path, "-F", "tid,time,ip,sym,dso", "--no-inline"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError("perf script failed: " + r.stderr[-400:])
    out = []
    for block in r.stdout.split("\n\n"):
        lines = [l for l in block.split("\n") if l.strip()]
        if not lines:
            continue
        m = re.match(r"^\s*(\d+)\s+([0-9.]+):", lines[0])
        if not m:
            continue
        t = float(m.group(2))
        if t < t_from or t > t_to:
            continue
        frames = []
        for l in lines[1:]:
            fm = re.match(r"^\s*[0-9a-f]+\s+(.*?)\s+\(([^()]*)\)\s*$", l)
            if not fm:
                continue
            sym, dso = fm.group(1), fm.group(2)
            if dso.startswith("[kernel") or dso == "[bpf_prog]" or sym.startswith("bpf_prog_"):
                continue
            if norm(sym):
                frames.append(norm(sym))
        if frames:
            out.append((int(m.group(1)), frames))
    return out


# ---- one scenario -------------------------------------------------------------------------------

def say(proc, line):
    try:
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
    except OSError:
        pass   # it exited: its exit status says why


def run_scenario(daemon, sc, perf_ok, work):
    log("\n=== scenario %s: %s" % (sc.name, sc.doc))
    if not os.path.exists(sc.binary):
        check(False, "%s: scenario program %s was built" % (sc.name, sc.binary))
        return
    # Burn time from the go: alive until the window has been cut.
    duration = (WINDOW_S + 0.7 - sc.delay_s) if sc.delay_s else (WARMUP_S + WINDOW_S + 0.7)
    args = [sc.binary, "%.2f" % duration, *sc.args]
    if sc.delay_s:
        args.append(str(int(sc.delay_s * 1000)))
    # SCEN_WAIT_GO: the program waits on stdin, so it burns only once profd has its tables.
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, SCEN_WAIT_GO="1"))
    perf_data = os.path.join(work, sc.name + ".perf.data")
    perf = perf_start(proc.pid, perf_data) if perf_ok else None
    # Alongside the window, back-to-back 1 s windows: when samples lack their chain, these say
    # whether that happens only right after exec/dlopen (tables not placed yet) or all along.
    seconds = []
    main_window = []

    def fetch_seconds():
        for i in range(WINDOW_S):
            try:
                seconds.append(fetch_profile(daemon, 1, path=os.path.join(work, "%s.%d.pb.gz" % (sc.name, i))))
            except (RuntimeError, OSError) as e:
                log("per-second window %d: %s" % (i, e))

    def fetch_main():
        main_window.append(fetch_profile(daemon, WINDOW_S, path=os.path.join(work, sc.name + ".pb.gz")))

    try:
        unwind_ready(daemon, proc.pid, os.path.basename(sc.binary), sc.name)
        if perf and not perf_wait_attached(perf):
            log("%s: perf did not open its events within 20 s" % sc.name)
        if not sc.delay_s:
            say(proc, "go")
            time.sleep(WARMUP_S)
        t_from = time.monotonic()
        per_second = threading.Thread(target=fetch_seconds)
        per_second.start()
        main = threading.Thread(target=fetch_main)
        main.start()
        if sc.delay_s:
            # dlopen() while the window runs; the burn starts once the module's table is in place.
            time.sleep(sc.delay_s)
            say(proc, "dlopen")
            unwind_ready(daemon, proc.pid, os.path.basename(sc.args[0]), sc.name + " module")
            say(proc, "go")
        main.join()
        t_to = time.monotonic()
        per_second.join()
    finally:
        try:
            proc.stdin.close()   # never told go: EOF makes it exit
        except OSError:
            pass
        try:
            proc.wait(timeout=duration + 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if perf:
            try:
                perf.wait(timeout=30)
            except subprocess.TimeoutExpired:
                perf.terminate()
                perf.wait()
    if not main_window:
        check(False, "%s: the profile window was fetched" % sc.name)
        return
    path = main_window[0]
    check(proc.returncode == 0, "%s: scenario program exited 0 (got %s: %s)"
          % (sc.name, proc.returncode, proc.stderr.read().strip()[-300:]))

    # profd
    mine = [t for t in traces(path) if t.labels.get("pid") == [str(proc.pid)]]
    profd = collections.Counter()
    chain_counts = collections.Counter()
    total = complete = 0
    for t in mine:
        frames = user_frames([norm(f) for f in t.frames])
        joined = ";".join(frames)
        label = next((lbl for lbl, rx in sc.chains if rx.search(joined)), None)
        total += t.value
        profd[cut_at_main(frames)] += t.value
        if label:
            complete += t.value
            chain_counts[label] += t.value
    log("profd: %d samples of pid %d in %.1f s; %s" % (total, proc.pid, t_to - t_from,
        ", ".join("%s: %d" % (k, v) for k, v in sorted(chain_counts.items())) or "no expected chain"))
    if not check(total >= MIN_SAMPLES, "%s: profd has >= %d samples of the scenario (%d)"
                 % (sc.name, MIN_SAMPLES, total)):
        show(profd, total, "profd stacks (leaf;...;main):")
        return
    ok = check(complete >= THRESHOLD * total, "%s: >= 99%% of profd's samples carry a complete expected "
               "chain down to _start: %d/%d = %.2f%%" % (sc.name, complete, total, 100.0 * complete / total))
    for label in sorted(sc.required):
        ok &= check(chain_counts[label] > 0, "%s: chain '%s' seen" % (sc.name, label))
    if not ok:
        bad = collections.Counter()
        for t in mine:
            frames = user_frames([norm(f) for f in t.frames])
            if not any(rx.search(";".join(frames)) for _, rx in sc.chains):
                bad[tuple(frames)] += t.value
        show(bad, total, "profd samples WITHOUT a complete expected chain (whole stacks):")
        timeline = []
        for p in seconds:
            n = b = 0
            for t in traces(p):
                if t.labels.get("pid") == [str(proc.pid)]:
                    n += t.value
                    frames = user_frames([norm(f) for f in t.frames])
                    if not any(rx.search(";".join(frames)) for _, rx in sc.chains):
                        b += t.value
            timeline.append("%d/%d" % (b, n))
        log("  samples without the chain / samples, per second of the window (from %.1f s after the go): %s"
            % (WARMUP_S, " ".join(timeline)))
        show(profd, total, "all profd stacks (leaf;...;main):")

    if not perf:
        return
    # perf, same process, same window
    if perf.returncode != 0:
        check(False, "%s: perf record succeeded (%d): %s" % (sc.name, perf.returncode, perf.stderr.read()[-300:]))
        return
    samples = perf_samples(perf_data, t_from, t_to)
    os.unlink(perf_data)   # megabytes per scenario
    perfc = collections.Counter(cut_at_main(f) for _, f in samples)
    ptotal = sum(perfc.values())
    log("perf:  %d samples in the same window" % ptotal)
    if not check(ptotal >= MIN_SAMPLES, "%s: perf has >= %d samples in the window (%d)"
                 % (sc.name, MIN_SAMPLES, ptotal)):
        return
    agree_profd, rare_profd, only_profd = agreement(profd, total, perfc, ptotal, sc.own, True)
    agree_perf, rare_perf, only_perf = agreement(perfc, ptotal, profd, total, sc.own, False)
    truncated = sum(n for k, n in perfc.items() if not complete_key(k))
    # distribution overlap, for information: sampling noise keeps it below 100%
    overlap = sum(min(n / total, sum(m for p, m in perfc.items() if stacks_match(k, p)) / ptotal)
                  for k, n in profd.items())
    pdepth = max((len(k) for k in perfc), default=0)
    ddepth = max((len(k) for k in profd), default=0)
    log("perf truncated %d/%d samples before main (deepest perf stack %d frames, profd %d); distribution "
        "overlap %.1f%%; rare stacks matched below their first own frame: profd %d, perf %d"
        % (truncated, ptotal, pdepth, ddepth, 100 * overlap, rare_profd, rare_perf))
    ok = check(agree_profd >= sc.agree_threshold * total, "%s: >= %g%% of profd's samples have a stack perf also "
               "recorded: %d/%d = %.2f%%" % (sc.name, 100 * sc.agree_threshold, agree_profd, total,
                                             100.0 * agree_profd / total))
    ok &= check(agree_perf >= sc.agree_threshold * ptotal, "%s: >= %g%% of perf's samples have a stack profd also "
                "recorded: %d/%d = %.2f%%" % (sc.name, 100 * sc.agree_threshold, agree_perf, ptotal,
                                              100.0 * agree_perf / ptotal))
    if only_profd:
        show(only_profd, total, "profd stacks perf did not record:")
    if only_perf:
        show(only_perf, ptotal, "perf stacks profd did not record:")
    if not ok:
        show(profd, total, "all profd stacks (leaf;...;main):")
        show(perfc, ptotal, "all perf stacks (leaf;...;main):")


def main():
    names = sys.argv[1:]
    unknown = [n for n in names if n not in [s.name for s in SCENARIOS]]
    if unknown:
        log("unknown scenario(s): %s (have: %s)" % (", ".join(unknown), ", ".join(s.name for s in SCENARIOS)))
        sys.exit(2)
    require_bpf()
    work = tmpdir()
    why = perf_usable(work)
    perf_ok = why is None
    # perf is the reference this test compares with: without it the test cannot pass
    check(perf_ok, "perf record --call-graph dwarf works here" + ("" if perf_ok else ": " + why))
    with Daemon("--frequency", str(FREQUENCY), "--labels", "comm,pid") as d:
        wait_settled(d)
        for sc in SCENARIOS:
            if names and sc.name not in names:
                continue
            run_scenario(d, sc, perf_ok, work)
        st, _, body = d.get("/metrics")
        if st == 200:
            lines = [l for l in body.decode(errors="replace").split("\n")
                     if re.match(r"^profd_(unwind|bpf_|sample|drop|stack|pool|table)", l) and not l.endswith(" 0")]
            log("\nprofd /metrics (unwinding, non-zero):\n  " + "\n  ".join(lines[:60]))
    finish()


if __name__ == "__main__":
    main()
