// SPDX-License-Identifier: GPL-2.0-only
/* The sampler: a cpu-clock perf_event program on every CPU. This file holds the programs and
 * their wiring; what they do is in the headers, one concern each (docs/unwinder.md, "Files"):
 *
 *   profd_sample (entry)   pid/tid, comms, cgroup, kernel stack, user registers -> per-CPU state
 *   profd_step   (slot 0)  unwinds PROFD_FRAMES_PER_STEP user frames (unwind-frame.bpf.h), tail-calls
 *                          itself: DWARF rows from the table pool (step-dwarf.bpf.h), frame pointers
 *                          where a mapping has no table or the pid is not loaded yet
 *                          (step-frame-pointer.bpf.h)
 *   profd_python  (slot 1)  processes running CPython: appends the Python frames (python.bpf.h)
 *   profd_hotspot (slot 2)  compiled Java frames of a JVM (hotspot.bpf.h); its interpreted frames
 *                          are taken during profd_step
 *   finalize_body           run inline where the walk ends (entry, step, Python or HotSpot program):
 *                          hashes both stacks, stores each once, counts[key] += 1 (stack-store.bpf.h)
 *   profd_exec              forgets a pid's tables when it execs
 *   profd_offcpu_switch     sched_switch: ends next's wait, starts prev's and unwinds it when
 *                           drawn (off-cpu.bpf.h), through the same steps as tp_btf copies
 *                           (profd_offcpu_step/_python/_hotspot in "offcpu_progs")
 *   profd_offcpu_waking     sched_waking: when a thread is woken while its wait is being unwound
 *
 * Registers, frame layouts and the signal frame are the architecture's (arch.bpf.h). */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "profd-events.h"
#include "profd-python.h"
#include "profd-sample.h"
#include "profd-unwind-pool.h"

#include "task.bpf.h"
#include "arch.bpf.h"
#include "sample-state.bpf.h"
#include "stack-hash.bpf.h"
#include "stack-read.bpf.h"
#include "unwinder-events.bpf.h"
#include "pool-lookup.bpf.h"
#include "step-frame-pointer.bpf.h"
#include "step-dwarf.bpf.h"
#include "unwind-frame.bpf.h"
#include "python.bpf.h"
#include "v8.bpf.h"
#include "stack-store.bpf.h"
#include "filter.bpf.h"
#include "off-cpu.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Tail-call slots in "progs" (installed by daemon/sampler/sampler.c in this order). */
enum {
        PROFD_PROG_STEP = 0,
        PROFD_PROG_PYTHON = 1,
        PROFD_PROG_HOTSPOT = 2,
        PROFD_PROG_STEP_HOTSPOT = 3, /* the step program's builds per runtime (enum profd_step_kind) */
        PROFD_PROG_STEP_V8 = 4,
        PROFD_PROG__MAX,
};

struct {
        __uint(type, BPF_MAP_TYPE_PROG_ARRAY);
        __uint(max_entries, PROFD_PROG__MAX);
        __type(key, __u32);
        __type(value, __u32);
} progs SEC(".maps");

/* Kernel frames above __schedule in the off-CPU hook's stack: the program and bpf_trace_run4(). */
#define PROFD_OFFCPU_KSTACK_SKIP 2

/* The same slots for the off-CPU chain (tp_btf/sched_switch programs, profd_offcpu_*). */
struct {
        __uint(type, BPF_MAP_TYPE_PROG_ARRAY);
        __uint(max_entries, PROFD_PROG__MAX);
        __type(key, __u32);
        __type(value, __u32);
} offcpu_progs SEC(".maps");

