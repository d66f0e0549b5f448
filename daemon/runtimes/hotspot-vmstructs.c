/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>

#include "runtimes/hotspot-vmstructs.h"
#include "runtimes/runtime-elf.h"
#include "util/array.h"

static const char *const sym_names[_HS_SYM_MAX] = {
        [HS_SYM_STRUCTS] = "gHotSpotVMStructs",
        [HS_SYM_STRUCT_TYPE_NAME] = "gHotSpotVMStructEntryTypeNameOffset",
        [HS_SYM_STRUCT_FIELD_NAME] = "gHotSpotVMStructEntryFieldNameOffset",
        [HS_SYM_STRUCT_TYPE_STRING] = "gHotSpotVMStructEntryTypeStringOffset",
        [HS_SYM_STRUCT_IS_STATIC] = "gHotSpotVMStructEntryIsStaticOffset",
        [HS_SYM_STRUCT_OFFSET] = "gHotSpotVMStructEntryOffsetOffset",
        [HS_SYM_STRUCT_ADDRESS] = "gHotSpotVMStructEntryAddressOffset",
        [HS_SYM_STRUCT_STRIDE] = "gHotSpotVMStructEntryArrayStride",
        [HS_SYM_TYPES] = "gHotSpotVMTypes",
        [HS_SYM_TYPE_TYPE_NAME] = "gHotSpotVMTypeEntryTypeNameOffset",
        [HS_SYM_TYPE_SUPERCLASS_NAME] = "gHotSpotVMTypeEntrySuperclassNameOffset",
        [HS_SYM_TYPE_SIZE] = "gHotSpotVMTypeEntrySizeOffset",
        [HS_SYM_TYPE_STRIDE] = "gHotSpotVMTypeEntryArrayStride",
        [HS_SYM_INTS] = "gHotSpotVMIntConstants",
        [HS_SYM_INT_NAME] = "gHotSpotVMIntConstantEntryNameOffset",
        [HS_SYM_INT_VALUE] = "gHotSpotVMIntConstantEntryValueOffset",
        [HS_SYM_INT_STRIDE] = "gHotSpotVMIntConstantEntryArrayStride",
        [HS_SYM_LONGS] = "gHotSpotVMLongConstants",
        [HS_SYM_LONG_NAME] = "gHotSpotVMLongConstantEntryNameOffset",
        [HS_SYM_LONG_VALUE] = "gHotSpotVMLongConstantEntryValueOffset",
        [HS_SYM_LONG_STRIDE] = "gHotSpotVMLongConstantEntryArrayStride",
};

static int hotspot_symbol(const GElf_Sym *sym, const char *name, void *userdata)
{
        HotspotElf *r = userdata;

        if (strncmp(name, "gHotSpotVM", 10) != 0)
                return 0;
        for (size_t s = 0; s < _HS_SYM_MAX; s++)
                if (strcmp(name, sym_names[s]) == 0)
                        r->sym[s] = sym->st_value;
        return 0;
}

int hotspot_elf_probe(int fd, HotspotElf *ret)
{
        HotspotElf r = {};
        Elf *elf;
        int res;

        res = runtime_elf_open(fd, &elf);
        if (res < 0)
                return res;
        (void)runtime_elf_dynsym_foreach(elf, hotspot_symbol, &r); /* checked below */
        elf_end(elf);
        for (size_t s = 0; s < _HS_SYM_MAX; s++)
                if (!r.sym[s])
                        return -ENOENT;
        *ret = r;
        return 0;
}

/* --- reading through a cache of whole pages --------------------------------------------------------
 * The entries lie in libjvm's relocated data, their strings in its .rodata, with the other
 * strings of libjvm between them: reading a page once and every name from it takes ~100 reads
 * instead of ~10000. A page is wholly readable or not (one mapping covers it). */
#define PAGE 4096u
#define PAGE_SLOTS (2 * HOTSPOT_VMSTRUCTS_MAX_PAGES) /* open addressing, at most half full */

