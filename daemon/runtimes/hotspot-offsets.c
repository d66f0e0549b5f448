/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "runtimes/hotspot-offsets.h"

typedef enum WantKind {
        W_FIELD,      /* "Type::field": a member's offset */
        W_STATIC,     /* "Type::field": a static field's address, relative to the bias */
        W_SIZEOF,     /* "Type": its size */
        W_INT,        /* an int constant */
        W_FIELD_SIZE, /* "Type::field": the size of the member's type (its type string's) */
} WantKind;

/* Names under which one value is found, newest JDK's first: the first one the tables have wins. */
#define NAMES_MAX 3

typedef struct Want {
        WantKind kind;
        size_t member; /* offsetof in HotspotOffsets */
        uint8_t width; /* 4 (uint32_t / int32_t) or 8 (uint64_t) */
        bool required;
        const char *names[NAMES_MAX];
} Want;

#define O(m) offsetof(HotspotOffsets, m), sizeof(((HotspotOffsets *)0)->m)

/* The interpreter frame's slots are exported by x86's vmStructs only (vmStructs_x86.hpp); other
 * ports' are known (hotspot_offsets_from_vmstructs). */
#if defined(__x86_64__)
#define FRAME_SLOTS_EXPORTED true
#else
#define FRAME_SLOTS_EXPORTED false
#endif

/* Required: what interpreted frames and their names need. Optional: compiled frames (the walk
 * leaves them native when one is missing). */
static const Want wants[] = {
        {W_FIELD, O(method_const_method), true, {"Method::_constMethod"}},
        {W_FIELD, O(const_method_constants), true, {"ConstMethod::_constants"}},
        {W_FIELD, O(const_method_flags), true, {"ConstMethod::_flags._flags", "ConstMethod::_flags"}},
        {W_FIELD_SIZE,
         O(const_method_flags_size),
         true,
         {"ConstMethod::_flags._flags", "ConstMethod::_flags"}},
        {W_FIELD, O(const_method_code_size), true, {"ConstMethod::_code_size"}},
        {W_FIELD, O(const_method_name_index), true, {"ConstMethod::_name_index"}},
        {W_FIELD, O(const_method_signature_index), true, {"ConstMethod::_signature_index"}},
        {W_SIZEOF, O(const_method_sizeof), true, {"ConstMethod"}},
        {W_FIELD, O(const_method_method_idnum), true, {"ConstMethod::_method_idnum"}},
        {W_INT,
         O(const_method_has_linenumber_table),
         true,
         {"ConstMethodFlags::_misc_has_linenumber_table", "ConstMethod::_has_linenumber_table"}},
        {W_FIELD, O(constant_pool_pool_holder), true, {"ConstantPool::_pool_holder"}},
        {W_FIELD, O(constant_pool_source_file_name_index), false, {"ConstantPool::_source_file_name_index"}},
        {W_FIELD,
         O(instance_klass_source_file_name_index),
         false,
         {"InstanceKlass::_source_file_name_index"}},
        {W_SIZEOF, O(constant_pool_sizeof), true, {"ConstantPool"}},
        {W_FIELD, O(klass_name), true, {"Klass::_name"}},
        {W_FIELD, O(instance_klass_methods), true, {"InstanceKlass::_methods"}},
        {W_FIELD, O(array_length), true, {"Array<int>::_length", "Array<u1>::_length"}},
        {W_FIELD, O(array_methods_data), true, {"Array<Method*>::_data"}},
        {W_FIELD, O(symbol_length), true, {"Symbol::_length"}},
        {W_FIELD, O(symbol_body), true, {"Symbol::_body"}},
        {W_STATIC, O(interpreter_code), true, {"AbstractInterpreter::_code"}},
        {W_FIELD, O(stub_queue_stub_buffer), true, {"StubQueue::_stub_buffer"}},
        {W_FIELD, O(stub_queue_buffer_limit), true, {"StubQueue::_buffer_limit"}},
        {W_INT,
         O(frame_interpreter_sender_sp),
         FRAME_SLOTS_EXPORTED,
         {"frame::interpreter_frame_sender_sp_offset"}},
        {W_INT,
         O(frame_interpreter_last_sp),
         FRAME_SLOTS_EXPORTED,
         {"frame::interpreter_frame_last_sp_offset"}},

        {W_STATIC, O(code_cache_heaps), false, {"CodeCache::_heaps"}},
        {W_STATIC, O(code_cache_low_bound), false, {"CodeCache::_low_bound"}},
        {W_STATIC, O(code_cache_high_bound), false, {"CodeCache::_high_bound"}},
        {W_FIELD,
         O(growable_array_len),
         false,
         {"GrowableArrayBase::_len", "GenericGrowableArray::_len", "GrowableArray<int>::_len"}},
        {W_FIELD, O(growable_array_data), false, {"GrowableArray<int>::_data"}},
        {W_FIELD, O(code_heap_memory), false, {"CodeHeap::_memory"}},
        {W_FIELD, O(code_heap_segmap), false, {"CodeHeap::_segmap"}},
        {W_FIELD, O(code_heap_log2_segment_size), false, {"CodeHeap::_log2_segment_size"}},
        {W_FIELD, O(virtual_space_low), false, {"VirtualSpace::_low"}},
        {W_FIELD, O(virtual_space_high), false, {"VirtualSpace::_high"}},
        {W_SIZEOF, O(heap_block_sizeof), false, {"HeapBlock"}},
        {W_FIELD, O(code_blob_name), false, {"CodeBlob::_name"}},
        {W_FIELD, O(code_blob_size), false, {"CodeBlob::_size"}},
        {W_FIELD, O(code_blob_frame_size), false, {"CodeBlob::_frame_size"}},
        {W_FIELD, O(code_blob_frame_complete_offset), false, {"CodeBlob::_frame_complete_offset"}},
        {W_FIELD, O(code_blob_code_begin), false, {"CodeBlob::_code_begin"}},
        {W_FIELD, O(code_blob_code_end), false, {"CodeBlob::_code_end"}},
        {W_FIELD, O(code_blob_code_offset), false, {"CodeBlob::_code_offset"}},
        {W_FIELD_SIZE, O(code_blob_frame_complete_size), false, {"CodeBlob::_frame_complete_offset"}},
        {W_FIELD, O(compiled_method_method), false, {"nmethod::_method", "CompiledMethod::_method"}},
        {W_FIELD, O(method_code), false, {"Method::_code"}},
        {W_FIELD, O(virtual_space_high_boundary), false, {"VirtualSpace::_high_boundary"}},
        {W_FIELD, O(nmethod_compile_id), false, {"nmethod::_compile_id"}},
        {W_FIELD, O(nmethod_scopes_pcs_offset), false, {"nmethod::_scopes_pcs_offset"}},
        {W_FIELD, O(nmethod_dependencies_offset), false, {"nmethod::_dependencies_offset"}},
        {W_FIELD, O(nmethod_metadata_offset), false, {"nmethod::_metadata_offset"}},
        {W_FIELD,
         O(nmethod_scopes_data_begin),
         false,
         {"nmethod::_scopes_data_begin", "CompiledMethod::_scopes_data_begin"}},
        {W_FIELD, O(nmethod_immutable_data), false, {"nmethod::_immutable_data"}},
        {W_FIELD, O(nmethod_immutable_data_size), false, {"nmethod::_immutable_data_size"}},
        {W_FIELD, O(nmethod_scopes_data_offset), false, {"nmethod::_scopes_data_offset"}},
        {W_FIELD, O(code_blob_mutable_data), false, {"CodeBlob::_mutable_data"}},
        {W_FIELD, O(code_blob_relocation_size), false, {"CodeBlob::_relocation_size"}},
        {W_FIELD, O(code_blob_mutable_data_size), false, {"CodeBlob::_mutable_data_size"}},
        {W_FIELD, O(pc_desc_pc_offset), false, {"PcDesc::_pc_offset"}},
        {W_FIELD, O(pc_desc_scope_decode_offset), false, {"PcDesc::_scope_decode_offset"}},
        {W_SIZEOF, O(pc_desc_sizeof), false, {"PcDesc"}},
        {W_STATIC, O(vm_major_version), true, {"Abstract_VM_Version::_vm_major_version"}},
        {W_STATIC, O(perf_memory_start), false, {"PerfMemory::_start"}},
};

