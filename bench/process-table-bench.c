/* SPDX-License-Identifier: GPL-2.0-only */
/* The process table's cost per new process with many kept: the table filled with exited fork
 * copies of this process (under pids no process can have, above the kernel's PID_MAX_LIMIT), then
 * a churn of new processes, each a fork copy that exits (what a build host's short processes do
 * to it). With 1,000, 8,000 and 30,000 kept, exited ones leave when their grace period ends (the
 * table's gc every 1,000 new processes, as the daemon's every 10 s at 100 a second); at the bound
 * of 32,768, each new process evicts the one that exited first. Prints ns per new process and the
 * table's memory. No BPF; no /proc read but this process's own maps once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../tests/lib/test-util.h"
#include "tracker/process-table.h"
#include "util/time-util.h"

/* Above PID_MAX_LIMIT (4194304): never a real process. */
#define PID0 4300000
#define CHURN 20000
#define GC_EVERY 1000
#define GRACE_NS (3600 * NSEC_PER_SEC)

/* Process k: a fork copy of this one that exits at t0 + k ns. */
static void one_process(ProcessTable *t, uint64_t t0, unsigned k)
{
        (void)process_table_fork(t, getpid(), PID0 + (pid_t)k);
        process_table_mark_exited(t, PID0 + (pid_t)k, t0 + k);
}

static unsigned long long metric(const ProcessTable *t, const char *name)
{
        char line[128];

        snprintf(line, sizeof(line), "\n%s ", name); /* the whole name, at a line's start */
        return METRIC_VALUE(process_table_write_metrics, t, line);
}

int main(void)
{
        static const unsigned kept[] = {1000, 8000, 30000, PROCESS_TABLE_MAX_PROCESSES};
        uint64_t t0 = now_ns(CLOCK_REALTIME) - GRACE_NS;
        Process *self;

        for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
                _cleanup_(process_table_freep) ProcessTable *t = NULL;
                bool at_bound = kept[i] >= PROCESS_TABLE_MAX_PROCESSES;
                uint64_t start, ns;
                unsigned k = 0;

                if (process_table_new(GRACE_NS, &t) < 0 || process_table_get(t, getpid(), &self) < 0) {
                        fprintf(stderr, "cannot set up a process table\n");
                        return 1;
                }
                /* Only the count bound and the grace period make room here, not the memory budget
                 * (a fork copy over it is skipped, not made). */
                process_table_set_memory_budget(t, 1ULL << 30);
                for (; k + 1 < kept[i]; k++)
                        one_process(t, t0, k);
                start = now_ns(CLOCK_MONOTONIC);
                for (unsigned n = 0; n < CHURN; n++, k++) {
                        one_process(t, t0, k);
                        /* The grace period ended for all but the last kept[i] to exit. */
                        if (!at_bound && n % GC_EVERY == GC_EVERY - 1)
                                process_table_gc(t, t0 + (k - kept[i]) + GRACE_NS);
                }
                ns = now_ns(CLOCK_MONOTONIC) - start;
                printf("%6llu processes kept: %6.0f ns per new process (fork copy + exit; %u of them; %llu "
                       "forgotten after the grace period); table %.1f MiB\n",
                       metric(t, "profd_process_table_processes"), (double)ns / CHURN, CHURN,
                       metric(t, "profd_process_table_events_total{event=\"forgotten\"}"),
                       process_table_memory(t) / 1048576.0);
        }
        return 0;
}
