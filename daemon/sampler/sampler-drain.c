/* SPDX-License-Identifier: GPL-2.0-only */
/* Drains a retired map generation: reads and empties the counts and stack maps, has the runtime
 * namers (sampler.h) rewrite the user stacks with their entries, and hands the interval's records
 * to the callback. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sampler/sampler-drain.h"
#include "sampler/sampler-internal.h"
#include "util/array.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"

#include "profile.skel.h"

/* Entries per batch syscall while draining; grown on -ENOSPC (a bucket larger than the batch). */
#define SAMPLER_BATCH 256u

void sampler_drain_done(Drain *d)
{
        free(d->keys);
        free(d->counts);
        free(d->offcpu_keys);
        free(d->offcpu_values);
        free(d->stacks);
        free(d->kstacks);
        free(d->frames);
        free(d->exact);
        free(d->batch_keys);
        free(d->batch_values);
        free(d->records);
        *d = (Drain){};
}

/* Reads and deletes every entry of a hash map into d->batch_keys/values (appending from index
 * *n). Nothing writes the map meanwhile: it is the retired generation. */
static int map_drain_all(Drain *d, int fd, size_t key_size, size_t value_size, size_t *ret_n)
{
        DECLARE_LIBBPF_OPTS(bpf_map_batch_opts, opts);
        uint64_t in_batch = 0, out_batch = 0;
        size_t n = 0, batch = SAMPLER_BATCH;
        bool first = true;
        int r;

        for (;;) {
                uint32_t count = batch;

                r = array_grow(&d->batch_keys, &d->batch_keys_size, (n + batch) * key_size, 1, 64);
                if (r < 0)
                        return r;
                r = array_grow(&d->batch_values, &d->batch_values_size, (n + batch) * value_size, 1, 64);
                if (r < 0)
                        return r;

                r = bpf_map_lookup_and_delete_batch(fd, first ? NULL : &in_batch, &out_batch,
                                                    (char *)d->batch_keys + n * key_size,
                                                    (char *)d->batch_values + n * value_size, &count, &opts);
                if (r < 0 && r != -ENOENT) {
                        if (r == -ENOSPC && batch < (1u << 20)) {
                                batch *= 2; /* one hash bucket holds more than a batch */
                                continue;
                        }
                        return r;
                }
                n += count;
                if (r == -ENOENT)
                        break;
                in_batch = out_batch;
                first = false;
        }
        *ret_n = n;
        return 0;
}

static int cmp_stack(const void *a, const void *b)
{
        const DrainedStack *x = a, *y = b;

        return x->hash < y->hash ? -1 : x->hash > y->hash;
}

static DrainedStack *find_stack(DrainedStack *v, size_t n, uint64_t hash)
{
        DrainedStack k = {.hash = hash};

        return hash ? bsearch(&k, v, n, sizeof(*v), cmp_stack) : NULL;
}

int sampler_add_namer(Sampler *s, const SamplerNamer *n)
{
        Drain *d;
        size_t i;

        if (!s || !n || !n->name || !n->entry_bit || (n->entry_bit & (n->entry_bit - 1)))
                return -EINVAL;
        d = &s->drain;
        for (i = 0; i < d->n_namers; i++)
                if (d->namers[i].entry_bit == n->entry_bit)
                        return -EEXIST;
        if (d->n_namers >= SAMPLER_MAX_NAMERS)
                return -E2BIG;
        /* Kept by entry bit, highest first: the order entries are classified and namers run in. */
        for (i = d->n_namers; i > 0 && d->namers[i - 1].entry_bit < n->entry_bit; i--)
                d->namers[i] = d->namers[i - 1];
        d->namers[i] = *n;
        d->n_namers++;
        d->namer_bits |= n->entry_bit | n->mark_bit;
        return 0;
}

/* The namers (Drain.namers index bits) that f, a user frame with one of Drain.namer_bits, calls
 * for: the runtime of its highest entry bit, else of its mark bit (sampler.h). */
static uint8_t frame_namers(const Drain *d, uint64_t f)
{
        for (size_t i = 0; i < d->n_namers; i++)
                if (f & d->namers[i].entry_bit)
                        return 1u << i;
        for (size_t i = 0; i < d->n_namers; i++)
                if (f & d->namers[i].mark_bit)
                        return 1u << i;
        return 0;
}

