/* SPDX-License-Identifier: GPL-2.0-only */
/* Python frames in drained user stacks (bpf/profd-python.h): how to read an entry, and the splice
 * that puts each group of Python frames where its call of the eval function stands. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h> /* for profd-python.h */

#include "bpf/profd-python.h"

static inline bool python_frame_is(uint64_t f)
{
        return f & PROFD_FRAME_PYTHON;
}

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
        uint64_t stacks;          /* stacks with Python frames */
        uint64_t groups_placed;   /* groups put in place of their eval frame */
        uint64_t groups_outside;  /* groups with no eval frame to stand for (kept at an end) */
        uint64_t evals_unmatched; /* eval frames left as native frames (no group) */
} PythonSpliceStats;

/* frames[0..len) leaf first, as drained: native frames (eval frames marked PROFD_FRAME_PY_EVAL),
 * then the Python frames the BPF walk appended, innermost first. Rewrites them in place: each
 * group of Python frames replaces its eval frame; marks are cleared, so a Python entry is
 * PROFD_FRAME_PYTHON | code | instruction and a native entry its address. exact[] (1: symbolize
 * as is) follows the frames; Python frames get 1. flags: the stack's PROFD_STACK_* flags, which
 * say whether the native and Python walks were complete (then groups are matched to eval frames
 * from the outermost, where both agree; otherwise from the innermost). Returns the new length
 * (never more than len). */
size_t python_stack_splice(uint64_t *frames, uint8_t *exact, size_t len, uint32_t flags,
                           PythonSpliceStats *stats);
