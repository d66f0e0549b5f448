// SPDX-License-Identifier: GPL-2.0-only
/* The sampler: a cpu-clock perf_event program on every CPU.
 *
 *   profd_sample (entry)   pid/tid, comms, cgroup, kernel stack, user registers -> per-CPU state
 *   profd_step   (slot 0)  unwinds PROFD_FRAMES_PER_STEP user frames, tail-calls itself:
 *                          DWARF rows from the table pool (profd-unwind-pool.h), frame pointers
 *                          where a mapping has no table or the pid is not loaded yet
 *   profd_python  (slot 2)  processes running CPython: appends the Python frames (python.bpf.h)
 *   profd_finalize (slot 1) hashes both stacks, stores each once, counts[key] += 1
 *
 * Stacks and counts live in two generations of maps; .bss profd_gen says which one samples go to.
 * The daemon flips it, waits until every program that read the old value has finished, then
 * reads and empties the retired generation. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "profd-events.h"
#include "profd-python.h"
#include "profd-sample.h"
#include "profd-unwind-pool.h"
#include "profd-unwind-table.h"
#include "filter.bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Tail-call slots in "progs". */
enum {
        PROFD_PROG_STEP = 0,
        PROFD_PROG_FINALIZE = 1,
        PROFD_PROG_PYTHON = 2,
        PROFD_PROG__MAX,
};

/* User frames per step program. The kernel allows 33 tail calls per sample (MAX_TAIL_CALL_CNT);
 * we budget 32 so an off-by-one between kernel versions cannot bite: one is the finalize call,
 * so ceil((PROFD_MAX_USER_FRAMES + 1) / PROFD_FRAMES_PER_STEP) must stay <= 31 (the +1 is the
 * probe that tells a complete 512-frame stack from a truncated one). 20 gives 26 steps. The
 * verifier walks every iteration of the frame loop (and of each frame's 17-step binary search):
 * with 20 frames the step program verifies in 115K (5.10, 6.1) to 375K (6.18) of the 1M processed
 * instructions allowed (docs/kernels.md), so there is room for more per-frame logic but not for
 * twice the frames per step. Kernels before 5.17 define MAX_TAIL_CALL_CNT as 32: the budget of 32
 * fits them too. */
#define PROFD_FRAMES_PER_STEP 20
#define PROFD_MAX_STEPS 31
_Static_assert((PROFD_MAX_USER_FRAMES + 1 + PROFD_FRAMES_PER_STEP - 1) / PROFD_FRAMES_PER_STEP <=
                       PROFD_MAX_STEPS,
               "too few frames per step to reach PROFD_MAX_USER_FRAMES within the tail-call limit");
_Static_assert((PROFD_MAX_USER_FRAMES & (PROFD_MAX_USER_FRAMES - 1)) == 0, "frame index is masked");

/* x86-64: user stacks are 8-byte aligned at every call boundary. */
#define PROFD_FP_ALIGN 8
/* Frames above this are kernel addresses; a user return address there means a corrupt frame. */
#define PROFD_USER_ADDR_MAX 0x00007fffffffffffULL

#define PF_KTHREAD_FLAG 0x00200000
#define EEXIST 17
#define EFAULT 14
/* __USER32_CS: the code segment of 32-bit (compat) tasks; 64-bit tasks run with 0x33. */
#define PROFD_USER32_CS 0x23
/* Index of cs in x86-64 struct pt_regs viewed as __u64[]. */
#define PROFD_PT_REGS_CS_SLOT 17

/* Binary search over one 64 KiB text page: at most 65536 rows, so 17 halvings. */
#define PROFD_BSEARCH_STEPS 17
_Static_assert((1u << (PROFD_BSEARCH_STEPS - 1)) >= PROFD_UT_PAGE_SIZE, "bsearch bound");
/* Offsets of rbp, rsp, rip in the ucontext that rsp points at inside __restore_rt
 * (uc_flags, uc_link, uc_stack = 40 bytes, then mcontext gregs r8..r15, rdi, rsi, rbp, ..). */
#define PROFD_UC_RBP 120 /* rbx follows at 128 */
#define PROFD_UC_RSP 160
#define PROFD_UC_RIP 168
/* Most bytes of user stack copied per read: callers' frames lie just above, so one copy serves
 * several frames (each bpf_probe_read_user costs about as much as a 1 KiB copy). A read stops at
 * the end of its page (see read_stack), so one page is the most that is useful. */
#define PROFD_PAGE_SIZE 4096
#define PROFD_STACK_WINDOW PROFD_PAGE_SIZE
_Static_assert((PROFD_STACK_WINDOW & (PROFD_STACK_WINDOW - 1)) == 0, "window offset is masked");
/* Stack switches one sample may follow (Go: signal stack -> g0 -> goroutine is two); a bound,
 * since a switch step is not checked against sp and a corrupt chain could alternate. */
#define PROFD_MAX_STACK_SWITCHES 4
/* At most one unknown-pid/unknown-pc report per pid per second. */
#define PROFD_REPORT_INTERVAL_NS 1000000000ULL

