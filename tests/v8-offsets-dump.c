/* SPDX-License-Identifier: GPL-2.0-only */
/* For tests/test-v8-offsets.py. "--elf FILE": what v8_elf_probe() finds in a V8 build, one
 * "NAME VALUE" line per field (NONE for one the build lacks), "bytecode_sizes FROM COUNT HASH"
 * (kBytecodeSizes: from the symbol, .rodata or none; FNV-1a of its rows), then "result OK" or
 * "result ERRNO-NAME". "--rodata FILE": "bytecode_sizes rodata COUNT HASH" from the search of
 * .rodata alone, or "error ERRNO-NAME". "--function FILE PID ADDR": the names of the JSFunction at tagged
 * address ADDR (hex) in process PID, with FILE's metadata: "function NAME" and "script NAME", or "error
 * ERRNO-NAME". */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtimes/remote-memory.h"
#include "runtimes/v8-objects.h"
#include "runtimes/v8-offsets.h"

static const char *errname(int r)
{
        switch (r) {
        case 0:
                return "OK";
        case -ENOENT:
                return "ENOENT";
        case -EPROTONOSUPPORT:
                return "EPROTONOSUPPORT";
        case -EBADMSG:
                return "EBADMSG";
        case -EMEDIUMTYPE:
                return "EMEDIUMTYPE";
        case -EFAULT:
                return "EFAULT";
        case -ENOTUNIQ:
                return "ENOTUNIQ";
        default:
                return strerror(-r);
        }
}

static int probe(const char *path, V8Elf *e)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC), r;

        if (fd < 0)
                return -errno;
        r = v8_elf_probe(fd, path, e);
        close(fd);
        return r;
}

static void print_sizes(const char *from, const V8BytecodeSizes *s)
{
        uint32_t h = 2166136261u;

        for (size_t row = 0; row < 3; row++)
                for (size_t i = 0; i < s->count; i++)
                        h = (h ^ s->size[row][i]) * 16777619u;
        printf("bytecode_sizes %s %u %08x\n", from, s->count, h);
}

int main(int argc, char **argv)
{
        V8Elf e = {};
        int r;

        if (argc == 3 && strcmp(argv[1], "--elf") == 0) {
                const char *name;
                bool required;
                int32_t v;

                r = probe(argv[2], &e);
                if (r != -EBADMSG && r != -ENOENT) {
                        printf("symbols %u\n", e.n_symbols);
                        for (size_t i = 0; (name = v8_offsets_field(&e.offsets, i, &v, &required)); i++) {
                                if (v == V8_OFFSET_NONE)
                                        printf("%s NONE\n", name);
                                else
                                        printf("%s %" PRId32 "\n", name, v);
                        }
                        print_sizes(e.bytecode_sizes_from == V8_BYTECODE_SIZES_SYMBOL_TABLE ? "symbol"
                                    : e.bytecode_sizes_from == V8_BYTECODE_SIZES_RODATA     ? "rodata"
                                                                                            : "none",
                                    &e.offsets.bytecodes);
                }
                printf("result %s\n", errname(r));
                return 0;
        }
        if (argc == 5 && strcmp(argv[1], "--function") == 0) {
                _cleanup_(remote_memory_freep) RemoteMemory *m = NULL;
                V8FunctionNames n;

                r = probe(argv[2], &e);
                if (r < 0) {
                        printf("error %s\n", errname(r));
                        return 0;
                }
                r = remote_memory_open(atoi(argv[3]), &m);
                if (r >= 0)
                        r = v8_function_names(m, &e.offsets, strtoull(argv[4], NULL, 16), &n);
                if (r < 0) {
                        printf("error %s\n", errname(r));
                        return 0;
                }
                printf("function %s\nscript %s\n", n.function, n.script);
                return 0;
        }
        if (argc == 3 && strcmp(argv[1], "--rodata") == 0) {
                V8BytecodeSizes sizes = {};
                int fd = open(argv[2], O_RDONLY | O_CLOEXEC);

                r = fd < 0 ? -errno : v8_elf_bytecode_sizes_in_rodata(fd, &sizes);
                if (fd >= 0)
                        close(fd);
                if (r < 0)
                        printf("error %s\n", errname(r));
                else
                        print_sizes("rodata", &sizes);
                return 0;
        }
        fprintf(stderr, "usage: %s --elf FILE | --function FILE PID ADDR | --rodata FILE\n", argv[0]);
        return 2;
}
