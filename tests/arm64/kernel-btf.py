#!/usr/bin/env python3
"""Cuts the kernel's BTF (.BTF section) out of an uncompressed arm64 kernel Image (or a gzip one):
kernel-btf.py IMAGE OUT.

Debian's arm64 Image is not ELF and its System.map is a stub (the real one is in the -dbg package),
so the blob is found by its header instead: magic 0xeb9f, version 1, flags 0, a 24-byte header,
types first (type_off 0) then strings (str_off == type_len), and a string section that starts with
the empty string and ends with a NUL. vmlinux's BTF is the only such blob in the Image (modules
carry their own). The result is checked by the caller with `bpftool btf dump file OUT`."""
import gzip
import struct
import sys

HEADER = struct.Struct("<HBBIIIII")  # magic, version, flags, hdr_len, type_off, type_len, str_off, str_len
MAGIC = b"\x9f\xeb\x01\x00\x18\x00\x00\x00\x00\x00\x00\x00"  # magic, v1, flags 0, hdr_len 24, type_off 0


def main():
    image, out = sys.argv[1], sys.argv[2]
    data = open(image, "rb").read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    best = None
    at = data.find(MAGIC)
    while at >= 0:
        _, _, _, hdr_len, _, type_len, str_off, str_len = HEADER.unpack_from(data, at)
        end = at + hdr_len + str_off + str_len
        if (str_off == type_len and type_len > 0 and 0 < str_len and end <= len(data) and
                data[at + hdr_len + str_off] == 0 and data[end - 1] == 0):
            if best is None or end - at > best[1] - best[0]:
                best = (at, end)
        at = data.find(MAGIC, at + 1)
    if best is None:
        sys.exit("%s: no BTF blob found" % image)
    with open(out, "wb") as f:
        f.write(data[best[0]:best[1]])
    print("%s: BTF at offset %#x, %d bytes" % (image, best[0], best[1] - best[0]))


if __name__ == "__main__":
    main()
