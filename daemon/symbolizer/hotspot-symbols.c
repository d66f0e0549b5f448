/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "runtimes/hotspot-frames.h"
#include "runtimes/hotspot-method.h"
#include "runtimes/hotspot-perfdata.h"
#include "runtimes/hotspot-scopes.h"
#include "runtimes/remote-memory.h"
#include "symbolizer/hotspot-symbols.h"
#include "util/id-ring.h"
#include "util/log.h"
#include "util/memory-owners.h"
#include "util/metrics-writer.h"
#include "util/time-util.h"

/* One Java method of a frame, named. */
typedef struct Named {
        char *name;        /* "java.util.zip.Deflater.deflate" */
        char *system_name; /* with the signature: "java.util.zip.Deflater.deflate([BIII)I" */
        char *file;        /* "java/util/zip/Deflater.java"; NULL: none */
        uint32_t line;
} Named;

/* One frame of one process, as read: an interpreted frame is one method; a compiled one the
 * methods inlined at its pc, innermost first, the compiled method last. */
typedef struct Entry {
        pid_t pid;
        uint64_t start_time;
        uint64_t frame; /* the stack entry: method and bci, or a compiled frame's pc */
        uint64_t seq;   /* insertion order */
        size_t n;       /* 0: could not be read (its frames stay raw, never bound) */
        Named *named;
        uint64_t id;      /* in the id ring; what bound frames carry (hotspot-frames.h) if n > 0 */
        uint64_t used_ns; /* CLOCK_MONOTONIC of its read or the last stack bound to it */
        bool indexed;     /* still found by (pid, start time, frame): its JVM unloaded no class since */
        struct Entry *next;
} Entry;

/* Why a Java frame of a drained stack stays unnamed (its method's address kept), besides its read
 * failing (ReadResult, CompiledResult). */
typedef enum UnnamedReason {
        UNNAMED_CLASSES_UNLOADED,  /* its JVM unloaded classes since its generation's cut, or while
                                    * it was named: its method's memory may be another's now */
        UNNAMED_NO_UNLOAD_COUNTER, /* interpreted, and its JVM has no java.cls.unloadedClasses
                                    * (-XX:-UsePerfData): an unloading could not be told */
        UNNAMED_FULL,              /* no memory to keep its names */
        UNNAMED_NO_PROCESS,        /* the process is no JVM profd describes (any more) */
        _UNNAMED_MAX,
} UnnamedReason;

static const char *const unnamed_names[_UNNAMED_MAX] = {
        [UNNAMED_CLASSES_UNLOADED] = "classes_unloaded",
        [UNNAMED_NO_UNLOAD_COUNTER] = "no_unload_counter",
        [UNNAMED_FULL] = "no_memory",
        [UNNAMED_NO_PROCESS] = "no_process",
};

/* A JVM's class-unloading epoch: its perf counter java.cls.unloadedClasses, which HotSpot raises
 * when it unloads a class and before the class's metaspace is freed for other classes.
 *
 * A drain's samples were taken from the cut that began their generation on, so its Java frames
 * are named only if the counter is the same at the drain as it was at that cut: read at each cut
 * (hotspot_symbols_cut()), before the new generation's first sample. Not the counter at the end of
 * the previous drain: that drain ran after the cut, while the new generation took samples, and an
 * unloading in between named their freed methods after the classes that took their memory. */
typedef struct Jvm {
        pid_t pid;
        uint64_t start_time;
        uint64_t counter; /* its address in the process; 0: none (yet) */
        uint32_t lookups; /* of the counter in the perf data */
        bool have_base;   /* base: the counter at the cut that began the generation drained next */
        bool have_at_cut; /* at_cut: the counter at the last cut (the next generation's base) */
        bool seen;        /* had stacks in the last drain: its counter is read at the next cut */
        bool checked;     /* seen in this drain: begin (v0, unstable) set */
        bool unstable;    /* this drain's Java frames stay unnamed */
        bool have_cache;  /* cache_epoch: the counter the indexed entries were read under */
        uint64_t base, at_cut, v0, cache_epoch;
        struct Jvm *next;
} Jvm;

#define JVM_BUCKETS 256
/* JVMs whose epoch is kept (PROFD_HS_MAX_PROCS are walked at most); past it all are forgotten,
 * and each JVM's next drain counts as one after an unloading if it ever unloaded a class. */
#define HOTSPOT_JVMS_MAX 4096
/* Lookups of a JVM's unloading counter (one read of its perf data each, at most once a drain):
 * its counters are created while it starts. */
#define PERFDATA_LOOKUPS_MAX 8

#define BUCKETS 16384
/* Entries not used for this long past the history are retired: looked for at most this often. */
#define IDLE_CHECK_NS (10 * NSEC_PER_SEC)
/* A drained stack reaches the history within a drain or two: margin on top of the history's span. */
#define IDLE_MARGIN_NS (60 * NSEC_PER_SEC)

typedef enum ReadResult {
        READ_OK,
        READ_GONE,       /* the process exited before its frames were read */
        READ_UNREADABLE, /* -EFAULT and other read errors */
        READ_STALE,      /* not its class's method: unloaded or moved, never named */
        READ_BAD,        /* not a method */
        _READ_MAX,
} ReadResult;

