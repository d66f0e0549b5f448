/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "output/folded.h" /* via aggregator.h -> sampler.h: bpf/profd-sample.h */
#include "output/frame-names.h"
#include "output/stack-markers.h"
#include "util/array.h"
#include "util/hash.h"
#include "util/utf8.h"

/* Samples symbolized per step: a few hundred addresses, well under a millisecond once the
 * symbolizer's per-executable caches are warm, so requests and drains are not held up. */
#define FOLDED_SAMPLES_PER_STEP 32
/* Longest frame name kept; longer (template-heavy C++) names are cut with "...". */
#define FOLDED_MAX_NAME 1024

typedef struct Buf {
        char *p;
        size_t n, cap;
} Buf;

static int buf_reserve(Buf *b, size_t more)
{
        return ARRAY_GROW(b->p, b->cap, b->n + more + 1, 256);
}

/* Appends a frame name made safe for the format: ';' separates frames and the last space comes
 * before the count, so ';' and control characters become '_' (spaces inside names are fine). */
/* Folded lines are UTF-8 text: bytes that are not valid UTF-8 and control characters become
 * \xNN (as in pprof), ';' (the frame separator) becomes '_', and a name is cut at a character
 * boundary. */
static int buf_add_name(Buf *b, const char *s, const char *suffix)
{
        _cleanup_free_ char *escaped = NULL;
        size_t n, sl = suffix ? strlen(suffix) : 0;
        bool cut;
        int r;

        if (utf8_escape(s, &escaped) < 0)
                return -ENOMEM;
        if (escaped)
                s = escaped;
        n = strnlen(s, FOLDED_MAX_NAME);
        cut = s[n] != 0;
        while (cut && n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
                n--;
        r = buf_reserve(b, n + sl + 4);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                b->p[b->n++] = s[i] == ';' ? '_' : s[i];
        if (cut) {
                memcpy(b->p + b->n, "...", 3);
                b->n += 3;
        }
        if (sl) {
                memcpy(b->p + b->n, suffix, sl);
                b->n += sl;
        }
        b->p[b->n] = 0;
        return 0;
}

/* Frames of one sample collected leaf first, each a NUL-terminated name in `names`. */
typedef struct Frames {
        Buf names;
        size_t *offs;
        size_t n, cap;
} Frames;

static int frames_push(Frames *f, const char *name, const char *suffix)
{
        int r = ARRAY_GROW(f->offs, f->cap, f->n + 1, 64);
        if (r < 0)
                return r;
        f->offs[f->n++] = f->names.n;
        r = buf_add_name(&f->names, name, suffix);
        if (r < 0)
                return r;
        f->names.n++; /* keep the NUL as separator */
        return 0;
}

typedef struct Slot {
        char *line;
        uint64_t hash;
        uint64_t count;
} Slot;

struct FoldedJob {
        ProfileWindow *w;
        Symbolizer *sym;
        ProcessTable *procs;
        size_t next;
        uint64_t total;

        Slot *slots; /* open addressing */
        size_t n_slots, n_used;
        FoldedStack *sorted;
        size_t n_sorted;

        Frames frames;
        Buf line;
};

static int slots_grow(FoldedJob *j)
{
        size_t n = j->n_slots ? j->n_slots * 2 : 1024;
        Slot *s = calloc(n, sizeof(Slot));
        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < j->n_slots; i++) {
                if (!j->slots[i].line)
                        continue;
                size_t k = j->slots[i].hash & (n - 1);
                while (s[k].line)
                        k = (k + 1) & (n - 1);
                s[k] = j->slots[i];
        }
        free(j->slots);
        j->slots = s;
        j->n_slots = n;
        return 0;
}

static int add_line(FoldedJob *j, const char *line, size_t len, uint64_t count)
{
        uint64_t h = hash_fnv1a(HASH_FNV1A_INIT, line, len);
        int r;

        if ((j->n_used + 1) * 2 > j->n_slots && (r = slots_grow(j)) < 0)
                return r;
        size_t k = h & (j->n_slots - 1);
        while (j->slots[k].line) {
                if (j->slots[k].hash == h && strcmp(j->slots[k].line, line) == 0) {
                        j->slots[k].count += count;
                        return 0;
                }
                k = (k + 1) & (j->n_slots - 1);
        }
        char *copy = strndup(line, len);
        if (!copy)
                return -ENOMEM;
        j->slots[k] = (Slot){.line = copy, .hash = h, .count = count};
        j->n_used++;
        return 0;
}

/* The names of a frame, innermost (inlined) first, as the one naming path gives them
 * (frame-names.h): a frame left unnamed for pprof prints its placeholder here. */