/* Benchmarks: time every recorded sample from entry to the end of finalize. */
const volatile bool profd_measure_cost = false;
/* Kernel features, probed by the daemon before load (daemon/sampler/kernel-features.c). Code behind a false
 * one is dead: the verifier, which knows these frozen values, never looks at it, so helpers newer
 * than the running kernel may appear there. */
const volatile bool profd_have_task_btf = true;     /* bpf_get_current_task_btf(), 5.11 */
const volatile bool profd_have_task_pt_regs = true; /* bpf_task_pt_regs(), 5.15 */
/* Without bpf_task_pt_regs(): the user registers saved at syscall/interrupt entry sit at the top of
 * the task's kernel stack, as x86-64's task_pt_regs() computes them (no padding on x86-64). The
 * daemon sets THREAD_SIZE (16 KiB; 32 KiB with KASAN). */
const volatile __u32 profd_thread_size = 16384;

/* Generation samples are counted in; written by the daemon (see daemon/sampler/sampler.c). */
volatile __u32 profd_gen = 0;

/* Per-CPU sample under construction: survives tail calls, never nests (the perf_event hook
 * does not re-enter BPF on the same CPU). */
struct sample_state {
        __u64 ip, sp, bp; /* user registers of the frame being unwound */
        __u64 bx;         /* rbx, for a CFA based on it (valid while bx_valid) */
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
        __u32 bx_valid;     /* bx is this frame's rbx: not after a frame-pointer step */
        __u32 _pad0;
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
        __u32 py_recorded; /* Python frames recorded */
        __u64 win_base;                    /* user address of win[0]; 0: empty */
        __u32 win_len;                     /* bytes valid from win_base */
        __u8 win[PROFD_STACK_WINDOW + 16];
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

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, PROFD_CNT__MAX);
        __type(key, __u32);
        __type(value, __u64);
} counters SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_PROG_ARRAY);
        __uint(max_entries, PROFD_PROG__MAX);
        __type(key, __u32);
        __type(value, __u32);
} progs SEC(".maps");

/* Sizes are set by the daemon before load (frequency x CPUs x drain interval). Stack values are
 * 4 KiB: run-time allocation keeps an idle host from pinning max_entries x 4 KiB. */
#define PROFD_COUNTS_MAP(name)                                                                              \
        struct {                                                                                            \
                __uint(type, BPF_MAP_TYPE_HASH);                                                            \
                __uint(max_entries, 4096);                                                                  \
                __uint(map_flags, BPF_F_NO_PREALLOC);                                                       \
                __type(key, struct profd_count_key);                                                        \
                __type(value, __u64);                                                                       \
        } name SEC(".maps")
#define PROFD_STACKS_MAP(name, value_type)                                                                  \
        struct {                                                                                            \
                __uint(type, BPF_MAP_TYPE_HASH);                                                            \
                __uint(max_entries, 4096);                                                                  \
                __uint(map_flags, BPF_F_NO_PREALLOC);                                                       \
                __type(key, __u64);                                                                         \
                __type(value, value_type);                                                                  \
        } name SEC(".maps")

struct profd_shard_map {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1);
        __uint(map_flags, BPF_F_MMAPABLE);
        __uint(key_size, sizeof(__u32));
        __uint(value_size, sizeof(struct profd_shard)); /* no BTF: clang emits the struct as FWD */
};

/* Shards are created at run time by daemon/unwind/table-pool.c; the template above only fixes the
 * inner map's shape. */
struct {
        __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
        __uint(max_entries, PROFD_POOL_MAX_SHARDS);
        __type(key, __u32);
        __array(values, struct profd_shard_map);
} unwind_shards SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, PROFD_POOL_MAX_RULES);
        __type(key, __u32);
        __type(value, struct profd_unwind_rule);
} unwind_rules SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_LPM_TRIE);
        __uint(max_entries, PROFD_POOL_MAX_MAPPING_ENTRIES);
        __uint(map_flags, BPF_F_NO_PREALLOC); /* required by LPM tries */
        __type(key, struct profd_unwind_mapping_key);
        __type(value, struct profd_unwind_mapping);
} unwind_mappings SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, PROFD_POOL_MAX_PROCS);
        __type(key, __u32);
        __type(value, struct profd_unwind_proc);
} unwind_procs SEC(".maps");

/* pid -> time of its last exec. LRU: only recent execs matter (a push of mappings read before
 * them), older ones may be forgotten. */
struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, PROFD_POOL_MAX_EXECS);
        __type(key, __u32);
        __type(value, __u64);
} unwind_execs SEC(".maps");

/* active = 1 once daemon/unwind/table-pool.c exists; before that every stack is walked with frame
 * pointers and no pid is reported as unknown (nobody would read the reports). */
struct {
        __uint(type, BPF_MAP_TYPE_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, struct profd_unwind_config);
} unwind_config SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, PROFD_ROW_CACHE_SIZE);
        __type(key, __u32);
        __type(value, struct profd_row_cache_entry);
} row_cache SEC(".maps");
_Static_assert((PROFD_ROW_CACHE_SIZE & (PROFD_ROW_CACHE_SIZE - 1)) == 0, "row cache index is masked");

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, PROFD_MAPPING_CACHE_SIZE);
        __type(key, __u32);
        __type(value, struct profd_mapping_cache_entry);
} mapping_cache SEC(".maps");
_Static_assert((PROFD_MAPPING_CACHE_SIZE & (PROFD_MAPPING_CACHE_SIZE - 1)) == 0,
               "mapping cache index is masked");

