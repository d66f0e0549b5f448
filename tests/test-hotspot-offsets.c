/* SPDX-License-Identifier: GPL-2.0-only */
/* hotspot_offsets_from_vmstructs() on tables as OpenJDK 17 (Debian 12, x86-64) exports them: all
 * usable; an optional entry present with a value the walk cannot use (an offset past 4 KiB, a
 * static where a member was expected, a size past 4 KiB) is left out and counted, the JVM still
 * walked; a required one so broken, or missing, refuses the JVM. */
#include <errno.h>
#include <string.h>

#include "lib/test-util.h"
#include "runtimes/hotspot-offsets.h"

#define BIAS 0x7f0000000000ULL

/* The entries hotspot-offsets.c looks for, as hotspot-vmstructs-dump printed them for JDK 17. */
static HotspotField fields[] = {
        {"Method", "_constMethod", "ConstMethod*", false, 8, 0},
        {"ConstMethod", "_constants", "ConstantPool*", false, 8, 0},
        {"ConstMethod", "_flags", "u2", false, 28, 0},
        {"ConstMethod", "_code_size", "u2", false, 32, 0},
        {"ConstMethod", "_name_index", "u2", false, 34, 0},
        {"ConstMethod", "_signature_index", "u2", false, 36, 0},
        {"ConstMethod", "_method_idnum", "u2", false, 38, 0},
        {"ConstantPool", "_pool_holder", "InstanceKlass*", false, 24, 0},
        {"ConstantPool", "_source_file_name_index", "u2", false, 54, 0},
        {"Klass", "_name", "Symbol*", false, 24, 0},
        {"InstanceKlass", "_methods", "Array<Method*>*", false, 408, 0},
        {"Array<int>", "_length", "int", false, 0, 0},
        {"Array<Method*>", "_data", "", false, 8, 0},
        {"Symbol", "_length", "u2", false, 4, 0},
        {"Symbol", "_body", "", false, 6, 0},
        {"AbstractInterpreter", "_code", "StubQueue*", true, 0, BIAS + 0x1000},
        {"StubQueue", "_stub_buffer", "address", false, 8, 0},
        {"StubQueue", "_buffer_limit", "int", false, 20, 0},
        {"CodeCache", "_heaps", "GrowableArray<CodeHeap*>*", true, 0, BIAS + 0x2000},
        {"CodeCache", "_low_bound", "address", true, 0, BIAS + 0x3000},
        {"CodeCache", "_high_bound", "address", true, 0, BIAS + 0x4000},
        {"GrowableArrayBase", "_len", "int", false, 0, 0},
        {"GrowableArray<int>", "_data", "int*", false, 8, 0},
        {"CodeHeap", "_memory", "VirtualSpace", false, 8, 0},
        {"CodeHeap", "_segmap", "VirtualSpace", false, 120, 0},
        {"CodeHeap", "_log2_segment_size", "int", false, 256, 0},
        {"VirtualSpace", "_low", "char*", false, 16, 0},
        {"VirtualSpace", "_high", "char*", false, 24, 0},
        {"CodeBlob", "_name", "const char*", false, 96, 0},
        {"CodeBlob", "_size", "int", false, 12, 0},
        {"CodeBlob", "_frame_size", "int", false, 28, 0},
        {"CodeBlob", "_frame_complete_offset", "int", false, 20, 0},
        {"CodeBlob", "_code_begin", "address", false, 32, 0},
        {"CodeBlob", "_code_end", "address", false, 40, 0},
        {"CompiledMethod", "_method", "Method*", false, 112, 0},
        {"Method", "_code", "CompiledMethod*", false, 72, 0},
        {"VirtualSpace", "_high_boundary", "char*", false, 8, 0},
        {"nmethod", "_compile_id", "int", false, 304, 0},
        {"nmethod", "_scopes_pcs_offset", "int", false, 268, 0},
        {"nmethod", "_dependencies_offset", "int", false, 272, 0},
        {"nmethod", "_metadata_offset", "int", false, 260, 0},
        {"CompiledMethod", "_scopes_data_begin", "address", false, 120, 0},
        {"PcDesc", "_pc_offset", "int", false, 0, 0},
        {"PcDesc", "_scope_decode_offset", "int", false, 4, 0},
        {"Abstract_VM_Version", "_vm_major_version", "int", true, 0, BIAS + 0x5000},
};

static HotspotType types[] = {
        {"ConstMethod", "MetaspaceObj", 48},
        {"ConstantPool", "Metadata", 72},
        {"HeapBlock", "", 16},
        {"PcDesc", "", 16},
        {"int", "", 4},
        {"u2", "", 2},
};

static HotspotConstant ints[] = {
        {"ConstMethod::_has_linenumber_table", 1},
        {"frame::interpreter_frame_sender_sp_offset", -1},
        {"frame::interpreter_frame_last_sp_offset", -2},
};