static const char *const read_names[_READ_MAX] = {
        [READ_OK] = "ok",       [READ_GONE] = "gone",      [READ_UNREADABLE] = "unreadable",
        [READ_STALE] = "stale", [READ_BAD] = "bad_method",
};

/* Compiled frames read for their inlined methods (hotspot-scopes.h), by result. */
typedef enum CompiledResult {
        COMPILED_INLINED,     /* every method at the pc named, with lines */
        COMPILED_APPROXIMATE, /* frame 0: named by the first PcDesc after its pc */
        COMPILED_METHOD_ONLY, /* no usable PcDesc or scope: the compiled method alone, no line */
        COMPILED_STALE,       /* another nmethod at the pc now (compile id): not named */
        COMPILED_NO_NMETHOD,  /* no nmethod at the pc any more: not named */
        COMPILED_UNREADABLE,  /* its memory could not be read, or made no sense: not named */
        _COMPILED_MAX,
} CompiledResult;

static const char *const compiled_names[_COMPILED_MAX] = {
        [COMPILED_INLINED] = "inlined",         [COMPILED_APPROXIMATE] = "approximate",
        [COMPILED_METHOD_ONLY] = "method_only", [COMPILED_STALE] = "stale",
        [COMPILED_NO_NMETHOD] = "no_nmethod",   [COMPILED_UNREADABLE] = "unreadable",
};

/* A blob of a JVM's code that is no Java method (a stub, an adapter, the interpreter), as read
 * at a drain: pcs inside it are named after it. */
typedef struct Stub {
        pid_t pid;
        uint64_t start_time;
        uint64_t begin, end; /* [begin, end): the blob */
        uint64_t seq;
        char *name; /* "[jvm] StubRoutines [1]"; NULL: none could be read at this pc */
        struct Stub *next;
} Stub;

#define STUB_BUCKETS 1024
/* Stub blobs kept, at most (a JVM has a few hundred); past it the oldest half goes. */
#define HOTSPOT_STUBS_MAX 8192
/* Longest blob name kept. */
#define STUB_NAME_MAX 96

struct HotspotSymbols {
        HotspotProcs *procs;
        Entry *buckets[BUCKETS];
        /* Every entry, by id, oldest first: bound frames carry the id; HOTSPOT_SYMBOLS_MAX kept. */
        IdRing *ids;
        uint64_t history_ns;   /* how long stored samples keep their frames; 0: unknown (no retiring) */
        uint64_t next_idle_ns; /* next look for idle entries */
        size_t limit_bytes;    /* the memory budget's bound (HOTSPOT_SYMBOLS_MAX_BYTES when not lowered) */
        uint64_t idle, over_bound; /* entries retired: idle past the history; oldest over limit_bytes */
        Jvm *jvms[JVM_BUCKETS];
        size_t n_jvms;
        uint64_t unnamed[_UNNAMED_MAX];
        uint64_t unloads_seen; /* drains that found a JVM's classes unloaded */
        Stub *stubs[STUB_BUCKETS];
        size_t n_stubs;
        uint64_t stub_seq, stub_reads, stub_failed, stub_evicted;
        size_t n, bytes;
        uint64_t seq, evicted;
        uint64_t reads[_READ_MAX];
        uint64_t compiled[_COMPILED_MAX];
        char placeholder[64];
};

int hotspot_symbols_new(HotspotProcs *procs, HotspotSymbols **ret)
{
        HotspotSymbols *hs = calloc(1, sizeof(*hs));

        if (!hs)
                return -ENOMEM;
        hs->procs = procs;
        hs->limit_bytes = HOTSPOT_SYMBOLS_MAX_BYTES;
        /* PROFD_HOTSPOT_NAMES_MAX (tests: the bound reached soon) keeps fewer frames. */
        const char *max = getenv("PROFD_HOTSPOT_NAMES_MAX");
        if (id_ring_new(max && strtoul(max, NULL, 10) > 0 ? strtoul(max, NULL, 10) : HOTSPOT_SYMBOLS_MAX,
                        HOTSPOT_FRAME_ID_MASK, &hs->ids) < 0) {
                free(hs);
                return -ENOMEM;
        }
        *ret = hs;
        return 0;
}

void hotspot_symbols_set_history(HotspotSymbols *hs, uint64_t history_ns)
{
        if (hs)
                hs->history_ns = history_ns;
}

static size_t named_bytes(const Named *n)
{
        return memory_block_bytes(n->name) + memory_block_bytes(n->system_name) +
               memory_block_bytes(n->file);
}

static void entry_free(HotspotSymbols *hs, Entry *e)
{
        hs->n--;
        hs->bytes -= memory_block_bytes(e) + memory_block_bytes(e->named);
        for (size_t i = 0; i < e->n; i++) {
                hs->bytes -= named_bytes(&e->named[i]);
                free(e->named[i].name);
                free(e->named[i].system_name);
                free(e->named[i].file);
        }
        free(e->named);
        free(e);
}

