#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Checks the RA-signed flag (PROFD_RULE_RA_SIGNED, "pac" in the dump) of every row of an aarch64
table against an independent reading of the CFI: binutils readelf's decoding of the instructions
(DW_CFA_AARCH64_negate_ra_state toggles, remember_state/restore_state save and restore it, each FDE
starts unsigned). libdw, the reference of test-reference.c, ignores negate_ra_state.

Usage: check-pac-state.py DUMP [--expect-signed] FILE...
Probes the first and last byte of every row and both sides of every pc where the state changes;
fails on any disagreement, and with --expect-signed when a file has no signed rows."""
import bisect
import re
import subprocess
import sys


def readelf_states(path):
    """Sorted, non-overlapping (start, end, signed) intervals from readelf's raw FDE programs."""
    out = subprocess.run(["readelf", "--debug-dump=frames", path], check=True, capture_output=True,
                         text=True).stdout
    intervals = []
    fde = re.compile(r"^\S+ \S+ \S+ FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)$")
    loc = re.compile(r"^\s+DW_CFA_(?:advance_loc\d?|set_loc): .*to ([0-9a-f]+)$")
    cur = None

    def close():
        if cur:
            start, end, pc, signed, _ = cur
            if pc < end:
                intervals.append((pc, end, signed))

    for line in out.splitlines():
        m = fde.match(line)
        if m:
            close()
            start, end = int(m.group(1), 16), int(m.group(2), 16)
            cur = [start, end, start, False, []]
            continue
        if cur is None:
            continue
        if not line.startswith(" "):
            close()
            cur = None
            continue
        m = loc.match(line)
        if m:
            new = min(int(m.group(1), 16), cur[1])
            if new > cur[2]:
                intervals.append((cur[2], new, cur[3]))
            cur[2] = max(cur[2], new)
        elif "DW_CFA_AARCH64_negate_ra_state" in line or "DW_CFA_GNU_window_save" in line:
            cur[3] = not cur[3]
        elif "DW_CFA_remember_state" in line:
            cur[4].append(cur[3])
        elif "DW_CFA_restore_state" in line:
            cur[3] = cur[4].pop()
    close()
    intervals.sort()
    # where FDEs overlap the one that starts first wins (as in the table)
    merged = []
    for a, e, s in intervals:
        if merged and a < merged[-1][1]:
            a = merged[-1][1]
        if a < e:
            merged.append((a, e, s))
    return merged


def table_rows(dump, path):
    out = subprocess.run([dump, "--text", "--no-debug-file", path], check=True, capture_output=True,
                         text=True).stdout
    rows = []
    for line in out.splitlines():
        f = line.split()
        rows.append((int(f[0], 16), f[1], f[-1] == "pac"))
    return rows


def main():
    dump, args = sys.argv[1], sys.argv[2:]
    expect_signed = "--expect-signed" in args
    files = [a for a in args if a != "--expect-signed"]
    failed = False
    for path in files:
        ref = readelf_states(path)
        rows = table_rows(dump, path)
        starts = [r[0] for r in rows]
        ref_starts = [i[0] for i in ref]

        def ours(pc):
            i = bisect.bisect_right(starts, pc) - 1
            return rows[i] if i >= 0 else None

        def theirs(pc):
            i = bisect.bisect_right(ref_starts, pc) - 1
            if i >= 0 and ref[i][0] <= pc < ref[i][1]:
                return ref[i][2]
            return None

        probes = set()
        for i, (pc, _, _) in enumerate(rows[:-1]):
            probes.add(pc)
            probes.add(rows[i + 1][0] - 1)
        for i in range(1, len(ref)):
            if ref[i][2] != ref[i - 1][2] and ref[i][0] == ref[i - 1][1]:
                probes.update((ref[i][0] - 1, ref[i][0]))
        mismatches = checked = signed = 0
        for pc in sorted(probes):
            row, want = ours(pc), theirs(pc)
            if row is None or want is None or row[1] in ("end", "unsupported", "signal", "undef"):
                continue
            checked += 1
            signed += row[2]
            if row[2] != want:
                mismatches += 1
                if mismatches <= 10:
                    print(f"  {path} {pc:#x}: table {'signed' if row[2] else 'unsigned'}, readelf "
                          f"{'signed' if want else 'unsigned'}", file=sys.stderr)
        print(f"{path}: {len(rows)} rows, {checked} probes, {signed} signed, {mismatches} mismatches")
        if mismatches or checked == 0 or (expect_signed and signed == 0):
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
