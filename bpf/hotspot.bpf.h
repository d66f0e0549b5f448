/* SPDX-License-Identifier: GPL-2.0-only */
/* The HotSpot step of the native walk (unwind-frame.bpf.h): a pc inside the code cache of a
 * process listed in hotspot_procs is Java code. In the template interpreter it is an interpreted
 * frame: the method and the bytecode pointer sit in the frame's slots below fp
 * (profd_hotspot_proc.frame_method, frame_bcp: x86-64's layout, frame_x86.hpp, given by the daemon
 * so that another architecture's is data, not code here), the entry recorded is the method and
 * its bytecode index (profd-hotspot.h), and the interpreter keeps a frame-pointer chain, so the
 * caller is one frame-pointer step away. Other code of the code cache (compiled methods, stubs,
 * adapters) is stepped by its frame pointer and keeps its pc: the call stub that enters Java from
 * the JVM keeps one; compiled code without -XX:+PreserveFramePointer does not, and the step's
 * checks stop such a walk (compiled frames: nmethod frame sizes, to be added).
 * Defines the map "hotspot_procs": include from profile.bpf.c only. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "profd-hotspot.h"
#include "profd-sample.h"
#include "arch.bpf.h"
#include "sample-state.bpf.h"
#include "stack-hash.bpf.h"
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
        count(PROFD_HS_CNT_BASE + PROFD_HS_INTERPRETED);
        return PROFD_FRAME_HOTSPOT | ((method >> PROFD_HS_METHOD_SHIFT) & PROFD_HS_METHOD_MASK) |
               (bci << PROFD_HS_BCI_SHIFT);
}

/* The frame at pc (in the JVM's code: hs_in_code), just recorded at index len - 1 as its pc:
 * replaces the entry by the Java frame's when it is interpreted, then steps to the caller.
 * Returns true when unwinding ended. */
static __always_inline bool step_hotspot(struct sample_state *st, __u64 pc)
{
        __u32 last = (st->user.len - 1) & (PROFD_MAX_USER_FRAMES - 1);

        if (pc >= st->hs.interp_start && pc < st->hs.interp_end) {
                __u64 rec = hs_interpreted_entry(st);

                if (rec) {
                        /* The hash took the pc: take the entry instead (mixing is order-dependent,
                         * so this is a different but equally stable hash of the same stack). */
                        st->user.ips[last] = rec;
                        st->uhash = hash_mix(st->uhash, rec);
                }
        } else {
                count(PROFD_HS_CNT_BASE + PROFD_HS_OTHER_CODE);
        }
        return step_frame_pointer(st);
}
