/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtimes/remote-memory.h"
#include "runtimes/v8-baseline.h"
#include "runtimes/v8-code.h"
#include "runtimes/v8-lines.h"
#include "runtimes/v8-objects.h"
#include "runtimes/v8-stack.h"
#include "symbolizer/v8-chains.h"
#include "symbolizer/v8-code-cache.h"
#include "symbolizer/v8-line-cache.h"
#include "symbolizer/v8-name-cache.h"
#include "symbolizer/v8-pairs.h"
#include "symbolizer/v8-symbols.h"
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
        V8_TABLE_FULL,   /* no pair id left (v8-pairs.h: never reused), or out of memory */
        _V8_NAME_MAX,
} V8NameResult;

static const char *const result_names[_V8_NAME_MAX] = {
        [V8_NAMED] = "named",
        [V8_NOT_FUNCTION] = "not_a_function",
        [V8_READ_FAILED] = "read_failed",
        [V8_NO_PROCESS] = "no_process",
        [V8_TABLE_FULL] = "table_full",
};

/* Lines of JavaScript frames (runtimes/v8-lines.h), by result. */
typedef enum V8LineResult {
        V8_LINE_FOUND,
        V8_LINE_NOT_INTERPRETED,  /* no bytecode offset recorded: a baseline or optimized frame */
        V8_LINE_UNNAMED,          /* the function itself could not be named */
        V8_LINE_NOT_ITS_BYTECODE, /* the frame's BytecodeArray is not its function's (any more) */
        V8_LINE_NO_POSITIONS,     /* V8 has not collected the bytecode's source positions */
        V8_LINE_OUT_OF_RANGE,     /* the offset lies beyond the bytecode, or before any position */
        V8_LINE_READ_FAILED,      /* memory could not be read, or held an unexpected type */
        V8_LINE_UNSUPPORTED,   /* metadata missing, a source profd does not read (external), or beyond bounds
                                */
        V8_LINE_OPTIMIZED,     /* an optimized frame's line, from its Code's source positions */
        V8_LINE_CODE_GONE,     /* no Code of the function holds the pc now: deoptimized or replaced since */
        V8_LINE_NOT_ITS_CODE,  /* the Code holding the pc is not the function's, or not of the type expected
                                */
        V8_LINE_BASELINE,      /* Sparkplug code of a build whose bytecode lengths profd has not found */
        V8_LINE_TOO_DEEP,      /* more functions inlined at the pc than profd keeps */
        V8_LINE_BASELINE_LINE, /* a baseline frame's line, from the bytecode at its pc */
        V8_LINE_BASELINE_MISMATCH, /* a baseline Code's offset table and bytecodes did not agree */
        V8_LINE_FUNCTION_ENTRY,    /* a baseline frame in its prologue, before the first bytecode */
        V8_LINE_LEAF_UNSURE, /* an interrupted frame BPF was unsure of, its pc not found in the function's
                                own code: its pc's entry stays, unnamed */
        _V8_LINE_MAX,
} V8LineResult;

static const char *const line_result_names[_V8_LINE_MAX] = {
        [V8_LINE_FOUND] = "line",
        [V8_LINE_NOT_INTERPRETED] = "not_interpreted",
        [V8_LINE_UNNAMED] = "unnamed",
        [V8_LINE_NOT_ITS_BYTECODE] = "not_its_bytecode",
        [V8_LINE_NO_POSITIONS] = "no_source_positions",
        [V8_LINE_OUT_OF_RANGE] = "out_of_range",
        [V8_LINE_READ_FAILED] = "read_failed",
        [V8_LINE_UNSUPPORTED] = "unsupported",
        [V8_LINE_OPTIMIZED] = "optimized_line",
        [V8_LINE_CODE_GONE] = "code_gone",
        [V8_LINE_NOT_ITS_CODE] = "not_its_code",
        [V8_LINE_BASELINE] = "baseline",
        [V8_LINE_TOO_DEEP] = "inlined_too_deep",
        [V8_LINE_BASELINE_LINE] = "baseline_line",
        [V8_LINE_BASELINE_MISMATCH] = "baseline_mismatch",
        [V8_LINE_FUNCTION_ENTRY] = "function_entry",
        [V8_LINE_LEAF_UNSURE] = "leaf_unsure",
};

