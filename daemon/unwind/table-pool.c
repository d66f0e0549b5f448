/* SPDX-License-Identifier: GPL-2.0-only */
/* The unwind-table pool (see table-pool.h and bpf/profd-unwind-pool.h).
 *
 * Memory: shards are 4 MiB BPF arrays created on demand, at most limit / 4 MiB of them, one of
 * which is held back so that a shard can always be compacted. A table segment is bump-allocated
 * inside one shard and never moves except by compaction, which copies a shard's live tables into
 * a fresh shard, repoints every process mapping entry, and only then drops the old shard: BPF
 * never sees a half-moved table. Tables no process uses stay cached until space is needed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/profd-unwind-pool.h"
#include "util/array.h"
#include "util/log.h"
#include "util/metrics-writer.h"
#include "util/time-util.h"
#include "unwind/table-pool.h"

#define RULE_HASH_SIZE (2 * PROFD_POOL_MAX_RULES) /* open addressing, load <= 1/2 */

/* A run of whole pages of one table placed contiguously in one shard: [page index][rows], row
 * indices relative to the segment. */
typedef struct Segment {
        uint32_t shard, offset, words;
        uint32_t first_page, n_pages;
} Segment;

struct PoolTable {
        uint8_t id[UNWIND_TABLE_ID_MAX];
        size_t id_size;
        unsigned refs;
        uint32_t n_pages, n_rows;
        uint64_t base;
        uint64_t released_ns; /* when refs dropped to 0: eviction order */
        Segment *segs;
        size_t n_segs;
};

typedef struct Shard {
        int fd; /* -1: slot free */
        uint32_t *mem;
        uint32_t used; /* bump pointer, words */
        uint32_t live; /* words of tables placed here */
} Shard;

typedef struct Proc {
        pid_t pid;
        PoolMapping *maps;
        size_t n_maps;
        struct profd_unwind_mapping_key *keys;
        size_t n_keys;
} Proc;

struct TablePool {
        int shards_fd, rules_fd, mappings_fd, procs_fd, config_fd, execs_fd;
        int reported_fd; /* the unwinder's "reported unknown pid/pc" times (optional), or -1 */
        uint64_t limit;
        unsigned max_shards; /* including the one kept for compaction */
        unsigned n_shards;
        Shard shards[PROFD_POOL_MAX_SHARDS];

        PoolTable **tables;
        size_t n_tables, cap_tables;

        struct profd_unwind_rule *rules;
        uint32_t n_rules;
        int32_t *rule_hash;

        Proc **procs; /* sorted by pid */
        size_t n_procs, cap_procs;
        uint64_t n_mapping_entries;

        uint32_t generation, active;
        uint64_t placed, evicted, compactions, place_failures, entry_errors;
        uint64_t stale_snapshots;
        uint32_t proc_version; /* last profd_unwind_proc.version written */
};

static int find_map_fd(struct bpf_object *obj, const char *name)
{
        struct bpf_map *m = bpf_object__find_map_by_name(obj, name);

        return m ? bpf_map__fd(m) : -ENOENT;
}

static int pool_write_config(TablePool *p, uint32_t active)
{
        struct profd_unwind_config c = {.active = active, .generation = p->generation};
        uint32_t zero = 0;

        return bpf_map_update_elem(p->config_fd, &zero, &c, BPF_ANY) < 0 ? -errno : 0;
}

/* Pool memory may now hold another table than before: BPF's row cache must not trust it. */
static void pool_new_generation(TablePool *p)
{
        p->generation++;
        (void)pool_write_config(p, p->active);
}

