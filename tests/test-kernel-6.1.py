#!/usr/bin/env python3
"""profd on Debian 12's own kernel (6.1), booted under qemu (TCG; no KVM needed).

The kernel package is fetched with `apt-get download` into a cache directory (SKIP, loudly, only
if that fails). An initramfs gets busybox, build/daemon/profd and tests/qemu/bpf-load-check with
their shared libraries (from ldd, plus the dynamic loader), the no-frame-pointer scenario program
scen-plain and scen-recursion and tests/qemu/init. In the guest:

1. bpf-load-check loads and attaches profd's BPF objects with the daemon's own code and counts
   DWARF-unwound samples; libbpf's warnings (the verifier log, if a program is rejected) are
   printed here whatever happens later, since they are what fixing a 6.1 load failure needs;
2. profd runs on 127.0.0.1, scen-plain and scen-recursion (300 frames: the whole tail-call
   chain) burn CPU, busybox wget fetches /debug/pprof/profile?seconds=N; the profile comes back
   base64-encoded on the serial console and is checked here with `go tool pprof -traces`: >= 99%
   of each program's samples carry its complete chain down to main and _start.

Environment: PROFD_KERNEL_CACHE (default BUILD/kernel-6.1-cache) keeps the downloaded package."""
import base64
import glob
import os
import re
import shutil
import subprocess
import time

from profdtest import BUILD, SRC, check, finish, log, skip, tmpdir, traces

CACHE = os.environ.get("PROFD_KERNEL_CACHE") or os.path.join(BUILD, "kernel-6.1-cache")
PKG_RX = re.compile(r"^linux-image-6\.1\.0-(\d+)-cloud-amd64-unsigned$")
WINDOW_S = 6          # profile seconds in the guest
BURN_S = 12           # scenario run time in the guest (covers startup + window)
QEMU_TIMEOUT_S = 170  # boot, BPF check (~5 s), profile (~10 s), under TCG emulation
THRESHOLD = 0.99
BELOW_MAIN = r"main;(?:[^;]+;)*?_start$"   # the guest has no libc debug symbols: some [unknown]
SCENARIOS = {  # name -> (description, expected chains, leaf first)
    "plain": ("plain_leaf;plain_c;plain_b;plain_a;main..._start", [
        re.compile(r"(?:^|;)plain_leaf;plain_c;plain_b;plain_a;" + BELOW_MAIN),
        # the run loop reads the clock between slices; 6.1 under TCG has no vDSO clock source
        # (HPET), so the read is a syscall and shows in ~1% of the samples
        re.compile(r"(?:^|;)(?:__)?clock_gettime;" + BELOW_MAIN)]),
    "recursion": ("rec_leaf;rec_descend x300;rec_start;main..._start", [
        re.compile(r"(?:^|;)rec_leaf;(?:rec_descend;){300}rec_start;" + BELOW_MAIN)]),
}


def real_frames(frames):
    """Inlined functions (pprof marks them) are not frames the unwinder walked."""
    return [f for f in frames if not f.endswith(" (inline)")]

PROGRAMS = {  # guest path -> host path
    "/profd": os.path.join(BUILD, "daemon", "profd"),
    "/bpf-load-check": os.path.join(BUILD, "tests", "qemu", "bpf-load-check"),
    "/scen-plain": os.path.join(BUILD, "tests", "scenarios", "scen-plain"),
    "/scen-recursion": os.path.join(BUILD, "tests", "scenarios", "scen-recursion"),
}


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def abi(name):
    m = re.search(r"linux-image-6\.1\.0-(\d+)-", os.path.basename(name))
    return int(m.group(1)) if m else -1


def kernel_package():
    """Path of a linux-image-6.1 cloud .deb in the cache, downloading the newest one if needed."""
    os.makedirs(CACHE, exist_ok=True)
    debs = sorted(glob.glob(os.path.join(CACHE, "linux-image-6.1.0-*-cloud-amd64-unsigned_*.deb")), key=abi)
    if debs:
        return debs[-1]
    r = run(["apt-cache", "search", "--names-only", r"^linux-image-6\.1\.0-[0-9]+-cloud-amd64-unsigned$"])
    names = sorted({l.split()[0] for l in r.stdout.splitlines() if l.split() and PKG_RX.match(l.split()[0])},
                   key=abi, reverse=True)
    if not names:
        skip("no linux-image-6.1.0-*-cloud-amd64-unsigned package known to apt (apt-get update? Debian 12 "
             "sources?): cannot boot Debian 12's kernel. apt-cache: " + (r.stderr.strip() or "no match"))
    errors = []
    for name in names[:3]:
        log("downloading %s into %s" % (name, CACHE))
        r = run(["apt-get", "download", name], cwd=CACHE, timeout=600)
        debs = glob.glob(os.path.join(CACHE, name + "_*.deb"))
        if r.returncode == 0 and debs:
            return debs[0]
        errors.append("%s: %s" % (name, (r.stderr.strip() or r.stdout.strip())[-300:]))
    skip("apt-get download of Debian 12's 6.1 kernel failed (no network/mirror?): " + " | ".join(errors))


