/* SPDX-License-Identifier: GPL-2.0-only */
/* Off-CPU recording (docs/off-cpu.md), all on sched_switch: the thread switched in (next) ends its
 * wait, the thread switched out (prev, current) starts one. A wait is unwound at its start, with
 * probability q fixed before its length is known (from the thread's previous waits: 1 once they
 * reach the threshold), and weighs its length / q when it ends: E[weight] = length whatever q, so
 * totals are unbiased while the short, frequent switches of a busy thread cost two hash
 * operations each. Defines the maps offcpu_threads, offcpu_pending, offcpu_counts_* and the
 * off-CPU rodata: include from profile.bpf.c only. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "profd-sample.h"
#include "profd-offcpu.h"
#include "filter.bpf.h"
#include "sample-state.bpf.h"
#include "stack-store.bpf.h"
#include "task.bpf.h"

/* Set by the daemon before load: --off-cpu-threshold (waits predicted this long are always
 * unwound), and its own tgid, whose threads are never recorded. */
const volatile __u64 profd_offcpu_threshold_ns = 1000000;
const volatile __u32 profd_self_tgid = 0;
/* profd_offcpu_cut runs at every cut (bpf_for_each_map_elem, 5.13; atomic xchg and cmpxchg, 5.12):
 * the part of each unwound wait in progress that lies before the cut is counted in the interval
 * the cut ends. Without it (older kernels) a wait counts whole in the interval it ends in. The
 * switch-in's side of it is an atomic exchange, an instruction kernels before 5.12 refuse even in
 * dead code: the sched_switch program exists in two builds, with_cut or not (profile.bpf.c), and
 * the daemon loads one. */

#define PROFD_OFFCPU_Q_ONE (1u << PROFD_OFFCPU_Q_SHIFT)
/* Smallest unwind probability, 1/256: bounds the weight of a wait a thread of short waits did not
 * see coming (weight <= 256 x its length), so one surprise cannot swamp a profile. At 256 switches
 * per unwind, a thread switching 100k times a second costs ~400 unwinds a second. */
#define PROFD_OFFCPU_Q_MIN (PROFD_OFFCPU_Q_ONE / 256)
/* A wakeup is looked up only within this long after the latest unwind started (most wakeups come
 * while none runs: they cost a clock read). Off-CPU unwinds take 5-100 us; a wakeup during one
 * longer than this is missed, and that wait's stretch counts 1/q times as it would without the
 * wakeup program. */
#define PROFD_OFFCPU_UNWIND_WINDOW_NS 1000000ULL

/* When the latest off-CPU unwind started, on any CPU (racy by design: a gate, not a count). */
volatile __u64 offcpu_unwind_started_ns = 0;

/* task_struct.__state (5.14+); before, task_struct.state. */
struct task_struct___pre_5_14 {
        long state;
} __attribute__((preserve_access_index));

#define PROFD_TASK_RUNNING 0x0000
#define PROFD_TASK_DEAD 0x0080

/* Wanted threads seen leaving the CPU, with the prediction of their next wait. Sized by the daemon;
 * a thread that does not fit is counted and not recorded. Preallocated: no allocation in the
 * scheduler. An entry goes with its thread's last switch-out. */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 32768);
        __type(key, __u32);
        __type(value, struct profd_offcpu_thread);
} offcpu_threads SEC(".maps");

/* Key of each unwound wait still going on, by tid. Sized by the daemon; full: counted, not unwound. */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, 16384);
        __type(key, __u32);
        __type(value, struct profd_offcpu_key);
} offcpu_pending SEC(".maps");

/* Same sizing and generations as counts_* (stack-store.bpf.h); set by the daemon. */
#define PROFD_OFFCPU_COUNTS_MAP(name)                                                                       \
        struct {                                                                                            \
                __uint(type, BPF_MAP_TYPE_HASH);                                                            \
                __uint(max_entries, 4096);                                                                  \
                __uint(map_flags, BPF_F_NO_PREALLOC);                                                       \
                __type(key, struct profd_offcpu_key);                                                       \
                __type(value, struct profd_offcpu_value);                                                   \
        } name SEC(".maps")

PROFD_OFFCPU_COUNTS_MAP(offcpu_counts_0);
PROFD_OFFCPU_COUNTS_MAP(offcpu_counts_1);

