/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtimes/v8-code.h"
#include "runtimes/v8-lines.h"
#include "runtimes/v8-objects.h"
#include "util/macro.h"

/* Bytes read at once while looking for a Code header below a pc. */
#define V8_CODE_SCAN_CHUNK 4096
/* An inlining id beyond this is taken for a misread (TurboFan inlines a few dozen functions into
 * one Code at most). */
#define V8_INLINING_IDS_MAX 4096

/* V8 10.2's Code (src/objects/code.h), not in its metadata: relocation_info, deoptimization data,
 * source position table, each a tagged word after the map. 11.3 names both members. */
#define V8_10_CODE_DEOPT_DATA 16
#define V8_10_CODE_POSITIONS 24
/* V8 10.2's DeoptimizationData indices (11.3 and 13.6 name theirs in the metadata; 10.2's are the
 * same as 11.3's). */
#define V8_10_DEOPT_INLINED_COUNT 1
#define V8_10_DEOPT_LITERALS 2
#define V8_10_DEOPT_SHARED 6
#define V8_10_DEOPT_INLINING_POSITIONS 7
/* An InliningPosition (src/objects/code.h): its SourcePosition (8 bytes), the inlined function's
 * index among the DeoptimizationData's literals (int), padding. */
#define V8_INLINING_POSITION_SIZE 16

static uint64_t untag(const V8Offsets *o, uint64_t obj)
{
        if (!v8_is_heap_object(o, obj) || obj < 4096)
                return 0;
        return obj - (uint64_t)o->heap_object_tag;
}

static int32_t code_deopt_data(const V8Offsets *o)
{
        return o->code_deopt_data != V8_OFFSET_NONE ? o->code_deopt_data : V8_10_CODE_DEOPT_DATA;
}
static int32_t code_positions(const V8Offsets *o)
{
        return o->code_positions != V8_OFFSET_NONE ? o->code_positions : V8_10_CODE_POSITIONS;
}
static int32_t deopt_index(int32_t v, int32_t v10)
{
        return v != V8_OFFSET_NONE ? v : v10;
}

