/* SPDX-License-Identifier: GPL-2.0-only */
/* V8 (Node.js) frames in BPF: the per-process description the daemon writes (map "v8_procs") and
 * how a JavaScript frame is marked in a user stack (struct profd_stack, profd-sample.h).
 * Includes nothing: BPF code gets __u8.. from vmlinux.h, userspace from <linux/types.h>.
 *
 * V8 keeps frame pointers in the frames of its JIT code and builtins, so the native walk crosses
 * them with frame-pointer steps (their code has no CFI). At each such step of a process listed in
 * v8_procs, the walk (bpf/v8.bpf.h) reads the frame's fixed slots: a frame whose context slot holds
 * a tagged object and whose function slot a tagged heap object is a JavaScript frame, and a
 * PROFD_FRAME_V8 entry with the function's address follows the frame's own pc entry. A typed frame
 * (entry, exit, stub, ...) keeps a marker in its context slot instead (StackFrame::TypeToMarker: the
 * type shifted left by one, low bit 0) and gets no entry. The daemon names the function at the
 * drain, checking its type first (daemon/runtimes/v8-objects.h). */
#pragma once

/* A user stack entry that is a V8 function, not an address (user addresses end at 2^47): bits
 * 0..46 the JSFunction's tagged address. Bit 62 (PROFD_FRAME_PYTHON) is never set with it. */
#define PROFD_FRAME_V8 (1ULL << 59)
#define PROFD_V8_ADDR_MASK ((1ULL << 47) - 1)

/* On a function entry: the interrupted frame's (the leaf's), which the stack did not show to be the
 * frame at fp (bpf/v8-frame.bpf.h: v8_leaf_unsure(); an uninitialized spill slot of a big TurboFan
 * frame can look like a return address on top of the stack). The daemon keeps the name only if the
 * pc lies in the function's own optimized or baseline code (runtimes/v8-code.h), else the pc's
 * entry stays unnamed. */
#define PROFD_FRAME_V8_UNSURE (1ULL << 53)

/* On a function entry: the frame's pc lies in JIT code (anonymous memory), not in a builtin. An
 * interpreted frame's pc is in the interpreter's builtins, unless node runs with its trampoline
 * copied per function (--interpreted-frames-native-stack, which --perf-basic-prof implies); an
 * optimized frame entered from the interpreter's loop (on-stack replacement) keeps the
 * interpreter's slots, with the bytecode offset of its entry, while its pc is in JIT code. The
 * daemon takes such a frame's line from the Code at its pc, not from that stale offset. Function
 * entries leave bits 47..51 and 54..56 clear. */
#define PROFD_FRAME_V8_JIT (1ULL << 52)

/* An interpreted (Ignition) frame's bytecode position, in the entry right after its function's:
 * PROFD_FRAME_V8 | PROFD_FRAME_V8_BYTECODE | the raw offset (the Smi of the frame's offset slot:
 * bytes from the tagged BytecodeArray pointer) << PROFD_V8_BC_ADDR_BITS | the frame's BytecodeArray
 * (tagged address) >> 3. The daemon checks that array is the function's before using the offset.
 * Heap objects are 8-byte aligned below 2^47: 44 bits keep the address; 13 bits the offset. */
#define PROFD_FRAME_V8_BYTECODE (1ULL << 57)
#define PROFD_V8_BC_ADDR_BITS 44
#define PROFD_V8_BC_OFFSET_MAX ((1ULL << 13) - 1)

/* A frame type marker is below this (V8 has fewer than 32 frame types), shifted left by one. */
#define PROFD_V8_MARKER_MAX 64

/* Map "v8_procs": pid -> the frame layout of its V8. */
#define PROFD_V8_MAX_PROCS 4096
struct profd_v8_proc {
        __s8 fp_function; /* slot of the JSFunction, bytes from the frame pointer (-16) */
        __s8 fp_context;  /* slot of the context or the frame type marker (-8) */
        __u8 heap_object_tag_mask;
        __u8 heap_object_tag;
        __s8 fp_bytecode_array;  /* interpreted frames: slot of the BytecodeArray; 0: not read */
        __s8 fp_bytecode_offset; /* ... and of the bytecode offset (a Smi) */
        __u8 smi_value_shift;    /* a Smi's value is the word shifted right by this (32) */
        __u8 _pad;
};
_Static_assert(sizeof(struct profd_v8_proc) == 8, "profd_v8_proc layout");
