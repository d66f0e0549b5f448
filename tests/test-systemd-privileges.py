#!/usr/bin/env python3
"""Least privilege: profd as an unprivileged user holding exactly the capabilities profd.service
grants (AmbientCapabilities=) still samples, unwinds and names another user's process whose binary
only that user can read, and another user's Python program (its frames are read from that
process's memory, through profd's reader child); without any one of those capabilities it exits 1 with one line naming it.
An unsupported kernel (no BTF, too old) is likewise one line and exit 1."""
import os
import re
import shutil
import subprocess
import time

from profdtest import (BUILD, PROFD, Daemon, cc, check, fetch_profile, finish, free_port, log, require_bpf, skip, tmpdir,
                       traces)

PROFD_UID = 61234   # stands in for the unit's DynamicUser
VICTIM_UID = 61235  # some other user

# -O0: every function, the leaf too, keeps a frame pointer (gcc omits it in leaves otherwise).
VICTIM = r"""
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) unsigned long victim_leaf(unsigned long x)
{
        for (int i = 0; i < 200000; i++)
                x = x * 6364136223846793005UL + 1442695040888963407UL;
        return x;
}
__attribute__((noinline)) unsigned long victim_mid(unsigned long x)
{
        x = victim_leaf(x);
        __asm__ volatile("" ::: "memory");
        return x + 1;
}
int main(int argc, char **argv)
{
        time_t end = time(NULL) + atoi(argv[1]);
        volatile unsigned long acc = 1;
        while (time(NULL) < end)
                acc = victim_mid(acc);
        return (int)(acc & 0);
}
"""


def unit_capabilities():
    unit = os.path.join(BUILD, "systemd", "profd.service")
    with open(unit) as f:
        text = f.read()
    amb = re.search(r"^AmbientCapabilities=(.*)$", text, re.M).group(1).split()
    bnd = re.search(r"^CapabilityBoundingSet=(.*)$", text, re.M).group(1).split()
    return amb, bnd


def setpriv(uid, caps):
    names = ",".join("+" + c.lower().removeprefix("cap_") for c in caps)
    capset = "-all" + ("," + names if names else "")
    return ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups",
            "--inh-caps=" + capset, "--ambient-caps=" + capset, "--bounding-set=" + capset]


def kallsyms_needs_syslog():
    def rd(p, default):
        try:
            with open(p) as f:
                return int(f.read().split()[0])
        except (OSError, ValueError):
            return default
    return not (rd("/proc/sys/kernel/kptr_restrict", 1) == 0 and rd("/proc/sys/kernel/perf_event_paranoid", 2) <= 1)


