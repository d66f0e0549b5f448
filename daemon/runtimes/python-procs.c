/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/types.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "bpf/profd-python.h"
#include "runtimes/python-code.h"
#include "runtimes/python-eval-cold.h"
#include "runtimes/python-procs.h"
#include "runtimes/remote-memory.h"
#include "runtimes/runtime-elf.h"
#include "util/log.h"
#include "util/metrics-writer.h"

/* Files probed: the interpreter of most hosts is one or two files; a bound against a host with
 * many private builds (each probe reads one symbol table). Past it, the oldest entry goes. */
#define PYTHON_ELF_CACHE_MAX 64
/* Bytes of _Py_DebugOffsets read from a 3.13+ process (python-offsets.h). */
#define PYTHON_DEBUG_OFFSETS_READ PYTHON_DEBUG_OFFSETS_SIZE

typedef enum PyDetectResult {
        PY_DETECT_FOUND,       /* described to BPF */
        PY_DETECT_UNSUPPORTED, /* a CPython version profd has no offsets for */
        PY_DETECT_NO_VERSION,  /* a runtime whose version could not be told */
        PY_DETECT_READ_FAILED, /* its debug offsets could not be read */
        PY_DETECT_BAD_OFFSETS, /* its offsets do not fit the BPF walk */
        PY_DETECT_MAP_FULL,    /* python_procs is full */
        PY_DETECT_MAP_ERROR,
        _PY_DETECT_MAX,
} PyDetectResult;

static const char *const detect_names[_PY_DETECT_MAX] = {
        [PY_DETECT_FOUND] = "found",
        [PY_DETECT_UNSUPPORTED] = "unsupported_version",
        [PY_DETECT_NO_VERSION] = "no_version",
        [PY_DETECT_READ_FAILED] = "read_failed",
        [PY_DETECT_BAD_OFFSETS] = "bad_offsets",
        [PY_DETECT_MAP_FULL] = "map_full",
        [PY_DETECT_MAP_ERROR] = "map_error",
};

typedef struct ElfCacheEntry {
        uint8_t key[PROCESS_MAPPING_KEY_MAX];
        size_t key_size;
        int r; /* 0: elf valid; else the probe's error */
        PythonElf elf;
        uint64_t used;
} ElfCacheEntry;

typedef struct ProcEntry {
        PythonProcess info;
        bool walked; /* described to BPF; false: its runtime is one profd cannot walk (counted once) */
        struct profd_python_proc bpf; /* what BPF was given (written again after an exec) */
        struct ProcEntry *next;       /* hash chain */
} ProcEntry;

#define PROC_BUCKETS 1024

struct PythonProcs {
        int map_fd;
        ElfCacheEntry elf_cache[PYTHON_ELF_CACHE_MAX];
        size_t n_elf;
        uint64_t tick;
        ProcEntry *buckets[PROC_BUCKETS];
        size_t n_procs;   /* walked */
        size_t n_entries; /* walked or not walkable */
        uint64_t detect[_PY_DETECT_MAX];
        uint64_t probes, probe_failures;
};

int python_procs_new(int map_fd, PythonProcs **ret)
{
        PythonProcs *pp = calloc(1, sizeof(*pp));

        if (!pp)
                return -ENOMEM;
        pp->map_fd = map_fd;
        *ret = pp;
        return 0;
}

PythonProcs *python_procs_free(PythonProcs *pp)
{
        if (!pp)
                return NULL;
        for (size_t b = 0; b < PROC_BUCKETS; b++)
                for (ProcEntry *e = pp->buckets[b], *n; e; e = n) {
                        n = e->next;
                        free(e);
                }
        free(pp);
        return NULL;
}

static ProcEntry **proc_slot(PythonProcs *pp, pid_t pid)
{
        ProcEntry **s = &pp->buckets[(unsigned)pid % PROC_BUCKETS];

        while (*s && (*s)->info.pid != pid)
                s = &(*s)->next;
        return s;
}

