/* SPDX-License-Identifier: GPL-2.0-only */
/* The symbolizer's public API: per-process dispatch of a user address (perf map, executable,
 * DWARF, symbol table), the cache of resolved addresses, kernel and Python frames, and metrics. */
#include <elfutils/libdw.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/types.h> /* for bpf/profd-python.h */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <elfutils/libdwelf.h>

#include "bpf/profd-python.h"
#include "runtimes/perf-map.h"
#include "symbolizer/dwarf-inflate.h"
#include "symbolizer/dwarf-inlines.h"
#include "symbolizer/elf-cache.h"
#include "symbolizer/elf-symbols.h"
#include "symbolizer/kallsyms.h"
#include "symbolizer/plt-names.h"
#include "symbolizer/result-frames.h"
#include "symbolizer/symbolizer.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/metrics-writer.h"
#include "util/time-util.h"

/* An executable that could not be opened is not retried for this long. */
#define SYMBOLIZER_RETRY_NS (30 * NSEC_PER_SEC)
/* Resolved addresses remembered across profiles (direct-mapped, a colliding entry replaces the
 * old one): repeated scrapes of a busy host mostly ask for the same addresses again. Entries
 * hold a copy of their frames, ~100-300 bytes each. */
#define SYMBOLIZER_CACHE_SLOTS 32768

typedef struct CacheEntry {
        /* The hash of the file's identity (device, inode, size, times, build ID), not of its open
         * Exe: an address resolved once stays named after its executable was closed, so the
         * symbolizer can close executables (memory bound, idle) without reading them again for
         * addresses it already named. */
        uint64_t exe_id, vaddr;
        uint64_t gen;     /* the symbolizer's cache_gen when stored: older entries are stale */
        SymFrame *frames; /* one block: frames, then their strings */
        size_t n_frames, size;
} CacheEntry;

struct Symbolizer {
        ExeCache elf;
        CacheEntry *cache; /* SYMBOLIZER_CACHE_SLOTS entries, allocated on first use */
        /* Bumped when a debug file arrived from debuginfod: addresses named before (from a symbol
         * table, or not at all) are looked up again, once each, as they come. */
        uint64_t cache_gen;
        DebuginfodFetch *debuginfod;  /* NULL: off */
        sd_event_source *inflater_io; /* the inflater's eventfd (s->elf.inflater) */

        Kallsyms kernel;
        /* --kernel-addresses; whether "not served" was logged. */
        bool show_kernel_addresses, warned_kernel_addresses_hidden;

        /* Results of the last call; freed by the next one. */
        ResultFrames results;

        PerfMaps *perf_maps; /* names of JIT code in anonymous executable memory */

        SymbolizerPythonFn python_fn; /* names of Python frames (python-stack.h) */
        void *python_userdata;
        char python_placeholder[64];
        uint64_t n_python, n_python_unnamed;
        struct {
                SymbolizerRuntimeFn fn;
                SymbolizerRuntimeInlinedFn inlined_fn;
                void *userdata;
        } runtimes[_SYM_RUNTIME_MAX];
        char runtime_placeholder[32];
        SymbolizerAnonFn anon_fn; /* names of runtimes' own code in anonymous memory */
        void *anon_userdata;

        uint64_t n_cache_hits, n_user_perf_map;
        size_t cache_entries, cache_bytes;
        uint64_t n_user, n_user_symbolized, n_user_dwarf, n_user_no_file, n_user_no_symbol, n_kernel,
                n_kernel_symbolized;
};

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
        s->elf.callbacks.find_elf = debuginfo_search_find_elf;
        s->elf.callbacks.find_debuginfo = debuginfo_search_find_debuginfo;
        s->elf.callbacks.section_address = dwfl_offline_section_address;
        s->elf.callbacks.debuginfo_path = &s->elf.debuginfo_path; /* NULL: ":.debug:/usr/lib/debug" */
        /* Read now, at startup, rather than in the middle of the first profile's steps. */
        kallsyms_refresh(&s->kernel);
        *ret = s;
        return 0;
}

