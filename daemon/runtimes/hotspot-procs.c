/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <inttypes.h>
#include <linux/types.h>

#include <bpf/bpf.h>

#include "bpf/profd-hotspot.h"
#include <stdlib.h>
#include <string.h>

#include "runtimes/hotspot-procs.h"
#include "runtimes/hotspot-vmstructs.h"
#include "runtimes/remote-memory.h"
#include "util/log.h"
#include "util/metrics-writer.h"

/* What became of a process that maps libjvm.so (counted once per process). */
typedef enum HsDetect {
        HS_DETECT_FOUND,        /* its offsets are known: walkable */
        HS_DETECT_NO_VMSTRUCTS, /* libjvm without the exported tables */
        HS_DETECT_READ_FAILED,  /* its tables could not be read from its memory */
        HS_DETECT_BAD_TABLES,   /* tables that cannot be what HotSpot writes */
        HS_DETECT_UNSUPPORTED,  /* a required field missing or unusable: a layout profd does not know */
        HS_DETECT_TABLE_FULL,   /* HOTSPOT_MAX_PROCS JVMs tracked already */
        HS_DETECT_MAP_ERROR,    /* hotspot_procs (BPF) refused its description */
        _HS_DETECT_MAX,
} HsDetect;

static const char *const detect_names[_HS_DETECT_MAX] = {
        [HS_DETECT_FOUND] = "found",
        [HS_DETECT_NO_VMSTRUCTS] = "no_vmstructs",
        [HS_DETECT_READ_FAILED] = "read_failed",
        [HS_DETECT_BAD_TABLES] = "bad_tables",
        [HS_DETECT_UNSUPPORTED] = "unsupported",
        [HS_DETECT_TABLE_FULL] = "table_full",
        [HS_DETECT_MAP_ERROR] = "map_error",
};

/* One libjvm file: its symbols, then (after the first process's read) its offsets. A read that
 * failed is not kept (the next process tries again); what the tables said is. */
/* A libjvm.so mapped but not relocated yet (dlopen() in progress) holds tables of unrelocated
 * pointers: they are read again, up to this many times, before the file is taken as bad. */
#define HOTSPOT_BAD_TABLE_TRIES 8

typedef struct FileEntry {
        uint8_t key[PROCESS_MAPPING_KEY_MAX];
        size_t key_size;
        int elf_r; /* hotspot_elf_probe() */
        HotspotElf elf;
        bool read;         /* tables read: outcome and offsets hold */
        uint8_t bad_reads; /* reads whose tables made no sense (before ld.so relocated them?) */
        HsDetect outcome;
        HotspotOffsets offsets;
        uint64_t used;
} FileEntry;

typedef struct ProcEntry {
        HotspotProcess info;
        bool walkable;                 /* false: counted as one profd cannot walk */
        struct profd_hotspot_proc bpf; /* what BPF was given (written again after an exec) */
        struct ProcEntry *next;
} ProcEntry;

#define PROC_BUCKETS 1024

struct HotspotProcs {
        int map_fd;
        FileEntry files[HOTSPOT_FILE_CACHE_MAX];
        size_t n_files;
        uint64_t tick;
        ProcEntry *buckets[PROC_BUCKETS];
        size_t n_procs, n_entries;
        uint64_t detect[_HS_DETECT_MAX];
        uint64_t table_reads, table_pages;
        uint64_t unusable_entries; /* optional vmStructs entries left out (HotspotOffsets) */
        /* JVMs found before their code cache existed: described again at the next interval
         * (hotspot_procs_take_starting()), not only when their mappings change. */
        pid_t starting[HOTSPOT_STARTING_MAX];
        size_t n_starting;
};

void hotspot_procs_retry(HotspotProcs *hp, pid_t pid)
{
        if (!hp)
                return;
        for (size_t i = 0; i < hp->n_starting; i++)
                if (hp->starting[i] == pid)
                        return;
        /* Full: that JVM is described at its next mapping read instead (counted as such). */
        if (hp->n_starting >= HOTSPOT_STARTING_MAX) {
                hp->detect[HS_DETECT_READ_FAILED]++;
                return;
        }
        hp->starting[hp->n_starting++] = pid;
}

