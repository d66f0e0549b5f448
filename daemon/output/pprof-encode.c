/* SPDX-License-Identifier: GPL-2.0-only */
/* The profile is built in three phases, each split into bounded steps:
 *   SAMPLES: every sample's frames become locations (symbolized once per distinct
 *            mapping+address), functions and strings, interned in open-addressing indexes;
 *   PACK:    protobuf-c serializes the profile field by field, a chunk per step, and zlib
 *            compresses each chunk (pprof-pack.h).
 * Stacks go out leaf first: kernel frames (leaf first), then user frames, then the markers that
 * say why a user stack ends early ("[truncated: N+ frames]", "[unwind stopped: reason]").
 * A user frame profd cannot name in a file it read, with a build ID, gets no function: its
 * location keeps the address and its mapping the file offset and build ID, has_functions false,
 * for pprof's own symbolization and collectors' (docs/symbolization.md). Every other frame has a
 * function, a placeholder where nothing downstream could do better (markers, kernel, no mapping,
 * no build ID, a file profd could not read). */
#include <errno.h>
#include <inttypes.h>
#include <linux/types.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "bpf/profd-sample.h"
#include "output/frame-names.h"
#include "output/pprof-encode.h"
#include "output/pprof-pack.h"
#include "output/stack-markers.h"
#include "profile.pb-c.h"
#include "util/array.h"
#include "util/hash.h"
#include "util/id-index.h"
#include "util/log.h"
#include "util/time-util.h"
#include "util/utf8.h"

/* Work units per step: one per frame, LOOKUP_COST per symbolizer call. Sized so a step takes
 * on the order of a millisecond or two once caches are warm. */
#define STEP_BUDGET 20000
#define LOOKUP_COST 20
/* A step also ends after this long: cold lookups (an executable opened, its DWARF parsed CU by
 * CU) cost far more than LOOKUP_COST, and the event loop must keep draining and serving. */
#define STEP_MAX_NS (5 * NSEC_PER_USEC * 1000)
/* Longest build ID put in a profile, in bytes: GNU build IDs are 20 (SHA-1) or 16 (MD5), Go ones
 * up to the 128 bytes the process table keeps. */
#define MAX_BUILD_ID 128

typedef enum Phase {
        PHASE_SAMPLES,
        PHASE_PACK,
        PHASE_DONE,
} Phase;

typedef struct MapKey {
        uint64_t start, end, offset, dev, inode;
} MapKey;

typedef struct LocKey {
        uint64_t mapping_id, address, kind;
} LocKey;

enum {
        LOC_LEAF = 0,
        LOC_RETURN = 1,
        LOC_MARKER = 2,
        LOC_PYTHON = 3,  /* | pid << 8: a Python frame (python-stack.h), per process */
        LOC_RUNTIME = 4, /* | pid << 8: another runtime's frame (frame-names.h FRAME_RUNTIME) */
};

typedef struct FuncKey {
        int64_t name, system_name, filename, start_line;
} FuncKey;

struct PprofJob {
        ProfileWindow *window;
        Symbolizer *sym;
        ProcessTable *procs;
        PprofOptions options;
        Phase phase;
        size_t next_sample;

        char **strings;
        size_t n_strings, cap_strings;
        IdIndex string_index;

        Perftools__Profiles__Mapping **mappings;
        MapKey *map_keys;
        size_t n_mappings, cap_mappings;
        IdIndex mapping_index;
        uint64_t kernel_mapping_id;
        bool kernel_addresses; /* false: kernel locations and mapping carry no address */

        Perftools__Profiles__Location **locations;
        LocKey *loc_keys;
        size_t n_locations, cap_locations;
        IdIndex location_index;

        Perftools__Profiles__Function **functions;
        FuncKey *func_keys;
        size_t n_functions, cap_functions;
        IdIndex function_index;

        Perftools__Profiles__Sample **samples;
        size_t n_samples;

