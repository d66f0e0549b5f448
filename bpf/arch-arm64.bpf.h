/* SPDX-License-Identifier: GPL-2.0-only */
/* arm64 (AArch64) implementation of the architecture interface (arch.bpf.h, which documents every
 * name here). Include arch.bpf.h, not this file. Defines no maps.
 *
 * Registers by meaning: ip = pc, sp = sp, fp = x29, aux = x30 (the link register). The table rows
 * follow the aarch64 encoding of profd-unwind-table.h: rbp_* describe x29, rbx_* the return
 * address (x30's DWARF column): still in lr, saved at CFA + rbx_offset, or unknown. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "profd-unwind-table.h"
#include "task.bpf.h"

#ifndef EFAULT
#define EFAULT 14
#endif

/* Debian's arm64 kernels (and most others) give user space 48-bit virtual addresses
 * (CONFIG_ARM64_VA_BITS=48): higher bits of a return address are pointer authentication's (or the
 * top byte's tag), of a frame the kernel's. */
#define ARCH_USER_ADDR_MAX 0x0000ffffffffffffULL
/* Frame records are 8-byte aligned at least; sp is 16-byte aligned at every call (the hardware's
 * stack alignment check, SCTLR_EL1.SA0, is on for user space), so is the CFA. */
#define ARCH_FP_ALIGN 8
#define ARCH_CFA_ALIGN 16
/* stp x29, x30, [sp, #-N]!; mov x29, sp: [x29] = caller's x29, [x29 + 8] = return address. The
 * caller's sp is not recorded: x29 + 16 is right for frames whose record sits at the top of the
 * frame (GCC's and Go's layout), and only a sanity bound for the next step otherwise. */
#define ARCH_FP_SLOT_FP 0
#define ARCH_FP_SLOT_RA 1
#define ARCH_FP_CALLER_SP 16
/* bl leaves the return address in x30, not on the stack: each row says where it is (rbx_*). */
#define ARCH_HAS_LINK_REGISTER 1
/* arm64 may reorder independent loads, and the BPF of 5.10 has no load-acquire to forbid it. */
#define ARCH_LOADS_ORDERED 0
/* Go's arm64 ABI reserves x28 for the running g (runtime/asm_arm64.s). */
#define ARCH_GO_G_IN_REGISTER 1

/* Go's arm64 frames put the record below sp (MOVD.W R30, -size(RSP); MOVD R29, -8(RSP); SUB $8,
 * RSP, R29): in every Go frame that has one, x29 = sp - 8, so the caller's sp follows from its
 * x29, whatever the callee's frame size. */
/* lr is a return address only if the instruction before it is a call: BL, BLR, or pointer
 * authentication's BLRAA/BLRAAZ/BLRAB/BLRABZ (any Rn/Rm). Anything else (lr overwritten, a stale
 * value) is not trusted. */
#define ARCH_ARM64_BL_MASK 0xfc000000u
#define ARCH_ARM64_BL 0x94000000u
#define ARCH_ARM64_BLR_MASK 0xfffffc1fu
#define ARCH_ARM64_BLR 0xd63f0000u
#define ARCH_ARM64_BLRA_MASK 0xfefff800u
#define ARCH_ARM64_BLRA 0xd63f0800u
static __always_inline bool arch_follows_call(__u64 ra)
{
        __u32 insn;

        if (ra < 4 || bpf_probe_read_user(&insn, sizeof(insn), (void *)(ra - 4)) < 0)
                return false;
        return (insn & ARCH_ARM64_BL_MASK) == ARCH_ARM64_BL ||
               (insn & ARCH_ARM64_BLR_MASK) == ARCH_ARM64_BLR ||
               (insn & ARCH_ARM64_BLRA_MASK) == ARCH_ARM64_BLRA;
}

static __always_inline __u64 arch_go_caller_sp(__u64 record, __u64 caller_fp)
{
        return caller_fp ? caller_fp + 8 : record + ARCH_FP_CALLER_SP;
}

/* pstate: M[3:0] is the exception level and stack pointer (0: EL0t, user); M[4] set is AArch32. */
#define ARCH_ARM64_PSR_MODE_MASK 0xf
#define ARCH_ARM64_PSR_MODE32 0x10

/* The signal frame the kernel builds on the user stack (arch/arm64/kernel/signal.c), which sp
 * points at when the handler returns into __kernel_rt_sigreturn: struct rt_sigframe { struct
 * siginfo info; struct ucontext uc; }, the interrupted registers in uc.uc_mcontext (struct
 * sigcontext: fault_address, regs[31], sp, pc, pstate). User ABI, the same on every kernel:
 * x28 (Go's g), x29, x30, sp, pc are five consecutive __u64, one read. */