Symbolizer *symbolizer_free(Symbolizer *s)
{
        if (!s)
                return NULL;
        result_frames_clear(&s->results);
        /* First: its threads stop before anything they could hand back goes. */
        s->debuginfod = debuginfod_fetch_free(s->debuginfod);
        s->inflater_io = sd_event_source_disable_unref(s->inflater_io);
        s->elf.inflater = dwarf_inflater_free(s->elf.inflater);
        for (size_t i = 0; i < s->elf.n_exes; i++)
                exe_free(s->elf.exes[i]);
        if (s->cache)
                for (size_t i = 0; i < SYMBOLIZER_CACHE_SLOTS; i++)
                        free(s->cache[i].frames);
        free(s->cache);
        perf_maps_free(s->perf_maps);
        free(s->elf.debuginfo_path);
        free(s->kernel.ksyms);
        free(s->kernel.knames);
        return mfree(s);
}

int symbolizer_set_debuginfo_path(Symbolizer *s, const char *path)
{
        char *p = NULL;
        if (path && !(p = strdup(path)))
                return -ENOMEM;
        /* Open Dwfls captured the old path; start over so every lookup sees the new one. */
        for (size_t i = 0; i < s->elf.n_exes; i++)
                exe_free(s->elf.exes[i]);
        s->elf.n_exes = 0;
        if (s->cache)
                for (size_t i = 0; i < SYMBOLIZER_CACHE_SLOTS; i++) {
                        free(s->cache[i].frames);
                        s->cache[i] = (CacheEntry){};
                }
        s->cache_entries = s->cache_bytes = 0;
        free(s->elf.debuginfo_path);
        s->elf.debuginfo_path = p;
        return 0;
}

/* A debug file for id arrived: the executables with that build ID (or whose debug file refers to
 * it as its dwz file) are closed, to be opened again with it by the next lookup. */
static void on_debuginfo_fetched(void *userdata, const uint8_t *id, size_t size)
{
        Symbolizer *s = userdata;

        for (size_t i = 0; i < s->elf.n_exes;) {
                Exe *e = s->elf.exes[i];
                const void *bid = NULL;
                ssize_t n = e->search.main_elf ? dwelf_elf_gnu_build_id(e->search.main_elf, &bid) : -1;

                if ((n > 0 && (size_t)n == size && memcmp(bid, id, size) == 0) ||
                    (e->search.alt_id_size == size && memcmp(e->search.alt_id, id, size) == 0)) {
                        s->elf.exes[i] = s->elf.exes[--s->elf.n_exes];
                        exe_free(e);
                } else
                        i++;
        }
        s->cache_gen++;
}

int symbolizer_enable_debuginfod(Symbolizer *s, sd_event *event, const DebuginfodOptions *o)
{
        int r;

        if (s->debuginfod)
                return -EBUSY;
        r = debuginfod_fetch_new(event, o, on_debuginfo_fetched, s, &s->debuginfod);
        if (r < 0)
                return r;
        s->elf.debuginfod_dir = debuginfod_fetch_cache_dir(s->debuginfod);
        return 0;
}

/* Inflated copies that are ready: the executables that wait for one (their DWARF not opened yet)
 * are closed, and the next lookup opens them again with the copy. Also drops copies not taken
 * in time. */
static void inflations_collect(Symbolizer *s)
{
        if (!s->elf.inflater || dwarf_inflater_collect(s->elf.inflater) == 0)
                return;
        for (size_t i = 0; i < s->elf.n_exes;) {
                Exe *e = s->elf.exes[i];

                if (e->search.inflate_pending && !e->dwarf_checked) {
                        s->elf.exes[i] = s->elf.exes[--s->elf.n_exes];
                        exe_free(e);
                } else
                        i++;
        }
}

static int on_inflater_io(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
        inflations_collect(userdata);
        return 0;
}

int symbolizer_enable_inflater(Symbolizer *s, sd_event *event)
{
        int efd, r;

        if (s->elf.inflater)
                return -EBUSY;
        r = dwarf_inflater_new(&s->elf.inflater, &efd);
        if (r < 0)
                return r;
        r = sd_event_add_io(event, &s->inflater_io, efd, EPOLLIN, on_inflater_io, s);
        if (r < 0) {
                s->elf.inflater = dwarf_inflater_free(s->elf.inflater);
                return r;
        }
        (void)sd_event_source_set_description(s->inflater_io, "dwarf-inflater");
        return 0;
}

void symbolizer_set_background(Symbolizer *s, bool background)
{
        s->elf.background = background;
}