/* Unknown pid / pc reports for the process tracker (struct profd_event). */
struct {
        __uint(type, BPF_MAP_TYPE_RINGBUF);
        __uint(max_entries, 64 * 1024);
} unwinder_events SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, 8192);
        __type(key, __u32);
        __type(value, __u64);
} unwind_reported SEC(".maps");

PROFD_COUNTS_MAP(counts_0);
PROFD_COUNTS_MAP(counts_1);
PROFD_STACKS_MAP(stacks_0, struct profd_stack);
PROFD_STACKS_MAP(stacks_1, struct profd_stack);
PROFD_STACKS_MAP(kstacks_0, struct profd_kstack);
PROFD_STACKS_MAP(kstacks_1, struct profd_kstack);

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

static __always_inline void stop(struct sample_state *st, __u32 reason)
{
        st->stop = reason;
        st->done = 1;
}

/* One multiply per frame (this loop runs over up to 512 frames per sample). For a fixed v the
 * step is a bijection of h, so two stacks that differ in a single frame never collide;
 * hash_final then spreads the bits. */
#define PROFD_USER_HASH_SEED 0x9e3779b97f4a7c15ULL

static __always_inline __u64 hash_mix(__u64 h, __u64 v)
{
        h ^= v;
        h = (h << 29) | (h >> 35);
        return h * 0x9e3779b97f4a7c15ULL;
}

static __always_inline __u64 hash_final(__u64 h)
{
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
        h *= 0xc4ceb9fe1a85ec53ULL;
        h ^= h >> 33;
        return h ? h : 1; /* 0 means "no stack" */
}

/* Reads 16 bytes of user stack at addr through the window, refilling it from addr to the end of
 * addr's page on a miss. Within 16 bytes of a page end only the need (8 or 16) bytes the caller
 * uses are read, exactly. */
static __always_inline int read_stack(struct sample_state *st, __u64 addr, __u64 ret[2], __u32 need)
{
        __u64 off = addr - st->win_base;

        if (!st->win_base || addr < st->win_base || off + 16 > st->win_len) {
                /* Up to the end of addr's page: that page is mapped (the frame is there), so the
                 * read never faults. A read past the top of the stack mapping would, and a fault
                 * costs ~0.8 us, more than several reads. */
                __u32 len = PROFD_PAGE_SIZE - (addr & (PROFD_PAGE_SIZE - 1));

                if (len > PROFD_STACK_WINDOW)
                        len = PROFD_STACK_WINDOW;
                if (len < 16 || bpf_probe_read_user(st->win, len, (void *)addr) < 0) {
                        st->win_base = 0;
                        ret[1] = 0;
                        return bpf_probe_read_user(ret, need == 8 ? 8 : 16, (void *)addr);
                }
                st->win_base = addr;
                st->win_len = len;
                off = 0;
        }
        off &= PROFD_STACK_WINDOW - 1;
        __builtin_memcpy(ret, st->win + off, 16);
        return 0;
}

/* Frame-pointer step: [bp] = caller's bp, [bp + 8] = return address. Validated: bp must lie
 * above sp and be aligned, and the chain must move up the stack (checked on the next call via
 * bp >= sp). Returns true when unwinding ended. */
static __always_inline bool step_frame_pointer(struct sample_state *st)
{
        __u64 frame[2];

        if (st->bp == 0) {
                stop(st, PROFD_STOP_OK);
                return true;
        }
        if (st->bp < st->sp || (st->bp & (PROFD_FP_ALIGN - 1))) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        if (read_stack(st, st->bp, frame, 16) < 0) {
                stop(st, PROFD_STOP_BAD_READ);
                return true;
        }
        if (frame[1] == 0) {
                stop(st, PROFD_STOP_OK);
                return true;
        }
        if (frame[1] > PROFD_USER_ADDR_MAX) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        st->sp = st->bp + 16;
        st->bp = frame[0];
        st->ip = frame[1];
        st->exact = 0;
        st->bx_valid = 0; /* no table says where a callee saved it */
        return false;
}

static __always_inline void report(struct sample_state *st, __u32 type, __u64 addr)
{
        __u32 pid = st->key.pid;
        __u64 now = bpf_ktime_get_ns(), *last;
        struct profd_event *ev;

        last = bpf_map_lookup_elem(&unwind_reported, &pid);
        if (last && now - *last < PROFD_REPORT_INTERVAL_NS)
                return;
        bpf_map_update_elem(&unwind_reported, &pid, &now, BPF_ANY);

        ev = bpf_ringbuf_reserve(&unwinder_events, sizeof(*ev), 0);
        if (!ev) {
                count(PROFD_DROP_EVENTS_RINGBUF_FULL);
                return;
        }
        ev->type = type;
        ev->pid = pid;
        ev->ppid = 0;
        ev->_pad = 0;
        ev->addr = addr;
        ev->len = 0;
        ev->ktime_ns = now;
        bpf_ringbuf_submit(ev, 0);
}

/* __restore_rt: rsp points at the ucontext the kernel saved when delivering the signal; the
 * interrupted frame continues from its registers, with an exact pc. */
