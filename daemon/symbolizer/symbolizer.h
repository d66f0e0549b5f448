/* SPDX-License-Identifier: GPL-2.0-only */
/* Address -> function names (with inline frames, file, line). User code through libdwfl
 * (.symtab/.dynsym, MiniDebugInfo, /usr/lib/debug build-id files), kernel through /proc/kallsyms.
 * Caches per executable identity. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "symbolizer/debuginfod-fetch.h"
#include "tracker/process-table.h"
#include "util/macro.h"

typedef struct Symbolizer Symbolizer;

typedef struct SymFrame {
        const char *name;        /* demangled; never NULL (falls back to "[unknown]" style) */
        const char *system_name; /* mangled, or same as name */
        const char *file;        /* NULL if unknown */
        int line;                /* 0 if unknown */
        int start_line;          /* line of the function's declaration; 0 if unknown */
} SymFrame;

/* Innermost (inlined) first. Pointers are owned by the symbolizer and stay valid until the next
 * symbolizer_user()/symbolizer_kernel() call (callers copy what they keep): this keeps the
 * symbolizer's memory bounded however many addresses it resolves. */
typedef struct SymResult {
        const SymFrame *frames;
        size_t n_frames;
        bool symbolized; /* false: no symbol found; frames[0] is a placeholder */
        /* Not symbolized although the file was read: it has no symbol for the address (stripped),
         * where a debug file found by its build ID may have one. false when the file could not be
         * read (gone, replaced or refused; not ELF): the file at its path may not be the one that
         * ran. */
        bool no_symbol;
        /* Set when the frames were named from another file than the mapping's: a JIT's perf map
         * ("/tmp/perf-NSPID.map", the path the process sees) for anonymous executable memory. */
        const char *source_file;
} SymResult;

