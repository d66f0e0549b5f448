/* SPDX-License-Identifier: GPL-2.0-only */
/* The cache of opened executables: a Dwfl per file identity, opened through the process's
 * descriptor, with separate debug files searched also in the process's own root. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "symbolizer/dwarf-inflate.h"
#include "symbolizer/elf-cache.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/memory-owners.h"
#include "util/time-util.h"

void exe_free(Exe *e)
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
        free(e->line_cus);
        free(e->identity);
        debuginfo_search_done(&e->search);
        free(e);
}

Exe *exe_lookup(ExeCache *c, const char *identity)
{
        uint64_t h = hash_fnv1a(HASH_FNV1A_INIT, identity, strlen(identity));
        for (size_t i = 0; i < c->n_exes; i++)
                if (c->exes[i]->hash == h && strcmp(c->exes[i]->identity, identity) == 0)
                        return c->exes[i];
        return NULL;
}

static void exe_evict_lru(ExeCache *c)
{
        size_t victim = 0;
        for (size_t i = 1; i < c->n_exes; i++)
                if (c->exes[i]->last_use < c->exes[victim]->last_use)
                        victim = i;
        exe_free(c->exes[victim]);
        c->exes[victim] = c->exes[--c->n_exes];
        c->n_exe_evicted++;
}

size_t exe_heap_bytes(const Exe *e)
{
        size_t n = sizeof(*e) + e->n_syms * sizeof(ExeSym) + e->n_cus * sizeof(CuRange) + e->line_bytes +
                   e->dwarf_bytes + e->cap_line_cus * sizeof(uint64_t);

        for (size_t i = 0; i < e->n_plt; i++)
                n += sizeof(ExeSym) + strlen(e->plt[i].name) + 1;
        return n;
}

static void exe_close_at(ExeCache *c, size_t i)
{
        exe_free(c->exes[i]);
        c->exes[i] = c->exes[--c->n_exes];
}

void exe_drop_pages(Exe *e)
{
        MemoryFile files[3] = {e->file, e->search.files[DEBUGINFO_FILE_DEBUG],
                               e->search.files[DEBUGINFO_FILE_ALT]};
        uint64_t rss[3];

        (void)memory_files_rss_drop(files, 3, rss);
}

static size_t exe_cache_files(const ExeCache *c, MemoryFile *files)
{
        size_t n = 0;

        for (size_t i = 0; i < c->n_exes; i++) {
                files[n++] = c->exes[i]->file;
                files[n++] = c->exes[i]->search.files[DEBUGINFO_FILE_DEBUG];
                files[n++] = c->exes[i]->search.files[DEBUGINFO_FILE_ALT];
        }
        return n;
}

uint64_t exe_cache_mapped_bytes(const ExeCache *c)
{
        MemoryFile files[SYMBOLIZER_MAX_EXES * 3];
        uint64_t rss[SYMBOLIZER_MAX_EXES * 3], sum = 0;
        size_t n = exe_cache_files(c, files);

        if (memory_files_rss(files, n, rss) < 0)
                return 0;
        for (size_t i = 0; i < n; i++)
                sum += rss[i];
        return sum;
}

/* Pages of the mapped files are needed while lookups read them (the symbol table once, names,
 * DWARF): dropped at every check, they count only while in use, and the bound is on the rest. */
static void exe_cache_drop_pages(ExeCache *c)
{
        MemoryFile files[SYMBOLIZER_MAX_EXES * 3];
        uint64_t rss[SYMBOLIZER_MAX_EXES * 3];
        size_t n = exe_cache_files(c, files);

        if (memory_files_rss_drop(files, n, rss) < 0)
                return;
        c->mapped_rss = 0;
        for (size_t i = 0; i < n; i++)
                c->mapped_rss += rss[i];
}

uint64_t exe_cache_tables_bytes(const ExeCache *c)
{
        uint64_t total = 0;

        for (size_t i = 0; i < c->n_exes; i++)
                total += exe_heap_bytes(c->exes[i]);
        return total;
}

/* Which executables may be closed to free memory: those unused for SYMBOLIZER_KEEP_NS (deleted
 * files included: they are not in use), or any whose file can be opened again (not deleted). */
typedef enum { VICTIM_IDLE, VICTIM_REOPENABLE } VictimRule;