static __always_inline __u32 task_sched_state(struct task_struct *t)
{
        if (bpf_core_field_exists(t->__state))
                return BPF_CORE_READ(t, __state);
        return BPF_CORE_READ((struct task_struct___pre_5_14 *)t, state);
}

/* offcpu_counts[generation gen1][key] += v; false when the map is full (counted). */
static __always_inline bool offcpu_count(bool gen1, struct profd_offcpu_key *key, __u64 waits, __u64 ns)
{
        void *counts = gen1 ? (void *)&offcpu_counts_1 : (void *)&offcpu_counts_0;
        struct profd_offcpu_value v = {.count = waits, .ns = ns}, *old;
        long r;

        old = lookup_in_gen(gen1, offcpu_counts_1, offcpu_counts_0, key);
        if (!old) {
                r = bpf_map_update_elem(counts, key, &v, BPF_NOEXIST);
                if (r == 0)
                        return true;
                old = r == -EEXIST ? bpf_map_lookup_elem(counts, key) : NULL;
                if (!old) {
                        count(PROFD_DROP_OFFCPU_COUNTS_FULL);
                        return false;
                }
        }
        if (waits)
                __sync_fetch_and_add(&old->count, waits);
        if (ns)
                __sync_fetch_and_add(&old->ns, ns);
        return true;
}

/* blocked / q, q in 1/65536 steps (> 0). Exact for q = 1; blocked << 16 stays below 2^64 for
 * waits under 2^47 ns (39 hours), longer ones lose the low 16 bits of the quotient. */
static __always_inline __u64 offcpu_weight(__u64 blocked, __u32 q)
{
        if (q >= PROFD_OFFCPU_Q_ONE || q == 0)
                return blocked;
        if (blocked < (1ULL << 47))
                return (blocked << PROFD_OFFCPU_Q_SHIFT) / q;
        return (blocked / q) << PROFD_OFFCPU_Q_SHIFT;
}

/* The part of an unwound wait its unwind added: from its wakeup (or its switch-out, whichever is
 * later) to the unwind's end (or the switch-in, whichever is earlier). While its stack is read the
 * thread is still on its CPU, so a waker waits for the switch to finish: a wait woken then ends
 * later than it would have, but only when it is unwound, which happens with probability q. Weighed
 * 1/q like the rest, that stretch S would count S/q on average over the q of the waits that had it,
 * and so E[estimate] = truth + (1 - q) S; counted once it is unbiased (docs/off-cpu.md). */
static __always_inline __u64 offcpu_stretch(struct profd_offcpu_thread *t, __u64 out, __u64 now)
{
        __u64 wake = t->wake_ns, end = t->unwind_end_ns;

        if (!wake || wake == PROFD_OFFCPU_NO_WAKE || !end)
                return 0;
        if (wake < out)
                wake = out;
        if (end > now)
                end = now;
        return end > wake ? end - wake : 0;
}

/* next is switched in: the wait it started at its switch-out ends now. */
static __always_inline void offcpu_switch_in(struct task_struct *next, __u64 now, bool with_cut)
{
        __u32 tid = BPF_CORE_READ(next, pid);
        struct profd_offcpu_thread *t;
        struct profd_offcpu_key *key;
        __u64 blocked, decayed, weight, out, stretch;

        if (tid == 0)
                return;
        t = bpf_map_lookup_elem(&offcpu_threads, &tid);
        if (!t || !t->ts_ns)
                return;
        out = t->ts_ns;
        blocked = now > out ? now - out : 0;
        t->ts_ns = 0;
        /* Jumps up at once, decays by 1/8 per wait: a long wait makes the next ones likely to be
         * unwound until the thread has shown a while that its waits are short again. */
        decayed = t->pred_ns - (t->pred_ns >> 3);
        t->pred_ns = blocked > decayed ? blocked : decayed;
        count(PROFD_CNT_OFFCPU_SWITCH_INS);
        if (!t->unwound)
                return;
        t->unwound = 0;
        key = bpf_map_lookup_elem(&offcpu_pending, &tid);
        if (!key) {
                count(PROFD_DROP_OFFCPU_PENDING_LOST);
                return;
        }
        if (with_cut) {
                /* The cuts counted the wait up to acct_ns; taking it (0) tells a cut running now on
                 * another CPU that the rest is counted here. */
                __u64 from = __sync_lock_test_and_set(&t->acct_ns, 0);

                blocked = from && from < now ? now - from : from ? 0 : blocked;
        }
        weight = offcpu_weight(blocked, t->q);
        stretch = offcpu_stretch(t, out, now);
        if (stretch) {
                /* Counted once: weight (blocked - stretch) / q + stretch. */
                __u64 over = offcpu_weight(stretch, t->q) - stretch;

                weight = weight > over ? weight - over : 0;
                count(PROFD_CNT_OFFCPU_UNWIND_WAKES);
                count_add(PROFD_CNT_OFFCPU_STRETCH_NS, stretch);
        }
        if (offcpu_count(profd_gen & 1, key, 1, weight)) {
                count(PROFD_CNT_OFFCPU_RECORDED);
                count_add(PROFD_CNT_OFFCPU_RECORDED_NS, weight);
        }
        bpf_map_delete_elem(&offcpu_pending, &tid);
}