        Perftools__Profiles__Label **labels; /* interned (key, value) pairs shared by samples */
        size_t n_labels, cap_labels;
        IdIndex label_index;

        uint64_t *loc_scratch;
        size_t cap_loc_scratch;

        int64_t period;
        int64_t str_samples, str_count, str_cpu, str_nanoseconds;
        int64_t str_state, str_blocked, str_preempted; /* off-CPU windows */
        int64_t label_keys[_LABEL_MAX];

        PprofPack pack;

        uint64_t n_frames, n_unsymbolized, n_left_unnamed;
};

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
        return array_grow(p, cap, need, elem, 256) >= 0;
}

/* Grows two parallel arrays (objects and their keys) to the same capacity. */
static bool grow2(void **a, size_t ea, void **b, size_t eb, size_t *cap, size_t need)
{
        size_t ca = *cap, cb = *cap;

        if (array_grow(a, &ca, need, ea, 256) < 0 || array_grow(b, &cb, need, eb, 256) < 0)
                return false; /* *a may be larger than *cap says: harmless, grown again next time */
        *cap = ca;
        return true;
}

/* Index of s in the string table, adding it if new; <0 on allocation failure. */
static int64_t intern(PprofJob *j, const char *s)
{
        _cleanup_free_ char *escaped = NULL;
        uint64_t h;
        size_t slot;
        uint32_t id;
        char *copy;

        if (!s)
                return 0;
        /* pprof strings must be valid UTF-8. */
        if (utf8_escape(s, &escaped) < 0)
                return -ENOMEM;
        if (escaped)
                s = escaped;
        h = hash_mix64(hash_fnv1a(HASH_FNV1A_INIT, s, strlen(s)));
        slot = h;
        while ((id = id_index_next(&j->string_index, h, &slot)))
                if (strcmp(j->strings[id - 1], s) == 0)
                        return id - 1;
        if (!grow((void **)&j->strings, &j->cap_strings, j->n_strings + 1, sizeof(char *)))
                return -ENOMEM;
        copy = escaped ? TAKE_PTR(escaped) : strdup(s);
        if (!copy)
                return -ENOMEM;
        j->strings[j->n_strings++] = copy;
        if (id_index_insert(&j->string_index, h, (uint32_t)j->n_strings) < 0)
                return -ENOMEM;
        return (int64_t)j->n_strings - 1;
}

static int64_t function_id(PprofJob *j, const SymFrame *f)
{
        FuncKey k;
        Perftools__Profiles__Function *fn;
        uint64_t h;
        size_t slot;
        uint32_t id;

        k.name = intern(j, f->name);
        k.system_name = intern(j, f->system_name ?: f->name);
        k.filename = intern(j, f->file);
        k.start_line = f->start_line;
        if (k.name < 0 || k.system_name < 0 || k.filename < 0)
                return -ENOMEM;
        h = hash_u64s((const uint64_t *)&k, 4);
        slot = h;
        while ((id = id_index_next(&j->function_index, h, &slot)))
                if (memcmp(&j->func_keys[id - 1], &k, sizeof(k)) == 0)
                        return id;

        if (!grow2((void **)&j->functions, sizeof(*j->functions), (void **)&j->func_keys,
                   sizeof(*j->func_keys), &j->cap_functions, j->n_functions + 1))
                return -ENOMEM;
        fn = malloc(sizeof(*fn));
        if (!fn)
                return -ENOMEM;
        perftools__profiles__function__init(fn);
        fn->id = j->n_functions + 1;
        fn->name = k.name;
        fn->system_name = k.system_name;
        fn->filename = k.filename;
        fn->start_line = k.start_line;
        j->functions[j->n_functions] = fn;
        j->func_keys[j->n_functions] = k;
        j->n_functions++;
        if (id_index_insert(&j->function_index, h, (uint32_t)j->n_functions) < 0)
                return -ENOMEM;
        return (int64_t)fn->id;
}

