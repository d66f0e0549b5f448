/* SPDX-License-Identifier: GPL-2.0-only */
/* CPython frames in BPF: the per-process description the daemon writes (map "python_procs") and
 * how Python frames are stored in a user stack (struct profd_stack, profd-sample.h).
 * Includes nothing: BPF code gets __u8.. from vmlinux.h, userspace from <linux/types.h>.
 *
 * The native walk (bpf/profile.bpf.c) marks each frame whose pc lies in the interpreter's eval
 * function with PROFD_FRAME_PY_EVAL. After it, the Python walk (bpf/python.bpf.h) appends the
 * thread's Python frames, innermost first, each as one PROFD_FRAME_PYTHON entry; the last frame
 * that one call of the eval function runs carries PROFD_FRAME_PY_ENTRY. The daemon
 * (daemon/runtimes/python-stack.c) puts each such group of Python frames in place of its eval frame. */
#pragma once

/* A user stack entry that is a Python frame, not an address (user addresses end at 2^47 on x86-64,
 * 2^48 on arm64). */
#define PROFD_FRAME_PYTHON (1ULL << 62)
/* Python entry: the outermost frame of one call of the eval function (a group ends here). */
#define PROFD_FRAME_PY_ENTRY (1ULL << 61)
/* Native entry: the pc is in the interpreter's eval function. */
#define PROFD_FRAME_PY_EVAL (1ULL << 60)

/* The second entry of each Python frame (its first is described below): the fingerprint of the
 * code object the frame ran (profd_py_fingerprint), in bits 0..31. Memory of a freed code object is
 * soon another code object's: the daemon names a frame only after reading a code object at its
 * address whose fingerprint is this one. 0: none could be taken (never a fingerprint). */
#define PROFD_FRAME_PY_FP (1ULL << 60)

/* Python entry: bits 0..PROFD_PY_CODE_BITS-1 the code object's address >> 3 (objects are 8-byte
 * aligned), the bits above it up to 59 the instruction (see profd_python_proc.lasti_kind), saturated
 * at PROFD_PY_INSTR_MAX. User addresses have 47 bits on x86-64 and 48 on arm64 (Debian's arm64
 * kernels; there shared libraries, the heap's mmap arenas and a PIE interpreter's static code
 * objects all lie above 2^47), so arm64 keeps one bit more of the address and one less of the
 * instruction (0x7fff code units, 64 KiB of bytecode in one code object, before it saturates). */
#if defined(__TARGET_ARCH_arm64) || (!defined(__TARGET_ARCH_x86) && defined(__aarch64__))
#define PROFD_PY_CODE_BITS 45
#else
#define PROFD_PY_CODE_BITS 44
#endif
#define PROFD_PY_CODE_SHIFT 3
#define PROFD_PY_CODE_MASK ((1ULL << PROFD_PY_CODE_BITS) - 1)
#define PROFD_PY_INSTR_SHIFT PROFD_PY_CODE_BITS
#define PROFD_PY_INSTR_MAX ((1ULL << (60 - PROFD_PY_CODE_BITS)) - 1)

/* How a frame says which instruction runs. */
enum profd_py_lasti_kind {
        PROFD_PY_LASTI_INT = 0, /* int f_lasti at frame_lasti (3.8-3.10), stored as is */
        /* A pointer at frame_lasti to the code unit that runs (prev_instr 3.11-3.12, instr_ptr
         * 3.13+): stored as its index in code units from code + code_adaptive. */
        PROFD_PY_LASTI_PTR = 1,
};

/* How the frames of one call of the eval function are told apart. */
enum profd_py_entry_kind {
        PROFD_PY_ENTRY_EVERY = 0,    /* one frame per call (3.8-3.10) */
        PROFD_PY_ENTRY_IS_ENTRY = 1, /* bool at frame_entry: the call's first frame (3.11) */
        /* char owner at frame_entry >= owner_cstack: a shim frame the call pushed below its
         * first frame; not shown (3.12+). */
        PROFD_PY_ENTRY_SHIM = 2,
};

/* Bytes of a code object read for its fingerprint, at most (a power of two: offsets are masked). */
#define PROFD_PY_FP_READ_MAX 128
#define PROFD_PY_FP_WORDS 6
#define PROFD_PY_FP_NONE 0xff

