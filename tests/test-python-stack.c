/* SPDX-License-Identifier: GPL-2.0-only */
/* python_stack_splice(): where each group of Python frames goes in a native stack, for the shapes
 * the BPF walks produce (complete or cut short on either side, an eval call being entered, no
 * eval frame at all). */
#include <linux/types.h>
#include <string.h>

#include "bpf/profd-sample.h"
#include "lib/test-util.h"
#include "runtimes/python-stack.h"

#define EVAL(a) ((a) | PROFD_FRAME_PY_EVAL)
#define PY(code)                                                                                            \
        (PROFD_FRAME_PYTHON | ((uint64_t)(code) >> PROFD_PY_CODE_SHIFT) | (7ULL << PROFD_PY_INSTR_SHIFT))
#define PYE(code) (PY(code) | PROFD_FRAME_PY_ENTRY)
#define COMPLETE (1u + PROFD_PY_STOP_OK) << PROFD_STACK_PY_SHIFT

static void expect(const char *what, const uint64_t *in, size_t n, uint32_t flags, const uint64_t *want,
                   size_t n_want, PythonSpliceStats *stats)
{
        uint64_t f[64];
        uint8_t exact[64];
        size_t len;
        bool same;

        memcpy(f, in, n * sizeof(*in));
        for (size_t i = 0; i < n; i++)
                exact[i] = i == 0;
        len = python_stack_splice(f, exact, n, flags, stats);
        same = len == n_want && memcmp(f, want, len * sizeof(*f)) == 0;
        check(same, "%s: %zu frames", what, len);
        if (!same)
                for (size_t i = 0; i < (len > n_want ? len : n_want); i++)
                        printf("     [%zu] got %#llx want %#llx\n", i,
                               i < len ? (unsigned long long)f[i] : 0ULL,
                               i < n_want ? (unsigned long long)want[i] : 0ULL);
        for (size_t i = 0; same && i < len; i++)
                CHECK(exact[i] ==
                              (python_frame_is(f[i]) || (i == 0 && f[i] == (in[0] & ~PROFD_FRAME_PY_EVAL))),
                      "%s: exact[%zu]", what, i);
}

int main(void)
{
        PythonSpliceStats st = {};
        const uint64_t A = 0x1000, B = 0x2000, C = 0x3000, D = 0x4000, S = 0x5000; /* S: _start */
        const uint64_t P1 = 0x7f0000001000, P2 = 0x7f0000002000, P3 = 0x7f0000003000, P4 = 0x7f0000004000;

        {
                const uint64_t in[] = {A, EVAL(B), S}, want[] = {A, B, S};
                expect("no Python frames: marks cleared", in, 3, 0, want, 3, &st);
        }
        {
                /* 3.11: two calls of the eval function, the inner running two Python frames. */
                const uint64_t in[] = {A, EVAL(B), C, EVAL(B), S, PY(P1), PYE(P2), PYE(P3)};
                const uint64_t want[] = {A, PY(P1), PY(P2), C, PY(P3), S};
                expect("groups replace their eval frames", in, 8, COMPLETE, want, 6, &st);
        }
        {
                /* Sampled while the eval function enters a call: its frame is not pushed yet. */
                const uint64_t in[] = {EVAL(B), C, EVAL(B), D, EVAL(B), S, PYE(P1), PYE(P2)};
                const uint64_t want[] = {B, C, PY(P1), D, PY(P2), S};
                expect("an eval frame with no group yet stays native", in, 8, COMPLETE, want, 6, &st);
        }
        {
                /* The Python walk ran out of room: its innermost groups go to the innermost evals. */
                const uint64_t in[] = {A, EVAL(B), C, EVAL(B), S, PYE(P1), PY(P2)};
                const uint64_t want[] = {A, PY(P1), C, PY(P2), S};
                const uint32_t cut = (1u + PROFD_PY_STOP_DEPTH) << PROFD_STACK_PY_SHIFT;
                expect("Python walk cut short: matched from the innermost", in, 7, cut, want, 5, &st);
        }
        {
                /* The native walk stopped above the outer eval frames: the rest at the end. */
                const uint64_t in[] = {A, EVAL(B), C, PYE(P1), PYE(P2), PYE(P3)};
                const uint64_t want[] = {A, PY(P1), C, PY(P2), PY(P3)};
                expect("native walk cut short: outer groups at the end", in, 6,
                       COMPLETE | PROFD_STOP_BAD_FRAME, want, 5, &st);
        }
        {
                /* More groups than eval frames on complete walks: the inner ones lead. */
                const uint64_t in[] = {A, EVAL(B), S, PYE(P1), PYE(P2), PYE(P4)};
                const uint64_t want[] = {A, PY(P1), PY(P2), PY(P4), S};
                expect("extra inner groups go before the first matched eval", in, 6, COMPLETE, want, 5, &st);
        }
        {
                const uint64_t in[] = {A, C, S, PYE(P1), PYE(P2)};
                const uint64_t want[] = {A, C, S, PY(P1), PY(P2)};
                expect("no eval frame: Python frames at the end", in, 5, COMPLETE, want, 5, &st);
        }
        check(st.stacks == 6, "stacks with Python frames counted: %llu", (unsigned long long)st.stacks);
        check(st.evals_unmatched == 1, "unmatched eval frames counted: %llu",
              (unsigned long long)st.evals_unmatched);
        printf("%s\n", failures ? "FAILED" : "all checks passed");
        return failures ? 1 : 0;
}
