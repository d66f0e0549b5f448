/* SPDX-License-Identifier: GPL-2.0-only */
/* Benchmark (prints figures, never fails on speed): symbolize and encode a large window.
 * Stacks are made of real addresses in this process's own executable mappings (profd-core with
 * DWARF, libc, libdw, libstdc++, ... as installed) and real kernel text addresses, so the
 * symbolizer does the same work as for a busy host. Usage: test-pprof-bench [STACKS] [DEPTH]. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "aggregator/aggregator.h"
#include "output/pprof-encode.h"
#include "symbolizer/symbolizer.h"
#include "tracker/proc-maps.h"
#include "tracker/process-table.h"

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static uint64_t rng = 0x853c49e6748fea9bULL;
static uint64_t rnd(void)
{
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return rng;
}

typedef struct Range {
        uint64_t start, end;
} Range;

static int collect(const ProcMapsLine *l, void *userdata)
{
        Range **r = userdata;
        if (l->executable && l->path[0] == '/' && l->end > l->start) {
                (*r)->start = l->start;
                (*r)->end = l->end;
                (*r)++;
        }
        return 0;
}

static uint64_t fnv(const void *p, size_t n)
{
        uint64_t h = 1469598103934665603ULL;
        for (size_t i = 0; i < n; i++)
                h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ULL;
        return h | 1;
}

static void run_job(const char *what, ProfileWindow *w, Symbolizer *sym, ProcessTable *procs)
{
        _cleanup_(pprof_job_freep) PprofJob *j = NULL;
        PprofOptions o = {};
        uint64_t t0 = now_ns(), c0 = cpu_ns(), max_step = 0, steps = 0;
        void *data;
        size_t size;
        int r;

        o.labels.enabled[LABEL_COMM] = o.labels.enabled[LABEL_PID] = o.labels.enabled[LABEL_THREAD_ID] =
                true;
        r = pprof_job_new(w, sym, procs, &o, &j);
        if (r < 0) {
                fprintf(stderr, "pprof_job_new: %s\n", strerror(-r));
                exit(1);
        }
        do {
                uint64_t s = now_ns();
                r = pprof_job_step(j);
                s = now_ns() - s;
                if (s > max_step)
                        max_step = s;
                if (getenv("BENCH_STEPS"))
                        printf("  step %" PRIu64 ": %.2f ms\n", steps, (double)s / 1e6);
                steps++;
        } while (r == 0);
        if (r < 0 || pprof_job_take_result(j, &data, &size) < 0) {
                fprintf(stderr, "pprof job failed: %s\n", strerror(-r));
                exit(1);
        }
        printf("%-5s %8.1f ms wall, %8.1f ms CPU, %4" PRIu64
               " steps, longest step %6.2f ms wall, %zu bytes gzipped\n",
               what, (double)(now_ns() - t0) / 1e6, (double)(cpu_ns() - c0) / 1e6, steps,
               (double)max_step / 1e6, size);
        free(data);
}

int main(int argc, char **argv)
{
        size_t n_stacks = argc > 1 ? strtoul(argv[1], NULL, 0) : 50000;
        unsigned max_depth = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 40;
        const size_t pool_size = 30000, kpool_size = 5000;
        _cleanup_(process_table_freep) ProcessTable *procs = NULL;
        _cleanup_(symbolizer_freep) Symbolizer *sym = NULL;
        _cleanup_(aggregator_freep) Aggregator *agg = NULL;
        Range ranges[512], *end = ranges;
        uint64_t *pool, *kpool;
        size_t n_kpool = 0;
        struct rusage ru;

        FILE *f = fopen("/proc/self/maps", "re");
        if (!f || proc_maps_read(f, collect, &end, NULL) < 0)
                return 1;
        fclose(f);
        size_t n_ranges = (size_t)(end - ranges);

        pool = calloc(pool_size, sizeof(*pool));
        kpool = calloc(kpool_size, sizeof(*kpool));
        for (size_t i = 0; i < pool_size; i++) {
                const Range *r = &ranges[rnd() % n_ranges];
                pool[i] = r->start + rnd() % (r->end - r->start);
        }
        /* Kernel text addresses from kallsyms (empty with kptr_restrict: then no kernel frames). */
        f = fopen("/proc/kallsyms", "re");
        if (f) {
                char line[512];
                while (fgets(line, sizeof(line), f) && n_kpool < kpool_size) {
                        uint64_t a = strtoull(line, NULL, 16);
                        char t = line[17];
                        if (a && (t == 't' || t == 'T') && rnd() % 16 == 0)
                                kpool[n_kpool++] = a + rnd() % 64;
                }
                fclose(f);
        }

        if (process_table_new(60 * NSEC_PER_SEC, &procs) < 0 || symbolizer_new(&sym) < 0 ||
            aggregator_new(600 * NSEC_PER_SEC, 19, &agg) < 0)
                return 1;

        SampleRecord *recs = calloc(n_stacks, sizeof(*recs));
        uint64_t *frames = calloc(n_stacks * (max_depth + 16), sizeof(uint64_t));
        size_t total_frames = 0;
        for (size_t i = 0; i < n_stacks; i++) {
                uint64_t *u = frames + i * (max_depth + 16), *k = u + max_depth;
                unsigned depth = 5 + (unsigned)(rnd() % (max_depth - 4));
                /* Shared outer frames like real programs (main, thread start), varied leaves. */
                for (unsigned d = 0; d < depth; d++)
                        u[d] = pool[d + 3 >= depth ? d : rnd() % pool_size];
                unsigned kdepth = n_kpool && rnd() % 3 == 0 ? 3 + (unsigned)(rnd() % 12) : 0;
                for (unsigned d = 0; d < kdepth; d++)
                        k[d] = kpool[rnd() % n_kpool];
                recs[i] = (SampleRecord){
                        .pid = (uint32_t)getpid(),
                        .tid = (uint32_t)getpid() + (uint32_t)(i % 64),
                        .user_hash = fnv(u, depth * 8),
                        .user_frames = u,
                        .n_user = depth,
                        .kernel_hash = kdepth ? fnv(k, kdepth * 8) : 0,
                        .kernel_frames = k,
                        .n_kernel = kdepth,
                        .count = 1 + rnd() % 5,
                };
                snprintf(recs[i].comm, sizeof(recs[i].comm), "bench");
                total_frames += depth + kdepth;
        }
        printf("window: %zu distinct stacks, %zu frames, addresses from %zu mappings (%zu user, %zu kernel "
               "pool)\n",
               n_stacks, total_frames, n_ranges, pool_size, n_kpool);

        uint64_t t0 = 1700000000ULL * NSEC_PER_SEC;
        aggregator_add_interval(agg, t0, t0 + NSEC_PER_SEC, recs, n_stacks);
        for (int round = 0; round < 2; round++) {
                ProfileWindow *w = NULL;
                if (aggregator_window(agg, t0, t0 + NSEC_PER_SEC, &w) < 0)
                        return 1;
                run_job(round == 0 ? "cold" : "warm", w, sym, procs);
        }
        /* The symbolizer alone: every distinct user address once, then kernel addresses. */
        {
                Process *p;
                SymResult res;
                size_t named = 0, inl = 0;
                /* A fresh symbolizer: nothing cached, executables opened on first use. */
                _cleanup_(symbolizer_freep) Symbolizer *fresh = NULL;
                if (process_table_get(procs, getpid(), &p) < 0 || symbolizer_new(&fresh) < 0)
                        return 1;
                uint64_t t = now_ns();
                for (size_t i = 0; i < pool_size; i++) {
                        const ProcMapping *m = process_find_mapping(p, pool[i]);
                        uint64_t t1 = now_ns();
                        if (m && symbolizer_user(fresh, p, m, pool[i], &res) == 0) {
                                if (getenv("BENCH_VERBOSE"))
                                        printf("%8.2f us %s %s\n", (double)(now_ns() - t1) / 1e3, m->path,
                                               res.frames[0].name);
                                named += res.symbolized;
                                inl += res.n_frames > 1;
                        }
                }
                t = now_ns() - t;
                printf("fresh symbolizer: %zu user addresses in %.1f ms (%.2f us each; %zu named, %zu with "
                       "inline "
                       "frames)\n",
                       pool_size, (double)t / 1e6, (double)t / 1e3 / (double)pool_size, named, inl);
                t = now_ns();
                for (size_t i = 0; i < n_kpool; i++)
                        (void)symbolizer_kernel(sym, kpool[i], &res);
                t = now_ns() - t;
                if (n_kpool)
                        printf("symbolizer: %zu kernel addresses in %.1f ms (%.2f us each)\n", n_kpool,
                               (double)t / 1e6, (double)t / 1e3 / (double)n_kpool);
        }
        {
                char *text = NULL, *line;
                size_t size = 0;
                FILE *m = open_memstream(&text, &size);
                symbolizer_write_metrics(sym, m);
                fclose(m);
                for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
                        if (strncmp(line, "profd_symbolizer_cache_", 23) == 0)
                                printf("%s\n", line);
                free(text);
        }
        getrusage(RUSAGE_SELF, &ru);
        printf("max RSS %ld MiB\n", ru.ru_maxrss / 1024);
        printf("(cold: first profile, executables opened and DWARF parsed; warm: symbolizer caches kept)\n");
        free(recs);
        free(frames);
        free(pool);
        free(kpool);
        return 0;
}
