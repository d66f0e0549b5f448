/* SPDX-License-Identifier: GPL-2.0-only */
/* Buckets are kept in arrival order, one per drained interval (the sampler's periodic cut and any
 * cut a request asks for), so a request's window [t0, t1) is exactly a run of whole buckets.
 * Stacks are interned: a bucket or a window holds one reference per sample that points at it, and a
 * stack is freed the moment its last reference goes. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "aggregator/aggregator.h"
#include "util/array.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/metrics-writer.h"

/* Bounds the bucket count even when requests cut far more often than the periodic drain. */
#define MAX_BUCKETS 4096
/* Bounds the history's memory (sample records + interned stacks) whatever the workload: with
 * thousands of new deep stacks every second, --max-seconds of history could otherwise grow to
 * gigabytes. Past it the oldest intervals go first; requests whose start went get 503. */
#define MAX_HISTORY_BYTES (128ULL << 20)
/* Per-interval unique keys past which a bucket refuses more (counted, never silent): the BPF
 * counts map is smaller than this anyway, so hitting it means something is badly wrong. */
#define MAX_BUCKET_SAMPLES (1u << 20)

typedef struct StackNode StackNode;
typedef struct StackStore StackStore;

struct StackNode {
        StackStore *store; /* NULL once the store is gone (window outlived the aggregator) */
        StackNode *next;   /* hash chain */
        bool kernel;
        Stack stack; /* must be last: flexible frames[] */
};

struct StackStore {
        StackNode **buckets;
        size_t n_buckets; /* power of two */
        size_t n_stacks;
        uint64_t bytes;
        uint64_t interned_total, freed_total;
};

typedef struct Bucket {
        uint64_t seq; /* intervals added before it: consecutive along the ring */
        uint64_t start_ns, end_ns;
        AggSample *samples;
        size_t n_samples;
        uint64_t total;
} Bucket;

typedef enum EvictReason {
        EVICT_AGE,    /* older than the history length */
        EVICT_COUNT,  /* MAX_BUCKETS */
        EVICT_MEMORY, /* MAX_HISTORY_BYTES */
        EVICT_SHUTDOWN,
        _EVICT_MAX,
} EvictReason;

static const char *const evict_reason_names[_EVICT_MAX] = {[EVICT_AGE] = "age",
                                                           [EVICT_COUNT] = "count",
                                                           [EVICT_MEMORY] = "memory",
                                                           [EVICT_SHUTDOWN] = "shutdown"};

typedef struct Waiter Waiter;
struct Waiter {
        uint64_t t_ns;
        aggregator_wait_cb_t cb;
        void *userdata;
        Waiter *next;
};

struct Aggregator {
        uint64_t history_ns;
        unsigned frequency_hz;
        StackStore *stacks;

        Bucket *ring; /* MAX_BUCKETS, oldest at ring[head] */
        size_t head, n;
        uint64_t latest_end;

        Waiter *waiters;

        uint32_t *pids; /* unique pids since the last aggregator_take_pids() */
        size_t n_pids, allocated_pids;

        uint64_t intervals_total, samples_total, records_total, offcpu_waits_total;
        uint64_t offcpu_stacks_expired_total;
        uint64_t evicted_total[_EVICT_MAX];
        uint64_t dropped_samples_total; /* bucket full or out of memory */
        uint64_t gaps_total;            /* interval not starting where the previous ended */
        uint64_t n_entries;             /* samples held by all buckets */
};

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

static size_t store_slot(const StackStore *s, uint64_t hash, bool kernel)
{
        return hash_mix64(hash ^ (kernel ? 0x9e3779b97f4a7c15ULL : 0)) & (s->n_buckets - 1);
}

static void stack_node_free(StackNode *node)
{
        StackStore *s = node->store;
        if (s) {
                StackNode **p = &s->buckets[store_slot(s, node->stack.hash, node->kernel)];
                while (*p && *p != node)
                        p = &(*p)->next;
                if (*p)
                        *p = node->next;
                s->n_stacks--;
                s->bytes -= sizeof(StackNode) + node->stack.n * sizeof(uint64_t) +
                            (node->stack.exact ? node->stack.n : 0);
                s->freed_total++;
        }
        free(node);
}

static void stack_ref(Stack *st)
{
        if (st)
                st->refs++;
}

static void stack_unref(Stack *st)
{
        if (!st)
                return;
        if (--st->refs == 0)
                stack_node_free(container_of(st, StackNode, stack));
}