static int add_mapping(PprofJob *j, const MapKey *k, uint64_t h, const char *path, const uint8_t *build_id,
                       size_t build_id_size, uint64_t *ret_id)
{
        Perftools__Profiles__Mapping *m;
        char hex[2 * MAX_BUILD_ID + 1];
        int64_t path_idx, bid_idx = 0;

        if (build_id_size > MAX_BUILD_ID)
                build_id_size = 0;
        for (size_t i = 0; i < build_id_size; i++)
                sprintf(hex + 2 * i, "%02x", build_id[i]);
        path_idx = intern(j, path);
        if (build_id_size > 0)
                bid_idx = intern(j, hex);
        if (path_idx < 0 || bid_idx < 0)
                return -ENOMEM;

        if (!grow2((void **)&j->mappings, sizeof(*j->mappings), (void **)&j->map_keys, sizeof(*j->map_keys),
                   &j->cap_mappings, j->n_mappings + 1))
                return -ENOMEM;
        m = malloc(sizeof(*m));
        if (!m)
                return -ENOMEM;
        perftools__profiles__mapping__init(m);
        m->id = j->n_mappings + 1;
        m->memory_start = k->start;
        m->memory_limit = k->end;
        m->file_offset = k->offset;
        m->filename = path_idx;
        m->build_id = bid_idx;
        /* Until a location in it is left unnamed (location_add). */
        m->has_functions = true;
        j->mappings[j->n_mappings] = m;
        j->map_keys[j->n_mappings] = *k;
        j->n_mappings++;
        if (id_index_insert(&j->mapping_index, h, (uint32_t)j->n_mappings) < 0)
                return -ENOMEM;
        *ret_id = m->id;
        return 0;
}

static int user_mapping_id(PprofJob *j, const ProcMapping *pm, pid_t pid, uint64_t *ret)
{
        MapKey k = {pm->start, pm->end, pm->offset, pm->dev, pm->inode};
        /* Anonymous memory is its process's own (JIT code named from its perf map): never the
         * same mapping, nor the same locations, as another process's at the same addresses. No
         * file has inode 0 on device 0. */
        if (!pm->path[0])
                k.inode = (uint64_t)pid;
        uint64_t h = hash_u64s((const uint64_t *)&k, 5);
        size_t slot = h, bid_size;
        const uint8_t *bid;
        uint32_t id;

        while ((id = id_index_next(&j->mapping_index, h, &slot)))
                if (memcmp(&j->map_keys[id - 1], &k, sizeof(k)) == 0) {
                        *ret = id;
                        return 0;
                }
        bid_size = frame_names_build_id(pm, &bid);
        return add_mapping(j, &k, h, pm->path[0] ? pm->path : "[anon]", bid, bid_size, ret);
}

static int kernel_mapping_id(PprofJob *j, uint64_t addr, uint64_t *ret)
{
        /* One mapping for the whole kernel (vmlinux and modules); its range grows to cover
         * every kernel address seen. Without kernel addresses it stays 0-0 (the name and build
         * ID still say which kernel). */
        if (!j->kernel_mapping_id) {
                MapKey k = {addr, addr + 1, 0, UINT64_MAX, UINT64_MAX};
                const uint8_t *bid;
                size_t bid_size = symbolizer_kernel_build_id(j->sym, &bid);
                int r = add_mapping(j, &k, hash_u64s((const uint64_t *)&k, 5), "[kernel.kallsyms]", bid,
                                    bid_size, &j->kernel_mapping_id);
                if (r < 0)
                        return r;
        }
        Perftools__Profiles__Mapping *m = j->mappings[j->kernel_mapping_id - 1];
        if (!j->kernel_addresses)
                m->memory_start = m->memory_limit = 0;
        else {
                if (addr < m->memory_start)
                        m->memory_start = addr;
                if (addr >= m->memory_limit)
                        m->memory_limit = addr + 1;
        }
        *ret = j->kernel_mapping_id;
        return 0;
}

