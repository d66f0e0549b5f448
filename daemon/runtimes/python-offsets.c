/* SPDX-License-Identifier: GPL-2.0-only */
#include "runtimes/python-offsets.h"

#include "util/macro.h"

/* One entry per minor version, x86-64, default build (GIL, no Py_DEBUG, no Py_TRACE_REFS).
 * Each number is the byte offset of the member as laid out by the C compiler from the structs in
 * the headers named in .source, at the tag named there; layouts do not change within a minor
 * version. tests/test-python-offsets.py compares every field with the DWARF of Debian's 3.9
 * (bullseye) and 3.11 (bookworm); 3.8, 3.10 and 3.12 ship in no Debian release and are checked
 * against the headers only. */
#define N PYTHON_OFFSET_NONE

static const PythonOffsets table[] = {
        {
                .major = 3,
                .minor = 8,
                .source = "Include/internal/pycore_pystate.h, Include/cpython/pystate.h, "
                          "Include/frameobject.h, Include/code.h, Include/cpython/unicodeobject.h "
                          "@v3.8.0",
                .tstate_lookup = PYTHON_TSTATE_GILSTATE_CURRENT,
                .line_table = PYTHON_LINE_TABLE_LNOTAB,
                .frame_owner_cstack = N,
                .unicode_kind_shift = 2,
                .unicode_compact_bit = 5,
                .unicode_ascii_bit = 6,
                .runtime_interpreters_head = 32,
                .runtime_interpreters_main = 40,
                .runtime_tstate_current = 1368,
                .runtime_autotss_key = 1392, /* gilstate still has getframe before it */
                .interp_next = 0,
                .interp_threads_head = 8,
                .tstate_next = 8,
                .tstate_interp = 16,
                .tstate_thread_id = 176,
                .tstate_native_thread_id = N,
                .tstate_frame = 24,
                .tstate_cframe = N,
                .cframe_current_frame = N,
                .frame_previous = 24,
                .frame_code = 32,
                .frame_lasti = 104,
                .frame_prev_instr = N,
                .frame_is_entry = N,
                .frame_owner = N,
                .code_name = 112,
                .code_qualname = N,
                .code_filename = 104,
                .code_firstlineno = 40,
                .code_lnotab = 120,
                .code_linetable = N,
                .code_code = 48,
                .code_code_adaptive = N,
                .var_ob_size = 16,
                .bytes_ob_sval = 32,
                .unicode_length = 16,
                .unicode_state = 32,
                .unicode_ascii_data = 48,
                .unicode_compact_data = 72,
        },
        {
                .major = 3,
                .minor = 9,
                .source = "Include/internal/pycore_runtime.h, Include/internal/pycore_interp.h, "
                          "Include/cpython/pystate.h, Include/cpython/frameobject.h, "
                          "Include/cpython/code.h, Include/cpython/unicodeobject.h @v3.9.2",
                .tstate_lookup = PYTHON_TSTATE_GILSTATE_CURRENT,
                .line_table = PYTHON_LINE_TABLE_LNOTAB,
                .frame_owner_cstack = N,
                .unicode_kind_shift = 2,
                .unicode_compact_bit = 5,
                .unicode_ascii_bit = 6,
                .runtime_interpreters_head = 32,
                .runtime_interpreters_main = 40,
                .runtime_tstate_current = 568,
                .runtime_autotss_key = 584,
                .interp_next = 0,
                .interp_threads_head = 8,
                .tstate_next = 8,
                .tstate_interp = 16,
                .tstate_thread_id = 176,
                .tstate_native_thread_id = N,
                .tstate_frame = 24,
                .tstate_cframe = N,
                .cframe_current_frame = N,
                .frame_previous = 24,
                .frame_code = 32,
                .frame_lasti = 104,
                .frame_prev_instr = N,
                .frame_is_entry = N,
                .frame_owner = N,
                .code_name = 112,
                .code_qualname = N,
                .code_filename = 104,
                .code_firstlineno = 40,
                .code_lnotab = 120,
                .code_linetable = N,
                .code_code = 48,
                .code_code_adaptive = N,
                .var_ob_size = 16,
                .bytes_ob_sval = 32,
                .unicode_length = 16,
                .unicode_state = 32,
                .unicode_ascii_data = 48,
                .unicode_compact_data = 72,
        },
        {
                .major = 3,
                .minor = 10,
                .source = "Include/internal/pycore_runtime.h, Include/internal/pycore_interp.h, "
                          "Include/cpython/pystate.h, Include/cpython/frameobject.h, "
                          "Include/cpython/code.h, Include/cpython/unicodeobject.h @v3.10.0",
                .tstate_lookup = PYTHON_TSTATE_GILSTATE_CURRENT,
                .line_table = PYTHON_LINE_TABLE_LINETABLE_310,
                .frame_owner_cstack = N,
                .unicode_kind_shift = 2,
                .unicode_compact_bit = 5,
                .unicode_ascii_bit = 6,
                .runtime_interpreters_head = 32,
                .runtime_interpreters_main = 40,
                .runtime_tstate_current = 568,
                .runtime_autotss_key = 584,
                .interp_next = 0,
                .interp_threads_head = 8,
                .tstate_next = 8,
                .tstate_interp = 16,
                .tstate_thread_id = 176,
                .tstate_native_thread_id = N,
                .tstate_frame = 24,
                .tstate_cframe = 48, /* CFrame holds only use_tracing and previous in 3.10 */
                .cframe_current_frame = N,
                .frame_previous = 24,
                .frame_code = 32,
                .frame_lasti = 96,
                .frame_prev_instr = N,
                .frame_is_entry = N,
                .frame_owner = N,
                .code_name = 112,
                .code_qualname = N,
                .code_filename = 104,
                .code_firstlineno = 40,
                .code_lnotab = N,
                .code_linetable = 120,
                .code_code = 48,
                .code_code_adaptive = N,
                .var_ob_size = 16,
                .bytes_ob_sval = 32,
                .unicode_length = 16,
                .unicode_state = 32,
                .unicode_ascii_data = 48,
                .unicode_compact_data = 72,
        },
        {
                .major = 3,
                .minor = 11,
                .source = "Include/internal/pycore_runtime.h, Include/internal/pycore_interp.h, "
                          "Include/cpython/pystate.h, Include/internal/pycore_frame.h, "
                          "Include/cpython/code.h, Include/cpython/unicodeobject.h @v3.11.2",
                .tstate_lookup = PYTHON_TSTATE_GILSTATE_CURRENT,
                .line_table = PYTHON_LINE_TABLE_LOCATIONS,
                .frame_owner_cstack = N, /* entry frames are marked by is_entry instead */
                .unicode_kind_shift = 2,
                .unicode_compact_bit = 5,
                .unicode_ascii_bit = 6,
                .runtime_interpreters_head = 40,
                .runtime_interpreters_main = 48,
                .runtime_tstate_current = 576,
                .runtime_autotss_key = 592,
                .interp_next = 0,
                .interp_threads_head = 16,
                .tstate_next = 8,
                .tstate_interp = 16,
                .tstate_thread_id = 152,
                .tstate_native_thread_id = 160,
                .tstate_frame = N,
                .tstate_cframe = 56,
                .cframe_current_frame = 8,
                .frame_previous = 48,
                .frame_code = 32,
                .frame_lasti = N,
                .frame_prev_instr = 56,
                .frame_is_entry = 68,
                .frame_owner = 69,
                .code_name = 120,
                .code_qualname = 128,
                .code_filename = 112,
                .code_firstlineno = 72,
                .code_lnotab = N,
                .code_linetable = 136,
                .code_code = N,
                .code_code_adaptive = 184,
                .var_ob_size = 16,
                .bytes_ob_sval = 32,
                .unicode_length = 16,
                .unicode_state = 32,
                .unicode_ascii_data = 48,
                .unicode_compact_data = 72,
        },
        {
                .major = 3,
                .minor = 12,
                .source = "Include/internal/pycore_runtime.h, Include/internal/pycore_interp.h, "
                          "Include/cpython/pystate.h, Include/internal/pycore_frame.h, "
                          "Include/cpython/code.h, Include/cpython/unicodeobject.h @v3.12.0",
                .tstate_lookup = PYTHON_TSTATE_THREAD_LIST,
                .line_table = PYTHON_LINE_TABLE_LOCATIONS,
                .frame_owner_cstack = 3, /* FRAME_OWNED_BY_CSTACK */
                .unicode_kind_shift = 2,
                .unicode_compact_bit = 5,
                .unicode_ascii_bit = 6,
                .runtime_interpreters_head = 40,
                .runtime_interpreters_main = 48,
                .runtime_tstate_current = N,
                .runtime_autotss_key = 1544, /* moved out of gilstate to _PyRuntime itself */
                .interp_next = 0,
                .interp_threads_head = 72,
                .tstate_next = 8,
                .tstate_interp = 16,
                .tstate_thread_id = 136,
                .tstate_native_thread_id = 144,
                .tstate_frame = N,
                .tstate_cframe = 56,
                .cframe_current_frame = 0,
                .frame_previous = 8,
                .frame_code = 0,
                .frame_lasti = N,
                .frame_prev_instr = 56,
                .frame_is_entry = N,
                .frame_owner = 70,
                .code_name = 120,
                .code_qualname = 128,
                .code_filename = 112,
                .code_firstlineno = 68,
                .code_lnotab = N,
                .code_linetable = 136,
                .code_code = N,
                .code_code_adaptive = 192,
                .var_ob_size = 16,
                .bytes_ob_sval = 32,
                .unicode_length = 16,
                .unicode_state = 32,
                .unicode_ascii_data = 40, /* the wstr pointer is gone */
                .unicode_compact_data = 56,
        },
};