static __always_inline bool step_signal(struct sample_state *st)
{
        __u64 uc = st->sp, regs[4];

        if (bpf_probe_read_user(&regs[0], 16, (void *)(uc + PROFD_UC_RBP)) < 0 ||
            bpf_probe_read_user(&regs[2], 16, (void *)(uc + PROFD_UC_RSP)) < 0) {
                stop(st, PROFD_STOP_BAD_READ);
                return true;
        }
        /* The trampoline's own frame: its "return address" is __restore_rt itself (the handler
         * returns there), so it is symbolized as is too (pc - 1 is the nop glibc puts before it
         * for unwinders that look up pc - 1, outside the symbol). */
        st->user.ips[(st->user.len - 1) & (PROFD_MAX_USER_FRAMES - 1)] |= PROFD_FRAME_EXACT;
        st->uhash = hash_mix(st->uhash, PROFD_FRAME_EXACT); /* the frame above changed */
        st->bp = regs[0];
        st->bx = regs[1];
        st->bx_valid = 1;
        st->sp = regs[2];
        st->ip = regs[3];
        st->exact = 1;
        if (st->ip == 0 || st->ip > PROFD_USER_ADDR_MAX) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        return false;
}

static __always_inline void remember_rule(struct sample_state *st, const struct profd_unwind_mapping *m,
                                          __u64 elf_pc, __u32 rule)
{
        st->last_elf_pc = elf_pc;
        st->last_shard = m->shard;
        st->last_offset = m->offset;
        st->last_rule = rule;
}

/* Global index + 1 of the rule in force at elf_pc in m's table; 0 if none (unwinding stopped if
 * the pool itself is broken). */
static __always_inline __u32 find_rule(struct sample_state *st, const struct profd_unwind_mapping *m,
                                       __u64 elf_pc)
{
        __u32 page, slot, zero = 0, lo, hi, l, r, rows, w, ci;
        struct profd_row_cache_entry *ce;
        struct profd_shard *sh;
        __u16 target;
        void *inner;

        if (elf_pc < m->base || ((elf_pc - m->base) >> PROFD_UT_PAGE_SHIFT) >= m->n_pages)
                return 0;

        if (st->last_rule && st->last_elf_pc == elf_pc && st->last_offset == m->offset &&
            st->last_shard == m->shard)
                return st->last_rule;

        ci = ((elf_pc ^ m->offset) * 0x9e3779b97f4a7c15ULL) >> 54;
        ci &= PROFD_ROW_CACHE_SIZE - 1;
        ce = bpf_map_lookup_elem(&row_cache, &ci);
        if (ce && ce->rule && ce->elf_pc == elf_pc && ce->offset == m->offset && ce->shard == m->shard &&
            ce->generation == st->pool_gen) {
                remember_rule(st, m, elf_pc, ce->rule);
                return ce->rule;
        }
        page = (elf_pc - m->base) >> PROFD_UT_PAGE_SHIFT;
        target = elf_pc & (PROFD_UT_PAGE_SIZE - 1);

        slot = m->shard;
        inner = bpf_map_lookup_elem(&unwind_shards, &slot);
        sh = inner ? bpf_map_lookup_elem(inner, &zero) : NULL;
        if (!sh) {
                count(PROFD_ERR_UNWIND_POOL);
                stop(st, PROFD_STOP_NO_ROW);
                return 0;
        }

        lo = sh->words[(m->offset + page) & (PROFD_SHARD_WORDS - 1)];
        hi = sh->words[(m->offset + page + 1) & (PROFD_SHARD_WORDS - 1)];
        rows = m->offset + m->n_pages + 1;

        /* First row of [lo, hi) whose pc_low is above target; the row in force is the one before. */
        l = lo;
        r = hi;
        for (int i = 0; i < PROFD_BSEARCH_STEPS; i++) {
                __u32 mid;

                if (l >= r)
                        break;
                mid = l + (r - l) / 2;
                w = sh->words[(rows + mid) & (PROFD_SHARD_WORDS - 1)];
                if ((w & 0xffff) <= target)
                        l = mid + 1;
                else
                        r = mid;
        }
        if (l <= lo || l > hi)
                return 0;
        w = sh->words[(rows + l - 1) & (PROFD_SHARD_WORDS - 1)];
        if (ce) {
                ce->elf_pc = elf_pc;
                ce->shard = m->shard;
                ce->offset = m->offset;
                ce->generation = st->pool_gen;
                ce->rule = (w >> 16) + 1;
        }
        remember_rule(st, m, elf_pc, (w >> 16) + 1);
        return (w >> 16) + 1;
}

/* Go's systemstack, morestack and asmcgocall run their callee on the thread's g0 stack; their
 * callers are on the goroutine's stack. The callee saved the goroutine's rbp (the frame pointer
 * of the function that called systemstack), and Go keeps frame pointers, so one frame-pointer
 * step from it lands on the goroutine's stack, wherever that lies. As in perf's frame-pointer
 * walk, the function that called systemstack itself is not seen (its return address is kept only
 * in the goroutine's g.sched). Stacks may interleave in any order, so the step is not checked
 * against sp; PROFD_MAX_STACK_SWITCHES bounds how often a sample takes it. */
