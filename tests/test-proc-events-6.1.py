#!/usr/bin/env python3
"""The process event hooks (bpf/events.bpf.c) on Debian 12's stock kernel (6.1), booted under qemu
(TCG) with an initramfs holding a static probe (tests/proc-tracker/events-probe.c) that loads the
same skeleton the daemon embeds. Checks that every first-choice hook (tp_btf, fexit, fentry) loads
and attaches there and that exec, exit, fork, mmap and mprotect events arrive; and that the
fallback programs load and attach too. SKIPs loudly without qemu, busybox-static, static libbpf
or a 6.1 kernel image (PROFD_KERNEL_61=/path/to/vmlinuz, else apt-get download into the build
directory)."""
import glob
import os
import shutil
import subprocess
import sys

from profdtest import BUILD, SRC, check, finish, log, skip

PROBE_SRC = os.path.join(SRC, "tests", "proc-tracker", "events-probe.c")
SKEL_DIR = os.path.join(BUILD, "bpf")
WORK = os.path.join(BUILD, "proc-events-6.1")


def find_kernel():
    k = os.environ.get("PROFD_KERNEL_61")
    if k:
        return k if os.path.exists(k) else None
    found = sorted(glob.glob(os.path.join(WORK, "k61", "boot", "vmlinuz-6.1.*")))
    if found:
        return found[-1]
    try:
        out = subprocess.run(["apt-cache", "search", "--names-only", r"^linux-image-6\.1\..*-cloud-amd64-unsigned$"],
                             capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = sorted((l.split()[0] for l in out.splitlines() if l.strip()),
                   key=lambda n: int(n.split("-")[3]) if n.split("-")[3].isdigit() else 0)
    if not names:
        return None
    os.makedirs(WORK, exist_ok=True)
    log("downloading " + names[-1])
    r = subprocess.run(["apt-get", "download", names[-1]], cwd=WORK, capture_output=True, text=True, timeout=300)
    debs = glob.glob(os.path.join(WORK, names[-1] + "_*.deb"))
    if r.returncode != 0 or not debs:
        log(r.stderr)
        return None
    subprocess.run(["dpkg", "-x", debs[0], os.path.join(WORK, "k61")], check=True)
    found = sorted(glob.glob(os.path.join(WORK, "k61", "boot", "vmlinuz-6.1.*")))
    return found[-1] if found else None


def main():
    for tool in ("qemu-system-x86_64", "cpio", "gcc"):
        if not shutil.which(tool):
            skip(tool + " is not installed (docs/debian-packages-tests.txt)")
    busybox = shutil.which("busybox")
    if not busybox or b"ld-linux" in open(busybox, "rb").read(65536):
        skip("busybox-static is not installed")
    if not os.path.exists("/usr/lib/x86_64-linux-gnu/libbpf.a"):
        skip("static libbpf (libbpf-dev) missing")
    if not os.path.exists(os.path.join(SKEL_DIR, "events.skel.h")):
        skip("events.skel.h not built")
    kernel = find_kernel()
    if not kernel:
        skip("no Debian 6.1 kernel image (set PROFD_KERNEL_61 or allow apt-get download)")
    log("kernel: " + kernel)

    os.makedirs(WORK, exist_ok=True)
    initrd = os.path.join(WORK, "initrd")
    shutil.rmtree(initrd, ignore_errors=True)
    for d in ("bin", "proc", "sys", "dev"):
        os.makedirs(os.path.join(initrd, d))
    subprocess.run(["gcc", "-O2", "-static", "-I" + SKEL_DIR, "-I" + SRC, PROBE_SRC,
                    "-o", os.path.join(initrd, "probe"), "-lbpf", "-lelf", "-lz"], check=True)
    shutil.copy(busybox, os.path.join(initrd, "bin", "busybox"))
    with open(os.path.join(initrd, "init"), "w") as f:
        f.write("#!/bin/busybox sh\n"
                "/bin/busybox mount -t proc proc /proc\n"
                "/bin/busybox mount -t sysfs sysfs /sys\n"
                "/bin/busybox mount -t devtmpfs dev /dev\n"
                "echo KERNEL $(/bin/busybox uname -r)\n"
                "/probe; echo EXIT=$?\n"
                "/bin/busybox poweroff -f\n")
    os.chmod(os.path.join(initrd, "init"), 0o755)
    image = os.path.join(WORK, "initrd.gz")
    with open(image, "wb") as out:
        files = subprocess.run("find .", shell=True, cwd=initrd, capture_output=True, check=True).stdout
        cpio = subprocess.run(["cpio", "-o", "-H", "newc"], cwd=initrd, input=files, capture_output=True, check=True)
        out.write(subprocess.run(["gzip", "-1"], input=cpio.stdout, capture_output=True, check=True).stdout)

    try:
        r = subprocess.run(["qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-smp", "2", "-m", "1024",
                            "-nographic", "-no-reboot", "-kernel", kernel, "-initrd", image,
                            "-append", "console=ttyS0 quiet panic=-1"],
                           capture_output=True, text=True, timeout=180)
        out = r.stdout
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        log(out)
        check(False, "guest finished within 180 s")
        finish()
    lines = [l.strip() for l in out.replace("\r", "").splitlines()]
    for l in lines:
        if "KERNEL" in l or l.startswith(("LOAD", "ATTACH", "EVENT", "FALLBACK", "EXIT", "libbpf")):
            log("  guest: " + l)
    got = {}
    for l in lines:
        parts = l.split()
        if len(parts) >= 3 and parts[0] in ("ATTACH", "EVENT", "FALLBACK"):
            got[(parts[0], parts[1])] = " ".join(parts[2:])

    check(any("KERNEL 6.1." in l for l in lines), "guest runs a 6.1 kernel")
    check("LOAD ok" in lines, "events.bpf.c loads with its trampolines (fexit, fentry) on 6.1")
    for p in ("tp_exec", "tp_exit", "tp_fork", "fexit_mmap", "fentry_mprotect"):
        check(got.get(("ATTACH", p)) == "ok", "first-choice hook %s attaches on 6.1" % p)
    for e in ("exec", "exit", "fork", "mmap", "mprotect"):
        n = got.get(("EVENT", e), "0")
        check(n.isdigit() and int(n) >= 1, "%s event of the child arrives (%s)" % (e, n))
    check(got.get(("FALLBACK", "load")) == "ok", "the object loads without trampolines too")
    for p in ("raw_exec", "raw_exit", "raw_fork", "kp_mmap", "kp_mprotect", "tp_sys_exit", "raw_sys_exit",
              "uprobe"):
        check(got.get(("FALLBACK", p)) == "ok", "fallback %s attaches on 6.1" % p)
    finish()


if __name__ == "__main__":
    main()
