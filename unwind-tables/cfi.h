/* SPDX-License-Identifier: GPL-2.0-only */
/* Internal: single-pass CIE/FDE decoder and CFA interpreter over raw .eh_frame/.debug_frame bytes,
 * feeding the table builder (table-builder.h). */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cfi-error.h"
#include "table-builder.h"
#include "unwind-table.h"

#define CFI_MAX_SECTIONS 3

typedef struct CfiSection {
        const char *name; /* for errors, e.g. ".eh_frame" or "debug file .debug_frame" */
        const uint8_t *data;
        size_t size;
        uint64_t vaddr; /* sh_addr: the base of DW_EH_PE_pcrel pointers */
        bool is_eh;
} CfiSection;

/* Executable PT_LOAD ranges: FDEs outside them are dropped and counted, FDE ends are clamped to
 * them, so garbage addresses cannot blow up the page index. */
typedef struct TextRanges {
        size_t n;
        uint64_t start[16], end[16];
} TextRanges;

/* Whether [a, e) lies inside one of the ranges. */
static inline bool text_ranges_contain(const TextRanges *t, uint64_t a, uint64_t e)
{
        for (size_t i = 0; i < t->n; i++)
                if (a >= t->start[i] && e <= t->end[i])
                        return true;
        return false;
}

typedef struct FdeRef {
        uint64_t start;
        uint32_t offset;  /* of the FDE record in its section */
        uint32_t section; /* index into CfiParser.sections: lower wins when two FDEs overlap */
} FdeRef;

/* Whose registers the CFI speaks of: chosen from the file's e_machine, not from the machine the
 * builder runs on (aarch64 tables are built and checked on x86-64 too). */
typedef enum CfiMachine {
        CFI_X86_64 = 0,
        CFI_AARCH64,
} CfiMachine;

typedef struct CfiParser {
        const CfiSection *sections;
        size_t n_sections;
        const TextRanges *text;
        CfiError *err;
        UnwindTableStats *stats;
        CfiMachine machine;
        struct CieCacheEntry *cie_cache; /* CIE_CACHE_SIZE entries */
        bool count_in_run;               /* FDEs are counted by cfi_run_fde (.eh_frame_hdr path) */
        /* CFA instruction bytes interpreted so far, and the budget: CIEs evicted from the cache are
         * re-run, so crafted input could otherwise cost (CIE size x FDE count). */
        uint64_t work, work_limit;
} CfiParser;

/* The binary search table of .eh_frame_hdr: (initial location, FDE address) pairs sorted by
 * location, both relative to the header's address. */
typedef struct EhFrameHdr {
        const uint8_t *table;
        size_t count;
        uint64_t vaddr;
} EhFrameHdr;

/* Returns 1 when hdr has the usual layout, points at section eh_si, is sorted and stays inside it;
 * 0 when it cannot be used (then the FDEs are collected and sorted instead). */
int cfi_eh_frame_hdr(CfiParser *p, const CfiSection *hdr, uint32_t eh_si, EhFrameHdr *ret);
void cfi_eh_frame_hdr_entry(const EhFrameHdr *h, const CfiSection *eh, size_t i, FdeRef *ret);
/* Walks the records of section si (structure only), counting CIEs into stats and FDEs. */
int cfi_count_records(CfiParser *p, uint32_t si, size_t *ret_fdes);

struct CieCacheEntry *cfi_cie_cache_new(void); /* free() it */
/* Appends the FDEs of section s that start inside text to *fdes (grown with realloc). */
int cfi_collect_fdes(CfiParser *p, uint32_t s, FdeRef **fdes, size_t *n, size_t *cap);
/* Interprets one FDE and feeds its rows to b; FDEs outside text or empty are skipped. */
int cfi_run_fde(CfiParser *p, const FdeRef *f, TableBuilder *b);

typedef struct Xxh64 {
        uint64_t v[4];
        uint8_t buf[32];
        size_t buf_len;
        uint64_t total, seed;
} Xxh64;
void xxh64_init(Xxh64 *x, uint64_t seed);
void xxh64_update(Xxh64 *x, const void *data, size_t len);
uint64_t xxh64_digest(const Xxh64 *x);
uint64_t xxh64(const void *data, size_t len, uint64_t seed);
