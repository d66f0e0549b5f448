/* SPDX-License-Identifier: GPL-2.0-only */
/* Short names for (code object address, fingerprint) pairs. BPF records each Python frame as two
 * stack entries: the code object's address with the instruction, and the code object's fingerprint
 * (bpf/profd-python.h). The daemon's stacks hold one 64-bit entry per frame, so the splice
 * (python-stack.h) replaces the pair by an id from this table, and whoever names the frame gets the
 * pair back. Ids are never reused: an id this table forgot (it keeps the last max pairs interned)
 * names nothing, and never another code object. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/macro.h"

typedef struct PythonFrameIds PythonFrameIds;

/* Pairs kept by default: ~24 bytes each, touched only as they are used. */
#define PYTHON_FRAME_IDS_MAX (256u << 10)
/* Ids fit the 44 address bits of a Python stack entry. */
#define PYTHON_FRAME_ID_MAX ((1ULL << 44) - 1)

/* max: pairs kept, 0 for PYTHON_FRAME_IDS_MAX. -ENOMEM. */
int python_frame_ids_new(size_t max, PythonFrameIds **ret);
PythonFrameIds *python_frame_ids_free(PythonFrameIds *ids);
DEFINE_TRIVIAL_CLEANUP_FUNC(PythonFrameIds *, python_frame_ids_free);

/* The id of (code, fp): the one given before while the pair is kept, else a new one. 0 when none
 * can be given (fp 0: no fingerprint; ids used up). */
uint64_t python_frame_ids_intern(PythonFrameIds *ids, uint64_t code, uint32_t fp);
/* The pair of id. -ENOENT: never given, or forgotten since. */
int python_frame_ids_get(const PythonFrameIds *ids, uint64_t id, uint64_t *ret_code, uint32_t *ret_fp);

size_t python_frame_ids_bytes(const PythonFrameIds *ids);
void python_frame_ids_write_metrics(const PythonFrameIds *ids, FILE *f);
