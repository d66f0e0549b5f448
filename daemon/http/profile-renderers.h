/* SPDX-License-Identifier: GPL-2.0-only */
/* How a finished profile window becomes a response body: one renderer per ?format= (pprof, folded
 * stacks, the flame graph page), each a thin trampoline onto its builder in output/. */
#pragma once

#include <stddef.h>

#include "aggregator/aggregator.h"

typedef struct Daemon Daemon;
typedef struct ProfileQuery ProfileQuery;

/* How a finished window becomes a response body. /debug/pprof/profile renders pprof; other
 * formats (?format=, other endpoints) add a renderer to the table in profile-renderers.c. */
typedef struct ProfileRenderer {
        const char *format; /* ?format= value */
        const char *content_type;
        const char *content_disposition; /* NULL: none */
        /* Takes ownership of w (also on failure). */
        int (*start)(Daemon *d, ProfileWindow *w, const ProfileQuery *q, void **ret_job);
        /* Bounded work; 0 while more remains, 1 when done, <0 on error. */
        int (*step)(void *job);
        /* After step returned 1; ownership of the malloc()ed bytes passes to the caller. */
        int (*take_result)(void *job, void **ret_data, size_t *ret_size);
        void (*free)(void *job);
} ProfileRenderer;

/* The default renderers of the profile routes. */
extern const ProfileRenderer profile_renderer_pprof;
extern const ProfileRenderer profile_renderer_flamegraph;

/* The renderer of a ?format= value; NULL if there is none. */
const ProfileRenderer *profile_renderer_find(const char *format);