/* The least recently used executable other than keep that rule allows closing; SIZE_MAX if none. */
static size_t lru_victim(const ExeCache *c, const Exe *keep, VictimRule rule, uint64_t now)
{
        size_t victim = SIZE_MAX;

        for (size_t i = 0; i < c->n_exes; i++) {
                const Exe *e = c->exes[i];
                bool allowed = rule == VICTIM_IDLE ? now - e->last_use_ns > SYMBOLIZER_KEEP_NS : !e->deleted;

                if (e != keep && allowed && (victim == SIZE_MAX || e->last_use < c->exes[victim]->last_use))
                        victim = i;
        }
        return victim;
}

void exe_cache_make_room(ExeCache *c, const Exe *keep)
{
        uint64_t total = exe_cache_tables_bytes(c), now = now_ns(CLOCK_MONOTONIC);
        uint64_t max = c->max_bytes ?: SYMBOLIZER_MAX_BYTES;

        while (total > max) {
                /* Not one a profile being built may still need: an exited process's deleted file
                 * may not open again, and closing what is in use only reads it again. */
                size_t victim = lru_victim(c, keep, VICTIM_IDLE, now);

                if (victim == SIZE_MAX && total > max + (SYMBOLIZER_HARD_MAX_BYTES - SYMBOLIZER_MAX_BYTES)) {
                        victim = lru_victim(c, keep, VICTIM_REOPENABLE, now);
                        if (victim != SIZE_MAX)
                                c->n_exe_closed_in_use++;
                }
                if (victim == SIZE_MAX) {
                        c->over_bound = true;
                        return;
                }
                total -= exe_heap_bytes(c->exes[victim]);
                exe_close_at(c, victim);
                c->n_exe_closed_memory++;
                c->closed_since_check = true;
        }
}

/* Rounds of close-then-measure: the tables' estimate leaves libdw's own structures out, so what a
 * close frees is only known by measuring RSS again; each round closes as much as the estimate says
 * is missing (at least one executable). */
#define RESERVE_ROUNDS 4

void exe_cache_reserve(ExeCache *c, const Exe *keep, uint64_t bytes)
{
        uint64_t rss;
        bool counted = false;

        if (c->peak_limit == 0)
                return;
        for (unsigned round = 0; round < RESERVE_ROUNDS; round++) {
                uint64_t need, freed = 0;

                if (memory_self_rss(&rss) < 0 || rss + bytes <= c->peak_limit)
                        return;
                if (!counted) {
                        c->n_reserves++;
                        counted = true;
                }
                need = rss + bytes - c->peak_limit;
                while (freed < need) {
                        size_t victim = lru_victim(c, keep, VICTIM_REOPENABLE, 0);

                        if (victim == SIZE_MAX)
                                break;
                        freed += exe_heap_bytes(c->exes[victim]);
                        exe_close_at(c, victim);
                        c->n_exe_closed_reserve++;
                }
                if (freed == 0)
                        break;
                memory_release_free();
        }
        if (memory_self_rss(&rss) == 0 && rss + bytes > c->peak_limit)
                c->n_reserve_short++;
}

uint64_t exe_cache_set_max_bytes(ExeCache *c, uint64_t max_bytes)
{
        uint64_t before = c->n_exe_closed_memory;

        c->max_bytes = max_bytes;
        exe_cache_make_room(c, NULL);
        return c->n_exe_closed_memory - before;
}

void exe_note_line_table(ExeCache *c, Exe *e, uint64_t cu_offset, size_t n_lines)
{
        uint64_t key = cu_offset + 1; /* 0 marks an empty slot */
        size_t i;

        if ((e->n_line_cus + 1) * 2 > e->cap_line_cus) {
                size_t cap = e->cap_line_cus ? e->cap_line_cus * 2 : 16;
                uint64_t *v = calloc(cap, sizeof(*v));

                if (!v)
                        return;
                for (size_t k = 0; k < e->cap_line_cus; k++)
                        if (e->line_cus[k]) {
                                for (i = (e->line_cus[k] * 0x9e3779b97f4a7c15ULL) >> 32 & (cap - 1); v[i];
                                     i = (i + 1) & (cap - 1))
                                        ;
                                v[i] = e->line_cus[k];
                        }
                free(e->line_cus);
                e->line_cus = v;
                e->cap_line_cus = cap;
        }
        for (i = (key * 0x9e3779b97f4a7c15ULL) >> 32 & (e->cap_line_cus - 1); e->line_cus[i];
             i = (i + 1) & (e->cap_line_cus - 1))
                if (e->line_cus[i] == key)
                        return;
        e->line_cus[i] = key;
        e->n_line_cus++;
        e->line_bytes += (uint64_t)n_lines * EXE_LINE_BYTES;
        exe_cache_make_room(c, e);
        if ((uint64_t)n_lines * EXE_LINE_BYTES >= SYMBOLIZER_LINES_CHECK_BYTES)
                exe_cache_reserve(c, e, 0);
}

