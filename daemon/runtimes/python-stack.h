/* SPDX-License-Identifier: GPL-2.0-only */
/* Python frames in drained user stacks (bpf/profd-python.h): how to read an entry, and the splice
 * that puts each group of Python frames where its call of the eval function stands. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h> /* for profd-python.h */

#include "bpf/profd-python.h"
#include "runtimes/python-frame-ids.h"

/* After the splice, a Python entry is PROFD_FRAME_PYTHON | instruction | either PYTHON_FRAME_ID and
 * the id of its (code object, fingerprint) pair (python-frame-ids.h), or the code object's address
 * alone: a frame without fingerprint, never named. BPF's bit 60 (PROFD_FRAME_PY_FP on the
 * fingerprint entries, PROFD_FRAME_PY_EVAL on native ones) is free again after the splice. */
#define PYTHON_FRAME_ID (1ULL << 60)

static inline bool python_frame_is(uint64_t f)
{
        return f & PROFD_FRAME_PYTHON;
}

static inline bool python_frame_has_id(uint64_t f)
{
        return f & PYTHON_FRAME_ID;
}

/* The id of a frame with PYTHON_FRAME_ID. */
static inline uint64_t python_frame_id(uint64_t f)
{
        return f & PROFD_PY_CODE_MASK;
}

/* The code object's address of a frame without PYTHON_FRAME_ID (and of BPF's entries). */
static inline uint64_t python_frame_code(uint64_t f)
{
        return (f & PROFD_PY_CODE_MASK) << PROFD_PY_CODE_SHIFT;
}

static inline uint32_t python_frame_instr(uint64_t f)
{
        return (f >> PROFD_PY_INSTR_SHIFT) & PROFD_PY_INSTR_MAX;
}

/* Outcome of one splice, for /metrics. */
typedef struct PythonSpliceStats {
        uint64_t stacks;            /* stacks with Python frames */
        uint64_t groups_placed;     /* groups put in place of their eval frame */
        uint64_t groups_outside;    /* groups with no eval frame to stand for (kept at an end) */
        uint64_t evals_unmatched;   /* eval frames left as native frames (no group) */
        uint64_t frames_without_id; /* Python frames without fingerprint or id: never named */
} PythonSpliceStats;

/* frames[0..len) leaf first, as drained: native frames (eval frames marked PROFD_FRAME_PY_EVAL),
 * then the Python frames the BPF walk appended, innermost first, two entries each (code and
 * instruction, fingerprint). Rewrites them in place: each Python frame becomes one entry (above:
 * with the id ids gives its code object and fingerprint; ids may be NULL: no ids, no names), each
 * group of Python frames replaces its eval frame; marks are cleared, so a native entry is its
 * address. exact[] (1: symbolize
 * as is) follows the frames; Python frames get 1. flags: the stack's PROFD_STACK_* flags, which
 * say whether the native and Python walks were complete (then groups are matched to eval frames
 * from the outermost, where both agree; otherwise from the innermost). Returns the new length
 * (never more than len). */
size_t python_stack_splice(uint64_t *frames, uint8_t *exact, size_t len, uint32_t flags, PythonFrameIds *ids,
                           PythonSpliceStats *stats);
