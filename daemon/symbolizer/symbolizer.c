/* SPDX-License-Identifier: GPL-2.0-only */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "symbolizer/debuginfo-search.h"
#include "unwind-tables/gopclntab.h"
#include "util/hash.h"
#include "util/log.h"
#include "runtimes/perf-map.h"
#include "bpf/profd-python.h"
#include "symbolizer/symbolizer.h"
#include "util/time-util.h"

/* Executables with an open Dwfl at once; the least recently used is closed beyond this.
 * Each holds a mapping of the file plus whatever DWARF was parsed from it. */
#define SYMBOLIZER_MAX_EXES 128
/* Inline depth reported per address; deeper chains keep the innermost frames and the outer
 * function (real code rarely exceeds ~20). */
#define SYMBOLIZER_MAX_INLINE 64
/* An executable that could not be opened is not retried for this long. */
#define SYMBOLIZER_RETRY_NS (30 * NSEC_PER_SEC)
/* Resolved addresses remembered across profiles (direct-mapped, a colliding entry replaces the
 * old one): repeated scrapes of a busy host mostly ask for the same addresses again. Entries
 * hold a copy of their frames, ~100-300 bytes each. */
#define SYMBOLIZER_CACHE_SLOTS 32768
/* kallsyms changes when modules load (checked through /proc/modules every
 * MODULES_CHECK_NS) and, for BPF programs and trampolines, without a trace there: reread it
 * then, and at least every KALLSYMS_MAX_AGE_NS. A reread costs ~50-100 ms (the kernel formats
 * ~100k lines), so not more often. */
#define KALLSYMS_MAX_AGE_NS (300 * NSEC_PER_SEC)
#define MODULES_CHECK_NS (10 * NSEC_PER_SEC)

/* Itanium C++ ABI demangler from libstdc++ (also handles Rust's legacy mangling). elfutils has
 * none of its own. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

typedef struct ExeSym {
        uint64_t addr, size;
        const char *name; /* points into the Dwfl's ELF data */
} ExeSym;

/* Address range of a compilation unit, for files without .debug_aranges (clang does not emit
 * them by default, and libdw 0.188 then finds no CU for an address). */
typedef struct CuRange {
        Dwarf_Addr low, high;
        Dwarf_Die cu;
} CuRange;

/* .plt, .plt.sec, .plt.got, .plt.bnd, .iplt (one of each at most in a linked file). */
#define EXE_MAX_PLT_SECTIONS 8
/* Relocations read to name PLT entries, per file: bounds the work on hostile files (a big
 * program has a few thousand JUMP_SLOTs; .rela.dyn, read only for .plt.got, can be larger). */
#define PLT_MAX_RELOCS (1u << 21)

/* Most CU ranges indexed per executable: bounds memory for hostile or gigantic DWARF. */
#define SYMBOLIZER_MAX_CU_RANGES (1u << 20)

typedef struct Exe {
        char *identity;
        uint64_t hash;
        Dwfl *dwfl;
        Dwfl_Module *mod;
        uint64_t last_use;
        uint64_t failed_ns; /* open failed at this time (CLOCK_MONOTONIC) */
        /* Function symbols sorted by address: dwfl_module_addrinfo scans every symbol per
         * lookup, which dominates symbolization of large profiles. */
        ExeSym *syms;
        size_t n_syms;
        bool syms_loaded;
        uint64_t id; /* unique per open: cache entries of an evicted Exe never match again */
        /* Separate debug files, also in the root of a process that sees another filesystem than
         * ours. Used by the Dwfl, so they live as long as it. */
        Dwfl_Callbacks callbacks;
        DebuginfoSearch search;
        bool dwarf_checked, dwarf_ok; /* DWARF that cannot make libdw open files by itself */
        CuRange *cus;                 /* sorted by low; built on the first miss of dwfl_module_addrdie */
        size_t n_cus;
        bool cus_built;
        /* PLT entries named "func@plt" (names malloc'd), sorted; and the PLT sections, whose
         * other addresses (PLT0, unreadable entries) are "[plt]". Loaded with syms. */
        ExeSym *plt;
        size_t n_plt;
        struct {
                uint64_t start, end;
        } plt_secs[EXE_MAX_PLT_SECTIONS];
        size_t n_plt_secs;
} Exe;

typedef struct CacheEntry {
        uint64_t exe_id, vaddr;
        SymFrame *frames; /* one block: frames, then their strings */
        size_t n_frames, size;
} CacheEntry;

typedef struct KSym {
        uint64_t addr;
        uint32_t name;   /* offset into knames */
        uint32_t module; /* offset into knames; 0 = vmlinux ("" at offset 0) */
} KSym;

struct Symbolizer {
        Exe *exes[SYMBOLIZER_MAX_EXES];
        size_t n_exes;
        uint64_t tick, next_exe_id;
        CacheEntry *cache; /* SYMBOLIZER_CACHE_SLOTS entries, allocated on first use */
        char *debuginfo_path;
        Dwfl_Callbacks callbacks;

        KSym *ksyms;
        size_t n_ksyms;
        char *knames;
        size_t knames_size;
        uint64_t kallsyms_loaded_ns;
        bool kallsyms_hidden;
        bool kallsyms_pinned; /* loaded from a file given by the caller: never reread */
        /* --kernel-addresses; whether "not served" was logged. */
        bool show_kernel_addresses, warned_kernel_addresses_hidden;
        uint64_t modules_hash, modules_checked_ns;
        uint8_t kernel_build_id[64];
        size_t kernel_build_id_size;
        bool kernel_build_id_read;
        int kallsyms_error;

        /* Results of the last call; freed by the next one. */
        SymFrame frames[SYMBOLIZER_MAX_INLINE + 1];
        char *strings[4 * (SYMBOLIZER_MAX_INLINE + 1)];
        size_t n_strings;

        PerfMaps *perf_maps; /* names of JIT code in anonymous executable memory */

        SymbolizerPythonFn python_fn; /* names of Python frames (python-stack.h) */
        void *python_userdata;
        char python_placeholder[64];
        uint64_t n_python, n_python_unnamed;

        uint64_t n_cache_hits, n_user_perf_map;
        uint64_t n_dwarf_unsafe[2]; /* dwz file missing, split DWARF */
        size_t cache_entries, cache_bytes;
        uint64_t n_user, n_user_symbolized, n_user_dwarf, n_user_no_file, n_user_no_symbol, n_kernel,
                n_kernel_symbolized, n_exe_opened, n_exe_evicted, n_exe_failed, n_kallsyms_loads;
};

static void exe_free(Exe *e)
{
        if (!e)
                return;
        if (e->dwfl)
                dwfl_end(e->dwfl);
        free(e->syms);
        for (size_t i = 0; i < e->n_plt; i++)
                free((char *)e->plt[i].name);
        free(e->plt);
        free(e->cus);
        free(e->identity);
        debuginfo_search_done(&e->search);
        free(e);
}

static void kallsyms_refresh(Symbolizer *s);

int symbolizer_new(Symbolizer **ret)
{
        Symbolizer *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        if (perf_maps_new(&s->perf_maps) < 0) {
                free(s);
                return -ENOMEM;
        }
        /* With DEBUGINFOD_URLS set, libdwfl would fetch debuginfo over the network from inside
         * the single-threaded event loop, stalling sampling drains and HTTP for seconds. */
        unsetenv("DEBUGINFOD_URLS");
        /* Not libdwfl's own: they open() files by names a process controls, and wait forever on a
         * FIFO found there. */
        s->callbacks.find_elf = debuginfo_search_find_elf;
        s->callbacks.find_debuginfo = debuginfo_search_find_debuginfo;
        s->callbacks.section_address = dwfl_offline_section_address;
        s->callbacks.debuginfo_path = &s->debuginfo_path; /* NULL: ":.debug:/usr/lib/debug" */
        /* Read now, at startup, rather than in the middle of the first profile's steps. */
        kallsyms_refresh(s);
        *ret = s;
        return 0;
}

static void clear_results(Symbolizer *s)
{
        for (size_t i = 0; i < s->n_strings; i++)
                free(s->strings[i]);
        s->n_strings = 0;
}

