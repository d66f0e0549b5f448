#!/usr/bin/env python3
"""Files an unprivileged user controls never block profd nor lead it out of the process's view.

profd runs with RLIMIT_NOFILE 512, which leaves it no descriptors to keep mapped files open
with ((512 - 512) / 2 = 0): the state every new file is in once the budget is full (a process of
`nobody` mapping many files does that), without racing other processes for the slots their exits
free. Then, while a profile window runs, processes of `nobody` each
load a library from a directory they own, burn CPU in it, and:
- exit-fifo:    replace the library's path by a FIFO and exit (profd, symbolizing after the exit,
                once open()ed that path and waited forever);
- exit-symlink: replace it by a symlink to /etc/shadow and exit;
- exit-replace: replace it by another library (other names, same code) and exit: profd must not
                take the replacement's names for the mapped file's;
- alive-fifo:   dlclose() it, replace it by a FIFO, stay alive (profd went through
                /proc/PID/root/PATH);
- debuglink:    a stripped library whose .gnu_debuglink file is a FIFO (libdwfl's search);
- dwz:          a library with DWARF whose .gnu_debugaltlink (dwz) file is a FIFO;
- split:        a library with split DWARF whose .dwo is a FIFO (libdw opens .dwo itself).

Checks: the profile request completes, /healthz answers, the libraries whose own file is sound are
named from their symbol tables, the others show as [unknown] PATH+offset, /metrics counts the
refusals by reason, and SIGTERM stops profd within 5 s."""
import os
import re
import shutil
import signal
import subprocess
import time

from profdtest import Daemon, cc, check, finish, http_get, log, require_bpf, skip, tmpdir, traces

NOBODY = 65534
AS_NOBODY = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups", "--inh-caps=-all"]
SPIN_S = 3

LIB = r"""
#include <time.h>
volatile unsigned long sink;
static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}
__attribute__((noinline)) void FN(double secs)
{
        double end = now() + secs;
        while (now() < end)
                for (int i = 0; i < 200000; i++)
                        sink += (unsigned long)i * 7;
}
"""

