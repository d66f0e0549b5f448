/* SPDX-License-Identifier: GPL-2.0-only */
/* x86-64 implementation of the architecture interface (arch.bpf.h, which documents every name
 * here). Include arch.bpf.h, not this file. Defines no maps. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "profd-unwind-table.h"
#include "task.bpf.h"

#ifndef EFAULT
#define EFAULT 14
#endif

/* Addresses above are the kernel's (and the non-canonical hole): never a user frame. */
#define ARCH_USER_ADDR_MAX 0x00007fffffffffffULL
/* User stacks are 8-byte aligned at every call boundary: so are saved rbp and the CFA. */
#define ARCH_FP_ALIGN 8
#define ARCH_CFA_ALIGN 8
/* push rbp; mov rsp, rbp: [rbp] = caller's rbp, [rbp + 8] = return address, caller's rsp above. */
#define ARCH_FP_SLOT_FP 0
#define ARCH_FP_SLOT_RA 1
#define ARCH_FP_CALLER_SP 16
/* call pushes the return address: it sits just below the caller's rsp, which is the CFA. */
#define ARCH_RA_CFA_OFFSET (-8)
/* No link register: rbx (aux) is callee-saved, restored by the rows' rbx_* rules. */
#define ARCH_HAS_LINK_REGISTER 0
/* __restore_rt has CFI (a SIGNAL row): no trampoline to recognize by its code. */
#define ARCH_SIGNAL_TRAMP_WINDOW 0

/* __USER32_CS: the code segment of 32-bit (compat) tasks; 64-bit tasks run with 0x33. */
#define ARCH_X86_USER32_CS 0x23
/* Index of cs in struct pt_regs viewed as __u64[]. */
#define ARCH_X86_PT_REGS_CS_SLOT 17
/* Offsets of rbp, rsp in the ucontext that rsp points at inside __restore_rt (uc_flags, uc_link,
 * uc_stack = 40 bytes, then mcontext gregs r8..r15, rdi, rsi, rbp, ..): rbx follows rbp, rip
 * follows rsp, so two 16-byte reads fetch all four. */
#define ARCH_X86_UC_RBP 120 /* rbx follows at 128 */
#define ARCH_X86_UC_RSP 160 /* rip follows at 168 */

static __always_inline __u64 arch_ctx_mode(struct bpf_perf_event_data *ctx)
{
        /* cs as the full 8-byte slot: the perf_event context only allows 8-byte loads there, and
         * pt_regs is ABI (struct user_regs_struct), so slot 17 is cs on every kernel. */
        return ((const __u64 *)ctx)[ARCH_X86_PT_REGS_CS_SLOT] & 0xffff;
}

/* The privilege level is cs's low two bits: 0 kernel, 3 user. */
static __always_inline bool arch_mode_in_kernel(__u64 mode)
{
        return (mode & 3) == 0;
}

static __always_inline bool arch_mode_is_compat(__u64 mode)
{
        return mode == ARCH_X86_USER32_CS;
}

static __always_inline void arch_ctx_user_regs(struct bpf_perf_event_data *ctx, struct arch_regs *r)
{
        r->ip = ctx->regs.ip;
        r->sp = ctx->regs.sp;
        r->fp = ctx->regs.bp;
        r->aux = ctx->regs.bx;
}

static __always_inline int arch_task_user_regs(struct task_struct *task, struct arch_regs *r, __u64 *mode)
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
                /* As x86-64's task_pt_regs() computes it: no padding above pt_regs on x86-64. */
                void *stack = BPF_CORE_READ(task, stack);

                if (!stack ||
                    bpf_probe_read_kernel(&regs, sizeof(regs), stack + profd_thread_size - sizeof(regs)) < 0)
                        return -EFAULT;
        }
        if ((regs.cs & 3) != 3)
                return -EFAULT;
        r->ip = regs.ip;
        r->sp = regs.sp;
        r->fp = regs.bp;
        r->aux = regs.bx;
        *mode = regs.cs & 0xffff;
        return 0;
}

static __always_inline int arch_signal_frame_regs(__u64 sp, struct arch_regs *r)
{
        __u64 regs[4];

        if (bpf_probe_read_user(&regs[0], 16, (void *)(sp + ARCH_X86_UC_RBP)) < 0 ||
            bpf_probe_read_user(&regs[2], 16, (void *)(sp + ARCH_X86_UC_RSP)) < 0)
                return -EFAULT;
        r->fp = regs[0];
        r->aux = regs[1];
        r->sp = regs[2];
        r->ip = regs[3];
        return 0;
}

/* A PLT entry is 16 bytes; the push in its second half (lazy binding) moved rsp by 8 more.
 * PROFD_CFA_PLT1: .plt (push at offset 11); PROFD_CFA_PLT2: .plt.sec with IBT (at offset 10). */
static __always_inline __u64 arch_plt_cfa(__u32 cfa_kind, __u64 sp, __u64 pc)
{
        return sp + 8 + ((pc & 15) >= (cfa_kind == PROFD_CFA_PLT1 ? 11 : 10) ? 8 : 0);
}

static __always_inline bool arch_ra_in_register(const struct profd_unwind_rule *rule)
{
        return false;
}

/* The rows' rbx_* describe rbx; the return address is always at CFA - 8. */
static __always_inline bool arch_ra_unknown(const struct profd_unwind_rule *rule)
{
        return false;
}

static __always_inline __s32 arch_ra_cfa_offset(const struct profd_unwind_rule *rule)
{
        return ARCH_RA_CFA_OFFSET;
}

static __always_inline __u64 arch_strip_ra(__u64 ra)
{
        return ra;
}

static __always_inline __u64 arch_signal_tramp_base(struct task_struct *task)
{
        return 0;
}

static __always_inline bool arch_is_signal_return(__u64 pc, bool exact)
{
        return false;
}

/* The fs base is pthread_self() itself. */
static __always_inline bool arch_is_thread_self(__u64 tp, __u64 id)
{
        return id == tp;
}

static __always_inline __u64 arch_thread_pointer(struct task_struct *task)
{
        return profd_have_task_btf ? task->thread.fsbase : BPF_CORE_READ(task, thread.fsbase);
}
