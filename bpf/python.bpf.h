/* SPDX-License-Identifier: GPL-2.0-only */
/* The CPython walk, run by the tail-call program profd_python (profile.bpf.c) once the native
 * walk of a process listed in python_procs has ended: finds the sampled thread's PyThreadState,
 * then appends the thread's Python frames, innermost first, PROFD_PY_FRAMES_PER_PROG per program,
 * each as one PROFD_FRAME_PYTHON entry (profd-python.h). The daemon splices them into the native
 * stack. Defines the maps "python_procs" and "python_threads": include from profile.bpf.c only.
 *
 * Budget: the native walk and the Python walk share the chain of PROFD_MAX_STEPS tail-called
 * programs and the PROFD_MAX_USER_FRAMES slots of one stack. Native frames go first (they decide
 * where the Python frames belong); the Python walk gets what they leave. A 100-frame native
 * stack uses 5 steps and leaves 26 programs, 832 Python frames, more than the slots left. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "profd-python.h"
#include "profd-sample.h"
#include "arch.bpf.h"
#include "rate-limit.bpf.h"
#include "sample-state.bpf.h"
#include "stack-hash.bpf.h"

_Static_assert(PROFD_PY_STOP__MAX == PROFD_PY_STOP_COUNT, "profd-sample.h counts the Python stops");

/* Python frames per program. Each needs at most PROFD_PY_FRAME_READ_MAX bytes, mostly from a window
 * already read (py_frame_bytes); 32
 * keeps the program's verification well inside the limit on 5.10 and makes a 100-frame Python
 * stack four programs. */
#define PROFD_PY_FRAMES_PER_PROG 32
/* Threads of one interpreter looked at to find the sampled one when the GIL holder is not it
 * and the per-thread cache has no entry: bounded so a huge thread pool cannot stall a sample;
 * a thread further down the list gets native frames only (stop "no_thread", counted). The
 * cache makes the walk a once-per-thread cost. */
#define PROFD_PY_MAX_THREADS 64

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, PROFD_PY_MAX_PROCS);
        __type(key, __u32);
        __type(value, struct profd_python_proc);
} python_procs SEC(".maps");

/* (pid << 32 | tid) -> its PyThreadState: found once by the thread-list walk, checked on each use
 * (the PyThreadState's thread id must still be the thread's thread pointer). A thread with none (a
 * native thread of a program embedding Python) is remembered too, for PROFD_PY_NO_THREAD_NS, so
 * that its samples do not walk the thread list each time. LRU: threads come and go. */
struct python_thread {
        __u64 tstate; /* 0: none found at ns */
        __u64 ns;
};
#define PROFD_PY_NO_THREAD_NS 1000000000ULL
struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, 16384);
        __type(key, __u64);
        __type(value, struct python_thread);
} python_threads SEC(".maps");

/* New Python stacks for the daemon to read the code objects of (struct profd_python_event). */
struct {
        __uint(type, BPF_MAP_TYPE_RINGBUF);
        __uint(max_entries, 64 * 1024);
} python_events SEC(".maps");

/* Per process: PROFD_PY_EVENT_BURST reports at once, then one per PROFD_PY_EVENT_REFILL_NS: as many
 * as one thread sampled at up to 500 Hz can need (import-heavy code makes nearly every sample a
 * new stack). A program with more threads whose stacks keep changing costs the daemon at most
 * that (~10-30 us each); its other stacks are read at the next drain, as every stack is. */
#define PROFD_PY_EVENT_BURST 128
#define PROFD_PY_EVENT_REFILL_NS 2000000ULL
struct {
        __uint(type, BPF_MAP_TYPE_LRU_HASH);
        __uint(max_entries, PROFD_PY_MAX_PROCS);
        __type(key, __u32);
        __type(value, struct profd_token_bucket);
} python_event_budget SEC(".maps");

/* The sample's user stack, with Python frames, went into the stacks map for the first time in
 * this generation. */
static __always_inline void py_report_stack(struct sample_state *st)
{
        struct profd_python_event *ev;
        __u64 now = bpf_ktime_get_ns();

        if (!token_bucket_take(&python_event_budget, st->key.pid, now, PROFD_PY_EVENT_BURST,
                               PROFD_PY_EVENT_REFILL_NS)) {
                count(PROFD_CNT_PY_EVENTS_RATELIMITED);
                return;
        }
        ev = bpf_ringbuf_reserve(&python_events, sizeof(*ev), 0);
        if (!ev) {
                count(PROFD_CNT_PY_EVENTS_FULL);
                return;
        }
        ev->pid = st->key.pid;
        ev->gen = st->gen;
        ev->user_hash = st->key.user_hash;
        ev->ktime_ns = now;
        bpf_ringbuf_submit(ev, 0);
        count(PROFD_CNT_PY_EVENTS);
}

