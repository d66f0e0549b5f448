/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Where CPython keeps what a frame walker needs, per minor version, for x86-64 builds of the
 * default (GIL, non-debug) configuration. Data only: no code walks frames here. 3.13 and later
 * carry their own table (_Py_DebugOffsets at the start of _PyRuntime) and need no entry; the
 * versions before it are described by the table in python-offsets.c, derived from CPython's
 * headers and checked against real runtimes by tests/test-python-offsets.py.
 * docs/runtimes.md says how to add a version. */

/* A member the version does not have. */
#define PYTHON_OFFSET_NONE UINT16_MAX

/* How to find the PyThreadState of the thread that was sampled. */
typedef enum PythonTstateLookup {
        /* _PyRuntime.gilstate.tstate_current: the thread holding the GIL (3.8-3.11). */
        PYTHON_TSTATE_GILSTATE_CURRENT,
        /* No such pointer in _PyRuntime (3.12: it became the non-exported thread-local
         * _Py_tss_tstate): walk the interpreter's thread list for tstate_native_thread_id ==
         * the sampled thread's TID. The list walk works for every version: before 3.11, which
         * has no native_thread_id, tstate_thread_id is pthread_self(), on x86-64 glibc the
         * thread's fs base. */
        PYTHON_TSTATE_THREAD_LIST,
} PythonTstateLookup;

/* What frame_lasti / frame_prev_instr count and which line table decodes them. */
typedef enum PythonLineTable {
        /* 3.8-3.9: f_lasti is a byte offset into co_code; co_lnotab pairs of (bytes, lines). */
        PYTHON_LINE_TABLE_LNOTAB,
        /* 3.10: f_lasti counts 2-byte code units; co_linetable (start, end, line delta) entries. */
        PYTHON_LINE_TABLE_LINETABLE_310,
        /* 3.11+: prev_instr points into the code object at co_code_adaptive (2-byte code
         * units); co_linetable holds the location table (PEP 626/657 format). */
        PYTHON_LINE_TABLE_LOCATIONS,
} PythonLineTable;

/* Every byte offset of an entry, in one list so tools (the offsets test, a dump) see them all.
 * Names say struct_member; "frame" is PyFrameObject up to 3.10 and _PyInterpreterFrame from 3.11.
 */
#define PYTHON_OFFSET_FIELDS(X)                                                                             \
        /* _PyRuntime (exported symbol) */                                                                  \
        X(runtime_interpreters_head) /* interpreters.head: first PyInterpreterState */                      \
        X(runtime_interpreters_main) /* interpreters.main: the main interpreter */                          \
        X(runtime_tstate_current)    /* gilstate.tstate_current (PYTHON_TSTATE_GILSTATE_CURRENT) */         \
        X(runtime_autotss_key)       /* Py_tss_t {int initialized; pthread_key_t key} of PyGILState */      \
        /* PyInterpreterState */                                                                            \
        X(interp_next)                                                                                      \
        X(interp_threads_head) /* tstate_head up to 3.10, threads.head from 3.11 */                         \
        /* PyThreadState */                                                                                 \
        X(tstate_next)                                                                                      \
        X(tstate_interp)                                                                                    \
        X(tstate_thread_id)        /* unsigned long: pthread_self() of the thread */                        \
        X(tstate_native_thread_id) /* unsigned long: the kernel TID, from 3.11 */                           \
        X(tstate_frame)            /* PyFrameObject *frame, up to 3.10 */                                   \
        X(tstate_cframe)           /* _PyCFrame *cframe, 3.10-3.12 */                                       \
        X(cframe_current_frame)    /* _PyInterpreterFrame *_PyCFrame.current_frame, 3.11-3.12 */            \
        /* frame */                                                                                         \
        X(frame_previous)   /* f_back / previous */                                                         \
        X(frame_code)       /* PyCodeObject *f_code */                                                      \
        X(frame_lasti)      /* int f_lasti, up to 3.10 */                                                   \
        X(frame_prev_instr) /* _Py_CODEUNIT *prev_instr, 3.11-3.12 */                                       \
        X(frame_is_entry)   /* bool is_entry: first frame of a C call of the eval loop, 3.11 */             \
        X(frame_owner)      /* char owner (enum _frameowner), 3.11+ */                                      \
        /* PyCodeObject */                                                                                  \
        X(code_name)                                                                                        \
        X(code_qualname) /* from 3.11 */                                                                    \
        X(code_filename)                                                                                    \
        X(code_firstlineno)                                                                                 \
        X(code_lnotab)        /* bytes, up to 3.9 */                                                        \
        X(code_linetable)     /* bytes, from 3.10 */                                                        \
        X(code_code)          /* bytes object of the bytecode, up to 3.10 */                                \
        X(code_code_adaptive) /* first code unit, inside the code object, from 3.11 */                      \
        /* PyBytesObject (line tables) and PyUnicodeObject (names) */                                       \
        X(var_ob_size)                                                                                      \
        X(bytes_ob_sval)                                                                                    \
        X(unicode_length)       /* Py_ssize_t: length in characters */                                      \
        X(unicode_state)        /* the bit field word of PyASCIIObject */                                   \
        X(unicode_ascii_data)   /* sizeof(PyASCIIObject): where compact ASCII text starts */                \
        X(unicode_compact_data) /* sizeof(PyCompactUnicodeObject): compact non-ASCII text */