def kernel_image():
    for attempt in (1, 2):
        deb = kernel_package()
        out = os.path.join(CACHE, os.path.basename(deb)[:-4])
        images = glob.glob(os.path.join(out, "boot", "vmlinuz-*"))
        if images:
            return images[0]
        r = run(["dpkg-deb", "-x", deb, out])
        images = glob.glob(os.path.join(out, "boot", "vmlinuz-*"))
        if r.returncode == 0 and images:
            return images[0]
        # a cached package cut short by an interrupted download: fetch it again once
        log("unusable %s (%s): removing it from the cache" % (deb, r.stderr.strip()[-200:] or "no vmlinuz"))
        os.unlink(deb)
        shutil.rmtree(out, ignore_errors=True)
    raise RuntimeError("no usable kernel package in " + CACHE)


def copy_into(root, host_path, guest_path):
    dest = os.path.join(root, guest_path.lstrip("/"))
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    shutil.copy2(os.path.realpath(host_path), dest)   # the file itself, under the name asked for


def shared_libraries(path):
    """Every library the dynamic loader would map for path, and the loader itself (from ldd)."""
    r = run(["ldd", path])
    if r.returncode != 0:
        raise RuntimeError("ldd %s failed: %s" % (path, r.stderr))
    libs = []
    for line in r.stdout.splitlines():
        m = re.match(r"^\s*\S+\s+=>\s+(/\S+)\s+\(0x", line) or re.match(r"^\s*(/\S+)\s+\(0x", line)
        if m:
            libs.append(m.group(1))
        elif "not found" in line:
            raise RuntimeError("ldd %s: %s" % (path, line.strip()))
    return libs


def has_interpreter(path):
    """Whether the ELF file at path (symlinks followed) asks for a dynamic loader (a PT_INTERP
    segment): read here, so the test needs no `file` command."""
    import struct
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            raise RuntimeError("%s is not a 64-bit ELF file" % path)
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            if struct.unpack("<I", f.read(4))[0] == 3:  # PT_INTERP
                return True
    return False


