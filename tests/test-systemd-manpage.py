#!/usr/bin/env python3
"""profd(8) renders without troff warnings and documents every flag `profd --help` lists, every
endpoint, and every metric family the running daemon exports on /metrics."""
import os
import re
import shutil
import subprocess

from profdtest import PROFD, SRC, Daemon, check, finish, log, require_bpf, skip

MANPAGE = os.path.join(SRC, "systemd", "profd.8")


def plain(troff):
    """Man source to searchable text: drop font escapes, unescape hyphens."""
    t = re.sub(r"\\f[BIRP]|\\f\(..|\\&|\\%", "", troff)
    return t.replace("\\-", "-").replace("\\(em", "-")


def main():
    require_bpf()
    if not os.path.exists(PROFD):
        skip("profd is not built")
    with open(MANPAGE) as f:
        man = plain(f.read())

    if shutil.which("groff"):
        r = subprocess.run(["groff", "-man", "-ww", "-z", "-Tutf8", MANPAGE], capture_output=True, text=True)
        check(r.returncode == 0 and r.stderr.strip() == "", "groff renders profd.8 without warnings %r" % r.stderr[-500:])
    else:
        log("(groff not installed: rendering not checked)")

    r = subprocess.run([PROFD, "--help"], capture_output=True, text=True)
    check(r.returncode == 0, "profd --help exits 0")
    flags = sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]+)", r.stdout)))
    log("flags: " + " ".join(flags))
    check(len(flags) >= 5, "profd --help lists its flags")
    for fl in flags:
        check(re.search(re.escape(fl) + r"(?![\w-])", man) is not None, "profd(8) documents %s" % fl)

    endpoints = sorted(set(re.findall(r"(/[a-z][a-z/]*)", r.stdout.split("Endpoints:", 1)[-1])))
    log("endpoints: " + " ".join(endpoints))
    check(len(endpoints) >= 3, "profd --help lists its endpoints")
    for ep in endpoints:
        check(ep in man, "profd(8) documents endpoint %s" % ep)

    with Daemon() as d:
        st, _, body = d.get("/metrics", timeout=30)
    check(st == 200, "/metrics answers 200")
    families = sorted(set(re.findall(r"^# TYPE (\S+) ", body.decode(), re.M)))
    log("%d metric families" % len(families))
    check(len(families) > 5, "/metrics exports metric families with # TYPE lines")
    for fam in families:
        check(re.search(r"(?<![\w])" + re.escape(fam) + r"(?![\w])", man) is not None,
              "profd(8) documents metric %s" % fam)
    for name in sorted(set(re.findall(r"\bprofd_[a-z][a-z0-9_]*", man))):
        check(name in families, "metric %s in profd(8) is still exported" % name)
    finish()


if __name__ == "__main__":
    main()
