/* SPDX-License-Identifier: GPL-2.0-only */
/* Re-reading a tracked process's mappings and pushing them to the unwind table pool: executables
 * from the cache (builds queued), the dynamic loader watched, exec -> ready measured; the worker
 * that runs the queue. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tracker/proc-tracker-queue.h"
#include "tracker/proc-tracker-refresh.h"
#include "util/log.h"
#include "util/time-util.h"

/* Tracked processes refreshed per event-loop iteration: a burst of execs (or the start-up scan of
 * thousands of processes) is spread over iterations so sample drains and HTTP go in between. */
#define REFRESH_BATCH 32
/* Re-reads of one process's maps after mmap events are spaced at least this far apart; the
 * spacing doubles while events keep coming (a dlopen/dlclose loop, a JIT mapping code in a loop)
 * up to REFRESH_MAX_INTERVAL_NS and falls back once the process is quiet for that long. Events
 * in between are coalesced into the next read. An exec is never held back. */
#define REFRESH_MIN_INTERVAL_NS (10 * 1000 * 1000ULL)
#define REFRESH_MAX_INTERVAL_NS (1 * NSEC_PER_SEC)
/* Processes an event named that are refreshed right after the ring buffer drain that named them
 * (the rest go to the worker): bounded, so a burst of execs cannot hold the loop. */
#define DRAIN_BATCH 8

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

/* The maps just pushed were read after the pid's last exec (the pool refuses older ones). When the
 * exec event is still in the ring buffer behind them, take the exec time from the pool so this push
 * counts as the one that made the new image ready; the event, when it comes, is then the same exec. */
static void adopt_pool_exec(ProcTracker *t, Tracked *p)
{
        uint64_t exec_ns;

        if (table_pool_checked_exec(t->pool, p->pid, &exec_ns) < 0)
                return;
        if (exec_ns <= p->exec_ns + SAME_EXEC_SLACK_NS || exec_ns > p->maps_ns ||
            now_ns(CLOCK_MONOTONIC) - exec_ns > EXEC_READY_WINDOW_NS)
                return;
        tracker_record_ready(t, p); /* an earlier exec that never got ready */
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
                tracker_mark_dirty(t, p);
                return r;
        }
        if (r < 0) {
                t->refresh_errors[REFRESH_ERR_POOL]++;
                return log_debug_errno(r, "Updating unwind table pool entries of pid %d failed: %m",
                                       (int)p->pid);
        }
        t->n_pushes++;
        p->pushed_ns = now_ns(CLOCK_MONOTONIC);
        if (p->reported) {
                p->reported = false;
                (void)table_pool_forget_report(t->pool, p->pid);
        }
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
        if (fd < 0 && exe_cache_needs_file(t->cache, e)) {
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

/* How many times the loader calls its debugger hook at a program's start: glibc's (ld-linux-*,
 * ld-2.NN.so) with RT_ADD before mapping the libraries and RT_CONSISTENT after, musl's
 * (ld-musl-*) once, after; others are not known (0). */
static unsigned loader_start_reports(const char *path)
{
        const char *base = path ? strrchr(path, '/') : NULL;

        base = base ? base + 1 : path;
        if (!base)
                return 0;
        if (strncmp(base, "ld-linux", 8) == 0 || strncmp(base, "ld-2.", 5) == 0)
                return 2;
        if (strncmp(base, "ld-musl", 7) == 0)
                return 1;
        return 0;
}

static void watch_loader(ProcTracker *t, Tracked *p, const Process *proc, const ProcMapping *m)
{
        _cleanup_close_ int fd = -1;
        char path[64];

        /* Every exec maps its loader anew: open it only when it is not watched yet. */
        if (!proc_events_loader_unwatched(t->events, m->dev, m->inode))
                return;
        fd = process_open_mapping(proc, m);
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
        if (proc_events_watch_loader(t->events, path, m->dev, m->inode, loader_start_reports(m->path)) > 0) {
                t->loader_watch_ns = now_ns(CLOCK_MONOTONIC);
                p->recheck_tries = 0;
                tracker_schedule_recheck(t, p, PROFD_EV_ADDR_UNKNOWN);
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
                tracker_schedule_recheck(t, p, PROFD_EV_ADDR_UNKNOWN);
                return r;
        }
        if (r < 0) {
                unsigned reason = r == -ESRCH || r == -ENOENT   ? REFRESH_ERR_VANISHED
                                  : r == -EACCES || r == -EPERM ? REFRESH_ERR_PERMISSION
                                                                : REFRESH_ERR_OTHER;
                t->refresh_errors[reason]++;
                log_debug_errno(r, "Reading mappings of pid %d failed (%s): %m", (int)p->pid,
                                tracker_refresh_err_names[reason]);
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
        tracked_maps_release(t, old, n_old);

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
                        tracker_schedule_recheck(t, p, p->recheck_addr);
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
                tracker_defer_refresh(t, p, p->refreshed_ns + p->refresh_interval_ns);
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
                        if (tracker_refresh_allowed(t, p, now_ns(CLOCK_MONOTONIC)))
                                (void)refresh(t, p); /* may free p */
                } else if (p->push)
                        (void)push(t, p);
        }
}

/* Right after a ring buffer drain: exec'd and newly mapping processes are read before the loop
 * turns to anything else, the first samples of a new program find it in the pool. */
void tracker_on_drained(void *userdata)
{
        ProcTracker *t = userdata;

        work_queue(t, DRAIN_BATCH, true);
        /* Emptied here: the worker enqueue() switched on would only cost the loop one more turn
         * (an epoll_wait and a dispatch) to find nothing, once per event. */
        if (!t->q_head && !t->scan_pending && t->worker)
                (void)sd_event_source_set_enabled(t->worker, SD_EVENT_OFF);
}

size_t proc_tracker_settle(ProcTracker *t, uint64_t budget_ns)
{
        uint64_t end = now_ns(CLOCK_MONOTONIC) + budget_ns;
        size_t left = 0;

        /* Each round reads up to REFRESH_BATCH processes off the queue; bounded by the budget. */
        while (t->q_head && now_ns(CLOCK_MONOTONIC) < end)
                work_queue(t, REFRESH_BATCH, false);
        for (Tracked *p = t->q_head; p; p = p->queue_next)
                left++;
        return left;
}

int tracker_on_worker(sd_event_source *s, void *userdata)
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

void tracker_on_exe_ready(ExeEntry *e, void *userdata)
{
        ProcTracker *t = userdata;

        if (e->users == 0)
                return;
        for (size_t k = 0; k < pid_table_size(&t->tracked); k++) {
                Tracked *p = pid_table_at(&t->tracked, k);

                for (size_t i = 0; i < p->n_maps; i++)
                        if (p->maps[i].exe == e) {
                                tracker_mark_push(t, p);
                                break;
                        }
        }
}