#define ARCH_ARM64_SIGFRAME_X29 544
_Static_assert(__builtin_offsetof(struct rt_sigframe, uc.uc_mcontext.regs[29]) == ARCH_ARM64_SIGFRAME_X29,
               "rt_sigframe layout");
_Static_assert(__builtin_offsetof(struct rt_sigframe, uc.uc_mcontext.pc) == ARCH_ARM64_SIGFRAME_X29 + 24,
               "rt_sigframe layout");

/* __kernel_rt_sigreturn, the vDSO's signal-return trampoline every handler returns to (glibc
 * passes no SA_RESTORER on arm64): `mov x8, #__NR_rt_sigreturn (139); svc #0`, the same code in
 * every kernel's vDSO. The vDSO has no CFI a table can use for it, so the walker recognizes it by
 * this code at a return address inside the vDSO (mm->context.vdso, ARCH_SIGNAL_TRAMP_WINDOW). */
#define ARCH_ARM64_SIGRETURN_CODE 0xd4000001d2801168ULL /* little-endian: mov x8, #139 then svc #0 */
/* The vDSO's text is two pages on 5.10-6.12 kernels (the data pages precede it): a bound wide
 * enough for any of them, small enough that other code never matches. */
#define ARCH_SIGNAL_TRAMP_WINDOW (4 * 4096)

static __always_inline __u64 arch_ctx_mode(struct bpf_perf_event_data *ctx)
{
        return ctx->regs.pstate;
}

static __always_inline bool arch_mode_in_kernel(__u64 mode)
{
        return (mode & ARCH_ARM64_PSR_MODE_MASK) != 0;
}

/* A 32-bit (AArch32) task: its frames and CFI are not the 64-bit ABI's. */
static __always_inline bool arch_mode_is_compat(__u64 mode)
{
        return (mode & ARCH_ARM64_PSR_MODE32) != 0;
}

static __always_inline void arch_ctx_user_regs(struct bpf_perf_event_data *ctx, struct arch_regs *r)
{
        r->ip = ctx->regs.pc;
        r->sp = ctx->regs.sp;
        r->fp = ctx->regs.regs[29];
        r->aux = ctx->regs.regs[30];
        r->g = ctx->regs.regs[28];
}

static __always_inline int arch_task_user_regs(struct task_struct *task, struct arch_regs *r, __u64 *mode)
{
        /* x28, x29, x30, sp, pc, pstate: consecutive in struct user_pt_regs, which starts pt_regs. */
        __u64 regs[6];

        if (profd_have_task_btf && profd_have_task_pt_regs) {
                struct pt_regs *u = (struct pt_regs *)bpf_task_pt_regs(task);

                if (!u || bpf_probe_read_kernel(regs, sizeof(regs), &u->regs[28]) < 0)
                        return -EFAULT;
        } else {
                /* As arm64's task_pt_regs() computes it: pt_regs ends the kernel stack. Its size
                 * differs between kernels (fields after user_pt_regs): CO-RE gives this one's. */
                void *stack = BPF_CORE_READ(task, stack);
                __u64 at = profd_thread_size - bpf_core_type_size(struct pt_regs) +
                           __builtin_offsetof(struct user_pt_regs, regs[28]);

                if (!stack || bpf_probe_read_kernel(regs, sizeof(regs), stack + at) < 0)
                        return -EFAULT;
        }
        if (arch_mode_in_kernel(regs[5]))
                return -EFAULT;
        r->g = regs[0];
        r->fp = regs[1];
        r->aux = regs[2];
        r->sp = regs[3];
        r->ip = regs[4];
        *mode = regs[5];
        return 0;
}

static __always_inline int arch_signal_frame_regs(__u64 sp, struct arch_regs *r)
{
        __u64 regs[5];

        if (bpf_probe_read_user(regs, sizeof(regs), (void *)(sp + ARCH_ARM64_SIGFRAME_X29 - 8)) < 0)
                return -EFAULT;
        r->g = regs[0];
        r->fp = regs[1];
        r->aux = regs[2];
        r->sp = regs[3];
        r->ip = regs[4];
        return 0;
}

/* No PLT rows on arm64: PLT stubs touch neither sp nor x29/x30 (plain rows, return address in lr). */
static __always_inline __u64 arch_plt_cfa(__u32 cfa_kind, __u64 sp, __u64 pc)
{
        return 0;
}

