/* SPDX-License-Identifier: GPL-2.0-only */
/* Compressed DWARF inflated off the loop (daemon/symbolizer/dwarf-inflate.c), on real files: a
 * program built here with gcc -gz=zlib, and libc's Debian debug file (libc6-dbg). The memfd must
 * hold every section of the original with the same bytes, each compressed .debug_* section as
 * libelf's own elf_compress() inflates it, and libdw must read as many CUs from it as from the
 * original. Hostile files (not ELF, truncated, a stream that inflates short, another compression,
 * a FIFO, too much to inflate) get their error. The thread: a job queued, its eventfd, the copy
 * taken once, a failed one reported once, a copy swapped for the file's descriptor, at most
 * DWARF_INFLATE_JOBS at once and nothing left open at free. */
#include <elf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolizer/dwarf-inflate.h"
#include "util/macro.h"

#include "lib/test-util.h"

static const char program[] =
        "#include <stdio.h>\n"
        "static int helper(int x) { return x * 3 + 1; }\n"
        "int main(int argc, char **argv) { printf(\"%d\\n\", helper(argc)); return 0; }\n";

static size_t count_cus(int fd)
{
        Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        Dwarf *dw = elf ? dwarf_begin_elf(elf, DWARF_C_READ, NULL) : NULL;
        Dwarf_Off off = 0, next;
        size_t hsize, n = 0;

        while (dw && dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
                off = next;
                n++;
        }
        dwarf_end(dw);
        elf_end(elf);
        return n;
}

/* Every section of orig (inflated by libelf where compressed) equals the copy's. */
static void compare(const char *what, const char *orig_path, int copy_fd)
{
        int fd = open(orig_path, O_RDONLY | O_CLOEXEC);
        Elf *a = elf_begin(fd, ELF_C_READ, NULL), *b = elf_begin(copy_fd, ELF_C_READ, NULL);
        size_t na = 0, nb = 0, shstrndx = 0, inflated = 0, differ = 0;

        bool ok = a && b && elf_getshdrnum(a, &na) == 0 && elf_getshdrnum(b, &nb) == 0;
        check(ok && na == nb && na > 1, "%s: the copy has the original's %zu sections", what, na);
        if (!a || !b || na != nb) {
                elf_end(a);
                elf_end(b);
                close(fd);
                return;
        }
        elf_getshdrstrndx(a, &shstrndx);
        for (size_t i = 1; i < na; i++) {
                Elf_Scn *sa = elf_getscn(a, i), *sb = elf_getscn(b, i);
                GElf_Shdr ha, hb;

                if (!gelf_getshdr(sa, &ha) || !gelf_getshdr(sb, &hb)) {
                        differ++;
                        continue;
                }
                if (ha.sh_flags & SHF_COMPRESSED) {
                        if (elf_compress(sa, 0, 0) < 0) {
                                differ++;
                                continue;
                        }
                        gelf_getshdr(sa, &ha);
                        inflated++;
                }
                if (ha.sh_type == SHT_NOBITS)
                        continue;
                Elf_Data *da = elf_rawdata(sa, NULL), *db = elf_rawdata(sb, NULL);
                if (ha.sh_flags != hb.sh_flags || ha.sh_size != hb.sh_size || !da || !db ||
                    da->d_size != db->d_size || memcmp(da->d_buf, db->d_buf, da->d_size) != 0) {
                        printf("  section %zu (%s) differs\n", i, elf_strptr(a, shstrndx, ha.sh_name));
                        differ++;
                }
        }
        check(inflated > 0 && differ == 0,
              "%s: %zu compressed sections inflated as libelf inflates them, every other section the "
              "same (%zu differ)",
              what, inflated, differ);
        elf_end(a);
        elf_end(b);
        close(fd);
}

static void test_file(const char *what, const char *path)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC), copy;
        uint64_t bytes = 0;
        size_t cus_orig, cus_copy;

        copy = dwarf_inflate_file(fd, 64ULL << 20, &bytes);
        if (!check(copy >= 0, "%s: inflated into a memfd (%s, %llu bytes)", what,
                   copy < 0 ? strerror(-copy) : "ok", (unsigned long long)bytes))
                return;
        compare(what, path, copy);
        cus_orig = count_cus(fd);
        cus_copy = count_cus(copy);
        check(cus_orig > 0 && cus_orig == cus_copy,
              "%s: libdw reads %zu CUs from the copy, %zu from the file", what, cus_copy, cus_orig);
        check(dwarf_inflate_file(fd, 10, NULL) == -E2BIG, "%s: more than max_bytes to inflate: E2BIG", what);
        close(copy);
        close(fd);
}

