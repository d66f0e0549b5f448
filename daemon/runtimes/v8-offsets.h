/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What walking and naming V8's JavaScript frames needs, read from V8's post-mortem metadata: the
 * v8dbg_* data symbols V8 builds export (gen-postmortem-metadata.py; Node.js keeps them in the
 * node executable or libnode.so, in .dynsym, so a stripped file has them too). Each is an int
 * whose value is a constant of that V8 build: frame slot offsets from the frame pointer, object
 * member offsets, instance type numbers, tag bits. Data only: no code walks frames here.
 *
 * A build without them (or without a member listed as required below) is not described: its
 * processes stay native and are counted (docs/runtimes.md, "Node.js"). */

/* Every value, as (member, v8dbg symbol without its prefix, required). A member not required is
 * V8_OFFSET_NONE when the build lacks it. */
#define V8_OFFSET_FIELDS(X)                                                                                 \
        /* Frame slots, bytes from the frame pointer (negative: below it) */                                \
        X(fp_function, "off_fp_function", true)              /* JSFunction of a JavaScript frame */         \
        X(fp_context, "off_fp_context", true)                /* Context, or the marker of a typed frame */  \
        X(fp_bytecode_array, "off_fp_bytecode_array", false) /* interpreted/baseline frames */              \
        X(fp_bytecode_offset, "off_fp_bytecode_offset", false) /* Smi */                                    \
        /* Tagging */                                                                                       \
        X(heap_object_tag, "HeapObjectTag", true)                                                           \
        X(heap_object_tag_mask, "HeapObjectTagMask", true)                                                  \
        X(smi_tag, "SmiTag", true)                                                                          \
        X(smi_tag_mask, "SmiTagMask", true)                                                                 \
        X(smi_shift_size, "SmiShiftSize", true) /* Smi value at bit smi_shift_size + 1 */                   \
        X(tagged_size, "TaggedSize", false)     /* 4: pointer compression (not described) */                \
        X(pointer_size, "SystemPointerSize", false)                                                         \
        /* Strings: instance type bits */                                                                   \
        X(first_nonstring_type, "FirstNonstringType", true)                                                 \
        X(string_encoding_mask, "StringEncodingMask", true)                                                 \
        X(one_byte_string_tag, "OneByteStringTag", true)                                                    \
        X(two_byte_string_tag, "TwoByteStringTag", true)                                                    \
        X(string_representation_mask, "StringRepresentationMask", true)                                     \
        X(seq_string_tag, "SeqStringTag", true)                                                             \
        X(cons_string_tag, "ConsStringTag", true)                                                           \
        X(thin_string_tag, "ThinStringTag", false)                                                          \
        X(external_string_tag, "ExternalStringTag", false) /* Node.js's own modules' sources */             \
        /* Instance types */                                                                                \
        X(type_js_function, "type_JSFunction__JS_FUNCTION_TYPE", true)                                      \
        X(type_shared_function_info, "type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE", true)            \
        X(type_script, "type_Script__SCRIPT_TYPE", true)                                                    \
        X(type_scope_info, "type_ScopeInfo__SCOPE_INFO_TYPE", false)                                        \
        X(type_bytecode_array, "type_BytecodeArray__BYTECODE_ARRAY_TYPE", false)                            \
        X(type_byte_array, "type_ByteArray__BYTE_ARRAY_TYPE", false)                                        \
        X(type_trusted_byte_array, "type_TrustedByteArray__TRUSTED_BYTE_ARRAY_TYPE", false) /* V8 12+ */    \
        X(type_fixed_array, "type_FixedArray__FIXED_ARRAY_TYPE", false)                                     \
        X(type_weak_fixed_array, "type_WeakFixedArray__WEAK_FIXED_ARRAY_TYPE", false)                       \
        X(type_interpreter_data, "type_InterpreterData__INTERPRETER_DATA_TYPE", false)                      \
        X(type_code, "type_Code__CODE_TYPE", false)                                                         \
        /* Object members, bytes from the object's (untagged) start */                                      \
        X(heap_object_map, "class_HeapObject__map__Map", true)                                              \
        X(map_instance_type, "class_Map__instance_type__uint16_t", true)                                    \
        X(js_function_shared, "class_JSFunction__shared__SharedFunctionInfo", true)                         \
        X(sfi_name_or_scope_info, "class_SharedFunctionInfo__name_or_scope_info__Object", true)             \
        X(sfi_script_or_debug_info, "class_SharedFunctionInfo__script_or_debug_info__HeapObject", false)    \
        X(sfi_function_data, "class_SharedFunctionInfo__function_data__Object", false)                      \
        X(script_name, "class_Script__name__Object", true)                                                  \
        X(script_line_ends, "class_Script__line_ends__Object", false) /* FixedArray of Smis, or not yet */  \
        X(script_source, "class_Script__source__Object", false)                                             \
        X(fixed_array_length, "class_FixedArrayBase__length__SMI", false)                                   \
        X(fixed_array_data, "class_FixedArray__data__uintptr_t", false)                                     \
        X(bytecode_array_data, "class_BytecodeArray__data__uintptr_t", false) /* its header's size */       \
        X(bytecode_array_wrapper, "class_BytecodeArray__wrapper__Tagged_BytecodeWrapper_", false) /* 13 */  \
        X(string_length, "class_String__length__int32_t", true)                                             \
        X(seq_one_byte_chars, "class_SeqOneByteString__chars__char", true)                                  \
        X(seq_two_byte_chars, "class_SeqTwoByteString__chars__char", true)                                  \
        X(cons_first, "class_ConsString__first__String", false)                                             \
        X(cons_second, "class_ConsString__second__String", false)                                           \
        X(thin_actual, "class_ThinString__actual__String", false)                                           \
        X(external_resource, "class_ExternalString__resource__Object",                                      \
          false) /* the data pointer follows */                                                             \
        /* Code (optimized and baseline code: the pc of a frame -> its source positions) */                 \
        X(js_function_code, "class_JSFunction__code__CodeT", false) /* 10.2 */                              \
        X(code_instruction_start, "class_Code__instruction_start__uintptr_t",                               \
          false) /* 10.2: header size */                                                                    \
        X(code_instruction_size, "class_Code__instruction_size__int", false)                                \
        X(code_flags, "class_Code__flags__uint32_t", false)                                                 \
        X(code_deopt_data, "class_Code__deoptimization_data__FixedArray", false) /* 11.3 */                 \
        X(code_positions, "class_Code__source_position_table__ByteArray", false) /* 11.3 */                 \
        X(istream_instruction_start, "class_InstructionStream__instruction_start__uintptr_t",               \
          false) /* 11.3 */                                                                                 \
        X(type_instruction_stream, "type_InstructionStream__INSTRUCTION_STREAM_TYPE", false)                \
        X(code_instruction_start_ptr, "class_Code__instruction_start__Address", false)      /* 13.6 */      \
        X(code_istream, "class_Code__instruction_stream__Tagged_InstructionStream_", false) /* 13.6 */      \
        X(deopt_wrapped_shared, "DeoptimizationDataWrappedSharedFunctionInfoIndex", false)  /* 13.6 */      \
        X(type_sfi_wrapper, "type_SharedFunctionInfoWrapper__SHARED_FUNCTION_INFO_WRAPPER_TYPE", false)     \
        X(sfi_wrapper_shared, "class_SharedFunctionInfoWrapper__shared_info__Tagged_SharedFunctionInfo_",   \
          false)                                                                                            \
        X(type_protected_fixed_array, "type_ProtectedFixedArray__PROTECTED_FIXED_ARRAY_TYPE", false)        \
        X(type_trusted_fixed_array, "type_TrustedFixedArray__TRUSTED_FIXED_ARRAY_TYPE", false)              \
        X(type_trusted_weak_fixed_array, "type_TrustedWeakFixedArray__TRUSTED_WEAK_FIXED_ARRAY_TYPE",       \
          false)                                                                                            \
        X(type_protected_weak_fixed_array, "type_ProtectedWeakFixedArray__PROTECTED_WEAK_FIXED_ARRAY_TYPE", \
          false)                                                                                            \
        X(code_kind_mask, "CodeKindFieldMask", false)                                                       \
        X(code_kind_shift, "CodeKindFieldShift", false)                                                     \
        X(code_kind_baseline, "CodeKindBaseline", false)                                                    \
        X(deopt_inlined_count, "DeoptimizationDataInlinedFunctionCountIndex", false) /* 11.3+ */            \
        X(deopt_literals, "DeoptimizationDataLiteralArrayIndex", false)                                     \
        X(deopt_shared, "DeoptimizationDataSharedFunctionInfoIndex", false)                                 \
        X(deopt_inlining_positions, "DeoptimizationDataInliningPositionsIndex", false)                      \
        /* ScopeInfo: tagged slots after its map; context_local_count, then the locals from first_vars */   \
        X(scope_info_ncontextlocals, "scopeinfo_idx_ncontextlocals", false)                                 \
        X(scope_info_first_vars, "scopeinfo_idx_first_vars", false)                                         \
        /* Frame types: the Smi a typed frame keeps in its context slot */                                  \
        X(frame_entry, "frametype_EntryFrame", true)                                                        \
        X(frame_construct_entry, "frametype_ConstructEntryFrame", false)                                    \
        X(frame_exit, "frametype_ExitFrame", true)                                                          \
        X(frame_builtin_exit, "frametype_BuiltinExitFrame", false)                                          \
        X(frame_interpreted, "frametype_InterpretedFrame", false)                                           \
        X(frame_baseline, "frametype_BaselineFrame", false)                                                 \
        X(frame_optimized, "frametype_OptimizedFrame", false) /* TurbofanFrame in later versions */         \
        X(frame_stub, "frametype_StubFrame", false)                                                         \
        X(frame_internal, "frametype_InternalFrame", false)                                                 \
        X(frame_construct, "frametype_ConstructFrame", false)                                               \
        X(frame_builtin, "frametype_BuiltinFrame", false)

