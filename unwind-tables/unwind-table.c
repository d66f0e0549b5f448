/* SPDX-License-Identifier: GPL-2.0-only */
/* ELF side of the table builder: finds the CFI sections (in the file and in its separate debug
 * file), the executable segments and the identity, then drives cfi.c and table-builder.c. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "cfi.h"
#include "go-table.h"

/* A compressed .debug_frame is inflated in memory; refuse absurd claimed sizes. */
#define DEBUG_FRAME_MAX_SIZE (256u << 20)

typedef struct ElfInput {
        Elf *elf;
        int fd; /* owned, or -1 */
} ElfInput;

static void elf_input_close(ElfInput *in)
{
        if (in->elf)
                elf_end(in->elf);
        if (in->fd >= 0)
                close(in->fd);
        *in = (ElfInput){.fd = -1};
}

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static char *error_string(const char *name, const CfiError *e)
{
        char *s = NULL;
        if (asprintf(&s, "%s: %s", name, e->msg) < 0)
                return NULL;
        return s;
}

/* A 64-bit little-endian x86-64 or aarch64 file (and of machine `want` unless it is 0). */
static int check_elf(Elf *elf, uint16_t want, CfiError *err, uint16_t *ret_machine)
{
        GElf_Ehdr eh;

        if (elf_kind(elf) != ELF_K_ELF)
                return cfi_fail(err, -EINVAL, "not an ELF file");
        if (!gelf_getehdr(elf, &eh))
                return cfi_fail(err, -EBADMSG, "bad ELF header: %s", elf_errmsg(-1));
        if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
            (eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64))
                return cfi_fail(err, -EOPNOTSUPP, "not an x86-64 or aarch64 ELF file");
        if (want != 0 && eh.e_machine != want)
                return cfi_fail(err, -EOPNOTSUPP, "an %s ELF file, not %s",
                                eh.e_machine == EM_AARCH64 ? "aarch64" : "x86-64",
                                want == EM_AARCH64 ? "aarch64" : "x86-64");
        if (ret_machine)
                *ret_machine = eh.e_machine;
        return 0;
}

/* The GNU build ID among the notes in d (a note section or segment). Returns size, 0 if none. */
static size_t note_build_id(Elf_Data *d, uint8_t id[UNWIND_TABLE_ID_MAX])
{
        size_t off = 0, name_off, desc_off;
        GElf_Nhdr nh;

        while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
                if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                    memcmp((const char *)d->d_buf + name_off, "GNU", 4) == 0 && nh.n_descsz > 0 &&
                    nh.n_descsz <= UNWIND_TABLE_ID_MAX) {
                        memcpy(id, (const char *)d->d_buf + desc_off, nh.n_descsz);
                        return nh.n_descsz;
                }
        }
        return 0;
}

/* GNU build ID from SHT_NOTE sections, else PT_NOTE segments. Returns size, 0 if none. */
static size_t find_build_id(Elf *elf, uint8_t id[UNWIND_TABLE_ID_MAX])
{
        Elf_Scn *scn = NULL;
        size_t phnum = 0;

        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
                        continue;
                Elf_Data *d = elf_getdata(scn, NULL);
                if (!d)
                        continue;
                size_t n = note_build_id(d, id);
                if (n > 0)
                        return n;
        }
        if (elf_getphdrnum(elf, &phnum) < 0)
                return 0;
        for (size_t i = 0; i < phnum; i++) {
                GElf_Phdr ph;
                if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE)
                        continue;
                Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR);
                if (!d)
                        continue;
                size_t n = note_build_id(d, id);
                if (n > 0)
                        return n;
        }
        return 0;
}

/* Streams the file through fn in 1 MiB reads (pread: a file truncated meanwhile is an error,
 * not a SIGBUS as it would be through a mapping). */
static int read_whole_fd(int fd, void (*fn)(void *ctx, const void *data, size_t len), void *ctx)
{
        const size_t chunk = 1u << 20;
        uint8_t *buf = malloc(chunk);
        off_t off = 0;

        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n = pread(fd, buf, chunk, off);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        int r = -errno;
                        free(buf);
                        return r;
                }
                if (n == 0)
                        break;
                fn(ctx, buf, (size_t)n);
                off += n;
        }
        free(buf);
        return 0;
}

