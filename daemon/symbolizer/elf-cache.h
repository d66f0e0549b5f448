/* SPDX-License-Identifier: GPL-2.0-only */
/* Executables opened for symbolization: one Dwfl per file identity, the tables read from it
 * (symbols, PLT entries, CU ranges), and the cache of open ones. */
#pragma once

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symbolizer/debuginfo-search.h"
#include "tracker/process-table.h"
#include "util/memory-owners.h"
#include "util/time-util.h"

/* Executables with an open Dwfl at once; the least recently used is closed beyond this.
 * Each holds a mapping of the file plus whatever DWARF was parsed from it. */
#define SYMBOLIZER_MAX_EXES 128
/* ... and in bytes: the tables read from them (symbols, DWARF inflated from compressed sections,
 * line tables libdw parsed); least recently used closed first. The pages of their mapped files
 * (the executable, its debug and dwz files) are dropped every SYMBOLIZER_CHECK_NS instead. A large
 * binary's symbol table and a .debug file's DWARF are 5-20 MiB each. */
#define SYMBOLIZER_MAX_BYTES (40ULL << 20)
/* An executable no lookup used for this long is closed: its process is usually gone, and its
 * mapping would stay resident as long as it is open. */
#define SYMBOLIZER_IDLE_NS (180 * NSEC_PER_SEC)
/* Pages of the mapped files read since the last check (uncompressed DWARF, symbol names) are
 * dropped and freed heap given back this often while lookups run: at 10 s, and still at 3 s,
 * they were 20-45 MiB of file RSS and 20-45 MiB of free heap at a profile build's peaks. A check
 * costs a read of /proc/self/smaps and a malloc_trim, ~1-3 ms; none is made between drains
 * (every second) when no lookup came, except every SYMBOLIZER_CHECK_IDLE_NS for idle closes. */
#define SYMBOLIZER_CHECK_NS (NSEC_PER_SEC / 10 * 9)
#define SYMBOLIZER_CHECK_IDLE_NS (10 * NSEC_PER_SEC)
/* ... but never one used this recently: the bound is exceeded rather than a profile's files
 * closed under it (counted: profd_symbolizer_over_bound_total). */
#define SYMBOLIZER_KEEP_NS (5 * NSEC_PER_SEC)
/* ... up to this much: past it, executables used that recently are closed too (least recently
 * used first, never the one being read, nor a deleted file, which may not open again once its
 * process is gone). A profile of a busy host touches tens of executables with Debian debug files
 * within 5 s, whose inflated DWARF and line tables alone went past 100 MiB. Their addresses stay
 * named in the symbolizer's cache; only addresses not resolved yet open them again. */
#define SYMBOLIZER_HARD_MAX_BYTES (48ULL << 20)
/* profd's resident memory a DWARF open may take it to (the memory budget's target plus this,
 * under the 128 MiB profd promises): the budget checks RSS once a second, after the fact, and
 * one open of a Debian debug file's DWARF adds 10-35 MiB within that second (inflated sections,
 * libdw's CU and abbreviation tables). Before one, executables are closed until it fits
 * (exe_cache_reserve()). 16 MiB, not 20: an hour at 120 MiB ended at a VmHWM of 129.0 MiB (a read
 * larger than its estimate), so 12 MiB are left for that. */
#define SYMBOLIZER_PEAK_ABOVE_TARGET (16ULL << 20)
/* What a DWARF open costs, as a multiple of its inflated sections (libdw's CU, abbreviation and
 * line tables come on top, as lookups parse them): an estimate, libdw does not say. In an hour
 * of a busy host with half the sections as overhead, RSS still reached 128.9 MiB once. */
#define SYMBOLIZER_DWARF_COST_FACTOR 2
/* A line table parsed this large or larger is followed by a look at RSS (libdw parses it whole,
 * so room is made right after it, not at the next check a second later). */
#define SYMBOLIZER_LINES_CHECK_BYTES (256ULL << 10)
/* Symbol tables smaller than this are read without a check (most libraries: RSS is read for it). */
#define SYMBOLIZER_RESERVE_MIN_BYTES (1ULL << 20)
/* DWARF stored compressed is inflated whole into memory when opened (Debian's debug packages
 * compress it): a file with more than this is named from its symbol table only. */
#define SYMBOLIZER_MAX_DWARF_BYTES (24ULL << 20)

/* Why an executable's DWARF was not read. */
enum { DWARF_UNUSED_DWZ, DWARF_UNUSED_SPLIT, DWARF_UNUSED_TOO_LARGE, _DWARF_UNUSED_MAX };

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

