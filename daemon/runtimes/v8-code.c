/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtimes/v8-baseline.h"
#include "runtimes/v8-code.h"
#include "runtimes/v8-lines.h"
#include "runtimes/v8-objects.h"
#include "util/macro.h"

/* Bytes of a Code's header read, at most (10.2: 128). */
#define V8_CODE_HEADER_MAX 256
/* Candidates checked through their back pointer, at most, when the map of code objects is not
 * known (V8 13.6): a function's code is a few KiB, a candidate every 64 bytes. */
#define V8_CODE_PROBES_MAX 256
/* Bytes read at once while looking for a Code header below a pc. */
#define V8_CODE_SCAN_CHUNK 4096
/* Bytes of a baseline Code's bytecode offset table and of its BytecodeArray read, at most: a
 * function of a few thousand lines has tens of KiB of bytecode; beyond, its frames get no line. */
#define V8_BASELINE_BYTES_MAX (256 * 1024)
/* Words of an InterpreterData looked at for its BytecodeArray (its first members). */
#define V8_INTERPRETER_DATA_WORDS 4
/* An inlining id beyond this is taken for a misread (TurboFan inlines a few dozen functions into
 * one Code at most). */
#define V8_INLINING_IDS_MAX 4096

/* An InliningPosition (src/objects/code.h, 10.2 to 13.6): its SourcePosition (8 bytes), the
 * inlined function's index among the DeoptimizationData's literals (int), padding. */
#define V8_INLINING_POSITION_SIZE 16

/* Where a build keeps what v8_code_frame() reads. The metadata names part of it (10.2: the Code's
 * header size, instruction size and flags; 11.3: the Code's deoptimization data and position table
 * and the DeoptimizationData indices); the rest is profd's table per V8 version below (from V8's
 * src/objects/code.h and deoptimization-data.h of that version, checked against live processes),
 * chosen by what the metadata holds. Every object read through it has its type checked. */
typedef struct CodeLayout {
        int32_t fn_code;     /* JSFunction -> its current Code */
        int32_t istream;     /* Code -> InstructionStream (11.3); -1: instructions inline (10.2) */
        int32_t start;       /* 10.2: the Code's header size; 11.3: its instruction_start (a raw pointer) */
        int32_t size, flags; /* the Code's instruction size (int) and flags (uint32) */
        int32_t deopt, positions;
        /* The object in code space that holds instructions (10.2: the Code, 11.3: its
         * InstructionStream): its header's size (instructions follow) and where it points back to
         * its Code (11.3; -1: it is the Code). */
        int32_t header, back;
        int32_t deopt_count, deopt_literals, deopt_shared, deopt_inlining;
        uint16_t container_type; /* instance type of that object */
} CodeLayout;

static int32_t or_default(int32_t v, int32_t d)
{
        return v != V8_OFFSET_NONE ? v : d;
}

