/* SPDX-License-Identifier: GPL-2.0-only */
/* One frame of the native walk: records the pc, then picks the step that finds the caller
 * (frame pointers or DWARF, by what the pool knows of the pc's mapping). Defines no maps. */
#pragma once

#include "vmlinux.h"

#include "profd-events.h"
#include "hotspot.bpf.h"
#include "profd-sample.h"
#include "profd-unwind-pool.h"
#include "pool-lookup.bpf.h"
#include "sample-state.bpf.h"
#include "stack-hash.bpf.h"
#include "step-dwarf.bpf.h"
#include "step-frame-pointer.bpf.h"
#include "unwinder-events.bpf.h"

/* Records st->ip, then finds its caller. Returns true when unwinding ended. */
static __always_inline bool unwind_one(struct sample_state *st, const enum profd_step_kind kind)
{
        const struct profd_unwind_mapping *m;
        __u32 len = st->user.len;
        __u64 lookup_pc;

        if (len >= PROFD_MAX_USER_FRAMES) {
                /* A frame remains beyond the last slot: the stack is deeper than we record. */
                st->user.flags |= PROFD_STACK_TRUNCATED;
                stop(st, PROFD_STOP_DEPTH);
                return true;
        }
        __u64 rec = st->exact ? st->ip | PROFD_FRAME_EXACT : st->ip;

        if (st->py_active) {
                __u64 pc = st->exact ? st->ip : st->ip - 1;

                if ((pc >= st->py.eval_start && pc < st->py.eval_end) ||
                    pc - st->py.eval_cold < st->py.eval_cold_len)
                        rec |= PROFD_FRAME_PY_EVAL; /* where the daemon puts Python frames */
        }

        st->user.ips[len & (PROFD_MAX_USER_FRAMES - 1)] = rec;
        st->user.len = len + 1;
        st->uhash = hash_mix(st->uhash, rec);

        /* A signal-return trampoline the tables cannot describe (arm64's vDSO): recognized by
         * its code, only near it. Frame 0 may be in it too (a sample in rt_sigreturn). */
        if (ARCH_SIGNAL_TRAMP_WINDOW &&
            st->ip - arch_signal_tramp_base(current_task()) < ARCH_SIGNAL_TRAMP_WINDOW &&
            arch_is_signal_return(st->ip, st->exact))
                return step_signal(st);

        /* The JVM's code has no CFI and lies in anonymous memory: its frames are HotSpot's. */
        if (kind == PROFD_STEP_HOTSPOT && hs_in_code(st, st->exact ? st->ip : st->ip - 1))
                return step_hotspot(st, st->exact ? st->ip : st->ip - 1);

        if (st->fp_only)
                return step_frame_pointer(st);

        /* A return address may lie just past its call's function (a noreturn call at the end):
         * look up the call instruction instead. */
        lookup_pc = st->exact ? st->ip : st->ip - 1;
        if (!find_mapping(st, lookup_pc)) {
                report(st, PROFD_EV_UNKNOWN_PC, st->ip);
                stop(st, PROFD_STOP_NO_MAPPING);
                return true;
        }
        m = &st->cache;
        if (m->flags & PROFD_MAPPING_TABLE_PENDING) {
                /* Frame pointers would be a guess (most code has none) that could end in a
                 * plausible but short stack; the table arrives within milliseconds. */
                stop(st, PROFD_STOP_TABLE_PENDING);
                return true;
        }
        if (m->flags & PROFD_MAPPING_NO_TABLE) {
                if (kind == PROFD_STEP_V8)
                        v8_note_frame(st, true); /* V8's JIT code */
                return step_frame_pointer(st);
        }
        st->user.flags |= PROFD_STACK_DWARF;
        return step_dwarf(st, m, lookup_pc, kind);
}
