/* SPDX-License-Identifier: GPL-2.0-only */
/* pid -> snapshot of its executable mappings (from /proc/PID/maps), kept for a grace period after
 * the process exits so that profiles of windows it was part of can still be symbolized. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "util/macro.h"
#include "util/safe-open.h"

typedef struct ProcessTable ProcessTable;

/* One mapped file, shared by every mapping of it in every process (key: device + inode of the
 * open file, while it is held open). */
typedef struct ProcFile ProcFile;

/* Kept small: an exited process's snapshot lives for the whole history window, and a host can
 * hold hundreds of thousands of mappings (80 bytes each; paths and files are shared). */
typedef struct ProcMapping {
        uint64_t start, end, offset; /* runtime addresses, file offset */
        uint64_t dev, inode;
        const char *path;        /* as in /proc/PID/maps, interned; "[vdso]", "" for anonymous */
        ProcFile *file;          /* NULL for anonymous mappings and when the file could not be opened */
        const uint8_t *build_id; /* the file's GNU build ID (build_id_size bytes), else NULL */
        uint64_t load_bias;      /* runtime address - ELF vaddr; valid when bias_known */
        uint8_t build_id_size;   /* 0: unknown / none */
        bool executable;
        bool deleted; /* "(deleted)" suffix */
        bool bias_known;
        uint8_t pad_[4];
} ProcMapping;
_Static_assert(sizeof(ProcMapping) == 80, "ProcMapping grew: every exited process pays for it");

typedef struct Process {
        pid_t pid;
        int maps_fd;         /* its /proc/PID/maps kept for the quick re-read (process-read.c), or -1 */
        uint64_t start_time; /* /proc/PID/stat starttime: tells pid reuse apart */
        uint64_t exited_ns;  /* CLOCK_REALTIME of exit; 0 while alive */
        char comm[17];
        ProcMapping *mappings; /* sorted by start */
        size_t n_mappings;
        unsigned generation;     /* bumped whenever mappings change */
        uint64_t checked_ns;     /* CLOCK_REALTIME of the last read or liveness check */
        unsigned bad_lines;      /* malformed /proc/PID/maps lines skipped at the last read */
        bool mappings_truncated; /* more executable mappings than PROCESS_MAX_MAPPINGS */
        bool inherited;          /* a fork child's copy of its parent's mappings, not read yet */
        bool foreign_ns;         /* in another mount namespace than profd, at the last stat read */
        uint64_t stat_ns;        /* CLOCK_MONOTONIC of the last stat read of this image; 0 at exec */
        struct Process *exited_prev, *exited_next; /* the table's exited list, while exited_ns */
} Process;

/* Bounds: beyond these, the oldest exited processes are forgotten first; a process with more
 * executable mappings keeps the first PROCESS_MAX_MAPPINGS (counted on /metrics). */
#define PROCESS_TABLE_MAX_PROCESSES 32768
#define PROCESS_MAX_MAPPINGS 8192
/* The memory budget of the table (process snapshots, mappings, files, interned paths): over it,
 * exited processes are forgotten oldest first; when only live processes remain, a process read
 * while over budget keeps its first PROCESS_MAX_MAPPINGS_OVER_BUDGET mappings. Both are
 * counted on /metrics. */
#define PROCESS_TABLE_DEFAULT_MEMORY (32u << 20)
#define PROCESS_MAX_MAPPINGS_OVER_BUDGET 256
/* Mapped files are kept open (so that exited processes, deleted files and other mount
 * namespaces can still be read) up to this many descriptors, and at most half of RLIMIT_NOFILE
 * (process_table_new() raises a low soft limit towards the hard one, up to 16384). Over it, the
 * file that a process mapped least recently gives up its descriptor (counted on /metrics). */
#define PROCESS_TABLE_MAX_OPEN_FILES 256