Symbolizer *symbolizer_free(Symbolizer *s)
{
        if (!s)
                return NULL;
        clear_results(s);
        for (size_t i = 0; i < s->n_exes; i++)
                exe_free(s->exes[i]);
        if (s->cache)
                for (size_t i = 0; i < SYMBOLIZER_CACHE_SLOTS; i++)
                        free(s->cache[i].frames);
        free(s->cache);
        perf_maps_free(s->perf_maps);
        free(s->debuginfo_path);
        free(s->ksyms);
        free(s->knames);
        return mfree(s);
}

int symbolizer_set_debuginfo_path(Symbolizer *s, const char *path)
{
        char *p = NULL;
        if (path && !(p = strdup(path)))
                return -ENOMEM;
        /* Open Dwfls captured the old path; start over so every lookup sees the new one. */
        for (size_t i = 0; i < s->n_exes; i++)
                exe_free(s->exes[i]);
        s->n_exes = 0;
        free(s->debuginfo_path);
        s->debuginfo_path = p;
        return 0;
}

/* Keeps a string alive until the next call. */
static const char *keep(Symbolizer *s, char *str)
{
        if (!str)
                return NULL;
        if (s->n_strings >= ELEMENTSOF(s->strings)) {
                free(str);
                return NULL;
        }
        s->strings[s->n_strings++] = str;
        return str;
}

static const char *keep_printf(Symbolizer *s, const char *fmt, ...) _printf_(2, 3);
static const char *keep_printf(Symbolizer *s, const char *fmt, ...)
{
        va_list ap;
        char *str;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&str, fmt, ap);
        va_end(ap);
        return r < 0 ? NULL : keep(s, str);
}

/* Rust's legacy mangling rides on Itanium's: after __cxa_demangle, names still carry "$LT$"
 * style escapes and a "::h<16 hex>" hash. Tidy both like rustc-demangle does. */
static char *rust_legacy_cleanup(char *d)
{
        static const struct {
                const char *esc, *rep;
        } escapes[] = {
                {"$SP$", "@"},  {"$BP$", "*"},  {"$RF$", "&"},   {"$LT$", "<"},  {"$GT$", ">"},
                {"$LP$", "("},  {"$RP$", ")"},  {"$C$", ","},    {"$u7e$", "~"}, {"$u20$", " "},
                {"$u27$", "'"}, {"$u5b$", "["}, {"$u5d$", "]"},  {"$u7b$", "{"}, {"$u7d$", "}"},
                {"$u3b$", ";"}, {"$u2b$", "+"}, {"$u22$", "\""},
        };
        size_t len = strlen(d), w = 0;
        bool rust = len > 19 && strncmp(d + len - 19, "::h", 3) == 0 &&
                    strspn(d + len - 16, "0123456789abcdef") == 16;

        if (!rust)
                return d;
        d[len - 19] = 0;
        for (size_t r = 0; d[r];) {
                bool done = false;
                /* Components that start with an escape carry a '_' in front of it. */
                if (d[r] == '_' && d[r + 1] == '$' &&
                    (r == 0 || (r >= 2 && d[r - 1] == ':' && d[r - 2] == ':'))) {
                        r++;
                        continue;
                }
                if (d[r] == '$')
                        for (size_t i = 0; i < ELEMENTSOF(escapes); i++) {
                                size_t el = strlen(escapes[i].esc);
                                if (strncmp(d + r, escapes[i].esc, el) == 0) {
                                        d[w++] = escapes[i].rep[0];
                                        r += el;
                                        done = true;
                                        break;
                                }
                        }
                else if (d[r] == '.' && d[r + 1] == '.') {
                        d[w++] = ':';
                        d[w++] = ':';
                        r += 2;
                        done = true;
                }
                if (!done)
                        d[w++] = d[r++];
        }
        d[w] = 0;
        return d;
}

static const char *demangle(Symbolizer *s, const char *mangled)
{
        char *d;
        int status = 0;

        if (strncmp(mangled, "_Z", 2) != 0)
                return mangled;
        d = __cxa_demangle(mangled, NULL, NULL, &status);
        if (!d || status != 0) {
                free(d);
                return mangled;
        }
        return keep(s, rust_legacy_cleanup(d)) ?: mangled;
}

static Exe *exe_lookup(Symbolizer *s, const char *identity)
{
        uint64_t h = hash_fnv1a(HASH_FNV1A_INIT, identity, strlen(identity));
        for (size_t i = 0; i < s->n_exes; i++)
                if (s->exes[i]->hash == h && strcmp(s->exes[i]->identity, identity) == 0)
                        return s->exes[i];
        return NULL;
}

static void exe_evict_lru(Symbolizer *s)
{
        size_t victim = 0;
        for (size_t i = 1; i < s->n_exes; i++)
                if (s->exes[i]->last_use < s->exes[victim]->last_use)
                        victim = i;
        exe_free(s->exes[victim]);
        s->exes[victim] = s->exes[--s->n_exes];
        s->n_exe_evicted++;
}

static bool same_file(const char *a, const char *b)
{
        struct stat sa, sb;
        return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* A process in another mount namespace or a chroot (a container) has its own /usr/lib/debug:
 * searched after ours, by build ID, so a debug package installed in the image names its stripped
 * binaries. Not reachable once the process is gone: its executables are usually opened by the
 * first profile that has its samples, while it still runs. */
static char *process_root(pid_t pid)
{
        char root[64], ns[64];

        snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
        snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)pid);
        if (pid <= 0 || (same_file(root, "/") && same_file(ns, "/proc/self/ns/mnt")) ||
            access(root, X_OK) < 0)
                return NULL;
        return strdup(root);
}

static int exe_open(Symbolizer *s, const Process *p, const ProcMapping *m, const char *identity, Exe **ret)
{
        struct stat st;
        Exe *e;
        int fd;

        if (s->n_exes >= SYMBOLIZER_MAX_EXES)
                exe_evict_lru(s);
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->identity = strdup(identity);
        if (!e->identity) {
                free(e);
                return -ENOMEM;
        }
        e->hash = hash_fnv1a(HASH_FNV1A_INIT, identity, strlen(identity));
        e->id = ++s->next_exe_id;
        s->exes[s->n_exes++] = e;

        fd = process_open_mapping(p, m);
        if (fd < 0) {
                e->failed_ns = now_ns(CLOCK_MONOTONIC);
                s->n_exe_failed++;
                *ret = e;
                return 0;
        }
        e->callbacks = s->callbacks;
        e->search.path = s->debuginfo_path;
        e->search.root = process_root(p->pid);
        if (fstat(fd, &st) == 0) {
                e->search.main_dev = st.st_dev;
                e->search.main_ino = st.st_ino;
        }
        e->dwfl = dwfl_begin(&e->callbacks);
        if (!e->dwfl) {
                close(fd);
                e->failed_ns = now_ns(CLOCK_MONOTONIC);
                s->n_exe_failed++;
                *ret = e;
                return 0;
        }
        /* Placed at its ELF addresses (bias 0): callers subtract the per-mapping load bias, so
         * one Dwfl serves every process whatever its ASLR layout. */
        dwfl_report_begin(e->dwfl);
        e->mod = dwfl_report_elf(e->dwfl, m->path[0] ? m->path : "[anon]", m->path, fd, 0, true);
        dwfl_report_end(e->dwfl, NULL, NULL);
        if (!e->mod) {
                log_debug("Cannot read %s as ELF: %s", m->path, dwfl_errmsg(-1));
                close(fd);
                dwfl_end(e->dwfl);
                e->dwfl = NULL;
                e->failed_ns = now_ns(CLOCK_MONOTONIC);
                s->n_exe_failed++;
        } else {
                debuginfo_search_attach(&e->search, e->mod);
                s->n_exe_opened++;
        }
        *ret = e;
        return 0;
}

static int exesym_cmp(const void *a, const void *b)
{
        const ExeSym *x = a, *y = b;
        if (x->addr != y->addr)
                return x->addr < y->addr ? -1 : 1;
        /* Among aliases the sized one wins; it is placed last, where lookups land. */
        return (x->size > 0) - (y->size > 0);
}

static int symbol_rank(unsigned char info)
{
        /* Aliases at one address: prefer the global name, then weak, then local. */
        switch (GELF_ST_BIND(info)) {
        case STB_GLOBAL:
                return 2;
        case STB_WEAK:
                return 1;
        default:
                return 0;
        }
}

