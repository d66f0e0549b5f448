/* SPDX-License-Identifier: GPL-2.0-only */
/* Checks every row of the table of each FILE against an independent reference: libdw's own CFI
 * interpreter (dwarf_cfi_addrframe), queried at the first and the last byte of every row's range.
 * Any disagreement fails the test; counts by kind are printed.
 * Usage: test-reference FILE... (a FILE prefixed with '?' is skipped when it does not exist) */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unwind-tables/gopclntab.h"
#include "unwind-tables/unwind-table.h"

static const char *kind_name[] = {"end",    "rsp",   "rbp",         "plt1",      "plt2",
                                  "signal", "undef", "unsupported", "go_switch", "rbx"};

typedef struct Ref {
        Dwarf_CFI *eh, *dbg, *dbgfile;
        Elf *elf, *dbgelf;
        Dwarf *dw, *dwfile;
        int fd, dbgfd;
        bool aarch64; /* the file's registers: sp/x29/x30 (the table's aarch64 encoding) */
} Ref;

/* "address = CFA + off" as libdw spells a DW_CFA_offset rule */
static bool cfa_relative(const Dwarf_Op *ops, size_t nops, int64_t *off)
{
        if (nops == 0 || ops[0].atom != DW_OP_call_frame_cfa)
                return false;
        if (nops == 1) {
                *off = 0;
                return true;
        }
        if (nops == 2 && ops[1].atom == DW_OP_plus_uconst) {
                *off = (int64_t)ops[1].number;
                return true;
        }
        if (nops == 3 && (ops[1].atom == DW_OP_consts || ops[1].atom == DW_OP_constu) &&
            ops[2].atom == DW_OP_plus) {
                *off = (int64_t)ops[1].number;
                return true;
        }
        return false;
}

static bool is_plt(const Dwarf_Op *o, size_t n, uint8_t lit)
{
        return n == 9 && o[0].atom == DW_OP_breg7 && o[0].number == 8 && o[1].atom == DW_OP_breg16 &&
               o[1].number == 0 && o[2].atom == DW_OP_lit15 && o[3].atom == DW_OP_and && o[4].atom == lit &&
               o[5].atom == DW_OP_ge && o[6].atom == DW_OP_lit3 && o[7].atom == DW_OP_shl &&
               o[8].atom == DW_OP_plus;
}

static void describe_ops(const char *what, const Dwarf_Op *ops, size_t nops)
{
        fprintf(stderr, "    %s:", what);
        if (!ops)
                fprintf(stderr, " same-value");
        else if (nops == 0)
                fprintf(stderr, " undefined");
        for (size_t i = 0; i < nops; i++)
                fprintf(stderr, " %#x(%" PRId64 ",%" PRIu64 ")", ops[i].atom, (int64_t)ops[i].number,
                        ops[i].number2);
        fprintf(stderr, "\n");
}

static int reference_rule_aarch64(Dwarf_Frame *f, struct profd_unwind_rule *rule);

/* The rule libdw's interpretation maps to, by the same priorities as the table: signal frame,
 * undefined return address, CFA, return address at CFA-8, rbp. Returns -1 on libdw errors, 1 when
 * libdw finds an FDE but cannot state its CFA (counted apart, not compared). */