size_t hotspot_procs_take_starting(HotspotProcs *hp, pid_t *ret, size_t max)
{
        size_t n;

        if (!hp)
                return 0;
        n = hp->n_starting < max ? hp->n_starting : max;
        memcpy(ret, hp->starting, n * sizeof(pid_t));
        memmove(hp->starting, hp->starting + n, (hp->n_starting - n) * sizeof(pid_t));
        hp->n_starting -= n;
        return n;
}

int hotspot_procs_new(int map_fd, HotspotProcs **ret)
{
        HotspotProcs *hp = calloc(1, sizeof(*hp));

        if (!hp)
                return -ENOMEM;
        hp->map_fd = map_fd;
        *ret = hp;
        return 0;
}

HotspotProcs *hotspot_procs_free(HotspotProcs *hp)
{
        if (!hp)
                return NULL;
        for (size_t b = 0; b < PROC_BUCKETS; b++)
                for (ProcEntry *e = hp->buckets[b], *n; e; e = n) {
                        n = e->next;
                        free(e);
                }
        free(hp);
        return NULL;
}

static ProcEntry **proc_slot(HotspotProcs *hp, pid_t pid)
{
        ProcEntry **s = &hp->buckets[(unsigned)pid % PROC_BUCKETS];

        while (*s && (*s)->info.pid != pid)
                s = &(*s)->next;
        return s;
}

const HotspotProcess *hotspot_procs_get(const HotspotProcs *hp, pid_t pid)
{
        if (!hp)
                return NULL;
        for (ProcEntry *e = hp->buckets[(unsigned)pid % PROC_BUCKETS]; e; e = e->next)
                if (e->info.pid == pid)
                        return e->walkable ? &e->info : NULL;
        return NULL;
}

void hotspot_procs_forget(HotspotProcs *hp, pid_t pid)
{
        ProcEntry **s, *e;

        if (!hp)
                return;
        s = proc_slot(hp, pid);
        if (!*s)
                return;
        e = *s;
        *s = e->next;
        if (e->walkable) {
                __u32 key = pid;

                hp->n_procs--;
                if (hp->map_fd >= 0)
                        (void)bpf_map_delete_elem(hp->map_fd, &key);
        }
        hp->n_entries--;
        free(e);
}

static bool is_libjvm(const char *path)
{
        const char *base = strrchr(path, '/');

        return strcmp(base ? base + 1 : path, "libjvm.so") == 0;
}

static FileEntry *file_entry(HotspotProcs *hp, const Process *p, const ProcMapping *m)
{
        uint8_t key[PROCESS_MAPPING_KEY_MAX];
        size_t key_size = process_mapping_key(m, key);
        FileEntry *e, *oldest = NULL;
        _cleanup_close_ int fd = -1;

        if (key_size == 0)
                return NULL;
        hp->tick++;
        for (size_t i = 0; i < hp->n_files; i++) {
                FileEntry *c = &hp->files[i];

                if (c->key_size == key_size && memcmp(c->key, key, key_size) == 0) {
                        c->used = hp->tick;
                        return c;
                }
                if (!oldest || c->used < oldest->used)
                        oldest = c;
        }
        e = hp->n_files < HOTSPOT_FILE_CACHE_MAX ? &hp->files[hp->n_files++] : oldest;
        *e = (FileEntry){.key_size = key_size, .used = hp->tick};
        memcpy(e->key, key, key_size);
        fd = process_open_mapping(p, m);
        e->elf_r = fd < 0 ? fd : hotspot_elf_probe(fd, &e->elf);
        if (e->elf_r < 0 && e->elf_r != -ENOENT)
                log_debug_errno(e->elf_r, "Cannot read the symbols of %s (pid %d): %m", m->path,
                                (int)p->pid);
        return e;
}