static int store_grow(StackStore *s)
{
        size_t n = s->n_buckets ? s->n_buckets * 2 : 1024;
        StackNode **b = calloc(n, sizeof(StackNode *));
        if (!b)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_buckets; i++)
                for (StackNode *node = s->buckets[i], *next; node; node = next) {
                        next = node->next;
                        size_t slot =
                                hash_mix64(node->stack.hash ^ (node->kernel ? 0x9e3779b97f4a7c15ULL : 0)) &
                                (n - 1);
                        node->next = b[slot];
                        b[slot] = node;
                }
        free(s->buckets);
        s->buckets = b;
        s->n_buckets = n;
        return 0;
}

/* The interned stack of hash, or NULL. */
static Stack *store_find(StackStore *s, uint64_t hash, bool kernel)
{
        if (hash == 0 || s->n_buckets == 0)
                return NULL;
        for (StackNode *node = s->buckets[store_slot(s, hash, kernel)]; node; node = node->next)
                if (node->stack.hash == hash && node->kernel == kernel)
                        return &node->stack;
        return NULL;
}

/* Returns the interned stack without taking a reference (the caller takes one per use). */
static Stack *store_intern(StackStore *s, uint64_t hash, bool kernel, const uint64_t *frames, uint32_t n,
                           uint32_t flags, const uint8_t *exact)
{
        bool keep_exact = false;

        if (hash == 0)
                return NULL;
        if (s->n_stacks >= s->n_buckets && store_grow(s) < 0 && s->n_buckets == 0)
                return NULL;

        size_t slot = store_slot(s, hash, kernel);
        for (StackNode *node = s->buckets[slot]; node; node = node->next)
                /* The BPF side stores each hash's frames once, so equal hashes are equal stacks. */
                if (node->stack.hash == hash && node->kernel == kernel)
                        return &node->stack;

        /* Only stacks through a signal frame have exact pcs beyond the leaf: the rest keep NULL. */
        for (uint32_t i = 1; exact && i < n && !keep_exact; i++)
                keep_exact = exact[i];
        size_t extra = keep_exact ? n : 0;
        StackNode *node = malloc(sizeof(StackNode) + (size_t)n * sizeof(uint64_t) + extra);
        if (!node)
                return NULL;
        *node = (StackNode){.store = s, .kernel = kernel};
        node->stack = (Stack){.hash = hash, .n = n, .flags = flags};
        if (n > 0)
                memcpy(node->stack.frames, frames, (size_t)n * sizeof(uint64_t));
        if (keep_exact) {
                uint8_t *e = (uint8_t *)(node->stack.frames + n);

                memcpy(e, exact, n);
                node->stack.exact = e;
        }
        node->next = s->buckets[slot];
        s->buckets[slot] = node;
        s->n_stacks++;
        s->bytes += sizeof(StackNode) + (size_t)n * sizeof(uint64_t) + extra;
        s->interned_total++;
        return &node->stack;
}

/* A record's stack: interned from its frames, or, for an off-CPU record whose stack came in an
 * earlier interval (hash without frames), found by hash. */
static Stack *record_stack(StackStore *s, const SampleRecord *r, bool kernel)
{
        uint64_t hash = kernel ? r->kernel_hash : r->user_hash;
        const uint64_t *frames = kernel ? r->kernel_frames : r->user_frames;

        if (r->off_cpu && hash && !frames)
                return store_find(s, hash, kernel);
        return kernel ? store_intern(s, hash, true, frames, r->n_kernel, 0, NULL)
                      : store_intern(s, hash, false, frames, r->n_user, r->user_flags, r->user_exact);
}

static void store_free(StackStore *s)
{
        if (!s)
                return;
        /* Stacks still referenced by windows stay alive and free themselves on their last unref. */
        for (size_t i = 0; i < s->n_buckets; i++)
                for (StackNode *node = s->buckets[i], *next; node; node = next) {
                        next = node->next;
                        node->store = NULL;
                        node->next = NULL;
                        if (node->stack.refs == 0)
                                free(node);
                }
        free(s->buckets);
        free(s);
}

static void agg_sample_release(AggSample *x)
{
        stack_unref(x->user);
        stack_unref(x->kernel);
}

static void bucket_clear(Aggregator *a, Bucket *b)
{
        for (size_t i = 0; i < b->n_samples; i++)
                agg_sample_release(&b->samples[i]);
        a->n_entries -= b->n_samples;
        free(b->samples);
        *b = (Bucket){};
}

