/* SPDX-License-Identifier: GPL-2.0-only */
/* Function names from a Go binary's .gopclntab (unwind-tables/gopclntab.h), for binaries whose
 * .symtab was stripped. */
#include <stdlib.h>

#include "symbolizer/go-names.h"
#include "unwind-tables/gopclntab.h"

/* Functions named by a Go binary's .gopclntab (unwind-tables/gopclntab.h): Go keeps it when
 * -ldflags=-s strips .symtab. Returns the number of entries appended. */
size_t go_names_funcs(Exe *e, ExeSym **syms, size_t *n, size_t *cap)
{
        GElf_Addr bias;
        Elf *elf = dwfl_module_getelf(e->mod, &bias);
        GoPclntab t;
        size_t added = 0;

        if (!elf || gopclntab_open(elf, &t) <= 0)
                return 0;
        if (*n + t.nfunc > *cap) {
                ExeSym *ns = reallocarray(*syms, *n + t.nfunc, sizeof(ExeSym));
                if (!ns)
                        return 0;
                *syms = ns;
                *cap = *n + t.nfunc;
        }
        for (uint64_t i = 0; i < t.nfunc; i++) {
                GoFunc f;
                if (!gopclntab_func(&t, i, &f))
                        continue;
                (*syms)[(*n)++] = (ExeSym){.addr = f.entry + bias, .size = f.end - f.entry, .name = f.name};
                added++;
        }
        return added;
}
