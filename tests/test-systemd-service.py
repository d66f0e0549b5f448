#!/usr/bin/env python3
"""profd.service and profd.socket run by a real systemd: the installed units, unmodified but for
where stdout goes, under a private systemd (PID 1 of new PID and mount namespaces, a unit path
holding only empty targets and profd's units). Checks that the whole sandbox (DynamicUser, ambient
capabilities, ProtectSystem=, ReadOnlyPaths=, seccomp filter ...) still lets profd load BPF, sample,
read /proc/kallsyms and serve; Type=notify readiness, STATUS=, watchdog pings, a restart when the
pings stop, a clean stop, socket activation, and a missing capability named in `systemctl status`.

Not checked here: symbols of user processes. The private systemd lives in a child PID namespace, so
the fresh /proc the sandbox mounts for profd shows that namespace's pids, while BPF reports the
host's; test-systemd-privileges.py covers user stacks under the unit's privileges."""
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import time

from profdtest import (BUILD, check, finish, free_port, http_get, log, require_bpf, skip, tmpdir, wait_healthy)

SYSTEMD = "/lib/systemd/systemd"
CAP_BITS = {"CAP_DAC_READ_SEARCH": 2, "CAP_SYS_PTRACE": 19, "CAP_SYSLOG": 34, "CAP_PERFMON": 38, "CAP_BPF": 39,
            "CAP_CHECKPOINT_RESTORE": 40}
# Targets the units (and DefaultDependencies=) refer to; empty, so nothing else starts.
TARGETS = ["sysinit", "basic", "shutdown", "network", "multi-user", "sockets", "local-fs", "paths", "timers",
           "slices"]


def cgroup_dirs():
    out = set()
    for root in glob.glob("/sys/fs/cgroup") + glob.glob("/sys/fs/cgroup/*/"):
        for dirpath, dirnames, _ in os.walk(root):
            out.add(os.path.normpath(dirpath))
    return out


# CacheDirectory=profd (debug files from debuginfod): systemd makes these on the host's /var.
CACHE_PATHS = ["/var/cache/profd", "/var/cache/private/profd", "/var/cache/private"]


def private_tmp_dirs():
    return set(glob.glob("/tmp/systemd-private-*-profd.service-*") +
               glob.glob("/var/tmp/systemd-private-*-profd.service-*"))