typedef struct PythonOffsets {
        uint8_t major;
        uint8_t minor;
        PythonTstateLookup tstate_lookup;
        PythonLineTable line_table;
        /* Lowest _frameowner value of the frames the eval loop pushes for a call from C, which
         * have no Python function to show: FRAME_OWNED_BY_CSTACK (3.12-3.13),
         * FRAME_OWNED_BY_INTERPRETER (3.14, whose FRAME_OWNED_BY_CSTACK is the next value);
         * every owner from it up is such a frame. PYTHON_OFFSET_NONE before 3.12. */
        uint16_t frame_owner_cstack;
        /* Bit positions in unicode_state: lowest bit of the 3-bit kind, compact, ascii. */
        uint8_t unicode_kind_shift;
        uint8_t unicode_compact_bit;
        uint8_t unicode_ascii_bit;
        /* The CPython headers (file@tag) the numbers come from. */
        const char *source;
#define PYTHON_OFFSET_MEMBER(name) uint16_t name;
        PYTHON_OFFSET_FIELDS(PYTHON_OFFSET_MEMBER)
#undef PYTHON_OFFSET_MEMBER
} PythonOffsets;

/* The entry of major.minor, or NULL when the table has none (3.13+ read _Py_DebugOffsets). */
const PythonOffsets *python_offsets_find(unsigned major, unsigned minor);

/* The offsets of a 3.13 or 3.14 runtime from its own _Py_DebugOffsets: buf holds len bytes read
 * from the start of the process's _PyRuntime (PYTHON_DEBUG_OFFSETS_SIZE are enough for every
 * version). There is no cframe: tstate_frame is the offset of PyThreadState.current_frame (a
 * _PyInterpreterFrame *, read directly) and tstate_cframe / cframe_current_frame are
 * PYTHON_OFFSET_NONE; frame_code is f_executable (3.14: a _PyStackRef, the object's address with tag
 * bits in its low 3 bits), frame_prev_instr is instr_ptr (the instruction running, not the one
 * before). Members the table does not carry (runtime_autotss_key, runtime_tstate_current, lnotab,
 * co_code) are PYTHON_OFFSET_NONE. .source names what the constants come from; ret is filled only
 * on success. -EBADMSG: not a _Py_DebugOffsets (cookie, short, values out of range or
 * inconsistent); -EPROTONOSUPPORT: a valid table of another version than 3.13.x or 3.14.x, or a
 * free-threaded build. */
#define PYTHON_DEBUG_OFFSETS_SIZE 760
int python_offsets_from_debug(const void *buf, size_t len, PythonOffsets *ret);

/* Every entry, oldest first, for tools and tests. */
const PythonOffsets *python_offsets_table(size_t *ret_n);

/* Name and value of the i-th offset field of an entry, in PYTHON_OFFSET_FIELDS order; returns
 * NULL past the last one. */
const char *python_offsets_field(const PythonOffsets *o, size_t i, uint16_t *ret_value);
