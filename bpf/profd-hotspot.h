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

/* A user stack entry that is a HotSpot frame, not an address (user addresses end at 2^47 on x86-64,
 * 2^48 on arm64; Python's entries carry bit 62, the exact-pc flag bit 63, and bit 60 is the
 * eval-frame mark the Python splice clears on every native entry: none is set here). */
#define PROFD_FRAME_HOTSPOT (1ULL << 61)
/* Bits 0..PROFD_HS_METHOD_BITS-1: the Method* >> 3 (metaspace objects are 8-byte aligned); the bits
 * above it up to 59: the bytecode index, PROFD_HS_BCI_NONE when unknown. User addresses have 47
 * bits on x86-64 and 48 on arm64 (Debian's arm64 kernels: mmap, and with it metaspace, starts
 * near 2^48), so arm64 keeps one bit more of the Method* and one less of the bytecode index, which
 * saturates at PROFD_HS_BCI_MAX there (bytecode past 32 KiB in one method: its line is the last
 * one's below), as Python's instruction does (profd-python.h). x86-64 holds every bci (0..65534). */
#if defined(__TARGET_ARCH_arm64) || (!defined(__TARGET_ARCH_x86) && defined(__aarch64__))
#define PROFD_HS_METHOD_BITS 45
#else
#define PROFD_HS_METHOD_BITS 44
#endif
#define PROFD_HS_METHOD_SHIFT 3
#define PROFD_HS_METHOD_MASK ((1ULL << PROFD_HS_METHOD_BITS) - 1)
#define PROFD_HS_BCI_SHIFT PROFD_HS_METHOD_BITS
#define PROFD_HS_BCI_NONE ((1ULL << (60 - PROFD_HS_METHOD_BITS)) - 1)
#define PROFD_HS_BCI_MAX (PROFD_HS_BCI_NONE - 1)
/* A compiled frame whose nmethod's compile id could be read: bci PROFD_HS_BCI_NONE (never an
 * interpreted frame's: those hold 0..PROFD_HS_BCI_MAX) and in bits 0..43 where it ran, so that
 * the daemon reads the methods inlined there (its scope descriptors) while the process runs: bits
 * 0..30 the pc (the return address of a caller, the sampled pc of frame 0) minus code_start
 * (HotSpot's code cache is at most 2 GiB: CODE_CACHE_SIZE_LIMIT), bit 31 set for frame 0's sampled
 * pc, bits 32..43 the low bits of nmethod::_compile_id, which the daemon checks against the nmethod it
 * finds at that pc (memory of a freed nmethod is soon another's). */
#define PROFD_HS_PC_BITS 31
#define PROFD_HS_PC_LEAF (1ULL << 31)
#define PROFD_HS_ID_SHIFT 32
#define PROFD_HS_ID_MASK 0xfffULL

/* Map "hotspot_procs": pid -> where its JVM's code is and how its interpreter frames are laid out. */
#define PROFD_HS_MAX_PROCS 4096
/* Code heaps of a segmented code cache: non-nmethods, profiled and non-profiled nmethods. */
#define PROFD_HS_MAX_HEAPS 3
/* Hops back through a code heap's segment map to the start of the blob holding a pc: the map holds
 * hop distances of up to 254 segments (progressive since JDK 13), so 16 hops find the start of a
 * blob of at least 16 * 254 segments (~260 KB with 64-byte segments); a pc in a larger one is
 * counted (PROFD_HS_NO_BLOB) and stepped by its frame pointer. */
#define PROFD_HS_SEGMAP_HOPS 16

struct profd_hs_heap {
        __u64 low, high; /* reserved memory of the heap: [low, high) */
        __u64 segmap;    /* its segment map: one byte per segment */
        __u8 log2_segment;
        __u8 _pad[7];
};
_Static_assert(sizeof(struct profd_hs_heap) == 32, "profd_hs_heap layout");
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
        struct profd_hs_heap heaps[PROFD_HS_MAX_HEAPS];
        /* Compiled frames: CodeBlob members. */
        __u16 blob_frame_size; /* int, in words: the frame from sp to the caller's sp */
        __u16 blob_method;     /* nmethod's Method* */
        __u16 blob_compile_id; /* nmethod::_compile_id (int); 0: unknown, Method* recorded */
        __u8 heap_block_size;  /* sizeof(HeapBlock): the blob follows its header */
        __u8 n_heaps;          /* 0: compiled frames are stepped by their frame pointer */
        /* The interpreter frame's slot of its caller's sp as the caller left it (before the
         * interpreter extended the frame for the callee's locals): a compiled caller's frame
         * size counts from there. */
        __s8 frame_sender_sp;
        __u8 _pad1;
        /* An nmethod's Method* is taken when its method is one: ConstMethod::_constants and
         * ConstantPool::_pool_holder lead to its class (the daemon checks the method is the
         * class's before naming it). */
        __u16 const_method_constants;
        __u16 constant_pool_holder;
        /* Frame 0 of a compiled method before its frame is built (its prologue) has no caller to
         * step to by its frame size: CodeBlob's code start (a pointer, or from JDK 23 an int
         * offset from the blob: blob_code_is_offset) and _frame_complete_offset (an int, or from
         * JDK 23 an int16_t: blob_frame_complete_size), the prologue's length from the code start. */
        __u16 blob_code_begin;
        __u16 blob_frame_complete;
        __u8 blob_code_is_offset;
        __u8 blob_frame_complete_size; /* 0: unknown, every frame 0 in compiled code is unsure */
        /* CodeBlob::_name (const char*): vtable and itable stubs live in blobs named "vtable
         * chunks" and push nothing (0: unknown). */
        __u16 blob_name;
        __u8 _pad2[2];
};
_Static_assert(sizeof(struct profd_hotspot_proc) == 160, "profd_hotspot_proc layout");

/* Why a frame in the JVM's code was not taken as a Java frame (counted per CPU,
 * PROFD_HS_CNT_BASE in profd-sample.h). */
enum profd_hs_event {
        PROFD_HS_INTERPRETED = 0, /* an interpreted frame recorded */
        PROFD_HS_BAD_METHOD = 1,  /* its Method* or bytecode pointer could not be read */
        PROFD_HS_OTHER_CODE = 2,  /* a stub, adapter or blob without frame size: stepped by frame pointer */
        PROFD_HS_COMPILED = 3,    /* a compiled method (its current nmethod) recorded */
        PROFD_HS_COMPILED_UNNAMED = 4, /* compiled code stepped by its frame size, kept as its pc */
        PROFD_HS_NO_BLOB = 5,          /* no blob found for the pc in the segment map */
        /* The sampled pc (frame 0) is where its frame is not built or already popped (a compiled
         * method's prologue or an epilogue the architecture cannot read, the interpreter's entry
         * into a method): its caller cannot be told, the walk ends there (PROFD_STOP_UNSUPPORTED). */
        PROFD_HS_UNSURE = 6,
        PROFD_HS_EPILOGUE = 7, /* frame 0 in a compiled method's epilogue, its caller found */
        PROFD_HS__MAX,
};