static void xxh64_update_cb(void *ctx, const void *data, size_t len)
{
        xxh64_update(ctx, data, len);
}

/* Identity: the GNU build ID, else XXH64 of the whole file followed by its size (16 bytes). The
 * file is read from fd when there is one, else from the in-memory image. */
static int elf_identity(Elf *elf, int fd, uint8_t id[UNWIND_TABLE_ID_MAX], size_t *ret_size,
                        bool *ret_is_hash)
{
        size_t n = find_build_id(elf, id);
        if (n > 0) {
                *ret_size = n;
                *ret_is_hash = false;
                return 0;
        }
        Xxh64 x;
        xxh64_init(&x, 0);
        if (fd >= 0) {
                int r = read_whole_fd(fd, xxh64_update_cb, &x);
                if (r < 0)
                        return r;
        } else {
                size_t size = 0;
                const char *raw = elf_rawfile(elf, &size);
                if (!raw)
                        return -EIO;
                xxh64_update(&x, raw, size);
        }
        uint64_t h = xxh64_digest(&x), sz = x.total;
        memcpy(id, &h, 8);
        memcpy(id + 8, &sz, 8);
        *ret_size = 16;
        *ret_is_hash = true;
        return 0;
}

int unwind_table_identity(int fd, uint8_t ret_id[UNWIND_TABLE_ID_MAX], size_t *ret_size, bool *ret_is_hash)
{
        CfiError err = {};
        int r;

        elf_version(EV_CURRENT);
        Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
        if (!elf)
                return -EBADMSG;
        r = check_elf(elf, 0, &err, NULL);
        if (r >= 0)
                r = elf_identity(elf, fd, ret_id, ret_size, ret_is_hash);
        elf_end(elf);
        return r;
}

static Elf_Scn *find_section(Elf *elf, const char *want, GElf_Shdr *ret_sh)
{
        size_t shstrndx;
        Elf_Scn *scn = NULL;

        if (elf_getshdrstrndx(elf, &shstrndx) < 0)
                return NULL;
        while ((scn = elf_nextscn(elf, scn))) {
                if (!gelf_getshdr(scn, ret_sh))
                        continue;
                const char *n = elf_strptr(elf, shstrndx, ret_sh->sh_name);
                if (n && strcmp(n, want) == 0)
                        return scn;
        }
        return NULL;
}

/* Fills s from section `want` of elf. Returns 1 if found with contents, 0 if absent/empty. */
static int load_section(Elf *elf, const char *want, const char *label, bool is_eh, CfiSection *s,
                        CfiError *err)
{
        GElf_Shdr sh;
        Elf_Scn *scn = find_section(elf, want, &sh);

        if (!scn || sh.sh_type == SHT_NOBITS || sh.sh_size == 0)
                return 0;
        if (sh.sh_flags & SHF_COMPRESSED) {
                GElf_Chdr ch;
                if (!gelf_getchdr(scn, &ch))
                        return cfi_fail(err, -EBADMSG, "%s: bad compression header: %s", label,
                                        elf_errmsg(-1));
                if (ch.ch_size > DEBUG_FRAME_MAX_SIZE)
                        return cfi_fail(err, -EFBIG, "%s: claims %llu bytes uncompressed", label,
                                        (unsigned long long)ch.ch_size);
                if (elf_compress(scn, 0, 0) < 0)
                        return cfi_fail(err, -EBADMSG, "%s: cannot decompress: %s", label, elf_errmsg(-1));
        }
        Elf_Data *d = elf_rawdata(scn, NULL);
        if (!d || (!d->d_buf && d->d_size > 0))
                return cfi_fail(err, -EBADMSG, "%s: cannot read section: %s", label, elf_errmsg(-1));
        if (d->d_size == 0)
                return 0;
        *s = (CfiSection){
                .name = label, .data = d->d_buf, .size = d->d_size, .vaddr = sh.sh_addr, .is_eh = is_eh};
        return 1;
}