/* The layout of o's build; false when profd does not describe it. */
static bool code_layout(const V8Offsets *o, CodeLayout *ret)
{
        if (o->code_kind_mask == V8_OFFSET_NONE || o->code_kind_shift == V8_OFFSET_NONE ||
            o->code_kind_baseline == V8_OFFSET_NONE || o->type_code == V8_OFFSET_NONE ||
            o->type_fixed_array == V8_OFFSET_NONE || o->type_byte_array == V8_OFFSET_NONE ||
            o->fixed_array_data == V8_OFFSET_NONE || o->fixed_array_length == V8_OFFSET_NONE ||
            o->heap_object_map != 0)
                return false;
        if (o->js_function_code != V8_OFFSET_NONE && o->code_instruction_start != V8_OFFSET_NONE &&
            o->code_instruction_size != V8_OFFSET_NONE && o->code_flags != V8_OFFSET_NONE &&
            o->code_instruction_start > 0 && o->code_instruction_start <= V8_CODE_HEADER_MAX &&
            o->code_instruction_size + 4 <= o->code_instruction_start &&
            o->code_flags + 4 <= o->code_instruction_start) {
                /* V8 10.2 (node 18): Code holds its instructions after a header; relocation_info,
                 * deoptimization data, source position table after the map. DeoptimizationData
                 * indices as 11.3's. */
                *ret = (CodeLayout){
                        .fn_code = o->js_function_code,
                        .istream = -1,
                        .start = o->code_instruction_start,
                        .size = o->code_instruction_size,
                        .flags = o->code_flags,
                        .deopt = or_default(o->code_deopt_data, 16),
                        .positions = or_default(o->code_positions, 24),
                        .header = o->code_instruction_start,
                        .back = -1,
                        .deopt_count = or_default(o->deopt_inlined_count, 1),
                        .deopt_literals = or_default(o->deopt_literals, 2),
                        .deopt_shared = or_default(o->deopt_shared, 6),
                        .deopt_inlining = or_default(o->deopt_inlining_positions, 7),
                        .container_type = (uint16_t)o->type_code,
                };
                return true;
        }
        if (o->type_instruction_stream != V8_OFFSET_NONE && o->code_deopt_data == 16 &&
            o->code_positions == 24 && o->istream_instruction_start == 16 &&
            o->deopt_shared != V8_OFFSET_NONE && o->deopt_inlined_count != V8_OFFSET_NONE &&
            o->deopt_literals != V8_OFFSET_NONE && o->deopt_inlining_positions != V8_OFFSET_NONE &&
            o->js_function_shared == 24) {
                /* V8 11.3 (node 20): JSFunction: shared, context, feedback cell, code. Code (out of
                 * code space): map, relocation_info, deoptimization data, source position table,
                 * instruction_stream, instruction_start, flags, instruction_size.
                 * InstructionStream: map, its Code, the instructions. */
                *ret = (CodeLayout){
                        .fn_code = 48,
                        .istream = 32,
                        .start = 40,
                        .size = 56,
                        .flags = 48,
                        .deopt = o->code_deopt_data,
                        .positions = o->code_positions,
                        .header = o->istream_instruction_start,
                        .back = 8,
                        .deopt_count = o->deopt_inlined_count,
                        .deopt_literals = o->deopt_literals,
                        .deopt_shared = o->deopt_shared,
                        .deopt_inlining = o->deopt_inlining_positions,
                        .container_type = (uint16_t)o->type_instruction_stream,
                };
                return true;
        }
        if (o->type_instruction_stream != V8_OFFSET_NONE && o->istream_instruction_start == 32 &&
            o->code_istream == 32 && o->code_instruction_start_ptr == 40 && o->code_flags == 52 &&
            o->code_instruction_size == 56 && o->deopt_wrapped_shared != V8_OFFSET_NONE &&
            o->deopt_inlined_count != V8_OFFSET_NONE && o->deopt_literals != V8_OFFSET_NONE &&
            o->deopt_inlining_positions != V8_OFFSET_NONE && o->type_sfi_wrapper != V8_OFFSET_NONE &&
            o->sfi_wrapper_shared != V8_OFFSET_NONE && o->type_trusted_byte_array != V8_OFFSET_NONE) {
                /* V8 13.6 (node 24): Code: map, deoptimization data, source position table
                 * (protected pointers, not in the metadata), wrapper, instruction_stream,
                 * instruction_start ... InstructionStream: map, its Code, relocation info, body
                 * size, the instructions. A JSFunction reaches its code through its dispatch
                 * handle (leaptiering), not read here: the Code is always found from the pc. The
                 * DeoptimizationData holds its function's SharedFunctionInfo wrapped. */
                *ret = (CodeLayout){
                        .fn_code = -1,
                        .istream = o->code_istream,
                        .start = o->code_instruction_start_ptr,
                        .size = o->code_instruction_size,
                        .flags = o->code_flags,
                        .deopt = 8,
                        .positions = 16,
                        .header = o->istream_instruction_start,
                        .back = 8,
                        .deopt_count = o->deopt_inlined_count,
                        .deopt_literals = o->deopt_literals,
                        .deopt_shared = o->deopt_wrapped_shared,
                        .deopt_inlining = o->deopt_inlining_positions,
                        .container_type = (uint16_t)o->type_instruction_stream,
                };
                return true;
        }
        return false;
}

static uint64_t untag(const V8Offsets *o, uint64_t obj)
{
        if (!v8_is_heap_object(o, obj) || obj < 4096)
                return 0;
        return obj - (uint64_t)o->heap_object_tag;
}

bool v8_code_supported(const V8Offsets *o)
{
        CodeLayout l;

        return code_layout(o, &l);
}

/* The kind of a Code's flags: BASELINE is in the metadata; MAGLEV and TURBOFAN follow it in V8's
 * CodeKind list (src/objects/code-kind.h, 10.2 to 13.6). */