static uint32_t location_find(PprofJob *j, const LocKey *k, uint64_t h)
{
        size_t slot = h;
        uint32_t id;
        while ((id = id_index_next(&j->location_index, h, &slot)))
                if (memcmp(&j->loc_keys[id - 1], k, sizeof(*k)) == 0)
                        return id;
        return 0;
}

/* Adds a location whose lines are res's frames (innermost first); none when res has no frames:
 * then its mapping no longer has_functions, so pprof and collectors symbolize what is left. */
static int location_add(PprofJob *j, const LocKey *k, uint64_t h, uint64_t address, const SymResult *res,
                        uint64_t *ret)
{
        Perftools__Profiles__Location *loc;
        Perftools__Profiles__Line **ptrs, *lines;
        Perftools__Profiles__Mapping *m = k->mapping_id ? j->mappings[k->mapping_id - 1] : NULL;

        if (!grow2((void **)&j->locations, sizeof(*j->locations), (void **)&j->loc_keys,
                   sizeof(*j->loc_keys), &j->cap_locations, j->n_locations + 1))
                return -ENOMEM;
        /* One block: the location, its line pointers and its lines. */
        loc = malloc(sizeof(*loc) + res->n_frames * (sizeof(*ptrs) + sizeof(*lines)));
        if (!loc)
                return -ENOMEM;
        perftools__profiles__location__init(loc);
        ptrs = (Perftools__Profiles__Line **)(loc + 1);
        lines = (Perftools__Profiles__Line *)(ptrs + res->n_frames);
        for (size_t i = 0; i < res->n_frames; i++) {
                int64_t fid = function_id(j, &res->frames[i]);
                if (fid < 0) {
                        free(loc);
                        return (int)fid;
                }
                perftools__profiles__line__init(&lines[i]);
                lines[i].function_id = (uint64_t)fid;
                lines[i].line = res->frames[i].line;
                ptrs[i] = &lines[i];
                if (m) {
                        if (res->frames[i].file && k->mapping_id != j->kernel_mapping_id)
                                m->has_filenames = true;
                        if (res->frames[i].line > 0)
                                m->has_line_numbers = true;
                }
        }
        if (m) {
                /* pprof symbolizes a mapping itself (from the file, or one found by build ID in
                 * PPROF_BINARY_PATH) only when has_functions is false, and so do collectors. */
                if (res->n_frames == 0)
                        m->has_functions = false;
                if (res->n_frames > 1)
                        m->has_inline_frames = true;
        }
        loc->id = j->n_locations + 1;
        loc->mapping_id = k->mapping_id;
        loc->address = address;
        loc->n_line = res->n_frames;
        loc->line = ptrs;
        j->locations[j->n_locations] = loc;
        j->loc_keys[j->n_locations] = *k;
        j->n_locations++;
        if (id_index_insert(&j->location_index, h, (uint32_t)j->n_locations) < 0)
                return -ENOMEM;
        *ret = loc->id;
        return 0;
}

static int marker_location(PprofJob *j, const char *name, uint64_t *ret)
{
        SymFrame f = {.name = name, .system_name = name};
        SymResult res = {.frames = &f, .n_frames = 1};
        int64_t name_idx = intern(j, name);
        LocKey k;
        uint64_t h;
        uint32_t id;

        if (name_idx < 0)
                return -ENOMEM;
        k = (LocKey){0, (uint64_t)name_idx, LOC_MARKER};
        h = hash_u64s((const uint64_t *)&k, 3);
        id = location_find(j, &k, h);
        if (id) {
                *ret = id;
                return 0;
        }
        return location_add(j, &k, h, 0, &res, ret);
}