static size_t gopclntab_funcs(Exe *e, ExeSym **syms, size_t *n, size_t *cap);

static bool exe_has_symtab(Exe *e)
{
        GElf_Addr bias;
        Elf *elf = dwfl_module_getelf(e->mod, &bias);
        Elf_Scn *scn = NULL;

        while (elf && (scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB)
                        return true;
        }
        return false;
}

typedef struct AddrRange {
        uint64_t start, end;
} AddrRange;

static int addrrange_cmp(const void *a, const void *b)
{
        const AddrRange *x = a, *y = b;
        return x->start < y->start ? -1 : x->start > y->start;
}

/* Executable sections of the main file at module addresses, sorted; NULL without section
 * headers. */
static AddrRange *exe_text_sections(Exe *e, size_t *ret_n)
{
        GElf_Addr bias;
        Elf *elf = dwfl_module_getelf(e->mod, &bias);
        Elf_Scn *scn = NULL;
        size_t shnum, n = 0;
        AddrRange *r;

        *ret_n = 0;
        if (!elf || elf_getshdrnum(elf, &shnum) < 0 || shnum == 0 || !(r = calloc(shnum, sizeof(*r))))
                return NULL;
        while ((scn = elf_nextscn(elf, scn)) && n < shnum) {
                GElf_Shdr sh;
                if (gelf_getshdr(scn, &sh) &&
                    (sh.sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) == (SHF_ALLOC | SHF_EXECINSTR) &&
                    sh.sh_size > 0 && sh.sh_addr + sh.sh_size > sh.sh_addr)
                        r[n++] = (AddrRange){sh.sh_addr + bias, sh.sh_addr + sh.sh_size + bias};
        }
        qsort_safe(r, n, sizeof(*r), addrrange_cmp);
        *ret_n = n;
        return r;
}

static bool in_ranges(const AddrRange *r, size_t n, uint64_t addr)
{
        for (size_t i = 0; i < n; i++)
                if (addr >= r[i].start && addr < r[i].end)
                        return true;
        return false;
}

