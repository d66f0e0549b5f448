/* SPDX-License-Identifier: GPL-2.0-only */
/* Unwind rows of a Go binary from its .gopclntab (see go-table.c). */
#pragma once

#include "cfi.h"
#include "gopclntab.h"

/* Adds one row per stack-pointer change of every Go function to b, in address order, for an
 * amd64 or (aarch64) an arm64 binary; elf's code is read where a row depends on it (arm64's
 * runtime.asyncPreempt). Returns 0 or negative errno (err says why). */
int go_table_rows(const GoPclntab *t, Elf *elf, const TextRanges *text, bool aarch64, TableBuilder *b,
                  CfiError *err);