static void stub_free(HotspotSymbols *hs, Stub *st)
{
        hs->n_stubs--;
        hs->bytes -= memory_block_bytes(st) + memory_block_bytes(st->name);
        free(st->name);
        free(st);
}

static void jvms_clear(HotspotSymbols *hs)
{
        for (size_t b = 0; b < JVM_BUCKETS; b++)
                for (Jvm *j = hs->jvms[b], *n; j; j = n) {
                        n = j->next;
                        free(j);
                }
        memset(hs->jvms, 0, sizeof(hs->jvms));
        hs->n_jvms = 0;
}

HotspotSymbols *hotspot_symbols_free(HotspotSymbols *hs)
{
        if (!hs)
                return NULL;
        for (size_t b = 0; b < STUB_BUCKETS; b++)
                for (Stub *st = hs->stubs[b], *n; st; st = n) {
                        n = st->next;
                        stub_free(hs, st);
                }
        for (Entry *e; hs->ids && (e = id_ring_pop_oldest(hs->ids, NULL));)
                entry_free(hs, e);
        id_ring_free(hs->ids);
        jvms_clear(hs);
        free(hs);
        return NULL;
}

static size_t bucket(pid_t pid, uint64_t frame)
{
        return (size_t)(((uint64_t)(uint32_t)pid * 0x9e3779b97f4a7c15ULL ^ frame) * 0xbf58476d1ce4e5b9ULL >>
                        50) %
               BUCKETS;
}

static Entry *find(const HotspotSymbols *hs, pid_t pid, uint64_t start_time, uint64_t frame)
{
        for (Entry *e = hs->buckets[bucket(pid, frame)]; e; e = e->next)
                if (e->pid == pid && e->frame == frame && e->start_time == start_time)
                        return e;
        return NULL;
}

/* The JVM (pid, start_time) unloaded classes: its frames are read again when seen. Named entries
 * stay for the frames bound to them; the others go. */
static void retire(HotspotSymbols *hs, pid_t pid, uint64_t start_time)
{
        for (size_t b = 0; b < BUCKETS; b++)
                for (Entry **s = &hs->buckets[b]; *s;) {
                        Entry *e = *s;

                        if (e->pid != pid || e->start_time != start_time) {
                                s = &e->next;
                                continue;
                        }
                        *s = e->next;
                        e->next = NULL;
                        e->indexed = false;
                        hs->evicted++;
                        if (e->n == 0 && id_ring_forget(hs->ids, e->id))
                                entry_free(hs, e);
                }
}

/* Forgets e (out of the id ring already): its id names nothing from now on. */
static void drop(HotspotSymbols *hs, Entry *e)
{
        if (e->indexed)
                for (Entry **s = &hs->buckets[bucket(e->pid, e->frame)]; *s; s = &(*s)->next)
                        if (*s == e) { /* bounded by the bucket's length */
                                *s = e->next;
                                break;
                        }
        entry_free(hs, e);
}

/* Oldest first while over limit_bytes (never the newest: it is being bound). */
static uint64_t shrink(HotspotSymbols *hs)
{
        uint64_t n = 0;
        Entry *e;

        while (hs->bytes > hs->limit_bytes && id_ring_count(hs->ids) > 1 &&
               (e = id_ring_pop_oldest(hs->ids, NULL))) {
                drop(hs, e);
                n++;
        }
        hs->over_bound += n;
        return n;
}

typedef struct IdleScan {
        HotspotSymbols *hs;
        uint64_t before; /* used_ns under it: no stored sample can carry its id */
        uint64_t n;
} IdleScan;

static void retire_if_idle(void *p, uint64_t id, void *userdata)
{
        IdleScan *sc = userdata;
        Entry *e = p;

        if (e->used_ns >= sc->before || !id_ring_forget(sc->hs->ids, id))
                return;
        drop(sc->hs, e);
        sc->n++;
}

/* Entries no stack was bound to for longer than the history keeps samples are named by none of
 * them: they go (read again if their frame comes back), so the table follows what the history
 * holds rather than growing to its bound over hours. */
static uint64_t retire_idle(HotspotSymbols *hs, uint64_t now)
{
        IdleScan sc = {.hs = hs};

        if (hs->history_ns == 0 || now < hs->history_ns + IDLE_MARGIN_NS)
                return 0;
        sc.before = now - hs->history_ns - IDLE_MARGIN_NS;
        id_ring_foreach(hs->ids, retire_if_idle, &sc);
        hs->idle += sc.n;
        return sc.n;
}

static int read_remote(void *userdata, uint64_t addr, void *buf, size_t n)
{
        return remote_memory_read(userdata, addr, buf, n);
}

/* "java.util.zip.Deflater" + "Deflater.java" -> "java/util/zip/Deflater.java". */
static char *source_path(const char *klass, const char *file)
{
        const char *dot = strrchr(klass, '.');
        size_t dir = dot ? (size_t)(dot - klass) : 0;
        char *s;

        if (!file[0])
                return NULL;
        s = malloc(dir + 1 + strlen(file) + 1);
        if (!s)
                return NULL;
        memcpy(s, klass, dir);
        for (size_t i = 0; i < dir; i++)
                if (s[i] == '.')
                        s[i] = '/';
        if (dir)
                s[dir++] = '/';
        strcpy(s + dir, file);
        return s;
}