/* User frames per step program. The kernel allows 33 tail calls per sample (MAX_TAIL_CALL_CNT);
 * we budget 31 steps (finalize runs inline in the last program, no tail call) so an off-by-one
 * between kernel versions cannot bite: ceil((PROFD_MAX_USER_FRAMES + 1) / PROFD_FRAMES_PER_STEP)
 * must stay <= 31 (the +1 is the probe that tells a complete 512-frame stack from a truncated one). 20 gives
 * 26 steps. The verifier walks every iteration of the frame loop (and of each frame's 17-step binary
 * search): with 20 frames the step programs verify in 110K-163K (5.10, 6.1) to 673K-809K (6.18) of the 1M
 * processed instructions allowed (docs/kernels.md): little room for more per-frame logic on 6.18,
 * none for twice the frames per step. Kernels before 5.17 define MAX_TAIL_CALL_CNT as 32: the budget of 32
 * fits them too. */
#define PROFD_FRAMES_PER_STEP 20
#define PROFD_MAX_STEPS 31
_Static_assert((PROFD_MAX_USER_FRAMES + 1 + PROFD_FRAMES_PER_STEP - 1) / PROFD_FRAMES_PER_STEP <=
                       PROFD_MAX_STEPS,
               "too few frames per step to reach PROFD_MAX_USER_FRAMES within the tail-call limit");
_Static_assert((PROFD_MAX_USER_FRAMES & (PROFD_MAX_USER_FRAMES - 1)) == 0, "frame index is masked");

/* A child made by vfork or posix_spawn (CLONE_VM, no CLONE_THREAD) runs in its parent's memory
 * until it execs: the same mm, so the parent's pool entries are its mappings exactly. The daemon
 * writes none for it (PROFD_EV_FORK_SHARED_MM): a build's thousands of spawns cost no map writes.
 * Sets st->map_pid to the parent's pid when it applies. */
static __always_inline struct profd_unwind_proc *shared_mm_parent(struct sample_state *st,
                                                                  struct task_struct *task)
{
        struct task_struct *parent = BPF_CORE_READ(task, group_leader, real_parent);
        struct mm_struct *mm = BPF_CORE_READ(task, mm);
        struct profd_unwind_proc *proc;
        __u32 ppid;

        if (!mm || !parent || BPF_CORE_READ(parent, mm) != mm)
                return NULL;
        ppid = BPF_CORE_READ(parent, tgid);
        proc = bpf_map_lookup_elem(&unwind_procs, &ppid);
        if (proc) {
                st->map_pid = ppid;
                count(PROFD_CNT_SHARED_MM);
        }
        return proc;
}

/* Benchmarks: time every recorded sample from entry to the end of finalize. */
const volatile bool profd_measure_cost = false;

/* Starts the sample of current in st: who it is, no frames yet. */
static __always_inline void sample_begin(struct sample_state *st, struct task_struct *task, __u64 pid_tgid,
                                         __u64 start_ns)
{
        st->gen = profd_gen & 1;
        st->start_ns = start_ns;
        st->steps = 0;
        st->stop = PROFD_STOP_OK;
        st->done = 0;
        st->exact = 1;
        st->fp_only = 1;
        st->guess = PROFD_STOP_OK;
        st->switches = 0;
        st->aux_valid = 0;
        st->uhash = PROFD_USER_HASH_SEED;
        st->ip_valid = 0;
        st->cache_valid = 0;
        st->win_base = 0;
        st->user.len = 0;
        st->user.flags = 0;
        st->py_active = 0;
        st->hs_active = 0;
        st->hs_pending = 0;
        st->hs_interp_fp = 0;
        st->py_started = 0;
        st->py_done = 0;
        st->py_recorded = 0;
        st->py_frame = 0;
        st->v8_active = 0;
        st->step_prog = PROFD_PROG_STEP;
        st->kernel.len = 0;
        st->kernel._pad = 0;
        st->offcpu = 0;
        st->offcpu_state = 0;

        __builtin_memset(&st->key, 0, sizeof(st->key));
        st->key.pid = pid_tgid >> 32;
        st->key.tid = (__u32)pid_tgid;
        st->map_pid = st->key.pid; /* sample_find_process() may make it the vfork parent's */
        st->key.cgroup_id = bpf_get_current_cgroup_id();
        bpf_get_current_comm(st->key.thread_comm, sizeof(st->key.thread_comm));
        /* The group leader's own samples: its name is the thread name (one helper call less). */
        if (st->key.pid == st->key.tid)
                __builtin_memcpy(st->key.comm, st->key.thread_comm, sizeof(st->key.comm));
        else
                BPF_CORE_READ_STR_INTO(&st->key.comm, task, group_leader, comm);
}

