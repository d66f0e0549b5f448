/* SPDX-License-Identifier: GPL-2.0-only */
/* The process table itself, shared by the files that implement process-table.h: the processes
 * found by pid, the mapped files, the budgets and the counters /metrics shows. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "tracker/process-table.h"
#include "util/chain-hash.h"
#include "util/pid-table.h"
#include "util/string-pool.h"

/* A process read at its exec is read again a millisecond later, at its loader's start-up report:
 * its /proc/PID/maps descriptor is kept for that (a procfs lookup of the pid and of the file
 * less), for the processes read last. */
#define MAPS_FDS_KEPT 32
/* Mount namespaces the exec events gave, for the reads of the new images that follow: a ring. */
#define EXEC_NS_HINTS 64
typedef struct ExecNsHint {
        pid_t pid;
        uint32_t mnt_ns;
        uint64_t at_ns;      /* CLOCK_MONOTONIC of the exec event */
        uint64_t start_time; /* as /proc/PID/stat's starttime (clock ticks); 0: not known */
        char comm[17];       /* with start_time: the name */
} ExecNsHint;

struct ProcessTable {
        uint64_t exit_grace_ns;
        PidTable procs; /* of Process */
        /* The exited processes, in the order their exit was noticed (oldest first): the grace
         * period ends and eviction picks from the front without looking at the others. */
        Process *exited_first, *exited_last;
        ChainHash files; /* ProcFile, by device + inode */
        unsigned n_open_fds, max_open_fds;
        StringPool *paths;
        uint64_t self_mnt_ns;        /* inode of profd's mount namespace */
        bool maps_query_unsupported; /* no PROCMAP_QUERY (Linux < 6.11): maps read as text */
        size_t max_bytes;
        size_t proc_bytes; /* Process structs and their mapping arrays */
        ProcFile *vdso;
        bool vdso_tried;
        size_t gc_cursor;
        /* The processes holding a maps descriptor (Process.maps_fd), oldest first: a ring, so at
         * most MAPS_FDS_KEPT are open; NULL slots are free. */
        Process *kept_maps[MAPS_FDS_KEPT];
        unsigned kept_next;
        ExecNsHint exec_ns[EXEC_NS_HINTS];
        unsigned exec_ns_next;
        int64_t boottime_offset_ns; /* our time namespace's CLOCK_BOOTTIME offset */
        bool boottime_offset_known;

        uint64_t n_forks_copied, n_fork_no_parent, n_fork_skipped, n_fork_copies_dropped;
        uint64_t n_exec_event_reads;
        uint64_t n_reads, n_quick_reads, n_read_errors, n_bad_lines, n_pid_reuse, n_exited_total,
                n_forgotten, n_evicted, n_table_full, n_truncated, n_no_file, n_not_elf, n_evicted_memory,
                n_truncated_memory, n_fd_evicted;
};

static inline Process *process_at(const ProcessTable *t, size_t pos)
{
        return pid_table_at(&t->procs, pos);
}

/* p exited (at ns, CLOCK_REALTIME; not 0): kept for the grace period, at the end of the exited
 * list. Nothing if it is marked exited already. */
static inline void process_set_exited(ProcessTable *t, Process *p, uint64_t ns)
{
        if (p->exited_ns)
                return;
        p->exited_ns = ns ? ns : 1;
        p->exited_prev = t->exited_last;
        p->exited_next = NULL;
        if (t->exited_last)
                t->exited_last->exited_next = p;
        else
                t->exited_first = p;
        t->exited_last = p;
        t->n_exited_total++;
}

/* p is alive after all (a read found it), or leaves the table: off the exited list. */
static inline void process_set_alive(ProcessTable *t, Process *p)
{
        if (!p->exited_ns)
                return;
        if (p->exited_prev)
                p->exited_prev->exited_next = p->exited_next;
        else
                t->exited_first = p->exited_next;
        if (p->exited_next)
                p->exited_next->exited_prev = p->exited_prev;
        else
                t->exited_last = p->exited_prev;
        p->exited_prev = p->exited_next = NULL;
        p->exited_ns = 0;
}

/* Closes p's kept maps descriptor, if any (exit, exec, freed). */
static inline void process_maps_fd_drop(ProcessTable *t, Process *p)
{
        if (p->maps_fd < 0)
                return;
        close(p->maps_fd);
        p->maps_fd = -1;
        for (unsigned i = 0; i < MAPS_FDS_KEPT; i++)
                if (t->kept_maps[i] == p)
                        t->kept_maps[i] = NULL;
}
