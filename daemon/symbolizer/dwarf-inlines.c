/* SPDX-License-Identifier: GPL-2.0-only */
/* Inline frames and lines from DWARF: the CU of an address (also without .debug_aranges), the
 * scopes holding it, and the call sites between them. */
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <stdlib.h>
#include <string.h>

#include "symbolizer/dwarf-inlines.h"
#include "util/array.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"

/* Most CU ranges indexed per executable: bounds memory for hostile or gigantic DWARF. */
#define SYMBOLIZER_MAX_CU_RANGES (1u << 20)

static const char *die_linkage_or_name(Dwarf_Die *die)
{
        Dwarf_Attribute a;
        const char *n;

        n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
        if (!n)
                n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
        if (!n)
                n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a));
        return n;
}

static int curange_cmp(const void *a, const void *b)
{
        const CuRange *x = a, *y = b;
        return x->low < y->low ? -1 : x->low > y->low;
}

static void exe_build_cu_index(Exe *e)
{
        Dwarf_Die *cu = NULL;
        Dwarf_Addr bias;
        size_t cap = 0;

        e->cus_built = true;
        while ((cu = dwfl_module_nextcu(e->mod, cu, &bias))) {
                Dwarf_Addr base, low, high;
                ptrdiff_t off = 0;
                while ((off = dwarf_ranges(cu, off, &base, &low, &high)) > 0) {
                        if (low >= high)
                                continue;
                        if (e->n_cus >= SYMBOLIZER_MAX_CU_RANGES)
                                goto done;
                        if (ARRAY_GROW(e->cus, cap, e->n_cus + 1, 64) < 0)
                                goto done;
                        /* Ranges are in DWARF addresses; lookups are module addresses. */
                        e->cus[e->n_cus++] = (CuRange){.low = low + bias, .high = high + bias, .cu = *cu};
                }
        }
done:
        qsort_safe(e->cus, e->n_cus, sizeof(*e->cus), curange_cmp);
}

/* Whether e's DWARF may be read: see debuginfo_search_dwarf_unsafe(). Checked once, before
 * anything of it is. */
static bool exe_dwarf_ok(ExeCache *c, Exe *e)
{
        Dwarf_Addr bias;
        uint64_t main_bytes;
        Dwarf *dw;
        const char *why;

        if (e->dwarf_checked)
                return e->dwarf_ok;
        /* Its debug file's inflated copy is being made (dwarf-inflate.h): a lookup ahead of any
         * request goes without DWARF rather than hold the loop while libdw inflates the file;
         * the executable is opened again once the copy is ready. A request's own lookups wait
         * for no one: libdw inflates it as before. */
        if (e->search.inflate_pending && c->background) {
                c->deferred = true;
                return false;
        }
        e->dwarf_checked = true;
        /* Compressed DWARF is inflated into memory whole when libdw opens it: a file whose DWARF
         * alone would take much of the symbolizer's bound is named from its symbol table only.
         * A debug file not found yet is checked as it is found (debuginfo-search.c). */
        /* Read before libdw inflates anything: libelf then rewrites the section headers. */
        main_bytes = debuginfo_dwarf_inflated_bytes(e->search.main_elf);
        if ((e->search.debug_given ? e->search.debug_dwarf_bytes : main_bytes) >
            SYMBOLIZER_MAX_DWARF_BYTES) {
                c->n_dwarf_unsafe[DWARF_UNUSED_TOO_LARGE]++;
                return false;
        }
        /* Room first: the budget sees RSS only after the fact. A stripped executable's debug file
         * was found for its symbol table already; one found only now has no room made. */
        if (e->search.debug_given || main_bytes > 0) {
                uint64_t bytes = e->search.debug_given ? e->search.debug_dwarf_bytes : main_bytes;
                exe_cache_reserve(c, e, bytes * SYMBOLIZER_DWARF_COST_FACTOR);
        }
        e->search.max_dwarf_bytes = SYMBOLIZER_MAX_DWARF_BYTES;
        uint64_t t0 = now_ns(CLOCK_MONOTONIC);
        dw = dwfl_module_getdwarf(e->mod, &bias);
        uint64_t took = now_ns(CLOCK_MONOTONIC) - t0;
        c->n_dwarf_opens++;
        c->dwarf_open_ns += took;
        if (took > c->dwarf_open_max_ns)
                c->dwarf_open_max_ns = took;
        e->search.max_dwarf_bytes = 0;
        if (e->search.refused_large) {
                c->n_dwarf_unsafe[DWARF_UNUSED_TOO_LARGE]++;
                return false;
        }
        if (!dw)
                return false;
        e->dwarf_bytes = dwarf_getelf(dw) == e->search.main_elf ? main_bytes : e->search.debug_dwarf_bytes;
        exe_cache_make_room(c, e);
        why = debuginfo_search_dwarf_unsafe(&e->search, dw);
        if (why) {
                c->n_dwarf_unsafe[strcmp(why, "split_dwarf") == 0 ? DWARF_UNUSED_SPLIT : DWARF_UNUSED_DWZ]++;
                log_debug("Not reading the DWARF of %s: %s", e->identity, why);
                return false;
        }
        return (e->dwarf_ok = true);
}

