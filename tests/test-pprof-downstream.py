#!/usr/bin/env python3
"""What profd leaves to pprof and collectors, through the whole daemon (real BPF samples, real
HTTP, the real go tool pprof and Google's standalone pprof):

- a stripped C program: profd cannot name its frames, so their locations keep address, mapping
  (file offset, GNU build ID) and no function; the mapping is not has_functions. go tool pprof
  shows them as addresses ([binary], never a made-up name) and, fetching from profd itself,
  works (it asks profd's /debug/pprof/symbol first); Google's pprof names them from an unstripped
  copy found in PPROF_BINARY_PATH by build ID or by file name, and only then;
- the same program stripped and linked without a build ID: nothing downstream could tell which
  file ran, so its frames keep profd's placeholder, [unknown] PATH+0xOFFSET;
- a Go binary linked without a GNU build ID (internal linking) is known by its Go build ID
  (.note.go.buildid, hex-encoded) and named by profd;
- pid and tid are numeric labels: -tagfocus=pid=N keeps exactly that process, -tags lists them.

Google's pprof is built from Debian's golang-github-google-pprof-dev (go tool pprof reads no build
IDs, so it cannot use PPROF_BINARY_PATH for a mapping that has one)."""
import os
import re
import shutil
import subprocess
import time

from profdtest import (Daemon, cc, check, fetch_profile, finish, go_env, log, pprof, require_bpf, skip, tmpdir,
                       unwind_ready)

C_SRC = r"""
#include <stdlib.h>
#include <time.h>
volatile unsigned long sink;
__attribute__((noinline)) void downstream_leaf(int n)
{
        for (int i = 0; i < n; i++)
                sink += (unsigned long)i * 7;
}
__attribute__((noinline)) void downstream_mid(int n)
{
        downstream_leaf(n);
        sink++;
}
int main(int argc, char **argv)
{
        struct timespec ts;
        double end;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        end = ts.tv_sec + ts.tv_nsec / 1e9 + atof(argv[1]);
        do {
                downstream_mid(100000);
                clock_gettime(CLOCK_MONOTONIC, &ts);
        } while (ts.tv_sec + ts.tv_nsec / 1e9 < end);
        return 0;
}
"""

GO_SRC = """package main

import (
	"os"
	"strconv"
	"time"
)

var sink uint64

//go:noinline
func goDownstreamSpin(n int) {
	for i := 0; i < n; i++ {
		sink += uint64(i) * 7
	}
}

func main() {
	secs, _ := strconv.ParseFloat(os.Args[1], 64)
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	for time.Now().Before(end) {
		goDownstreamSpin(100000)
	}
}
"""

GOOGLE_PPROF_SRC = "/usr/share/gocode/src/github.com/google/pprof"


def gnu_build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else None


def build_google_pprof(work):
    """Google's pprof (build IDs, binutils) from the Debian source package; None without it."""
    if not os.path.isdir(GOOGLE_PPROF_SRC):
        return None
    out = os.path.join(work, "google-pprof")
    env = go_env()
    env.update(GOPATH="/usr/share/gocode", GO111MODULE="off", GOFLAGS="")
    subprocess.run(["go", "build", "-o", out, "github.com/google/pprof"], check=True, env=env, cwd=work)
    return out


def google_pprof(binary, binary_path, *args):
    env = go_env()
    env["PPROF_BINARY_PATH"] = binary_path
    return subprocess.run([binary, *args], capture_output=True, text=True, env=env, timeout=300)


def mapping_line(raw, path):
    """The -raw Mappings line of path: 'N: 0xSTART/0xLIMIT/0xOFFSET PATH BUILDID [FN]...'."""
    for line in raw.split("\n"):
        if re.match(r"^\d+: 0x", line) and (" %s " % path) in line + " ":
            return line
    return None