/* The user registers task saved on entry to the kernel (syscall, fault, interrupt): where a sample
 * that hit the kernel, and every switch-in, resumes user mode. */
static __always_inline void sample_task_regs(struct sample_state *st, struct task_struct *task,
                                             __u64 *user_mode)
{
        struct arch_regs regs;

        if (arch_task_user_regs(task, &regs, user_mode) < 0) {
                count(PROFD_ERR_USER_REGS);
                stop(st, PROFD_STOP_BAD_READ);
        } else {
                set_regs(st, &regs);
                st->ip_valid = 1;
        }
}

/* After the registers: a compat task keeps its pc alone; a process in the pool (or a vfork child
 * of one) is unwound with its entries, a CPython one also gets its Python frames. */
static __always_inline void sample_find_process(struct sample_state *st, struct task_struct *task,
                                                __u64 user_mode)
{
        if (st->ip_valid && arch_mode_is_compat(user_mode)) {
                /* A 32-bit (compat) task: neither its frames nor its CFI are the 64-bit ABI's.
                 * Keep the pc. */
                st->user.ips[0] = st->ip | PROFD_FRAME_EXACT;
                st->user.len = 1;
                st->uhash = hash_mix(st->uhash, st->user.ips[0]);
                stop(st, PROFD_STOP_UNSUPPORTED);
        }

        __u32 zero = 0;
        struct profd_unwind_config *cfg = bpf_map_lookup_elem(&unwind_config, &zero);

        if (!st->done && cfg && cfg->active) {
                struct profd_unwind_procs_gen *g = bpf_map_lookup_elem(&unwind_procs_gen, &zero);
                __u32 pid = st->key.pid, runtimes = 0;
                /* Read before unwind_procs (x86: loads stay in order, ARCH_LOADS_ORDERED): an
                 * entry found below is at least as new as this value, and every change of
                 * unwind_procs (daemon, exec and exit hooks) bumps it after the change. */
                __u64 procs_gen = g ? *(volatile __u64 *)&g->gen : 0;
                __u64 mm = task_mm(task);
                bool found = false;

                st->pool_gen = cfg->generation;
                st->map_pid = pid;
                if (ARCH_LOADS_ORDERED && g && st->pc_valid && st->pc_pid == pid &&
                    st->pc_gen == procs_gen && st->pc_mm == mm) {
                        st->map_pid = st->pc_map_pid;
                        st->proc_version = st->pc_version;
                        runtimes = st->pc_runtimes;
                        found = true;
                        if (st->map_pid != pid)
                                count(PROFD_CNT_SHARED_MM); /* as shared_mm_parent() */
                } else {
                        struct profd_unwind_proc *proc = bpf_map_lookup_elem(&unwind_procs, &pid);

                        count(PROFD_CNT_PROC_LOOKUPS);
                        if (!proc)
                                proc = shared_mm_parent(st, task);
                        st->pc_valid = 0;
                        if (proc) {
                                st->proc_version = proc->version;
                                runtimes = proc->runtimes;
                                found = true;
                        }
                        if (proc && ARCH_LOADS_ORDERED && g) {
                                st->pc_pid = pid;
                                st->pc_gen = procs_gen;
                                st->pc_mm = mm;
                                st->pc_map_pid = st->map_pid;
                                st->pc_version = st->proc_version;
                                st->pc_runtimes = runtimes;
                                st->pc_valid = 1;
                        }
                }
                if (found) {
                        st->fp_only = 0;
                        /* Only a process the daemon found CPython in pays for the lookup (not a
                         * vfork child: its Python frames would be its parent's thread's). */
                        if ((runtimes & PROFD_PROC_RUNTIME_PYTHON) && st->map_pid == pid) {
                                struct profd_python_proc *py = bpf_map_lookup_elem(&python_procs, &pid);

                                if (py) {
                                        st->py = *py;
                                        st->py_active = 1;
                                }
                        }
                        /* A JVM's Java frames are taken during the native walk (hotspot.bpf.h). */
                        if ((runtimes & PROFD_PROC_RUNTIME_HOTSPOT) && st->map_pid == pid) {
                                struct profd_hotspot_proc *hs = bpf_map_lookup_elem(&hotspot_procs, &pid);

                                if (hs) {
                                        st->hs = *hs;
                                        st->hs_active = 1;
                                        st->step_prog = PROFD_PROG_STEP_HOTSPOT;
                                }
                        }
                        /* Node's JavaScript frames are noted during the native walk (v8-frame.bpf.h). */
                        if ((runtimes & PROFD_PROC_RUNTIME_V8) && st->map_pid == pid) {
                                struct profd_v8_proc *v8 = bpf_map_lookup_elem(&v8_procs, &pid);

                                if (v8) {
                                        st->v8 = *v8;
                                        st->v8_active = 1;
                                        st->step_prog = PROFD_PROG_STEP_V8;
                                }
                        }
                } else {
                        /* Its code may have no frame pointers: a walk that ends "normally"
                         * may still be short, so the stack says it was not verified. */
                        st->guess = PROFD_STOP_UNKNOWN_PID;
                        count(PROFD_CNT_UNKNOWN_PID_FP);
                        report(st, PROFD_EV_UNKNOWN_PID, 0);
                }
        }
}

