/* SPDX-License-Identifier: GPL-2.0-only */
#include "python-offsets.h"

#include "macro.h"

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
