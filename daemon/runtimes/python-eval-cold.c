/* SPDX-License-Identifier: GPL-2.0-only */
#include "runtimes/python-eval-cold.h"

#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"

#define COLD_SYMBOL "_PyEval_EvalFrameDefault.cold"
/* Bytes of the function scanned for jumps (3.13's whole function is 57 KB). */
#define EVAL_SCAN_MAX (1u << 20)
/* A fragment bigger than this is not the eval function's (Debian's 3.14 one is 84 KB). */
#define COLD_MAX (8u << 20)

static int32_t get_s32(const uint8_t *p)
{
        int32_t v;
        memcpy(&v, p, sizeof(v));
        return v;
}

static uint32_t get_u32(const uint8_t *p)
{
        uint32_t v;
        memcpy(&v, p, sizeof(v));
        return v;
}

/* The contents of the first section named name (or, name NULL, of type type), whole. */
static const uint8_t *section_data(Elf *elf, const char *name, uint32_t type, GElf_Shdr *ret_sh,
                                   Elf_Data **ret_data)
{
        size_t shstrndx;
        Elf_Scn *scn = NULL;

        if (elf_getshdrstrndx(elf, &shstrndx) < 0)
                return NULL;
        while ((scn = elf_nextscn(elf, scn))) {
                const char *n;
                Elf_Data *d;

                if (!gelf_getshdr(scn, ret_sh) || ret_sh->sh_type == SHT_NOBITS)
                        continue;
                if (name ? !(n = elf_strptr(elf, shstrndx, ret_sh->sh_name)) || strcmp(n, name) != 0
                         : ret_sh->sh_type != type)
                        continue;
                d = elf_getdata(scn, NULL);
                if (!d || !d->d_buf || d->d_size < ret_sh->sh_size)
                        return NULL;
                if (ret_data)
                        *ret_data = d;
                return d->d_buf;
        }
        return NULL;
}

const uint8_t *python_elf_vaddr_bytes(Elf *elf, uint64_t addr, uint64_t n)
{
        Elf_Scn *scn = NULL;
        GElf_Shdr sh;

        while ((scn = elf_nextscn(elf, scn))) {
                Elf_Data *d;

                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC))
                        continue;
                if (addr < sh.sh_addr || n > sh.sh_size || addr - sh.sh_addr > sh.sh_size - n)
                        continue;
                d = elf_getdata(scn, NULL);
                if (!d || !d->d_buf || addr - sh.sh_addr + n > d->d_size)
                        return NULL;
                return (const uint8_t *)d->d_buf + (addr - sh.sh_addr);
        }
        return NULL;
}

static int from_symtab(Elf *elf, uint64_t *ret_start, uint64_t *ret_size)
{
        Elf_Data *d = NULL;
        GElf_Shdr sh;

        if (!section_data(elf, NULL, SHT_SYMTAB, &sh, &d) || sh.sh_entsize == 0)
                return -ENOENT;
        for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
                const char *name;
                GElf_Sym sym;

                if (!gelf_getsym(d, i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_size == 0 ||
                    sym.st_shndx == SHN_UNDEF)
                        continue;
                name = elf_strptr(elf, sh.sh_link, sym.st_name);
                if (name && strcmp(name, COLD_SYMBOL) == 0) {
                        *ret_start = sym.st_value;
                        *ret_size = sym.st_size;
                        return 0;
                }
        }
        return -ENOENT;
}

/* .eh_frame_hdr as GNU ld writes it: version 1, a 4-byte eh_frame_ptr, fde_count udata4, then the
 * table of (initial location, FDE address) datarel sdata4 pairs sorted by location. */
typedef struct EhHdr {
        const uint8_t *table;
        size_t count;
        uint64_t vaddr;
} EhHdr;

static int eh_hdr(Elf *elf, EhHdr *ret)
{
        GElf_Shdr sh;
        const uint8_t *h = section_data(elf, ".eh_frame_hdr", 0, &sh, NULL);
        uint32_t count;

        if (!h)
                return -ENOENT;
        if (sh.sh_size < 12 || h[0] != 1 || ((h[1] & 0x0f) != 0x03 && (h[1] & 0x0f) != 0x0b) ||
            h[2] != 0x03 || h[3] != 0x3b)
                return -EBADMSG;
        count = get_u32(h + 8);
        if (count < 2 || count > (sh.sh_size - 12) / 8)
                return -EBADMSG;
        *ret = (EhHdr){.table = h + 12, .count = count, .vaddr = sh.sh_addr};
        return 0;
}