/* Names method at bci (UINT32_MAX: no line) into *ret. */
static int name_method(const HotspotProcess *hp, RemoteMemory *mem, uint64_t method, uint32_t bci,
                       Named *ret)
{
        _cleanup_free_ HotspotMethodInfo *info = malloc(sizeof(*info));
        size_t n;
        int r;

        if (!info)
                return -ENOMEM;
        r = hotspot_method_read(&hp->offsets, read_remote, mem, method, bci, info);
        if (r < 0)
                return r;
        n = strlen(info->klass) + 1 + strlen(info->name) + 1;
        *ret = (Named){.name = malloc(n), .system_name = malloc(n + strlen(info->signature))};
        if (!ret->name || !ret->system_name) {
                free(ret->name);
                free(ret->system_name);
                return -ENOMEM;
        }
        snprintf(ret->name, n, "%s.%s", info->klass, info->name);
        snprintf(ret->system_name, n + strlen(info->signature), "%s.%s%s", info->klass, info->name,
                 info->signature);
        ret->file = source_path(info->klass, info->file);
        ret->line = info->line;
        return 0;
}

static void named_clear(Named *n)
{
        free(n->name);
        free(n->system_name);
        free(n->file);
        *n = (Named){};
}

/* A compiled frame (its pc: hotspot_frame_is_compiled_pc()): the methods inlined at its pc,
 * each named with its line, and the compiled method; the compiled method alone (no line) when
 * the pc's scopes cannot be read for sure; nothing when the nmethod at the pc is not the one
 * sampled. Returns the number of methods named into e. */
static int read_compiled(HotspotSymbols *hs, const HotspotProcess *hp, RemoteMemory *mem, Entry *e)
{
        _cleanup_free_ HotspotScopes *sc = malloc(sizeof(*sc));
        CompiledResult res;
        int r;

        if (!sc)
                return -ENOMEM;
        r = hotspot_scopes_read(&hp->offsets, &hp->code, read_remote, mem, e->frame, sc);
        if (r >= 0) {
                e->named = calloc(sc->n, sizeof(Named));
                if (!e->named)
                        return -ENOMEM;
                for (size_t i = 0; i < sc->n; i++) {
                        r = name_method(hp, mem, sc->scopes[i].method, sc->scopes[i].bci, &e->named[i]);
                        if (r < 0)
                                break;
                        e->n++;
                }
                if (r >= 0) {
                        hs->compiled[sc->approximate ? COMPILED_APPROXIMATE : COMPILED_INLINED]++;
                        return 0;
                }
                /* A method that is not its class's: none of the chain is taken. */
                for (size_t i = 0; i < e->n; i++)
                        named_clear(&e->named[i]);
                e->n = 0;
                free(e->named);
                e->named = NULL;
                if (r == -ESRCH)
                        return r;
        }
        log_debug_errno(r, "pid %d: the methods at compiled pc 0x%" PRIx64 " cannot be read: %m",
                        (int)hp->pid,
                        (uint64_t)(hp->code.code_start + (e->frame & ((1ULL << PROFD_HS_PC_BITS) - 1))));
        res = r == -ESTALE   ? COMPILED_STALE
              : r == -ENOENT ? COMPILED_NO_NMETHOD
              : r == -ESRCH  ? COMPILED_UNREADABLE
                             : COMPILED_METHOD_ONLY;
        if (res == COMPILED_METHOD_ONLY && sc->nmethod_method) {
                e->named = calloc(1, sizeof(Named));
                if (!e->named)
                        return -ENOMEM;
                r = name_method(hp, mem, sc->nmethod_method, UINT32_MAX, &e->named[0]);
                if (r >= 0)
                        e->n = 1;
        } else if (res == COMPILED_METHOD_ONLY) {
                res = COMPILED_UNREADABLE;
        }
        hs->compiled[res]++;
        return e->n ? 0 : r < 0 ? r : -EBADMSG;
}

