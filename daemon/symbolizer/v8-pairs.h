/* SPDX-License-Identifier: GPL-2.0-only */
/* The (function, script) name pairs of JavaScript frames (v8-symbols.h), by id: a named V8 entry
 * carries its pair's id (runtimes/v8-stack.h), which names the frame for as long as the pair is
 * kept, also after the process exited. Bounded: the table keeps the last max pairs interned; a new
 * pair takes the slot of the one interned max pairs before, which is forgotten (first in, first
 * out). Ids are never reused, so an id still held by the history or an off-CPU record names its
 * own pair or, once forgotten, nothing ("[javascript]"), never another's. A hot pair that was
 * forgotten gets a new id at its next drain. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/macro.h"

typedef struct V8Pairs V8Pairs;

/* Pairs kept by default (PROFD_V8_NAMES_MAX overrides it, for tests of the bound). */
#define V8_PAIRS_MAX 65536u

/* max: pairs kept, 0 for V8_PAIRS_MAX; max_id: the largest id that fits a stack entry. -ENOMEM. */
int v8_pairs_new(size_t max, uint32_t max_id, V8Pairs **ret);
V8Pairs *v8_pairs_free(V8Pairs *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(V8Pairs *, v8_pairs_free);

/* The id of (function, script): the one given before while the pair is kept, else a new one. 0
 * when none can be given (ids used up: counted; out of memory). */
uint32_t v8_pairs_intern(V8Pairs *p, const char *function, const char *script);
/* The pair of id. -ENOENT: never given, or forgotten since. */
int v8_pairs_get(const V8Pairs *p, uint32_t id, const char **ret_function, const char **ret_script);
static inline bool v8_pairs_has(const V8Pairs *p, uint32_t id)
{
        const char *f, *s;

        return v8_pairs_get(p, id, &f, &s) == 0;
}

size_t v8_pairs_count(const V8Pairs *p);
size_t v8_pairs_bytes(const V8Pairs *p);
/* profd_v8_names, profd_v8_names_forgotten_total, profd_v8_names_ids_used_up_total. */
void v8_pairs_write_metrics(const V8Pairs *p, FILE *f);
