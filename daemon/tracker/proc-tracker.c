/* SPDX-License-Identifier: GPL-2.0-only */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "unwind/exe-cache.h"
#include "util/log.h"
#include "tracker/proc-events.h"
#include "tracker/proc-tracker.h"
#include "util/time-util.h"

/* Tracked processes refreshed per event-loop iteration: a burst of execs (or the start-up scan of
 * thousands of processes) is spread over iterations so sample drains and HTTP go in between. */
#define REFRESH_BATCH 32
/* The unwinder re-reports an unknown pid/pc at most this often per process (it rate-limits in BPF
 * too); a refresh that did not help is not repeated sooner. */
#define UNKNOWN_REFRESH_INTERVAL_NS (1 * NSEC_PER_SEC)
/* A new mapping reported before it exists (kprobe fallback), or racing with our read of
 * /proc/PID/maps, is looked for again this much later, this many times. */
#define RECHECK_DELAY_NS (10 * 1000 * 1000ULL)
#define RECHECK_TRIES 3
/* Executables no process maps are forgotten after this (the pool may keep their rows longer). */
#define DEFAULT_EXE_GRACE_NS (30 * NSEC_PER_SEC)
#define DEFAULT_SWEEP_INTERVAL_NS (60 * NSEC_PER_SEC)
/* Housekeeping (cache grace) runs this often; the /proc reconcile every sweep_interval. */
#define GC_INTERVAL_NS (10 * NSEC_PER_SEC)
/* exec -> all mappings in the pool is recorded for this long after an exec: the dynamic loader
 * maps libraries during the first milliseconds, a later dlopen is not part of start-up. */
#define EXEC_READY_WINDOW_NS (2 * NSEC_PER_SEC)
/* The exec event and the pool's exec time are taken by two programs on the same tracepoint, a few
 * microseconds apart; two execs of one process are never this close (an exec alone takes longer). */
#define SAME_EXEC_SLACK_NS (50 * 1000ULL)
/* Re-reads of one process's maps after mmap events are spaced at least this far apart; the
 * spacing doubles while events keep coming (a dlopen/dlclose loop, a JIT mapping code in a loop)
 * up to REFRESH_MAX_INTERVAL_NS and falls back once the process is quiet for that long. Events
 * in between are coalesced into the next read. An exec is never held back. */
#define REFRESH_MIN_INTERVAL_NS (10 * 1000 * 1000ULL)
#define REFRESH_MAX_INTERVAL_NS (1 * NSEC_PER_SEC)
/* After an exec, this many re-reads are not spaced: the loader maps the new image's libraries in
 * the first milliseconds and each step must reach the unwinder at once. */
#define EXEC_FAST_READS 4
/* Processes an event named that are refreshed right after the ring buffer drain that named them
 * (the rest go to the worker): bounded, so a burst of execs cannot hold the loop. */
#define DRAIN_BATCH 8

typedef struct TrackedMapping {
        uint64_t start, end, offset, dev, inode;
        uint64_t load_bias;
        ExeEntry *exe;     /* NULL: anonymous, or no usable file: frame-pointer steps there */
        bool pushed_table; /* the last push gave the pool this mapping's table */
} TrackedMapping;

typedef struct Tracked {
        pid_t pid;
        TrackedMapping *maps;
        size_t n_maps;
        uint64_t refreshed_ns;
        uint64_t maps_ns; /* when maps were read (a fork copy: when the parent's were) */
        uint64_t exec_ns, ready_ns, pushed_ns;
        uint64_t recheck_addr;
        uint64_t refresh_interval_ns; /* current spacing of mmap-driven re-reads */
        uint64_t deferred_until_ns;   /* held back by the spacing until then; 0: not held */
        uint8_t recheck_tries;
        uint8_t exec_reads; /* re-reads left that the spacing does not hold back (after exec) */
        bool dirty, push, queued, recheck, recheck_fired, seen;
        bool urgent;       /* exec: refresh at once whatever the spacing */
        bool exec_adopted; /* exec_ns came from the pool, before its exec event */
        bool background;   /* found by a /proc scan, not by an event: its builds wait */
        bool queued_back;  /* queued behind the others (background) */
        struct Tracked *prev, *next;
        struct Tracked *queue_next;
} Tracked;

enum {
        MAP_ERR_NO_FILE,
        MAP_ERR_NO_LOAD_SEGMENT,
        MAP_ERR_IDENTITY,
        MAP_ERR_NO_MEMORY,
        _MAP_ERR_MAX,
};
static const char *const map_err_names[_MAP_ERR_MAX] = {
        [MAP_ERR_NO_FILE] = "file_unopenable",
        [MAP_ERR_NO_LOAD_SEGMENT] = "no_load_segment",
        [MAP_ERR_IDENTITY] = "identity_failed",
        [MAP_ERR_NO_MEMORY] = "no_memory",
};

enum {
        REFRESH_ERR_VANISHED,
        REFRESH_ERR_PERMISSION,
        REFRESH_ERR_OTHER,
        REFRESH_ERR_POOL,
        _REFRESH_ERR_MAX,
};
static const char *const refresh_err_names[_REFRESH_ERR_MAX] = {
        [REFRESH_ERR_VANISHED] = "vanished",
        [REFRESH_ERR_PERMISSION] = "permission",
        [REFRESH_ERR_OTHER] = "read_failed",
        [REFRESH_ERR_POOL] = "pool_update_failed",
};

/* exec -> ready histogram bucket bounds (ms); the last bucket is +Inf. */
static const unsigned ready_buckets_ms[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};
#define N_READY_BUCKETS (ELEMENTSOF(ready_buckets_ms) + 1)

struct ProcTracker {
        sd_event *event;
        ProcessTable *procs;
        TablePool *pool;
        ExeCache *cache;
        ProcEvents *events;
        ProcTrackerOptions opts;

        void *by_pid; /* tsearch root of Tracked */
        Tracked *head;
        size_t n_tracked;
        Tracked *q_head, *q_tail; /* refresh/push queue */
        size_t n_recheck;

        sd_event_source *worker, *gc_timer, *recheck_timer, *deferred_timer;
        size_t n_deferred;
        uint64_t last_sweep_ns;
        uint64_t events_dropped; /* as of the last housekeeping */
        uint64_t scan_start_ns, scan_ns;
        bool scan_pending;
        size_t scan_processes;

        uint64_t n_refresh_deferred, n_refresh_coalesced;
        uint64_t n_anon_added, n_anon_known, n_anon_reread, n_anon_dropped;
        uint64_t n_mid_exec, n_exec_fast;
        uint64_t n_refreshes, n_unchanged, n_pushes, n_forks_copied, n_unknown_ratelimited, n_reconcile_new,
                n_reconcile_gone, n_rechecks, n_exits;
        uint64_t map_errors[_MAP_ERR_MAX];
        uint64_t refresh_errors[_REFRESH_ERR_MAX];
        uint64_t ready_hist[N_READY_BUCKETS];
        uint64_t ready_count, ready_sum_ns, n_never_ready;
};