/* Reads one frame of the live JVM hp into a new entry. */
static Entry *read_frame(HotspotSymbols *hs, const HotspotProcess *hp, RemoteMemory *mem, uint64_t frame)
{
        uint32_t bci = hotspot_frame_bci(frame);
        Entry *e;
        void *gone;
        int r;

        e = calloc(1, sizeof(*e));
        if (!e)
                return NULL;
        *e = (Entry){.pid = hp->pid,
                     .start_time = hp->start_time,
                     .frame = frame,
                     .seq = hs->seq++,
                     .used_ns = now_ns(CLOCK_MONOTONIC)};
        if (hotspot_frame_is_compiled_pc(frame, hp->code.blob_compile_id)) {
                r = read_compiled(hs, hp, mem, e);
        } else {
                e->named = calloc(1, sizeof(Named));
                r = e->named ? name_method(hp, mem, hotspot_frame_method(frame),
                                           bci == PROFD_HS_BCI_NONE ? UINT32_MAX : bci, &e->named[0])
                             : -ENOMEM;
                if (r >= 0)
                        e->n = 1;
        }
        for (size_t i = 0; i < e->n; i++)
                hs->bytes += named_bytes(&e->named[i]);
        hs->bytes += memory_block_bytes(e->named);
        hs->reads[r >= 0          ? READ_OK
                  : r == -ESRCH   ? READ_GONE
                  : r == -ESTALE  ? READ_STALE
                  : r == -EBADMSG ? READ_BAD
                                  : READ_UNREADABLE]++;
        hs->n++;
        hs->bytes += memory_block_bytes(e);
        e->id = id_ring_push(hs->ids, e, &gone);
        if (gone) { /* HOTSPOT_SYMBOLS_MAX kept: the oldest goes */
                drop(hs, gone);
                hs->evicted++;
        }
        if (e->id == 0) { /* ids used up: its frames stay unnamed */
                entry_free(hs, e);
                return NULL;
        }
        e->next = hs->buckets[bucket(hp->pid, frame)];
        hs->buckets[bucket(hp->pid, frame)] = e;
        e->indexed = true;
        (void)shrink(hs);
        return e;
}

static Stub *find_stub(const HotspotSymbols *hs, pid_t pid, uint64_t start_time, uint64_t pc)
{
        for (Stub *st = hs->stubs[(unsigned)pid % STUB_BUCKETS]; st; st = st->next)
                if (st->pid == pid && st->start_time == start_time && pc >= st->begin && pc < st->end)
                        return st;
        return NULL;
}

/* Reads the blob holding pc (a native entry in hp's code cache) into a new stub entry. */
static void read_stub(HotspotSymbols *hs, const HotspotProcess *hp, RemoteMemory *mem, uint64_t pc)
{
        char name[STUB_NAME_MAX];
        uint64_t begin, end;
        Stub *st;
        int r;

        if (hs->n_stubs >= HOTSPOT_STUBS_MAX) {
                uint64_t seq = hs->stub_seq - HOTSPOT_STUBS_MAX / 2;

                for (size_t b = 0; b < STUB_BUCKETS; b++)
                        for (Stub **p = &hs->stubs[b]; *p;) {
                                Stub *o = *p;

                                if (o->seq < seq) {
                                        *p = o->next;
                                        hs->stub_evicted++;
                                        stub_free(hs, o);
                                } else {
                                        p = &o->next;
                                }
                        }
        }
        hs->stub_reads++;
        r = hotspot_blob_name(&hp->offsets, &hp->code, read_remote, mem, pc, &begin, &end, name,
                              sizeof(name));
        st = calloc(1, sizeof(*st));
        if (!st)
                return;
        if (r < 0) {
                /* Kept unnamed for this pc, so that it is not read again at every drain. */
                hs->stub_failed++;
                begin = pc;
                end = pc + 1;
        } else {
                /* pprof takes "(...)" for a C++ parameter list and drops it: "StubRoutines (1)"
                 * keeps its number as "StubRoutines [1]". */
                for (char *c = name; *c; c++)
                        *c = *c == '(' ? '[' : *c == ')' ? ']' : *c;
                if (asprintf(&st->name, "[jvm] %s", name) < 0) {
                        free(st);
                        return;
                }
        }
        st->pid = hp->pid;
        st->start_time = hp->start_time;
        st->begin = begin;
        st->end = end;
        st->seq = hs->stub_seq++;
        st->next = hs->stubs[(unsigned)hp->pid % STUB_BUCKETS];
        hs->stubs[(unsigned)hp->pid % STUB_BUCKETS] = st;
        hs->n_stubs++;
        hs->bytes += memory_block_bytes(st) + memory_block_bytes(st->name);
}

/* A native entry (an address) in hp's code cache: a stub, adapter or the interpreter's code. */
static bool in_code_cache(const HotspotProcess *hp, uint64_t f)
{
        return !(f >> 47) && hp->code.n_heaps && f >= hp->code.code_start && f < hp->code.code_end;
}

static Jvm *jvm_get(HotspotSymbols *hs, const HotspotProcess *hp)
{
        Jvm **head = &hs->jvms[(unsigned)hp->pid % JVM_BUCKETS];
        Jvm *j;

        for (j = *head; j; j = j->next)
                if (j->pid == hp->pid && j->start_time == hp->start_time)
                        return j;
        if (hs->n_jvms >= HOTSPOT_JVMS_MAX)
                jvms_clear(hs);
        j = calloc(1, sizeof(*j));
        if (!j)
                return NULL;
        *j = (Jvm){.pid = hp->pid, .start_time = hp->start_time, .next = *head};
        *head = j;
        hs->n_jvms++;
        return j;
}

static int read_counter(const Jvm *j, RemoteMemory *mem, uint64_t *ret)
{
        return remote_memory_read(mem, j->counter, ret, sizeof(*ret));
}