typedef struct Exe {
        char *identity;
        uint64_t hash;
        Dwfl *dwfl;
        Dwfl_Module *mod;
        uint64_t last_use;
        uint64_t last_use_ns; /* CLOCK_MONOTONIC */
        MemoryFile file;      /* the executable as libelf mapped it */
        /* CUs whose line table libdw parsed (a set of DIE offsets, open addressing, 0 = empty)
         * and the estimated heap of those tables. */
        uint64_t *line_cus;
        size_t n_line_cus, cap_line_cus;
        uint64_t line_bytes;
        uint64_t dwarf_bytes; /* DWARF sections libdw inflated (compressed in the file) */
        uint64_t failed_ns;   /* open failed at this time (CLOCK_MONOTONIC) */
        bool deleted;         /* no link left when opened: may not open again */
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
        bool debuginfod_asked;        /* its build ID was handed to debuginfod (once per open) */
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

typedef struct ExeCache {
        Exe *exes[SYMBOLIZER_MAX_EXES];
        size_t n_exes;
        uint64_t tick, next_exe_id;
        char *debuginfo_path;
        const char *debuginfod_dir; /* fetched debug files (debuginfod-fetch.h); NULL: off */
        Dwfl_Callbacks callbacks;
        uint64_t n_exe_opened, n_exe_evicted, n_exe_failed;
        uint64_t n_dwarf_unsafe[_DWARF_UNUSED_MAX];
        uint64_t n_exe_closed_idle, n_exe_closed_memory, n_exe_closed_in_use;
        /* Room made around large reads (exe_cache_reserve()): reads that needed it, executables
         * closed for it, and reads that went ahead without enough (nothing left to close). */
        uint64_t n_reserves, n_exe_closed_reserve, n_reserve_short;
        uint64_t peak_limit; /* RSS such a read may take profd to; 0: no check */
        /* Opens of an executable's DWARF (libdw inflates compressed sections whole, holding the
         * loop: libc's Debian debug file ~0.1 s): how many, their time, the longest. */
        uint64_t n_dwarf_opens, dwarf_open_ns, dwarf_open_max_ns;
        /* Makes inflated copies of compressed debug files off the loop (NULL: libdw inflates
         * them as it opens them). */
        struct DwarfInflater *inflater;
        /* Lookups made ahead of any request (the symbol warmer): an executable whose debug file
         * is being inflated goes without DWARF for them rather than have libdw inflate it on the
         * loop; their results are not cached (n_dwarf_deferred counts them: a lookup that met
         * such an executable sets deferred, its caller counts it once). */
        bool background, deferred;
        uint64_t n_dwarf_deferred;
        uint64_t last_check_ns;
        bool closed_since_check; /* freed heap to give back at the next check */
        bool used_since_check;   /* a lookup went to an executable since the last check */
        bool over_bound;         /* over SYMBOLIZER_MAX_BYTES with nothing to close, since the check */
        uint64_t n_over_bound;   /* checks that found it so */
        uint64_t mapped_rss;     /* resident bytes of the mapped files at the last check, before the drop */
        uint64_t max_bytes; /* the bound of the tables now (the memory budget's); 0: SYMBOLIZER_MAX_BYTES */
} ExeCache;

void exe_free(Exe *e);
/* The open (or failed) executable of this identity, NULL if none. */
Exe *exe_lookup(ExeCache *c, const char *identity);
/* Opens the file of mapping m of p (evicting the least recently used beyond
 * SYMBOLIZER_MAX_EXES) and adds it to c; an executable that cannot be read is added too, with no
 * Dwfl and its failure time. */
/* Heap of the tables profd read from e (symbols, PLT names, CU ranges); not libdw's own. */
size_t exe_heap_bytes(const Exe *e);
/* Heap of one parsed line table row in libdw (struct Dwarf_Line_s and its share of the table),
 * an estimate: libdw does not say. */
#define EXE_LINE_BYTES 56
/* Counts the line table of the CU at cu_offset of e once; closes least recently used others
 * while the cache is over SYMBOLIZER_MAX_BYTES. */
void exe_note_line_table(ExeCache *c, Exe *e, uint64_t cu_offset, size_t n_lines);
/* Closes least recently used executables other than keep while the estimate of what all hold
 * (resident mapped files as last measured, tables, line tables) exceeds SYMBOLIZER_MAX_BYTES. */
void exe_cache_make_room(ExeCache *c, const Exe *keep);
/* Makes room for bytes about to be read into memory for keep (its DWARF, its symbol tables; 0:
 * after a read, a line table): while profd's RSS plus
 * them passes c->peak_limit, closes the least recently used other executables (not deleted
 * files, which may not open again), whatever their last use, and gives their memory back. */
void exe_cache_reserve(ExeCache *c, const Exe *keep, uint64_t bytes);
/* Sets the bound of the tables (0: SYMBOLIZER_MAX_BYTES; executables used in the last
 * SYMBOLIZER_KEEP_NS are closed past it plus SYMBOLIZER_HARD_MAX_BYTES - SYMBOLIZER_MAX_BYTES)
 * and closes what is over it now; returns how many executables that closed. */
uint64_t exe_cache_set_max_bytes(ExeCache *c, uint64_t max_bytes);
/* The tables of the open executables, as the bound counts them. */
uint64_t exe_cache_tables_bytes(const ExeCache *c);
/* Resident bytes of the open executables' mapped files now (one read of /proc/self/smaps). */
uint64_t exe_cache_mapped_bytes(const ExeCache *c);
/* Drops the resident pages of e's mapped files (a symbol table read whole once is not needed
 * again: its entries were copied, and names are read back on demand). */
void exe_drop_pages(Exe *e);
/* Every SYMBOLIZER_CHECK_NS: closes executables idle for SYMBOLIZER_IDLE_NS, then the least
 * recently used while all of them hold more than SYMBOLIZER_MAX_BYTES; gives what they freed back
 * to the kernel. */
void exe_cache_trim(ExeCache *c, uint64_t now_ns);
int exe_open(ExeCache *c, const Process *p, const ProcMapping *m, const char *identity, Exe **ret);
