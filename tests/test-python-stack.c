/* SPDX-License-Identifier: GPL-2.0-only */
/* python_stack_splice(): where each group of Python frames goes in a native stack, for the shapes
 * the BPF walks produce (complete or cut short on either side, an eval call being entered, no
 * eval frame at all). */
#include <linux/types.h>
#include <errno.h>
#include <string.h>

#include "bpf/profd-sample.h"
#include "lib/test-util.h"
#include "runtimes/python-stack.h"

#define EVAL(a) ((a) | PROFD_FRAME_PY_EVAL)
/* As BPF writes a Python frame: code object and instruction, then the fingerprint. */
#define FP(code) ((uint32_t)((code) >> 12) | 1)
#define REC(code)                                                                                           \
        (PROFD_FRAME_PYTHON | ((uint64_t)(code) >> PROFD_PY_CODE_SHIFT) | (7ULL << PROFD_PY_INSTR_SHIFT))
#define PY(code) REC(code), (PROFD_FRAME_PYTHON | PROFD_FRAME_PY_FP | FP(code))
#define PYE(code) (REC(code) | PROFD_FRAME_PY_ENTRY), (PROFD_FRAME_PYTHON | PROFD_FRAME_PY_FP | FP(code))
/* What the splice makes of it: one entry, the id of (code, fingerprint) for the address. */
#define OUT(code) REC(code)
/* A frame whose fingerprint BPF could not take: kept with its address, no id. */
#define PYNOFP(code) REC(code), (PROFD_FRAME_PYTHON | PROFD_FRAME_PY_FP)
#define COMPLETE (1u + PROFD_PY_STOP_OK) << PROFD_STACK_PY_SHIFT

static PythonFrameIds *ids;

/* want[] with each OUT(code) turned into the entry with code's id (a frame without fingerprint:
 * no id, the address kept). */
static uint64_t expected(uint64_t w)
{
        uint64_t code = python_frame_code(w), id;

        if (!python_frame_is(w))
                return w;
        id = python_frame_ids_intern(ids, code, FP(code));
        return (w & ~PROFD_PY_CODE_MASK) | PYTHON_FRAME_ID | id;
}

