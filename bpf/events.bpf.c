// SPDX-License-Identifier: GPL-2.0-only
/* Process events for the daemon's process tracker: exec, exit of a whole process, fork of a new
 * process, and new executable file mappings (dlopen, mmap PROT_EXEC, mprotect +X).
 *
 * Every hook here works without a tracefs/debugfs mount: tp_btf and fentry/fexit (BPF
 * trampolines, 5.5+) first; then kprobes (perf_event_open on the kprobe PMU), a uprobe on the
 * dynamic loader's debugger hook, the raw syscall exit tracepoint (mmap/mprotect; a last resort,
 * it taxes every syscall) and raw_tp, which the daemon attaches when the better hook cannot be
 * loaded or attached (some kernels forbid trampolines, some are built without kprobes). All handlers read
 * the kernel with BPF_CORE_READ so the same code serves the BTF-typed and the untyped (raw_tp/kprobe)
 * variant.
 *
 * Events go over one ring buffer; when it is full the event is lost and counted per type. */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "profd-events.h"
#include "rate-limit.bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define PROT_EXEC 0x4
#define PF_KTHREAD 0x00200000
/* Largest value an mmap-ish function returns as an error (see IS_ERR_VALUE). */
#define MAX_ERRNO 4095

/* pid of the daemon: its own mappings are not interesting and would feed back into it. */
const volatile __u32 self_tgid = 0;
/* Report anonymous executable memory (PROFD_MMAP_HOOK=0 turns it off). */
const volatile bool track_anon = true;

/* 256 KiB holds ~5000 events: a burst of execs (a build, a container start) between two daemon
 * wake-ups fits; the daemon drains the ring on every epoll wake-up. */
struct {
        __uint(type, BPF_MAP_TYPE_RINGBUF);
        __uint(max_entries, 256 * 1024);
} events SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, PROFD_EVCNT__MAX);
        __type(key, __u32);
        __type(value, __u64);
} event_counters SEC(".maps");

static __always_inline void count(__u32 idx)
{
        __u64 *c = bpf_map_lookup_elem(&event_counters, &idx);

        if (c)
                *c += 1;
}

/* Exits, and forks of children that share their parent's memory (vfork, posix_spawn: each of a
 * build's compilers), need nothing done at once: an exit only frees entries, such a fork writes
 * none. They go without waking the daemon, which reads them with the next event that does wake it
 * (an exec, a loader report: the ring keeps their order) or at its periodic drain
 * (PROC_EVENTS_DEFERRED_DRAIN_USEC in proc-events.c): two wake-ups fewer per exec. Past this much
 * unread data they wake it anyway, the ring stays far from full. */
#define DEFER_MAX_BYTES (64 * 1024)
/* One record in the ring: the event and the ring's 8-byte header. */
#define EVENT_RECORD_BYTES (sizeof(struct profd_event) + 8)

static __always_inline bool deferrable(__u32 type, __u64 addr)
{
        return type == PROFD_EV_EXIT || (type == PROFD_EV_FORK && addr == PROFD_EV_FORK_SHARED_MM);
}

static __always_inline struct profd_event *event_reserve(__u32 type, __u32 pid)
{
        struct profd_event *ev;

        if (pid == 0 || (self_tgid && pid == self_tgid))
                return NULL;
        ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
        if (!ev) {
                count(PROFD_EVCNT_DROPPED + type);
                return NULL;
        }
        __builtin_memset(ev, 0, sizeof(*ev));
        ev->type = type;
        ev->pid = pid;
        ev->ktime_ns = bpf_ktime_get_ns();
        return ev;
}

/* quiet: the caller knows a later event of this process wakes the daemon (an exec or loader
 * report before the loader's RT_CONSISTENT report, see exec_quiet below). */
static __always_inline bool event_submit(struct profd_event *ev, bool quiet)
{
        __u32 type = ev->type;
        __u64 pending, flags = 0;

        /* Unread data before this record (it counts itself once reserved): the kernel wakes the
         * reader by itself only for the first unread record, so an event behind deferred ones
         * must force the wake-up. */
        pending = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
        if ((quiet || deferrable(type, ev->addr)) && pending <= DEFER_MAX_BYTES) {
                flags = BPF_RB_NO_WAKEUP;
                count(PROFD_EVCNT_DEFERRED);
        } else if (pending > EVENT_RECORD_BYTES) {
                flags = BPF_RB_FORCE_WAKEUP;
        }
        bpf_ringbuf_submit(ev, flags);
        count(PROFD_EVCNT_SENT + type);
        return flags == BPF_RB_NO_WAKEUP;
}

