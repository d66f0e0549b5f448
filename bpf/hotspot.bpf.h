/* SPDX-License-Identifier: GPL-2.0-only */
/* The HotSpot step of the native walk (unwind-frame.bpf.h): a pc inside the code cache of a
 * process listed in hotspot_procs is Java code. In the template interpreter it is an interpreted
 * frame: the method and the bytecode pointer sit in the frame's slots below fp
 * (profd_hotspot_proc.frame_method, frame_bcp: frame_x86.hpp's or frame_aarch64.hpp's layout,
 * given by the daemon so that an architecture's is data, not code here), the entry recorded is the
 * method and its bytecode index (profd-hotspot.h), and the interpreter keeps a frame-pointer chain
 * (x86-64: rbp; aarch64: x29 and the record's saved x30), so the caller is one frame-pointer step
 * away. Compiled methods are stepped by their nmethod's frame size (hs_step_compiled), other code
 * of the code cache (stubs, adapters) by its frame pointer, keeping its pc.
 * Defines the map "hotspot_procs": include from profile.bpf.c only. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "profd-hotspot.h"
#include "profd-sample.h"
#include "arch.bpf.h"
#include "sample-state.bpf.h"
#include "stack-hash.bpf.h"
#include "stack-read.bpf.h"
#include "step-frame-pointer.bpf.h"

_Static_assert(PROFD_HS__MAX == PROFD_HS_EVENT_COUNT, "profd-sample.h counts the HotSpot events");

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, PROFD_HS_MAX_PROCS);
        __type(key, __u32);
        __type(value, struct profd_hotspot_proc);
} hotspot_procs SEC(".maps");

/* Whether pc is the JVM's code (st->hs valid while st->hs_active). */
static __always_inline bool hs_in_code(const struct sample_state *st, __u64 pc)
{
        return st->hs_active && pc >= st->hs.code_start && pc < st->hs.code_end;
}

/* The interpreted frame at st->fp: its method and bytecode index as one stack entry, or 0 when
 * they cannot be read (counted). The bci is the bytecode pointer's distance from the method's
 * first bytecode; a pointer outside the method's bytecodes (a native method's frame holds none)
 * gives bci 0, which is where a native method is. */
static __always_inline __u64 hs_interpreted_entry(struct sample_state *st)
{
        const struct profd_hotspot_proc *hs = &st->hs;
        __u64 method = 0, bcp = 0, cm = 0, bci = 0;
        __u16 code_size = 0;

        if (bpf_probe_read_user(&method, sizeof(method), (void *)(st->fp + 8 * (__s64)hs->frame_method)) <
                    0 ||
            bpf_probe_read_user(&bcp, sizeof(bcp), (void *)(st->fp + 8 * (__s64)hs->frame_bcp)) < 0 ||
            !method || (method & 7) || method > ARCH_USER_ADDR_MAX ||
            bpf_probe_read_user(&cm, sizeof(cm), (void *)(method + hs->const_method)) < 0 ||
            bpf_probe_read_user(&code_size, sizeof(code_size), (void *)(cm + hs->code_size)) < 0) {
                count(PROFD_HS_CNT_BASE + PROFD_HS_BAD_METHOD);
                return 0;
        }
        if (bcp >= cm + hs->const_method_size && bcp < cm + hs->const_method_size + code_size)
                bci = bcp - (cm + hs->const_method_size);
        if (bci > PROFD_HS_BCI_MAX) /* arm64's narrower field (profd-hotspot.h) */
                bci = PROFD_HS_BCI_MAX;
        count(PROFD_HS_CNT_BASE + PROFD_HS_INTERPRETED);
        return PROFD_FRAME_HOTSPOT | ((method >> PROFD_HS_METHOD_SHIFT) & PROFD_HS_METHOD_MASK) |
               (bci << PROFD_HS_BCI_SHIFT);
}

/* The blob (CodeBlob*) holding pc, found as HotSpot does (CodeHeap::find_blob): the heap whose
 * memory holds pc, then back through its segment map, whose bytes say how many segments back a
 * blob starts (0: here; 0xff: free). 0 when none is found (counted by the caller). */