/* prev (current) leaves the CPU: true when this wait is to be unwound now (*ret_state: why it
 * waits). */
static __always_inline bool offcpu_switch_out(bool preempt, struct task_struct *prev, __u64 now,
                                              __u32 *ret_state)
{
        struct profd_offcpu_thread fresh = {}, *t;
        __u64 pid_tgid = bpf_get_current_pid_tgid();
        __u32 tid = (__u32)pid_tgid, state, q;

        if (tid == 0) /* the idle task */
                return false;
        if ((pid_tgid >> 32) == profd_self_tgid || task_is_kernel_thread(prev) ||
            !profd_sample_wanted(prev)) {
                count(PROFD_CNT_OFFCPU_UNWANTED);
                return false;
        }
        state = task_sched_state(prev);
        if (state & PROFD_TASK_DEAD) {
                /* Its last switch-out: it never comes back. */
                bpf_map_delete_elem(&offcpu_threads, &tid);
                count(PROFD_CNT_OFFCPU_EXITING);
                return false;
        }
        t = bpf_map_lookup_elem(&offcpu_threads, &tid);
        if (!t) {
                /* A thread's first wait: no prediction yet, so it is unwound. */
                fresh.pred_ns = profd_offcpu_threshold_ns;
                if (bpf_map_update_elem(&offcpu_threads, &tid, &fresh, BPF_NOEXIST) < 0 &&
                    !bpf_map_lookup_elem(&offcpu_threads, &tid)) {
                        count(PROFD_DROP_OFFCPU_THREADS_FULL);
                        return false;
                }
                t = bpf_map_lookup_elem(&offcpu_threads, &tid);
                if (!t) {
                        count(PROFD_DROP_OFFCPU_THREADS_FULL);
                        return false;
                }
        }
        count(PROFD_CNT_OFFCPU_SWITCH_OUTS);
        t->ts_ns = now;
        t->acct_ns = now;
        t->state = preempt || state == PROFD_TASK_RUNNING ? PROFD_OFFCPU_PREEMPTED : PROFD_OFFCPU_BLOCKED;
        *ret_state = t->state;

        /* q = predicted / threshold, within [Q_MIN, 1]; decided before the wait's length is known,
         * which is what keeps length / q unbiased. Preempted waits too: always unwinding them would
         * unwind every wakeup preemption, a third of the switches of a pipe ping-pong. */
        if (t->pred_ns >= profd_offcpu_threshold_ns)
                q = PROFD_OFFCPU_Q_ONE;
        else {
                q = (t->pred_ns << PROFD_OFFCPU_Q_SHIFT) / profd_offcpu_threshold_ns;
                if (q < PROFD_OFFCPU_Q_MIN)
                        q = PROFD_OFFCPU_Q_MIN;
        }
        t->q = q;
        t->unwound = 0;
        t->unwind_end_ns = 0;
        if (q < PROFD_OFFCPU_Q_ONE && (bpf_get_prandom_u32() & (PROFD_OFFCPU_Q_ONE - 1)) >= q) {
                t->wake_ns = PROFD_OFFCPU_NO_WAKE;
                count(PROFD_CNT_OFFCPU_SAMPLED_OUT);
                return false;
        }
        /* A preempted thread is runnable from the start: the whole unwind delays it. */
        t->wake_ns = t->state == PROFD_OFFCPU_PREEMPTED ? now : 0;
        offcpu_unwind_started_ns = now;
        return true;
}

