/* SPDX-License-Identifier: GPL-2.0-only */
/* PLT entries named "func@plt": each entry's jump (x86-64, aarch64) is decoded to its GOT slot,
 * whose relocation names the function. */
#include <errno.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbolizer/elf-symbols.h"
#include "symbolizer/plt-names.h"
#include "util/array.h"
#include "util/macro.h"

/* Relocations read to name PLT entries, per file: bounds the work on hostile files (a big
 * program has a few thousand JUMP_SLOTs; .rela.dyn, read only for .plt.got, can be larger). */
#define PLT_MAX_RELOCS (1u << 21)

typedef struct GotSlot {
        uint64_t got;     /* ELF vaddr of the GOT slot */
        const char *name; /* symbol the slot is bound to */
} GotSlot;

static int gotslot_cmp(const void *a, const void *b)
{
        const GotSlot *x = a, *y = b;
        return x->got < y->got ? -1 : x->got > y->got;
}

typedef struct PltRelocs {
        GotSlot *slots; /* sorted by got */
        size_t n_slots, cap;
        const char **jump_slots; /* .rela.plt in order: the index a lazy PLT stub pushes */
        size_t n_jump_slots;
        size_t budget;
} PltRelocs;

/* Reads one SHT_RELA section: JUMP_SLOT and GLOB_DAT slots by their symbol, IRELATIVE slots (no
 * symbol; static binaries) by the IFUNC symbol at the resolver address. */
static void plt_read_relocs(Exe *e, Elf *elf, unsigned machine, Elf_Scn *scn, const GElf_Shdr *sh,
                            bool is_rela_plt, PltRelocs *pr)
{
        Elf_Scn *symscn = elf_getscn(elf, sh->sh_link);
        GElf_Shdr symsh;
        Elf_Data *d = elf_getdata(scn, NULL), *symd;
        size_t n, entsize = gelf_fsize(elf, ELF_T_RELA, 1, EV_CURRENT);

        if (!d || !symscn || !gelf_getshdr(symscn, &symsh) || entsize == 0 ||
            (symsh.sh_type != SHT_DYNSYM && symsh.sh_type != SHT_SYMTAB) ||
            !(symd = elf_getdata(symscn, NULL)))
                return;
        n = d->d_size / entsize;
        if (n > pr->budget)
                n = pr->budget;
        pr->budget -= n;
        if (is_rela_plt && !pr->jump_slots) {
                pr->jump_slots = calloc(n ? n : 1, sizeof(*pr->jump_slots));
                if (!pr->jump_slots)
                        return;
                pr->n_jump_slots = n;
        }
        for (size_t i = 0; i < n; i++) {
                GElf_Rela rela;
                GElf_Sym sym;
                const char *name = NULL;
                unsigned type;

                if (!gelf_getrela(d, (int)i, &rela))
                        break;
                type = (unsigned)GELF_R_TYPE(rela.r_info);
                if (machine == EM_AARCH64)
                        type = type == R_AARCH64_JUMP_SLOT   ? R_X86_64_JUMP_SLOT
                               : type == R_AARCH64_GLOB_DAT  ? R_X86_64_GLOB_DAT
                               : type == R_AARCH64_IRELATIVE ? R_X86_64_IRELATIVE
                                                             : R_X86_64_NONE;
                if (type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT) {
                        if (gelf_getsym(symd, (int)GELF_R_SYM(rela.r_info), &sym))
                                name = elf_strptr(elf, symsh.sh_link, sym.st_name);
                } else if (type == R_X86_64_IRELATIVE)
                        name = exe_symtab_lookup(e, (uint64_t)rela.r_addend);
                else
                        continue;
                if (!name || !*name)
                        continue;
                if (is_rela_plt && pr->jump_slots && i < pr->n_jump_slots)
                        pr->jump_slots[i] = name;
                if (ARRAY_GROW(pr->slots, pr->cap, pr->n_slots + 1, 64) < 0)
                        return;
                pr->slots[pr->n_slots++] = (GotSlot){.got = rela.r_offset, .name = name};
        }
}

static const char *plt_slot_name(const PltRelocs *pr, uint64_t got)
{
        bool found;
        size_t i = SORTED_INDEX(pr->slots, pr->n_slots, _e.got, got, &found);

        return found ? pr->slots[i].name : NULL;
}

static bool bytes_at(const uint8_t *p, size_t avail, size_t off, const char *want, size_t n)
{
        return off + n <= avail && memcmp(p + off, want, n) == 0;
}

/* The function an x86-64 PLT entry leads to, decoded like objdump and gdb do: the entry jumps
 * through a GOT slot ("jmp *rel32(%rip)", after an endbr64 and/or a bnd prefix), whose relocation
 * names the function; a lazy-binding stub of an IBT .plt only pushes its .rela.plt index. */