static int kernel_location(PprofJob *j, const Stack *kernel, uint32_t i, unsigned *budget, uint64_t *ret)
{
        FrameName f;
        LocKey k;
        uint64_t h, mid;
        uint32_t id;
        int r;

        frame_locate_kernel(kernel, i, &f);
        r = kernel_mapping_id(j, f.address, &mid);
        if (r < 0)
                return r;
        k = (LocKey){mid, f.address, f.exact ? LOC_LEAF : LOC_RETURN};
        h = hash_u64s((const uint64_t *)&k, 3);
        id = location_find(j, &k, h);
        if (id) {
                *ret = id;
                return 0;
        }
        *budget += LOOKUP_COST;
        r = frame_name_resolve(j->sym, NULL, &f);
        if (r < 0)
                return r;
        j->n_unsymbolized += !f.res.symbolized;
        /* The key keeps the address (one location per distinct return site, as pprof expects);
         * the profile gets it only when allowed. */
        return location_add(j, &k, h, j->kernel_addresses ? f.address : 0, &f.res, ret);
}

/* Frames are located and named by the one naming path (frame-names.h); this only turns them into
 * pprof locations, each named once per profile. */
static int user_location(PprofJob *j, const Process *p, pid_t pid, const Stack *user, uint32_t i,
                         unsigned *budget, uint64_t *ret)
{
        uint64_t mid = 0, h;
        FrameName f;
        LocKey k;
        uint32_t id;
        int r;

        frame_locate_user(p, user, i, &f);
        switch (f.kind) {
        case FRAME_PYTHON:
                /* Code objects are the process's own: no mapping, no address. */
                k = (LocKey){0, f.address, LOC_PYTHON | (uint64_t)(uint32_t)pid << 8};
                break;
        case FRAME_RUNTIME:
                /* The runtime's own objects (a Java method and bytecode index): per process. */
                k = (LocKey){0, f.address, LOC_RUNTIME | (uint64_t)(uint32_t)pid << 8};
                break;
        case FRAME_UNMAPPED:
                k = (LocKey){0, f.address, f.exact ? LOC_LEAF : LOC_RETURN};
                break;
        default:
                r = user_mapping_id(j, f.mapping, pid, &mid);
                if (r < 0)
                        return r;
                k = (LocKey){mid, f.address, f.exact ? LOC_LEAF : LOC_RETURN};
                break;
        }
        h = hash_u64s((const uint64_t *)&k, 3);
        id = location_find(j, &k, h);
        if (id) {
                *ret = id;
                return 0;
        }
        *budget += LOOKUP_COST;
        r = frame_name_resolve(j->sym, p, &f);
        if (r < 0)
                return r;
        j->n_unsymbolized += !f.res.symbolized;
        if (f.kind == FRAME_PYTHON || f.kind == FRAME_RUNTIME)
                if (f.kind == FRAME_PYTHON || f.kind == FRAME_RUNTIME)
                        return location_add(j, &k, h, 0, &f.res, ret);
        /* JIT code named from a perf map: the mapping is that file, as in perf report. */
        if (f.kind == FRAME_USER && f.res.source_file) {
                int64_t idx = intern(j, f.res.source_file);
                if (idx < 0)
                        return -ENOMEM;
                j->mappings[mid - 1]->filename = idx;
        }
        if (f.left_unnamed) {
                j->n_left_unnamed++;
                f.res = (SymResult){};
        }
        return location_add(j, &k, h, f.address, &f.res, ret);
}

/* Index of the interned label key=value: value is a string (str >= 0, an index into the string
 * table) or a number (str < 0). A number carries a unit, the key's name (what pprof assumes when
 * none is given): a label with neither str nor num_unit and num 0 (pid 0) would read as absent. */