static V8CodeKind kind_of(const V8Offsets *o, uint32_t flags)
{
        int32_t k = (int32_t)((flags >> o->code_kind_shift) & (uint32_t)o->code_kind_mask);

        if (k == o->code_kind_baseline)
                return V8_CODE_BASELINE;
        if (k == o->code_kind_baseline + 1)
                return V8_CODE_MAGLEV;
        if (k == o->code_kind_baseline + 2)
                return V8_CODE_TURBOFAN;
        return V8_CODE_OTHER;
}

/* The first bytes of the Code (tagged) code, through its flags, instruction start and size, and
 * its deoptimization data slot: one read. *ret_end: how many. */
static int code_header(const RemoteMemory *m, const V8Offsets *o, const CodeLayout *l, uint64_t code,
                       uint8_t h[V8_CODE_HEADER_MAX])
{
        int32_t end = l->start + 8;

        end = end > l->size + 4 ? end : l->size + 4;
        end = end > l->flags + 4 ? end : l->flags + 4;
        end = end > l->deopt + 8 ? end : l->deopt + 8;
        if (end > V8_CODE_HEADER_MAX)
                return -EOPNOTSUPP;
        return remote_memory_read(m, untag(o, code), h, (size_t)end);
}

/* From a Code's header: its flags and instruction start, and whether its instructions hold pc. */
static bool header_holds(const V8Offsets *o, const CodeLayout *l, uint64_t code, const uint8_t *h,
                         uint64_t pc, uint32_t *ret_flags, uint64_t *ret_start)
{
        uint64_t start;
        int32_t size;

        memcpy(&size, h + l->size, sizeof(size));
        memcpy(ret_flags, h + l->flags, sizeof(*ret_flags));
        if (l->istream < 0)
                start = untag(o, code) + (uint64_t)l->start;
        else
                memcpy(&start, h + l->start, sizeof(start));
        *ret_start = start;
        return size > 0 && pc >= start && pc - start < (uint64_t)size;
}

/* The Code (tagged) code: whether its instructions hold pc, its flags and instruction start, its
 * map word (ret_map: may be NULL). */
static int code_holds(const RemoteMemory *m, const V8Offsets *o, const CodeLayout *l, uint64_t code,
                      uint64_t pc, uint32_t *ret_flags, uint64_t *ret_start, bool *ret_holds,
                      uint64_t *ret_map)
{
        uint8_t h[V8_CODE_HEADER_MAX];
        uint16_t type;
        int r;

        r = v8_object_type(m, o, code, &type);
        if (r < 0)
                return r;
        if (type != (uint32_t)o->type_code)
                return -EMEDIUMTYPE;
        r = code_header(m, o, l, code, h);
        if (r < 0)
                return r;
        *ret_holds = header_holds(o, l, code, h, pc, ret_flags, ret_start);
        if (ret_map)
                memcpy(ret_map, h, sizeof(*ret_map)); /* heap_object_map is 0 (code_layout()) */
        return 0;
}

/* The map of the objects in code space that hold instructions, from the function's current Code. */
static int container_map(const RemoteMemory *m, const V8Offsets *o, const CodeLayout *l, uint64_t code,
                         uint64_t *ret)
{
        uint64_t c = code;
        uint16_t type;
        int r;

        if (l->istream >= 0) {
                r = remote_memory_read(m, untag(o, code) + l->istream, &c, sizeof(c));
                if (r < 0)
                        return r;
        }
        r = v8_object_type(m, o, c, &type);
        if (r < 0)
                return r;
        if (type != l->container_type)
                return -EMEDIUMTYPE;
        return remote_memory_read(m, untag(o, c) + o->heap_object_map, ret, sizeof(*ret));
}

/* The Code holding pc: the function's current one, or the one whose instructions start below pc
 * (see the header). */
