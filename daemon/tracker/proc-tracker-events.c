/* SPDX-License-Identifier: GPL-2.0-only */
/* What each process event (proc-events.h, and the unwinder's unknown pid/pc reports) does to the
 * tracked processes: exec, exit, fork (the parent's mappings copied), new file and anonymous
 * executable mappings. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tracker/proc-tracker-events.h"
#include "tracker/proc-tracker-queue.h"
#include "util/time-util.h"

/* The unwinder re-reports an unknown pid/pc at most this often per process (it rate-limits in BPF
 * too); a refresh that did not help is not repeated sooner. */
#define UNKNOWN_REFRESH_INTERVAL_NS (1 * NSEC_PER_SEC)
/* After an exec, this many re-reads are not spaced: the loader maps the new image's libraries in
 * the first milliseconds and each step must reach the unwinder at once. */
#define EXEC_FAST_READS 4

static void on_fork(ProcTracker *t, pid_t child, pid_t parent, bool shared_mm)
{
        Tracked *pp, *c;

        if (shared_mm) {
                /* vfork, posix_spawn: the child runs in its parent's memory until it execs (an
                 * event) or exits. The unwinder uses the parent's entries for it (same mm), so a
                 * build's spawns write nothing here; a child whose parent is unknown is reported
                 * as an unknown pid and read then. */
                t->n_forks_shared++;
                return;
        }
        pp = tracked_find(t, parent);
        c = tracked_get(t, child);
        if (!c)
                return;
        if (!pp || pp->dirty || c->n_maps > 0) {
                tracker_mark_dirty(t, c);
                return;
        }
        /* Until it execs or maps something (both reported), a child has its parent's mappings:
         * copy them without touching /proc, the common fork+exec pattern never reads them. */
        c->maps = calloc(pp->n_maps ?: 1, sizeof(*c->maps));
        if (!c->maps) {
                tracker_mark_dirty(t, c);
                return;
        }
        memcpy(c->maps, pp->maps, pp->n_maps * sizeof(*c->maps));
        c->n_maps = pp->n_maps;
        c->maps_ns = pp->maps_ns;
        for (size_t i = 0; i < c->n_maps; i++)
                if (c->maps[i].exe)
                        exe_cache_use(t->cache, c->maps[i].exe, -1, NULL, NULL, false);
        t->n_forks_copied++;
        tracker_mark_push(t, c);
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
                        tracker_mark_dirty(t, p);
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
                        tracker_mark_dirty(t, p);
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
        tracker_mark_push(t, p);
        /* The symbolizer's snapshot too: after the process exits it is all there is to place
         * (and name, from a perf map) the frames in this code. */
        r = process_table_add_anon(t->procs, pid, start, end);
        if (r == -ENOSPC || r == -ENOMEM)
                t->n_anon_dropped++;
        else if (r == -EEXIST)
                tracker_mark_dirty(t, p);
}

/* glibc's loader (ld-linux-*.so.2, ld-2.NN.so; not musl's ld-musl-*), found by the name its cache
 * entry was first seen under. */
static bool maps_glibc_loader(const Tracked *p)
{
        for (size_t i = 0; i < p->n_maps; i++) {
                const char *name = p->maps[i].exe ? p->maps[i].exe->name : NULL, *base;

                if (!name)
                        continue;
                base = strrchr(name, '/');
                base = base ? base + 1 : name;
                if (strncmp(base, "ld-linux", 8) == 0 || strncmp(base, "ld-2.", 5) == 0)
                        return true;
        }
        return false;
}

/* glibc's loader calls its debugger hook twice at start-up: RT_ADD before it maps the program's
 * libraries, RT_CONSISTENT once they are mapped. The first finds the mappings the exec's own read
 * found (the executable, the loader, the vDSO), so it is not acted on: one read of /proc/PID less
 * per exec. Only when that read was pushed after this exec, and the uprobe was already attached at
 * the exec (attached later, the first report seen may be the second: acted on). musl's loader
 * reports once, after mapping: always acted on. */
static bool loader_start_report_skipped(ProcTracker *t, Tracked *p)
{
        if (!p->loader_start_expected)
                return false;
        p->loader_start_expected = false;
        if (!p->exec_ns || p->pushed_ns < p->exec_ns || p->exec_ns <= t->loader_watch_ns || p->dirty ||
            !maps_glibc_loader(p))
                return false;
        t->n_loader_start_skipped++;
        return true;
}

void tracker_on_event(const struct profd_event *ev, void *userdata)
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
                if (p) {
                        p->exit_ns = ev->ktime_ns;
                        tracked_drop(t, p);
                }
                process_table_mark_exited(t->procs, pid, now_ns(CLOCK_REALTIME));
                return;
        case PROFD_EV_FORK:
                /* Symbolization too: a child that exits before anyone reads its maps still has
                 * its parent's snapshot. */
                (void)process_table_fork(t->procs, (pid_t)ev->ppid, pid);
                on_fork(t, pid, (pid_t)ev->ppid, ev->addr == PROFD_EV_FORK_SHARED_MM);
                return;
        case PROFD_EV_EXEC:
                process_table_exec(t->procs, pid, ev->mnt_ns, ev->start_ns, ev->comm);
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
                tracker_record_ready(t, p);
                p->exec_adopted = false;
                /* bpf_ktime_get_ns() is CLOCK_MONOTONIC. */
                p->exec_ns = ev->ktime_ns;
                /* The unwinder forgot the pid at exec: push even if the maps look the same. */
                p->push = true;
                p->urgent = true;
                p->refresh_interval_ns = 0; /* a new program: no history of churn */
                p->exec_reads = EXEC_FAST_READS;
                p->loader_start_expected = true;
                tracker_mark_dirty(t, p);
                return;
        case PROFD_EV_MMAP_EXEC:
                p = tracked_get(t, pid);
                if (!p)
                        return;
                if (ev->addr == PROFD_EV_ADDR_LOADER && loader_start_report_skipped(t, p))
                        return;
                p->background = false;
                tracker_mark_dirty(t, p);
                /* The loader's hook fires once its mappings exist: reading maps now is enough. */
                if (ev->addr == PROFD_EV_ADDR_LOADER)
                        return;
                /* The kprobe fallback fires before the mapping exists, and the other hooks can
                 * race with our read of /proc/PID/maps: look again shortly if it is not there. */
                p->recheck_tries = 0;
                tracker_schedule_recheck(t, p, ev->addr);
                return;
        case PROFD_EV_ANON_EXEC:
                on_anon_exec(t, pid, ev->addr, ev->addr + ev->len);
                return;
        case PROFD_EV_UNKNOWN_PID:
        case PROFD_EV_UNKNOWN_PC:
                p = tracked_find(t, pid);
                if (p)
                        p->reported = true;
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
                p->reported = true;
                p->background = false;
                if (ev->type == PROFD_EV_UNKNOWN_PID)
                        p->push = true; /* not in the pool (e.g. forgotten at an exec we missed) */
                tracker_mark_dirty(t, p);
                return;
        }
}
