/* SPDX-License-Identifier: GPL-2.0-only */
/* Inline frames, files and lines of an address from an executable's DWARF. */
#pragma once

#include <elfutils/libdw.h>
#include <stddef.h>

#include "symbolizer/elf-cache.h"
#include "symbolizer/result-frames.h"

/* The CU holding pc (a module address) and the bias to DWARF addresses; NULL when e has no
 * DWARF for pc or its DWARF may not be read (counted in c). */
Dwarf_Die *exe_addrcu(ExeCache *c, Exe *e, Dwarf_Addr pc, Dwarf_Addr *ret_bias);
/* File and line of pc from the CU's line table. */
void dwarf_inlines_srcline(ExeCache *c, Exe *e, Dwarf_Die *cudie, Dwarf_Addr dwpc, const char **ret_file,
                           int *ret_line);
/* Inline chain at pc into r->frames: innermost first; each inlined_subroutine's call site gives
 * the file:line of the frame around it. outer_sym, if any, names the outermost function. Returns
 * frames written (0: no DWARF for pc). */
size_t dwarf_inlines_frames(ExeCache *c, ResultFrames *r, Exe *e, Dwarf_Addr pc, const char *outer_sym);
