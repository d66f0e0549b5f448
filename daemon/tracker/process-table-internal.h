/* SPDX-License-Identifier: GPL-2.0-only */
/* The process table itself, shared by the files that implement process-table.h: the processes
 * sorted by pid, the mapped files, the budgets and the counters /metrics shows. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tracker/process-table.h"
#include "util/string-pool.h"

struct ProcessTable {
        uint64_t exit_grace_ns;
        Process **procs; /* sorted by pid */
        size_t n_procs, cap_procs;
        ProcFile **file_buckets; /* by device + inode; power-of-two count */
        size_t n_files, n_file_buckets;
        unsigned n_open_fds, max_open_fds;
        StringPool *paths;
        uint64_t self_mnt_ns;        /* inode of profd's mount namespace */
        bool maps_query_unsupported; /* no PROCMAP_QUERY (Linux < 6.11): maps read as text */
        size_t max_bytes;
        size_t proc_bytes; /* Process structs and their mapping arrays */
        ProcFile *vdso;
        bool vdso_tried;
        size_t gc_cursor;

        uint64_t n_forks_copied, n_fork_no_parent, n_fork_skipped, n_fork_copies_dropped;
        uint64_t n_reads, n_quick_reads, n_read_errors, n_bad_lines, n_pid_reuse, n_exited_total,
                n_forgotten, n_evicted, n_table_full, n_truncated, n_no_file, n_not_elf, n_evicted_memory,
                n_truncated_memory, n_fd_evicted;
};
