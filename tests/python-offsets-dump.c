/* SPDX-License-Identifier: GPL-2.0-only */
/* Prints profd's CPython offset table as "MAJOR.MINOR NAME VALUE" lines (NONE for a member the
 * version lacks) for tests/test-python-offsets.py, which compares them with real runtimes.
 * With a file argument: the entry python_offsets_from_debug() makes of the bytes in it (the start
 * of a 3.13 _PyRuntime), or "error ERRNO-NAME" when it refuses them. With --elf FILE: what
 * python_elf_probe() finds in an interpreter file, "eval ADDR SIZE cold ADDR SIZE" (hex, 0 0 for no
 * cold part). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtimes/python-offsets.h"
#include "runtimes/python-procs.h"

static void print_value(const PythonOffsets *o, const char *name, unsigned value)
{
        if (value == PYTHON_OFFSET_NONE)
                printf("%u.%u %s NONE\n", o->major, o->minor, name);
        else
                printf("%u.%u %s %u\n", o->major, o->minor, name, value);
}

static void print_entry(const PythonOffsets *o)
{
        const char *name;
        uint16_t value;

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

static int dump_debug(const char *path)
{
        unsigned char buf[4096];
        PythonOffsets o;
        FILE *f = fopen(path, "rbe");
        size_t n;
        int r;

        if (!f)
                return 2;
        n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        r = python_offsets_from_debug(buf, n, &o);
        if (r < 0) {
                printf("error %s\n", r == -EBADMSG           ? "EBADMSG"
                                     : r == -EPROTONOSUPPORT ? "EPROTONOSUPPORT"
                                                             : strerror(-r));
                return 0;
        }
        print_entry(&o);
        return 0;
}

static int dump_elf(const char *path)
{
        PythonElf e;
        int fd = open(path, O_RDONLY | O_CLOEXEC), r;

        if (fd < 0)
                return 2;
        r = python_elf_probe(fd, path, &e);
        close(fd);
        if (r < 0) {
                printf("error %s\n", strerror(-r));
                return 0;
        }
        printf("eval %" PRIx64 " %" PRIx64 " cold %" PRIx64 " %" PRIx64 "\n", e.eval, e.eval_size,
               e.eval_cold, e.eval_cold_size);
        return 0;
}

int main(int argc, char **argv)
{
        size_t n;
        const PythonOffsets *table;

        if (argc > 2 && strcmp(argv[1], "--elf") == 0)
                return dump_elf(argv[2]);
        if (argc > 1)
                return dump_debug(argv[1]);
        table = python_offsets_table(&n);
        for (size_t i = 0; i < n; i++) {
                const PythonOffsets *o = &table[i];

                if (python_offsets_find(o->major, o->minor) != o)
                        return 1; /* two entries for one version */
                print_entry(o);
        }
        return 0;
}