static __always_inline int finalize_body(void);

SEC("perf_event")
int profd_sample(struct bpf_perf_event_data *ctx)
{
        struct task_struct *task;
        struct sample_state *st;
        struct arch_regs regs;
        __u64 pid_tgid;
        bool in_kernel;
        __u64 user_mode;
        long n;

        __u64 start_ns = profd_measure_cost ? bpf_ktime_get_ns() : 0;

        count(PROFD_CNT_SAMPLES);

        pid_tgid = bpf_get_current_pid_tgid();
        if ((__u32)pid_tgid == 0) {
                count(PROFD_CNT_IDLE);
                return 0;
        }

        task = current_task();
        if (!profd_sample_wanted(task)) {
                count(PROFD_CNT_FILTERED);
                return 0;
        }

        st = get_state();
        if (!st)
                return 0;
        sample_begin(st, task, pid_tgid, start_ns);

        user_mode = arch_ctx_mode(ctx);
        in_kernel = arch_mode_in_kernel(user_mode);
        if (in_kernel) {
                n = bpf_get_stack(ctx, st->kernel.ips, sizeof(st->kernel.ips), 0);
                if (n < 0)
                        count(PROFD_ERR_KERNEL_STACK);
                else
                        st->kernel.len = n / sizeof(__u64);
        }

        if (task_is_kernel_thread(task)) {
                stop(st, PROFD_STOP_KERNEL_THREAD);
        } else if (!in_kernel) {
                arch_ctx_user_regs(ctx, &regs);
                set_regs(st, &regs);
                st->ip_valid = 1;
        } else {
                /* The sample hit a syscall, fault or interrupt: the user state is what the
                 * kernel saved on entry, at the top of the task's kernel stack. */
                sample_task_regs(st, task, &user_mode);
        }
        if (!st->done && task_in_exec(task))
                stop(st, PROFD_STOP_IN_EXEC); /* kernel frames only */
        sample_find_process(st, task, user_mode);

        if (profd_measure_cost)
                st->entry_end_ns = bpf_ktime_get_ns();
        if (st->done)
                return finalize_body();
        bpf_tail_call(ctx, &progs, st->step_prog);
        count(PROFD_DROP_TAIL_CALL);
        return 0;
}

