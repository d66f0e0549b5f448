/* SPDX-License-Identifier: GPL-2.0-only */
/* The process table: processes indexed by pid, looked up, read, refreshed, copied at fork, marked
 * exited and forgotten after the grace period. Files are in process-files.c, reading /proc in
 * process-read.c, the memory budget in process-table-budget.c. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tracker/process-files.h"
#include "tracker/process-read.h"
#include "tracker/process-table-budget.h"
#include "util/time-util.h"

/* Liveness checks (/proc/PID/stat) per gc call: bounds the work of one call. */
#define GC_CHECKS_PER_CALL 256
/* A live process is re-checked for exit / pid reuse this often. */
#define GC_CHECK_INTERVAL_NS (5 * NSEC_PER_SEC)
int process_table_new(uint64_t exit_grace_ns, ProcessTable **ret)
{
        ProcessTable *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        (void)elf_version(EV_CURRENT);
        t->exit_grace_ns = exit_grace_ns;
        t->procs = PID_TABLE_INIT(Process, pid);
        t->max_open_fds = proc_file_open_budget();
        t->max_bytes = PROCESS_TABLE_DEFAULT_MEMORY;
        if (string_pool_new(&t->paths) < 0) {
                free(t);
                return -ENOMEM;
        }
        *ret = t;
        return 0;
}

ProcessTable *process_table_free(ProcessTable *t)
{
        if (!t)
                return NULL;
        for (size_t i = 0; i < pid_table_size(&t->procs); i++)
                process_free(t, process_at(t, i));
        pid_table_done(&t->procs);
        proc_file_unref(t, t->vdso);
        chain_hash_done(&t->files);
        string_pool_free(t->paths);
        return mfree(t);
}

/* pid's process (NULL if none) and its position for process_table_remove_at(). */
static Process *find(const ProcessTable *t, pid_t pid, size_t *ret_i)
{
        return pid_table_find(&t->procs, pid, ret_i);
}

/* Adds p (its pid not in the table yet); frees it on failure. */
static int table_insert(ProcessTable *t, Process *p)
{
        int r = pid_table_add(&t->procs, p);

        if (r < 0)
                process_free(t, p);
        return r;
}

static int insert_new(ProcessTable *t, pid_t pid, Process **ret)
{
        Process *p;
        int r;

        if (pid_table_size(&t->procs) >= PROCESS_TABLE_MAX_PROCESSES) {
                r = process_table_evict_one(t, NULL);
                if (r < 0) {
                        t->n_table_full++;
                        return r;
                }
                t->n_evicted++;
        }
        process_table_enforce_budget(t, NULL);
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->pid = pid;
        p->maps_fd = -1;
        t->proc_bytes += sizeof(*p);
        r = process_read(t, p);
        if (r < 0) {
                t->proc_bytes -= sizeof(*p);
                free(p);
                return r;
        }
        r = table_insert(t, p);
        if (r < 0)
                return r;
        *ret = p;
        return 0;
}

int process_table_get(ProcessTable *t, pid_t pid, Process **ret)
{
        Process *p;
        size_t i;

        if (pid <= 0)
                return -EINVAL;
        p = find(t, pid, &i);
        if (p) {
                uint64_t start;
                /* An exited entry whose pid is alive again with another start time was reused:
                 * new samples of this pid belong to the new process. Checked at most once a
                 * second per entry: a profile asks for the same pid once per sample. */
                if (p->exited_ns && p->checked_ns + NSEC_PER_SEC <= now_ns(CLOCK_REALTIME) &&
                    (p->checked_ns = now_ns(CLOCK_REALTIME), process_read_stat(pid, &start, NULL) >= 0) &&
                    start != p->start_time) {
                        t->n_pid_reuse++;
                        process_table_remove_at(t, i);
                        return insert_new(t, pid, ret);
                }
                /* A fork copy of a live process stands in until its maps are read: read them now,
                 * as for a process not known at all (it may have mapped more since the fork). If
                 * it is gone, the copy is what is left. */
                if (p->inherited && !p->exited_ns) {
                        int r;
                        process_table_enforce_budget(t, p);
                        r = process_read(t, p);
                        if (r == -ESRCH)
                                process_set_exited(t, p, now_ns(CLOCK_REALTIME));
                }
                *ret = p;
                return 0;
        }
        return insert_new(t, pid, ret);
}