static int u64_cmp(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

/* Symbols without a size (assembly lacking .size, crti's _init and _fini) cover the code up to
 * the next symbol, as perf treats them, but neither past the end of their section (_init must
 * not swallow the PLT after .init) nor past the end of a sized function they sit in. Without
 * section headers the last such symbol keeps size 0: it is still named for the addresses after
 * it, having nothing better. Sized symbols are never stretched: an address in a gap between
 * functions has no name. */
static void exe_bound_sizeless(Exe *e)
{
        size_t n_secs;
        _cleanup_free_ AddrRange *secs = exe_text_sections(e, &n_secs);
        uint64_t container_end = 0;

        for (size_t i = 0; i < e->n_syms; i++) {
                ExeSym *sym = &e->syms[i];
                uint64_t end = i + 1 < e->n_syms ? e->syms[i + 1].addr : UINT64_MAX;
                size_t lo = 0, hi = n_secs;

                if (sym->size > 0) {
                        if (sym->addr + sym->size > container_end)
                                container_end = sym->addr + sym->size;
                        continue;
                }
                if (sym->addr < container_end && container_end < end)
                        end = container_end;
                while (lo < hi) {
                        size_t mid = (lo + hi) / 2;
                        if (secs[mid].start <= sym->addr)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                if (lo > 0 && sym->addr < secs[lo - 1].end && secs[lo - 1].end < end)
                        end = secs[lo - 1].end;
                if (end != UINT64_MAX && end > sym->addr)
                        sym->size = end - sym->addr;
        }
}

/* The function symbol containing vaddr (or the nearest sizeless one before it). */
static const char *exe_symtab_lookup(const Exe *e, uint64_t vaddr)
{
        size_t lo = 0, hi = e->n_syms;

        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (e->syms[mid].addr <= vaddr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        /* A symbol may be nested in a bigger one before it (rare: e.g. cold parts); look back a
         * little for one that contains the address. */
        for (size_t i = lo, tries = 0; i > 0 && tries < 4; i--, tries++) {
                const ExeSym *sym = &e->syms[i - 1];
                if (sym->size == 0 && tries == 0)
                        return sym->name;
                if (vaddr < sym->addr + sym->size)
                        return sym->name;
        }
        return NULL;
}

typedef struct GotSlot {
        uint64_t got;     /* ELF vaddr of the GOT slot */
        const char *name; /* symbol the slot is bound to */
} GotSlot;

static int gotslot_cmp(const void *a, const void *b)
{
        const GotSlot *x = a, *y = b;
        return x->got < y->got ? -1 : x->got > y->got;
}

typedef struct PltRelocs {
        GotSlot *slots; /* sorted by got */
        size_t n_slots, cap;
        const char **jump_slots; /* .rela.plt in order: the index a lazy PLT stub pushes */
        size_t n_jump_slots;
        size_t budget;
} PltRelocs;

/* Reads one SHT_RELA section: JUMP_SLOT and GLOB_DAT slots by their symbol, IRELATIVE slots (no
 * symbol; static binaries) by the IFUNC symbol at the resolver address. */
static void plt_read_relocs(Exe *e, Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, bool is_rela_plt,
                            PltRelocs *pr)
{
        Elf_Scn *symscn = elf_getscn(elf, sh->sh_link);
        GElf_Shdr symsh;
        Elf_Data *d = elf_getdata(scn, NULL), *symd;
        size_t n, entsize = gelf_fsize(elf, ELF_T_RELA, 1, EV_CURRENT);

        if (!d || !symscn || !gelf_getshdr(symscn, &symsh) || entsize == 0 ||
            (symsh.sh_type != SHT_DYNSYM && symsh.sh_type != SHT_SYMTAB) ||
            !(symd = elf_getdata(symscn, NULL)))
                return;
        n = d->d_size / entsize;
        if (n > pr->budget)
                n = pr->budget;
        pr->budget -= n;
        if (is_rela_plt && !pr->jump_slots) {
                pr->jump_slots = calloc(n ? n : 1, sizeof(*pr->jump_slots));
                if (!pr->jump_slots)
                        return;
                pr->n_jump_slots = n;
        }
        for (size_t i = 0; i < n; i++) {
                GElf_Rela rela;
                GElf_Sym sym;
                const char *name = NULL;
                unsigned type;

                if (!gelf_getrela(d, (int)i, &rela))
                        break;
                type = (unsigned)GELF_R_TYPE(rela.r_info);
                if (type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT) {
                        if (gelf_getsym(symd, (int)GELF_R_SYM(rela.r_info), &sym))
                                name = elf_strptr(elf, symsh.sh_link, sym.st_name);
                } else if (type == R_X86_64_IRELATIVE)
                        name = exe_symtab_lookup(e, (uint64_t)rela.r_addend);
                else
                        continue;
                if (!name || !*name)
                        continue;
                if (is_rela_plt && pr->jump_slots && i < pr->n_jump_slots)
                        pr->jump_slots[i] = name;
                if (pr->n_slots == pr->cap) {
                        size_t ncap = pr->cap ? pr->cap * 2 : 64;
                        GotSlot *ns = reallocarray(pr->slots, ncap, sizeof(*ns));
                        if (!ns)
                                return;
                        pr->slots = ns;
                        pr->cap = ncap;
                }
                pr->slots[pr->n_slots++] = (GotSlot){.got = rela.r_offset, .name = name};
        }
}

static const char *plt_slot_name(const PltRelocs *pr, uint64_t got)
{
        size_t lo = 0, hi = pr->n_slots;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (pr->slots[mid].got < got)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < pr->n_slots && pr->slots[lo].got == got ? pr->slots[lo].name : NULL;
}

static bool bytes_at(const uint8_t *p, size_t avail, size_t off, const char *want, size_t n)
{
        return off + n <= avail && memcmp(p + off, want, n) == 0;
}

/* The function an x86-64 PLT entry leads to, decoded like objdump and gdb do: the entry jumps
 * through a GOT slot ("jmp *rel32(%rip)", after an endbr64 and/or a bnd prefix), whose relocation
 * names the function; a lazy-binding stub of an IBT .plt only pushes its .rela.plt index. */
static const char *plt_entry_name(const PltRelocs *pr, const uint8_t *p, size_t avail, uint64_t vaddr)
{
        static const size_t jmp_at[] = {0, 1, 4, 5}; /* after nothing, bnd, endbr64, both */
        int32_t rel;

        for (size_t i = 0; i < ELEMENTSOF(jmp_at); i++) {
                size_t o = jmp_at[i];
                if (o >= 4 && !bytes_at(p, avail, 0, "\xf3\x0f\x1e\xfa", 4))
                        continue;
                if ((o == 1 || o == 5) && p[o - 1] != 0xf2)
                        continue;
                if (!bytes_at(p, avail, o, "\xff\x25", 2) || o + 6 > avail)
                        continue;
                memcpy(&rel, p + o + 2, 4);
                return plt_slot_name(pr, vaddr + o + 6 + (uint64_t)(int64_t)rel);
        }
        for (size_t o = 0; o <= 4; o += 4) {
                uint32_t idx;
                if ((o == 4 && !bytes_at(p, avail, 0, "\xf3\x0f\x1e\xfa", 4)) ||
                    !bytes_at(p, avail, o, "\x68", 1) || o + 5 > avail)
                        continue;
                memcpy(&idx, p + o + 1, 4);
                return idx < pr->n_jump_slots ? pr->jump_slots[idx] : NULL;
        }
        return NULL;
}

static bool is_plt_section(const char *name)
{
        return strcmp(name, ".plt") == 0 || strcmp(name, ".plt.sec") == 0 || strcmp(name, ".plt.got") == 0 ||
               strcmp(name, ".plt.bnd") == 0 || strcmp(name, ".iplt") == 0;
}

/* Names the entries of the PLT sections "func@plt", as objdump, gdb and newer perf do (the
 * nearest symbol before them is whatever ends .init, typically _init). x86-64 only; other
 * machines get "[plt]" for every PLT address. */
static void exe_load_plt(Exe *e)
{
        GElf_Addr bias;
        Elf *elf = dwfl_module_getelf(e->mod, &bias);
        Elf_Scn *scn = NULL, *plt_scns[EXE_MAX_PLT_SECTIONS];
        PltRelocs pr = {.budget = PLT_MAX_RELOCS};
        size_t shstrndx, cap = 0;
        bool have_plt_got = false;
        GElf_Ehdr eh;

        if (!elf || elf_getshdrstrndx(elf, &shstrndx) < 0 || !gelf_getehdr(elf, &eh))
                return;
        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr sh;
                const char *name;
                if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
                        continue;
                if (sh.sh_type == SHT_PROGBITS && (sh.sh_flags & SHF_EXECINSTR) && is_plt_section(name) &&
                    e->n_plt_secs < EXE_MAX_PLT_SECTIONS && sh.sh_size > 0) {
                        plt_scns[e->n_plt_secs] = scn;
                        e->plt_secs[e->n_plt_secs].start = sh.sh_addr + bias;
                        e->plt_secs[e->n_plt_secs++].end = sh.sh_addr + sh.sh_size + bias;
                        have_plt_got |= strcmp(name, ".plt.got") == 0;
                }
        }
        if (e->n_plt_secs == 0 || eh.e_machine != EM_X86_64)
                return;
        /* .rela.plt first: its order is the index lazy stubs push. */
        for (int pass = 0; pass < 2; pass++)
                while ((scn = elf_nextscn(elf, scn))) {
                        GElf_Shdr sh;
                        const char *name;
                        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA ||
                            !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
                                continue;
                        if (pass == 0 && strcmp(name, ".rela.plt") == 0)
                                plt_read_relocs(e, elf, scn, &sh, true, &pr);
                        else if (pass == 1 && have_plt_got && strcmp(name, ".rela.dyn") == 0)
                                plt_read_relocs(e, elf, scn, &sh, false, &pr);
                }
        qsort_safe(pr.slots, pr.n_slots, sizeof(*pr.slots), gotslot_cmp);

        for (size_t k = 0; k < e->n_plt_secs; k++) {
                GElf_Shdr sh;
                Elf_Data *d = elf_getdata(plt_scns[k], NULL);
                size_t entsize;
                if (!gelf_getshdr(plt_scns[k], &sh) || !d || !d->d_buf)
                        continue;
                const uint8_t *p = d->d_buf;
                /* Static binaries leave sh_entsize 0 in .plt: entries of 8 bytes ("jmp *GOT;
                 * xchg"), recognised by a second jmp right after the first. */
                entsize = sh.sh_entsize;
                if (entsize != 8 && entsize != 16)
                        entsize = bytes_at(p, d->d_size, 0, "\xff\x25", 2) &&
                                                  bytes_at(p, d->d_size, 8, "\xff\x25", 2)
                                          ? 8
                                          : 16;
                for (size_t off = 0; off + entsize <= d->d_size; off += entsize) {
                        const char *fn = plt_entry_name(&pr, p + off, entsize, sh.sh_addr + off);
                        char *label;
                        if (!fn)
                                continue;
                        if (e->n_plt == cap) {
                                size_t ncap = cap ? cap * 2 : 16;
                                ExeSym *ns = reallocarray(e->plt, ncap, sizeof(*ns));
                                if (!ns)
                                        goto done;
                                e->plt = ns;
                                cap = ncap;
                        }
                        if (asprintf(&label, "%s@plt", fn) < 0)
                                goto done;
                        e->plt[e->n_plt++] =
                                (ExeSym){.addr = sh.sh_addr + off + bias, .size = entsize, .name = label};
                }
        }
done:
        qsort_safe(e->plt, e->n_plt, sizeof(*e->plt), exesym_cmp);
        free(pr.slots);
        free(pr.jump_slots);
}

static void exe_load_syms(Exe *e)
{
        int n = dwfl_module_getsymtab(e->mod);
        size_t k = 0, cap;

        e->syms_loaded = true;
        if (n < 1)
                n = 1;
        cap = (size_t)n;
        e->syms = calloc(cap, sizeof(*e->syms));
        if (!e->syms)
                return;
        unsigned char *rank = calloc(cap, 1);
        size_t n_text, n_notype = 0, cap_notype = 0;
        _cleanup_free_ AddrRange *text = exe_text_sections(e, &n_text);
        _cleanup_free_ uint64_t *notype = NULL;
        for (int i = 1; i < n; i++) {
                GElf_Sym sym;
                GElf_Addr addr;
                GElf_Word shndx;
                const char *name = dwfl_module_getsym_info(e->mod, i, &sym, &addr, &shndx, NULL, NULL);
                int type;
                if (!name || !*name || sym.st_shndx == SHN_UNDEF)
                        continue;
                type = GELF_ST_TYPE(sym.st_info);
                if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE)
                        continue;
                /* Labels of hand-written assembly (ld.so's _start and _dl_start_user) are NOTYPE
                 * and sizeless: kept when they lie in text, unless a function covers them (below). */
                if (type == STT_NOTYPE) {
                        if (sym.st_size != 0 || !in_ranges(text, n_text, addr))
                                continue;
                        if (n_notype == cap_notype) {
                                size_t ncap = cap_notype ? 2 * cap_notype : 16;
                                uint64_t *nn = reallocarray(notype, ncap, sizeof(*nn));
                                if (!nn)
                                        continue;
                                notype = nn;
                                cap_notype = ncap;
                        }
                        notype[n_notype++] = addr;
                }
                e->syms[k] = (ExeSym){.addr = addr, .size = sym.st_size, .name = name};
                if (rank)
                        rank[k] = (unsigned char)symbol_rank(sym.st_info);
                k++;
        }
        /* Keep one entry per address: the sized, best-ranked alias. */
        for (size_t i = 0; i < k; i++)
                e->syms[i].size = e->syms[i].size << 2 | (rank ? rank[i] : 0);
        free(rank);
        /* Without .symtab (a stripped Go binary has only a few .dynsym entries, if any), Go's
         * own function table names the code. Its entries rank below real symbols. */
        if (!exe_has_symtab(e)) {
                size_t first = k;
                gopclntab_funcs(e, &e->syms, &k, &cap);
                for (size_t i = first; i < k; i++)
                        e->syms[i].size <<= 2;
        }
        qsort_safe(e->syms, k, sizeof(*e->syms), exesym_cmp);
        size_t w = 0;
        for (size_t i = 0; i < k; i++) {
                if (w > 0 && e->syms[w - 1].addr == e->syms[i].addr) {
                        if (e->syms[i].size > e->syms[w - 1].size)
                                e->syms[w - 1] = e->syms[i];
                        continue;
                }
                e->syms[w++] = e->syms[i];
        }
        for (size_t i = 0; i < w; i++)
                e->syms[i].size >>= 2;
        /* A NOTYPE label inside a function is a jump target of that function, not a name for
         * the code after it. */
        qsort_safe(notype, n_notype, sizeof(*notype), u64_cmp);
        uint64_t container_end = 0;
        size_t kept = 0;
        for (size_t i = 0; i < w; i++) {
                ExeSym *sym = &e->syms[i];
                if (sym->size == 0 && sym->addr < container_end &&
                    bsearch(&sym->addr, notype, n_notype, sizeof(*notype), u64_cmp))
                        continue;
                if (sym->size > 0 && sym->addr + sym->size > container_end)
                        container_end = sym->addr + sym->size;
                e->syms[kept++] = *sym;
        }
        w = kept;
        e->n_syms = w;
        exe_bound_sizeless(e);
        exe_load_plt(e);
}

/* Functions named by a Go binary's .gopclntab (unwind-tables/gopclntab.h): Go keeps it when
 * -ldflags=-s strips .symtab. Returns the number of entries appended. */
static size_t gopclntab_funcs(Exe *e, ExeSym **syms, size_t *n, size_t *cap)
{
        GElf_Addr bias;
        Elf *elf = dwfl_module_getelf(e->mod, &bias);
        GoPclntab t;
        size_t added = 0;

        if (!elf || gopclntab_open(elf, &t) <= 0)
                return 0;
        if (*n + t.nfunc > *cap) {
                ExeSym *ns = reallocarray(*syms, *n + t.nfunc, sizeof(ExeSym));
                if (!ns)
                        return 0;
                *syms = ns;
                *cap = *n + t.nfunc;
        }
        for (uint64_t i = 0; i < t.nfunc; i++) {
                GoFunc f;
                if (!gopclntab_func(&t, i, &f))
                        continue;
                (*syms)[(*n)++] = (ExeSym){.addr = f.entry + bias, .size = f.end - f.entry, .name = f.name};
                added++;
        }
        return added;
}

/* The name for vaddr: its PLT entry, "[plt]" elsewhere in a PLT section, else the function
 * symbol containing it (or the nearest sizeless one before it). */
static const char *exe_addrsym(Exe *e, uint64_t vaddr)
{
        if (!e->syms_loaded)
                exe_load_syms(e);
        for (size_t k = 0; k < e->n_plt_secs; k++) {
                size_t lo = 0, hi = e->n_plt;
                if (vaddr < e->plt_secs[k].start || vaddr >= e->plt_secs[k].end)
                        continue;
                while (lo < hi) {
                        size_t mid = (lo + hi) / 2;
                        if (e->plt[mid].addr <= vaddr)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                if (lo > 0 && vaddr < e->plt[lo - 1].addr + e->plt[lo - 1].size)
                        return e->plt[lo - 1].name;
                return "[plt]";
        }
        return exe_symtab_lookup(e, vaddr);
}

static const char *die_linkage_or_name(Dwarf_Die *die)
{
        Dwarf_Attribute a;
        const char *n;

        n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
        if (!n)
                n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
        if (!n)
                n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a));
        return n;
}

