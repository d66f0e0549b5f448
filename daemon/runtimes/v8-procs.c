/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <linux/types.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "bpf/profd-v8.h"
#include "runtimes/v8-procs.h"
#include "util/log.h"
#include "util/metrics-writer.h"

/* Files probed: a host runs a few Node.js builds; a bound against one with many (each probe reads
 * one symbol table). Past it, the oldest entry goes. */
#define V8_ELF_CACHE_MAX 32

typedef enum V8DetectResult {
        V8_DETECT_FOUND,       /* described to BPF */
        V8_DETECT_NO_METADATA, /* V8, but no v8dbg_* symbols (a build without post-mortem metadata) */
        V8_DETECT_UNSUPPORTED, /* metadata missing a value profd needs, or a layout it cannot read */
        V8_DETECT_MAP_FULL,    /* v8_procs is full */
        V8_DETECT_MAP_ERROR,
        _V8_DETECT_MAX,
} V8DetectResult;

static const char *const detect_names[_V8_DETECT_MAX] = {
        [V8_DETECT_FOUND] = "found",
        [V8_DETECT_NO_METADATA] = "no_metadata",
        [V8_DETECT_UNSUPPORTED] = "unsupported",
        [V8_DETECT_MAP_FULL] = "map_full",
        [V8_DETECT_MAP_ERROR] = "map_error",
};

typedef struct ElfCacheEntry {
        uint8_t key[PROCESS_MAPPING_KEY_MAX];
        size_t key_size;
        int r; /* v8_elf_probe()'s result */
        V8Elf elf;
        uint64_t used;
} ElfCacheEntry;

typedef struct ProcEntry {
        V8Process info;
        bool walked; /* described to BPF; false: a V8 profd cannot read (counted once) */
        struct profd_v8_proc bpf;
        struct ProcEntry *next; /* hash chain */
} ProcEntry;

#define PROC_BUCKETS 1024

struct V8Procs {
        int map_fd;
        ElfCacheEntry elf_cache[V8_ELF_CACHE_MAX];
        size_t n_elf;
        uint64_t tick;
        ProcEntry *buckets[PROC_BUCKETS];
        size_t n_procs;   /* walked */
        size_t n_entries; /* walked or not walkable */
        uint64_t detect[_V8_DETECT_MAX];
        uint64_t probes, probe_failures;
};

int v8_procs_new(int map_fd, V8Procs **ret)
{
        V8Procs *vp = calloc(1, sizeof(*vp));

        if (!vp)
                return -ENOMEM;
        vp->map_fd = map_fd;
        *ret = vp;
        return 0;
}

V8Procs *v8_procs_free(V8Procs *vp)
{
        if (!vp)
                return NULL;
        for (size_t b = 0; b < PROC_BUCKETS; b++)
                for (ProcEntry *e = vp->buckets[b], *n; e; e = n) {
                        n = e->next;
                        free(e);
                }
        free(vp);
        return NULL;
}

static ProcEntry **proc_slot(V8Procs *vp, pid_t pid)
{
        ProcEntry **s = &vp->buckets[(unsigned)pid % PROC_BUCKETS];

        while (*s && (*s)->info.pid != pid)
                s = &(*s)->next;
        return s;
}

const V8Process *v8_procs_get(const V8Procs *vp, pid_t pid)
{
        if (!vp)
                return NULL;
        for (ProcEntry *e = vp->buckets[(unsigned)pid % PROC_BUCKETS]; e; e = e->next)
                if (e->info.pid == pid)
                        return e->walked ? &e->info : NULL;
        return NULL;
}

void v8_procs_forget(V8Procs *vp, pid_t pid)
{
        ProcEntry **s, *e;
        __u32 key = pid;

        if (!vp)
                return;
        s = proc_slot(vp, pid);
        if (!*s)
                return;
        e = *s;
        *s = e->next;
        if (e->walked) {
                vp->n_procs--;
                if (vp->map_fd >= 0)
                        (void)bpf_map_delete_elem(vp->map_fd, &key);
        }
        vp->n_entries--;
        free(e);
}

/* Worth a look: the node executable or its shared library ("node", "nodejs", "libnode.so.108"). An
 * embedder of V8 under another name is not looked at (reading every mapped file's symbols would
 * cost each process's start). */
static bool looks_like_node(const char *path)
{
        const char *base = strrchr(path, '/');

        base = base ? base + 1 : path;
        return strncmp(base, "node", 4) == 0 || strncmp(base, "libnode.so", 10) == 0;
}

static int probe_cached(V8Procs *vp, const Process *p, const ProcMapping *m, const V8Elf **ret)
{
        uint8_t key[PROCESS_MAPPING_KEY_MAX];
        size_t key_size = process_mapping_key(m, key);
        ElfCacheEntry *e = NULL, *oldest = NULL;
        int fd;

        if (key_size == 0)
                return -ENOENT;
        vp->tick++;
        for (size_t i = 0; i < vp->n_elf; i++) {
                ElfCacheEntry *c = &vp->elf_cache[i];

                if (c->key_size == key_size && memcmp(c->key, key, key_size) == 0) {
                        c->used = vp->tick;
                        *ret = &c->elf;
                        return c->r;
                }
                if (!oldest || c->used < oldest->used)
                        oldest = c;
        }
        e = vp->n_elf < V8_ELF_CACHE_MAX ? &vp->elf_cache[vp->n_elf++] : oldest;
        *e = (ElfCacheEntry){.key_size = key_size, .used = vp->tick};
        memcpy(e->key, key, key_size);
        vp->probes++;
        fd = process_open_mapping(p, m);
        e->r = fd < 0 ? fd : v8_elf_probe(fd, m->path, &e->elf);
        if (fd >= 0)
                close(fd);
        if (e->r < 0 && e->r != -ENOENT && e->r != -EPROTONOSUPPORT) {
                vp->probe_failures++;
                log_debug_errno(e->r, "Cannot read the symbols of %s (pid %d): %m", m->path, (int)p->pid);
        }
        *ret = &e->elf;
        return e->r;
}