int process_table_refresh(ProcessTable *t, pid_t pid, Process **ret)
{
        Process *p;
        uint64_t old_start;
        int r;

        if (pid <= 0)
                return -EINVAL;
        p = find(t, pid, NULL);
        if (!p)
                return insert_new(t, pid, ret);
        old_start = p->start_time;
        process_table_enforce_budget(t, p);
        r = process_read(t, p);
        if (r == -ESRCH) {
                /* Gone: keep what we knew for the grace period. */
                process_set_exited(t, p, now_ns(CLOCK_REALTIME));
                *ret = p;
                return 0;
        }
        if (r < 0)
                return r;
        if (p->start_time != old_start && old_start != 0)
                t->n_pid_reuse++;
        /* Read just now: alive, whatever an earlier look concluded. */
        process_set_alive(t, p);
        *ret = p;
        return 0;
}

const Process *process_table_find(const ProcessTable *t, pid_t pid)
{
        return find(t, pid, NULL);
}

int process_table_add_anon(ProcessTable *t, pid_t pid, uint64_t start, uint64_t end)
{
        Process *p = find(t, pid, NULL);
        size_t at = 0, lo, hi, n;
        ProcMapping *m, *maps;
        const char *anon;

        if (!p || end <= start)
                return -ENOENT;
        if (p->exited_ns)
                return -ESRCH;
        m = p->mappings;
        while (at < p->n_mappings && m[at].end <= start)
                at++;
        /* Overlapping entries [lo, hi) must all be anonymous: the new range takes them in. */
        lo = at;
        for (hi = at; hi < p->n_mappings && m[hi].start < end; hi++) {
                if (m[hi].start <= start && end <= m[hi].end && !m[hi].inode)
                        return 0; /* known already */
                if (m[hi].inode || m[hi].file || (m[hi].path && m[hi].path[0]))
                        return -EEXIST; /* part of a file mapping: only a read of the maps tells */
        }
        if (lo < hi) {
                start = m[lo].start < start ? m[lo].start : start;
                end = m[hi - 1].end > end ? m[hi - 1].end : end;
        }
        n = p->n_mappings - (hi - lo) + 1;
        if (n > PROCESS_MAX_MAPPINGS || process_table_memory(t) + sizeof(ProcMapping) > t->max_bytes)
                return -ENOSPC;
        anon = string_pool_ref(t->paths, "");
        if (!anon)
                return -ENOMEM;
        maps = calloc(n, sizeof(*maps));
        if (!maps) {
                string_pool_unref(t->paths, anon);
                return -ENOMEM;
        }
        memcpy(maps, m, lo * sizeof(*maps));
        maps[lo] = (ProcMapping){.start = start, .end = end, .path = anon, .executable = true};
        memcpy(maps + lo + 1, m + hi, (p->n_mappings - hi) * sizeof(*maps));
        /* The merged entries were anonymous: only their interned paths to drop. */
        for (size_t k = lo; k < hi; k++)
                string_pool_unref(t->paths, m[k].path);
        free(m);
        t->proc_bytes += sizeof(ProcMapping);
        t->proc_bytes -= (hi - lo) * sizeof(ProcMapping);
        p->mappings = maps;
        p->n_mappings = n;
        p->generation++;
        return 1;
}

void process_table_mark_exited(ProcessTable *t, pid_t pid, uint64_t now_ns)
{
        Process *p = find(t, pid, NULL);

        if (!p || p->exited_ns)
                return;
        process_set_exited(t, p, now_ns);
        /* What its exec event said is not true of the next process with this pid. */
        for (unsigned k = 0; k < EXEC_NS_HINTS; k++)
                if (t->exec_ns[k].pid == pid)
                        t->exec_ns[k].pid = 0;
        process_maps_fd_drop(t, p);
}

int process_table_fork(ProcessTable *t, pid_t parent, pid_t child)
{
        _cleanup_free_ ProcMapping *m = NULL;
        const Process *pp;
        Process *c;
        size_t i;
        int r;

        if (parent <= 0 || child <= 0)
                return -EINVAL;
        c = find(t, child, &i);
        if (c && !c->exited_ns)
                return 0;
        if (c) {
                /* An earlier process with this pid, exited: the new one is not it. */
                t->n_pid_reuse++;
                process_table_remove_at(t, i);
        }
        pp = find(t, parent, NULL);
        if (!pp || pp->n_mappings == 0 || pp->exited_ns) {
                t->n_fork_no_parent++;
                return -ENOENT;
        }
        /* Bounded like a read: never evicts a live process, never goes over the budget for a copy
         * (a read of the child's maps may still happen later). */
        process_table_enforce_budget(t, NULL);
        if (pid_table_size(&t->procs) >= PROCESS_TABLE_MAX_PROCESSES &&
            process_table_evict_one(t, NULL) < 0) {
                t->n_fork_skipped++;
                return -ENOSPC;
        }
        if (process_table_memory(t) + sizeof(*c) + pp->n_mappings * sizeof(ProcMapping) > t->max_bytes) {
                t->n_fork_skipped++;
                return -ENOSPC;
        }
        m = malloc(pp->n_mappings * sizeof(*m));
        c = calloc(1, sizeof(*c));
        if (!m || !c) {
                free(c);
                return -ENOMEM;
        }
        memcpy(m, pp->mappings, pp->n_mappings * sizeof(*m));
        for (size_t k = 0; k < pp->n_mappings; k++) {
                m[k].path = string_pool_ref(t->paths, pp->mappings[k].path);
                if (m[k].file)
                        m[k].file->refs++;
        }
        c->pid = child;
        c->maps_fd = -1;
        c->mappings = TAKE_PTR(m);
        c->n_mappings = pp->n_mappings;
        c->mappings_truncated = pp->mappings_truncated;
        c->inherited = true;
        memcpy(c->comm, pp->comm, sizeof(c->comm));
        /* Its own start time (which tells a reused pid apart) is left to the copy's first read or
         * liveness check: most children exec or exit right away (an event each), and reading
         * /proc/PID/stat here cost a procfs lookup per fork. Until then start_time is 0: unknown. */
        c->checked_ns = now_ns(CLOCK_REALTIME);
        t->proc_bytes += process_bytes(c);
        r = table_insert(t, c);
        if (r < 0)
                return r;
        t->n_forks_copied++;
        return 0;
}