const PythonProcess *python_procs_get(const PythonProcs *pp, pid_t pid)
{
        if (!pp)
                return NULL;
        for (ProcEntry *e = pp->buckets[(unsigned)pid % PROC_BUCKETS]; e; e = e->next)
                if (e->info.pid == pid)
                        return e->walked ? &e->info : NULL;
        return NULL;
}

void python_procs_forget(PythonProcs *pp, pid_t pid)
{
        ProcEntry **s, *e;
        __u32 key = pid;

        if (!pp)
                return;
        s = proc_slot(pp, pid);
        if (!*s)
                return;
        e = *s;
        *s = e->next;
        if (e->walked) {
                pp->n_procs--;
                if (pp->map_fd >= 0)
                        (void)bpf_map_delete_elem(pp->map_fd, &key);
        }
        pp->n_entries--;
        free(e);
}

/* "python3.11", "python3.9d", "libpython3.13.so.1.0" -> 3.11 / 3.9 / 3.13. */
static bool version_from_path(const char *path, unsigned *ret_major, unsigned *ret_minor)
{
        const char *base = strrchr(path, '/'), *p;
        unsigned major, minor;
        int n = 0;

        base = base ? base + 1 : path;
        p = strstr(base, "python");
        if (!p || sscanf(p, "python%u.%u%n", &major, &minor, &n) != 2 || n == 0)
                return false;
        *ret_major = major;
        *ret_minor = minor;
        return true;
}

/* Reads n bytes at the virtual address addr of the file's contents (a symbol's initial value). */
static int read_vaddr(Elf *elf, uint64_t addr, void *buf, size_t n)
{
        const uint8_t *p = python_elf_vaddr_bytes(elf, addr, n);

        if (!p)
                return -ENOENT;
        memcpy(buf, p, n);
        return 0;
}

typedef struct PythonSymbols {
        PythonElf *r;
        uint64_t py_version_addr;
} PythonSymbols;

static int python_symbol(const GElf_Sym *sym, const char *name, void *userdata)
{
        PythonSymbols *ps = userdata;
        PythonElf *r = ps->r;

        if (name[0] != '_' && name[0] != 'P')
                return 0;
        if (strcmp(name, "_PyRuntime") == 0)
                r->runtime = sym->st_value;
        else if (strcmp(name, "_PyEval_EvalFrameDefault") == 0) {
                r->eval = sym->st_value;
                r->eval_size = sym->st_size;
        } else if (strcmp(name, "PyCode_Type") == 0)
                r->code_type = sym->st_value;
        else if (strcmp(name, "PyUnicode_Type") == 0)
                r->str_type = sym->st_value;
        else if (strcmp(name, "Py_Version") == 0 && sym->st_size == 8)
                ps->py_version_addr = sym->st_value;
        else if (strcmp(name, "_Py_NegativeRefcount") == 0)
                r->debug_build = true; /* Py_REF_DEBUG: another object layout */
        return 0;
}

int python_elf_probe(int fd, const char *path, PythonElf *ret)
{
        PythonElf r = {};
        PythonSymbols ps = {.r = &r};
        uint64_t py_version = 0, py_version_addr;
        Elf *elf;
        int res;

        res = runtime_elf_open(fd, &elf);
        if (res < 0)
                return res;
        res = -ENOENT;
        (void)runtime_elf_dynsym_foreach(elf, python_symbol, &ps); /* checked below */
        py_version_addr = ps.py_version_addr;
        if (!r.runtime || !r.eval || !r.eval_size || !r.code_type || !r.str_type)
                goto out;
        /* 3.11+ export their PY_VERSION_HEX; older ones are told by their file name. */
        if (py_version_addr && read_vaddr(elf, py_version_addr, &py_version, sizeof(py_version)) == 0 &&
            (py_version >> 24) == 3) {
                r.major = 3;
                r.minor = (py_version >> 16) & 0xff;
        } else if (!version_from_path(path ?: "", &r.major, &r.minor)) {
                r.major = r.minor = 0;
        }
        /* Optional: without it only the eval function's own symbol marks eval frames. */
        if (python_eval_cold_find(elf, r.eval, r.eval_size, &r.eval_cold, &r.eval_cold_size) < 0)
                r.eval_cold = r.eval_cold_size = 0;
        *ret = r;
        res = 0;
out:
        elf_end(elf);
        return res;
}

