/* SPDX-License-Identifier: GPL-2.0-only */
/* Architecture interface of the sampler: everything that depends on the CPU's registers, calling
 * convention or signal frame is behind the names below, so that the unwinder's steps are the same
 * code on every architecture. The implementation is chosen by the target macro the build passes
 * (bpf/meson.build: -D__TARGET_ARCH_x86, as bpf_tracing.h expects) or the compiler's own; a port is
 * one file, bpf/arch-NAME.bpf.h, providing all of the following. Defines no maps.
 *
 * Registers. struct arch_regs { __u64 ip, sp, fp, aux; }: the user registers an unwind step reads
 * and writes, by meaning: pc, stack pointer, frame pointer, and one more register the port's
 * unwind rules need (x86-64: rbx, a CFA base in ld.so's stack-realigning trampolines; arm64 would
 * carry lr there). DWARF rows name their CFA base by meaning too (PROFD_CFA_RSP: sp, PROFD_CFA_RBP:
 * fp, PROFD_CFA_RBX: aux; the names are the table format's, profd-unwind-table.h).
 *
 * Constants
 *   ARCH_USER_ADDR_MAX     highest user address: a return address or frame above it is corrupt
 *   ARCH_FP_ALIGN          alignment of a frame pointer in user code (a frame record's address)
 *   ARCH_CFA_ALIGN         alignment of a CFA
 *   ARCH_FP_SLOT_FP        frame record at fp, read as two __u64: index of the caller's fp
 *   ARCH_FP_SLOT_RA        ... and of the return address
 *   ARCH_FP_CALLER_SP      the caller's sp is fp + this after a frame-pointer step
 *   ARCH_HAS_LINK_REGISTER 1 where calls leave the return address in a register (aux: arm64's
 *                          x30) instead of on the stack: after every step aux is invalid (the
 *                          caller made a call since); 0: aux is callee-saved, restored by the
 *                          rows' rbx_* rules (x86-64's rbx)
 *   ARCH_LOADS_ORDERED     1 where the CPU keeps two loads in program order (x86-64), so that a
 *                          value read after a generation counter is at least as new as it; 0
 *                          (arm64): the per-CPU copy of the sampled process's entry, which needs
 *                          that order, stays off
 *   ARCH_SIGNAL_TRAMP_WINDOW  0, or the size of the region above arch_signal_tramp_base() where
 *                          a return address may be a signal-return trampoline that has no table
 *                          row (arm64's vDSO), recognized by arch_is_signal_return()
 *
 * Functions (static __always_inline)
 *   __u64 arch_ctx_mode(struct bpf_perf_event_data *ctx)
 *           the interrupted context's mode word (x86-64: cs), from the perf_event context
 *   bool arch_mode_in_kernel(__u64 mode)      the sample interrupted the kernel
 *   bool arch_mode_is_compat(__u64 mode)      a user mode whose frames and CFI are not the 64-bit
 *                                             ABI's (x86-64: a 32-bit task); its pc is kept alone
 *   void arch_ctx_user_regs(struct bpf_perf_event_data *ctx, struct arch_regs *r)
 *           the registers of a sample that interrupted user mode
 *   int arch_task_user_regs(struct task_struct *task, struct arch_regs *r, __u64 *mode)
 *           the user registers task saved on entry to the kernel (syscall, fault, interrupt),
 *           with bpf_task_pt_regs() when profd_have_task_pt_regs, else from the top of the kernel
 *           stack (profd_thread_size); -EFAULT unless they are a user context
 *   int arch_signal_frame_regs(__u64 sp, struct arch_regs *r)
 *           at the signal-return trampoline (__restore_rt), sp points at the frame the kernel
 *           saved on signal delivery: the interrupted registers; < 0 when unreadable
 *   __u64 arch_plt_cfa(__u32 cfa_kind, __u64 sp, __u64 pc)
 *           CFA of the PLT rows (PROFD_CFA_PLT1, PROFD_CFA_PLT2), computed from the pc's place in
 *           its PLT entry; 0 (a bad frame) where the architecture has no such rows
 *   bool arch_ra_in_register(const struct profd_unwind_rule *rule)
 *           true where the return address has not been saved to the stack yet but is still in
 *           aux (arm64: lr in a leaf function, or before the prologue stores it); x86-64: never,
 *           call pushes it. Trusted only while aux is the frame's own (the interrupted frame, the
 *           one a signal frame restored); elsewhere the walk ends as a bad frame
 *   bool arch_ra_unknown(const struct profd_unwind_rule *rule)
 *           the row's return address cannot be recovered (arm64: rbx_kind PROFD_RBX_UNKNOWN)
 *   __s32 arch_ra_cfa_offset(const struct profd_unwind_rule *rule)
 *           where the return address is saved, relative to the CFA (x86-64: -8, where call
 *           pushed it; arm64: the row's rbx_offset); when fp is saved just below it, both are
 *           read at once
 *   __u64 arch_strip_ra(__u64 ra)
 *           the code address of a return address (arm64: pointer authentication bits removed)
 *   __u64 arch_signal_tramp_base(struct task_struct *task)
 *   bool arch_is_signal_return(__u64 pc, bool exact)
 *           see ARCH_SIGNAL_TRAMP_WINDOW (arm64: the vDSO base, __kernel_rt_sigreturn's code)
 *   __u64 arch_thread_pointer(struct task_struct *task)
 *           the thread pointer (x86-64: the fs base, which is pthread_self(); arm64: TPIDR_EL0)
 *   ARCH_GO_G_IN_REGISTER  Go keeps the running g in a register (arch_regs.g): a stack switch can
 *                          find the goroutine's saved frame through g.m.curg.sched
 *   bool arch_follows_call(__u64 ra)
 *           the instruction before ra is a call, so ra can be a return address (ports with
 *           ARCH_HAS_LINK_REGISTER: lr taken without a table's word for it)
 *   __u64 arch_go_caller_sp(__u64 record, __u64 caller_fp)
 *           the caller's sp after a frame-pointer step from a Go frame record at record (x86-64:
 *           the record's end; arm64: Go's record lies below sp, x29 = sp - 8 in every Go frame)
 *   bool arch_is_thread_self(__u64 tp, __u64 id)
 *           id, a pthread_self() value (CPython stores it in its PyThreadState), is the thread's
 *           whose thread pointer is tp (x86-64: equal; arm64: struct pthread just below tp)
 *   int arch_hs_compiled_exit(const __u8 *code)
 *           the ARCH_HS_EXIT_WINDOW bytes at the sampled pc of a compiled Java method (HotSpot):
 *           where it stands in its frame, ARCH_HS_FRAME_* below. x86-64 decodes the few
 *           instructions HotSpot's epilogues have (frame removal, the return's safepoint poll);
 *           arm64 says unsure near a ret
 *   int arch_hs_compiled_entry(const __u8 *code)
 *           the same before the frame complete offset (the prologue), code[-ARCH_HS_BEHIND..]
 *           readable too; arm64: unsure */
