/* SPDX-License-Identifier: GPL-2.0-only */
/* Function names of Go binaries stripped of .symtab, from their .gopclntab. */
#pragma once

#include <stddef.h>

#include "symbolizer/elf-cache.h"

/* Appends the functions of e's .gopclntab to *syms (of *n entries, room for *cap); returns the
 * number of entries appended. */
size_t go_names_funcs(Exe *e, ExeSym **syms, size_t *n, size_t *cap);