/* Where the chain goes after a step or a run of compiled Java frames: the same decision for both
 * (step_body, hotspot_body), kept in one place so the two cannot drift apart. Past the step budget
 * the stack ends (truncated); once it ended, a pending Python walk runs before FINALIZE; otherwise
 * a compiled Java frame left pending goes to profd_hotspot, anything else to the step program.
 * A finished sample is finalized here, inlined, not in a tail-called program: one tail call less
 * per sample (~0.1 us with retpolines). Its code costs the verifier little: what the frame loop
 * left in registers and on the stack is dead there, so the paths that reach it are pruned. */
static __always_inline int chain_next(void *ctx, void *chain, struct sample_state *st)
{
        if (!st->done && st->steps >= PROFD_MAX_STEPS) {
                /* Unreachable from step_body with its frame budget; kept so the chain always ends. */
                st->user.flags |= PROFD_STACK_TRUNCATED;
                stop(st, PROFD_STOP_DEPTH);
        }
        if (st->done && st->py_active) {
                if (st->steps < PROFD_MAX_STEPS) {
                        bpf_tail_call(ctx, chain, PROFD_PROG_PYTHON);
                        count(PROFD_DROP_TAIL_CALL);
                        return 0;
                }
                py_stop(st, PROFD_PY_STOP_TAIL_CALLS);
        }
        if (st->done)
                return finalize_body();
        bpf_tail_call(ctx, chain, st->hs_pending ? PROFD_PROG_HOTSPOT : st->step_prog);
        count(PROFD_DROP_TAIL_CALL);
        return 0;
}

/* The unwinder's steps, once per program type: a tail call only reaches programs of its caller's
 * type, so the off-CPU hook has its own copies (SEC("tp_btf/sched_switch"), prog array
 * offcpu_progs) of the same code, which takes the prog array of its chain as an argument. */
static __always_inline int step_body(void *ctx, void *chain, const enum profd_step_kind kind)
{
        struct sample_state *st = get_state();

        if (!st)
                return 0;

        /* Bounded by the frames one program may verify (PROFD_FRAMES_PER_STEP, above). */
        for (int i = 0; i < PROFD_FRAMES_PER_STEP; i++) {
                if (unwind_one(st, kind))
                        break;
        }

        st->steps++;
        /* chain_next would pick PROFD_PROG_HOTSPOT here too; testing it first spares 6.18's
         * verifier ~27k instructions in profd_step_v8 (tests/qemu/bpf-load-check). */
        if (st->hs_pending && !st->done && st->steps < PROFD_MAX_STEPS) {
                bpf_tail_call(ctx, chain, PROFD_PROG_HOTSPOT);
                count(PROFD_DROP_TAIL_CALL);
                return 0;
        }
        return chain_next(ctx, chain, st);
}

static __always_inline int python_body(void *ctx, void *chain)
{
        struct sample_state *st = get_state();

        if (!st)
                return 0;
        st->steps++;
        if (!st->py_started) {
                struct task_struct *task = current_task();

                st->py_started = 1;
                if (!py_begin(st, task))
                        goto out;
        }
        {
                __u32 before = st->py_recorded;

                py_walk(st);
                count_add(PROFD_CNT_PY_FRAMES, st->py_recorded - before); /* once, not per frame */
        }
out:
        if (!st->py_done) {
                if (st->steps < PROFD_MAX_STEPS) {
                        bpf_tail_call(ctx, chain, PROFD_PROG_PYTHON);
                        count(PROFD_DROP_TAIL_CALL);
                        return 0;
                }
                py_stop(st, PROFD_PY_STOP_TAIL_CALLS);
        }
        return finalize_body();
}

/* Compiled Java frames (hotspot.bpf.h): stepped here rather than in the step program, whose frame
 * loop cannot carry a segment map walk 20 times; back to the step program for the interpreter and
 * native code. */
static __always_inline int hotspot_body(void *ctx, void *chain)
{
        struct sample_state *st = get_state();

        if (!st)
                return 0;
        st->steps++;
        hs_walk_compiled(st);
        return chain_next(ctx, chain, st);
}