/* Worth a look: a file named like the interpreter or its library. */
static bool looks_like_python(const char *path)
{
        const char *base = strrchr(path, '/');

        base = base ? base + 1 : path;
        return strstr(base, "python") != NULL;
}

static int probe_cached(PythonProcs *pp, const Process *p, const ProcMapping *m, const PythonElf **ret)
{
        uint8_t key[PROCESS_MAPPING_KEY_MAX];
        size_t key_size = process_mapping_key(m, key);
        ElfCacheEntry *e = NULL, *oldest = NULL;
        _cleanup_close_ int fd = -1;

        if (key_size == 0)
                return -ENOENT;
        pp->tick++;
        for (size_t i = 0; i < pp->n_elf; i++) {
                ElfCacheEntry *c = &pp->elf_cache[i];

                if (c->key_size == key_size && memcmp(c->key, key, key_size) == 0) {
                        c->used = pp->tick;
                        *ret = &c->elf;
                        return c->r;
                }
                if (!oldest || c->used < oldest->used)
                        oldest = c;
        }
        e = pp->n_elf < PYTHON_ELF_CACHE_MAX ? &pp->elf_cache[pp->n_elf++] : oldest;
        *e = (ElfCacheEntry){.key_size = key_size, .used = pp->tick};
        memcpy(e->key, key, key_size);
        pp->probes++;
        fd = process_open_mapping(p, m);
        e->r = fd < 0 ? fd : python_elf_probe(fd, m->path, &e->elf);
        if (e->r < 0 && e->r != -ENOENT) {
                pp->probe_failures++;
                log_debug_errno(e->r, "Cannot read the symbols of %s (pid %d): %m", m->path, (int)p->pid);
        }
        *ret = &e->elf;
        return e->r;
}

/* Builds the BPF description from the version's offsets. -EINVAL when a member the walk needs is
 * missing or beyond what BPF reads per frame. */
static int describe(const PythonOffsets *o, uint64_t bias, const PythonElf *elf,
                    struct profd_python_proc *ret)
{
        const uint16_t N = PYTHON_OFFSET_NONE;
        struct profd_python_proc d = {
                .runtime = bias + elf->runtime,
                .eval_start = bias + elf->eval,
                .eval_end = bias + elf->eval + elf->eval_size,
                .interpreters_head = o->runtime_interpreters_head,
                .threads_head = o->interp_threads_head,
                .tstate_next = o->tstate_next,
                .tstate_thread_id = o->tstate_thread_id,
                .frame_previous = o->frame_previous,
                .frame_code = o->frame_code,
        };
        PythonFingerprintLayout fl;
        unsigned end = 0;
        int r;

        if (elf->eval_cold_size > 0 && elf->eval_cold_size <= UINT32_MAX) {
                d.eval_cold = bias + elf->eval_cold;
                d.eval_cold_len = (uint32_t)elf->eval_cold_size;
        }