static int text_ranges(Elf *elf, TextRanges *t, CfiError *err)
{
        size_t phnum;

        *t = (TextRanges){};
        if (elf_getphdrnum(elf, &phnum) < 0)
                return cfi_fail(err, -EBADMSG, "bad program headers: %s", elf_errmsg(-1));
        for (size_t i = 0; i < phnum; i++) {
                GElf_Phdr ph;
                if (!gelf_getphdr(elf, (int)i, &ph))
                        return cfi_fail(err, -EBADMSG, "bad program header %zu: %s", i, elf_errmsg(-1));
                if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X) || ph.p_memsz == 0)
                        continue;
                if (t->n == sizeof(t->start) / sizeof(t->start[0]))
                        return cfi_fail(err, -E2BIG, "more than %zu executable segments", t->n);
                t->start[t->n] = ph.p_vaddr;
                t->end[t->n] = ph.p_vaddr + ph.p_memsz < ph.p_vaddr ? UINT64_MAX : ph.p_vaddr + ph.p_memsz;
                t->n++;
        }
        if (t->n == 0)
                return cfi_fail(err, -ENOEXEC, "no executable PT_LOAD segment");
        return 0;
}

/* The default way to open a separate debug file: O_NONBLOCK, so that a FIFO put where a debug
 * file is looked for cannot stall the build; only regular files are read. */
static int open_debug_file_default(const char *root, const char *path, void *userdata)
{
        char p[4096 + 256];
        struct stat st;
        int fd;

        (void)userdata;
        if (snprintf(p, sizeof(p), "%s%s", root ?: "", path) >= (int)sizeof(p))
                return -ENAMETOOLONG;
        fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return -ENOENT;
        }
        return fd;
}

static int open_elf(const UnwindTableOptions *opts, const char *root, const char *path, ElfInput *in)
{
        *in = (ElfInput){.fd = -1};
        in->fd = opts->open_debug_file ? opts->open_debug_file(root, path, opts->userdata)
                                       : open_debug_file_default(root, path, NULL);
        if (in->fd < 0)
                return in->fd;
        in->elf = elf_begin(in->fd, ELF_C_READ, NULL);
        if (!in->elf || elf_kind(in->elf) != ELF_K_ELF) {
                elf_input_close(in);
                return -EBADMSG;
        }
        return 0;
}

static void crc32_update_cb(void *ctx, const void *data, size_t len)
{
        uLong *crc = ctx;
        *crc = crc32(*crc, data, (uInt)len); /* len <= 1 MiB */
}

static bool debuglink_crc_matches(int fd, uint32_t want)
{
        uLong crc = crc32(0, Z_NULL, 0);
        return read_whole_fd(fd, crc32_update_cb, &crc) >= 0 && (uint32_t)crc == want;
}

/* Opens the separate debug file: build-id path first, then .gnu_debuglink next to the file, in
 * its .debug/ and under /usr/lib/debug. It must carry the same build ID (or the debuglink CRC). */
static int find_debug_file(Elf *elf, const uint8_t *id, size_t id_size, bool id_is_hash,
                           const UnwindTableOptions *opts, ElfInput *ret, char **ret_path)
{
        const char *root = opts->debug_root && strcmp(opts->debug_root, "/") != 0 ? opts->debug_root : NULL;
        char path[4096];
        int r;

        if (!id_is_hash && id_size >= 2) {
                int n = snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%02x/", id[0]);
                for (size_t i = 1; i < id_size && n > 0 && (size_t)n < sizeof(path) - 3; i++)
                        n += snprintf(path + n, sizeof(path) - (size_t)n, "%02x", id[i]);
                if (n > 0 && (size_t)n < sizeof(path) - 7) {
                        strcpy(path + n, ".debug");
                        r = open_elf(opts, root, path, ret);
                        if (r >= 0) {
                                uint8_t did[UNWIND_TABLE_ID_MAX];
                                if (find_build_id(ret->elf, did) == id_size &&
                                    memcmp(did, id, id_size) == 0) {
                                        if (asprintf(ret_path, "%s%s", root ?: "", path) < 0)
                                                *ret_path = NULL;
                                        return 1;
                                }
                                elf_input_close(ret);
                        }
                }
        }

        GElf_Shdr sh;
        Elf_Scn *scn = find_section(elf, ".gnu_debuglink", &sh);
        if (!scn || !opts->file_path || sh.sh_type == SHT_NOBITS)
                return 0;
        Elf_Data *d = elf_rawdata(scn, NULL);
        if (!d || !d->d_buf || d->d_size < 8)
                return 0;
        const char *name = d->d_buf;
        size_t name_len = strnlen(name, d->d_size);
        size_t crc_off = (name_len + 4) & ~(size_t)3;
        if (name_len == 0 || crc_off + 4 > d->d_size || strchr(name, '/'))
                return 0;
        uint32_t crc;
        memcpy(&crc, (const char *)d->d_buf + crc_off, 4);

        const char *slash = strrchr(opts->file_path, '/');
        const char *dir = slash ? opts->file_path : ".";
        int dir_len = slash ? (int)(slash - opts->file_path) : 1;
        const char *fmts[] = {"%.*s/%.*s", "%.*s/.debug/%.*s", "/usr/lib/debug%.*s/%.*s"};
        for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
                int n = snprintf(path, sizeof(path), fmts[i], dir_len, dir, (int)name_len, name);
                if (n <= 0 || (size_t)n >= sizeof(path))
                        continue;
                r = open_elf(opts, root, path, ret);
                if (r < 0)
                        continue;
                uint8_t did[UNWIND_TABLE_ID_MAX];
                size_t dn = find_build_id(ret->elf, did);
                bool ok = !id_is_hash ? dn == id_size && memcmp(did, id, id_size) == 0
                                      : debuglink_crc_matches(ret->fd, crc);
                if (ok) {
                        if (asprintf(ret_path, "%s%s", root ?: "", path) < 0)
                                *ret_path = NULL;
                        return 1;
                }
                elf_input_close(ret);
        }
        return 0;
}