static Bucket *ring_at(Aggregator *a, size_t i)
{
        return &a->ring[(a->head + i) % MAX_BUCKETS];
}

static uint64_t history_bytes(const Aggregator *a)
{
        return a->n_entries * sizeof(AggSample) + a->stacks->bytes;
}

static void evict_oldest(Aggregator *a, EvictReason reason)
{
        bucket_clear(a, ring_at(a, 0));
        a->head = (a->head + 1) % MAX_BUCKETS;
        a->n--;
        a->evicted_total[reason]++;
}

int aggregator_new(uint64_t history_ns, unsigned frequency_hz, Aggregator **ret)
{
        Aggregator *a = calloc(1, sizeof(Aggregator));
        if (!a)
                return -ENOMEM;
        a->history_ns = history_ns;
        a->frequency_hz = frequency_hz;
        a->ring = calloc(MAX_BUCKETS, sizeof(Bucket));
        a->stacks = calloc(1, sizeof(StackStore));
        if (!a->ring || !a->stacks || store_grow(a->stacks) < 0) {
                aggregator_free(a);
                return -ENOMEM;
        }
        *ret = a;
        return 0;
}

Aggregator *aggregator_free(Aggregator *a)
{
        if (!a)
                return NULL;
        if (a->ring)
                while (a->n > 0)
                        evict_oldest(a, EVICT_SHUTDOWN);
        free(a->ring);
        store_free(a->stacks);
        for (Waiter *w = a->waiters, *next; w; w = next) {
                next = w->next;
                free(w);
        }
        free(a->pids);
        free(a);
        return NULL;
}

static void note_pid(Aggregator *a, uint32_t pid)
{
        /* Records of one pid tend to come together; a linear scan of the unique list stays cheap
         * because the list is emptied every interval by aggregator_take_pids(). */
        if (a->n_pids > 0 && a->pids[a->n_pids - 1] == pid)
                return;
        for (size_t i = 0; i < a->n_pids; i++)
                if (a->pids[i] == pid)
                        return;
        if (ARRAY_GROW(a->pids, a->allocated_pids, a->n_pids + 1, 64) < 0)
                return; /* only an early hint for the process table */
        a->pids[a->n_pids++] = pid;
}

size_t aggregator_take_pids(Aggregator *a, uint32_t **ret_pids)
{
        size_t n = a->n_pids;
        *ret_pids = TAKE_PTR(a->pids);
        a->n_pids = a->allocated_pids = 0;
        return n;
}

static void fire_waiters(Aggregator *a)
{
        /* Detach the due waiters first: callbacks may add or cancel waiters. */
        Waiter *due = NULL, **p = &a->waiters;
        while (*p) {
                Waiter *w = *p;
                if (w->t_ns <= a->latest_end) {
                        *p = w->next;
                        w->next = due;
                        due = w;
                } else
                        p = &w->next;
        }
        while (due) {
                Waiter *w = due;
                due = w->next;
                aggregator_wait_cb_t cb = w->cb;
                void *userdata = w->userdata;
                free(w);
                cb(userdata);
        }
}

