"""Debian's own Node.js for tests of profd's V8 support (the machine's /usr/bin/node may be another
build). Debian 12's nodejs 18 (packages nodejs and libnode108, and the three node-* packages whose
files its libnode loads at start) is downloaded once with apt-get, using a private sources list and
private package lists and cache under NODE_DIR (the machine's apt configuration is never touched),
and unpacked there with dpkg -x. The libraries it needs besides are Debian 12's, this machine's own.

Its libnode reads those node-* files from /usr/share/nodejs, a path compiled in: node runs in a
private mount namespace where that folder is the unpacked one (bind mount, gone with the process).

  python3 tests/lib/debiannode.py     # download (or find) it, print its folder
"""
import os
import shutil
import subprocess
import sys

NODE_DIR = os.environ.get("PROFD_TEST_NODE18") or "/var/cache/profd-tests/node18"
MIRROR = os.environ.get("PROFD_DEBIAN_MIRROR") or "http://deb.debian.org/debian"
SECURITY = "http://deb.debian.org/debian-security"
PACKAGES = ["nodejs=18.*", "libnode108", "node-acorn", "node-cjs-module-lexer", "node-undici"]
LIB = "usr/lib/x86_64-linux-gnu"
STAMP = ".profd-node-stamp"


class NodeUnavailable(Exception):
    """Debian's node 18 is not there and cannot be downloaded here."""


def _apt(base, *args):
    opts = ["-o", "Dir::Etc::SourceList=" + os.path.join(base, "sources.list"),
            "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", "Dir::State::Lists=" + os.path.join(base, "lists"),
            "-o", "Dir::Cache=" + os.path.join(base, "cache"),
            "-o", "APT::Architecture=amd64", "-o", "APT::Sandbox::User=root"]
    return subprocess.run(["apt-get", "-q"] + opts + list(args), cwd=os.path.join(base, "debs"),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)


def ensure_node18(log=print):
    """The folder Debian's node 18 is unpacked in (root/ under it)."""
    if os.path.exists(os.path.join(NODE_DIR, STAMP)):
        return NODE_DIR
    if os.uname().machine != "x86_64" or os.geteuid() != 0 or not shutil.which("apt-get"):
        raise NodeUnavailable("needs root and apt-get on x86-64")
    tmp = NODE_DIR + ".new"
    shutil.rmtree(tmp, ignore_errors=True)
    for d in ("lists/partial", "cache/archives/partial", "debs"):
        os.makedirs(os.path.join(tmp, d))
    with open(os.path.join(tmp, "sources.list"), "w") as f:
        f.write("deb %s bookworm main\ndeb %s bookworm-security main\n" % (MIRROR, SECURITY))
    log("downloading Debian 12's nodejs 18 into " + NODE_DIR)
    r = _apt(tmp, "update")
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise NodeUnavailable("apt-get update of bookworm failed: " + r.stdout[-500:])
    r = _apt(tmp, "download", *PACKAGES)
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise NodeUnavailable("apt-get download failed: " + r.stdout[-500:])
    debs = os.path.join(tmp, "debs")
    for deb in sorted(os.listdir(debs)):
        subprocess.run(["dpkg", "-x", os.path.join(debs, deb), os.path.join(tmp, "root")], check=True)
    open(os.path.join(tmp, STAMP), "w").write(" ".join(PACKAGES) + "\n")
    shutil.rmtree(NODE_DIR, ignore_errors=True)
    os.rename(tmp, NODE_DIR)
    return NODE_DIR


HEADERS_DIR = os.environ.get("PROFD_TEST_NODE18_HEADERS") or "/var/cache/profd-tests/node18-dev"


def ensure_node18_headers(base, log=print):
    """The include folder of Debian 12's libnode-dev 18 (node_api.h and what it includes, for
    N-API addons built by tests with gcc alone), downloaded once with base's private package lists
    and unpacked under HEADERS_DIR (base itself is left as it is)."""
    include = os.path.join(HEADERS_DIR, "root", "usr", "include", "node")
    if os.path.exists(os.path.join(HEADERS_DIR, STAMP)):
        return include
    tmp = HEADERS_DIR + ".new"
    shutil.rmtree(tmp, ignore_errors=True)
    for d in ("cache/archives/partial", "debs"):
        os.makedirs(os.path.join(tmp, d))
    log("downloading Debian 12's libnode-dev 18 into " + HEADERS_DIR)
    opts = ["-o", "Dir::Etc::SourceList=" + os.path.join(base, "sources.list"),
            "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", "Dir::State::Lists=" + os.path.join(base, "lists"),
            "-o", "Dir::Cache=" + os.path.join(tmp, "cache"),
            "-o", "APT::Architecture=amd64", "-o", "APT::Sandbox::User=root"]
    r = subprocess.run(["apt-get", "-q"] + opts + ["download", "libnode-dev=18.*"], cwd=os.path.join(tmp, "debs"),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise NodeUnavailable("apt-get download libnode-dev failed: " + r.stdout[-500:])
    debs = os.path.join(tmp, "debs")
    for deb in sorted(os.listdir(debs)):
        subprocess.run(["dpkg", "-x", os.path.join(debs, deb), os.path.join(tmp, "root")], check=True)
    open(os.path.join(tmp, STAMP), "w").write("libnode-dev=18.*\n")
    shutil.rmtree(HEADERS_DIR, ignore_errors=True)
    os.rename(tmp, HEADERS_DIR)
    return include


def libnode(base):
    return os.path.join(base, "root", LIB, "libnode.so.108")


def make_mount_target():
    """Makes /usr/share/nodejs, where command() binds the unpacked files in node's own mount
    namespace, when this machine has none; True when it was made (remove_mount_target)."""
    if os.path.isdir("/usr/share/nodejs"):
        return False
    os.makedirs("/usr/share/nodejs")
    return True


def remove_mount_target(created):
    if created:
        os.rmdir("/usr/share/nodejs")


def command(base, args):
    """argv running Debian's node 18 with args (in its own mount namespace, see above)."""
    root = os.path.join(base, "root")
    script = 'mount --bind "$1/usr/share/nodejs" /usr/share/nodejs && shift && exec "$@"'
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", root,
            "env", "LD_LIBRARY_PATH=" + os.path.join(root, LIB), os.path.join(root, "usr/bin/node")] + list(args)


if __name__ == "__main__":
    try:
        print(ensure_node18(log=lambda *a: print(*a, file=sys.stderr)))
    except NodeUnavailable as e:
        print("unavailable: %s" % e, file=sys.stderr)
        sys.exit(1)