/* aarch64 linkers write no CFI for .plt/.plt.sec. Their stubs (adrp/ldr/add/br) touch neither
 * sp nor x29/x30, so each gets the plain row: CFA = sp + 0, x29 unchanged, return address in
 * x30. The lazy-binding header at the start of .plt (PLT0: [bti c;] stp x16, x30, [sp, #-16]!;
 * ... br x17) pushes 16 bytes: from its stp on, CFA = sp + 16. */
#define PLT_MAX_RANGES 4
#define A64_PLT0_SIZE 32
#define A64_INSN_BTI_C 0xd503245fu
#define A64_INSN_STP_X16_X30_PRE 0xa9bf7bf0u

typedef struct PltRows {
        size_t n, next;
        uint64_t start[PLT_MAX_RANGES], end[PLT_MAX_RANGES];
        int32_t cfa_offset[PLT_MAX_RANGES];
} PltRows;

static void plt_rows_add(PltRows *plt, uint64_t a, uint64_t e, int32_t cfa_offset)
{
        if (a < e && plt->n < PLT_MAX_RANGES) {
                plt->start[plt->n] = a;
                plt->end[plt->n] = e;
                plt->cfa_offset[plt->n] = cfa_offset;
                plt->n++;
        }
}

static void plt_rows_aarch64(Elf *elf, const TextRanges *text, PltRows *plt)
{
        static const char *const names[] = {".plt", ".plt.sec"};

        *plt = (PltRows){};
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                GElf_Shdr sh;
                Elf_Scn *scn = find_section(elf, names[i], &sh);
                if (!scn || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_EXECINSTR) ||
                    sh.sh_addr + sh.sh_size < sh.sh_addr ||
                    !text_ranges_contain(text, sh.sh_addr, sh.sh_addr + sh.sh_size))
                        continue;
                uint64_t a = sh.sh_addr, e = sh.sh_addr + sh.sh_size;
                Elf_Data *d = i == 0 && sh.sh_size >= A64_PLT0_SIZE ? elf_rawdata(scn, NULL) : NULL;
                uint32_t insn[2] = {};
                if (d && d->d_buf && d->d_size >= A64_PLT0_SIZE)
                        memcpy(insn, d->d_buf, sizeof(insn));
                unsigned stp = insn[0] == A64_INSN_STP_X16_X30_PRE                                ? 0
                               : insn[0] == A64_INSN_BTI_C && insn[1] == A64_INSN_STP_X16_X30_PRE ? 1
                                                                                                  : 2;
                if (stp < 2) {
                        plt_rows_add(plt, a, a + 4 * (stp + 1), 0);
                        plt_rows_add(plt, a + 4 * (stp + 1), a + A64_PLT0_SIZE, 16);
                        a += A64_PLT0_SIZE;
                }
                plt_rows_add(plt, a, e, 0);
        }
        /* the builder takes intervals in address order */
        for (size_t i = 1; i < plt->n; i++)
                for (size_t j = i; j > 0 && plt->start[j - 1] > plt->start[j]; j--) {
                        uint64_t ts = plt->start[j], te = plt->end[j];
                        int32_t to = plt->cfa_offset[j];
                        plt->start[j] = plt->start[j - 1];
                        plt->end[j] = plt->end[j - 1];
                        plt->cfa_offset[j] = plt->cfa_offset[j - 1];
                        plt->start[j - 1] = ts;
                        plt->end[j - 1] = te;
                        plt->cfa_offset[j - 1] = to;
                }
}