typedef struct Page {
        uint64_t addr; /* 0: empty slot */
        int r;         /* the read's result: a failed page is remembered too */
        uint8_t *data;
} Page;

typedef struct Reader {
        HotspotReadFn read_fn;
        void *userdata;
        Page *slots;
        size_t n_pages, reads;
} Reader;

static void reader_done(Reader *rd)
{
        if (!rd->slots)
                return;
        for (size_t i = 0; i < PAGE_SLOTS; i++)
                free(rd->slots[i].data);
        free(rd->slots);
        rd->slots = NULL;
}

static int page_get(Reader *rd, uint64_t addr, const uint8_t **ret)
{
        uint64_t base = addr & ~(uint64_t)(PAGE - 1);
        size_t i = (size_t)((base / PAGE) * 0x9e3779b97f4a7c15ULL >> 40) % PAGE_SLOTS;
        Page *p;

        if (base == 0)
                return -EFAULT;
        /* Bounded by PAGE_SLOTS: the table is never more than half full, so an empty slot ends it. */
        for (size_t n = 0; n < PAGE_SLOTS; n++, i = (i + 1) % PAGE_SLOTS) {
                p = &rd->slots[i];
                if (p->addr == base) {
                        *ret = p->data ? p->data + (addr - base) : NULL;
                        return p->r;
                }
                if (p->addr == 0)
                        break;
        }
        if (rd->n_pages >= HOTSPOT_VMSTRUCTS_MAX_PAGES)
                return -E2BIG;
        p = &rd->slots[i];
        p->addr = base;
        rd->n_pages++;
        p->data = malloc(PAGE);
        if (!p->data) {
                p->r = -ENOMEM;
                return p->r;
        }
        rd->reads++;
        p->r = rd->read_fn(rd->userdata, base, p->data, PAGE);
        if (p->r < 0) {
                free(p->data);
                p->data = NULL;
                return p->r;
        }
        p->r = 0;
        *ret = p->data + (addr - base);
        return 0;
}

static int rd_bytes(Reader *rd, uint64_t addr, void *buf, size_t n)
{
        uint8_t *out = buf;

        while (n > 0) {
                const uint8_t *p;
                size_t chunk = PAGE - (addr & (PAGE - 1));
                int r;

                if (chunk > n)
                        chunk = n;
                r = page_get(rd, addr, &p);
                if (r < 0)
                        return r;
                memcpy(out, p, chunk);
                out += chunk;
                addr += chunk;
                n -= chunk;
        }
        return 0;
}

static int rd_u64(Reader *rd, uint64_t addr, uint64_t *ret)
{
        return rd_bytes(rd, addr, ret, sizeof(*ret));
}

/* Appends the NUL-terminated string at addr to vs->strings; its offset there in *ret_off.
 * addr 0 gives "". -EBADMSG: longer than HOTSPOT_VMSTRUCTS_MAX_NAME. */
static int rd_string(Reader *rd, HotspotVMStructs *vs, uint64_t addr, size_t *ret_off)
{
        char buf[HOTSPOT_VMSTRUCTS_MAX_NAME + 1];
        size_t len = 0;

        if (addr != 0) {
                for (; len <= HOTSPOT_VMSTRUCTS_MAX_NAME; len++) {
                        const uint8_t *p;
                        int r = page_get(rd, addr + len, &p);

                        if (r < 0)
                                return r;
                        buf[len] = (char)*p;
                        if (*p == 0)
                                break;
                }
                if (len > HOTSPOT_VMSTRUCTS_MAX_NAME)
                        return -EBADMSG;
        }
        if (vs->strings_size + len + 1 > vs->strings_cap) {
                size_t cap = vs->strings_cap ? vs->strings_cap * 2 : 64 * 1024;
                char *s;

                while (cap < vs->strings_size + len + 1)
                        cap *= 2;
                s = realloc(vs->strings, cap);
                if (!s)
                        return -ENOMEM;
                vs->strings = s;
                vs->strings_cap = cap;
        }
        memcpy(vs->strings + vs->strings_size, buf, len);
        vs->strings[vs->strings_size + len] = 0;
        *ret_off = vs->strings_size;
        vs->strings_size += len + 1;
        return 0;
}