static int find_code(const RemoteMemory *m, const V8Offsets *o, const CodeLayout *l, uint64_t fn,
                     uint64_t pc, uint64_t *ret_code, uint32_t *ret_flags, uint64_t *ret_start,
                     uint64_t *ret_map)
{
        uint64_t code, map = 0, chunk[V8_CODE_SCAN_CHUNK / 8], hi, lo, a;
        unsigned probes = 0;
        bool holds;
        int r;

        if (l->fn_code >= 0) {
                r = remote_memory_read(m, untag(o, fn) + l->fn_code, &code, sizeof(code));
                if (r < 0)
                        return r;
                r = code_holds(m, o, l, code, pc, ret_flags, ret_start, &holds, ret_map);
                if (r < 0)
                        return r;
                if (holds) {
                        *ret_code = code;
                        return 0;
                }
                /* A builtin (the interpreter's trampoline of a function whose loop runs on-stack-
                 * replaced code) has no InstructionStream in 11.3 (embedded): the candidates are
                 * then found by their back pointer, as without the map. */
                r = container_map(m, o, l, code, &map);
                if (r < 0 && (l->back < 0 || (r != -EBADMSG && r != -EMEDIUMTYPE)))
                        return r;
                if (r < 0)
                        map = 0;
        }
        /* Instructions start V8_CODE_ALIGNMENT-aligned, l->header bytes after their object's map
         * word: candidates at or below pc, read a chunk at a time, highest first, bounded by
         * V8_CODE_SCAN_MAX. Without the map (13.6: no code read from the function), a candidate is
         * one whose back pointer leads to a Code pointing back at it (at most V8_CODE_PROBES_MAX
         * looked at). */
        if (pc < (uint64_t)l->header + V8_CODE_SCAN_MAX)
                return -ENOENT;
        a = (pc & ~(uint64_t)(V8_CODE_ALIGNMENT - 1)) - (uint64_t)l->header;
        for (hi = a + 16; hi > pc - V8_CODE_SCAN_MAX; hi = lo) {
                lo = (hi - 1) & ~(uint64_t)(V8_CODE_SCAN_CHUNK - 1);
                r = remote_memory_read(m, lo, chunk, (size_t)(hi - lo));
                if (r < 0)
                        return r == -EFAULT ? -ENOENT : r;
                for (; a >= lo; a -= V8_CODE_ALIGNMENT) {
                        if (map && chunk[(a - lo) / 8] != map)
                                continue;
                        code = a + (uint64_t)o->heap_object_tag;
                        if (!map) {
                                uint64_t back, istream;

                                if (l->back < 0 || a + (uint64_t)l->back + 8 > hi ||
                                    !untag(o, chunk[(a - lo) / 8]) ||
                                    !untag(o, back = chunk[(a + (uint64_t)l->back - lo) / 8]))
                                        continue;
                                if (++probes > V8_CODE_PROBES_MAX)
                                        return -ENOENT;
                                if (remote_memory_read(m, untag(o, back) + l->istream, &istream,
                                                       sizeof(istream)) < 0 ||
                                    istream != code)
                                        continue;
                                code = back;
                        } else if (l->back >= 0 &&
                                   (r = remote_memory_read(m, a + l->back, &code, sizeof(code))) < 0)
                                return r;
                        r = code_holds(m, o, l, code, pc, ret_flags, ret_start, &holds, ret_map);
                        if (r < 0)
                                return r;
                        if (!holds)
                                return -ENOENT; /* the code before pc ends below it */
                        *ret_code = code;
                        return 0;
                }
        }
        return -ENOENT;
}

static bool is_array_type(const V8Offsets *o, uint16_t t)
{
        const int32_t types[] = {o->type_fixed_array,
                                 o->type_weak_fixed_array,
                                 o->type_protected_fixed_array,
                                 o->type_trusted_fixed_array,
                                 o->type_trusted_weak_fixed_array,
                                 o->type_protected_weak_fixed_array};

        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
                if (types[i] != V8_OFFSET_NONE && t == (uint32_t)types[i])
                        return true;
        return false;
}

/* Element i of the array at arr: a FixedArray or one of its kin with the same layout (length, then
 * the elements: weak, protected, trusted; V8 13 keeps code's metadata in the latter). */
static int array_get(const RemoteMemory *m, const V8Offsets *o, uint64_t arr, int32_t i, uint64_t *ret)
{
        uint64_t len;
        uint16_t t;
        int r;

        r = v8_object_type(m, o, arr, &t);
        if (r < 0)
                return r;
        if (!is_array_type(o, t))
                return -EMEDIUMTYPE;
        r = remote_memory_read(m, untag(o, arr) + o->fixed_array_length, &len, sizeof(len));
        if (r < 0)
                return r;
        if (!v8_is_smi(o, len) || i < 0 || v8_smi_value(o, len) <= i)
                return -EMEDIUMTYPE;
        return remote_memory_read(m, untag(o, arr) + o->fixed_array_data + 8 * (uint64_t)i, ret,
                                  sizeof(*ret));
}

