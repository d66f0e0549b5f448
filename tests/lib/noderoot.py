"""Debian's newer Node.js builds for tests of profd's V8 support: nodejs 20 of Debian 13 "trixie"
and nodejs 24 of Debian 14 "forky" (testing), each installed by the root's own apt into a copy of
the Debian root of its release (tests/lib/debianroot.py; that root is never modified), made once
and cached as ROOTS_DIR/<suite>-node. Node runs there with the root as its / in a mount namespace
of its own (/proc and /dev bound inside), as in a container.

  python3 tests/lib/noderoot.py SUITE     # make (or find) the root, print its path
"""
import os
import shutil
import subprocess
import sys

import debianroot

ROOTS = debianroot.ROOTS_DIR
STAMP = ".profd-node"
# libc6-dbg: the separate debug info of the release's libc (start_thread, clone named).
PACKAGES = ["nodejs", "libc6-dbg"]


class RootUnavailable(Exception):
    """The root cannot be made here (archive unreachable, no root, ...)."""


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


def ensure(suite, log=print):
    """ROOTS/suite-node with nodejs installed (cached; rebuilt when the package set changed)."""
    dst = os.path.join(ROOTS, suite + "-node")
    want = " ".join(sorted(PACKAGES))
    try:
        with open(os.path.join(dst, STAMP)) as f:
            if set(f.read().split()) >= set(PACKAGES):
                return dst
    except OSError:
        pass
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise RootUnavailable("needs root and unshare")
    try:
        src = debianroot.ensure_root(suite, log=log)
    except debianroot.RootUnavailable as e:
        raise RootUnavailable("the %s root cannot be made: %s" % (suite, e))
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
    with open(os.path.join(tmp, STAMP), "w") as f:
        f.write(want + "\n")
    shutil.rmtree(dst, ignore_errors=True)
    os.rename(tmp, dst)
    return dst


if __name__ == "__main__":
    try:
        print(ensure(sys.argv[1], log=lambda *a: print(*a, file=sys.stderr)))
    except RootUnavailable as e:
        print("unavailable: %s" % e, file=sys.stderr)
        sys.exit(1)