static int read_remote(void *userdata, uint64_t addr, void *buf, size_t n)
{
        return remote_memory_read(userdata, addr, buf, n);
}

/* Reads the file's tables from p's memory into e (once per file). */
static void file_read_tables(HotspotProcs *hp, FileEntry *e, const Process *p, const ProcMapping *m)
{
        _cleanup_(hotspot_vmstructs_freep) HotspotVMStructs *vs = NULL;
        _cleanup_(remote_memory_freep) RemoteMemory *mem = NULL;
        const char *missing = NULL;
        int r;

        r = remote_memory_open(p->pid, &mem);
        if (r >= 0)
                r = hotspot_vmstructs_read(&e->elf, m->load_bias, read_remote, mem, &vs);
        hp->table_reads++;
        if (vs)
                hp->table_pages += vs->reads;
        if ((r == -EBADMSG || r == -E2BIG) && ++e->bad_reads < HOTSPOT_BAD_TABLE_TRIES) {
                log_debug_errno(r, "The vmStructs of %s (pid %d) make no sense yet: %m", m->path,
                                (int)p->pid);
                return; /* e->read stays false: read again (next interval, next process) */
        }
        if (r == -EBADMSG || r == -E2BIG) {
                e->read = true;
                e->outcome = HS_DETECT_BAD_TABLES;
                log_debug_errno(r, "The vmStructs of %s (pid %d) make no sense: %m", m->path, (int)p->pid);
                return;
        }
        if (r < 0) {
                log_debug_errno(r, "Cannot read the vmStructs of %s from pid %d: %m", m->path, (int)p->pid);
                return; /* e->read stays false: the next process tries again */
        }
        r = hotspot_offsets_from_vmstructs(vs, m->load_bias, &e->offsets, &missing);
        if (r >= 0) {
                r = hotspot_offsets_read_version(&e->offsets, m->load_bias, read_remote, mem);
                if (r < 0 && r != -EBADMSG) {
                        log_debug_errno(r, "Cannot read the JDK version of pid %d: %m", (int)p->pid);
                        return; /* the next process tries again */
                }
                if (r < 0)
                        missing = "Abstract_VM_Version::_vm_major_version";
        }
        e->read = true;
        if (r < 0) {
                e->outcome = HS_DETECT_UNSUPPORTED;
                log_debug_errno(r,
                                "HotSpot %s (pid %d): %s is missing or unusable, its frames stay native: %m",
                                m->path, (int)p->pid, missing ?: "?");
                return;
        }
        e->outcome = HS_DETECT_FOUND;
        if (e->offsets.n_unusable > 0) {
                hp->unusable_entries += e->offsets.n_unusable;
                log_debug("HotSpot %s: %" PRIu32 " optional vmStructs entries (%s first) have values "
                          "the walk cannot use: what needs them is not walked",
                          m->path, e->offsets.n_unusable, missing ?: "?");
        }
        log_debug("HotSpot %s: %zu fields, %zu types, %zu int and %zu long constants in %zu page reads",
                  m->path, vs->n_fields, vs->n_types, vs->n_ints, vs->n_longs, vs->reads);
}

static bool all_known(const uint32_t *v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (v[i] == HOTSPOT_OFFSET_NONE || v[i] > UINT16_MAX)
                        return false;
        return true;
}

/* CodeCache::_heaps (a GrowableArray<CodeHeap*>*): each heap's reserved memory, segment map and
 * segment size. */
static int describe_heaps(RemoteMemory *mem, uint64_t bias, const HotspotOffsets *o,
                          struct profd_hotspot_proc *d)
{
        const uint32_t need[] = {o->growable_array_len,
                                 o->growable_array_data,
                                 o->code_heap_memory,
                                 o->code_heap_segmap,
                                 o->code_heap_log2_segment_size,
                                 o->virtual_space_low,
                                 o->virtual_space_high_boundary,
                                 o->heap_block_sizeof,
                                 o->code_blob_frame_size,
                                 o->compiled_method_method,
                                 o->const_method_constants,
                                 o->constant_pool_pool_holder};
        uint64_t heaps = 0, data = 0;
        int32_t len = 0;
        int r;