/* The layout of one table's entries, read from the exported variables. */
typedef struct Layout {
        uint64_t base, stride;
        uint64_t off[5];
        size_t n_off;
} Layout;

static int read_layout(Reader *rd, const HotspotElf *elf, uint64_t bias, HotspotSym table, HotspotSym stride,
                       const HotspotSym *offs, size_t n_offs, Layout *ret)
{
        Layout l = {.n_off = n_offs};
        int r;

        r = rd_u64(rd, bias + elf->sym[table], &l.base);
        if (r < 0)
                return r;
        r = rd_u64(rd, bias + elf->sym[stride], &l.stride);
        if (r < 0)
                return r;
        /* An entry is a handful of pointers and integers. */
        if (l.base == 0 || l.stride < 8 || l.stride > 256)
                return -EBADMSG;
        for (size_t i = 0; i < n_offs; i++) {
                r = rd_u64(rd, bias + elf->sym[offs[i]], &l.off[i]);
                if (r < 0)
                        return r;
                if (l.off[i] + 8 > l.stride)
                        return -EBADMSG;
        }
        *ret = l;
        return 0;
}

/* Entry i's member at offset off (an 8-byte pointer or integer; 4 bytes for isStatic/int values,
 * read as the low half on little-endian: every value read with rd_field_u32 is an int32_t). */
static int rd_field_u64(Reader *rd, const Layout *l, size_t i, uint64_t off, uint64_t *ret)
{
        return rd_u64(rd, l->base + i * l->stride + off, ret);
}

static int rd_field_u32(Reader *rd, const Layout *l, size_t i, uint64_t off, uint32_t *ret)
{
        return rd_bytes(rd, l->base + i * l->stride + off, ret, sizeof(*ret));
}

#define STR_OFF(p) ((const char *)(uintptr_t)(p))

static int read_structs(Reader *rd, const HotspotElf *elf, uint64_t bias, HotspotVMStructs *vs)
{
        static const HotspotSym offs[] = {HS_SYM_STRUCT_TYPE_NAME, HS_SYM_STRUCT_FIELD_NAME,
                                          HS_SYM_STRUCT_TYPE_STRING, HS_SYM_STRUCT_IS_STATIC,
                                          HS_SYM_STRUCT_OFFSET};
        uint64_t address_off;
        size_t cap = 0;
        Layout l;
        int r;

        r = read_layout(rd, elf, bias, HS_SYM_STRUCTS, HS_SYM_STRUCT_STRIDE, offs, ELEMENTSOF(offs), &l);
        if (r < 0)
                return r;
        r = rd_u64(rd, bias + elf->sym[HS_SYM_STRUCT_ADDRESS], &address_off);
        if (r < 0)
                return r;
        if (address_off + 8 > l.stride)
                return -EBADMSG;
        /* Bounded by HOTSPOT_VMSTRUCTS_MAX_ENTRIES: the table ends with a NULL type name. */
        for (size_t i = 0;; i++) {
                uint64_t type, field, type_string, offset, address;
                size_t s_type, s_field, s_ts;
                uint32_t is_static;
                HotspotField *f;

                if (i >= HOTSPOT_VMSTRUCTS_MAX_ENTRIES)
                        return -E2BIG;
                r = rd_field_u64(rd, &l, i, l.off[0], &type);
                if (r < 0)
                        return r;
                if (type == 0)
                        break;
                if ((r = rd_field_u64(rd, &l, i, l.off[1], &field)) < 0 ||
                    (r = rd_field_u64(rd, &l, i, l.off[2], &type_string)) < 0 ||
                    (r = rd_field_u32(rd, &l, i, l.off[3], &is_static)) < 0 ||
                    (r = rd_field_u64(rd, &l, i, l.off[4], &offset)) < 0 ||
                    (r = rd_field_u64(rd, &l, i, address_off, &address)) < 0)
                        return r;
                if (field == 0)
                        return -EBADMSG;
                if ((r = rd_string(rd, vs, type, &s_type)) < 0 ||
                    (r = rd_string(rd, vs, field, &s_field)) < 0 ||
                    (r = rd_string(rd, vs, type_string, &s_ts)) < 0)
                        return r;
                if (ARRAY_GROW(vs->fields, cap, vs->n_fields + 1, 1024) < 0)
                        return -ENOMEM;
                f = &vs->fields[vs->n_fields++];
                *f = (HotspotField){
                        .type = STR_OFF(s_type),
                        .field = STR_OFF(s_field),
                        .type_string = STR_OFF(s_ts),
                        .is_static = is_static != 0,
                        .offset = is_static ? 0 : offset,
                        .address = is_static ? address : 0,
                };
        }
        return 0;
}