# argv: library, function, seconds, what to do after (exit-fifo, exit-symlink, exit-replace,
# alive-fifo, alive), the replacement for exit-replace.
VICTIM = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv)
{
        void *h = dlopen(argv[1], RTLD_NOW);
        void (*fn)(double);
        if (!h) {
                fprintf(stderr, "%s\n", dlerror());
                return 2;
        }
        fn = (void (*)(double))dlsym(h, argv[2]);
        if (!fn)
                return 3;
        fn(atof(argv[3]));
        if (strcmp(argv[4], "alive-fifo") == 0)
                dlclose(h);
        if (strstr(argv[4], "fifo") && (unlink(argv[1]) < 0 || mkfifo(argv[1], 0644) < 0))
                return 4;
        if (strstr(argv[4], "symlink") && (unlink(argv[1]) < 0 || symlink("/etc/shadow", argv[1]) < 0))
                return 4;
        if (strstr(argv[4], "replace") && rename(argv[5], argv[1]) < 0)
                return 4;
        printf("done\n");
        fflush(stdout);
        if (strncmp(argv[4], "alive", 5) == 0)
                pause();
        return 0;
}
"""

# Maps every file given executable and waits: fills profd's budget of files kept open.
FILLER = r"""
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv)
{
        for (int i = 1; i < argc; i++) {
                struct stat st;
                int fd = open(argv[i], O_RDONLY);
                if (fd < 0 || fstat(fd, &st) < 0 ||
                    mmap(NULL, st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED)
                        return 1;
                close(fd);
        }
        printf("mapped\n");
        fflush(stdout);
        pause();
        return 0;
}
"""


def run(cmd, **kw):
    subprocess.run(cmd, check=True, **kw)


def metric(d, name, labels=""):
    _, _, body = d.get("/metrics", timeout=10)
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), body.decode(), re.M)
    return float(m.group(1)) if m else None


def build(d):
    """Builds everything as root, then hands the scenario directory to nobody."""
    own = os.path.join(d, "own")
    os.makedirs(own)
    victim = cc(VICTIM, os.path.join(d, "victim"), flags=("-O1",), libs=("-ldl",))
    filler = cc(FILLER, os.path.join(d, "filler"))
    libs = {}

    def lib(name, flags=()):
        path = os.path.join(own, "lib%s.so" % name)
        cc(LIB, path, flags=("-shared", "-fPIC", "-O2", "-DFN=%s_spin" % name.replace("-", "_"), *flags))
        libs[name] = path
        return path

    lib("exit_fifo")
    lib("exit_symlink")
    lib("exit_replace")
    # The same code, named otherwise: what exit-replace puts in its library's place.
    cc(LIB, os.path.join(own, "replacement.so"), flags=("-shared", "-fPIC", "-O2", "-DFN=replaced_xx_spin"))
    libs["replacement"] = os.path.join(own, "replacement.so")
    lib("alive_fifo")
    # Stripped, its symbols in a debug file named by .gnu_debuglink next to it: a FIFO.
    p = lib("debuglink", ("-g",))
    run(["objcopy", "--only-keep-debug", p, p + ".debug"])
    run(["strip", "--strip-all", p])
    run(["objcopy", "--add-gnu-debuglink=" + os.path.basename(p) + ".debug", os.path.basename(p)], cwd=own)
    os.unlink(p + ".debug")
    os.mkfifo(p + ".debug")
    # DWARF plus a .gnu_debugaltlink naming a dwz file next to it: a FIFO.
    p = lib("dwz", ("-g",))
    with open(os.path.join(d, "altlink"), "wb") as f:
        f.write(b"libdwz.dwz\0" + os.urandom(20))
    run(["objcopy", "--add-section", ".gnu_debugaltlink=" + os.path.join(d, "altlink"), p])
    os.mkfifo(os.path.join(own, "libdwz.dwz"))
    # Split DWARF: the .dwo the skeleton unit names (next to it, in its comp_dir) is a FIFO.
    src = os.path.join(own, "split.c")
    with open(src, "w") as f:
        f.write(LIB)
    run(["gcc", "-c", "-fPIC", "-O2", "-gsplit-dwarf", "-gdwarf-5", "-DFN=split_spin", "split.c", "-o", "split.o"],
        cwd=own)
    run(["gcc", "-shared", "split.o", "-o", "libsplit.so"], cwd=own)
    libs["split"] = os.path.join(own, "libsplit.so")
    check(os.path.exists(os.path.join(own, "split.dwo")), "gcc -gsplit-dwarf wrote split.dwo")
    os.unlink(os.path.join(own, "split.dwo"))
    os.mkfifo(os.path.join(own, "split.dwo"))
    fills = os.path.join(d, "fill")
    os.makedirs(fills)
    for dirpath in (d, own, fills):
        os.chmod(dirpath, 0o755)
    for root, dirs, files in os.walk(own):
        for n in dirs + files:
            os.lchown(os.path.join(root, n), NOBODY, NOBODY)
    os.chown(own, NOBODY, NOBODY)
    return victim, filler, fills, libs


def main():
    require_bpf()
    for tool in ("setpriv", "prlimit", "objcopy", "strip"):
        if not shutil.which(tool):
            skip("%s is not installed" % tool)
    d = tmpdir()
    os.chmod(d, 0o755)
    victim, filler, fills, libs = build(d)
    procs = []
    with Daemon("--frequency", "99", "--labels", "pid", prefix=["prlimit", "--nofile=512:512", "--"]) as dm:
        try:
            limit = metric(dm, "profd_process_table_open_files_limit")
            check(limit == 0, "profd keeps no mapped file open under RLIMIT_NOFILE 512 (limit %s)" % limit)
            # And a process of nobody maps many files, as one would to fill a larger budget.
            paths = []
            for i in range(300):
                paths.append(os.path.join(fills, "f%d" % i))
                with open(paths[-1], "wb") as f:
                    f.write(b"not an ELF file %d\n" % i + bytes(4096))
            fp = subprocess.Popen(AS_NOBODY + [filler, *paths], stdout=subprocess.PIPE, text=True)
            procs.append(fp)
            check(fp.stdout.readline().strip() == "mapped", "nobody mapped %d files" % len(paths))

            result = {}

            # The profile is asked for afterwards, as a past window: while a live window is open
            # profd names stacks as they come in (the symbol warmer), which would read each library
            # before its swap and never meet the FIFO, the symlink or the replacement.
            def profile(start, end):
                t = time.monotonic()
                try:
                    result["resp"] = http_get(dm.base + "/debug/pprof/profile?start=%d&end=%d" % (start, end),
                                              timeout=60)
                except OSError as e:
                    result["error"] = repr(e)
                result["seconds"] = time.monotonic() - t

            # The window starts on a whole second once the history has begun (the first drain).
            time.sleep(2)
            window_start = int(time.time()) + 1
            time.sleep(window_start - time.time() + 0.05)
            scen = {"exit_fifo": "exit-fifo", "exit_symlink": "exit-symlink", "exit_replace": "exit-replace",
                    "alive_fifo": "alive-fifo", "debuglink": "alive", "dwz": "alive", "split": "alive"}
            victims = {}
            for name, after in scen.items():
                victims[name] = subprocess.Popen(AS_NOBODY + [victim, libs[name], "%s_spin" % name, str(SPIN_S), after,
                                                              libs["replacement"]],
                                                 stdout=subprocess.PIPE, text=True)
                procs.append(victims[name])
            for name, p in victims.items():
                check(p.stdout.readline().strip() == "done", "%s: ran %s_spin and did its swap" % (name, name))
            for name in ("exit_fifo", "exit_symlink", "exit_replace"):
                victims[name].wait(timeout=10)
            time.sleep(3)  # two drains: every sample of the victims is in the history
            profile(window_start, int(time.time()))
            resp = result.get("resp")
            check(resp is not None and resp[0] == 200,
                  "the profile request completed (%s after %.1f s)" % (resp[:1] + (resp[2][:200],) if resp else result.get("error", "hung"),
                                                                       result.get("seconds", -1)))
            t = time.monotonic()
            try:
                st = http_get(dm.base + "/healthz", timeout=5)[0]
            except OSError as e:
                st = repr(e)
            check(st == 200, "/healthz answers at once after it (%s in %.2f s)" % (st, time.monotonic() - t))

            if resp and resp[0] == 200:
                path = os.path.join(tmpdir(), "cpu.pb.gz")
                with open(path, "wb") as f:
                    f.write(resp[2])
                tr = traces(path)
                stacks = [";".join(x.frames) for x in tr]
                for name in ("debuglink", "dwz", "split"):
                    n = sum(x.value for x in tr if any(f.startswith("%s_spin" % name) for f in x.frames))
                    check(n > 0, "%s: its samples are named %s_spin from the symbol table (%d)" % (name, name, n))
                for name in ("exit_fifo", "exit_symlink", "exit_replace"):
                    want = "[unknown] %s+0x" % libs[name]
                    n = sum(x.value for x in tr if any(f.startswith(want) for f in x.frames))
                    check(n > 0, "%s: its samples are kept, as %s... (%d)" % (name, want, n))
                if not check(not any(re.search(r"exit_(fifo|symlink|replace)_spin|replaced_xx_spin", s) for s in stacks),
                             "no name read from what replaced a library"):
                    log("\n".join(stacks[:40]))

            refusals = {r: metric(dm, "profd_file_open_refusals_total", '{reason="%s"}' % r) or 0
                        for r in ("not_regular", "symlink", "identity_mismatch", "would_block")}
            log("refusals: %s" % refusals)
            # exit-fifo's library, the debuglink and dwz FIFOs (alive-fifo's too unless its maps were
            # read again after the dlclose).
            check(refusals["not_regular"] >= 3, "FIFOs refused as not regular files (%d)" % refusals["not_regular"])
            check(refusals["symlink"] >= 1, "the symlink to /etc/shadow refused (%d)" % refusals["symlink"])
            check(refusals["identity_mismatch"] >= 1,
                  "the replacement refused as another file (%d)" % refusals["identity_mismatch"])
            for reason in ("dwz_file_missing", "split_dwarf"):
                n = metric(dm, "profd_symbolizer_dwarf_unused_total", '{reason="%s"}' % reason) or 0
                check(n >= 1, "DWARF that would make libdw open files itself is not read: %s (%d)" % (reason, n))
        finally:
            for p in procs:
                p.kill()
                p.wait()
        t = time.monotonic()
        dm.proc.send_signal(signal.SIGTERM)
        try:
            dm.proc.wait(timeout=5)
            check(True, "SIGTERM stopped profd in %.2f s" % (time.monotonic() - t))
        except subprocess.TimeoutExpired:
            check(False, "SIGTERM stopped profd within 5 s")
    finish()


if __name__ == "__main__":
    main()
