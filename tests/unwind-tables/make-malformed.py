#!/usr/bin/env python3
"""Writes the hand-made malformed inputs under malformed/ from snapshots/cfi-zoo.elf (run once;
the outputs are committed). Each must make the builder fail with a clear error, never crash."""
import os
import struct
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
src = open(os.path.join(here, 'snapshots/cfi-zoo.elf'), 'rb').read()
out = os.path.join(here, 'malformed')


def sections(img):
    shoff, = struct.unpack_from('<Q', img, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', img, 0x3a)
    hdrs = [struct.unpack_from('<IIQQQQIIQQ', img, shoff + i * shentsize) for i in range(shnum)]
    stroff = hdrs[shstrndx][4]
    res = {}
    for h in hdrs:
        name = img[stroff + h[0]:img.index(b'\0', stroff + h[0])].decode()
        res[name] = (h[4], h[5])  # offset, size
    return res


sec = sections(src)
eh_off, eh_size = sec['.eh_frame']
cie_len, = struct.unpack_from('<I', src, eh_off)
fde = eh_off + 4 + cie_len  # first FDE
fde_insns = fde + 4 + 4 + 4 + 4 + 1  # length, CIE ptr, pc_begin, pc_range, aug length (zR)


def patch(off, data):
    b = bytearray(src)
    b[off:off + len(data)] = data
    return bytes(b)


cases = {
    'empty': b'',
    'not-elf.txt': b'#!/bin/sh\necho hello\n',
    'elf-header-only': src[:64],
    'truncated-in-eh-frame': src[:eh_off + eh_size // 2],
    'elfclass32': patch(4, b'\x01'),
    'shoff-past-end': patch(0x28, struct.pack('<Q', len(src) + 4096)),
    'fde-length-past-section': patch(fde, struct.pack('<I', 0x7ffffff0)),
    'cie-pointer-out-of-range': patch(fde + 4, struct.pack('<I', 0x7ffffff0)),
    'cie-pointer-to-fde': patch(fde + 4, struct.pack('<I', 4)),
    'unknown-cfa-opcode': patch(fde_insns, b'\x3f'),
    'restore-state-without-remember': patch(fde_insns, b'\x0b'),
    'cie-version-9': patch(eh_off + 8, b'\x09'),
    'cie-augmentation-unknown': patch(eh_off + 9, b'zQ'),
}
os.makedirs(out, exist_ok=True)
for name, data in cases.items():
    open(os.path.join(out, name), 'wb').write(data)

# no CFI at all
subprocess.run(['objcopy', '--remove-section=.eh_frame', '--remove-section=.eh_frame_hdr',
                os.path.join(here, 'snapshots/cfi-zoo.elf'), os.path.join(out, 'no-cfi')], check=True)
print(f'{len(cases) + 1} files in {out}', file=sys.stderr)
