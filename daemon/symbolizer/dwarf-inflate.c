/* SPDX-License-Identifier: GPL-2.0-only */
/* Compressed DWARF inflated by a thread of its own (dwarf-inflate.h), run by work-threads.h:
 * the thread gets a descriptor and gives back a memfd; the copies ready are the loop's. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "symbolizer/dwarf-inflate.h"
#include "util/macro.h"
#include "util/time-util.h"
#include "util/work-threads.h"

/* A debug file bigger than this is not read into memory here (its DWARF would be refused anyway:
 * the symbolizer names from symbol tables only past 24 MiB inflated). */
#define DWARF_INFLATE_MAX_FILE_BYTES (256ULL << 20)

typedef struct Range {
        uint64_t off, len;
} Range;

static int read_all(int fd, uint8_t *buf, size_t size)
{
        size_t done = 0;

        while (done < size) {
                ssize_t n = pread(fd, buf + done, size - done, (off_t)done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -EINVAL; /* shrank since fstat */
                done += (size_t)n;
        }
        return 0;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
        return a > 1 ? (v + a - 1) / a * a : v;
}

static int cmp_range(const void *a, const void *b)
{
        const Range *x = a, *y = b;
        return x->off < y->off ? -1 : x->off > y->off;
}

static int inflate_into(const uint8_t *in, uint64_t in_len, uint8_t *out, uint64_t out_len)
{
        z_stream z = {.next_in = (Bytef *)in, .next_out = out};
        int r;

        if (in_len > UINT32_MAX || out_len > UINT32_MAX)
                return -E2BIG;
        z.avail_in = (uInt)in_len;
        z.avail_out = (uInt)out_len;
        if (inflateInit(&z) != Z_OK)
                return -ENOMEM;
        r = inflate(&z, Z_FINISH);
        inflateEnd(&z);
        /* Exactly the size the header states: libdw would refuse the section otherwise too. */
        return r == Z_STREAM_END && z.total_out == out_len ? 0 : -EBADMSG;
}

/* The section header table of the file image, checked to lie inside it. */
static int section_headers(const uint8_t *img, uint64_t size, const Elf64_Shdr **ret_sh, size_t *ret_n,
                           const Elf64_Shdr **ret_strtab)
{
        const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
        const Elf64_Shdr *sh;

        if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
            eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
            eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum == 0 ||
            eh->e_shnum > DWARF_INFLATE_MAX_SECTIONS || eh->e_shstrndx >= eh->e_shnum ||
            eh->e_shoff % 8 != 0 || eh->e_shoff > size ||
            (size - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum)
                return -EINVAL;
        sh = (const Elf64_Shdr *)(img + eh->e_shoff);
        if (sh[eh->e_shstrndx].sh_type == SHT_NOBITS || sh[eh->e_shstrndx].sh_offset > size ||
            size - sh[eh->e_shstrndx].sh_offset < sh[eh->e_shstrndx].sh_size)
                return -EINVAL;
        *ret_sh = sh;
        *ret_n = eh->e_shnum;
        *ret_strtab = &sh[eh->e_shstrndx];
        return 0;
}

static bool is_debug_section(const uint8_t *img, const Elf64_Shdr *strtab, uint32_t name)
{
        static const char prefix[] = ".debug_";

        if (name >= strtab->sh_size || strtab->sh_size - name < sizeof(prefix))
                return false;
        return memcmp(img + strtab->sh_offset + name, prefix, sizeof(prefix) - 1) == 0;
}

int dwarf_inflate_file(int fd, uint64_t max_bytes, uint64_t *ret_bytes)
{
        _cleanup_free_ uint8_t *img = NULL;
        _cleanup_free_ Elf64_Shdr *out_sh = NULL;
        _cleanup_free_ Range *skip = NULL;
        const Elf64_Shdr *sh, *strtab;
        uint64_t size, out_size, inflated = 0, shoff;
        size_t n, n_skip = 0;
        uint8_t *out = MAP_FAILED;
        struct stat st;
        int mfd = -1, r;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_size <= 0 || (uint64_t)st.st_size > DWARF_INFLATE_MAX_FILE_BYTES)
                return -EINVAL;
        size = (uint64_t)st.st_size;
        img = malloc(size);
        if (!img)
                return -ENOMEM;
        r = read_all(fd, img, size);
        if (r < 0)
                return r;
        r = section_headers(img, size, &sh, &n, &strtab);
        if (r < 0)
                return r;
        out_sh = malloc(n * sizeof(*out_sh));
        skip = malloc(n * sizeof(*skip));
        if (!out_sh || !skip)
                return -ENOMEM;
        memcpy(out_sh, sh, n * sizeof(*out_sh));

        /* Layout: the file as it is (its compressed bytes left as a hole), each inflated section
         * after it at its alignment, then the new section header table. */
        out_size = size;
        for (size_t i = 1; i < n; i++) {
                Elf64_Chdr ch;

                if (!(sh[i].sh_flags & SHF_COMPRESSED) || sh[i].sh_type == SHT_NOBITS ||
                    !is_debug_section(img, strtab, sh[i].sh_name))
                        continue;
                if (sh[i].sh_offset > size || size - sh[i].sh_offset < sh[i].sh_size ||
                    sh[i].sh_size < sizeof(ch))
                        return -EINVAL;
                memcpy(&ch, img + sh[i].sh_offset, sizeof(ch));
                if (ch.ch_type != ELFCOMPRESS_ZLIB)
                        return -EOPNOTSUPP;
                if (ch.ch_addralign > 4096 || (ch.ch_addralign & (ch.ch_addralign - 1)) != 0)
                        return -EINVAL;
                if (ch.ch_size > max_bytes - inflated || inflated > max_bytes)
                        return -E2BIG;
                inflated += ch.ch_size;
                out_size = align_up(out_size, ch.ch_addralign);
                out_sh[i].sh_offset = out_size;
                out_sh[i].sh_size = ch.ch_size;
                out_sh[i].sh_addralign = ch.ch_addralign;
                out_sh[i].sh_flags &= ~(uint64_t)SHF_COMPRESSED;
                out_size += ch.ch_size;
                skip[n_skip++] = (Range){sh[i].sh_offset, sh[i].sh_size};
        }
        if (n_skip == 0)
                return -ENODATA;
        shoff = align_up(out_size, 8);
        out_size = shoff + n * sizeof(Elf64_Shdr);

        mfd = memfd_create("profd-dwarf", MFD_CLOEXEC);
        if (mfd < 0)
                return -errno;
        if (ftruncate(mfd, (off_t)out_size) < 0) {
                r = -errno;
                goto fail;
        }
        out = mmap(NULL, out_size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
        if (out == MAP_FAILED) {
                r = -errno;
                goto fail;
        }
        /* The file's bytes but the compressed sections' (a hole in the memfd costs nothing). */
        qsort(skip, n_skip, sizeof(*skip), cmp_range);
        uint64_t at = 0;
        for (size_t i = 0; i <= n_skip; i++) {
                uint64_t end = i < n_skip ? skip[i].off : size;
                if (end > at)
                        memcpy(out + at, img + at, end - at);
                if (i < n_skip && skip[i].off + skip[i].len > at)
                        at = skip[i].off + skip[i].len;
        }
        for (size_t i = 1; i < n; i++) {
                if (out_sh[i].sh_offset == sh[i].sh_offset && out_sh[i].sh_flags == sh[i].sh_flags)
                        continue; /* not inflated */
                r = inflate_into(img + sh[i].sh_offset + sizeof(Elf64_Chdr),
                                 sh[i].sh_size - sizeof(Elf64_Chdr), out + out_sh[i].sh_offset,
                                 out_sh[i].sh_size);
                if (r < 0)
                        goto fail;
        }
        memcpy(out + shoff, out_sh, n * sizeof(*out_sh));
        ((Elf64_Ehdr *)out)->e_shoff = shoff;
        munmap(out, out_size);
        if (ret_bytes) {
                /* What the memfd holds: its holes take no memory. */
                uint64_t holes = 0;
                for (size_t i = 0; i < n_skip; i++)
                        holes += skip[i].len;
                *ret_bytes = out_size - holes;
        }
        return mfd;
fail:
        if (out != MAP_FAILED)
                munmap(out, out_size);
        close(mfd);
        return r;
}

int dwarf_inflate_key(int fd, DwarfInflateKey *ret)
{
        struct stat st;

        if (fstat(fd, &st) < 0)
                return -errno;
        *ret = (DwarfInflateKey){
                .dev = st.st_dev,
                .ino = st.st_ino,
                .size = st.st_size,
                .mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
        };
        return 0;
}

/* What the thread is given and gives back. */
typedef struct Job {
        DwarfInflateKey key;
        int in_fd; /* a duplicate of the file's descriptor, the job's */
        uint64_t max_bytes;
        int out_fd; /* the memfd, or -1 and error */
        int error;
        uint64_t out_bytes, duration_ns;
} Job;

/* A finished job the loop keeps until the executable that asked for it opens it (the loop's
 * only). */
typedef struct Ready {
        bool used;
        DwarfInflateKey key;
        int out_fd; /* or -1 and error: failed */
        int error;
        uint64_t out_bytes, ready_ns;
} Ready;

struct DwarfInflater {
        WorkThreads *threads;
        Ready ready[DWARF_INFLATE_JOBS];
        size_t n_ready;
        DwarfInflaterStats stats;
};

static void run_inflate(void *arg, void *state)
{
        Job *j = arg;
        uint64_t start = now_ns(CLOCK_MONOTONIC);
        int r;

        j->out_bytes = 0;
        r = dwarf_inflate_file(j->in_fd, j->max_bytes, &j->out_bytes);
        close(j->in_fd);
        j->in_fd = -1;
        j->out_fd = r >= 0 ? r : -1;
        j->error = r < 0 ? r : 0;
        j->duration_ns = now_ns(CLOCK_MONOTONIC) - start;
}

static void discard_inflate(void *arg)
{
        Job *j = arg;

        if (j->in_fd >= 0)
                close(j->in_fd);
        if (j->out_fd >= 0)
                close(j->out_fd);
}

static const WorkThreadsOps inflate_ops = {
        .run = run_inflate,
        .discard = discard_inflate,
};

int dwarf_inflater_new(DwarfInflater **ret, int *ret_eventfd)
{
        DwarfInflater *w = calloc(1, sizeof(*w));
        int r;

        if (!w)
                return -ENOMEM;
        /* One thread: inflating is CPU work, and the loop needs the other core. */
        r = work_threads_new(1, DWARF_INFLATE_JOBS, sizeof(Job), &inflate_ops, NULL, &w->threads,
                             ret_eventfd);
        if (r < 0) {
                free(w);
                return r;
        }
        *ret = w;
        return 0;
}

static void ready_clear(DwarfInflater *w, Ready *rd)
{
        if (rd->out_fd >= 0) {
                close(rd->out_fd);
                w->stats.ready_bytes -= rd->out_bytes;
        }
        *rd = (Ready){.out_fd = -1};
        w->n_ready--;
}

DwarfInflater *dwarf_inflater_free(DwarfInflater *w)
{
        if (!w)
                return NULL;
        /* A running inflation finishes first: at most a few hundred ms. */
        work_threads_free(w->threads);
        for (size_t i = 0; i < DWARF_INFLATE_JOBS; i++)
                if (w->ready[i].used)
                        ready_clear(w, &w->ready[i]);
        return mfree(w);
}

static bool same_key(const DwarfInflateKey *a, const DwarfInflateKey *b)
{
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns;
}

static bool job_has_key(const void *job, const void *key)
{
        return same_key(&((const Job *)job)->key, key);
}

int dwarf_inflater_get(DwarfInflater *w, int fd, uint64_t max_bytes, bool queue)
{
        DwarfInflateKey key;
        Job job;
        int r;

        r = dwarf_inflate_key(fd, &key);
        if (r < 0)
                return r;
        for (size_t i = 0; i < DWARF_INFLATE_JOBS; i++) {
                Ready *rd = &w->ready[i];

                if (!rd->used || !same_key(&rd->key, &key))
                        continue;
                if (rd->out_fd >= 0) {
                        r = rd->out_fd; /* the caller's now */
                        rd->out_fd = -1;
                        w->stats.ready_bytes -= rd->out_bytes;
                        w->stats.taken++;
                } else
                        r = rd->error; /* failed: libdw inflates it, once */
                ready_clear(w, rd);
                return r;
        }
        if (work_threads_find(w->threads, job_has_key, &key))
                return -EINPROGRESS;
        if (!queue)
                return -ENOENT;
        /* Queued, running and ready together are bounded: each may hold an inflated file. */
        if (w->n_ready + work_threads_pending(w->threads) >= DWARF_INFLATE_JOBS) {
                w->stats.busy++;
                return -EAGAIN;
        }
        job = (Job){.key = key, .max_bytes = max_bytes, .out_fd = -1};
        job.in_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (job.in_fd < 0)
                return -errno;
        r = work_threads_submit(w->threads, &job);
        if (r < 0) {
                close(job.in_fd);
                w->stats.busy++;
                return r;
        }
        return -EINPROGRESS;
}

bool dwarf_inflater_swap(DwarfInflater *w, int *fd, uint64_t dwarf_bytes, uint64_t max_bytes, bool queue,
                         bool *ret_pending)
{
        int copy;

        *ret_pending = false;
        if (!w || dwarf_bytes < DWARF_INFLATE_MIN_BYTES || dwarf_bytes > max_bytes)
                return false;
        copy = dwarf_inflater_get(w, *fd, dwarf_bytes, queue);
        if (copy < 0) {
                *ret_pending = copy == -EINPROGRESS;
                return false;
        }
        close(*fd);
        *fd = copy;
        return true;
}

size_t dwarf_inflater_collect(DwarfInflater *w)
{
        Job jobs[DWARF_INFLATE_JOBS];
        uint64_t now = now_ns(CLOCK_MONOTONIC);
        size_t n;

        for (size_t i = 0; i < DWARF_INFLATE_JOBS; i++) {
                Ready *rd = &w->ready[i];

                if (rd->used && now - rd->ready_ns > DWARF_INFLATE_KEEP_NS) {
                        w->stats.expired++;
                        ready_clear(w, rd);
                }
        }
        /* Room for each: queued, running and ready never pass DWARF_INFLATE_JOBS together. */
        n = work_threads_take(w->threads, jobs, DWARF_INFLATE_JOBS - w->n_ready);
        for (size_t i = 0, k = 0; i < n; i++) {
                Job *j = &jobs[i];

                while (w->ready[k].used)
                        k++;
                w->ready[k] = (Ready){.used = true,
                                      .key = j->key,
                                      .out_fd = j->out_fd,
                                      .error = j->error,
                                      .out_bytes = j->out_bytes,
                                      .ready_ns = now};
                w->n_ready++;
                if (j->out_fd >= 0) {
                        w->stats.inflated++;
                        w->stats.inflated_bytes += j->out_bytes;
                        w->stats.ready_bytes += j->out_bytes;
                } else
                        w->stats.failed++;
                if (j->duration_ns > w->stats.max_ns)
                        w->stats.max_ns = j->duration_ns;
        }
        return n;
}

void dwarf_inflater_stats(const DwarfInflater *w, DwarfInflaterStats *ret)
{
        *ret = w ? w->stats : (DwarfInflaterStats){};
}