struct V8Symbols {
        V8Procs *procs;
        V8Pairs *pairs;
        V8NameCache *cache;
        V8LineCache *lines;
        V8Chains *chains;
        V8CodeCache *code_cache;
        bool no_cache;
        RemoteMemory *mem; /* of mem_pid, taken at mem_ns */
        pid_t mem_pid;
        uint64_t mem_ns;
        uint64_t results[_V8_NAME_MAX];
        uint64_t line_results[_V8_LINE_MAX];
        uint64_t remote_reads; /* made naming frames */
        uint64_t osr_frames;   /* optimized frames over the interpreter's slots, named from their Code */
        uint64_t naming_ns;    /* thread CPU time spent naming stacks' frames at the drain */
        char name[V8_NAME_MAX + 16];
        char inlined_names[V8_CHAIN_LEN_MAX][V8_NAME_MAX + 16];
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
        /* PROFD_V8_NAMES_MAX (tests: the bound reached soon) keeps fewer pairs. */
        if (v8_pairs_new(getenv("PROFD_V8_NAMES_MAX") ? strtoul(getenv("PROFD_V8_NAMES_MAX"), NULL, 10) : 0,
                         (uint32_t)V8_FRAME_ID_MASK, &vs->pairs) < 0 ||
            v8_name_cache_new(&vs->cache) < 0 || v8_line_cache_new(&vs->lines) < 0 ||
            v8_chains_new(0, (uint32_t)V8_FRAME_ID_MASK, &vs->chains) < 0 ||
            v8_code_cache_new(&vs->code_cache) < 0) {
                v8_chains_free(vs->chains);
                v8_pairs_free(vs->pairs);
                v8_name_cache_free(vs->cache);
                v8_line_cache_free(vs->lines);
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
        v8_pairs_free(vs->pairs);
        v8_name_cache_free(vs->cache);
        v8_line_cache_free(vs->lines);
        v8_chains_free(vs->chains);
        v8_code_cache_free(vs->code_cache);
        remote_memory_free(vs->mem);
        free(vs);
        return NULL;
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
static bool cached(V8Symbols *vs, const V8Process *vp, RemoteMemory *m, uint64_t fn, uint64_t *ret_id,
                   V8FunctionIdentity *ret_identity)
{
        V8FunctionIdentity was, now;
        uint32_t id;

        /* A pair forgotten since (v8-pairs.h) is named afresh: a new id. */
        if (v8_name_cache_get(vs->cache, vp->pid, vp->start_time, fn, &was, &id) < 0 ||
            !v8_pairs_has(vs->pairs, id))
                return false;
        if (v8_function_identity(m, &vp->offsets, fn, &now) == 0 && memcmp(&was, &now, sizeof(was)) == 0) {
                *ret_id = id;
                *ret_identity = now;
                return true;
        }
        /* Another function there, or its memory unreadable in this snapshot: named afresh. */
        v8_name_cache_stale(vs->cache, vp->pid, vp->start_time, fn);
        return false;
}

static V8NameResult name_one(V8Symbols *vs, const V8Process *vp, uint64_t fn, uint64_t *ret_id,
                             V8FunctionIdentity *ret_identity)
{
        V8FunctionNames n;
        RemoteMemory *m = memory_of(vs, vp->pid, V8_SNAPSHOT_MAX_AGE_NS);
        int r;

        if (!m)
                return V8_NO_PROCESS;
        if (!vs->no_cache && cached(vs, vp, m, fn, ret_id, ret_identity))
                return V8_NAMED;
        r = v8_function_names(m, &vp->offsets, fn, &n);
        if (r == -EFAULT && (m = memory_of(vs, vp->pid, V8_SNAPSHOT_RETRY_NS)))
                r = v8_function_names(m, &vp->offsets, fn, &n);
        if (r == -EMEDIUMTYPE || r == -EBADMSG)
                return V8_NOT_FUNCTION;
        if (r < 0)
                return V8_READ_FAILED;
        *ret_identity = n.identity;
        *ret_id = v8_pairs_intern(vs->pairs, n.function, n.script);
        if (!*ret_id)
                return V8_TABLE_FULL;
        if (!vs->no_cache)
                (void)v8_name_cache_put(vs->cache, vp->pid, vp->start_time, fn, &n.identity,
                                        (uint32_t)*ret_id);
        return V8_NAMED;
}

static V8LineResult line_result_of(int r)
{
        switch (r) {
        case -ENODATA:
                return V8_LINE_NO_POSITIONS;
        case -EOPNOTSUPP:
        case -E2BIG:
                return V8_LINE_UNSUPPORTED;
        default:
                return V8_LINE_READ_FAILED;
        }
}

/* The line ends of script, cached while its source word stays; NULL and *ret_res when none. */
static const V8LineEnds *script_ends(V8Symbols *vs, const V8Process *vp, RemoteMemory *m, uint64_t script,
                                     V8LineEnds *fresh, V8LineResult *ret_res)
{
        const V8LineEnds *e;
        uint64_t source = 0, was;
        int r;

        e = v8_line_cache_get_script(vs->lines, vp->pid, vp->start_time, script, &was);
        if (e) {
                if (v8_script_source(m, &vp->offsets, script, &source) == 0 && source == was) {
                        if (e->n > 0)
                                return e;
                        *ret_res = V8_LINE_UNSUPPORTED; /* its source could not be read before */
                        return NULL;
                }
                v8_line_cache_drop_script(vs->lines, vp->pid, vp->start_time, script);
        }
        r = v8_script_line_ends(m, &vp->offsets, script, fresh, &source);
        if (r == -EOPNOTSUPP || r == -E2BIG) {
                /* kept empty, so that a source profd does not read is not read again each drain */
                v8_line_ends_done(fresh);
                (void)v8_line_cache_put_script(vs->lines, vp->pid, vp->start_time, script, source, fresh);
        }
        if (r < 0) {
                *ret_res = line_result_of(r);
                return NULL;
        }
        e = v8_line_cache_put_script(vs->lines, vp->pid, vp->start_time, script, source, fresh);
        return e ? e : fresh;
}

/* The line of bytecode offset offset of the BytecodeArray bca, in a frame of the function named
 * through identity (an interpreted or a baseline frame). The array must be the function's:
 * a frame sampled before the GC flushed or replaced its bytecode must not get another array's
 * line. Its line table is read once and kept (v8-line-cache.h) while the array's words stay. */
static V8LineResult bytecode_line(V8Symbols *vs, const V8Process *vp, const V8FunctionIdentity *identity,
                                  uint64_t bca, uint32_t offset, uint32_t *ret_line)
{
        const V8Offsets *o = &vp->offsets;
        uint64_t map, length, positions;
        RemoteMemory *m = memory_of(vs, vp->pid, V8_SNAPSHOT_MAX_AGE_NS);
        const V8LineTable *t;
        const V8LineEnds *ends;
        V8LineTable fresh = {};
        V8LineEnds fresh_ends = {};
        V8LineResult res;
        uint32_t line;
        int r;

        if (!m)
                return V8_LINE_READ_FAILED;
        r = v8_bytecode_identity(m, o, bca, &map, &length, &positions);
        if (r < 0)
                return line_result_of(r);
        t = v8_line_cache_get(vs->lines, vp->pid, vp->start_time, bca, identity->shared);
        if (t && (t->map != map || t->length != length || t->positions != positions)) {
                v8_line_cache_stale(vs->lines, vp->pid, vp->start_time, bca, identity->shared);
                t = NULL;
        }
        if (!t) {
                r = v8_bytecode_belongs(m, o, identity->shared, bca);
                if (r == -EMEDIUMTYPE)
                        return V8_LINE_NOT_ITS_BYTECODE;
                if (r < 0)
                        return line_result_of(r);
                ends = script_ends(vs, vp, m, identity->sfi_script, &fresh_ends, &res);
                r = ends ? v8_bytecode_lines(m, o, bca, ends, &fresh) : 0;
                v8_line_ends_done(&fresh_ends);
                if (!ends && res != V8_LINE_UNSUPPORTED)
                        return res;
                if (!ends || r == -ENODATA || r == -E2BIG || r == -EOPNOTSUPP) {
                        /* Kept without lines, not to be read again while the array's words stay (V8
                         * collecting its positions changes them). */
                        fresh = (V8LineTable){.map = map,
                                              .length = length,
                                              .positions = positions,
                                              .error = ends ? r : -EOPNOTSUPP};
                        r = 0;
                }
                if (r < 0)
                        return line_result_of(r);
                t = v8_line_cache_put(vs->lines, vp->pid, vp->start_time, bca, identity->shared, &fresh);
                if (!t)
                        t = &fresh; /* not kept: used once */
        }
        if (t->error) {
                res = line_result_of(t->error);
                v8_line_table_done(&fresh);
                return res;
        }
        line = v8_smi_value(o, t->length) > (int64_t)offset ? v8_line_table_find(t, offset) : 0;
        v8_line_table_done(&fresh);
        if (!line)
                return V8_LINE_OUT_OF_RANGE;
        *ret_line = line;
        return V8_LINE_FOUND;
}

/* An interpreted frame's, at the bytecode position bc recorded (runtimes/v8-stack.h). */
static V8LineResult frame_line(V8Symbols *vs, const V8Process *vp, const V8FunctionIdentity *identity,
                               uint64_t bc, uint32_t *ret_line)
{
        uint32_t offset;

        if (v8_bytecode_offset(&vp->offsets, v8_bytecode_raw_offset(bc), &offset) < 0)
                return V8_LINE_OUT_OF_RANGE;
        return bytecode_line(vs, vp, identity, v8_bytecode_array(bc), offset, ret_line);
}

/* The line of script offset pos in the script at script (0: none). */
static uint32_t script_line(V8Symbols *vs, const V8Process *vp, RemoteMemory *m, uint64_t script,
                            int32_t pos)
{
        V8LineEnds fresh = {};
        const V8LineEnds *ends;
        V8LineResult res;
        uint32_t line;

        if (pos < 0)
                return 0;
        ends = script_ends(vs, vp, m, script, &fresh, &res);
        line = ends ? v8_line_of(ends, pos) : 0;
        v8_line_ends_done(&fresh);
        return line;
}

static V8LineResult code_result_of(int r, V8CodeKind kind)
{
        if (kind == V8_CODE_BASELINE && (r == -EBADMSG || r == -E2BIG))
                return r == -EBADMSG ? V8_LINE_BASELINE_MISMATCH : V8_LINE_UNSUPPORTED;
        switch (r) {
        case -EOPNOTSUPP:
                return kind == V8_CODE_BASELINE ? V8_LINE_BASELINE
                       : kind == V8_CODE_OTHER  ? V8_LINE_NOT_INTERPRETED
                                                : V8_LINE_UNSUPPORTED;
        case -ENOENT:
                return V8_LINE_CODE_GONE;
        case -EMEDIUMTYPE:
        case -EBADMSG:
                return V8_LINE_NOT_ITS_CODE;
        case -E2BIG:
                return V8_LINE_TOO_DEEP;
        case -ENODATA:
                return V8_LINE_NO_POSITIONS;
        default:
                return V8_LINE_READ_FAILED;
        }
}

/* Whether a cached entry still names what it did: its function's pair is id (the function's
 * current one) and, with a chain, the chain and its pairs are kept. */
static bool entry_alive(const V8Symbols *vs, uint64_t entry, uint64_t id)
{
        const V8ChainLink *links;
        size_t n;

        if (!v8_frame_inlined(entry))
                return v8_frame_id(entry) == id;
        n = v8_chains_get(vs->chains, (uint32_t)v8_frame_id(entry), &links);
        if (n == 0 || links[n - 1].pair != id)
                return false;
        for (size_t k = 0; k + 1 < n; k++)
                if (!v8_pairs_has(vs->pairs, links[k].pair))
                        return false;
        return true;
}

/* res, for a frame at pc that gets no line from its code: not looked for again for a while (the
 * scan's reads); a failed read is tried again. */
static V8LineResult code_cache_negative(V8Symbols *vs, const V8Process *vp,
                                        const V8FunctionIdentity *identity, uint64_t pc, V8LineResult res)
{
        if (!vs->no_cache && res != V8_LINE_READ_FAILED)
                v8_code_cache_put(
                        vs->code_cache, vp->pid, vp->start_time, identity->shared, pc,
                        &(V8CodeCached){.entry = res,
                                        .until_ns = now_ns(CLOCK_MONOTONIC) + V8_CODE_CACHE_NEGATIVE_NS});
        return res;
}

/* An optimized frame (TurboFan, Maglev) of the function fn named id through identity, at the pc
 * entry pc (runtimes/v8-stack.h): its line and the functions inlined at its pc, each with its own
 * line (runtimes/v8-code.h); a baseline (Sparkplug) frame: the line of its bytecode at the pc. *ret_entry:
 * the named entry, with a chain id when functions were inlined there; left as it is when the result is not a
 * line. */
static V8LineResult optimized_frame(V8Symbols *vs, const V8Process *vp, uint64_t fn,
                                    const V8FunctionIdentity *identity, uint64_t id, uint64_t pc,
                                    uint64_t *ret_entry)
{
        const V8Offsets *o = &vp->offsets;
        RemoteMemory *m = memory_of(vs, vp->pid, V8_SNAPSHOT_MAX_AGE_NS);
        V8ChainLink links[V8_CHAIN_LEN_MAX];
        V8CodeFrame cf;
        uint32_t chain;
        int r;

        if (!m)
                return V8_LINE_READ_FAILED;
        if (!vs->no_cache) {
                const V8CodeCached *c =
                        v8_code_cache_get(vs->code_cache, vp->pid, vp->start_time, identity->shared, pc);

                if (c && !c->code && now_ns(CLOCK_MONOTONIC) < c->until_ns) {
                        v8_code_cache_hit(vs->code_cache);
                        return (V8LineResult)c->entry; /* no line, for a while */
                }
                if (c && c->code && entry_alive(vs, c->entry, id) &&
                    v8_code_still(m, o, c->code, pc & V8_FRAME_PC_ADDR_MASK, c->deopt, c->map) == 0) {
                        v8_code_cache_hit(vs->code_cache);
                        *ret_entry = c->entry;
                        return (V8LineResult)c->result;
                }
                if (c)
                        v8_code_cache_stale(vs->code_cache, vp->pid, vp->start_time, identity->shared, pc);
        }
        r = v8_code_frame(m, o, fn, identity->shared, pc & V8_FRAME_PC_ADDR_MASK, !(pc & V8_FRAME_PC_EXACT),
                          &cf);
        if (r >= 0 && cf.kind == V8_CODE_BASELINE) {
                /* Sparkplug: the line of the bytecode at the pc, as an interpreted frame's. No line
                 * (Node.js's own modules: sources profd does not read) is kept as any other pc's,
                 * not to walk the code and its bytecode again each drain. */
                uint32_t line = 0;
                V8LineResult res;

                if (cf.bytecode_offset == V8_BASELINE_FUNCTION_ENTRY)
                        return code_cache_negative(vs, vp, identity, pc, V8_LINE_FUNCTION_ENTRY);
                res = bytecode_line(vs, vp, identity, cf.bytecode_array, (uint32_t)cf.bytecode_offset,
                                    &line);
                if (res != V8_LINE_FOUND)
                        return code_cache_negative(vs, vp, identity, pc, res);
                *ret_entry = v8_frame_make_named(id, (int64_t)line);
                if (!vs->no_cache)
                        v8_code_cache_put(vs->code_cache, vp->pid, vp->start_time, identity->shared, pc,
                                          &(V8CodeCached){.code = cf.code,
                                                          .map = cf.map,
                                                          .deopt = cf.deopt,
                                                          .entry = *ret_entry,
                                                          .result = V8_LINE_BASELINE_LINE});
                return V8_LINE_BASELINE_LINE;
        }
        if (r < 0)
                return code_cache_negative(vs, vp, identity, pc, code_result_of(r, cf.kind));
        for (size_t k = 0; k < cf.n; k++) {
                V8FunctionNames n;
                uint64_t script = identity->sfi_script;

                links[k] = (V8ChainLink){.pair = (uint32_t)id};
                if (k + 1 < cf.n) {
                        /* an inlined function: named through its SharedFunctionInfo */
                        r = v8_shared_names(m, o, cf.scopes[k].shared, &n);
                        if (r < 0)
                                return r == -EMEDIUMTYPE || r == -EBADMSG ? V8_LINE_NOT_ITS_CODE
                                                                          : V8_LINE_READ_FAILED;
                        links[k].pair = v8_pairs_intern(vs->pairs, n.function, n.script);
                        if (!links[k].pair)
                                return V8_LINE_UNSUPPORTED;
                        script = n.identity.sfi_script;
                }
                links[k].line = script_line(vs, vp, m, script, cf.scopes[k].script_offset);
        }
        if (cf.n == 1)
                *ret_entry = v8_frame_make_named(id, links[0].line ? (int64_t)links[0].line : -1);
        else {
                chain = v8_chains_intern(vs->chains, links, cf.n);
                if (!chain)
                        return V8_LINE_UNSUPPORTED;
                *ret_entry = PROFD_FRAME_V8 | V8_FRAME_NAMED | V8_FRAME_INLINED | chain;
        }
        if (!vs->no_cache)
                v8_code_cache_put(vs->code_cache, vp->pid, vp->start_time, identity->shared, pc,
                                  &(V8CodeCached){.code = cf.code,
                                                  .map = cf.map,
                                                  .deopt = cf.deopt,
                                                  .entry = *ret_entry,
                                                  .result = V8_LINE_OPTIMIZED});
        return V8_LINE_OPTIMIZED;
}

size_t v8_symbols_name_stack(void *userdata, uint32_t pid, uint64_t *frames, uint8_t *exact, size_t n)
{
        V8Symbols *vs = userdata;
        const V8Process *vp = v8_procs_get(vs->procs, (pid_t)pid);
        uint64_t last_fn = 0, last_id = 0, t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        V8FunctionIdentity last_identity = {};
        size_t out = 0;

        for (size_t i = 0; i < n; i++) {
                uint64_t f = frames[i], id = 0;
                V8LineResult lres = V8_LINE_NOT_INTERPRETED;
                uint32_t line = 0;
                V8NameResult res;

                if (v8_frame_is_bytecode(f) || v8_frame_is_pc(f))
                        continue; /* folded into its function's entry below */
                exact[out] = exact[i];
                if (!v8_frame_is(f) || v8_frame_named(f)) {
                        frames[out++] = f;
                        continue;
                }
                uint64_t reads = remote_memory_reads_done();
                if (v8_frame_value(f) == last_fn && last_fn) {
                        id = last_id; /* recursion: the same function frame after frame */
                        res = id ? V8_NAMED : V8_NOT_FUNCTION;
                } else {
                        last_identity = (V8FunctionIdentity){};
                        res = vp ? name_one(vs, vp, v8_frame_value(f), &id, &last_identity) : V8_NO_PROCESS;
                        last_fn = v8_frame_value(f);
                        last_id = res == V8_NAMED ? id : 0;
                }
                /* Its pc (the splice's) and bytecode (BPF's) entries follow it, in that order. */
                uint64_t pc = 0, bc = 0, entry;
                for (size_t j = i + 1; j < n && j <= i + 2; j++) {
                        if (v8_frame_is_pc(frames[j]))
                                pc = frames[j];
                        else if (v8_frame_is_bytecode(frames[j]))
                                bc = frames[j];
                        else
                                break;
                }
                entry = v8_frame_make_named(res == V8_NAMED ? id : 0, -1);
                /* Interpreter's slots under a pc in JIT code: an optimized frame entered from the
                 * interpreter's loop (on-stack replacement) keeps them, with the offset of the
                 * bytecode it entered at, so its Code at the pc says where it is. Only a copy of the
                 * interpreter's trampoline (Code of another kind: --interpreted-frames-native-stack)
                 * leaves the offset to be trusted; anything else leaves the frame without a line
                 * rather than that offset's. */
                if (bc && pc && (f & PROFD_FRAME_V8_JIT) && res == V8_NAMED && vp) {
                        lres = optimized_frame(vs, vp, v8_frame_value(f), &last_identity, id, pc, &entry);
                        if (lres == V8_LINE_OPTIMIZED || lres == V8_LINE_BASELINE_LINE)
                                vs->osr_frames++;
                        if (lres != V8_LINE_NOT_INTERPRETED)
                                bc = 0;
                }
                if (bc) {
                        lres = res == V8_NAMED && vp ? frame_line(vs, vp, &last_identity, bc, &line)
                                                     : V8_LINE_UNNAMED;
                        if (lres == V8_LINE_FOUND)
                                entry = v8_frame_make_named(id, (int64_t)line);
                } else if (lres == V8_LINE_NOT_INTERPRETED && pc && res == V8_NAMED && vp)
                        /* A frame without a bytecode position, or whose slots only looked like an
                         * interpreted frame's (an optimized frame's spill slots: a heap object where
                         * the array is kept, a Smi below it): its code at the pc, which must be the
                         * function's. */
                        lres = optimized_frame(vs, vp, v8_frame_value(f), &last_identity, id, pc, &entry);
                if ((lres == V8_LINE_NOT_ITS_BYTECODE || lres == V8_LINE_OUT_OF_RANGE) && pc &&
                         res == V8_NAMED && vp) {
                        V8LineResult code =
                                optimized_frame(vs, vp, v8_frame_value(f), &last_identity, id, pc, &entry);

                        if (code == V8_LINE_OPTIMIZED || code == V8_LINE_BASELINE_LINE)
                                lres = code;
                }
                if ((f & PROFD_FRAME_V8_UNSURE) && lres != V8_LINE_OPTIMIZED && lres != V8_LINE_BASELINE_LINE) {
                        /* BPF was unsure the interrupted frame is the one at fp (bpf/profd-v8.h): only
                         * the function's own Code holding the pc (its DeoptimizationData's, or its
                         * bytecode's for baseline code) says it is. Else the pc, unnamed, as BPF
                         * would have left it. */
                        vs->remote_reads += remote_memory_reads_done() - reads;
                        vs->line_results[V8_LINE_LEAF_UNSURE]++;
                        if (pc) {
                                frames[out] = pc & V8_FRAME_PC_ADDR_MASK;
                                exact[out++] = (pc & V8_FRAME_PC_EXACT) != 0;
                        }
                        continue;
                }
                vs->remote_reads += remote_memory_reads_done() - reads;
                vs->results[res]++;
                vs->line_results[lres]++;
                frames[out++] = entry;
        }
        vs->naming_ns += now_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
        return out;
}

int v8_symbols_name(void *userdata, const Process *p, uint64_t frame, SymFrame *ret)
{
        V8Symbols *vs = userdata;
        uint64_t id = v8_frame_named(frame) ? v8_frame_id(frame) : 0;
        const char *function, *script;
        const V8ChainLink *links;
        size_t n;
        int line = (int)v8_frame_line(frame);

        (void)p;
        if (v8_frame_inlined(frame)) {
                /* the chain's last function: the frame's own */
                n = v8_chains_get(vs->chains, (uint32_t)id, &links);
                if (n == 0)
                        return -ENOENT;
                id = links[n - 1].pair;
                line = (int)links[n - 1].line;
        }
        if (v8_pairs_get(vs->pairs, (uint32_t)id, &function, &script) < 0)
                return -ENOENT;
        snprintf(vs->name, sizeof(vs->name), "%s", function[0] ? function : "<anonymous>");
        *ret = (SymFrame){
                .name = vs->name,
                .system_name = vs->name,
                .file = script[0] ? script : NULL,
                .line = line,
        };
        return 0;
}

size_t v8_symbols_inlined(void *userdata, const Process *p, uint64_t frame, SymFrame *ret, size_t max)
{
        V8Symbols *vs = userdata;
        const V8ChainLink *links;
        size_t n, k;

        (void)p;
        if (!v8_frame_inlined(frame))
                return 0;
        n = v8_chains_get(vs->chains, (uint32_t)v8_frame_id(frame), &links);
        if (n < 2 || n - 1 > max || n - 1 > V8_CHAIN_LEN_MAX)
                return 0;
        for (k = 0; k + 1 < n; k++) {
                const char *function, *script;

                /* A pair forgotten since: the chain is not shown rather than shown with a hole. */
                if (v8_pairs_get(vs->pairs, links[k].pair, &function, &script) < 0)
                        return 0;
                snprintf(vs->inlined_names[k], sizeof(vs->inlined_names[k]), "%s",
                         function[0] ? function : "<anonymous>");
                ret[k] = (SymFrame){
                        .name = vs->inlined_names[k],
                        .system_name = vs->inlined_names[k],
                        .file = script[0] ? script : NULL,
                        .line = (int)links[k].line,
                };
        }
        return k;
}

void v8_symbols_write_metrics(const V8Symbols *vs, FILE *f)
{
        if (!vs)
                return;
        metric_labelled(
                f, "profd_v8_frames_named_total", "counter",
                "JavaScript frames named at the drain, by result (unnamed ones stay \"[javascript]\").",
                "result", result_names, vs->results, _V8_NAME_MAX);
        v8_pairs_write_metrics(vs->pairs, f);
        metric_counter(f, "profd_v8_remote_reads_total",
                       "Reads of other processes' memory made naming JavaScript frames.", vs->remote_reads);
        metric_counter(f, "profd_v8_osr_frames_total",
                       "JavaScript frames of optimized code entered from the interpreter's loop (on-stack "
                       "replacement), which keeps the interpreter's slots: lined from their Code, not "
                       "from the bytecode offset of their entry.",
                       vs->osr_frames);
        metric_family(f, "profd_v8_naming_seconds_total", "counter",
                      "CPU time of the daemon spent naming JavaScript frames at the drain.");
        metric_sample_fixed(f, "profd_v8_naming_seconds_total", NULL, (double)vs->naming_ns / 1e9, 6);
        v8_name_cache_write_metrics(vs->cache, f);
        metric_labelled(f, "profd_v8_lines_total", "counter",
                        "JavaScript frames given a source line at the drain, or not by reason.", "result",
                        line_result_names, vs->line_results, _V8_LINE_MAX);
        v8_line_cache_write_metrics(vs->lines, f);
        v8_chains_write_metrics(vs->chains, f);
        v8_code_cache_write_metrics(vs->code_cache, f);
}

size_t v8_symbols_memory(const V8Symbols *vs)
{
        return vs ? v8_pairs_bytes(vs->pairs) + v8_name_cache_memory(vs->cache) +
                               v8_line_cache_memory(vs->lines) + v8_chains_bytes(vs->chains) +
                               v8_code_cache_memory(vs->code_cache)
                  : 0;
}

uint64_t v8_symbols_namer(void *userdata, uint32_t pid, uint32_t flags, uint64_t *frames, uint8_t *exact,
                          size_t *n)
{
        size_t v8 = 0;

        *n = v8_stack_splice(frames, exact, *n, &v8);
        if (v8 > 0)
                *n = v8_symbols_name_stack(userdata, pid, frames, exact, *n);
        return 0;
}
