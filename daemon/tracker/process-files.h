/* SPDX-License-Identifier: GPL-2.0-only */
/* Mapped files shared by every mapping of them in every process (process-files.c): found by the
 * device and inode /proc/PID/maps shows, read once (ELF build ID, segments), held open within a
 * descriptor budget. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tracker/process-table-internal.h"
#include "util/safe-open.h"

/* PT_LOAD segments remembered per file; real ELF files have 2-5, more is hostile input. */
#define PROC_FILE_MAX_LOADS 16

struct ProcFile {
        HashLink link; /* in the table's files, by dev + inode */
        dev_t dev;     /* as /proc/PID/maps prints it */
        uint64_t inode;
        FileIdentity id;  /* fstat() of what was opened: the key of every cache of its content */
        bool maps_match;  /* id has the device and inode /proc/PID/maps shows: found by them */
        uint64_t used_ns; /* CLOCK_MONOTONIC of the last read of a process that maps it */
        int fd;           /* -1 when over the descriptor budget */
        unsigned refs;
        /* Mapped deleted, or by a process in another mount namespace: once its processes exit,
         * the kept descriptor is the only way to read it. Gives its descriptor up last. */
        bool precious;
        bool elf_ok;
        uint16_t e_type;
        uint8_t build_id[64];
        size_t build_id_size;
        char *go_build_id; /* a Go binary's build ID when it has no GNU one, else NULL */
        size_t n_loads;
        struct {
                uint64_t vaddr, offset, filesz;
                uint32_t flags;
        } loads[PROC_FILE_MAX_LOADS];
};

/* How many mapped files to keep open (raises a low soft RLIMIT_NOFILE first). */
unsigned proc_file_open_budget(void);
/* A new file, reached through fd, with one reference; NULL on ENOMEM. */
ProcFile *proc_file_new(ProcessTable *t, int fd, dev_t dev, uint64_t inode, const FileIdentity *id,
                        bool maps_match, bool precious);
ProcFile *proc_file_find(ProcessTable *t, dev_t dev, uint64_t inode);
ProcFile *proc_file_find_id(ProcessTable *t, const FileIdentity *id, dev_t maps_dev, uint64_t maps_inode);
/* profd's own vDSO as a file (the same image in every process); NULL when it cannot be copied. */
ProcFile *proc_file_vdso(ProcessTable *t);
void proc_file_unref(ProcessTable *t, ProcFile *f);