/* End of an unwound switch-out's chain: its stacks go into this generation with a {0, 0} count (so
 * the daemon receives them now) and its key waits in offcpu_pending for the switch-in. False when
 * a map was full (counted). */
static __always_inline bool store_offcpu(struct sample_state *st)
{
        bool gen1 = st->gen != 0;
        struct profd_offcpu_key key = {};
        struct profd_offcpu_thread *t;
        __u32 tid = st->key.tid;

        hash_sample(st);
        key.key = st->key;
        key.state = st->offcpu_state;
        if (!store_stacks(st, gen1) || !offcpu_count(gen1, &key, 0, 0))
                return false;
        if (bpf_map_update_elem(&offcpu_pending, &tid, &key, BPF_ANY) < 0) {
                count(PROFD_DROP_OFFCPU_PENDING_FULL);
                return false;
        }
        t = bpf_map_lookup_elem(&offcpu_threads, &tid);
        if (!t) {
                /* Cannot be: the switch-out just found or made it, and only this thread's own
                 * last switch-out removes it. Counted with the lost keys all the same. */
                bpf_map_delete_elem(&offcpu_pending, &tid);
                count(PROFD_DROP_OFFCPU_PENDING_LOST);
                return false;
        }
        t->unwind_end_ns = bpf_ktime_get_ns();
        t->unwound = 1;
        count(PROFD_CNT_OFFCPU_UNWOUND);
        return true;
}

/* p is being woken (sched_waking, before its waker waits for it to leave its CPU): when its wait is
 * being unwound right now, remember when, for offcpu_stretch(). */
static __always_inline void offcpu_waking(struct task_struct *p)
{
        __u64 now = bpf_ktime_get_ns();
        struct profd_offcpu_thread *t;
        __u32 tid;

        if (now - offcpu_unwind_started_ns > PROFD_OFFCPU_UNWIND_WINDOW_NS)
                return;
        tid = BPF_CORE_READ(p, pid);
        t = bpf_map_lookup_elem(&offcpu_threads, &tid);
        /* wake_ns is 0 only from an unwound switch-out until the first wakeup; unwind_end_ns set:
         * the stack is stored, a wakeup from now on is not delayed by it. */
        if (!t || !t->ts_ns || t->wake_ns || t->unwind_end_ns)
                return;
        t->wake_ns = now;
}

struct offcpu_cut_ctx {
        __u64 now;
        bool gen1; /* the generation the cut retired */
};

/* bpf_for_each_map_elem callback: counts the part of an unwound wait in progress before the cut. */
static long offcpu_cut_one(void *map, __u32 *tid, struct profd_offcpu_thread *t, struct offcpu_cut_ctx *c)
{
        struct profd_offcpu_key *key;
        __u64 from = t->acct_ns;

        if (!t->unwound || !from || from >= c->now)
                return 0;
        /* Loses to a switch-in that took acct_ns meanwhile: it counts the whole rest. */
        if (__sync_val_compare_and_swap(&t->acct_ns, from, c->now) != from)
                return 0;
        key = bpf_map_lookup_elem(&offcpu_pending, tid);
        if (!key) {
                count(PROFD_DROP_OFFCPU_PENDING_LOST);
                return 0;
        }
        /* count 0: the wait is counted once, in the interval it ends in. */
        if (offcpu_count(c->gen1, key, 0, offcpu_weight(c->now - from, t->q)))
                count(PROFD_CNT_OFFCPU_CUT_PARTS);
        return 0;
}

/* Run by the daemon (BPF_PROG_TEST_RUN) right after it flipped profd_gen. */
static __always_inline void offcpu_cut(void)
{
        struct offcpu_cut_ctx c = {.now = bpf_ktime_get_ns(), .gen1 = !(profd_gen & 1)};

        bpf_for_each_map_elem(&offcpu_threads, offcpu_cut_one, &c, 0);
}