static inline void closedirp(DIR **d)
{
        if (*d)
                closedir(*d);
}

static int tracked_cmp(const void *a, const void *b)
{
        pid_t x = ((const Tracked *)a)->pid, y = ((const Tracked *)b)->pid;
        return x < y ? -1 : x > y;
}

static Tracked *tracked_find(ProcTracker *t, pid_t pid)
{
        Tracked key = {.pid = pid};
        void **found = tfind(&key, &t->by_pid, tracked_cmp);
        return found ? *found : NULL;
}

static Tracked *tracked_get(ProcTracker *t, pid_t pid)
{
        Tracked *p = tracked_find(t, pid);

        if (p)
                return p;
        p = calloc(1, sizeof(*p));
        if (!p)
                return NULL;
        p->pid = pid;
        if (!tsearch(p, &t->by_pid, tracked_cmp)) {
                free(p);
                return NULL;
        }
        p->next = t->head;
        if (t->head)
                t->head->prev = p;
        t->head = p;
        t->n_tracked++;
        return p;
}

static void maps_release(ProcTracker *t, TrackedMapping *m, size_t n)
{
        for (size_t i = 0; i < n; i++)
                exe_cache_unuse(t->cache, m[i].exe);
        free(m);
}

static void record_ready(ProcTracker *t, Tracked *p)
{
        uint64_t ns, ms;
        size_t b = 0;

        if (!p->exec_ns)
                goto out;
        if (!p->ready_ns) {
                /* Exited (or exec'd again) before all its tables were in the pool, often before
                 * we read it at all: a process that lives a millisecond. */
                t->n_never_ready++;
                goto out;
        }
        ns = p->ready_ns - p->exec_ns;
        ms = ns / (NSEC_PER_SEC / 1000);
        while (b < ELEMENTSOF(ready_buckets_ms) && ms >= ready_buckets_ms[b])
                b++;
        t->ready_hist[b]++;
        t->ready_count++;
        t->ready_sum_ns += ns;
out:
        p->exec_ns = p->ready_ns = 0;
}

static void queue_unlink(ProcTracker *t, Tracked *p)
{
        Tracked **pp;

        if (!p->queued)
                return;
        for (pp = &t->q_head; *pp; pp = &(*pp)->queue_next)
                if (*pp == p) {
                        *pp = p->queue_next;
                        break;
                }
        t->q_tail = NULL;
        for (Tracked *q = t->q_head; q; q = q->queue_next)
                t->q_tail = q;
        p->queued = false;
        p->queue_next = NULL;
}

/* Stops tracking pid: its pool entries go now (its symbolization snapshot stays in the process
 * table for the grace period). */
static void tracked_drop(ProcTracker *t, Tracked *p)
{
        int r;

        record_ready(t, p);
        queue_unlink(t, p);
        if (p->recheck)
                t->n_recheck--;
        if (p->deferred_until_ns)
                t->n_deferred--;
        if (t->opts.observer.forgotten)
                t->opts.observer.forgotten(t->opts.observer.userdata, p->pid);
        if (p->pushed_ns) {
                r = table_pool_remove_process(t->pool, p->pid);
                if (r < 0 && r != -ENOENT)
                        log_debug_errno(r, "Removing pid %d from the unwind table pool failed: %m",
                                        (int)p->pid);
        }
        maps_release(t, p->maps, p->n_maps);
        tdelete(p, &t->by_pid, tracked_cmp);
        if (p->prev)
                p->prev->next = p->next;
        else
                t->head = p->next;
        if (p->next)
                p->next->prev = p->prev;
        t->n_tracked--;
        free(p);
}

/* Processes named by events go ahead of those found by a /proc scan (hundreds at start-up). */
static void enqueue(ProcTracker *t, Tracked *p)
{
        if (p->queued && p->queued_back && !p->background)
                queue_unlink(t, p);
        if (!p->queued) {
                p->queued = true;
                p->queue_next = NULL;
                p->queued_back = p->background;
                if (!p->background) {
                        p->queue_next = t->q_head;
                        t->q_head = p;
                        if (!t->q_tail)
                                t->q_tail = p;
                } else {
                        if (t->q_tail)
                                t->q_tail->queue_next = p;
                        else
                                t->q_head = p;
                        t->q_tail = p;
                }
        }
        if (t->worker)
                (void)sd_event_source_set_enabled(t->worker, SD_EVENT_ON);
}

static void mark_dirty(ProcTracker *t, Tracked *p)
{
        if (p->dirty && (p->queued || p->deferred_until_ns))
                t->n_refresh_coalesced++;
        p->dirty = true;
        if (p->deferred_until_ns && !p->urgent && !p->exec_reads)
                return; /* the deferred timer queues it */
        enqueue(t, p);
}

static void arm_deferred_timer(ProcTracker *t, uint64_t when_ns)
{
        uint64_t cur = 0;

        if (!t->deferred_timer)
                return;
        if (sd_event_source_get_enabled(t->deferred_timer, NULL) > 0 &&
            sd_event_source_get_time(t->deferred_timer, &cur) >= 0 && cur <= when_ns / NSEC_PER_USEC)
                return;
        (void)sd_event_source_set_time(t->deferred_timer, when_ns / NSEC_PER_USEC);
        (void)sd_event_source_set_enabled(t->deferred_timer, SD_EVENT_ONESHOT);
}

static void defer_refresh(ProcTracker *t, Tracked *p, uint64_t due)
{
        p->dirty = true;
        if (!p->deferred_until_ns)
                t->n_deferred++;
        p->deferred_until_ns = due;
        arm_deferred_timer(t, due);
}

/* The worker is about to re-read p: false (and p held back, counted) when p was read too
 * recently for a non-urgent read. */
static bool refresh_allowed(ProcTracker *t, Tracked *p, uint64_t now)
{
        uint64_t due;

        if (p->urgent || p->exec_reads > 0 || !p->refreshed_ns || !p->refresh_interval_ns)
                return true;
        due = p->refreshed_ns + p->refresh_interval_ns;
        if (now >= due)
                return true;
        t->n_refresh_deferred++;
        defer_refresh(t, p, due);
        return false;
}

static void refresh_spacing_update(Tracked *p, uint64_t now)
{
        uint64_t gap = p->refreshed_ns ? now - p->refreshed_ns : UINT64_MAX;

        if (gap >= REFRESH_MAX_INTERVAL_NS || !p->refresh_interval_ns)
                p->refresh_interval_ns = REFRESH_MIN_INTERVAL_NS;
        else if (gap < 2 * p->refresh_interval_ns)
                p->refresh_interval_ns = p->refresh_interval_ns * 2 > REFRESH_MAX_INTERVAL_NS
                                                 ? REFRESH_MAX_INTERVAL_NS
                                                 : p->refresh_interval_ns * 2;
}