/* A weak reference's object: V8 marks weak words with bits 0b11. */
static uint64_t strong(uint64_t w)
{
        return (w & 3) == 3 ? w & ~(uint64_t)2 : w;
}

/* The bytes of the ByteArray at arr (at most max), malloc'ed. */
/* The bytes of a V8 array object at tagged address arr: its length a Smi at fixed_array_length
 * (ByteArray and BytecodeArray alike), its bytes from data_offset on; at most max, at least one
 * unless empty_ok. */
static int read_sized_bytes(const RemoteMemory *m, const V8Offsets *o, uint64_t arr, int64_t data_offset,
                            size_t max, bool empty_ok, uint8_t **ret, size_t *ret_n)
{
        uint64_t len_word;
        int64_t len;
        uint8_t *b;
        int r;

        r = remote_memory_read(m, untag(o, arr) + o->fixed_array_length, &len_word, sizeof(len_word));
        if (r < 0)
                return r;
        len = v8_smi_value(o, len_word);
        if (!v8_is_smi(o, len_word) || len < 0 || (len == 0 && !empty_ok))
                return -EMEDIUMTYPE;
        if ((size_t)len > max)
                return -E2BIG;
        b = malloc(len ? (size_t)len : 1);
        if (!b)
                return -ENOMEM;
        r = len ? remote_memory_read(m, untag(o, arr) + (uint64_t)data_offset, b, (size_t)len) : 0;
        if (r < 0) {
                free(b);
                return r;
        }
        *ret = b;
        *ret_n = (size_t)len;
        return 0;
}

static int read_byte_array(const RemoteMemory *m, const V8Offsets *o, uint64_t arr, size_t max,
                           uint8_t **ret, size_t *ret_n)
{
        uint16_t t;
        int r;

        r = v8_object_type(m, o, arr, &t);
        if (r < 0)
                return r;
        if (t != (uint32_t)o->type_byte_array &&
            (o->type_trusted_byte_array == V8_OFFSET_NONE || t != (uint32_t)o->type_trusted_byte_array))
                return -EMEDIUMTYPE;
        return read_sized_bytes(m, o, arr, o->fixed_array_length + 8, max, true, ret, ret_n);
}

static int32_t script_offset_of(int64_t pos)
{
        return (int32_t)((pos >> 1) & ((1LL << 30) - 1)) - 1;
}
static int32_t inlining_id_of(int64_t pos)
{
        return (int32_t)((pos >> 31) & 0xffff) - 1;
}

/* Walks the inlining ids from the position at the pc outwards (V8's SourcePosition::InliningStack):
 * each InliningPosition gives the inlined function (a literal's index) and the position of its call
 * in its caller. */
static int inlining_stack(const RemoteMemory *m, const V8Offsets *o, const CodeLayout *l, uint64_t deopt,
                          int64_t *pos, V8CodeFrame *ret)
{
        _cleanup_free_ uint8_t *inl = NULL;
        uint64_t literals, count_word, ip_arr;
        size_t n_inl = 0;
        int64_t count;
        int r;

        r = array_get(m, o, deopt, l->deopt_count, &count_word);
        if (r < 0)
                return r;
        count = v8_smi_value(o, count_word);
        if (!v8_is_smi(o, count_word) || count < 0)
                return -EMEDIUMTYPE;
        if ((r = array_get(m, o, deopt, l->deopt_literals, &literals)) < 0 ||
            (r = array_get(m, o, deopt, l->deopt_inlining, &ip_arr)) < 0)
                return r;
        r = read_byte_array(m, o, ip_arr, (size_t)V8_INLINING_IDS_MAX * V8_INLINING_POSITION_SIZE, &inl,
                            &n_inl);
        if (r < 0)
                return r;
        /* Bounded by V8_INLINE_DEPTH_MAX: each step goes to the caller of an inlined function. */
        while (inlining_id_of(*pos) >= 0) {
                int32_t id = inlining_id_of(*pos), fn_index;
                uint64_t shared;
                uint16_t t;

                if (ret->n >= V8_INLINE_DEPTH_MAX)
                        return -E2BIG;
                if ((size_t)id >= n_inl / V8_INLINING_POSITION_SIZE)
                        return -EMEDIUMTYPE;
                memcpy(&fn_index, inl + (size_t)id * V8_INLINING_POSITION_SIZE + 8, sizeof(fn_index));
                if (fn_index < 0 || fn_index >= count)
                        return -EMEDIUMTYPE;
                /* The literal array: a FixedArray (10.2 allocates it so), or a WeakFixedArray. */
                r = array_get(m, o, literals, fn_index, &shared);
                if (r < 0)
                        return r;
                shared = strong(shared);
                r = v8_object_type(m, o, shared, &t);
                if (r < 0)
                        return r;
                if (t != (uint32_t)o->type_shared_function_info)
                        return -EMEDIUMTYPE;
                ret->scopes[ret->n++] =
                        (V8CodeScope){.shared = shared, .script_offset = script_offset_of(*pos)};
                memcpy(pos, inl + (size_t)id * V8_INLINING_POSITION_SIZE, sizeof(*pos));
        }
        return 0;
}