static int reference_rule(Ref *ref, uint64_t pc, struct profd_unwind_rule *rule, bool verbose)
{
        Dwarf_Frame *f = NULL;
        *rule = (struct profd_unwind_rule){};

        Dwarf_CFI *cfis[] = {ref->eh, ref->dbg, ref->dbgfile};
        for (size_t i = 0; i < 3 && !f; i++) {
                if (!cfis[i])
                        continue;
                if (dwarf_cfi_addrframe(cfis[i], pc, &f) != 0) {
                        f = NULL;
                        int e = dwarf_errno();
                        if (e != 0 && strcmp(dwarf_errmsg(e), "no matching address range") != 0) {
                                fprintf(stderr, "  libdw error at %#" PRIx64 ": %s\n", pc, dwarf_errmsg(e));
                                return -1;
                        }
                }
        }
        if (!f) {
                rule->cfa_kind = PROFD_CFA_END;
                return 0;
        }
        if (ref->aarch64) {
                int r = reference_rule_aarch64(f, rule);
                if (verbose) {
                        Dwarf_Op *cfa_ops;
                        size_t cfa_nops;
                        if (dwarf_frame_cfa(f, &cfa_ops, &cfa_nops) == 0)
                                describe_ops("cfa", cfa_ops, cfa_nops);
                }
                free(f);
                return r;
        }

        bool signal = false;
        int ra = dwarf_frame_info(f, NULL, NULL, &signal);
        Dwarf_Op mem[3], *ops, *cfa_ops;
        size_t nops, cfa_nops;
        int64_t off;

        if (dwarf_frame_cfa(f, &cfa_ops, &cfa_nops) != 0)
                cfa_nops = SIZE_MAX;
        if (verbose) {
                fprintf(stderr, "    libdw: ra reg %d signal %d\n", ra, signal);
                if (cfa_nops != SIZE_MAX)
                        describe_ops("cfa", cfa_ops, cfa_nops);
                if (dwarf_frame_register(f, ra, mem, &ops, &nops) == 0)
                        describe_ops("ra", ops, nops);
                if (dwarf_frame_register(f, 6, mem, &ops, &nops) == 0)
                        describe_ops("rbp", ops, nops);
        }
        if (signal) {
                rule->cfa_kind = PROFD_CFA_SIGNAL;
                goto done;
        }
        if (cfa_nops == SIZE_MAX) {
                /* libdw rejects e.g. DW_CFA_def_cfa_register after a CFA expression, which the
                 * table reads as libgcc does (register + last offset): no verdict here. */
                free(f);
                return 1;
        }
        if (dwarf_frame_register(f, ra, mem, &ops, &nops) != 0)
                goto unsupported;
        if (nops == 0 && ops == mem) {
                rule->cfa_kind = PROFD_CFA_UNDEF;
                goto done;
        }
        bool ra_ok = ra == 16 && cfa_relative(ops, nops, &off) && off == -8;

        if (cfa_nops == 1 &&
            (cfa_ops[0].atom == DW_OP_breg7 || cfa_ops[0].atom == DW_OP_breg6 ||
             cfa_ops[0].atom == DW_OP_breg3) &&
            (int64_t)cfa_ops[0].number >= INT32_MIN && (int64_t)cfa_ops[0].number <= INT32_MAX) {
                rule->cfa_kind = cfa_ops[0].atom == DW_OP_breg7   ? PROFD_CFA_RSP
                                 : cfa_ops[0].atom == DW_OP_breg6 ? PROFD_CFA_RBP
                                                                  : PROFD_CFA_RBX;
                rule->cfa_offset = (int32_t)cfa_ops[0].number;
        } else if (cfa_nops == 1 && cfa_ops[0].atom == DW_OP_bregx &&
                   (cfa_ops[0].number == 3 || cfa_ops[0].number == 6 || cfa_ops[0].number == 7) &&
                   (int64_t)cfa_ops[0].number2 >= INT32_MIN && (int64_t)cfa_ops[0].number2 <= INT32_MAX) {
                rule->cfa_kind = cfa_ops[0].number == 7   ? PROFD_CFA_RSP
                                 : cfa_ops[0].number == 6 ? PROFD_CFA_RBP
                                                          : PROFD_CFA_RBX;
                rule->cfa_offset = (int32_t)cfa_ops[0].number2;
        } else if (cfa_nops != SIZE_MAX && is_plt(cfa_ops, cfa_nops, DW_OP_lit11))
                rule->cfa_kind = PROFD_CFA_PLT1;
        else if (cfa_nops != SIZE_MAX && is_plt(cfa_ops, cfa_nops, DW_OP_lit10))
                rule->cfa_kind = PROFD_CFA_PLT2;
        else
                goto unsupported;
        if (!ra_ok)
                goto unsupported;
        if (dwarf_frame_register(f, 6, mem, &ops, &nops) != 0)
                goto unsupported;
        if (nops == 0 && ops == NULL)
                ; /* same value */
        else if (cfa_relative(ops, nops, &off) && off >= INT16_MIN && off <= INT16_MAX) {
                rule->rbp_kind = PROFD_RBP_CFA_OFFSET;
                rule->rbp_offset = (int16_t)off;
        } else
                goto unsupported;
        /* rbx: its save slot, or unknown (never the whole row unsupported) */
        if (dwarf_frame_register(f, 3, mem, &ops, &nops) != 0)
                rule->rbx_kind = PROFD_RBX_UNKNOWN;
        else if (nops == 0)
                ; /* same value, or undefined where the CIE says nothing: rbx is callee-saved */
        else if (cfa_relative(ops, nops, &off) && off >= INT16_MIN && off <= INT16_MAX) {
                rule->rbx_kind = PROFD_RBP_CFA_OFFSET;
                rule->rbx_offset = (int16_t)off;
        } else
                rule->rbx_kind = PROFD_RBX_UNKNOWN;
        goto done;
unsupported:
        *rule = (struct profd_unwind_rule){.cfa_kind = PROFD_CFA_UNSUPPORTED};
done:
        free(f);
        return 0;
}