static int read_types(Reader *rd, const HotspotElf *elf, uint64_t bias, HotspotVMStructs *vs)
{
        static const HotspotSym offs[] = {HS_SYM_TYPE_TYPE_NAME, HS_SYM_TYPE_SUPERCLASS_NAME,
                                          HS_SYM_TYPE_SIZE};
        size_t cap = 0;
        Layout l;
        int r;

        r = read_layout(rd, elf, bias, HS_SYM_TYPES, HS_SYM_TYPE_STRIDE, offs, ELEMENTSOF(offs), &l);
        if (r < 0)
                return r;
        /* Bounded by HOTSPOT_VMSTRUCTS_MAX_ENTRIES: the table ends with a NULL type name. */
        for (size_t i = 0;; i++) {
                uint64_t name, super, size;
                size_t s_name, s_super;

                if (i >= HOTSPOT_VMSTRUCTS_MAX_ENTRIES)
                        return -E2BIG;
                r = rd_field_u64(rd, &l, i, l.off[0], &name);
                if (r < 0)
                        return r;
                if (name == 0)
                        break;
                if ((r = rd_field_u64(rd, &l, i, l.off[1], &super)) < 0 ||
                    (r = rd_field_u64(rd, &l, i, l.off[2], &size)) < 0)
                        return r;
                if ((r = rd_string(rd, vs, name, &s_name)) < 0 ||
                    (r = rd_string(rd, vs, super, &s_super)) < 0)
                        return r;
                if (ARRAY_GROW(vs->types, cap, vs->n_types + 1, 1024) < 0)
                        return -ENOMEM;
                vs->types[vs->n_types++] =
                        (HotspotType){.name = STR_OFF(s_name), .superclass = STR_OFF(s_super), .size = size};
        }
        return 0;
}

/* Int constants are int32_t, long constants uint64_t. */
static int read_constants(Reader *rd, const HotspotElf *elf, uint64_t bias, bool is_long,
                          HotspotVMStructs *vs)
{
        const HotspotSym offs[] = {is_long ? HS_SYM_LONG_NAME : HS_SYM_INT_NAME,
                                   is_long ? HS_SYM_LONG_VALUE : HS_SYM_INT_VALUE};
        HotspotConstant **arr = is_long ? &vs->longs : &vs->ints;
        size_t *n = is_long ? &vs->n_longs : &vs->n_ints, cap = 0;
        Layout l;
        int r;

        r = read_layout(rd, elf, bias, is_long ? HS_SYM_LONGS : HS_SYM_INTS,
                        is_long ? HS_SYM_LONG_STRIDE : HS_SYM_INT_STRIDE, offs, ELEMENTSOF(offs), &l);
        if (r < 0)
                return r;
        /* Bounded by HOTSPOT_VMSTRUCTS_MAX_ENTRIES: the table ends with a NULL name. */
        for (size_t i = 0;; i++) {
                uint64_t name, v64 = 0;
                uint32_t v32 = 0;
                size_t s_name;

                if (i >= HOTSPOT_VMSTRUCTS_MAX_ENTRIES)
                        return -E2BIG;
                r = rd_field_u64(rd, &l, i, l.off[0], &name);
                if (r < 0)
                        return r;
                if (name == 0)
                        break;
                r = is_long ? rd_field_u64(rd, &l, i, l.off[1], &v64)
                            : rd_field_u32(rd, &l, i, l.off[1], &v32);
                if (r < 0)
                        return r;
                r = rd_string(rd, vs, name, &s_name);
                if (r < 0)
                        return r;
                if (ARRAY_GROW(*arr, cap, *n + 1, 512) < 0)
                        return -ENOMEM;
                (*arr)[(*n)++] = (HotspotConstant){
                        .name = STR_OFF(s_name),
                        .value = is_long ? (int64_t)v64 : (int64_t)(int32_t)v32,
                };
        }
        return 0;
}

