#!/usr/bin/env python3
"""Boots one of Debian's arm64 kernels under qemu-system-aarch64 (TCG, -cpu max: pointer
authentication on) with the cross-built profd (build-aarch64/, tests/arm64-cross-build.sh) and an
aarch64 program (or several, --run, all at once in the same boot); profd samples the whole guest
while they run and the profile, fetched over HTTP inside the guest, is written to --out. Usage:
see tests/arm64-guest.sh.

Kernels: bullseye's 5.10, bookworm's 6.1, trixie's 6.12 (linux-image-*-arm64-unsigned), fetched
with a private apt configuration into CACHE/kernels (this machine's apt configuration is never
touched). The initramfs holds busybox-static (arm64, from bookworm), profd with its shared
libraries (from the arm64 root the cross-build made), the program as /prog, and
tests/arm64/guest-init. No virtio device is needed: everything is in the initramfs and the serial
console (PL011, built into Debian's arm64 kernels) carries the results."""
import argparse
import base64
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
APT = os.path.join(SRC, "tests", "arm64", "apt-arm64.sh")
KERNELS = {  # version -> (suite, package regex, ABI number as group 1)
    "5.10": ("bullseye", re.compile(r"^linux-image-5\.10\.0-(\d+)-arm64-unsigned$")),
    "6.1": ("bookworm", re.compile(r"^linux-image-6\.1\.0-(\d+)-arm64-unsigned$")),
    "6.12": ("trixie", re.compile(r"^linux-image-6\.12\.(\d+)\+deb13-arm64-unsigned$")),
}
LIB_DIRS = ["lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu", "lib", "usr/lib"]