void aggregator_add_interval(Aggregator *a, uint64_t start_ns, uint64_t end_ns, const SampleRecord *r,
                             size_t n)
{
        if (a->n > 0 && ring_at(a, a->n - 1)->end_ns != start_ns)
                a->gaps_total++;

        if (a->n == MAX_BUCKETS)
                evict_oldest(a, EVICT_COUNT);
        Bucket *b = ring_at(a, a->n);
        *b = (Bucket){.seq = a->intervals_total, .start_ns = start_ns, .end_ns = end_ns};
        a->n++;

        size_t n_keep = n < MAX_BUCKET_SAMPLES ? n : MAX_BUCKET_SAMPLES;
        if (n_keep > 0) {
                b->samples = calloc(n_keep, sizeof(AggSample));
                if (!b->samples)
                        n_keep = 0;
        }
        for (size_t i = 0; i < n; i++) {
                a->records_total++;
                if (r[i].off_cpu)
                        a->offcpu_waits_total += r[i].count;
                else
                        a->samples_total += r[i].count;
                note_pid(a, r[i].pid);
                if (i >= n_keep) {
                        a->dropped_samples_total += r[i].count;
                        continue;
                }
                Stack *u = record_stack(a->stacks, &r[i], false);
                Stack *k = record_stack(a->stacks, &r[i], true);
                if ((r[i].user_hash != 0 && !u) || (r[i].kernel_hash != 0 && !k)) {
                        if (r[i].off_cpu)
                                /* Its wait began before the oldest interval held. */
                                a->offcpu_stacks_expired_total += r[i].count;
                        else
                                a->dropped_samples_total += r[i].count; /* out of memory */
                        continue;
                }
                AggSample *s = &b->samples[b->n_samples++];
                s->pid = r[i].pid;
                s->tid = r[i].tid;
                s->cgroup_id = r[i].cgroup_id;
                memcpy(s->comm, r[i].comm, sizeof(s->comm));
                memcpy(s->thread_comm, r[i].thread_comm, sizeof(s->thread_comm));
                s->comm[PROFD_COMM_LEN] = s->thread_comm[PROFD_COMM_LEN] = 0;
                s->user = u;
                s->kernel = k;
                s->count = r[i].count;
                s->off_cpu = r[i].off_cpu;
                s->off_cpu_state = r[i].off_cpu_state;
                s->off_cpu_ns = r[i].off_cpu_ns;
                stack_ref(u);
                stack_ref(k);
                b->total += r[i].count;
        }
        a->n_entries += b->n_samples;
        a->intervals_total++;
        if (end_ns > a->latest_end)
                a->latest_end = end_ns;

        while (a->n > 1 && ring_at(a, 0)->end_ns + a->history_ns < a->latest_end)
                evict_oldest(a, EVICT_AGE);
        while (a->n > 1 && history_bytes(a) > MAX_HISTORY_BYTES)
                evict_oldest(a, EVICT_MEMORY);

        fire_waiters(a);
}

uint64_t aggregator_memory_bytes(const Aggregator *a)
{
        return a ? history_bytes(a) : 0;
}

uint64_t aggregator_latest_end(const Aggregator *a)
{
        return a->latest_end;
}

int aggregator_wait_for(Aggregator *a, uint64_t t_ns, aggregator_wait_cb_t cb, void *userdata,
                        void **ret_handle)
{
        if (t_ns <= a->latest_end) {
                /* Already drained: answer now instead of a whole drain period later. No handle
                 * exists, so the callback may not be cancelled (it has run). */
                if (ret_handle)
                        *ret_handle = NULL;
                cb(userdata);
                return 0;
        }
        Waiter *w = malloc(sizeof(Waiter));
        if (!w)
                return -ENOMEM;
        *w = (Waiter){.t_ns = t_ns, .cb = cb, .userdata = userdata, .next = a->waiters};
        a->waiters = w;
        if (ret_handle)
                *ret_handle = w;
        return 0;
}

void aggregator_cancel_wait(Aggregator *a, void *handle)
{
        if (!handle)
                return;
        for (Waiter **p = &a->waiters; *p; p = &(*p)->next)
                if (*p == handle) {
                        Waiter *w = *p;
                        *p = w->next;
                        free(w);
                        return;
                }
}

/* Merge key of a sample: everything but the count. Stacks are interned, so pointers compare. */
static uint64_t sample_key_hash(const AggSample *s)
{
        uint64_t h = hash_mix64(((uint64_t)s->pid << 32) | s->tid);
        h = hash_mix64(h ^ (uintptr_t)s->user);
        h = hash_mix64(h ^ (uintptr_t)s->kernel);
        h = hash_mix64(h ^ s->cgroup_id ^ ((uint64_t)s->off_cpu << 8 | s->off_cpu_state));
        for (size_t i = 0; i < PROFD_COMM_LEN && s->comm[i]; i++)
                h = h * 31 + (unsigned char)s->comm[i];
        for (size_t i = 0; i < PROFD_COMM_LEN && s->thread_comm[i]; i++)
                h = h * 37 + (unsigned char)s->thread_comm[i];
        return h;
}

static bool sample_key_eq(const AggSample *x, const AggSample *y)
{
        return x->pid == y->pid && x->tid == y->tid && x->user == y->user && x->kernel == y->kernel &&
               x->cgroup_id == y->cgroup_id && x->off_cpu == y->off_cpu &&
               x->off_cpu_state == y->off_cpu_state && strcmp(x->comm, y->comm) == 0 &&
               strcmp(x->thread_comm, y->thread_comm) == 0;
}

int aggregator_window(Aggregator *a, uint64_t t0, uint64_t t1, ProfileWindow **ret)
{
        return aggregator_window_kind(a, t0, t1, false, ret);
}

