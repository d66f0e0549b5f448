/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>

#include "runtimes/runtime-elf.h"
#include "runtimes/v8-baseline.h"
#include "runtimes/v8-offsets.h"

#define V8DBG_PREFIX "v8dbg_"

typedef struct V8Field {
        const char *symbol;
        size_t offset;
        bool required;
} V8Field;

static const V8Field fields[] = {
#define V8_FIELD(name, sym, req) {sym, offsetof(V8Offsets, name), req},
        V8_OFFSET_FIELDS(V8_FIELD)
#undef V8_FIELD
};

/* Later spellings of the same members: V8 12+ names a member's type as its C++ type
 * (Tagged<...> becomes Tagged_..._), and V8 13 keeps a SharedFunctionInfo's script alone (its
 * DebugInfo moved to a table of the isolate). Same meaning, same use. */
static const V8Field aliases[] = {
        {"class_SharedFunctionInfo__name_or_scope_info__Tagged_NameOrScopeInfoT_",
         offsetof(V8Offsets, sfi_name_or_scope_info), true},
        {"class_SharedFunctionInfo__script__Tagged_HeapObject_",
         offsetof(V8Offsets, sfi_script_or_debug_info), false},
        {"frametype_TurbofanFrame", offsetof(V8Offsets, frame_optimized), false},
};

#define V8_ISOLATE_MARKER "_ZNK2v88internal7Isolate23embedded_blob_code_sizeEv"
/* v8::internal::interpreter::Bytecodes::kBytecodeSizes (exported by node 18 and 20, not 24). */
#define V8_BYTECODE_SIZES_SYMBOL "_ZN2v88internal11interpreter9Bytecodes14kBytecodeSizesE"

const char *v8_offsets_field(const V8Offsets *o, size_t i, int32_t *ret_value, bool *ret_required)
{
        if (i >= sizeof(fields) / sizeof(fields[0]))
                return NULL;
        memcpy(ret_value, (const uint8_t *)o + fields[i].offset, sizeof(*ret_value));
        if (ret_required)
                *ret_required = fields[i].required;
        return fields[i].symbol;
}

/* The n bytes at ELF address addr: from the section holding them; a .bss one (SHT_NOBITS) is 0. */
static int read_bytes(Elf *elf, uint64_t addr, void *ret, size_t n)
{
        Elf_Scn *scn = NULL;
        GElf_Shdr sh;

        while ((scn = elf_nextscn(elf, scn))) {
                Elf_Data *d;

                if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC))
                        continue;
                if (addr < sh.sh_addr || sh.sh_size < n || addr - sh.sh_addr > sh.sh_size - n)
                        continue;
                if (sh.sh_type == SHT_NOBITS) {
                        memset(ret, 0, n);
                        return 0;
                }
                d = elf_getdata(scn, NULL);
                if (!d || !d->d_buf || addr - sh.sh_addr + n > d->d_size)
                        return -EBADMSG;
                memcpy(ret, (const uint8_t *)d->d_buf + (addr - sh.sh_addr), n);
                return 0;
        }
        return -EBADMSG;
}

static int read_int(Elf *elf, uint64_t addr, int32_t *ret)
{
        return read_bytes(elf, addr, ret, sizeof(*ret));
}

/* kBytecodeSizes found by its shape in the file's .rodata (v8_bytecode_sizes_find()). */
static int bytecode_sizes_in_rodata(Elf *elf, V8BytecodeSizes *ret)
{
        Elf_Scn *scn = NULL;
        size_t shstrndx;
        GElf_Shdr sh;

        if (elf_getshdrstrndx(elf, &shstrndx) < 0)
                return -EBADMSG;
        while ((scn = elf_nextscn(elf, scn))) {
                const char *name;
                Elf_Data *d;

                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
                    !(name = elf_strptr(elf, shstrndx, sh.sh_name)) || strcmp(name, ".rodata") != 0)
                        continue;
                d = elf_getdata(scn, NULL);
                if (!d || !d->d_buf)
                        return -EBADMSG;
                return v8_bytecode_sizes_find(d->d_buf, d->d_size, ret);
        }
        return -ENOENT;
}

/* kBytecodeSizes: from its symbol, or else from the one place in .rodata with its shape (a build
 * that does not export it: node 24). Without it baseline frames get no line. */
static void read_bytecode_sizes(Elf *elf, V8Elf *r)
{
        uint8_t t[3 * V8_BYTECODES_MAX];

        if (r->bytecode_sizes_addr && r->bytecode_sizes_size <= sizeof(t) &&
            read_bytes(elf, r->bytecode_sizes_addr, t, r->bytecode_sizes_size) == 0 &&
            v8_bytecode_sizes_from_symbol(t, r->bytecode_sizes_size, &r->offsets.bytecodes) == 0)
                r->bytecode_sizes_from = V8_BYTECODE_SIZES_SYMBOL_TABLE;
        else if (bytecode_sizes_in_rodata(elf, &r->offsets.bytecodes) == 0)
                r->bytecode_sizes_from = V8_BYTECODE_SIZES_RODATA;
}