/* aarch64, the encoding of bpf/profd-unwind-table.h: CFA from sp (31) or x29, x29's save slot,
 * the return address (column 30) in x30, at CFA+N or lost. libdw ignores
 * DW_CFA_AARCH64_negate_ra_state, so flags are not compared here (check-pac-state.py reads them
 * from readelf instead). */
static int reference_rule_aarch64(Dwarf_Frame *f, struct profd_unwind_rule *rule)
{
        bool signal = false;
        int ra = dwarf_frame_info(f, NULL, NULL, &signal);
        Dwarf_Op mem[3], *ops, *cfa_ops;
        size_t nops, cfa_nops;
        int64_t off;

        if (signal) {
                rule->cfa_kind = PROFD_CFA_SIGNAL;
                return 0;
        }
        if (dwarf_frame_cfa(f, &cfa_ops, &cfa_nops) != 0)
                return 1;
        if (dwarf_frame_register(f, ra, mem, &ops, &nops) != 0)
                goto unsupported;
        if (nops == 0 && ops == mem) {
                rule->cfa_kind = PROFD_CFA_UNDEF;
                return 0;
        }
        if (cfa_nops == 1 && (cfa_ops[0].atom == DW_OP_breg31 || cfa_ops[0].atom == DW_OP_breg29) &&
            (int64_t)cfa_ops[0].number >= INT32_MIN && (int64_t)cfa_ops[0].number <= INT32_MAX) {
                rule->cfa_kind = cfa_ops[0].atom == DW_OP_breg31 ? PROFD_CFA_RSP : PROFD_CFA_RBP;
                rule->cfa_offset = (int32_t)cfa_ops[0].number;
        } else if (cfa_nops == 1 && cfa_ops[0].atom == DW_OP_bregx &&
                   (cfa_ops[0].number == 31 || cfa_ops[0].number == 29) &&
                   (int64_t)cfa_ops[0].number2 >= INT32_MIN && (int64_t)cfa_ops[0].number2 <= INT32_MAX) {
                rule->cfa_kind = cfa_ops[0].number == 31 ? PROFD_CFA_RSP : PROFD_CFA_RBP;
                rule->cfa_offset = (int32_t)cfa_ops[0].number2;
        } else
                goto unsupported;
        if (dwarf_frame_register(f, 29, mem, &ops, &nops) != 0)
                goto unsupported;
        if (nops == 0 && ops == NULL)
                ; /* same value */
        else if (cfa_relative(ops, nops, &off) && off >= INT16_MIN && off <= INT16_MAX) {
                rule->rbp_kind = PROFD_RBP_CFA_OFFSET;
                rule->rbp_offset = (int16_t)off;
        } else
                goto unsupported;
        /* the return address: same value = still in x30 */
        if (dwarf_frame_register(f, ra, mem, &ops, &nops) != 0)
                rule->rbx_kind = PROFD_RBX_UNKNOWN;
        else if (nops == 0 && ops == NULL)
                ;
        else if (cfa_relative(ops, nops, &off) && off >= INT16_MIN && off <= INT16_MAX) {
                rule->rbx_kind = PROFD_RBP_CFA_OFFSET;
                rule->rbx_offset = (int16_t)off;
        } else
                rule->rbx_kind = PROFD_RBX_UNKNOWN;
        return 0;
unsupported:
        *rule = (struct profd_unwind_rule){.cfa_kind = PROFD_CFA_UNSUPPORTED};
        return 0;
}

static void fmt(const struct profd_unwind_rule *r, char *buf, size_t n)
{
        snprintf(buf, n, "%s%+d rbp:%s%+d rbx:%s%+d", r->cfa_kind < 10 ? kind_name[r->cfa_kind] : "?",
                 r->cfa_offset, r->rbp_kind ? "c" : "u", r->rbp_offset,
                 r->rbx_kind == PROFD_RBX_UNKNOWN ? "?"
                 : r->rbx_kind                    ? "c"
                                                  : "u",
                 r->rbx_offset);
}

