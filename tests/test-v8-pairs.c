/* SPDX-License-Identifier: GPL-2.0-only */
/* The V8 pair table (daemon/symbolizer/v8-pairs.h) filled far past a small bound: it keeps the
 * last max pairs, an id forgotten names nothing (never another pair), ids are never reused, a
 * forgotten pair interned again gets a new id, and when the ids run out new pairs get none, all
 * counted. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/test-util.h"
#include "symbolizer/v8-pairs.h"

#define MAX 64u
#define MAX_ID 1000u

static unsigned long long counted(V8Pairs *p, const char *line)
{
        return METRIC_VALUE(v8_pairs_write_metrics, p, line);
}

int main(void)
{
        static uint32_t id_of[MAX_ID + 100];
        V8Pairs *p = NULL;
        char fn[32], sc[32];
        const char *gf, *gs;
        size_t wrong = 0, named = 0, reused = 0, size_before = 0;
        uint32_t id;

        check(v8_pairs_new(MAX, MAX_ID, &p) == 0, "new (max %u)", MAX);
        /* Every pair made once, as by a process that makes new functions forever. */
        for (uint32_t i = 0; i < MAX_ID; i++) {
                snprintf(fn, sizeof(fn), "f%u", i);
                snprintf(sc, sizeof(sc), "s%u.js", i % 7);
                id_of[i] = v8_pairs_intern(p, fn, sc);
                if (i > 0 && id_of[i] <= id_of[i - 1])
                        reused++;
                if (i == 10 * MAX)
                        size_before = v8_pairs_bytes(p);
                /* The pair of the same function interned again while kept: its id. */
                if (v8_pairs_intern(p, fn, sc) != id_of[i])
                        wrong++;
        }
        check(reused == 0 && wrong == 0, "ids increase, a kept pair keeps its id (%zu, %zu)", reused, wrong);
        check(v8_pairs_count(p) == MAX, "bounded: %zu pairs kept of %u", v8_pairs_count(p), MAX_ID);
        check(v8_pairs_bytes(p) <= size_before + 64, "memory stays (%zu then %zu bytes)", size_before,
              v8_pairs_bytes(p));
        /* Every id given: its own names or none. */
        for (uint32_t i = 0; i < MAX_ID; i++) {
                snprintf(fn, sizeof(fn), "f%u", i);
                snprintf(sc, sizeof(sc), "s%u.js", i % 7);
                if (v8_pairs_get(p, id_of[i], &gf, &gs) < 0)
                        continue;
                named++;
                if (strcmp(gf, fn) != 0 || strcmp(gs, sc) != 0)
                        wrong++;
        }
        check(wrong == 0 && named == MAX, "no id names another pair (%zu wrong), the last %zu named", wrong,
              named);
        check(counted(p, "\nprofd_v8_names_forgotten_total ") == MAX_ID - MAX, "forgotten counted (%llu)",
              counted(p, "\nprofd_v8_names_forgotten_total "));
        /* A forgotten pair again: a new id, and its old id still names nothing. */
        id = v8_pairs_intern(p, "f0", "s0.js");
        check(id == 0, "ids used up at max_id: none given (%u)", id);
        check(counted(p, "\nprofd_v8_names_ids_used_up_total ") == 1, "used up counted");
        check(v8_pairs_get(p, id_of[0], &gf, &gs) == -ENOENT && v8_pairs_get(p, 0, &gf, &gs) == -ENOENT &&
                      v8_pairs_get(p, MAX_ID + 5, &gf, &gs) == -ENOENT,
              "forgotten, zero and never given ids name nothing");
        p = v8_pairs_free(p);

        check(v8_pairs_new(MAX, MAX_ID, &p) == 0, "new");
        id_of[0] = v8_pairs_intern(p, "a", "");
        for (uint32_t i = 0; i < MAX; i++) {
                snprintf(fn, sizeof(fn), "g%u", i);
                (void)v8_pairs_intern(p, fn, "");
        }
        id = v8_pairs_intern(p, "a", "");
        check(id > id_of[0] && v8_pairs_get(p, id, &gf, &gs) == 0 && strcmp(gf, "a") == 0 &&
                      v8_pairs_get(p, id_of[0], &gf, &gs) == -ENOENT,
              "a forgotten pair interned again: a new id (%u, was %u)", id, id_of[0]);
        p = v8_pairs_free(p);
        check(!p && !v8_pairs_free(NULL), "free, NULL-safe");
        printf("%s\n", failures ? "FAILED" : "all checks passed");
        return failures ? 1 : 0;
}
