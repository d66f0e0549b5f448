/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdlib.h>

#include "symbolizer/v8-line-cache.h"
#include "util/hash.h"
#include "util/metrics-writer.h"

_Static_assert((V8_LINE_CACHE_SLOTS & (V8_LINE_CACHE_SLOTS - 1)) == 0, "slots: a power of two");

enum { LOOKUP_HIT, LOOKUP_MISS, LOOKUP_STALE, _LOOKUP_MAX };
static const char *const lookup_names[_LOOKUP_MAX] = {"hit", "miss", "stale"};
enum { DROP_REPLACED, DROP_OVER_BUDGET, _DROP_MAX };
static const char *const drop_names[_DROP_MAX] = {"replaced", "over_budget"};

_Static_assert(V8_LINE_CACHE_SLOTS % V8_LINE_CACHE_WAYS == 0, "slots: whole sets");

typedef struct V8LineSlot {
        uint64_t bca; /* 0: free */
        uint64_t sfi, start_time;
        uint64_t used; /* the cache's clock at its last hit or put: the least used of a set goes */
        uint32_t pid;
        V8LineTable table;
} V8LineSlot;

typedef struct V8ScriptSlot {
        uint64_t script; /* 0: free */
        uint64_t source, start_time;
        uint32_t pid;
        V8LineEnds ends;
} V8ScriptSlot;

struct V8LineCache {
        V8LineSlot *slots; /* allocated on the first put */
        V8ScriptSlot scripts[V8_SCRIPT_CACHE_SLOTS];
        uint64_t script_lookups[_LOOKUP_MAX];
        size_t bytes;
        uint64_t clock;
        uint64_t lookups[_LOOKUP_MAX], drops[_DROP_MAX];
};

int v8_line_cache_new(V8LineCache **ret)
{
        V8LineCache *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        *ret = c;
        return 0;
}

static size_t table_bytes(const V8LineTable *t)
{
        return t->n * sizeof(V8LineEntry);
}

static void slot_clear(V8LineCache *c, V8LineSlot *s)
{
        c->bytes -= table_bytes(&s->table);
        v8_line_table_done(&s->table);
        *s = (V8LineSlot){};
}

V8LineCache *v8_line_cache_free(V8LineCache *c)
{
        if (!c)
                return NULL;
        if (c->slots)
                for (size_t i = 0; i < V8_LINE_CACHE_SLOTS; i++)
                        v8_line_table_done(&c->slots[i].table);
        for (size_t i = 0; i < V8_SCRIPT_CACHE_SLOTS; i++)
                v8_line_ends_done(&c->scripts[i].ends);
        free(c->slots);
        free(c);
        return NULL;
}

/* The first slot of (pid, bca)'s set of V8_LINE_CACHE_WAYS. */
static V8LineSlot *set_of(const V8LineCache *c, pid_t pid, uint64_t bca)
{
        uint64_t h = hash_mix64((uint64_t)pid * 0x9e3779b97f4a7c15ULL ^ bca);

        return &c->slots[(h & (V8_LINE_CACHE_SLOTS / V8_LINE_CACHE_WAYS - 1)) * V8_LINE_CACHE_WAYS];
}

static bool slot_is(const V8LineSlot *s, pid_t pid, uint64_t start_time, uint64_t bca, uint64_t sfi)
{
        return s->bca == bca && s->sfi == sfi && s->pid == (uint32_t)pid && s->start_time == start_time;
}

static V8LineSlot *slot_find(const V8LineCache *c, pid_t pid, uint64_t start_time, uint64_t bca, uint64_t sfi)
{
        V8LineSlot *set = set_of(c, pid, bca);

        for (size_t w = 0; w < V8_LINE_CACHE_WAYS; w++)
                if (slot_is(&set[w], pid, start_time, bca, sfi))
                        return &set[w];
        return NULL;
}

const V8LineTable *v8_line_cache_get(V8LineCache *c, pid_t pid, uint64_t start_time, uint64_t bca,
                                     uint64_t sfi)
{
        V8LineSlot *s;

        if (!c->slots) {
                c->lookups[LOOKUP_MISS]++;
                return NULL;
        }
        s = slot_find(c, pid, start_time, bca, sfi);
        if (!s) {
                c->lookups[LOOKUP_MISS]++;
                return NULL;
        }
        c->lookups[LOOKUP_HIT]++;
        s->used = ++c->clock;
        return &s->table;
}

void v8_line_cache_stale(V8LineCache *c, pid_t pid, uint64_t start_time, uint64_t bca, uint64_t sfi)
{
        V8LineSlot *s = c->slots ? slot_find(c, pid, start_time, bca, sfi) : NULL;

        if (!s)
                return;
        /* counted a hit when looked up: it was none */
        c->lookups[LOOKUP_HIT]--;
        c->lookups[LOOKUP_STALE]++;
        slot_clear(c, s);
}