/* The label (key_str, str or num) interned; a numeric label's unit is its key. */
static int64_t label_ref_str(PprofJob *j, int64_t key_str, int64_t str, int64_t num)
{
        Perftools__Profiles__Label *l;
        uint64_t kv[3];
        uint64_t h;
        size_t slot;
        uint32_t id;

        kv[0] = (uint64_t)key_str;
        kv[1] = (uint64_t)str;
        kv[2] = str < 0 ? (uint64_t)num : 0;
        h = hash_u64s(kv, 3);
        slot = h;
        while ((id = id_index_next(&j->label_index, h, &slot))) {
                const Perftools__Profiles__Label *e = j->labels[id - 1];
                if (e->key == (int64_t)kv[0] && (str >= 0 ? e->str == str : e->str == 0 && e->num == num))
                        return id - 1;
        }
        if (!grow((void **)&j->labels, &j->cap_labels, j->n_labels + 1, sizeof(*j->labels)))
                return -ENOMEM;
        l = malloc(sizeof(*l));
        if (!l)
                return -ENOMEM;
        perftools__profiles__label__init(l);
        l->key = (int64_t)kv[0];
        if (str >= 0)
                l->str = str;
        else {
                l->num = num;
                l->num_unit = key_str;
        }
        j->labels[j->n_labels++] = l;
        if (id_index_insert(&j->label_index, h, (uint32_t)j->n_labels) < 0)
                return -ENOMEM;
        return (int64_t)j->n_labels - 1;
}

static int64_t label_ref(PprofJob *j, Label key, int64_t str, int64_t num)
{
        return label_ref_str(j, j->label_keys[key], str, num);
}

static int add_sample(PprofJob *j, const AggSample *s, unsigned *budget)
{
        Perftools__Profiles__Sample *out;
        size_t n = 0, need, n_labels = 0;
        int64_t label_idx[_LABEL_MAX + 1]; /* + state= of off-CPU samples */
        const Process *p;
        uint64_t id;
        int r;

        need = (s->kernel ? s->kernel->n : 0) + (s->user ? s->user->n : 0) + 2;
        if (!grow((void **)&j->loc_scratch, &j->cap_loc_scratch, need, sizeof(uint64_t)))
                return -ENOMEM;

        if (s->kernel)
                for (uint32_t i = 0; i < s->kernel->n; i++) {
                        r = kernel_location(j, s->kernel, i, budget, &id);
                        if (r < 0)
                                return r;
                        j->loc_scratch[n++] = id;
                }
        if (s->user) {
                char marker[96];

                p = frame_names_process(j->procs, (pid_t)s->pid);
                for (uint32_t i = 0; i < s->user->n; i++) {
                        r = user_location(j, p, (pid_t)s->pid, s->user, i, budget, &id);
                        if (r < 0)
                                return r;
                        j->loc_scratch[n++] = id;
                }
                if (stack_marker(s->user, marker, sizeof(marker))) {
                        r = marker_location(j, marker, &id);
                        if (r < 0)
                                return r;
                        j->loc_scratch[n++] = id;
                }
        }
        *budget += n;
        j->n_frames += n;

        for (Label l = 0; l < _LABEL_MAX; l++) {
                const char *v = NULL;
                int64_t num = 0, idx;
                if (!j->options.labels.enabled[l])
                        continue;
                switch (l) {
                case LABEL_COMM:
                        v = s->comm;
                        break;
                case LABEL_PID:
                        num = s->pid;
                        break;
                case LABEL_THREAD_ID:
                        num = s->tid;
                        break;
                case LABEL_THREAD_NAME:
                        v = s->thread_comm;
                        break;
                case LABEL_UNIT:
                case LABEL_CONTAINER_ID:
                        /* Hook for the cgroup resolver; without one these labels are omitted. */
                        if (j->options.cgroup_label)
                                v = j->options.cgroup_label(j->options.cgroup_userdata, l, s->cgroup_id);
                        break;
                default:
                        break;
                }
                if (label_is_numeric(l))
                        idx = label_ref(j, l, -1, num);
                else if (!v || !*v)
                        continue;
                else {
                        int64_t str = intern(j, v);
                        idx = str < 0 ? str : label_ref(j, l, str, 0);
                }
                if (idx < 0)
                        return (int)idx;
                label_idx[n_labels++] = idx;
        }

        if (j->window->off_cpu) {
                /* Always there: waits and preemption are different questions. */
                int64_t idx = label_ref_str(
                        j, j->str_state,
                        s->off_cpu_state == PROFD_OFFCPU_PREEMPTED ? j->str_preempted : j->str_blocked, 0);
                if (idx < 0)
                        return (int)idx;
                label_idx[n_labels++] = idx;
        }

        /* One block: the sample, its location ids, its two values, its label pointers. */
        out = malloc(sizeof(*out) + n * sizeof(uint64_t) + 2 * sizeof(int64_t) +
                     n_labels * sizeof(Perftools__Profiles__Label *));
        if (!out)
                return -ENOMEM;
        perftools__profiles__sample__init(out);
        out->location_id = (uint64_t *)(out + 1);
        memcpy(out->location_id, j->loc_scratch, n * sizeof(uint64_t));
        out->n_location_id = n;
        out->value = (int64_t *)(out->location_id + n);
        out->value[0] = (int64_t)s->count;
        out->value[1] = j->window->off_cpu ? (int64_t)s->off_cpu_ns : (int64_t)s->count * j->period;
        out->n_value = 2;
        out->label = (Perftools__Profiles__Label **)(out->value + 2);
        for (size_t i = 0; i < n_labels; i++)
                out->label[i] = j->labels[label_idx[i]];
        out->n_label = n_labels;
        j->samples[j->n_samples++] = out;
        return 0;
}