def build_initramfs(work):
    root = os.path.join(work, "initrd")
    for d in ("bin", "proc", "sys", "dev", "tmp"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    busybox = shutil.which("busybox") or "/bin/busybox"
    if has_interpreter(busybox):
        raise RuntimeError("%s is not static: install busybox-static" % busybox)
    copy_into(root, busybox, "/bin/busybox")
    libs = set()
    for guest, host in PROGRAMS.items():
        copy_into(root, host, guest)
        libs.update(shared_libraries(host))
    for lib in sorted(libs):   # ldd names the dynamic loader by the path programs ask for
        copy_into(root, lib, lib)
    copy_into(root, os.path.join(SRC, "tests", "qemu", "init"), "/init")
    os.chmod(os.path.join(root, "init"), 0o755)
    with open(os.path.join(root, "test.conf"), "w") as f:
        f.write("WINDOW=%d\nBURN=%d\n" % (WINDOW_S, BURN_S))
    out = os.path.join(work, "initrd.gz")
    files = run(["find", "."], cwd=root).stdout
    with open(out, "wb") as f:
        cpio = subprocess.Popen(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE)
        gz = subprocess.Popen(["gzip", "-1"], stdin=cpio.stdout, stdout=f)
        cpio.stdout.close()
        cpio.communicate(files.encode())
        gz.wait()
    if cpio.returncode != 0 or gz.returncode != 0:
        raise RuntimeError("building the initramfs failed (cpio %s, gzip %s)" % (cpio.returncode, gz.returncode))
    log("initramfs: %d libraries, %.1f MiB compressed" % (len(libs), os.path.getsize(out) / 2**20))
    return out


def check_scenario(name, desc, chains, mine):
    def good(t):
        return any(rx.search(";".join(real_frames(t.frames))) for rx in chains)
    total = sum(t.value for t in mine)
    complete = sum(t.value for t in mine if good(t))
    log("scen-%s: %d samples, %d with the complete chain" % (name, total, complete))
    ok = check(total >= 40, "6.1 guest: >= 40 samples of scen-%s (%d)" % (name, total))
    if ok:
        ok = check(complete >= THRESHOLD * total, "6.1 guest: >= 99%% of scen-%s's samples carry %s: %d/%d = %.2f%%"
                   % (name, desc, complete, total, 100.0 * complete / total))
    stacks = {}
    for t in mine:
        if not ok or not good(t):
            k = ";".join(t.frames)
            stacks[k] = stacks.get(k, 0) + t.value
    if stacks:
        log("guest stacks of scen-%s%s" % (name, ":" if not ok else " without the expected chain:"))
    for k, n in sorted(stacks.items(), key=lambda kv: -kv[1])[:8]:
        if k.count(";") > 40:
            f = k.split(";")
            k = ";".join(f[:15] + ["... %d frames ..." % (len(f) - 30)] + f[-15:])
        log("  %5d  %s" % (n, k))
    return ok


def section(console, name):
    m = re.search(r"=== %s-BEGIN\r?\n(.*?)=== %s-END" % (name, name), console, re.S)
    return m.group(1) if m else None


def main():
    # no root needed here: BPF runs as root inside the guest
    missing = [p for p in ("qemu-system-x86_64", "cpio", "busybox", "dpkg-deb", "apt-get") if not shutil.which(p)]
    # these are in docs/debian-packages-tests.txt: their absence is a broken setup, not a reason to skip
    if not check(not missing, "tools present (qemu-system-x86, busybox-static, cpio): missing %s" % missing):
        finish()
    for host in PROGRAMS.values():
        if not check(os.path.exists(host), "built: " + host):
            finish()

    kernel = kernel_image()
    log("kernel: " + kernel)
    work = tmpdir()
    initrd = build_initramfs(work)

    cmd = ["qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-smp", "2", "-m", "1024", "-nographic",
           "-no-reboot", "-kernel", kernel, "-initrd", initrd,
           "-append", "console=ttyS0 quiet loglevel=1 panic=-1"]
    log("booting: " + " ".join(cmd))
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=QEMU_TIMEOUT_S)
        console, rc = r.stdout.decode(errors="replace"), r.returncode
    except subprocess.TimeoutExpired as e:
        console, rc = (e.stdout or b"").decode(errors="replace"), "timeout"
    log("qemu finished (%s) after %.0f s" % (rc, time.monotonic() - t0))
    os.unlink(initrd)
    shutil.rmtree(os.path.join(work, "initrd"), ignore_errors=True)
    with open(os.path.join(work, "console.log"), "w") as f:
        f.write(console)
    log("console: " + os.path.join(work, "console.log"))

    m = re.search(r"GUEST-KERNEL (\S+)", console)
    if not check(m and m.group(1).startswith("6.1."), "guest runs kernel 6.1 (%s)" % (m.group(1) if m else "no output")):
        log(console[-6000:])
        finish()

    bpf = section(console, "BPF-CHECK")
    if bpf is None:
        check(False, "BPF load check ran to the end")
        log(console[-8000:])
        finish()
    log("---- guest BPF load check (libbpf warnings and verifier log, if any) ----\n" + bpf.rstrip()
        + "\n---- end ----")
    for line in bpf.splitlines():
        m = re.match(r"^BPF-CHECK (.+?): (ok|FAILED.*)$", line.strip())
        if m:
            check(m.group(2) == "ok", "6.1 guest: %s (%s)" % (m.group(1), m.group(2)))
    check("BPF-CHECK-EXIT 0" in bpf, "6.1 guest: bpf-load-check exited 0")

    profd_log = section(console, "PROFD-LOG") or ""
    metrics = section(console, "METRICS") or ""
    pids = dict(re.findall(r"SCENARIO-PID (\w+) (\d+)", console))
    b64 = section(console, "PROFILE")
    ok = check(set(pids) == set(SCENARIOS) and b64 is not None and "WGET-EXIT 0" in console,
               "6.1 guest: profile fetched over HTTP inside the guest")
    if ok:
        data = base64.b64decode("".join(l.strip() for l in b64.splitlines()
                                        if re.match(r"^[A-Za-z0-9+/=]+$", l.strip())))
        path = os.path.join(work, "guest.pb.gz")
        with open(path, "wb") as f:
            f.write(data)
        log("guest profile: %d bytes" % len(data))
        all_traces = traces(path)
        for name, (desc, chains) in SCENARIOS.items():
            ok &= check_scenario(name, desc, chains, [t for t in all_traces if t.labels.get("pid") == [pids[name]]])
    if not ok or not check(rc == 0, "qemu exited cleanly (%s)" % rc):
        log("---- guest /metrics ----\n" + metrics + "---- guest profd log ----\n" + profd_log[-6000:])
    else:
        log("---- guest /metrics ----\n" + metrics.rstrip())
    finish()


if __name__ == "__main__":
    main()