/* e has no DWARF of its own nor a local debug file: ask debuginfod for one, once per open. */
static void maybe_fetch_debuginfo(Symbolizer *s, Exe *e)
{
        const void *bid = NULL;
        ssize_t n;

        if (!s->debuginfod || e->debuginfod_asked)
                return;
        e->debuginfod_asked = true;
        /* DWARF of its own that profd does not read (too large, dwz file missing, split) would
         * be no different in a debug file: not worth telling a server of the build ID. */
        if (e->dwarf_ok || e->search.debug_given || !e->search.main_elf ||
            debuginfo_elf_has_dwarf(e->search.main_elf))
                return;
        n = dwelf_elf_gnu_build_id(e->search.main_elf, &bid);
        if (n > 0)
                debuginfod_fetch_request(s->debuginfod, bid, (size_t)n);
}

/* The name for vaddr: its PLT entry, "[plt]" elsewhere in a PLT section, else the function
 * symbol containing it (or the nearest sizeless one before it). */
static const char *exe_addrsym(Symbolizer *s, Exe *e, uint64_t vaddr)
{
        if (!e->syms_loaded) {
                /* A large binary's tables (libLLVM, node: tens of MiB) are read at once: room first. */
                uint64_t cost = exe_syms_cost(e);
                if (cost >= SYMBOLIZER_RESERVE_MIN_BYTES)
                        exe_cache_reserve(&s->elf, e, cost);
        }
        if (!e->syms_loaded && exe_load_syms(e) >= 0) {
                exe_load_plt(e);
                /* A large binary's symbol table is tens of MiB of pages read once. */
                exe_drop_pages(e);
        }
        return exe_plt_lookup(e, vaddr) ?: exe_symtab_lookup(e, vaddr);
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

/* Copies s->results.frames[0..n) into slot c; returns the copy (or s->results.frames if memory is short). */
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
        *c = (CacheEntry){.exe_id = exe_id,
                          .vaddr = vaddr,
                          .gen = s->cache_gen,
                          .frames = out,
                          .n_frames = n,
                          .size = size};
        s->cache_entries++;
        s->cache_bytes += size;
        return out;
}