static __always_inline __u64 hs_find_blob(const struct profd_hotspot_proc *hs, __u64 pc)
{
        __u64 low = 0, segmap = 0, idx;
        __u32 log2 = 0;

        /* Bounded by PROFD_HS_MAX_HEAPS. */
        for (int h = 0; h < PROFD_HS_MAX_HEAPS; h++) {
                if (h < hs->n_heaps && pc >= hs->heaps[h].low && pc < hs->heaps[h].high) {
                        low = hs->heaps[h].low;
                        segmap = hs->heaps[h].segmap;
                        log2 = hs->heaps[h].log2_segment;
                }
        }
        if (!low || log2 < 4 || log2 > 16)
                return 0;
        idx = (pc - low) >> log2;
        /* Bounded by PROFD_HS_SEGMAP_HOPS (profd-hotspot.h). */
        for (int i = 0; i < PROFD_HS_SEGMAP_HOPS; i++) {
                __u8 hop = 0xff;

                if (bpf_probe_read_user(&hop, 1, (void *)(segmap + idx)) < 0 || hop == 0xff || hop > idx)
                        return 0;
                if (hop == 0)
                        return low + (idx << log2) + hs->heap_block_size;
                idx -= hop;
        }
        return 0;
}

/* Whether method looks like a Method*: its ConstMethod's constant pool has a class. An nmethod's
 * (OSR ones too, which are not their method's _code) passes; other blobs have no Method* there,
 * and what they hold is unlikely to lead three pointers deep to a class: if it does, the daemon's
 * check (the method is its class's) still keeps it unnamed. */
static __always_inline bool hs_method_plausible(const struct profd_hotspot_proc *hs, __u64 method)
{
        __u64 cm = 0, cp = 0, holder = 0;

        if (!method || (method & 7) || method > ARCH_USER_ADDR_MAX)
                return false;
        if (bpf_probe_read_user(&cm, sizeof(cm), (void *)(method + hs->const_method)) < 0 || !cm ||
            (cm & 7) ||
            bpf_probe_read_user(&cp, sizeof(cp), (void *)(cm + hs->const_method_constants)) < 0 || !cp ||
            (cp & 7) ||
            bpf_probe_read_user(&holder, sizeof(holder), (void *)(cp + hs->constant_pool_holder)) < 0)
                return false;
        return holder && !(holder & 7) && holder <= ARCH_USER_ADDR_MAX;
}

/* Where the sampled pc (frame 0) of a compiled blob stands in its frame (ARCH_HS_FRAME_*): before
 * its code start + frame complete offset the prologue is still building it, after it the frame is
 * whole unless the pc is in an epilogue; the architecture tells where in either by the code at the
 * pc. */
static __always_inline int hs_frame0_state(const struct profd_hotspot_proc *hs, __u64 blob, __u64 pc)
{
        __u8 code[ARCH_HS_BEHIND + ARCH_HS_EXIT_WINDOW];
        __u64 begin = 0;
        __s32 complete = 0;
        __s16 complete16 = 0;

        if (!hs->blob_frame_complete_size)
                return ARCH_HS_FRAME_UNSURE;
        if (hs->blob_code_is_offset) {
                __s32 off = 0;

                if (bpf_probe_read_user(&off, sizeof(off), (void *)(blob + hs->blob_code_begin)) < 0 ||
                    off <= 0)
                        return ARCH_HS_FRAME_UNSURE;
                begin = blob + off;
        } else if (bpf_probe_read_user(&begin, sizeof(begin), (void *)(blob + hs->blob_code_begin)) < 0) {
                return ARCH_HS_FRAME_UNSURE;
        }
        if (hs->blob_frame_complete_size == 2) {
                if (bpf_probe_read_user(&complete16, sizeof(complete16),
                                        (void *)(blob + hs->blob_frame_complete)) < 0)
                        return ARCH_HS_FRAME_UNSURE;
                complete = complete16;
        } else if (bpf_probe_read_user(&complete, sizeof(complete),
                                       (void *)(blob + hs->blob_frame_complete)) < 0) {
                return ARCH_HS_FRAME_UNSURE;
        }
        /* A blob whose frame is never safe (-1). */
        if (complete <= 0 || bpf_probe_read_user(code, sizeof(code), (void *)(pc - ARCH_HS_BEHIND)) < 0)
                return ARCH_HS_FRAME_UNSURE;
        if (pc < begin + complete)
                return arch_hs_compiled_entry(code + ARCH_HS_BEHIND);
        return arch_hs_compiled_exit(code + ARCH_HS_BEHIND);
}

/* Whether blob holds vtable or itable stubs (VtableBlob, named "vtable chunks"). */
static __always_inline bool hs_is_vtable_stub(const struct profd_hotspot_proc *hs, __u64 blob)
{
        __u64 name = 0;
        char buf[8] = {};

        if (!hs->blob_name || bpf_probe_read_user(&name, sizeof(name), (void *)(blob + hs->blob_name)) < 0 ||
            !name || bpf_probe_read_user(buf, sizeof(buf), (void *)name) < 0)
                return false;
        return buf[0] == 'v' && buf[1] == 't' && buf[2] == 'a' && buf[3] == 'b' && buf[4] == 'l' &&
               buf[5] == 'e' && buf[6] == ' ' && buf[7] == 'c';
}