static __always_inline void emit_ns(__u32 type, __u32 pid, __u32 ppid, __u64 addr, __u64 len, bool quiet)
{
        struct profd_event *ev = event_reserve(type, pid);

        if (!ev)
                return;
        ev->ppid = ppid;
        ev->addr = addr;
        ev->len = len;
        event_submit(ev, quiet);
}

static __always_inline void emit(__u32 type, __u32 pid, __u32 ppid, __u64 addr, __u64 len)
{
        emit_ns(type, pid, ppid, addr, len, false);
}

static __always_inline bool is_kthread(struct task_struct *t)
{
        return BPF_CORE_READ(t, flags) & PF_KTHREAD;
}

static __always_inline void emit_exec(struct task_struct *t, bool quiet)
{
        struct profd_event *ev = event_reserve(PROFD_EV_EXEC, BPF_CORE_READ(t, tgid));

        if (!ev)
                return;
        /* What the daemon's read of the new image would otherwise take from /proc/PID: the mount
         * namespace (ns/mnt), the name and the start time (stat): two procfs lookups per exec. */
        ev->mnt_ns = BPF_CORE_READ(t, nsproxy, mnt_ns, ns.inum);
        BPF_CORE_READ_STR_INTO(&ev->comm, t, comm);
        if (bpf_core_field_exists(t->start_boottime))
                ev->start_ns = BPF_CORE_READ(t, start_boottime);
        if (event_submit(ev, quiet) && quiet)
                count(PROFD_EVCNT_EXEC_DEFERRED);
}

static __always_inline int handle_exec(struct task_struct *t)
{
        if (!is_kthread(t))
                emit_exec(t, false);
        return 0;
}

/* Where the daemon watches the loaders with a uprobe (no mmap hook here), a dynamically linked
 * program reports its start-up itself: glibc's loader calls the hook with RT_ADD before it maps the
 * program's libraries and with RT_CONSISTENT after, musl's once, after. Waking the daemon for the
 * exec and for RT_ADD only made it read and push the new image twice (the executable and the
 * loader, then the libraries): the exec and the reports before the last go without a wake-up, and
 * the daemon reads them with RT_CONSISTENT, one read and one push per exec. Loader files and how
 * many of their start-up reports come before the libraries: struct profd_loader_key. */
struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, PROFD_LOADERS_MAX);
        __type(key, struct profd_loader_key);
        __type(value, __u32);
} watched_loaders SEC(".maps");

/* Set by the daemon once it put a loader in watched_loaders: until then (and on kernels with an
 * mmap hook, where no loader is watched) an exec costs no vma lookup. */
volatile __u32 loaders_watched = 0;

struct exec_quiet {
        __u64 exec_ns;
        __u32 quiet_reports; /* loader reports still to send without a wake-up */
        __u32 _pad;
};
_Static_assert(sizeof(struct exec_quiet) == 16, "exec_quiet layout");

/* Processes between their exec and their loader's last start-up report: one entry each, LRU, the
 * oldest forgotten first (its next report then wakes the daemon, as it would have anyway). */
#define EXEC_QUIET_PIDS 4096
/* A loader's start-up reports come within milliseconds of the exec; one that is this late (a
 * process stopped in its loader) wakes the daemon. */
#define EXEC_QUIET_NS (1000 * 1000 * 1000ULL)

struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, EXEC_QUIET_PIDS);
        __type(key, __u32);
        __type(value, struct exec_quiet);
} exec_quiet SEC(".maps");

/* The auxiliary vector's pairs searched for AT_BASE (the loader's load address): the kernel puts it
 * 9th on x86-64 and arm64 (after the architecture's own entries, AT_HWCAP, AT_PAGESZ, AT_CLKTCK,
 * AT_PHDR, AT_PHENT, AT_PHNUM); its whole vector is under 30 pairs. */
#define AUXV_PAIRS_SEARCHED 24
#define AT_NULL 0
#define AT_BASE 7

static long loader_of_vma(struct task_struct *task, struct vm_area_struct *vma, void *data)
{
        struct profd_loader_key *key = data;
        struct inode *inode = BPF_CORE_READ(vma, vm_file, f_inode);

        if (inode) {
                key->dev = BPF_CORE_READ(inode, i_sb, s_dev);
                key->inode = BPF_CORE_READ(inode, i_ino);
        }
        return 0;
}

