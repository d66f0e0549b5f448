/* SPDX-License-Identifier: GPL-2.0-only */
/* What the HotSpot walker and namer need to know of one libjvm build, taken from its own
 * vmStructs tables (hotspot-vmstructs.h): member offsets, type sizes, flag values, and where its
 * static fields are (relative to libjvm's load bias: the same for every process mapping the file).
 * Members have the name of the HotSpot field they hold; a field a JDK renamed is looked up under
 * each of its names (hotspot-offsets.c). A build whose tables lack a required one is not walked
 * (HOTSPOT_OFFSETS_MISSING), never guessed. */
#pragma once

#include <stdint.h>

#include "runtimes/hotspot-vmstructs.h"

#define HOTSPOT_OFFSET_NONE UINT32_MAX

typedef struct HotspotOffsets {
        /* Method -> ConstMethod -> ConstantPool -> InstanceKlass -> Symbol */
        uint32_t method_const_method;
        uint32_t const_method_constants;
        uint32_t const_method_flags;
        uint32_t const_method_flags_size; /* 2 (JDK <= 20: u2) or 4 (ConstMethodFlags) */
        uint32_t const_method_code_size;
        uint32_t const_method_name_index;
        uint32_t const_method_signature_index;
        uint32_t const_method_sizeof;               /* the bytecodes start right after the ConstMethod */
        uint32_t const_method_method_idnum;         /* the method's index in its class's _methods */
        uint32_t const_method_has_linenumber_table; /* the flag's bit */
        uint32_t constant_pool_pool_holder;
        uint32_t constant_pool_source_file_name_index;  /* NONE: in InstanceKlass (JDK <= 10) */
        uint32_t instance_klass_source_file_name_index; /* JDK <= 11: the class holds it */
        uint32_t constant_pool_sizeof;                  /* the pool's slots start right after it */
        uint32_t klass_name;
        uint32_t instance_klass_methods; /* Array<Method*>* */
        uint32_t array_length;           /* Array<T>::_length (int) */
        uint32_t array_methods_data;     /* Array<Method*>::_data */
        uint32_t symbol_length;
        uint32_t symbol_body;

        /* The interpreter's code: AbstractInterpreter::_code, a StubQueue. */
        uint64_t interpreter_code; /* static, address - bias */
        uint32_t stub_queue_stub_buffer;
        uint32_t stub_queue_buffer_limit;

        /* Interpreter frame slots, in words from fp (frame_<arch>.hpp: exported are
         * sender_sp and last_sp; the method and bcp follow them in a layout fixed since JDK 9). */
        int32_t frame_interpreter_sender_sp;
        int32_t frame_interpreter_last_sp;
        /* Derived from last_sp by the architecture's layout (hotspot-offsets.c): the Method* and
         * the bytecode pointer of the running method. */
        int32_t frame_interpreter_method;
        int32_t frame_interpreter_bcp;

        /* The code cache, for compiled frames: CodeCache::_heaps (GrowableArray<CodeHeap*>*) and
         * its bounds; each CodeHeap's reserved memory and segment map (VirtualSpace). */
        uint64_t code_cache_heaps;     /* static, address - bias */
        uint64_t code_cache_low_bound; /* static, address - bias */
        uint64_t code_cache_high_bound;
        uint32_t growable_array_len;
        uint32_t growable_array_data;
        uint32_t code_heap_memory;
        uint32_t code_heap_segmap;
        uint32_t code_heap_log2_segment_size;
        uint32_t virtual_space_low;
        uint32_t virtual_space_high;
        uint32_t heap_block_sizeof;
        uint32_t code_blob_name;
        uint32_t code_blob_size;
        uint32_t code_blob_frame_size;
        uint32_t code_blob_frame_complete_offset;
        uint32_t code_blob_code_begin; /* address (JDK <= 22) */
        uint32_t code_blob_code_end;
        uint32_t code_blob_code_offset;         /* int from the blob (JDK 23+) */
        uint32_t code_blob_frame_complete_size; /* 4 (int) or 2 (int16_t, JDK 23+) */
        uint32_t compiled_method_method;        /* nmethod's Method* */
        uint32_t method_code;                   /* Method::_code: its current nmethod */
        uint32_t virtual_space_high_boundary;   /* reserved end (the committed end grows) */

        /* Compiled frames' inlined methods (hotspot-scopes.h): an nmethod's PcDescs and scope
         * descriptors. Up to JDK 22 both follow its header (offsets from the nmethod) and
         * CompiledMethod::_scopes_data_begin points at the scopes; from JDK 23 they are in its
         * immutable data (offsets from _immutable_data), and from JDK 24 its Metadata* table is
         * in its mutable data, after the relocations. NONE where the JDK has no such field. */
        uint32_t nmethod_compile_id;
        uint32_t nmethod_scopes_pcs_offset;
        uint32_t nmethod_dependencies_offset; /* the PcDescs' end (JDK <= 22) */
        uint32_t nmethod_metadata_offset;     /* JDK <= 23 */
        uint32_t nmethod_scopes_data_begin;   /* address (JDK <= 22) */
        uint32_t nmethod_immutable_data;      /* address (JDK 23+) */
        uint32_t nmethod_immutable_data_size; /* int */
        uint32_t nmethod_scopes_data_offset;  /* from _immutable_data: the PcDescs' end too */
        uint32_t code_blob_mutable_data;      /* address (JDK 24+) */
        uint32_t code_blob_relocation_size;   /* the metadata follow the relocations */
        uint32_t code_blob_mutable_data_size;
        uint32_t pc_desc_pc_offset;           /* int, from the code begin */
        uint32_t pc_desc_scope_decode_offset; /* int, into the scopes; 0: none */
        uint32_t pc_desc_sizeof;

        /* Abstract_VM_Version::_vm_major_version (static, address - bias): the JDK's feature
         * version, which the encoding of line number tables depends on. */
        uint64_t vm_major_version;
        /* PerfMemory::_start (static, address - bias; UINT64_MAX: absent): the JVM's perf data
         * (hotspot-perfdata.h), NULL in a JVM run with -XX:-UsePerfData. */
        uint64_t perf_memory_start;
        /* Read from the process by the caller (hotspot_offsets_read_version()); 0: unknown. */
        uint32_t jdk_major;
        /* Optional entries present with a value the walk cannot use: left NONE, as if absent (the
         * compiled frames they serve are then not walked), and counted here. */
        uint32_t n_unusable;
} HotspotOffsets;

/* Reads the JDK's feature version into o->jdk_major from the process, through read_fn. */
int hotspot_offsets_read_version(HotspotOffsets *o, uint64_t bias, HotspotReadFn read_fn, void *userdata);

/* The offsets of the libjvm loaded at bias, from its tables. -EPROTONOSUPPORT when a required
 * entry is missing, -EBADMSG when one has a value the walk cannot use (*ret_missing: its name,
 * for the log and the tests). An optional entry with such a value is left NONE and counted
 * (ret->n_unusable; *ret_missing: the first one's name). */
int hotspot_offsets_from_vmstructs(const HotspotVMStructs *vs, uint64_t bias, HotspotOffsets *ret,
                                   const char **ret_missing);