def main():
    require_bpf()
    if not os.path.exists(PROFD):
        skip("profd is not built")
    if not shutil.which("setpriv"):
        skip("setpriv (util-linux) is not installed")

    amb, bnd = unit_capabilities()
    log("unit capabilities: %s" % " ".join(amb))
    check(sorted(amb) == sorted(bnd), "AmbientCapabilities= and CapabilityBoundingSet= name the same set")

    # A private copy the unprivileged user can execute (the build tree may not be reachable).
    d = tmpdir()
    os.chmod(d, 0o755)
    binary = os.path.join(d, "profd")
    shutil.copy(PROFD, binary)
    os.chmod(binary, 0o755)

    # Check that setpriv really yields exactly these capabilities for the unprivileged user.
    r = subprocess.run(setpriv(PROFD_UID, amb) + ["grep", "-E", "^(Uid|CapEff|CapAmb)", "/proc/self/status"],
                       capture_output=True, text=True)
    log(r.stdout + r.stderr)
    if r.returncode != 0:
        skip("setpriv cannot grant these capabilities here: " + r.stderr.strip())

    # The victim: another user's process whose binary is readable by that user only, so profd needs
    # CAP_DAC_READ_SEARCH for its symbols and CAP_SYS_PTRACE for its maps.
    vdir = os.path.join(d, "victim")
    os.mkdir(vdir)
    victim = cc(VICTIM, os.path.join(vdir, "lp-victim"), flags=("-O0", "-g", "-fno-omit-frame-pointer"))
    os.remove(victim + ".c")
    os.chown(vdir, VICTIM_UID, VICTIM_UID)
    os.chmod(vdir, 0o700)
    os.chown(victim, VICTIM_UID, VICTIM_UID)
    os.chmod(victim, 0o700)

    as_victim = ["setpriv", "--reuid=%d" % VICTIM_UID, "--regid=%d" % VICTIM_UID, "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all"]
    # Both victims outlast profd's start-up on a loaded machine (10 s and more: BPF verification);
    # they are killed once the profile is in.
    vproc = subprocess.Popen(as_victim + [victim, "60"])
    pyproc = None
    if os.path.exists("/usr/bin/python3.11"):
        script = os.path.join(vdir, "lp_victim.py")
        with open(script, "w") as f:
            f.write("import time\ndef victim_py():\n    end = time.monotonic() + 60\n"
                    "    while time.monotonic() < end:\n        pass\nvictim_py()\n")
        os.chown(script, VICTIM_UID, VICTIM_UID)
        os.chmod(script, 0o600)
        pyproc = subprocess.Popen(as_victim + ["/usr/bin/python3.11", script])
    try:
        with Daemon(prefix=setpriv(PROFD_UID, amb), binary=binary) as dm:
            with open("/proc/%d/status" % dm.proc.pid) as f:
                st = f.read()
            uid = re.search(r"^Uid:\s+(\d+)", st, re.M).group(1)
            check(uid == str(PROFD_UID), "profd runs as uid %d (got %s)" % (PROFD_UID, uid))
            time.sleep(0.5)
            prof = fetch_profile(dm, 3)
            ts = traces(prof)
            mine = [t for t in ts if t.labels.get("pid") == [str(vproc.pid)]]
            log("victim traces: %r" % mine[:3])
            check(sum(t.value for t in mine) > 0,
                  "the profile contains the other user's process (pid %d)" % vproc.pid)
            check(any(t.frames[:3] == ["victim_leaf", "victim_mid", "main"] for t in mine),
                  "its stack is unwound and named: victim_leaf <- victim_mid <- main")
            if pyproc:
                py = [t for t in ts if t.labels.get("pid") == [str(pyproc.pid)]]
                named = sum(t.value for t in py if "lp_victim.victim_py" in t.frames)
                total = sum(t.value for t in py)
                log("python victim traces: %r" % py[:2])
                check(total > 0 and named >= 0.9 * total,
                      "the other user's Python frames are named: lp_victim.victim_py in %d of %d samples"
                      % (named, total))
    finally:
        vproc.kill()
        vproc.wait()
        if pyproc:
            pyproc.kill()
            pyproc.wait()

    # Each capability is needed: without it, one clear line and exit 1.
    for cap in amb:
        if cap == "CAP_SYSLOG" and not kallsyms_needs_syslog():
            log("(kptr_restrict=0 and perf_event_paranoid<=1 here: CAP_SYSLOG is not needed on this host)")
            continue
        caps = [c for c in amb if c != cap]
        cmd = setpriv(PROFD_UID, caps) + [binary, "--http-address", "127.0.0.1:%d" % free_port()]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            rc, out = r.returncode, r.stdout + r.stderr
        except subprocess.TimeoutExpired as e:
            rc, out = "timeout", (e.stdout or b"").decode() + (e.stderr or b"").decode()
        lines = [l for l in out.splitlines() if "missing capability " + cap in l]
        check(rc == 1, "without %s: exit code 1 (got %s)" % (cap, rc))
        check(len(lines) == 1, "without %s: one line naming it: %r" % (cap, lines or out[-300:]))

    # An unsupported kernel is one clear line and exit 1 too: no BTF (hidden by an empty tmpfs in a
    # private mount namespace), and a kernel too old (uname reports 2.6.x under UNAME26).
    unsupported = {
        "no BTF": ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                   'mount -t tmpfs none /sys/kernel/btf && exec "$@"', "sh"],
        "old kernel": ["setarch", os.uname().machine, "--uname-2.6"],
    }
    for what, prefix in unsupported.items():
        cmd = prefix + [binary, "--http-address", "127.0.0.1:%d" % free_port()]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        lines = [l for l in (r.stdout + r.stderr).splitlines() if "unsupported kernel" in l]
        log("%s: %r" % (what, lines))
        check(r.returncode == 1, "%s: exit code 1 (got %d)" % (what, r.returncode))
        check(len(lines) == 1, "%s: one line saying the kernel is unsupported" % what)
    finish()


if __name__ == "__main__":
    main()