/* Copies the drained stack values (len-prefixed arrays of max_frames) into the frame pool. User
 * frames: PROFD_FRAME_EXACT moves from the address into d->exact (kernel addresses have bit 63
 * set by nature), and the same pass notes which runtimes' namers the stack calls for. */
static int collect_stacks(Drain *d, size_t n, size_t value_size, size_t max_frames, bool user,
                          DrainedStack **stacks, size_t *n_stacks, size_t *cap_stacks)
{
        int r;

        r = array_grow((void **)stacks, cap_stacks, n, sizeof(DrainedStack), 64);
        if (r < 0)
                return r;
        *n_stacks = 0;
        for (size_t i = 0; i < n; i++) {
                const uint8_t *v = (const uint8_t *)d->batch_values + i * value_size;
                uint32_t len, flags;
                uint8_t pending = 0;

                memcpy(&len, v, sizeof(len));
                memcpy(&flags, v + 4, sizeof(flags));
                if (len > max_frames)
                        len = max_frames;
                r = ARRAY_GROW(d->frames, d->cap_frames, d->n_frames + len, 64);
                if (r < 0)
                        return r;
                r = ARRAY_GROW(d->exact, d->cap_exact, d->n_frames + len, 64);
                if (r < 0)
                        return r;
                /* An empty stack (a sample inside exec keeps no user frames) may come before any
                 * frame was stored: d->frames is still NULL then. */
                if (len > 0)
                        memcpy(d->frames + d->n_frames, v + 8, len * sizeof(uint64_t));
                if (user)
                        for (size_t k = d->n_frames; k < d->n_frames + len; k++) {
                                uint64_t f = d->frames[k] & ~PROFD_FRAME_EXACT;

                                d->exact[k] = f != d->frames[k];
                                d->frames[k] = f;
                                if (f & d->namer_bits)
                                        pending |= frame_namers(d, f);
                        }
                else if (len > 0)
                        memset(d->exact + d->n_frames, 0, len);
                memcpy(&(*stacks)[*n_stacks].hash, (const uint8_t *)d->batch_keys + i * sizeof(uint64_t),
                       sizeof(uint64_t));
                (*stacks)[*n_stacks].off = d->n_frames;
                (*stacks)[*n_stacks].len = len;
                (*stacks)[*n_stacks].flags = flags;
                (*stacks)[*n_stacks].pending = pending;
                (*stacks)[*n_stacks].salt = 0;
                (*n_stacks)++;
                d->n_frames += len;
        }
        qsort_safe(*stacks, *n_stacks, sizeof(DrainedStack), cmp_stack);
        return 0;
}

/* Calls the namers a stack has entries for, highest entry bit first (Python's splice before the
 * others look at the stack). */
static void name_stack(Drain *d, uint32_t pid, DrainedStack *us)
{
        for (size_t i = 0; i < d->n_namers; i++) {
                const SamplerNamer *nm = &d->namers[i];
                size_t len = us->len;

                if (!(us->pending & (1u << i)))
                        continue;
                us->salt ^= nm->name(nm->userdata, pid, us->flags, d->frames + us->off, d->exact + us->off,
                                     &len);
                if (len < us->len)
                        us->len = (uint32_t)len;
        }
        us->pending = 0;
}

static void copy_comm(char dst[PROFD_COMM_LEN + 1], const char src[PROFD_COMM_LEN])
{
        memcpy(dst, src, PROFD_COMM_LEN);
        dst[PROFD_COMM_LEN] = 0;
}

/* A record of key k with its stacks. A hash whose stack is missing counts, and reads as none;
 * except in off-CPU records: a wait's stacks arrive in the interval it began (with a {0, 0}
 * record), its time in the one it ends, so the hash stays for the aggregator to resolve. */