static HotspotVMStructs tables(void)
{
        return (HotspotVMStructs){.fields = fields,
                                  .n_fields = ELEMENTSOF(fields),
                                  .types = types,
                                  .n_types = ELEMENTSOF(types),
                                  .ints = ints,
                                  .n_ints = ELEMENTSOF(ints)};
}

static HotspotField *field(const char *type, const char *name)
{
        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                if (strcmp(fields[i].type, type) == 0 && strcmp(fields[i].field, name) == 0)
                        return &fields[i];
        return NULL;
}

static HotspotType *type(const char *name)
{
        for (size_t i = 0; i < ELEMENTSOF(types); i++)
                if (strcmp(types[i].name, name) == 0)
                        return &types[i];
        return NULL;
}

int main(void)
{
        HotspotVMStructs vs = tables();
        HotspotField *f, saved;
        HotspotType *t;
        HotspotOffsets o;
        const char *missing;
        int r;

        missing = NULL;
        r = hotspot_offsets_from_vmstructs(&vs, BIAS, &o, &missing);
        check(r == 0 && o.n_unusable == 0 && !missing, "JDK 17's tables: read, none unusable (r %d)", r);
        check(o.method_const_method == 8 && o.nmethod_compile_id == 304 && o.pc_desc_sizeof == 16 &&
                      o.code_cache_heaps == 0x2000 && o.frame_interpreter_method == -3,
              "JDK 17's tables: members, sizes, statics and the interpreter's slots");

        /* An optional member's offset past 4 KiB: left out (compiled frames then keep no compile id
         * check: hotspot-procs.c records their Method*), counted, named. */
        f = field("nmethod", "_compile_id");
        saved = *f;
        f->offset = 5000;
        missing = NULL;
        r = hotspot_offsets_from_vmstructs(&vs, BIAS, &o, &missing);
        check(r == 0 && o.n_unusable == 1 && o.nmethod_compile_id == HOTSPOT_OFFSET_NONE && missing &&
                      strcmp(missing, "nmethod::_compile_id") == 0 && o.method_const_method == 8 &&
                      o.pc_desc_sizeof == 16,
              "nmethod::_compile_id at 5000: left out and counted, the rest read (r %d, %u unusable)", r,
              o.n_unusable);
        *f = saved;

        /* Two at once: a static where a member is expected, and a size past 4 KiB. */
        f = field("CodeHeap", "_segmap");
        saved = *f;
        f->is_static = true;
        t = type("PcDesc");
        t->size = 4096;
        missing = NULL;
        r = hotspot_offsets_from_vmstructs(&vs, BIAS, &o, &missing);
        check(r == 0 && o.n_unusable == 2 && o.code_heap_segmap == HOTSPOT_OFFSET_NONE &&
                      o.pc_desc_sizeof == HOTSPOT_OFFSET_NONE && o.code_heap_memory == 8 && missing &&
                      strcmp(missing, "CodeHeap::_segmap") == 0,
              "CodeHeap::_segmap static, sizeof(PcDesc) 4096: both left out and counted (r %d, %u)", r,
              o.n_unusable);
        *f = saved;
        t->size = 16;

        /* A static entry below the load bias: unusable too. */
        f = field("CodeCache", "_heaps");
        saved = *f;
        f->address = BIAS - 8;
        r = hotspot_offsets_from_vmstructs(&vs, BIAS, &o, NULL);
        check(r == 0 && o.n_unusable == 1 && o.code_cache_heaps == UINT64_MAX,
              "CodeCache::_heaps below the bias: left out (r %d)", r);
        *f = saved;

        /* Required: the JVM is refused, naming the entry. */
        f = field("Method", "_constMethod");
        saved = *f;
        f->offset = 5000;
        missing = NULL;
        r = hotspot_offsets_from_vmstructs(&vs, BIAS, &o, &missing);
        check(r == -EBADMSG && missing && strcmp(missing, "Method::_constMethod") == 0,
              "Method::_constMethod at 5000: refused (r %d, %s)", r, missing ?: "-");
        f->field = "_renamed";
        missing = NULL;
        r = hotspot_offsets_from_vmstructs(&vs, BIAS, &o, &missing);
        check(r == -EPROTONOSUPPORT && missing && strcmp(missing, "Method::_constMethod") == 0,
              "Method::_constMethod missing: refused (r %d)", r);
        *f = saved;

        r = hotspot_offsets_from_vmstructs(&vs, BIAS, &o, NULL);
        check(r == 0 && o.n_unusable == 0, "the tables restored read again");
        printf("%s\n", failures ? "FAILED" : "all checks passed");
        return failures ? 1 : 0;
}
