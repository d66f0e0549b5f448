/* SPDX-License-Identifier: GPL-2.0-only */
/* V8 frames in drained user stacks (bpf/profd-v8.h): how to read an entry, and the splice that
 * makes each JavaScript frame one entry. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h> /* for profd-python.h */

#include "bpf/profd-hotspot.h"
#include "bpf/profd-python.h"
#include "bpf/profd-v8.h"

/* After the drain named it, a V8 entry is PROFD_FRAME_V8 | V8_FRAME_NAMED | the id of its names
 * (v8-symbols.h; 0: none could be read, an unnamed JavaScript frame). Before, it holds the
 * function's address as BPF read it. */
#define V8_FRAME_NAMED (1ULL << 58)
#define V8_FRAME_ID_MASK PROFD_V8_ADDR_MASK

/* A Java frame (profd-hotspot.h) may have bit 59 set in its bytecode index: bit 61 tells it apart. */
static inline bool v8_frame_is(uint64_t f)
{
        return (f & PROFD_FRAME_V8) && !(f & (PROFD_FRAME_PYTHON | PROFD_FRAME_HOTSPOT));
}

static inline bool v8_frame_named(uint64_t f)
{
        return f & V8_FRAME_NAMED;
}

static inline uint64_t v8_frame_value(uint64_t f)
{
        return f & V8_FRAME_ID_MASK;
}

/* BPF puts each V8 entry right after the entry of its frame's pc, which lies in JIT code or a
 * builtin (the interpreter's trampoline for an interpreted frame): the function says more, so that
 * pc entry goes. frames and exact (per frame) are rewritten in place; returns the new length and
 * adds the V8 entries seen to *ret_v8. */
static inline size_t v8_stack_splice(uint64_t *frames, uint8_t *exact, size_t len, size_t *ret_v8)
{
        size_t out = 0;

        for (size_t i = 0; i < len; i++) {
                if (v8_frame_is(frames[i]) && !v8_frame_named(frames[i])) {
                        (*ret_v8)++;
                        if (out > 0 && !v8_frame_is(frames[out - 1]))
                                out--; /* its pc's entry */
                }
                frames[out] = frames[i];
                exact[out] = exact[i];
                out++;
        }
        return out;
}