static __always_inline void py_stop(struct sample_state *st, __u32 reason)
{
        st->py_done = 1;
        st->user.flags = (st->user.flags & ~PROFD_STACK_PY_MASK) | ((reason + 1) << PROFD_STACK_PY_SHIFT);
        if (reason < PROFD_PY_STOP__MAX)
                count(PROFD_PY_STOP_BASE + reason);
}

static __always_inline int py_read_ptr(__u64 addr, __u64 *ret)
{
        *ret = 0;
        return bpf_probe_read_user(ret, sizeof(*ret), (void *)addr);
}

/* The PyThreadState whose thread_id (pthread_self(): arch_is_thread_self() of the thread pointer,
 * arch_thread_pointer()) is the sampled thread's, or 0. Tried in order: the GIL holder (3.8-3.11: the thread
 * running Python code nearly always holds it), the per-thread cache, the interpreter's thread list. */
static __always_inline __u64 py_find_tstate(struct sample_state *st, __u64 self)
{
        const struct profd_python_proc *py = &st->py;
        __u64 key = ((__u64)st->key.pid << 32) | st->key.tid, ts = 0, id = 0, interp = 0;
        struct python_thread *cached, found = {};

        if (py->tstate_current && py_read_ptr(py->tstate_current, &ts) == 0 && ts &&
            py_read_ptr(ts + py->tstate_thread_id, &id) == 0 && arch_is_thread_self(self, id))
                return ts;

        cached = bpf_map_lookup_elem(&python_threads, &key);
        if (cached) {
                ts = cached->tstate;
                if (!ts && bpf_ktime_get_ns() - cached->ns < PROFD_PY_NO_THREAD_NS)
                        return 0;
                if (ts && py_read_ptr(ts + py->tstate_thread_id, &id) == 0 && arch_is_thread_self(self, id))
                        return ts;
                bpf_map_delete_elem(&python_threads, &key);
        }

        count(PROFD_CNT_PY_THREAD_WALKS);
        if (py_read_ptr(py->runtime + py->interpreters_head, &interp) < 0 || !interp ||
            py_read_ptr(interp + py->threads_head, &ts) < 0)
                return 0;
        for (int i = 0; i < PROFD_PY_MAX_THREADS && ts; i++) {
                if (py_read_ptr(ts + py->tstate_thread_id, &id) < 0)
                        return 0;
                if (arch_is_thread_self(self, id)) {
                        found.tstate = ts;
                        bpf_map_update_elem(&python_threads, &key, &found, BPF_ANY);
                        return ts;
                }
                if (py_read_ptr(ts + py->tstate_next, &ts) < 0)
                        return 0;
        }
        found.ns = bpf_ktime_get_ns();
        bpf_map_update_elem(&python_threads, &key, &found, BPF_ANY);
        return 0;
}

/* First call for a sample: the thread's innermost frame into st->py_frame. False when the walk
 * ended (no thread state, no frame). */
static __always_inline bool py_begin(struct sample_state *st, struct task_struct *task)
{
        const struct profd_python_proc *py = &st->py;
        __u64 ts, f = 0;

        count(PROFD_CNT_PY_STACKS);
        ts = py_find_tstate(st, arch_thread_pointer(task));
        if (!ts) {
                py_stop(st, PROFD_PY_STOP_NO_THREAD);
                return false;
        }
        if (py_read_ptr(ts + py->tstate_frame, &f) < 0 ||
            (py->has_cframe && f && py_read_ptr(f + py->cframe_frame, &f) < 0)) {
                py_stop(st, PROFD_PY_STOP_BAD_READ);
                return false;
        }
        if (!f) {
                py_stop(st, PROFD_PY_STOP_IDLE);
                return false;
        }
        st->py_frame = f;
        st->py_last_code = 0;
        st->py_last_fp = 0; /* a frame with no code object gets none */
        st->win_base = 0;   /* the window held the native stack */
        return true;
}

/* Frame f's first size bytes at st->win + *ret_off. The native walk is over, so its stack window
 * holds Python frames now: on a miss it is refilled from the start of f's page up to f's end,
 * which brings the frames below f in that page along (3.11+ keep a thread's frames next to each
 * other, the caller below the callee, in the thread's data stack), so most frames need no read. */
static __always_inline int py_frame_bytes(struct sample_state *st, __u64 f, __u32 size, __u32 *ret_off)
{
        __u64 start, end = f + size;
        __u32 len;

        if (st->win_base && f >= st->win_base && end <= st->win_base + st->win_len) {
                *ret_off = f - st->win_base;
                return 0;
        }
        start = f & ~((__u64)PROFD_PAGE_SIZE - 1);
        if (end > start + PROFD_PAGE_SIZE)
                start = f; /* crosses a page end: that frame alone */
        len = end - start;
        if (len < 8 || len > PROFD_STACK_WINDOW || bpf_probe_read_user(st->win, len, (void *)start) < 0) {
                st->win_base = 0;
                return -1;
        }
        st->win_base = start;
        st->win_len = len;
        *ret_off = f - start;
        return 0;
}