/* Feeds the PLT rows that start below pc (the next FDE's start) to the builder. */
static int plt_rows_emit(PltRows *plt, uint64_t pc, TableBuilder *b)
{
        for (; plt->next < plt->n && plt->start[plt->next] < pc; plt->next++) {
                struct profd_unwind_rule rule = {.cfa_kind = PROFD_CFA_RSP,
                                                 .cfa_offset = plt->cfa_offset[plt->next]};
                int r = builder_interval(b, plt->start[plt->next], plt->end[plt->next], &rule, UNSUP_NONE);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int cmp_fde(const void *a, const void *b)
{
        const FdeRef *x = a, *y = b;
        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        if (x->section != y->section)
                return x->section < y->section ? -1 : 1;
        return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static bool fdes_sorted(const FdeRef *f, size_t n)
{
        for (size_t i = 1; i < n; i++)
                if (cmp_fde(&f[i - 1], &f[i]) > 0)
                        return false;
        return true;
}

static int build(Elf *elf, int fd, const UnwindTableOptions *opts, UnwindTable *t, CfiError *err)
{
        static const UnwindTableOptions default_opts = {};
        CfiSection sections[CFI_MAX_SECTIONS];
        uint32_t n_sections = 0;
        ElfInput dbg = {.fd = -1};
        TextRanges text;
        FdeRef *fdes = NULL;
        size_t n_fdes = 0, cap_fdes = 0;
        TableBuilder *b = NULL;
        int r;

        if (!opts)
                opts = &default_opts;
        r = check_elf(elf, opts->machine, err, &t->machine);
        if (r < 0)
                return r;
        r = elf_identity(elf, fd, t->id, &t->id_size, &t->id_is_hash);
        if (r < 0)
                return cfi_fail(err, r, "cannot read file contents");
        r = text_ranges(elf, &text, err);
        if (r < 0)
                return r;
        size_t shnum;
        if (elf_getshdrnum(elf, &shnum) < 0)
                return cfi_fail(err, -EBADMSG, "bad section headers: %s", elf_errmsg(-1));
        if (shnum == 0)
                return cfi_fail(err, -ENODATA, "no section headers (truncated or stripped of them?)");

        /* A Go binary: rows from the runtime's own pc -> frame size table (go-table.c), which
         * stripped Go binaries keep and which also knows where Go switches stacks. */
        GoPclntab go;
        r = gopclntab_open(elf, &go);
        if (r < 0)
                return cfi_fail(err, r, "bad section headers: %s", elf_errmsg(-1));
        if (r > 0) {
                b = builder_new(&t->stats, err, go.nfunc * 4,
                                opts->max_table_bytes ? opts->max_table_bytes
                                                      : UNWIND_TABLE_MAX_BYTES_DEFAULT);
                if (!b)
                        return cfi_fail(err, -ENOMEM, "out of memory");
                t->stats.fdes = go.nfunc;
                r = go_table_rows(&go, elf, &text, t->machine == EM_AARCH64, b, err);
                if (r >= 0)
                        r = builder_finish(b, t);
                t->stats.peak_bytes = builder_peak_bytes(b);
                goto out;
        }

        /* Order = precedence where FDEs overlap: .eh_frame is what the runtime itself uses. */
        r = load_section(elf, ".eh_frame", ".eh_frame", true, &sections[n_sections], err);
        if (r < 0)
                return r;
        n_sections += r;
        r = load_section(elf, ".debug_frame", ".debug_frame", false, &sections[n_sections], err);
        if (r < 0)
                return r;
        bool have_debug_frame = r > 0;
        n_sections += r;
        if (!have_debug_frame && opts->use_debug_file &&
            find_debug_file(elf, t->id, t->id_size, t->id_is_hash, opts, &dbg, &t->debug_file) > 0) {
                r = load_section(dbg.elf, ".debug_frame", "debug file .debug_frame", false,
                                 &sections[n_sections], err);
                if (r < 0)
                        goto out;
                n_sections += r;
        }
        if (n_sections == 0) {
                r = cfi_fail(err, -ENODATA, "no .eh_frame or .debug_frame");
                goto out;
        }

        struct CieCacheEntry *cache = cfi_cie_cache_new();
        if (!cache) {
                r = cfi_fail(err, -ENOMEM, "out of memory");
                goto out;
        }
        CfiParser p = {.sections = sections,
                       .n_sections = n_sections,
                       .text = &text,
                       .err = err,
                       .stats = &t->stats,
                       .machine = t->machine == EM_AARCH64 ? CFI_AARCH64 : CFI_X86_64,
                       .cie_cache = cache};
        size_t cfi_bytes = 0;
        for (uint32_t i = 0; i < n_sections; i++)
                cfi_bytes += sections[i].size;
        /* every byte once, plus CIE initial instructions re-run on cache misses */
        p.work_limit = 4 * (uint64_t)cfi_bytes + (1u << 20);

        /* With .eh_frame alone and a sound .eh_frame_hdr, its table is the sorted FDE list: no
         * list to allocate and sort. It must list every FDE record, or it is not used. */
        EhFrameHdr hdr = {};
        bool use_hdr = false;
        if (n_sections == 1 && sections[0].is_eh) {
                CfiSection hdr_section;
                size_t n_records = 0;
                r = load_section(elf, ".eh_frame_hdr", ".eh_frame_hdr", true, &hdr_section, err);
                if (r < 0)
                        goto out_cache;
                if (r > 0 && cfi_eh_frame_hdr(&p, &hdr_section, 0, &hdr) > 0) {
                        r = cfi_count_records(&p, 0, &n_records);
                        if (r < 0)
                                goto out_cache;
                        use_hdr = n_records == hdr.count;
                        if (!use_hdr)
                                t->stats.cies = 0; /* counted again below */
                }
        }
        if (!use_hdr) {
                for (uint32_t i = 0; i < n_sections; i++) {
                        r = cfi_collect_fdes(&p, i, &fdes, &n_fdes, &cap_fdes);
                        if (r < 0)
                                goto out_cache;
                }
                if (!fdes_sorted(fdes, n_fdes))
                        qsort(fdes, n_fdes, sizeof(*fdes), cmp_fde);
        }
        t->stats.eh_frame_hdr_used = use_hdr;

        /* ~5 bytes of CFI per row in GCC/Clang output; a good first guess avoids most regrowth */
        b = builder_new(&t->stats, err, cfi_bytes / 5,
                        opts->max_table_bytes ? opts->max_table_bytes : UNWIND_TABLE_MAX_BYTES_DEFAULT);
        if (!b) {
                r = cfi_fail(err, -ENOMEM, "out of memory");
                goto out_cache;
        }
        GElf_Ehdr eh;
        if (gelf_getehdr(elf, &eh) && eh.e_entry && text_ranges_contain(&text, eh.e_entry, eh.e_entry + 1))
                builder_set_entry(b, eh.e_entry);
        PltRows plt = {};
        if (t->machine == EM_AARCH64)
                plt_rows_aarch64(elf, &text, &plt);
        if (use_hdr) {
                p.count_in_run = true;
                for (size_t i = 0; i < hdr.count; i++) {
                        FdeRef f;
                        cfi_eh_frame_hdr_entry(&hdr, &sections[0], i, &f);
                        r = plt_rows_emit(&plt, f.start, b);
                        if (r >= 0)
                                r = cfi_run_fde(&p, &f, b);
                        if (r < 0)
                                goto out_cache;
                }
        } else
                for (size_t i = 0; i < n_fdes; i++) {
                        r = plt_rows_emit(&plt, fdes[i].start, b);
                        if (r >= 0)
                                r = cfi_run_fde(&p, &fdes[i], b);
                        if (r < 0)
                                goto out_cache;
                }
        r = plt_rows_emit(&plt, UINT64_MAX, b);
        if (r < 0)
                goto out_cache;
        r = builder_finish(b, t);
        t->stats.peak_bytes = builder_peak_bytes(b) + cap_fdes * sizeof(FdeRef);
out_cache:
        free(cache);
out:
        builder_free(b);
        free(fdes);
        elf_input_close(&dbg);
        return r;
}

UnwindTable *unwind_table_free(UnwindTable *t)
{
        if (!t)
                return NULL;
        free(t->page_index);
        free(t->rows);
        free(t->rules);
        free(t->debug_file);
        free(t);
        return NULL;
}

static int build_table(Elf *elf, int fd, uint64_t t0, const char *name, const UnwindTableOptions *opts,
                       UnwindTable **ret, char **ret_error)
{
        CfiError err = {};
        int r;

        UnwindTable *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        r = build(elf, fd, opts, t, &err);
        if (r < 0) {
                if (err.r == 0)
                        cfi_fail(&err, r, "%s", strerror(-r));
                if (ret_error)
                        *ret_error = error_string(name, &err);
                unwind_table_free(t);
                return r;
        }
        t->stats.build_ns = now_ns() - t0;
        *ret = t;
        return 0;
}

int unwind_table_build_elf(Elf *elf, const char *name, const UnwindTableOptions *opts, UnwindTable **ret,
                           char **ret_error)
{
        if (ret_error)
                *ret_error = NULL;
        return build_table(elf, -1, now_ns(), name, opts, ret, ret_error);
}

int unwind_table_build_fd(int fd, const char *name, const UnwindTableOptions *opts, UnwindTable **ret,
                          char **ret_error)
{
        CfiError err = {};
        uint64_t t0 = now_ns();
        int r;

        if (ret_error)
                *ret_error = NULL;
        elf_version(EV_CURRENT);
        /* ELF_C_READ, not a mapping: sections are pread into memory, so a file truncated while it
         * is read (another process can do that to a library it maps) is an error, not a SIGBUS. */
        Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
        if (!elf) {
                cfi_fail(&err, -EBADMSG, "cannot read ELF: %s", elf_errmsg(-1));
                if (ret_error)
                        *ret_error = error_string(name, &err);
                return -EBADMSG;
        }
        r = build_table(elf, fd, t0, name, opts, ret, ret_error);
        elf_end(elf);
        return r;
}

int unwind_table_build_path(const char *path, const UnwindTableOptions *opts, UnwindTable **ret,
                            char **ret_error)
{
        CfiError err = {};
        int r;

        if (ret_error)
                *ret_error = NULL;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                r = -errno;
                cfi_fail(&err, r, "cannot open: %s", strerror(-r));
                if (ret_error)
                        *ret_error = error_string(path, &err);
                return r;
        }
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                r = -EBADF;
                cfi_fail(&err, r, "not a regular file");
                if (ret_error)
                        *ret_error = error_string(path, &err);
                close(fd);
                return r;
        }
        r = unwind_table_build_fd(fd, path, opts, ret, ret_error);
        close(fd);
        return r;
}

int unwind_table_lookup(const UnwindTable *t, uint64_t pc, struct profd_unwind_rule *ret_rule)
{
        if (!t || t->n_rows == 0 || pc < t->base)
                return -ENOENT;
        uint64_t page = (pc - t->base) >> PROFD_UT_PAGE_SHIFT;
        if (page >= t->n_pages)
                return -ENOENT;
        uint32_t lo = t->page_index[page], hi = t->page_index[page + 1];
        uint16_t low = (uint16_t)pc;
        if (lo >= hi || t->rows[lo].pc_low > low)
                return -ENOENT;
        /* last row with pc_low <= low */
        while (hi - lo > 1) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (t->rows[mid].pc_low <= low)
                        lo = mid;
                else
                        hi = mid;
        }
        *ret_rule = t->rules[t->rows[lo].rule];
        return 0;
}