int aggregator_window_kind(Aggregator *a, uint64_t t0, uint64_t t1, bool off_cpu, ProfileWindow **ret)
{
        if (t1 < t0)
                return -EINVAL;

        size_t first = a->n, last = a->n, upper = 0;
        for (size_t i = 0; i < a->n; i++) {
                Bucket *b = ring_at(a, i);
                if (b->start_ns >= t0 && b->end_ns <= t1) {
                        if (first == a->n)
                                first = i;
                        last = i;
                        upper += b->n_samples;
                }
        }
        /* The window must start exactly at a bucket we still hold; otherwise its beginning was
         * evicted (or never drained) and the profile would silently miss samples. */
        if (first == a->n || ring_at(a, first)->start_ns != t0)
                return -ENODATA;
        if (ring_at(a, last)->end_ns != t1)
                return -EAGAIN; /* t1 not drained yet */

        ProfileWindow *w = calloc(1, sizeof(ProfileWindow));
        if (!w)
                return -ENOMEM;
        w->start_ns = t0;
        w->end_ns = t1;
        w->frequency_hz = a->frequency_hz;
        w->off_cpu = off_cpu;
        if (upper > 0) {
                w->samples = calloc(upper, sizeof(AggSample));
                if (!w->samples) {
                        free(w);
                        return -ENOMEM;
                }
        }

        /* Open addressing over indexes into w->samples; load factor <= 1/2. */
        size_t n_slots = 16;
        while (n_slots < upper * 2)
                n_slots *= 2;
        size_t *slots = malloc(n_slots * sizeof(size_t));
        if (!slots) {
                profile_window_free(w);
                return -ENOMEM;
        }
        memset(slots, 0xff, n_slots * sizeof(size_t));

        for (size_t i = first; i <= last; i++) {
                Bucket *b = ring_at(a, i);
                if (!(b->start_ns >= t0 && b->end_ns <= t1))
                        continue;
                for (size_t j = 0; j < b->n_samples; j++) {
                        const AggSample *s = &b->samples[j];
                        /* Off-CPU {0, 0}: a wait's stacks, held until its time comes. */
                        if (s->off_cpu != off_cpu || (s->off_cpu && s->count == 0 && s->off_cpu_ns == 0))
                                continue;
                        size_t slot = sample_key_hash(s) & (n_slots - 1);
                        while (slots[slot] != SIZE_MAX && !sample_key_eq(&w->samples[slots[slot]], s))
                                slot = (slot + 1) & (n_slots - 1);
                        if (slots[slot] == SIZE_MAX) {
                                slots[slot] = w->n_samples;
                                w->samples[w->n_samples++] = *s;
                                stack_ref(s->user);
                                stack_ref(s->kernel);
                        } else {
                                w->samples[slots[slot]].count += s->count;
                                w->samples[slots[slot]].off_cpu_ns += s->off_cpu_ns;
                        }
                        w->total += s->count;
                        w->off_cpu_ns += s->off_cpu_ns;
                }
        }
        free(slots);
        *ret = w;
        return 0;
}

static const Bucket *ring_at_const(const Aggregator *a, size_t i)
{
        return &a->ring[(a->head + i) % MAX_BUCKETS];
}

void aggregator_span(const Aggregator *a, uint64_t *ret_oldest, uint64_t *ret_latest)
{
        *ret_oldest = a->n > 0 ? ring_at_const(a, 0)->start_ns : 0;
        *ret_latest = a->n > 0 ? ring_at_const(a, a->n - 1)->end_ns : 0;
}

AggCursor aggregator_cursor_end(const Aggregator *a)
{
        return (AggCursor){.seq = a->intervals_total};
}

const AggSample *aggregator_cursor_next(const Aggregator *a, AggCursor *c)
{
        if (a->n == 0)
                return NULL;
        uint64_t first = ring_at_const(a, 0)->seq;
        if (c->seq < first)
                *c = (AggCursor){.seq = first};
        while (c->seq < first + a->n) {
                const Bucket *b = ring_at_const(a, (size_t)(c->seq - first));
                if (c->index < b->n_samples)
                        return &b->samples[c->index++];
                c->seq++;
                c->index = 0;
        }
        return NULL;
}

static uint64_t distance(uint64_t x, uint64_t y)
{
        return x > y ? x - y : y - x;
}