static Dwarf_CFI *debug_frame_cfi(Elf *elf, Dwarf **ret_dw)
{
        *ret_dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
        if (!*ret_dw)
                return NULL;
        return dwarf_getcfi(*ret_dw);
}

/* A Go binary's table comes from .gopclntab, and Go's .debug_frame from the same frame sizes:
 * the CFA must agree. Go's CFI leaves out where the frame pointer is saved, which the table
 * states (CFA - 16); the runtime's stack-switching, outermost and signal functions have rows of
 * their own (go-table.c) that Go's CFI describes as ordinary frames. */
static bool go_agrees(const struct profd_unwind_rule *ours, const struct profd_unwind_rule *theirs)
{
        if (ours->cfa_kind == PROFD_CFA_GO_SWITCH || ours->cfa_kind == PROFD_CFA_UNDEF ||
            ours->cfa_kind == PROFD_CFA_SIGNAL)
                return true;
        /* Go marks code after it switched stacks itself with a frame size of 1 GiB or more; the
         * table says such a row cannot be unwound */
        if (ours->cfa_kind == PROFD_CFA_UNSUPPORTED && theirs->cfa_kind == PROFD_CFA_RSP &&
            theirs->cfa_offset > (1 << 30))
                return true;
        if (ours->cfa_kind != theirs->cfa_kind || ours->cfa_offset != theirs->cfa_offset)
                return false;
        return ours->rbp_kind == theirs->rbp_kind
                       ? ours->rbp_offset == theirs->rbp_offset
                       : theirs->rbp_kind == PROFD_RBP_UNCHANGED && ours->rbp_offset == -16;
}

/* Go on arm64: CFA = sp + delta; with a frame the return address at CFA - delta (Go's CFI says
 * so too) and x29 below it at CFA - delta - 8 (which Go's CFI leaves out). */
static const char *go_func_name(const GoPclntab *go, uint64_t pc)
{
        uint64_t lo = 0, hi = go->nfunc;
        GoFunc f;

        while (hi - lo > 1) {
                uint64_t mid = lo + (hi - lo) / 2;
                if (gopclntab_func(go, mid, &f) && f.entry <= pc)
                        lo = mid;
                else
                        hi = mid;
        }
        return gopclntab_func(go, lo, &f) && pc >= f.entry && pc < f.end ? f.name : "";
}

static bool go_agrees_aarch64(const GoPclntab *go, uint64_t pc, const struct profd_unwind_rule *ours,
                              const struct profd_unwind_rule *theirs)
{
        /* asyncPreempt's body: Go's CFI calls it an ordinary frame of its size, the table says where
         * the interrupted frame's registers are, 16 bytes further (the slot the handler pushed) */
        if (ours->cfa_kind == PROFD_CFA_GO_PREEMPT)
                return theirs->cfa_kind == PROFD_CFA_RSP && ours->cfa_offset == theirs->cfa_offset + 16;
        /* and no row before its store of x29 and after its ADD (go-table.c) */
        if (ours->cfa_kind == PROFD_CFA_UNSUPPORTED &&
            strcmp(go_func_name(go, pc), "runtime.asyncPreempt") == 0)
                return true;
        if (ours->cfa_kind == PROFD_CFA_GO_SWITCH || ours->cfa_kind == PROFD_CFA_GO_MORESTACK ||
            ours->cfa_kind == PROFD_CFA_UNDEF || ours->cfa_kind == PROFD_CFA_SIGNAL)
                return true;
        if (ours->cfa_kind == PROFD_CFA_UNSUPPORTED && theirs->cfa_kind == PROFD_CFA_RSP &&
            theirs->cfa_offset > (1 << 30))
                return true;
        /* asyncPreempt and debugCallV2 pop more than they pushed (their caller was injected by a
         * signal handler): a negative frame size, which the table does not follow */
        if (ours->cfa_kind == PROFD_CFA_UNSUPPORTED && theirs->cfa_kind == PROFD_CFA_RSP &&
            theirs->cfa_offset < 0)
                return true;
        /* Go's CFI ends its own tracebacks at the signal handler's trampoline; the table unwinds
         * it as the ordinary frame it is, to the kernel's sigreturn trampoline its x30 holds */
        if (theirs->cfa_kind == PROFD_CFA_UNDEF && strcmp(go_func_name(go, pc), "runtime.sigtramp") == 0 &&
            ours->cfa_kind == PROFD_CFA_RSP)
                return true;
        if (ours->cfa_kind != theirs->cfa_kind || ours->cfa_offset != theirs->cfa_offset ||
            ours->rbx_kind != theirs->rbx_kind || ours->rbx_offset != theirs->rbx_offset)
                return false;
        return ours->rbp_kind == theirs->rbp_kind
                       ? ours->rbp_offset == theirs->rbp_offset
                       : theirs->rbp_kind == PROFD_RBP_UNCHANGED && ours->rbp_offset == ours->rbx_offset - 8;
}