int unwind_table_validate(const UnwindTable *t)
{
        if (!t || t->n_pages == 0 || !t->page_index || !t->rows || !t->rules)
                return -EUCLEAN;
        if (t->page_index[0] != 0 || t->page_index[t->n_pages] != t->n_rows ||
            t->n_rules > PROFD_UT_MAX_RULES)
                return -EUCLEAN;
        if (t->base & (PROFD_UT_PAGE_SIZE - 1))
                return -EUCLEAN;
        for (uint32_t p = 0; p < t->n_pages; p++) {
                uint32_t lo = t->page_index[p], hi = t->page_index[p + 1];
                if (lo >= hi || hi > t->n_rows)
                        return -EUCLEAN;
                if (p > 0 && t->rows[lo].pc_low != 0)
                        return -EUCLEAN;
                for (uint32_t i = lo; i < hi; i++) {
                        if (t->rows[i].rule >= t->n_rules)
                                return -EUCLEAN;
                        if (i > lo && t->rows[i].pc_low <= t->rows[i - 1].pc_low)
                                return -EUCLEAN;
                }
        }
        /* the last row ends the table */
        if (t->rules[t->rows[t->n_rows - 1].rule].cfa_kind != PROFD_CFA_END)
                return -EUCLEAN;
        return 0;
}

