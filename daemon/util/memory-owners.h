/* SPDX-License-Identifier: GPL-2.0-only */
/* Who holds profd's memory: profd_memory_bytes{owner=...}. Each box reports what it holds through
 * its own accessor (main's /metrics renderer adds them here, so no layer learns of a higher one);
 * this adds what only the process as a whole knows: free bytes malloc keeps, and "other", the
 * resident memory no owner accounts for. Plus the few process-wide operations on that memory. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MEMORY_OWNERS_MAX 16

typedef struct MemoryOwners {
        const char *names[MEMORY_OWNERS_MAX];
        uint64_t bytes[MEMORY_OWNERS_MAX];
        size_t n;
        /* Of the bytes above, resident pages of mapped files (the kernel counts them as file RSS):
         * the rest of the file RSS is "code". */
        uint64_t file_bytes;
} MemoryOwners;

/* name: a static string; an owner added twice adds up. Past MEMORY_OWNERS_MAX it goes to "other". */
void memory_owners_add(MemoryOwners *m, const char *name, uint64_t bytes);
/* Adds allocator_free (free bytes malloc holds resident), code (file-backed resident bytes from
 * /proc/self/statm no owner counts: profd's own code and libraries) and other (resident bytes
 * minus every owner, 0 when they add up to more), then writes the family. */
void memory_owners_write_metrics(MemoryOwners *m, FILE *f);

/* What malloc holds for the block p (0 for NULL): its usable size plus the chunk header. Owners of
 * many small blocks count this rather than the bytes they asked for: for short strings the
 * difference (header, 16-byte rounding, 32-byte minimum) is a third or more, and it went to
 * "other". */
size_t memory_block_bytes(const void *p);

/* Resident bytes of profd (/proc/self/statm); -errno. */
int memory_self_rss(uint64_t *ret);
/* A file some library mapped whole (libelf's ELF_C_READ_MMAP): only the kernel knows how much of
 * it is resident. size 0: none. */
typedef struct MemoryFile {
        uint64_t dev, ino, size;
} MemoryFile;
/* ret[i]: the resident bytes (smaps "Rss:") of profd's mappings of files[i] from offset 0 that span
 * the whole file (so not the segments of a library profd itself runs, mapped by ld.so). -errno. */
int memory_files_rss(const MemoryFile *files, size_t n, uint64_t *ret);
/* The same, then drops those mappings' pages from profd's page tables (MADV_DONTNEED) but for
 * pages written since they were mapped (libelf rewrites section headers in place when it
 * inflates compressed sections; /proc/self/pagemap tells them apart): a page of the file read
 * again comes back from the file unchanged, and one not needed since stops counting in RSS. */
int memory_files_rss_drop(const MemoryFile *files, size_t n, uint64_t *ret);

/* Gives free heap pages back to the kernel (malloc_trim): after work that freed much at once
 * (a large unwind table built, parsed debug data closed), whose peak would otherwise stay
 * resident. Counted on /metrics. */
void memory_release_free(void);

/* Allocations this big or bigger get their own mapping, unmapped when freed: DWARF sections libdw
 * inflates (MiBs each), symbol tables. glibc's default threshold rises to the size of each such
 * block freed (up to 32 MiB), and with it the heap top kept before trimming (twice that), so after
 * the first executables closed the next ones' tables landed in the heap and their pages stayed
 * resident until the next malloc_trim: 16-28 MiB of free heap at a soak's RSS peaks. */
#define MEMORY_MMAP_THRESHOLD (128u << 10)
/* Fixes that threshold (and the heap top kept, at the same size) for the process; call first. */
void memory_allocator_setup(void);
