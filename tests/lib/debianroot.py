"""Debian roots of other releases for tests that check profd against their real programs (CPython
3.9 of Debian 11 "bullseye", 3.13 of Debian 13 "trixie", 3.14 of Debian 14 "forky" (testing), ...).

A root is built once with debootstrap (variant minbase, plus the suite's packages below) from the
Debian archive this machine's own apt uses, and kept under ROOTS_DIR/<suite> for every later run.
It is built in a temporary folder beside its final place and renamed into it only once complete,
so a root that exists is whole; its stamp file names the suite, mirror and packages it was built
with, and a root whose stamp does not match what is asked for is rebuilt. The machine's own apt
configuration and package lists are never touched: debootstrap downloads into the new root only.

Nothing is run inside a base root: tests read its files (ELF binaries, their separate debug info)
from the host. A derived root (ensure_derived: a copy of a base root with more packages, e.g. a JDK
or nodejs, installed by the root's own apt) is where programs run (in_root), as in a container.

  python3 tests/lib/debianroot.py SUITE     # build (or find) the root, print its path

Environment: PROFD_TEST_ROOTS overrides ROOTS_DIR; PROFD_DEBIAN_MIRROR overrides the mirror.
"""
import fcntl
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOTS_DIR = os.environ.get("PROFD_TEST_ROOTS") or "/var/cache/profd-tests/roots"
STAMP = ".profd-root-stamp"
STAMP_VERSION = 1

# Per suite: the packages added to minbase. python3.X-dbg carries the separate debug info
# (/usr/lib/debug/.build-id) of the release's python3.X interpreter next to its own debug build.
SUITES = {
    "bullseye": ["python3", "python3.9-dbg"],
    "trixie": ["python3", "python3.13-dbg"],
    "forky": ["python3", "python3.14-dbg"],
}

# Suites newer than this machine's debootstrap knows get the script of the release they follow
# (Debian 12's debootstrap has none for forky; testing is bootstrapped like sid). debootstrap
# checks the Release file's signature only, not its Valid-Until, so a mirror that serves an expired
# testing Release still works.
SCRIPTS = {
    "forky": "sid",
}


class RootUnavailable(Exception):
    """The root is not there and cannot be built here (no debootstrap, no archive, not root)."""


def host_mirror():
    """The Debian archive (not the security one) that this machine's apt uses, as a URL."""
    override = os.environ.get("PROFD_DEBIAN_MIRROR")
    if override:
        return override
    files = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*"))
    for path in files:
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            # one-line format: deb [opts] URI suite comp...; deb822: URIs: URI...
            if words[:1] == ["deb"]:
                uris = [w for w in words[1:] if "://" in w][:1]
            elif words[:1] == ["URIs:"]:
                uris = words[1:]
            else:
                continue
            for uri in uris:
                u = uri.rstrip("/")
                if u.endswith("/debian") and "security" not in u:
                    return u
    return "http://deb.debian.org/debian"


def _stamp_text(suite, mirror):
    return "version=%d\nsuite=%s\nmirror=%s\npackages=%s\n" % (
        STAMP_VERSION, suite, mirror, ",".join(SUITES[suite]))


def _stamp_matches(root, suite, mirror):
    try:
        with open(os.path.join(root, STAMP)) as f:
            have = f.read()
    except OSError:
        return False
    # The mirror a root came from does not change what is in it: a root built from another
    # mirror of the same archive is as good.
    want = _stamp_text(suite, mirror)
    strip = lambda t: [l for l in t.splitlines() if not l.startswith(("mirror=", "built="))]
    return strip(have) == strip(want)


def _archive_reachable(mirror, suite):
    url = "%s/dists/%s/Release" % (mirror, suite)
    try:
        with urllib.request.urlopen(url, timeout=15) as r:
            r.read(64)
        return None
    except (urllib.error.URLError, OSError) as e:
        return "%s: %s" % (url, e)


def _unmount_under(path):
    """debootstrap mounts proc and sys in the new root while it runs; one that died may leave them,
    and the folder must never be removed through them."""
    with open("/proc/self/mountinfo") as f:
        points = [l.split()[4] for l in f]
    for p in sorted((p for p in points if p.startswith(path + "/")), reverse=True):
        subprocess.run(["umount", "-l", p], stderr=subprocess.DEVNULL)


def ensure_roots(suites, log=print):
    """({suite: path} of those that are there or could be built, ["suite (why not)"] of the others)."""
    roots, missing = {}, []
    for suite in suites:
        try:
            roots[suite] = ensure_root(suite, log)
        except RootUnavailable as e:
            missing.append("%s (%s)" % (suite, e))
    return roots, missing


