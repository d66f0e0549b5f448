/* SPDX-License-Identifier: GPL-2.0-only */
/* libFuzzer target: any bytes as an ELF file through the whole table build (ELF, CIE/FDE parsing,
 * CFA interpretation, table layout). A built table must pass unwind_table_validate() and answer
 * lookups at each row; anything else aborts. No debug-file lookups (no file system). */
#include <libelf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unwind-tables/unwind-table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        UnwindTableOptions opts = {.use_debug_file = false};
        UnwindTable *t = NULL;
        char *error = NULL;

        elf_version(EV_CURRENT);
        /* libelf may write to the image it parses */
        char *copy = malloc(size ? size : 1);
        if (!copy)
                return 0;
        memcpy(copy, data, size);
        Elf *elf = elf_memory(copy, size);
        if (elf) {
                int r = unwind_table_build_elf(elf, "fuzz", &opts, &t, &error);
                if (r < 0) {
                        if (!error || strncmp(error, "fuzz: ", 6) != 0)
                                abort(); /* every failure names the file and says why */
                } else {
                        if (unwind_table_validate(t) < 0)
                                abort();
                        for (uint32_t p = 0; p < t->n_pages; p++)
                                for (uint32_t i = t->page_index[p]; i < t->page_index[p + 1]; i++) {
                                        struct profd_unwind_rule rule;
                                        uint64_t pc = t->base + ((uint64_t)p << PROFD_UT_PAGE_SHIFT) +
                                                      t->rows[i].pc_low;
                                        if (unwind_table_lookup(t, pc, &rule) < 0 ||
                                            memcmp(&rule, &t->rules[t->rows[i].rule], sizeof(rule)) != 0)
                                                abort();
                                }
                }
                elf_end(elf);
        }
        free(error);
        unwind_table_free(t);
        free(copy);
        return 0;
}
