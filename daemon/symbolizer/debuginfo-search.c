/* SPDX-License-Identifier: GPL-2.0-only */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "symbolizer/debuginfo-search.h"
#include "symbolizer/dwarf-inflate.h"
#include "util/macro.h"
#include "util/safe-open.h"

#define DEFAULT_DEBUGINFO_PATH ":.debug:/usr/lib/debug"
#define MAX_ID 64

void debuginfo_search_attach(DebuginfoSearch *ds, Dwfl_Module *mod)
{
        void **userdata = NULL;
        GElf_Addr bias;
        GElf_Word crc;

        if (!dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL) || !userdata)
                return;
        *userdata = ds;
        ds->main_elf = dwfl_module_getelf(mod, &bias);
        /* libdwfl passes this very pointer for the main file's lookup; any other name is the dwz
         * file's (.gnu_debugaltlink). */
        ds->main_debuglink = ds->main_elf ? dwelf_elf_gnu_debuglink(ds->main_elf, &crc) : NULL;
}

void debuginfo_search_done(DebuginfoSearch *ds)
{
        ds->root = mfree(ds->root);
}

int debuginfo_search_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                              char **file_name, Elf **elfp)
{
        return -1;
}

/* The build ID that follows the file name in .gnu_debugaltlink. */
static size_t elf_altlink_id(Elf *elf, uint8_t id[MAX_ID])
{
        size_t shstrndx;
        Elf_Scn *scn = NULL;

        if (!elf || elf_getshdrstrndx(elf, &shstrndx) < 0)
                return 0;
        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                const char *name;
                Elf_Data *d;
                size_t len;

                if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
                    !(name = elf_strptr(elf, shstrndx, sh.sh_name)) ||
                    strcmp(name, ".gnu_debugaltlink") != 0)
                        continue;
                d = elf_rawdata(scn, NULL);
                if (!d || !d->d_buf)
                        return 0;
                len = strnlen(d->d_buf, d->d_size);
                if (len + 1 >= d->d_size || d->d_size - len - 1 > MAX_ID)
                        return 0;
                memcpy(id, (const char *)d->d_buf + len + 1, d->d_size - len - 1);
                return d->d_size - len - 1;
        }
        return 0;
}

size_t debuginfo_elf_altlink_id(Elf *elf, uint8_t id[64])
{
        return elf_altlink_id(elf, id);
}

bool debuginfo_elf_has_dwarf(Elf *elf)
{
        size_t shstrndx;
        Elf_Scn *scn = NULL;

        if (!elf || elf_getshdrstrndx(elf, &shstrndx) < 0)
                return false;
        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                const char *name;

                if (gelf_getshdr(scn, &sh) && sh.sh_type != SHT_NOBITS &&
                    (name = elf_strptr(elf, shstrndx, sh.sh_name)) && strcmp(name, ".debug_info") == 0)
                        return true;
        }
        return false;
}

static bool crc_matches(int fd, uint32_t want)
{
        _cleanup_free_ uint8_t *buf = malloc(1 << 20);
        uLong crc = crc32(0, Z_NULL, 0);
        off_t off = 0;
        ssize_t n;

        if (!buf)
                return false;
        while ((n = pread(fd, buf, 1 << 20, off)) > 0) {
                crc = crc32(crc, buf, (uInt)n);
                off += n;
        }
        return n == 0 && (uint32_t)crc == want;
}

typedef struct Want {
        const uint8_t *id; /* build ID the file must carry */
        size_t id_size;
        bool check_crc; /* else: .gnu_debuglink CRC */
        uint32_t crc;
        bool alt;
} Want;

static bool in_debuginfod_cache(const DebuginfoSearch *ds, const char *root, const char *path)
{
        size_t n = ds->debuginfod_dir ? strlen(ds->debuginfod_dir) : 0;

        return !root && n > 0 && strncmp(path, ds->debuginfod_dir, n) == 0 && path[n] == '/';
}

