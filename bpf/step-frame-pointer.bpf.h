/* SPDX-License-Identifier: GPL-2.0-only */
/* Frame-pointer steps of the native walk: the plain one (mappings without a table, pids not in the
 * pool, pcs no CFI covers) and the stack switch that follows Go's systemstack and friends from
 * the g0 stack back to the goroutine's. The frame record's layout is the arch's (arch.bpf.h).
 * A frame left without CFI may be V8's (v8-frame.bpf.h). Defines no maps. */
#pragma once

#include "vmlinux.h"

#include "profd-sample.h"
#include "arch.bpf.h"
#include "sample-state.bpf.h"
#include "stack-read.bpf.h"
#include "v8-frame.bpf.h"

/* Stack switches one sample may follow (Go: signal stack -> g0 -> goroutine is two); a bound,
 * since a switch step is not checked against sp and a corrupt chain could alternate. */
#define PROFD_MAX_STACK_SWITCHES 4

/* Frame-pointer step: the frame record at fp holds the caller's fp and the return address.
 * Validated: fp must lie above sp and be aligned, and the chain must move up the stack (checked
 * on the next call via fp >= sp). Returns true when unwinding ended. */
static __always_inline bool step_frame_pointer(struct sample_state *st)
{
        __u64 frame[2], caller_sp;

        /* arm64's vDSO has no CFI, and its clock functions are leaves without a frame record: a
         * frame-pointer step from there would skip their caller. In the interrupted frame the
         * return address is still in lr (ARCH_HAS_LINK_REGISTER; x86-64 never takes this), if
         * the vDSO code has not used lr otherwise: taken only when it follows a call, else the
         * walk ends as bad_frame (counted) rather than guess. Unverified either way: the caller
         * comes from no table, so the stack reports no_row unless CFI later reaches the
         * outermost frame (st->guess). */
        if (ARCH_HAS_LINK_REGISTER && st->exact && st->aux_valid &&
            st->ip - arch_signal_tramp_base(current_task()) < ARCH_SIGNAL_TRAMP_WINDOW) {
                frame[0] = arch_strip_ra(st->aux);
                if (frame[0] == 0 || frame[0] > ARCH_USER_ADDR_MAX || !arch_follows_call(frame[0])) {
                        stop(st, PROFD_STOP_BAD_FRAME);
                        return true;
                }
                if (st->guess == PROFD_STOP_OK)
                        st->guess = PROFD_STOP_NO_ROW;
                st->ip = frame[0];
                st->exact = 0;
                st->aux_valid = 0;
                return false;
        }
        if (st->fp == 0) {
                stop(st, PROFD_STOP_OK);
                return true;
        }
        if (st->fp < st->sp || (st->fp & (ARCH_FP_ALIGN - 1))) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        if (read_stack(st, st->fp, frame, 16) < 0) {
                stop(st, PROFD_STOP_BAD_READ);
                return true;
        }
        caller_sp = st->fp + ARCH_FP_CALLER_SP;
        if (ARCH_HAS_LINK_REGISTER && st->v8_active) {
                __u64 markers[2];

                /* V8's arm64 entry frame: its caller's sp is above its saved registers
                 * (v8-frame.bpf.h). */
                if (read_stack(st, st->fp - 16, markers, 16) == 0 && markers[0] == 0 &&
                    (markers[1] == V8_MARKER_ENTRY || markers[1] == V8_MARKER_CONSTRUCT_ENTRY))
                        caller_sp = st->fp + V8_ARM64_ENTRY_CALLER_SP;
        }
        frame[ARCH_FP_SLOT_RA] = arch_strip_ra(frame[ARCH_FP_SLOT_RA]);
        if (frame[ARCH_FP_SLOT_RA] == 0) {
                stop(st, PROFD_STOP_OK);
                return true;
        }
        if (frame[ARCH_FP_SLOT_RA] > ARCH_USER_ADDR_MAX) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        st->sp = caller_sp;
        st->fp = frame[ARCH_FP_SLOT_FP];
        st->ip = frame[ARCH_FP_SLOT_RA];
        st->exact = 0;
        st->aux_valid = 0; /* no table says where a callee saved it */
        return false;
}

/* Go runtime offsets (runtime/runtime2.go; the same on amd64 and arm64 since Go 1.4 for g's, and
 * m.curg since Go 1.17 at least, checked against Go 1.19's asm_arm64.s): g.m, m.curg, and
 * g.sched.bp (gobuf: sp, pc, g, ctxt, ret, lr, bp). */
#define GO_G_M 48
#define GO_M_CURG 192
#define GO_G_SCHED_BP 104

/* The frame record a stack switch continues from. arm64's systemstack loads x29 from g0's
 * sched.bp before calling its callee, so the callee's saved x29 leads into the g0 stack; the
 * goroutine's frame record was saved in curg.sched.bp (gosave_systemstack_switch), and g (x28 at
 * the sample) is g0 then: g.m.curg.sched.bp. Where g is the goroutine itself (nanotime1/walltime
 * move only sp to the g0 stack and keep their own x29) or anything is unreadable, st->fp. */