        if (!all_known(need, ELEMENTSOF(need)) || o->code_cache_heaps == UINT64_MAX ||
            o->heap_block_sizeof > 255)
                return -EPROTONOSUPPORT;
        if ((r = remote_memory_read(mem, bias + o->code_cache_heaps, &heaps, sizeof(heaps))) < 0 ||
            (r = remote_memory_read(mem, heaps + o->growable_array_len, &len, sizeof(len))) < 0 ||
            (r = remote_memory_read(mem, heaps + o->growable_array_data, &data, sizeof(data))) < 0)
                return r;
        if (len <= 0 || len > PROFD_HS_MAX_HEAPS)
                return -EBADMSG;
        for (int32_t i = 0; i < len; i++) {
                struct profd_hs_heap *h = &d->heaps[i];
                uint64_t heap = 0, vs, segmap = 0;
                int32_t log2 = 0;

                if ((r = remote_memory_read(mem, data + 8 * (uint64_t)i, &heap, sizeof(heap))) < 0)
                        return r;
                vs = heap + o->code_heap_memory;
                if ((r = remote_memory_read(mem, vs + o->virtual_space_low, &h->low, sizeof(h->low))) < 0 ||
                    (r = remote_memory_read(mem, vs + o->virtual_space_high_boundary, &h->high,
                                            sizeof(h->high))) < 0 ||
                    (r = remote_memory_read(mem, heap + o->code_heap_segmap + o->virtual_space_low, &segmap,
                                            sizeof(segmap))) < 0 ||
                    (r = remote_memory_read(mem, heap + o->code_heap_log2_segment_size, &log2,
                                            sizeof(log2))) < 0)
                        return r;
                if (h->high <= h->low || !segmap || log2 < 4 || log2 > 16)
                        return -EBADMSG;
                h->segmap = segmap;
                h->log2_segment = (uint8_t)log2;
        }
        d->n_heaps = (uint8_t)len;
        d->blob_frame_size = (uint16_t)o->code_blob_frame_size;
        d->blob_method = (uint16_t)o->compiled_method_method;
        d->heap_block_size = (uint8_t)o->heap_block_sizeof;
        d->const_method_constants = (uint16_t)o->const_method_constants;
        d->constant_pool_holder = (uint16_t)o->constant_pool_pool_holder;
        /* Without them every sample in compiled code ends at its Java frame (unsure). */
        if (o->code_blob_frame_complete_offset != UINT32_MAX &&
            o->code_blob_frame_complete_size != UINT32_MAX &&
            (o->code_blob_code_begin != UINT32_MAX || o->code_blob_code_offset != UINT32_MAX)) {
                d->blob_code_is_offset = o->code_blob_code_begin == UINT32_MAX;
                d->blob_code_begin = (uint16_t)(d->blob_code_is_offset ? o->code_blob_code_offset
                                                                       : o->code_blob_code_begin);
                d->blob_frame_complete = (uint16_t)o->code_blob_frame_complete_offset;
                d->blob_frame_complete_size = (uint8_t)o->code_blob_frame_complete_size;
        }
        if (o->code_blob_name != UINT32_MAX)
                d->blob_name = (uint16_t)o->code_blob_name;
        if (o->nmethod_compile_id != UINT32_MAX)
                d->blob_compile_id = (uint16_t)o->nmethod_compile_id;
        return 0;
}

/* Where the JVM's code is now: the code cache's bounds and the interpreter's code, set while the
 * JVM starts (-EAGAIN before: the next read of its mappings tries again). */