/* How many of the new image's loader reports come before its libraries are mapped, or -1 when its
 * loader is not watched (or it has none: a static program). */
static __always_inline int exec_loader_quiet_reports(struct task_struct *t)
{
        struct profd_loader_key key = {};
        struct mm_struct *mm = BPF_CORE_READ(t, mm);
        __u64 base = 0, type;
        __u32 *quiet;

        if (!mm)
                return -1;
        /* Bounded by AUXV_PAIRS_SEARCHED (see there). */
        for (int i = 0; i < AUXV_PAIRS_SEARCHED; i++) {
                if (bpf_core_read(&type, sizeof(type), &mm->saved_auxv[2 * i]) < 0 || type == AT_NULL)
                        return -1;
                if (type == AT_BASE) {
                        if (bpf_core_read(&base, sizeof(base), &mm->saved_auxv[2 * i + 1]) < 0)
                                return -1;
                        break;
                }
        }
        if (!base || bpf_find_vma(bpf_get_current_task_btf(), base, loader_of_vma, &key, 0) < 0)
                return -1;
        quiet = bpf_map_lookup_elem(&watched_loaders, &key);
        return quiet ? (int)*quiet : -1;
}

/* The exec hook where the kernel has bpf_find_vma() (5.17+; the daemon loads handle_exec()'s
 * program elsewhere). */
static __always_inline int handle_exec_watched(struct task_struct *t)
{
        __u32 pid = BPF_CORE_READ(t, tgid);
        int quiet = -1;

        if (is_kthread(t))
                return 0;
        if (loaders_watched)
                quiet = exec_loader_quiet_reports(t);
        if (quiet > 0) {
                struct exec_quiet q = {.exec_ns = bpf_ktime_get_ns(), .quiet_reports = quiet};

                bpf_map_update_elem(&exec_quiet, &pid, &q, BPF_ANY);
        } else
                bpf_map_delete_elem(&exec_quiet, &pid);
        emit_exec(t, quiet >= 0);
        return 0;
}

/* A loader report of tgid: whether it comes before its libraries are mapped (see above). */
static __always_inline bool loader_report_quiet(__u32 tgid)
{
        struct exec_quiet *q = bpf_map_lookup_elem(&exec_quiet, &tgid);

        if (!q)
                return false;
        if (q->quiet_reports == 0 || bpf_ktime_get_ns() - q->exec_ns > EXEC_QUIET_NS) {
                bpf_map_delete_elem(&exec_quiet, &tgid);
                return false;
        }
        q->quiet_reports--;
        if (q->quiet_reports == 0)
                bpf_map_delete_elem(&exec_quiet, &tgid);
        return true;
}

/* sched_process_exit fires for every thread; the process is gone when the last one leaves, which
 * do_exit() records by dropping signal->live to 0 before the tracepoint (true on 6.1 and 6.18).
 * Using the leader's exit instead would be wrong: a leader can exit while other threads run. */
static __always_inline int handle_exit(struct task_struct *t)
{
        if (is_kthread(t))
                return 0;
        if (BPF_CORE_READ(t, signal, live.counter) != 0)
                return 0;
        emit(PROFD_EV_EXIT, BPF_CORE_READ(t, tgid), 0, 0, 0);
        return 0;
}

static __always_inline int handle_fork(struct task_struct *parent, struct task_struct *child)
{
        __u32 pid = BPF_CORE_READ(child, pid);

        /* New threads share the mappings the daemon already knows; only new processes matter. */
        if (pid != (__u32)BPF_CORE_READ(child, tgid) || is_kthread(child))
                return 0;
        emit(PROFD_EV_FORK, pid, BPF_CORE_READ(parent, tgid),
             BPF_CORE_READ(child, mm) == BPF_CORE_READ(parent, mm) ? PROFD_EV_FORK_SHARED_MM : 0, 0);
        return 0;
}

static __always_inline __u32 current_tgid(void)
{
        return bpf_get_current_pid_tgid() >> 32;
}

