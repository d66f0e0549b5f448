/* SPDX-License-Identifier: GPL-2.0-only */
/* The executable cache's index (daemon/unwind/exe-cache.c): thousands of identities, each found
 * again as the same entry, ids that share a prefix kept apart, and entries forgotten by gc found
 * nowhere after. No BPF, no table built (no event loop, no pool). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/test-util.h"
#include "unwind/exe-cache.h"

#define N 5000

/* An identity as process_mapping_key() makes them: device, inode, size and times, then a build ID. */
static size_t make_id(unsigned k, uint8_t id[UNWIND_TABLE_ID_MAX])
{
        uint64_t words[5] = {0x803, 1000000 + k, 4096 * (k % 97 + 1), 1700000000 + k / 3, 42};
        size_t n = sizeof(words);

        memcpy(id, words, n);
        if (k % 2) { /* half with a build ID */
                memset(id + n, (int)(k & 0xff), 20);
                n += 20;
        }
        return n;
}

static unsigned long long metric(const ExeCache *c, const char *name)
{
        char line[128];

        snprintf(line, sizeof(line), "\n%s ", name); /* the whole name, at a line's start */
        return METRIC_VALUE(exe_cache_write_metrics, c, line);
}

int main(void)
{
        _cleanup_(exe_cache_freep) ExeCache *c = NULL;
        static ExeEntry *first[N];
        uint8_t id[UNWIND_TABLE_ID_MAX];
        unsigned wrong = 0, distinct = 0;
        ExeEntry *e, *shorter;
        size_t n;

        CHECK(exe_cache_new(NULL, NULL, NSEC_PER_SEC, NULL, NULL, &c) == 0, "cache without loop and pool");
        if (!c)
                return 1;
        for (unsigned k = 0; k < N; k++) {
                n = make_id(k, id);
                wrong += exe_cache_get(c, id, n, NULL, 0, "/usr/bin/x", &first[k]) != 0 || !first[k];
        }
        CHECK(wrong == 0, "%u identities added (%u failed)", N, wrong);
        for (unsigned k = 0; k < N; k++) {
                n = make_id(k, id);
                wrong += exe_cache_get(c, id, n, NULL, 0, "/usr/bin/y", &e) != 0 || e != first[k] ||
                         e->id_size != n || memcmp(e->id, id, n) != 0;
                distinct += k == 0 || first[k] != first[k - 1];
        }
        CHECK(wrong == 0 && distinct == N, "each found again as its own entry (%u wrong, %u distinct)",
              wrong, distinct);
        CHECK(metric(c, "profd_exe_cache_entries{state=\"new\"}") == N, "%u entries counted", N);

        /* The same bytes, one shorter: another identity. */
        n = make_id(1, id);
        CHECK(exe_cache_get(c, id, n - 1, NULL, 0, "p", &shorter) == 0 && shorter != first[1] &&
                      exe_cache_get(c, id, n - 1, NULL, 0, "p", &e) == 0 && e == shorter,
              "an id one byte shorter is another entry");
        CHECK(exe_cache_get(c, id, 0, NULL, 0, "p", &e) == -EINVAL &&
                      exe_cache_get(c, id, UNWIND_TABLE_ID_MAX + 1, NULL, 0, "p", &e) == -EINVAL,
              "empty and oversized ids refused");

        /* Unused past the grace period: all forgotten, and not found after (new entries). */
        exe_cache_gc(c, UINT64_MAX / 2);
        CHECK(metric(c, "profd_exe_cache_entries{state=\"new\"}") == 0, "gc forgot every unused entry");
        n = make_id(7, id);
        CHECK(exe_cache_get(c, id, n, NULL, 0, "z", &e) == 0 && e && e->name && strcmp(e->name, "z") == 0,
              "an identity forgotten is a new entry");
        CHECK(metric(c, "profd_exe_cache_entries{state=\"new\"}") == 1, "one entry after");

        printf("%s: %u failures\n", failures ? "FAIL" : "ok", failures);
        return failures ? 1 : 0;
}
