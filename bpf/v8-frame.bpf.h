/* SPDX-License-Identifier: GPL-2.0-only */
/* V8 (Node.js): a JavaScript frame's function, noted by the native walk where it takes a
 * frame-pointer step (bpf/profd-v8.h). Defines no maps. */
#pragma once

#include "vmlinux.h"

#include "profd-sample.h"
#include "profd-v8.h"
#include "sample-state.bpf.h"
#include "stack-hash.bpf.h"
#include "stack-read.bpf.h"

/* V8's arm64 entry frame (JSEntry; frame-constants-arm64.h, V8 10.2 of node 18): its frame
 * record is at fp as usual, but PushCalleeSavedRegisters stored x19..x28 and d8..d15 above it
 * (18 words), so its caller's sp is fp + 16 + 144, not fp + 16: the C++ caller's CFA would be
 * wrong. Told by the markers below fp: ENTRY or CONSTRUCT_ENTRY (StackFrame::TypeToMarker: 2, 4),
 * then 0. */
#define V8_ARM64_ENTRY_CALLER_SP (16 + 18 * 8)
#define V8_MARKER_ENTRY 2
#define V8_MARKER_CONSTRUCT_ENTRY 4

#if ARCH_HAS_LINK_REGISTER
/* arm64: V8's frame edges (MacroAssembler::Prologue/LeaveFrame): stp x29, x30, [sp, #-16]!;
 * mov x29, sp; ldp x29, x30, [sp(, #imm)] in any addressing form; ret. */
#define ARCH_V8_EDGE_WINDOW 8
#define ARCH_ARM64_STP_FP_LR_PUSH 0xa9bf7bfdu
#define ARCH_ARM64_MOV_FP_SP 0x910003fdu
#define ARCH_ARM64_LDP_FP_LR_MASK 0xfc407fffu /* ldp (64-bit, any index form), Rt2 x30, Rt x29 */
#define ARCH_ARM64_LDP_FP_LR 0xa8407bfdu
#else
/* x86-64: do the 8 bytes before addr end with a call? call rel32 (e8), call reg (ff d0+r),
 * call [reg] (ff 10+r; ff 14 SIB), call [reg+disp8] (ff 50+r; ff 54 SIB), call [rip+disp32]
 * (ff 15), call [reg+disp32] (ff 90+r; ff 94 SIB). A REX prefix comes before these. Data that
 * happens to match only costs a name. */
static __always_inline bool v8_after_call(const __u8 b[8])
{
        return b[3] == 0xe8 || (b[6] == 0xff && (b[7] & 0xf8) == 0xd0) ||
               (b[6] == 0xff && (b[7] & 0xf8) == 0x10) || (b[5] == 0xff && b[6] == 0x14) ||
               (b[5] == 0xff && (b[6] & 0xf8) == 0x50) || (b[4] == 0xff && b[5] == 0x54) ||
               (b[2] == 0xff && ((b[3] & 0xf8) == 0x90 || b[3] == 0x15)) || (b[1] == 0xff && b[2] == 0x94);
}

/* x86-64: is the instruction at the pc one of those V8 runs while its frame is gone but the
 * return address is not on top of the stack (DropArguments: pop rcx; lea rsp, [...]; push rcx;
 * ret; its count may be in r8-r15: REX.X/B), or a push (push rbp starts every frame), add rsp or
 * ret? */
static __always_inline bool v8_frame_edge_code(const __u8 c[4])
{
        return (c[0] & 0xf8) == 0x50 || (c[0] == 0x41 && (c[1] & 0xf8) == 0x50) || c[0] == 0xc3 ||
               c[0] == 0xc2 || ((c[0] & 0xfc) == 0x48 && c[1] == 0x8d && (c[2] & 0x38) == 0x20) ||
               (c[0] == 0x48 && (c[1] == 0x83 || c[1] == 0x81) && c[2] == 0xc4);
}
#endif