/* Executable file mappings come in bursts (a program's start-up maps a few dozen libraries, and all
 * of those must get through at once); a process that keeps mapping (a dlopen/dlclose loop) would
 * wake the daemon thousands of times a second. Token bucket per process: MMAP_EVENT_BURST events,
 * then one per MMAP_EVENT_REFILL_NS. The daemon keeps re-reading a process that fills its bucket
 * until its maps stop changing, so the events held back here lose nothing for good. */
#define MMAP_EVENT_BURST 64
#define MMAP_EVENT_REFILL_NS (10 * 1000 * 1000ULL)
/* Processes remembered for that limit; LRU, so the oldest are forgotten (and get a full bucket). */
#define MMAP_RATELIMIT_PIDS 4096

struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, MMAP_RATELIMIT_PIDS);
        __type(key, __u32);
        __type(value, struct profd_token_bucket);
} mmap_buckets SEC(".maps");

static __always_inline bool mmap_event_allowed(__u32 tgid)
{
        if (token_bucket_take(&mmap_buckets, tgid, bpf_ktime_get_ns(), MMAP_EVENT_BURST,
                              MMAP_EVENT_REFILL_NS))
                return true;
        count(PROFD_EVCNT_MMAP_RATELIMITED);
        return false;
}

static __always_inline void emit_mmap(__u64 addr, __u64 len)
{
        __u32 tgid = current_tgid();

        if (mmap_event_allowed(tgid))
                emit(PROFD_EV_MMAP_EXEC, tgid, 0, addr, len);
}

/* Anonymous executable memory (JIT code) has no unwind table: the daemon adds the range to the
 * process's mappings as it is (the unwinder steps by frame pointer there) without reading
 * /proc/PID/maps. JIT runtimes flip code pages between writable and executable (W^X) thousands of
 * times a second, mostly the same few ranges: a range sent from this CPU less than ANON_DEDUPE_NS
 * ago is not sent again (the last ANON_RECENT ranges per CPU), and each process has a token bucket,
 * ANON_EVENT_BURST events then one per ANON_EVENT_REFILL_NS. Ranges held back are found by the
 * unwinder's unknown-pc report, as before. */
#define ANON_RECENT 4
#define ANON_EVENT_BURST 32
#define ANON_EVENT_REFILL_NS (5 * 1000 * 1000ULL)
#define ANON_DEDUPE_NS (20 * 1000 * 1000ULL)

struct anon_range {
        __u64 start, end, sent_ns;
        __u32 tgid, _pad;
};

struct anon_recent {
        struct anon_range r[ANON_RECENT];
        __u32 next, _pad;
};

struct {
        __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
        __uint(max_entries, 1);
        __type(key, __u32);
        __type(value, struct anon_recent);
} anon_recent SEC(".maps");

struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, MMAP_RATELIMIT_PIDS);
        __type(key, __u32);
        __type(value, struct profd_token_bucket);
} anon_buckets SEC(".maps");

static __always_inline void emit_anon(__u64 start, __u64 len)
{
        __u32 tgid = current_tgid(), zero = 0, slot;
        struct anon_recent *rec = bpf_map_lookup_elem(&anon_recent, &zero);
        __u64 end = start + len, now = bpf_ktime_get_ns();

        if (!track_anon || !rec || len == 0 || tgid == 0 || (self_tgid && tgid == self_tgid))
                return;
        /* Bounded: ANON_RECENT slots. Only recent sends count: a range unmapped and mapped again
         * later (a JIT recycling code pages) may be gone from the daemon's view meanwhile. */
        for (int i = 0; i < ANON_RECENT; i++)
                if (rec->r[i].tgid == tgid && rec->r[i].start == start && rec->r[i].end == end &&
                    now - rec->r[i].sent_ns < ANON_DEDUPE_NS) {
                        count(PROFD_EVCNT_ANON_DEDUPED);
                        return;
                }
        if (!token_bucket_take(&anon_buckets, tgid, bpf_ktime_get_ns(), ANON_EVENT_BURST,
                               ANON_EVENT_REFILL_NS)) {
                count(PROFD_EVCNT_ANON_RATELIMITED);
                return;
        }
        slot = rec->next & (ANON_RECENT - 1);
        rec->r[slot].start = start;
        rec->r[slot].end = end;
        rec->r[slot].tgid = tgid;
        rec->r[slot].sent_ns = now;
        rec->next = slot + 1;
        emit(PROFD_EV_ANON_EXEC, tgid, 0, start, len);
}
_Static_assert((ANON_RECENT & (ANON_RECENT - 1)) == 0, "anon_recent slot is masked");

