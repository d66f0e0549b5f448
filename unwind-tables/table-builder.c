/* SPDX-License-Identifier: GPL-2.0-only */
/* Sorted intervals in, compact table out (layout: bpf/profd-unwind-table.h). Rows are written
 * straight into their final 4-byte form: neighbours with the same rule are merged as they arrive,
 * gaps get an END row, and a copy of the rule in force is put at offset 0 of every page after the
 * first. Rules are deduplicated through a small open-addressing hash. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "table-builder.h"

/* 65536 pages = a 4 GiB text span; beyond that the page index alone would be larger than any
 * real table, so such input is rejected rather than allocated. */
#define MAX_PAGES 65536u

struct TableBuilder {
        UnwindTableStats *stats;
        CfiError *err;
        size_t max_bytes;

        bool have_rows;
        uint64_t base;
        uint64_t cov_end; /* end of the last interval; rows below it are final */
        uint32_t cur_page;
        uint32_t last_rule;
        uint32_t end_rule;
        bool have_end_rule;
        /* ELF entry point not covered by any interval yet (builder_set_entry) */
        bool entry_pending;
        uint64_t entry;

        struct profd_unwind_row *rows;
        size_t n_rows, cap_rows;
        uint32_t *pages;
        size_t n_pages, cap_pages; /* entries used in pages[], i.e. the page index so far */

        struct profd_unwind_rule *rules;
        size_t n_rules, cap_rules;
        uint32_t *hash; /* rule index + 1, 0 = empty */
        size_t hash_size;

        size_t cur_bytes, peak_bytes;
};

static void account(TableBuilder *b, size_t old_bytes, size_t new_bytes)
{
        b->cur_bytes = b->cur_bytes - old_bytes + new_bytes;
        if (b->cur_bytes > b->peak_bytes)
                b->peak_bytes = b->cur_bytes;
}

static int grow(TableBuilder *b, void **p, size_t *cap, size_t elem, size_t min_cap)
{
        size_t table_bytes = b->n_rows * sizeof(*b->rows) + b->n_pages * sizeof(*b->pages) +
                             b->n_rules * sizeof(*b->rules);
        if (table_bytes + elem > b->max_bytes)
                return cfi_fail(b->err, -E2BIG, "unwind table larger than the limit of %zu bytes",
                                b->max_bytes);
        /* 1.5x growth: the transient waste stays well below the final size */
        size_t nc = *cap < 64 ? 64 : *cap + *cap / 2;
        if (nc < min_cap)
                nc = min_cap;
        void *np = realloc(*p, nc * elem);
        if (!np)
                return cfi_fail(b->err, -ENOMEM, "out of memory");
        account(b, *cap * elem, nc * elem);
        *p = np;
        *cap = nc;
        return 0;
}

TableBuilder *builder_new(UnwindTableStats *stats, CfiError *err, size_t rows_hint, size_t max_bytes)
{
        TableBuilder *b = calloc(1, sizeof(*b));
        if (!b)
                return NULL;
        b->stats = stats;
        b->err = err;
        b->max_bytes = max_bytes;
        if (rows_hint > max_bytes / sizeof(*b->rows))
                rows_hint = max_bytes / sizeof(*b->rows);
        if (rows_hint > 0 && grow(b, (void **)&b->rows, &b->cap_rows, sizeof(*b->rows), rows_hint) < 0)
                return builder_free(b);
        return b;
}

TableBuilder *builder_free(TableBuilder *b)
{
        if (!b)
                return NULL;
        free(b->rows);
        free(b->pages);
        free(b->rules);
        free(b->hash);
        free(b);
        return NULL;
}

size_t builder_peak_bytes(const TableBuilder *b)
{
        return b->peak_bytes;
}

/* A rule's 12 bytes folded into one hash key; equality is checked on the whole rule. */
static inline uint64_t rule_key(const struct profd_unwind_rule *r)
{
        uint64_t k;
        uint32_t hi;
        memcpy(&k, r, sizeof(k));
        memcpy(&hi, (const uint8_t *)r + sizeof(k), sizeof(hi));
        return k ^ ((uint64_t)hi * 0xc2b2ae3d27d4eb4full);
}

static inline bool rule_eq(const struct profd_unwind_rule *a, const struct profd_unwind_rule *b)
{
        return memcmp(a, b, sizeof(*a)) == 0;
}

static inline size_t hash_slot(uint64_t k, size_t size)
{
        /* Fibonacci hashing: the top bits of the product depend on every bit of the rule */
        return (size_t)((k * 0x9e3779b97f4a7c15ull) >> (64 - __builtin_ctzll(size)));
}