int symbolizer_user(Symbolizer *s, const Process *p, const ProcMapping *m, uint64_t addr, SymResult *ret)
{
        char identity[PATH_MAX + 128];
        uint64_t fileoff = addr - m->start + m->offset, vaddr;
        const char *symname;
        Exe *e;
        size_t n;
        int r;

        result_frames_clear(&s->results);
        s->n_user++;

        if (m->path[0] == 0) {
                const char *file = NULL, *name = perf_maps_lookup(s->perf_maps, p, addr, &file);
                if (name) {
                        s->n_user_perf_map++;
                        s->results.frames[0] = (SymFrame){.name = name, .system_name = name};
                        *ret = (SymResult){.frames = s->results.frames,
                                           .n_frames = 1,
                                           .symbolized = true,
                                           .source_file = file};
                        return 0;
                }
                name = s->anon_fn ? s->anon_fn(s->anon_userdata, p, addr) : NULL;
                if (name) {
                        s->n_user_perf_map++;
                        s->results.frames[0] = (SymFrame){.name = name, .system_name = name};
                        *ret = (SymResult){.frames = s->results.frames, .n_frames = 1, .symbolized = true};
                        return 0;
                }
                s->n_user_no_file++;
                result_frames_unknown(
                        &s->results,
                        result_frames_keep_printf(&s->results, "[unknown] [anon] 0x%" PRIx64, addr), ret);
                return 0;
        }
        /* No key: the file could not be opened (or was refused) when its mapping was read. */
        if (process_mapping_identity(m, identity, sizeof(identity)) == 0) {
                s->n_user_no_file++;
                result_frames_unknown(
                        &s->results,
                        result_frames_keep_printf(&s->results, "[unknown] %s+0x%" PRIx64, m->path, fileoff),
                        ret);
                return 0;
        }
        uint64_t key = hash_fnv1a(HASH_FNV1A_INIT, identity, strlen(identity));
        CacheEntry *c = NULL;
        if (m->bias_known) {
                vaddr = addr - m->load_bias;
                c = cache_slot(s, key, vaddr);
                if (c && c->frames && c->exe_id == key && c->vaddr == vaddr && c->gen == s->cache_gen) {
                        s->n_cache_hits++;
                        *ret = (SymResult){.frames = c->frames, .n_frames = c->n_frames, .symbolized = true};
                        return 0;
                }
        }
        e = exe_lookup(&s->elf, identity);
        if (e && !e->dwfl && now_ns(CLOCK_MONOTONIC) - e->failed_ns > SYMBOLIZER_RETRY_NS) {
                for (size_t i = 0; i < s->elf.n_exes; i++)
                        if (s->elf.exes[i] == e) {
                                s->elf.exes[i] = s->elf.exes[--s->elf.n_exes];
                                break;
                        }
                exe_free(e);
                e = NULL;
        }
        if (!e) {
                r = exe_open(&s->elf, p, m, identity, &e);
                if (r < 0)
                        return r;
        }
        e->last_use = ++s->elf.tick;
        e->last_use_ns = now_ns(CLOCK_MONOTONIC);
        s->elf.used_since_check = true;

        if (!e->dwfl || !(m->bias_known)) {
                s->n_user_no_file++;
                result_frames_unknown(
                        &s->results,
                        result_frames_keep_printf(&s->results, "[unknown] %s+0x%" PRIx64, m->path, fileoff),
                        ret);
                return 0;
        }
        vaddr = addr - m->load_bias;
        s->elf.deferred = false;

        symname = exe_addrsym(s, e, vaddr);
        n = dwarf_inlines_frames(&s->elf, &s->results, e, vaddr, symname);
        if (n == 0)
                maybe_fetch_debuginfo(s, e);
        if (n > 0) {
                s->n_user_dwarf++;
        } else if (symname) {
                const char *file = NULL;
                int line = 0;
                Dwarf_Addr bias;
                Dwarf_Die *cudie = exe_addrcu(&s->elf, e, vaddr, &bias);
                if (cudie)
                        dwarf_inlines_srcline(&s->elf, e, cudie, vaddr - bias, &file, &line);
                result_frames_set(&s->results, &s->results.frames[0], symname, file, line, 0);
                n = 1;
        } else {
                s->n_user_no_symbol++;
                result_frames_unknown(
                        &s->results,
                        result_frames_keep_printf(&s->results, "[unknown] %s+0x%" PRIx64, m->path, fileoff),
                        ret);
                ret->no_symbol = true;
                return 0;
        }
        s->n_user_symbolized++;
        /* Named without its DWARF while that is being inflated: not kept. */
        if (s->elf.deferred) {
                s->elf.n_dwarf_deferred++;
                c = NULL;
        }
        *ret = (SymResult){.frames = c ? cache_store(s, c, key, vaddr, s->results.frames, n)
                                       : s->results.frames,
                           .n_frames = n,
                           .symbolized = true};
        return 0;
}

/* For tests: symbolize kernel addresses from another kallsyms-format file. */
int symbolizer_load_kallsyms(Symbolizer *s, const char *path)
{
        s->kernel.kallsyms_pinned = true;
        return kallsyms_load(&s->kernel, path);
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
        if (kallsyms_stale(&s->kernel))
                kallsyms_refresh(&s->kernel);
        if (s->kernel.kallsyms_error == 0 && !s->kernel.kallsyms_hidden) {
                s->warned_kernel_addresses_hidden = false;
                return true;
        }
        if (!s->warned_kernel_addresses_hidden)
                log_warning("--kernel-addresses: not serving kernel addresses, the kernel hides them from "
                            "profd itself (/proc/kallsyms shows %s: kernel.kptr_restrict, CAP_SYSLOG)",
                            s->kernel.kallsyms_hidden ? "only zeros" : "nothing");
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
                s->results.frames[0] = f;
                *ret = (SymResult){.frames = s->results.frames, .n_frames = 1, .symbolized = true};
                return 0;
        }
        /* Not read while the process ran, or not the object sampled: say it was Python code,
         * invent nothing (the namer's placeholder keeps the code object's address). */
        s->n_python_unnamed++;
        if (!f.name) {
                snprintf(s->python_placeholder, sizeof(s->python_placeholder), "[python]");
                f = (SymFrame){.name = s->python_placeholder, .system_name = s->python_placeholder};
        }
        s->results.frames[0] = f;
        *ret = (SymResult){.frames = s->results.frames, .n_frames = 1};
        return 0;
}

void symbolizer_set_runtime(Symbolizer *s, SymRuntime rt, SymbolizerRuntimeFn fn, void *userdata)
{
        if (rt < _SYM_RUNTIME_MAX) {
                s->runtimes[rt].fn = fn;
                s->runtimes[rt].userdata = userdata;
        }
}