/* A copy of path with patch applied at offset off (len bytes), or truncated to off when len is 0. */
static int variant(const char *dir, const char *name, const char *path, long off, const void *patch,
                   size_t len)
{
        char out[512], cmd[1200];
        int fd;

        snprintf(out, sizeof(out), "%s/%s", dir, name);
        snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", path, out);
        if (system(cmd) != 0)
                return -1;
        fd = open(out, O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return -1;
        if (len == 0)
                (void)!ftruncate(fd, off);
        else
                (void)!pwrite(fd, patch, len, off);
        return fd;
}

/* The offset of the first compressed .debug_* section's Elf64_Chdr in path. */
static long first_chdr(const char *path, Elf64_Chdr *ret)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
        size_t shstrndx = 0;
        long at = -1;

        elf_getshdrstrndx(elf, &shstrndx);
        for (Elf_Scn *s = NULL; elf && (s = elf_nextscn(elf, s));) {
                GElf_Shdr h;
                const char *name;

                if (gelf_getshdr(s, &h) && (h.sh_flags & SHF_COMPRESSED) &&
                    (name = elf_strptr(elf, shstrndx, h.sh_name)) && strncmp(name, ".debug_", 7) == 0) {
                        at = (long)h.sh_offset;
                        (void)!pread(fd, ret, sizeof(*ret), at);
                        break;
                }
        }
        elf_end(elf);
        close(fd);
        return at;
}

static void test_hostile(const char *dir, const char *exe, const char *source)
{
        char path[512];
        Elf64_Chdr ch;
        long at = first_chdr(exe, &ch);
        int fd, r;

        if (!check(at > 0, "found the program's first compressed section"))
                return;
        fd = variant(dir, "notelf", source, 0, "x", 1);
        check(dwarf_inflate_file(fd, 64 << 20, NULL) == -EINVAL, "not an ELF file: EINVAL");
        close(fd);
        fd = variant(dir, "truncated", exe, at + 8, NULL, 0);
        check(dwarf_inflate_file(fd, 64 << 20, NULL) == -EINVAL,
              "truncated in a compressed section: EINVAL");
        close(fd);
        Elf64_Chdr bad = ch;
        bad.ch_size += 1;
        fd = variant(dir, "short", exe, at, &bad, sizeof(bad));
        check(dwarf_inflate_file(fd, 64 << 20, NULL) == -EBADMSG,
              "a stream that inflates to less than its stated size: EBADMSG");
        close(fd);
        bad = ch;
        bad.ch_type = 2; /* ELFCOMPRESS_ZSTD */
        fd = variant(dir, "zstd", exe, at, &bad, sizeof(bad));
        check(dwarf_inflate_file(fd, 64 << 20, NULL) == -EOPNOTSUPP, "another compression: EOPNOTSUPP");
        close(fd);
        uint16_t shnum = 0xffff;
        fd = variant(dir, "shnum", exe, offsetof(Elf64_Ehdr, e_shnum), &shnum, sizeof(shnum));
        check(dwarf_inflate_file(fd, 64 << 20, NULL) == -EINVAL,
              "65535 section headers past the end: EINVAL");
        close(fd);
        snprintf(path, sizeof(path), "%s/fifo", dir);
        if (mkfifo(path, 0600) == 0) {
                fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
                check(dwarf_inflate_file(fd, 64 << 20, NULL) == -EINVAL, "a FIFO: EINVAL, nothing read");
                close(fd);
        }
        snprintf(path, sizeof(path), "%s/plain", dir);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        r = dwarf_inflate_file(fd, 64 << 20, NULL);
        check(r == -ENODATA, "DWARF not compressed: ENODATA (%d)", r);
        close(fd);
}

static bool wait_readable(int efd)
{
        struct pollfd p = {.fd = efd, .events = POLLIN};
        return poll(&p, 1, 30 * 1000) == 1;
}