        if (o->tstate_lookup == PYTHON_TSTATE_GILSTATE_CURRENT && o->runtime_tstate_current != N)
                d.tstate_current = d.runtime + o->runtime_tstate_current;
        if (o->tstate_cframe != N && o->cframe_current_frame != N) {
                d.tstate_frame = o->tstate_cframe;
                d.cframe_frame = o->cframe_current_frame;
                d.has_cframe = 1;
        } else {
                d.tstate_frame = o->tstate_frame;
        }
        if (o->line_table == PYTHON_LINE_TABLE_LOCATIONS) {
                d.lasti_kind = PROFD_PY_LASTI_PTR;
                d.frame_lasti = o->frame_prev_instr;
                d.code_adaptive = o->code_code_adaptive;
                if (d.code_adaptive == N)
                        return -EINVAL;
        } else {
                d.lasti_kind = PROFD_PY_LASTI_INT;
                d.frame_lasti = o->frame_lasti;
        }
        if (o->frame_is_entry != N) {
                d.entry_kind = PROFD_PY_ENTRY_IS_ENTRY;
                d.frame_entry = o->frame_is_entry;
        } else if (o->frame_owner_cstack != N && o->frame_owner != N) {
                d.entry_kind = PROFD_PY_ENTRY_SHIM;
                d.frame_entry = o->frame_owner;
                d.owner_cstack = o->frame_owner_cstack;
        } else {
                d.entry_kind = PROFD_PY_ENTRY_EVERY;
        }
        if (d.interpreters_head == N || d.threads_head == N || d.tstate_next == N ||
            d.tstate_thread_id == N || d.tstate_frame == N || d.frame_previous == N || d.frame_code == N ||
            d.frame_lasti == N || d.frame_entry == N)
                return -EINVAL;
        /* Every member BPF reads from a frame lies in one read of frame_size bytes. */
        end = d.frame_previous + 8;
        if (d.frame_code + 8u > end)
                end = d.frame_code + 8u;
        if (d.frame_lasti + 8u > end)
                end = d.frame_lasti + 8u;
        if (d.frame_entry + 1u > end)
                end = d.frame_entry + 1u;
        if (end > PROFD_PY_FRAME_READ_MAX)
                return -EINVAL;
        d.frame_size = end;
        r = python_code_fingerprint_layout(o, &fl);
        if (r < 0)
                return r;
        d.fp_start = fl.start;
        d.fp_len = fl.len;
        d.fp_u32 = fl.u32;
        memcpy(d.fp_words, fl.words, sizeof(d.fp_words));
        *ret = d;
        return 0;
}

/* Never from a file on FUSE (remote-memory.h): _PyRuntime lies in the interpreter's data,
 * which may be such a file's pages. */
static int read_remote(pid_t pid, uint64_t addr, void *buf, size_t n)
{
        _cleanup_(remote_memory_freep) RemoteMemory *m = NULL;
        int r = remote_memory_open(pid, &m);

        return r < 0 ? r : remote_memory_read(m, addr, buf, n);
}

/* The offsets of a process's runtime: the table's entry, or its own _Py_DebugOffsets (3.13+). */
static int offsets_for(const Process *p, const PythonElf *elf, uint64_t bias, PythonOffsets *ret,
                       PyDetectResult *ret_reason)
{
        const PythonOffsets *o;

        if (elf->major == 0) {
                *ret_reason = PY_DETECT_NO_VERSION;
                return -EPROTONOSUPPORT;
        }
        if (elf->debug_build) {
                /* Every object has two more pointers: none of the offsets hold. */
                *ret_reason = PY_DETECT_UNSUPPORTED;
                return -EPROTONOSUPPORT;
        }
        o = python_offsets_find(elf->major, elf->minor);
        if (o) {
                *ret = *o;
                return 0;
        }
        if (elf->major == 3 && elf->minor >= 13) {
                _cleanup_free_ uint8_t *buf = malloc(PYTHON_DEBUG_OFFSETS_READ);
                int r;

                if (!buf)
                        return -ENOMEM;
                r = read_remote(p->pid, bias + elf->runtime, buf, PYTHON_DEBUG_OFFSETS_READ);
                if (r < 0) {
                        *ret_reason = PY_DETECT_READ_FAILED;
                        return r;
                }
                r = python_offsets_from_debug(buf, PYTHON_DEBUG_OFFSETS_READ, ret);
                if (r < 0) {
                        *ret_reason = r == -EPROTONOSUPPORT ? PY_DETECT_UNSUPPORTED : PY_DETECT_BAD_OFFSETS;
                        return r;
                }
                return 0;
        }
        *ret_reason = PY_DETECT_UNSUPPORTED;
        return -EPROTONOSUPPORT;
}