#undef N

const PythonOffsets *python_offsets_find(unsigned major, unsigned minor)
{
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (table[i].major == major && table[i].minor == minor)
                        return &table[i];
        return NULL;
}

const PythonOffsets *python_offsets_table(size_t *ret_n)
{
        *ret_n = ELEMENTSOF(table);
        return table;
}

const char *python_offsets_field(const PythonOffsets *o, size_t i, uint16_t *ret_value)
{
        static const struct {
                const char *name;
                size_t offset;
        } fields[] = {
#define PYTHON_OFFSET_ENTRY(name) {#name, offsetof(PythonOffsets, name)},
                PYTHON_OFFSET_FIELDS(PYTHON_OFFSET_ENTRY)
#undef PYTHON_OFFSET_ENTRY
        };

        if (i >= ELEMENTSOF(fields))
                return NULL;
        *ret_value = *(const uint16_t *)((const uint8_t *)o + fields[i].offset);
        return fields[i].name;
}

/* _Py_DebugOffsets (Include/internal/pycore_runtime.h @v3.13.0, pycore_debug_offsets.h from
 * v3.14.0): a cookie, the version, free_threaded, then one section per struct, each a uint64_t size
 * of the struct followed by uint64_t offsets of its members. The sections and their members change
 * between minor versions (3.14 adds members to the interpreter, frame and code sections and new
 * sections), so each version has its own positions of the words profd reads, in bytes from the
 * start of the table. */