/* The names were stored as offsets into vs->strings, which moved as it grew: make them pointers. */
static void fix_strings(HotspotVMStructs *vs)
{
#define FIX(p) ((p) = vs->strings + (uintptr_t)(p))
        for (size_t i = 0; i < vs->n_fields; i++) {
                FIX(vs->fields[i].type);
                FIX(vs->fields[i].field);
                FIX(vs->fields[i].type_string);
        }
        for (size_t i = 0; i < vs->n_types; i++) {
                FIX(vs->types[i].name);
                FIX(vs->types[i].superclass);
        }
        for (size_t i = 0; i < vs->n_ints; i++)
                FIX(vs->ints[i].name);
        for (size_t i = 0; i < vs->n_longs; i++)
                FIX(vs->longs[i].name);
#undef FIX
}

int hotspot_vmstructs_read(const HotspotElf *elf, uint64_t bias, HotspotReadFn read_fn, void *userdata,
                           HotspotVMStructs **ret)
{
        _cleanup_(hotspot_vmstructs_freep) HotspotVMStructs *vs = calloc(1, sizeof(*vs));
        Reader rd = {.read_fn = read_fn, .userdata = userdata};
        int r;

        if (!vs)
                return -ENOMEM;
        rd.slots = calloc(PAGE_SLOTS, sizeof(*rd.slots));
        if (!rd.slots)
                return -ENOMEM;
        r = read_structs(&rd, elf, bias, vs);
        if (r >= 0)
                r = read_types(&rd, elf, bias, vs);
        if (r >= 0)
                r = read_constants(&rd, elf, bias, false, vs);
        if (r >= 0)
                r = read_constants(&rd, elf, bias, true, vs);
        vs->reads = rd.reads;
        reader_done(&rd);
        if (r < 0)
                return r;
        fix_strings(vs);
        *ret = TAKE_PTR(vs);
        return 0;
}

HotspotVMStructs *hotspot_vmstructs_free(HotspotVMStructs *vs)
{
        if (!vs)
                return NULL;
        free(vs->fields);
        free(vs->types);
        free(vs->ints);
        free(vs->longs);
        free(vs->strings);
        free(vs);
        return NULL;
}

const HotspotField *hotspot_vmstructs_field(const HotspotVMStructs *vs, const char *type, const char *field)
{
        for (size_t i = 0; i < vs->n_fields; i++)
                if (strcmp(vs->fields[i].field, field) == 0 && strcmp(vs->fields[i].type, type) == 0)
                        return &vs->fields[i];
        return NULL;
}

const HotspotType *hotspot_vmstructs_type(const HotspotVMStructs *vs, const char *name)
{
        for (size_t i = 0; i < vs->n_types; i++)
                if (strcmp(vs->types[i].name, name) == 0)
                        return &vs->types[i];
        return NULL;
}

static const HotspotConstant *find_constant(const HotspotConstant *c, size_t n, const char *name)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(c[i].name, name) == 0)
                        return &c[i];
        return NULL;
}

const HotspotConstant *hotspot_vmstructs_int(const HotspotVMStructs *vs, const char *name)
{
        return find_constant(vs->ints, vs->n_ints, name);
}

const HotspotConstant *hotspot_vmstructs_long(const HotspotVMStructs *vs, const char *name)
{
        return find_constant(vs->longs, vs->n_longs, name);
}