static uint64_t eh_loc(const EhHdr *h, size_t i)
{
        return h->vaddr + (int64_t)get_s32(h->table + 8 * i);
}

/* Index of the last entry starting at or before addr, or h->count. */
static size_t eh_find(const EhHdr *h, uint64_t addr)
{
        size_t lo = 0, hi = h->count;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (eh_loc(h, mid) <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo == 0 ? h->count : lo - 1;
}

/* The range of entry i's FDE: pc_begin (pcrel sdata4, as GCC encodes it on x86-64) must be the
 * table's location, pc_range follows it. */
static int eh_fde_range(Elf *elf, const EhHdr *h, size_t i, uint64_t *ret_start, uint64_t *ret_size)
{
        uint64_t fde = h->vaddr + (int64_t)get_s32(h->table + 8 * i + 4), begin;
        const uint8_t *p = python_elf_vaddr_bytes(elf, fde, 16);

        if (!p || get_u32(p) < 12 || get_u32(p) == UINT32_MAX || get_u32(p + 4) == 0)
                return -EBADMSG;
        begin = fde + 8 + (int64_t)get_s32(p + 8);
        if (begin != eh_loc(h, i))
                return -EBADMSG;
        *ret_start = begin;
        *ret_size = get_u32(p + 12);
        return 0;
}

static int cmp_size(const void *a, const void *b)
{
        size_t x = *(const size_t *)a, y = *(const size_t *)b;
        return x < y ? -1 : x > y;
}

/* Scans every byte of the function for jcc rel32 (0f 8x) and jmp rel32 (e9): decoding from
 * each byte finds the real jumps among a few false ones, which land anywhere and so rarely agree. */
static int from_jumps(Elf *elf, uint64_t eval, uint64_t eval_size, uint64_t *ret_start, uint64_t *ret_size)
{
        _cleanup_free_ size_t *hits = NULL;
        size_t n = 0, best = 0, best_n = 0, second_n = 0;
        const uint8_t *b;
        EhHdr h;
        int r;

        r = eh_hdr(elf, &h);
        if (r < 0)
                return r;
        if (eval_size > EVAL_SCAN_MAX || !(b = python_elf_vaddr_bytes(elf, eval, eval_size)))
                return -ENOENT;
        hits = malloc(eval_size * sizeof(*hits));
        if (!hits)
                return -ENOMEM;
        for (uint64_t i = 0; i + 5 <= eval_size; i++) {
                uint64_t target;
                size_t e;

                if (b[i] == 0x0f && (b[i + 1] & 0xf0) == 0x80 && i + 6 <= eval_size)
                        target = eval + i + 6 + (int64_t)get_s32(b + i + 2);
                else if (b[i] == 0xe9)
                        target = eval + i + 5 + (int64_t)get_s32(b + i + 1);
                else
                        continue;
                if (target >= eval && target < eval + eval_size)
                        continue;
                e = eh_find(&h, target);
                if (e + 1 < h.count) /* the last entry's end is unknown */
                        hits[n++] = e;
        }
        qsort(hits, n, sizeof(*hits), cmp_size);
        for (size_t i = 0, j; i < n; i = j) {
                for (j = i; j < n && hits[j] == hits[i]; j++)
                        ;
                if (j - i > best_n) {
                        second_n = best_n;
                        best_n = j - i;
                        best = hits[i];
                } else if (j - i > second_n)
                        second_n = j - i;
        }
        /* Tail calls jump to other functions too, a few times each. */
        if (best_n < 2 || best_n <= 2 * second_n)
                return -ENOENT;
        r = eh_fde_range(elf, &h, best, ret_start, ret_size);
        if (r < 0)
                return r;
        if (*ret_size == 0 || *ret_size > COLD_MAX)
                return -ENOENT;
        return 0;
}

int python_eval_cold_find(Elf *elf, uint64_t eval, uint64_t eval_size, uint64_t *ret_start,
                          uint64_t *ret_size)
{
        uint64_t start, size;
        int r;

        r = from_symtab(elf, &start, &size);
        if (r == -ENOENT)
                r = from_jumps(elf, eval, eval_size, &start, &size);
        if (r < 0)
                return r;
        /* Never the function itself, nor a range overlapping it. */
        if (start < eval + eval_size && eval < start + size)
                return -ENOENT;
        *ret_start = start;
        *ret_size = size;
        return 0;
}