const V8LineTable *v8_line_cache_put(V8LineCache *c, pid_t pid, uint64_t start_time, uint64_t bca,
                                     uint64_t sfi, V8LineTable *t)
{
        V8LineSlot *s;

        if (!c->slots) {
                c->slots = calloc(V8_LINE_CACHE_SLOTS, sizeof(*c->slots));
                if (!c->slots) {
                        v8_line_table_done(t);
                        return NULL;
                }
        }
        /* the same key's slot, else a free one of the set, else its least used */
        s = slot_find(c, pid, start_time, bca, sfi);
        if (!s) {
                V8LineSlot *set = set_of(c, pid, bca);

                s = &set[0];
                for (size_t w = 1; w < V8_LINE_CACHE_WAYS && s->bca; w++)
                        if (!set[w].bca || set[w].used < s->used)
                                s = &set[w];
        }
        if (s->bca) {
                c->drops[DROP_REPLACED]++;
                slot_clear(c, s);
        }
        if (c->bytes + table_bytes(t) > V8_LINE_CACHE_BYTES) {
                c->drops[DROP_OVER_BUDGET]++;
                v8_line_table_done(t);
                return NULL;
        }
        *s = (V8LineSlot){.bca = bca,
                          .sfi = sfi,
                          .start_time = start_time,
                          .used = ++c->clock,
                          .pid = (uint32_t)pid,
                          .table = *t};
        *t = (V8LineTable){};
        c->bytes += table_bytes(&s->table);
        return &s->table;
}

static V8ScriptSlot *script_slot(V8LineCache *c, pid_t pid, uint64_t script)
{
        return &c->scripts[hash_mix64((uint64_t)pid * 0x9e3779b97f4a7c15ULL ^ script) &
                           (V8_SCRIPT_CACHE_SLOTS - 1)];
}

static void script_clear(V8LineCache *c, V8ScriptSlot *s)
{
        c->bytes -= s->ends.n * sizeof(*s->ends.ends);
        v8_line_ends_done(&s->ends);
        *s = (V8ScriptSlot){};
}

const V8LineEnds *v8_line_cache_get_script(V8LineCache *c, pid_t pid, uint64_t start_time, uint64_t script,
                                           uint64_t *ret_source)
{
        V8ScriptSlot *s = script_slot(c, pid, script);

        if (s->script != script || s->pid != (uint32_t)pid || s->start_time != start_time) {
                c->script_lookups[LOOKUP_MISS]++;
                return NULL;
        }
        c->script_lookups[LOOKUP_HIT]++;
        *ret_source = s->source;
        return &s->ends;
}

void v8_line_cache_drop_script(V8LineCache *c, pid_t pid, uint64_t start_time, uint64_t script)
{
        V8ScriptSlot *s = script_slot(c, pid, script);

        if (s->script != script || s->pid != (uint32_t)pid || s->start_time != start_time)
                return;
        c->script_lookups[LOOKUP_HIT]--;
        c->script_lookups[LOOKUP_STALE]++;
        script_clear(c, s);
}

const V8LineEnds *v8_line_cache_put_script(V8LineCache *c, pid_t pid, uint64_t start_time, uint64_t script,
                                           uint64_t source, V8LineEnds *e)
{
        V8ScriptSlot *s = script_slot(c, pid, script);
        size_t bytes = e->n * sizeof(*e->ends);

        if (s->script) {
                c->drops[DROP_REPLACED]++;
                script_clear(c, s);
        }
        if (c->bytes + bytes > V8_LINE_CACHE_BYTES) {
                c->drops[DROP_OVER_BUDGET]++;
                v8_line_ends_done(e);
                return NULL;
        }
        *s = (V8ScriptSlot){.script = script,
                            .source = source,
                            .start_time = start_time,
                            .pid = (uint32_t)pid,
                            .ends = *e};
        *e = (V8LineEnds){};
        c->bytes += bytes;
        return &s->ends;
}

void v8_line_cache_write_metrics(const V8LineCache *c, FILE *f)
{
        metric_labelled(
                f, "profd_v8_line_cache_lookups_total", "counter",
                "Line tables of interpreted JavaScript functions looked up across drains, by result.",
                "result", lookup_names, c->lookups, _LOOKUP_MAX);
        metric_labelled(f, "profd_v8_script_line_ends_lookups_total", "counter",
                        "Line ends of scripts looked up across drains, by result.", "result", lookup_names,
                        c->script_lookups, _LOOKUP_MAX);
        metric_labelled(f, "profd_v8_line_cache_dropped_total", "counter",
                        "Line tables and script line ends not kept: replaced in their slot, or beyond the "
                        "byte bound.",
                        "reason", drop_names, c->drops, _DROP_MAX);
        metric_gauge(f, "profd_v8_line_cache_bytes",
                     "Bytes of line tables and script line ends kept for "
                     "JavaScript frames.",
                     c->bytes);
}

size_t v8_line_cache_memory(const V8LineCache *c)
{
        return c ? c->bytes + (c->slots ? V8_LINE_CACHE_SLOTS * sizeof(V8LineSlot) : 0) : 0;
}