static SampleRecord make_record(Sampler *s, const struct profd_count_key *k, bool off_cpu)
{
        Drain *d = &s->drain;
        DrainedStack *us = find_stack(d->stacks, d->n_stacks, k->user_hash);
        const DrainedStack *ks = find_stack(d->kstacks, d->n_kstacks, k->kernel_hash);
        SampleRecord rec;

        if (((k->user_hash && !us) || (k->kernel_hash && !ks)) && !off_cpu)
                s->missing_stacks++;
        /* Runtime frames are named now, while the process runs, by the first record of the stack
         * (its addresses are that process's). */
        if (us && us->pending)
                name_stack(d, k->pid, us);
        rec = (SampleRecord){
                .pid = k->pid,
                .tid = k->tid,
                .cgroup_id = k->cgroup_id,
                .user_hash = us || off_cpu ? k->user_hash : 0,
                .kernel_hash = ks || off_cpu ? k->kernel_hash : 0,
                .user_frames = us ? d->frames + us->off : NULL,
                .user_exact = us ? d->exact + us->off : NULL,
                .n_user = us ? us->len : 0,
                .user_flags = us ? us->flags : 0,
                .kernel_frames = ks ? d->frames + ks->off : NULL,
                .n_kernel = ks ? ks->len : 0,
        };
        if (us && us->salt && (rec.user_hash ^ us->salt))
                rec.user_hash ^= us->salt;
        copy_comm(rec.comm, k->comm);
        copy_comm(rec.thread_comm, k->thread_comm);
        return rec;
}

/* The retired generation's off-CPU counts (empty without --off-cpu) into d->offcpu_*. */
static int drain_offcpu(Sampler *s, unsigned g)
{
        Drain *d = &s->drain;
        int fd = bpf_map__fd(g ? s->skel->maps.offcpu_counts_1 : s->skel->maps.offcpu_counts_0);
        size_t n;
        int r;

        d->n_offcpu = 0;
        if (!s->opts.off_cpu)
                return 0;
        r = map_drain_all(d, fd, sizeof(struct profd_offcpu_key), sizeof(struct profd_offcpu_value), &n);
        if (r < 0)
                return r;
        if (n > d->cap_offcpu) {
                size_t cap = d->cap_offcpu;
                void *v;

                r = ARRAY_GROW(d->offcpu_keys, cap, n, 64);
                if (r < 0)
                        return r;
                v = reallocarray(d->offcpu_values, cap, sizeof(struct profd_offcpu_value));
                if (!v)
                        return -ENOMEM;
                d->offcpu_values = v;
                d->cap_offcpu = cap;
        }
        memcpy_safe(d->offcpu_keys, d->batch_keys, n * sizeof(*d->offcpu_keys));
        memcpy_safe(d->offcpu_values, d->batch_values, n * sizeof(*d->offcpu_values));
        d->n_offcpu = n;
        return 0;
}

