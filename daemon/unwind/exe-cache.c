/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>

#include "unwind/exe-cache.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/memory-owners.h"
#include "util/metrics-writer.h"
#include "util/safe-open.h"
#include "util/time-util.h"
#include "util/work-threads.h"

/* Builds waiting at most. A burst beyond this (thousands of new executables at once) leaves
 * entries unbuilt until a process maps them again. */
#define EXE_CACHE_MAX_QUEUED 1024
/* Queued builds holding an open file at most; the others open it again when their turn comes,
 * only if it is still that file. Many copies of one library (a storm of them, or the same image in
 * many containers) are one build each: without this bound the queue alone would hold a
 * descriptor per copy. */
#define EXE_CACHE_MAX_QUEUED_FDS 128
/* Unused entries kept at most (the grace period usually forgets them sooner). */
#define EXE_CACHE_MAX_UNUSED 1024
/* Builds of at least this many rows give their freed heap back to the kernel afterwards. */
#define EXE_CACHE_RELEASE_ROWS (256u << 10)
/* A table that did not fit the pool is tried again after this long. */
#define EXE_CACHE_POOL_FULL_RETRY_NS (30 * NSEC_PER_SEC)

enum {
        ERR_MALFORMED,
        ERR_NO_CFI,
        ERR_POOL_FULL,
        ERR_NO_MEMORY,
        ERR_IO,
        ERR_OTHER,
        ERR_QUEUE_FULL,
        ERR_TOO_BIG,
        _ERR_MAX,
};
static const char *const err_names[_ERR_MAX] = {
        [ERR_MALFORMED] = "malformed_elf",
        [ERR_NO_CFI] = "no_cfi",
        [ERR_POOL_FULL] = "pool_full",
        [ERR_NO_MEMORY] = "no_memory",
        [ERR_IO] = "io",
        [ERR_OTHER] = "other",
        [ERR_QUEUE_FULL] = "queue_full",
        [ERR_TOO_BIG] = "too_big_for_a_shard",
};

typedef struct BuildJob {
        ExeEntry *entry;
        int fd; /* -1: opened from reopen when the build runs */
        SafeMapping reopen;
        FileIdentity known;
        char *path; /* reopen.path */
        char *debug_root;
} BuildJob;

/* One build handed to the build thread: what it reads (fd, name, debug_root) and what it gives
 * back (table or error, its times). The entry stays the loop's: the thread never touches it. */
typedef struct TableJob {
        ExeEntry *entry;
        int fd;
        char *name;
        char *debug_root;
        UnwindTable *table;
        char *error;
        int r;
        uint64_t wall_ns, cpu_ns;
} TableJob;

struct ExeCache {
        TablePool *pool;
        uint64_t grace_ns;
        exe_ready_fn ready;
        void *userdata;
        sd_event_source *builder;
        /* Builds run on a thread of their own (a large library takes hundreds of ms, seconds on a
         * loaded host, during which the loop would drain nothing and answer nobody), one at a time
         * in queue order; the loop takes each result (build_done) and places it in the pool. */
        WorkThreads *threads;
        sd_event_source *build_done;
        bool building;

        /* Entries by id: every executable mapping of every new process is looked up here. Walks
         * over all entries (gc, metrics) go through it too. */
        ChainHash by_id;
        size_t n_unused;

        BuildJob *queue; /* ring of EXE_CACHE_MAX_QUEUED */
        size_t q_head, q_len, q_fds;

        uint64_t n_builds, n_build_ns, n_build_cpu_ns, max_build_ns, n_rows_built, n_cache_hits, n_pool_hits,
                n_identity_mismatch;
        uint64_t errors[_ERR_MAX];
};

static uint64_t id_hash(const uint8_t *id, size_t id_size)
{
        return hash_mix64(hash_fnv1a(HASH_FNV1A_INIT, id, id_size));
}

static int run_one_build(ExeCache *c);
static bool build_begin(ExeCache *c, TableJob *j);
static void build_run(void *job, void *state);
static void build_discard(void *job);
static void build_finish(ExeCache *c, TableJob *j);

static const WorkThreadsOps build_ops = {
        .run = build_run,
        .discard = build_discard,
};