static __always_inline int finalize_body(void)
{
        __u64 finalize_ns = profd_measure_cost ? bpf_ktime_get_ns() : 0;
        struct sample_state *st = get_state();
        __u32 reason;

        if (!st)
                return 0;

        reason = st->stop;
        if (st->guess != PROFD_STOP_OK && reason != PROFD_STOP_DEPTH)
                reason = st->guess;
        st->user.flags |= reason & PROFD_STACK_REASON_MASK;
        if (reason < PROFD_STOP__MAX)
                count(PROFD_STOP_REASON_BASE + reason);

        if (st->offcpu) {
                store_offcpu(st);
                return 0;
        }
        if (!store_sample(st))
                return 0;
        count(PROFD_CNT_RECORDED);
        if (profd_measure_cost) {
                count_add(PROFD_CNT_RECORDED_NS, bpf_ktime_get_ns() - st->start_ns);
                count_add(PROFD_CNT_ENTRY_NS, st->entry_end_ns - st->start_ns);
                count_add(PROFD_CNT_UNWIND_NS, finalize_ns - st->entry_end_ns);
        }
        return 0;
}

SEC("perf_event")
int profd_step(struct bpf_perf_event_data *ctx)
{
        return step_body(ctx, &progs, PROFD_STEP_NATIVE);
}

SEC("perf_event")
int profd_step_hotspot(struct bpf_perf_event_data *ctx)
{
        return step_body(ctx, &progs, PROFD_STEP_HOTSPOT);
}

SEC("perf_event")
int profd_step_v8(struct bpf_perf_event_data *ctx)
{
        return step_body(ctx, &progs, PROFD_STEP_V8);
}

SEC("perf_event")
int profd_python(struct bpf_perf_event_data *ctx)
{
        return python_body(ctx, &progs);
}

SEC("perf_event")
int profd_hotspot(struct bpf_perf_event_data *ctx)
{
        return hotspot_body(ctx, &progs);
}

/* Off-CPU (off-cpu.bpf.h, docs/off-cpu.md). The daemon loads these only with --off-cpu. */

/* Every context switch: next's wait ends; prev, current, starts one, unwound now if the draw says
 * so: its user registers are those its syscall, fault or interrupt entry saved, its user stack is
 * current's memory, and the kernel stack is where it called into the scheduler. A tail call only
 * reaches programs of the caller's type and attach point, so the chain below repeats the steps as
 * tp_btf/sched_switch programs (the same code; none of them is attached). tp_btf like profd_exec:
 * every kernel profd runs on (5.10+, BTF) has it, and no kprobe is needed (kernels built without
 * CONFIG_KPROBES have none). */
static __always_inline int offcpu_switch(void *ctx, bool preempt, struct task_struct *prev,
                                         struct task_struct *next, bool with_cut)
{
        struct sample_state *st;
        __u64 now = bpf_ktime_get_ns(), user_mode = 0;
        __u32 state = 0;
        long n;

        offcpu_switch_in(next, now, with_cut);
        if (!offcpu_switch_out(preempt, prev, now, &state))
                return 0;

        st = get_state();
        if (!st)
                return 0;
        sample_begin(st, prev, bpf_get_current_pid_tgid(), 0);
        st->offcpu = 1;
        st->offcpu_state = state;

        /* Where it called into the scheduler: skips this program and the tracepoint's
         * bpf_trace_run4(), so the stack starts at __schedule. */
        n = bpf_get_stack(ctx, st->kernel.ips, sizeof(st->kernel.ips), PROFD_OFFCPU_KSTACK_SKIP);
        if (n < 0)
                count(PROFD_ERR_KERNEL_STACK);
        else
                st->kernel.len = n / sizeof(__u64);

        /* Kernel threads were left out: prev entered the kernel from user mode. */
        sample_task_regs(st, prev, &user_mode);
        if (!st->done && task_in_exec(prev))
                stop(st, PROFD_STOP_IN_EXEC);
        sample_find_process(st, prev, user_mode);

