/* SPDX-License-Identifier: GPL-2.0-only */
/* The process table's memory: what each process costs, the budget, and eviction of exited
 * processes (oldest first) to stay within it. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "tracker/process-files.h"
#include "tracker/process-table-budget.h"
#include "util/array.h"

size_t process_bytes(const Process *p)
{
        return sizeof(*p) + p->n_mappings * sizeof(ProcMapping);
}

void process_free(ProcessTable *t, Process *p)
{
        if (!p)
                return;
        t->proc_bytes -= process_bytes(p);
        process_set_alive(t, p); /* off the exited list */
        process_maps_fd_drop(t, p);
        for (size_t i = 0; i < p->n_mappings; i++) {
                string_pool_unref(t->paths, p->mappings[i].path);
                proc_file_unref(t, p->mappings[i].file);
        }
        free(p->mappings);
        free(p);
}

void process_table_set_memory_budget(ProcessTable *t, size_t bytes)
{
        t->max_bytes = bytes ?: PROCESS_TABLE_DEFAULT_MEMORY;
}

size_t process_table_memory(const ProcessTable *t)
{
        return t->proc_bytes + t->files.n * sizeof(ProcFile) + chain_hash_bytes(&t->files) +
               string_pool_bytes(t->paths) + pid_table_bytes(&t->procs);
}

void process_table_remove_at(ProcessTable *t, size_t i)
{
        process_free(t, pid_table_remove_at(&t->procs, i));
}

/* Makes room by forgetting the process whose exit was noticed longest ago (never keep): the front
 * of the exited list, or the one after it. */
int process_table_evict_one(ProcessTable *t, const Process *keep)
{
        Process *victim = t->exited_first;
        size_t pos;

        if (victim && victim == keep)
                victim = victim->exited_next;
        if (!victim || pid_table_find(&t->procs, victim->pid, &pos) != victim)
                return -ENOSPC;
        process_table_remove_at(t, pos);
        return 0;
}

/* Over the memory budget, exited processes go oldest first (their samples in older windows lose
 * their names; counted). Live ones stay: their reads are cut short instead (process_read). */
void process_table_enforce_budget(ProcessTable *t, const Process *keep)
{
        while (process_table_memory(t) > t->max_bytes && process_table_evict_one(t, keep) >= 0)
                t->n_evicted_memory++;
}