static int describe(const Process *p, uint64_t bias, const HotspotOffsets *o, struct profd_hotspot_proc *ret)
{
        _cleanup_(remote_memory_freep) RemoteMemory *mem = NULL;
        uint64_t low = 0, high = 0, code = 0, buf = 0;
        int32_t limit = 0;
        int r;

        if (o->code_cache_low_bound == UINT64_MAX || o->code_cache_high_bound == UINT64_MAX)
                return -EPROTONOSUPPORT;
        r = remote_memory_open(p->pid, &mem);
        if (r < 0)
                return r;
        if ((r = remote_memory_read(mem, bias + o->code_cache_low_bound, &low, sizeof(low))) < 0 ||
            (r = remote_memory_read(mem, bias + o->code_cache_high_bound, &high, sizeof(high))) < 0 ||
            (r = remote_memory_read(mem, bias + o->interpreter_code, &code, sizeof(code))) < 0)
                return r;
        if (!low || high <= low || !code)
                return -EAGAIN;
        if ((r = remote_memory_read(mem, code + o->stub_queue_stub_buffer, &buf, sizeof(buf))) < 0 ||
            (r = remote_memory_read(mem, code + o->stub_queue_buffer_limit, &limit, sizeof(limit))) < 0)
                return r;
        if (!buf || limit <= 0 || buf < low || buf + (uint64_t)limit > high)
                return -EAGAIN;
        if (o->frame_interpreter_method < INT8_MIN || o->frame_interpreter_bcp < INT8_MIN ||
            o->method_const_method > UINT16_MAX || o->const_method_sizeof > UINT16_MAX ||
            o->const_method_code_size > UINT16_MAX)
                return -EPROTONOSUPPORT;
        struct profd_hotspot_proc d = {
                .code_start = low,
                .code_end = high,
                .interp_start = buf,
                .interp_end = buf + (uint64_t)limit,
                .frame_method = (__s8)o->frame_interpreter_method,
                .frame_bcp = (__s8)o->frame_interpreter_bcp,
                .const_method = (__u16)o->method_const_method,
                .const_method_size = (__u16)o->const_method_sizeof,
                .code_size = (__u16)o->const_method_code_size,
                .frame_sender_sp = (__s8)o->frame_interpreter_sender_sp,
        };
        /* Compiled frames: where each code heap and its segment map are (optional: without,
         * compiled code is stepped by its frame pointer). */
        if (describe_heaps(mem, bias, o, &d) < 0)
                d.n_heaps = 0;
        *ret = d;
        return 0;
}

