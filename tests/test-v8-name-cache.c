/* SPDX-License-Identifier: GPL-2.0-only */
/* The V8 name cache across drains (daemon/symbolizer/v8-name-cache.h): found by process and
 * address only, a stale entry dropped, a process with the same pid but another start time not
 * served, a full set evicting its least recently used entry, the whole bounded and counted. */
#include <stdlib.h>
#include <string.h>

#include "lib/test-util.h"
#include "symbolizer/v8-name-cache.h"

static V8FunctionIdentity ident(uint64_t n)
{
        return (V8FunctionIdentity){.map = 0x1000 + n, .shared = 0x2000 + n, .sfi_name = 0x3000 + n};
}

/* The count of one result in the metrics text. */
static unsigned long long counted(V8NameCache *c, const char *line)
{
        return METRIC_VALUE(v8_name_cache_write_metrics, c, line);
}

int main(void)
{
        V8NameCache *c = NULL;
        V8FunctionIdentity got, a = ident(1);
        uint32_t id = 0;
        size_t n_fns = 4 * V8_NAME_CACHE_SLOTS;

        check(v8_name_cache_new(&c) == 0, "new");
        check(v8_name_cache_memory(c) == 0, "nothing allocated before the first entry");
        check(v8_name_cache_get(c, 10, 100, 0x1c01, &got, &id) == -ENOENT, "empty: a miss");
        check(v8_name_cache_put(c, 10, 100, 0x1c01, &a, 7) == 0, "put");
        check(v8_name_cache_get(c, 10, 100, 0x1c01, &got, &id) == 0 && id == 7 &&
                      memcmp(&got, &a, sizeof(a)) == 0,
              "found with its id and words");
        check(v8_name_cache_get(c, 11, 100, 0x1c01, &got, &id) == -ENOENT, "another pid: a miss");
        check(v8_name_cache_get(c, 10, 101, 0x1c01, &got, &id) == -ENOENT,
              "the same pid started later (another process): a miss");
        v8_name_cache_stale(c, 10, 100, 0x1c01);
        check(v8_name_cache_get(c, 10, 100, 0x1c01, &got, &id) == -ENOENT, "a stale entry is gone");
        /* The hit whose check failed counts as stale, not as a hit. */
        check(counted(c, "result=\"hit\"} ") == 0 && counted(c, "result=\"stale\"} ") == 1 &&
                      counted(c, "result=\"miss\"} ") == 4,
              "counted: 0 hits, 1 stale, 4 misses");

        /* Far more functions than slots: the cache stays at its bound, evicting. */
        for (size_t i = 0; i < n_fns; i++) {
                V8FunctionIdentity w = ident(i);

                v8_name_cache_put(c, 20, 200, 0x1c0000000001 + 8 * i, &w, (uint32_t)i + 1);
        }
        check(counted(c, "\nprofd_v8_name_cache_entries ") <= V8_NAME_CACHE_SLOTS &&
                      counted(c, "\nprofd_v8_name_cache_entries ") >= V8_NAME_CACHE_SLOTS * 9 / 10,
              "entries bounded by %d, the slots used (%llu)", V8_NAME_CACHE_SLOTS,
              counted(c, "\nprofd_v8_name_cache_entries "));
        check(counted(c, "\nprofd_v8_name_cache_evictions_total ") >= n_fns - V8_NAME_CACHE_SLOTS,
              "evictions counted (%llu)", counted(c, "\nprofd_v8_name_cache_evictions_total "));
        check(v8_name_cache_memory(c) == V8_NAME_CACHE_SLOTS * 64, "memory: the slots (%zu)",
              v8_name_cache_memory(c));
        {
                /* The most recent entries are all there; an entry used stays over newer ones in its set. */
                size_t found = 0;

                for (size_t i = n_fns - 64; i < n_fns; i++)
                        found += v8_name_cache_get(c, 20, 200, 0x1c0000000001 + 8 * i, &got, &id) == 0 &&
                                 id == (uint32_t)i + 1;
                check(found >= 60, "the latest 64 entries mostly kept (%zu)", found);
        }
        {
                V8FunctionIdentity k = ident(99);
                size_t kept = 0;

                v8_name_cache_put(c, 30, 300, 0x1c7000000001, &k, 99);
                for (size_t i = 0; i < n_fns; i++) {
                        V8FunctionIdentity w = ident(i);

                        /* used between insertions: always the most recently used of its set */
                        kept += v8_name_cache_get(c, 30, 300, 0x1c7000000001, &got, &id) == 0 && id == 99;
                        v8_name_cache_put(c, 40, 400, 0x1c0000000001 + 8 * i, &w, (uint32_t)i + 1);
                }
                check(kept == n_fns, "an entry in use is never the one evicted (%zu of %zu)", kept, n_fns);
        }
        c = v8_name_cache_free(c);
        check(!c && !v8_name_cache_free(NULL), "free, NULL-safe");
        printf("%s\n", failures ? "FAILED" : "all checks passed");
        return failures ? 1 : 0;
}
