/* SPDX-License-Identifier: GPL-2.0-only */
/* The function symbols of an executable (.symtab/.dynsym through libdwfl, else Go's function
 * table), sorted by address for lookups. */
#pragma once

#include <stdint.h>

#include "symbolizer/elf-cache.h"

/* Orders ExeSyms by address; among aliases the sized one last. */
int exesym_cmp(const void *a, const void *b);
/* Reads e's function symbols into e->syms (once: sets e->syms_loaded). -ENOMEM when there is no
 * table at all. */
int exe_load_syms(Exe *e);
/* What reading e's symbol tables will add to profd's resident memory, an estimate from the
 * executable's own section headers: their symbol and string tables' pages, and a copy of each
 * symbol (a stripped file's tables in its debug file are not known before they are read: 0). */
uint64_t exe_syms_cost(const Exe *e);
/* The function symbol containing vaddr (or the nearest sizeless one before it). */
const char *exe_symtab_lookup(const Exe *e, uint64_t vaddr);