int pprof_job_new(ProfileWindow *w, Symbolizer *sym, ProcessTable *procs, const PprofOptions *o,
                  PprofJob **ret)
{
        _cleanup_(pprof_job_freep) PprofJob *j = NULL;

        j = calloc(1, sizeof(*j));
        if (!j) {
                profile_window_free(w);
                return -ENOMEM;
        }
        j->window = w;
        j->sym = sym;
        j->procs = procs;
        j->kernel_addresses = symbolizer_kernel_addresses_shown(sym);
        if (o)
                j->options = *o;
        /* Off-CPU: each sample's value is its own estimated time; there is no fixed period. */
        j->period = w->frequency_hz > 0 && !w->off_cpu ? (int64_t)(NSEC_PER_SEC / w->frequency_hz) : 0;
        j->samples = calloc(w->n_samples ? w->n_samples : 1, sizeof(*j->samples));
        if (!j->samples)
                return -ENOMEM;
        if (intern(j, "") != 0)
                return -ENOMEM;
        j->str_samples = intern(j, "samples");
        j->str_count = intern(j, "count");
        j->str_cpu = intern(j, w->off_cpu ? "off_cpu" : "cpu");
        j->str_state = intern(j, "state");
        j->str_blocked = intern(j, "blocked");
        j->str_preempted = intern(j, "preempted");
        j->str_nanoseconds = intern(j, "nanoseconds");
        for (Label l = 0; l < _LABEL_MAX; l++)
                j->label_keys[l] = intern(j, label_to_string(l));
        if (j->str_samples < 0 || j->str_count < 0 || j->str_cpu < 0 || j->str_nanoseconds < 0 ||
            j->str_state < 0 || j->str_blocked < 0 || j->str_preempted < 0)
                return -ENOMEM;
        for (Label l = 0; l < _LABEL_MAX; l++)
                if (j->label_keys[l] < 0)
                        return -ENOMEM;
        *ret = TAKE_PTR(j);
        return 0;
}

