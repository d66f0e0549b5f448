/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "runtimes/hotspot-frames.h"
#include "runtimes/hotspot-method.h"
#include "runtimes/remote-memory.h"
#include "symbolizer/hotspot-symbols.h"
#include "util/metrics-writer.h"

/* One frame of one process, as read. */
typedef struct Entry {
        pid_t pid;
        uint64_t start_time;
        uint64_t frame;    /* the stack entry: method and bci */
        uint64_t seq;      /* insertion order: the older half goes when full */
        char *name;        /* "java.util.zip.Deflater.deflate"; NULL: could not be read */
        char *system_name; /* with the signature: "java.util.zip.Deflater.deflate([BIII)I" */
        char *file;        /* "java/util/zip/Deflater.java"; NULL: none */
        uint32_t line;
        struct Entry *next;
} Entry;

#define BUCKETS 16384

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

struct HotspotSymbols {
        HotspotProcs *procs;
        Entry *buckets[BUCKETS];
        size_t n, bytes;
        uint64_t seq, evicted;
        uint64_t reads[_READ_MAX];
        char placeholder[64];
};

int hotspot_symbols_new(HotspotProcs *procs, HotspotSymbols **ret)
{
        HotspotSymbols *hs = calloc(1, sizeof(*hs));

        if (!hs)
                return -ENOMEM;
        hs->procs = procs;
        *ret = hs;
        return 0;
}

static void entry_free(HotspotSymbols *hs, Entry *e)
{
        hs->n--;
        hs->bytes -= sizeof(*e) + (e->name ? strlen(e->name) + strlen(e->system_name) + 2 : 0) +
                     (e->file ? strlen(e->file) + 1 : 0);
        free(e->name);
        free(e->system_name);
        free(e->file);
        free(e);
}