/* The BytecodeArray a baseline Code was compiled from: its data word is the array, or the
 * InterpreterData holding it (a function whose bytecode is instrumented). */
static int baseline_bytecode_array(const RemoteMemory *m, const V8Offsets *o, uint64_t data, uint64_t *ret)
{
        uint64_t w[V8_INTERPRETER_DATA_WORDS];
        uint16_t t;
        int r;

        r = v8_object_type(m, o, data, &t);
        if (r < 0)
                return r;
        if (t == (uint32_t)o->type_bytecode_array) {
                *ret = data;
                return 0;
        }
        if (o->type_interpreter_data == V8_OFFSET_NONE || t != (uint32_t)o->type_interpreter_data)
                return -EMEDIUMTYPE;
        r = remote_memory_read(m, untag(o, data), w, sizeof(w));
        if (r < 0)
                return r;
        for (size_t i = 1; i < V8_INTERPRETER_DATA_WORDS; i++)
                if (untag(o, w[i]) && v8_object_type(m, o, w[i], &t) == 0 &&
                    t == (uint32_t)o->type_bytecode_array) {
                        *ret = w[i];
                        return 0;
                }
        return -EMEDIUMTYPE;
}

/* The bytecodes of the BytecodeArray bca (type checked by the caller), malloc'ed. */
static int read_bytecodes(const RemoteMemory *m, const V8Offsets *o, uint64_t bca, uint8_t **ret,
                          size_t *ret_n)
{
        return read_sized_bytes(m, o, bca, o->bytecode_array_data, V8_BASELINE_BYTES_MAX, false, ret, ret_n);
}

/* A baseline Code's frame at pc: the bytecode it runs (v8-baseline.h), in the BytecodeArray the
 * Code was compiled from, which must be the function's (shared). */
static int baseline_frame(const RemoteMemory *m, const V8Offsets *o, const CodeLayout *l, uint64_t code,
                          uint64_t start, uint64_t shared, uint64_t pc, bool return_address,
                          V8CodeFrame *ret)
{
        _cleanup_free_ uint8_t *table = NULL, *bytecodes = NULL;
        uint64_t data, offsets, bca;
        size_t n_table = 0, len = 0;
        int r;

        if (o->bytecodes.count == 0 || o->bytecode_array_data == V8_OFFSET_NONE ||
            o->type_bytecode_array == V8_OFFSET_NONE)
                return -EOPNOTSUPP;
        if ((r = remote_memory_read(m, untag(o, code) + l->deopt, &data, sizeof(data))) < 0 ||
            (r = remote_memory_read(m, untag(o, code) + l->positions, &offsets, sizeof(offsets))) < 0)
                return r;
        ret->deopt = data;
        if ((r = baseline_bytecode_array(m, o, data, &bca)) < 0 ||
            (r = v8_bytecode_belongs(m, o, shared, bca)) < 0)
                return r;
        if ((r = read_byte_array(m, o, offsets, V8_BASELINE_BYTES_MAX, &table, &n_table)) < 0 ||
            (r = read_bytecodes(m, o, bca, &bytecodes, &len)) < 0)
                return r;
        r = v8_baseline_bytecode_offset(&o->bytecodes, table, n_table, bytecodes, len,
                                        (uint32_t)(pc - start), return_address, &ret->bytecode_offset);
        if (r < 0)
                return r == -ERANGE ? -EBADMSG : r;
        ret->bytecode_array = bca;
        return 0;
}

