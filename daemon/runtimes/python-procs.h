/* SPDX-License-Identifier: GPL-2.0-only */
/* Which processes run CPython, and how BPF walks their frames. After the tracker reads a process's
 * mappings, python_procs_note() looks for the interpreter among its mapped files (the python3.X
 * executable or libpython3.X: found by the exported symbols _PyRuntime and
 * _PyEval_EvalFrameDefault, no debug symbols needed), takes the struct offsets of its version
 * (python-offsets.h; 3.13: the process's own _Py_DebugOffsets) and writes the BPF map
 * python_procs (bpf/profd-python.h). A version profd has no offsets for is counted and left to
 * native unwinding. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "runtimes/python-offsets.h"
#include "tracker/process-table.h"
#include "util/macro.h"

typedef struct PythonProcs PythonProcs;

/* What symbolizing a Python frame of the process needs. */
typedef struct PythonProcess {
        pid_t pid;
        uint64_t start_time;
        PythonOffsets offsets;
        uint64_t code_type; /* address of PyCode_Type in the process */
        uint64_t str_type;  /* address of PyUnicode_Type */
} PythonProcess;

/* map_fd: the BPF map python_procs; -1 for none (tests of detection alone). */
int python_procs_new(int map_fd, PythonProcs **ret);
PythonProcs *python_procs_free(PythonProcs *pp);
DEFINE_TRIVIAL_CLEANUP_FUNC(PythonProcs *, python_procs_free);

/* p's mappings were (re)read: describe its interpreter to BPF, or forget it if it has none. */
void python_procs_note(PythonProcs *pp, const Process *p);
/* pid exited or is no longer tracked. */
void python_procs_forget(PythonProcs *pp, pid_t pid);
/* The live process pid known to run CPython, or NULL. */
const PythonProcess *python_procs_get(const PythonProcs *pp, pid_t pid);

void python_procs_write_metrics(const PythonProcs *pp, FILE *f);

/* Symbols of a CPython runtime file, as ELF virtual addresses (tests). -ENOENT: not one. */
typedef struct PythonElf {
        uint64_t runtime, eval, eval_size, code_type, str_type;
        /* The part of the eval function the compiler moved out of it (python-eval-cold.h); 0: none. */
        uint64_t eval_cold, eval_cold_size;
        unsigned major, minor; /* 0.0: unknown */
        bool debug_build;      /* Py_DEBUG (python3.X-dbg): a layout the offsets do not describe */
} PythonElf;
int python_elf_probe(int fd, const char *path, PythonElf *ret);