static int describe(const V8Offsets *o, struct profd_v8_proc *ret)
{
        if (o->fp_function < -128 || o->fp_function >= 0 || o->fp_context < -128 || o->fp_context >= 0)
                return -EINVAL;
        *ret = (struct profd_v8_proc){
                .fp_function = (__s8)o->fp_function,
                .fp_context = (__s8)o->fp_context,
                .heap_object_tag_mask = (__u8)o->heap_object_tag_mask,
                .heap_object_tag = (__u8)o->heap_object_tag,
                .smi_value_shift = (__u8)(o->smi_shift_size + 1),
        };
        /* Interpreted frames' bytecode positions: read when the metadata names both slots, the
         * offset's right below the array's (V8 10.2 to 13.6: -40 and -32), which BPF reads at once. */
        if (o->fp_bytecode_array >= -120 && o->fp_bytecode_array < 0 &&
            o->fp_bytecode_offset == o->fp_bytecode_array - 8) {
                ret->fp_bytecode_array = (__s8)o->fp_bytecode_array;
                ret->fp_bytecode_offset = (__s8)o->fp_bytecode_offset;
        }
        return 0;
}

void v8_procs_note(V8Procs *vp, const Process *p)
{
        const ProcMapping *m = NULL;
        const V8Elf *elf = NULL;
        struct profd_v8_proc d;
        ProcEntry **slot, *e;
        __u32 key = p->pid;
        int r = -ENOENT;

        if (!vp)
                return;
        for (size_t i = 0; i < p->n_mappings; i++) {
                const ProcMapping *c = &p->mappings[i];

                if (!c->executable || !c->file || !looks_like_node(c->path))
                        continue;
                r = probe_cached(vp, p, c, &elf);
                if (r == 0 || r == -EPROTONOSUPPORT) {
                        m = c;
                        break;
                }
        }
        slot = proc_slot(vp, p->pid);
        if (!m) {
                if (*slot)
                        v8_procs_forget(vp, p->pid); /* exec'd into something else */
                return;
        }
        if (*slot && (*slot)->info.start_time == p->start_time) {
                /* Known already: BPF forgets a pid at exec, so write it again. */
                if ((*slot)->walked && vp->map_fd >= 0)
                        (void)bpf_map_update_elem(vp->map_fd, &key, &(*slot)->bpf, BPF_ANY);
                return;
        }
        if (*slot)
                v8_procs_forget(vp, p->pid);
        if (vp->n_entries >= PROFD_V8_MAX_PROCS) {
                vp->detect[V8_DETECT_MAP_FULL]++;
                return;
        }
        e = calloc(1, sizeof(*e));
        if (!e)
                return;
        e->info = (V8Process){.pid = p->pid, .start_time = p->start_time, .offsets = elf->offsets};
        e->next = vp->buckets[(unsigned)p->pid % PROC_BUCKETS];
        vp->buckets[(unsigned)p->pid % PROC_BUCKETS] = e;
        vp->n_entries++;

        if (r == 0)
                r = describe(&elf->offsets, &d);
        if (r < 0) {
                V8DetectResult reason = elf->n_symbols == 0 ? V8_DETECT_NO_METADATA : V8_DETECT_UNSUPPORTED;

                vp->detect[reason]++;
                log_debug("pid %d runs V8 from %s: no JavaScript frames (%s)", (int)p->pid, m->path,
                          detect_names[reason]);
                return;
        }
        if (vp->map_fd >= 0 && bpf_map_update_elem(vp->map_fd, &key, &d, BPF_ANY) < 0) {
                r = -errno;
                vp->detect[r == -E2BIG || r == -ENOMEM ? V8_DETECT_MAP_FULL : V8_DETECT_MAP_ERROR]++;
                log_debug_errno(r, "Cannot describe V8 of pid %d to BPF: %m", (int)p->pid);
                return;
        }
        e->bpf = d;
        e->walked = true;
        vp->n_procs++;
        vp->detect[V8_DETECT_FOUND]++;
        log_debug("pid %d runs V8 (%s): reading its JavaScript frames", (int)p->pid, m->path);
}

void v8_procs_write_metrics(const V8Procs *vp, FILE *f)
{
        if (!vp)
                return;
        metric_gauge(f, "profd_v8_processes", "Live processes whose JavaScript (V8) frames BPF reads.",
                     vp->n_procs);
        metric_labelled(f, "profd_v8_detections_total", "counter",
                        "V8 runtimes found in processes, by outcome.", "outcome", detect_names, vp->detect,
                        _V8_DETECT_MAX);
        metric_labelled(
                f, "profd_v8_file_probes_total", "counter",
                "Mapped files whose symbols were read to find V8's metadata, and failures to read them.",
                "result", (const char *const[]){"read", "failed"},
                (const uint64_t[]){vp->probes - vp->probe_failures, vp->probe_failures}, 2);
}