/* A frame that pushed nothing or popped it all (an epilogue past its pop, a vtable stub): fp is
 * the caller's already, the return address at sp (x86-64: call pushed it) or still in lr
 * (arm64: bl left it there, and a vtable stub only loads and branches: sp is the caller's). Fills
 * frame (saved fp, return address) and the caller's sp for hs_step_compiled's caller step, in one
 * place for both cases. Returns true when unwinding ended (the read failed). */
static __always_inline bool hs_leaf_frame(struct sample_state *st, __u64 frame[2], __u64 *ret_sender_sp)
{
        if (ARCH_HAS_LINK_REGISTER) {
                if (!st->aux_valid) {
                        stop(st, PROFD_STOP_BAD_FRAME);
                        return true;
                }
                frame[0] = st->fp;
                frame[1] = arch_strip_ra(st->aux);
                *ret_sender_sp = st->sp;
                return false;
        }
        if (read_stack(st, st->sp, frame, 8) < 0) {
                stop(st, PROFD_STOP_BAD_READ);
                return true;
        }
        frame[1] = frame[0];
        frame[0] = st->fp;
        *ret_sender_sp = st->sp + 8;
        return false;
}

/* The compiled frame (nmethod, or another blob with a frame size) at st->ip, recorded at index
 * last as its pc: its caller's sp is sp + the frame size, with the return address and the saved
 * fp just below (x86-64: call pushes the return address, the prologue rbp). The entry becomes the
 * method's when the blob holds a plausible Method* (hs_method_plausible); otherwise the pc stays. A blob
 * without a frame size (the call stub, adapters) or not found is stepped by its frame pointer. Returns true
 * when unwinding ended. */