static int on_deferred(sd_event_source *s, uint64_t usec, void *userdata)
{
        ProcTracker *t = userdata;
        uint64_t now = now_ns(CLOCK_MONOTONIC), next = UINT64_MAX;
        size_t left = 0;

        /* One pass: queue the processes whose time has come, count the rest. */
        for (Tracked *p = t->head; p; p = p->next) {
                if (!p->deferred_until_ns)
                        continue;
                if (p->deferred_until_ns <= now) {
                        p->deferred_until_ns = 0;
                        enqueue(t, p);
                        continue;
                }
                left++;
                if (p->deferred_until_ns < next)
                        next = p->deferred_until_ns;
        }
        t->n_deferred = left;
        if (next != UINT64_MAX)
                arm_deferred_timer(t, next);
        return 0;
}

static void mark_push(ProcTracker *t, Tracked *p)
{
        p->push = true;
        enqueue(t, p);
}

static void schedule_recheck(ProcTracker *t, Tracked *p, uint64_t addr)
{
        if (p->recheck_tries >= RECHECK_TRIES)
                return;
        p->recheck_tries++;
        p->recheck_addr = addr;
        if (!p->recheck) {
                p->recheck = true;
                t->n_recheck++;
        }
        if (t->recheck_timer) {
                uint64_t usec = (now_ns(CLOCK_MONOTONIC) + RECHECK_DELAY_NS) / NSEC_PER_USEC;
                (void)sd_event_source_set_time(t->recheck_timer, usec);
                (void)sd_event_source_set_enabled(t->recheck_timer, SD_EVENT_ONESHOT);
        }
}

/* The maps just pushed were read after the pid's last exec (the pool refuses older ones). When the
 * exec event is still in the ring buffer behind them, take the exec time from the pool so this push
 * counts as the one that made the new image ready; the event, when it comes, is then the same exec. */
static void adopt_pool_exec(ProcTracker *t, Tracked *p)
{
        uint64_t exec_ns;

        if (table_pool_last_exec(t->pool, p->pid, &exec_ns) < 0)
                return;
        if (exec_ns <= p->exec_ns + SAME_EXEC_SLACK_NS || exec_ns > p->maps_ns ||
            now_ns(CLOCK_MONOTONIC) - exec_ns > EXEC_READY_WINDOW_NS)
                return;
        record_ready(t, p); /* an earlier exec that never got ready */
        p->exec_ns = exec_ns;
        p->exec_adopted = true;
}

static int push(ProcTracker *t, Tracked *p)
{
        _cleanup_free_ PoolMapping *pm = NULL;
        bool ready = true;
        int r;

        p->push = false;
        pm = calloc(p->n_maps ?: 1, sizeof(*pm));
        if (!pm)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_maps; i++) {
                TrackedMapping *m = &p->maps[i];
                pm[i] = (PoolMapping){
                        .start = m->start,
                        .end = m->end,
                        .load_bias = m->load_bias,
                        .table = m->exe ? m->exe->pool_table : NULL,
                        .table_pending = m->exe && !m->exe->pool_table && m->exe->state != EXE_FAILED,
                };
                if (m->exe && !m->exe->pool_table && m->exe->state != EXE_FAILED)
                        ready = false;
        }
        r = table_pool_set_process_at(t->pool, p->pid, p->maps_ns, pm, p->n_maps);
        if (r >= 0)
                adopt_pool_exec(t, p);
        for (size_t i = 0; i < p->n_maps; i++)
                p->maps[i].pushed_table = r >= 0 && pm[i].table;
        if (r == -ESTALE) {
                /* It exec'd after these mappings were read: read them again. */
                p->push = true;
                mark_dirty(t, p);
                return r;
        }
        if (r < 0) {
                t->refresh_errors[REFRESH_ERR_POOL]++;
                return log_debug_errno(r, "Updating unwind table pool entries of pid %d failed: %m",
                                       (int)p->pid);
        }
        t->n_pushes++;
        p->pushed_ns = now_ns(CLOCK_MONOTONIC);
        /* The last push of the window decides: a library mapped later whose table is still being
         * built makes the process not ready again. */
        if (p->exec_ns && p->pushed_ns - p->exec_ns <= EXEC_READY_WINDOW_NS)
                p->ready_ns = ready ? p->pushed_ns : 0;
        return 0;
}

static const TrackedMapping *find_old(const TrackedMapping *old, size_t n, size_t *cursor,
                                      const ProcMapping *m)
{
        while (*cursor < n && old[*cursor].start < m->start)
                (*cursor)++;
        if (*cursor < n) {
                const TrackedMapping *o = &old[*cursor];
                if (o->start == m->start && o->end == m->end && o->offset == m->offset && o->dev == m->dev &&
                    o->inode == m->inode)
                        return o;
        }
        return NULL;
}

_Static_assert(PROCESS_MAPPING_KEY_MAX <= UNWIND_TABLE_ID_MAX, "mapping keys are unwind table pool keys");

/* The cache entry for one new mapping, with a user reference taken; NULL when there is no usable
 * file (anonymous code, unopenable, not ELF): the unwinder steps by frame pointer there. */
static ExeEntry *mapping_exe(ProcTracker *t, const Process *proc, const ProcMapping *m, const char *root,
                             bool urgent)
{
        uint8_t id[PROCESS_MAPPING_KEY_MAX];
        size_t id_size;
        SafeMapping reopen;
        _cleanup_close_ int fd = -1;
        ExeEntry *e;
        int r;

        if (!m->file) {
                if (m->inode != 0 && m->path[0] == '/')
                        t->map_errors[MAP_ERR_NO_FILE]++;
                return NULL;
        }
        if (!m->bias_known) {
                t->map_errors[MAP_ERR_NO_LOAD_SEGMENT]++;
                return NULL;
        }
        /* The file's identity, not its build ID alone: see process_mapping_key(). */
        id_size = process_mapping_key(m, id);
        if (id_size == 0) {
                t->map_errors[MAP_ERR_IDENTITY]++;
                return NULL;
        }
        r = exe_cache_get(t->cache, id, id_size, m->build_id, m->build_id_size, m->path, &e);
        if (r < 0) {
                t->map_errors[MAP_ERR_NO_MEMORY]++;
                return NULL;
        }
        if (fd < 0 && exe_cache_needs_file(e)) {
                fd = process_open_mapping(proc, m);
                if (fd < 0) {
                        t->map_errors[MAP_ERR_NO_FILE]++;
                        log_debug_errno(fd, "Cannot open %s of pid %d: %m", m->path, (int)proc->pid);
                }
        }
        exe_cache_use(t->cache, e, fd, process_mapping_reopen(proc, m, &reopen) ? &reopen : NULL, root,
                      urgent);
        return e;
}