/* Opens and checks one candidate; its descriptor, or -1. */
static int try_candidate(DebuginfoSearch *ds, const char *root, const char *path, const Want *w,
                         char **ret_name)
{
        _cleanup_close_ int fd = -1;
        struct stat st;
        const void *bid = NULL;
        ssize_t n;
        bool ok;
        Elf *elf;

        fd = safe_open_in_root(root, path, &st);
        if (fd < 0)
                return -1;
        /* The main file by another name (a debuglink naming itself). */
        if (st.st_dev == ds->main_dev && st.st_ino == ds->main_ino)
                return -1;
        /* The dwz file is read by libdw after we return: only one nobody but root (or profd
         * itself, in its debuginfod cache) can change (a file truncated meanwhile could leave
         * libdw without it, looking for it itself). */
        if (w->alt &&
            ((st.st_uid != 0 && !(st.st_uid == geteuid() && in_debuginfod_cache(ds, root, path))) ||
             (st.st_mode & (S_IWGRP | S_IWOTH))))
                return -1;
        /* pread-based (not mmap): the file is someone else's and may change under us. */
        elf = elf_begin(fd, ELF_C_READ, NULL);
        if (!elf)
                return -1;
        if (elf_kind(elf) != ELF_K_ELF)
                ok = false;
        else if (w->id_size > 0)
                ok = (n = dwelf_elf_gnu_build_id(elf, &bid)) > 0 && (size_t)n == w->id_size &&
                     memcmp(bid, w->id, w->id_size) == 0;
        else
                ok = w->check_crc && crc_matches(fd, w->crc);
        if (ok && w->alt) {
                /* libdwfl must manage to use it, or libdw goes looking for it itself. */
                Dwarf *dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
                ok = dw != NULL;
                dwarf_end(dw);
        } else if (ok)
                ds->alt_id_size = elf_altlink_id(elf, ds->alt_id);
        elf_end(elf);
        if (!ok)
                return -1;
        *ret_name = strdup(path);
        if (!*ret_name)
                return -1;
        return TAKE_FD(fd);
}

/* Calls try_candidate() on every root: profd's, then the process's. */
static int try_roots(DebuginfoSearch *ds, const char *path, const Want *w, char **ret_name)
{
        int fd = try_candidate(ds, NULL, path, w, ret_name);
        if (fd < 0 && ds->root)
                fd = try_candidate(ds, ds->root, path, w, ret_name);
        return fd;
}

/* DIR/.build-id/xx/rest.debug for every absolute directory of the path. */
static int find_by_build_id(DebuginfoSearch *ds, const Want *w, char **ret_name)
{
        _cleanup_free_ char *list = strdup(ds->path ?: DEFAULT_DEBUGINFO_PATH);
        char *p = list, *e;

        if (!list || w->id_size < 2)
                return -1;
        while ((e = strsep(&p, ":"))) {
                char path[PATH_MAX];
                int n, fd;

                e += strspn(e, "+-");
                if (e[0] != '/')
                        continue;
                n = snprintf(path, sizeof(path), "%s/.build-id/%02x/", e, w->id[0]);
                for (size_t i = 1; i < w->id_size && n > 0 && (size_t)n < sizeof(path) - 3; i++)
                        n += snprintf(path + n, sizeof(path) - (size_t)n, "%02x", w->id[i]);
                if (n <= 0 || (size_t)n + sizeof(".debug") > sizeof(path))
                        continue;
                strcpy(path + n, ".debug");
                fd = try_roots(ds, path, w, ret_name);
                if (fd >= 0)
                        return fd;
        }
        return -1;
}