void symbolizer_set_anon(Symbolizer *s, SymbolizerAnonFn fn, void *userdata)
{
        s->anon_fn = fn;
        s->anon_userdata = userdata;
}

void symbolizer_set_runtime_inlined(Symbolizer *s, SymRuntime rt, SymbolizerRuntimeInlinedFn fn)
{
        if (rt < _SYM_RUNTIME_MAX)
                s->runtimes[rt].inlined_fn = fn;
}

int symbolizer_runtime(Symbolizer *s, SymRuntime rt, const Process *p, uint64_t frame, SymResult *ret)
{
        SymFrame f = {};
        bool named = false;
        size_t n = 0;

        if (p && rt < _SYM_RUNTIME_MAX && s->runtimes[rt].fn)
                named = s->runtimes[rt].fn(s->runtimes[rt].userdata, p, frame, &f) >= 0 && f.name;
        if (!f.name) {
                static const char *const placeholders[_SYM_RUNTIME_MAX] = {
                        [SYM_RUNTIME_HOTSPOT] = "[java]",
                        [SYM_RUNTIME_V8] = "[javascript]",
                };
                snprintf(s->runtime_placeholder, sizeof(s->runtime_placeholder), "%s",
                         rt < _SYM_RUNTIME_MAX ? placeholders[rt] : "[runtime frame]");
                f = (SymFrame){.name = s->runtime_placeholder, .system_name = s->runtime_placeholder};
        }
        if (named && s->runtimes[rt].inlined_fn) {
                n = s->runtimes[rt].inlined_fn(s->runtimes[rt].userdata, p, frame, s->results.frames,
                                               SYMBOLIZER_MAX_INLINE);
                if (n > SYMBOLIZER_MAX_INLINE)
                        n = 0;
        }
        s->results.frames[n] = f;
        *ret = (SymResult){.frames = s->results.frames, .n_frames = n + 1, .symbolized = named};
        return 0;
}

int symbolizer_kernel(Symbolizer *s, uint64_t addr, SymResult *ret)
{
        size_t lo = 0, hi;
        const KSym *k;

        result_frames_clear(&s->results);
        s->n_kernel++;
        if (kallsyms_stale(&s->kernel))
                kallsyms_refresh(&s->kernel);

        if (s->kernel.kallsyms_hidden) {
                /* Never the address: the kernel itself refuses to show it. */
                result_frames_unknown(
                        &s->results,
                        result_frames_keep_printf(&s->results, "[kernel] (kallsyms hidden: kptr_restrict)"),
                        ret);
                return 0;
        }
        hi = s->kernel.n_ksyms;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (s->kernel.ksyms[mid].addr <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo == 0) {
                if (symbolizer_kernel_addresses_shown(s))
                        result_frames_unknown(
                                &s->results,
                                result_frames_keep_printf(&s->results,
                                                          "[unknown] [kernel.kallsyms] 0x%" PRIx64, addr),
                                ret);
                else
                        result_frames_unknown(
                                &s->results,
                                result_frames_keep_printf(&s->results, "[unknown] [kernel.kallsyms]"), ret);
                return 0;
        }
        k = &s->kernel.ksyms[lo - 1];
        s->results.frames[0] = (SymFrame){
                .name = s->kernel.knames + k->name,
                .system_name = s->kernel.knames + k->name,
                /* Module symbols name their module where a file would go. */
                .file = k->module ? result_frames_keep_printf(&s->results, "[%s]",
                                                              s->kernel.knames + k->module)
                                  : NULL,
        };
        s->n_kernel_symbolized++;
        *ret = (SymResult){.frames = s->results.frames, .n_frames = 1, .symbolized = true};
        return 0;
}

size_t symbolizer_kernel_build_id(Symbolizer *s, const uint8_t **ret)
{
        if (!s->kernel.kernel_build_id_read)
                kallsyms_read_kernel_build_id(&s->kernel);
        *ret = s->kernel.kernel_build_id;
        return s->kernel.kernel_build_id_size;
}