int pprof_job_step(PprofJob *j)
{
        unsigned budget = 0;
        int r;

        switch (j->phase) {
        case PHASE_SAMPLES:
                uint64_t deadline = now_ns(CLOCK_MONOTONIC) + STEP_MAX_NS;
                while (j->next_sample < j->window->n_samples && budget < STEP_BUDGET) {
                        r = add_sample(j, &j->window->samples[j->next_sample], &budget);
                        if (r < 0)
                                return r;
                        j->next_sample++;
                        if (now_ns(CLOCK_MONOTONIC) > deadline)
                                break;
                }
                if (j->next_sample == j->window->n_samples) {
                        j->phase = PHASE_PACK;
                        log_debug("pprof: %zu samples, %zu locations, %zu functions, %zu mappings, %zu "
                                  "strings, "
                                  "%" PRIu64 " frames (%" PRIu64 " unsymbolized, %" PRIu64
                                  " locations left to downstream symbolizers)",
                                  j->n_samples, j->n_locations, j->n_functions, j->n_mappings, j->n_strings,
                                  j->n_frames, j->n_unsymbolized, j->n_left_unnamed);
                }
                return 0;
        case PHASE_PACK:
                r = pprof_pack_step(&j->pack, &(const PprofTables){
                                                      .time_nanos = (int64_t)j->window->start_ns,
                                                      .duration_nanos = (int64_t)(j->window->end_ns -
                                                                                  j->window->start_ns),
                                                      .period = j->period,
                                                      .str_samples = j->str_samples,
                                                      .str_count = j->str_count,
                                                      .str_cpu = j->str_cpu,
                                                      .str_nanoseconds = j->str_nanoseconds,
                                                      .samples = j->samples,
                                                      .n_samples = j->n_samples,
                                                      .mappings = j->mappings,
                                                      .n_mappings = j->n_mappings,
                                                      .locations = j->locations,
                                                      .n_locations = j->n_locations,
                                                      .functions = j->functions,
                                                      .n_functions = j->n_functions,
                                                      .strings = j->strings,
                                                      .n_strings = j->n_strings,
                                              });
                if (r <= 0)
                        return r;
                j->phase = PHASE_DONE;
                return 1;
        case PHASE_DONE:
                return 1;
        }
        return -EINVAL;
}

int pprof_job_take_result(PprofJob *j, void **ret_data, size_t *ret_size)
{
        if (j->phase != PHASE_DONE)
                return -EBUSY;
        return pprof_pack_take(&j->pack, ret_data, ret_size);
}

PprofJob *pprof_job_free(PprofJob *j)
{
        if (!j)
                return NULL;
        profile_window_free(j->window);
        for (size_t i = 0; i < j->n_strings; i++)
                free(j->strings[i]);
        free(j->strings);
        id_index_done(&j->string_index);
        for (size_t i = 0; i < j->n_mappings; i++)
                free(j->mappings[i]);
        free(j->mappings);
        free(j->map_keys);
        id_index_done(&j->mapping_index);
        for (size_t i = 0; i < j->n_locations; i++)
                free(j->locations[i]);
        free(j->locations);
        free(j->loc_keys);
        id_index_done(&j->location_index);
        for (size_t i = 0; i < j->n_functions; i++)
                free(j->functions[i]);
        free(j->functions);
        free(j->func_keys);
        id_index_done(&j->function_index);
        for (size_t i = 0; i < j->n_samples; i++)
                free(j->samples[i]);
        free(j->samples);
        for (size_t i = 0; i < j->n_labels; i++)
                free(j->labels[i]);
        free(j->labels);
        id_index_done(&j->label_index);
        free(j->loc_scratch);
        pprof_pack_done(&j->pack);
        return mfree(j);
}

int pprof_encode_window(ProfileWindow *w, Symbolizer *sym, ProcessTable *procs, const PprofOptions *o,
                        void **ret_data, size_t *ret_size)
{
        _cleanup_(pprof_job_freep) PprofJob *j = NULL;
        int r;

        r = pprof_job_new(w, sym, procs, o, &j);
        if (r < 0)
                return r;
        do
                r = pprof_job_step(j);
        while (r == 0);
        if (r < 0)
                return r;
        return pprof_job_take_result(j, ret_data, ret_size);
}