def ensure_root(suite, log=print):
    """Path of the cached root of suite, building it first if needed (a few minutes, once).
    Raises RootUnavailable when it is absent and cannot be built."""
    if suite not in SUITES:
        raise ValueError("unknown suite %r (known: %s)" % (suite, ", ".join(SUITES)))
    mirror = host_mirror()
    root = os.path.join(ROOTS_DIR, suite)
    if _stamp_matches(root, suite, mirror):
        return root
    if os.geteuid() != 0:
        raise RootUnavailable("building the %s root needs root (debootstrap)" % suite)
    if not shutil.which("debootstrap"):
        raise RootUnavailable("debootstrap is missing (apt-get install debootstrap)")
    os.makedirs(ROOTS_DIR, mode=0o755, exist_ok=True)
    # One builder at a time per suite; whoever waited finds the root the other one built.
    with open(os.path.join(ROOTS_DIR, ".%s.lock" % suite), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _stamp_matches(root, suite, mirror):
            return root
        # Left by a builder that was killed (the lock says none is running now).
        for stale in glob.glob(os.path.join(ROOTS_DIR, ".%s.build-*" % suite)) + \
                glob.glob(os.path.join(ROOTS_DIR, ".%s.old-*" % suite)):
            _unmount_under(stale)
            if os.path.isdir(stale):
                shutil.rmtree(stale, ignore_errors=True)
            else:
                os.unlink(stale)
        why = _archive_reachable(mirror, suite)
        if why:
            raise RootUnavailable("Debian archive not reachable: " + why)
        tmp = tempfile.mkdtemp(prefix=".%s.build-" % suite, dir=ROOTS_DIR)
        try:
            log("debianroot: debootstrap %s (minbase + %s) from %s into %s" % (
                suite, " ".join(SUITES[suite]), mirror, tmp))
            t0 = time.monotonic()
            logpath = tmp + ".log"
            with open(logpath, "w") as out:
                argv = ["debootstrap", "--variant=minbase", "--include=" + ",".join(SUITES[suite]),
                        suite, os.path.join(tmp, "root"), mirror]
                script = SCRIPTS.get(suite)
                if script and not os.path.exists("/usr/share/debootstrap/scripts/" + suite):
                    argv.append("/usr/share/debootstrap/scripts/" + script)
                rc = subprocess.run(argv,
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
            if rc != 0:
                with open(logpath) as f:
                    tail = f.read()[-2000:]
                raise RootUnavailable("debootstrap %s failed (exit %d):\n%s" % (suite, rc, tail))
            built = os.path.join(tmp, "root")
            # Downloaded .debs are not needed to read the root's files.
            for deb in glob.glob(os.path.join(built, "var/cache/apt/archives/*.deb")):
                os.unlink(deb)
            with open(os.path.join(built, STAMP), "w") as f:
                f.write(_stamp_text(suite, mirror) + "built=%s\n" % time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            if os.path.lexists(root):  # stale (other packages or stamp version): replaced whole
                old = tempfile.mkdtemp(prefix=".%s.old-" % suite, dir=ROOTS_DIR)
                os.rename(root, os.path.join(old, "root"))
                shutil.rmtree(old, ignore_errors=True)
            os.rename(built, root)
            log("debianroot: %s root ready in %.0f s at %s" % (suite, time.monotonic() - t0, root))
            return root
        finally:
            _unmount_under(tmp)
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                os.unlink(tmp + ".log")
            except OSError:
                pass


def in_root(root, argv, **kw):
    """argv run with root as / in a mount namespace of its own with /proc (and /dev) bound inside;
    exec'd, so the returned process is the program's."""
    script = ('mount --bind /proc "$1/proc" && mount --bind /dev "$1/dev" && root="$1" && shift && '
              'exec chroot "$root" "$@"')
    # The caller's TMPDIR is a folder of this machine, not of the root (apt's maintainer scripts
    # would fail to make their temporary files there).
    env = dict(kw.pop("env", None) or os.environ)
    env.pop("TMPDIR", None)
    return subprocess.Popen(["unshare", "-m", "sh", "-c", script, "sh", root] + argv, env=env, **kw)


def ensure_derived(suite, kind, packages, log=print):
    """ROOTS_DIR/<suite>-<kind>: a copy of the suite's base root (never modified itself) with
    packages installed by the root's own apt; cached, and made again when the package set grew.
    Raises RootUnavailable when it cannot be made."""
    dst = os.path.join(ROOTS_DIR, "%s-%s" % (suite, kind))
    stamp = ".profd-" + kind
    want = " ".join(sorted(packages))
    try:
        with open(os.path.join(dst, stamp)) as f:
            if set(f.read().split()) >= set(packages):
                return dst
    except OSError:
        pass
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise RootUnavailable("making the %s-%s root needs root and unshare" % (suite, kind))
    # The base root is built first when no other test has (a new machine).
    src = ensure_root(suite, log=log)
    tmp = dst + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    log("making %s: a copy of %s with %s (once; cached)" % (dst, src, want))
    subprocess.run(["cp", "-a", src, tmp], check=True)
    shutil.copy("/etc/resolv.conf", os.path.join(tmp, "etc/resolv.conf"))
    # A testing suite's Release file may be past its Valid-Until between two archive pushes.
    p = in_root(tmp, ["sh", "-c", "apt-get -o Acquire::Check-Valid-Until=false update && "
                      "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends %s && "
                      "apt-get clean" % want], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.communicate()[0]
    if p.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RootUnavailable("apt-get in the %s root failed: %s" % (suite, out[-500:]))
    with open(os.path.join(tmp, stamp), "w") as f:
        f.write(want + "\n")
    shutil.rmtree(dst, ignore_errors=True)
    os.rename(tmp, dst)
    return dst


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: debianroot.py SUITE   (suites: %s)" % ", ".join(SUITES))
    try:
        print(ensure_root(sys.argv[1], log=lambda *a: print(*a, file=sys.stderr)))
    except RootUnavailable as e:
        sys.exit("debianroot: %s" % e)