/* .plt and .plt.sec of an aarch64 file, from its section headers */
static void plt_sections(Elf *elf, uint64_t start[2], uint64_t end[2])
{
        static const char *const names[2] = {".plt", ".plt.sec"};
        size_t shstrndx;
        Elf_Scn *scn = NULL;

        if (elf_getshdrstrndx(elf, &shstrndx) < 0)
                return;
        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                if (!gelf_getshdr(scn, &sh))
                        continue;
                const char *n = elf_strptr(elf, shstrndx, sh.sh_name);
                for (int i = 0; i < 2; i++)
                        if (n && strcmp(n, names[i]) == 0 && (sh.sh_flags & SHF_EXECINSTR)) {
                                start[i] = sh.sh_addr;
                                end[i] = sh.sh_addr + sh.sh_size;
                        }
        }
}

static bool plt_agrees(const struct profd_unwind_rule *r, uint64_t pc, const uint64_t start[2],
                       const uint64_t end[2])
{
        for (int i = 0; i < 2; i++)
                if (pc >= start[i] && pc < end[i])
                        return r->cfa_kind == PROFD_CFA_RSP &&
                               (r->cfa_offset == 0 ||
                                (i == 0 && r->cfa_offset == 16 && pc < start[i] + 32)) &&
                               r->rbp_kind == PROFD_RBP_UNCHANGED && r->rbx_kind == PROFD_RBP_UNCHANGED &&
                               r->flags == 0;
        return false;
}