static void expect(const char *what, const uint64_t *in, size_t n, uint32_t flags, const uint64_t *want_in,
                   size_t n_want, PythonSpliceStats *stats)
{
        uint64_t f[64], want[64];
        uint8_t exact[64];
        size_t len;
        bool same;

        memcpy(f, in, n * sizeof(*in));
        for (size_t i = 0; i < n; i++)
                exact[i] = i == 0;
        len = python_stack_splice(f, exact, n, flags, ids, stats);
        for (size_t i = 0; i < n_want; i++)
                want[i] = expected(want_in[i]);
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

#define EXPECT(what, in, flags, want, stats)                                                                \
        expect(what, in, ELEMENTSOF(in), flags, want, ELEMENTSOF(want), stats)

int main(void)
{
        PythonSpliceStats st = {};

        if (python_frame_ids_new(0, &ids) < 0)
                return 1;
        const uint64_t A = 0x1000, B = 0x2000, C = 0x3000, D = 0x4000, S = 0x5000; /* S: _start */
        const uint64_t P1 = 0x7f0000001000, P2 = 0x7f0000002000, P3 = 0x7f0000003000, P4 = 0x7f0000004000;

        {
                const uint64_t in[] = {A, EVAL(B), S}, want[] = {A, B, S};
                EXPECT("no Python frames: marks cleared", in, 0, want, &st);
        }
        {
                /* 3.11: two calls of the eval function, the inner running two Python frames. */
                const uint64_t in[] = {A, EVAL(B), C, EVAL(B), S, PY(P1), PYE(P2), PYE(P3)};
                const uint64_t want[] = {A, OUT(P1), OUT(P2), C, OUT(P3), S};
                EXPECT("groups replace their eval frames", in, COMPLETE, want, &st);
        }
        {
                /* Sampled while the eval function enters a call: its frame is not pushed yet. */
                const uint64_t in[] = {EVAL(B), C, EVAL(B), D, EVAL(B), S, PYE(P1), PYE(P2)};
                const uint64_t want[] = {B, C, OUT(P1), D, OUT(P2), S};
                EXPECT("an eval frame with no group yet stays native", in, COMPLETE, want, &st);
        }
        {
                /* The Python walk ran out of room: its innermost groups go to the innermost evals. */
                const uint64_t in[] = {A, EVAL(B), C, EVAL(B), S, PYE(P1), PY(P2)};
                const uint64_t want[] = {A, OUT(P1), C, OUT(P2), S};
                const uint32_t cut = (1u + PROFD_PY_STOP_DEPTH) << PROFD_STACK_PY_SHIFT;
                EXPECT("Python walk cut short: matched from the innermost", in, cut, want, &st);
        }
        {
                /* The native walk stopped above the outer eval frames: the rest at the end. */
                const uint64_t in[] = {A, EVAL(B), C, PYE(P1), PYE(P2), PYE(P3)};
                const uint64_t want[] = {A, OUT(P1), C, OUT(P2), OUT(P3)};
                EXPECT("native walk cut short: outer groups at the end", in, COMPLETE | PROFD_STOP_BAD_FRAME,
                       want, &st);
        }
        {
                /* More groups than eval frames on complete walks: the inner ones lead. */
                const uint64_t in[] = {A, EVAL(B), S, PYE(P1), PYE(P2), PYE(P4)};
                const uint64_t want[] = {A, OUT(P1), OUT(P2), OUT(P4), S};
                EXPECT("extra inner groups go before the first matched eval", in, COMPLETE, want, &st);
        }
        {
                const uint64_t in[] = {A, C, S, PYE(P1), PYE(P2)};
                const uint64_t want[] = {A, C, S, OUT(P1), OUT(P2)};
                EXPECT("no eval frame: Python frames at the end", in, COMPLETE, want, &st);
        }
        {
                /* A frame whose code object BPF could not read: no id, never named. */
                const uint64_t in[] = {A, EVAL(B), S, PYNOFP(P1), PYE(P2)};
                uint64_t f[8];
                uint8_t exact[8] = {1};
                size_t len;

                memcpy(f, in, sizeof(in));
                len = python_stack_splice(f, exact, ELEMENTSOF(in), COMPLETE, ids, &st);
                check(len == 4 && f[1] == REC(P1) && !python_frame_has_id(f[1]) &&
                              python_frame_has_id(f[2]) && python_frame_code(f[1]) == P1,
                      "a frame without fingerprint keeps its address and gets no id");
                check(st.frames_without_id == 1, "frames without id counted: %llu",
                      (unsigned long long)st.frames_without_id);
        }
        {
                /* The same code object with another fingerprint (its memory reused): another id. */
                uint64_t a = python_frame_ids_intern(ids, P1, 5), b = python_frame_ids_intern(ids, P1, 6);
                uint64_t code;
                uint32_t fp;

                check(a && b && a != b && python_frame_ids_intern(ids, P1, 5) == a,
                      "ids tell fingerprints apart and stay the same for a pair");
                check(python_frame_ids_get(ids, b, &code, &fp) == 0 && code == P1 && fp == 6,
                      "an id gives its pair back");
                check(python_frame_ids_intern(ids, P1, 0) == 0, "no id without fingerprint");
        }
        {
                /* A bounded table forgets the oldest ids, and never gives one to another pair. */
                _cleanup_(python_frame_ids_freep) PythonFrameIds *small = NULL;
                uint64_t first, code;
                uint32_t fp;

                if (python_frame_ids_new(4, &small) < 0)
                        return 1;
                first = python_frame_ids_intern(small, 0x1000, 1);
                for (uint32_t i = 2; i <= 5; i++)
                        (void)python_frame_ids_intern(small, 0x1000 * i, i);
                check(python_frame_ids_get(small, first, &code, &fp) == -ENOENT,
                      "the oldest id is forgotten");
                check(python_frame_ids_intern(small, 0x1000, 1) != first, "a forgotten pair gets a new id");
        }
        check(st.stacks == 7, "stacks with Python frames counted: %llu", (unsigned long long)st.stacks);
        check(st.evals_unmatched == 1, "unmatched eval frames counted: %llu",
              (unsigned long long)st.evals_unmatched);
        ids = python_frame_ids_free(ids);
        printf("%s\n", failures ? "FAILED" : "all checks passed");
        return failures ? 1 : 0;
}