/* ld-linux-x86-64.so.2 (glibc), ld-musl-x86_64.so.1 (musl), ld-2.31.so (older glibc). */
static bool is_loader(const char *path)
{
        const char *base = strrchr(path, '/');

        base = base ? base + 1 : path;
        return strncmp(base, "ld-", 3) == 0 && strstr(base, ".so");
}

static void watch_loader(ProcTracker *t, Tracked *p, const Process *proc, const ProcMapping *m)
{
        _cleanup_close_ int fd = process_open_mapping(proc, m);
        char path[64];

        if (fd < 0) {
                log_debug_errno(fd, "Cannot open dynamic loader %s of pid %d: %m", m->path, (int)p->pid);
                return;
        }
        /* The very file mapped (a container's own loader, one deleted by an upgrade), opened the
         * safe way: libbpf opens the path it is given to find _dl_debug_state and the kernel resolves
         * it again for the uprobe, and this one names that file whatever becomes of its path. */
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        /* This process may have passed its start-up hook before the uprobe existed (the first
         * process of a new container image): look at it again shortly. */
        if (proc_events_watch_loader(t->events, path, m->dev, m->inode) > 0) {
                p->recheck_tries = 0;
                schedule_recheck(t, p, PROFD_EV_ADDR_UNKNOWN);
        }
}

/* An executable in use without a table or a queued build (its first user had no file to give, or
 * the build queue was full): give it this mapping's file. */
static void retry_build(ProcTracker *t, const Process *proc, const ProcMapping *m, ExeEntry *e,
                        const char *root, bool urgent)
{
        _cleanup_close_ int fd = process_open_mapping(proc, m);
        SafeMapping reopen;

        if (fd < 0) {
                t->map_errors[MAP_ERR_NO_FILE]++;
                return;
        }
        exe_cache_ensure(t->cache, e, fd, process_mapping_reopen(proc, m, &reopen) ? &reopen : NULL, root,
                         urgent);
}

static int refresh(ProcTracker *t, Tracked *p)
{
        TrackedMapping *maps = NULL, *old = p->maps;
        size_t n_old = p->n_maps, cursor = 0;
        bool changed = false;
        char root[64];
        Process *proc;
        int r;

        p->dirty = false;
        p->urgent = false;
        if (p->exec_reads > 0) {
                p->exec_reads--;
                t->n_exec_fast++;
        }
        if (p->deferred_until_ns) {
                p->deferred_until_ns = 0;
                t->n_deferred--;
        }
        refresh_spacing_update(p, now_ns(CLOCK_MONOTONIC));
        p->refreshed_ns = now_ns(CLOCK_MONOTONIC);
        p->maps_ns = p->refreshed_ns;
        t->n_refreshes++;
        r = process_table_refresh(t->procs, p->pid, &proc);
        if (r >= 0 && proc->exited_ns)
                r = -ESRCH;
        if (r == -EAGAIN) {
                /* Mid-exec (no image mapped yet) or exiting: look again shortly; an exit event
                 * drops it meanwhile. */
                t->n_mid_exec++;
                p->recheck_tries = 0;
                schedule_recheck(t, p, PROFD_EV_ADDR_UNKNOWN);
                return r;
        }
        if (r < 0) {
                unsigned reason = r == -ESRCH || r == -ENOENT   ? REFRESH_ERR_VANISHED
                                  : r == -EACCES || r == -EPERM ? REFRESH_ERR_PERMISSION
                                                                : REFRESH_ERR_OTHER;
                t->refresh_errors[reason]++;
                log_debug_errno(r, "Reading mappings of pid %d failed (%s): %m", (int)p->pid,
                                refresh_err_names[reason]);
                tracked_drop(t, p);
                return r;
        }
        if (proc->n_mappings == 0) {
                /* Kernel thread or zombie: nothing the unwinder could use. */
                tracked_drop(t, p);
                return 0;
        }

        maps = calloc(proc->n_mappings, sizeof(*maps));
        if (!maps) {
                t->map_errors[MAP_ERR_NO_MEMORY]++;
                return -ENOMEM;
        }
        snprintf(root, sizeof(root), "/proc/%d/root", (int)p->pid);
        for (size_t i = 0; i < proc->n_mappings; i++) {
                const ProcMapping *m = &proc->mappings[i];
                TrackedMapping *nm = &maps[i];
                const TrackedMapping *o = find_old(old, n_old, &cursor, m);

                nm->start = m->start;
                nm->end = m->end;
                nm->offset = m->offset;
                nm->dev = m->dev;
                nm->inode = m->inode;
                if (o) {
                        /* Unchanged mapping: keep its entry (and the reference) without any I/O. */
                        nm->load_bias = o->load_bias;
                        nm->exe = o->exe;
                        nm->pushed_table = o->pushed_table;
                        old[cursor].exe = NULL;
                        if (nm->exe && nm->exe->state == EXE_NEW)
                                retry_build(t, proc, m, nm->exe, root, !p->background);
                        /* A table that got placed since the last push still needs one. */
                        changed = changed || (nm->exe && !!nm->exe->pool_table != nm->pushed_table);
                        continue;
                }
                changed = true;
                nm->load_bias = m->bias_known ? m->load_bias : 0;
                nm->exe = mapping_exe(t, proc, m, root, !p->background);
                if (nm->exe && is_loader(m->path))
                        watch_loader(t, p, proc, m);
        }
        p->maps = maps;
        p->n_maps = proc->n_mappings;
        maps_release(t, old, n_old);

        if (p->recheck) {
                /* Address unknown (reported before the mapping existed): one look after the delay. */
                bool found = p->recheck_addr == PROFD_EV_ADDR_UNKNOWN && p->recheck_fired;
                for (size_t i = 0; !found && i < p->n_maps; i++)
                        found = p->maps[i].start <= p->recheck_addr && p->recheck_addr < p->maps[i].end;
                if (found || p->recheck_tries >= RECHECK_TRIES) {
                        p->recheck = false;
                        p->recheck_fired = false;
                        p->recheck_tries = 0;
                        t->n_recheck--;
                } else if (p->recheck_fired) {
                        /* Looked after the delay and still not there: once more, later. */
                        p->recheck_fired = false;
                        schedule_recheck(t, p, p->recheck_addr);
                }
        }
        /* Loader and unknown-pc reports often find nothing new: leave the BPF maps alone then. */
        if (!changed && proc->n_mappings == n_old && p->pushed_ns && !p->push) {
                t->n_unchanged++;
                return 0;
        }
        /* Mapping churn: BPF holds events back once the process used up its burst, so the last
         * change may never be reported. Look again after the current spacing until the maps stop
         * changing. */
        if (p->refresh_interval_ns > REFRESH_MIN_INTERVAL_NS)
                defer_refresh(t, p, p->refreshed_ns + p->refresh_interval_ns);
        r = push(t, p);
        /* After the push: BPF walks runtime frames only of a pid it has mappings for. */
        if (r >= 0 && t->opts.observer.mapped)
                t->opts.observer.mapped(t->opts.observer.userdata, proc);
        return r;
}