static void set_frame(Symbolizer *s, SymFrame *f, const char *mangled, const char *file, int line,
                      int start_line)
{
        const char *at = strchr(mangled, '@');

        /* Versioned symbols ("__libc_start_main@@GLIBC_2.34", "memcpy@GLIBC_2.2.5" in a .symtab)
         * lose the version in both names: it is how the linker spelled a .symver alias, not part
         * of the function's name (.dynsym keeps versions apart, in .gnu.version). Aliases at one
         * address differ only in it, so it would also split one function in two across hosts.
         * Our own "func@plt" labels stay whole. */
        bool plt = at && strcmp(at, "@plt") == 0;

        if (at && at > mangled && !plt)
                mangled = keep(s, strndup(mangled, (size_t)(at - mangled))) ?: mangled;
        f->name = demangle(s, mangled);
        /* A C++ function's PLT stub reads "std::foo(int)@plt", as gdb and perf show it. */
        if (plt && at > mangled && strncmp(mangled, "_Z", 2) == 0) {
                const char *fn = keep(s, strndup(mangled, (size_t)(at - mangled)));
                const char *d = fn ? demangle(s, fn) : NULL;
                if (d && d != fn)
                        f->name = keep_printf(s, "%s@plt", d) ?: mangled;
        }
        f->system_name = mangled;
        f->file = file;
        f->line = line;
        f->start_line = start_line;
}

static int curange_cmp(const void *a, const void *b)
{
        const CuRange *x = a, *y = b;
        return x->low < y->low ? -1 : x->low > y->low;
}

static void exe_build_cu_index(Exe *e)
{
        Dwarf_Die *cu = NULL;
        Dwarf_Addr bias;
        size_t cap = 0;

        e->cus_built = true;
        while ((cu = dwfl_module_nextcu(e->mod, cu, &bias))) {
                Dwarf_Addr base, low, high;
                ptrdiff_t off = 0;
                while ((off = dwarf_ranges(cu, off, &base, &low, &high)) > 0) {
                        if (low >= high)
                                continue;
                        if (e->n_cus >= SYMBOLIZER_MAX_CU_RANGES)
                                goto done;
                        if (e->n_cus == cap) {
                                size_t ncap = cap ? cap * 2 : 64;
                                CuRange *n = reallocarray(e->cus, ncap, sizeof(*n));
                                if (!n)
                                        goto done;
                                e->cus = n;
                                cap = ncap;
                        }
                        /* Ranges are in DWARF addresses; lookups are module addresses. */
                        e->cus[e->n_cus++] = (CuRange){.low = low + bias, .high = high + bias, .cu = *cu};
                }
        }
done:
        qsort_safe(e->cus, e->n_cus, sizeof(*e->cus), curange_cmp);
}

/* Whether e's DWARF may be read: see debuginfo_search_dwarf_unsafe(). Checked once, before
 * anything of it is. */
static bool exe_dwarf_ok(Symbolizer *s, Exe *e)
{
        Dwarf_Addr bias;
        Dwarf *dw;
        const char *why;

        if (e->dwarf_checked)
                return e->dwarf_ok;
        e->dwarf_checked = true;
        dw = dwfl_module_getdwarf(e->mod, &bias);
        if (!dw)
                return false;
        why = debuginfo_search_dwarf_unsafe(&e->search, dw);
        if (why) {
                s->n_dwarf_unsafe[strcmp(why, "split_dwarf") == 0]++;
                log_debug("Not reading the DWARF of %s: %s", e->identity, why);
                return false;
        }
        return (e->dwarf_ok = true);
}

/* The CU holding pc (a module address) and the bias to DWARF addresses. */
static Dwarf_Die *exe_addrcu(Symbolizer *s, Exe *e, Dwarf_Addr pc, Dwarf_Addr *ret_bias)
{
        Dwarf_Die *cu;
        size_t lo = 0, hi;

        if (!exe_dwarf_ok(s, e))
                return NULL;
        cu = dwfl_module_addrdie(e->mod, pc, ret_bias);
        if (cu)
                return cu;
        if (!dwfl_module_getdwarf(e->mod, ret_bias))
                return NULL;
        if (!e->cus_built)
                exe_build_cu_index(e);
        hi = e->n_cus;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (e->cus[mid].low <= pc)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        /* CU ranges do not overlap in sane DWARF; look back a little in case they do. */
        for (size_t i = lo, tries = 0; i > 0 && tries < 8; i--, tries++)
                if (pc < e->cus[i - 1].high)
                        return &e->cus[i - 1].cu;
        return NULL;
}

/* Nesting of DIEs followed below a CU (namespaces, classes, functions, blocks, inlines). */
#define DWARF_MAX_DEPTH 64