void symbolizer_write_metrics(const Symbolizer *s, FILE *f)
{
        static const char *const exe_events[] = {"opened", "evicted", "failed"};
        static const char *const lookups[] = {
                "space=\"user\",result=\"cached\"",   "space=\"user\",result=\"dwarf\"",
                "space=\"user\",result=\"symbol\"",   "space=\"user\",result=\"no_symbol\"",
                "space=\"user\",result=\"no_file\"",  "space=\"user\",result=\"perf_map\"",
                "space=\"kernel\",result=\"symbol\"", "space=\"kernel\",result=\"unknown\"",
        };
        static const char *const dwarf_unused[_DWARF_UNUSED_MAX] = {
                [DWARF_UNUSED_DWZ] = "dwz_file_missing",
                [DWARF_UNUSED_SPLIT] = "split_dwarf",
                [DWARF_UNUSED_TOO_LARGE] = "too_large",
        };
        const uint64_t exe_counts[] = {s->elf.n_exe_opened, s->elf.n_exe_evicted, s->elf.n_exe_failed};
        const uint64_t lookup_counts[] = {
                s->n_cache_hits,
                s->n_user_dwarf,
                s->n_user_symbolized - s->n_user_dwarf,
                s->n_user_no_symbol,
                s->n_user_no_file,
                s->n_user_perf_map,
                s->n_kernel_symbolized,
                s->n_kernel - s->n_kernel_symbolized,
        };

        metric_gauge(f, "profd_symbolizer_executables", "Executables with open symbol tables.",
                     s->elf.n_exes);
        metric_labelled(f, "profd_symbolizer_executables_total", "counter",
                        "Executables opened, evicted or failed to open.", "event", exe_events, exe_counts,
                        ELEMENTSOF(exe_events));
        metric_labelled(f, "profd_symbolizer_executables_closed_total", "counter",
                        "Open executables closed, by reason: not used for a while (idle), all of them "
                        "over their memory bound (memory; in_use: of these, ones used in the last 5 s, "
                        "past the hard bound), room made around a large read (a DWARF open, a symbol "
                        "table, a line table) for profd's peak limit (reserve).",
                        "reason", (const char *const[]){"idle", "memory", "in_use", "reserve"},
                        (const uint64_t[]){s->elf.n_exe_closed_idle, s->elf.n_exe_closed_memory,
                                           s->elf.n_exe_closed_in_use, s->elf.n_exe_closed_reserve},
                        4);
        metric_labelled(
                f, "profd_symbolizer_reserves_total", "counter",
                "DWARF opens and reads of large symbol tables (1 MiB or more) that would have taken "
                "profd's resident memory past its peak limit (the memory target plus 20 MiB), and "
                "large line tables (256 KiB or more) after which it was past it: room made (made), "
                "or not enough executables left to close (short; the read went ahead).",
                "result", (const char *const[]){"made", "short"},
                (const uint64_t[]){s->elf.n_reserves - s->elf.n_reserve_short, s->elf.n_reserve_short}, 2);
        metric_gauge(f, "profd_symbolizer_peak_limit_bytes",
                     "Resident memory a DWARF open or a large symbol table's read may take profd to "
                     "before executables are closed for it (0: no limit).",
                     s->elf.peak_limit);
        metric_counter(f, "profd_symbolizer_over_bound_total",
                       "Checks (every second while lookups run, else every 10 s) in which the open "
                       "executables went over their bound with none they "
                       "could close (all used in the last 5 s; past the hard bound: only deleted files).",
                       s->elf.n_over_bound);
        metric_gauge(
                f, "profd_symbolizer_executables_resident_bytes",
                "Resident part of the open executables' mapped files at the last check, before its pages "
                "were dropped: what lookups read since the one before.",
                s->elf.mapped_rss);
        metric_family(f, "profd_symbolizer_lookups_total", "counter", "Addresses looked up, by result.");
        for (size_t i = 0; i < ELEMENTSOF(lookups); i++)
                metric_sample(f, "profd_symbolizer_lookups_total", lookups[i], lookup_counts[i]);
        metric_labelled(f, "profd_symbolizer_dwarf_unused_total", "counter",
                        "Executables whose DWARF was not read because libdw would open files it names by "
                        "itself: a dwz file (.gnu_debugaltlink) not found, split DWARF (.dwo).",
                        "reason", dwarf_unused, s->elf.n_dwarf_unsafe, ELEMENTSOF(dwarf_unused));
        metric_counter(f, "profd_symbolizer_dwarf_opens_total",
                       "Executables' DWARF opened (again after a close).", s->elf.n_dwarf_opens);
        metric_counter_seconds(f, "profd_symbolizer_dwarf_open_seconds_total",
                               "Time the event loop spent opening DWARF: libdw inflates compressed "
                               "debug sections whole.",
                               s->elf.dwarf_open_ns);
        metric_gauge_seconds(f, "profd_symbolizer_dwarf_open_max_seconds",
                             "Longest single DWARF open so far (the loop was held that long).",
                             s->elf.dwarf_open_max_ns);
        DwarfInflaterStats is;
        dwarf_inflater_stats(s->elf.inflater, &is);
        metric_labelled(f, "profd_symbolizer_dwarf_inflations_total", "counter",
                        "Compressed debug files inflated by profd's own thread before libdw opened them: "
                        "done, failed (libdw then inflated them), busy (every slot taken: libdw did), "
                        "taken (opened), expired (not opened in time).",
                        "result", (const char *const[]){"done", "failed", "busy", "taken", "expired"},
                        (const uint64_t[]){is.inflated, is.failed, is.busy, is.taken, is.expired}, 5);
        metric_counter(f, "profd_symbolizer_dwarf_inflated_bytes_total",
                       "Bytes of DWARF sections inflated by that thread.", is.inflated_bytes);
        metric_gauge(f, "profd_symbolizer_dwarf_inflate_ready_bytes",
                     "Inflated copies not opened yet (memory files).", is.ready_bytes);
        metric_gauge_seconds(f, "profd_symbolizer_dwarf_inflate_max_seconds",
                             "Longest single inflation in that thread (the loop went on meanwhile).",
                             is.max_ns);
        metric_counter(f, "profd_symbolizer_dwarf_deferred_total",
                       "Lookups ahead of any request named without DWARF while it was being inflated "
                       "(not cached).",
                       s->elf.n_dwarf_deferred);
        metric_gauge(f, "profd_symbolizer_cache_entries", "Resolved addresses cached.", s->cache_entries);
        metric_gauge(f, "profd_symbolizer_cache_bytes", "Memory of the cached frames.", s->cache_bytes);
        metric_gauge(f, "profd_symbolizer_kallsyms_symbols", "Kernel text symbols loaded.",
                     s->kernel.n_ksyms);
        metric_gauge(f, "profd_symbolizer_kallsyms_hidden", "1 if kptr_restrict hides kernel addresses.",
                     s->kernel.kallsyms_hidden);
        perf_maps_write_metrics(s->perf_maps, f);
        debuginfod_fetch_write_metrics(s->debuginfod, f);
}

