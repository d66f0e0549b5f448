/* SPDX-License-Identifier: GPL-2.0-only */
/* HotSpot (JVM) frames in BPF: the per-process description the daemon writes (map
 * "hotspot_procs", from the JVM's vmStructs: daemon/runtimes/hotspot-procs.c) and how a Java frame
 * is stored in a user stack (struct profd_stack, profd-sample.h).
 * Includes nothing: BPF code gets __u8.. from vmlinux.h, userspace from <linux/types.h>.
 *
 * Java frames are frames of the native stack: the native walk (bpf/hotspot.bpf.h, called from
 * unwind-frame.bpf.h) takes a pc inside the JVM's interpreter as an interpreted Java frame, records
 * its method and bytecode index in place of the pc, and steps to its caller; native frames below
 * and above stay where they are, so nothing is spliced afterwards. */
#pragma once

/* A user stack entry that is a HotSpot frame, not an address (user addresses end at 2^47; Python's
 * entries carry bit 62, the exact-pc flag bit 63, and bit 60 is the eval-frame mark the Python
 * splice clears on every native entry: none is set here). */
#define PROFD_FRAME_HOTSPOT (1ULL << 61)
/* Bits 0..43: the Method* >> 3 (metaspace objects are 8-byte aligned, user addresses 47 bits);
 * bits 44..59: the bytecode index, PROFD_HS_BCI_NONE when unknown. */
#define PROFD_HS_METHOD_SHIFT 3
#define PROFD_HS_METHOD_MASK ((1ULL << 44) - 1)
#define PROFD_HS_BCI_SHIFT 44
#define PROFD_HS_BCI_NONE 0xffffULL

/* Map "hotspot_procs": pid -> where its JVM's code is and how its interpreter frames are laid out. */
#define PROFD_HS_MAX_PROCS 4096
struct profd_hotspot_proc {
        __u64 code_start; /* [code_start, code_end): the code cache (CodeCache::_low/_high_bound) */
        __u64 code_end;
        __u64 interp_start; /* [interp_start, interp_end): the template interpreter's code */
        __u64 interp_end;
        /* Interpreter frame slots in words from fp (negative: below it). */
        __s8 frame_method;
        __s8 frame_bcp;
        __u16 const_method;      /* Method::_constMethod */
        __u16 const_method_size; /* sizeof(ConstMethod): the bytecodes follow it */
        __u16 code_size;         /* ConstMethod::_code_size (u2) */
};
_Static_assert(sizeof(struct profd_hotspot_proc) == 40, "profd_hotspot_proc layout");

/* Why a frame in the JVM's code was not taken as a Java frame (counted per CPU,
 * PROFD_HS_CNT_BASE in profd-sample.h). */
enum profd_hs_event {
        PROFD_HS_INTERPRETED = 0, /* an interpreted frame recorded */
        PROFD_HS_BAD_METHOD = 1,  /* its Method* or bytecode pointer could not be read */
        PROFD_HS_OTHER_CODE = 2,  /* compiled code or a stub: stepped by its frame pointer */
        PROFD_HS__MAX,
};