static int on_build(sd_event_source *s, void *userdata)
{
        ExeCache *c = userdata;
        TableJob j;
        int r;

        if (!c->threads) {
                (void)run_one_build(c);
                if (c->q_len == 0)
                        (void)sd_event_source_set_enabled(s, SD_EVENT_OFF);
                return 0;
        }
        /* The next build is handed over once the one running is taken (on_build_done). */
        if (c->building || c->q_len == 0) {
                (void)sd_event_source_set_enabled(s, SD_EVENT_OFF);
                return 0;
        }
        if (!build_begin(c, &j))
                return 0;
        r = work_threads_submit(c->threads, &j);
        if (r < 0) {
                /* Never with one job at a time; built here rather than lost. */
                log_debug_errno(r, "Cannot hand the unwind table build of %s to its thread: %m",
                                j.entry->name);
                build_run(&j, NULL);
                build_finish(c, &j);
                return 0;
        }
        c->building = true;
        (void)sd_event_source_set_enabled(s, SD_EVENT_OFF);
        return 0;
}

static int on_build_done(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        ExeCache *c = userdata;
        TableJob j;

        while (work_threads_take(c->threads, &j, 1) == 1) {
                c->building = false;
                build_finish(c, &j);
        }
        if (!c->building && c->q_len > 0)
                (void)sd_event_source_set_enabled(c->builder, SD_EVENT_ON);
        return 0;
}

int exe_cache_new(sd_event *e, TablePool *pool, uint64_t grace_ns, exe_ready_fn ready, void *userdata,
                  ExeCache **ret)
{
        ExeCache *c;
        int r;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->pool = pool;
        c->grace_ns = grace_ns;
        c->ready = ready;
        c->userdata = userdata;
        c->queue = calloc(EXE_CACHE_MAX_QUEUED, sizeof(*c->queue));
        if (!c->queue) {
                free(c);
                return -ENOMEM;
        }
        if (e) {
                int efd;

                /* Idle priority: sample drains, HTTP and process events always go first. */
                r = sd_event_add_defer(e, &c->builder, on_build, c);
                if (r < 0) {
                        exe_cache_free(c);
                        return r;
                }
                (void)sd_event_source_set_priority(c->builder, SD_EVENT_PRIORITY_IDLE);
                (void)sd_event_source_set_enabled(c->builder, SD_EVENT_OFF);
                (void)sd_event_source_set_description(c->builder, "unwind-table-builder");
                /* One thread: a build is CPU work, and the loop needs the other core. Without it
                 * (threads refused), builds run on the loop as steps of one build each. */
                r = work_threads_new(1, 1, sizeof(TableJob), &build_ops, NULL, &c->threads, &efd);
                if (r < 0)
                        log_warning_errno(r, "Cannot start the unwind table build thread (%m): building "
                                             "between the loop's other work");
                else {
                        r = sd_event_add_io(e, &c->build_done, efd, EPOLLIN, on_build_done, c);
                        if (r < 0) {
                                exe_cache_free(c);
                                return r;
                        }
                        (void)sd_event_source_set_description(c->build_done, "unwind-table-built");
                }
        }
        *ret = c;
        return 0;
}

static void entry_free(ExeCache *c, ExeEntry *e)
{
        chain_hash_remove(&c->by_id, &e->link);
        if (e->pool_table)
                table_pool_release(c->pool, e->pool_table);
        if (e->users == 0)
                c->n_unused--;
        free(e->name);
        free(e);
}

ExeCache *exe_cache_free(ExeCache *c)
{
        if (!c)
                return NULL;
        sd_event_source_disable_unref(c->builder);
        sd_event_source_disable_unref(c->build_done);
        /* A build running finishes first; its result is discarded. */
        work_threads_free(c->threads);
        for (size_t i = 0; i < c->q_len; i++) {
                BuildJob *j = &c->queue[(c->q_head + i) % EXE_CACHE_MAX_QUEUED];
                if (j->fd >= 0)
                        close(j->fd);
                free(j->path);
                free(j->debug_root);
        }
        free(c->queue);
        CHAIN_HASH_FOREACH (l, &c->by_id) {
                entry_free(c, CHAIN_HASH_ENTRY(l, ExeEntry, link));
        }
        chain_hash_done(&c->by_id);
        return mfree(c);
}

