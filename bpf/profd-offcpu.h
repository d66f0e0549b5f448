/* SPDX-License-Identifier: GPL-2.0-only */
/* Off-CPU layout shared by bpf/profile.bpf.c and the daemon: where threads waited and for how long.
 * Includes nothing: BPF code gets __u32/__u64 from vmlinux.h, userspace from <linux/types.h>, and
 * struct profd_count_key from profd-sample.h (include that first). */
#pragma once

/* Why a thread left the CPU; offcpu_counts key. */
enum profd_offcpu_state {
        PROFD_OFFCPU_BLOCKED = 0,   /* it waited for something (prev_state != TASK_RUNNING) */
        PROFD_OFFCPU_PREEMPTED = 1, /* it could have run on: preempted, yielded (run-queue delay) */
        PROFD_OFFCPU_STATE__MAX,
};

/* Fixed point of the unwind probability q: 1 << PROFD_OFFCPU_Q_SHIFT is "always". */
#define PROFD_OFFCPU_Q_SHIFT 16

/* A wanted thread's off-CPU bookkeeping; offcpu_threads[tid]. */
struct profd_offcpu_thread {
        __u64 ts_ns;   /* bpf_ktime_get_ns() at the switch-out; 0: on CPU */
        __u64 pred_ns; /* predicted next wait: max(last wait, decayed previous prediction) */
        __u64 acct_ns; /* an unwound wait's time before this is counted (at cuts); 0: all of it */
        /* While its unwind runs the thread cannot be woken (it is still on its CPU): the part of
         * the wait between its wakeup and the unwind's end is counted once, not 1/q times. */
        __u64 wake_ns;       /* first wakeup seen while unwinding (a preempted wait: its switch-out);
                              * 0: none yet; PROFD_OFFCPU_NO_WAKE: not being unwound */
        __u64 unwind_end_ns; /* when its stack was stored; 0: not (yet) */
        __u32 state;         /* enum profd_offcpu_state of the current wait */
        __u32 q;             /* probability this wait was unwound with, << PROFD_OFFCPU_Q_SHIFT */
        __u32 unwound;       /* its stack is in offcpu_pending[tid] */
        __u32 _pad;
};
_Static_assert(sizeof(struct profd_offcpu_thread) == 56, "profd_offcpu_thread layout");

/* profd_offcpu_thread.wake_ns of a wait whose stack is not being unwound. */
#define PROFD_OFFCPU_NO_WAKE (~0ULL)

/* offcpu_counts[gen][key] += {1, weight}: the same key as a CPU sample plus the state. */
struct profd_offcpu_key {
        struct profd_count_key key;
        __u32 state; /* enum profd_offcpu_state */
        __u32 _pad;
};
_Static_assert(sizeof(struct profd_offcpu_key) == 72, "profd_offcpu_key layout");

/* Waits that ended in the interval and their estimated off-CPU nanoseconds: an unwound wait weighs
 * blocked_ns / q (docs/off-cpu.md), so the sum over a window is an unbiased estimate of the time the
 * key's threads spent off CPU. {0, 0}: the stacks of a wait still going on, stored in this
 * interval's generation (the daemon keeps them until the wait ends). */
struct profd_offcpu_value {
        __u64 count;
        __u64 ns;
};
_Static_assert(sizeof(struct profd_offcpu_value) == 16, "profd_offcpu_value layout");
