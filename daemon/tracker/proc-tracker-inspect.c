/* SPDX-License-Identifier: GPL-2.0-only */
/* What the tracker has pushed for one process, for tests and /debug: counts, mappings, state. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tracker/proc-tracker-queue.h"

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