enum {
        DBG_COOKIE = 0,
        DBG_VERSION = 8,
        DBG_FREE_THREADED = 16,
        DBG_RUNTIME_SIZE = 24,
        DBG_RUNTIME_INTERPRETERS_HEAD = 40,
        DBG_INTERP_SIZE = 48,
        DBG_INTERP_NEXT = 64,
        DBG_INTERP_THREADS_HEAD = 72,
        DBG_END_313 = 584, /* gc, the last section, ends here */
        DBG_END_314 = 760, /* debugger_support, the last section, ends here */
};
_Static_assert(DBG_END_313 <= PYTHON_DEBUG_OFFSETS_SIZE && DBG_END_314 <= PYTHON_DEBUG_OFFSETS_SIZE,
               "PYTHON_DEBUG_OFFSETS_SIZE covers every layout");

typedef struct DebugLayout {
        uint8_t minor;
        const char *source;
        uint16_t frame_owner_cstack;
        size_t tstate_size, tstate_next, tstate_interp, tstate_current_frame, tstate_thread_id,
                tstate_native_thread_id;
        size_t frame_size, frame_previous, frame_executable, frame_instr_ptr, frame_owner;
        size_t code_size, code_filename, code_name, code_qualname, code_linetable, code_firstlineno,
                code_code_adaptive;
        size_t pyobject_size, pyobject_ob_type;
        size_t bytes_size, bytes_ob_size, bytes_ob_sval;
        size_t unicode_size, unicode_state, unicode_length, unicode_asciiobject_size;
        size_t end; /* of the last section */
} DebugLayout;