int exe_cache_get(ExeCache *c, const uint8_t *id, size_t id_size, const uint8_t *build_id,
                  size_t build_id_size, const char *name, ExeEntry **ret)
{
        uint64_t h;
        ExeEntry *e;

        if (id_size == 0 || id_size > UNWIND_TABLE_ID_MAX)
                return -EINVAL;
        h = id_hash(id, id_size);
        for (HashLink *l = chain_hash_first(&c->by_id, h); l; l = l->next) {
                e = CHAIN_HASH_ENTRY(l, ExeEntry, link);
                if (l->hash == h && e->id_size == id_size && memcmp(e->id, id, id_size) == 0) {
                        *ret = e;
                        return 0;
                }
        }

        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        memcpy(e->id, id, id_size);
        e->id_size = id_size;
        if (build_id_size > 0 && build_id_size <= sizeof(e->build_id)) {
                memcpy(e->build_id, build_id, build_id_size);
                e->build_id_size = build_id_size;
        }
        e->name = strdup(name ?: "?");
        e->unused_ns = now_ns(CLOCK_MONOTONIC);
        if (!e->name) {
                free(e);
                return -ENOMEM;
        }
        if (chain_hash_add(&c->by_id, &e->link, h) < 0) {
                free(e->name);
                free(e);
                return -ENOMEM;
        }
        c->n_unused++;
        *ret = e;
        return 0;
}

#define QUEUE_AT(c, i) (&(c)->queue[((c)->q_head + (i)) % EXE_CACHE_MAX_QUEUED])

static int open_debug_file(const char *root, const char *path, void *userdata)
{
        return safe_open_in_root(root, path, NULL);
}

static bool same_file(const char *a, const char *b)
{
        struct stat sa, sb;
        return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Where a build looks for the separate debug file (/usr/lib/debug/.build-id/...): under the
 * process' root ("/proc/PID/root") when it sees another filesystem than ours (another mount
 * namespace, a chroot), else "/" (NULL), which keeps working after the process exited: a queued
 * build can outlive it. */
static char *debug_root_for(const char *root)
{
        char ns[64];
        size_t len;

        if (!root)
                return NULL;
        len = strlen(root);
        if (len > 5 && len < sizeof(ns) - 3 && strcmp(root + len - 5, "/root") == 0) {
                snprintf(ns, sizeof(ns), "%.*s/ns/mnt", (int)(len - 5), root);
                if (same_file(root, "/") && same_file(ns, "/proc/self/ns/mnt"))
                        return NULL;
        }
        return strdup(root);
}

/* Urgent builds (a process just started or mapped something) go first: one must not wait behind
 * the hundreds of executables found by the start-up scan. */
static void queue_build(ExeCache *c, ExeEntry *e, int fd, const SafeMapping *reopen, const char *debug_root,
                        bool urgent)
{
        BuildJob *j;
        int dfd = -1;
        char *path = NULL;

        if (fd < 0)
                return;
        if (c->q_len >= EXE_CACHE_MAX_QUEUED) {
                c->errors[ERR_QUEUE_FULL]++;
                return;
        }
        if (c->q_fds < EXE_CACHE_MAX_QUEUED_FDS || !reopen || !reopen->known) {
                dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                if (dfd < 0) {
                        c->errors[ERR_IO]++;
                        return;
                }
                c->q_fds++;
        } else if (!(path = strdup(reopen->path))) {
                c->errors[ERR_NO_MEMORY]++;
                return;
        }
        if (urgent) {
                c->q_head = (c->q_head + EXE_CACHE_MAX_QUEUED - 1) % EXE_CACHE_MAX_QUEUED;
                j = QUEUE_AT(c, 0);
        } else
                j = QUEUE_AT(c, c->q_len);
        j->fd = dfd;
        j->path = path;
        if (path) {
                j->known = *reopen->known;
                j->reopen = *reopen;
                j->reopen.path = path;
                j->reopen.known = NULL; /* pointed at j->known when the job runs: jobs move */
        }
        j->debug_root = debug_root_for(debug_root);
        j->entry = e;
        c->q_len++;
        e->state = EXE_QUEUED;
        if (c->builder)
                (void)sd_event_source_set_enabled(c->builder, SD_EVENT_ON);
}

/* Moves e's queued build to the front. */
static void queue_expedite(ExeCache *c, ExeEntry *e)
{
        for (size_t i = 1; i < c->q_len; i++)
                if (QUEUE_AT(c, i)->entry == e) {
                        BuildJob j = *QUEUE_AT(c, i);
                        for (size_t k = i; k > 0; k--)
                                *QUEUE_AT(c, k) = *QUEUE_AT(c, k - 1);
                        *QUEUE_AT(c, 0) = j;
                        return;
                }
}

void exe_cache_use(ExeCache *c, ExeEntry *e, int fd, const SafeMapping *reopen, const char *debug_root,
                   bool urgent)
{
        if (e->users++ == 0)
                c->n_unused--;
        exe_cache_ensure(c, e, fd, reopen, debug_root, urgent);
}