class PrivateSystemd:
    def __init__(self, dest, unitdir, defaults_dir, sbindir):
        self.dest, self.unitdir, self.defaults_dir, self.sbindir = dest, unitdir, defaults_dir, sbindir
        self.proc = None
        self.pid1 = None

    def __enter__(self):
        self.cgroups_before = cgroup_dirs()
        self.private_tmp_before = private_tmp_dirs()
        self.cache_before = [p for p in CACHE_PATHS if os.path.lexists(p)]
        # A /proc of the new PID namespace: with the host's, this systemd took a pid of the namespace
        # for the host's process of that number ("Supervising process N which is not our child"),
        # and when N was a thread of profd's, the stop killed profd with SIGKILL.
        script = ('mount -t proc proc /proc && '
                  'mount --bind "$1" "$2" && mount --bind "$3" /etc/default && mount -t tmpfs tmpfs /run && '
                  'exec env -i container=profd-test SYSTEMD_UNIT_PATH="$4" PATH=/usr/sbin:/usr/bin:/sbin:/bin '
                  '"$5" --system --unit=profd-test.target --log-target=kmsg --log-level=notice --show-status=no')
        cmd = ["unshare", "--pid", "--fork", "--mount", "--propagation", "private", "--uts", "--ipc", "sh", "-c",
               script, "sh", self.dest + self.sbindir, self.sbindir, self.defaults_dir, self.unitdir, SYSTEMD]
        log("booting a private systemd: " + " ".join(cmd))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while time.time() < deadline and self.proc.poll() is None:
            kids = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout.split()
            if kids:
                self.pid1 = int(kids[0])
                r = self.systemctl("is-system-running", check=False)
                if r.stdout.strip() in ("running", "degraded", "starting"):
                    return self
            time.sleep(0.2)
        raise RuntimeError("private systemd did not come up")

    def systemctl(self, *args, check=True):
        # -r -w: entering a mount namespace moves to its root mount; where this runs in a chroot (a
        # container, tests/fresh-debian.sh) that is not where the private systemd lives.
        r = subprocess.run(["nsenter", "-t", str(self.pid1), "-m", "-p", "-r", "-w", "systemctl", "--no-pager", *args],
                           capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            log("systemctl %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
        return r

    def show(self, unit, *props):
        r = self.systemctl("show", unit, *["-p" + p for p in props])
        return dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)

    def __exit__(self, *exc):
        if not self.pid1 and self.proc and self.proc.poll() is None:
            # Never got as far as asking it: its PID 1 is unshare's child all the same.
            kids = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout.split()
            for k in kids:
                try:
                    os.kill(int(k), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self.pid1:
            # Stopped units clean up after themselves (PrivateTmp= directories, dynamic user).
            self.systemctl("stop", "profd.socket", "profd.service", check=False)
            try:
                os.kill(self.pid1, signal.SIGKILL)  # takes the whole PID namespace with it
            except ProcessLookupError:
                pass
        if self.proc:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # The private systemd made cgroups for its units next to ours: remove them again (a cgroup
        # is busy until the killed processes in it are gone, so retry for a while).
        deadline = time.time() + 10
        while True:
            left = sorted(cgroup_dirs() - self.cgroups_before, key=len, reverse=True)
            errors = []
            for d in left:
                try:
                    os.rmdir(d)
                except OSError as e:
                    errors.append("%s: %s" % (d, e))
            if not errors:
                break
            if time.time() > deadline:
                log("cannot remove cgroups: %s" % errors)
                break
            time.sleep(0.2)
        for d in private_tmp_dirs() - self.private_tmp_before:
            shutil.rmtree(d, ignore_errors=True)
        for p in CACHE_PATHS:
            if p in self.cache_before or not os.path.lexists(p):
                continue
            if os.path.islink(p):
                os.unlink(p)
            else:
                shutil.rmtree(p, ignore_errors=True)
        return False


def host_pid(ns_pid):
    """The host pid of the profd whose pid in the private namespace is ns_pid."""
    for st in glob.glob("/proc/[0-9]*/status"):
        try:
            with open(st) as f:
                text = f.read()
        except OSError:
            continue
        m = re.search(r"^NSpid:\s+(.*)$", text, re.M)
        if m and re.search(r"^Name:\s+profd$", text, re.M):
            pids = m.group(1).split()
            if len(pids) >= 2 and pids[-1] == str(ns_pid):
                return int(pids[0]), text
    return None, None


def wait_state(sd, unit, states, timeout=30):
    deadline = time.time() + timeout
    st = {}
    while time.time() < deadline:
        st = sd.show(unit, "ActiveState", "SubState", "Result", "ExecMainStatus", "NRestarts", "MainPID",
                     "StatusText")
        if st.get("ActiveState") in states:
            return st
        time.sleep(0.2)
    return st


def main():
    require_bpf()
    for tool in ("unshare", "nsenter", "pgrep"):
        if not shutil.which(tool):
            skip("%s (util-linux/procps) is not installed" % tool)
    if not os.access(SYSTEMD, os.X_OK):
        skip("%s (package systemd) is not installed" % SYSTEMD)
    with open("/proc/1/comm") as f:
        if f.read().strip() == "systemd":
            skip("PID 1 is systemd: this test boots its own systemd in a PID namespace and would nest it in "
                 "the host's cgroups; on such hosts install the units and use systemctl")

    d = tmpdir()
    os.chmod(d, 0o755)
    dest = os.path.join(d, "dest")
    r = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet", "--destdir", dest],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("meson install failed: " + r.stderr)
    service = glob.glob(dest + "/**/systemd/system/profd.service", recursive=True)[0]
    socket_unit = glob.glob(dest + "/**/systemd/system/profd.socket", recursive=True)[0]
    with open(service) as f:
        unit_text = f.read()
    execstart = re.search(r"^ExecStart=(\S+)", unit_text, re.M).group(1)
    sbindir = os.path.dirname(execstart)
    if not os.path.isdir(sbindir):
        skip("%s does not exist on this host (needed as a mount point for the installed binary)" % sbindir)
    caps = re.search(r"^AmbientCapabilities=(.*)$", unit_text, re.M).group(1).split()

    # Unit path: the installed units as they are, empty targets, and drop-ins that only redirect
    # output (there is no journald) and move the socket to a free loopback port.
    unitdir = os.path.join(d, "units")
    os.makedirs(unitdir)
    shutil.copy(service, unitdir)
    shutil.copy(socket_unit, unitdir)
    for t in TARGETS:
        with open(os.path.join(unitdir, t + ".target"), "w") as f:
            f.write("[Unit]\nDescription=%s\n" % t)
    with open(os.path.join(unitdir, "profd-test.target"), "w") as f:
        f.write("[Unit]\nDescription=profd test\n")
    logpath = os.path.join(d, "profd.log")
    os.makedirs(os.path.join(unitdir, "profd.service.d"))
    with open(os.path.join(unitdir, "profd.service.d", "output.conf"), "w") as f:
        f.write("[Service]\nStandardOutput=append:%s\nStandardError=inherit\n" % logpath)
    sock_port = free_port()
    os.makedirs(os.path.join(unitdir, "profd.socket.d"))
    with open(os.path.join(unitdir, "profd.socket.d", "port.conf"), "w") as f:
        f.write("[Socket]\nListenStream=\nListenStream=127.0.0.1:%d\n" % sock_port)
    # /etc/default/profd as installed, with the test's address.
    port = free_port()
    defaults_dir = os.path.join(d, "etc-default")
    os.makedirs(defaults_dir)
    with open(os.path.join(dest, "etc/default/profd")) as f:
        defaults = f.read()
    defaults = re.sub(r"^PROFD_OPTS=.*$", 'PROFD_OPTS="--http-address 127.0.0.1:%d"' % port, defaults, flags=re.M)
    # debuginfod stays off here (no server to reach); test-debuginfod.py covers the fetches.
    check(re.search(r"^#DEBUGINFOD_URLS=", defaults, re.M) is not None, "/etc/default/profd shows DEBUGINFOD_URLS")
    with open(os.path.join(defaults_dir, "profd"), "w") as f:
        f.write(defaults)

    sd_ctx = PrivateSystemd(dest, unitdir, defaults_dir, sbindir)
    try:
        sd = sd_ctx.__enter__()
    except RuntimeError as e:
        # Whatever did start (the namespace's systemd, its cgroups) goes before the skip.
        sd_ctx.__exit__(None, None, None)
        skip("cannot boot a private systemd here: %s" % e)
    try:
        run_checks(sd, port, sock_port, caps, unitdir, logpath)
    finally:
        sd_ctx.__exit__(None, None, None)
        if os.path.exists(logpath):
            with open(logpath) as f:
                log("---- profd output ----\n" + f.read()[-4000:] + "---- end ----")
    finish()


def run_checks(sd, port, sock_port, caps, unitdir, logpath):
    want_mask = sum(1 << CAP_BITS[c] for c in caps)
    # -- Type=notify start: "active" only after READY=1.
    t0 = time.time()
    r = sd.systemctl("start", "profd.service")
    took = time.time() - t0
    check(r.returncode == 0, "systemctl start profd.service succeeds (%.1f s)" % took)
    st = sd.show("profd.service", "ActiveState", "SubState", "NRestarts", "MainPID", "StatusText", "WatchdogUSec")
    log("after start: %r" % st)
    check(st.get("ActiveState") == "active" and st.get("SubState") == "running", "profd.service is active (running)")
    check(st.get("NRestarts") == "0", "no restarts")
    status, _, _ = http_get("http://127.0.0.1:%d/healthz" % port, timeout=5)
    check(status == 200, "/healthz answers 200 as soon as systemctl start returns (READY=1 after live)")
    check(st.get("WatchdogUSec") == "30s", "WatchdogSec=30s is in force")
    check(os.path.isdir("/var/cache/private/profd") and os.path.islink("/var/cache/profd"),
          "CacheDirectory=profd is made (/var/cache/private/profd, /var/cache/profd)")

    pid, status_text = host_pid(st.get("MainPID"))
    if check(pid is not None, "found the service's profd process"):
        uid = int(re.search(r"^Uid:\s+(\d+)", status_text, re.M).group(1))
        eff = int(re.search(r"^CapEff:\s+([0-9a-f]+)", status_text, re.M).group(1), 16)
        bnd = int(re.search(r"^CapBnd:\s+([0-9a-f]+)", status_text, re.M).group(1), 16)
        check(uid != 0, "runs as an unprivileged dynamic user (uid %d)" % uid)
        check(eff == want_mask and bnd == want_mask,
              "effective and bounding capabilities are exactly the unit's (%x, %x; want %x)" % (eff, bnd, want_mask))
        check(re.search(r"^NoNewPrivs:\s+1$", status_text, re.M) is not None, "NoNewPrivileges in force")
        check(re.search(r"^Seccomp:\s+2$", status_text, re.M) is not None, "system call filter in force")
        # systemd starts services with a soft RLIMIT_NOFILE of 1024; profd raises it itself (for
        # the mapped files it keeps open), which the system call filter must allow.
        with open("/proc/%d/limits" % pid) as f:
            m = re.search(r"^Max open files\s+(\d+)\s+(\d+)", f.read(), re.M)
        soft, hard = int(m.group(1)), int(m.group(2))
        check(soft > 1024 or hard <= 1024, "profd raised its open files limit in the sandbox (%d of %d)" % (soft, hard))

    # -- It works inside the sandbox: BPF samples, /proc/kallsyms readable, profiles served.
    st_code, _, body = http_get("http://127.0.0.1:%d/debug/pprof/profile?seconds=2" % port, timeout=60)
    check(st_code == 200 and len(body) > 0, "a profile is served from inside the sandbox (%d, %d bytes)" %
          (st_code, len(body)))
    _, _, metrics = http_get("http://127.0.0.1:%d/metrics" % port, timeout=10)
    metrics = metrics.decode()

    def metric(name):
        m = re.search(r"^%s(?:\{[^}]*\})? ([0-9.e+]+)$" % re.escape(name), metrics, re.M)
        return float(m.group(1)) if m else None
    log("samples=%s kallsyms_symbols=%s hidden=%s" % (metric("profd_bpf_samples_total"),
        metric("profd_symbolizer_kallsyms_symbols"), metric("profd_symbolizer_kallsyms_hidden")))
    check((metric("profd_bpf_samples_total") or 0) > 0, "BPF samples are taken under the system call filter")
    check((metric("profd_symbolizer_kallsyms_symbols") or 0) > 1000 and metric("profd_symbolizer_kallsyms_hidden") == 0,
          "kernel symbols are readable from /proc/kallsyms in the sandbox")

    # Denials of the sandbox (seccomp answers EPERM, read-only or hidden paths EACCES/EROFS/ENOENT)
    # would show up as warnings.
    with open(logpath) as f:
        denied = [l for l in f.read().splitlines()
                  if re.search(r"Operation not permitted|Permission denied|Read-only file system", l)]
    check(not denied, "no permission errors logged inside the sandbox: %r" % denied[:5])

    # -- STATUS= and watchdog pings reach the service manager.
    time.sleep(6)
    st = sd.show("profd.service", "StatusText", "WatchdogTimestampMonotonic")
    w1 = int(st.get("WatchdogTimestampMonotonic") or 0)
    log("StatusText=%s" % st.get("StatusText"))
    check("samples/s" in st.get("StatusText", ""), "systemctl status shows the STATUS= summary")
    # sd-event pings every 1/4 to 1/2 of WatchdogSec=30s.
    w2 = w1
    deadline = time.time() + 20
    while w2 == w1 and time.time() < deadline:
        time.sleep(0.5)
        w2 = int(sd.show("profd.service", "WatchdogTimestampMonotonic").get("WatchdogTimestampMonotonic") or 0)
    check(w2 > w1 > 0, "watchdog pings keep arriving (%d -> %d, %.1f s apart)" % (w1, w2, (w2 - w1) / 1e6))

    # -- Clean stop.
    t0 = time.time()
    sd.systemctl("stop", "profd.service")
    took = time.time() - t0
    st = sd.show("profd.service", "ActiveState", "Result", "ExecMainStatus", "ExecMainCode")
    log("after stop: %r (%.2f s)" % (st, took))
    check(st.get("Result") == "success" and st.get("ExecMainStatus") == "0", "stopped with exit 0")
    check(took < 5, "stop took %.2f s (< 5 s)" % took)

    # -- A stuck event loop (here: a stopped process) misses its pings and gets restarted. A drop-in
    # shortens WatchdogSec= (and the abort timeout: a stopped process acts on SIGABRT only once
    # killed) so this takes seconds, not the unit's 30 s.
    dropin = os.path.join(unitdir, "profd.service.d", "zz-watchdog.conf")
    with open(dropin, "w") as f:
        f.write("[Service]\nWatchdogSec=2s\nTimeoutAbortSec=1s\n")
    sd.systemctl("daemon-reload")
    sd.systemctl("start", "profd.service")
    st = sd.show("profd.service", "MainPID", "NRestarts")
    pid, _ = host_pid(st.get("MainPID"))
    if check(pid is not None, "watchdog: profd started"):
        os.kill(pid, signal.SIGSTOP)
        deadline = time.time() + 20
        while time.time() < deadline:
            st2 = sd.show("profd.service", "MainPID", "NRestarts", "ActiveState", "SubState")
            if int(st2.get("NRestarts", "0")) >= 1 and st2.get("SubState") == "running":
                break
            time.sleep(0.3)
        log("after SIGSTOP: %r" % st2)
        check(int(st2.get("NRestarts", "0")) == int(st.get("NRestarts", "0")) + 1 and
              st2.get("SubState") == "running" and st2.get("MainPID") != st.get("MainPID"),
              "a stuck profd misses its watchdog pings and is restarted")
    sd.systemctl("stop", "profd.service")
    os.remove(dropin)
    sd.systemctl("daemon-reload")

    # -- Socket activation through profd.socket.
    r = sd.systemctl("start", "profd.socket")
    check(r.returncode == 0, "systemctl start profd.socket succeeds")
    check(sd.show("profd.service", "ActiveState").get("ActiveState") == "inactive", "service not started yet")
    check(wait_healthy(sock_port, request_timeout=15), "first request on the socket starts profd and gets 200")
    st = sd.show("profd.service", "ActiveState", "SubState", "TriggeredBy")
    check(st.get("ActiveState") == "active", "profd.service is active, triggered by profd.socket (%r)" % st)
    st_code, _, body = http_get("http://127.0.0.1:%d/debug/pprof/profile?seconds=1" % sock_port, timeout=60)
    check(st_code == 200 and len(body) > 0, "a profile is served through the activated socket")
    check(not port_open(port), "profd did not open --http-address 127.0.0.1:%d under socket activation" % port)
    sd.systemctl("stop", "profd.socket", "profd.service")

    # -- A missing capability: exit 1, no restart loop, the capability named in systemctl status.
    with open(os.path.join(unitdir, "profd.service.d", "zz-noperfmon.conf"), "w") as f:
        f.write("[Service]\nAmbientCapabilities=\nAmbientCapabilities=%s\n" %
                " ".join(c for c in caps if c != "CAP_PERFMON"))
    sd.systemctl("daemon-reload")
    sd.systemctl("start", "profd.service", check=False)
    # It exits at once; systemd then waits RestartSec=5s before retrying (and gives up after
    # StartLimitBurst= tries).
    st = wait_state(sd, "profd.service", ("failed", "activating"), timeout=20)
    deadline = time.time() + 10
    while st.get("Result") != "exit-code" and time.time() < deadline:
        time.sleep(0.2)
        st = wait_state(sd, "profd.service", ("failed", "activating"), timeout=5)
    log("without CAP_PERFMON: %r" % st)
    check(st.get("Result") == "exit-code" and st.get("ExecMainStatus") == "1", "without CAP_PERFMON: exit 1")
    check("CAP_PERFMON" in st.get("StatusText", ""),
          "systemctl status names CAP_PERFMON (%r)" % st.get("StatusText"))
    with open(logpath) as f:
        lines = [l for l in f.read().splitlines() if "missing capability CAP_PERFMON" in l]
    check(len(lines) == 1, "one log line names it: %r" % lines)


def port_open(port):
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


if __name__ == "__main__":
    main()
