/* SPDX-License-Identifier: GPL-2.0-only */
/* Sample layout shared by bpf/profile.bpf.c and the daemon.
 * Includes nothing: BPF code gets __u32/__u64 from vmlinux.h, userspace from <linux/types.h>. */
#pragma once

/* Deepest user stack recorded completely; deeper stacks carry PROFD_STACK_TRUNCATED. */
#define PROFD_MAX_USER_FRAMES 512
/* Matches the kernel's default kernel.perf_event_max_stack. */
#define PROFD_MAX_KERNEL_FRAMES 127
#define PROFD_COMM_LEN 16

/* Number of enum profd_py_stop values (profd-python.h, checked there by the BPF side). */
#define PROFD_PY_STOP_COUNT 6
/* Number of enum profd_hs_event values (profd-hotspot.h, checked by the BPF side). */
#define PROFD_HS_EVENT_COUNT 8

/* Why a user stack ended; stored in the low byte of profd_stack.flags. */
enum profd_stop_reason {
        PROFD_STOP_OK = 0,          /* reached the outermost frame (_start / undefined RA / null fp) */
        PROFD_STOP_DEPTH = 1,       /* PROFD_MAX_USER_FRAMES reached: truncated */
        PROFD_STOP_BAD_READ = 2,    /* reading the user stack failed */
        PROFD_STOP_NO_MAPPING = 3,  /* pc in no known executable mapping */
        PROFD_STOP_NO_ROW = 4,      /* pc in a mapping but no unwind row */
        PROFD_STOP_UNSUPPORTED = 5, /* row whose rule the BPF side cannot evaluate */
        PROFD_STOP_UNKNOWN_PID = 6, /* process not (yet) known: walked with frame pointers, unverified */
        PROFD_STOP_BAD_FRAME = 7,   /* unwound sp/fp went backwards or pc is 0 mid-stack */
        PROFD_STOP_KERNEL_THREAD = 8,
        PROFD_STOP_TABLE_PENDING = 9, /* pc in a mapping whose unwind table is not in the pool yet */
        PROFD_STOP_IN_EXEC = 10, /* the task is inside exec: its registers and memory may be two images' */
        PROFD_STOP__MAX,
};

#define PROFD_STACK_REASON_MASK 0xffu
#define PROFD_STACK_TRUNCATED (1u << 8)
#define PROFD_STACK_DWARF (1u << 9) /* at least one frame came from DWARF rows */
/* Bits 12..15: 0 when no Python walk ran, else 1 + enum profd_py_stop (profd-python.h): how the
 * walk of the thread's Python frames, appended after the native frames, ended. */
#define PROFD_STACK_PY_SHIFT 12
#define PROFD_STACK_PY_MASK (0xfu << PROFD_STACK_PY_SHIFT)

/* Set in a user stack's ips[i] when the address is an exact pc (the sampled pc, or the pc a signal
 * interrupted, restored from the rt_sigframe) rather than a return address: symbolize it as is,
 * not as pc - 1. Never set in a user address (x86-64 user space ends at 2^47). daemon/sampler/sampler.c
 * strips it and hands the flag out as SampleRecord.user_exact. */
#define PROFD_FRAME_EXACT (1ULL << 63)

struct profd_stack {
        __u32 len;
        __u32 flags;
        __u64 ips[PROFD_MAX_USER_FRAMES];
};
_Static_assert(sizeof(struct profd_stack) == 8 + 8 * PROFD_MAX_USER_FRAMES, "profd_stack layout");

struct profd_kstack {
        __u32 len;
        __u32 _pad;
        __u64 ips[PROFD_MAX_KERNEL_FRAMES];
};
_Static_assert(sizeof(struct profd_kstack) == 8 + 8 * PROFD_MAX_KERNEL_FRAMES, "profd_kstack layout");

/* counts[gen][key] += 1. A hash of 0 means "no such stack". */
struct profd_count_key {
        __u32 pid; /* tgid */
        __u32 tid;
        __u64 user_hash;
        __u64 kernel_hash;
        __u64 cgroup_id;
        char comm[PROFD_COMM_LEN];        /* process (group leader) name */
        char thread_comm[PROFD_COMM_LEN]; /* thread name */
};
_Static_assert(sizeof(struct profd_count_key) == 64, "profd_count_key layout");

/* Per-CPU counters (BPF_MAP_TYPE_PERCPU_ARRAY "counters"), summed by the daemon and exported
 * on /metrics. Every path in the BPF programs that gives up bumps one of these. */
