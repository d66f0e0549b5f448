/* SPDX-License-Identifier: GPL-2.0-only */
/* The DWARF step of the native walk: the table row in force at the pc (pool-lookup.bpf.h) gives
 * the CFA and where the caller's registers were saved; the signal-frame step for the trampoline
 * rows. Registers are the arch's, by meaning (arch.bpf.h). Defines no maps. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "profd-sample.h"
#include "profd-unwind-table.h"
#include "arch.bpf.h"
#include "pool-lookup.bpf.h"
#include "sample-state.bpf.h"
#include "stack-hash.bpf.h"
#include "stack-read.bpf.h"
#include "step-frame-pointer.bpf.h"

/* The signal-return trampoline (__restore_rt): sp points at the registers the kernel saved when
 * delivering the signal; the interrupted frame continues from them, with an exact pc. */
static __always_inline bool step_signal(struct sample_state *st)
{
        struct arch_regs r;

        if (arch_signal_frame_regs(st->sp, &r) < 0) {
                stop(st, PROFD_STOP_BAD_READ);
                return true;
        }
        /* The trampoline's own frame: its "return address" is __restore_rt itself (the handler
         * returns there), so it is symbolized as is too (pc - 1 is the nop glibc puts before it
         * for unwinders that look up pc - 1, outside the symbol). */
        st->user.ips[(st->user.len - 1) & (PROFD_MAX_USER_FRAMES - 1)] |= PROFD_FRAME_EXACT;
        st->uhash = hash_mix(st->uhash, PROFD_FRAME_EXACT); /* the frame above changed */
        set_regs(st, &r);
        st->exact = 1;
        if (st->ip == 0 || st->ip > ARCH_USER_ADDR_MAX) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        return false;
}

/* Go arm64's runtime.asyncPreempt (PROFD_CFA_GO_PREEMPT, unwind-tables/go-table.c): a signal
 * handler injected the call, so its caller is the interrupted frame, as after a signal frame: an
 * exact pc (saved at CFA + rbx_offset, or before asyncPreempt's prologue still in lr; it may be a
 * function's first instruction, so it is not looked up as pc - 1), x29 at CFA + rbp_offset (or
 * untouched), and lr (CFA - 16) still that frame's return address if it has not saved it. The x28
 * (g) the sample found is the goroutine's still. */
static __always_inline bool step_go_preempt(struct sample_state *st, const struct profd_unwind_rule *rule)
{
        __u64 cfa = st->sp + rule->cfa_offset, v[2];

        if (!ARCH_HAS_LINK_REGISTER || rule->cfa_offset <= 0 || (cfa & (ARCH_CFA_ALIGN - 1))) {
                stop(st, PROFD_STOP_UNSUPPORTED);
                return true;
        }
        if (rule->rbx_kind == PROFD_RBP_UNCHANGED) {
                /* asyncPreempt's first instructions: the pc still in lr, x29 untouched; lr is that
                 * pc only in the frame the sample (or a signal) interrupted */
                if (!st->aux_valid) {
                        stop(st, PROFD_STOP_BAD_FRAME);
                        return true;
                }
                st->ip = arch_strip_ra(st->aux);
        } else if (rule->rbx_kind == PROFD_RBP_CFA_OFFSET && rule->rbp_kind == PROFD_RBP_CFA_OFFSET &&
                   rule->rbp_offset + 8 == rule->rbx_offset) {
                /* x29 right below the pc (asyncPreempt's frame record): both in one read */
                if (read_stack(st, cfa + rule->rbp_offset, v, 16) < 0) {
                        stop(st, PROFD_STOP_BAD_READ);
                        return true;
                }
                st->fp = v[0];
                st->ip = arch_strip_ra(v[1]);
        } else {
                stop(st, PROFD_STOP_UNSUPPORTED);
                return true;
        }
        if (read_stack(st, cfa - 16, v, 8) < 0) {
                stop(st, PROFD_STOP_BAD_READ);
                return true;
        }
        st->aux = v[0];
        st->aux_valid = 1;
        st->sp = cfa;
        st->exact = 1;
        if (st->ip == 0 || st->ip > ARCH_USER_ADDR_MAX) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        return false;
}

/* One DWARF step: the rule in force at pc, then CFA = sp|fp|aux + offset (or the arch's PLT
 * forms), the return address where the call left it (CFA + arch_ra_cfa_offset(), or still in the
 * link register: arch_ra_in_register()), fp restored from CFA + offset when saved. Returns true
 * when unwinding ended. */
