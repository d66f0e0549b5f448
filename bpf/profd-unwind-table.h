/* SPDX-License-Identifier: GPL-2.0-only */
/* Compact DWARF unwind table layout: produced by unwind-tables/, copied into the BPF table pool,
 * evaluated by the BPF unwinder. Includes nothing (see profd-sample.h).
 *
 * A table covers the text of one executable, in ELF virtual addresses. Text is cut into 64 KiB
 * pages; each row stores only its 16-bit offset in its page and a 16-bit index into a
 * deduplicated rule list, so a row is 4 bytes. A page index (one __u32 per page, plus one) gives
 * each page's first row. Every page after the first starts with a row at offset 0 (a copy of the
 * rule in force at the page boundary when no real row starts there), so a lookup never looks
 * outside its page: page = (pc - base) >> 16, then a binary search over at most 65536 rows. */
#pragma once

#define PROFD_UT_PAGE_SHIFT 16
#define PROFD_UT_PAGE_SIZE (1u << PROFD_UT_PAGE_SHIFT)
#define PROFD_UT_MAX_RULES 65536 /* rule indices are 16 bits */

enum profd_cfa_kind {
        PROFD_CFA_END = 0,         /* no FDE covers this pc (gap between functions) */
        PROFD_CFA_RSP = 1,         /* CFA = rsp + cfa_offset */
        PROFD_CFA_RBP = 2,         /* CFA = rbp + cfa_offset */
        PROFD_CFA_PLT1 = 3,        /* CFA = rsp + 8 + ((pc & 15) >= 11 ? 8 : 0)   (.plt) */
        PROFD_CFA_PLT2 = 4,        /* CFA = rsp + 8 + ((pc & 15) >= 10 ? 8 : 0)   (.plt.sec/IBT) */
        PROFD_CFA_SIGNAL = 5,      /* signal trampoline: registers come from the rt_sigframe */
        PROFD_CFA_UNDEF = 6,       /* return address undefined: outermost frame, stack ends */
        PROFD_CFA_UNSUPPORTED = 7, /* a rule BPF cannot evaluate */
        /* Go: the callee ran on another stack (g0); the caller is reached through the saved rbp
         * (a frame-pointer step that may jump to another stack; docs/unwinder.md "Go") */
        PROFD_CFA_GO_SWITCH = 8,
        PROFD_CFA_RBX = 9, /* CFA = rbx + cfa_offset (ld.so's _dl_runtime_resolve_*) */
        /* Go arm64: the body of runtime.asyncPreempt, a call a signal handler injected into the
         * interrupted frame: CFA = sp + cfa_offset is that frame's sp, its exact pc is saved at
         * CFA + rbx_offset, its x29 at CFA + rbp_offset, its lr at CFA - 16 (go-table.c) */
        PROFD_CFA_GO_PREEMPT = 10,
        /* Go arm64: runtime.morestack, whose callee newstack runs on g0 and resumes the goroutine
         * from its g.sched: the caller is the goroutine's frame saved there, as in Go's own
         * tracebacks (step-frame-pointer.bpf.h) */
        PROFD_CFA_GO_MORESTACK = 11,
};

enum profd_rbp_kind {
        PROFD_RBP_UNCHANGED = 0,  /* rbp of the caller = rbp now */
        PROFD_RBP_CFA_OFFSET = 1, /* caller's rbp saved at CFA + rbp_offset */
        PROFD_RBX_UNKNOWN = 2,    /* rbx only: the caller's rbx cannot be recovered */
};

/* flags: bit 0 (aarch64): at this row the return address is signed with pointer authentication
 * (DW_CFA_AARCH64_negate_ra_state toggled an odd number of times, remember_state/restore_state
 * included). The BPF side strips PAC bits from every aarch64 return address anyway (keeps the low
 * 48 bits), so the flag is for dumps and the reference check. Always 0 on x86-64. */
#define PROFD_RULE_RA_SIGNED 0x01

/* x86-64: rbx, like rbp, is tracked so that a CFA based on it can be evaluated: rbx_kind/
 * rbx_offset take the values of enum profd_rbp_kind.
 *
 * aarch64, the same 12 bytes read with the names of bpf/arch.bpf.h (.sp = sp, .fp = x29,
 * .aux = x30, the link register):
 *   cfa_kind    PROFD_CFA_RSP: CFA = sp + cfa_offset; PROFD_CFA_RBP: CFA = x29 + cfa_offset;
 *               END, SIGNAL, UNDEF (x30 undefined: _start, thread start), UNSUPPORTED (CFA from
 *               another register or an expression) and GO_SWITCH as on x86-64; PLT1, PLT2 and
 *               RBX are never written (.plt/.plt.sec get the plain row CFA = sp + 0, x29
 *               unchanged, return address in x30).
 *   rbp_*       x29, exactly as rbp on x86-64 (unchanged, or saved at CFA + rbp_offset).
 *   rbx_*       the RETURN ADDRESS (DWARF column 30): PROFD_RBP_UNCHANGED = still in x30 (no rule
 *               for x30 yet: leaf functions, prologues before the store, epilogues after the
 *               reload, PLT; BPF trusts x30 only in the first user frame and the frame right
 *               after a signal frame); PROFD_RBP_CFA_OFFSET = saved at CFA + rbx_offset;
 *               PROFD_RBX_UNKNOWN = cannot be recovered (in another register, an expression).
 *   flags       PROFD_RULE_RA_SIGNED as above.
 * Go on aarch64 (.gopclntab): CFA = sp + spdelta; with a frame (spdelta > 0) the return address
 * is at CFA - spdelta and the caller's x29 at CFA - spdelta - 8; frameless: in x30.
 * GO_PREEMPT (aarch64 only): rbx_* says where the interrupted pc is (not a return address). */
struct profd_unwind_rule {
        __u8 cfa_kind;
        __u8 rbp_kind;
        __s16 rbp_offset;
        __s32 cfa_offset;
        __u8 rbx_kind;
        __u8 flags; /* PROFD_RULE_* */
        __s16 rbx_offset;
};
_Static_assert(sizeof(struct profd_unwind_rule) == 12, "profd_unwind_rule layout");

struct profd_unwind_row {
        __u16 pc_low; /* pc & 0xffff */
        __u16 rule;   /* index into the rule list */
};
_Static_assert(sizeof(struct profd_unwind_row) == 4, "profd_unwind_row layout");