#define V8_OFFSET_NONE INT32_MIN

/* V8's bytecode lengths (Bytecodes::kBytecodeSizes, src/interpreter/bytecodes.h): for each operand
 * scale (single, double, quadruple: after a Wide or ExtraWide prefix), each bytecode's length in
 * bytes, its own byte included, its prefix not. Not metadata: read from the table itself
 * (v8-baseline.h), for baseline frames' bytecode offsets. */
#define V8_BYTECODES_MAX 256
typedef struct V8BytecodeSizes {
        uint16_t count; /* bytecodes; 0: not known */
        uint8_t size[3][V8_BYTECODES_MAX];
} V8BytecodeSizes;

typedef struct V8Offsets {
#define V8_OFFSET_MEMBER(name, sym, required) int32_t name;
        V8_OFFSET_FIELDS(V8_OFFSET_MEMBER)
#undef V8_OFFSET_MEMBER
        V8BytecodeSizes bytecodes;
} V8Offsets;

/* What a V8 build's file holds: its metadata and where it is. */
typedef struct V8Elf {
        V8Offsets offsets;
        unsigned n_symbols; /* v8dbg_* symbols seen */
        /* ELF address of v8::internal::Isolate::embedded_blob_code_size() (a Node.js/V8 marker
         * even when the metadata is absent); 0: not seen */
        uint64_t isolate_marker;
        uint64_t bytecode_sizes_addr; /* ELF address of kBytecodeSizes (0: not exported) */
        uint64_t bytecode_sizes_size;
        enum {
                V8_BYTECODE_SIZES_NONE,
                V8_BYTECODE_SIZES_SYMBOL_TABLE, /* from the exported symbol */
                V8_BYTECODE_SIZES_RODATA,       /* found by its shape in .rodata */
        } bytecode_sizes_from;
} V8Elf;