void exe_cache_ensure(ExeCache *c, ExeEntry *e, int fd, const SafeMapping *reopen, const char *debug_root,
                      bool urgent)
{
        switch (e->state) {
        case EXE_READY: {
                PoolTable *pt;

                if (e->pool_table) {
                        c->n_cache_hits++;
                        return;
                }
                /* Released when its last user went away; the pool may still hold the rows. */
                pt = table_pool_find(c->pool, e->id, e->id_size);
                if (pt) {
                        table_pool_ref(pt);
                        e->pool_table = pt;
                        c->n_pool_hits++;
                        return;
                }
                e->state = EXE_NEW;
                queue_build(c, e, fd, reopen, debug_root, urgent);
                return;
        }
        case EXE_NEW:
                queue_build(c, e, fd, reopen, debug_root, urgent);
                return;
        case EXE_FAILED:
                if (e->error == -ENOSPC &&
                    e->failed_ns + EXE_CACHE_POOL_FULL_RETRY_NS <= now_ns(CLOCK_MONOTONIC))
                        queue_build(c, e, fd, reopen, debug_root, urgent);
                return;
        case EXE_QUEUED:
                if (urgent)
                        queue_expedite(c, e);
                return;
        }
}

/* True when exe_cache_use() would want a file to build from: not for a table the pool still
 * holds (an executable run again after its last process exited, e.g. a compiler in a build), so
 * its file is not opened for nothing. */
bool exe_cache_needs_file(ExeCache *c, const ExeEntry *e)
{
        switch (e->state) {
        case EXE_NEW:
                return true;
        case EXE_READY:
                return !e->pool_table && !table_pool_find(c->pool, e->id, e->id_size);
        case EXE_FAILED:
                return e->error == -ENOSPC &&
                       e->failed_ns + EXE_CACHE_POOL_FULL_RETRY_NS <= now_ns(CLOCK_MONOTONIC);
        case EXE_QUEUED:
                return false;
        }
        return false;
}

void exe_cache_unuse(ExeCache *c, ExeEntry *e)
{
        if (!e || e->users == 0)
                return;
        if (--e->users > 0)
                return;
        c->n_unused++;
        e->unused_ns = now_ns(CLOCK_MONOTONIC);
        if (e->pool_table) {
                table_pool_release(c->pool, e->pool_table);
                e->pool_table = NULL;
        }
}

static unsigned error_reason(int r)
{
        switch (-r) {
        case EBADMSG:
        case EINVAL:
        case ENOEXEC:
        case EOVERFLOW:
        case E2BIG:
                return ERR_MALFORMED;
        case ENOENT:
        case ENODATA:
        case ENOMSG:
                return ERR_NO_CFI;
        case ENOSPC:
                return ERR_POOL_FULL;
        case EFBIG:
                return ERR_TOO_BIG;
        case ENOMEM:
                return ERR_NO_MEMORY;
        case EIO:
        case EACCES:
        case EPERM:
        case ESTALE:
                return ERR_IO;
        default:
                return ERR_OTHER;
        }
}

static void entry_failed(ExeCache *c, ExeEntry *e, int r, const char *msg)
{
        unsigned reason = error_reason(r);

        e->state = EXE_FAILED;
        e->error = r;
        e->failed_ns = now_ns(CLOCK_MONOTONIC);
        c->errors[reason]++;
        log_debug_errno(r, "No unwind table for %s (%s): %s", e->name, err_names[reason],
                        msg ?: strerror(-r));
}

/* Takes the next queued build into j, its file open; false when there was none to run (the
 * file could not be opened again: handled here). */
static bool build_begin(ExeCache *c, TableJob *j)
{
        BuildJob q;
        ExeEntry *e;

        if (c->q_len == 0)
                return false;
        q = c->queue[c->q_head];
        c->q_head = (c->q_head + 1) % EXE_CACHE_MAX_QUEUED;
        c->q_len--;
        e = q.entry;
        if (q.fd >= 0)
                c->q_fds--;
        else {
                /* Opened again now, and only if it is still the file the key names. */
                q.reopen.known = &q.known;
                q.fd = safe_open_mapping(&q.reopen, NULL, NULL);
                free(q.path);
                if (q.fd < 0) {
                        free(q.debug_root);
                        c->errors[ERR_IO]++;
                        /* Left for the next process that maps it to give a file. */
                        e->state = EXE_NEW;
                        log_debug_errno(q.fd, "Cannot open %s again to build its unwind table: %m", e->name);
                        if (c->ready)
                                c->ready(e, c->userdata);
                        return false;
                }
        }
        *j = (TableJob){.entry = e, .fd = q.fd, .debug_root = q.debug_root, .name = strdup(e->name ?: "")};
        return true;
}