/* Finds j's unloading counter in its perf data, while the JVM has one and it may still appear. */
static void find_counter(Jvm *j, const HotspotProcess *hp, RemoteMemory *mem)
{
        uint64_t start = 0;
        int r;

        if (j->counter || j->lookups >= PERFDATA_LOOKUPS_MAX || hp->offsets.perf_memory_start == UINT64_MAX)
                return;
        j->lookups++;
        r = remote_memory_read(mem, hp->bias + hp->offsets.perf_memory_start, &start, sizeof(start));
        if (r >= 0 && start == 0) {
                j->lookups = PERFDATA_LOOKUPS_MAX; /* -XX:-UsePerfData */
                return;
        }
        if (r >= 0)
                r = hotspot_perfdata_find_long(read_remote, mem, start, "java.cls.unloadedClasses",
                                               &j->counter);
        if (r == -EBADMSG)
                j->lookups = PERFDATA_LOOKUPS_MAX;
        if (r < 0)
                log_debug_errno(r, "pid %d: no class unloading counter in the JVM's perf data (yet): %m",
                                (int)hp->pid);
}

/* j's first stack of this drain: whether its classes were unloaded since the cut that began the
 * generation drained (this drain's samples were all taken before now). */
static void begin_drain(HotspotSymbols *hs, Jvm *j, const HotspotProcess *hp, RemoteMemory *mem)
{
        j->checked = true;
        j->unstable = false;
        find_counter(j, hp, mem);
        if (!j->counter)
                return;
        if (read_counter(j, mem, &j->v0) < 0) {
                j->unstable = true;
                return;
        }
        /* Without the counter at the generation's cut (first seen, or no stacks in the previous
         * drain): only a JVM that never unloaded a class is sure to be the same since. */
        j->unstable = j->have_base ? j->v0 != j->base : j->v0 != 0;
        if (j->unstable)
                hs->unloads_seen++;
        if (!j->have_cache || j->cache_epoch != j->v0) {
                retire(hs, j->pid, j->start_time);
                j->cache_epoch = j->v0;
                j->have_cache = true;
        }
}

/* After the drain: names read under an epoch that ended go. */
static void end_drain(HotspotSymbols *hs)
{
        for (size_t b = 0; b < JVM_BUCKETS; b++)
                for (Jvm *j = hs->jvms[b]; j; j = j->next) {
                        _cleanup_(remote_memory_freep) RemoteMemory *mem = NULL;
                        uint64_t v;

                        j->seen = j->checked;
                        if (!j->checked)
                                continue;
                        j->checked = false;
                        if (!j->counter || remote_memory_open(j->pid, &mem) < 0 ||
                            read_counter(j, mem, &v) < 0)
                                continue;
                        if (v != j->cache_epoch) {
                                retire(hs, j->pid, j->start_time);
                                j->cache_epoch = v;
                        }
                }
        uint64_t now = now_ns(CLOCK_MONOTONIC);
        if (now >= hs->next_idle_ns) {
                (void)retire_idle(hs, now);
                hs->next_idle_ns = now + IDLE_CHECK_NS;
        }
}

void hotspot_symbols_cut(void *userdata)
{
        HotspotSymbols *hs = userdata;

        if (!hs)
                return;
        for (size_t b = 0; b < JVM_BUCKETS; b++)
                for (Jvm *j = hs->jvms[b]; j; j = j->next) {
                        _cleanup_(remote_memory_freep) RemoteMemory *mem = NULL;

                        /* The generation that ends now began at the previous cut. */
                        j->base = j->at_cut;
                        j->have_base = j->have_at_cut;
                        /* Only JVMs with stacks in the last drain (bounded by the JVMs profd
                         * describes): another's next drain counts as its first. */
                        j->have_at_cut = j->seen && j->counter && remote_memory_open(j->pid, &mem) >= 0 &&
                                         read_counter(j, mem, &j->at_cut) >= 0;
                }
}

static uint64_t stack_salt(const uint64_t *frames, size_t n)
{
        uint64_t h = 0;

        for (size_t i = 0; i < n; i++)
                if (hotspot_frame_is(frames[i]))
                        h = (h ^ frames[i] ^ i) * 0x100000001b3ULL;
        return h;
}

