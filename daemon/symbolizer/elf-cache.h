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

/* Executables with an open Dwfl at once; the least recently used is closed beyond this.
 * Each holds a mapping of the file plus whatever DWARF was parsed from it. */
#define SYMBOLIZER_MAX_EXES 128

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

typedef struct ExeCache {
        Exe *exes[SYMBOLIZER_MAX_EXES];
        size_t n_exes;
        uint64_t tick, next_exe_id;
        char *debuginfo_path;
        Dwfl_Callbacks callbacks;
        uint64_t n_exe_opened, n_exe_evicted, n_exe_failed;
        uint64_t n_dwarf_unsafe[2]; /* dwz file missing, split DWARF */
} ExeCache;

void exe_free(Exe *e);
/* The open (or failed) executable of this identity, NULL if none. */
Exe *exe_lookup(ExeCache *c, const char *identity);
/* Opens the file of mapping m of p (evicting the least recently used beyond
 * SYMBOLIZER_MAX_EXES) and adds it to c; an executable that cannot be read is added too, with no
 * Dwfl and its failure time. */
int exe_open(ExeCache *c, const Process *p, const ProcMapping *m, const char *identity, Exe **ret);
