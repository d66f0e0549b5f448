/* SPDX-License-Identifier: GPL-2.0-only */
/* Reading a Go binary's .gopclntab (see gopclntab.h). Layouts from Go's src/runtime/symtab.go
 * and src/debug/gosym/pclntab.go of each version. */
#include "gopclntab.h"

#include <errno.h>
#include <gelf.h>
#include <string.h>

static uint64_t rd(const uint8_t *p, unsigned size)
{
        uint64_t v = 0;
        memcpy(&v, p, size);
        return v;
}

int gopclntab_open(Elf *elf, GoPclntab *ret)
{
        Elf_Scn *scn = NULL, *pcln = NULL;
        uint64_t text_addr = 0;
        size_t shstrndx;

        if (elf_getshdrstrndx(elf, &shstrndx) < 0)
                return -EBADMSG;
        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                const char *name;
                if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
                        continue;
                /* PIE binaries put it in .data.rel.ro.gopclntab. */
                size_t len = strlen(name);
                if (len >= 10 && strcmp(name + len - 10, ".gopclntab") == 0 && sh.sh_type != SHT_NOBITS)
                        pcln = scn;
                else if (strcmp(name, ".text") == 0)
                        text_addr = sh.sh_addr;
        }
        Elf_Data *d = pcln ? elf_getdata(pcln, NULL) : NULL;
        if (!d || !d->d_buf || d->d_size < 16)
                return 0;

        GoPclntab t = {.data = d->d_buf, .size = d->d_size};
        const uint8_t *p = t.data;
        t.magic = (uint32_t)rd(p, 4);
        t.quantum = p[6];
        t.ptr_size = p[7];
        if (p[4] != 0 || p[5] != 0 || (t.ptr_size != 4 && t.ptr_size != 8) || t.quantum == 0)
                return 0;
        unsigned w = t.ptr_size;
        t.nfunc = rd(p + 8, w);
        if (t.magic == 0xfffffff0 || t.magic == 0xfffffff1) {
                if (t.size < 8 + 8 * (size_t)w)
                        return 0;
                t.text = rd(p + 8 + 2 * w, w);
                t.funcnames = rd(p + 8 + 3 * w, w);
                t.pctab = rd(p + 8 + 6 * w, w);
                t.functab = rd(p + 8 + 7 * w, w);
                t.entsz = 8;
                t.rel32 = true;
                /* In PIE binaries textStart is filled in by a relocation: 0 in the file. */
                if (t.text == 0)
                        t.text = text_addr;
        } else if (t.magic == 0xfffffffa) {
                if (t.size < 8 + 7 * (size_t)w)
                        return 0;
                t.funcnames = rd(p + 8 + 2 * w, w);
                t.pctab = rd(p + 8 + 5 * w, w);
                t.functab = rd(p + 8 + 6 * w, w);
                t.entsz = 2 * w;
        } else if (t.magic == 0xfffffffb) {
                t.funcnames = 0; /* name offsets are from the start of the table */
                t.pctab = 0;
                t.functab = 8 + w;
                t.entsz = 2 * w;
        } else
                return 0;
        if (t.nfunc == 0 || t.nfunc > GOPCLNTAB_MAX_FUNCS || t.functab > t.size || t.funcnames > t.size ||
            t.pctab > t.size || (t.size - t.functab) / t.entsz < t.nfunc + 1)
                return 0;
        *ret = t;
        return 1;
}

bool gopclntab_func(const GoPclntab *t, uint64_t i, GoFunc *ret)
{
        const uint8_t *ent = t->data + t->functab + i * t->entsz;
        uint64_t entry, next, funcoff, func;
        unsigned entry_size = t->rel32 ? 4 : t->ptr_size; /* _func starts with the entry */

        if (i >= t->nfunc)
                return false;
        if (t->rel32) {
                entry = t->text + rd(ent, 4);
                next = t->text + rd(ent + t->entsz, 4);
                funcoff = rd(ent + 4, 4);
        } else {
                entry = rd(ent, t->ptr_size);
                next = rd(ent + t->entsz, t->ptr_size);
                funcoff = rd(ent + t->ptr_size, t->ptr_size);
        }
        /* _func: entry, nameOff int32, args int32, deferreturn uint32, pcsp uint32, ... */
        func = (t->magic == 0xfffffffb ? 0 : t->functab) + funcoff + entry_size;
        if (funcoff > t->size || func > t->size - 16 || next <= entry)
                return false;
        int32_t nameoff = (int32_t)rd(t->data + func, 4);
        if (nameoff < 0 || t->funcnames + (uint64_t)nameoff >= t->size)
                return false;
        const char *name = (const char *)t->data + t->funcnames + nameoff;
        if (!memchr(name, 0, t->size - t->funcnames - (uint64_t)nameoff) || !*name)
                return false;
        uint32_t pcsp = (uint32_t)rd(t->data + func + 12, 4);
        *ret = (GoFunc){.entry = entry,
                        .end = next,
                        .name = name,
                        .pcsp = pcsp && t->pctab + pcsp < t->size ? t->pctab + pcsp : 0};
        return true;
}

/* Go's readvarint: 7 bits per byte, low first; false past the section or beyond 32 bits. */
static bool uvarint(const GoPclntab *t, uint64_t *pos, uint32_t *ret)
{
        uint32_t v = 0;

        for (unsigned shift = 0; shift < 35; shift += 7) {
                if (*pos >= t->size)
                        return false;
                uint8_t b = t->data[(*pos)++];
                v |= (uint32_t)(b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return true;
                }
        }
        return false;
}

bool gopclntab_pcvalue_next(const GoPclntab *t, const GoFunc *f, uint64_t *pos, uint64_t *pc, int32_t *value,
                            uint64_t *ret_start)
{
        uint32_t uv, pcdelta;
        bool first = *pc == f->entry && *value == -1;

        if (!*pos || !uvarint(t, pos, &uv) || (uv == 0 && !first))
                return false;
        *value += (int32_t)(-(uv & 1) ^ (uv >> 1));
        if (!uvarint(t, pos, &pcdelta) || pcdelta == 0)
                return false;
        *ret_start = *pc;
        *pc += (uint64_t)pcdelta * t->quantum;
        return *pc <= f->end;
}