uint64_t hotspot_symbols_name_stack(void *userdata, uint32_t pid, uint32_t flags, uint64_t *frames,
                                    uint8_t *exact, size_t *ret_n)
{
        size_t n = *ret_n;
        HotspotSymbols *hs = userdata;
        _cleanup_(remote_memory_freep) RemoteMemory *mem = NULL;
        const HotspotProcess *hp;
        bool any = false, read = false;
        uint64_t now;
        Jvm *j;

        for (size_t i = 0; i < n && !any; i++)
                any = hotspot_frame_is(frames[i]) && !hotspot_frame_bound(frames[i]);
        if (!any)
                return 0;
        hp = hotspot_procs_get(hs->procs, (pid_t)pid);
        j = hp ? jvm_get(hs, hp) : NULL;
        if (!j || remote_memory_open(hp->pid, &mem) < 0) {
                for (size_t i = 0; i < n; i++)
                        if (hotspot_frame_is(frames[i]) && !hotspot_frame_bound(frames[i]))
                                hs->unnamed[UNNAMED_NO_PROCESS]++;
                return stack_salt(frames, n);
        }
        if (!j->checked)
                begin_drain(hs, j, hp, mem);
        now = now_ns(CLOCK_MONOTONIC);
        /* First the frames not read under this epoch yet, then whether an unloading came
         * meanwhile, then the frames bound to what was read. */
        for (size_t i = 0; i < n && !j->unstable; i++) {
                uint64_t f = frames[i];

                if (!hotspot_frame_is(f) || hotspot_frame_bound(f) ||
                    (!j->counter && !hotspot_frame_is_compiled_pc(f, hp->code.blob_compile_id)) ||
                    find(hs, hp->pid, hp->start_time, f))
                        continue;
                (void)read_frame(hs, hp, mem, f);
                read = true;
        }
        if (read && j->counter) {
                uint64_t v1;

                if (read_counter(j, mem, &v1) < 0 || v1 != j->v0) {
                        j->unstable = true;
                        hs->unloads_seen++;
                        retire(hs, j->pid, j->start_time);
                        j->have_cache = false;
                }
        }
        for (size_t i = 0; i < n; i++) {
                uint64_t f = frames[i];
                Entry *e;

                if (!hotspot_frame_is(f) || hotspot_frame_bound(f))
                        continue;
                if (j->unstable) {
                        hs->unnamed[UNNAMED_CLASSES_UNLOADED]++;
                        continue;
                }
                if (!j->counter && !hotspot_frame_is_compiled_pc(f, hp->code.blob_compile_id)) {
                        hs->unnamed[UNNAMED_NO_UNLOAD_COUNTER]++;
                        continue;
                }
                e = find(hs, hp->pid, hp->start_time, f);
                if (!e) {
                        hs->unnamed[UNNAMED_FULL]++;
                        continue;
                }
                if (e->n > 0) {
                        frames[i] = PROFD_FRAME_HOTSPOT | HOTSPOT_FRAME_BOUND | e->id;
                        e->used_ns = now;
                }
        }
        return stack_salt(frames, n);
}

void hotspot_symbols_note(HotspotSymbols *hs, const SampleRecord *records, size_t n)
{
        if (!hs)
                return;
        for (size_t k = 0; k < n; k++) {
                const SampleRecord *rec = &records[k];
                _cleanup_(remote_memory_freep) RemoteMemory *mem = NULL;
                const HotspotProcess *hp = NULL;
                bool looked_up = false;

                for (uint32_t i = 0; i < rec->n_user; i++) {
                        uint64_t f = rec->user_frames[i];
                        bool exact = rec->user_exact ? rec->user_exact[i] : i == 0;

                        if (!looked_up && (hotspot_frame_is(f) || !(f >> 47))) {
                                hp = hotspot_procs_get(hs->procs, (pid_t)rec->pid);
                                looked_up = true;
                        }
                        if (!hp) {
                                if (looked_up)
                                        break;
                                continue;
                        }
                        if (!hotspot_frame_is(f)) {
                                uint64_t pc = exact ? f : f - 1;

                                if (!in_code_cache(hp, f) || find_stub(hs, hp->pid, hp->start_time, pc))
                                        continue;
                                if (!mem && remote_memory_open(hp->pid, &mem) < 0)
                                        break;
                                read_stub(hs, hp, mem, pc);
                                continue;
                        }
                }
        }
        end_drain(hs);
}

/* A frame is named only by what its drain bound it to: a raw one (never bound) stays unnamed. */
static const Entry *bound_entry(const HotspotSymbols *hs, uint64_t frame)
{
        if (!hotspot_frame_bound(frame))
                return NULL;
        return id_ring_get(hs->ids, frame & HOTSPOT_FRAME_ID_MASK);
}

int hotspot_symbols_name(void *userdata, const Process *p, uint64_t frame, SymFrame *ret)
{
        HotspotSymbols *hs = userdata;
        const Entry *e = bound_entry(hs, frame);
        const Named *n;

        if (!e || e->n == 0) {
                if (hotspot_frame_bci(frame) == PROFD_HS_BCI_NONE)
                        snprintf(hs->placeholder, sizeof(hs->placeholder), "[java] compiled");
                else
                        snprintf(hs->placeholder, sizeof(hs->placeholder), "[java] 0x%" PRIx64,
                                 hotspot_frame_bound(frame) ? 0 : hotspot_frame_method(frame));
                *ret = (SymFrame){.name = hs->placeholder, .system_name = hs->placeholder};
                return e ? -ESTALE : -ENOENT;
        }
        /* The compiled method (the outermost); the methods inlined into it follow
         * (hotspot_symbols_inlined). */
        n = &e->named[e->n - 1];
        *ret = (SymFrame){
                .name = n->name,
                .system_name = n->system_name,
                .file = n->file,
                .line = (int)n->line,
        };
        return 0;
}

const char *hotspot_symbols_anon(void *userdata, const Process *p, uint64_t addr)
{
        const Stub *st = find_stub(userdata, p->pid, p->start_time, addr);

        return st ? st->name : NULL;
}