static __always_inline bool step_dwarf(struct sample_state *st, const struct profd_unwind_mapping *m,
                                       __u64 lookup_pc, const enum profd_step_kind kind)
{
        __u32 rule_idx = find_rule(st, m, lookup_pc - m->load_bias);
        struct profd_unwind_rule *rule;
        __u64 cfa, ra, saved[2];
        __s32 ra_off;

        if (!rule_idx)
                return st->done ? true : step_no_row(st, kind);
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
                cfa = st->fp + rule->cfa_offset;
                break;
        case PROFD_CFA_RBX:
                if (!st->aux_valid) {
                        stop(st, PROFD_STOP_UNSUPPORTED);
                        return true;
                }
                cfa = st->aux + rule->cfa_offset;
                break;
        case PROFD_CFA_PLT1:
        case PROFD_CFA_PLT2:
                cfa = arch_plt_cfa(rule->cfa_kind, st->sp, lookup_pc);
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
                return step_no_row(st, kind);
        case PROFD_CFA_GO_SWITCH:
                return step_stack_switch(st);
        case PROFD_CFA_GO_PREEMPT:
                return step_go_preempt(st, rule);
        case PROFD_CFA_GO_MORESTACK:
                return step_go_morestack(st);
        default:
                stop(st, PROFD_STOP_UNSUPPORTED);
                return true;
        }

        /* The caller's frame lies above ours: a CFA below sp is a wrong row or a corrupt
         * register, and following it could loop. CFA == sp only where the return address is
         * still in the link register (arm64: a leaf or a PLT stub, whose caller's frame starts
         * at sp); it cannot repeat, since the link register is trusted for one frame only. */
        if (cfa < st->sp || (cfa == st->sp && !arch_ra_in_register(rule)) || (cfa & (ARCH_CFA_ALIGN - 1))) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        if (arch_ra_unknown(rule)) {
                /* arm64: a return-address rule BPF cannot evaluate. */
                stop(st, PROFD_STOP_UNSUPPORTED);
                return true;
        }
        ra_off = arch_ra_cfa_offset(rule);
        if (!arch_ra_in_register(rule) && rule->rbp_kind == PROFD_RBP_CFA_OFFSET &&
            rule->rbp_offset == ra_off - 8) {
                /* fp saved right below the return address (x86-64: push rbp right after the
                 * call; arm64: stp x29, x30): both in one read. */
                if (read_stack(st, cfa + ra_off - 8, saved, 16) < 0) {
                        stop(st, PROFD_STOP_BAD_READ);
                        return true;
                }
                st->fp = saved[0];
                ra = saved[1];
        } else {
                if (arch_ra_in_register(rule)) {
                        /* Not saved yet: the caller continues at the address still in aux (arm64:
                         * lr), which holds it only in the interrupted frame or the one a signal
                         * frame restored; anywhere else lr was overwritten by the call we came
                         * from. */
                        if (!st->aux_valid) {
                                stop(st, PROFD_STOP_BAD_FRAME);
                                return true;
                        }
                        ra = st->aux;
                } else {
                        if (read_stack(st, cfa + ra_off, saved, 8) < 0) {
                                stop(st, PROFD_STOP_BAD_READ);
                                return true;
                        }
                        ra = saved[0];
                }
                if (rule->rbp_kind == PROFD_RBP_CFA_OFFSET) {
                        if (read_stack(st, cfa + rule->rbp_offset, saved, 8) < 0) {
                                stop(st, PROFD_STOP_BAD_READ);
                                return true;
                        }
                        st->fp = saved[0];
                }
        }
        if (ARCH_HAS_LINK_REGISTER) {
                /* The caller made a call: its lr is no longer its return address. */
                st->aux_valid = 0;
        } else if (rule->rbx_kind == PROFD_RBP_CFA_OFFSET) {
                /* Only a CFA based on aux needs it: a failed read loses aux, not the stack. */
                if (read_stack(st, cfa + rule->rbx_offset, saved, 8) < 0)
                        st->aux_valid = 0;
                else
                        st->aux = saved[0];
        } else if (rule->rbx_kind == PROFD_RBX_UNKNOWN)
                st->aux_valid = 0;
        ra = arch_strip_ra(ra);
        if (ra == 0) {
                stop(st, PROFD_STOP_OK);
                return true;
        }
        if (ra > ARCH_USER_ADDR_MAX) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        st->sp = cfa;
        st->ip = ra;
        st->exact = 0;
        return false;
}