static __always_inline bool hs_step_compiled(struct sample_state *st, __u32 last, bool frame0)
{
        const struct profd_hotspot_proc *hs = &st->hs;
        __u64 pc = st->exact ? st->ip : st->ip - 1;
        __u64 blob = hs_find_blob(hs, pc), method = 0, frame[2], sender_sp;
        __s32 frame_size = 0;
        int state = ARCH_HS_FRAME_BUILT;

        if (!blob) {
                count(PROFD_HS_CNT_BASE + PROFD_HS_NO_BLOB);
                goto no_frame_size;
        }
        if (bpf_probe_read_user(&frame_size, sizeof(frame_size), (void *)(blob + hs->blob_frame_size)) < 0 ||
            frame_size <= 0 || frame_size > 8192) {
                count(PROFD_HS_CNT_BASE + PROFD_HS_OTHER_CODE);
                goto no_frame_size;
        }
        if (bpf_probe_read_user(&method, sizeof(method), (void *)(blob + hs->blob_method)) == 0 &&
            hs_method_plausible(hs, method)) {
                __u64 rec = PROFD_FRAME_HOTSPOT |
                            ((method >> PROFD_HS_METHOD_SHIFT) & PROFD_HS_METHOD_MASK) |
                            (PROFD_HS_BCI_NONE << PROFD_HS_BCI_SHIFT);
                __s32 compile_id = 0;

                /* Where it ran, for the methods inlined there (profd-hotspot.h): the return
                 * address of a caller, the sampled pc of frame 0. Where the compile id is known
                 * every compiled entry is one (the daemon tells them so), else the pc stays. */
                if (hs->blob_compile_id) {
                        rec = 0;
                        if (st->ip - hs->code_start < (1ULL << PROFD_HS_PC_BITS) &&
                            bpf_probe_read_user(&compile_id, sizeof(compile_id),
                                                (void *)(blob + hs->blob_compile_id)) == 0 &&
                            compile_id > 0)
                                rec = PROFD_FRAME_HOTSPOT | (PROFD_HS_BCI_NONE << PROFD_HS_BCI_SHIFT) |
                                      (st->ip - hs->code_start) | (frame0 ? PROFD_HS_PC_LEAF : 0) |
                                      (((__u64)compile_id & PROFD_HS_ID_MASK) << PROFD_HS_ID_SHIFT);
                }
                if (rec) {
                        st->user.ips[last & (PROFD_MAX_USER_FRAMES - 1)] = rec;
                        st->uhash = hash_mix(st->uhash, rec);
                        count(PROFD_HS_CNT_BASE + PROFD_HS_COMPILED);
                } else {
                        count(PROFD_HS_CNT_BASE + PROFD_HS_COMPILED_UNNAMED);
                }
        } else {
                count(PROFD_HS_CNT_BASE + PROFD_HS_COMPILED_UNNAMED);
        }
        /* The sampled pc may be where the frame is not whole: named, but its caller is only
         * stepped to when the epilogue says where it is; otherwise the stack ends here. */
        if (frame0)
                state = hs_frame0_state(hs, blob, pc);
        if (state == ARCH_HS_FRAME_UNSURE) {
                count(PROFD_HS_CNT_BASE + PROFD_HS_UNSURE);
                stop(st, PROFD_STOP_UNSUPPORTED);
                return true;
        }
        if (state == ARCH_HS_FRAME_RA_AT_SP) {
                count(PROFD_HS_CNT_BASE + PROFD_HS_EPILOGUE);
                if (hs_leaf_frame(st, frame, &sender_sp))
                        return true;
                goto caller;
        }
        if (state == ARCH_HS_FRAME_FP_IN_REG) {
                sender_sp = st->sp + 8 * (__u64)frame_size;
                if (read_stack(st, sender_sp - 8, frame, 8) < 0) {
                        stop(st, PROFD_STOP_BAD_READ);
                        return true;
                }
                frame[1] = frame[0];
                frame[0] = st->fp;
                goto caller;
        }
        if (state == ARCH_HS_FRAME_FP_AT_SP) {
                count(PROFD_HS_CNT_BASE + PROFD_HS_EPILOGUE);
                sender_sp = st->sp + 16;
        } else {
                sender_sp = st->sp + 8 * (__u64)frame_size;
        }
        if (read_stack(st, sender_sp - 16, frame, 16) < 0) {
                stop(st, PROFD_STOP_BAD_READ);
                return true;
        }
caller:
        /* A JVM built to sign return addresses (aarch64's -XX:UseBranchProtection) signs these. */
        frame[1] = arch_strip_ra(frame[1]);
        if (frame[1] == 0 || frame[1] > ARCH_USER_ADDR_MAX) {
                stop(st, PROFD_STOP_BAD_FRAME);
                return true;
        }
        st->sp = sender_sp;
        st->fp = frame[0];
        st->ip = frame[1];
        st->exact = 0;
        st->aux_valid = 0;
        return false;
no_frame_size:
        /* A stub entered by a call from compiled code (vtable and itable stubs, runtime stubs) may
         * have pushed nothing, and compiled code keeps no frame pointer: at the sampled pc its
         * caller cannot be told. Below frame 0 such code (the call stub, adapters) was called and
         * keeps the frame-pointer chain it was entered with. */
        if (frame0 && blob && hs_is_vtable_stub(hs, blob)) {
                /* It only loads and jumps. */
                if (hs_leaf_frame(st, frame, &sender_sp))
                        return true;
                goto caller;
        }
        if (frame0) {
                count(PROFD_HS_CNT_BASE + PROFD_HS_UNSURE);
                stop(st, PROFD_STOP_UNSUPPORTED);
                return true;
        }
        return step_frame_pointer(st);
}

/* Compiled frames per run of the profd_hotspot program: each costs a segment map walk
 * (PROFD_HS_SEGMAP_HOPS reads at most), so the native step program, which inlines its frame loop
 * 20 times, does not carry it; 8 keeps this program small and a 40-deep compiled stack 5 calls. */
#define PROFD_HS_FRAMES_PER_PROG 8

/* Steps the compiled frame recorded last and records its caller's pc when that is compiled code too
 * (the native walk records and steps the rest). Returns false when the compiled frames ended. */
static __always_inline bool hs_walk_one(struct sample_state *st, bool frame0)
{
        __u32 len = st->user.len;
        __u64 pc, rec;

        if (hs_step_compiled(st, len - 1, frame0)) {
                st->hs_pending = 0;
                return false;
        }
        pc = st->ip - 1;
        if (!hs_in_code(st, pc) || (pc >= st->hs.interp_start && pc < st->hs.interp_end)) {
                st->hs_pending = 0; /* the native walk records and steps it */
                return false;
        }
        if (len >= PROFD_MAX_USER_FRAMES) {
                st->user.flags |= PROFD_STACK_TRUNCATED;
                stop(st, PROFD_STOP_DEPTH);
                st->hs_pending = 0;
                return false;
        }
        rec = st->ip;
        asm volatile("" : "+r"(len)); /* keeps the mask for 5.10's verifier (v8-frame.bpf.h) */
        st->user.ips[len & (PROFD_MAX_USER_FRAMES - 1)] = rec;
        st->user.len = len + 1;
        st->uhash = hash_mix(st->uhash, rec);
        return true;
}