bool v8_code_supported(const V8Offsets *o)
{
        /* V8 10.2: Code objects hold their instructions (JSFunction::code is a Code). 11.3 and later
         * split them off (InstructionStream), 13.6 reaches a function's code through its dispatch
         * handle: not read yet. */
        return o->js_function_code != V8_OFFSET_NONE && o->code_instruction_start != V8_OFFSET_NONE &&
               o->code_instruction_start > 0 && o->code_instruction_start <= 256 &&
               o->code_instruction_size != V8_OFFSET_NONE && o->code_flags != V8_OFFSET_NONE &&
               o->code_kind_mask != V8_OFFSET_NONE && o->code_kind_shift != V8_OFFSET_NONE &&
               o->code_kind_baseline != V8_OFFSET_NONE && o->type_code != V8_OFFSET_NONE &&
               o->type_fixed_array != V8_OFFSET_NONE && o->type_byte_array != V8_OFFSET_NONE &&
               o->fixed_array_data != V8_OFFSET_NONE && o->fixed_array_length != V8_OFFSET_NONE &&
               o->heap_object_map == 0 && o->code_instruction_size + 4 <= o->code_instruction_start &&
               o->code_flags + 4 <= o->code_instruction_start;
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

/* The header of the Code at base (untagged): whether its instructions hold pc, and its flags. */
static int code_holds(const RemoteMemory *m, const V8Offsets *o, uint64_t base, uint64_t pc,
                      uint32_t *ret_flags, bool *ret_holds)
{
        uint8_t h[256];
        int32_t size;
        uint64_t start = base + (uint64_t)o->code_instruction_start;
        int r;

        r = remote_memory_read(m, base, h, (size_t)o->code_instruction_start);
        if (r < 0)
                return r;
        memcpy(&size, h + o->code_instruction_size, sizeof(size));
        memcpy(ret_flags, h + o->code_flags, sizeof(*ret_flags));
        *ret_holds = size > 0 && pc >= start && pc - start < (uint64_t)size;
        return 0;
}

/* The Code holding pc: the function's current one, or the Code header below pc (see the header). */
static int find_code(const RemoteMemory *m, const V8Offsets *o, uint64_t fn, uint64_t pc, uint64_t *ret_base,
                     uint32_t *ret_flags)
{
        uint64_t code, code_map, chunk[V8_CODE_SCAN_CHUNK / 8], hi, lo;
        uint16_t type;
        bool holds;
        int r;

        r = remote_memory_read(m, untag(o, fn) + o->js_function_code, &code, sizeof(code));
        if (r < 0)
                return r;
        r = v8_object_type(m, o, code, &type);
        if (r < 0)
                return r;
        if (type != (uint32_t)o->type_code)
                return -EMEDIUMTYPE;
        r = code_holds(m, o, untag(o, code), pc, ret_flags, &holds);
        if (r < 0)
                return r;
        if (holds) {
                *ret_base = untag(o, code);
                return 0;
        }
        r = remote_memory_read(m, untag(o, code) + o->heap_object_map, &code_map, sizeof(code_map));
        if (r < 0)
                return r;
        /* Candidates: V8_CODE_ALIGNMENT-aligned addresses at least a header below pc, read a chunk at
         * a time, highest first. Bounded by V8_CODE_SCAN_MAX. */
        if (pc < (uint64_t)o->code_instruction_start + V8_CODE_SCAN_MAX)
                return -ENOENT;
        hi = ((pc - (uint64_t)o->code_instruction_start) & ~(uint64_t)(V8_CODE_ALIGNMENT - 1)) + 8;
        for (lo = hi; hi > pc - V8_CODE_SCAN_MAX; hi = lo) {
                lo = (hi - 1) & ~(uint64_t)(V8_CODE_SCAN_CHUNK - 1);
                r = remote_memory_read(m, lo, chunk, (size_t)(hi - lo));
                if (r < 0)
                        return r == -EFAULT ? -ENOENT : r;
                for (uint64_t a = (hi - 8) & ~(uint64_t)(V8_CODE_ALIGNMENT - 1);; a -= V8_CODE_ALIGNMENT) {
                        if (chunk[(a - lo) / 8] == code_map) {
                                r = code_holds(m, o, a, pc, ret_flags, &holds);
                                if (r < 0)
                                        return r;
                                if (!holds)
                                        return -ENOENT; /* the Code before pc ends below it */
                                *ret_base = a;
                                return 0;
                        }
                        if (a < lo + V8_CODE_ALIGNMENT)
                                break;
                }
        }
        return -ENOENT;
}

/* Element i of the FixedArray (or WeakFixedArray) at arr, whose type is type. */
static int array_get(const RemoteMemory *m, const V8Offsets *o, uint64_t arr, int32_t type, int32_t i,
                     uint64_t *ret)
{
        uint64_t len;
        uint16_t t;
        int r;

        r = v8_object_type(m, o, arr, &t);
        if (r < 0)
                return r;
        if (type == V8_OFFSET_NONE || t != (uint32_t)type)
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
static int read_byte_array(const RemoteMemory *m, const V8Offsets *o, uint64_t arr, size_t max,
                           uint8_t **ret, size_t *ret_n)
{
        uint64_t len_word;
        uint16_t t;
        int64_t len;
        uint8_t *b;
        int r;

        r = v8_object_type(m, o, arr, &t);
        if (r < 0)
                return r;
        if (t != (uint32_t)o->type_byte_array)
                return -EMEDIUMTYPE;
        r = remote_memory_read(m, untag(o, arr) + o->fixed_array_length, &len_word, sizeof(len_word));
        if (r < 0)
                return r;
        len = v8_smi_value(o, len_word);
        if (!v8_is_smi(o, len_word) || len < 0)
                return -EMEDIUMTYPE;
        if ((size_t)len > max)
                return -E2BIG;
        b = malloc(len ? (size_t)len : 1);
        if (!b)
                return -ENOMEM;
        r = len ? remote_memory_read(m, untag(o, arr) + o->fixed_array_length + 8, b, (size_t)len) : 0;
        if (r < 0) {
                free(b);
                return r;
        }
        *ret = b;
        *ret_n = (size_t)len;
        return 0;
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
static int inlining_stack(const RemoteMemory *m, const V8Offsets *o, uint64_t deopt, int64_t *pos,
                          V8CodeFrame *ret)
{
        _cleanup_free_ uint8_t *inl = NULL;
        uint64_t literals, count_word, ip_arr;
        size_t n_inl = 0;
        int64_t count;
        int r;

        r = array_get(m, o, deopt, o->type_fixed_array,
                      deopt_index(o->deopt_inlined_count, V8_10_DEOPT_INLINED_COUNT), &count_word);
        if (r < 0)
                return r;
        count = v8_smi_value(o, count_word);
        if (!v8_is_smi(o, count_word) || count < 0)
                return -EMEDIUMTYPE;
        if ((r = array_get(m, o, deopt, o->type_fixed_array,
                           deopt_index(o->deopt_literals, V8_10_DEOPT_LITERALS), &literals)) < 0 ||
            (r = array_get(m, o, deopt, o->type_fixed_array,
                           deopt_index(o->deopt_inlining_positions, V8_10_DEOPT_INLINING_POSITIONS),
                           &ip_arr)) < 0)
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
                r = array_get(m, o, literals, o->type_fixed_array, fn_index, &shared);
                if (r == -EMEDIUMTYPE && o->type_weak_fixed_array != V8_OFFSET_NONE)
                        r = array_get(m, o, literals, o->type_weak_fixed_array, fn_index, &shared);
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

int v8_code_frame(const RemoteMemory *m, const V8Offsets *o, uint64_t fn, uint64_t shared, uint64_t pc,
                  bool return_address, V8CodeFrame *ret)
{
        _cleanup_free_ uint8_t *positions = NULL;
        uint64_t base, deopt, table, own;
        size_t n_positions = 0;
        uint32_t flags, offset;
        int64_t pos;
        int r;

        *ret = (V8CodeFrame){.kind = V8_CODE_OTHER};
        if (!v8_code_supported(o))
                return -EOPNOTSUPP;
        r = find_code(m, o, fn, pc, &base, &flags);
        if (r < 0)
                return r;
        ret->code = base + (uint64_t)o->heap_object_tag;
        ret->kind = kind_of(o, flags);
        /* Baseline code maps code offsets to bytecode offsets (a table of its own): not read yet. */
        if (ret->kind != V8_CODE_TURBOFAN && ret->kind != V8_CODE_MAGLEV)
                return -EOPNOTSUPP;
        if ((r = remote_memory_read(m, base + code_deopt_data(o), &deopt, sizeof(deopt))) < 0 ||
            (r = remote_memory_read(m, base + code_positions(o), &table, sizeof(table))) < 0)
                return r;
        /* The Code must be the frame's function's: its DeoptimizationData says whose it is. */
        r = array_get(m, o, deopt, o->type_fixed_array, deopt_index(o->deopt_shared, V8_10_DEOPT_SHARED),
                      &own);
        if (r < 0)
                return r;
        if (strong(own) != shared)
                return -EMEDIUMTYPE;
        r = read_byte_array(m, o, table, V8_POSITION_TABLE_MAX, &positions, &n_positions);
        if (r < 0)
                return r;
        offset = (uint32_t)(pc - (base + (uint64_t)o->code_instruction_start));
        /* A return address follows its call: the call's position is the last one before it. */
        if (return_address && offset > 0)
                offset--;
        r = v8_positions_at(positions, n_positions, offset, &pos);
        if (r < 0)
                return r;
        if (inlining_id_of(pos) >= 0) {
                r = inlining_stack(m, o, deopt, &pos, ret);
                if (r < 0) {
                        ret->n = 0;
                        return r;
                }
        }
        /* the position in the frame's own function: where the inlining walk ended */
        ret->scopes[ret->n++] = (V8CodeScope){.shared = shared, .script_offset = script_offset_of(pos)};
        return 0;
}
