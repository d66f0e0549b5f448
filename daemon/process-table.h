/* SPDX-License-Identifier: GPL-2.0-only */
/* pid -> snapshot of its executable mappings (from /proc/PID/maps), kept for a grace period after
 * the process exits so that profiles of windows it was part of can still be symbolized. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "macro.h"

typedef struct ProcessTable ProcessTable;

typedef struct ProcMapping {
        uint64_t start, end, offset; /* runtime addresses, file offset */
        uint64_t dev, inode;
        char *path;          /* as in /proc/PID/maps; "[vdso]", "" for anonymous */
        bool executable;
        bool deleted;        /* "(deleted)" suffix */
        uint8_t build_id[64];
        size_t build_id_size; /* 0: unknown / none */
        uint64_t load_bias;   /* runtime address - ELF vaddr; valid when bias_known */
        bool bias_known;
} ProcMapping;

typedef struct Process {
        pid_t pid;
        uint64_t start_time;      /* /proc/PID/stat starttime: tells pid reuse apart */
        uint64_t exited_ns;       /* CLOCK_REALTIME of exit; 0 while alive */
        char comm[17];
        ProcMapping *mappings;    /* sorted by start */
        size_t n_mappings;
        unsigned generation;      /* bumped whenever mappings change */
} Process;

int process_table_new(uint64_t exit_grace_ns, ProcessTable **ret);
ProcessTable *process_table_free(ProcessTable *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(ProcessTable *, process_table_free);

/* Known process, or read /proc/PID/maps now. -ESRCH if it is gone and unknown. */
int process_table_get(ProcessTable *t, pid_t pid, Process **ret);
/* Re-read /proc/PID/maps (mmap/exec). */
int process_table_refresh(ProcessTable *t, pid_t pid, Process **ret);
void process_table_mark_exited(ProcessTable *t, pid_t pid, uint64_t now_ns);
/* Forget processes that exited more than exit_grace_ns ago. */
void process_table_gc(ProcessTable *t, uint64_t now_ns);
const ProcMapping *process_find_mapping(const Process *p, uint64_t addr);
/* Opens the mapping's file the way that works across mount namespaces and deleted files:
 * /proc/PID/map_files/START-END, else /proc/PID/root/PATH. */
int process_open_mapping(const Process *p, const ProcMapping *m);
void process_table_write_metrics(const ProcessTable *t, FILE *f);