void symbolizer_note_process(Symbolizer *s, const Process *p)
{
        perf_maps_refresh(s->perf_maps, p);
}

void symbolizer_tick(Symbolizer *s, const Process *(*find)(pid_t pid, void *userdata), void *userdata)
{
        perf_maps_tick(s->perf_maps, find, userdata);
        inflations_collect(s);
        exe_cache_trim(&s->elf, now_ns(CLOCK_MONOTONIC));
}

uint64_t symbolizer_tables_bytes(const Symbolizer *s)
{
        return s ? exe_cache_tables_bytes(&s->elf) : 0;
}

uint64_t symbolizer_set_tables_limit(Symbolizer *s, uint64_t max_bytes)
{
        return s ? exe_cache_set_max_bytes(&s->elf, max_bytes) : 0;
}

void symbolizer_set_peak_limit(Symbolizer *s, uint64_t rss_bytes)
{
        if (s)
                s->elf.peak_limit = rss_bytes;
}

void symbolizer_memory(const Symbolizer *s, SymbolizerMemory *ret)
{
        size_t heap = 0;
        uint64_t mapped = exe_cache_mapped_bytes(&s->elf);

        for (size_t i = 0; i < s->elf.n_exes; i++)
                heap += exe_heap_bytes(s->elf.exes[i]);
        DwarfInflaterStats is;

        dwarf_inflater_stats(s->elf.inflater, &is);
        /* Inflated copies not opened yet are memory files of their own. */
        *ret = (SymbolizerMemory){
                .dwarf_elf = heap + mapped + is.ready_bytes,
                .dwarf_elf_mapped = mapped,
                .symbol_cache =
                        s->cache_bytes + (s->cache ? SYMBOLIZER_CACHE_SLOTS * sizeof(CacheEntry) : 0),
                .jit_names = perf_maps_memory(s->perf_maps),
                .kallsyms = s->kernel.n_ksyms * sizeof(*s->kernel.ksyms) + s->kernel.knames_size,
        };
}
