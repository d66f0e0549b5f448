/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtimes/remote-memory.h"
#include "runtimes/v8-objects.h"
#include "runtimes/v8-stack.h"
#include "symbolizer/v8-name-cache.h"
#include "symbolizer/v8-symbols.h"
#include "util/hash.h"
#include "util/id-index.h"
#include "util/log.h"
#include "util/metrics-writer.h"
#include "util/time-util.h"

/* A process's memory map snapshot (remote-memory.h) is reused for this long: V8 maps new heap
 * pages as it grows, so an older one would refuse their objects; a read refused (-EFAULT) by a
 * snapshot older than V8_SNAPSHOT_RETRY_NS is tried once more with a new one. */
#define V8_SNAPSHOT_MAX_AGE_NS (1000ULL * 1000 * 1000)
#define V8_SNAPSHOT_RETRY_NS (10ULL * 1000 * 1000)

typedef enum V8NameResult {
        V8_NAMED,
        V8_NOT_FUNCTION, /* not a JSFunction (any more): moved or freed by the GC */
        V8_READ_FAILED,  /* its memory could not be read */
        V8_NO_PROCESS,   /* the process is gone or not known to run V8 */
        V8_TABLE_FULL,   /* V8_SYMBOLS_MAX_NAMES pairs kept already */
        _V8_NAME_MAX,
} V8NameResult;

static const char *const result_names[_V8_NAME_MAX] = {
        [V8_NAMED] = "named",
        [V8_NOT_FUNCTION] = "not_a_function",
        [V8_READ_FAILED] = "read_failed",
        [V8_NO_PROCESS] = "no_process",
        [V8_TABLE_FULL] = "table_full",
};

typedef struct V8Name {
        char *function, *script; /* script "" when none */
} V8Name;

struct V8Symbols {
        V8Procs *procs;
        V8Name *names; /* id - 1 */
        size_t n_names, cap_names, bytes;
        IdIndex index;
        V8NameCache *cache;
        bool no_cache;
        RemoteMemory *mem; /* of mem_pid, taken at mem_ns */
        pid_t mem_pid;
        uint64_t mem_ns;
        uint64_t results[_V8_NAME_MAX];
        uint64_t remote_reads; /* made naming frames */
        uint64_t naming_ns;    /* thread CPU time spent naming stacks' frames at the drain */
        char name[V8_NAME_MAX + 16];
};

int v8_symbols_new(V8Procs *procs, V8Symbols **ret)
{
        V8Symbols *vs = calloc(1, sizeof(*vs));

        if (!vs)
                return -ENOMEM;
        /* PROFD_V8_NAME_CACHE=0 (benchmarks: bench/v8-names-bench.py) names every frame afresh. */
        vs->no_cache = getenv("PROFD_V8_NAME_CACHE") && strcmp(getenv("PROFD_V8_NAME_CACHE"), "0") == 0;
        if (vs->no_cache)
                log_info("PROFD_V8_NAME_CACHE=0: JavaScript names not cached across drains");
        if (v8_name_cache_new(&vs->cache) < 0) {
                free(vs);
                return -ENOMEM;
        }
        vs->procs = procs;
        *ret = vs;
        return 0;
}

V8Symbols *v8_symbols_free(V8Symbols *vs)
{
        if (!vs)
                return NULL;
        for (size_t i = 0; i < vs->n_names; i++) {
                free(vs->names[i].function);
                free(vs->names[i].script);
        }
        free(vs->names);
        id_index_done(&vs->index);
        v8_name_cache_free(vs->cache);
        remote_memory_free(vs->mem);
        free(vs);
        return NULL;
}

static uint64_t pair_hash(const char *function, const char *script)
{
        return hash_fnv1a(hash_fnv1a(0xcbf29ce484222325ULL, function, strlen(function) + 1), script,
                          strlen(script));
}

/* The id of (function, script), interned; 0 when the table is full or out of memory. */
static uint64_t intern(V8Symbols *vs, const char *function, const char *script)
{
        uint64_t h = pair_hash(function, script);
        size_t slot = h;
        uint32_t id;
        V8Name n;

        while ((id = id_index_next(&vs->index, h, &slot)))
                if (strcmp(vs->names[id - 1].function, function) == 0 &&
                    strcmp(vs->names[id - 1].script, script) == 0)
                        return id;
        if (vs->n_names >= V8_SYMBOLS_MAX_NAMES)
                return 0;
        if (vs->n_names == vs->cap_names) {
                size_t cap = vs->cap_names ? vs->cap_names * 2 : 256;
                V8Name *v = realloc(vs->names, cap * sizeof(*v));

                if (!v)
                        return 0;
                vs->names = v;
                vs->cap_names = cap;
        }
        n = (V8Name){.function = strdup(function), .script = strdup(script)};
        if (!n.function || !n.script || id_index_insert(&vs->index, h, (uint32_t)(vs->n_names + 1)) < 0) {
                free(n.function);
                free(n.script);
                return 0;
        }
        vs->names[vs->n_names++] = n;
        vs->bytes += strlen(function) + strlen(script) + 2 + sizeof(n);
        return vs->n_names;
}

