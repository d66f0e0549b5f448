/* SPDX-License-Identifier: GPL-2.0-only */
/* Debug files whose DWARF is stored compressed (SHF_COMPRESSED .debug_* sections: Debian's debug
 * packages) inflated off the event loop. libdw inflates every such section whole when it opens the
 * DWARF (dwarf_begin_elf), 78-96 ms for libc's debug file, 0.1-0.3 s for larger ones, and the loop
 * waits meanwhile: process events queue up, and a process that exec'd then has its first samples
 * stopped at "process not yet known". Here one thread writes the file again into a memfd with those
 * sections inflated (the rest of the file unchanged, at the same offsets, so its program headers
 * and notes stay valid; the compressed bytes left out as a hole) and libdw opens that instead:
 * 0.4 ms for libc's.
 *
 * The thread (util/work-threads.h) touches no daemon state: a job goes in (a descriptor of the
 * debug file, which the loop opened safely), a result comes out (a memfd or an error), and the loop
 * learns of results from an eventfd it watches. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Files whose compressed DWARF would take less than this inflated are left to libdw: a few ms. */
#define DWARF_INFLATE_MIN_BYTES (1ULL << 20)
/* Inflations queued, running or ready (not taken yet) at once; more go the old way (libdw, on
 * the loop). */
#define DWARF_INFLATE_JOBS 4
/* Inflated files kept until the executable that asked opens them again; one not taken within
 * this long is dropped (its memory too). */
#define DWARF_INFLATE_KEEP_NS (30 * 1000 * 1000 * 1000ULL)
/* Section headers read from a debug file; more: not inflated here. */
#define DWARF_INFLATE_MAX_SECTIONS 4096

/* Writes the ELF file of fd again into a new memfd, its compressed .debug_* sections inflated
 * (zlib only), at most max_bytes of them. Returns the memfd (close-on-exec), or -errno: EINVAL
 * (not a well-formed 64-bit little-endian ELF file), EOPNOTSUPP (another compression), E2BIG
 * (over max_bytes), ENODATA (nothing compressed), EBADMSG (a stream that does not inflate to its
 * stated size). *ret_bytes: the memory the memfd takes. Safe to call from any thread. */
int dwarf_inflate_file(int fd, uint64_t max_bytes, uint64_t *ret_bytes);

typedef struct DwarfInflater DwarfInflater;

/* Identity of a debug file (fstat): results are kept and found by it. */
typedef struct DwarfInflateKey {
        dev_t dev;
        ino_t ino;
        off_t size;
        int64_t mtime_ns;
} DwarfInflateKey;

int dwarf_inflate_key(int fd, DwarfInflateKey *ret);

/* Starts the thread; the caller watches *ret_eventfd and calls dwarf_inflater_collect() when it is
 * readable. */
int dwarf_inflater_new(DwarfInflater **ret, int *ret_eventfd);
DwarfInflater *dwarf_inflater_free(DwarfInflater *w);

/* The inflated copy of the debug file fd if one is ready (a new descriptor the caller owns; the
 * copy is then forgotten here); else, if its inflation is queued or running, -EINPROGRESS; else,
 * when queue, it is queued (fd is duplicated, not taken): -EINPROGRESS. Any other -errno: not
 * inflated here (not asked for: ENOENT; too many at once: EAGAIN; a failed earlier attempt: its
 * error, once), libdw must inflate it itself. */
int dwarf_inflater_get(DwarfInflater *w, int fd, uint64_t max_bytes, bool queue);

/* For a file about to be given to libdw, with dwarf_bytes of compressed DWARF: when that is in
 * range (DWARF_INFLATE_MIN_BYTES to max_bytes) and its copy is ready, *fd is replaced by the copy
 * (the file closed): true. Else false, *ret_pending telling whether a copy is being made (asked
 * for now when queue). w may be NULL: no inflater. */
bool dwarf_inflater_swap(DwarfInflater *w, int *fd, uint64_t dwarf_bytes, uint64_t max_bytes, bool queue,
                         bool *ret_pending);

/* Moves finished jobs to the ready list; returns how many finished (then the caller lets the
 * executables waiting for them open their debug files again). Drops ready copies older than
 * DWARF_INFLATE_KEEP_NS. */
size_t dwarf_inflater_collect(DwarfInflater *w);

typedef struct DwarfInflaterStats {
        uint64_t inflated, failed, busy, taken, expired;
        uint64_t inflated_bytes; /* sum of the inflated sections' sizes */
        uint64_t ready_bytes;    /* memfd bytes ready and not taken yet */
        uint64_t max_ns;         /* the longest inflation (off the loop) */
} DwarfInflaterStats;

void dwarf_inflater_stats(const DwarfInflater *w, DwarfInflaterStats *ret);