int v8_elf_bytecode_sizes_in_rodata(int fd, V8BytecodeSizes *ret)
{
        Elf *elf;
        int r;

        r = runtime_elf_open(fd, &elf);
        if (r < 0)
                return r;
        r = bytecode_sizes_in_rodata(elf, ret);
        elf_end(elf);
        return r;
}

static const V8Field *field_by_symbol(const char *name)
{
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
                if (strcmp(fields[i].symbol, name) == 0)
                        return &fields[i];
        for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
                if (strcmp(aliases[i].symbol, name) == 0)
                        return &aliases[i];
        return NULL;
}

/* Walks one symbol table (SHT_DYNSYM or SHT_SYMTAB). */
static int scan_symbols(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, V8Elf *r)
{
        Elf_Data *d = elf_getdata(scn, NULL);
        size_t n;

        if (!d || sh->sh_entsize == 0)
                return 0;
        n = sh->sh_size / sh->sh_entsize;
        for (size_t i = 0; i < n; i++) {
                const V8Field *f;
                const char *name;
                GElf_Sym sym;
                int32_t v;

                if (!gelf_getsym(d, i, &sym) || sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
                        continue;
                name = elf_strptr(elf, sh->sh_link, sym.st_name);
                if (!name)
                        continue;
                if (name[0] == '_') {
                        if (strcmp(name, V8_ISOLATE_MARKER) == 0)
                                r->isolate_marker = sym.st_value;
                        else if (strcmp(name, V8_BYTECODE_SIZES_SYMBOL) == 0) {
                                r->bytecode_sizes_addr = sym.st_value;
                                r->bytecode_sizes_size = sym.st_size;
                        }
                        continue;
                }
                if (strncmp(name, V8DBG_PREFIX, strlen(V8DBG_PREFIX)) != 0)
                        continue;
                r->n_symbols++;
                f = field_by_symbol(name + strlen(V8DBG_PREFIX));
                if (!f || sym.st_size != sizeof(int32_t))
                        continue;
                if (read_int(elf, sym.st_value, &v) < 0)
                        return -EBADMSG;
                memcpy((uint8_t *)&r->offsets + f->offset, &v, sizeof(v));
        }
        return 0;
}

/* Whether the values describe a layout the walk and the naming can use: full 8-byte tagged
 * words (no pointer compression), frame slots within a frame's reach, members within an object's
 * first KiB. */
static bool layout_supported(const V8Offsets *o)
{
        if (o->tagged_size != V8_OFFSET_NONE && o->tagged_size != 8)
                return false;
        if (o->pointer_size != V8_OFFSET_NONE && o->pointer_size != 8)
                return false;
        if (o->smi_shift_size < 0 || o->smi_shift_size > 31 || o->heap_object_tag_mask <= 0 ||
            o->heap_object_tag_mask > 7 || o->smi_tag_mask <= 0 || o->smi_tag_mask > 7)
                return false;
        if (o->fp_function >= 0 || o->fp_function < -128 || o->fp_context >= 0 || o->fp_context < -128)
                return false;
        return true;
}

int v8_elf_probe(int fd, const char *path, V8Elf *ret)
{
        V8Elf r = {};
        Elf_Scn *scn = NULL;
        GElf_Shdr sh;
        Elf *elf;
        int res = 0;

        (void)path;
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
                int32_t none = V8_OFFSET_NONE;

                memcpy((uint8_t *)&r.offsets + fields[i].offset, &none, sizeof(none));
        }

        res = runtime_elf_open(fd, &elf);
        if (res < 0)
                return res;
        /* Both tables: a file with a .symtab may hold the metadata only there. */
        while ((scn = elf_nextscn(elf, scn))) {
                if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB))
                        continue;
                res = scan_symbols(elf, scn, &sh, &r);
                if (res < 0)
                        goto out;
        }
        if (r.n_symbols == 0 && !r.isolate_marker) {
                res = -ENOENT;
                goto out;
        }
        res = 0;
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
                int32_t v;

                memcpy(&v, (const uint8_t *)&r.offsets + fields[i].offset, sizeof(v));
                if (fields[i].required && v == V8_OFFSET_NONE)
                        res = -EPROTONOSUPPORT;
        }
        if (res == 0 && !layout_supported(&r.offsets))
                res = -EPROTONOSUPPORT;
        if (res == 0)
                read_bytecode_sizes(elf, &r);
out:
        elf_end(elf);
        if (res != -EBADMSG)
                *ret = r;
        return res;
}