void python_procs_note(PythonProcs *pp, const Process *p)
{
        const PythonElf *elf = NULL;
        const ProcMapping *m = NULL;
        struct profd_python_proc d;
        PyDetectResult reason = PY_DETECT_FOUND;
        PythonOffsets o;
        ProcEntry **slot, *e;
        __u32 key = p->pid;
        int r;

        if (!pp)
                return;
        for (size_t i = 0; i < p->n_mappings; i++) {
                const ProcMapping *c = &p->mappings[i];

                if (!c->executable || !c->file || !c->bias_known || !looks_like_python(c->path))
                        continue;
                if (probe_cached(pp, p, c, &elf) == 0) {
                        m = c;
                        break;
                }
        }
        slot = proc_slot(pp, p->pid);
        if (!m) {
                if (*slot)
                        python_procs_forget(pp, p->pid); /* exec'd into something else */
                return;
        }
        /* Known already, same process, same runtime: nothing to read again (or it was counted as
         * one profd cannot walk). BPF forgets a pid at exec: an exec of the same interpreter at the
         * same address (no ASLR) needs the entry written again. */
        if (*slot && (*slot)->info.start_time == p->start_time &&
            (*slot)->info.code_type == m->load_bias + elf->code_type) {
                if ((*slot)->walked && pp->map_fd >= 0)
                        (void)bpf_map_update_elem(pp->map_fd, &key, &(*slot)->bpf, BPF_ANY);
                return;
        }
        if (*slot)
                python_procs_forget(pp, p->pid);
        if (pp->n_entries >= PROFD_PY_MAX_PROCS) {
                pp->detect[PY_DETECT_MAP_FULL]++;
                return;
        }
        e = calloc(1, sizeof(*e));
        if (!e)
                return;
        e->info = (PythonProcess){
                .pid = p->pid,
                .start_time = p->start_time,
                .code_type = m->load_bias + elf->code_type,
                .str_type = m->load_bias + elf->str_type,
        };
        e->next = pp->buckets[(unsigned)p->pid % PROC_BUCKETS];
        pp->buckets[(unsigned)p->pid % PROC_BUCKETS] = e;
        pp->n_entries++;

        r = offsets_for(p, elf, m->load_bias, &o, &reason);
        if (r >= 0) {
                r = describe(&o, m->load_bias, elf, &d);
                if (r < 0)
                        reason = PY_DETECT_BAD_OFFSETS;
        }
        if (r < 0) {
                pp->detect[reason]++;
                log_debug("pid %d runs CPython %u.%u from %s: no Python frames (%s)", (int)p->pid,
                          elf->major, elf->minor, m->path, detect_names[reason]);
                return;
        }
        if (pp->map_fd >= 0 && bpf_map_update_elem(pp->map_fd, &key, &d, BPF_ANY) < 0) {
                r = -errno;
                pp->detect[r == -E2BIG || r == -ENOMEM ? PY_DETECT_MAP_FULL : PY_DETECT_MAP_ERROR]++;
                log_debug_errno(r, "Cannot describe CPython of pid %d to BPF: %m", (int)p->pid);
                return;
        }
        e->info.offsets = o;
        e->bpf = d;
        e->walked = true;
        pp->n_procs++;
        pp->detect[PY_DETECT_FOUND]++;
        log_debug("pid %d runs CPython %u.%u (%s): walking its frames", (int)p->pid, o.major, o.minor,
                  m->path);
}

void python_procs_write_metrics(const PythonProcs *pp, FILE *f)
{
        if (!pp)
                return;
        metric_gauge(f, "profd_python_processes", "Live processes whose Python frames BPF walks.",
                     pp->n_procs);
        metric_labelled(f, "profd_python_detections_total", "counter",
                        "CPython runtimes found in processes, by outcome.", "outcome", detect_names,
                        pp->detect, _PY_DETECT_MAX);
        metric_labelled(
                f, "profd_python_file_probes_total", "counter",
                "Mapped files whose symbols were read to find a CPython runtime, and failures to read "
                "them.",
                "result", (const char *const[]){"read", "failed"},
                (const uint64_t[]){pp->probes - pp->probe_failures, pp->probe_failures}, 2);
}