int process_table_new(uint64_t exit_grace_ns, ProcessTable **ret);
/* 0 means PROCESS_TABLE_DEFAULT_MEMORY. */
void process_table_set_memory_budget(ProcessTable *t, size_t bytes);
size_t process_table_memory(const ProcessTable *t);
ProcessTable *process_table_free(ProcessTable *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(ProcessTable *, process_table_free);

/* Known process, or read /proc/PID/maps now (also for a live process known only by its fork
 * copy). -ESRCH if it is gone and unknown. An exited entry whose pid now belongs to another
 * process (start time differs; checked at most once a second) is replaced by the new process. */
int process_table_get(ProcessTable *t, pid_t pid, Process **ret);
/* Re-read /proc/PID/maps (mmap/exec). A process that is gone, a zombie or exiting keeps its
 * snapshot and is marked exited (returns 0). */
int process_table_refresh(ProcessTable *t, pid_t pid, Process **ret);
/* Known process, never read from /proc; NULL if not known. */
const Process *process_table_find(const ProcessTable *t, pid_t pid);
/* Anonymous executable memory made after pid was read (JIT code, from the process events): added
 * to its snapshot without reading /proc/PID/maps, so that its frames are still placed (and named
 * from a perf map) after the process exits. 1: added; 0: known already; -EEXIST: overlaps a file
 * mapping (read the maps instead); -ENOENT/-ESRCH: pid unknown or exited; -ENOSPC: over bounds. */
int process_table_add_anon(ProcessTable *t, pid_t pid, uint64_t start, uint64_t end);
/* starttime of /proc/PID/stat (clock ticks since boot): what tells a reused pid apart. */
int process_read_start_time(pid_t pid, uint64_t *ret);
void process_table_mark_exited(ProcessTable *t, pid_t pid, uint64_t now_ns);
/* A new process (fork): until it execs or maps something it has its parent's mappings, so child
 * gets a copy of the parent's snapshot (files and paths shared) without reading /proc. A child
 * that lives a few milliseconds is then symbolized even if its maps are never read. -ENOENT:
 * parent unknown; -ENOSPC: over the table's bounds (both counted). Child already known (alive): 0; an
 * exited entry of an earlier process with the pid is replaced. */
int process_table_fork(ProcessTable *t, pid_t parent, pid_t child);
/* pid exec'd: a fork copy describes the old image, forget it (the next read gets the new one). */
/* mnt_ns: the inode number of its mount namespace at the exec (0: not known); start_ns: its start
 * time, CLOCK_BOOTTIME ns (0: not known); comm: its name (16 bytes, NUL-padded, may be NULL). The
 * read of the new image then takes them instead of looking them up in /proc/PID. */
void process_table_exec(ProcessTable *t, pid_t pid, uint32_t mnt_ns, uint64_t start_ns, const char *comm);
/* Forget processes that exited more than exit_grace_ns ago. */
void process_table_gc(ProcessTable *t, uint64_t now_ns);
const ProcMapping *process_find_mapping(const Process *p, uint64_t addr);
/* Opens the mapping's file the way that works across mount namespaces and deleted files, and
 * never blocks or opens anything but that file (safe-open.h): the descriptor kept from the read of
 * /proc/PID/maps, else /proc/PID/map_files/START-END, /proc/PID/root/PATH, or PATH for an exited
 * process, each only if it is still the file read then (same device, inode, size, times). */
int process_open_mapping(const Process *p, const ProcMapping *m);
/* What safe_open_mapping() needs to open the mapping's file again later, and only as the file
 * read now (its identity). Points into p and its file: copy what must outlive them. false when the
 * mapping has no file. */
bool process_mapping_reopen(const Process *p, const ProcMapping *m, SafeMapping *ret);
/* Key under which what is derived from a mapped file's content (unwind tables, symbols) is
 * shared: the identity of the file opened (device, inode, size, mtime, ctime: the same file in
 * the same state) followed by its GNU build ID (at most 24 bytes of it). Never the build ID
 * alone: a file anyone can write may carry another file's build ID. Returns its size; 0 when the
 * mapping's file could not be opened (nothing to share). */
#define PROCESS_MAPPING_KEY_MAX 64
size_t process_mapping_key(const ProcMapping *m, uint8_t ret[PROCESS_MAPPING_KEY_MAX]);
/* The build ID of a Go binary that has no GNU build ID (its .note.go.buildid string, e.g.
 * "zolpYOSn.../OUjrFxCj.../U9Y-LGXb.../tXprsnj7..."), else NULL. Lives as long as the mapping. */
const char *process_mapping_go_build_id(const ProcMapping *m);
/* The same key in hex (NUL-terminated, at most size bytes; "" without one); returns the length. */
size_t process_mapping_identity(const ProcMapping *m, char *buf, size_t size);
void process_table_write_metrics(const ProcessTable *t, FILE *f);
