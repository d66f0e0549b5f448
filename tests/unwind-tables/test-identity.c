/* SPDX-License-Identifier: GPL-2.0-only */
/* Identity: the content hash is XXH64 (checked against the reference implementation's published
 * test vectors), and unwind_table_identity() of FILE gives its GNU build ID, the same as the full
 * build. Usage: test-identity FILE EXPECTED_BUILD_ID_HEX */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "unwind-table.h"

uint64_t xxh64(const void *data, size_t len, uint64_t seed); /* unwind-tables/cfi.h */

int main(int argc, char **argv)
{
        static const struct {
                const char *in;
                unsigned long long want;
        } vectors[] = {
                {"", 0xef46db3751d8e999ull},
                {"a", 0xd24ec4f1a98c6e5bull},
                {"abc", 0x44bc2cf5ad770999ull},
        };
        int fail = 0;

        for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
                unsigned long long got = xxh64(vectors[i].in, strlen(vectors[i].in), 0);
                if (got != vectors[i].want) {
                        printf("FAIL xxh64(\"%s\") = %016llx, want %016llx\n", vectors[i].in, got,
                               vectors[i].want);
                        fail = 1;
                }
        }
        if (argc != 3)
                return 2;

        uint8_t id[UNWIND_TABLE_ID_MAX];
        size_t n;
        bool is_hash;
        char hex[2 * UNWIND_TABLE_ID_MAX + 1] = "";
        int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
        if (fd < 0 || unwind_table_identity(fd, id, &n, &is_hash) < 0) {
                printf("FAIL %s: no identity\n", argv[1]);
                return 1;
        }
        close(fd);
        for (size_t i = 0; i < n; i++)
                sprintf(hex + 2 * i, "%02x", id[i]);
        if (is_hash || strcmp(hex, argv[2]) != 0) {
                printf("FAIL %s: identity %s%s, readelf says %s\n", argv[1], hex, is_hash ? " (hash)" : "",
                       argv[2]);
                fail = 1;
        }
        UnwindTable *t = NULL;
        if (unwind_table_build_path(argv[1], NULL, &t, NULL) < 0 || t->id_size != n ||
            memcmp(t->id, id, n) != 0) {
                printf("FAIL %s: the table's identity differs\n", argv[1]);
                fail = 1;
        }
        unwind_table_free(t);
        printf("%s %s: build id %s\n", fail ? "FAIL" : "ok  ", argv[1], hex);
        return fail;
}