static void test_thread(const char *dir, const char *exe)
{
        DwarfInflater *w = NULL;
        char path[512];
        int efd, fd, r, bad;

        if (!check(dwarf_inflater_new(&w, &efd) == 0, "inflater thread started"))
                return;
        fd = open(exe, O_RDONLY | O_CLOEXEC);
        check(dwarf_inflater_get(w, fd, 64 << 20, false) == -ENOENT, "not asked for: ENOENT");
        check(dwarf_inflater_get(w, fd, 64 << 20, true) == -EINPROGRESS, "first ask: queued");
        check(dwarf_inflater_get(w, fd, 64 << 20, false) == -EINPROGRESS,
              "looked for without asking meanwhile: in progress");
        check(dwarf_inflater_get(w, fd, 64 << 20, true) == -EINPROGRESS,
              "asked again meanwhile: in progress");
        check(wait_readable(efd) && dwarf_inflater_collect(w) == 1,
              "its eventfd told the loop, one job finished");
        r = dwarf_inflater_get(w, fd, 64 << 20, true);
        check(r >= 0, "then the copy is handed over");
        if (r >= 0) {
                compare("thread's copy", exe, r);
                close(r);
        }
        check(dwarf_inflater_get(w, fd, 64 << 20, true) == -EINPROGRESS,
              "taken once: the next ask queues it again");
        close(fd);

        snprintf(path, sizeof(path), "%s/short", dir);
        bad = open(path, O_RDONLY | O_CLOEXEC);
        check(dwarf_inflater_get(w, bad, 64 << 20, true) == -EINPROGRESS, "a bad file: queued");
        /* Behind the program's second inflation: asked until it is not in progress any more. */
        r = -EINPROGRESS;
        for (int i = 0; i < 300 && r == -EINPROGRESS; i++) {
                struct pollfd p = {.fd = efd, .events = POLLIN};
                if (poll(&p, 1, 100) == 1)
                        dwarf_inflater_collect(w);
                r = dwarf_inflater_get(w, bad, 64 << 20, true);
        }
        check(r == -EBADMSG, "its failure is reported (EBADMSG: %d)", r);
        check(dwarf_inflater_get(w, bad, 64 << 20, true) == -EINPROGRESS, "once: the next ask tries again");
        close(bad);

        /* dwarf_inflater_swap(): the descriptor given becomes the copy once it is ready (the one
         * queued above by "taken once"). */
        fd = open(exe, O_RDONLY | O_CLOEXEC);
        int orig = fd;
        bool pending = false, swapped = false;
        for (int i = 0; i < 300 && !swapped; i++) {
                struct pollfd p = {.fd = efd, .events = POLLIN};
                if (poll(&p, 1, 100) == 1)
                        dwarf_inflater_collect(w);
                swapped = dwarf_inflater_swap(w, &fd, DWARF_INFLATE_MIN_BYTES, 64 << 20, true, &pending);
                if (!swapped && !pending)
                        break;
        }
        check(swapped && fd != orig && fcntl(orig, F_GETFD) < 0,
              "swap: the file's descriptor replaced by its copy (and closed)");
        if (swapped)
                compare("swapped copy", exe, fd);
        close(fd);
        fd = open(exe, O_RDONLY | O_CLOEXEC);
        check(!dwarf_inflater_swap(w, &fd, DWARF_INFLATE_MIN_BYTES - 1, 64 << 20, true, &pending) &&
                      !pending,
              "swap: less DWARF than DWARF_INFLATE_MIN_BYTES is left to libdw");
        check(!dwarf_inflater_swap(w, &fd, 65 << 20, 64 << 20, true, &pending) && !pending,
              "swap: more than the maximum is left to libdw");
        check(!dwarf_inflater_swap(NULL, &fd, DWARF_INFLATE_MIN_BYTES, 64 << 20, true, &pending) && !pending,
              "swap: no inflater");
        close(fd);

        DwarfInflaterStats st;
        dwarf_inflater_stats(w, &st);
        check(st.inflated == 2 && st.failed >= 1 && st.taken == 2,
              "stats: %llu inflated, %llu failed, %llu taken", (unsigned long long)st.inflated,
              (unsigned long long)st.failed, (unsigned long long)st.taken);
        dwarf_inflater_free(w);
}

static size_t count_fds(void)
{
        char cmd[] = "ls /proc/self/fd";
        size_t n = 0;
        char line[64];
        FILE *f = popen(cmd, "r");

        while (f && fgets(line, sizeof(line), f))
                n++;
        if (f)
                pclose(f);
        return n;
}

/* DWARF_INFLATE_JOBS distinct files at most at once, queued, running and ready together; what is
 * left at free (queued, ready) is closed. */