size_t unwind_table_bytes(const UnwindTable *t)
{
        if (!t)
                return 0;
        return ((size_t)t->n_pages + 1) * sizeof(uint32_t) +
               (size_t)t->n_rows * sizeof(struct profd_unwind_row) +
               (size_t)t->n_rules * sizeof(struct profd_unwind_rule);
}

/* XXH64 (Yann Collet's xxHash, 64-bit variant): content identity for files without a build ID. */
#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static inline uint64_t rotl64(uint64_t x, int r)
{
        return (x << r) | (x >> (64 - r));
}

static inline uint64_t xxh_round(uint64_t acc, uint64_t in)
{
        acc += in * P2;
        acc = rotl64(acc, 31);
        return acc * P1;
}

static inline uint64_t xxh_merge(uint64_t acc, uint64_t v)
{
        acc ^= xxh_round(0, v);
        return acc * P1 + P4;
}

static inline uint64_t rd64(const uint8_t *p)
{
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
}

void xxh64_init(Xxh64 *x, uint64_t seed)
{
        *x = (Xxh64){.v = {seed + P1 + P2, seed + P2, seed, seed - P1}, .seed = seed};
}

static inline void xxh_stripe(Xxh64 *x, const uint8_t *p)
{
        x->v[0] = xxh_round(x->v[0], rd64(p));
        x->v[1] = xxh_round(x->v[1], rd64(p + 8));
        x->v[2] = xxh_round(x->v[2], rd64(p + 16));
        x->v[3] = xxh_round(x->v[3], rd64(p + 24));
}

