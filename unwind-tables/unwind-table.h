/* SPDX-License-Identifier: GPL-2.0-only */
/* ELF .eh_frame/.debug_frame -> compact unwind table (bpf/profd-unwind-table.h), for x86-64 and
 * aarch64 files alike (the registers follow the file's e_machine, not the host's). No BPF or
 * daemon dependency. */
#pragma once

#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/profd-unwind-table.h"

#define UNWIND_TABLE_ID_MAX 64

typedef struct UnwindTableOptions {
        /* Root that /usr/lib/debug is looked up under (e.g. "/proc/PID/root"); NULL: "/". */
        const char *debug_root;
        /* Also read the separate debug file (build-id path, .gnu_debuglink). */
        bool use_debug_file;
        /* Path of the file as seen under debug_root, for .gnu_debuglink lookups next to it; NULL:
         * only the build-id path is tried. */
        const char *file_path;
        /* Opens path (absolute, as seen from root: NULL for "/") of a candidate debug file and
         * returns a regular file's descriptor or a negative errno. NULL: open(root + path) with
         * O_NONBLOCK (a FIFO there cannot stall the build) and a regular-file check; a caller
         * reading other processes' roots passes one that also keeps symlinks inside root. */
        int (*open_debug_file)(const char *root, const char *path, void *userdata);
        void *userdata;
        /* The build fails with -E2BIG rather than produce a larger table; 0: the default. */
        size_t max_table_bytes;
        /* The e_machine a file must have (EM_X86_64, EM_AARCH64): a daemon loads tables only for
         * its own machine's BPF walker. 0: any machine the builder knows. */
        uint16_t machine;
} UnwindTableOptions;

#define UNWIND_TABLE_MAX_BYTES_DEFAULT (256u << 20)

typedef struct UnwindTableStats {
        uint64_t fdes, cies;
        uint64_t rows_raw;        /* rows before merging identical neighbours */
        uint64_t unsupported_cfa; /* rows whose CFA rule is not rsp/rbp+N, PLT or signal */
        uint64_t unsupported_rbp; /* rows whose rbp rule is not "unchanged" or "at CFA+N" */
        uint64_t unsupported_ra;  /* rows whose return address is not at CFA-8 (aarch64: not in x30
                                   * or at CFA+N) */
        uint64_t ra_signed_rows;  /* aarch64: rows (before merging) with PROFD_RULE_RA_SIGNED */
        uint64_t build_ns;
        uint64_t fdes_outside_text; /* FDEs starting outside every executable PT_LOAD: dropped */
        uint64_t page_fill_rows;    /* rows copied to offset 0 of a page (see profd-unwind-table.h) */
        uint64_t peak_bytes;        /* the builder's own peak heap use (FDE list, rows, rules) */
        bool eh_frame_hdr_used;     /* FDE order taken from .eh_frame_hdr (else collected, sorted) */
} UnwindTableStats;

typedef struct UnwindTable {
        /* Identity: GNU build ID, or (id_is_hash) a content hash when the file has none. */
        uint8_t id[UNWIND_TABLE_ID_MAX];
        size_t id_size;
        bool id_is_hash;

        uint64_t base;    /* ELF vaddr of page 0: (lowest row pc) & ~(PROFD_UT_PAGE_SIZE - 1) */
        uint32_t n_pages; /* page_index has n_pages + 1 entries; page_index[n_pages] == n_rows */
        uint32_t *page_index;
        uint32_t n_rows;
        struct profd_unwind_row *rows;
        uint32_t n_rules;
        struct profd_unwind_rule *rules;

        UnwindTableStats stats;
        /* e_machine of the file (EM_X86_64 or EM_AARCH64): whose registers the rules speak of */
        uint16_t machine;
        /* Separate debug file whose .debug_frame was used (path under debug_root), or NULL. */
        char *debug_file;
} UnwindTable;

/* Builds the table of an open ELF file. name is used in error messages only. On failure returns
 * negative errno and, if ret_error is non-NULL, a malloc'd one-line reason naming the file. */
int unwind_table_build_fd(int fd, const char *name, const UnwindTableOptions *opts, UnwindTable **ret,
                          char **ret_error);
int unwind_table_build_path(const char *path, const UnwindTableOptions *opts, UnwindTable **ret,
                            char **ret_error);
UnwindTable *unwind_table_free(UnwindTable *t);
/* The same over an ELF handle already open (e.g. elf_memory() in the fuzzer); the content hash
 * identity covers elf_rawfile(). */
typedef struct Elf Elf;
int unwind_table_build_elf(Elf *elf, const char *name, const UnwindTableOptions *opts, UnwindTable **ret,
                           char **ret_error);

/* The rule in force at ELF vaddr pc, evaluated exactly as the BPF unwinder does (page index, then
 * binary search). Returns 0, or -ENOENT when pc is outside every page or before the first row. */
int unwind_table_lookup(const UnwindTable *t, uint64_t pc, struct profd_unwind_rule *ret_rule);

/* Identity only (GNU build ID or content hash), cheap: no CFI parsing. */
int unwind_table_identity(int fd, uint8_t ret_id[UNWIND_TABLE_ID_MAX], size_t *ret_size, bool *ret_is_hash);

/* Checks the invariants the BPF unwinder relies on (page index monotonic and complete, rows
 * sorted within a page, every page after the first starting at offset 0, rule indices in range).
 * Returns 0 or -EUCLEAN. */
int unwind_table_validate(const UnwindTable *t);

/* Bytes of the compact form, all-in (page index + rows + rules). */
size_t unwind_table_bytes(const UnwindTable *t);
