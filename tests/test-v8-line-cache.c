/* SPDX-License-Identifier: GPL-2.0-only */
/* The V8 line-table cache (daemon/symbolizer/v8-line-cache.h): five tables falling into one set of
 * V8_LINE_CACHE_WAYS, looked up in turn, all kept but the least used one, which the fifth
 * replaces; two of them looked up alternately never replace each other (a direct-mapped slot made
 * two functions of every stack re-read their tables at every stack). */
#include <stdlib.h>
#include <string.h>

#include "lib/test-util.h"
#include "symbolizer/v8-line-cache.h"
#include "util/hash.h"

#define PID 42
#define START 1000

static unsigned long long counted(V8LineCache *c, const char *line)
{
        return METRIC_VALUE(v8_line_cache_write_metrics, c, line);
}

/* The set of (PID, bca), as the cache picks it. */
static uint64_t set_of(uint64_t bca)
{
        return hash_mix64((uint64_t)PID * 0x9e3779b97f4a7c15ULL ^ bca) &
               (V8_LINE_CACHE_SLOTS / V8_LINE_CACHE_WAYS - 1);
}

static bool put(V8LineCache *c, uint64_t bca, uint32_t line)
{
        V8LineTable t = {.entries = calloc(1, sizeof(V8LineEntry)), .n = 1};
        const V8LineTable *kept;

        if (!t.entries)
                return false;
        t.entries[0].line = line;
        kept = v8_line_cache_put(c, PID, START, bca, bca + 8, &t);
        return kept && kept->n == 1 && kept->entries[0].line == line;
}

static bool has(V8LineCache *c, uint64_t bca, uint32_t line)
{
        const V8LineTable *t = v8_line_cache_get(c, PID, START, bca, bca + 8);

        return t && t->n == 1 && t->entries[0].line == line;
}

int main(void)
{
        V8LineCache *c = NULL;
        uint64_t bcas[V8_LINE_CACHE_WAYS + 1];
        size_t n = 0;

        /* tagged BytecodeArray addresses of one set */
        for (uint64_t a = 0x1c0000000001; n < V8_LINE_CACHE_WAYS + 1; a += 0x40)
                if (n == 0 || set_of(a) == set_of(bcas[0]))
                        bcas[n++] = a;
        check(v8_line_cache_new(&c) == 0, "new");
        for (size_t i = 0; i < V8_LINE_CACHE_WAYS; i++)
                check(put(c, bcas[i], 10 + (uint32_t)i), "table %zu kept", i);
        for (int round = 0; round < 50; round++)
                check(has(c, bcas[0], 10) && has(c, bcas[1], 11), "two of one set looked up in turn: both kept");
        for (size_t i = 1; i < V8_LINE_CACHE_WAYS; i++)
                check(has(c, bcas[i], 10 + (uint32_t)i), "table %zu found", i);
        check(counted(c, "profd_v8_line_cache_dropped_total{reason=\"replaced\"}") == 0, "nothing replaced yet");
        /* bcas[0] is now the least used of the set */
        check(put(c, bcas[V8_LINE_CACHE_WAYS], 99), "a fifth table of the set kept");
        check(!has(c, bcas[0], 10), "the least used table replaced");
        for (size_t i = 1; i < V8_LINE_CACHE_WAYS; i++)
                check(has(c, bcas[i], 10 + (uint32_t)i), "table %zu kept", i);
        check(has(c, bcas[V8_LINE_CACHE_WAYS], 99), "the fifth found");
        check(counted(c, "profd_v8_line_cache_dropped_total{reason=\"replaced\"}") == 1, "one replacement counted");
        /* the same key put again takes its own slot, not another's */
        check(put(c, bcas[1], 21) && has(c, bcas[1], 21) && has(c, bcas[2], 12) && has(c, bcas[3], 13) &&
                      has(c, bcas[V8_LINE_CACHE_WAYS], 99),
              "a table put again replaces its own");
        check(!v8_line_cache_free(c) && !v8_line_cache_free(NULL), "free, NULL-safe");
        printf("%s\n", failures ? "FAILED" : "all checks passed");
        return failures ? 1 : 0;
}
