/* SPDX-License-Identifier: GPL-2.0-only */
/* An executable's function symbols: read once, aliases folded to one name per address, sizeless
 * symbols bounded, NOTYPE labels inside functions dropped; Go's function table where there is no
 * .symtab. */
#include <errno.h>
#include <gelf.h>
#include <stdlib.h>

#include "symbolizer/elf-symbols.h"
#include "symbolizer/go-names.h"
#include "util/array.h"
#include "util/macro.h"

int exesym_cmp(const void *a, const void *b)
{
        const ExeSym *x = a, *y = b;
        if (x->addr != y->addr)
                return x->addr < y->addr ? -1 : 1;
        /* Among aliases the sized one wins; it is placed last, where lookups land. */
        return (x->size > 0) - (y->size > 0);
}

static int symbol_rank(unsigned char info)
{
        /* Aliases at one address: prefer the global name, then weak, then local. */
        switch (GELF_ST_BIND(info)) {
        case STB_GLOBAL:
                return 2;
        case STB_WEAK:
                return 1;
        default:
                return 0;
        }
}

static bool exe_has_symtab(Exe *e)
{
        GElf_Addr bias;
        Elf *elf = dwfl_module_getelf(e->mod, &bias);
        Elf_Scn *scn = NULL;

        while (elf && (scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB)
                        return true;
        }
        return false;
}

typedef struct AddrRange {
        uint64_t start, end;
} AddrRange;

static int addrrange_cmp(const void *a, const void *b)
{
        const AddrRange *x = a, *y = b;
        return x->start < y->start ? -1 : x->start > y->start;
}

/* Executable sections of the main file at module addresses, sorted; NULL without section
 * headers. */
static AddrRange *exe_text_sections(Exe *e, size_t *ret_n)
{
        GElf_Addr bias;
        Elf *elf = dwfl_module_getelf(e->mod, &bias);
        Elf_Scn *scn = NULL;
        size_t shnum, n = 0;
        AddrRange *r;

        *ret_n = 0;
        if (!elf || elf_getshdrnum(elf, &shnum) < 0 || shnum == 0 || !(r = calloc(shnum, sizeof(*r))))
                return NULL;
        while ((scn = elf_nextscn(elf, scn)) && n < shnum) {
                GElf_Shdr sh;
                if (gelf_getshdr(scn, &sh) &&
                    (sh.sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) == (SHF_ALLOC | SHF_EXECINSTR) &&
                    sh.sh_size > 0 && sh.sh_addr + sh.sh_size > sh.sh_addr)
                        r[n++] = (AddrRange){sh.sh_addr + bias, sh.sh_addr + sh.sh_size + bias};
        }
        qsort_safe(r, n, sizeof(*r), addrrange_cmp);
        *ret_n = n;
        return r;
}

static bool in_ranges(const AddrRange *r, size_t n, uint64_t addr)
{
        for (size_t i = 0; i < n; i++)
                if (addr >= r[i].start && addr < r[i].end)
                        return true;
        return false;
}