int aggregator_snap_window(const Aggregator *a, uint64_t want_t0, uint64_t want_t1, uint64_t *ret_t0,
                           uint64_t *ret_t1)
{
        if (a->n == 0)
                return -ENODATA;
        if (want_t0 < ring_at_const(a, 0)->start_ns)
                return -ERANGE;

        /* Buckets are in time order: the nearest start is found where the distance stops shrinking. */
        size_t first = 0;
        for (size_t i = 1; i < a->n; i++) {
                if (distance(ring_at_const(a, i)->start_ns, want_t0) >=
                    distance(ring_at_const(a, first)->start_ns, want_t0))
                        break;
                first = i;
        }
        size_t last = first;
        for (size_t i = first + 1; i < a->n; i++) {
                if (distance(ring_at_const(a, i)->end_ns, want_t1) >=
                    distance(ring_at_const(a, last)->end_ns, want_t1))
                        break;
                last = i;
        }
        *ret_t0 = ring_at_const(a, first)->start_ns;
        *ret_t1 = ring_at_const(a, last)->end_ns;
        return 0;
}

ProfileWindow *profile_window_free(ProfileWindow *w)
{
        if (!w)
                return NULL;
        for (size_t i = 0; i < w->n_samples; i++)
                agg_sample_release(&w->samples[i]);
        free(w->samples);
        free(w);
        return NULL;
}

void aggregator_write_metrics(const Aggregator *a, FILE *f)
{
        const StackStore *s = a->stacks;
        uint64_t oldest = a->n > 0 ? a->ring[a->head].start_ns : 0;
        const char *evict_names[_EVICT_MAX];
        unsigned n_waiters = 0;
        for (const Waiter *w = a->waiters; w; w = w->next)
                n_waiters++;

        metric_counter(f, "profd_aggregator_intervals_total", "Drained intervals received from the sampler.",
                       a->intervals_total);
        metric_counter(f, "profd_aggregator_samples_total", "Samples received from the sampler.",
                       a->samples_total);
        metric_counter(f, "profd_aggregator_offcpu_waits_total",
                       "Off-CPU waits received from the sampler (--off-cpu).", a->offcpu_waits_total);
        metric_counter(f, "profd_aggregator_offcpu_stacks_expired_total",
                       "Off-CPU waits dropped because their stacks had left the history (the wait "
                       "began before the oldest interval held).",
                       a->offcpu_stacks_expired_total);
        metric_counter(f, "profd_aggregator_records_total", "Distinct (thread, stack) records received.",
                       a->records_total);
        metric_counter(f, "profd_aggregator_dropped_samples_total",
                       "Samples the aggregator could not keep (bucket full, out of memory).",
                       a->dropped_samples_total);
        metric_counter(f, "profd_aggregator_interval_gaps_total",
                       "Intervals that did not start where the previous one ended.", a->gaps_total);
        metric_gauge(f, "profd_aggregator_buckets", "Intervals held in the history.", a->n);
        metric_gauge(f, "profd_aggregator_bucket_entries", "Sample records held by all buckets.",
                     a->n_entries);
        metric_family(f, "profd_aggregator_history_seconds", "gauge", "Age of the oldest interval held.");
        metric_sample_fixed(
                f, "profd_aggregator_history_seconds", NULL,
                oldest > 0 && a->latest_end > oldest ? (double)(a->latest_end - oldest) / 1e9 : 0.0, 3);
        metric_gauge(f, "profd_aggregator_stacks",
                     "Interned stacks referenced by the history or by profiles being built.", s->n_stacks);
        metric_gauge(f, "profd_aggregator_stack_bytes", "Memory of the interned stacks.", s->bytes);
        metric_counter(f, "profd_aggregator_stacks_freed_total",
                       "Interned stacks freed after their last reference went.", s->freed_total);
        metric_gauge(f, "profd_aggregator_waiters", "Profile requests waiting for their last interval.",
                     n_waiters);

        metric_gauge(f, "profd_aggregator_history_bytes",
                     "Memory of the history: sample records and interned stacks.", history_bytes(a));
        metric_gauge(f, "profd_aggregator_history_max_bytes",
                     "Bound on the history's memory; oldest intervals go first.", MAX_HISTORY_BYTES);
        memcpy(evict_names, evict_reason_names, sizeof(evict_names));
        evict_names[EVICT_SHUTDOWN] = NULL; /* not reported */
        metric_labelled(f, "profd_aggregator_buckets_evicted_total", "counter",
                        "Intervals dropped from the history, by reason.", "reason", evict_names,
                        a->evicted_total, _EVICT_MAX);
}
