/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include "util/macro.h"
#include "util/memory-owners.h"
#include "util/metrics-writer.h"

static uint64_t n_releases, released_bytes;

void memory_owners_add(MemoryOwners *m, const char *name, uint64_t bytes)
{
        for (size_t i = 0; i < m->n; i++)
                if (strcmp(m->names[i], name) == 0) {
                        m->bytes[i] += bytes;
                        return;
                }
        if (m->n >= MEMORY_OWNERS_MAX)
                return; /* shows in "other" */
        m->names[m->n] = name;
        m->bytes[m->n++] = bytes;
}

/* Resident bytes, and of them file-backed and shared ones (statm's "shared"). */
static int self_statm(uint64_t *ret_rss, uint64_t *ret_shared)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/self/statm", "re");
        unsigned long long size, resident, shared;
        long page = sysconf(_SC_PAGESIZE);

        if (!f)
                return -errno;
        if (fscanf(f, "%llu %llu %llu", &size, &resident, &shared) != 3 || page <= 0)
                return -EBADMSG;
        *ret_rss = (uint64_t)resident * (uint64_t)page;
        if (ret_shared)
                *ret_shared = (uint64_t)shared * (uint64_t)page;
        return 0;
}

size_t memory_block_bytes(const void *p)
{
        return p ? malloc_usable_size((void *)p) + sizeof(size_t) : 0;
}

int memory_self_rss(uint64_t *ret)
{
        return self_statm(ret, NULL);
}

/* PM_PRESENT, PM_SWAP and PM_FILE of a /proc/PID/pagemap entry (Documentation/admin-guide/mm/pagemap.rst).
 */
#define PAGEMAP_PRESENT (1ULL << 63)
#define PAGEMAP_SWAPPED (1ULL << 62)
#define PAGEMAP_FILE (1ULL << 61)

/* MADV_DONTNEED on [start, end) but for pages that are private copies (written since mapped):
 * those hold data the file does not, and dropping them would bring the file's back. Returns the
 * resident bytes of the range before the drop (from /proc/self/pagemap, which walks only this
 * range: smaps walks every mapping of profd, and was a sixth of its CPU with a check a second). */
static uint64_t drop_clean_pages(int pagemap_fd, uint64_t start, uint64_t end)
{
        const uint64_t page = 4096;
        uint64_t run = start, entries[512], rss = 0;

        for (uint64_t a = start; a < end; a += page) {
                uint64_t e, k = (a - start) / page % ELEMENTSOF(entries);

                if (k == 0) {
                        size_t n = (size_t)((end - a) / page), want;

                        want = (n < ELEMENTSOF(entries) ? n : ELEMENTSOF(entries)) * sizeof(uint64_t);

                        if (pread(pagemap_fd, entries, want, (off_t)(a / page * sizeof(uint64_t))) !=
                            (ssize_t)want)
                                return rss; /* the rest is not dropped: safe */
                }
                e = entries[k];
                if (e & PAGEMAP_PRESENT)
                        rss += page;
                /* A private copy: resident, or swapped out (dropped, it would be lost). */
                if (((e & PAGEMAP_PRESENT) && !(e & PAGEMAP_FILE)) || (e & PAGEMAP_SWAPPED)) {
                        if (a > run)
                                (void)madvise((void *)(uintptr_t)run, a - run, MADV_DONTNEED);
                        run = a + page;
                }
        }
        if (end > run)
                (void)madvise((void *)(uintptr_t)run, end - run, MADV_DONTNEED);
        return rss;
}

/* The mapping of files[i] that libelf made: private, not executable (not a segment ld.so
 * mapped), from offset 0, spanning the whole file. -1 if none. */
static ssize_t match_file(const MemoryFile *files, size_t n, unsigned long long start,
                          unsigned long long end, const char *perms, unsigned long long off, unsigned maj,
                          unsigned min, unsigned long long ino)
{
        if (off != 0 || ino == 0 || perms[3] != 'p' || perms[2] == 'x')
                return -1;
        for (size_t i = 0; i < n; i++)
                if (files[i].size > 0 && files[i].ino == ino &&
                    files[i].dev == (uint64_t)makedev(maj, min) && end - start >= (files[i].size & ~4095ULL))
                        return (ssize_t)i;
        return -1;
}