void exe_cache_trim(ExeCache *c, uint64_t now)
{
        if (now - c->last_check_ns < (c->used_since_check ? SYMBOLIZER_CHECK_NS : SYMBOLIZER_CHECK_IDLE_NS))
                return;
        c->last_check_ns = now;
        c->used_since_check = false;
        for (size_t i = 0; i < c->n_exes;)
                if (now - c->exes[i]->last_use_ns > SYMBOLIZER_IDLE_NS) {
                        exe_close_at(c, i);
                        c->n_exe_closed_idle++;
                } else
                        i++;
        exe_cache_drop_pages(c);
        exe_cache_make_room(c, NULL);
        c->n_over_bound += c->over_bound;
        c->over_bound = false;
        c->closed_since_check = false;
        /* libdw's parsed DWARF (inflated sections, line tables, abbreviations) is heap, freed when
         * an executable closes and also by a profile's transient work: resident until given back.
         * A trim costs ~1 ms; every check is cheaper than keeping a profile's peak. */
        memory_release_free();
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

/* An executable with its own compressed DWARF (Go's default, gcc -gz): its inflated copy
 * (dwarf-inflate.h) if one is ready, then read in its place (the same bytes at the same offsets but
 * the DWARF's); else fd, its copy perhaps being made (e->search.inflate_pending). */
static int exe_inflated_main(ExeCache *c, Exe *e, int fd)
{
        struct stat st;
        Elf *elf;
        uint64_t bytes;

        if (!c->inflater)
                return fd;
        elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        bytes = debuginfo_dwarf_inflated_bytes(elf);
        elf_end(elf);
        if (!dwarf_inflater_swap(c->inflater, &fd, bytes, SYMBOLIZER_MAX_DWARF_BYTES, c->background,
                                 &e->search.inflate_pending))
                return fd;
        /* The mapped file to account for is the copy now; deleted stays the original's. */
        if (fstat(fd, &st) == 0)
                e->file = (MemoryFile){.dev = st.st_dev, .ino = st.st_ino, .size = (uint64_t)st.st_size};
        e->search.inflated = true;
        return fd;
}

int exe_open(ExeCache *c, const Process *p, const ProcMapping *m, const char *identity, Exe **ret)
{
        struct stat st;
        Exe *e;
        int fd;

        if (c->n_exes >= SYMBOLIZER_MAX_EXES)
                exe_evict_lru(c);
        exe_cache_make_room(c, NULL);
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->identity = strdup(identity);
        if (!e->identity) {
                free(e);
                return -ENOMEM;
        }
        e->hash = hash_fnv1a(HASH_FNV1A_INIT, identity, strlen(identity));
        e->id = ++c->next_exe_id;
        e->last_use_ns = now_ns(CLOCK_MONOTONIC);
        c->exes[c->n_exes++] = e;

        fd = process_open_mapping(p, m);
        if (fd < 0) {
                e->failed_ns = now_ns(CLOCK_MONOTONIC);
                c->n_exe_failed++;
                *ret = e;
                return 0;
        }
        e->callbacks = c->callbacks;
        e->search.path = c->debuginfo_path;
        e->search.debuginfod_dir = c->debuginfod_dir;
        e->search.inflater = c->inflater;
        e->search.inflate_queue = &c->background;
        e->search.inflate_max_bytes = SYMBOLIZER_MAX_DWARF_BYTES;
        e->search.root = process_root(p->pid);
        if (fstat(fd, &st) == 0) {
                e->search.main_dev = st.st_dev;
                e->search.main_ino = st.st_ino;
                e->file = (MemoryFile){.dev = st.st_dev, .ino = st.st_ino, .size = (uint64_t)st.st_size};
                e->deleted = st.st_nlink == 0;
        }
        fd = exe_inflated_main(c, e, fd);
        e->dwfl = dwfl_begin(&e->callbacks);
        if (!e->dwfl) {
                close(fd);
                e->failed_ns = now_ns(CLOCK_MONOTONIC);
                c->n_exe_failed++;
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
                c->n_exe_failed++;
        } else {
                debuginfo_search_attach(&e->search, e->mod);
                c->n_exe_opened++;
        }
        *ret = e;
        return 0;
}