size_t hotspot_symbols_inlined(void *userdata, const Process *p, uint64_t frame, SymFrame *ret, size_t max)
{
        HotspotSymbols *hs = userdata;
        const Entry *e = bound_entry(hs, frame);
        size_t k = 0;

        if (!e || e->n < 2 || e->n - 1 > max)
                return 0;
        for (; k < e->n - 1; k++)
                ret[k] = (SymFrame){
                        .name = e->named[k].name,
                        .system_name = e->named[k].system_name,
                        .file = e->named[k].file,
                        .line = (int)e->named[k].line,
                };
        return k;
}

void hotspot_symbols_write_metrics(const HotspotSymbols *hs, FILE *f)
{
        static const uint64_t zero[_READ_MAX], zero_compiled[_COMPILED_MAX], zero_unnamed[_UNNAMED_MAX];

        metric_gauge(f, "profd_hotspot_frames",
                     "Java frames (process, method, bytecode index) whose names are kept.", hs ? hs->n : 0);
        metric_gauge(f, "profd_hotspot_frames_bytes", "Memory of the kept Java frames' names.",
                     hs ? hs->bytes : 0);
        metric_counter(
                f, "profd_hotspot_frames_evicted_total",
                "Java frames dropped because their JVM unloaded classes or HOTSPOT_SYMBOLS_MAX were kept "
                "(the oldest; read again when seen).",
                hs ? hs->evicted : 0);
        metric_counter(f, "profd_hotspot_frames_idle_total",
                       "Java frames forgotten because no stack was bound to them for longer than the "
                       "history keeps samples (no stored sample names them; read again when seen).",
                       hs ? hs->idle : 0);
        metric_counter(f, "profd_hotspot_frames_over_bound_total",
                       "Java frames forgotten, oldest first, over the bound the memory budget gave "
                       "their names (frames of stored samples that carry their id stay unnamed).",
                       hs ? hs->over_bound : 0);
        metric_counter(f, "profd_hotspot_frame_ids_used_up_total",
                       "Java frames not given an id because every id a stack entry can hold was given "
                       "(ids are never reused): they stay unnamed.",
                       hs ? id_ring_used_up(hs->ids) : 0);
        metric_labelled(
                f, "profd_hotspot_method_reads_total", "counter",
                "Reads of a Java frame's method from its JVM, by result: ok, gone (the process exited "
                "first), unreadable, stale (not its class's method any more: never named), "
                "bad_method.",
                "result", read_names, hs ? hs->reads : zero, _READ_MAX);
        metric_labelled(f, "profd_hotspot_frames_unnamed_total", "counter",
                        "Java frames of drained stacks left unnamed besides failed reads, by reason: "
                        "classes_unloaded (the JVM unloaded classes since the cut that began their "
                        "generation or while "
                        "they were named), no_unload_counter (interpreted, in a JVM without "
                        "java.cls.unloadedClasses), no_memory, no_process.",
                        "reason", unnamed_names, hs ? hs->unnamed : zero_unnamed, _UNNAMED_MAX);
        metric_counter(f, "profd_hotspot_class_unloads_seen_total",
                       "Drains that found a JVM's class unloading counter changed (its names read again).",
                       hs ? hs->unloads_seen : 0);
        metric_gauge(f, "profd_hotspot_stubs",
                     "Blobs of JVM code that are no Java method (stubs, adapters, the "
                     "interpreter) whose names are kept.",
                     hs ? hs->n_stubs : 0);
        metric_counter(f, "profd_hotspot_stubs_evicted_total",
                       "Stub blobs dropped because HOTSPOT_STUBS_MAX were kept (read again when seen).",
                       hs ? hs->stub_evicted : 0);
        metric_counter(f, "profd_hotspot_stub_reads_total",
                       "Reads of the blob holding a native pc in a JVM's code cache, for its name.",
                       hs ? hs->stub_reads : 0);
        metric_counter(f, "profd_hotspot_stub_reads_failed_total",
                       "Of those, the reads that found no blob or no name (the pc stays unnamed).",
                       hs ? hs->stub_failed : 0);
        metric_labelled(f, "profd_hotspot_compiled_frames_total", "counter",
                        "Compiled Java frames read for the methods inlined at their pc, by result: "
                        "inlined (all named with lines), approximate (the sampled pc named by the "
                        "next PcDesc), method_only (no usable PcDesc or scope: the compiled method "
                        "alone), stale (another nmethod at the pc now: not named), no_nmethod, "
                        "unreadable.",
                        "result", compiled_names, hs ? hs->compiled : zero_compiled, _COMPILED_MAX);
}

size_t hotspot_symbols_memory(const HotspotSymbols *hs)
{
        return hs ? hs->bytes + sizeof(*hs) + id_ring_bytes(hs->ids) : 0;
}

uint64_t hotspot_symbols_bytes(void *userdata)
{
        const HotspotSymbols *hs = userdata;

        return hs ? hs->bytes : 0;
}

uint64_t hotspot_symbols_set_limit(void *userdata, uint64_t max_bytes)
{
        HotspotSymbols *hs = userdata;

        hs->limit_bytes = max_bytes;
        return retire_idle(hs, now_ns(CLOCK_MONOTONIC)) + shrink(hs);
}