HotspotSymbols *hotspot_symbols_free(HotspotSymbols *hs)
{
        if (!hs)
                return NULL;
        for (size_t b = 0; b < BUCKETS; b++)
                for (Entry *e = hs->buckets[b], *n; e; e = n) {
                        n = e->next;
                        entry_free(hs, e);
                }
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

/* Drops the entries older than seq (the older half when full: exited processes' frames go with
 * them; a live process's are read again when seen). */
static void drop_older(HotspotSymbols *hs, uint64_t seq)
{
        for (size_t b = 0; b < BUCKETS; b++)
                for (Entry **s = &hs->buckets[b]; *s;) {
                        Entry *e = *s;

                        if (e->seq < seq) {
                                *s = e->next;
                                hs->evicted++;
                                entry_free(hs, e);
                        } else {
                                s = &e->next;
                        }
                }
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

/* Reads one frame of the live JVM hp into a new entry. */
static void read_frame(HotspotSymbols *hs, const HotspotProcess *hp, RemoteMemory *mem, uint64_t frame)
{
        _cleanup_free_ HotspotMethodInfo *info = malloc(sizeof(*info));
        uint32_t bci = hotspot_frame_bci(frame);
        Entry *e;
        int r;

        if (!info)
                return;
        if (hs->n >= HOTSPOT_SYMBOLS_MAX)
                drop_older(hs, hs->seq - HOTSPOT_SYMBOLS_MAX / 2);
        e = calloc(1, sizeof(*e));
        if (!e)
                return;
        *e = (Entry){.pid = hp->pid, .start_time = hp->start_time, .frame = frame, .seq = hs->seq++};
        r = hotspot_method_read(&hp->offsets, read_remote, mem, hotspot_frame_method(frame),
                                bci == PROFD_HS_BCI_NONE ? UINT32_MAX : bci, info);
        if (r >= 0) {
                size_t n = strlen(info->klass) + 1 + strlen(info->name) + 1;

                e->name = malloc(n);
                e->system_name = malloc(n + strlen(info->signature));
                if (e->name && e->system_name) {
                        snprintf(e->name, n, "%s.%s", info->klass, info->name);
                        snprintf(e->system_name, n + strlen(info->signature), "%s.%s%s", info->klass,
                                 info->name, info->signature);
                        e->file = source_path(info->klass, info->file);
                        e->line = info->line;
                        hs->bytes += strlen(e->name) + strlen(e->system_name) + 2 +
                                     (e->file ? strlen(e->file) + 1 : 0);
                } else {
                        free(e->name);
                        free(e->system_name);
                        e->name = e->system_name = NULL;
                }
        }
        hs->reads[r >= 0          ? READ_OK
                  : r == -ESRCH   ? READ_GONE
                  : r == -ESTALE  ? READ_STALE
                  : r == -EBADMSG ? READ_BAD
                                  : READ_UNREADABLE]++;
        e->next = hs->buckets[bucket(hp->pid, frame)];
        hs->buckets[bucket(hp->pid, frame)] = e;
        hs->n++;
        hs->bytes += sizeof(*e);
}

void hotspot_symbols_note(HotspotSymbols *hs, const SampleRecord *records, size_t n)
{
        if (!hs)
                return;
        for (size_t k = 0; k < n; k++) {
                const SampleRecord *rec = &records[k];
                _cleanup_(remote_memory_freep) RemoteMemory *mem = NULL;
                const HotspotProcess *hp = NULL;

                for (uint32_t i = 0; i < rec->n_user; i++) {
                        uint64_t f = rec->user_frames[i];

                        if (!hotspot_frame_is(f))
                                continue;
                        if (!hp) {
                                hp = hotspot_procs_get(hs->procs, (pid_t)rec->pid);
                                if (!hp)
                                        break;
                        }
                        if (find(hs, hp->pid, hp->start_time, f))
                                continue;
                        if (!mem && remote_memory_open(hp->pid, &mem) < 0) {
                                hs->reads[READ_GONE]++;
                                break;
                        }
                        read_frame(hs, hp, mem, f);
                }
        }
}

int hotspot_symbols_name(void *userdata, const Process *p, uint64_t frame, SymFrame *ret)
{
        HotspotSymbols *hs = userdata;
        const Entry *e = find(hs, p->pid, p->start_time, frame);

        if (!e || !e->name) {
                snprintf(hs->placeholder, sizeof(hs->placeholder), "[java] 0x%" PRIx64,
                         hotspot_frame_method(frame));
                *ret = (SymFrame){.name = hs->placeholder, .system_name = hs->placeholder};
                return e ? -ESTALE : -ENOENT;
        }
        *ret = (SymFrame){
                .name = e->name,
                .system_name = e->system_name,
                .file = e->file,
                .line = (int)e->line,
        };
        return 0;
}

void hotspot_symbols_write_metrics(const HotspotSymbols *hs, FILE *f)
{
        static const uint64_t zero[_READ_MAX];

        metric_gauge(f, "profd_hotspot_frames",
                     "Java frames (process, method, bytecode index) whose names are kept.", hs ? hs->n : 0);
        metric_gauge(f, "profd_hotspot_frames_bytes", "Memory of the kept Java frames' names.",
                     hs ? hs->bytes : 0);
        metric_counter(f, "profd_hotspot_frames_evicted_total",
                       "Java frames dropped because HOTSPOT_SYMBOLS_MAX were kept (read again when seen).",
                       hs ? hs->evicted : 0);
        metric_labelled(
                f, "profd_hotspot_method_reads_total", "counter",
                "Reads of a Java frame's method from its JVM, by result: ok, gone (the process exited "
                "first), unreadable, stale (not its class's method any more: never named), "
                "bad_method.",
                "result", read_names, hs ? hs->reads : zero, _READ_MAX);
}

size_t hotspot_symbols_memory(const HotspotSymbols *hs)
{
        return hs ? hs->bytes + sizeof(*hs) : 0;
}