static const char *plt_entry_name(const PltRelocs *pr, const uint8_t *p, size_t avail, uint64_t vaddr)
{
        static const size_t jmp_at[] = {0, 1, 4, 5}; /* after nothing, bnd, endbr64, both */
        int32_t rel;

        for (size_t i = 0; i < ELEMENTSOF(jmp_at); i++) {
                size_t o = jmp_at[i];
                if (o >= 4 && !bytes_at(p, avail, 0, "\xf3\x0f\x1e\xfa", 4))
                        continue;
                if ((o == 1 || o == 5) && p[o - 1] != 0xf2)
                        continue;
                if (!bytes_at(p, avail, o, "\xff\x25", 2) || o + 6 > avail)
                        continue;
                memcpy(&rel, p + o + 2, 4);
                return plt_slot_name(pr, vaddr + o + 6 + (uint64_t)(int64_t)rel);
        }
        for (size_t o = 0; o <= 4; o += 4) {
                uint32_t idx;
                if ((o == 4 && !bytes_at(p, avail, 0, "\xf3\x0f\x1e\xfa", 4)) ||
                    !bytes_at(p, avail, o, "\x68", 1) || o + 5 > avail)
                        continue;
                memcpy(&idx, p + o + 1, 4);
                return idx < pr->n_jump_slots ? pr->jump_slots[idx] : NULL;
        }
        return NULL;
}

#define A64_BTI_C 0xd503245fu

static uint32_t a64_insn(const uint8_t *p, size_t avail, size_t off)
{
        uint32_t w = 0;

        if (off + 4 <= avail)
                memcpy(&w, p + off, 4); /* aarch64 ELF files profd reads are little-endian */
        return w;
}

/* "adrp x16, page" then "ldr x17, [x16, #imm]" at off: the GOT slot they load (GNU ld's and
 * lld's aarch64 PLT entry, also the lazy-binding header's, whose slot has no relocation). */
static bool a64_got_load(const uint8_t *p, size_t avail, size_t off, uint64_t vaddr, uint64_t *ret_got)
{
        uint32_t adrp = a64_insn(p, avail, off), ldr = a64_insn(p, avail, off + 4);
        int64_t page;

        if ((adrp & 0x9f00001fu) != 0x90000010u || (ldr & 0xffc003ffu) != 0xf9400211u)
                return false;
        page = (int64_t)((((adrp >> 5) & 0x7ffffu) << 2) | ((adrp >> 29) & 3u));
        if (page & (1 << 20))
                page -= 1 << 21; /* 21-bit signed page count */
        *ret_got = ((vaddr + off) & ~0xfffULL) + (uint64_t)(page * 4096) + ((ldr >> 10) & 0xfffu) * 8;
        return true;
}

static int plt_add(Exe *e, size_t *cap, const char *fn, uint64_t addr, uint64_t size)
{
        char *label;

        if (!fn)
                return 0;
        if (ARRAY_GROW(e->plt, *cap, e->n_plt + 1, 16) < 0 || asprintf(&label, "%s@plt", fn) < 0)
                return -ENOMEM;
        e->plt[e->n_plt++] = (ExeSym){.addr = addr, .size = size, .name = label};
        return 0;
}

#define A64_BR_X17 0xd61f0220u

/* aarch64 PLT sections have no sh_entsize: entries are found by their GOT load (16 bytes, or 24
 * with BTI or PAC: "bti c" before it, "autia1716" after), each ending with its "br x17" (what
 * follows the last one may be the TLS descriptor trampoline, no function's entry). */
static int plt_load_aarch64(Exe *e, const PltRelocs *pr, const uint8_t *p, size_t size, uint64_t addr,
                            uint64_t bias, size_t *cap)
{
        size_t start = SIZE_MAX, end = 0;
        const char *fn = NULL;
        int r;

        for (size_t off = 0; off + 8 <= size; off += 4) {
                uint64_t got;
                size_t at;

                if (!a64_got_load(p, size, off, addr, &got))
                        continue;
                at = off >= 4 && a64_insn(p, size, off - 4) == A64_BTI_C ? off - 4 : off;
                if (start != SIZE_MAX && (r = plt_add(e, cap, fn, addr + start + bias, end - start)) < 0)
                        return r;
                start = at;
                fn = plt_slot_name(pr, got);
                /* add, [autia1716,] br x17: within the next three instructions */
                end = off + 8;
                for (size_t k = off + 8; k < off + 20 && k + 4 <= size; k += 4)
                        if (a64_insn(p, size, k) == A64_BR_X17) {
                                end = k + 4;
                                break;
                        }
                if (end == off + 8)
                        fn = NULL; /* not an entry after all */
                off += 4;
        }
        return start == SIZE_MAX ? 0 : plt_add(e, cap, fn, addr + start + bias, end - start);
}

static bool is_plt_section(const char *name)
{
        return strcmp(name, ".plt") == 0 || strcmp(name, ".plt.sec") == 0 || strcmp(name, ".plt.got") == 0 ||
               strcmp(name, ".plt.bnd") == 0 || strcmp(name, ".iplt") == 0;
}