/* The snapshot of pid's memory, fresh enough (see above); NULL when it cannot be taken. */
static RemoteMemory *memory_of(V8Symbols *vs, pid_t pid, uint64_t max_age)
{
        uint64_t now = now_ns(CLOCK_MONOTONIC);

        if (vs->mem && vs->mem_pid == pid && now - vs->mem_ns < max_age)
                return vs->mem;
        vs->mem = remote_memory_free(vs->mem);
        if (remote_memory_open(pid, &vs->mem) < 0) {
                vs->mem = NULL;
                return NULL;
        }
        vs->mem_pid = pid;
        vs->mem_ns = now;
        return vs->mem;
}

/* Whether fn was named before and is still that function (v8-name-cache.h): its id then. */
static bool cached(V8Symbols *vs, const V8Process *vp, RemoteMemory *m, uint64_t fn, uint64_t *ret_id)
{
        V8FunctionIdentity was, now;
        uint32_t id;

        if (v8_name_cache_get(vs->cache, vp->pid, vp->start_time, fn, &was, &id) < 0)
                return false;
        if (v8_function_identity(m, &vp->offsets, fn, &now) == 0 && memcmp(&was, &now, sizeof(was)) == 0) {
                *ret_id = id;
                return true;
        }
        /* Another function there, or its memory unreadable in this snapshot: named afresh. */
        v8_name_cache_stale(vs->cache, vp->pid, vp->start_time, fn);
        return false;
}

static V8NameResult name_one(V8Symbols *vs, const V8Process *vp, uint64_t fn, uint64_t *ret_id)
{
        V8FunctionNames n;
        RemoteMemory *m = memory_of(vs, vp->pid, V8_SNAPSHOT_MAX_AGE_NS);
        int r;

        if (!m)
                return V8_NO_PROCESS;
        if (!vs->no_cache && cached(vs, vp, m, fn, ret_id))
                return V8_NAMED;
        r = v8_function_names(m, &vp->offsets, fn, &n);
        if (r == -EFAULT && (m = memory_of(vs, vp->pid, V8_SNAPSHOT_RETRY_NS)))
                r = v8_function_names(m, &vp->offsets, fn, &n);
        if (r == -EMEDIUMTYPE || r == -EBADMSG)
                return V8_NOT_FUNCTION;
        if (r < 0)
                return V8_READ_FAILED;
        *ret_id = intern(vs, n.function, n.script);
        if (!*ret_id)
                return V8_TABLE_FULL;
        if (!vs->no_cache)
                (void)v8_name_cache_put(vs->cache, vp->pid, vp->start_time, fn, &n.identity,
                                        (uint32_t)*ret_id);
        return V8_NAMED;
}

void v8_symbols_name_stack(void *userdata, uint32_t pid, uint64_t *frames, size_t n)
{
        V8Symbols *vs = userdata;
        const V8Process *vp = v8_procs_get(vs->procs, (pid_t)pid);
        uint64_t last_fn = 0, last_id = 0, t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);

        for (size_t i = 0; i < n; i++) {
                uint64_t f = frames[i], id = 0;
                V8NameResult res;

                if (!v8_frame_is(f) || v8_frame_named(f))
                        continue;
                if (v8_frame_value(f) == last_fn && last_fn) {
                        id = last_id; /* recursion: the same function frame after frame */
                        res = id ? V8_NAMED : V8_NOT_FUNCTION;
                } else {
                        uint64_t reads = remote_memory_reads_done();

                        res = vp ? name_one(vs, vp, v8_frame_value(f), &id) : V8_NO_PROCESS;
                        vs->remote_reads += remote_memory_reads_done() - reads;
                        last_fn = v8_frame_value(f);
                        last_id = id;
                }
                vs->results[res]++;
                frames[i] = PROFD_FRAME_V8 | V8_FRAME_NAMED | (res == V8_NAMED ? id : 0);
        }
        vs->naming_ns += now_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
}

int v8_symbols_name(void *userdata, const Process *p, uint64_t frame, SymFrame *ret)
{
        V8Symbols *vs = userdata;
        uint64_t id = v8_frame_named(frame) ? v8_frame_value(frame) : 0;
        const V8Name *n;

        (void)p;
        if (id == 0 || id > vs->n_names)
                return -ENOENT;
        n = &vs->names[id - 1];
        snprintf(vs->name, sizeof(vs->name), "%s", n->function[0] ? n->function : "<anonymous>");
        *ret = (SymFrame){
                .name = vs->name,
                .system_name = vs->name,
                .file = n->script[0] ? n->script : NULL,
        };
        return 0;
}

void v8_symbols_write_metrics(const V8Symbols *vs, FILE *f)
{
        if (!vs)
                return;
        metric_labelled(
                f, "profd_v8_frames_named_total", "counter",
                "JavaScript frames named at the drain, by result (unnamed ones stay \"[javascript]\").",
                "result", result_names, vs->results, _V8_NAME_MAX);
        metric_gauge(f, "profd_v8_names", "(function, script) name pairs kept for JavaScript frames.",
                     vs->n_names);
        metric_counter(f, "profd_v8_remote_reads_total",
                       "Reads of other processes' memory made naming JavaScript frames.", vs->remote_reads);
        metric_family(f, "profd_v8_naming_seconds_total", "counter",
                      "CPU time of the daemon spent naming JavaScript frames at the drain.");
        metric_sample_fixed(f, "profd_v8_naming_seconds_total", NULL, (double)vs->naming_ns / 1e9, 6);
        v8_name_cache_write_metrics(vs->cache, f);
}

size_t v8_symbols_memory(const V8Symbols *vs)
{
        return vs ? vs->bytes + vs->index.cap * sizeof(IndexSlot) + v8_name_cache_memory(vs->cache) : 0;
}