static int rule_index(TableBuilder *b, const struct profd_unwind_rule *r, uint32_t *ret)
{
        uint64_t k = rule_key(r);
        int ret_r;

        if (b->n_rules > 0 && rule_eq(&b->rules[b->last_rule], r)) {
                *ret = b->last_rule;
                return 0;
        }
        if (b->hash_size == 0 || (b->n_rules + 1) * 2 > b->hash_size) {
                size_t ns = b->hash_size ? b->hash_size * 2 : 256;
                uint32_t *nh = calloc(ns, sizeof(uint32_t));
                if (!nh)
                        return cfi_fail(b->err, -ENOMEM, "out of memory");
                account(b, b->hash_size * sizeof(uint32_t), ns * sizeof(uint32_t));
                for (size_t i = 0; i < b->n_rules; i++) {
                        size_t s = hash_slot(rule_key(&b->rules[i]), ns);
                        while (nh[s])
                                s = (s + 1) & (ns - 1);
                        nh[s] = (uint32_t)i + 1;
                }
                free(b->hash);
                b->hash = nh;
                b->hash_size = ns;
        }
        size_t s = hash_slot(k, b->hash_size);
        while (b->hash[s]) {
                if (rule_eq(&b->rules[b->hash[s] - 1], r)) {
                        *ret = b->hash[s] - 1;
                        return 0;
                }
                s = (s + 1) & (b->hash_size - 1);
        }
        if (b->n_rules >= PROFD_UT_MAX_RULES)
                return cfi_fail(b->err, -E2BIG, "more than %u distinct unwind rules", PROFD_UT_MAX_RULES);
        if (b->n_rules == b->cap_rules) {
                ret_r = grow(b, (void **)&b->rules, &b->cap_rules, sizeof(*b->rules), 0);
                if (ret_r < 0)
                        return ret_r;
        }
        b->rules[b->n_rules] = *r;
        b->hash[s] = (uint32_t)b->n_rules + 1;
        *ret = (uint32_t)b->n_rules++;
        return 0;
}

static inline int push_raw(TableBuilder *b, uint16_t pc_low, uint32_t rule)
{
        int r;
        if (b->n_rows == b->cap_rows) {
                r = grow(b, (void **)&b->rows, &b->cap_rows, sizeof(*b->rows), 0);
                if (r < 0)
                        return r;
        }
        b->rows[b->n_rows++] = (struct profd_unwind_row){pc_low, (uint16_t)rule};
        return 0;
}

static inline int push_page(TableBuilder *b)
{
        int r;
        if (b->n_pages == b->cap_pages) {
                r = grow(b, (void **)&b->pages, &b->cap_pages, sizeof(*b->pages), 0);
                if (r < 0)
                        return r;
        }
        b->pages[b->n_pages++] = (uint32_t)b->n_rows;
        return 0;
}

static int push_row(TableBuilder *b, uint64_t pc, uint32_t rule)
{
        int r;

        if (!b->have_rows) {
                b->have_rows = true;
                b->base = pc & ~(uint64_t)(PROFD_UT_PAGE_SIZE - 1);
                b->cur_page = 0;
                r = push_page(b);
                if (r < 0)
                        return r;
        }
        uint64_t page = (pc - b->base) >> PROFD_UT_PAGE_SHIFT;
        if (page >= MAX_PAGES)
                return cfi_fail(b->err, -E2BIG, "unwind rows span more than %u pages of 64 KiB", MAX_PAGES);
        while (b->cur_page < page) {
                b->cur_page++;
                r = push_page(b);
                if (r < 0)
                        return r;
                if (pc != b->base + ((uint64_t)b->cur_page << PROFD_UT_PAGE_SHIFT)) {
                        r = push_raw(b, 0, b->last_rule);
                        if (r < 0)
                                return r;
                        b->stats->page_fill_rows++;
                }
        }
        if (b->n_rows > b->pages[b->n_pages - 1] && b->rows[b->n_rows - 1].pc_low == (uint16_t)pc)
                b->rows[b->n_rows - 1].rule = (uint16_t)rule; /* replaces a page-fill copy */
        else {
                r = push_raw(b, (uint16_t)pc, rule);
                if (r < 0)
                        return r;
        }
        b->last_rule = rule;
        return 0;
}

static int end_index(TableBuilder *b, uint32_t *ret)
{
        struct profd_unwind_rule end = {.cfa_kind = PROFD_CFA_END};
        int r;

        if (!b->have_end_rule) {
                r = rule_index(b, &end, &b->end_rule);
                if (r < 0)
                        return r;
                b->have_end_rule = true;
        }
        *ret = b->end_rule;
        return 0;
}

