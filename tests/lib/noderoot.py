"""Debian's newer Node.js builds for tests of profd's V8 support: nodejs 20 of Debian 13 "trixie"
and nodejs 24 of Debian 14 "forky" (testing), each installed by the root's own apt into a copy of
the Debian root of its release (tests/lib/debianroot.py; that root is never modified), made once
and cached as ROOTS_DIR/<suite>-node. Node runs there with the root as its / in a mount namespace
of its own (/proc and /dev bound inside), as in a container.

  python3 tests/lib/noderoot.py SUITE     # make (or find) the root, print its path
"""
import sys

import debianroot

# libc6-dbg: the separate debug info of the release's libc (start_thread, clone named).
PACKAGES = ["nodejs", "libc6-dbg"]

RootUnavailable = debianroot.RootUnavailable
in_root = debianroot.in_root


def ensure(suite, log=print):
    """ROOTS_DIR/suite-node with nodejs installed (cached; rebuilt when the package set changed)."""
    return debianroot.ensure_derived(suite, "node", PACKAGES, log=log)


if __name__ == "__main__":
    try:
        print(ensure(sys.argv[1], log=lambda *a: print(*a, file=sys.stderr)))
    except RootUnavailable as e:
        print("unavailable: %s" % e, file=sys.stderr)
        sys.exit(1)