/* Up to max queued processes, from the head: those events named go first (enqueue()). */
static void work_queue(ProcTracker *t, unsigned max, bool named_only)
{
        for (unsigned i = 0; i < max && t->q_head && !(named_only && t->q_head->queued_back); i++) {
                Tracked *p = t->q_head;

                t->q_head = p->queue_next;
                if (!t->q_head)
                        t->q_tail = NULL;
                p->queued = false;
                p->queue_next = NULL;
                if (p->dirty) {
                        if (refresh_allowed(t, p, now_ns(CLOCK_MONOTONIC)))
                                (void)refresh(t, p); /* may free p */
                } else if (p->push)
                        (void)push(t, p);
        }
}

/* Right after a ring buffer drain: exec'd and newly mapping processes are read before the loop
 * turns to anything else, the first samples of a new program find it in the pool. */
static void on_drained(void *userdata)
{
        work_queue(userdata, DRAIN_BATCH, true);
}

static int on_worker(sd_event_source *s, void *userdata)
{
        ProcTracker *t = userdata;

        work_queue(t, REFRESH_BATCH, false);
        if (!t->q_head) {
                (void)sd_event_source_set_enabled(s, SD_EVENT_OFF);
                if (t->scan_pending) {
                        t->scan_pending = false;
                        t->scan_ns = now_ns(CLOCK_MONOTONIC) - t->scan_start_ns;
                        log_info("Found %zu processes at start (read in %.1f ms); building unwind tables "
                                 "for %zu executables in the background",
                                 t->scan_processes, (double)t->scan_ns / 1e6, exe_cache_queued(t->cache));
                }
        }
        return 0;
}

static void on_exe_ready(ExeEntry *e, void *userdata)
{
        ProcTracker *t = userdata;

        if (e->users == 0)
                return;
        for (Tracked *p = t->head; p; p = p->next)
                for (size_t i = 0; i < p->n_maps; i++)
                        if (p->maps[i].exe == e) {
                                mark_push(t, p);
                                break;
                        }
}

static void on_fork(ProcTracker *t, pid_t child, pid_t parent)
{
        Tracked *pp = tracked_find(t, parent), *c;

        c = tracked_get(t, child);
        if (!c)
                return;
        if (!pp || pp->dirty || c->n_maps > 0) {
                mark_dirty(t, c);
                return;
        }
        /* Until it execs or maps something (both reported), a child has its parent's mappings:
         * copy them without touching /proc, the common fork+exec pattern never reads them. */
        c->maps = calloc(pp->n_maps ?: 1, sizeof(*c->maps));
        if (!c->maps) {
                mark_dirty(t, c);
                return;
        }
        memcpy(c->maps, pp->maps, pp->n_maps * sizeof(*c->maps));
        c->n_maps = pp->n_maps;
        c->maps_ns = pp->maps_ns;
        for (size_t i = 0; i < c->n_maps; i++)
                if (c->maps[i].exe)
                        exe_cache_use(t->cache, c->maps[i].exe, -1, NULL, NULL, false);
        t->n_forks_copied++;
        mark_push(t, c);
}

/* Anonymous executable memory made after pid was read (JIT code): added to its mappings as it is,
 * without reading /proc/PID/maps, so its samples unwind (by frame pointer) from the first one. */
static void on_anon_exec(ProcTracker *t, pid_t pid, uint64_t start, uint64_t end)
{
        Tracked *p = tracked_find(t, pid);
        TrackedMapping *maps;
        size_t at = 0, lo, hi;
        int r;

        if (end <= start)
                return;
        if (!p || !p->pushed_ns) {
                /* Never read: the read to come (or this one) sees the range in its maps. */
                p = p ?: tracked_get(t, pid);
                if (p) {
                        p->background = false;
                        mark_dirty(t, p);
                }
                return;
        }
        while (at < p->n_maps && p->maps[at].end <= start)
                at++;
        /* Overlapping entries [at, hi): all must be anonymous, the new range takes them in. */
        lo = at;
        for (hi = at; hi < p->n_maps && p->maps[hi].start < end; hi++) {
                if (p->maps[hi].start <= start && end <= p->maps[hi].end) {
                        t->n_anon_known++;
                        return;
                }
                if (p->maps[hi].exe || p->maps[hi].inode) {
                        /* Part of a file mapping: not what it seems, read the maps instead. */
                        t->n_anon_reread++;
                        mark_dirty(t, p);
                        return;
                }
        }
        if (lo < hi) {
                start = p->maps[lo].start < start ? p->maps[lo].start : start;
                end = p->maps[hi - 1].end > end ? p->maps[hi - 1].end : end;
        }
        if (p->n_maps - (hi - lo) + 1 > PROCESS_MAX_MAPPINGS) {
                t->n_anon_dropped++;
                return;
        }
        maps = calloc(p->n_maps - (hi - lo) + 1, sizeof(*maps));
        if (!maps) {
                t->n_anon_dropped++;
                return;
        }
        memcpy(maps, p->maps, lo * sizeof(*maps));
        maps[lo] = (TrackedMapping){.start = start, .end = end};
        memcpy(maps + lo + 1, p->maps + hi, (p->n_maps - hi) * sizeof(*maps));
        free(p->maps); /* the merged entries were anonymous: no cache references to drop */
        p->maps = maps;
        p->n_maps = p->n_maps - (hi - lo) + 1;
        t->n_anon_added++;
        p->background = false;
        mark_push(t, p);
        /* The symbolizer's snapshot too: after the process exits it is all there is to place
         * (and name, from a perf map) the frames in this code. */
        r = process_table_add_anon(t->procs, pid, start, end);
        if (r == -ENOSPC || r == -ENOMEM)
                t->n_anon_dropped++;
        else if (r == -EEXIST)
                mark_dirty(t, p);
}