int table_pool_new(struct bpf_object *obj, uint64_t memory_limit, TablePool **ret)
{
        _cleanup_(table_pool_freep) TablePool *p = NULL;
        int r;

        if (!obj || !ret)
                return -EINVAL;
        if (memory_limit < PROFD_SHARD_BYTES)
                return log_error_errno(-ERANGE,
                                       "--unwind-table-memory must be at least %llu bytes (one shard)",
                                       (unsigned long long)PROFD_SHARD_BYTES);

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        for (unsigned i = 0; i < PROFD_POOL_MAX_SHARDS; i++)
                p->shards[i].fd = -1;
        p->shards_fd = p->rules_fd = p->mappings_fd = p->procs_fd = p->config_fd = p->execs_fd = -1;
        p->limit = memory_limit;
        p->max_shards = memory_limit / PROFD_SHARD_BYTES;
        if (p->max_shards > PROFD_POOL_MAX_SHARDS)
                p->max_shards = PROFD_POOL_MAX_SHARDS;

        p->shards_fd = find_map_fd(obj, "unwind_shards");
        p->rules_fd = find_map_fd(obj, "unwind_rules");
        p->mappings_fd = find_map_fd(obj, "unwind_mappings");
        p->procs_fd = find_map_fd(obj, "unwind_procs");
        p->config_fd = find_map_fd(obj, "unwind_config");
        p->execs_fd = find_map_fd(obj, "unwind_execs");
        p->reported_fd = find_map_fd(obj, "unwind_reported");
        if (p->shards_fd < 0 || p->rules_fd < 0 || p->mappings_fd < 0 || p->procs_fd < 0 ||
            p->config_fd < 0 || p->execs_fd < 0)
                return -ENOENT;

        p->rules = calloc(PROFD_POOL_MAX_RULES, sizeof(*p->rules));
        p->rule_hash = malloc(RULE_HASH_SIZE * sizeof(int32_t));
        if (!p->rules || !p->rule_hash)
                return -ENOMEM;
        memset(p->rule_hash, 0xff, RULE_HASH_SIZE * sizeof(int32_t));

        p->active = 1;
        r = pool_write_config(p, 1);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

static void shard_drop(TablePool *p, uint32_t slot)
{
        Shard *s = &p->shards[slot];

        if (s->fd < 0)
                return;
        (void)bpf_map_delete_elem(p->shards_fd, &slot);
        if (s->mem)
                munmap(s->mem, PROFD_SHARD_BYTES);
        close(s->fd);
        *s = (Shard){.fd = -1};
        p->n_shards--;
        pool_new_generation(p);
}

static void proc_free(Proc *pr)
{
        if (!pr)
                return;
        free(pr->maps);
        free(pr->keys);
        free(pr);
}

TablePool *table_pool_free(TablePool *p)
{
        if (!p)
                return NULL;
        p->active = 0;
        if (p->config_fd >= 0)
                (void)pool_write_config(p, 0);
        for (size_t i = 0; i < p->n_procs; i++) {
                for (size_t k = 0; k < p->procs[i]->n_keys; k++)
                        (void)bpf_map_delete_elem(p->mappings_fd, &p->procs[i]->keys[k]);
                uint32_t pid = p->procs[i]->pid;
                (void)bpf_map_delete_elem(p->procs_fd, &pid);
                proc_free(p->procs[i]);
        }
        free(p->procs);
        for (uint32_t i = 0; i < PROFD_POOL_MAX_SHARDS; i++)
                shard_drop(p, i);
        for (size_t i = 0; i < p->n_tables; i++) {
                free(p->tables[i]->segs);
                free(p->tables[i]);
        }
        free(p->tables);
        free(p->rules);
        free(p->rule_hash);
        free(p);
        return NULL;
}

PoolTable *table_pool_find(TablePool *p, const uint8_t *id, size_t id_size)
{
        if (!p || !id)
                return NULL;
        for (size_t i = 0; i < p->n_tables; i++) {
                PoolTable *t = p->tables[i];

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
static int rule_intern(TablePool *p, const struct profd_unwind_rule *r, uint16_t *ret)
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

static int shard_create(TablePool *p, uint32_t *ret_slot)
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
        s->mem = mmap(NULL, PROFD_SHARD_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
        if (s->mem == MAP_FAILED) {
                r = -errno;
                close(s->fd);
                *s = (Shard){.fd = -1};
                return r;
        }
        p->n_shards++;
        /* Visible to BPF only once it is in the outer map; nothing points into it yet. */
        if (bpf_map_update_elem(p->shards_fd, &slot, &s->fd, BPF_ANY) < 0) {
                r = -errno;
                shard_drop(p, slot);
                return r;
        }
        *ret_slot = slot;
        return 0;
}

/* Shards for tables: all but one, which compaction needs as its target (a one-shard pool
 * cannot compact, only evict). */
static unsigned pool_usable_shards(const TablePool *p)
{
        return p->max_shards >= 2 ? p->max_shards - 1 : 1;
}

/* A shard with room for words at its bump pointer; creates one while under the limit, keeping
 * one shard's worth for compaction. */
static int shard_find_space(TablePool *p, uint32_t words, uint32_t *ret_slot)
{
        for (uint32_t i = 0; i < PROFD_POOL_MAX_SHARDS; i++) {
                Shard *s = &p->shards[i];

                if (s->fd >= 0 && PROFD_SHARD_WORDS - s->used >= words) {
                        *ret_slot = i;
                        return 0;
                }
        }
        if (p->n_shards < pool_usable_shards(p))
                return shard_create(p, ret_slot);
        return -ENOSPC;
}

static void segment_free_space(TablePool *p, const Segment *g)
{
        Shard *s = &p->shards[g->shard];

        s->live -= g->words;
        if (s->live == 0)
                s->used = 0; /* nothing references the shard: start it over */
}

static void table_remove(TablePool *p, size_t i)
{
        PoolTable *t = p->tables[i];

        for (size_t k = 0; k < t->n_segs; k++)
                segment_free_space(p, &t->segs[k]);
        free(t->segs);
        free(t);
        p->tables[i] = p->tables[--p->n_tables];
        p->evicted++;
        pool_new_generation(p);
}

/* Evicts the least recently released unreferenced table. Returns false when there is none. */
static bool evict_one(TablePool *p)
{
        size_t best = SIZE_MAX;

        for (size_t i = 0; i < p->n_tables; i++) {
                PoolTable *t = p->tables[i];

                if (t->refs == 0 && (best == SIZE_MAX || t->released_ns < p->tables[best]->released_ns))
                        best = i;
        }
        if (best == SIZE_MAX)
                return false;
        table_remove(p, best);
        return true;
}

static int proc_write_entries(TablePool *p, Proc *pr, const PoolMapping *m, size_t n);

static bool proc_uses_shard(const Proc *pr, uint32_t slot)
{
        for (size_t i = 0; i < pr->n_maps; i++)
                for (size_t k = 0; pr->maps[i].table && k < pr->maps[i].table->n_segs; k++)
                        if (pr->maps[i].table->segs[k].shard == slot)
                                return true;
        return false;
}

/* Moves the live segments of the shard with the most dead space into a fresh shard, repoints
 * all mapping entries, then drops the old shard. */
static int compact_one(TablePool *p)
{
        uint32_t victim = UINT32_MAX, dead_best = 0, fresh, off = 0;
        int r;

        for (uint32_t i = 0; i < PROFD_POOL_MAX_SHARDS; i++) {
                Shard *s = &p->shards[i];

                if (s->fd >= 0 && s->used - s->live > dead_best) {
                        dead_best = s->used - s->live;
                        victim = i;
                }
        }
        if (victim == UINT32_MAX || p->n_shards >= p->max_shards)
                return -ENOSPC;
        r = shard_create(p, &fresh);
        if (r < 0)
                return r;

        for (size_t i = 0; i < p->n_tables; i++)
                for (size_t k = 0; k < p->tables[i]->n_segs; k++) {
                        Segment *g = &p->tables[i]->segs[k];

                        if (g->shard != victim)
                                continue;
                        memcpy(p->shards[fresh].mem + off, p->shards[victim].mem + g->offset,
                               (size_t)g->words * sizeof(uint32_t));
                        g->shard = fresh;
                        g->offset = off;
                        off += g->words;
                }
        p->shards[fresh].used = p->shards[fresh].live = off;

        /* Only processes that map a moved segment need new entries. */
        for (size_t i = 0; i < p->n_procs; i++) {
                Proc *pr = p->procs[i];

                if (!proc_uses_shard(pr, fresh))
                        continue;
                r = proc_write_entries(p, pr, pr->maps, pr->n_maps);
                if (r < 0)
                        p->entry_errors++;
        }
        shard_drop(p, victim);
        p->compactions++;
        return 0;
}

/* Room for words, evicting unreferenced tables and compacting as needed. */
static int pool_alloc(TablePool *p, uint32_t words, uint32_t *ret_slot)
{
        int r;

        for (;;) {
                r = shard_find_space(p, words, ret_slot);
                if (r != -ENOSPC)
                        return r;
                if (evict_one(p))
                        continue;
                r = compact_one(p);
                if (r < 0)
                        return r;
        }
}

/* Words of the segment of pages [first, first + n): its page index and its rows. */
static uint64_t segment_words(const UnwindTable *t, uint32_t first, uint32_t n)
{
        return (uint64_t)n + 1 + (t->page_index[first + n] - t->page_index[first]);
}

/* Splits t into segments of whole pages that each fit a shard (usually one segment). */
static int plan_segments(const UnwindTable *t, Segment **ret, size_t *ret_n)
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

static void segment_write(const UnwindTable *t, const uint16_t *remap, const Segment *g, uint32_t *dst)
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

int table_pool_acquire(TablePool *p, const UnwindTable *t, PoolTable **ret)
{
        _cleanup_free_ uint16_t *remap = NULL;
        _cleanup_free_ PoolTable *pt = NULL;
        size_t placed = 0;
        int r;

        if (!p || !t || !ret)
                return -EINVAL;

        PoolTable *found = table_pool_find(p, t->id, t->id_size);
        if (found) {
                found->refs++;
                *ret = found;
                return 0;
        }
        if (t->n_pages == 0 || !t->page_index || t->page_index[t->n_pages] != t->n_rows) {
                p->place_failures++;
                return -EINVAL;
        }
        if ((uint64_t)t->n_pages + 1 + t->n_rows > (uint64_t)pool_usable_shards(p) * PROFD_SHARD_WORDS) {
                p->place_failures++;
                return -ENOSPC;
        }

        remap = calloc(t->n_rules ? t->n_rules : 1, sizeof(uint16_t));
        pt = calloc(1, sizeof(*pt));
        if (!remap || !pt)
                return -ENOMEM;
        for (uint32_t i = 0; i < t->n_rules; i++) {
                r = rule_intern(p, &t->rules[i], &remap[i]);
                if (r < 0) {
                        p->place_failures++;
                        return r;
                }
        }
        r = plan_segments(t, &pt->segs, &pt->n_segs);
        if (r < 0)
                return r;
        r = ARRAY_GROW(p->tables, p->cap_tables, p->n_tables + 1, 64);
        if (r < 0) {
                free(pt->segs);
                return r;
        }

        for (; placed < pt->n_segs; placed++) {
                Segment *g = &pt->segs[placed];
                uint32_t slot;

                r = pool_alloc(p, g->words, &slot);
                if (r < 0)
                        break;
                g->shard = slot;
                g->offset = p->shards[slot].used;
                /* Written before any mapping entry can point here. */
                segment_write(t, remap, g, p->shards[slot].mem + g->offset);
                p->shards[slot].used += g->words;
                p->shards[slot].live += g->words;
        }
        if (r < 0) {
                /* Segments placed so far are referenced by nothing: give their space back. */
                for (size_t k = 0; k < placed; k++)
                        segment_free_space(p, &pt->segs[k]);
                free(pt->segs);
                p->place_failures++;
                return r;
        }

        memcpy(pt->id, t->id, t->id_size);
        pt->id_size = t->id_size;
        pt->refs = 1;
        pt->n_pages = t->n_pages;
        pt->n_rows = t->n_rows;
        pt->base = t->base;
        p->placed++;
        p->tables[p->n_tables++] = pt;
        *ret = TAKE_PTR(pt);
        return 0;
}

static int cmp_key(const void *a, const void *b)
{
        return memcmp(a, b, sizeof(struct profd_unwind_mapping_key));
}

/* Covers [start, end) with aligned power-of-two blocks, each one LPM entry. */
static int add_range_keys(pid_t pid, uint64_t start, uint64_t end, struct profd_unwind_mapping_key **keys,
                          size_t *n, size_t *cap)
{
        while (start < end) {
                unsigned bits = start ? __builtin_ctzll(start) : 63;
                struct profd_unwind_mapping_key *k;
                int r;

                while (bits > 0 &&
                       (bits >= 64 || start + (1ULL << bits) > end || start + (1ULL << bits) < start))
                        bits--;
                r = ARRAY_GROW(*keys, *cap, *n + 1, 32);
                if (r < 0)
                        return r;
                k = &(*keys)[(*n)++];
                k->prefixlen = 32 + 64 - bits;
                k->pid_be = __builtin_bswap32((uint32_t)pid);
                k->addr_be = __builtin_bswap64(start);
                start += 1ULL << bits;
        }
        return 0;
}

/* Appends the LPM entries of one process mapping. A table in several segments yields one piece
 * per segment; pieces cover the whole mapping, so a pc outside the table's pages finds its
 * neighbour segment and stops with "no row" rather than "no mapping". */
static int mapping_entries(pid_t pid, const PoolMapping *m, struct profd_unwind_mapping_key **keys,
                           struct profd_unwind_mapping **values, size_t *n, size_t *cap)
{
        size_t n_pieces = m->table ? m->table->n_segs : 1;

        for (size_t i = 0; i < n_pieces; i++) {
                struct profd_unwind_mapping v = {.load_bias = m->load_bias};
                uint64_t lo = m->start, hi = m->end;
                size_t first = *n;
                int r;

                if (!m->table) {
                        v.flags = PROFD_MAPPING_NO_TABLE |
                                  (m->table_pending ? PROFD_MAPPING_TABLE_PENDING : 0);
                } else {
                        const Segment *g = &m->table->segs[i];

                        v.base = m->table->base + ((uint64_t)g->first_page << PROFD_UT_PAGE_SHIFT);
                        v.shard = g->shard;
                        v.offset = g->offset;
                        v.n_pages = g->n_pages;
                        if (i > 0 && v.base + m->load_bias > lo)
                                lo = v.base + m->load_bias;
                        if (i + 1 < n_pieces) {
                                uint64_t next =
                                        m->table->base + m->load_bias +
                                        ((uint64_t)m->table->segs[i + 1].first_page << PROFD_UT_PAGE_SHIFT);
                                if (next < hi)
                                        hi = next;
                        }
                }
                if (lo >= hi)
                        continue;
                v.start = lo;
                v.end = hi;
                r = add_range_keys(pid, lo, hi, keys, n, cap);
                if (r < 0)
                        return r;
                void *nv = reallocarray(*values, *cap, sizeof(**values));
                if (!nv)
                        return -ENOMEM;
                *values = nv;
                for (size_t k = first; k < *n; k++)
                        (*values)[k] = v;
        }
        return 0;
}

/* Writes pr's entries for m (new ones first, then deletes the keys no longer used, so a pc
 * never goes missing during the update). */
static int proc_write_entries(TablePool *p, Proc *pr, const PoolMapping *m, size_t n)
{
        _cleanup_free_ struct profd_unwind_mapping_key *keys = NULL;
        _cleanup_free_ struct profd_unwind_mapping *values = NULL;
        size_t n_keys = 0, cap = 0, j = 0;
        int r, ret = 0;

        for (size_t i = 0; i < n; i++) {
                if (m[i].end <= m[i].start)
                        continue;
                r = mapping_entries(pr->pid, &m[i], &keys, &values, &n_keys, &cap);
                if (r < 0)
                        return r; /* nothing written yet */
        }
        for (size_t k = 0; k < n_keys; k++)
                if (bpf_map_update_elem(p->mappings_fd, &keys[k], &values[k], BPF_ANY) < 0) {
                        ret = -errno;
                        p->entry_errors++;
                }
        if (n_keys > 1)
                qsort_safe(keys, n_keys, sizeof(*keys), cmp_key);

        /* pr->keys is sorted too: delete what the new set lacks. */
        for (size_t i = 0; i < pr->n_keys; i++) {
                while (j < n_keys && cmp_key(&keys[j], &pr->keys[i]) < 0)
                        j++;
                if (j < n_keys && cmp_key(&keys[j], &pr->keys[i]) == 0)
                        continue;
                (void)bpf_map_delete_elem(p->mappings_fd, &pr->keys[i]);
        }
        p->n_mapping_entries = p->n_mapping_entries - pr->n_keys + n_keys;
        free(pr->keys);
        pr->keys = TAKE_PTR(keys);
        pr->n_keys = n_keys;
        return ret;
}

/* Whether pid exec'd after maps_ns (so mappings read at maps_ns are the old image's). */
static bool exec_after(TablePool *p, pid_t pid, uint64_t maps_ns)
{
        uint32_t key = pid;
        uint64_t exec_ns;

        return bpf_map_lookup_elem(p->execs_fd, &key, &exec_ns) == 0 && exec_ns > maps_ns;
}

int table_pool_last_exec(TablePool *p, pid_t pid, uint64_t *ret_ns)
{
        uint32_t key = pid;
        uint64_t exec_ns;

        if (!p || pid <= 0 || !ret_ns)
                return -EINVAL;
        if (bpf_map_lookup_elem(p->execs_fd, &key, &exec_ns) < 0)
                return -errno;
        *ret_ns = exec_ns;
        return 0;
}

int table_pool_set_process(TablePool *p, pid_t pid, const PoolMapping *m, size_t n)
{
        return table_pool_set_process_at(p, pid, now_ns(CLOCK_MONOTONIC), m, n);
}

int table_pool_set_process_at(TablePool *p, pid_t pid, uint64_t maps_ns, const PoolMapping *m, size_t n)
{
        _cleanup_free_ PoolMapping *copy = NULL;
        struct profd_unwind_proc info = {};
        uint32_t key = pid;
        bool found;
        size_t i;
        Proc *pr;
        int r;

        if (!p || pid <= 0 || (n && !m))
                return -EINVAL;

        if (n) {
                copy = calloc(n, sizeof(*copy));
                if (!copy)
                        return -ENOMEM;
                memcpy(copy, m, n * sizeof(*copy));
        }

        i = SORTED_INDEX(p->procs, p->n_procs, _e->pid, pid, &found);
        if (found) {
                pr = p->procs[i];
        } else {
                if (p->n_procs >= PROFD_POOL_MAX_PROCS)
                        return -ENOSPC;
                r = ARRAY_GROW(p->procs, p->cap_procs, p->n_procs + 1, 64);
                if (r < 0)
                        return r;
                pr = calloc(1, sizeof(*pr));
                if (!pr)
                        return -ENOMEM;
                pr->pid = pid;
                ARRAY_INSERT_AT(p->procs, p->n_procs, i, pr);
        }

        for (size_t k = 0; k < n; k++)
                table_pool_ref(copy[k].table);
        r = proc_write_entries(p, pr, copy, n);
        for (size_t k = 0; k < pr->n_maps; k++)
                table_pool_release(p, pr->maps[k].table);
        free(pr->maps);
        pr->maps = TAKE_PTR(copy);
        pr->n_maps = n;

        /* The BPF exec hook records the exec, then deletes the pid from unwind_procs. Checking
         * after our write closes the race: an exec before the check is seen here, one after it
         * deletes what we wrote. */
        info.n_mappings = n;
        info.version = ++p->proc_version;
        info.maps_ns = maps_ns;
        if (exec_after(p, pid, maps_ns)) {
                (void)bpf_map_delete_elem(p->procs_fd, &key);
                p->stale_snapshots++;
                return r < 0 ? r : -ESTALE;
        }
        if (bpf_map_update_elem(p->procs_fd, &key, &info, BPF_ANY) < 0 && r >= 0)
                r = -errno;
        if (exec_after(p, pid, maps_ns)) {
                (void)bpf_map_delete_elem(p->procs_fd, &key);
                p->stale_snapshots++;
                return r < 0 ? r : -ESTALE;
        }
        /* The unwinder reports an unknown pid/pc once a second per pid: the report that led here
         * (often the unknown pid of the first samples after exec) must not silence the next one,
         * a pc these mappings still miss. */
        if (r >= 0 && p->reported_fd >= 0)
                (void)bpf_map_delete_elem(p->reported_fd, &key);
        return r;
}

int table_pool_remove_process(TablePool *p, pid_t pid)
{
        uint32_t key = pid;
        bool found;
        size_t i;
        Proc *pr;

        if (!p)
                return -EINVAL;
        i = SORTED_INDEX(p->procs, p->n_procs, _e->pid, pid, &found);
        if (!found)
                return -ENOENT;
        pr = p->procs[i];
        (void)bpf_map_delete_elem(p->procs_fd, &key);
        /* A later process with this pid did not exec then; a stale exec time would make its
         * fork-copied mappings look older than its image. */
        (void)bpf_map_delete_elem(p->execs_fd, &key);
        for (size_t k = 0; k < pr->n_keys; k++)
                (void)bpf_map_delete_elem(p->mappings_fd, &pr->keys[k]);
        p->n_mapping_entries -= pr->n_keys;
        for (size_t k = 0; k < pr->n_maps; k++)
                table_pool_release(p, pr->maps[k].table);
        ARRAY_REMOVE_AT(p->procs, p->n_procs, i);
        proc_free(pr);
        return 0;
}

void table_pool_write_metrics(const TablePool *p, FILE *f)
{
        uint64_t live = 0, rows = 0, referenced = 0;

        if (!p || !f)
                return;
        for (size_t i = 0; i < p->n_tables; i++) {
                rows += p->tables[i]->n_rows;
                referenced += p->tables[i]->refs > 0;
        }
        for (unsigned i = 0; i < PROFD_POOL_MAX_SHARDS; i++)
                if (p->shards[i].fd >= 0)
                        live += p->shards[i].live;

        metric_gauge(f, "profd_unwind_pool_limit_bytes", "--unwind-table-memory.", p->limit);
        metric_gauge(f, "profd_unwind_pool_allocated_bytes", "BPF memory of the allocated shards.",
                     (uint64_t)(p->n_shards * PROFD_SHARD_BYTES));
        metric_gauge(f, "profd_unwind_pool_used_bytes", "Bytes of placed tables (page indexes and rows).",
                     live * 4);
        metric_gauge(f, "profd_unwind_pool_shards", "Allocated 4 MiB shards.", p->n_shards);
        metric_labelled(f, "profd_unwind_pool_tables", "gauge", "Placed unwind tables.", "state",
                        (const char *const[]){"referenced", "unreferenced"},
                        (const uint64_t[]){referenced, (uint64_t)p->n_tables - referenced}, 2);
        metric_gauge(f, "profd_unwind_pool_rows", "Rows of the placed tables.", rows);
        metric_gauge(f, "profd_unwind_pool_rules", "Distinct unwind rules shared by all tables.",
                     p->n_rules);
        metric_gauge(f, "profd_unwind_pool_processes", "Processes with mapping entries.", p->n_procs);
        metric_gauge(f, "profd_unwind_pool_mapping_entries", "LPM entries covering process mappings.",
                     p->n_mapping_entries);
        metric_counter(f, "profd_unwind_pool_placed_total", "Tables placed.", p->placed);
        metric_counter(f, "profd_unwind_pool_evictions_total", "Unreferenced tables evicted for space.",
                       p->evicted);
        metric_counter(f, "profd_unwind_pool_compactions_total", "Shards compacted.", p->compactions);
        metric_counter(f, "profd_unwind_pool_place_failures_total", "Tables that did not fit.",
                       p->place_failures);
        metric_counter(f, "profd_unwind_pool_entry_errors_total",
                       "Mapping entries that could not be written.", p->entry_errors);
        metric_counter(f, "profd_unwind_pool_stale_snapshots_total",
                       "Process mappings not installed: read before the process exec'd.",
                       p->stale_snapshots);
}

size_t table_pool_n_tables(const TablePool *p)
{
        return p ? p->n_tables : 0;
}
