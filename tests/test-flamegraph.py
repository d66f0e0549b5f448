#!/usr/bin/env python3
"""The flame graph page in a real headless browser (Debian's chromium): GET
/debug/pprof/flamegraph for a known program; the page is one self-contained document (no
network fetches), renders an SVG with the program's frames, kernel and user frames apart, a click
on a frame zooms (it spans the full width afterwards), and search highlights the matching frames.
The page is driven by a small script appended to a copy of it (real DOM events on the page's own
handlers), results read back with --dump-dom. A screenshot is taken; with PROFD_UPDATE_DOCS=1 it
is written to docs/flamegraph.png."""
import json
import os
import re
import shutil
import subprocess
import tempfile

from profdtest import SRC, Daemon, cc, check, finish, log, require_bpf, skip, tmpdir

SECONDS = 3

PROGRAM = r"""
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) void fg_leaf(void) { for (int i = 0; i < 200000; i++) sink += i * 7; }
__attribute__((noinline)) void fg_syscalls(void) { for (int i = 0; i < 2000; i++) sink += getppid(); }
__attribute__((noinline)) void fg_middle(void) { fg_leaf(); fg_syscalls(); }
__attribute__((noinline)) void fg_outer(void) { fg_middle(); sink++; }
int main(int argc, char **argv)
{
        time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 60);
        while (time(NULL) < end)
                fg_outer();
        return 0;
}
"""