void xxh64_update(Xxh64 *x, const void *data, size_t len)
{
        const uint8_t *p = data, *end = p + len;

        x->total += len;
        if (x->buf_len > 0) {
                size_t n = 32 - x->buf_len < len ? 32 - x->buf_len : len;
                memcpy(x->buf + x->buf_len, p, n);
                x->buf_len += n;
                p += n;
                if (x->buf_len < 32)
                        return;
                xxh_stripe(x, x->buf);
                x->buf_len = 0;
        }
        while (end - p >= 32) {
                xxh_stripe(x, p);
                p += 32;
        }
        memcpy(x->buf, p, (size_t)(end - p));
        x->buf_len = (size_t)(end - p);
}

uint64_t xxh64_digest(const Xxh64 *x)
{
        const uint8_t *p = x->buf, *end = p + x->buf_len;
        uint64_t h;

        if (x->total >= 32) {
                h = rotl64(x->v[0], 1) + rotl64(x->v[1], 7) + rotl64(x->v[2], 12) + rotl64(x->v[3], 18);
                for (int i = 0; i < 4; i++)
                        h = xxh_merge(h, x->v[i]);
        } else
                h = x->seed + P5;
        h += x->total;
        while (p + 8 <= end) {
                h ^= xxh_round(0, rd64(p));
                h = rotl64(h, 27) * P1 + P4;
                p += 8;
        }
        if (p + 4 <= end) {
                uint32_t v;
                memcpy(&v, p, 4);
                h ^= (uint64_t)v * P1;
                h = rotl64(h, 23) * P2 + P3;
                p += 4;
        }
        while (p < end) {
                h ^= (*p++) * P5;
                h = rotl64(h, 11) * P1;
        }
        h ^= h >> 33;
        h *= P2;
        h ^= h >> 29;
        h *= P3;
        h ^= h >> 32;
        return h;
}

uint64_t xxh64(const void *data, size_t len, uint64_t seed)
{
        Xxh64 x;
        xxh64_init(&x, seed);
        xxh64_update(&x, data, len);
        return xxh64_digest(&x);
}