static __always_inline __u64 go_switch_record(struct sample_state *st)
{
        __u64 m, curg, bp;

        if (!ARCH_GO_G_IN_REGISTER || st->go_g == 0 || st->go_g > ARCH_USER_ADDR_MAX)
                return st->fp;
        if (bpf_probe_read_user(&m, sizeof(m), (void *)(st->go_g + GO_G_M)) < 0 || m == 0 ||
            m > ARCH_USER_ADDR_MAX)
                return st->fp;
        if (bpf_probe_read_user(&curg, sizeof(curg), (void *)(m + GO_M_CURG)) < 0 || curg == 0 ||
            curg == st->go_g || curg > ARCH_USER_ADDR_MAX)
                return st->fp;
        /* 0 once systemstack returned (it clears sched.sp and sched.bp): no switch in progress */
        if (bpf_probe_read_user(&bp, sizeof(bp), (void *)(curg + GO_G_SCHED_BP)) < 0 || bp == 0)
                return st->fp;
        st->go_g = curg; /* a further switch starts from the goroutine */
        return bp;
}

/* Go's systemstack, morestack and asmcgocall run their callee on the thread's g0 stack; their
 * callers are on the goroutine's stack. The callee saved the goroutine's frame pointer (that of
 * the function that called systemstack), and Go keeps frame pointers, so one frame-pointer step
 * from it lands on the goroutine's stack, wherever that lies. As in perf's frame-pointer walk, the
 * function that called systemstack itself is not seen (its return address is kept only in the
 * goroutine's g.sched). Stacks may interleave in any order, so the step is not checked against
 * sp; PROFD_MAX_STACK_SWITCHES bounds how often a sample takes it. */
static __always_inline bool step_stack_switch(struct sample_state *st)
{
        __u64 frame[2];
        __u64 record = st->switches < PROFD_MAX_STACK_SWITCHES ? go_switch_record(st) : 0;

        if (st->switches >= PROFD_MAX_STACK_SWITCHES || record == 0 || (record & (ARCH_FP_ALIGN - 1)) ||
            record > ARCH_USER_ADDR_MAX) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        st->switches++;
        if (read_stack(st, record, frame, 16) < 0) {
                stop(st, PROFD_STOP_BAD_READ);
                return true;
        }
        frame[ARCH_FP_SLOT_RA] = arch_strip_ra(frame[ARCH_FP_SLOT_RA]);
        if (frame[ARCH_FP_SLOT_RA] == 0 || frame[ARCH_FP_SLOT_RA] > ARCH_USER_ADDR_MAX) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        st->sp = arch_go_caller_sp(record, frame[ARCH_FP_SLOT_FP]);
        st->fp = frame[ARCH_FP_SLOT_FP];
        st->ip = frame[ARCH_FP_SLOT_RA];
        st->exact = 0;
        st->aux_valid = 0;
        return false;
}

/* g.sched (gobuf: sp, pc, g, ctxt, ret, lr, bp) and m.g0 (runtime/runtime2.go, Go 1.19's
 * asm_arm64.s: g_sched 56, m_g0 0). */
#define GO_G_SCHED 56
#define GO_M_G0 0
struct go_gobuf {
        __u64 sp, pc, g, ctxt, ret, lr, bp;
};

/* arm64's runtime.morestack (PROFD_CFA_GO_MORESTACK): it saved the goroutine's state in g.sched
 * (pc: the function f that called it, sp: f's, lr: f's caller's pc, bp: x29), switched g (x28)
 * to g0 and called newstack there, which resumes the goroutine from g.sched. Go's own tracebacks
 * continue from g0 at m.curg.sched (pc, sp, lr) and end at morestack when m.curg is nil (newstack
 * descheduled the goroutine: gopreempt_m); so does this step: f comes next, its return address
 * still in lr, as in an interrupted frame. Anything else (g is not g0: a sample in morestack
 * before it switched; an unreadable word) ends the walk as bad_frame. */
static __always_inline bool step_go_morestack(struct sample_state *st)
{
        struct go_gobuf sched;
        __u64 m, g0, curg;

        if (!ARCH_GO_G_IN_REGISTER || st->switches >= PROFD_MAX_STACK_SWITCHES || st->go_g == 0 ||
            st->go_g > ARCH_USER_ADDR_MAX ||
            bpf_probe_read_user(&m, sizeof(m), (void *)(st->go_g + GO_G_M)) < 0 || m == 0 ||
            m > ARCH_USER_ADDR_MAX || bpf_probe_read_user(&g0, sizeof(g0), (void *)(m + GO_M_G0)) < 0 ||
            g0 != st->go_g || bpf_probe_read_user(&curg, sizeof(curg), (void *)(m + GO_M_CURG)) < 0 ||
            curg > ARCH_USER_ADDR_MAX) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        if (curg == 0) {
                stop(st, PROFD_STOP_OK); /* where Go's tracebacks end too */
                return true;
        }
        if (bpf_probe_read_user(&sched, sizeof(sched), (void *)(curg + GO_G_SCHED)) < 0 || sched.pc == 0 ||
            sched.pc > ARCH_USER_ADDR_MAX || sched.sp == 0 || sched.sp > ARCH_USER_ADDR_MAX) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        st->switches++;
        st->go_g = curg;
        st->ip = sched.pc; /* the return address of f's call of morestack */
        st->sp = sched.sp;
        st->fp = sched.bp;
        st->aux = sched.lr;
        st->aux_valid = 1;
        st->exact = 0;
        return false;
}

/* No CFI covers the pc (hand-written assembly, a gap between functions): a validated
 * frame-pointer step. Unverified: unless CFI later leads to the outermost frame, the stack reports
 * no_row however it ends. */
static __always_inline bool step_no_row(struct sample_state *st, const enum profd_step_kind kind)
{
        if (st->guess == PROFD_STOP_OK)
                st->guess = PROFD_STOP_NO_ROW;
        if (kind == PROFD_STEP_V8)
                v8_note_frame(st, false); /* V8's builtins have no CFI */
        return step_frame_pointer(st);
}