void builder_set_entry(TableBuilder *b, uint64_t entry)
{
        b->entry = entry;
        b->entry_pending = true;
}

int builder_interval(TableBuilder *b, uint64_t a, uint64_t e, const struct profd_unwind_rule *rule,
                     int unsup)
{
        uint32_t idx;
        int r;

        /* The entry point in a gap no FDE covers: the start code there (ld.so's _start and
         * _dl_start_user, hand-written, without CFI) runs at the bottom of the stack, called
         * by nobody: the rows from it up to this interval say so. */
        if (b->entry_pending && e > b->entry) {
                b->entry_pending = false;
                if (a > b->entry && (!b->have_rows || b->cov_end <= b->entry)) {
                        static const struct profd_unwind_rule outermost = {.cfa_kind = PROFD_CFA_UNDEF};
                        r = builder_interval(b, b->entry, a, &outermost, UNSUP_NONE);
                        if (r < 0)
                                return r;
                }
        }

        if (b->have_rows && e <= b->cov_end)
                return 0;
        if (b->have_rows && a < b->cov_end)
                a = b->cov_end;

        b->stats->rows_raw++;
        if (rule->flags & PROFD_RULE_RA_SIGNED)
                b->stats->ra_signed_rows++;
        switch (unsup) {
        case UNSUP_CFA:
                b->stats->unsupported_cfa++;
                break;
        case UNSUP_RA:
                b->stats->unsupported_ra++;
                break;
        case UNSUP_RBP:
                b->stats->unsupported_rbp++;
                break;
        }

        if (b->have_rows && a > b->cov_end) {
                b->stats->rows_raw++;
                r = end_index(b, &idx);
                if (r < 0)
                        return r;
                if (idx != b->last_rule) {
                        r = push_row(b, b->cov_end, idx);
                        if (r < 0)
                                return r;
                }
        }
        r = rule_index(b, rule, &idx);
        if (r < 0)
                return r;
        if (!b->have_rows || idx != b->last_rule) {
                r = push_row(b, a, idx);
                if (r < 0)
                        return r;
        }
        b->cov_end = e;
        return 0;
}

int builder_finish(TableBuilder *b, UnwindTable *t)
{
        uint32_t idx;
        int r;

        if (!b->have_rows)
                return b->stats->fdes_outside_text > 0
                               ? cfi_fail(b->err, -ENODATA,
                                          "no FDE covers an executable segment (%llu outside)",
                                          (unsigned long long)b->stats->fdes_outside_text)
                               : cfi_fail(b->err, -ENODATA, "no FDEs");
        b->stats->rows_raw++;
        r = end_index(b, &idx);
        if (r < 0)
                return r;
        if (b->cov_end >= b->base + ((uint64_t)MAX_PAGES << PROFD_UT_PAGE_SHIFT))
                return cfi_fail(b->err, -E2BIG, "unwind rows span more than %u pages of 64 KiB", MAX_PAGES);
        r = push_row(b, b->cov_end, idx);
        if (r < 0)
                return r;
        r = push_page(b); /* sentinel: page_index[n_pages] == n_rows */
        if (r < 0)
                return r;
        size_t table_bytes = b->n_rows * sizeof(*b->rows) + b->n_pages * sizeof(*b->pages) +
                             b->n_rules * sizeof(*b->rules);
        if (table_bytes > b->max_bytes)
                return cfi_fail(b->err, -E2BIG,
                                "unwind table of %zu bytes larger than the limit of %zu bytes", table_bytes,
                                b->max_bytes);

        /* shrink to fit; realloc to a smaller size cannot fail in a way that loses data */
        struct profd_unwind_row *rows = realloc(b->rows, b->n_rows * sizeof(*rows));
        if (rows)
                b->rows = rows;
        uint32_t *pages = realloc(b->pages, b->n_pages * sizeof(*pages));
        if (pages)
                b->pages = pages;
        struct profd_unwind_rule *rules = realloc(b->rules, b->n_rules * sizeof(*rules));
        if (rules)
                b->rules = rules;

        t->base = b->base;
        t->n_pages = (uint32_t)b->n_pages - 1;
        t->page_index = b->pages;
        t->n_rows = (uint32_t)b->n_rows;
        t->rows = b->rows;
        t->n_rules = (uint32_t)b->n_rules;
        t->rules = b->rules;
        b->pages = NULL;
        b->rows = NULL;
        b->rules = NULL;
        b->n_rows = b->n_pages = b->n_rules = 0;
        return 0;
}
