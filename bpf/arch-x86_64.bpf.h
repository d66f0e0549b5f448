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
/* x86-64 never reorders a load with an earlier load (TSO). */
#define ARCH_LOADS_ORDERED 1
/* Go keeps g in TLS on amd64: stack switches follow the saved rbp alone. */
#define ARCH_GO_G_IN_REGISTER 0

/* Only for ARCH_HAS_LINK_REGISTER ports. */
static __always_inline bool arch_follows_call(__u64 ra)
{
        return true;
}

static __always_inline __u64 arch_go_caller_sp(__u64 record, __u64 caller_fp)
{
        return record + ARCH_FP_CALLER_SP;
}
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
        r->g = 0;
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
        r->g = 0;
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
        r->g = 0;
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

/* Whether code[k..] is a HotSpot x86-64 return: its safepoint poll (JDK 16+: cmp rsp, [r15+d];
 * ja stub; JDK 11: mov r10, [r15+d]; test [r10], eax, or test [rip+d], eax), or what is left of
 * it, then ret. Constant offsets only: each check is a few compares for the verifier. */
static __always_inline bool arch_hs_poll_ret(const __u8 *c, int k)
{
        if (c[k] == 0xc3) /* ret */
                return true;
        if (c[k] == 0x0f && c[k + 1] == 0x87) /* ja rel32 (the poll's stub); ret */
                return c[k + 6] == 0xc3;
        if (c[k] == 0x41 && c[k + 1] == 0x85 && c[k + 2] == 0x02) /* test [r10], eax; ret */
                return c[k + 3] == 0xc3;
        if (c[k] == 0x85 && c[k + 1] == 0x05) /* test [rip+d32], eax; ret */
                return c[k + 6] == 0xc3;
        if (c[k] == 0x49 && c[k + 1] == 0x3b && c[k + 2] == 0x67) /* cmp rsp, [r15+d8]; ja; ret */
                return c[k + 4] == 0x0f && c[k + 5] == 0x87 && c[k + 10] == 0xc3;
        if (c[k] == 0x49 && c[k + 1] == 0x3b && c[k + 2] == 0xa7) /* cmp rsp, [r15+d32]; ja; ret */
                return c[k + 7] == 0x0f && c[k + 8] == 0x87 && c[k + 13] == 0xc3;
        if (c[k] == 0x4d && c[k + 1] == 0x8b && c[k + 2] == 0x57) /* mov r10, [r15+d8]; test; ret */
                return c[k + 4] == 0x41 && c[k + 5] == 0x85 && c[k + 6] == 0x02 && c[k + 7] == 0xc3;
        if (c[k] == 0x4d && c[k + 1] == 0x8b && c[k + 2] == 0x97) /* mov r10, [r15+d32]; test; ret */
                return c[k + 7] == 0x41 && c[k + 8] == 0x85 && c[k + 9] == 0x02 && c[k + 10] == 0xc3;
        return false;
}

/* HotSpot's x86-64 epilogues (C1 remove_frame + return_op, C2 MachEpilogNode) are [vzeroupper]
 * add rsp, N; pop rbp; the return poll; ret. Up to the add the frame is whole (as in the body);
 * at the pop the saved rbp is at rsp; past it the return address is. The code at the pc (an
 * instruction boundary) tells which. */
static __always_inline int arch_hs_compiled_exit(const __u8 *code)
{
        if (code[0] == 0x5d && arch_hs_poll_ret(code, 1)) /* pop rbp */
                return ARCH_HS_FRAME_FP_AT_SP;
        if (arch_hs_poll_ret(code, 0))
                return ARCH_HS_FRAME_RA_AT_SP;
        return ARCH_HS_FRAME_BUILT;
}

/* HotSpot's x86-64 prologues (MacroAssembler::verified_entry for C2, C1's build_frame), before the
 * frame complete offset: the stack bang (mov [rsp-N], eax), push rbp, [mov rbp, rsp,] sub rsp, N,
 * then the nmethod entry barrier (cmp [r15+d], imm; jne); or, C2 without a bang, sub rsp, imm32
 * then mov [rsp+N-8], rbp. Before the push (or the bang-less sub) the return address is at rsp;
 * between the push and the sub the saved rbp is; after both the frame is whole. Other code there
 * (the bang-less rbp store, the inline cache check of the unverified entry) is not read: unsure. */
static __always_inline int arch_hs_compiled_entry(const __u8 *c)
{
        if (c[0] == 0x55) /* push rbp */
                return ARCH_HS_FRAME_RA_AT_SP;
        if (c[0] == 0x89 && c[1] == 0x84 && c[2] == 0x24) /* mov [rsp+d32], eax: the stack bang */
                return ARCH_HS_FRAME_RA_AT_SP;
        /* C2 without a stack bang (a small leaf frame): sub rsp, imm32 first, then mov [rsp+d],
         * rbp. */
        if (c[0] == 0x48 && c[1] == 0x81 && c[2] == 0xec && c[7] == 0x48 && c[8] == 0x89 &&
            (c[9] == 0x6c || c[9] == 0xac) && c[10] == 0x24)
                return ARCH_HS_FRAME_RA_AT_SP;
        if (c[0] == 0x48 && (c[1] == 0x83 || c[1] == 0x81) && c[2] == 0xec) /* sub rsp, imm */
                return ARCH_HS_FRAME_FP_AT_SP;
        if (c[0] == 0x48 && c[1] == 0x89 && c[2] == 0xe5) /* mov rbp, rsp */
                return ARCH_HS_FRAME_FP_AT_SP;
        if (c[0] == 0x48 && c[1] == 0x89 && (c[2] == 0x6c || c[2] == 0xac) && c[3] == 0x24)
                return ARCH_HS_FRAME_FP_IN_REG; /* mov [rsp+d], rbp after a bang-less sub */
        /* jne of the entry barrier, after its cmp [r15+d8], imm32 (the frame is whole); a jne
         * elsewhere (the inline cache check) stays unsure. */
        if (c[0] == 0x0f && c[1] == 0x85 && c[-8] == 0x41 && c[-7] == 0x81 && c[-6] == 0x7f)
                return ARCH_HS_FRAME_BUILT;
        if (c[0] == 0x41 && (c[1] == 0x81 || c[1] == 0x83) &&
            (c[2] == 0x7f || c[2] == 0xbf)) /* cmp [r15+d], imm */
                return ARCH_HS_FRAME_BUILT;
        return ARCH_HS_FRAME_UNSURE;
}