/* The build itself, on the build thread (or the loop's, without one): touches nothing but j. */
static void build_run(void *job, void *state)
{
        TableJob *j = job;
        UnwindTableOptions opts = {};
        uint64_t t0, cpu0;

        /* .debug_frame of the separate debug file (build-id path, .gnu_debuglink next to the file
         * as the process sees it) when the file has none of its own: code built without
         * .eh_frame (-fno-asynchronous-unwind-tables) and stripped is unwound only through it.
         * Cost: one failed open() per build on most files (~3% of build CPU measured). */
        opts.debug_root = j->debug_root;
        opts.use_debug_file = true;
        /* Names in the file (.gnu_debuglink) and paths in the process's root are its owner's to
         * choose: opened only as regular files, never blocking, never outside that root. */
        opts.open_debug_file = open_debug_file;
        /* Rows for this machine's BPF walker only: a foreign binary (run through qemu-user, say)
         * is refused, not given rules in another architecture's registers. */
#if defined(__aarch64__)
        opts.machine = EM_AARCH64;
#else
        opts.machine = EM_X86_64;
#endif
        if (!j->name) {
                j->r = -ENOMEM;
                goto out;
        }
        if (j->name[0] == '/' && strncmp(j->name, "/memfd:", 7) != 0)
                opts.file_path = j->name;
        t0 = now_ns(CLOCK_MONOTONIC);
        cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        j->r = unwind_table_build_fd(j->fd, j->name, &opts, &j->table, &j->error);
        /* This thread's CPU time, apart from waiting for the disk or the CPU. */
        j->cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
        j->wall_ns = now_ns(CLOCK_MONOTONIC) - t0;
out:
        close(j->fd);
        j->fd = -1;
}

static void build_discard(void *job)
{
        TableJob *j = job;

        if (j->fd >= 0)
                close(j->fd);
        unwind_table_free(j->table);
        free(j->name);
        free(j->debug_root);
        free(j->error);
}

/* The loop's part after a build: counts it, places the table in the pool, tells the tracker. */
static void build_finish(ExeCache *c, TableJob *j)
{
        ExeEntry *e = j->entry;
        UnwindTable *t = TAKE_PTR(j->table);
        PoolTable *pt = NULL;
        int r = j->r;

        c->n_build_cpu_ns += j->cpu_ns;
        c->n_build_ns += j->wall_ns;
        if (j->wall_ns > c->max_build_ns) {
                c->max_build_ns = j->wall_ns;
                log_debug("Unwind table of %s: %.1f ms, slowest build so far", e->name,
                          (double)j->wall_ns / 1e6);
        }
        if (r < 0) {
                unwind_table_free(t);
                entry_failed(c, e, r, j->error);
                goto done;
        }
        c->n_builds++;
        c->n_rows_built += t->n_rows;
        e->n_rows = t->n_rows;
        if (e->build_id_size > 0 && (t->id_is_hash || t->id_size != e->build_id_size ||
                                     memcmp(t->id, e->build_id, e->build_id_size) != 0)) {
                /* Not the file the process table read (changed in place since): its table must not
                 * go under that file's key. */
                c->n_identity_mismatch++;
                unwind_table_free(t);
                entry_failed(c, e, -ESTALE, "build ID changed since the file was read");
                goto done;
        }
        /* The pool shares tables by this key, not by the build ID the file claims (anyone can write
         * a file claiming any build ID). */
        memcpy(t->id, e->id, e->id_size);
        t->id_size = e->id_size;
        t->id_is_hash = false;
        r = table_pool_acquire(c->pool, t, &pt);
        unwind_table_free(t);
        /* A large table's build peaks at several times the table in heap (parsed CFI, rows
         * sorted and merged); freed in pieces, that peak would otherwise stay resident. */
        if (e->n_rows >= EXE_CACHE_RELEASE_ROWS)
                memory_release_free();
        if (r < 0) {
                entry_failed(c, e, r, "does not fit the unwind table pool");
                goto done;
        }
        e->state = EXE_READY;
        /* Placed even when no process maps it any more: the pool keeps unreferenced rows until
         * it needs the room, so the next exec of it is served without a build. */
        if (e->users > 0)
                e->pool_table = pt;
        else
                table_pool_release(c->pool, pt);
done:
        free(j->name);
        free(j->debug_root);
        free(j->error);
        if (c->ready)
                c->ready(e, c->userdata);
}

