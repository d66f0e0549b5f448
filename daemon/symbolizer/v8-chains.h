/* SPDX-License-Identifier: GPL-2.0-only */
/* Inlining chains of optimized JavaScript frames (runtimes/v8-code.h), by id: the functions
 * TurboFan or Maglev inlined at a frame's pc, innermost first, the frame's own function last, each
 * a name pair (v8-pairs.h) and a line (0: none). A named entry carrying a chain's id
 * (runtimes/v8-stack.h: V8_FRAME_INLINED) is one location with several functions, as a native
 * frame with inlined functions. Bounded as the pair table: the last max chains interned are kept,
 * first in first out; ids are never reused, so an id names its own chain or, once forgotten,
 * nothing ("[javascript]"). */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runtimes/v8-code.h"

/* Chains kept by default: distinct (inlined function, line) chains of a process's hot code. */
#define V8_CHAINS_MAX 16384u
/* Functions in one chain, at most: the inlined ones and the frame's own. */
#define V8_CHAIN_LEN_MAX (V8_INLINE_DEPTH_MAX + 1)

typedef struct V8Chains V8Chains;

typedef struct V8ChainLink {
        uint32_t pair; /* v8-pairs.h id */
        uint32_t line; /* 1-based; 0: none */
} V8ChainLink;

/* max: chains kept, 0 for V8_CHAINS_MAX; max_id: the largest id a stack entry holds. */
int v8_chains_new(size_t max, uint32_t max_id, V8Chains **ret);
V8Chains *v8_chains_free(V8Chains *c);

/* The id of the chain links[0..n) (2 <= n <= V8_CHAIN_LEN_MAX); 0 when none can be given (ids used
 * up: counted; out of memory). */
uint32_t v8_chains_intern(V8Chains *c, const V8ChainLink *links, size_t n);
/* The chain of id; its length, 0 when never given or forgotten since. */
size_t v8_chains_get(const V8Chains *c, uint32_t id, const V8ChainLink **ret);

size_t v8_chains_bytes(const V8Chains *c);
/* profd_v8_inline_chains, profd_v8_inline_chains_forgotten_total. */
void v8_chains_write_metrics(const V8Chains *c, FILE *f);
