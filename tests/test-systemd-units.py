#!/usr/bin/env python3
"""The units as `meson install` puts them: every file where systemd and man look for it,
`systemd-analyze verify` without a single warning, and `systemd-analyze security` exposure at or
below 4.0 and equal to the figure docs/systemd.md records."""
import glob
import os
import re
import shutil
import subprocess
import textwrap

from profdtest import BUILD, SRC, check, finish, log, skip, tmpdir

MAX_EXPOSURE = 4.0


def run(cmd, **kw):
    log("$ " + " ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.stdout.strip():
        log(r.stdout.rstrip())
    if r.stderr.strip():
        log(r.stderr.rstrip())
    return r


def main():
    if not shutil.which("systemd-analyze"):
        skip("systemd-analyze (package systemd) is not installed")

    dest = tmpdir()
    r = run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet", "--destdir", dest])
    if not check(r.returncode == 0, "meson install --destdir succeeds"):
        finish()

    def installed(pattern):
        hits = glob.glob(os.path.join(dest, pattern), recursive=True)
        return hits[0] if hits else None

    service = installed("**/systemd/system/profd.service")
    socket_unit = installed("**/systemd/system/profd.socket")
    defaults = os.path.join(dest, "etc/default/profd")
    manpage = installed("**/man/man8/profd.8")
    check(service is not None, "profd.service installed into systemd's unit directory")
    check(socket_unit is not None, "profd.socket installed into systemd's unit directory")
    check(os.path.exists(defaults), "defaults file installed as /etc/default/profd")
    check(manpage is not None, "profd(8) installed under man8")
    if not service or not socket_unit or not manpage:
        finish()

    try:
        pc = subprocess.run(["pkg-config", "--variable=systemdsystemunitdir", "systemd"], capture_output=True,
                            text=True).stdout.strip()
    except OSError:
        pc = ""
    unitdir = pc or "/lib/systemd/system"
    check(service == dest + unitdir + "/profd.service", "unit directory is pkg-config's %s" % unitdir)

    with open(service) as f:
        unit = f.read()
    execstart = re.search(r"^ExecStart=(\S+)", unit, re.M).group(1)
    check(os.access(dest + execstart, os.X_OK), "ExecStart= names the installed binary %s" % execstart)
    check("EnvironmentFile=-/etc/default/profd" in unit, "options come from /etc/default/profd")
    with open(defaults) as f:
        check(re.search(r"^PROFD_OPTS=", f.read(), re.M) is not None, "defaults file sets PROFD_OPTS")

    # verify checks that ExecStart= exists and that `man profd.8` resolves: show it the installed
    # tree without touching the host, by bind-mounting the installed sbin over the real one in a
    # private mount namespace.
    sbindir = os.path.dirname(execstart)
    env = dict(os.environ, MANPATH=os.path.dirname(os.path.dirname(manpage)), SYSTEMD_LOG_COLOR="0")
    if os.path.isdir(sbindir) and shutil.which("unshare"):
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount --bind "$1" "$2" && exec systemd-analyze verify "$3" "$4"', "sh",
               dest + sbindir, sbindir, service, socket_unit]
    else:
        skip("cannot present %s to systemd-analyze verify (no such directory or no unshare)" % sbindir)
    r = run(cmd, env=env)
    check(r.returncode == 0, "systemd-analyze verify exits 0")
    check(r.stdout.strip() == "" and r.stderr.strip() == "", "systemd-analyze verify prints no warnings")
    check(re.search(r"^ExecReload=/bin/kill -HUP \$MAINPID$", unit, re.M) is not None,
          "systemctl reload sends SIGHUP (re-reads TLS files and token)")

    # The LoadCredential= drop-in docs/security.md gives for TLS files and the token, as written
    # there (ExecStart= pointed at this install's binary), must verify cleanly too.
    with open(os.path.join(SRC, "docs", "security.md")) as f:
        blocks = re.findall(r"```ini\n(.*?)```", f.read(), re.S)
    dropin = next((textwrap.dedent(b) for b in blocks if "LoadCredential=" in b), None)
    if check(dropin is not None and "${CREDENTIALS_DIRECTORY}/token" in dropin,
             "docs/security.md has a LoadCredential= drop-in passing the token file"):
        dropin = re.sub(r"^ExecStart=/\S+/profd ", "ExecStart=%s " % execstart, dropin, flags=re.M)
        os.makedirs(service + ".d", exist_ok=True)
        with open(os.path.join(service + ".d", "credentials.conf"), "w") as f:
            f.write(dropin)
        r = run(cmd, env=env)  # the units again, the service now with its drop-in
        check(r.returncode == 0 and r.stdout.strip() == "" and r.stderr.strip() == "",
              "systemd-analyze verify: the documented credentials drop-in loads without a warning")
        shutil.rmtree(service + ".d")

    r = run(["systemd-analyze", "security", "--no-pager", "--offline=true", service], env=env)
    m = re.search(r"Overall exposure level for profd\.service: ([0-9.]+)", r.stdout + r.stderr)
    if check(m is not None, "systemd-analyze security reports an exposure level"):
        score = float(m.group(1))
        log("exposure: %.1f" % score)
        check(score <= MAX_EXPOSURE, "exposure %.1f <= %.1f" % (score, MAX_EXPOSURE))
        with open(os.path.join(SRC, "docs", "systemd.md")) as f:
            doc = f.read().replace("\\|", "|")  # table cells escape the pipes of names
        recorded = re.search(r"[Ee]xposure[^\n]*?\*\*([0-9.]+)\*\*", doc)
        check(recorded is not None and recorded.group(1) == m.group(1),
              "docs/systemd.md records the measured exposure %s (has %s)" %
              (m.group(1), recorded.group(1) if recorded else None))
        # Every remaining exposure (lines marked with a cross) must be explained in the docs.
        for line in (r.stdout + r.stderr).splitlines():
            mm = re.match(r"^✗ (\S+)", line.strip())
            if mm:
                check("`" + mm.group(1) + "`" in doc, "docs/systemd.md explains remaining exposure %s" % mm.group(1))
    finish()


if __name__ == "__main__":
    main()
