/* SPDX-License-Identifier: GPL-2.0-only */
/* Names of PLT entries ("func@plt"), decoded from the entries' code and their relocations. */
#pragma once

#include <stdint.h>

#include "symbolizer/elf-cache.h"

/* Reads e's PLT sections and names their entries; after exe_load_syms() (IFUNC relocations are
 * named by symbol). */
void exe_load_plt(Exe *e);
/* The name for vaddr in a PLT section: its entry's, else "[plt]"; NULL outside the PLT. */
const char *exe_plt_lookup(const Exe *e, uint64_t vaddr);
