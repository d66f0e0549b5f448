/* SPDX-License-Identifier: GPL-2.0-only */
/* profd-unwind-dump [--text|--stats] [--debug-root DIR] [--no-debug-file] FILE
 * Prints the compact unwind table of FILE, one row per line (--text), or figures about it (--stats). */
#include <elf.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "unwind-table.h"

static const char *cfa_kind_name[] = {
        [PROFD_CFA_END] = "end",
        [PROFD_CFA_RSP] = "rsp",
        [PROFD_CFA_RBP] = "rbp",
        [PROFD_CFA_PLT1] = "plt1",
        [PROFD_CFA_PLT2] = "plt2",
        [PROFD_CFA_SIGNAL] = "signal",
        [PROFD_CFA_UNDEF] = "undef",
        [PROFD_CFA_UNSUPPORTED] = "unsupported",
        [PROFD_CFA_GO_SWITCH] = "go_switch",
        [PROFD_CFA_RBX] = "rbx",
        [PROFD_CFA_GO_PREEMPT] = "go_preempt",
        [PROFD_CFA_GO_MORESTACK] = "go_morestack",
};

/* aarch64: "<cfa> <x29> <return address>[ pac]", e.g. "sp+32 x29:c-32 ra:c-24 pac" or
 * "sp+0 x29:u ra:lr" (the return address still in the link register). */
static void format_rule_aarch64(const struct profd_unwind_rule *r, char *buf, size_t size)
{
        const char *k = r->cfa_kind == PROFD_CFA_RSP   ? "sp"
                        : r->cfa_kind == PROFD_CFA_RBP ? "x29"
                        : r->cfa_kind < sizeof(cfa_kind_name) / sizeof(cfa_kind_name[0])
                                ? cfa_kind_name[r->cfa_kind]
                                : "?";
        int n;
        if (r->cfa_kind == PROFD_CFA_RSP || r->cfa_kind == PROFD_CFA_RBP)
                n = snprintf(buf, size, "%s%+d", k, r->cfa_offset);
        else if (r->cfa_kind == PROFD_CFA_GO_PREEMPT && r->rbx_kind == PROFD_RBP_UNCHANGED) {
                snprintf(buf, size, "%s sp%+d x29:u pc:lr lr:c-16", k, r->cfa_offset);
                return;
        } else if (r->cfa_kind == PROFD_CFA_GO_PREEMPT) {
                /* "go_preempt sp+512 x29:c-520 pc:c-512 lr:c-16": where the interrupted frame is */
                snprintf(buf, size, "%s sp%+d x29:c%+d pc:c%+d lr:c-16", k, r->cfa_offset, r->rbp_offset,
                         r->rbx_offset);
                return;
        } else {
                /* the other kinds say all there is */
                snprintf(buf, size, "%s", k);
                return;
        }
        if (r->rbp_kind == PROFD_RBP_CFA_OFFSET)
                n += snprintf(buf + n, size - (size_t)n, " x29:c%+d", r->rbp_offset);
        else
                n += snprintf(buf + n, size - (size_t)n, " x29:u");
        if (r->rbx_kind == PROFD_RBP_CFA_OFFSET)
                n += snprintf(buf + n, size - (size_t)n, " ra:c%+d", r->rbx_offset);
        else if (r->rbx_kind == PROFD_RBX_UNKNOWN)
                n += snprintf(buf + n, size - (size_t)n, " ra:?");
        else
                n += snprintf(buf + n, size - (size_t)n, " ra:lr");
        if (r->flags & PROFD_RULE_RA_SIGNED)
                snprintf(buf + n, size - (size_t)n, " pac");
}

static void format_rule(const struct profd_unwind_rule *r, char *buf, size_t size)
{
        const char *k = r->cfa_kind < sizeof(cfa_kind_name) / sizeof(cfa_kind_name[0])
                                ? cfa_kind_name[r->cfa_kind]
                                : "?";
        int n;
        if (r->cfa_kind == PROFD_CFA_RSP || r->cfa_kind == PROFD_CFA_RBP || r->cfa_kind == PROFD_CFA_RBX)
                n = snprintf(buf, size, "%s%+d", k, r->cfa_offset);
        else
                n = snprintf(buf, size, "%s", k);
        if (r->rbp_kind == PROFD_RBP_CFA_OFFSET)
                n += snprintf(buf + n, size - (size_t)n, " c%+d", r->rbp_offset);
        else
                n += snprintf(buf + n, size - (size_t)n, " u");
        /* rbx only where it is saved or lost: most rows leave it alone */
        if (r->rbx_kind == PROFD_RBP_CFA_OFFSET)
                snprintf(buf + n, size - (size_t)n, " bx%+d", r->rbx_offset);
        else if (r->rbx_kind == PROFD_RBX_UNKNOWN)
                snprintf(buf + n, size - (size_t)n, " bx?");
}

