/* SPDX-License-Identifier: GPL-2.0-only */
/* Where placed tables live: the 4 MiB BPF shards and their bump pointers, the unwind rules all
 * tables share, the split of a table into segments that each fit a shard, and the references
 * processes hold on a table. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "unwind/pool-storage.h"
#include "util/hash.h"
#include "util/time-util.h"

int pool_write_config(TablePool *p, uint32_t active)
{
        struct profd_unwind_config c = {.active = active, .generation = p->generation};
        uint32_t zero = 0;

        return bpf_map_update_elem(p->config_fd, &zero, &c, BPF_ANY) < 0 ? -errno : 0;
}

/* unwind_procs_gen stays mapped (one page): a bump is an atomic add, not a bpf() call per process
 * write. BPF_F_MMAPABLE arrays are 5.5+, as the shards, which are mapped the same way. */
int pool_procs_gen_map(TablePool *p)
{
        void *m = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE, MAP_SHARED,
                       p->procs_gen_fd, 0);

        if (m == MAP_FAILED)
                return -errno;
        p->procs_gen = m;
        return 0;
}

void pool_procs_gen_unmap(TablePool *p)
{
        if (p->procs_gen)
                (void)munmap(p->procs_gen, (size_t)sysconf(_SC_PAGESIZE));
        p->procs_gen = NULL;
}

/* An unwind_procs entry was written or deleted (called after the change): BPF's per-CPU copy of
 * one must not be used any more. Atomic: the exec and exit hooks add to the same value. */
static void procs_changed(TablePool *p)
{
        if (p->procs_gen)
                (void)__atomic_add_fetch(&p->procs_gen->gen, 1, __ATOMIC_SEQ_CST);
}

int pool_procs_write(TablePool *p, uint32_t pid, const struct profd_unwind_proc *info, uint64_t flags)
{
        int r = bpf_map_update_elem(p->procs_fd, &pid, info, flags) < 0 ? -errno : 0;

        procs_changed(p);
        return r;
}

void pool_procs_delete(TablePool *p, uint32_t pid)
{
        (void)bpf_map_delete_elem(p->procs_fd, &pid);
        procs_changed(p);
}

/* Pool memory may now hold another table than before: BPF's row cache must not trust it. */
void pool_new_generation(TablePool *p)
{
        p->generation++;
        (void)pool_write_config(p, p->active);
}

void pool_shard_drop(TablePool *p, uint32_t slot)
{
        Shard *s = &p->shards[slot];

        if (s->fd < 0)
                return;
        (void)bpf_map_delete_elem(p->shards_fd, &slot);
        close(s->fd);
        *s = (Shard){.fd = -1};
        p->n_shards--;
        pool_new_generation(p);
}

uint64_t table_id_hash(const uint8_t *id, size_t id_size)
{
        return hash_fnv1a(HASH_FNV1A_INIT, id, id_size);
}

PoolTable *table_pool_find(TablePool *p, const uint8_t *id, size_t id_size)
{
        uint64_t h;

        if (!p || !id)
                return NULL;
        h = table_id_hash(id, id_size);
        for (size_t i = 0; i < p->n_tables; i++) {
                PoolTable *t;

                if (p->table_hashes[i] != h)
                        continue;
                t = p->tables[i];
                if (t->id_size == id_size && memcmp(t->id, id, id_size) == 0)
                        return t;
        }
        return NULL;
}

void table_pool_ref(PoolTable *t)
{
        if (t)
                t->refs++;
}

void table_pool_release(TablePool *p, PoolTable *t)
{
        if (!t || t->refs == 0)
                return;
        if (--t->refs == 0)
                t->released_ns = now_ns(CLOCK_MONOTONIC);
}

/* A rule's 12 bytes folded into one hash key; equality is checked on the whole rule. */
static uint64_t rule_key(const struct profd_unwind_rule *r)
{
        uint64_t k;
        uint32_t hi;

        memcpy(&k, r, sizeof(k));
        memcpy(&hi, (const uint8_t *)r + sizeof(k), sizeof(hi));
        return k ^ ((uint64_t)hi * 0xc2b2ae3d27d4eb4fULL);
}

/* Global index of rule r, adding it to the BPF rule list if new. */
int pool_rule_intern(TablePool *p, const struct profd_unwind_rule *r, uint16_t *ret)
{
        uint64_t k = rule_key(r), h = k * 0x9e3779b97f4a7c15ULL;

        for (uint32_t i = (h >> 40) % RULE_HASH_SIZE;; i = (i + 1) % RULE_HASH_SIZE) {
                int32_t idx = p->rule_hash[i];

                if (idx >= 0 && memcmp(&p->rules[idx], r, sizeof(*r)) == 0) {
                        *ret = idx;
                        return 0;
                }
                if (idx < 0) {
                        uint32_t n = p->n_rules;

                        if (n >= PROFD_POOL_MAX_RULES)
                                return -ENOSPC;
                        if (bpf_map_update_elem(p->rules_fd, &n, r, BPF_ANY) < 0)
                                return -errno;
                        p->rules[n] = *r;
                        p->rule_hash[i] = n;
                        p->n_rules++;
                        *ret = n;
                        return 0;
                }
        }
}