int v8_code_frame(const RemoteMemory *m, const V8Offsets *o, uint64_t fn, uint64_t shared, uint64_t pc,
                  bool return_address, V8CodeFrame *ret)
{
        _cleanup_free_ uint8_t *positions = NULL;
        uint64_t code, start, deopt, table, own;
        size_t n_positions = 0;
        uint32_t flags, offset;
        CodeLayout l;
        int64_t pos;
        int r;

        *ret = (V8CodeFrame){.kind = V8_CODE_OTHER};
        if (!code_layout(o, &l))
                return -EOPNOTSUPP;
        if (!untag(o, fn))
                return -EBADMSG;
        r = find_code(m, o, &l, fn, pc, &code, &flags, &start, &ret->map);
        if (r < 0)
                return r;
        ret->code = code;
        ret->kind = kind_of(o, flags);
        /* Baseline code maps code offsets to bytecode offsets (a table of its own). */
        if (ret->kind == V8_CODE_BASELINE)
                return baseline_frame(m, o, &l, code, start, shared, pc, return_address, ret);
        if (ret->kind != V8_CODE_TURBOFAN && ret->kind != V8_CODE_MAGLEV)
                return -EOPNOTSUPP;
        if ((r = remote_memory_read(m, untag(o, code) + l.deopt, &deopt, sizeof(deopt))) < 0 ||
            (r = remote_memory_read(m, untag(o, code) + l.positions, &table, sizeof(table))) < 0)
                return r;
        ret->deopt = deopt;
        /* The Code must be the frame's function's: its DeoptimizationData says whose it is. */
        r = array_get(m, o, deopt, l.deopt_shared, &own);
        if (r < 0)
                return r;
        own = strong(own);
        if (o->type_sfi_wrapper != V8_OFFSET_NONE && own != shared) {
                /* V8 13: a SharedFunctionInfoWrapper (trusted space) holds it */
                uint16_t t;

                r = v8_object_type(m, o, own, &t);
                if (r < 0)
                        return r;
                if (t == (uint32_t)o->type_sfi_wrapper &&
                    (r = remote_memory_read(m, untag(o, own) + o->sfi_wrapper_shared, &own, sizeof(own))) <
                            0)
                        return r;
        }
        if (own != shared)
                return -EMEDIUMTYPE;
        r = read_byte_array(m, o, table, V8_POSITION_TABLE_MAX, &positions, &n_positions);
        if (r < 0)
                return r;
        offset = (uint32_t)(pc - start);
        /* A return address follows its call: the call's position is the last one before it. */
        if (return_address && offset > 0)
                offset--;
        r = v8_positions_at(positions, n_positions, offset, &pos);
        if (r < 0)
                return r;
        if (inlining_id_of(pos) >= 0) {
                r = inlining_stack(m, o, &l, deopt, &pos, ret);
                if (r < 0) {
                        ret->n = 0;
                        return r;
                }
        }
        /* the position in the frame's own function: where the inlining walk ended */
        ret->scopes[ret->n++] = (V8CodeScope){.shared = shared, .script_offset = script_offset_of(pos)};
        return 0;
}

int v8_code_still(const RemoteMemory *m, const V8Offsets *o, uint64_t code, uint64_t pc, uint64_t deopt,
                  uint64_t map)
{
        uint8_t h[V8_CODE_HEADER_MAX];
        uint64_t start, now_map, now;
        uint32_t flags;
        CodeLayout l;
        int r;

        if (!code_layout(o, &l))
                return -EOPNOTSUPP;
        if (!untag(o, code))
                return -ESTALE;
        /* One read: the map word must be the one whose type said Code when the entry was made
         * (maps are never freed while code refers to them), the range must still hold the pc,
         * and the deoptimization data (baseline code: its bytecode) be the same. */
        r = code_header(m, o, &l, code, h);
        if (r < 0)
                return r == -EFAULT ? -ESTALE : r;
        memcpy(&now_map, h, sizeof(now_map));
        memcpy(&now, h + l.deopt, sizeof(now));
        if (now_map != map || now != deopt || !header_holds(o, &l, code, h, pc, &flags, &start))
                return -ESTALE;
        return 0;
}