/* Struct members the walk reads lie within this of their object (an offset past it is not one). */
#define OFFSET_MAX 4096

/* "Type::field" -> the entry; the type is what comes before the first "::" that is followed by
 * the field's leading '_' (types such as "JavaThread::X" keep theirs). */
static const HotspotField *find_field(const HotspotVMStructs *vs, const char *name)
{
        const char *sep = strstr(name, "::_");
        char type[HOTSPOT_VMSTRUCTS_MAX_NAME + 1];
        size_t n;

        if (!sep)
                return NULL;
        n = (size_t)(sep - name);
        if (n > HOTSPOT_VMSTRUCTS_MAX_NAME)
                return NULL;
        memcpy(type, name, n);
        type[n] = 0;
        return hotspot_vmstructs_field(vs, type, sep + 2);
}

/* The size of a member's type, from its type string ("u2", "int", "u4", "jint"). */
static int type_string_size(const HotspotVMStructs *vs, const char *type_string, uint64_t *ret)
{
        const HotspotType *t = hotspot_vmstructs_type(vs, type_string);

        if (!t)
                return -ENOENT;
        *ret = t->size;
        return 0;
}

/* One value under any of its names: 0, -ENOENT (none), -EBADMSG (present, unusable). */
static int lookup(const HotspotVMStructs *vs, uint64_t bias, const Want *w, int64_t *ret)
{
        for (size_t i = 0; i < NAMES_MAX && w->names[i]; i++) {
                const char *name = w->names[i];
                const HotspotField *f;
                const HotspotType *t;
                const HotspotConstant *c;
                uint64_t size;

                switch (w->kind) {
                case W_FIELD:
                        f = find_field(vs, name);
                        if (!f)
                                continue;
                        if (f->is_static || f->offset >= OFFSET_MAX)
                                return -EBADMSG;
                        *ret = (int64_t)f->offset;
                        return 0;
                case W_FIELD_SIZE:
                        f = find_field(vs, name);
                        if (!f)
                                continue;
                        if (type_string_size(vs, f->type_string, &size) < 0 || (size != 2 && size != 4))
                                return -EBADMSG;
                        *ret = (int64_t)size;
                        return 0;
                case W_STATIC:
                        f = find_field(vs, name);
                        if (!f)
                                continue;
                        if (!f->is_static || f->address < bias)
                                return -EBADMSG;
                        *ret = (int64_t)(f->address - bias);
                        return 0;
                case W_SIZEOF:
                        t = hotspot_vmstructs_type(vs, name);
                        if (!t)
                                continue;
                        if (t->size == 0 || t->size >= OFFSET_MAX)
                                return -EBADMSG;
                        *ret = (int64_t)t->size;
                        return 0;
                case W_INT:
                        c = hotspot_vmstructs_int(vs, name);
                        if (!c)
                                continue;
                        *ret = c->value;
                        return 0;
                }
        }
        return -ENOENT;
}