/* Finds the subprogram containing pc and the inlined_subroutines inside it, outermost first.
 * Unlike dwarf_getscopes (which visits every DIE of the CU, then dwarf_getscopes_die a second
 * time), this only descends into DIEs whose ranges hold pc and into namespaces, which
 * is what makes symbolizing large CUs affordable. Returns true once a scope was found. */
static bool scope_chain(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *chain, size_t *n, unsigned depth)
{
        Dwarf_Die die;

        if (depth >= DWARF_MAX_DEPTH || dwarf_child(parent, &die) != 0)
                return false;
        do {
                switch (dwarf_tag(&die)) {
                case DW_TAG_subprogram:
                case DW_TAG_inlined_subroutine:
                case DW_TAG_lexical_block:
                case DW_TAG_entry_point:
                        if (dwarf_haspc(&die, pc) <= 0)
                                break;
                        if (dwarf_tag(&die) != DW_TAG_lexical_block && *n < SYMBOLIZER_MAX_INLINE + 1)
                                chain[(*n)++] = die;
                        (void)scope_chain(&die, pc, chain, n, depth + 1);
                        return true;
                /* Concrete functions sit at CU or namespace level (member functions too: the
                 * class holds only declarations), so types are never entered. */
                case DW_TAG_namespace:
                case DW_TAG_module:
                        if (scope_chain(&die, pc, chain, n, depth + 1))
                                return true;
                        break;
                default:
                        break;
                }
        } while (dwarf_siblingof(&die, &die) == 0);
        return false;
}

/* Inline chain at pc: innermost first; each inlined_subroutine's call site gives the file:line
 * of the frame around it. Returns frames written (0: no DWARF for pc). */
/* File and line of pc from the CU's line table. */
static void cu_srcline(Dwarf_Die *cudie, Dwarf_Addr dwpc, const char **ret_file, int *ret_line)
{
        Dwarf_Line *l = dwarf_getsrc_die(cudie, dwpc);
        int line = 0;

        *ret_file = NULL;
        *ret_line = 0;
        if (!l)
                return;
        *ret_file = dwarf_linesrc(l, NULL, NULL);
        if (dwarf_lineno(l, &line) == 0)
                *ret_line = line;
}

static size_t dwarf_frames(Symbolizer *s, Exe *e, Dwarf_Addr pc, const char *outer_sym)
{
        Dwarf_Addr bias = 0;
        Dwarf_Die *cudie = exe_addrcu(s, e, pc, &bias);
        Dwarf_Die chain[SYMBOLIZER_MAX_INLINE + 1];
        Dwarf_Files *files = NULL;
        size_t nfiles = 0, n = 0, nchain = 0;
        const char *file = NULL;
        int line = 0;

        if (!cudie)
                return 0;
        if (!scope_chain(cudie, pc - bias, chain, &nchain, 0) || nchain == 0)
                return 0;
        cu_srcline(cudie, pc - bias, &file, &line);
        (void)dwarf_getsrcfiles(cudie, &files, &nfiles);

        /* chain is outermost first and may have been cut at SYMBOLIZER_MAX_INLINE + 1 entries:
         * then the innermost inlines are the ones missing, so lines stay consistent. */
        for (size_t k = nchain; k-- > 0;) {
                Dwarf_Die *d = &chain[k];
                Dwarf_Attribute a;
                Dwarf_Word v;
                int decl_line = 0;
                const char *name;

                (void)dwarf_decl_line(d, &decl_line);
                name = die_linkage_or_name(d);
                /* The symbol table names the real (outermost) function most reliably. */
                if (k == 0 && outer_sym)
                        name = outer_sym;
                if (!name)
                        name = "[unknown inline]";
                set_frame(s, &s->frames[n++], name, file, line, decl_line);
                if (k == 0)
                        break;

                /* Where this inline instance was called: the position in the enclosing frame. */
                line = 0;
                if (dwarf_formudata(dwarf_attr(d, DW_AT_call_line, &a), &v) == 0)
                        line = (int)v;
                file = NULL;
                if (files && dwarf_formudata(dwarf_attr(d, DW_AT_call_file, &a), &v) == 0 && v < nfiles)
                        file = dwarf_filesrc(files, v, NULL, NULL);
        }
        return n;
}

static CacheEntry *cache_slot(Symbolizer *s, uint64_t exe_id, uint64_t vaddr)
{
        uint64_t h = (exe_id * 0x9e3779b97f4a7c15ULL) ^ vaddr;
        h ^= h >> 29;
        h *= 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 32;
        if (!s->cache) {
                s->cache = calloc(SYMBOLIZER_CACHE_SLOTS, sizeof(CacheEntry));
                if (!s->cache)
                        return NULL;
        }
        return &s->cache[h & (SYMBOLIZER_CACHE_SLOTS - 1)];
}

static size_t str_size(const char *p)
{
        return p ? strlen(p) + 1 : 0;
}

static char *str_put(char **w, const char *p)
{
        char *r = *w;
        size_t n = str_size(p);
        if (!p)
                return NULL;
        memcpy(r, p, n);
        *w += n;
        return r;
}

/* Copies s->frames[0..n) into slot c; returns the copy (or s->frames if memory is short). */
static const SymFrame *cache_store(Symbolizer *s, CacheEntry *c, uint64_t exe_id, uint64_t vaddr,
                                   const SymFrame *f, size_t n)
{
        size_t size = n * sizeof(SymFrame);
        SymFrame *out;
        char *w;

        for (size_t i = 0; i < n; i++)
                size += str_size(f[i].name) +
                        (f[i].system_name != f[i].name ? str_size(f[i].system_name) : 0) +
                        str_size(f[i].file);
        if (c->frames) {
                s->cache_entries--;
                s->cache_bytes -= c->size;
        }
        free(c->frames);
        *c = (CacheEntry){};
        out = malloc(size);
        if (!out)
                return f;
        w = (char *)(out + n);
        for (size_t i = 0; i < n; i++) {
                out[i] = f[i];
                out[i].name = str_put(&w, f[i].name);
                out[i].system_name =
                        f[i].system_name != f[i].name ? str_put(&w, f[i].system_name) : out[i].name;
                out[i].file = str_put(&w, f[i].file);
        }
        *c = (CacheEntry){.exe_id = exe_id, .vaddr = vaddr, .frames = out, .n_frames = n, .size = size};
        s->cache_entries++;
        s->cache_bytes += size;
        return out;
}

static void unknown_frame(Symbolizer *s, const char *name, SymResult *ret)
{
        s->frames[0] = (SymFrame){.name = name ?: "[unknown]", .system_name = name ?: "[unknown]"};
        *ret = (SymResult){.frames = s->frames, .n_frames = 1, .symbolized = false};
}

int symbolizer_user(Symbolizer *s, const Process *p, const ProcMapping *m, uint64_t addr, SymResult *ret)
{
        char identity[PATH_MAX + 128];
        uint64_t fileoff = addr - m->start + m->offset, vaddr;
        const char *symname;
        Exe *e;
        size_t n;
        int r;

        clear_results(s);
        s->n_user++;

        if (m->path[0] == 0) {
                const char *file = NULL, *name = perf_maps_lookup(s->perf_maps, p, addr, &file);
                if (name) {
                        s->n_user_perf_map++;
                        s->frames[0] = (SymFrame){.name = name, .system_name = name};
                        *ret = (SymResult){
                                .frames = s->frames, .n_frames = 1, .symbolized = true, .source_file = file};
                        return 0;
                }
                s->n_user_no_file++;
                unknown_frame(s, keep_printf(s, "[unknown] [anon] 0x%" PRIx64, addr), ret);
                return 0;
        }
        /* No key: the file could not be opened (or was refused) when its mapping was read. */
        if (process_mapping_identity(m, identity, sizeof(identity)) == 0) {
                s->n_user_no_file++;
                unknown_frame(s, keep_printf(s, "[unknown] %s+0x%" PRIx64, m->path, fileoff), ret);
                return 0;
        }
        e = exe_lookup(s, identity);
        if (e && !e->dwfl && now_ns(CLOCK_MONOTONIC) - e->failed_ns > SYMBOLIZER_RETRY_NS) {
                for (size_t i = 0; i < s->n_exes; i++)
                        if (s->exes[i] == e) {
                                s->exes[i] = s->exes[--s->n_exes];
                                break;
                        }
                exe_free(e);
                e = NULL;
        }
        if (!e) {
                r = exe_open(s, p, m, identity, &e);
                if (r < 0)
                        return r;
        }
        e->last_use = ++s->tick;

        if (!e->dwfl || !(m->bias_known)) {
                s->n_user_no_file++;
                unknown_frame(s, keep_printf(s, "[unknown] %s+0x%" PRIx64, m->path, fileoff), ret);
                return 0;
        }
        vaddr = addr - m->load_bias;

        CacheEntry *c = cache_slot(s, e->id, vaddr);
        if (c && c->frames && c->exe_id == e->id && c->vaddr == vaddr) {
                s->n_cache_hits++;
                *ret = (SymResult){.frames = c->frames, .n_frames = c->n_frames, .symbolized = true};
                return 0;
        }

        symname = exe_addrsym(e, vaddr);
        n = dwarf_frames(s, e, vaddr, symname);
        if (n > 0) {
                s->n_user_dwarf++;
        } else if (symname) {
                const char *file = NULL;
                int line = 0;
                Dwarf_Addr bias;
                Dwarf_Die *cudie = exe_addrcu(s, e, vaddr, &bias);
                if (cudie)
                        cu_srcline(cudie, vaddr - bias, &file, &line);
                set_frame(s, &s->frames[0], symname, file, line, 0);
                n = 1;
        } else {
                s->n_user_no_symbol++;
                unknown_frame(s, keep_printf(s, "[unknown] %s+0x%" PRIx64, m->path, fileoff), ret);
                ret->no_symbol = true;
                return 0;
        }
        s->n_user_symbolized++;
        *ret = (SymResult){.frames = c ? cache_store(s, c, e->id, vaddr, s->frames, n) : s->frames,
                           .n_frames = n,
                           .symbolized = true};
        return 0;
}