enum profd_counter {
        PROFD_CNT_SAMPLES = 0,          /* perf_event program invocations */
        PROFD_CNT_RECORDED,             /* samples counted in counts[] */
        PROFD_CNT_IDLE,                 /* samples of the idle task, not recorded by design */
        PROFD_CNT_FILTERED,             /* samples outside --pid/--comm/--unit/--cgroup filters */
        PROFD_DROP_COUNTS_FULL,         /* counts map full */
        PROFD_DROP_USER_STACKS_FULL,    /* stacks map full */
        PROFD_DROP_KERNEL_STACKS_FULL,  /* kernel stacks map full */
        PROFD_DROP_NO_SCRATCH,          /* per-CPU scratch lookup failed */
        PROFD_DROP_TAIL_CALL,           /* bpf_tail_call fell through */
        PROFD_ERR_KERNEL_STACK,         /* bpf_get_stack failed: sample kept without kernel frames */
        PROFD_ERR_USER_REGS,            /* no user registers: sample kept without user frames */
        PROFD_DROP_EVENTS_RINGBUF_FULL, /* process events lost: ring buffer full */
        PROFD_CNT_UNKNOWN_PID_FP,       /* pid's mappings not loaded yet: walked with frame pointers */
        PROFD_ERR_UNWIND_POOL,          /* mapping names a shard or rule that is not there */
        PROFD_CNT_RECORDED_NS,          /* with measure_cost: ns spent on recorded samples */
        PROFD_CNT_ENTRY_NS,             /* with measure_cost: of which in the entry program */
        PROFD_CNT_UNWIND_NS,            /* with measure_cost: of which in the step programs (and tail calls) */
        PROFD_STOP_REASON_BASE,         /* + enum profd_stop_reason: how user stacks ended */
        PROFD_CNT_PY_STACKS = PROFD_STOP_REASON_BASE + PROFD_STOP__MAX, /* Python walks started */
        PROFD_CNT_PY_FRAMES,            /* Python frames recorded */
        PROFD_CNT_PY_THREAD_WALKS,      /* thread lists walked to find a thread's PyThreadState */
        PROFD_PY_STOP_BASE,             /* + enum profd_py_stop: how Python walks ended */
        /* Python frames recorded without a fingerprint: their code object was not readable. */
        PROFD_CNT_PY_NO_FINGERPRINT = PROFD_PY_STOP_BASE + PROFD_PY_STOP_COUNT,
        PROFD_CNT_PY_EVENTS,              /* new Python stacks reported to the daemon */
        PROFD_CNT_PY_EVENTS_RATELIMITED,  /* not reported: the process's burst was used up */
        PROFD_CNT_PY_EVENTS_FULL,         /* not reported: ring buffer full */
        PROFD_CNT_SHARED_MM,              /* a vfork child's stack unwound with its parent's entries */
        PROFD_CNT_ROW_SEARCHES,           /* binary searches of a table page (row cache misses) */
        PROFD_CNT_PROC_LOOKUPS,           /* unwind_procs lookups (the per-CPU entry copy missed) */
        /* Off-CPU (bpf/off-cpu.bpf.h, docs/off-cpu.md) */
        PROFD_CNT_OFFCPU_SWITCH_OUTS,     /* switch-outs of wanted threads (waits started) */
        PROFD_CNT_OFFCPU_UNWANTED,        /* switch-outs not wanted: kernel thread, profd, filters */
        PROFD_CNT_OFFCPU_EXITING,         /* the last switch-out of an exiting thread */
        PROFD_CNT_OFFCPU_SAMPLED_OUT,     /* waits not unwound: the draw with probability q said no */
        PROFD_CNT_OFFCPU_UNWOUND,         /* waits unwound at their switch-out */
        PROFD_CNT_OFFCPU_SWITCH_INS,      /* waits ended (switch-ins of remembered threads) */
        PROFD_CNT_OFFCPU_RECORDED,        /* unwound waits counted in offcpu_counts[] at their end */
        PROFD_CNT_OFFCPU_RECORDED_NS,     /* their estimated off-CPU ns */
        PROFD_DROP_OFFCPU_THREADS_FULL,   /* thread not remembered: offcpu_threads full */
        PROFD_DROP_OFFCPU_PENDING_FULL,   /* unwound wait lost: offcpu_pending full */
        PROFD_DROP_OFFCPU_PENDING_LOST,   /* unwound wait whose key was gone at its end */
        PROFD_DROP_OFFCPU_COUNTS_FULL,    /* offcpu_counts map full */
        PROFD_CNT_OFFCPU_CUT_PARTS,       /* parts of waits in progress counted at a cut */
        PROFD_CNT_OFFCPU_UNWIND_WAKES,    /* wakeups of a thread while its wait was being unwound */
        PROFD_CNT_OFFCPU_STRETCH_NS,      /* ns those waits were lengthened by their unwind */
        /* V8 (bpf/v8.bpf.h): frame-pointer frames of V8 processes looked at */
        PROFD_CNT_V8_FRAMES,              /* JavaScript frames recorded */
        PROFD_CNT_V8_TYPED,               /* typed frames (entry, exit, stub...): no function */
        PROFD_CNT_V8_NOT_JS,              /* slots hold no tagged function: not a V8 frame */
        PROFD_CNT_V8_BAD_READ,            /* the frame's slots could not be read */
        PROFD_CNT_V8_NO_ROOM,             /* no stack slot left for the function */
        PROFD_CNT_V8_LEAF_UNSURE,         /* interrupted frame maybe in a prologue: JIT code's sent marked */
        PROFD_CNT_V8_BC_RECORDED,         /* interpreted frames' bytecode offsets recorded */
        PROFD_CNT_V8_BC_TOO_FAR,          /* ... not: beyond PROFD_V8_BC_OFFSET_MAX */
        PROFD_CNT_V8_BC_NO_ROOM,          /* ... not: no stack slot left */
        PROFD_CNT_V8_BC_BAD_READ,         /* ... not: the slots could not be read */
        PROFD_HS_CNT_BASE,                /* + enum profd_hs_event (profd-hotspot.h): JVM code frames */
        PROFD_CNT__MAX = PROFD_HS_CNT_BASE + PROFD_HS_EVENT_COUNT,
};
