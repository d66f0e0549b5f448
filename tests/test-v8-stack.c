/* SPDX-License-Identifier: GPL-2.0-only */
/* The drain's V8 splice (daemon/runtimes/v8-stack.h): each V8 entry BPF put after its frame's pc
 * entry takes that entry's place; native frames and named entries are kept as they are. */
#include <linux/types.h>
#include <string.h>

#include "lib/test-util.h"
#include "runtimes/v8-stack.h"

#define V8(fn) (PROFD_FRAME_V8 | (fn))

static void expect(const char *what, const uint64_t *in, size_t n, const uint64_t *want, size_t n_want,
                   size_t want_v8)
{
        uint64_t frames[16];
        uint8_t exact[16];
        size_t v8 = 0, len;

        memcpy(frames, in, n * sizeof(*in));
        for (size_t i = 0; i < n; i++)
                exact[i] = i == 0;
        len = v8_stack_splice(frames, exact, n, &v8);
        check(len == n_want && memcmp(frames, want, n_want * sizeof(*want)) == 0 && v8 == want_v8,
              "%s: %zu frames (%zu), %zu V8 entries (%zu)", what, len, n_want, v8, want_v8);
}

int main(void)
{
        const uint64_t JIT = 0x7f0000001000, TRAMP = 0x5500000100, CALL = 0x5500000200, START = 0x5500000300;
        const uint64_t F1 = 0x1c0000000011, F2 = 0x1c0000000051, F3 = 0x1c0000000091;

        {
                const uint64_t in[] = {CALL, START}, want[] = {CALL, START};
                expect("no V8 entries: unchanged", in, 2, want, 2, 0);
        }
        {
                /* leaf in optimized code, two interpreted callers, then native code */
                const uint64_t in[] = {JIT, V8(F1), TRAMP, V8(F2), TRAMP, V8(F3), CALL, START};
                const uint64_t want[] = {V8(F1), V8(F2), V8(F3), CALL, START};
                expect("each function replaces its frame's pc", in, 8, want, 5, 3);
        }
        {
                /* a typed frame (no V8 entry) keeps its pc; a leading V8 entry has no pc before it */
                const uint64_t in[] = {V8(F1), TRAMP, TRAMP, V8(F2), START};
                const uint64_t want[] = {V8(F1), TRAMP, V8(F2), START};
                expect("typed frames keep their pc", in, 5, want, 4, 2);
        }
        {
                /* two V8 entries in a row (never written by BPF): neither swallows the other */
                const uint64_t in[] = {JIT, V8(F1), V8(F2), START}, want[] = {V8(F1), V8(F2), START};
                expect("adjacent V8 entries", in, 4, want, 3, 2);
        }
        {
                /* named already (a stack handed over twice): left alone */
                const uint64_t named = PROFD_FRAME_V8 | V8_FRAME_NAMED | 7;
                const uint64_t in[] = {JIT, named, START}, want[] = {JIT, named, START};
                expect("named entries are not spliced again", in, 3, want, 3, 0);
        }
        check(!v8_frame_is(PROFD_FRAME_PYTHON | PROFD_FRAME_V8 | 1), "a Python entry is not a V8 one");
        printf("%s\n", failures ? "FAILED" : "all checks passed");
        return failures ? 1 : 0;
}