static __always_inline bool step_stack_switch(struct sample_state *st)
{
        __u64 frame[2];

        if (st->switches >= PROFD_MAX_STACK_SWITCHES || st->bp == 0 || (st->bp & (PROFD_FP_ALIGN - 1)) ||
            st->bp > PROFD_USER_ADDR_MAX) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        st->switches++;
        if (read_stack(st, st->bp, frame, 16) < 0) {
                stop(st, PROFD_STOP_BAD_READ);
                return true;
        }
        if (frame[1] == 0 || frame[1] > PROFD_USER_ADDR_MAX) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        st->sp = st->bp + 16;
        st->bp = frame[0];
        st->ip = frame[1];
        st->exact = 0;
        st->bx_valid = 0;
        return false;
}

/* No CFI covers the pc (hand-written assembly, a gap between functions): a validated
 * frame-pointer step. Unverified: unless CFI later leads to the outermost frame, the stack reports
 * no_row however it ends. */
static __always_inline bool step_no_row(struct sample_state *st)
{
        if (st->guess == PROFD_STOP_OK)
                st->guess = PROFD_STOP_NO_ROW;
        return step_frame_pointer(st);
}

/* One DWARF step: the rule in force at pc, then CFA = rsp|rbp + offset (or the PLT forms),
 * return address at CFA - 8, rbp restored from CFA + offset when saved. Returns true when
 * unwinding ended. */
static __always_inline bool step_dwarf(struct sample_state *st, const struct profd_unwind_mapping *m,
                                       __u64 lookup_pc)
{
        __u32 rule_idx = find_rule(st, m, lookup_pc - m->load_bias);
        struct profd_unwind_rule *rule;
        __u64 cfa, ra, saved[2];

        if (!rule_idx)
                return st->done ? true : step_no_row(st);
        rule_idx--;
        rule = bpf_map_lookup_elem(&unwind_rules, &rule_idx);
        if (!rule) {
                count(PROFD_ERR_UNWIND_POOL);
                stop(st, PROFD_STOP_NO_ROW);
                return true;
        }

        switch (rule->cfa_kind) {
        case PROFD_CFA_RSP:
                cfa = st->sp + rule->cfa_offset;
                break;
        case PROFD_CFA_RBP:
                cfa = st->bp + rule->cfa_offset;
                break;
        case PROFD_CFA_RBX:
                if (!st->bx_valid) {
                        stop(st, PROFD_STOP_UNSUPPORTED);
                        return true;
                }
                cfa = st->bx + rule->cfa_offset;
                break;
        case PROFD_CFA_PLT1:
                cfa = st->sp + 8 + ((lookup_pc & 15) >= 11 ? 8 : 0);
                break;
        case PROFD_CFA_PLT2:
                cfa = st->sp + 8 + ((lookup_pc & 15) >= 10 ? 8 : 0);
                break;
        case PROFD_CFA_SIGNAL:
                return step_signal(st);
        case PROFD_CFA_UNDEF:
                /* The outermost frame, found by CFI: whatever a frame-pointer step guessed on
                 * the way led to the real bottom of the stack. */
                if (st->guess == PROFD_STOP_NO_ROW)
                        st->guess = PROFD_STOP_OK;
                stop(st, PROFD_STOP_OK);
                return true;
        case PROFD_CFA_END:
                return step_no_row(st);
        case PROFD_CFA_GO_SWITCH:
                return step_stack_switch(st);
        default:
                stop(st, PROFD_STOP_UNSUPPORTED);
                return true;
        }

        /* The caller's frame lies above ours: a CFA at or below sp is a wrong row or a corrupt
         * register, and following it could loop. */
        if (cfa <= st->sp || (cfa & 7)) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        if (rule->rbp_kind == PROFD_RBP_CFA_OFFSET && rule->rbp_offset == -16) {
                /* push rbp right after the call: saved rbp and return address in one read. */
                if (read_stack(st, cfa - 16, saved, 16) < 0) {
                        stop(st, PROFD_STOP_BAD_READ);
                        return true;
                }
                st->bp = saved[0];
                ra = saved[1];
        } else {
                if (read_stack(st, cfa - 8, saved, 8) < 0) {
                        stop(st, PROFD_STOP_BAD_READ);
                        return true;
                }
                ra = saved[0];
                if (rule->rbp_kind == PROFD_RBP_CFA_OFFSET) {
                        if (read_stack(st, cfa + rule->rbp_offset, saved, 8) < 0) {
                                stop(st, PROFD_STOP_BAD_READ);
                                return true;
                        }
                        st->bp = saved[0];
                }
        }
        if (rule->rbx_kind == PROFD_RBP_CFA_OFFSET) {
                /* Only a CFA based on rbx needs it: a failed read loses rbx, not the stack. */
                if (read_stack(st, cfa + rule->rbx_offset, saved, 8) < 0)
                        st->bx_valid = 0;
                else
                        st->bx = saved[0];
        } else if (rule->rbx_kind == PROFD_RBX_UNKNOWN)
                st->bx_valid = 0;
        if (ra == 0) {
                stop(st, PROFD_STOP_OK);
                return true;
        }
        if (ra > PROFD_USER_ADDR_MAX) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        st->sp = cfa;
        st->ip = ra;
        st->exact = 0;
        return false;
}