static __always_inline __u64 py_u64(const struct sample_state *st, __u32 off)
{
        __u64 v;

        __builtin_memcpy(&v, &st->win[off & (PROFD_STACK_WINDOW - 1)], sizeof(v));
        return v;
}

/* The fingerprint of the code object at code (profd-python.h), 0 when it cannot be read (counted).
 * A recursion runs one code object frame after frame: its fingerprint is taken once per sample. */
static __always_inline __u32 py_code_fingerprint(struct sample_state *st, __u64 code)
{
        const struct profd_python_proc *py = &st->py;
        __u32 len = py->fp_len;

        if (code == st->py_last_code)
                return st->py_last_fp;
        st->py_last_code = code;
        st->py_last_fp = 0;
        if (len < 8 || len > PROFD_PY_FP_READ_MAX ||
            bpf_probe_read_user(st->py_code, len, (void *)(code + py->fp_start)) < 0) {
                count(PROFD_CNT_PY_NO_FINGERPRINT);
                return 0;
        }
        st->py_last_fp = profd_py_fingerprint(st->py_code, py->fp_words, py->fp_u32);
        return st->py_last_fp;
}

/* Up to PROFD_PY_FRAMES_PER_PROG frames from st->py_frame on. Each takes two entries: the code
 * object and instruction, then the code object's fingerprint. */
static __always_inline void py_walk(struct sample_state *st)
{
        const struct profd_python_proc *py = &st->py;
        __u32 size = py->frame_size;

        if (size > PROFD_PY_FRAME_READ_MAX)
                size = PROFD_PY_FRAME_READ_MAX;
        if (size < 8)
                size = 8;

        for (int i = 0; i < PROFD_PY_FRAMES_PER_PROG; i++) {
                __u64 f = st->py_frame, code, instr, rec;
                __u32 len = st->user.len, off;
                __u8 entry;

                if (!f) {
                        py_stop(st, PROFD_PY_STOP_OK);
                        return;
                }
                if (len + 2 > PROFD_MAX_USER_FRAMES) {
                        py_stop(st, PROFD_PY_STOP_DEPTH);
                        return;
                }
                if (py_frame_bytes(st, f, size, &off) < 0) {
                        py_stop(st, PROFD_PY_STOP_BAD_READ);
                        return;
                }
                st->py_frame = py_u64(st, off + py->frame_previous);
                code = py_u64(st, off + py->frame_code);
                code &= ~7ULL; /* 3.14: f_executable is a _PyStackRef, tag bits below the alignment */
                entry = st->win[(off + py->frame_entry) & (PROFD_STACK_WINDOW - 1)];

                if (py->entry_kind == PROFD_PY_ENTRY_SHIM && entry >= py->owner_cstack) {
                        /* Below here runs the previous call of the eval function: the frame
                         * recorded last was its call's outermost. */
                        if (st->py_recorded) {
                                st->user.ips[(len - 2) & (PROFD_MAX_USER_FRAMES - 1)] |=
                                        PROFD_FRAME_PY_ENTRY;
                                st->uhash = hash_mix(st->uhash, PROFD_FRAME_PY_ENTRY);
                        }
                        continue;
                }

                if (py->lasti_kind == PROFD_PY_LASTI_INT) {
                        __s32 lasti;

                        __builtin_memcpy(&lasti,
                                         &st->win[(off + py->frame_lasti) & (PROFD_STACK_WINDOW - 1)],
                                         sizeof(lasti));
                        instr = lasti < 0 ? 0 : lasti;
                } else {
                        __u64 p = py_u64(st, off + py->frame_lasti), first = code + py->code_adaptive;

                        instr = p >= first ? (p - first) / 2 : 0;
                }
                if (instr > PROFD_PY_INSTR_MAX)
                        instr = PROFD_PY_INSTR_MAX;

                rec = PROFD_FRAME_PYTHON | ((code >> PROFD_PY_CODE_SHIFT) & PROFD_PY_CODE_MASK) |
                      (instr << PROFD_PY_INSTR_SHIFT);
                if (py->entry_kind == PROFD_PY_ENTRY_EVERY ||
                    (py->entry_kind == PROFD_PY_ENTRY_IS_ENTRY && entry))
                        rec |= PROFD_FRAME_PY_ENTRY;
                st->user.ips[len & (PROFD_MAX_USER_FRAMES - 1)] = rec;
                st->uhash = hash_mix(st->uhash, rec);
                rec = PROFD_FRAME_PYTHON | PROFD_FRAME_PY_FP | py_code_fingerprint(st, code);
                st->user.ips[(len + 1) & (PROFD_MAX_USER_FRAMES - 1)] = rec;
                st->uhash = hash_mix(st->uhash, rec);
                st->user.len = len + 2;
                st->py_recorded++;
        }
}