static __always_inline int on_mmap_done(struct file *file, __u64 len, __u64 prot, __u64 ret)
{
        if (!(prot & PROT_EXEC) || ret >= (__u64)-MAX_ERRNO)
                return 0;
        if (file)
                emit_mmap(ret, len);
        else
                emit_anon(ret, len);
        return 0;
}

/* JIT runtimes flip code pages between writable and executable (W^X) thousands of times a
 * second; one event per process per this interval is enough for the daemon, which re-reads all
 * of /proc/PID/maps anyway. Only mprotect events are limited: mmap of files is rare. */
#define MPROTECT_EVENT_INTERVAL_NS (100 * 1000 * 1000ULL)
/* Processes remembered for that limit; LRU, so the oldest are forgotten first. */
#define MPROTECT_RATELIMIT_PIDS 4096

struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, MPROTECT_RATELIMIT_PIDS);
        __type(key, __u32);
        __type(value, __u64);
} mprotect_last SEC(".maps");

static __always_inline void emit_mprotect(__u64 start, __u64 len)
{
        __u32 tgid = current_tgid();

        if (!once_per_interval(&mprotect_last, tgid, bpf_ktime_get_ns(), MPROTECT_EVENT_INTERVAL_NS)) {
                count(PROFD_EVCNT_RATELIMITED);
                return;
        }
        emit(PROFD_EV_MMAP_EXEC, tgid, 0, start, len);
}

#define VM_EXEC 0x4

static __always_inline int on_mprotect(struct vm_area_struct *vma, __u64 prot)
{
        __u64 start, end;

        if (!(prot & PROT_EXEC))
                return 0;
        start = BPF_CORE_READ(vma, vm_start);
        end = BPF_CORE_READ(vma, vm_end);
        if (BPF_CORE_READ(vma, vm_file)) {
                emit_mprotect(start, end - start);
                return 0;
        }
        /* Anonymous: only when it becomes executable (W^X flips back to +X are, too). The vma may
         * be wider than the range mprotect'ed: the daemon keeps the whole vma as one mapping. */
        if (!(BPF_CORE_READ(vma, vm_flags) & VM_EXEC))
                emit_anon(start, end - start);
        return 0;
}

/* Syscall numbers, mmap flags (uapi, stable) and where the exit tracepoint finds a syscall's
 * number and arguments in the saved user registers: the only architecture-specific part here. */
#if defined(__TARGET_ARCH_arm64)
#define NR_MMAP 222
#define NR_MPROTECT 226
#define NR_PKEY_MPROTECT 288
/* x0 holds the return value by now: the first argument survives in orig_x0. */
#define SYSCALL_NR(regs) BPF_CORE_READ(regs, syscallno)
#define SYSCALL_ARG0(regs) BPF_CORE_READ(regs, orig_x0)
#define SYSCALL_ARG1(regs) BPF_CORE_READ(regs, regs[1])
#define SYSCALL_ARG2(regs) BPF_CORE_READ(regs, regs[2])
#define SYSCALL_ARG3(regs) BPF_CORE_READ(regs, regs[3])
#else
#define NR_MMAP 9
#define NR_MPROTECT 10
#define NR_PKEY_MPROTECT 329
#define SYSCALL_NR(regs) BPF_CORE_READ(regs, orig_ax)
#define SYSCALL_ARG0(regs) BPF_CORE_READ(regs, di)
#define SYSCALL_ARG1(regs) BPF_CORE_READ(regs, si)
#define SYSCALL_ARG2(regs) BPF_CORE_READ(regs, dx)
#define SYSCALL_ARG3(regs) BPF_CORE_READ(regs, r10)
#endif
#define MAP_ANONYMOUS 0x20

/* Where no trampoline and no kprobe can be attached: the raw syscall exit tracepoint sees every
 * syscall (a few ns each), keeps mmap/mprotect that made something executable. The arguments are
 * still in the saved user registers (x86-64: rdi, rsi, rdx, r10; arm64: orig_x0, x1, x2, x3). */