static int push_named(FoldedJob *j, const FrameName *f, const char *suffix)
{
        if (f->res.n_frames == 0)
                return frames_push(&j->frames, "[unknown]", suffix);
        for (size_t i = 0; i < f->res.n_frames; i++) {
                int r = frames_push(&j->frames, f->res.frames[i].name, suffix);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int fold_sample(FoldedJob *j, const AggSample *s)
{
        FrameName f;
        int r = 0;

        j->frames.n = 0;
        j->frames.names.n = 0;

        if (s->kernel)
                for (uint32_t i = 0; i < s->kernel->n; i++)
                        if ((r = frame_name_kernel(j->sym, s->kernel, i, &f)) < 0 ||
                            (r = push_named(j, &f, FOLDED_KERNEL_SUFFIX)) < 0)
                                return r;
        if (s->user) {
                const Process *p = frame_names_process(j->procs, (pid_t)s->pid);
                for (uint32_t i = 0; i < s->user->n; i++)
                        if ((r = frame_name_user(j->sym, p, s->user, i, &f)) < 0 ||
                            (r = push_named(j, &f, NULL)) < 0)
                                return r;
                /* A stack that did not reach the entry point says so with a root-side frame. */
                char why[96];
                if (stack_marker(s->user, why, sizeof(why)) && (r = frames_push(&j->frames, why, NULL)) < 0)
                        return r;
        }

        j->line.n = 0;
        if ((r = buf_add_name(&j->line, s->comm[0] ? s->comm : "[unknown]", NULL)) < 0)
                return r;
        if (s->off_cpu) {
                /* Off-CPU: why it was off CPU splits the graph first. */
                const char *why = s->off_cpu_state == PROFD_OFFCPU_PREEMPTED ? ";[preempted]" : ";[blocked]";
                if ((r = buf_reserve(&j->line, strlen(why) + 1)) < 0)
                        return r;
                memcpy(j->line.p + j->line.n, why, strlen(why) + 1);
                j->line.n += strlen(why);
        }
        for (size_t i = j->frames.n; i-- > 0;) {
                if ((r = buf_reserve(&j->line, 1)) < 0)
                        return r;
                j->line.p[j->line.n++] = ';';
                const char *name = j->frames.names.p + j->frames.offs[i];
                size_t nl = strlen(name);
                if ((r = buf_reserve(&j->line, nl)) < 0)
                        return r;
                memcpy(j->line.p + j->line.n, name, nl + 1);
                j->line.n += nl;
        }
        /* Off-CPU lines weigh their estimated nanoseconds off CPU, CPU lines their samples. */
        return add_line(j, j->line.p, j->line.n, s->off_cpu ? s->off_cpu_ns : s->count);
}

int folded_job_new(ProfileWindow *w, Symbolizer *sym, ProcessTable *procs, FoldedJob **ret)
{
        FoldedJob *j = calloc(1, sizeof(*j));

        if (!j) {
                profile_window_free(w);
                return -ENOMEM;
        }
        j->w = w;
        j->sym = sym;
        j->procs = procs;
        *ret = j;
        return 0;
}

static int cmp_stack(const void *a, const void *b)
{
        return strcmp(((const FoldedStack *)a)->line, ((const FoldedStack *)b)->line);
}

int folded_job_step(FoldedJob *j)
{
        if (j->sorted)
                return 1;
        for (unsigned k = 0; k < FOLDED_SAMPLES_PER_STEP && j->next < j->w->n_samples; k++, j->next++) {
                const AggSample *s = &j->w->samples[j->next];
                int r = fold_sample(j, s);
                if (r < 0)
                        return r;
                j->total += s->off_cpu ? s->off_cpu_ns : s->count;
        }
        if (j->next < j->w->n_samples)
                return 0;

        j->sorted = calloc(j->n_used ? j->n_used : 1, sizeof(FoldedStack));
        if (!j->sorted)
                return -ENOMEM;
        for (size_t i = 0; i < j->n_slots; i++)
                if (j->slots[i].line) {
                        j->sorted[j->n_sorted++] = (FoldedStack){.line = TAKE_PTR(j->slots[i].line),
                                                                 .count = j->slots[i].count};
                }
        j->slots = mfree(j->slots);
        j->n_slots = j->n_used = 0;
        qsort_safe(j->sorted, j->n_sorted, sizeof(FoldedStack), cmp_stack);
        /* The window (and its stack references) is no longer needed. */
        j->w = profile_window_free(j->w);
        return 1;
}

size_t folded_job_stacks(FoldedJob *j, const FoldedStack **ret)
{
        *ret = j->sorted;
        return j->n_sorted;
}

uint64_t folded_job_total(const FoldedJob *j)
{
        return j->total;
}

int folded_job_take_text(FoldedJob *j, void **ret_data, size_t *ret_size)
{
        Buf out = {};
        int r;

        if (!j->sorted)
                return -EBUSY;
        if ((r = buf_reserve(&out, 0)) < 0)
                return r;
        for (size_t i = 0; i < j->n_sorted; i++) {
                size_t n = strlen(j->sorted[i].line);
                if ((r = buf_reserve(&out, n + 24)) < 0) {
                        free(out.p);
                        return r;
                }
                memcpy(out.p + out.n, j->sorted[i].line, n);
                out.n += n;
                out.n += (size_t)snprintf(out.p + out.n, 24, " %" PRIu64 "\n", j->sorted[i].count);
        }
        *ret_data = out.p;
        *ret_size = out.n;
        return 0;
}

FoldedJob *folded_job_free(FoldedJob *j)
{
        if (!j)
                return NULL;
        profile_window_free(j->w);
        for (size_t i = 0; i < j->n_slots; i++)
                free(j->slots[i].line);
        free(j->slots);
        for (size_t i = 0; i < j->n_sorted; i++)
                free(j->sorted[i].line);
        free(j->sorted);
        free(j->frames.names.p);
        free(j->frames.offs);
        free(j->line.p);
        free(j);
        return NULL;
}
