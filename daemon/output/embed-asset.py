#!/usr/bin/env python3
"""embed-asset.py INPUT OUTPUT NAME: writes a C header defining `static const char NAME[]` with
INPUT's bytes, so web assets ship inside the daemon (no files to install, nothing to fetch)."""
import sys

src, out, name = sys.argv[1:4]
data = open(src, "rb").read()
lines = ["/* Generated from %s by embed-asset.py; do not edit. */" % src.rsplit("/", 1)[-1],
         "#pragma once", "static const char %s[] =" % name]
for i in range(0, len(data), 96):
    chunk = data[i:i + 96]
    esc = "".join(chr(b) if 0x20 <= b < 0x7f and b not in (0x22, 0x5c, 0x3f) else "\\%03o" % b for b in chunk)
    lines.append('        "%s"' % esc)
if not data:
    lines.append('        ""')
lines[-1] += ";"
open(out, "w").write("\n".join(lines) + "\n")
