/* SPDX-License-Identifier: GPL-2.0-only */
#include <linux/types.h>
#include <string.h>

#include "bpf/profd-sample.h"
#include "runtimes/python-stack.h"

/* Groups and eval frames of one stack: at most one per slot. */
#define SPLICE_MAX PROFD_MAX_USER_FRAMES

/* Frames [first, len) as BPF wrote them, (code and instruction, fingerprint) pairs, into one entry
 * each, in place. Returns the new length. */
static size_t fold_pairs(uint64_t *frames, size_t first, size_t len, PythonFrameIds *ids,
                         PythonSpliceStats *stats)
{
        size_t o = first;

        for (size_t i = first; i < len && python_frame_is(frames[i]); i++) {
                uint64_t f = frames[i], id = 0;

                if (f & PROFD_FRAME_PY_FP)
                        continue; /* a fingerprint without its frame: not written by the walk */
                if (i + 1 < len && python_frame_is(frames[i + 1]) && (frames[i + 1] & PROFD_FRAME_PY_FP))
                        id = python_frame_ids_intern(ids, python_frame_code(f), (uint32_t)frames[++i]);
                if (id)
                        f = (f & ~PROFD_PY_CODE_MASK) | PYTHON_FRAME_ID | id;
                else if (stats)
                        stats->frames_without_id++;
                frames[o++] = f;
        }
        return o;
}

size_t python_stack_splice(uint64_t *frames, uint8_t *exact, size_t len, uint32_t flags, PythonFrameIds *ids,
                           PythonSpliceStats *stats)
{
        uint64_t out[SPLICE_MAX];
        uint8_t out_exact[SPLICE_MAX];
        /* Python frames [group_start[g], group_start[g + 1]) form group g, innermost first. */
        uint16_t group_start[SPLICE_MAX + 1], eval_at[SPLICE_MAX];
        int16_t group_of_eval[SPLICE_MAX];
        size_t n_native = 0, n_py = 0, n_groups = 0, n_evals = 0, o = 0, first_py;
        bool native_complete, py_complete, from_outermost;
        unsigned py_stop;

        if (len > SPLICE_MAX)
                len = SPLICE_MAX;
        for (first_py = 0; first_py < len && !python_frame_is(frames[first_py]); first_py++)
                ;
        if (first_py == len) {
                /* No Python frames: only clear eval marks. */
                for (size_t i = 0; i < len; i++)
                        frames[i] &= ~PROFD_FRAME_PY_EVAL;
                return len;
        }
        len = fold_pairs(frames, first_py, len, ids, stats);
        n_native = first_py;
        for (size_t i = 0; i < n_native; i++)
                if (frames[i] & PROFD_FRAME_PY_EVAL)
                        eval_at[n_evals++] = i;
        group_start[0] = first_py;
        for (size_t i = first_py; i < len; i++) {
                if (!python_frame_is(frames[i]))
                        break; /* not written by the walk: ignore the rest */
                n_py++;
                if (frames[i] & PROFD_FRAME_PY_ENTRY)
                        group_start[++n_groups] = i + 1;
        }
        if (group_start[n_groups] < first_py + n_py)
                group_start[++n_groups] = first_py + n_py; /* a last group cut short */

        native_complete = (flags & PROFD_STACK_REASON_MASK) == 0;
        py_stop = (flags & PROFD_STACK_PY_MASK) >> PROFD_STACK_PY_SHIFT;
        py_complete = py_stop == 1 + PROFD_PY_STOP_OK;
        from_outermost = native_complete && py_complete;

        for (size_t e = 0; e < n_evals; e++)
                group_of_eval[e] = -1;
        size_t matched = n_groups < n_evals ? n_groups : n_evals;
        for (size_t k = 0; k < matched; k++) {
                if (from_outermost)
                        group_of_eval[n_evals - 1 - k] = n_groups - 1 - k;
                else
                        group_of_eval[k] = k;
        }
        /* Groups no eval frame stands for: the innermost ones (from the outermost) go before the
         * first eval frame that has a group, the outermost ones (from the innermost) at the end. */
        size_t lead_groups = from_outermost ? n_groups - matched : 0;
        size_t first_matched_eval = from_outermost ? n_evals - matched : 0;

        if (stats) {
                stats->stacks++;
                stats->groups_placed += matched;
                stats->groups_outside += n_groups - matched;
                stats->evals_unmatched += n_evals - matched;
        }

#define EMIT_GROUP(g)                                                                                       \
        for (size_t j = group_start[(g)]; j < group_start[(g) + 1]; j++) {                                  \
                out[o] = frames[j] & ~PROFD_FRAME_PY_ENTRY;                                                 \
                out_exact[o++] = 1;                                                                         \
        }

        size_t e = 0;
        for (size_t i = 0; i < n_native; i++) {
                bool is_eval = e < n_evals && eval_at[e] == i;

                if (is_eval && e == first_matched_eval && lead_groups > 0 && matched > 0)
                        for (size_t g = 0; g < lead_groups; g++)
                                EMIT_GROUP(g);
                if (is_eval && group_of_eval[e] >= 0) {
                        EMIT_GROUP((size_t)group_of_eval[e]);
                } else {
                        out[o] = frames[i] & ~PROFD_FRAME_PY_EVAL;
                        out_exact[o++] = exact[i];
                }
                if (is_eval)
                        e++;
        }
        if (matched == 0) {
                /* No eval frame at all (the native walk stopped above the interpreter): the Python
                 * frames go below what was walked. */
                for (size_t g = 0; g < n_groups; g++)
                        EMIT_GROUP(g);
        } else if (!from_outermost) {
                for (size_t g = matched; g < n_groups; g++)
                        EMIT_GROUP(g);
        }
#undef EMIT_GROUP

        memcpy(frames, out, o * sizeof(uint64_t));
        memcpy(exact, out_exact, o);
        return o;
}