def log(msg):
    print("arm64-guest: " + msg, file=sys.stderr, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def apt(cache, suite, *args, **kw):
    return run([APT, cache, suite] + list(args), **kw)


def download(cache, suite, names, dest):
    """apt-get download the first of names (newest first) that the mirror has; its .deb path."""
    errors = []
    for name in names:
        found = glob.glob(os.path.join(dest, name + "_*.deb"))
        if found:
            return found[0]
    r = apt(cache, suite, "apt-get", "update", timeout=600)
    if r.returncode != 0:
        sys.exit("arm64-guest: apt-get update of %s failed: %s" % (suite, r.stderr[-300:]))
    for name in names:
        r = apt(cache, suite, "apt-get", "download", name, cwd=dest, timeout=900)
        found = glob.glob(os.path.join(dest, name + "_*.deb"))
        if r.returncode == 0 and found:
            return found[0]
        errors.append("%s: %s" % (name, r.stderr.strip()[-200:]))
    sys.exit("arm64-guest: cannot download any of %s: %s" % (names, " | ".join(errors)))


def kernel_image(cache, version):
    suite, rx = KERNELS[version]
    dest = os.path.join(cache, "kernels")
    os.makedirs(dest, exist_ok=True)
    have = sorted((p for p in glob.glob(os.path.join(dest, "linux-image-*.deb"))
                   if rx.match(os.path.basename(p).split("_")[0])),
                  key=lambda p: int(rx.match(os.path.basename(p).split("_")[0]).group(1)))
    if have:
        deb = have[-1]
    else:
        apt(cache, suite, "apt-get", "update", timeout=600)
        r = apt(cache, suite, "apt-cache", "search", "--names-only", "^linux-image-.*-arm64-unsigned$")
        names = sorted({l.split()[0] for l in r.stdout.splitlines() if l.split() and rx.match(l.split()[0])},
                       key=lambda n: int(rx.match(n).group(1)), reverse=True)
        if not names:
            sys.exit("arm64-guest: %s lists no %s arm64 kernel (%s)" % (suite, version, rx.pattern))
        deb = download(cache, suite, names[:6], dest)
    out = deb[:-4]
    if not glob.glob(os.path.join(out, "boot", "vmlinuz-*")):
        r = run(["dpkg-deb", "-x", deb, out])
        if r.returncode != 0:
            os.unlink(deb)
            sys.exit("arm64-guest: unusable %s (%s): removed, run again" % (deb, r.stderr[-200:]))
        for d in ("lib", "usr"):  # the modules (~300 MiB): the guest needs none
            shutil.rmtree(os.path.join(out, d), ignore_errors=True)
    return glob.glob(os.path.join(out, "boot", "vmlinuz-*"))[0]


def busybox(cache):
    dest = os.path.join(cache, "debs-guest")
    os.makedirs(dest, exist_ok=True)
    deb = download(cache, "bookworm", ["busybox-static"], dest)
    out = deb[:-4]
    if not os.path.exists(os.path.join(out, "bin", "busybox")):
        run(["dpkg-deb", "-x", deb, out]).check_returncode()
    return os.path.join(out, "bin", "busybox")


def needed(path):
    r = run(["aarch64-linux-gnu-readelf", "-dlW", path])
    if r.returncode != 0:
        raise RuntimeError("readelf %s: %s" % (path, r.stderr))
    interp = re.search(r"Requesting program interpreter: ([^\]]+)\]", r.stdout)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", r.stdout), interp.group(1) if interp else None


def copy_with_libraries(root, roots, host_path, guest_path, in_place=False):
    """Copies host_path and, recursively, the shared libraries it needs from the arm64 roots.
    in_place: host_path is in an --extra tree, copied with it; a library none of the roots has is
    one it finds itself (its RPATH: a JVM's libjli.so beside it)."""
    sysroot = roots[0]
    todo, seen = [(host_path, guest_path)], set()
    while todo:
        src, dst = todo.pop()
        if dst in seen:
            continue
        seen.add(dst)
        target = os.path.join(root, dst.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.realpath(src), target)
        libs, interp = needed(src)
        if interp:
            todo.append((os.path.join(sysroot, interp.lstrip("/")), interp))
        for lib in libs:
            # the arm64 root, then the folder of the program itself (libraries built beside it)
            for p in ([os.path.join(r, d, lib) for r in roots for d in LIB_DIRS] +
                      [os.path.join(os.path.dirname(host_path), lib)]):
                if os.path.exists(p):
                    todo.append((p, "/lib/aarch64-linux-gnu/" + lib))
                    break
            else:
                if not in_place:
                    raise RuntimeError("%s needs %s: not in %s" % (src, lib, sysroot))


def build_initramfs(work, args, sysroot):
    root = os.path.join(work, "root")
    for d in ("bin", "proc", "sys", "dev", "tmp", "lib/aarch64-linux-gnu"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    shutil.copy2(busybox(args.cache), os.path.join(root, "bin", "busybox"))
    for extra in args.extra:
        subprocess.run(["cp", "-a", extra.rstrip("/") + "/.", root], check=True)
    copy_with_libraries(root, [sysroot], os.path.join(args.build, "daemon", "profd"), "/profd")
    shutil.copy2(os.path.join(SRC, "tests", "arm64", "guest-init"), os.path.join(root, "init"))
    with open(os.path.join(root, "guest.conf"), "w") as f:
        f.write("SECONDS_WINDOW=%d\nFREQUENCY=%d\nBPF_STATS=%d\nNPROGS=%d\nREADY=%s\n"
                % (args.seconds, args.frequency, args.bpf_stats, len(args.programs),
                   shlex.quote(" ".join(args.ready))))
        for i, (program, prog_args) in enumerate(args.programs, 1):
            # under its own name: runtimes are recognized by it (python3.11), and it is the comm;
            # a program in an --extra tree runs where it is there (a JVM finds its home by its path)
            tree = [e for e in args.extra if os.path.abspath(program).startswith(os.path.abspath(e) + os.sep)]
            prog = "/" + (os.path.relpath(program, tree[0]) if tree else os.path.basename(program))
            copy_with_libraries(root, [sysroot] + args.extra, program, prog, in_place=bool(tree))
            f.write("PROG_%d=%s\nPROG_ARGS_%d=%s\n" % (i, shlex.quote(prog), i,
                    shlex.quote(" ".join(shlex.quote(a) for a in prog_args))))
    out = os.path.join(work, "initrd.gz")
    with open(out, "wb") as f:
        files = subprocess.run(["find", "."], cwd=root, capture_output=True, check=True).stdout
        cpio = subprocess.Popen(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE)
        gz = subprocess.Popen(["gzip", "-1"], stdin=cpio.stdout, stdout=f)
        cpio.stdin.write(files)
        cpio.stdin.close()
        cpio.stdout.close()
        if cpio.wait() or gz.wait():
            raise RuntimeError("cpio/gzip failed")
    return out


def section(console, name):
    m = re.search(r"=== %s-BEGIN\r?\n(.*?)=== %s-END" % (name, name), console, re.S)
    return m.group(1) if m else None


def is_aarch64_elf(path):
    """ELF, little-endian, 64-bit, e_machine EM_AARCH64 (183): read from its header, no file(1)."""
    try:
        with open(path, "rb") as f:
            h = f.read(20)
    except OSError:
        return False
    return len(h) == 20 and h[:4] == b"\x7fELF" and h[4] == 2 and h[5] == 1 and int.from_bytes(h[18:20], "little") == 183


def main():
    p = argparse.ArgumentParser(prog="tests/arm64-guest.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("--kernel", required=True, choices=sorted(KERNELS))
    p.add_argument("--out", required=True, help="where the profile (gzipped pprof) goes")
    p.add_argument("--seconds", type=int, default=10, help="profile window (default 10)")
    p.add_argument("--frequency", type=int, default=99, help="samples per second and CPU (default 99)")
    p.add_argument("--console", help="also write the guest's serial console here")
    p.add_argument("--build", default=os.environ.get("PROFD_ARM64_BUILD", os.path.join(SRC, "build-aarch64")))
    p.add_argument("--cache", default=os.environ.get("PROFD_ARM64_CACHE", "/var/cache/profd-tests/arm64"))
    p.add_argument("--smp", type=int, default=2)
    p.add_argument("--memory", type=int, default=1024, metavar="MIB",
                   help="guest memory (default 1024; the root is in it too)")
    p.add_argument("--extra", action="append", default=[], metavar="DIR",
                   help="copy this arm64 tree into the guest's root too (e.g. an interpreter's library), "
                        "and take the program's libraries from it as well")
    p.add_argument("--bpf-stats", action="store_true",
                   help="start the program first, profd with --pid on it and kernel.bpf_stats_enabled; "
                        "print the entry program's run_time_ns and run_cnt")
    p.add_argument("--ready", action="append", default=[], metavar="FILE",
                   help="the profile window starts once this file exists in the guest (a program makes "
                        "it when its start-up is over), at most 120 s after the programs started")
    p.add_argument("--run", action="append", default=[], metavar="'PROGRAM [ARGS...]'",
                   help="run this program (shell words) too, at the same time: one boot, one profile "
                        "window for all of them")
    p.add_argument("program", nargs="?")
    p.add_argument("args", nargs=argparse.REMAINDER)
    args = p.parse_args()
    args.programs = ([(args.program, args.args)] if args.program else []) + \
        [(w[0], w[1:]) for w in (shlex.split(r) for r in args.run) if w]
    if not args.programs:
        p.error("no program: PROGRAM or --run")
    if args.bpf_stats and len(args.programs) > 1:
        p.error("--bpf-stats measures one program")

    for tool in ("qemu-system-aarch64", "cpio", "aarch64-linux-gnu-readelf"):
        if not shutil.which(tool):
            sys.exit("arm64-guest: %s missing (apt-get install qemu-system-arm cpio binutils-aarch64-linux-gnu)" % tool)
    sysroot = os.path.join(args.cache, "sysroot")
    if not os.path.exists(os.path.join(args.build, "daemon", "profd")) or not os.path.isdir(sysroot):
        sys.exit("arm64-guest: no %s/daemon/profd or %s: run tests/arm64-cross-build.sh first" % (args.build, sysroot))
    for program, _ in args.programs:
        if not is_aarch64_elf(program):
            sys.exit("arm64-guest: %s is not an aarch64 program" % program)

    t0 = time.monotonic()
    image = kernel_image(args.cache, args.kernel)
    with tempfile.TemporaryDirectory(prefix="profd-arm64-guest-") as work:
        initrd = build_initramfs(work, args, sysroot)
        t1 = time.monotonic()
        cmd = ["qemu-system-aarch64", "-M", "virt", "-cpu", "max,pauth-impdef=on", "-accel", "tcg",
               "-smp", str(args.smp), "-m", str(args.memory), "-nographic", "-no-reboot", "-kernel", image,
               "-initrd", initrd, "-append", "console=ttyAMA0 panic=-1 quiet"]
        log("booting %s (%s)" % (os.path.basename(image), " ".join(cmd)))
        try:
            r = subprocess.run(cmd, capture_output=True, timeout=args.seconds + 900)
            console = r.stdout.decode(errors="replace")
        except subprocess.TimeoutExpired as e:
            console = (e.stdout or b"").decode(errors="replace")
            log("qemu timed out")
    t2 = time.monotonic()
    if args.console:
        with open(args.console, "w") as f:
            f.write(console)
    for line in console.splitlines():
        if line.startswith(("GUEST-", "PROGRAM-PID", "GUEST-TIME", "WGET-EXIT", "NOT-READY", "PROFD-NOT-HEALTHY")):
            log(line.strip())
    stats = section(console, "BPF-STATS")
    if args.bpf_stats and stats:
        for line in stats.splitlines():
            rt = re.search(r"run_time_ns:\s*(\d+)", line)
            rc = re.search(r"run_cnt:\s*(\d+)", line)
            if rt and rc and int(rc.group(1)):
                log("BPF-STATS prog_type %s: run_cnt %s run_time_ns %s (%.0f ns per run)" % (
                    (re.search(r"prog_type:\s*(\d+)", line) or re.search("()", "")).group(1),
                    rc.group(1), rt.group(1), int(rt.group(1)) / int(rc.group(1))))
    metrics = section(console, "METRICS")
    if metrics:
        log("metrics:\n" + metrics.strip())
    output = section(console, "PROGRAM-OUTPUT")
    if output and output.strip():
        log("programs' output (last lines):\n" + output.strip())
    prof = section(console, "PROFILE")
    data = base64.b64decode("".join(prof.split())) if prof else b""
    if not data:
        log("no profile; profd's log:\n" + (section(console, "PROFD-LOG") or console[-4000:]))
        sys.exit(1)
    with open(args.out, "wb") as f:
        f.write(data)
    log("profile: %s (%d bytes); preparation %.0f s, guest %.0f s" % (args.out, len(data), t1 - t0, t2 - t1))


if __name__ == "__main__":
    main()
