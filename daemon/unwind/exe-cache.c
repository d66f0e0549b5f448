/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <elf.h>
#include <fcntl.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "unwind/exe-cache.h"
#include "util/log.h"
#include "util/memory-owners.h"
#include "util/metrics-writer.h"
#include "util/safe-open.h"
#include "util/time-util.h"

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

struct ExeCache {
        TablePool *pool;
        uint64_t grace_ns;
        exe_ready_fn ready;
        void *userdata;
        sd_event_source *builder;

        void *by_id; /* tsearch root */
        ExeEntry *head;
        size_t n_entries, n_unused;

        BuildJob *queue; /* ring of EXE_CACHE_MAX_QUEUED */
        size_t q_head, q_len, q_fds;

        uint64_t n_builds, n_build_ns, n_build_cpu_ns, max_build_ns, n_rows_built, n_cache_hits, n_pool_hits,
                n_identity_mismatch;
        uint64_t errors[_ERR_MAX];
};

static int entry_cmp(const void *a, const void *b)
{
        const ExeEntry *x = a, *y = b;

        if (x->id_size != y->id_size)
                return x->id_size < y->id_size ? -1 : 1;
        return memcmp(x->id, y->id, x->id_size);
}

static int run_one_build(ExeCache *c);

static int on_build(sd_event_source *s, void *userdata)
{
        ExeCache *c = userdata;

        (void)run_one_build(c);
        if (c->q_len == 0)
                (void)sd_event_source_set_enabled(s, SD_EVENT_OFF);
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
                /* Idle priority: sample drains, HTTP and process events always go first. */
                r = sd_event_add_defer(e, &c->builder, on_build, c);
                if (r < 0) {
                        exe_cache_free(c);
                        return r;
                }
                (void)sd_event_source_set_priority(c->builder, SD_EVENT_PRIORITY_IDLE);
                (void)sd_event_source_set_enabled(c->builder, SD_EVENT_OFF);
                (void)sd_event_source_set_description(c->builder, "unwind-table-builder");
        }
        *ret = c;
        return 0;
}

static void entry_free(ExeCache *c, ExeEntry *e)
{
        tdelete(e, &c->by_id, entry_cmp);
        if (e->prev)
                e->prev->next = e->next;
        else
                c->head = e->next;
        if (e->next)
                e->next->prev = e->prev;
        if (e->pool_table)
                table_pool_release(c->pool, e->pool_table);
        c->n_entries--;
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
        for (size_t i = 0; i < c->q_len; i++) {
                BuildJob *j = &c->queue[(c->q_head + i) % EXE_CACHE_MAX_QUEUED];
                if (j->fd >= 0)
                        close(j->fd);
                free(j->path);
                free(j->debug_root);
        }
        free(c->queue);
        while (c->head)
                entry_free(c, c->head);
        return mfree(c);
}

int exe_cache_get(ExeCache *c, const uint8_t *id, size_t id_size, const uint8_t *build_id,
                  size_t build_id_size, const char *name, ExeEntry **ret)
{
        ExeEntry key, *e;
        void **found;

        if (id_size == 0 || id_size > UNWIND_TABLE_ID_MAX)
                return -EINVAL;
        key.id_size = id_size;
        memcpy(key.id, id, id_size);
        found = tfind(&key, &c->by_id, entry_cmp);
        if (found) {
                *ret = *found;
                return 0;
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
        if (!e->name || !tsearch(e, &c->by_id, entry_cmp)) {
                free(e->name);
                free(e);
                return -ENOMEM;
        }
        e->next = c->head;
        if (c->head)
                c->head->prev = e;
        c->head = e;
        c->n_entries++;
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

static int run_one_build(ExeCache *c)
{
        UnwindTableOptions opts = {};
        _cleanup_free_ char *error = NULL;
        UnwindTable *t = NULL;
        PoolTable *pt = NULL;
        uint64_t t0, cpu0;
        BuildJob j;
        ExeEntry *e;
        int r;

        if (c->q_len == 0)
                return 0;
        j = c->queue[c->q_head];
        c->q_head = (c->q_head + 1) % EXE_CACHE_MAX_QUEUED;
        c->q_len--;
        e = j.entry;
        if (j.fd >= 0)
                c->q_fds--;
        else {
                /* Opened again now, and only if it is still the file the key names. */
                j.reopen.known = &j.known;
                j.fd = safe_open_mapping(&j.reopen, NULL, NULL);
                free(j.path);
                if (j.fd < 0) {
                        free(j.debug_root);
                        c->errors[ERR_IO]++;
                        /* Left for the next process that maps it to give a file. */
                        e->state = EXE_NEW;
                        log_debug_errno(j.fd, "Cannot open %s again to build its unwind table: %m", e->name);
                        goto done;
                }
        }

        /* .debug_frame of the separate debug file (build-id path, .gnu_debuglink next to the file
         * as the process sees it) when the file has none of its own: code built without
         * .eh_frame (-fno-asynchronous-unwind-tables) and stripped is unwound only through it.
         * Cost: one failed open() per build on most files (~3% of build CPU measured). */
        opts.debug_root = j.debug_root;
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
        if (e->name && e->name[0] == '/' && strncmp(e->name, "/memfd:", 7) != 0)
                opts.file_path = e->name;
        t0 = now_ns(CLOCK_MONOTONIC);
        cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        r = unwind_table_build_fd(j.fd, e->name, &opts, &t, &error);
        /* The daemon's one thread: its CPU time, apart from waiting for the disk or the CPU. */
        c->n_build_cpu_ns += now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
        t0 = now_ns(CLOCK_MONOTONIC) - t0;
        c->n_build_ns += t0;
        if (t0 > c->max_build_ns) {
                c->max_build_ns = t0;
                /* Builds run between other work, one per loop iteration: a very slow one is worth
                 * knowing about (it delays everything else in the loop for that long). */
                log_debug("Unwind table of %s: %.1f ms, slowest build so far", e->name, (double)t0 / 1e6);
        }
        close(j.fd);
        free(j.debug_root);
        if (r < 0) {
                entry_failed(c, e, r, error);
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
        if (c->ready)
                c->ready(e, c->userdata);
        return 1;
}

void exe_cache_build_all(ExeCache *c)
{
        while (c->q_len > 0)
                (void)run_one_build(c);
        if (c->builder)
                (void)sd_event_source_set_enabled(c->builder, SD_EVENT_OFF);
}

static bool entry_queued(const ExeCache *c, const ExeEntry *e)
{
        return e->state == EXE_QUEUED;
}

void exe_cache_gc(ExeCache *c, uint64_t now_ns)
{
        ExeEntry *e, *next;

        for (e = c->head; e; e = next) {
                next = e->next;
                if (e->users > 0 || entry_queued(c, e))
                        continue;
                if (e->unused_ns + c->grace_ns <= now_ns)
                        entry_free(c, e);
        }
        /* Over the bound: forget the longest unused first. */
        while (c->n_unused > EXE_CACHE_MAX_UNUSED) {
                ExeEntry *victim = NULL;
                for (e = c->head; e; e = e->next)
                        if (e->users == 0 && !entry_queued(c, e) &&
                            (!victim || e->unused_ns < victim->unused_ns))
                                victim = e;
                if (!victim)
                        break;
                entry_free(c, victim);
        }
}

size_t exe_cache_queued(const ExeCache *c)
{
        return c ? c->q_len : 0;
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
        for (const ExeEntry *e = c->head; e; e = e->next) {
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
        metric_gauge(f, "profd_exe_cache_build_queue", "Unwind table builds waiting.", c->q_len);
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
