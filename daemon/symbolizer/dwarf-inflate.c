/* SPDX-License-Identifier: GPL-2.0-only */
/* Compressed DWARF inflated by a thread of its own (dwarf-inflate.h). The one place besides
 * libdebuginfod's threads that runs outside the event loop: every job slot is owned either by the
 * loop (free, ready, failed) or by the thread (queued, running, done), and changes hands under
 * the mutex only. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "symbolizer/dwarf-inflate.h"
#include "util/macro.h"
#include "util/time-util.h"

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

typedef enum JobState { JOB_FREE, JOB_QUEUED, JOB_RUNNING, JOB_DONE, JOB_READY } JobState;

typedef struct Job {
        JobState state;
        DwarfInflateKey key;
        uint64_t seq; /* the oldest queued runs first */
        int in_fd;    /* queued, running */
        uint64_t max_bytes;
        int out_fd; /* done, ready: the memfd, or -1 and error */
        int error;
        uint64_t out_bytes, duration_ns, ready_ns;
} Job;

struct DwarfInflater {
        pthread_mutex_t lock;
        pthread_cond_t wake;
        pthread_t tid;
        bool started, stop;
        int efd;
        uint64_t next_seq;
        Job jobs[DWARF_INFLATE_JOBS];
        DwarfInflaterStats stats; /* the loop's */
};

static Job *oldest_queued(DwarfInflater *w)
{
        Job *best = NULL;

        for (size_t i = 0; i < DWARF_INFLATE_JOBS; i++)
                if (w->jobs[i].state == JOB_QUEUED && (!best || w->jobs[i].seq < best->seq))
                        best = &w->jobs[i];
        return best;
}

static void *inflater_main(void *arg)
{
        DwarfInflater *w = arg;

        pthread_mutex_lock(&w->lock);
        for (;;) {
                Job *j = NULL;
                uint64_t start, one = 1, bytes = 0;
                int in_fd, r;

                while (!w->stop && !(j = oldest_queued(w)))
                        pthread_cond_wait(&w->wake, &w->lock);
                if (w->stop)
                        break;
                j->state = JOB_RUNNING;
                in_fd = j->in_fd;
                uint64_t max = j->max_bytes;
                pthread_mutex_unlock(&w->lock);

                start = now_ns(CLOCK_MONOTONIC);
                r = dwarf_inflate_file(in_fd, max, &bytes);

                pthread_mutex_lock(&w->lock);
                close(in_fd);
                j->in_fd = -1;
                j->out_fd = r >= 0 ? r : -1;
                j->error = r < 0 ? r : 0;
                j->out_bytes = bytes;
                j->duration_ns = now_ns(CLOCK_MONOTONIC) - start;
                j->state = JOB_DONE;
                (void)!write(w->efd, &one, sizeof(one));
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

int dwarf_inflater_new(DwarfInflater **ret, int *ret_eventfd)
{
        DwarfInflater *w = calloc(1, sizeof(*w));
        sigset_t all, old;
        int r;

        if (!w)
                return -ENOMEM;
        w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->efd < 0) {
                free(w);
                return -errno;
        }
        for (size_t i = 0; i < DWARF_INFLATE_JOBS; i++)
                w->jobs[i].in_fd = w->jobs[i].out_fd = -1;
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->wake, NULL);
        /* Signals stay the loop's (signalfd): the thread blocks all of them. */
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        r = -pthread_create(&w->tid, NULL, inflater_main, w);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0) {
                dwarf_inflater_free(w);
                return r;
        }
        w->started = true;
        *ret = w;
        *ret_eventfd = w->efd;
        return 0;
}

static void job_clear(Job *j)
{
        if (j->in_fd >= 0)
                close(j->in_fd);
        if (j->out_fd >= 0)
                close(j->out_fd);
        *j = (Job){.state = JOB_FREE, .in_fd = -1, .out_fd = -1};
}

DwarfInflater *dwarf_inflater_free(DwarfInflater *w)
{
        if (!w)
                return NULL;
        pthread_mutex_lock(&w->lock);
        w->stop = true;
        pthread_cond_broadcast(&w->wake);
        pthread_mutex_unlock(&w->lock);
        /* A running inflation finishes first: at most a few hundred ms. */
        if (w->started)
                pthread_join(w->tid, NULL);
        for (size_t i = 0; i < DWARF_INFLATE_JOBS; i++)
                job_clear(&w->jobs[i]);
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
        close(w->efd);
        return mfree(w);
}

static bool same_key(const DwarfInflateKey *a, const DwarfInflateKey *b)
{
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns;
}

int dwarf_inflater_get(DwarfInflater *w, int fd, uint64_t max_bytes)
{
        DwarfInflateKey key;
        Job *free_job = NULL;
        int r;

        r = dwarf_inflate_key(fd, &key);
        if (r < 0)
                return r;
        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < DWARF_INFLATE_JOBS; i++) {
                Job *j = &w->jobs[i];

                if (j->state == JOB_FREE) {
                        free_job = free_job ?: j;
                        continue;
                }
                if (!same_key(&j->key, &key))
                        continue;
                if (j->state != JOB_READY) {
                        r = -EINPROGRESS;
                } else if (j->out_fd >= 0) {
                        r = j->out_fd; /* the caller's now */
                        j->out_fd = -1;
                        w->stats.ready_bytes -= j->out_bytes;
                        w->stats.taken++;
                        job_clear(j);
                } else {
                        r = j->error; /* failed: libdw inflates it, once */
                        job_clear(j);
                }
                pthread_mutex_unlock(&w->lock);
                return r;
        }
        if (!free_job) {
                w->stats.busy++;
                pthread_mutex_unlock(&w->lock);
                return -EAGAIN;
        }
        int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (dup_fd < 0) {
                r = -errno;
                pthread_mutex_unlock(&w->lock);
                return r;
        }
        *free_job = (Job){.state = JOB_QUEUED,
                          .key = key,
                          .seq = w->next_seq++,
                          .in_fd = dup_fd,
                          .max_bytes = max_bytes,
                          .out_fd = -1};
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->lock);
        return -EINPROGRESS;
}

size_t dwarf_inflater_collect(DwarfInflater *w)
{
        uint64_t count, now = now_ns(CLOCK_MONOTONIC);
        size_t finished = 0;

        (void)!read(w->efd, &count, sizeof(count));
        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < DWARF_INFLATE_JOBS; i++) {
                Job *j = &w->jobs[i];

                if (j->state == JOB_DONE) {
                        j->state = JOB_READY;
                        j->ready_ns = now;
                        finished++;
                        if (j->out_fd >= 0) {
                                w->stats.inflated++;
                                w->stats.inflated_bytes += j->out_bytes;
                                w->stats.ready_bytes += j->out_bytes;
                        } else
                                w->stats.failed++;
                        if (j->duration_ns > w->stats.max_ns)
                                w->stats.max_ns = j->duration_ns;
                } else if (j->state == JOB_READY && now - j->ready_ns > DWARF_INFLATE_KEEP_NS) {
                        if (j->out_fd >= 0)
                                w->stats.ready_bytes -= j->out_bytes;
                        w->stats.expired++;
                        job_clear(j);
                }
        }
        pthread_mutex_unlock(&w->lock);
        return finished;
}

void dwarf_inflater_stats(const DwarfInflater *w, DwarfInflaterStats *ret)
{
        *ret = w ? w->stats : (DwarfInflaterStats){};
}