static int ksym_cmp(const void *a, const void *b)
{
        const KSym *x = a, *y = b;
        return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int knames_add(Symbolizer *s, const char *str, size_t len, size_t *cap, uint32_t *ret)
{
        if (s->knames_size + len + 1 > UINT32_MAX)
                return -E2BIG;
        if (s->knames_size + len + 1 > *cap) {
                size_t ncap = *cap ? *cap * 2 : 1 << 20;
                while (ncap < s->knames_size + len + 1)
                        ncap *= 2;
                char *n = realloc(s->knames, ncap);
                if (!n)
                        return -ENOMEM;
                s->knames = n;
                *cap = ncap;
        }
        memcpy(s->knames + s->knames_size, str, len);
        s->knames[s->knames_size + len] = 0;
        *ret = (uint32_t)s->knames_size;
        s->knames_size += len + 1;
        return 0;
}

/* Text symbols of /proc/kallsyms, sorted. With kptr_restrict every address reads as 0: then the
 * table stays empty and frames say why. */
static int kallsyms_load(Symbolizer *s, const char *path)
{
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        size_t size = 0, cap = 0, kcap = 0, nonzero = 0, total = 0;
        uint32_t last_mod = 0;
        char last_mod_name[64] = "";
        ssize_t len;
        int r;

        free(s->ksyms);
        free(s->knames);
        s->ksyms = NULL;
        s->knames = NULL;
        s->n_ksyms = s->knames_size = 0;
        s->kallsyms_loaded_ns = now_ns(CLOCK_MONOTONIC);
        s->n_kallsyms_loads++;

        f = fopen(path, "re");
        if (!f)
                return (s->kallsyms_error = -errno);
        r = knames_add(s, "", 0, &cap, &last_mod);
        if (r < 0)
                return (s->kallsyms_error = r);

        while ((len = getline(&line, &size, f)) > 0) {
                char *p = line, *end, *name, *mod;
                uint64_t addr;
                char type;
                uint32_t name_off, mod_off = 0;

                if (line[len - 1] == '\n')
                        line[--len] = 0;
                errno = 0;
                addr = strtoull(p, &end, 16);
                if (errno || end == p || end[0] != ' ' || !end[1] || end[2] != ' ')
                        continue;
                type = end[1];
                name = end + 3;
                total++;
                if (addr != 0)
                        nonzero++;
                if (type != 't' && type != 'T' && type != 'w' && type != 'W')
                        continue;
                mod = strchr(name, '\t');
                if (mod) {
                        *mod++ = 0;
                        if (*mod == '[') {
                                mod++;
                                mod[strcspn(mod, "]")] = 0;
                        }
                        /* Consecutive symbols share a module: store its name once per run. */
                        if (strcmp(mod, last_mod_name) != 0) {
                                r = knames_add(s, mod, strlen(mod), &cap, &last_mod);
                                if (r < 0)
                                        return (s->kallsyms_error = r);
                                snprintf(last_mod_name, sizeof(last_mod_name), "%s", mod);
                        }
                        mod_off = last_mod;
                }
                if (addr == 0)
                        continue;
                r = knames_add(s, name, strlen(name), &cap, &name_off);
                if (r < 0)
                        return (s->kallsyms_error = r);
                if (s->n_ksyms == kcap) {
                        size_t ncap = kcap ? kcap * 2 : 65536;
                        KSym *n = reallocarray(s->ksyms, ncap, sizeof(*n));
                        if (!n)
                                return (s->kallsyms_error = -ENOMEM);
                        s->ksyms = n;
                        kcap = ncap;
                }
                s->ksyms[s->n_ksyms++] = (KSym){.addr = addr, .name = name_off, .module = mod_off};
        }
        qsort_safe(s->ksyms, s->n_ksyms, sizeof(*s->ksyms), ksym_cmp);
        s->kallsyms_hidden = total > 0 && nonzero == 0;
        s->kallsyms_error = total == 0 ? -ENODATA : 0;
        return s->kallsyms_error;
}

/* For tests: symbolize kernel addresses from another kallsyms-format file. */
int symbolizer_load_kallsyms(Symbolizer *s, const char *path)
{
        s->kallsyms_pinned = true;
        return kallsyms_load(s, path);
}

/* A fingerprint of /proc/modules (names, sizes, load addresses): 0 if there is none. */
static uint64_t modules_fingerprint(void)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/modules", "re");
        char buf[4096];
        uint64_t h = HASH_FNV1A_INIT;
        size_t n;

        if (!f)
                return 0;
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                h = hash_fnv1a(h, buf, n);
        return h;
}

static bool kallsyms_stale(Symbolizer *s)
{
        uint64_t now = now_ns(CLOCK_MONOTONIC);

        if (s->kallsyms_pinned)
                return false;
        if (s->kallsyms_loaded_ns == 0 || now - s->kallsyms_loaded_ns > KALLSYMS_MAX_AGE_NS)
                return true;
        if (now - s->modules_checked_ns > MODULES_CHECK_NS) {
                uint64_t h = modules_fingerprint();
                s->modules_checked_ns = now;
                if (h != s->modules_hash) {
                        s->modules_hash = h;
                        return true;
                }
        }
        return false;
}

static void kallsyms_refresh(Symbolizer *s)
{
        s->modules_hash = modules_fingerprint();
        s->modules_checked_ns = now_ns(CLOCK_MONOTONIC);
        (void)kallsyms_load(s, "/proc/kallsyms");
}

void symbolizer_set_kernel_addresses(Symbolizer *s, bool show)
{
        s->show_kernel_addresses = show;
        s->warned_kernel_addresses_hidden = false;
        (void)symbolizer_kernel_addresses_shown(s);
}

bool symbolizer_kernel_addresses_shown(Symbolizer *s)
{
        if (!s->show_kernel_addresses)
                return false;
        if (kallsyms_stale(s))
                kallsyms_refresh(s);
        if (s->kallsyms_error == 0 && !s->kallsyms_hidden) {
                s->warned_kernel_addresses_hidden = false;
                return true;
        }
        if (!s->warned_kernel_addresses_hidden)
                log_warning("--kernel-addresses: not serving kernel addresses, the kernel hides them from "
                            "profd itself (/proc/kallsyms shows %s: kernel.kptr_restrict, CAP_SYSLOG)",
                            s->kallsyms_hidden ? "only zeros" : "nothing");
        s->warned_kernel_addresses_hidden = true;
        return false;
}

void symbolizer_set_python(Symbolizer *s, SymbolizerPythonFn fn, void *userdata)
{
        s->python_fn = fn;
        s->python_userdata = userdata;
}