static void on_event(const struct profd_event *ev, void *userdata)
{
        ProcTracker *t = userdata;
        pid_t pid = (pid_t)ev->pid;
        Tracked *p;

        if (pid <= 0)
                return;
        switch (ev->type) {
        case PROFD_EV_EXIT:
                t->n_exits++;
                p = tracked_find(t, pid);
                if (p)
                        tracked_drop(t, p);
                process_table_mark_exited(t->procs, pid, now_ns(CLOCK_REALTIME));
                return;
        case PROFD_EV_FORK:
                /* Symbolization too: a child that exits before anyone reads its maps still has
                 * its parent's snapshot. */
                (void)process_table_fork(t->procs, (pid_t)ev->ppid, pid);
                on_fork(t, pid, (pid_t)ev->ppid);
                return;
        case PROFD_EV_EXEC:
                process_table_exec(t->procs, pid);
                p = tracked_get(t, pid);
                if (!p)
                        return;
                p->background = false;
                if (p->exec_adopted && ev->ktime_ns + SAME_EXEC_SLACK_NS >= p->exec_ns &&
                    ev->ktime_ns <= p->exec_ns + SAME_EXEC_SLACK_NS) {
                        /* Already pushed with mappings read after this exec. */
                        p->exec_adopted = false;
                        return;
                }
                record_ready(t, p);
                p->exec_adopted = false;
                /* bpf_ktime_get_ns() is CLOCK_MONOTONIC. */
                p->exec_ns = ev->ktime_ns;
                /* The unwinder forgot the pid at exec: push even if the maps look the same. */
                p->push = true;
                p->urgent = true;
                p->refresh_interval_ns = 0; /* a new program: no history of churn */
                p->exec_reads = EXEC_FAST_READS;
                mark_dirty(t, p);
                return;
        case PROFD_EV_MMAP_EXEC:
                p = tracked_get(t, pid);
                if (!p)
                        return;
                p->background = false;
                mark_dirty(t, p);
                /* The loader's hook fires once its mappings exist: reading maps now is enough. */
                if (ev->addr == PROFD_EV_ADDR_LOADER)
                        return;
                /* The kprobe fallback fires before the mapping exists, and the other hooks can
                 * race with our read of /proc/PID/maps: look again shortly if it is not there. */
                p->recheck_tries = 0;
                schedule_recheck(t, p, ev->addr);
                return;
        case PROFD_EV_ANON_EXEC:
                on_anon_exec(t, pid, ev->addr, ev->addr + ev->len);
                return;
        case PROFD_EV_UNKNOWN_PID:
        case PROFD_EV_UNKNOWN_PC:
                p = tracked_find(t, pid);
                if (p &&
                    (p->dirty || p->refreshed_ns + UNKNOWN_REFRESH_INTERVAL_NS > now_ns(CLOCK_MONOTONIC))) {
                        t->n_unknown_ratelimited++;
                        return;
                }
                if (p && ev->type == PROFD_EV_UNKNOWN_PC) {
                        for (size_t i = 0; i < p->n_maps; i++)
                                if (p->maps[i].start <= ev->addr && ev->addr < p->maps[i].end) {
                                        /* Known mapping: its table is being built or it has none. */
                                        t->n_unknown_ratelimited++;
                                        return;
                                }
                }
                p = p ?: tracked_get(t, pid);
                if (!p)
                        return;
                p->background = false;
                if (ev->type == PROFD_EV_UNKNOWN_PID)
                        p->push = true; /* not in the pool (e.g. forgotten at an exec we missed) */
                mark_dirty(t, p);
                return;
        }
}

static int on_recheck(sd_event_source *s, uint64_t usec, void *userdata)
{
        ProcTracker *t = userdata;

        for (Tracked *p = t->head; p && t->n_recheck > 0; p = p->next)
                if (p->recheck) {
                        p->recheck_fired = true;
                        t->n_rechecks++;
                        mark_dirty(t, p);
                }
        return 0;
}

/* Every process in /proc gets tracked (and refreshed from the worker); tracked processes that are
 * no longer there missed their exit event. */
static int scan_proc(ProcTracker *t, bool reconcile)
{
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        size_t n = 0;

        d = opendir("/proc");
        if (!d)
                return log_error_errno_ratelimited(-errno, "Cannot read /proc: %m");
        for (Tracked *p = t->head; p; p = p->next)
                p->seen = false;
        while ((de = readdir(d))) {
                char *end;
                long pid;
                Tracked *p;

                if (!isdigit((unsigned char)de->d_name[0]))
                        continue;
                pid = strtol(de->d_name, &end, 10);
                if (*end || pid <= 0 || pid > INT32_MAX)
                        continue;
                p = tracked_find(t, (pid_t)pid);
                if (!p) {
                        p = tracked_get(t, (pid_t)pid);
                        if (!p)
                                return -ENOMEM;
                        p->background = true;
                        mark_dirty(t, p);
                        if (reconcile)
                                t->n_reconcile_new++;
                }
                p->seen = true;
                n++;
        }
        for (Tracked *p = t->head, *next; p; p = next) {
                next = p->next;
                if (!p->seen) {
                        t->n_reconcile_gone += reconcile;
                        process_table_mark_exited(t->procs, p->pid, now_ns(CLOCK_REALTIME));
                        tracked_drop(t, p);
                }
        }
        t->scan_processes = n;
        return 0;
}

static int on_gc(sd_event_source *s, uint64_t usec, void *userdata)
{
        ProcTracker *t = userdata;
        uint64_t now = now_ns(CLOCK_MONOTONIC), dropped;

        exe_cache_gc(t->cache, now);
        for (Tracked *p = t->head; p; p = p->next) {
                /* Long-running processes: their start-up is over, observe it now, not at exit. */
                if (p->exec_ns && now > p->exec_ns + EXEC_READY_WINDOW_NS)
                        record_ready(t, p);
                /* A mapping whose executable has neither a table nor a queued build: the refresh
                 * gives the cache a file to build from. */
                for (size_t i = 0; i < p->n_maps; i++)
                        if (p->maps[i].exe && p->maps[i].exe->state == EXE_NEW) {
                                mark_dirty(t, p);
                                break;
                        }
        }
        /* Lost events (ring buffer full in a burst) mean missed execs/exits: reconcile now
         * rather than at the next sweep. */
        dropped = proc_events_dropped(t->events);
        if (dropped != t->events_dropped) {
                t->events_dropped = dropped;
                t->last_sweep_ns = 0;
        }
        if (now - t->last_sweep_ns >= t->opts.sweep_interval_ns) {
                t->last_sweep_ns = now;
                /* Events already queued are not "missed": handle them first. */
                (void)proc_events_consume(t->events);
                if (!t->opts.no_initial_scan)
                        (void)scan_proc(t, true);
        }
        (void)sd_event_source_set_time(s, (now + GC_INTERVAL_NS) / NSEC_PER_USEC);
        return 0;
}