/* Is the interrupted frame perhaps not the frame at st->fp? A function interrupted in its
 * prologue (before push rbp; mov rbp, rsp; push rsi; push rdi) or epilogue (after mov rsp, rbp)
 * still has its caller's frame pointer, whose slots would name the caller for the function's pc.
 * The pc's code range is not known in BPF, so the stack and the code say it: the frame's slots
 * must lie on the live stack (at or above sp), the top of the stack must not be the saved frame
 * pointer (just pushed) nor a return address (not pushed yet, or about to return), and the pc must
 * not be at a push, ret or stack pointer adjustment. Any doubt leaves the frame unnamed (its pc
 * entry stays) unless the daemon finds the pc in the function's own code (PROFD_FRAME_V8_UNSURE):
 * the top of a frame with spill slots V8 never wrote may hold an old return address (node 20: one
 * into Runtime_DateCurrentTime, from a Date.now() made below the caller's frame before). Return
 * addresses (frames above) always belong to the frame at fp. */
static __always_inline bool v8_leaf_unsure(struct sample_state *st, bool jit)
{
        const struct profd_v8_proc *v8 = &st->v8;
        __s64 lowest = v8->fp_function < v8->fp_context ? v8->fp_function : v8->fp_context;

        if (!st->exact)
                return false;
#if ARCH_HAS_LINK_REGISTER
        /* arm64: bl leaves the return address in lr, and a function's prologue saves it in its
         * frame record (stp x29, x30, [sp, #-16]!; mov x29, sp) after its first instructions
         * (TurboFan code checks for deoptimization first), its epilogue restores it (ldp x29, x30)
         * before its last ones (drop the arguments, ret). While the interrupted function has no
         * record, or has dropped it, fp is its caller's, whose record holds the caller's own
         * return address, not lr. So the frame at fp is the interrupted one when its fixed slots
         * lie on the live stack (not about to be pushed, or popped: mov sp, x29) and lr is the
         * return address its record saved. Otherwise lr is a return address into the function
         * itself (it called something since: a loop calling a builtin or the runtime) or the
         * function is in its prologue or epilogue: in JIT code, which V8 emits with these exact
         * instructions, a pc with none of them among the ARCH_V8_EDGE_WINDOW instructions ahead
         * is past the prologue and before the epilogue. A builtin's pc (jit false: a builtin may
         * build no frame at all, and fp is then its caller's) is named only by lr. */
        __u64 record[2];
        __u32 code[ARCH_V8_EDGE_WINDOW];

        if (!st->aux_valid || st->fp + lowest < st->sp || read_stack(st, st->fp, record, 16) < 0)
                return true;
        if (arch_strip_ra(record[1]) == arch_strip_ra(st->aux))
                return false;
        if (!jit || bpf_probe_read_user(code, sizeof(code), (void *)st->ip) < 0)
                return true;
        /* Bounded by the window's instructions. */
        for (int i = 0; i < ARCH_V8_EDGE_WINDOW; i++) {
                if (code[i] == ARCH_ARM64_STP_FP_LR_PUSH || code[i] == ARCH_ARM64_MOV_FP_SP ||
                    (code[i] & ARCH_ARM64_LDP_FP_LR_MASK) == ARCH_ARM64_LDP_FP_LR ||
                    code[i] == ARCH_ARM64_RET)
                        return true;
        }
        return false;
#else
        __u64 top[2];
        __u8 code[4], before[8];

        if (st->fp + lowest < st->sp)
                return true;
        if (read_stack(st, st->sp, top, 8) < 0 || top[0] == st->fp)
                return true;
        if (bpf_probe_read_user(code, sizeof(code), (void *)st->ip) < 0 || v8_frame_edge_code(code))
                return true;
        if (top[0] >= 8 && top[0] <= ARCH_USER_ADDR_MAX &&
            (bpf_probe_read_user(before, sizeof(before), (void *)(top[0] - 8)) == 0 &&
             v8_after_call(before)))
                return true;
        return false;
#endif
}

/* An interpreted frame keeps its BytecodeArray and the offset of its current bytecode (a Smi,
 * written before every call and return) in two slots; the entry after its function's records both
 * (bpf/profd-v8.h). Other tiers keep other things there (a baseline frame its feedback vector in
 * the offset slot, an optimized one spill slots): only a heap object and a Smi make an entry, and
 * the daemon checks the array is the function's before trusting the offset. */