#pragma once

#include "vmlinux.h"

/* arch_hs_compiled_exit(): frame 0 of a compiled Java method is in its body (its frame is whole),
 * in its epilogue with the frame removed and the saved fp at sp (the return address above it),
 * with the fp restored too (the return address at sp), or somewhere the port cannot tell. */
enum {
        ARCH_HS_FRAME_BUILT = 0,
        ARCH_HS_FRAME_FP_AT_SP = 1,
        ARCH_HS_FRAME_RA_AT_SP = 2,
        ARCH_HS_FRAME_UNSURE = 3,
        ARCH_HS_FRAME_FP_IN_REG = 4, /* the frame's sp is set, the caller's fp not saved yet */
};
#define ARCH_HS_EXIT_WINDOW 32
/* arch_hs_compiled_entry() also sees this many bytes before the pc (code[-ARCH_HS_BEHIND..]). */
#define ARCH_HS_BEHIND 16

/* Registers an unwind step reads and writes, by meaning (see above). */
struct arch_regs {
        __u64 ip;
        __u64 sp;
        __u64 fp;
        __u64 aux;
        __u64 g; /* Go's g where the ABI keeps it in a register (arm64: x28); 0 elsewhere */
};

#if defined(__TARGET_ARCH_x86) || (!defined(__TARGET_ARCH_arm64) && defined(__x86_64__))
#include "arch-x86_64.bpf.h"
#elif defined(__TARGET_ARCH_arm64) || defined(__aarch64__)
#include "arch-arm64.bpf.h"
#else
#error "profd's BPF programs support x86-64 and arm64 (arch-*.bpf.h); define __TARGET_ARCH_<arch> for another"
#endif