static void test_bound(const char *dir, const char *exe)
{
        int fds[DWARF_INFLATE_JOBS + 1], efd;
        char path[512], cmd[1200];
        DwarfInflater *w = NULL;
        size_t before = count_fds();
        DwarfInflaterStats st;

        if (!check(dwarf_inflater_new(&w, &efd) == 0, "bound: inflater thread started"))
                return;
        for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
                snprintf(path, sizeof(path), "%s/copy%zu", dir, i);
                snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", exe, path);
                fds[i] = system(cmd) == 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
        }
        for (size_t i = 0; i < DWARF_INFLATE_JOBS; i++)
                check(dwarf_inflater_get(w, fds[i], 64 << 20, true) == -EINPROGRESS,
                      "bound: file %zu queued", i);
        check(dwarf_inflater_get(w, fds[DWARF_INFLATE_JOBS], 64 << 20, true) == -EAGAIN,
              "bound: one more is refused (EAGAIN)");
        /* Ready copies count too: after they finish, still refused until one is taken. */
        for (int i = 0; i < 300; i++) {
                struct pollfd p = {.fd = efd, .events = POLLIN};
                if (poll(&p, 1, 100) == 1)
                        dwarf_inflater_collect(w);
                dwarf_inflater_stats(w, &st);
                if (st.inflated == DWARF_INFLATE_JOBS)
                        break;
        }
        check(st.inflated == DWARF_INFLATE_JOBS && st.ready_bytes > 0, "bound: all %d ready (%llu bytes)",
              DWARF_INFLATE_JOBS, (unsigned long long)st.ready_bytes);
        check(dwarf_inflater_get(w, fds[DWARF_INFLATE_JOBS], 64 << 20, true) == -EAGAIN,
              "bound: ready copies count: still refused");
        int copy = dwarf_inflater_get(w, fds[0], 64 << 20, true);
        check(copy >= 0, "bound: one taken");
        if (copy >= 0)
                close(copy);
        check(dwarf_inflater_get(w, fds[DWARF_INFLATE_JOBS], 64 << 20, true) == -EINPROGRESS,
              "bound: then the next is queued");
        dwarf_inflater_stats(w, &st);
        check(st.busy == 2, "bound: 2 refusals counted as busy (%llu)", (unsigned long long)st.busy);
        dwarf_inflater_free(w);
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        check(count_fds() == before, "bound: every descriptor closed at free (%zu before, %zu after)",
              before, count_fds());
}

int main(void)
{
        char dir[] = "/tmp/profd-test-inflate-XXXXXX", src[512], exe[512], cmd[2048];
        const char *libc_debug = NULL;
        FILE *f;

        setvbuf(stdout, NULL, _IOLBF, 0);
        elf_version(EV_CURRENT);
        if (!mkdtemp(dir))
                return 1;
        snprintf(src, sizeof(src), "%s/p.c", dir);
        f = fopen(src, "w");
        fputs(program, f);
        fclose(f);
        snprintf(exe, sizeof(exe), "%s/p", dir);
        snprintf(cmd, sizeof(cmd), "gcc -O1 -g -gz=zlib -o '%s' '%s' && gcc -O1 -g -o '%s/plain' '%s'", exe,
                 src, dir, src);
        if (check(system(cmd) == 0,
                  "built a program with compressed DWARF (gcc -gz=zlib) and one without")) {
                test_file("gcc -gz=zlib", exe);
                test_hostile(dir, exe, src);
                test_thread(dir, exe);
                test_bound(dir, exe);
        }
        /* libc6-dbg (a test dependency): Debian's own compressed debug file. */
        f = popen("f=$(readelf -n /lib/x86_64-linux-gnu/libc.so.6 /lib/aarch64-linux-gnu/libc.so.6 "
                  "2>/dev/null | "
                  "sed -n 's/.*Build ID: "
                  "\\(..\\)\\(.*\\)/\\/usr\\/lib\\/debug\\/.build-id\\/\\1\\/\\2.debug/p' | "
                  "head -1); [ -f \"$f\" ] && echo \"$f\"",
                  "r");
        static char line[512];
        if (f && fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = 0;
                libc_debug = line;
        }
        if (f)
                pclose(f);
        if (libc_debug)
                test_file("libc's debug file", libc_debug);
        else
                check(false, "libc's debug file found (package libc6-dbg)");

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        (void)system(cmd);
        printf("%s: %u failure(s)\n", failures ? "FAIL" : "PASS", failures);
        return failures ? 1 : 0;
}