        if (st->done)
                return finalize_body();
        bpf_tail_call(ctx, &offcpu_progs, st->step_prog);
        count(PROFD_DROP_TAIL_CALL);
        return 0;
}

/* The daemon loads one of these two (off-cpu.bpf.h, profd_offcpu_cut): with the cut where the
 * kernel has bpf_for_each_map_elem() (5.13), without before. */
SEC("tp_btf/sched_switch")
int BPF_PROG(profd_offcpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
        return offcpu_switch(ctx, preempt, prev, next, false);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(profd_offcpu_switch_cut, bool preempt, struct task_struct *prev, struct task_struct *next)
{
        return offcpu_switch(ctx, preempt, prev, next, true);
}

/* A thread is being woken: notes the time when its wait's unwind is still running, so the delay
 * the unwind adds is counted once (offcpu_stretch()). tp_btf (5.5) like sched_switch. */
SEC("tp_btf/sched_waking")
int BPF_PROG(profd_offcpu_waking, struct task_struct *p)
{
        offcpu_waking(p);
        return 0;
}

/* At every cut (run by the daemon, never attached): the part before the cut of each unwound wait in
 * progress goes into the interval the cut ended, so a window holds the time off CPU within it. */
SEC("raw_tp")
int profd_offcpu_cut(void *ctx)
{
        offcpu_cut();
        return 0;
}

SEC("tp_btf/sched_switch")
int profd_offcpu_step(void *ctx)
{
        return step_body(ctx, &offcpu_progs, PROFD_STEP_NATIVE);
}

SEC("tp_btf/sched_switch")
int profd_offcpu_step_hotspot(void *ctx)
{
        return step_body(ctx, &offcpu_progs, PROFD_STEP_HOTSPOT);
}

SEC("tp_btf/sched_switch")
int profd_offcpu_step_v8(void *ctx)
{
        return step_body(ctx, &offcpu_progs, PROFD_STEP_V8);
}

SEC("tp_btf/sched_switch")
int profd_offcpu_python(void *ctx)
{
        return python_body(ctx, &offcpu_progs);
}

SEC("tp_btf/sched_switch")
int profd_offcpu_hotspot(void *ctx)
{
        return hotspot_body(ctx, &offcpu_progs);
}

/* exec replaces every mapping of the process: its entries in the pool now describe the old image
 * and would unwind the new one with the wrong tables. Forget the pid until the daemon pushes
 * mappings read after this exec (table_pool_set_process_at() checks unwind_execs). */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(profd_exec, struct task_struct *p)
{
        __u32 pid = p->tgid;
        __u64 now = bpf_ktime_get_ns();

        bpf_map_update_elem(&unwind_execs, &pid, &now, BPF_ANY);
        bpf_map_delete_elem(&unwind_procs, &pid);
        /* After the delete: a sample reading the new value cannot find the old entry. */
        unwind_procs_changed();
        /* Its interpreter, if any, is gone too: the daemon describes the new image's. */
        bpf_map_delete_elem(&python_procs, &pid);
        bpf_map_delete_elem(&hotspot_procs, &pid);
        bpf_map_delete_elem(&v8_procs, &pid);
        return 0;
}

/* The exit of a whole process (its last thread: do_exit() drops signal->live to 0 before the
 * tracepoint, see bpf/events.bpf.c). Its unwind_procs and unwind_execs entries go here, not by two
 * bpf() calls of the daemon per exit: the daemon deletes them itself only when it wrote them after
 * this exit (table_pool_remove_exited()), and deletes the mapping entries, which only it knows. */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(profd_exit, struct task_struct *p)
{
        __u32 pid = p->tgid;

        if (p->flags & PF_KTHREAD_FLAG)
                return 0;
        if (BPF_CORE_READ(p, signal, live.counter) != 0)
                return 0;
        bpf_map_delete_elem(&unwind_procs, &pid);
        unwind_procs_changed(); /* a later process with this pid must not use a copy of it */
        bpf_map_delete_elem(&unwind_execs, &pid);
        return 0;
}