int pool_shard_create(TablePool *p, uint32_t *ret_slot)
{
        LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);
        uint32_t slot;
        Shard *s;
        int r;

        for (slot = 0; slot < PROFD_POOL_MAX_SHARDS; slot++)
                if (p->shards[slot].fd < 0)
                        break;
        if (slot >= PROFD_POOL_MAX_SHARDS || p->n_shards >= p->max_shards)
                return -ENOSPC;

        s = &p->shards[slot];
        s->fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "profd_shard", sizeof(uint32_t), PROFD_SHARD_BYTES, 1,
                               &opts);
        if (s->fd < 0) {
                r = -errno;
                s->fd = -1;
                return r;
        }
        p->n_shards++;
        /* Visible to BPF only once it is in the outer map; nothing points into it yet. */
        if (bpf_map_update_elem(p->shards_fd, &slot, &s->fd, BPF_ANY) < 0) {
                r = -errno;
                pool_shard_drop(p, slot);
                return r;
        }
        *ret_slot = slot;
        return 0;
}

/* A shard is mapped into profd only while a segment is written or copied: the kernel maps every
 * page of a BPF array at mmap() (remap_vmalloc_range), so a shard kept mapped was 4 MiB of profd's
 * RSS from its creation, and the pool's limit (256 MiB by default) a bound on RSS as well. */
int pool_shard_map(TablePool *p, uint32_t slot, uint32_t offset, uint32_t words, ShardWindow *ret)
{
        uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), start = (uint64_t)offset * sizeof(uint32_t),
                 end = start + (uint64_t)words * sizeof(uint32_t), first = start & ~(page - 1),
                 last = (end + page - 1) & ~(page - 1);
        void *m;

        if (end > PROFD_SHARD_BYTES || last == first)
                return -EINVAL;
        m = mmap(NULL, last - first, PROT_READ | PROT_WRITE, MAP_SHARED, p->shards[slot].fd, (off_t)first);
        if (m == MAP_FAILED)
                return -errno;
        *ret = (ShardWindow){
                .base = m, .len = last - first, .words = (uint32_t *)((uint8_t *)m + (start - first))};
        p->mapped_bytes += ret->len;
        return 0;
}

void pool_shard_unmap(TablePool *p, ShardWindow *w)
{
        if (!w->base)
                return;
        munmap(w->base, w->len);
        p->mapped_bytes -= w->len;
        *w = (ShardWindow){};
}

/* Shards for tables: all but one, which compaction needs as its target (a one-shard pool
 * cannot compact, only evict). */
unsigned pool_usable_shards(const TablePool *p)
{
        return p->max_shards >= 2 ? p->max_shards - 1 : 1;
}

/* A shard with room for words at its bump pointer; creates one while under the limit, keeping
 * one shard's worth for compaction. */
int pool_shard_find_space(TablePool *p, uint32_t words, uint32_t *ret_slot)
{
        for (uint32_t i = 0; i < PROFD_POOL_MAX_SHARDS; i++) {
                Shard *s = &p->shards[i];

                if (s->fd >= 0 && PROFD_SHARD_WORDS - s->used >= words) {
                        *ret_slot = i;
                        return 0;
                }
        }
        if (p->n_shards < pool_usable_shards(p))
                return pool_shard_create(p, ret_slot);
        return -ENOSPC;
}

void pool_segment_free_space(TablePool *p, const Segment *g)
{
        Shard *s = &p->shards[g->shard];

        s->live -= g->words;
        if (s->live == 0)
                s->used = 0; /* nothing references the shard: start it over */
}

/* Words of the segment of pages [first, first + n): its page index and its rows. */
static uint64_t segment_words(const UnwindTable *t, uint32_t first, uint32_t n)
{
        return (uint64_t)n + 1 + (t->page_index[first + n] - t->page_index[first]);
}

/* Splits t into segments of whole pages that each fit a shard (usually one segment). */
int pool_plan_segments(const UnwindTable *t, Segment **ret, size_t *ret_n)
{
        _cleanup_free_ Segment *v = NULL;
        size_t n = 0;

        v = calloc(t->n_pages, sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (uint32_t first = 0; first < t->n_pages;) {
                uint32_t k = 1;

                if (segment_words(t, first, 1) > PROFD_SHARD_WORDS)
                        return -EFBIG; /* cannot happen: a page has at most 65536 rows */
                while (first + k < t->n_pages && segment_words(t, first, k + 1) <= PROFD_SHARD_WORDS)
                        k++;
                v[n++] = (Segment){.first_page = first, .n_pages = k, .words = segment_words(t, first, k)};
                first += k;
        }
        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

void pool_segment_write(const UnwindTable *t, const uint16_t *remap, const Segment *g, uint32_t *dst)
{
        uint32_t row0 = t->page_index[g->first_page],
                 n_rows = t->page_index[g->first_page + g->n_pages] - row0;

        for (uint32_t i = 0; i <= g->n_pages; i++)
                dst[i] = t->page_index[g->first_page + i] - row0;
        for (uint32_t i = 0; i < n_rows; i++) {
                const struct profd_unwind_row *row = &t->rows[row0 + i];
                uint16_t rule = row->rule < t->n_rules ? remap[row->rule] : 0;

                dst[g->n_pages + 1 + i] = (uint32_t)row->pc_low | ((uint32_t)rule << 16);
        }
}