static const DebugLayout debug_layouts[] = {
        {
                .minor = 13,
                .source = "_Py_DebugOffsets of the process (Include/internal/pycore_runtime.h @v3.13.0); "
                          "interpreters.main, str state bits, sizeof(PyCompactUnicodeObject), "
                          "FRAME_OWNED_BY_CSTACK from pycore_interp.h, cpython/unicodeobject.h, "
                          "pycore_frame.h @v3.13.0",
                /* enum _frameowner in Include/internal/pycore_frame.h @v3.13.0: the shim frame
                 * _PyEval_EvalFrameDefault pushes */
                .frame_owner_cstack = 3,
                .tstate_size = 152,
                .tstate_next = 168,
                .tstate_interp = 176,
                .tstate_current_frame = 184,
                .tstate_thread_id = 192,
                .tstate_native_thread_id = 200,
                .frame_size = 224,
                .frame_previous = 232,
                .frame_executable = 240,
                .frame_instr_ptr = 248,
                .frame_owner = 264,
                .code_size = 272,
                .code_filename = 280,
                .code_name = 288,
                .code_qualname = 296,
                .code_linetable = 304,
                .code_firstlineno = 312,
                .code_code_adaptive = 344,
                .pyobject_size = 352,
                .pyobject_ob_type = 360,
                .bytes_size = 512,
                .bytes_ob_size = 520,
                .bytes_ob_sval = 528,
                .unicode_size = 536,
                .unicode_state = 544,
                .unicode_length = 552,
                .unicode_asciiobject_size = 560,
                .end = DBG_END_313,
        },
        {
                .minor = 14,
                .source = "_Py_DebugOffsets of the process (Include/internal/pycore_debug_offsets.h "
                          "@v3.14.0); interpreters.main, str state bits, sizeof(PyCompactUnicodeObject), "
                          "FRAME_OWNED_BY_INTERPRETER from pycore_runtime_structs.h, "
                          "cpython/unicodeobject.h, pycore_interpframe_structs.h @v3.14.0",
                /* enum _frameowner in Include/internal/pycore_interpframe_structs.h @v3.14.0:
                 * FRAME_OWNED_BY_INTERPRETER, the entry frame _PyEval_EvalFrameDefault pushes, and
                 * FRAME_OWNED_BY_CSTACK = 4 after it; neither has a Python function. */
                .frame_owner_cstack = 3,
                .tstate_size = 176,
                .tstate_next = 192,
                .tstate_interp = 200,
                .tstate_current_frame = 208,
                .tstate_thread_id = 216,
                .tstate_native_thread_id = 224,
                .frame_size = 248,
                .frame_previous = 256,
                .frame_executable = 264, /* a _PyStackRef: tag bits in the low bits */
                .frame_instr_ptr = 272,
                .frame_owner = 288,
                .code_size = 312,
                .code_filename = 320,
                .code_name = 328,
                .code_qualname = 336,
                .code_linetable = 344,
                .code_firstlineno = 352,
                .code_code_adaptive = 384,
                .pyobject_size = 400,
                .pyobject_ob_type = 408,
                .bytes_size = 592,
                .bytes_ob_size = 600,
                .bytes_ob_sval = 608,
                .unicode_size = 616,
                .unicode_state = 624,
                .unicode_length = 632,
                .unicode_asciiobject_size = 640,
                .end = DBG_END_314,
        },
};

static uint64_t dbg_u64(const uint8_t *p, size_t at)
{
        uint64_t v;
        __builtin_memcpy(&v, p + at, sizeof(v)); /* little-endian: x86-64 only, as the table */
        return v;
}

/* The member at word `at` of the section whose size word is at `section`: an offset inside the
 * struct the section describes. A table of another layout (a section more or less) puts other
 * words here, which this catches in nearly every case. */
static int dbg_member(const uint8_t *p, size_t section, size_t at, uint16_t *ret)
{
        uint64_t size = dbg_u64(p, section), v = dbg_u64(p, at);

        /* size may be large (_PyRuntimeState is), the offsets profd keeps must fit 16 bits. */
        if (size == 0 || v >= size || v >= PYTHON_OFFSET_NONE)
                return -EBADMSG;
        *ret = (uint16_t)v;
        return 0;
}