/* Reads the v8dbg_* symbols of an ELF file (fd; path for messages only). -ENOENT: not a V8 build
 * (no v8dbg_ symbol and no V8 marker); -EPROTONOSUPPORT: V8, but a required value is missing or
 * the layout is one profd does not describe (pointer compression, 32-bit); -EBADMSG: not ELF or a
 * value out of range. ret is filled in every case but -EBADMSG (tests look at what was found). */
int v8_elf_probe(int fd, const char *path, V8Elf *ret);

/* kBytecodeSizes found by its shape in the .rodata of the ELF file fd alone, its symbol ignored
 * (tests: the search finds what the symbol says). -ENOENT: none; -ENOTUNIQ: several. */
int v8_elf_bytecode_sizes_in_rodata(int fd, V8BytecodeSizes *ret);

/* Name and value of the i-th field in V8_OFFSET_FIELDS order; NULL past the last one. */
const char *v8_offsets_field(const V8Offsets *o, size_t i, int32_t *ret_value, bool *ret_required);

/* The Smi value of a tagged word, per the build's tagging. */
static inline int64_t v8_smi_value(const V8Offsets *o, uint64_t word)
{
        return (int64_t)word >> (o->smi_shift_size + 1);
}
static inline bool v8_is_smi(const V8Offsets *o, uint64_t word)
{
        return (word & (uint64_t)o->smi_tag_mask) == (uint64_t)o->smi_tag;
}
static inline bool v8_is_heap_object(const V8Offsets *o, uint64_t word)
{
        return (word & (uint64_t)o->heap_object_tag_mask) == (uint64_t)o->heap_object_tag;
}
