/* SPDX-License-Identifier: GPL-2.0-only */
/* Where the part of _PyEval_EvalFrameDefault that the compiler moved out of the function lies.
 * GCC splits a function into its symbol and a "<name>.cold" fragment of blocks it deems rarely run;
 * the fragment is a local symbol, gone from a stripped interpreter, and a pc in it is still the
 * eval function running Python code. Usually only error paths go there, but Debian's GCC 16 build
 * of CPython 3.14 runs its whole dispatch loop in it (the exported symbol keeps 1.2 KB of set-up),
 * so without it no native frame would be known as the eval function's. */
#pragma once

#include <libelf.h>
#include <stdint.h>

/* The fragment of the function at [eval, eval + eval_size) (ELF virtual addresses) of elf: from
 * the symbol "_PyEval_EvalFrameDefault.cold" of .symtab when the file has one; otherwise the
 * .eh_frame_hdr entry (each fragment has its own FDE) that most of the function's jumps to outside
 * itself land in. -ENOENT: none found (no fragment, no .eh_frame_hdr, no clear winner); -EBADMSG:
 * malformed sections. */
int python_eval_cold_find(Elf *elf, uint64_t eval, uint64_t eval_size, uint64_t *ret_start,
                          uint64_t *ret_size);

/* The bytes at [addr, addr + n) (ELF virtual addresses) of elf's contents, in the allocated
 * section holding them; NULL when none does (or it has no data in the file). */
const uint8_t *python_elf_vaddr_bytes(Elf *elf, uint64_t addr, uint64_t n);