int python_offsets_from_debug(const void *buf, size_t len, PythonOffsets *ret)
{
        const uint8_t *p = buf;
        const DebugLayout *l = NULL;
        uint64_t version;
        unsigned minor;
        uint16_t ob_type, ascii_size;
        int r;

        if (!buf || len < DBG_RUNTIME_SIZE || __builtin_memcmp(p + DBG_COOKIE, "xdebugpy", 8) != 0)
                return -EBADMSG;
        /* PY_VERSION_HEX: major in bits 24-31, minor 16-23. Each minor version lays the table out
         * differently, so one profd has no layout for is refused before anything else is read. */
        version = dbg_u64(p, DBG_VERSION);
        if (version > UINT32_MAX || (version >> 24) != 3)
                return -EBADMSG;
        minor = (version >> 16) & 0xff;
        for (size_t i = 0; i < ELEMENTSOF(debug_layouts); i++)
                if (debug_layouts[i].minor == minor)
                        l = &debug_layouts[i];
        if (!l)
                return -EPROTONOSUPPORT;
        if (len < l->end)
                return -EBADMSG;
        /* Free-threaded builds lay out PyObject (and so every object) differently. */
        if (dbg_u64(p, DBG_FREE_THREADED) > 1)
                return -EBADMSG;
        if (dbg_u64(p, DBG_FREE_THREADED) != 0)
                return -EPROTONOSUPPORT;

        PythonOffsets o = {
                .major = 3,
                .minor = minor,
                .source = l->source,
                .tstate_lookup = PYTHON_TSTATE_THREAD_LIST,
                .line_table = PYTHON_LINE_TABLE_LOCATIONS,
                .frame_owner_cstack = l->frame_owner_cstack,
                /* PyASCIIObject.state: interned:2, kind:3, compact:1, ascii:1 (cpython/unicodeobject.h) */
                .unicode_kind_shift = 2,
                .unicode_compact_bit = 5,
                .unicode_ascii_bit = 6,
#define N PYTHON_OFFSET_NONE
                .runtime_tstate_current = N,
                .runtime_autotss_key = N,
                .tstate_cframe = N,
                .cframe_current_frame = N,
                .frame_lasti = N,
                .frame_is_entry = N,
                .code_lnotab = N,
                .code_code = N,
#undef N
        };

        /* The resolver takes ob_type at 8 (the default build's PyObject of 16 bytes). */
        r = dbg_member(p, l->pyobject_size, l->pyobject_ob_type, &ob_type);
        if (r < 0)
                return r;
        if (dbg_u64(p, l->pyobject_size) != 16 || ob_type != 8)
                return -EBADMSG;

        const struct {
                size_t section, at;
                uint16_t *field;
        } members[] = {
                {DBG_RUNTIME_SIZE, DBG_RUNTIME_INTERPRETERS_HEAD, &o.runtime_interpreters_head},
                {DBG_INTERP_SIZE, DBG_INTERP_NEXT, &o.interp_next},
                {DBG_INTERP_SIZE, DBG_INTERP_THREADS_HEAD, &o.interp_threads_head},
                {l->tstate_size, l->tstate_next, &o.tstate_next},
                {l->tstate_size, l->tstate_interp, &o.tstate_interp},
                {l->tstate_size, l->tstate_current_frame, &o.tstate_frame},
                {l->tstate_size, l->tstate_thread_id, &o.tstate_thread_id},
                {l->tstate_size, l->tstate_native_thread_id, &o.tstate_native_thread_id},
                {l->frame_size, l->frame_previous, &o.frame_previous},
                {l->frame_size, l->frame_executable, &o.frame_code},
                {l->frame_size, l->frame_instr_ptr, &o.frame_prev_instr},
                {l->frame_size, l->frame_owner, &o.frame_owner},
                {l->code_size, l->code_filename, &o.code_filename},
                {l->code_size, l->code_name, &o.code_name},
                {l->code_size, l->code_qualname, &o.code_qualname},
                {l->code_size, l->code_linetable, &o.code_linetable},
                {l->code_size, l->code_firstlineno, &o.code_firstlineno},
                {l->code_size, l->code_code_adaptive, &o.code_code_adaptive},
                {l->bytes_size, l->bytes_ob_size, &o.var_ob_size},
                {l->bytes_size, l->bytes_ob_sval, &o.bytes_ob_sval},
                {l->unicode_size, l->unicode_state, &o.unicode_state},
                {l->unicode_size, l->unicode_length, &o.unicode_length},
        };
        for (size_t i = 0; i < ELEMENTSOF(members); i++) {
                r = dbg_member(p, members[i].section, members[i].at, members[i].field);
                if (r < 0)
                        return r;
        }
        /* The text of a compact str follows its header: sizeof(PyASCIIObject), given as is, and
         * sizeof(PyCompactUnicodeObject), which adds Py_ssize_t utf8_length and char *utf8. */
        r = dbg_member(p, l->unicode_size, l->unicode_asciiobject_size, &ascii_size);
        if (r < 0)
                return r;
        if (ascii_size < o.unicode_state + 4 || ascii_size > 256)
                return -EBADMSG;
        o.unicode_ascii_data = ascii_size;
        o.unicode_compact_data = ascii_size + 16;
        /* struct pyinterpreters: PyMutex mutex; head; main (pycore_runtime.h @v3.13.0,
         * pycore_runtime_structs.h @v3.14.0). */
        o.runtime_interpreters_main = o.runtime_interpreters_head + 8;

        *ret = o;
        return 0;
}