static int u64_cmp(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

/* Symbols without a size (assembly lacking .size, crti's _init and _fini) cover the code up to
 * the next symbol, as perf treats them, but neither past the end of their section (_init must
 * not swallow the PLT after .init) nor past the end of a sized function they sit in. Without
 * section headers the last such symbol keeps size 0: it is still named for the addresses after
 * it, having nothing better. Sized symbols are never stretched: an address in a gap between
 * functions has no name. */
static void exe_bound_sizeless(Exe *e)
{
        size_t n_secs;
        _cleanup_free_ AddrRange *secs = exe_text_sections(e, &n_secs);
        uint64_t container_end = 0;

        for (size_t i = 0; i < e->n_syms; i++) {
                ExeSym *sym = &e->syms[i];
                uint64_t end = i + 1 < e->n_syms ? e->syms[i + 1].addr : UINT64_MAX;
                size_t lo = 0, hi = n_secs;

                if (sym->size > 0) {
                        if (sym->addr + sym->size > container_end)
                                container_end = sym->addr + sym->size;
                        continue;
                }
                if (sym->addr < container_end && container_end < end)
                        end = container_end;
                while (lo < hi) {
                        size_t mid = (lo + hi) / 2;
                        if (secs[mid].start <= sym->addr)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                if (lo > 0 && sym->addr < secs[lo - 1].end && secs[lo - 1].end < end)
                        end = secs[lo - 1].end;
                if (end != UINT64_MAX && end > sym->addr)
                        sym->size = end - sym->addr;
        }
}

/* The function symbol containing vaddr (or the nearest sizeless one before it). */
const char *exe_symtab_lookup(const Exe *e, uint64_t vaddr)
{
        size_t lo = 0, hi = e->n_syms;

        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (e->syms[mid].addr <= vaddr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        /* A symbol may be nested in a bigger one before it (rare: e.g. cold parts); look back a
         * little for one that contains the address. */
        for (size_t i = lo, tries = 0; i > 0 && tries < 4; i--, tries++) {
                const ExeSym *sym = &e->syms[i - 1];
                if (sym->size == 0 && tries == 0)
                        return sym->name;
                if (vaddr < sym->addr + sym->size)
                        return sym->name;
        }
        return NULL;
}

uint64_t exe_syms_cost(const Exe *e)
{
        Elf *elf = e->search.main_elf;
        Elf_Scn *scn = NULL;
        uint64_t bytes = 0;

        if (!elf)
                return 0;
        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh, link;
                Elf_Scn *strs;

                if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
                        continue;
                /* The table read, one ExeSym copied per entry (as large as an ELF64 symbol). */
                bytes += sh.sh_size * 2;
                strs = elf_getscn(elf, sh.sh_link);
                if (strs && gelf_getshdr(strs, &link) && link.sh_type == SHT_STRTAB)
                        bytes += link.sh_size;
        }
        return bytes;
}

int exe_load_syms(Exe *e)
{
        int n = dwfl_module_getsymtab(e->mod);
        size_t k = 0, cap;

        e->syms_loaded = true;
        if (n < 1)
                n = 1;
        cap = (size_t)n;
        e->syms = calloc(cap, sizeof(*e->syms));
        if (!e->syms)
                return -ENOMEM;
        unsigned char *rank = calloc(cap, 1);
        size_t n_text, n_notype = 0, cap_notype = 0;
        _cleanup_free_ AddrRange *text = exe_text_sections(e, &n_text);
        _cleanup_free_ uint64_t *notype = NULL;
        for (int i = 1; i < n; i++) {
                GElf_Sym sym;
                GElf_Addr addr;
                GElf_Word shndx;
                const char *name = dwfl_module_getsym_info(e->mod, i, &sym, &addr, &shndx, NULL, NULL);
                int type;
                if (!name || !*name || sym.st_shndx == SHN_UNDEF)
                        continue;
                type = GELF_ST_TYPE(sym.st_info);
                if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE)
                        continue;
                /* Labels of hand-written assembly (ld.so's _start and _dl_start_user) are NOTYPE
                 * and sizeless: kept when they lie in text, unless a function covers them (below).
                 * A sized NOTYPE symbol in text is code the assembler was not told is a function
                 * (arm64's vDSO __kernel_rt_sigreturn): named like one. */
                if (type == STT_NOTYPE) {
                        if (!in_ranges(text, n_text, addr))
                                continue;
                        if (sym.st_size == 0) {
                                if (ARRAY_GROW(notype, cap_notype, n_notype + 1, 16) < 0)
                                        continue;
                                notype[n_notype++] = addr;
                        }
                }
                e->syms[k] = (ExeSym){.addr = addr, .size = sym.st_size, .name = name};
                if (rank)
                        rank[k] = (unsigned char)symbol_rank(sym.st_info);
                k++;
        }
        /* Keep one entry per address: the sized, best-ranked alias. */
        for (size_t i = 0; i < k; i++)
                e->syms[i].size = e->syms[i].size << 2 | (rank ? rank[i] : 0);
        free(rank);
        /* Without .symtab (a stripped Go binary has only a few .dynsym entries, if any), Go's
         * own function table names the code. Its entries rank below real symbols. */
        if (!exe_has_symtab(e)) {
                size_t first = k;
                go_names_funcs(e, &e->syms, &k, &cap);
                for (size_t i = first; i < k; i++)
                        e->syms[i].size <<= 2;
        }
        qsort_safe(e->syms, k, sizeof(*e->syms), exesym_cmp);
        size_t w = 0;
        for (size_t i = 0; i < k; i++) {
                if (w > 0 && e->syms[w - 1].addr == e->syms[i].addr) {
                        if (e->syms[i].size > e->syms[w - 1].size)
                                e->syms[w - 1] = e->syms[i];
                        continue;
                }
                e->syms[w++] = e->syms[i];
        }
        for (size_t i = 0; i < w; i++)
                e->syms[i].size >>= 2;
        /* A NOTYPE label inside a function is a jump target of that function, not a name for
         * the code after it. */
        qsort_safe(notype, n_notype, sizeof(*notype), u64_cmp);
        uint64_t container_end = 0;
        size_t kept = 0;
        for (size_t i = 0; i < w; i++) {
                ExeSym *sym = &e->syms[i];
                if (sym->size == 0 && sym->addr < container_end &&
                    bsearch(&sym->addr, notype, n_notype, sizeof(*notype), u64_cmp))
                        continue;
                if (sym->size > 0 && sym->addr + sym->size > container_end)
                        container_end = sym->addr + sym->size;
                e->syms[kept++] = *sym;
        }
        w = kept;
        e->n_syms = w;
        exe_bound_sizeless(e);
        return 0;
}