/* Names the entries of the PLT sections "func@plt", as objdump, gdb and newer perf do (the
 * nearest symbol before them is whatever ends .init, typically _init). x86-64 and aarch64; other
 * machines get "[plt]" for every PLT address. */
void exe_load_plt(Exe *e)
{
        GElf_Addr bias;
        Elf *elf = dwfl_module_getelf(e->mod, &bias);
        Elf_Scn *scn = NULL, *plt_scns[EXE_MAX_PLT_SECTIONS];
        PltRelocs pr = {.budget = PLT_MAX_RELOCS};
        size_t shstrndx, cap = 0;
        bool have_plt_got = false;
        GElf_Ehdr eh;

        if (!elf || elf_getshdrstrndx(elf, &shstrndx) < 0 || !gelf_getehdr(elf, &eh))
                return;
        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                const char *name;
                if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
                        continue;
                if (sh.sh_type == SHT_PROGBITS && (sh.sh_flags & SHF_EXECINSTR) && is_plt_section(name) &&
                    e->n_plt_secs < EXE_MAX_PLT_SECTIONS && sh.sh_size > 0) {
                        plt_scns[e->n_plt_secs] = scn;
                        e->plt_secs[e->n_plt_secs].start = sh.sh_addr + bias;
                        e->plt_secs[e->n_plt_secs++].end = sh.sh_addr + sh.sh_size + bias;
                        have_plt_got |= strcmp(name, ".plt.got") == 0;
                }
        }
        if (e->n_plt_secs == 0 || (eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64))
                return;
        /* .rela.plt first: its order is the index lazy stubs push. */
        for (int pass = 0; pass < 2; pass++)
                while ((scn = elf_nextscn(elf, scn))) {
                        GElf_Shdr sh;
                        const char *name;
                        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA ||
                            !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
                                continue;
                        if (pass == 0 && strcmp(name, ".rela.plt") == 0)
                                plt_read_relocs(e, elf, eh.e_machine, scn, &sh, true, &pr);
                        else if (pass == 1 && have_plt_got && strcmp(name, ".rela.dyn") == 0)
                                plt_read_relocs(e, elf, eh.e_machine, scn, &sh, false, &pr);
                }
        qsort_safe(pr.slots, pr.n_slots, sizeof(*pr.slots), gotslot_cmp);

        for (size_t k = 0; k < e->n_plt_secs; k++) {
                GElf_Shdr sh;
                Elf_Data *d = elf_getdata(plt_scns[k], NULL);
                size_t entsize;
                if (!gelf_getshdr(plt_scns[k], &sh) || !d || !d->d_buf)
                        continue;
                const uint8_t *p = d->d_buf;
                if (eh.e_machine == EM_AARCH64) {
                        if (plt_load_aarch64(e, &pr, p, d->d_size, sh.sh_addr, bias, &cap) < 0)
                                goto done;
                        continue;
                }
                /* Static binaries leave sh_entsize 0 in .plt: entries of 8 bytes ("jmp *GOT;
                 * xchg"), recognised by a second jmp right after the first. */
                entsize = sh.sh_entsize;
                if (entsize != 8 && entsize != 16)
                        entsize = bytes_at(p, d->d_size, 0, "\xff\x25", 2) &&
                                                  bytes_at(p, d->d_size, 8, "\xff\x25", 2)
                                          ? 8
                                          : 16;
                for (size_t off = 0; off + entsize <= d->d_size; off += entsize) {
                        const char *fn = plt_entry_name(&pr, p + off, entsize, sh.sh_addr + off);
                        char *label;
                        if (!fn)
                                continue;
                        if (ARRAY_GROW(e->plt, cap, e->n_plt + 1, 16) < 0)
                                goto done;
                        if (asprintf(&label, "%s@plt", fn) < 0)
                                goto done;
                        e->plt[e->n_plt++] =
                                (ExeSym){.addr = sh.sh_addr + off + bias, .size = entsize, .name = label};
                }
        }
done:
        qsort_safe(e->plt, e->n_plt, sizeof(*e->plt), exesym_cmp);
        free(pr.slots);
        free(pr.jump_slots);
}

const char *exe_plt_lookup(const Exe *e, uint64_t vaddr)
{
        for (size_t k = 0; k < e->n_plt_secs; k++) {
                size_t lo = 0, hi = e->n_plt;
                if (vaddr < e->plt_secs[k].start || vaddr >= e->plt_secs[k].end)
                        continue;
                while (lo < hi) {
                        size_t mid = (lo + hi) / 2;
                        if (e->plt[mid].addr <= vaddr)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                if (lo > 0 && vaddr < e->plt[lo - 1].addr + e->plt[lo - 1].size)
                        return e->plt[lo - 1].name;
                return "[plt]";
        }
        return NULL;
}