/* Records st->ip, then finds its caller. Returns true when unwinding ended. */
static __always_inline bool unwind_one(struct sample_state *st)
{
        struct profd_unwind_mapping_key key;
        struct profd_unwind_mapping *m;
        __u32 len = st->user.len;
        __u64 lookup_pc;

        if (len >= PROFD_MAX_USER_FRAMES) {
                /* A frame remains beyond the last slot: the stack is deeper than we record. */
                st->user.flags |= PROFD_STACK_TRUNCATED;
                stop(st, PROFD_STOP_DEPTH);
                return true;
        }
        __u64 rec = st->exact ? st->ip | PROFD_FRAME_EXACT : st->ip;

        if (st->py_active) {
                __u64 pc = st->exact ? st->ip : st->ip - 1;

                if (pc >= st->py.eval_start && pc < st->py.eval_end)
                        rec |= PROFD_FRAME_PY_EVAL; /* where the daemon puts Python frames */
        }

        st->user.ips[len & (PROFD_MAX_USER_FRAMES - 1)] = rec;
        st->user.len = len + 1;
        st->uhash = hash_mix(st->uhash, rec);

        if (st->fp_only)
                return step_frame_pointer(st);

        /* A return address may lie just past its call's function (a noreturn call at the end):
         * look up the call instruction instead. */
        lookup_pc = st->exact ? st->ip : st->ip - 1;
        m = &st->cache;
        if (!st->cache_valid || lookup_pc < m->start || lookup_pc >= m->end) {
                __u32 ci = ((lookup_pc >> 16) ^ ((__u64)st->key.pid << 20)) * 0x9e3779b97f4a7c15ULL >> 56;
                struct profd_mapping_cache_entry *ce;

                ci &= PROFD_MAPPING_CACHE_SIZE - 1;
                ce = bpf_map_lookup_elem(&mapping_cache, &ci);
                if (ce && ce->valid && ce->pid == st->key.pid && ce->version == st->proc_version &&
                    ce->generation == st->pool_gen && lookup_pc >= ce->m.start && lookup_pc < ce->m.end) {
                        st->cache = ce->m;
                } else {
                        key.prefixlen = 32 + 64;
                        key.pid_be = __builtin_bswap32(st->key.pid);
                        key.addr_be = __builtin_bswap64(lookup_pc);
                        m = bpf_map_lookup_elem(&unwind_mappings, &key);
                        if (!m) {
                                report(st, PROFD_EV_UNKNOWN_PC, st->ip);
                                stop(st, PROFD_STOP_NO_MAPPING);
                                return true;
                        }
                        st->cache = *m;
                        if (ce) {
                                ce->pid = st->key.pid;
                                ce->version = st->proc_version;
                                ce->generation = st->pool_gen;
                                ce->m = *m;
                                ce->valid = 1;
                        }
                }
                st->cache_valid = 1;
                m = &st->cache;
        }
        if (m->flags & PROFD_MAPPING_TABLE_PENDING) {
                /* Frame pointers would be a guess (most code has none) that could end in a
                 * plausible but short stack; the table arrives within milliseconds. */
                stop(st, PROFD_STOP_TABLE_PENDING);
                return true;
        }
        if (m->flags & PROFD_MAPPING_NO_TABLE)
                return step_frame_pointer(st);
        st->user.flags |= PROFD_STACK_DWARF;
        return step_dwarf(st, m, lookup_pc);
}

#include "python.bpf.h"

static __always_inline bool task_is_kernel_thread(struct task_struct *task)
{
        if (profd_have_task_btf)
                return (task->flags & PF_KTHREAD_FLAG) || !task->mm;
        return (BPF_CORE_READ(task, flags) & PF_KTHREAD_FLAG) || !BPF_CORE_READ(task, mm);
}

/* The user registers of current, interrupted in the kernel (syscall, fault, interrupt): what the
 * kernel saved on entry, at the top of the task's kernel stack. -EFAULT when they are not a 64-bit
 * user context (a kernel thread's, or unreadable). */
static __always_inline int user_regs(struct task_struct *task, struct sample_state *st, __u64 *ret_cs)
{
        struct pt_regs regs;

        if (profd_have_task_btf && profd_have_task_pt_regs) {
                struct pt_regs *u = (struct pt_regs *)bpf_task_pt_regs(task);

                if (!u)
                        return -EFAULT;
                regs.ip = u->ip;
                regs.sp = u->sp;
                regs.bp = u->bp;
                regs.bx = u->bx;
                regs.cs = u->cs;
        } else {
                void *stack = BPF_CORE_READ(task, stack);

                if (!stack ||
                    bpf_probe_read_kernel(&regs, sizeof(regs), stack + profd_thread_size - sizeof(regs)) < 0)
                        return -EFAULT;
        }
        if ((regs.cs & 3) != 3)
                return -EFAULT;
        st->ip = regs.ip;
        st->sp = regs.sp;
        st->bp = regs.bp;
        st->bx = regs.bx;
        st->bx_valid = 1;
        *ret_cs = regs.cs & 0xffff;
        return 0;
}