/* Map "python_procs": pid -> how to walk its interpreter. */
#define PROFD_PY_MAX_PROCS 4096
struct profd_python_proc {
        __u64 runtime;        /* address of _PyRuntime */
        __u64 eval_start;     /* [eval_start, eval_end): _PyEval_EvalFrameDefault */
        __u64 eval_end;
        __u64 tstate_current; /* address of the GIL holder's PyThreadState pointer; 0: none */
        __u16 interpreters_head; /* in _PyRuntime: first PyInterpreterState */
        __u16 threads_head;      /* in PyInterpreterState: first PyThreadState */
        __u16 tstate_next;
        __u16 tstate_thread_id; /* unsigned long pthread_self(): the thread's fs base */
        __u16 tstate_frame;     /* the current frame pointer, at tstate + this... */
        __u16 cframe_frame;     /* ...or, when has_cframe, at *(tstate + tstate_frame) + this */
        __u16 frame_previous;
        __u16 frame_code;
        __u16 frame_lasti;
        __u16 frame_entry;      /* is_entry or owner (entry_kind) */
        __u16 code_adaptive;    /* PROFD_PY_LASTI_PTR: first code unit's offset in the code object */
        __u16 frame_size;       /* bytes read per frame: covers every frame_* member, <= 128 */
        __u8 lasti_kind;        /* enum profd_py_lasti_kind */
        __u8 entry_kind;        /* enum profd_py_entry_kind */
        __u8 owner_cstack;
        __u8 has_cframe;
        /* [eval_cold, eval_cold + eval_cold_len): the fragment of the eval function the compiler
         * split off (GCC's .cold part, daemon/runtimes/python-eval-cold.h); 0: none known */
        __u32 eval_cold_len;
        __u64 eval_cold;
        /* The fingerprint of a code object: fp_len bytes read from code + fp_start; in them, the
         * 8-byte members at fp_words[] (PROFD_PY_FP_NONE: unused) and the int at fp_u32. Members
         * that never change while the object lives (names, file name, line table, size), so
         * that the daemon, reading the object later, computes the same value. fp_len 0: none. */
        __u16 fp_start;
        __u8 fp_len;
        __u8 fp_u32;
        __u8 fp_words[PROFD_PY_FP_WORDS];
        __u16 _pad;
        __u32 _pad2;
};
_Static_assert(sizeof(struct profd_python_proc) == 88, "profd_python_proc layout");
#define PROFD_PY_FRAME_READ_MAX 128

/* Why a Python walk ended (counted per CPU, see PROFD_PY_STOP_BASE in profd-sample.h). */
enum profd_py_stop {
        PROFD_PY_STOP_OK = 0,         /* reached the thread's first frame */
        PROFD_PY_STOP_NO_THREAD = 1,  /* the sampled thread has no PyThreadState: not Python's */
        PROFD_PY_STOP_IDLE = 2,       /* the thread runs no Python code now */
        PROFD_PY_STOP_BAD_READ = 3,   /* reading the interpreter's memory failed */
        PROFD_PY_STOP_DEPTH = 4,      /* no room left in the stack (PROFD_MAX_USER_FRAMES) */
        PROFD_PY_STOP_TAIL_CALLS = 5, /* the tail-call budget ran out (deep native + Python) */
        PROFD_PY_STOP__MAX,
};

/* The fingerprint of a code object from buf, the PROFD_PY_FP_READ_MAX (+ 8 of slack) bytes read at
 * code + fp_start: the same computation in BPF (at the sample) and in the daemon (from what it
 * reads later). Never 0. */
static inline __attribute__((always_inline)) __u32 profd_py_fingerprint(const __u8 *buf, const __u8 *words,
                                                                        __u8 u32_off)
{
        __u64 h = 0x51ed270b27e1d3a5ULL, w;
        __u32 v;

        for (int i = 0; i < PROFD_PY_FP_WORDS; i++) { /* a fixed number of members */
                if (words[i] == PROFD_PY_FP_NONE)
                        continue;
                __builtin_memcpy(&w, buf + (words[i] & (PROFD_PY_FP_READ_MAX - 1)), sizeof(w));
                h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
                h ^= h >> 29;
        }
        __builtin_memcpy(&v, buf + (u32_off & (PROFD_PY_FP_READ_MAX - 1)), sizeof(v));
        h = (h ^ v) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 32;
        return (__u32)h ?: 1;
}

/* Ring buffer "python_events": a user stack with Python frames was stored for the first time in
 * generation gen, under user_hash. The daemon reads its code objects right away, while they
 * exist: a module's code object is freed as soon as its import ran, a process may exit soon after
 * its last sample. Rate-limited per process (counted). */
struct profd_python_event {
        __u32 pid;
        __u32 gen;
        __u64 user_hash;
        __u64 ktime_ns; /* of the sample (CLOCK_MONOTONIC) */
};
_Static_assert(sizeof(struct profd_python_event) == 24, "profd_python_event layout");