/* DIR/HEXID/debuginfo in profd's debuginfod cache (debuginfod-fetch.h), in profd's root only. */
static int find_in_debuginfod_cache(DebuginfoSearch *ds, const Want *w, char **ret_name)
{
        char path[PATH_MAX];
        int n;

        if (!ds->debuginfod_dir || w->id_size == 0)
                return -1;
        n = snprintf(path, sizeof(path), "%s/", ds->debuginfod_dir);
        for (size_t i = 0; i < w->id_size && n > 0 && (size_t)n < sizeof(path) - 3; i++)
                n += snprintf(path + n, sizeof(path) - (size_t)n, "%02x", w->id[i]);
        if (n <= 0 || (size_t)n + sizeof("/debuginfo") > sizeof(path))
                return -1;
        strcpy(path + n, "/debuginfo");
        return try_candidate(ds, NULL, path, w, ret_name);
}

/* .gnu_debuglink: next to the file, in its .debug/ (relative entries), under absolute entries. */
static int find_by_debuglink(DebuginfoSearch *ds, const char *file_name, const char *link, const Want *w,
                             char **ret_name)
{
        _cleanup_free_ char *list = strdup(ds->path ?: DEFAULT_DEBUGINFO_PATH);
        const char *slash = file_name ? strrchr(file_name, '/') : NULL;
        char *p = list, *e;
        int dir_len;

        if (!list || !slash || file_name[0] != '/' || !link || !link[0] || strchr(link, '/'))
                return -1;
        dir_len = (int)(slash - file_name);
        while ((e = strsep(&p, ":"))) {
                char path[PATH_MAX];
                int n, fd;

                e += strspn(e, "+-");
                if (e[0] == 0)
                        n = snprintf(path, sizeof(path), "%.*s/%s", dir_len, file_name, link);
                else if (e[0] != '/')
                        n = snprintf(path, sizeof(path), "%.*s/%s/%s", dir_len, file_name, e, link);
                else
                        n = snprintf(path, sizeof(path), "%s%.*s/%s", e, dir_len, file_name, link);
                if (n <= 0 || (size_t)n >= sizeof(path))
                        continue;
                fd = try_roots(ds, path, w, ret_name);
                if (fd >= 0)
                        return fd;
        }
        return -1;
}

/* Which file libdwfl got: libelf maps it whole, and the symbolizer counts its resident part. */
static void remember_file(MemoryFile *f, int fd)
{
        struct stat st;

        if (fd >= 0 && fstat(fd, &st) == 0)
                *f = (MemoryFile){.dev = st.st_dev, .ino = st.st_ino, .size = (uint64_t)st.st_size};
}

