/* SPDX-License-Identifier: GPL-2.0-only */
/* A Go binary's .gopclntab: the function table the Go runtime itself uses for tracebacks. Go
 * keeps it when -ldflags=-s strips .symtab and DWARF (the usual way Go programs ship, Debian's
 * go tools among them), so it is the one source of function names and frame sizes such a binary
 * has. Formats: Go 1.2-1.15 (magic 0xfffffffb), 1.16-1.17 (0xfffffffa), 1.18-1.19 (0xfffffff0),
 * 1.20+ (0xfffffff1); little-endian hosts only, like the BPF side. Every offset is checked against
 * the section: the file may be hostile. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Elf Elf;

typedef struct GoPclntab {
        const uint8_t *data; /* the section's bytes (owned by the Elf handle) */
        size_t size;
        uint32_t magic;
        unsigned ptr_size; /* 4 or 8 */
        unsigned quantum;  /* pc quantum: 1 on x86 */
        uint64_t nfunc;
        uint64_t text;      /* ELF vaddr functab entries are relative to (1.18+) */
        uint64_t funcnames; /* offset of the function name table */
        uint64_t functab;   /* offset of the function table */
        uint64_t pctab;     /* offset pc-value tables (pcsp, ...) are relative to */
        unsigned entsz;     /* one functab entry */
        bool rel32;         /* 1.18+: 32-bit entries relative to text */
} GoPclntab;

typedef struct GoFunc {
        uint64_t entry, end; /* ELF vaddrs: [entry, end) */
        const char *name;    /* NUL-terminated inside the section; never NULL */
        uint64_t pcsp;       /* offset of its pc -> sp delta table in the section; 0: none */
} GoFunc;

/* At most this many functions are read (the biggest Go binaries have ~200,000). */
#define GOPCLNTAB_MAX_FUNCS (1u << 22)

/* Finds and checks the section. Returns 1 and fills *ret, 0 when elf is not a Go binary (or its
 * table is in a format not known here), negative errno on a libelf failure. */
int gopclntab_open(Elf *elf, GoPclntab *ret);

/* Function i (0 <= i < nfunc), in address order. Returns false when its entry is malformed (the
 * caller skips it). */
bool gopclntab_func(const GoPclntab *t, uint64_t i, GoFunc *ret);

/* Iterates a pc-value table (Go's pcvalue encoding: zigzag value deltas, pc deltas in quanta).
 * Start with *pos = f->pcsp, *pc = f->entry, *value = -1; each call yields [*ret_start, *pc) with
 * *value, and returns false at the end of the table or when it leaves the section or the
 * function. */
bool gopclntab_pcvalue_next(const GoPclntab *t, const GoFunc *f, uint64_t *pos, uint64_t *pc, int32_t *value,
                            uint64_t *ret_start);