int symbolizer_python(Symbolizer *s, const Process *p, uint64_t frame, SymResult *ret)
{
        SymFrame f = {};

        s->n_python++;
        if (p && s->python_fn && s->python_fn(s->python_userdata, p, frame, &f) >= 0 && f.name) {
                s->frames[0] = f;
                *ret = (SymResult){.frames = s->frames, .n_frames = 1, .symbolized = true};
                return 0;
        }
        /* Not read while the process ran (or garbage): say it was Python code, invent nothing. */
        s->n_python_unnamed++;
        snprintf(s->python_placeholder, sizeof(s->python_placeholder), "[python] 0x%" PRIx64,
                 (uint64_t)((frame & PROFD_PY_CODE_MASK) << PROFD_PY_CODE_SHIFT));
        s->frames[0] = (SymFrame){.name = s->python_placeholder, .system_name = s->python_placeholder};
        *ret = (SymResult){.frames = s->frames, .n_frames = 1};
        return 0;
}

int symbolizer_kernel(Symbolizer *s, uint64_t addr, SymResult *ret)
{
        size_t lo = 0, hi;
        const KSym *k;

        clear_results(s);
        s->n_kernel++;
        if (kallsyms_stale(s))
                kallsyms_refresh(s);

        if (s->kallsyms_hidden) {
                /* Never the address: the kernel itself refuses to show it. */
                unknown_frame(s, keep_printf(s, "[kernel] (kallsyms hidden: kptr_restrict)"), ret);
                return 0;
        }
        hi = s->n_ksyms;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (s->ksyms[mid].addr <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo == 0) {
                if (symbolizer_kernel_addresses_shown(s))
                        unknown_frame(s, keep_printf(s, "[unknown] [kernel.kallsyms] 0x%" PRIx64, addr),
                                      ret);
                else
                        unknown_frame(s, keep_printf(s, "[unknown] [kernel.kallsyms]"), ret);
                return 0;
        }
        k = &s->ksyms[lo - 1];
        s->frames[0] = (SymFrame){
                .name = s->knames + k->name,
                .system_name = s->knames + k->name,
                /* Module symbols name their module where a file would go. */
                .file = k->module ? keep_printf(s, "[%s]", s->knames + k->module) : NULL,
        };
        s->n_kernel_symbolized++;
        *ret = (SymResult){.frames = s->frames, .n_frames = 1, .symbolized = true};
        return 0;
}

/* The running kernel's GNU build ID from /sys/kernel/notes (raw ELF notes of vmlinux). */
static void read_kernel_build_id(Symbolizer *s)
{
        _cleanup_close_ int fd = -1;
        uint8_t buf[4096];
        ssize_t n;
        size_t off = 0;

        s->kernel_build_id_read = true;
        fd = open("/sys/kernel/notes", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        n = read(fd, buf, sizeof(buf));
        if (n <= 0)
                return;
        while (off + 12 <= (size_t)n) {
                uint32_t namesz, descsz, type;
                memcpy(&namesz, buf + off, 4);
                memcpy(&descsz, buf + off + 4, 4);
                memcpy(&type, buf + off + 8, 4);
                size_t name_off = off + 12, desc_off = name_off + ((namesz + 3) & ~3u);
                size_t next = desc_off + ((descsz + 3) & ~3u);
                if (namesz > 4096 || descsz > 4096 || next > (size_t)n)
                        return;
                if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(buf + name_off, "GNU", 4) == 0 &&
                    descsz > 0 && descsz <= sizeof(s->kernel_build_id)) {
                        memcpy(s->kernel_build_id, buf + desc_off, descsz);
                        s->kernel_build_id_size = descsz;
                        return;
                }
                off = next;
        }
}

size_t symbolizer_kernel_build_id(Symbolizer *s, const uint8_t **ret)
{
        if (!s->kernel_build_id_read)
                read_kernel_build_id(s);
        *ret = s->kernel_build_id;
        return s->kernel_build_id_size;
}

void symbolizer_write_metrics(const Symbolizer *s, FILE *f)
{
        fprintf(f,
                "# HELP profd_symbolizer_executables Executables with open symbol tables.\n"
                "# TYPE profd_symbolizer_executables gauge\n"
                "profd_symbolizer_executables %zu\n"
                "# HELP profd_symbolizer_executables_total Executables opened, evicted or failed to open.\n"
                "# TYPE profd_symbolizer_executables_total counter\n"
                "profd_symbolizer_executables_total{event=\"opened\"} %" PRIu64 "\n"
                "profd_symbolizer_executables_total{event=\"evicted\"} %" PRIu64 "\n"
                "profd_symbolizer_executables_total{event=\"failed\"} %" PRIu64 "\n"
                "# HELP profd_symbolizer_lookups_total Addresses looked up, by result.\n"
                "# TYPE profd_symbolizer_lookups_total counter\n"
                "profd_symbolizer_lookups_total{space=\"user\",result=\"cached\"} %" PRIu64 "\n"
                "profd_symbolizer_lookups_total{space=\"user\",result=\"dwarf\"} %" PRIu64 "\n"
                "profd_symbolizer_lookups_total{space=\"user\",result=\"symbol\"} %" PRIu64 "\n"
                "profd_symbolizer_lookups_total{space=\"user\",result=\"no_symbol\"} %" PRIu64 "\n"
                "profd_symbolizer_lookups_total{space=\"user\",result=\"no_file\"} %" PRIu64 "\n"
                "profd_symbolizer_lookups_total{space=\"user\",result=\"perf_map\"} %" PRIu64 "\n"
                "profd_symbolizer_lookups_total{space=\"kernel\",result=\"symbol\"} %" PRIu64 "\n"
                "profd_symbolizer_lookups_total{space=\"kernel\",result=\"unknown\"} %" PRIu64 "\n"
                "# HELP profd_symbolizer_dwarf_unused_total Executables whose DWARF was not read because "
                "libdw would open files it names by itself: a dwz file (.gnu_debugaltlink) not found, split "
                "DWARF (.dwo).\n"
                "# TYPE profd_symbolizer_dwarf_unused_total counter\n"
                "profd_symbolizer_dwarf_unused_total{reason=\"dwz_file_missing\"} %" PRIu64 "\n"
                "profd_symbolizer_dwarf_unused_total{reason=\"split_dwarf\"} %" PRIu64 "\n"
                "# HELP profd_symbolizer_cache_entries Resolved addresses cached.\n"
                "# TYPE profd_symbolizer_cache_entries gauge\n"
                "profd_symbolizer_cache_entries %zu\n"
                "# HELP profd_symbolizer_cache_bytes Memory of the cached frames.\n"
                "# TYPE profd_symbolizer_cache_bytes gauge\n"
                "profd_symbolizer_cache_bytes %zu\n"
                "# HELP profd_symbolizer_kallsyms_symbols Kernel text symbols loaded.\n"
                "# TYPE profd_symbolizer_kallsyms_symbols gauge\n"
                "profd_symbolizer_kallsyms_symbols %zu\n"
                "# HELP profd_symbolizer_kallsyms_hidden 1 if kptr_restrict hides kernel addresses.\n"
                "# TYPE profd_symbolizer_kallsyms_hidden gauge\n"
                "profd_symbolizer_kallsyms_hidden %d\n",
                s->n_exes, s->n_exe_opened, s->n_exe_evicted, s->n_exe_failed, s->n_cache_hits,
                s->n_user_dwarf, s->n_user_symbolized - s->n_user_dwarf, s->n_user_no_symbol,
                s->n_user_no_file, s->n_user_perf_map, s->n_kernel_symbolized,
                s->n_kernel - s->n_kernel_symbolized, s->n_dwarf_unsafe[0], s->n_dwarf_unsafe[1],
                s->cache_entries, s->cache_bytes, s->n_ksyms, s->kallsyms_hidden);
        perf_maps_write_metrics(s->perf_maps, f);
}

void symbolizer_note_process(Symbolizer *s, const Process *p)
{
        perf_maps_refresh(s->perf_maps, p);
}

void symbolizer_tick(Symbolizer *s, const Process *(*find)(pid_t pid, void *userdata), void *userdata)
{
        perf_maps_tick(s->perf_maps, find, userdata);
}