int debuginfo_search_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                                    const char *file_name, const char *debuglink_file,
                                    GElf_Word debuglink_crc, char **debuginfo_file_name)
{
        DebuginfoSearch *ds = userdata ? *userdata : NULL;
        uint8_t alt_id[MAX_ID];
        const void *bid = NULL;
        Want w = {};
        ssize_t n;
        int fd;

        /* Left NULL unless we return a descriptor: given a name, libdwfl would open() it itself. */
        *debuginfo_file_name = NULL;
        if (!ds)
                return -1;
        if (debuglink_file && debuglink_file != ds->main_debuglink) {
                /* The dwz file named by the DWARF's .gnu_debugaltlink: by its build ID, then its
                 * name (absolute, or next to the file holding the DWARF). */
                w.alt = true;
                if (ds->debug_given) {
                        w.id = ds->alt_id;
                        w.id_size = ds->alt_id_size;
                } else {
                        w.id_size = elf_altlink_id(ds->main_elf, alt_id);
                        w.id = alt_id;
                }
                if (w.id_size == 0)
                        return -1;
                fd = find_by_build_id(ds, &w, debuginfo_file_name);
                if (fd < 0)
                        fd = find_in_debuginfod_cache(ds, &w, debuginfo_file_name);
                if (fd < 0 && debuglink_file[0] == '/')
                        fd = try_roots(ds, debuglink_file, &w, debuginfo_file_name);
                else if (fd < 0 && file_name && strrchr(file_name, '/')) {
                        char path[PATH_MAX];
                        int len = (int)(strrchr(file_name, '/') - file_name);
                        if (snprintf(path, sizeof(path), "%.*s/%s", len, file_name, debuglink_file) <
                            (int)sizeof(path))
                                fd = try_roots(ds, path, &w, debuginfo_file_name);
                }
                ds->alt_given = fd >= 0;
                remember_file(&ds->files[DEBUGINFO_FILE_ALT], fd);
                return fd;
        }
        n = ds->main_elf ? dwelf_elf_gnu_build_id(ds->main_elf, &bid) : -1;
        if (n > 0 && n <= MAX_ID) {
                w.id = bid;
                w.id_size = (size_t)n;
        } else {
                /* No build ID: only a debuglink CRC can tell the right file (libdwfl would take
                 * any file of that name). */
                w.check_crc = debuglink_crc != 0;
                w.crc = debuglink_crc;
                if (!w.check_crc)
                        return -1;
        }
        ds->alt_id_size = 0;
        fd = find_by_build_id(ds, &w, debuginfo_file_name);
        if (fd < 0)
                fd = find_by_debuglink(ds, file_name, debuglink_file, &w, debuginfo_file_name);
        if (fd < 0)
                fd = find_in_debuginfod_cache(ds, &w, debuginfo_file_name);
        if (fd >= 0) {
                Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);

                ds->debug_dwarf_bytes = debuginfo_dwarf_inflated_bytes(elf);
                elf_end(elf);
                if (ds->max_dwarf_bytes > 0 && ds->debug_dwarf_bytes > ds->max_dwarf_bytes) {
                        /* Asked for DWARF only (a symbol table would have found it earlier). */
                        close(fd);
                        free(*debuginfo_file_name);
                        *debuginfo_file_name = NULL;
                        ds->refused_large = true;
                        return -1;
                }
                ds->inflated =
                        dwarf_inflater_swap(ds->inflater, &fd, ds->debug_dwarf_bytes, ds->inflate_max_bytes,
                                            ds->inflate_queue && *ds->inflate_queue, &ds->inflate_pending);
        }
        ds->debug_given = fd >= 0;
        remember_file(&ds->files[DEBUGINFO_FILE_DEBUG], fd);
        return fd;
}

uint64_t debuginfo_dwarf_inflated_bytes(Elf *elf)
{
        const Elf64_Ehdr *eh;
        size_t size, shstrndx;
        const char *raw = elf ? elf_rawfile(elf, &size) : NULL;
        uint64_t sum = 0;

        if (!raw || size < sizeof(*eh) || elf_getshdrstrndx(elf, &shstrndx) < 0)
                return 0;
        eh = (const Elf64_Ehdr *)raw;
        if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
            eh->e_shoff > size || (size - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum)
                return 0;
        for (size_t i = 1; i < eh->e_shnum; i++) {
                const Elf64_Shdr *sh = (const Elf64_Shdr *)(raw + eh->e_shoff) + i;
                const char *name = elf_strptr(elf, shstrndx, sh->sh_name);
                Elf64_Chdr ch;

                if (!(sh->sh_flags & SHF_COMPRESSED) || !name || strncmp(name, ".debug_", 7) != 0 ||
                    sh->sh_offset > size || size - sh->sh_offset < sizeof(ch))
                        continue;
                memcpy(&ch, raw + sh->sh_offset, sizeof(ch));
                sum += ch.ch_size;
        }
        return sum;
}

const char *debuginfo_search_dwarf_unsafe(const DebuginfoSearch *ds, Dwarf *dw)
{
        const char *altname;
        const void *id;
        Dwarf_CU *cu = NULL;
        uint8_t unit_type;

        if (dwelf_dwarf_gnu_debugaltlink(dw, &altname, &id) > 0 && !ds->alt_given)
                return "dwz_file_missing";
        /* Headers only: asking for the split unit's DIE is what would open the .dwo. */
        while (dwarf_get_units(dw, cu, &cu, NULL, &unit_type, NULL, NULL) == 0)
                if (unit_type == DW_UT_skeleton)
                        return "split_dwarf";
        return NULL;
}