/* The CLOCK_BOOTTIME offset of our time namespace (/proc/PID/stat's starttime counts from the
 * reader's boot time, the exec hook sees the host's): none where the file does not exist. */
static int64_t boottime_offset_ns(ProcessTable *t)
{
        _cleanup_fclose_ FILE *f = NULL;
        char name[32];
        long long sec, nsec;

        if (t->boottime_offset_known)
                return t->boottime_offset_ns;
        t->boottime_offset_known = true;
        f = fopen("/proc/self/timens_offsets", "re");
        while (f && fscanf(f, "%31s %lld %lld", name, &sec, &nsec) == 3)
                if (strcmp(name, "boottime") == 0)
                        t->boottime_offset_ns = sec * (int64_t)NSEC_PER_SEC + nsec;
        return t->boottime_offset_ns;
}

void process_table_exec(ProcessTable *t, pid_t pid, uint32_t mnt_ns, uint64_t start_ns, const char *comm)
{
        size_t i;
        Process *p = find(t, pid, &i);

        if (mnt_ns) {
                ExecNsHint *h = &t->exec_ns[t->exec_ns_next];
                long ticks = sysconf(_SC_CLK_TCK);

                *h = (ExecNsHint){.pid = pid, .mnt_ns = mnt_ns, .at_ns = now_ns(CLOCK_MONOTONIC)};
                /* starttime is the boot time in clock ticks, rounded down (nsec_to_clock_t()). */
                if (start_ns && comm && ticks > 0 && NSEC_PER_SEC % ticks == 0) {
                        h->start_time = (start_ns + boottime_offset_ns(t)) / (NSEC_PER_SEC / ticks);
                        memcpy(h->comm, comm, 16);
                        h->comm[16] = 0;
                }
                t->exec_ns_next = (t->exec_ns_next + 1) % EXEC_NS_HINTS;
        }

        if (p && p->inherited) {
                process_table_remove_at(t, i);
                t->n_fork_copies_dropped++;
        } else if (p) {
                p->stat_ns = 0;             /* a new name, perhaps a new mount namespace */
                process_maps_fd_drop(t, p); /* the old image's memory */
        }
}

void process_table_gc(ProcessTable *t, uint64_t now_ns)
{
        unsigned checks = 0;

        /* The exited list is in the order exits were noticed: the expired ones are at its front. */
        while (t->exited_first && t->exited_first->exited_ns + t->exit_grace_ns <= now_ns) {
                size_t i;

                if (find(t, t->exited_first->pid, &i) != t->exited_first)
                        break; /* cannot happen: every listed process is in the table */
                process_table_remove_at(t, i);
                t->n_forgotten++;
        }
        /* No exit events yet for every process: notice exits by polling a bounded batch,
         * resuming where the last call stopped. */
        for (size_t k = 0; k < pid_table_size(&t->procs) && checks < GC_CHECKS_PER_CALL; k++) {
                Process *p;
                uint64_t start;
                int r;

                if (t->gc_cursor >= pid_table_size(&t->procs))
                        t->gc_cursor = 0;
                p = process_at(t, t->gc_cursor++);
                if (p->exited_ns || p->checked_ns + GC_CHECK_INTERVAL_NS > now_ns)
                        continue;
                checks++;
                r = process_read_stat(p->pid, &start, NULL);
                p->checked_ns = now_ns;
                if (r >= 0 && p->start_time == 0)
                        p->start_time = start; /* a fork copy: its start time was not read */
                else if (r == -ESRCH || (r >= 0 && start != p->start_time))
                        process_set_exited(t, p, now_ns);
        }
}
