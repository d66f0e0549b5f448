/* SPDX-License-Identifier: GPL-2.0-only */
/* Folded stacks -> one self-contained interactive flame graph page (HTML with inline SVG, script
 * and style; it fetches nothing): click to zoom, search that highlights, tooltips with samples
 * and percentage, kernel and user frames in different colors. The page is daemon/output/flamegraph.html,
 * embedded at build time; the data goes in as JSON. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "output/folded.h"

typedef struct FlamegraphInfo {
        const char *title;    /* e.g. "profd: 30 s on host" (NULL: "profd flame graph") */
        const char *subtitle; /* e.g. window and filters; may be NULL */
} FlamegraphInfo;

/* stacks as folded_job_stacks() returns them (frames root first, kernel frames with the
 * FOLDED_KERNEL_SUFFIX). The page is malloc()ed, NUL-terminated. */
int flamegraph_render(const FoldedStack *stacks, size_t n, const FlamegraphInfo *info, char **ret_html,
                      size_t *ret_size);

/* A job like the pprof one, for the HTTP server: folds the window step by step, then renders. */
typedef struct FlamegraphJob FlamegraphJob;
/* Takes ownership of w (also on failure). */
int flamegraph_job_new(ProfileWindow *w, Symbolizer *sym, ProcessTable *procs, const FlamegraphInfo *info,
                       FlamegraphJob **ret);
int flamegraph_job_step(FlamegraphJob *j);
int flamegraph_job_take_result(FlamegraphJob *j, void **ret_data, size_t *ret_size);
FlamegraphJob *flamegraph_job_free(FlamegraphJob *j);
DEFINE_TRIVIAL_CLEANUP_FUNC(FlamegraphJob *, flamegraph_job_free);
