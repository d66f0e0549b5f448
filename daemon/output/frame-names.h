/* SPDX-License-Identifier: GPL-2.0-only */
/* The one naming path: how every output (pprof, folded stacks, the flame graph) and the symbol
 * warmer name a sample's frames, so that the same window reads the same everywhere. It decides,
 * once for all of them:
 *   - which address is symbolized: the pc as sampled for the leaf and for frames marked exact (a
 *     pc a signal interrupted, the user leaf under kernel frames), pc - 1 for return addresses;
 *   - what kind of frame it is: kernel, user in a mapping, a Python frame (code object), or a user
 *     address no mapping of the process covers ("[unknown] 0xADDR", address kept);
 *   - when a frame stays unnamed on purpose: read, no symbol, and known by a build ID, so whoever
 *     has the debug file can name it (the placeholder is for outputs that print text only).
 * Naming reads no /proc file: the process table is brought up to date when samples are drained
 * (frame_names_note_interval()), while their processes still run. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "aggregator/aggregator.h"
#include "sampler/sampler.h"
#include "symbolizer/symbolizer.h"
#include "tracker/process-table.h"

typedef enum FrameKind {
        FRAME_KERNEL,
        FRAME_USER,     /* in a mapping of the process */
        FRAME_PYTHON,   /* a Python frame: a code object of the process, no mapping */
        FRAME_V8,       /* a JavaScript frame: names read at the drain, no mapping */
        FRAME_UNMAPPED, /* no mapping of the process covers it (or the process is not known) */
} FrameKind;

typedef struct FrameName {
        FrameKind kind;
        uint64_t address; /* as sampled */
        bool exact;       /* address is a pc, not a return address */
        /* FRAME_USER: the mapping, valid until the process table changes. */
        const ProcMapping *mapping;
        /* The names, innermost (inlined) first; valid until the next naming call. Never empty:
         * a frame no symbol names has one placeholder frame (symbolized false). */
        SymResult res;
        /* Read, no symbol, known by its build ID: outputs that carry addresses (pprof) keep the
         * address and give no name; outputs of text only print the placeholder. */
        bool left_unnamed;
        /* Storage for the placeholder of a FRAME_UNMAPPED frame. */
        SymFrame placeholder;
        char placeholder_name[40];
} FrameName;

/* The process whose user frames a sample has, as the table knows it: never read from /proc here
 * (NULL: not known; its frames are FRAME_UNMAPPED). */
const Process *frame_names_process(ProcessTable *procs, pid_t pid);

/* Where user frame i of stack (leaf first) of process p (NULL: not known) ran: kind, address,
 * exact, mapping; a FRAME_UNMAPPED frame also gets its placeholder name. Cheap: outputs that
 * cache by location call this first and frame_name_resolve() only for a location they have not
 * named yet. */
void frame_locate_user(const Process *p, const Stack *user, uint32_t i, FrameName *ret);
void frame_locate_kernel(const Stack *kernel, uint32_t i, FrameName *ret);
/* Names a located frame: f->res (and f->left_unnamed). */
int frame_name_resolve(Symbolizer *sym, const Process *p, FrameName *f);
/* Both at once. */
int frame_name_user(Symbolizer *sym, const Process *p, const Stack *user, uint32_t i, FrameName *ret);
int frame_name_kernel(Symbolizer *sym, const Stack *kernel, uint32_t i, FrameName *ret);

/* The build ID a mapping is known by downstream: the file's GNU build ID, else a Go binary's Go
 * build ID (its string's bytes, hex-encoded like a GNU one: Parca's convention). */
size_t frame_names_build_id(const ProcMapping *m, const uint8_t **ret);

/* At each drain, while the sampled processes run: a live process with a user frame outside every
 * mapping the table has for it mapped something after its snapshot (dlopen, JIT, exec) and is
 * read again, at most once per drain, and only when its snapshot is older than the interval. */
void frame_names_note_interval(ProcessTable *procs, uint64_t start_ns, const SampleRecord *records,
                               size_t n);

void frame_names_write_metrics(FILE *f);