void hotspot_procs_note(HotspotProcs *hp, const Process *p)
{
        const ProcMapping *m = NULL;
        FileEntry *fe = NULL;
        ProcEntry **slot, *e;
        HsDetect outcome;
        struct profd_hotspot_proc d = {};

        if (!hp)
                return;
        for (size_t i = 0; i < p->n_mappings; i++) {
                const ProcMapping *c = &p->mappings[i];

                if (c->executable && c->file && c->bias_known && is_libjvm(c->path)) {
                        m = c;
                        break;
                }
        }
        slot = proc_slot(hp, p->pid);
        if (!m) {
                if (*slot)
                        hotspot_procs_forget(hp, p->pid); /* exec'd into something else */
                return;
        }
        /* Known already: the same process with libjvm at the same place. BPF forgets a pid at exec:
         * an exec of the same JVM at the same address needs the entry written again. */
        if (*slot && (*slot)->info.start_time == p->start_time && (*slot)->info.bias == m->load_bias) {
                __u32 key = p->pid;

                if ((*slot)->walkable && hp->map_fd >= 0)
                        (void)bpf_map_update_elem(hp->map_fd, &key, &(*slot)->bpf, BPF_ANY);
                return;
        }
        if (*slot)
                hotspot_procs_forget(hp, p->pid);

        fe = file_entry(hp, p, m);
        if (!fe)
                return;
        if (fe->elf_r == -ENOENT) {
                outcome = HS_DETECT_NO_VMSTRUCTS;
        } else if (fe->elf_r < 0) {
                return; /* the file could not be read: not known as a JVM yet */
        } else {
                if (!fe->read)
                        file_read_tables(hp, fe, p, m);
                if (!fe->read) {
                        /* Counted, not remembered: the next read of its mappings tries again. */
                        hp->detect[HS_DETECT_READ_FAILED]++;
                        hotspot_procs_retry(hp, p->pid);
                        return;
                }
                outcome = fe->outcome;
        }
        if (outcome == HS_DETECT_FOUND) {
                int r = describe(p, m->load_bias, &fe->offsets, &d);

                if (r == -EAGAIN || r == -ESRCH) {
                        log_debug("pid %d: its JVM has no code cache yet", (int)p->pid);
                        if (r == -EAGAIN)
                                hotspot_procs_retry(hp, p->pid);
                        return; /* starting: tried again at the next interval */
                }
                if (r < 0) {
                        hp->detect[HS_DETECT_READ_FAILED]++;
                        log_debug_errno(r, "pid %d: cannot read where its JVM's code is: %m", (int)p->pid);
                        return;
                }
                if (hp->map_fd >= 0) {
                        __u32 key = p->pid;

                        if (bpf_map_update_elem(hp->map_fd, &key, &d, BPF_ANY) < 0) {
                                r = -errno;
                                outcome = HS_DETECT_MAP_ERROR;
                                log_debug_errno(r, "Cannot describe the JVM of pid %d to BPF: %m",
                                                (int)p->pid);
                        }
                }
        }
        if (hp->n_entries >= HOTSPOT_MAX_PROCS) {
                hp->detect[HS_DETECT_TABLE_FULL]++;
                return;
        }
        e = calloc(1, sizeof(*e));
        if (!e)
                return;
        e->info = (HotspotProcess){.pid = p->pid, .start_time = p->start_time, .bias = m->load_bias};
        e->walkable = outcome == HS_DETECT_FOUND;
        if (e->walkable) {
                e->info.offsets = fe->offsets;
                e->info.code = d;
                e->bpf = d;
                hp->n_procs++;
        }
        e->next = hp->buckets[(unsigned)p->pid % PROC_BUCKETS];
        hp->buckets[(unsigned)p->pid % PROC_BUCKETS] = e;
        hp->n_entries++;
        hp->detect[outcome]++;
        log_debug("pid %d runs HotSpot (%s): %s", (int)p->pid, m->path, detect_names[outcome]);
}

void hotspot_procs_write_metrics(const HotspotProcs *hp, FILE *f)
{
        static const uint64_t zero[_HS_DETECT_MAX];

        metric_gauge(f, "profd_hotspot_processes", "Live processes running a HotSpot JVM profd can walk.",
                     hp ? hp->n_procs : 0);
        metric_labelled(
                f, "profd_hotspot_detections_total", "counter",
                "Processes found mapping libjvm.so, by outcome (counted once per process; read_failed "
                "each time a read of its tables failed).",
                "outcome", detect_names, hp ? hp->detect : zero, _HS_DETECT_MAX);
        metric_counter(
                f, "profd_hotspot_vmstructs_reads_total",
                "Reads of a libjvm's vmStructs tables from a process's memory (once per libjvm file).",
                hp ? hp->table_reads : 0);
        metric_counter(f, "profd_hotspot_vmstructs_pages_read_total",
                       "Pages of process memory read for those tables.", hp ? hp->table_pages : 0);
        metric_counter(f, "profd_hotspot_vmstructs_unusable_entries_total",
                       "Optional vmStructs entries present with a value the walk cannot use, per "
                       "libjvm read: left out, the compiled frames they serve are not walked.",
                       hp ? hp->unusable_entries : 0);
}

size_t hotspot_procs_memory(const HotspotProcs *hp)
{
        return hp ? sizeof(*hp) + hp->n_entries * sizeof(ProcEntry) : 0;
}