int symbolizer_new(Symbolizer **ret);
Symbolizer *symbolizer_free(Symbolizer *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(Symbolizer *, symbolizer_free);

/* addr is a runtime address in mapping m of process p. For return addresses (every frame but
 * the leaf) pass address - 1 so the call, not the instruction after it, is named. */
int symbolizer_user(Symbolizer *s, const Process *p, const ProcMapping *m, uint64_t addr, SymResult *ret);
int symbolizer_kernel(Symbolizer *s, uint64_t addr, SymResult *ret);
/* Names a Python frame (python-stack.h) of p into *ret (strings owned by the callee, valid until
 * its next call); negative when it cannot. */
typedef int (*SymbolizerPythonFn)(void *userdata, const Process *p, uint64_t frame, SymFrame *ret);
void symbolizer_set_python(Symbolizer *s, SymbolizerPythonFn fn, void *userdata);
/* A Python frame of p: one frame with its function, file and line; unnamed (not read while the
 * process ran): a "[python] 0xCODE" placeholder with symbolized false. */
int symbolizer_python(Symbolizer *s, const Process *p, uint64_t frame, SymResult *ret);

/* Frames of other runtimes whose walkers record them in stacks as entries of their own (not
 * addresses): each runtime registers how its frames are named. */
typedef enum SymRuntime {
        SYM_RUNTIME_HOTSPOT, /* Java frames (runtimes/hotspot-frames.h) */
        SYM_RUNTIME_V8,      /* JavaScript frames of V8 (runtimes/v8-stack.h) */
        _SYM_RUNTIME_MAX,
} SymRuntime;
/* Names frame of p into *ret (strings owned by the callee, valid until its next call); negative
 * when it cannot, with a placeholder in *ret that invents nothing. */
typedef int (*SymbolizerRuntimeFn)(void *userdata, const Process *p, uint64_t frame, SymFrame *ret);
void symbolizer_set_runtime(Symbolizer *s, SymRuntime rt, SymbolizerRuntimeFn fn, void *userdata);
/* Optional, after fn named frame: the frames inlined into it (a JIT's inlined methods), innermost
 * first, at most max, into ret (strings owned by the callee as fn's); returns their number. They
 * become lines of the frame's location, as native inlined functions do. userdata is fn's. */
typedef size_t (*SymbolizerRuntimeInlinedFn)(void *userdata, const Process *p, uint64_t frame, SymFrame *ret,
                                             size_t max);
void symbolizer_set_runtime_inlined(Symbolizer *s, SymRuntime rt, SymbolizerRuntimeInlinedFn fn);
/* Optional: names an address in anonymous memory (a runtime's own code: a JVM's stubs) that no
 * perf map names; the string stays the callee's. NULL: unnamed. */
typedef const char *(*SymbolizerAnonFn)(void *userdata, const Process *p, uint64_t addr);
void symbolizer_set_anon(Symbolizer *s, SymbolizerAnonFn fn, void *userdata);
/* A frame of runtime rt of p: one frame, named, or the runtime's placeholder ("[java]",
 * "[javascript]"; symbolized false). */
int symbolizer_runtime(Symbolizer *s, SymRuntime rt, const Process *p, uint64_t frame, SymResult *ret);
/* Kernel text addresses reveal where KASLR put the kernel, so by default nothing profd serves
 * carries them: kernel frames are names, and names of frames that have none (no symbol, or
 * kallsyms hidden) say so without the address. show (--kernel-addresses) lets them through, but
 * only while the kernel shows profd real addresses in /proc/kallsyms: under kptr_restrict=2 (or
 * without CAP_SYSLOG) the kernel hides them from profd itself, and profd does not pass on what
 * kptr_restrict hides. */
void symbolizer_set_kernel_addresses(Symbolizer *s, bool show);
/* Whether kernel addresses may be served now (pprof location addresses, mapping range). */
bool symbolizer_kernel_addresses_shown(Symbolizer *s);
void symbolizer_write_metrics(const Symbolizer *s, FILE *f);
/* What the symbolizer holds, in bytes (profd_memory_bytes). */
typedef struct SymbolizerMemory {
        uint64_t dwarf_elf;        /* open executables: resident mapped files, tables read from them */
        uint64_t dwarf_elf_mapped; /* of which resident mapped files */
        uint64_t symbol_cache;     /* resolved addresses */
        uint64_t jit_names;        /* perf maps */
        uint64_t kallsyms;         /* kernel symbols */
} SymbolizerMemory;
void symbolizer_memory(const Symbolizer *s, SymbolizerMemory *ret);
/* For the memory budget (util/memory-budget.h): the open executables' tables as their bound counts
 * them, and that bound (0: SYMBOLIZER_MAX_BYTES), lowered while profd is over its target; returns
 * the executables closed. Their addresses stay named in the cache; the rest open them again. */
uint64_t symbolizer_tables_bytes(const Symbolizer *s);
uint64_t symbolizer_set_tables_limit(Symbolizer *s, uint64_t max_bytes);
/* The RSS a large read (a DWARF open, a symbol table of 1 MiB or more) may take profd to:
 * executables are closed before one that would pass it (exe_cache_reserve()); 0: no check. */
void symbolizer_set_peak_limit(Symbolizer *s, uint64_t rss_bytes);
/* A process seen in samples: reads (a bounded step of) its perf map while it runs, if it has
 * anonymous executable memory (perf-map.h). */
void symbolizer_note_process(Symbolizer *s, const Process *p);
/* Periodic (every sample drain): forgets the perf maps of processes find() no longer knows, reads what live
 * ones appended (bounded). */
void symbolizer_tick(Symbolizer *s, const Process *(*find)(pid_t pid, void *userdata), void *userdata);
/* Where separate debuginfo is searched (libdwfl syntax, default ":.debug:/usr/lib/debug"). */
int symbolizer_set_debuginfo_path(Symbolizer *s, const char *path);
/* Fetches debug files missing on the host from debuginfod servers (debuginfod-fetch.h), in threads
 * whose results the loop of event picks up. Off unless called. */
int symbolizer_enable_debuginfod(Symbolizer *s, sd_event *event, const DebuginfodOptions *o);
/* Inflates compressed debug files in a thread (dwarf-inflate.h) whose results the loop of event
 * picks up. Off unless called: libdw then inflates them on the loop as it opens them. */
int symbolizer_enable_inflater(Symbolizer *s, sd_event *event);
/* Lookups from now on are made ahead of any request (the symbol warmer): an executable whose debug
 * file is being inflated is named without its DWARF, and that name is not kept. */
void symbolizer_set_background(Symbolizer *s, bool background);
/* GNU build ID of the running kernel (from /sys/kernel/notes); returns its size, 0 if unknown. */
size_t symbolizer_kernel_build_id(Symbolizer *s, const uint8_t **ret);
/* Kernel symbols from another file in /proc/kallsyms format (tests); normally read lazily. */
int symbolizer_load_kallsyms(Symbolizer *s, const char *path);
