/* SPDX-License-Identifier: GPL-2.0-only */
/* The sample under construction, shared by the entry program and every tail-called step: its
 * per-CPU state, the per-CPU error/stop counters, and the helpers every step uses to count and to
 * end the walk. Defines the maps "state" and "counters": include from profile.bpf.c only. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "profd-hotspot.h"
#include "profd-python.h"
#include "profd-v8.h"
#include "profd-sample.h"
#include "profd-unwind-pool.h"
#include "arch.bpf.h"

/* Which runtime's frames a build of the step program takes besides native ones (unwind_one's
 * kind, a constant per program): each build verifies alone, so the frame loop of one carries only
 * its own runtime's checks and a native process's samples pay for none. */
enum profd_step_kind {
        PROFD_STEP_NATIVE,  /* native frames (and the eval frames Python's walk needs) */
        PROFD_STEP_HOTSPOT, /* + the JVM's interpreted and compiled frames (hotspot.bpf.h) */
        PROFD_STEP_V8,      /* + V8's JavaScript frames (v8-frame.bpf.h) */
};

/* Most bytes of user stack copied per read: callers' frames lie just above, so one copy serves
 * several frames (each bpf_probe_read_user costs about as much as a 1 KiB copy). A read stops at
 * the end of its page (see read_stack), so one page is the most that is useful. */
#define PROFD_PAGE_SIZE 4096
#define PROFD_STACK_WINDOW PROFD_PAGE_SIZE
_Static_assert((PROFD_STACK_WINDOW & (PROFD_STACK_WINDOW - 1)) == 0, "window offset is masked");

/* Per-CPU sample under construction: survives tail calls, never nests: the perf_event hook does
 * not re-enter BPF on the same CPU, and the off-CPU chain runs in the scheduler with interrupts
 * off, where the cpu-clock timer cannot fire. The registers are arch.bpf.h's, by meaning. */
struct sample_state {
        __u64 ip, sp, fp; /* user registers of the frame being unwound */
        __u64 aux;        /* arch's extra register, for a CFA based on it (valid while aux_valid) */
        __u64 go_g;       /* Go's g (arch_regs.g) of the last registers set: a stack switch's key */
        __u32 gen;
        __u32 steps;
        __u32 stop; /* enum profd_stop_reason once done */
        __u32 done;
        __u32 exact;   /* ip is the interrupted pc (leaf, after a signal frame), not a return address */
        __u32 fp_only; /* pid not in the pool: frame pointers all the way */
        __u32 guess;   /* stop reason to report instead of the walk's own: the walk was unverified */
        __u32 cache_valid;
        __u32 ip_valid;     /* user registers were found */
        __u32 pool_gen;     /* profd_unwind_config.generation at sample start */
        __u32 proc_version; /* profd_unwind_proc.version at sample start */
        __u32 switches;     /* stack switches followed (PROFD_MAX_STACK_SWITCHES) */
        __u32 aux_valid;    /* aux is this frame's: not after a frame-pointer step */
        __u32 map_pid;      /* whose pool entries describe this memory: key.pid, or the parent a
                             * vfork child shares its mm with */
        __u32 offcpu;       /* an off-CPU wait starting (sched_switch), not a CPU sample */
        __u32 offcpu_state; /* enum profd_offcpu_state */
        /* The last process sample_find_process() found in unwind_procs on this CPU, what its
         * entry said (pc_version, pc_runtimes) and whose entries unwind it (pc_map_pid): valid
         * for pc_pid while unwind_procs_gen (bumped after every change of unwind_procs: the
         * daemon's writes and deletes, the exec and exit hooks' deletes) still reads pc_gen and
         * the task's mm is unchanged. Spares the hash lookup in most samples: a CPU mostly
         * samples one process in a row. */
        __u64 pc_gen;
        __u64 pc_mm;
        __u32 pc_valid, pc_pid, pc_map_pid, pc_version, pc_runtimes, _pad_pc;
        __u64 uhash;        /* hash of the user frames recorded so far */
        __u64 start_ns;     /* profd_measure_cost */
        __u64 entry_end_ns; /* profd_measure_cost: when the entry program tail-called */
        __u64 last_elf_pc;  /* previous DWARF lookup: recursion repeats a pc */
        __u32 last_shard, last_offset, last_rule;
        struct profd_unwind_mapping cache; /* entry of the previous frame's mapping */
        struct profd_python_proc py;       /* valid while py_active */
        __u64 py_frame;                    /* next Python frame to read; 0: none */
        __u32 py_active;                   /* the process runs CPython: walk its frames too */
        __u32 py_started;
        __u32 py_done;
        __u32 py_recorded;  /* Python frames recorded */
        __u64 py_last_code; /* code object whose fingerprint py_last_fp is (this sample) */
        __u32 py_last_fp;
        __u32 _pad1;
        struct profd_hotspot_proc hs; /* valid while hs_active */
        __u32 hs_active;              /* the process runs a HotSpot JVM: take its Java frames */
        __u32 hs_pending;        /* the last frame recorded is compiled Java code: profd_hotspot steps it */
        __u64 hs_interp_fp;      /* fp of the interpreted frame stepped last (its sender_sp slot) */
        struct profd_v8_proc v8; /* valid while v8_active */
        __u32 v8_active;         /* the process runs V8: note its JavaScript frames */
        __u32 step_prog;         /* tail-call slot of the step program for this process's runtime */
        __u64 win_base;          /* user address of win[0]; 0: empty */
        __u32 win_len;           /* bytes valid from win_base */
        __u8 win[PROFD_STACK_WINDOW + 16];
        __u8 py_code[PROFD_PY_FP_READ_MAX + 8]; /* a code object's fingerprint members */
        struct profd_count_key key;
        struct profd_stack user;
        struct profd_kstack kernel;
};

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, struct sample_state);
} state SEC(".maps");

/* enum profd_counter (profd-sample.h), summed over CPUs by the daemon. */
struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, PROFD_CNT__MAX);
        __type(key, __u32);
        __type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 idx)
{
        __u64 *v = bpf_map_lookup_elem(&counters, &idx);

        if (v)
                *v += 1;
}

static __always_inline void count_add(__u32 idx, __u64 n)
{
        __u64 *v = bpf_map_lookup_elem(&counters, &idx);

        if (v)
                *v += n;
}

static __always_inline struct sample_state *get_state(void)
{
        __u32 zero = 0;
        struct sample_state *st = bpf_map_lookup_elem(&state, &zero);

        if (!st)
                count(PROFD_DROP_NO_SCRATCH);
        return st;
}

/* Ends the native walk with reason (enum profd_stop_reason). */
static __always_inline void stop(struct sample_state *st, __u32 reason)
{
        st->stop = reason;
        st->done = 1;
}

/* The registers of the frame being unwound, as read from a context or a signal frame. */
static __always_inline void set_regs(struct sample_state *st, const struct arch_regs *r)
{
        st->ip = r->ip;
        st->sp = r->sp;
        st->fp = r->fp;
        st->aux = r->aux;
        st->go_g = r->g;
        st->aux_valid = 1;
}