SEC("perf_event")
int profd_sample(struct bpf_perf_event_data *ctx)
{
        struct task_struct *task;
        struct sample_state *st;
        __u64 pid_tgid;
        bool in_kernel;
        __u64 user_cs;
        long n;

        __u64 start_ns = profd_measure_cost ? bpf_ktime_get_ns() : 0;

        count(PROFD_CNT_SAMPLES);

        pid_tgid = bpf_get_current_pid_tgid();
        if ((__u32)pid_tgid == 0) {
                count(PROFD_CNT_IDLE);
                return 0;
        }

        /* Untyped on kernels before 5.11: every field below is read with BPF_CORE_READ. */
        task = profd_have_task_btf ? bpf_get_current_task_btf()
                                   : (struct task_struct *)bpf_get_current_task();
        if (!profd_sample_wanted(task)) {
                count(PROFD_CNT_FILTERED);
                return 0;
        }

        st = get_state();
        if (!st)
                return 0;

        st->gen = profd_gen & 1;
        st->start_ns = start_ns;
        st->steps = 0;
        st->stop = PROFD_STOP_OK;
        st->done = 0;
        st->exact = 1;
        st->fp_only = 1;
        st->guess = PROFD_STOP_OK;
        st->switches = 0;
        st->bx_valid = 0;
        st->uhash = PROFD_USER_HASH_SEED;
        st->ip_valid = 0;
        st->cache_valid = 0;
        st->win_base = 0;
        st->user.len = 0;
        st->user.flags = 0;
        st->py_active = 0;
        st->py_started = 0;
        st->py_done = 0;
        st->py_recorded = 0;
        st->py_frame = 0;
        st->kernel.len = 0;
        st->kernel._pad = 0;

        __builtin_memset(&st->key, 0, sizeof(st->key));
        st->key.pid = pid_tgid >> 32;
        st->key.tid = (__u32)pid_tgid;
        st->key.cgroup_id = bpf_get_current_cgroup_id();
        bpf_get_current_comm(st->key.thread_comm, sizeof(st->key.thread_comm));
        /* The group leader's own samples: its name is the thread name (one helper call less). */
        if (st->key.pid == st->key.tid)
                __builtin_memcpy(st->key.comm, st->key.thread_comm, sizeof(st->key.comm));
        else
                BPF_CORE_READ_STR_INTO(&st->key.comm, task, group_leader, comm);

        /* cs as the full 8-byte slot: the perf_event context only allows 8-byte loads there, and
         * pt_regs is ABI (struct user_regs_struct), so slot 17 is cs on every kernel. */
        user_cs = ((const __u64 *)ctx)[PROFD_PT_REGS_CS_SLOT] & 0xffff;
        in_kernel = (user_cs & 3) == 0;
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
                st->ip = ctx->regs.ip;
                st->sp = ctx->regs.sp;
                st->bp = ctx->regs.bp;
                st->bx = ctx->regs.bx;
                st->bx_valid = 1;
                st->ip_valid = 1;
        } else {
                /* The sample hit a syscall, fault or interrupt: the user state is what the
                 * kernel saved on entry, at the top of the task's kernel stack. */
                if (user_regs(task, st, &user_cs) < 0) {
                        count(PROFD_ERR_USER_REGS);
                        stop(st, PROFD_STOP_BAD_READ);
                } else {
                        st->ip_valid = 1;
                }
        }
        if (st->ip_valid && user_cs == PROFD_USER32_CS) {
                /* A 32-bit (compat) task: neither its frames nor its CFI are x86-64. Keep the pc. */
                st->user.ips[0] = st->ip | PROFD_FRAME_EXACT;
                st->user.len = 1;
                st->uhash = hash_mix(st->uhash, st->user.ips[0]);
                stop(st, PROFD_STOP_UNSUPPORTED);
        }

        __u32 zero = 0;
        struct profd_unwind_config *cfg = bpf_map_lookup_elem(&unwind_config, &zero);

        if (!st->done && cfg && cfg->active) {
                st->pool_gen = cfg->generation;
                __u32 pid = st->key.pid;
                struct profd_unwind_proc *proc = bpf_map_lookup_elem(&unwind_procs, &pid);

                if (proc) {
                        struct profd_python_proc *py = bpf_map_lookup_elem(&python_procs, &pid);

                        st->proc_version = proc->version;
                        st->fp_only = 0;
                        if (py) {
                                st->py = *py;
                                st->py_active = 1;
                        }
                } else {
                        /* Its code may have no frame pointers: a walk that ends "normally"
                         * may still be short, so the stack says it was not verified. */
                        st->guess = PROFD_STOP_UNKNOWN_PID;
                        count(PROFD_CNT_UNKNOWN_PID_FP);
                        report(st, PROFD_EV_UNKNOWN_PID, 0);
                }
        }

        if (profd_measure_cost)
                st->entry_end_ns = bpf_ktime_get_ns();
        bpf_tail_call(ctx, &progs, st->done ? PROFD_PROG_FINALIZE : PROFD_PROG_STEP);
        count(PROFD_DROP_TAIL_CALL);
        return 0;
}