def main():
    require_bpf()
    if not shutil.which("go"):
        skip("go (golang-go) is not installed")
    work = tmpdir()

    prog = cc(C_SRC, os.path.join(work, "downstream-prog"), ["-O2", "-g", "-fno-omit-frame-pointer"])
    bid = gnu_build_id(prog)
    # What a developer keeps: the unstripped build, by build ID and by file name.
    by_id = os.path.join(work, "by-id")
    os.makedirs(os.path.join(by_id, bid))
    shutil.copy(prog, os.path.join(by_id, bid, "downstream-prog"))
    by_name = os.path.join(work, "by-name")
    os.makedirs(by_name)
    shutil.copy(prog, os.path.join(by_name, "downstream-prog"))
    subprocess.run(["strip", "--strip-all", prog], check=True)
    sections = subprocess.run(["readelf", "-SW", prog], capture_output=True, text=True).stdout
    check(bid and gnu_build_id(prog) == bid and ".symtab" not in sections and ".debug_info" not in sections,
          "downstream-prog is stripped and keeps its build ID %s" % bid)

    nobid = cc(C_SRC, os.path.join(work, "nobuildid-prog"), ["-O2", "-fno-omit-frame-pointer", "-Wl,--build-id=none"])
    subprocess.run(["strip", "--strip-all", nobid], check=True)
    check(gnu_build_id(nobid) is None, "nobuildid-prog has no build ID")

    gdir = os.path.join(work, "goprog")
    os.makedirs(gdir)
    with open(os.path.join(gdir, "main.go"), "w") as f:
        f.write(GO_SRC)
    with open(os.path.join(gdir, "go.mod"), "w") as f:
        f.write("module downstream\n\ngo 1.19\n")
    goprog = os.path.join(gdir, "go-downstream")
    genv = go_env()
    genv.update(GOFLAGS="-mod=mod", GOPROXY="off", CGO_ENABLED="0")
    subprocess.run(["go", "build", "-ldflags=-linkmode=internal", "-o", goprog, "."], check=True, env=genv,
                   cwd=gdir)
    go_bid = subprocess.run(["go", "tool", "buildid", goprog], capture_output=True, text=True, env=genv,
                            check=True).stdout.strip()
    go_gnu = gnu_build_id(goprog)
    log("Go build ID %s, GNU build ID %s" % (go_bid, go_gnu))
    check(go_bid.count("/") >= 1 and go_gnu is None, "the Go binary has a Go build ID and no GNU one")

    google = build_google_pprof(work)

    with Daemon("--frequency", "99") as d:
        c = subprocess.Popen([prog, "14"])
        g = subprocess.Popen([goprog, "14"])
        n = subprocess.Popen([nobid, "14"])
        try:
            unwind_ready(d, c.pid, "downstream-prog", "downstream-prog")
            unwind_ready(d, n.pid, "nobuildid-prog", "nobuildid-prog")
            path = fetch_profile(d, 4, "&labels=pid,tid,comm")
            # go tool pprof as a user runs it, fetching from profd: it asks /debug/pprof/symbol
            # about the frames without a function before it shows anything.
            live = pprof("-top", d.base + "/debug/pprof/profile?seconds=2&pid=%d" % c.pid, check_rc=False,
                         symbolize=True)
        finally:
            for q in (c, g, n):
                q.kill()
                q.wait()
    check(live.returncode == 0 and "[downstream-prog]" in live.stdout,
          "go tool pprof -top http://.../profile?pid=N works and shows the stripped frames as addresses")
    if live.returncode != 0:
        log(live.stdout[-2000:] + live.stderr[-2000:])

    raw = pprof("-raw", path).stdout
    m = mapping_line(raw, prog)
    log("mapping: %s" % m)
    check(m is not None and bid in m and "[FN]" not in m,
          "the stripped binary's mapping has its build ID and is not has_functions")
    mid = m.split(":")[0] if m else None
    locs = re.findall(r"^\s+\d+: 0x([0-9a-f]+) M=%s (.*)$" % mid, raw, re.M) if mid else []
    check(len(locs) >= 2 and all(rest.strip() == "" for _, rest in locs),
          "its %d locations have an address and no function" % len(locs))
    gm = mapping_line(raw, goprog)
    log("Go mapping: %s" % gm)
    check(gm is not None and go_bid.encode().hex() in gm.split() and "[FN]" in gm,
          "the Go binary's mapping carries its Go build ID, hex-encoded, and is has_functions")
    check(locs and "[unknown]" not in "".join(rest for _, rest in locs) and "downstream_leaf" not in raw,
          "no made-up name for the stripped frames")

    nm = mapping_line(raw, nobid)
    log("mapping without a build ID: %s" % nm)
    only_n = pprof("-traces", "-tagfocus=pid=%d" % n.pid, path).stdout
    check(nm is not None and "[FN]" in nm and "[unknown] %s+0x" % nobid in only_n,
          "without a build ID: placeholders [unknown] PATH+0xOFF, the mapping has_functions")

    # Numeric pid and tid.
    check(re.search(r"pid:\[%d pid\]" % c.pid, raw) and re.search(r"tid:\[%d tid\]" % c.pid, raw),
          "pid and tid are numeric labels (-raw: pid:[%d pid] tid:[%d tid])" % (c.pid, c.pid))
    only_c = pprof("-top", "-tagfocus=pid=%d" % c.pid, path).stdout
    only_g = pprof("-top", "-tagfocus=pid=%d" % g.pid, path).stdout
    check("[downstream-prog]" in only_c and "goDownstreamSpin" not in only_c,
          "-tagfocus=pid=%d: only the C program's frames" % c.pid)
    check("main.goDownstreamSpin" in only_g and "[downstream-prog]" not in only_g,
          "-tagfocus=pid=%d: only the Go program's frames, named by profd" % g.pid)
    if "[downstream-prog]" not in only_c or "main.goDownstreamSpin" not in only_g:
        log(only_c[-1500:] + only_g[-1500:])
    tid_c = pprof("-top", "-tagfocus=tid=%d" % c.pid, path).stdout
    check("[downstream-prog]" in tid_c and "goDownstreamSpin" not in tid_c, "-tagfocus=tid=%d as well" % c.pid)
    tags = pprof("-tags", path).stdout
    check(re.search(r"^ pid: Total", tags, re.M) and re.search(r"^ tid: Total", tags, re.M) and
          re.search(r": %d$" % c.pid, tags, re.M) and re.search(r": %d$" % g.pid, tags, re.M),
          "-tags lists pid and tid with both programs' ids")

    # go tool pprof on this host symbolizes the stripped mapping from the file at its path: the
    # stripped binary has nothing to give, and the profile still reads (the frames stay addresses).
    local = pprof("-top", "-tagfocus=pid=%d" % c.pid, path, symbolize=True)
    check("[downstream-prog]" in local.stdout and "downstream_leaf" not in local.stdout,
          "go tool pprof with the stripped binary at the path: addresses")

    # Google's pprof finds the unstripped build in PPROF_BINARY_PATH, by build ID or by name.
    if not google:
        log("=" * 70 + "\nNOT CHECKED: golang-github-google-pprof-dev is not installed (Google's pprof "
            "naming the frames from PPROF_BINARY_PATH)\n" + "=" * 70)
    else:
        for what, where in (("nowhere", "/nonexistent"), ("by build ID", by_id), ("by file name", by_name)):
            r = google_pprof(google, where, "-top", "-tagfocus=pid=%d" % c.pid, path)
            named = "downstream_leaf" in r.stdout and "downstream_mid" in r.stdout
            log("pprof, PPROF_BINARY_PATH %s:\n%s" % (what, "\n".join(r.stdout.split("\n")[:12])))
            if where == "/nonexistent":
                check(r.returncode == 0 and not named and "[unknown]" not in r.stdout,
                      "Google's pprof without the debug build: addresses, no made-up name")
            else:
                check(r.returncode == 0 and named,
                      "Google's pprof names downstream_leaf, downstream_mid from the unstripped build found %s"
                      % what)
    finish()


if __name__ == "__main__":
    main()
