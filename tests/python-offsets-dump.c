/* SPDX-License-Identifier: GPL-2.0-only */
/* Prints profd's CPython offset table as "MAJOR.MINOR NAME VALUE" lines (NONE for a member the
 * version lacks) for tests/test-python-offsets.py, which compares them with real runtimes. */
#include <stdio.h>

#include "python-offsets.h"

static void print_value(const PythonOffsets *o, const char *name, unsigned value)
{
        if (value == PYTHON_OFFSET_NONE)
                printf("%u.%u %s NONE\n", o->major, o->minor, name);
        else
                printf("%u.%u %s %u\n", o->major, o->minor, name, value);
}

int main(void)
{
        size_t n;
        const PythonOffsets *table = python_offsets_table(&n);

        for (size_t i = 0; i < n; i++) {
                const PythonOffsets *o = &table[i];
                const char *name;
                uint16_t value;

                if (python_offsets_find(o->major, o->minor) != o)
                        return 1; /* two entries for one version */
                printf("%u.%u source %s\n", o->major, o->minor, o->source);
                print_value(o, "tstate_lookup", o->tstate_lookup);
                print_value(o, "line_table", o->line_table);
                print_value(o, "frame_owner_cstack", o->frame_owner_cstack);
                print_value(o, "unicode_kind_shift", o->unicode_kind_shift);
                print_value(o, "unicode_compact_bit", o->unicode_compact_bit);
                print_value(o, "unicode_ascii_bit", o->unicode_ascii_bit);
                for (size_t f = 0; (name = python_offsets_field(o, f, &value)); f++)
                        print_value(o, name, value);
        }
        return 0;
}
