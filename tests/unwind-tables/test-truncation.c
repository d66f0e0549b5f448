/* SPDX-License-Identifier: GPL-2.0-only */
/* Malformed input never crashes the builder: every prefix of each FILE (a truncated download, a
 * file cut while being read), and each FILE with every byte of its CFI sections flipped in turn,
 * must either build a valid table or fail with a one-line error naming the file. Also runs the
 * committed malformed inputs (regression cases) given with --expect-error. */
#include <errno.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "unwind-tables/unwind-table.h"

static int n_ok, n_err, n_bad;

static int try_image(const char *name, const char *image, size_t size, bool expect_error)
{
        UnwindTableOptions opts = {.use_debug_file = false};
        UnwindTable *t = NULL;
        char *error = NULL;
        char *copy = malloc(size ? size : 1);
        int r, ret = 0;

        memcpy(copy, image, size);
        Elf *elf = elf_memory(copy, size);
        if (!elf) {
                free(copy);
                n_err++;
                return 0;
        }
        r = unwind_table_build_elf(elf, name, &opts, &t, &error);
        if (r < 0) {
                n_err++;
                size_t nl = strlen(name);
                if (!error || strncmp(error, name, nl) != 0 || strncmp(error + nl, ": ", 2) != 0 ||
                    strchr(error, '\n') || strlen(error) <= nl + 2) {
                        fprintf(stderr, "FAIL %s: bad error message: %s\n", name, error ? error : "(none)");
                        ret = -1;
                }
        } else {
                n_ok++;
                if (unwind_table_validate(t) < 0) {
                        fprintf(stderr, "FAIL %s: built an invalid table\n", name);
                        ret = -1;
                }
                if (expect_error) {
                        fprintf(stderr, "FAIL %s: expected an error, got a table\n", name);
                        ret = -1;
                }
        }
        if (ret < 0)
                n_bad++;
        elf_end(elf);
        free(copy);
        free(error);
        unwind_table_free(t);
        return ret;
}

static char *slurp(const char *path, size_t *ret_size)
{
        FILE *f = fopen(path, "rb");
        struct stat st;
        if (!f || fstat(fileno(f), &st) < 0) {
                if (f)
                        fclose(f);
                return NULL;
        }
        char *buf = malloc((size_t)st.st_size + 1);
        size_t n = fread(buf, 1, (size_t)st.st_size, f);
        fclose(f);
        *ret_size = n;
        return buf;
}

/* Byte range of the CFI sections in the file, found with libelf on the intact image. */
static void cfi_range(char *image, size_t size, size_t *lo, size_t *hi)
{
        *lo = size;
        *hi = 0;
        Elf *elf = elf_memory(image, size);
        size_t shstrndx;
        if (!elf || elf_getshdrstrndx(elf, &shstrndx) < 0)
                goto out;
        for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
                Elf64_Shdr *sh = elf64_getshdr(scn);
                const char *n = sh ? elf_strptr(elf, shstrndx, sh->sh_name) : NULL;
                if (!n ||
                    (strcmp(n, ".eh_frame") && strcmp(n, ".debug_frame") && strcmp(n, ".eh_frame_hdr")))
                        continue;
                if (sh->sh_offset < *lo)
                        *lo = sh->sh_offset;
                if (sh->sh_offset + sh->sh_size > *hi)
                        *hi = sh->sh_offset + sh->sh_size;
        }
out:
        if (elf)
                elf_end(elf);
}

/* The size limit is honoured: a tiny one makes the build fail cleanly with -E2BIG. */
static int check_limit(const char *path)
{
        UnwindTableOptions opts = {.max_table_bytes = 64};
        UnwindTable *t = NULL;
        char *error = NULL;
        int r = unwind_table_build_path(path, &opts, &t, &error);
        if (r != -E2BIG || !error || !strstr(error, "limit")) {
                fprintf(stderr, "FAIL %s: 64-byte limit: r=%d %s\n", path, r, error ? error : "");
                n_bad++;
        } else
                printf("limit: %s\n", error);
        free(error);
        unwind_table_free(t);
        return 0;
}

int main(int argc, char **argv)
{
        bool expect_error = false;
        char name[4096];

        elf_version(EV_CURRENT);
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--expect-error") == 0) {
                        expect_error = true;
                        continue;
                }
                size_t size;
                char *image = slurp(argv[i], &size);
                if (!image) {
                        fprintf(stderr, "FAIL cannot read %s\n", argv[i]);
                        return 1;
                }
                if (!expect_error)
                        check_limit(argv[i]);
                if (expect_error) {
                        try_image(argv[i], image, size, true);
                        free(image);
                        continue;
                }
                for (size_t n = 0; n < size; n++) {
                        snprintf(name, sizeof(name), "%s[:%zu]", argv[i], n);
                        try_image(name, image, n, false);
                }
                size_t lo, hi;
                char *work = malloc(size);
                memcpy(work, image, size);
                cfi_range(work, size, &lo, &hi);
                for (size_t off = lo; off < hi; off++) {
                        memcpy(work, image, size);
                        for (int flip = 0; flip < 3; flip++) {
                                static const unsigned char xs[] = {0xff, 0x80, 0x01};
                                work[off] = (char)(image[off] ^ xs[flip]);
                                snprintf(name, sizeof(name), "%s[%zu]^%#x", argv[i], off, xs[flip]);
                                try_image(name, work, size, false);
                        }
                }
                free(work);
                free(image);
        }
        printf("%d tables built, %d clean errors, %d failures\n", n_ok, n_err, n_bad);
        return n_bad ? 1 : 0;
}