int hotspot_offsets_read_version(HotspotOffsets *o, uint64_t bias, HotspotReadFn read_fn, void *userdata)
{
        int32_t v = 0;
        int r = read_fn(userdata, bias + o->vm_major_version, &v, sizeof(v));

        if (r < 0)
                return r;
        if (v < 6 || v > 1000)
                return -EBADMSG;
        o->jdk_major = (uint32_t)v;
        return 0;
}

int hotspot_offsets_from_vmstructs(const HotspotVMStructs *vs, uint64_t bias, HotspotOffsets *ret,
                                   const char **ret_missing)
{
        HotspotOffsets o;

        /* Everything NONE first: the optional ones stay so when absent. */
        memset(&o, 0xff, sizeof(o));
        o.jdk_major = 0;
#if !defined(__x86_64__)
        /* aarch64's vmStructs do not export the interpreter frame's slots (vmStructs_aarch64.hpp):
         * frame_aarch64.hpp's, the same in JDK 11 to 25. */
        o.frame_interpreter_sender_sp = -1;
        o.frame_interpreter_last_sp = -2;
#endif
        o.n_unusable = 0;
        for (size_t i = 0; i < ELEMENTSOF(wants); i++) {
                const Want *w = &wants[i];
                uint8_t *dst = (uint8_t *)&o + w->member;
                int64_t v;
                int r = lookup(vs, bias, w, &v);

                if (r == -ENOENT && !w->required)
                        continue;
                /* A value that makes no sense (a new JDK's layout): what needs it is off, not the
                 * whole JVM. */
                if (r == -EBADMSG && !w->required) {
                        if (ret_missing && o.n_unusable == 0)
                                *ret_missing = w->names[0];
                        o.n_unusable++;
                        continue;
                }
                if (r < 0) {
                        if (ret_missing)
                                *ret_missing = w->names[0];
                        return r == -ENOENT ? -EPROTONOSUPPORT : r;
                }
                if (w->width == 8) {
                        uint64_t u = (uint64_t)v;

                        memcpy(dst, &u, sizeof(u));
                } else {
                        uint32_t u = (uint32_t)v; /* int32_t members keep their sign */

                        memcpy(dst, &u, sizeof(u));
                }
        }
        /* The interpreter's slots sit below fp, sender_sp first (frame_x86.hpp, frame_aarch64.hpp). */
        if (o.frame_interpreter_sender_sp >= 0 ||
            o.frame_interpreter_last_sp != o.frame_interpreter_sender_sp - 1) {
                if (ret_missing)
                        *ret_missing = "frame::interpreter_frame_last_sp_offset";
                return -EBADMSG;
        }
        /* The slots below last_sp are not exported. x86-64 (src/hotspot/cpu/x86/frame_x86.hpp,
         * the same from JDK 9 to 25): last_sp, method, mirror, mdp, cache, locals, bcp,
         * initial_sp, each one word further down. aarch64 (src/hotspot/cpu/aarch64/frame_aarch64.hpp,
         * JDK 11 to 25): last_sp, method, mdp, a word kept for sp's 16-byte alignment (padding,
         * extended_sp from JDK 22), mirror, cache, locals, bcp, initial_sp. Another port adds its
         * layout here. */
#if defined(__x86_64__)
        o.frame_interpreter_method = o.frame_interpreter_last_sp - 1;
        o.frame_interpreter_bcp = o.frame_interpreter_last_sp - 6;
#elif defined(__aarch64__)
        o.frame_interpreter_method = o.frame_interpreter_last_sp - 1;
        o.frame_interpreter_bcp = o.frame_interpreter_last_sp - 7;
#else
        if (ret_missing)
                *ret_missing = "the interpreter frame layout of this architecture";
        return -EPROTONOSUPPORT;
#endif
        *ret = o;
        return 0;
}