static __always_inline bool arch_ra_in_register(const struct profd_unwind_rule *rule)
{
        return rule->rbx_kind == PROFD_RBP_UNCHANGED;
}

static __always_inline bool arch_ra_unknown(const struct profd_unwind_rule *rule)
{
        return rule->rbx_kind == PROFD_RBX_UNKNOWN;
}

static __always_inline __s32 arch_ra_cfa_offset(const struct profd_unwind_rule *rule)
{
        return rule->rbx_offset;
}

/* Pointer authentication signs return addresses in their unused high bits (paciasp): the address
 * is the low bits. Stripped whether signed or not, as the table's PROFD_RULE_RA_SIGNED only says
 * where the compiler signed, and lr or a frame record may hold a signed value anywhere. */
static __always_inline __u64 arch_strip_ra(__u64 ra)
{
        return ra & ARCH_USER_ADDR_MAX;
}

/* Base of the vDSO, where the signal-return trampoline lies (ARCH_SIGNAL_TRAMP_WINDOW); 0 if
 * unknown. */
static __always_inline __u64 arch_signal_tramp_base(struct task_struct *task)
{
        if (profd_have_task_btf)
                return task->mm ? (__u64)task->mm->context.vdso : 0;
        return (__u64)BPF_CORE_READ(task, mm, context.vdso);
}

/* pc is in the vDSO: is it __kernel_rt_sigreturn? A return address (a handler returns there) is
 * its first instruction; an exact pc (the sample hit the trampoline itself, or rt_sigreturn in
 * the kernel: the saved pc is past the svc) may be any of its two instructions or just past them.
 * sp is the signal frame's at all of these. */
static __always_inline bool arch_is_signal_return(__u64 pc, bool exact)
{
        __u32 code[4];

        if (!exact) {
                if (bpf_probe_read_user(code, 8, (void *)pc) < 0)
                        return false;
                return *(__u64 *)code == ARCH_ARM64_SIGRETURN_CODE;
        }
        if (bpf_probe_read_user(code, sizeof(code), (void *)(pc - 8)) < 0)
                return false;
        /* Bounded: the three places an exact pc may have in the two-instruction sequence. */
        for (int i = 0; i < 3; i++) {
                if (((__u64)code[i + 1] << 32 | code[i]) == ARCH_ARM64_SIGRETURN_CODE)
                        return true;
        }
        return false;
}

/* TPIDR_EL0, which glibc and musl point at the thread's TCB: struct pthread lies right below it
 * (TLS variant I), so pthread_self() is tp - sizeof(struct pthread), a size that differs between
 * libc versions (~1.5-2 KiB). Another thread's struct pthread lies in its own stack mapping or
 * TLS block, far from this one's: a pthread_self() less than a page below tp is this thread's. */
#define ARCH_ARM64_PTHREAD_MAX 4096
static __always_inline bool arch_is_thread_self(__u64 tp, __u64 id)
{
        return id < tp && tp - id <= ARCH_ARM64_PTHREAD_MAX;
}

static __always_inline __u64 arch_thread_pointer(struct task_struct *task)
{
        return profd_have_task_btf ? task->thread.uw.tp_value : BPF_CORE_READ(task, thread.uw.tp_value);
}

/* ret (x30): HotSpot's aarch64 epilogues end in it. */
#define ARCH_ARM64_RET 0xd65f03c0u

/* HotSpot's aarch64 epilogue restores fp and lr (ldp x29, x30) and pops the frame before its
 * return poll and ret, in an order that is not decoded here: a pc with a ret among the
 * ARCH_HS_EXIT_WINDOW / 4 instructions ahead may be past any of them, so the walk stops there. */
static __always_inline int arch_hs_compiled_exit(const __u8 *code)
{
        const __u32 *insn = (const __u32 *)code;

        /* Bounded by the window's instructions. */
        for (int i = 0; i < ARCH_HS_EXIT_WINDOW / 4; i++) {
                if (insn[i] == ARCH_ARM64_RET)
                        return ARCH_HS_FRAME_UNSURE;
        }
        return ARCH_HS_FRAME_BUILT;
}

/* Before the frame complete offset an aarch64 prologue has stored lr and fp, or not, and dropped sp,
 * or not: not decoded here. */
static __always_inline int arch_hs_compiled_entry(const __u8 *code)
{
        return ARCH_HS_FRAME_UNSURE;
}