SEC("perf_event")
int profd_step(struct bpf_perf_event_data *ctx)
{
        struct sample_state *st = get_state();

        if (!st)
                return 0;

        for (int i = 0; i < PROFD_FRAMES_PER_STEP; i++) {
                if (unwind_one(st))
                        break;
        }

        st->steps++;
        if (!st->done && st->steps >= PROFD_MAX_STEPS) {
                /* Unreachable with the frame budget above; kept so the chain always ends. */
                st->user.flags |= PROFD_STACK_TRUNCATED;
                stop(st, PROFD_STOP_DEPTH);
        }
        if (st->done && st->py_active) {
                if (st->steps < PROFD_MAX_STEPS) {
                        bpf_tail_call(ctx, &progs, PROFD_PROG_PYTHON);
                        count(PROFD_DROP_TAIL_CALL);
                        return 0;
                }
                py_stop(st, PROFD_PY_STOP_TAIL_CALLS);
        }
        bpf_tail_call(ctx, &progs, st->done ? PROFD_PROG_FINALIZE : PROFD_PROG_STEP);
        count(PROFD_DROP_TAIL_CALL);
        return 0;
}

/* The frames were mixed in as they were recorded (unwind_one): there the multiplies overlap the
 * unwinding's memory accesses, a separate pass over 512 frames would be a serial chain. */
static __always_inline __u64 hash_user(const struct sample_state *st)
{
        return hash_final(hash_mix(st->uhash, ((__u64)st->user.flags << 32) | st->user.len));
}

static __always_inline __u64 hash_kernel(const struct profd_kstack *s)
{
        __u64 h = hash_mix(0x7f4a7c159e3779b9ULL, s->len);
        __u32 len = s->len;

        for (__u32 i = 0; i < PROFD_MAX_KERNEL_FRAMES; i++) {
                if (i >= len)
                        break;
                h = hash_mix(h, s->ips[i]);
        }
        return hash_final(h);
}

/* Stores value under hash unless present. -EEXIST is a concurrent insert of the same stack. */
static __always_inline int store_stack(void *map, __u64 *hash, void *value)
{
        long r;

        if (bpf_map_lookup_elem(map, hash))
                return 0;
        r = bpf_map_update_elem(map, hash, value, BPF_NOEXIST);
        return r == -EEXIST ? 0 : r;
}

/* First sample of key in this interval (the caller looked it up). -EEXIST: another CPU inserted
 * it meanwhile. */
static __always_inline int insert_key(void *map, struct profd_count_key *key)
{
        __u64 one = 1, *v;
        long r;

        r = bpf_map_update_elem(map, key, &one, BPF_NOEXIST);
        if (r == -EEXIST) {
                v = bpf_map_lookup_elem(map, key);
                if (v) {
                        __sync_fetch_and_add(v, 1);
                        return 0;
                }
        }
        return r;
}

SEC("perf_event")
int profd_finalize(struct bpf_perf_event_data *ctx)
{
        __u64 finalize_ns = profd_measure_cost ? bpf_ktime_get_ns() : 0;
        struct sample_state *st = get_state();
        __u32 reason;
        __u64 *v;
        bool gen1;

        if (!st)
                return 0;

        gen1 = st->gen != 0;
        reason = st->stop;
        if (st->guess != PROFD_STOP_OK && reason != PROFD_STOP_DEPTH)
                reason = st->guess;
        st->user.flags |= reason & PROFD_STACK_REASON_MASK;
        if (reason < PROFD_STOP__MAX)
                count(PROFD_STOP_REASON_BASE + reason);

        if (st->user.len > 0)
                st->key.user_hash = hash_user(st);
        if (st->kernel.len > 0)
                st->key.kernel_hash = hash_kernel(&st->kernel);

        /* Most samples repeat a key of this interval: its stacks are stored already (stacks go
         * in before their key), so one lookup does it. */
        v = bpf_map_lookup_elem(gen1 ? (void *)&counts_1 : (void *)&counts_0, &st->key);
        if (v) {
                __sync_fetch_and_add(v, 1);
                goto recorded;
        }

        if (st->user.len > 0) {
                if (store_stack(gen1 ? (void *)&stacks_1 : (void *)&stacks_0, &st->key.user_hash,
                                &st->user) < 0) {
                        count(PROFD_DROP_USER_STACKS_FULL);
                        return 0;
                }
        }
        if (st->kernel.len > 0) {
                if (store_stack(gen1 ? (void *)&kstacks_1 : (void *)&kstacks_0, &st->key.kernel_hash,
                                &st->kernel) < 0) {
                        count(PROFD_DROP_KERNEL_STACKS_FULL);
                        return 0;
                }
        }

        if (insert_key(gen1 ? (void *)&counts_1 : (void *)&counts_0, &st->key) < 0) {
                count(PROFD_DROP_COUNTS_FULL);
                return 0;
        }
recorded:
        count(PROFD_CNT_RECORDED);
        if (profd_measure_cost) {
                count_add(PROFD_CNT_RECORDED_NS, bpf_ktime_get_ns() - st->start_ns);
                count_add(PROFD_CNT_ENTRY_NS, st->entry_end_ns - st->start_ns);
                count_add(PROFD_CNT_UNWIND_NS, finalize_ns - st->entry_end_ns);
        }
        return 0;
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
        /* Its interpreter, if any, is gone too: the daemon describes the new image's. */
        bpf_map_delete_elem(&python_procs, &pid);
        return 0;
}