/* The CU holding pc (a module address) and the bias to DWARF addresses. */
Dwarf_Die *exe_addrcu(ExeCache *c, Exe *e, Dwarf_Addr pc, Dwarf_Addr *ret_bias)
{
        Dwarf_Die *cu;
        size_t lo = 0, hi;

        if (!exe_dwarf_ok(c, e))
                return NULL;
        cu = dwfl_module_addrdie(e->mod, pc, ret_bias);
        if (cu)
                return cu;
        if (!dwfl_module_getdwarf(e->mod, ret_bias))
                return NULL;
        if (!e->cus_built)
                exe_build_cu_index(e);
        hi = e->n_cus;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (e->cus[mid].low <= pc)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        /* CU ranges do not overlap in sane DWARF; look back a little in case they do. */
        for (size_t i = lo, tries = 0; i > 0 && tries < 8; i--, tries++)
                if (pc < e->cus[i - 1].high)
                        return &e->cus[i - 1].cu;
        return NULL;
}

/* Nesting of DIEs followed below a CU (namespaces, classes, functions, blocks, inlines). */
#define DWARF_MAX_DEPTH 64

/* Finds the subprogram containing pc and the inlined_subroutines inside it, outermost first.
 * Unlike dwarf_getscopes (which visits every DIE of the CU, then dwarf_getscopes_die a second
 * time), this only descends into DIEs whose ranges hold pc and into namespaces, which
 * is what makes symbolizing large CUs affordable. Returns true once a scope was found. */
static bool scope_chain(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *chain, size_t *n, unsigned depth)
{
        Dwarf_Die die;

        if (depth >= DWARF_MAX_DEPTH || dwarf_child(parent, &die) != 0)
                return false;
        do {
                switch (dwarf_tag(&die)) {
                case DW_TAG_subprogram:
                case DW_TAG_inlined_subroutine:
                case DW_TAG_lexical_block:
                case DW_TAG_entry_point:
                        if (dwarf_haspc(&die, pc) <= 0)
                                break;
                        if (dwarf_tag(&die) != DW_TAG_lexical_block && *n < SYMBOLIZER_MAX_INLINE + 1)
                                chain[(*n)++] = die;
                        (void)scope_chain(&die, pc, chain, n, depth + 1);
                        return true;
                /* Concrete functions sit at CU or namespace level (member functions too: the
                 * class holds only declarations), so types are never entered. */
                case DW_TAG_namespace:
                case DW_TAG_module:
                        if (scope_chain(&die, pc, chain, n, depth + 1))
                                return true;
                        break;
                default:
                        break;
                }
        } while (dwarf_siblingof(&die, &die) == 0);
        return false;
}

/* File and line of pc from the CU's line table. */
void dwarf_inlines_srcline(ExeCache *c, Exe *e, Dwarf_Die *cudie, Dwarf_Addr dwpc, const char **ret_file,
                           int *ret_line)
{
        Dwarf_Lines *lines;
        Dwarf_Line *l;
        size_t n_lines;
        int line = 0;

        /* libdw keeps every line table it parsed until the Dwfl is closed: counted against the
         * symbolizer's memory bound. */
        if (dwarf_getsrclines(cudie, &lines, &n_lines) == 0)
                exe_note_line_table(c, e, dwarf_dieoffset(cudie), n_lines);
        l = dwarf_getsrc_die(cudie, dwpc);

        *ret_file = NULL;
        *ret_line = 0;
        if (!l)
                return;
        *ret_file = dwarf_linesrc(l, NULL, NULL);
        if (dwarf_lineno(l, &line) == 0)
                *ret_line = line;
}

/* Inline chain at pc: innermost first; each inlined_subroutine's call site gives the file:line
 * of the frame around it. Returns frames written (0: no DWARF for pc). */
size_t dwarf_inlines_frames(ExeCache *c, ResultFrames *r, Exe *e, Dwarf_Addr pc, const char *outer_sym)
{
        Dwarf_Addr bias = 0;
        Dwarf_Die *cudie = exe_addrcu(c, e, pc, &bias);
        Dwarf_Die chain[SYMBOLIZER_MAX_INLINE + 1];
        Dwarf_Files *files = NULL;
        size_t nfiles = 0, n = 0, nchain = 0;
        const char *file = NULL;
        int line = 0;

        if (!cudie)
                return 0;
        if (!scope_chain(cudie, pc - bias, chain, &nchain, 0) || nchain == 0)
                return 0;
        dwarf_inlines_srcline(c, e, cudie, pc - bias, &file, &line);
        (void)dwarf_getsrcfiles(cudie, &files, &nfiles);

        /* chain is outermost first and may have been cut at SYMBOLIZER_MAX_INLINE + 1 entries:
         * then the innermost inlines are the ones missing, so lines stay consistent. */
        for (size_t k = nchain; k-- > 0;) {
                Dwarf_Die *d = &chain[k];
                Dwarf_Attribute a;
                Dwarf_Word v;
                int decl_line = 0;
                const char *name;

                (void)dwarf_decl_line(d, &decl_line);
                name = die_linkage_or_name(d);
                /* The symbol table names the real (outermost) function most reliably. */
                if (k == 0 && outer_sym)
                        name = outer_sym;
                if (!name)
                        name = "[unknown inline]";
                result_frames_set(r, &r->frames[n++], name, file, line, decl_line);
                if (k == 0)
                        break;

                /* Where this inline instance was called: the position in the enclosing frame. */
                line = 0;
                if (dwarf_formudata(dwarf_attr(d, DW_AT_call_line, &a), &v) == 0)
                        line = (int)v;
                file = NULL;
                if (files && dwarf_formudata(dwarf_attr(d, DW_AT_call_file, &a), &v) == 0 && v < nfiles)
                        file = dwarf_filesrc(files, v, NULL, NULL);
        }
        return n;
}