static int sampler_drain(Sampler *s)
{
        Drain *d = &s->drain;
        unsigned g = s->pending_gen;
        int counts_fd = bpf_map__fd(g ? s->skel->maps.counts_1 : s->skel->maps.counts_0);
        int stacks_fd = bpf_map__fd(g ? s->skel->maps.stacks_1 : s->skel->maps.stacks_0);
        int kstacks_fd = bpf_map__fd(g ? s->skel->maps.kstacks_1 : s->skel->maps.kstacks_0);
        uint64_t t0 = now_ns(CLOCK_MONOTONIC), total = 0, dt;
        size_t n;
        int r;

        d->n_frames = 0;

        r = map_drain_all(d, counts_fd, sizeof(struct profd_count_key), sizeof(uint64_t), &n);
        if (r < 0)
                return log_error_errno(r, "Failed to drain counts map: %m");
        if (n > d->cap_counts) {
                size_t cap = d->cap_counts;
                void *c;

                r = ARRAY_GROW(d->keys, cap, n, 64);
                if (r < 0)
                        return r;
                c = reallocarray(d->counts, cap, sizeof(uint64_t));
                if (!c)
                        return -ENOMEM;
                d->counts = c;
                d->cap_counts = cap;
        }
        memcpy_safe(d->keys, d->batch_keys, n * sizeof(*d->keys));
        memcpy_safe(d->counts, d->batch_values, n * sizeof(uint64_t));
        d->n_counts = n;

        r = drain_offcpu(s, g);
        if (r < 0)
                return log_error_errno(r, "Failed to drain off-CPU counts map: %m");

        r = map_drain_all(d, stacks_fd, sizeof(uint64_t), sizeof(struct profd_stack), &n);
        if (r < 0)
                return log_error_errno(r, "Failed to drain user stacks map: %m");
        r = collect_stacks(d, n, sizeof(struct profd_stack), PROFD_MAX_USER_FRAMES, true, &d->stacks,
                           &d->n_stacks, &d->cap_stacks);
        if (r < 0)
                return r;

        r = map_drain_all(d, kstacks_fd, sizeof(uint64_t), sizeof(struct profd_kstack), &n);
        if (r < 0)
                return log_error_errno(r, "Failed to drain kernel stacks map: %m");
        r = collect_stacks(d, n, sizeof(struct profd_kstack), PROFD_MAX_KERNEL_FRAMES, false, &d->kstacks,
                           &d->n_kstacks, &d->cap_kstacks);
        if (r < 0)
                return r;

        r = ARRAY_GROW(d->records, d->cap_records, d->n_counts + d->n_offcpu, 64);
        if (r < 0)
                return r;
        for (size_t i = 0; i < d->n_counts; i++) {
                d->records[i] = make_record(s, &d->keys[i], false);
                d->records[i].count = d->counts[i];
                total += d->counts[i];
        }
        for (size_t i = 0; i < d->n_offcpu; i++) {
                SampleRecord *rec = &d->records[d->n_counts + i];

                *rec = make_record(s, &d->offcpu_keys[i].key, true);
                rec->count = d->offcpu_values[i].count;
                rec->off_cpu = true;
                rec->off_cpu_state = d->offcpu_keys[i].state;
                rec->off_cpu_ns = d->offcpu_values[i].ns;
        }

        s->last_counts = d->n_counts;
        s->last_stacks = d->n_stacks;
        s->last_kstacks = d->n_kstacks;
        s->last_offcpu = d->n_offcpu;
        if (s->last_offcpu > s->max_offcpu)
                s->max_offcpu = s->last_offcpu;
        if (s->last_counts > s->max_counts)
                s->max_counts = s->last_counts;
        if (s->last_stacks > s->max_stacks)
                s->max_stacks = s->last_stacks;
        if (s->last_kstacks > s->max_kstacks)
                s->max_kstacks = s->last_kstacks;
        dt = s->pending_end_ns - s->pending_start_ns;
        s->rate = dt ? (double)total * NSEC_PER_SEC / (double)dt : 0;

        s->cb(s->userdata, s->pending_start_ns, s->pending_end_ns, d->records, d->n_counts + d->n_offcpu);

        dt = now_ns(CLOCK_MONOTONIC) - t0;
        s->drains++;
        s->drain_ns_last = dt;
        s->drain_ns_total += dt;
        return 0;
}

int sampler_on_drain_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
        Sampler *s = userdata;
        static LogRateLimit rl = LOG_RATELIMIT_INIT(60 * NSEC_PER_SEC, 3);
        unsigned suppressed;
        int r;

        r = sampler_drain(s);
        if (r < 0) {
                /* The retired generation may be partly read; what is left is emptied so that the
                 * generation can be reused. Its samples are lost: counted as drain errors. */
                s->drain_errors++;
                if (log_ratelimit_test(&rl, &suppressed))
                        log_error_errno(r, "Draining BPF generation %u failed (%u similar suppressed): %m",
                                        s->pending_gen, suppressed);
                Drain *d = &s->drain;
                size_t n;
                unsigned g = s->pending_gen;
                (void)map_drain_all(d, bpf_map__fd(g ? s->skel->maps.counts_1 : s->skel->maps.counts_0),
                                    sizeof(struct profd_count_key), sizeof(uint64_t), &n);
                (void)map_drain_all(
                        d, bpf_map__fd(g ? s->skel->maps.offcpu_counts_1 : s->skel->maps.offcpu_counts_0),
                        sizeof(struct profd_offcpu_key), sizeof(struct profd_offcpu_value), &n);
                (void)map_drain_all(d, bpf_map__fd(g ? s->skel->maps.stacks_1 : s->skel->maps.stacks_0),
                                    sizeof(uint64_t), sizeof(struct profd_stack), &n);
                (void)map_drain_all(d, bpf_map__fd(g ? s->skel->maps.kstacks_1 : s->skel->maps.kstacks_0),
                                    sizeof(uint64_t), sizeof(struct profd_kstack), &n);
        }
        s->drain_pending = false;
        return 0;
}