/* Run by profd_hotspot while st->hs_pending: steps the compiled frame recorded last, and the
 * following ones while they are compiled code too (recording each pc, as the native walk does);
 * leaves the first frame of the interpreter or of native code to the native walk. */
static __always_inline void hs_walk_compiled(struct sample_state *st)
{
        /* Called by an interpreted frame: the caller's sp is the one it left in the interpreted
         * frame's sender_sp slot, before the interpreter extended the frame for the callee's
         * locals (the frame-pointer step gave fp + 16); the frame size counts from it. */
        if (st->hs_interp_fp && st->sp == st->hs_interp_fp + 16) {
                __u64 sender_sp = 0, fp = st->hs_interp_fp;

                if (bpf_probe_read_user(&sender_sp, sizeof(sender_sp),
                                        (void *)(fp + 8 * (__s64)st->hs.frame_sender_sp)) == 0 &&
                    sender_sp >= fp + 16 && sender_sp - fp < 65536 && !(sender_sp & 7))
                        st->sp = sender_sp;
        }
        st->hs_interp_fp = 0;
        /* The sampled pc's frame (frame 0) alone: its checks (hs_frame0_state) are verified once,
         * not in every iteration below; the next run of the program steps its callers. */
        if (st->exact) {
                hs_walk_one(st, true);
                return;
        }
        /* Bounded by PROFD_HS_FRAMES_PER_PROG. Unrolled: as a loop, its latch is a helper call,
         * and 5.10's verifier refuses the edge from a call back into its loop ("back-edge"). */
#pragma unroll
        for (int i = 0; i < PROFD_HS_FRAMES_PER_PROG; i++) {
                if (!hs_walk_one(st, false))
                        return;
        }
}

/* Whether the interpreted frame at fp is the one running at the sampled pc, and whole: every slot
 * down to the bytecode pointer pushed (sp below it), and not waiting for a callee (its last_sp slot,
 * just below sender_sp, is set while a call it made runs and cleared on return): at a method's
 * entry, before the interpreter pushed the callee's frame, fp is still the caller's. */
static __always_inline bool hs_interpreted_frame_whole(struct sample_state *st)
{
        const struct profd_hotspot_proc *hs = &st->hs;
        __u64 last_sp = 1;

        if (st->sp > st->fp + 8 * (__s64)hs->frame_bcp)
                return false;
        if (bpf_probe_read_user(&last_sp, sizeof(last_sp),
                                (void *)(st->fp + 8 * ((__s64)hs->frame_sender_sp - 1))) < 0)
                return false;
        return last_sp == 0;
}

/* The frame at pc (in the JVM's code: hs_in_code), just recorded at index len - 1 as its pc:
 * replaces the entry by the Java frame's when it is interpreted, then steps to the caller.
 * Returns true when unwinding ended. */
static __always_inline bool step_hotspot(struct sample_state *st, __u64 pc)
{
        const struct profd_hotspot_proc *hs = &st->hs;
        __u32 last = (st->user.len - 1) & (PROFD_MAX_USER_FRAMES - 1);

        if (pc >= hs->interp_start && pc < hs->interp_end) {
                __u64 rec;

                if (st->exact && !hs_interpreted_frame_whole(st)) {
                        /* The pc stays, and the walk ends: fp's frame is the caller's (or one
                         * half built), naming it would show the caller where its callee runs. */
                        count(PROFD_HS_CNT_BASE + PROFD_HS_UNSURE);
                        stop(st, PROFD_STOP_UNSUPPORTED);
                        return true;
                }
                rec = hs_interpreted_entry(st);

                if (rec) {
                        /* The hash took the pc: take the entry instead (mixing is order-dependent,
                         * so this is a different but equally stable hash of the same stack). */
                        st->user.ips[last] = rec;
                        st->uhash = hash_mix(st->uhash, rec);
                }
                st->hs_interp_fp = st->fp; /* for a compiled caller (hs_walk_compiled) */
                return step_frame_pointer(st);
        }
        if (hs->n_heaps) {
                /* Compiled code: the profd_hotspot program steps it (profile.bpf.c). */
                st->hs_pending = 1;
                return true;
        }
        count(PROFD_HS_CNT_BASE + PROFD_HS_OTHER_CODE);
        return step_frame_pointer(st);
}