static int check_file(const char *path, uint64_t *total_checked)
{
        UnwindTableOptions opts = {.debug_root = "/", .use_debug_file = true, .file_path = path};
        UnwindTable *t = NULL;
        char *error = NULL;
        Ref ref = {.fd = -1, .dbgfd = -1};
        uint64_t agree[10] = {}, checked = 0, mismatches = 0, undecided = 0, n_plt = 0, n_signed = 0;
        int r;

        r = unwind_table_build_path(path, &opts, &t, &error);
        if (r < 0) {
                fprintf(stderr, "FAIL %s: build failed: %s\n", path, error);
                return -1;
        }
        ref.fd = open(path, O_RDONLY);
        ref.elf = elf_begin(ref.fd, ELF_C_READ_MMAP, NULL);
        ref.eh = dwarf_getcfi_elf(ref.elf);
        ref.dbg = debug_frame_cfi(ref.elf, &ref.dw);
        if (!ref.dbg && t->debug_file) {
                ref.dbgfd = open(t->debug_file, O_RDONLY);
                ref.dbgelf = elf_begin(ref.dbgfd, ELF_C_READ_MMAP, NULL);
                ref.dbgfile = debug_frame_cfi(ref.dbgelf, &ref.dwfile);
        }

        GoPclntab go;
        bool is_go = gopclntab_open(ref.elf, &go) > 0;
        GElf_Ehdr ehdr;
        bool have_ehdr = gelf_getehdr(ref.elf, &ehdr) != NULL;
        ref.aarch64 = t->machine == EM_AARCH64;
        uint64_t plt_start[2] = {}, plt_end[2] = {};
        if (ref.aarch64)
                plt_sections(ref.elf, plt_start, plt_end);

        for (uint32_t p = 0; p < t->n_pages; p++)
                for (uint32_t i = t->page_index[p]; i < t->page_index[p + 1]; i++) {
                        uint64_t pc = t->base + ((uint64_t)p << PROFD_UT_PAGE_SHIFT) + t->rows[i].pc_low;
                        uint64_t next;
                        if (i + 1 < t->page_index[p + 1])
                                next = t->base + ((uint64_t)p << PROFD_UT_PAGE_SHIFT) +
                                       t->rows[i + 1].pc_low;
                        else
                                next = t->base + ((uint64_t)(p + 1) << PROFD_UT_PAGE_SHIFT);
                        uint64_t probes[2] = {pc, next - 1};
                        for (int k = 0; k < (next - 1 > pc ? 2 : 1); k++) {
                                struct profd_unwind_rule ours, theirs;
                                char a[64], b[64];
                                if (unwind_table_lookup(t, probes[k], &ours) < 0) {
                                        fprintf(stderr, "  %#" PRIx64 ": lookup failed\n", probes[k]);
                                        mismatches++;
                                        continue;
                                }
                                /* past the last END row libdw has nothing to say */
                                if (ours.cfa_kind == PROFD_CFA_END && p == t->n_pages - 1 &&
                                    i == t->n_rows - 1 && k == 1)
                                        continue;
                                r = reference_rule(&ref, probes[k], &theirs, false);
                                if (r < 0) {
                                        mismatches++;
                                        continue;
                                }
                                if (r > 0) {
                                        undecided++;
                                        continue;
                                }
                                checked++;
                                /* the start code at the entry point, where no FDE is: the
                                 * table's outermost frame (builder_set_entry) */
                                if (ours.cfa_kind == PROFD_CFA_UNDEF && theirs.cfa_kind == PROFD_CFA_END &&
                                    have_ehdr && pc == ehdr.e_entry) {
                                        agree[PROFD_CFA_UNDEF]++;
                                        continue;
                                }
                                /* aarch64 .plt/.plt.sec, where no CFI is: CFA = sp (+16 after
                                 * PLT0's push of x16/x30), x29 and x30 untouched */
                                if (ref.aarch64 && theirs.cfa_kind == PROFD_CFA_END &&
                                    plt_agrees(&ours, probes[k], plt_start, plt_end)) {
                                        agree[PROFD_CFA_RSP]++;
                                        n_plt++;
                                        continue;
                                }
                                if (ref.aarch64) {
                                        if (ours.flags & PROFD_RULE_RA_SIGNED)
                                                n_signed++;
                                        ours.flags = 0; /* libdw does not track it */
                                }
                                if (is_go && (ref.aarch64 ? go_agrees_aarch64(&go, probes[k], &ours, &theirs)
                                                          : go_agrees(&ours, &theirs))) {
                                        agree[ours.cfa_kind < 10 ? ours.cfa_kind : 7]++;
                                        continue;
                                }
                                if (memcmp(&ours, &theirs, sizeof(ours)) == 0) {
                                        agree[ours.cfa_kind < 10 ? ours.cfa_kind : 7]++;
                                        continue;
                                }
                                if (mismatches++ < 20) {
                                        fmt(&ours, a, sizeof(a));
                                        fmt(&theirs, b, sizeof(b));
                                        fprintf(stderr, "  %s %#" PRIx64 ": table %s, libdw %s\n", path,
                                                probes[k], a, b);
                                        reference_rule(&ref, probes[k], &theirs, true);
                                }
                        }
                }

        printf("%s: rows %u, probes %" PRIu64 ", mismatches %" PRIu64 "; agreed:", path, t->n_rows, checked,
               mismatches);
        for (int k = 0; k < 10; k++)
                printf(" %s %" PRIu64, kind_name[k], agree[k]);
        if (undecided)
                printf("; libdw cannot state the CFA at %" PRIu64 " probes", undecided);
        if (ref.aarch64)
                printf("; aarch64: plt %" PRIu64 ", ra signed %" PRIu64, n_plt, n_signed);
        printf("\n");
        *total_checked += checked;

        dwarf_cfi_end(ref.eh); /* dwarf_getcfi_elf()'s CFI is the caller's to free */
        dwarf_end(ref.dw);
        dwarf_end(ref.dwfile);
        if (ref.elf)
                elf_end(ref.elf);
        if (ref.dbgelf)
                elf_end(ref.dbgelf);
        if (ref.fd >= 0)
                close(ref.fd);
        if (ref.dbgfd >= 0)
                close(ref.dbgfd);
        unwind_table_free(t);
        return mismatches == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
        uint64_t total = 0;
        int failed = 0, files = 0;

        elf_version(EV_CURRENT);
        for (int i = 1; i < argc; i++) {
                const char *path = argv[i];
                if (path[0] == '?') {
                        path++;
                        if (access(path, R_OK) < 0) {
                                printf("%s: not present, not checked\n", path);
                                continue;
                        }
                }
                files++;
                if (check_file(path, &total) < 0)
                        failed++;
        }
        printf("%d files, %" PRIu64 " probes, %d files with mismatches\n", files, total, failed);
        if (files == 0 || total == 0)
                return 1;
        return failed ? 1 : 0;
}