static __always_inline void v8_note_bytecode(struct sample_state *st)
{
        const struct profd_v8_proc *v8 = &st->v8;
        __u64 w[2], value, interpreted;
        __u32 len = st->user.len;

        /* The daemon enables this only with the offset slot right below the array's: one read of
         * both (w[0] the offset, w[1] the array). The tests are folded into one branch: each branch
         * here is verified once per frame of the step's loop (PROFD_FRAMES_PER_STEP). */
        if (v8->fp_bytecode_offset == 0)
                return;
        if (read_stack(st, st->fp + v8->fp_bytecode_offset, w, 16) < 0) {
                count(PROFD_CNT_V8_BC_BAD_READ);
                return;
        }
        value = w[0] >> (v8->smi_value_shift & 63);
        interpreted = ((w[1] & v8->heap_object_tag_mask) == v8->heap_object_tag) &
                      (w[1] <= PROFD_V8_ADDR_MASK) & (w[1] >= 4096) &
                      ((w[0] & v8->heap_object_tag_mask) != v8->heap_object_tag);
        if (!interpreted)
                return;
        if (value > PROFD_V8_BC_OFFSET_MAX || len >= PROFD_MAX_USER_FRAMES) {
                count(value > PROFD_V8_BC_OFFSET_MAX ? PROFD_CNT_V8_BC_TOO_FAR : PROFD_CNT_V8_BC_NO_ROOM);
                return;
        }
        w[0] = PROFD_FRAME_V8 | PROFD_FRAME_V8_BYTECODE | value << PROFD_V8_BC_ADDR_BITS | w[1] >> 3;
        asm volatile("" : "+r"(len)); /* as in v8_note_frame() */
        st->user.ips[len & (PROFD_MAX_USER_FRAMES - 1)] = w[0];
        st->user.len = len + 1;
        st->uhash = hash_mix(st->uhash, w[0]);
        count(PROFD_CNT_V8_BC_RECORDED);
}

/* The frame at st->fp is about to be left by a frame-pointer step (JIT code in anonymous memory,
 * builtins without CFI). In a V8 process, a JavaScript frame there gets a PROFD_FRAME_V8 entry with
 * its function after the entry of its pc (bpf/profd-v8.h). The daemon checks what it names. */
static __always_inline void v8_note_frame(struct sample_state *st, bool jit)
{
        const struct profd_v8_proc *v8 = &st->v8;
        __u64 ctx[2], fn[2], rec;
        __u32 len = st->user.len;
        bool unsure;

        if (!st->v8_active || st->fp == 0 || (st->fp & 7) || st->fp < st->sp)
                return;
        if (read_stack(st, st->fp + v8->fp_context, ctx, 8) < 0 ||
            read_stack(st, st->fp + v8->fp_function, fn, 8) < 0) {
                count(PROFD_CNT_V8_BAD_READ);
                return;
        }
        /* A typed frame's marker is an untagged small integer; a JavaScript frame holds its
         * context, a heap object. */
        if ((ctx[0] & v8->heap_object_tag_mask) != v8->heap_object_tag) {
                count(ctx[0] < PROFD_V8_MARKER_MAX ? PROFD_CNT_V8_TYPED : PROFD_CNT_V8_NOT_JS);
                return;
        }
        if ((fn[0] & v8->heap_object_tag_mask) != v8->heap_object_tag || fn[0] > PROFD_V8_ADDR_MASK ||
            fn[0] < 4096) {
                count(PROFD_CNT_V8_NOT_JS);
                return;
        }
        /* An unsure leaf in JIT code goes to the daemon marked so: it names it only when the pc
         * is in the function's own code (profd-v8.h). A builtin's pc never gets its caller's
         * name. */
        unsure = v8_leaf_unsure(st, jit);
        if (unsure) {
                count(PROFD_CNT_V8_LEAF_UNSURE);
                if (!jit)
                        return;
        }
        if (len >= PROFD_MAX_USER_FRAMES) {
                count(PROFD_CNT_V8_NO_ROOM);
                return;
        }
        rec = PROFD_FRAME_V8 | (unsure ? PROFD_FRAME_V8_UNSURE : 0) | (jit ? PROFD_FRAME_V8_JIT : 0) | fn[0];
        /* The compiler drops the mask after the check above; 5.10's verifier cannot bound the
         * index without it (an opaque copy keeps it). */
        asm volatile("" : "+r"(len));
        st->user.ips[len & (PROFD_MAX_USER_FRAMES - 1)] = rec;
        st->user.len = len + 1;
        st->uhash = hash_mix(st->uhash, rec);
        count(PROFD_CNT_V8_FRAMES);
        if (!unsure)
                v8_note_bytecode(st);
}
