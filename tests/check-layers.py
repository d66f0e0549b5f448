#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The daemon's folders layer: a file includes headers of its own folder or of folders before it in
the order docs/architecture.md writes down ("Layer order: util -> unwind -> ..."), always with the
folder ("tracker/process-table.h"). No two source files call each other, directly or through
others, in daemon/ or in unwind-tables/: read from the symbols the built objects define and use
(nm), so a header that only lends a type does not count. Fails with one line per violation.

Usage: check-layers.py BUILD_DIR"""
import os
import re
import subprocess
import sys

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# Made at build time, found through the build directories: not part of a layer.
GENERATED = re.compile(r"(\.skel\.h|\.pb-c\.h|^flamegraph-html\.h)$")
# Below every daemon folder: the BPF headers shared with user space and the unwind-table library.
BELOW_DAEMON = ("bpf/", "unwind-tables/")


def layer_order():
    """The order as docs/architecture.md states it: one line "Layer order: a -> b -> ... ->"."""
    with open(os.path.join(TOP, "docs", "architecture.md")) as f:
        for line in f:
            m = re.match(r"\s*Layer order:\s*(.+)", line)
            if m:
                return [x.strip().strip("`").rstrip("/") for x in m.group(1).split("->") if x.strip()]
    sys.exit("check-layers: docs/architecture.md has no 'Layer order:' line")


def sources(folder):
    for root, _, names in os.walk(os.path.join(TOP, folder)):
        for n in sorted(names):
            if n.endswith((".c", ".h")):
                p = os.path.join(root, n)
                yield os.path.relpath(p, os.path.join(TOP, folder)), p


def includes(path):
    with open(path, errors="replace") as f:
        return INCLUDE.findall(f.read())


def call_graph(archive):
    """source file -> source files whose functions or data it uses, from `nm` of a static library
    whose members meson names after their sources ("http_http-server.c.o")."""
    out = subprocess.run(["nm", "-A", archive], check=True, capture_output=True, text=True).stdout
    defined, used = {}, {}
    for line in out.splitlines():
        m = re.match(r"[^:]+:([^:]+\.c\.o):\s*(?:[0-9a-f]+)?\s+([A-Za-z])\s+(\S+)$", line)
        if not m:
            continue
        member, kind, sym = m.groups()
        src = os.path.basename(member)[: -len(".c.o")]
        head, _, rest = src.partition("_")
        if rest and os.path.isdir(os.path.join(TOP, "daemon", head)):
            src = f"{head}/{rest}"
        if kind == "U":
            used.setdefault(src, set()).add(sym)
        elif kind in "TDBR":
            defined[sym] = src
    edges = {}
    for src, syms in used.items():
        for sym in syms:
            dst = defined.get(sym)
            if dst and dst != src:
                edges.setdefault(src, set()).add(dst)
    return edges


def cycles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    order = layer_order()
    rank = {name: i for i, name in enumerate(order)}
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    build = sys.argv[1]
    problems = []

    for rel, path in sources("daemon"):
        folder = rel.split("/")[0] if "/" in rel else rel  # daemon.h, main.c: their own layer
        if folder not in rank:
            problems.append(f"daemon/{rel}: folder '{folder}' is not in the layer order of docs/architecture.md")
            continue
        for inc in includes(path):
            if GENERATED.search(inc) or inc.startswith(BELOW_DAEMON):
                continue
            target = inc.split("/")[0] if "/" in inc else inc
            if "/" not in inc and inc not in rank:
                problems.append(f"daemon/{rel}: #include \"{inc}\" without its folder")
                continue
            if not os.path.exists(os.path.join(TOP, "daemon", inc)):
                problems.append(f"daemon/{rel}: #include \"{inc}\": no such file in daemon/")
                continue
            if target not in rank:
                problems.append(f"daemon/{rel}: #include \"{inc}\": '{target}' is not in the layer order")
            elif rank[target] > rank[folder]:
                problems.append(f"daemon/{rel}: #include \"{inc}\" goes up the layers ({folder} is below {target})")

    for folder, lib in (("daemon", "libprofd-core.a"), ("unwind-tables", "libunwind-tables.a")):
        for comp in cycles(call_graph(os.path.join(build, folder, lib))):
            problems.append(f"{folder}/: these files call each other: " + ", ".join(c + ".c" for c in comp))

    for p in problems:
        print(p)
    n_files = sum(1 for _ in sources("daemon")) + sum(1 for _ in sources("unwind-tables"))
    print(f"check-layers: {n_files} files, order {' -> '.join(order)}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