int proc_tracker_new(sd_event *e, ProcessTable *procs, TablePool *pool, const ProcTrackerOptions *opts,
                     ProcTracker **ret)
{
        _cleanup_(proc_tracker_freep) ProcTracker *t = NULL;
        int r;

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->event = sd_event_ref(e);
        t->procs = procs;
        t->pool = pool;
        if (opts)
                t->opts = *opts;
        if (!t->opts.exe_grace_ns)
                t->opts.exe_grace_ns = DEFAULT_EXE_GRACE_NS;
        if (!t->opts.sweep_interval_ns)
                t->opts.sweep_interval_ns = DEFAULT_SWEEP_INTERVAL_NS;

        r = exe_cache_new(e, pool, t->opts.exe_grace_ns, on_exe_ready, t, &t->cache);
        if (r < 0)
                return r;

        /* Below the sample drains and HTTP (priority 0), above table builds (idle). */
        r = sd_event_add_defer(e, &t->worker, on_worker, t);
        if (r < 0)
                return r;
        (void)sd_event_source_set_priority(t->worker, SD_EVENT_PRIORITY_NORMAL + 10);
        (void)sd_event_source_set_enabled(t->worker, SD_EVENT_OFF);
        (void)sd_event_source_set_description(t->worker, "process-tracker");

        r = sd_event_add_time(e, &t->recheck_timer, CLOCK_MONOTONIC, 0, 1000, on_recheck, t);
        if (r < 0)
                return r;
        (void)sd_event_source_set_enabled(t->recheck_timer, SD_EVENT_OFF);

        r = sd_event_add_time(e, &t->deferred_timer, CLOCK_MONOTONIC, 0, 1000, on_deferred, t);
        if (r < 0)
                return r;
        (void)sd_event_source_set_enabled(t->deferred_timer, SD_EVENT_OFF);
        (void)sd_event_source_set_description(t->deferred_timer, "process-tracker-deferred");

        t->last_sweep_ns = now_ns(CLOCK_MONOTONIC);
        r = sd_event_add_time(e, &t->gc_timer, CLOCK_MONOTONIC,
                              (t->last_sweep_ns + GC_INTERVAL_NS) / NSEC_PER_USEC,
                              NSEC_PER_SEC / NSEC_PER_USEC, on_gc, t);
        if (r < 0)
                return r;
        (void)sd_event_source_set_enabled(t->gc_timer, SD_EVENT_ON);
        (void)sd_event_source_set_priority(t->gc_timer, SD_EVENT_PRIORITY_IDLE);

        /* Hooks first, then the scan: a process that starts in between is seen by one of them. */
        r = proc_events_new(e, on_event, t, t->opts.mmap_via, &t->events);
        if (r < 0)
                return r;
        proc_events_set_drained(t->events, on_drained);

        if (!t->opts.no_initial_scan) {
                t->scan_start_ns = now_ns(CLOCK_MONOTONIC);
                t->scan_pending = true;
                r = scan_proc(t, false);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(t);
        return 0;
}

ProcTracker *proc_tracker_free(ProcTracker *t)
{
        if (!t)
                return NULL;
        proc_events_free(t->events);
        sd_event_source_disable_unref(t->worker);
        sd_event_source_disable_unref(t->gc_timer);
        sd_event_source_disable_unref(t->recheck_timer);
        sd_event_source_disable_unref(t->deferred_timer);
        while (t->head)
                tracked_drop(t, t->head);
        exe_cache_free(t->cache);
        sd_event_unref(t->event);
        return mfree(t);
}

int proc_tracker_add_unwinder_events(ProcTracker *t, int ringbuf_map_fd)
{
        return proc_events_add_ringbuf(t->events, ringbuf_map_fd);
}

int proc_tracker_get_process(ProcTracker *t, pid_t pid, ProcTrackerProcess *ret)
{
        Tracked *p = tracked_find(t, pid);

        if (!p || !p->pushed_ns)
                return -ENOENT;
        *ret = (ProcTrackerProcess){
                .n_mappings = p->n_maps, .pushed_ns = p->pushed_ns, .exec_ns = p->exec_ns};
        /* As last pushed: what the unwinder sees, not what the cache has ready. */
        for (size_t i = 0; i < p->n_maps; i++) {
                const ExeEntry *e = p->maps[i].exe;
                if (p->maps[i].pushed_table)
                        ret->n_with_table++;
                else if (e && e->state != EXE_FAILED)
                        ret->n_pending++;
        }
        return 0;
}

int proc_tracker_find_mapping(ProcTracker *t, pid_t pid, const char *path_suffix, bool *ret_has_table)
{
        Tracked *p = tracked_find(t, pid);
        Process *proc;
        size_t len = strlen(path_suffix);
        int r;

        if (!p)
                return -ENOENT;
        r = process_table_get(t->procs, pid, &proc);
        if (r < 0)
                return r;
        for (size_t i = 0; i < p->n_maps; i++) {
                const ProcMapping *m = process_find_mapping(proc, p->maps[i].start);
                size_t l;
                if (!m)
                        continue;
                l = strlen(m->path);
                if (l >= len && strcmp(m->path + l - len, path_suffix) == 0) {
                        *ret_has_table = p->maps[i].pushed_table;
                        return 0;
                }
        }
        return -ENOENT;
}

int proc_tracker_write_process(ProcTracker *t, pid_t pid, FILE *f)
{
        Tracked *p = tracked_find(t, pid);
        ProcTrackerProcess info;
        Process *proc = NULL;

        if (!p)
                return -ENOENT;
        (void)process_table_get(t->procs, pid, &proc);
        if (proc_tracker_get_process(t, pid, &info) < 0) {
                fprintf(f, "pid %d\nstate reading\n", (int)pid);
                return 0;
        }
        /* ready: the last push gave the unwinder every table it will get for these mappings, and
         * it was made from mappings read after the last exec the tracker knows of. */
        fprintf(f, "pid %d\nstate %s\nmappings %zu\nwith_table %zu\npending %zu\n", (int)pid,
                info.n_pending == 0 && !p->dirty && !p->push && (!p->exec_ns || p->pushed_ns >= p->exec_ns)
                        ? "ready"
                        : "pending",
                info.n_mappings, info.n_with_table, info.n_pending);
        for (size_t i = 0; i < p->n_maps; i++) {
                const TrackedMapping *m = &p->maps[i];
                const ProcMapping *pm = proc ? process_find_mapping(proc, m->start) : NULL;
                const char *state = m->pushed_table                          ? "table"
                                    : !m->exe || m->exe->state == EXE_FAILED ? "none"
                                                                             : "pending";

                fprintf(f, "mapping %" PRIx64 "-%" PRIx64 " %s %s\n", m->start, m->end, state,
                        pm && pm->path ? pm->path : "?");
        }
        return 0;
}

int proc_tracker_refresh_pid(ProcTracker *t, pid_t pid)
{
        Tracked *p;

        if (pid <= 0)
                return -EINVAL;
        p = tracked_get(t, pid);
        if (!p)
                return -ENOMEM;
        p->background = false;
        mark_dirty(t, p);
        return 0;
}

size_t proc_tracker_n_processes(const ProcTracker *t)
{
        return t ? t->n_tracked : 0;
}

bool proc_tracker_busy(const ProcTracker *t)
{
        return t->q_head || exe_cache_queued(t->cache) > 0 || t->n_recheck > 0;
}

void proc_tracker_write_metrics(const ProcTracker *t, FILE *f)
{
        uint64_t cum = 0;

        if (!t)
                return;
        proc_events_write_metrics(t->events, f);
        exe_cache_write_metrics(t->cache, f);
        fprintf(f,
                "# HELP profd_proc_tracker_processes Processes whose mappings the unwinder has.\n"
                "# TYPE profd_proc_tracker_processes gauge\n"
                "profd_proc_tracker_processes %zu\n"
                "# HELP profd_proc_tracker_initial_scan_seconds Time to read every process present at "
                "start.\n"
                "# TYPE profd_proc_tracker_initial_scan_seconds gauge\n"
                "profd_proc_tracker_initial_scan_seconds %.6f\n"
                "# HELP profd_proc_tracker_refreshes_total Reads of a process' mappings.\n"
                "# TYPE profd_proc_tracker_refreshes_total counter\n"
                "profd_proc_tracker_refreshes_total %" PRIu64 "\n"
                "# HELP profd_proc_tracker_unchanged_total Refreshes that found the same mappings (pool "
                "left alone).\n"
                "# TYPE profd_proc_tracker_unchanged_total counter\n"
                "profd_proc_tracker_unchanged_total %" PRIu64 "\n"
                "# HELP profd_proc_tracker_pushes_total Updates of a process' entries in the unwind table "
                "pool.\n"
                "# TYPE profd_proc_tracker_pushes_total counter\n"
                "profd_proc_tracker_pushes_total %" PRIu64 "\n"
                "# HELP profd_proc_tracker_forks_copied_total New processes given their parent's entries "
                "without reading /proc.\n"
                "# TYPE profd_proc_tracker_forks_copied_total counter\n"
                "profd_proc_tracker_forks_copied_total %" PRIu64 "\n"
                "# HELP profd_proc_tracker_exits_total Process exits handled.\n"
                "# TYPE profd_proc_tracker_exits_total counter\n"
                "profd_proc_tracker_exits_total %" PRIu64 "\n"
                "# HELP profd_proc_tracker_rechecks_total Re-reads of maps for a mapping not yet visible.\n"
                "# TYPE profd_proc_tracker_rechecks_total counter\n"
                "profd_proc_tracker_rechecks_total %" PRIu64 "\n"
                "# HELP profd_proc_tracker_unknown_ignored_total Unknown pid/pc reports not acted on "
                "(refreshed recently, or a known mapping).\n"
                "# TYPE profd_proc_tracker_unknown_ignored_total counter\n"
                "profd_proc_tracker_unknown_ignored_total %" PRIu64 "\n"
                "# HELP profd_proc_tracker_reconciled_total Processes the /proc sweep found that events "
                "missed.\n"
                "# TYPE profd_proc_tracker_reconciled_total counter\n"
                "profd_proc_tracker_reconciled_total{what=\"new\"} %" PRIu64 "\n"
                "profd_proc_tracker_reconciled_total{what=\"gone\"} %" PRIu64 "\n"
                "# HELP profd_proc_tracker_refreshes_deferred_total Re-reads of a process's maps held "
                "back because it was read moments ago (mapping churn; spacing 10 ms doubling to 1 s).\n"
                "# TYPE profd_proc_tracker_refreshes_deferred_total counter\n"
                "profd_proc_tracker_refreshes_deferred_total %" PRIu64 "\n"
                "# HELP profd_proc_tracker_events_coalesced_total Mapping events folded into a re-read "
                "already pending.\n"
                "# TYPE profd_proc_tracker_events_coalesced_total counter\n"
                "profd_proc_tracker_events_coalesced_total %" PRIu64 "\n",
                t->n_tracked, (double)t->scan_ns / 1e9, t->n_refreshes, t->n_unchanged, t->n_pushes,
                t->n_forks_copied, t->n_exits, t->n_rechecks, t->n_unknown_ratelimited, t->n_reconcile_new,
                t->n_reconcile_gone, t->n_refresh_deferred, t->n_refresh_coalesced);
        fprintf(f,
                "# HELP profd_proc_tracker_anon_exec_total Anonymous executable ranges (JIT code) reported "
                "by the kernel, by what the tracker did.\n"
                "# TYPE profd_proc_tracker_anon_exec_total counter\n"
                "profd_proc_tracker_anon_exec_total{outcome=\"added\"} %" PRIu64 "\n"
                "profd_proc_tracker_anon_exec_total{outcome=\"known\"} %" PRIu64 "\n"
                "profd_proc_tracker_anon_exec_total{outcome=\"reread\"} %" PRIu64 "\n"
                "profd_proc_tracker_anon_exec_total{outcome=\"dropped\"} %" PRIu64 "\n",
                t->n_anon_added, t->n_anon_known, t->n_anon_reread, t->n_anon_dropped);
        fprintf(f,
                "# HELP profd_proc_tracker_exec_reads_total Reads of a process's maps right after its exec: "
                "not held back by the spacing (fast), found mid-exec without an image (looked at again).\n"
                "# TYPE profd_proc_tracker_exec_reads_total counter\n"
                "profd_proc_tracker_exec_reads_total{kind=\"fast\"} %" PRIu64 "\n"
                "profd_proc_tracker_exec_reads_total{kind=\"mid_exec\"} %" PRIu64 "\n",
                t->n_exec_fast, t->n_mid_exec);
        fputs("# HELP profd_proc_tracker_errors_total Processes or mappings left without unwind entries, by "
              "reason.\n"
              "# TYPE profd_proc_tracker_errors_total counter\n",
              f);
        for (unsigned i = 0; i < _REFRESH_ERR_MAX; i++)
                fprintf(f, "profd_proc_tracker_errors_total{reason=\"%s\"} %" PRIu64 "\n",
                        refresh_err_names[i], t->refresh_errors[i]);
        for (unsigned i = 0; i < _MAP_ERR_MAX; i++)
                fprintf(f, "profd_proc_tracker_errors_total{reason=\"mapping_%s\"} %" PRIu64 "\n",
                        map_err_names[i], t->map_errors[i]);
        fputs("# HELP profd_proc_tracker_exec_ready_seconds From exec to every mapping of the new image "
              "having its unwind table in the pool.\n"
              "# TYPE profd_proc_tracker_exec_ready_seconds histogram\n",
              f);
        for (size_t b = 0; b < N_READY_BUCKETS; b++) {
                cum += t->ready_hist[b];
                if (b < ELEMENTSOF(ready_buckets_ms))
                        fprintf(f, "profd_proc_tracker_exec_ready_seconds_bucket{le=\"%.3f\"} %" PRIu64 "\n",
                                ready_buckets_ms[b] / 1000.0, cum);
                else
                        fprintf(f, "profd_proc_tracker_exec_ready_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n",
                                cum);
        }
        fprintf(f,
                "profd_proc_tracker_exec_ready_seconds_sum %.6f\n"
                "profd_proc_tracker_exec_ready_seconds_count %" PRIu64 "\n"
                "# HELP profd_proc_tracker_exec_never_ready_total Execs whose process ended (or exec'd "
                "again) before all its mappings had tables in the pool.\n"
                "# TYPE profd_proc_tracker_exec_never_ready_total counter\n"
                "profd_proc_tracker_exec_never_ready_total %" PRIu64 "\n",
                (double)t->ready_sum_ns / 1e9, t->ready_count, t->n_never_ready);
}
