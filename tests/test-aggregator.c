/* SPDX-License-Identifier: GPL-2.0-only */
/* The aggregator on its own: windows are exact runs of whole intervals with identical keys merged,
 * stacks are shared and freed with their last reference (also when a window outlives the history
 * or the aggregator), waiters fire once, history is bounded. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregator/aggregator.h"

#include "lib/test-util.h"

#define S(x) ((uint64_t)(x)*1000000000ULL)

static const uint64_t frames_a[] = {0x1000, 0x2000, 0x3000};
static const uint64_t frames_b[] = {0x1100, 0x2000, 0x3000};
static const uint64_t kframes[] = {0xffffffff81000000ULL, 0xffffffff81000100ULL};

static SampleRecord rec(uint32_t pid, uint32_t tid, const char *comm, uint64_t uhash, const uint64_t *uf,
                        uint32_t nu, uint64_t khash, uint64_t count)
{
        SampleRecord r = {.pid = pid,
                          .tid = tid,
                          .user_hash = uhash,
                          .user_frames = uf,
                          .n_user = nu,
                          .kernel_hash = khash,
                          .kernel_frames = khash ? kframes : NULL,
                          .n_kernel = khash ? 2 : 0,
                          .count = count};
        snprintf(r.comm, sizeof(r.comm), "%s", comm);
        snprintf(r.thread_comm, sizeof(r.thread_comm), "%s", comm);
        return r;
}

static uint64_t metric(Aggregator *a, const char *name)
{
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        aggregator_write_metrics(a, f);
        fclose(f);
        uint64_t v = UINT64_MAX;
        char key[128];
        snprintf(key, sizeof(key), "\n%s ", name);
        char *p = strstr(buf, key);
        if (p)
                v = strtoull(p + strlen(key), NULL, 10);
        free(buf);
        return v;
}

static const AggSample *find(const ProfileWindow *w, uint32_t pid, uint64_t uhash)
{
        for (size_t i = 0; i < w->n_samples; i++)
                if (w->samples[i].pid == pid && (w->samples[i].user ? w->samples[i].user->hash : 0) == uhash)
                        return &w->samples[i];
        return NULL;
}

static int fired;
static void on_fire(void *userdata)
{
        fired++;
        (*(int *)userdata)++;
}

int main(void)
{
        Aggregator *a = NULL;
        ProfileWindow *w = NULL;
        int r;

        r = aggregator_new(S(10), 19, &a);
        assert(r == 0);

        SampleRecord i1[] = {
                rec(10, 10, "alpha", 0xa, frames_a, 3, 0, 3),
                rec(20, 21, "beta", 0xa, frames_a, 3, 0, 2),
                rec(10, 10, "alpha", 0xb, frames_b, 3, 0x77, 1),
        };
        aggregator_add_interval(a, S(100), S(101), i1, 3);
        SampleRecord i2[] = {rec(10, 10, "alpha", 0xa, frames_a, 3, 0, 4)};
        aggregator_add_interval(a, S(101), S(102), i2, 1);
        CHECK(aggregator_latest_end(a) == S(102));

        /* Identical stacks are stored once; kernel and user stacks are separate. */
        CHECK(metric(a, "profd_aggregator_stacks") == 3);
        CHECK(metric(a, "profd_aggregator_buckets") == 2);

        /* The whole history: keys merged across intervals. */
        r = aggregator_window(a, S(100), S(102), &w);
        CHECK(r == 0);
        if (r == 0) {
                CHECK(w->total == 10);
                CHECK(w->n_samples == 3);
                const AggSample *s = find(w, 10, 0xa);
                CHECK(s && s->count == 7 && s->user->n == 3 && s->user->frames[0] == 0x1000 && !s->kernel);
                s = find(w, 20, 0xa);
                CHECK(s && s->count == 2 && s->tid == 21 && strcmp(s->comm, "beta") == 0);
                s = find(w, 10, 0xb);
                CHECK(s && s->count == 1 && s->kernel && s->kernel->n == 2 &&
                      s->kernel->frames[1] == kframes[1]);
                /* One stack object shared by both pids. */
                CHECK(find(w, 10, 0xa)->user == find(w, 20, 0xa)->user);
                w = profile_window_free(w);
        }

        /* Past windows: ends move to the nearest boundary (the earlier on a tie), never empty;
         * windows whose asked ends meet share the boundary; a start before the history is ERANGE. */
        {
                uint64_t t0 = 0, t1 = 0, u0 = 0, u1 = 0, oldest = 0, latest = 0;
                aggregator_span(a, &oldest, &latest);
                CHECK(oldest == S(100) && latest == S(102));
                CHECK(aggregator_snap_window(a, S(100) + S(1) / 4, S(101) + S(1) / 2, &t0, &t1) == 0);
                CHECK(t0 == S(100) && t1 == S(101));
                CHECK(aggregator_snap_window(a, S(100) + S(1) / 2, S(101) + S(1) / 2, &u0, &u1) == 0);
                CHECK(u0 == S(100) && u1 == S(101));
                CHECK(aggregator_snap_window(a, S(101) + S(1) / 2, S(102), &u0, &u1) == 0);
                CHECK(u0 == t1 && u1 == S(102));
                CHECK(aggregator_snap_window(a, S(100) + S(1) * 9 / 10, S(100) + S(1) * 95 / 100, &t0,
                                             &t1) == 0);
                CHECK(t0 == S(101) && t1 == S(102)); /* at least one interval */
                CHECK(aggregator_snap_window(a, S(99), S(101), &t0, &t1) == -ERANGE);
        }

        /* The cursor sees every sample once, in order, then what is added after. */
        {
                AggCursor c = {};
                size_t n = 0;
                while (aggregator_cursor_next(a, &c))
                        n++;
                CHECK(n == 4);
                CHECK(!aggregator_cursor_next(a, &c));
                AggCursor end = aggregator_cursor_end(a);
                CHECK(!aggregator_cursor_next(a, &end));
        }

        /* Exactly one interval. */
        r = aggregator_window(a, S(101), S(102), &w);
        CHECK(r == 0 && w->total == 4 && w->n_samples == 1);
        w = profile_window_free(w);

        /* A start that is no interval boundary, or before the history: not silently approximated. */
        CHECK(aggregator_window(a, S(100) + 5, S(102), &w) == -ENODATA);
        CHECK(aggregator_window(a, S(99), S(102), &w) == -ENODATA);
        /* An end not drained yet. */
        CHECK(aggregator_window(a, S(100), S(103), &w) == -EAGAIN);

        /* Waiters: fire once when an interval reaching t arrives; cancelled ones never. */
        int n1 = 0, n2 = 0, n3 = 0;
        void *h1 = NULL, *h2 = NULL, *h3 = (void *)1;
        CHECK(aggregator_wait_for(a, S(104), on_fire, &n1, &h1) == 0 && h1 && n1 == 0);
        CHECK(aggregator_wait_for(a, S(105), on_fire, &n2, &h2) == 0 && h2);
        aggregator_cancel_wait(a, h2);
        CHECK(aggregator_wait_for(a, S(101), on_fire, &n3, &h3) == 0 && n3 == 1 && h3 == NULL);
        aggregator_add_interval(a, S(102), S(103), NULL, 0);
        CHECK(n1 == 0);
        aggregator_add_interval(a, S(103), S(106), NULL, 0);
        CHECK(n1 == 1 && n2 == 0 && fired == 2);
        aggregator_add_interval(a, S(106), S(107), NULL, 0);
        CHECK(n1 == 1 && fired == 2);

        /* pids seen since the last take, unique. */
        uint32_t *pids = NULL;
        size_t n = aggregator_take_pids(a, &pids);
        CHECK(n == 2);
        free(pids);
        CHECK(aggregator_take_pids(a, &pids) == 0);
        free(pids);

        /* A window keeps its stacks alive after the history let go of them... */
        r = aggregator_window(a, S(100), S(102), &w);
        CHECK(r == 0);
        SampleRecord i3[] = {rec(30, 30, "gamma", 0xc, frames_b, 2, 0, 1)};
        aggregator_add_interval(a, S(200), S(201), i3, 1); /* 100 s later: older intervals evicted */
        CHECK(metric(a, "profd_aggregator_buckets") == 1);
        CHECK(metric(a, "profd_aggregator_interval_gaps_total") == 1);
        CHECK(metric(a, "profd_aggregator_stacks") == 4); /* 3 held by the window + the new one */
        CHECK(aggregator_window(a, S(100), S(102), &(ProfileWindow *){NULL}) == -ENODATA);
        /* ...and they go with the window. */
        w = profile_window_free(w);
        CHECK(metric(a, "profd_aggregator_stacks") == 1);
        CHECK(metric(a, "profd_aggregator_stacks_freed_total") == 3);

        /* Memory stays bounded however many distinct deep stacks arrive: oldest intervals go. */
        {
                static uint64_t deep[PROFD_MAX_USER_FRAMES];
                static SampleRecord many[4000];
                for (size_t i = 0; i < PROFD_MAX_USER_FRAMES; i++)
                        deep[i] = 0x400000 + i;
                uint64_t hash = 0x1000000;
                for (int iv = 0; iv < 40; iv++) { /* 16 MiB of new stacks per interval */
                        for (int k = 0; k < 4000; k++)
                                many[k] = rec(40 + k, 40 + k, "deep", hash++, deep, PROFD_MAX_USER_FRAMES, 0,
                                              1);
                        aggregator_add_interval(a, S(300 + iv), S(301 + iv), many, 4000);
                }
                uint64_t bytes = metric(a, "profd_aggregator_history_bytes");
                uint64_t max = metric(a, "profd_aggregator_history_max_bytes");
                CHECK(bytes <= max);
                CHECK(metric(a, "profd_aggregator_buckets_evicted_total{reason=\"memory\"}") > 0);
                CHECK(metric(a, "profd_aggregator_buckets") < 40);
                /* The newest interval is always kept whole. */
                r = aggregator_window(a, S(339), S(340), &w);
                CHECK(r == 0 && w->total == 4000);
                w = profile_window_free(w);
        }

        /* Off-CPU records: kept out of CPU windows and CPU samples out of off-CPU ones; a wait's
         * stacks arrive with a {0, 0} record in the interval it began, its time later with the
         * hashes only (found among the interned stacks); a window sums waits and nanoseconds per
         * state; a record whose stacks are not held is counted. */
        {
                Aggregator *o = NULL;
                ProfileWindow *ow = NULL;

                CHECK(aggregator_new(S(100), 19, &o) == 0);
                SampleRecord cpu = rec(50, 51, "svc", 0xd1, frames_a, 3, 0, 5);
                SampleRecord begin = rec(50, 51, "svc", 0xd2, frames_b, 3, 0x55, 0);
                begin.off_cpu = true;
                SampleRecord i1[] = {cpu, begin};
                aggregator_add_interval(o, S(1), S(2), i1, 2);

                SampleRecord ended = rec(50, 51, "svc", 0xd2, NULL, 0, 0x55, 1);
                ended.kernel_frames = NULL;
                ended.n_kernel = 0;
                ended.off_cpu = true;
                ended.off_cpu_state = PROFD_OFFCPU_BLOCKED;
                ended.off_cpu_ns = 700000000;
                SampleRecord preempted = ended;
                preempted.off_cpu_state = PROFD_OFFCPU_PREEMPTED;
                preempted.count = 2;
                preempted.off_cpu_ns = 3000;
                SampleRecord lost = rec(50, 51, "svc", 0xdead, NULL, 0, 0, 1);
                lost.off_cpu = true;
                lost.off_cpu_ns = 5;
                SampleRecord i2[] = {ended, preempted, lost};
                aggregator_add_interval(o, S(2), S(3), i2, 3);

                CHECK(aggregator_window_kind(o, S(1), S(3), true, &ow) == 0);
                if (ow) {
                        CHECK(ow->off_cpu && ow->n_samples == 2 && ow->total == 3 &&
                                      ow->off_cpu_ns == 700003000,
                              "off-CPU window: %zu samples, %" PRIu64 " waits, %" PRIu64 " ns",
                              ow->n_samples, ow->total, ow->off_cpu_ns);
                        for (size_t i = 0; i < ow->n_samples; i++) {
                                const AggSample *x = &ow->samples[i];
                                CHECK(x->off_cpu && x->user && x->user->n == 3 &&
                                      x->user->frames[0] == 0x1100 && x->kernel && x->kernel->n == 2);
                                CHECK(x->off_cpu_state == PROFD_OFFCPU_BLOCKED ? x->off_cpu_ns == 700000000
                                                                               : x->off_cpu_ns == 3000);
                        }
                        ow = profile_window_free(ow);
                }
                CHECK(aggregator_window(o, S(1), S(3), &ow) == 0);
                if (ow) {
                        CHECK(!ow->off_cpu && ow->n_samples == 1 && ow->total == 5 &&
                              !ow->samples[0].off_cpu);
                        ow = profile_window_free(ow);
                }
                CHECK(metric(o, "profd_aggregator_offcpu_stacks_expired_total") == 1);
                CHECK(metric(o, "profd_aggregator_offcpu_waits_total") == 4);
                CHECK(metric(o, "profd_aggregator_samples_total") == 5);
                o = aggregator_free(o);
        }

        /* A window may outlive the aggregator (shutdown order): its stacks stay valid. */
        r = aggregator_window(a, S(339), S(340), &w);
        CHECK(r == 0);
        a = aggregator_free(a);
        if (w) {
                CHECK(w->n_samples == 4000 && w->samples[3999].user->frames[511] == 0x400000 + 511);
                w = profile_window_free(w);
        }

        if (failures) {
                fprintf(stderr, "%u check(s) failed\n", failures);
                return 1;
        }
        printf("all aggregator checks passed\n");
        return 0;
}
