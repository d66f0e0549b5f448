/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "output/frame-names.h"
#include "runtimes/hotspot-frames.h"
#include "runtimes/python-stack.h"
#include "runtimes/v8-stack.h"
#include "util/metrics-writer.h"

/* Processes read again in one drain for frames outside their snapshot: bounds the /proc reads a
 * drain does (each is ~0.1 ms); the rest wait for the next drain and are counted. */
#define NOTE_MAX_REFRESHES 32

static struct {
        uint64_t refreshes, refreshes_deferred, refresh_errors;
} stats;

const Process *frame_names_process(ProcessTable *procs, pid_t pid)
{
        return procs ? process_table_find(procs, pid) : NULL;
}

size_t frame_names_build_id(const ProcMapping *m, const uint8_t **ret)
{
        const char *go;

        if (m->build_id_size > 0) {
                *ret = m->build_id;
                return m->build_id_size;
        }
        go = process_mapping_go_build_id(m);
        *ret = (const uint8_t *)go;
        return go ? strlen(go) : 0;
}

/* The one exact-pc rule, for drained records and aggregated stacks alike: exact is per frame, NULL
 * for "frame 0 only". */
static bool frame_exact(const uint8_t *exact, uint32_t i)
{
        /* With kernel frames on top, the user "leaf" is where the thread entered the kernel: an
         * exact pc, not a return address. So is the pc a signal interrupted (restored from the
         * signal frame). */
        return i == 0 || (exact && exact[i]);
}

void frame_locate_user(const Process *p, const Stack *user, uint32_t i, FrameName *ret)
{
        uint64_t addr = user->frames[i];

        *ret = (FrameName){.kind = FRAME_USER, .address = addr, .exact = frame_exact(user->exact, i)};
        if (python_frame_is(addr)) {
                ret->kind = FRAME_PYTHON;
                return;
        }
        if (hotspot_frame_is(addr)) {
                ret->kind = FRAME_RUNTIME;
                ret->runtime = SYM_RUNTIME_HOTSPOT;
                return;
        }
        if (v8_frame_is(addr)) {
                ret->kind = FRAME_RUNTIME;
                ret->runtime = SYM_RUNTIME_V8;
                return;
        }
        ret->mapping = p ? process_find_mapping(p, ret->exact ? addr : addr - 1) : NULL;
        if (!ret->mapping) {
                /* No mapping known: keep the address visible rather than dropping the frame. */
                ret->kind = FRAME_UNMAPPED;
                snprintf(ret->placeholder_name, sizeof(ret->placeholder_name), "[unknown] 0x%" PRIx64, addr);
                ret->placeholder =
                        (SymFrame){.name = ret->placeholder_name, .system_name = ret->placeholder_name};
                ret->res = (SymResult){.frames = &ret->placeholder, .n_frames = 1};
        }
}

void frame_locate_kernel(const Stack *kernel, uint32_t i, FrameName *ret)
{
        *ret = (FrameName){.kind = FRAME_KERNEL, .address = kernel->frames[i], .exact = i == 0};
}

int frame_name_resolve(Symbolizer *sym, const Process *p, FrameName *f)
{
        uint64_t lookup = f->exact ? f->address : f->address - 1;
        const uint8_t *bid;
        int r;

        switch (f->kind) {
        case FRAME_KERNEL:
                return symbolizer_kernel(sym, lookup, &f->res);
        case FRAME_PYTHON:
                /* Unnamed (never read while the process ran): a "[python] 0xCODE" placeholder. */
                (void)symbolizer_python(sym, p, f->address, &f->res);
                return 0;
        case FRAME_RUNTIME:
                return symbolizer_runtime(sym, f->runtime, p, f->address, &f->res);
        case FRAME_UNMAPPED:
                /* Points into f itself, so it follows a copied FrameName. */
                f->res = (SymResult){.frames = &f->placeholder, .n_frames = 1};
                return 0;
        case FRAME_USER:
                break;
        }
        r = symbolizer_user(sym, p, f->mapping, lookup, &f->res);
        if (r < 0)
                return r;
        /* Read, no symbol, known by its build ID: the frame keeps its address (and the mapping its
         * offset and build ID) and no made-up name, so whoever has the debug file can name it.
         * Otherwise the placeholder ("[unknown] PATH+0xOFF") says where it was: without a build ID
         * nothing tells which file ran, and a file profd could not read now may not be the one
         * at the path (go tool pprof would read that one, checking no build ID, and waits forever
         * if it is a FIFO). */
        f->left_unnamed =
                !f->res.symbolized && f->res.no_symbol && frame_names_build_id(f->mapping, &bid) > 0;
        return 0;
}

int frame_name_user(Symbolizer *sym, const Process *p, const Stack *user, uint32_t i, FrameName *ret)
{
        frame_locate_user(p, user, i, ret);
        return frame_name_resolve(sym, p, ret);
}

int frame_name_kernel(Symbolizer *sym, const Stack *kernel, uint32_t i, FrameName *ret)
{
        frame_locate_kernel(kernel, i, ret);
        return frame_name_resolve(sym, NULL, ret);
}

/* Whether a frame of r lies outside every mapping p is known with (Python frames have none). */
static bool has_unmapped_frame(const Process *p, const SampleRecord *r)
{
        for (uint32_t i = 0; i < r->n_user; i++) {
                uint64_t a = r->user_frames[i];
                if (!python_frame_is(a) && !hotspot_frame_is(a) && !v8_frame_is(a) &&
                    !process_find_mapping(p, frame_exact(r->user_exact, i) ? a : a - 1))
                        return true;
        }
        return false;
}

void frame_names_note_interval(ProcessTable *procs, uint64_t start_ns, const SampleRecord *records, size_t n)
{
        unsigned refreshed = 0;
        pid_t last = 0;

        if (!procs)
                return;
        for (size_t k = 0; k < n; k++) {
                const SampleRecord *r = &records[k];
                const Process *p;
                Process *q;

                if (r->n_user == 0 || r->pid == 0 || (pid_t)r->pid == last)
                        continue;
                p = process_table_find(procs, (pid_t)r->pid);
                /* Unknown processes are read by whoever first needs them; exited ones keep their
                 * last snapshot; one read since the interval began already saw its mappings. */
                if (!p || p->exited_ns || p->checked_ns >= start_ns || !has_unmapped_frame(p, r))
                        continue;
                last = (pid_t)r->pid;
                if (refreshed >= NOTE_MAX_REFRESHES) {
                        stats.refreshes_deferred++;
                        continue;
                }
                refreshed++;
                if (process_table_refresh(procs, (pid_t)r->pid, &q) < 0)
                        stats.refresh_errors++;
                else
                        stats.refreshes++;
        }
}

void frame_names_write_metrics(FILE *f)
{
        static const char *const names[] = {"refreshed", "deferred", "error"};
        uint64_t v[] = {stats.refreshes, stats.refreshes_deferred, stats.refresh_errors};

        metric_labelled(f, "profd_frame_names_process_rereads_total", "counter",
                        "Processes whose maps were read again at a drain because a sampled frame lay "
                        "outside every mapping known for them, by outcome (deferred: over the per-drain "
                        "bound, tried at the next drain).",
                        "outcome", names, v, ELEMENTSOF(v));
}