DRIVER = r"""
<script>
(function () {
  const res = {};
  const frames = () => Array.from(document.querySelectorAll("#flamegraph g.frame"));
  const named = (n) => frames().filter((g) => g.getAttribute("data-name") === n && !g.classList.contains("ancestor"));
  const width = (g) => parseFloat(g.querySelector("rect").getAttribute("width"));
  try {
    res.svgWidth = parseFloat(document.getElementById("flamegraph").getAttribute("viewBox").split(" ")[2]);
    res.frames = frames().length;
    res.fgNames = Array.from(new Set(frames().map((g) => g.getAttribute("data-name")).filter((n) => n.startsWith("fg_") || n === "main")));
    res.kinds = Array.from(new Set(frames().map((g) => g.getAttribute("data-kind"))));
    res.kernelFill = (frames().find((g) => g.getAttribute("data-kind") === "kernel") || {querySelector: () => null}).querySelector("rect")?.getAttribute("fill") || "";
    res.userFill = named("fg_leaf")[0]?.querySelector("rect").getAttribute("fill") || "";
    // fg_leaf: a frame that is never the whole profile (fg_syscalls is its sibling).
    const target = named("fg_leaf")[0];
    res.title = target.querySelector("title").textContent;
    res.beforeWidth = width(target);
    res.beforeFrames = res.frames;
    target.dispatchEvent(new MouseEvent("click", { bubbles: true, cancelable: true, view: window }));
    res.afterWidth = width(named("fg_leaf")[0]);
    res.afterFrames = frames().length;
    res.resetEnabled = !document.getElementById("reset").disabled;
    document.getElementById("reset").click();
    res.resetWidth = width(named("fg_leaf")[0]);
    const s = document.getElementById("search");
    s.value = "fg_leaf";
    s.dispatchEvent(new Event("input", { bubbles: true }));
    const m = Array.from(document.querySelectorAll("#flamegraph g.frame.match"));
    res.matches = Array.from(new Set(m.map((g) => g.getAttribute("data-name"))));
    res.matchedText = document.getElementById("matched").textContent;
    res.matchFill = m.length ? getComputedStyle(m[0].querySelector("rect")).fill : "";
  } catch (e) {
    res.error = String(e && e.stack || e);
  }
  const pre = document.createElement("pre");
  pre.id = "profd-test-result";
  pre.textContent = JSON.stringify(res);
  document.body.appendChild(pre);
})();
</script>
"""


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def browser(exe, *args):
    profile = tempfile.mkdtemp(prefix="chromium-")  # under the test's own TMPDIR
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
           "--user-data-dir=" + profile, *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def main():
    exe = chromium()
    if not exe:
        skip("chromium is not installed (Debian package chromium, listed in docs/debian-packages-tests.txt): "
             "cannot test the flame graph page in a browser")
    require_bpf()
    d = tmpdir()
    prog = cc(PROGRAM, os.path.join(d, "fgdemo"), ["-O1", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer"])
    p = subprocess.Popen([prog, "120"])
    try:
        with Daemon("--frequency", "99") as dmn:
            st, hdr, body = dmn.get("/debug/pprof/flamegraph?seconds=%d&comm=fgdemo" % SECONDS, timeout=SECONDS + 60)
            check(st == 200, "flamegraph request: %d" % st)
            check(hdr.get("content-type", "").startswith("text/html"), "served as text/html")
            page = body.decode("utf-8")
            st, _, index = dmn.get("/debug/pprof/")
            check(b"/debug/pprof/flamegraph" in index, "/debug/pprof/ links to the flame graph")
            st, _, bad = dmn.get("/debug/pprof/flamegraph?seconds=0")
            check(st == 400, "flamegraph?seconds=0 is a 400")
    finally:
        p.kill()
        p.wait()

    # Self-contained: nothing the browser would fetch (the SVG namespace URI is a name, not a fetch).
    fetches = re.findall(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//|@import|\bfetch\(|XMLHttpRequest|url\(\s*["']?https?:""",
                         page)
    check(not fetches, "page references nothing external (%s)" % fetches[:3])
    check("fg_leaf" in page, "page carries the program's frames")

    path = os.path.join(d, "flamegraph.html")
    with open(path, "w") as f:
        f.write(page)
    driven = os.path.join(d, "driven.html")
    with open(driven, "w") as f:
        f.write(page.replace("</body>", DRIVER + "</body>"))

    r = browser(exe, "--window-size=1400,900", "--virtual-time-budget=5000", "--dump-dom", "file://" + driven)
    m = re.search(r'<pre id="profd-test-result">(.*?)</pre>', r.stdout, re.S)
    if not check(m, "page ran in chromium (driver result present)"):
        log("chromium rc=%d stderr: %s" % (r.returncode, r.stderr[-3000:]))
        finish()
    res = json.loads(m.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
    log("browser result: " + json.dumps(res))
    check("error" not in res, "driver ran without error: %s" % res.get("error"))
    check(res.get("frames", 0) > 4, "SVG rendered %d frames" % res.get("frames", 0))
    for fn in ("fg_leaf", "fg_middle", "fg_outer", "main"):
        check(fn in res.get("fgNames", []), "frame %s present" % fn)
    check("kernel" in res.get("kinds", []) and "user" in res.get("kinds", []), "kernel and user frames (%s)" % res.get("kinds"))
    check(res.get("kernelFill") and res.get("userFill") and res.get("kernelFill") != res.get("userFill"),
          "kernel and user frames colored apart (%s vs %s)" % (res.get("kernelFill"), res.get("userFill")))
    check(re.search(r"\d+ samples? \(\d+\.\d+%\)", res.get("title", "")), "tooltip has samples and %%: %r" % res.get("title"))
    w = res.get("svgWidth", 0)
    check(res.get("beforeWidth", w) < w * 0.99, "before the click fg_leaf is narrower than the graph")
    check(abs(res.get("afterWidth", 0) - w) < 1, "click zooms: fg_leaf spans the width (%s of %s)" % (res.get("afterWidth"), w))
    check(res.get("resetEnabled") and abs(res.get("resetWidth", 0) - res.get("beforeWidth", -1)) < 0.01, "reset zoom restores")
    check(res.get("matches") == ["fg_leaf"], "search highlights fg_leaf frames only (%s)" % res.get("matches"))
    check(res.get("matchFill", "") in ("rgb(224, 64, 224)",), "highlighted frames are magenta (%s)" % res.get("matchFill"))
    check(res.get("matchedText", "").startswith("Matched: "), "matched share shown: %r" % res.get("matchedText"))

    shot = os.path.join(d, "flamegraph.png")
    r = browser(exe, "--window-size=1400,820", "--hide-scrollbars", "--virtual-time-budget=3000",
                "--screenshot=" + shot, "file://" + path + "#search=fg_leaf")
    ok = os.path.exists(shot) and os.path.getsize(shot) > 10000
    check(ok, "screenshot taken (%s)" % (os.path.getsize(shot) if os.path.exists(shot) else r.stderr[-500:]))
    if ok and os.environ.get("PROFD_UPDATE_DOCS") == "1":
        shutil.copy(shot, os.path.join(SRC, "docs", "flamegraph.png"))
        log("wrote docs/flamegraph.png")
    finish()


if __name__ == "__main__":
    main()
