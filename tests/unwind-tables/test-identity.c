/* SPDX-License-Identifier: GPL-2.0-only */
/* Identity: the content hash is XXH64 (checked against the reference implementation's published
 * test vectors; streamed in odd pieces it gives the one-shot result), unwind_table_identity() of
 * FILE gives its GNU build ID, the same as the full build, and a file without a build ID gets
 * XXH64(file) + size, read through the fd, equal to the one-shot hash of the whole image.
 * Usage: test-identity FILE EXPECTED_BUILD_ID_HEX FILE_WITHOUT_BUILD_ID */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "unwind-tables/unwind-table.h"

#include "unwind-tables/cfi.h"

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
        uint8_t buf[1000];
        for (size_t i = 0; i < sizeof(buf); i++)
                buf[i] = (uint8_t)(i * 7 + 3);
        Xxh64 x;
        xxh64_init(&x, 0);
        for (size_t off = 0, step = 1; off < sizeof(buf); off += step, step = step * 3 % 61 + 1)
                xxh64_update(&x, buf + off, off + step > sizeof(buf) ? sizeof(buf) - off : step);
        if (xxh64_digest(&x) != xxh64(buf, sizeof(buf), 0)) {
                printf("FAIL streamed xxh64 differs from one-shot\n");
                fail = 1;
        }
        if (argc != 4)
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

        fd = open(argv[3], O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || unwind_table_identity(fd, id, &n, &is_hash) < 0) {
                printf("FAIL %s: no identity\n", argv[3]);
                return 1;
        }
        uint8_t *image = malloc((size_t)st.st_size);
        if (!image || pread(fd, image, (size_t)st.st_size, 0) != st.st_size)
                return 1;
        close(fd);
        uint64_t want[2] = {xxh64(image, (size_t)st.st_size, 0), (uint64_t)st.st_size};
        free(image);
        if (!is_hash || n != 16 || memcmp(id, want, 16) != 0) {
                printf("FAIL %s: content identity is not XXH64 + size\n", argv[3]);
                fail = 1;
        } else
                printf("ok   %s: xxh64 %016llx size %llu\n", argv[3], (unsigned long long)want[0],
                       (unsigned long long)want[1]);
        return fail;
}
