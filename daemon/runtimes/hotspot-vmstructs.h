/* SPDX-License-Identifier: GPL-2.0-only */
/* HotSpot's own description of its structures. libjvm.so exports four tables for its
 * Serviceability Agent (hotspot/share/runtime/vmStructs.cpp): gHotSpotVMStructs (type, field,
 * offset or a static field's address), gHotSpotVMTypes (type name, size), gHotSpotVMIntConstants
 * and gHotSpotVMLongConstants (name, value), each an array ended by an entry whose name is NULL,
 * with the layout of an entry given by exported variables too (gHotSpotVMStructEntryArrayStride,
 * gHotSpotVMStructEntryFieldNameOffset, ...). Those variables are set by C++ dynamic
 * initialisation when libjvm is loaded: they exist only in a running JVM's memory, so the tables
 * are read from the process (through runtimes/remote-memory.h, never from a file on FUSE), once
 * per libjvm file: the offsets are the file's. hotspot_elf_probe() finds the symbols in the file;
 * hotspot_vmstructs_read() reads the tables through a read function. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

/* The exported symbols, by index in HotspotElf.sym (ELF virtual addresses; 0: absent). */
typedef enum HotspotSym {
        HS_SYM_STRUCTS,
        HS_SYM_STRUCT_TYPE_NAME,
        HS_SYM_STRUCT_FIELD_NAME,
        HS_SYM_STRUCT_TYPE_STRING,
        HS_SYM_STRUCT_IS_STATIC,
        HS_SYM_STRUCT_OFFSET,
        HS_SYM_STRUCT_ADDRESS,
        HS_SYM_STRUCT_STRIDE,
        HS_SYM_TYPES,
        HS_SYM_TYPE_TYPE_NAME,
        HS_SYM_TYPE_SUPERCLASS_NAME,
        HS_SYM_TYPE_SIZE,
        HS_SYM_TYPE_STRIDE,
        HS_SYM_INTS,
        HS_SYM_INT_NAME,
        HS_SYM_INT_VALUE,
        HS_SYM_INT_STRIDE,
        HS_SYM_LONGS,
        HS_SYM_LONG_NAME,
        HS_SYM_LONG_VALUE,
        HS_SYM_LONG_STRIDE,
        _HS_SYM_MAX,
} HotspotSym;

typedef struct HotspotElf {
        uint64_t sym[_HS_SYM_MAX];
} HotspotElf;

/* The symbols of libjvm in the ELF file fd. -ENOENT: not a libjvm with these tables (every
 * HotSpot since JDK 6 has them; a build without the Serviceability Agent's exports has not);
 * -EBADMSG: not ELF. */
int hotspot_elf_probe(int fd, HotspotElf *ret);

/* Reads n bytes at addr of the process: 0 or a negative errno (remote_memory_read()). */
typedef int (*HotspotReadFn)(void *userdata, uint64_t addr, void *buf, size_t n);

/* Bounds against a corrupt or hostile table: JDK 17 has ~2600 structs entries, ~900 types,
 * ~500 constants. */
#define HOTSPOT_VMSTRUCTS_MAX_ENTRIES 32768
#define HOTSPOT_VMSTRUCTS_MAX_NAME 256
/* Pages of the process cached while the tables are read (the strings are scattered over
 * libjvm's .rodata): at most this many 4 KiB pages, 16 MiB. */
#define HOTSPOT_VMSTRUCTS_MAX_PAGES 4096

typedef struct HotspotField {
        const char *type, *field, *type_string; /* type_string: may be "" */
        bool is_static;
        uint64_t offset;  /* !is_static */
        uint64_t address; /* is_static: the field's address in the process */
} HotspotField;

typedef struct HotspotType {
        const char *name, *superclass; /* superclass: "" for none */
        uint64_t size;
} HotspotType;

typedef struct HotspotConstant {
        const char *name;
        int64_t value;
} HotspotConstant;

typedef struct HotspotVMStructs {
        HotspotField *fields;
        size_t n_fields;
        HotspotType *types;
        size_t n_types;
        HotspotConstant *ints, *longs;
        size_t n_ints, n_longs;
        char *strings; /* every name above points into this */
        size_t strings_size, strings_cap;
        size_t reads; /* page reads it took */
} HotspotVMStructs;

/* The four tables of the libjvm loaded at bias, read through read_fn. -EFAULT: unreadable;
 * -EBADMSG: a stride, offset or entry that cannot be one; -E2BIG: a table past
 * HOTSPOT_VMSTRUCTS_MAX_ENTRIES; -ENOMEM. */
int hotspot_vmstructs_read(const HotspotElf *elf, uint64_t bias, HotspotReadFn read_fn, void *userdata,
                           HotspotVMStructs **ret);
HotspotVMStructs *hotspot_vmstructs_free(HotspotVMStructs *vs);
DEFINE_TRIVIAL_CLEANUP_FUNC(HotspotVMStructs *, hotspot_vmstructs_free);

/* Lookups by name; NULL when the table has no such entry. */
const HotspotField *hotspot_vmstructs_field(const HotspotVMStructs *vs, const char *type, const char *field);
const HotspotType *hotspot_vmstructs_type(const HotspotVMStructs *vs, const char *name);
const HotspotConstant *hotspot_vmstructs_int(const HotspotVMStructs *vs, const char *name);
const HotspotConstant *hotspot_vmstructs_long(const HotspotVMStructs *vs, const char *name);