static int dump_text(const UnwindTable *t)
{
        char rule[64];
        for (uint32_t p = 0; p < t->n_pages; p++)
                for (uint32_t i = t->page_index[p]; i < t->page_index[p + 1]; i++) {
                        uint64_t pc = t->base + ((uint64_t)p << PROFD_UT_PAGE_SHIFT) + t->rows[i].pc_low;
                        if (t->machine == EM_AARCH64)
                                format_rule_aarch64(&t->rules[t->rows[i].rule], rule, sizeof(rule));
                        else
                                format_rule(&t->rules[t->rows[i].rule], rule, sizeof(rule));
                        printf("%016llx %s\n", (unsigned long long)pc, rule);
                }
        return fflush(stdout) == 0 ? 0 : -EIO;
}

static int dump_stats(const UnwindTable *t)
{
        struct rusage ru;
        printf("build_id: ");
        for (size_t i = 0; i < t->id_size; i++)
                printf("%02x", t->id[i]);
        printf("\nid_kind: %s\n", t->id_is_hash ? "xxh64+size" : "gnu-build-id");
        printf("machine: %s\n", t->machine == EM_AARCH64 ? "aarch64" : "x86-64");
        printf("debug_file: %s\n", t->debug_file ? t->debug_file : "-");
        printf("eh_frame_hdr_used: %s\n", t->stats.eh_frame_hdr_used ? "yes" : "no");
        printf("cies: %llu\n", (unsigned long long)t->stats.cies);
        printf("fdes: %llu\n", (unsigned long long)t->stats.fdes);
        printf("fdes_outside_text: %llu\n", (unsigned long long)t->stats.fdes_outside_text);
        printf("rows_raw: %llu\n", (unsigned long long)t->stats.rows_raw);
        printf("rows: %u\n", t->n_rows);
        printf("page_fill_rows: %llu\n", (unsigned long long)t->stats.page_fill_rows);
        printf("pages: %u\n", t->n_pages);
        printf("rules: %u\n", t->n_rules);
        printf("unsupported: %llu\n",
               (unsigned long long)(t->stats.unsupported_cfa + t->stats.unsupported_ra +
                                    t->stats.unsupported_rbp));
        printf("unsupported_cfa: %llu\n", (unsigned long long)t->stats.unsupported_cfa);
        printf("unsupported_ra: %llu\n", (unsigned long long)t->stats.unsupported_ra);
        printf("unsupported_rbp: %llu\n", (unsigned long long)t->stats.unsupported_rbp);
        printf("ra_signed_rows_raw: %llu\n", (unsigned long long)t->stats.ra_signed_rows);
        printf("bytes: %zu\n", unwind_table_bytes(t));
        printf("bytes_per_row: %.2f\n", t->n_rows ? (double)unwind_table_bytes(t) / t->n_rows : 0.0);
        printf("build_peak_heap_bytes: %llu\n", (unsigned long long)t->stats.peak_bytes);
        printf("build_ms: %.3f\n", t->stats.build_ns / 1e6);
        if (getrusage(RUSAGE_SELF, &ru) == 0)
                printf("max_rss_kb: %ld\n", ru.ru_maxrss);
        return fflush(stdout) == 0 ? 0 : -EIO;
}

static void usage(FILE *f)
{
        fprintf(f, "Usage: profd-unwind-dump [--text|--stats] [--debug-root DIR] [--no-debug-file] FILE\n");
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = {
                {"text", no_argument, NULL, 't'},
                {"stats", no_argument, NULL, 's'},
                {"debug-root", required_argument, NULL, 'r'},
                {"no-debug-file", no_argument, NULL, 'n'},
                {"help", no_argument, NULL, 'h'},
                {},
        };
        UnwindTableOptions opts = {.debug_root = "/", .use_debug_file = true};
        bool stats = false;
        int c;

        while ((c = getopt_long(argc, argv, "", longopts, NULL)) >= 0) {
                switch (c) {
                case 't':
                        stats = false;
                        break;
                case 's':
                        stats = true;
                        break;
                case 'r':
                        opts.debug_root = optarg;
                        break;
                case 'n':
                        opts.use_debug_file = false;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (optind != argc - 1) {
                usage(stderr);
                return 2;
        }
        const char *path = argv[optind];
        opts.file_path = path;

        UnwindTable *t = NULL;
        char *error = NULL;
        int r = unwind_table_build_path(path, &opts, &t, &error);
        if (r < 0) {
                fprintf(stderr, "%s\n", error ? error : path);
                free(error);
                return 1;
        }
        r = stats ? dump_stats(t) : dump_text(t);
        unwind_table_free(t);
        if (r < 0) {
                fprintf(stderr, "%s: cannot write output: %s\n", path, strerror(-r));
                return 1;
        }
        return 0;
}