static __always_inline int on_sys_exit(struct pt_regs *regs, long ret)
{
        long nr = SYSCALL_NR(regs);
        __u64 prot;

        if (nr != NR_MMAP && nr != NR_MPROTECT && nr != NR_PKEY_MPROTECT)
                return 0;
        prot = SYSCALL_ARG2(regs);
        if (!(prot & PROT_EXEC) || (unsigned long)ret >= (unsigned long)-MAX_ERRNO)
                return 0;
        if (nr == NR_MMAP) {
                if (SYSCALL_ARG3(regs) & MAP_ANONYMOUS)
                        emit_anon(ret, SYSCALL_ARG1(regs));
                else
                        emit_mmap(ret, SYSCALL_ARG1(regs));
        } else
                emit_mprotect(SYSCALL_ARG0(regs), SYSCALL_ARG1(regs));
        return 0;
}

/* ---- primary hooks: BTF-typed tracepoints and trampolines ---- */

SEC("tp_btf/sched_process_exec")
int BPF_PROG(tp_exec, struct task_struct *p)
{
        return handle_exec(p);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(tp_exec_watched, struct task_struct *p)
{
        return handle_exec_watched(p);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(tp_exit, struct task_struct *p)
{
        return handle_exit(p);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(tp_fork, struct task_struct *parent, struct task_struct *child)
{
        return handle_fork(parent, child);
}

/* vm_mmap_pgoff() is where both mmap(2) (ksys_mmap_pgoff) and the ELF loader (vm_mmap) create
 * mappings, with the same signature from 4.x to 6.18; do_mmap() gained a vm_flags argument in 6.3.
 * fexit sees the address the mapping got. */
SEC("fexit/vm_mmap_pgoff")
int BPF_PROG(fexit_mmap, struct file *file, unsigned long addr, unsigned long len, unsigned long prot,
             unsigned long flag, unsigned long pgoff, unsigned long ret)
{
        return on_mmap_done(file, len, prot, ret);
}

/* The LSM hook is called for every mprotect(2) of a vma with the final prot, and its signature is
 * unchanged since 2.6; the vma's address range is already the one that will become executable. */
SEC("fentry/security_file_mprotect")
int BPF_PROG(fentry_mprotect, struct vm_area_struct *vma, unsigned long reqprot, unsigned long prot)
{
        return on_mprotect(vma, prot);
}

/* ---- fallbacks: attached only when the primary hook above cannot be ---- */

SEC("raw_tp/sched_process_exec")
int raw_exec(struct bpf_raw_tracepoint_args *ctx)
{
        return handle_exec((struct task_struct *)ctx->args[0]);
}

SEC("raw_tp/sched_process_exit")
int raw_exit(struct bpf_raw_tracepoint_args *ctx)
{
        return handle_exit((struct task_struct *)ctx->args[0]);
}

SEC("raw_tp/sched_process_fork")
int raw_fork(struct bpf_raw_tracepoint_args *ctx)
{
        return handle_fork((struct task_struct *)ctx->args[0], (struct task_struct *)ctx->args[1]);
}

/* The dynamic loader calls _dl_debug_state() (the debugger hook r_brk, glibc and musl) after it
 * changed the link map: at start-up once the initial libraries are mapped, and around every
 * dlopen/dlclose. Attached per loader file by the daemon (a uprobe is per inode, for every
 * process mapping it) where no mmap hook can be attached: costs a trap per call, nothing per
 * syscall. */
SEC("uprobe")
int BPF_KPROBE(uprobe_dl_debug_state)
{
        __u32 tgid = current_tgid();

        if (!mmap_event_allowed(tgid))
                return 0;
        emit_ns(PROFD_EV_MMAP_EXEC, tgid, 0, PROFD_EV_ADDR_LOADER, 0, loader_report_quiet(tgid));
        return 0;
}

/* A kprobe before the mapping exists: no address yet, the daemon re-reads maps a little later. */
SEC("kprobe/security_mmap_file")
int BPF_KPROBE(kp_mmap, struct file *file, unsigned long prot)
{
        if (file && (prot & PROT_EXEC))
                emit_mmap(PROFD_EV_ADDR_UNKNOWN, 0);
        return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(tp_sys_exit, struct pt_regs *regs, long ret)
{
        return on_sys_exit(regs, ret);
}

SEC("raw_tp/sys_exit")
int raw_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
        return on_sys_exit((struct pt_regs *)ctx->args[0], (long)ctx->args[1]);
}

SEC("kprobe/security_file_mprotect")
int BPF_KPROBE(kp_mprotect, struct vm_area_struct *vma, unsigned long reqprot, unsigned long prot)
{
        return on_mprotect(vma, prot);
}