static int files_rss(const MemoryFile *files, size_t n, uint64_t *ret, bool drop)
{
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_close_ int pagemap_fd = -EBADF;
        char line[4096];
        ssize_t cur = -1;
        typedef struct Range {
                uint64_t start, end;
                size_t file;
        } Range;
        Range to_drop[512];
        size_t n_drop = 0;

        for (size_t i = 0; i < n; i++)
                ret[i] = 0;
        if (n == 0)
                return 0;
        /* To drop, the ranges from maps (no page walk) and their residency from pagemap. */
        if (drop) {
                pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
                if (pagemap_fd < 0)
                        return -errno;
        }
        f = fopen(drop ? "/proc/self/maps" : "/proc/self/smaps", "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                unsigned long long start, end, off, ino, kb;
                unsigned maj, min;
                char perms[8];

                if (!strchr(line, '\n')) {
                        /* A long path: skip the rest of the line. */
                        int ch;
                        while ((ch = fgetc(f)) != EOF && ch != '\n')
                                ;
                }
                if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu", &start, &end, perms, &off, &maj, &min,
                           &ino) == 7) {
                        cur = match_file(files, n, start, end, perms, off, maj, min, ino);
                        if (cur >= 0 && drop && n_drop < ELEMENTSOF(to_drop))
                                to_drop[n_drop++] = (Range){start, end, (size_t)cur};
                } else if (cur >= 0 && !drop && sscanf(line, "Rss: %llu kB", &kb) == 1)
                        ret[cur] += (uint64_t)kb * 1024;
        }
        /* After reading: maps is not to change under the reader. */
        for (size_t i = 0; i < n_drop; i++)
                ret[to_drop[i].file] += drop_clean_pages(pagemap_fd, to_drop[i].start, to_drop[i].end);
        return 0;
}

int memory_files_rss(const MemoryFile *files, size_t n, uint64_t *ret)
{
        return files_rss(files, n, ret, false);
}

int memory_files_rss_drop(const MemoryFile *files, size_t n, uint64_t *ret)
{
        return files_rss(files, n, ret, true);
}

/* Resident bytes of the main malloc arena (the "[heap]" mapping), from /proc/self/smaps. */
static int heap_rss(uint64_t *ret)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/self/smaps", "re");
        char line[4096];
        bool in_heap = false;

        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                unsigned long long kb;

                if (!strchr(line, '\n')) {
                        int ch;
                        while ((ch = fgetc(f)) != EOF && ch != '\n')
                                ;
                }
                if (strchr(line, '-') && strstr(line, " [heap]"))
                        in_heap = true;
                else if (in_heap && sscanf(line, "Rss: %llu kB", &kb) == 1) {
                        *ret = (uint64_t)kb * 1024;
                        return 0;
                }
        }
        return -ENOENT;
}

void memory_owners_write_metrics(MemoryOwners *m, FILE *f)
{
        /* Walks malloc's free lists: milliseconds on a heap of many free chunks, so once per
         * scrape and never in a hot path. */
        struct mallinfo2 mi = mallinfo2();
        uint64_t rss = 0, shared = 0, owned = 0, heap = 0, free_bytes = mi.fordblks + mi.fsmblks;

        /* Free chunks stay on malloc's lists after malloc_trim gave their pages back: what is
         * resident of them is the heap's resident part less what is in use (one thread, so the
         * main arena is nearly all of it). Without smaps, every free byte. */
        if (heap_rss(&heap) >= 0 && free_bytes > (heap > mi.uordblks ? heap - mi.uordblks : 0))
                free_bytes = heap > mi.uordblks ? heap - mi.uordblks : 0;
        memory_owners_add(m, "allocator_free", free_bytes);
        (void)self_statm(&rss, &shared);
        memory_owners_add(m, "code", shared > m->file_bytes ? shared - m->file_bytes : 0);
        for (size_t i = 0; i < m->n; i++)
                owned += m->bytes[i];
        memory_owners_add(m, "other", rss > owned ? rss - owned : 0);

        metric_labelled(f, "profd_memory_bytes", "gauge",
                        "Memory profd holds, by owner; other: resident memory (RSS) no owner accounts for.",
                        "owner", m->names, m->bytes, m->n);
        metric_counter(f, "profd_memory_releases_total",
                       "Times free heap pages were given back to the kernel after a large free.",
                       n_releases);
        metric_counter(f, "profd_memory_released_bytes_total", "Resident bytes those releases gave back.",
                       released_bytes);
}

void memory_release_free(void)
{
        uint64_t before = 0, after = 0;

        (void)memory_self_rss(&before);
        (void)malloc_trim(0);
        (void)memory_self_rss(&after);
        n_releases++;
        if (before > after)
                released_bytes += before - after;
}

void memory_allocator_setup(void)
{
        /* Setting either stops glibc adjusting both; mallopt() fails only on bad values. */
        (void)mallopt(M_MMAP_THRESHOLD, MEMORY_MMAP_THRESHOLD);
        (void)mallopt(M_TRIM_THRESHOLD, MEMORY_MMAP_THRESHOLD);
}
