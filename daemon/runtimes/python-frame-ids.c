/* SPDX-License-Identifier: GPL-2.0-only */
#include "runtimes/python-frame-ids.h"

#include <errno.h>
#include <stdlib.h>

#include "util/hash.h"
#include "util/metrics-writer.h"

/* Id i lives in slot (i - 1) % max: a new id takes the slot of the one given max ids before,
 * which is forgotten then (first in, first out). */
typedef struct Slot {
        uint64_t id; /* 0: empty */
        uint64_t code;
        uint32_t fp;
        uint32_t next; /* slot + 1 of the next in its bucket; 0: end */
} Slot;

struct PythonFrameIds {
        Slot *slots;
        uint32_t *buckets; /* slot + 1 of the bucket's first; 0: empty */
        size_t max, n_buckets;
        uint64_t next_id;
        uint64_t n_interned, n_forgotten;
};

int python_frame_ids_new(size_t max, PythonFrameIds **ret)
{
        PythonFrameIds *ids = calloc(1, sizeof(*ids));

        if (!ids)
                return -ENOMEM;
        ids->max = max ?: PYTHON_FRAME_IDS_MAX;
        if (ids->max > UINT32_MAX - 1)
                ids->max = UINT32_MAX - 1;
        for (ids->n_buckets = 64; ids->n_buckets < ids->max; ids->n_buckets *= 2)
                ;
        /* calloc: pages are touched only as slots are used. */
        ids->slots = calloc(ids->max, sizeof(Slot));
        ids->buckets = calloc(ids->n_buckets, sizeof(uint32_t));
        if (!ids->slots || !ids->buckets) {
                python_frame_ids_free(ids);
                return -ENOMEM;
        }
        ids->next_id = 1;
        *ret = ids;
        return 0;
}

PythonFrameIds *python_frame_ids_free(PythonFrameIds *ids)
{
        if (!ids)
                return NULL;
        free(ids->slots);
        free(ids->buckets);
        return mfree(ids);
}

static size_t bucket_of(const PythonFrameIds *ids, uint64_t code, uint32_t fp)
{
        return hash_mix64(code ^ ((uint64_t)fp << 47 | fp)) & (ids->n_buckets - 1);
}

static void unlink_slot(PythonFrameIds *ids, uint32_t slot)
{
        Slot *s = &ids->slots[slot];
        uint32_t *p = &ids->buckets[bucket_of(ids, s->code, s->fp)];

        while (*p && *p != slot + 1) /* bounded by the bucket's length */
                p = &ids->slots[*p - 1].next;
        if (*p)
                *p = s->next;
        *s = (Slot){};
}

uint64_t python_frame_ids_intern(PythonFrameIds *ids, uint64_t code, uint32_t fp)
{
        size_t b;
        uint32_t slot;

        if (!ids || fp == 0)
                return 0;
        b = bucket_of(ids, code, fp);
        for (uint32_t i = ids->buckets[b]; i; i = ids->slots[i - 1].next)
                if (ids->slots[i - 1].code == code && ids->slots[i - 1].fp == fp)
                        return ids->slots[i - 1].id;
        if (ids->next_id > PYTHON_FRAME_ID_MAX)
                return 0;
        slot = (uint32_t)((ids->next_id - 1) % ids->max);
        if (ids->slots[slot].id) {
                unlink_slot(ids, slot);
                ids->n_forgotten++;
        }
        ids->slots[slot] = (Slot){.id = ids->next_id++, .code = code, .fp = fp, .next = ids->buckets[b]};
        ids->buckets[b] = slot + 1;
        ids->n_interned++;
        return ids->slots[slot].id;
}

int python_frame_ids_get(const PythonFrameIds *ids, uint64_t id, uint64_t *ret_code, uint32_t *ret_fp)
{
        const Slot *s;

        if (!ids || id == 0)
                return -ENOENT;
        s = &ids->slots[(id - 1) % ids->max];
        if (s->id != id)
                return -ENOENT;
        *ret_code = s->code;
        *ret_fp = s->fp;
        return 0;
}

size_t python_frame_ids_bytes(const PythonFrameIds *ids)
{
        size_t used;

        if (!ids)
                return 0;
        used = ids->n_interned < ids->max ? ids->n_interned : ids->max;
        return used * sizeof(Slot) + ids->n_buckets * sizeof(uint32_t);
}

void python_frame_ids_write_metrics(const PythonFrameIds *ids, FILE *f)
{
        if (!ids)
                return;
        metric_counter(f, "profd_python_frame_ids_total",
                       "Python code objects (address and fingerprint) given an id for the daemon's stacks.",
                       ids->n_interned);
        metric_counter(f, "profd_python_frame_ids_forgotten_total",
                       "Ids forgotten, oldest first, to stay within the table's bound; frames that still "
                       "carry one stay unnamed.",
                       ids->n_forgotten);
        metric_gauge(f, "profd_python_frame_ids_bytes", "Memory of the Python frame id table.",
                     python_frame_ids_bytes(ids));
}
