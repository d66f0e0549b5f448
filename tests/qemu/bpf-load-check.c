/* SPDX-License-Identifier: GPL-2.0-only */
/* Quick check, run inside the qemu guests of test-kernel.py (5.10, 6.1, 6.12) before the full profile path:
 * do profd's BPF objects load and attach on this kernel, and do samples with DWARF-unwound user
 * stacks come out? Uses the daemon's own sampler, table pool and process tracker, so it loads
 * exactly what profd loads. libbpf's warnings go to stdout (the serial console): when the
 * verifier rejects a program they carry its log, which is what someone fixing the program needs.
 * Prints "BPF-CHECK <step>: ok|FAILED ..." lines; exits 0 only when every step passed. */
#include <bpf/libbpf.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sampler/sampler.h"
#include "tracker/proc-tracker.h"
#include "tracker/process-table.h"
#include "unwind/table-pool.h"
#include "util/log.h"

#define CHECK_FREQUENCY_HZ 99
#define CHECK_BURN_SECONDS 3
#define CHECK_POOL_BYTES (64ull << 20)

typedef struct Counts {
        uint64_t samples, with_user, dwarf, deepest;
        uint64_t offcpu_waits, offcpu_ns, offcpu_with_user; /* off-CPU records (waits ended) */
        uint64_t stops[PROFD_STOP__MAX];
} Counts;

static int print_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
        /* warnings and info; a failed load's verifier log comes at warning level */
        if (level == LIBBPF_DEBUG)
                return 0;
        return vfprintf(stdout, fmt, ap);
}

static void on_interval(void *userdata, uint64_t start_ns, uint64_t end_ns, const SampleRecord *records,
                        size_t n)
{
        Counts *c = userdata;

        for (size_t i = 0; i < n; i++) {
                const SampleRecord *r = &records[i];
                unsigned reason = r->user_flags & PROFD_STACK_REASON_MASK;

                if (r->off_cpu) {
                        c->offcpu_waits += r->count;
                        c->offcpu_ns += r->off_cpu_ns;
                        if (r->user_hash)
                                c->offcpu_with_user += r->count;
                        continue;
                }
                c->samples += r->count;
                if (r->n_user == 0)
                        continue;
                c->with_user += r->count;
                if (r->user_flags & PROFD_STACK_DWARF)
                        c->dwarf += r->count;
                if (reason < PROFD_STOP__MAX)
                        c->stops[reason] += r->count;
                if (r->n_user > c->deepest)
                        c->deepest = r->n_user;
        }
}

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A child that burns CPU, so the sampler has user stacks to unwind, and naps now and then, so the
 * off-CPU chain has waits to unwind. */
static pid_t spawn_burner(void)
{
        pid_t pid = fork();

        if (pid == 0) {
                volatile uint64_t x = 1;
                uint64_t end = now_ns() + CHECK_BURN_SECONDS * 1000000000ull;

                while (now_ns() < end) {
                        struct timespec nap = {0, 200 * 1000};

                        for (int i = 0; i < 100000; i++)
                                x = x * 6364136223846793005ull + 1;
                        nanosleep(&nap, NULL);
                }
                _exit(0);
        }
        return pid;
}

static int step(const char *what, int r)
{
        if (r < 0)
                printf("BPF-CHECK %s: FAILED (%s)\n", what, strerror(-r));
        else
                printf("BPF-CHECK %s: ok\n", what);
        return r;
}

int main(void)
{
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(sampler_freep) Sampler *s = NULL;
        _cleanup_(table_pool_freep) TablePool *pool = NULL;
        _cleanup_(process_table_freep) ProcessTable *procs = NULL;
        _cleanup_(proc_tracker_freep) ProcTracker *tracker = NULL;
        SamplerOptions so = {
                .frequency_hz = CHECK_FREQUENCY_HZ,
                .drain_interval_ns = 250000000ull,
                .verifier_stats = true,
                .off_cpu = true, /* the off-CPU chain loads and attaches too (sched_switch) */
        };
        Counts c = {};
        int failed = 0, r;
        pid_t child;
        uint64_t end;

        setvbuf(stdout, NULL, _IOLBF, 0);
        log_open();
        libbpf_set_print(print_libbpf);

        r = sd_event_new(&e);
        if (r < 0)
                return step("event loop", r), 1;
        r = sampler_new(e, &so, on_interval, &c, &s);
        if (step("sampler (profile.bpf.c) create", r) < 0)
                return 1;
        r = sampler_start(s);
        if (step("sampler (profile.bpf.c) load + attach to every CPU", r) < 0) {
                /* The statistics' small log buffer holds no verifier log: load once more without
                 * it, so that libbpf prints the log of the program refused. */
                s = sampler_free(s);
                so.verifier_stats = false;
                if (sampler_new(e, &so, on_interval, &c, &s) >= 0)
                        (void)sampler_start(s);
                return 1;
        }
        r = table_pool_new(sampler_bpf_object(s), CHECK_POOL_BYTES, &pool);
        failed |= step("unwind table pool", r) < 0;
        r = process_table_new(10000000000ull, &procs);
        failed |= step("process table", r) < 0;
        if (pool && procs) {
                r = proc_tracker_new(e, procs, pool, NULL, &tracker);
                failed |= step("process tracker (events.bpf.c) load + attach", r) < 0;
                if (tracker) {
                        r = proc_tracker_add_unwinder_events(tracker, sampler_unwinder_events_fd(s));
                        failed |= step("unwinder event ring buffer", r) < 0;
                }
        }

        child = spawn_burner();
        if (child < 0)
                return step("fork", -errno), 1;
        end = now_ns() + (CHECK_BURN_SECONDS + 1) * 1000000000ull;
        while (now_ns() < end) {
                r = sd_event_run(e, 100000);
                if (r < 0) {
                        step("event loop run", r);
                        failed = 1;
                        break;
                }
        }
        (void)waitpid(child, NULL, 0);

        printf("BPF-CHECK samples: %llu, with a user stack: %llu, DWARF-unwound: %llu, deepest %llu "
               "frames\n",
               (unsigned long long)c.samples, (unsigned long long)c.with_user, (unsigned long long)c.dwarf,
               (unsigned long long)c.deepest);
        printf("BPF-CHECK stop reasons:");
        for (unsigned i = 0; i < PROFD_STOP__MAX; i++)
                printf(" %u=%llu", i, (unsigned long long)c.stops[i]);
        printf("\n");
        failed |= step("samples arrive", c.samples > 0 ? 0 : -ENODATA) < 0;
        failed |= step("user stacks DWARF-unwound", c.dwarf > 0 ? 0 : -ENODATA) < 0;
        printf("BPF-CHECK off-CPU: %llu waits, %.3f s, %llu with a user stack\n",
               (unsigned long long)c.offcpu_waits, (double)c.offcpu_ns / 1e9,
               (unsigned long long)c.offcpu_with_user);
        failed |= step("off-CPU waits recorded (sched_switch)", c.offcpu_with_user > 0 ? 0 : -ENODATA) < 0;
        failed |= step("off-CPU wakeups (sched_waking) attached",
                       sampler_offcpu_waking_attached(s) ? 0 : -ENOENT) < 0;
        return failed ? 1 : 0;
}