/* One build on the loop's own thread, when the build thread could not be started. */
static int run_one_build(ExeCache *c)
{
        TableJob j;

        if (c->q_len == 0)
                return 0;
        if (build_begin(c, &j)) {
                build_run(&j, NULL);
                build_finish(c, &j);
        }
        return 1;
}

static bool entry_queued(const ExeCache *c, const ExeEntry *e)
{
        return e->state == EXE_QUEUED;
}

void exe_cache_gc(ExeCache *c, uint64_t now_ns)
{
        /* The walk took the next entry before the body runs: freeing this one is safe. */
        CHAIN_HASH_FOREACH (l, &c->by_id) {
                ExeEntry *e = CHAIN_HASH_ENTRY(l, ExeEntry, link);

                if (e->users > 0 || entry_queued(c, e))
                        continue;
                if (e->unused_ns + c->grace_ns <= now_ns)
                        entry_free(c, e);
        }
        /* Over the bound: forget the longest unused first. */
        while (c->n_unused > EXE_CACHE_MAX_UNUSED) {
                ExeEntry *victim = NULL;
                CHAIN_HASH_FOREACH (l, &c->by_id) {
                        ExeEntry *e = CHAIN_HASH_ENTRY(l, ExeEntry, link);

                        if (e->users == 0 && !entry_queued(c, e) &&
                            (!victim || e->unused_ns < victim->unused_ns))
                                victim = e;
                }
                if (!victim)
                        break;
                entry_free(c, victim);
        }
}

size_t exe_cache_queued(const ExeCache *c)
{
        return c ? c->q_len + c->building : 0;
}

void exe_cache_write_metrics(const ExeCache *c, FILE *f)
{
        static const char *const state_names[] = {
                [EXE_NEW] = "new",
                [EXE_QUEUED] = "queued",
                [EXE_READY] = "ready",
                [EXE_FAILED] = "failed",
        };
        static const char *const where_names[] = {"cache", "pool"};
        uint64_t by_state[ELEMENTSOF(state_names)] = {}, with_table = 0;

        if (!c)
                return;
        CHAIN_HASH_FOREACH (l, &c->by_id) {
                const ExeEntry *e = CHAIN_HASH_ENTRY(l, ExeEntry, link);

                by_state[e->state]++;
                with_table += e->pool_table != NULL;
        }
        metric_labelled(f, "profd_exe_cache_entries", "gauge",
                        "Executables known to the unwind table cache, by state.", "state", state_names,
                        by_state, ELEMENTSOF(state_names));
        metric_gauge(f, "profd_exe_cache_in_use",
                     "Executables mapped by a live process with their table in the pool.", with_table);
        metric_gauge(f, "profd_exe_cache_unused", "Executables no process maps, kept for the grace period.",
                     c->n_unused);
        metric_gauge(f, "profd_exe_cache_build_queue", "Unwind table builds waiting or running.",
                     c->q_len + c->building);
        metric_counter(f, "profd_exe_cache_builds_total", "Unwind tables built.", c->n_builds);
        metric_counter_seconds(f, "profd_exe_cache_build_seconds_total",
                               "Time spent building unwind tables.", c->n_build_ns);
        metric_counter_seconds(f, "profd_exe_cache_build_cpu_seconds_total",
                               "CPU time spent building unwind tables.", c->n_build_cpu_ns);
        metric_gauge_seconds(f, "profd_exe_cache_build_max_seconds", "Slowest single unwind table build.",
                             c->max_build_ns);
        metric_counter(f, "profd_exe_cache_rows_built_total", "Unwind rows produced by builds.",
                       c->n_rows_built);
        metric_labelled(f, "profd_exe_cache_hits_total", "counter",
                        "Mappings served without a build: entry in use, or rows still in the pool.", "where",
                        where_names, (const uint64_t[]){c->n_cache_hits, c->n_pool_hits},
                        ELEMENTSOF(where_names));
        metric_counter(f, "profd_exe_cache_identity_mismatch_total",
                       "Builds refused because the file's build ID was no longer the one read when it was "
                       "mapped.",
                       c->n_identity_mismatch);
        metric_labelled(f, "profd_exe_cache_errors_total", "counter",
                        "Executables left without an unwind table, by reason.", "reason", err_names,
                        c->errors, _ERR_MAX);
}
