/* SPDX-License-Identifier: GPL-2.0-only */
/* The per-process mapping entries the BPF unwinder searches: each executable mapping of a process
 * cut into pieces that point at its table's segments, all of them in one array entry for a process
 * with few (most), covered by LPM keys (pid, address) for the others; replaced without a pc ever
 * going missing, and guarded against mappings read before the process exec'd. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>

#include "unwind/map-batch.h"
#include "unwind/pool-mappings.h"
#include "unwind/pool-storage.h"
#include "util/array.h"
#include "util/time-util.h"

/* The pool's processes are kept in no order, found by pid: a push or exit on a host with thousands
 * of processes moves no other process's pointer. */
static Proc *proc_find(TablePool *p, pid_t pid, size_t *ret_i)
{
        return pid_table_find(&p->procs, pid, ret_i);
}

void pool_proc_free(Proc *pr)
{
        if (!pr)
                return;
        free(pr->maps);
        free(pr->keys);
        free(pr->values);
        free(pr->array);
        free(pr);
}

static int cmp_key(const void *a, const void *b)
{
        return memcmp(a, b, sizeof(struct profd_unwind_mapping_key));
}

/* Appends the pieces of one process mapping: its range and the entry BPF finds for a pc in it. A
 * table in several segments yields one piece per segment; pieces cover the whole mapping, so a pc
 * outside the table's pages finds its neighbour segment and stops with "no row" rather than "no
 * mapping". */
static int mapping_pieces(const PoolMapping *m, struct profd_unwind_mapping **pieces, size_t *n, size_t *cap)
{
        size_t n_pieces = m->table ? m->table->n_segs : 1;

        for (size_t i = 0; i < n_pieces; i++) {
                struct profd_unwind_mapping v = {.load_bias = m->load_bias};
                uint64_t lo = m->start, hi = m->end;
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
                r = ARRAY_GROW(*pieces, *cap, *n + 1, 16);
                if (r < 0)
                        return r;
                (*pieces)[(*n)++] = v;
        }
        return 0;
}

static int cmp_piece(const void *a, const void *b)
{
        const struct profd_unwind_mapping *x = a, *y = b;

        return x->start < y->start ? -1 : x->start > y->start;
}

/* Covers [start, end) with aligned power-of-two blocks that may reach past it into
 * [room_lo, room_last], the space up to the neighbouring pieces: each block as large as that room
 * allows. BPF checks that the pc lies in the entry's [start, end), so a pc in the room finds "no
 * mapping" as before, and no block of one piece ever holds a pc of another. A mapping amid other
 * files' data segments and gaps then takes one or two entries instead of up to two per bit of its
 * size: fewer BPF map writes per exec, and fewer deletes at exit. */
static int add_piece_keys(pid_t pid, uint64_t start, uint64_t end, uint64_t room_lo, uint64_t room_last,
                          struct profd_unwind_mapping_key **keys, size_t *n, size_t *cap)
{
        while (start < end) {
                struct profd_unwind_mapping_key *k;
                uint64_t base = start, last = start;
                unsigned bits = 0;
                int r;

                for (; bits < 64; bits++) {
                        uint64_t b = start & ~((2ULL << bits) - 1), l = b + ((2ULL << bits) - 1);

                        if (bits == 63) {
                                b = 0;
                                l = UINT64_MAX;
                        }
                        if (b < room_lo || l > room_last)
                                break;
                        base = b;
                        last = l;
                }
                r = ARRAY_GROW(*keys, *cap, *n + 1, 32);
                if (r < 0)
                        return r;
                k = &(*keys)[(*n)++];
                k->prefixlen = 32 + 64 - bits;
                k->pid_be = __builtin_bswap32((uint32_t)pid);
                k->addr_be = __builtin_bswap64(base);
                if (last == UINT64_MAX)
                        break;
                start = last + 1;
        }
        return 0;
}

/* A write of keys[i] failed: the value is not what the map holds, never taken as written. */
static void entry_write_failed(size_t i, int error, void *userdata)
{
        struct profd_unwind_mapping *values = userdata;

        (void)error;
        values[i].flags = UINT32_MAX;
}

/* Pieces BPF's binary search can tell apart: sorted by start, none overlapping the next (never so
 * from /proc/PID/maps; the LPM keys take such a set as it is), all below the unused slots' start. */
static bool pieces_apart(const struct profd_unwind_mapping *pieces, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if ((i > 0 && pieces[i].start < pieces[i - 1].end) || pieces[i].end > PROFD_PROC_MAPS_UNUSED)
                        return false;
        return true;
}

static void delete_keys(TablePool *p, Proc *pr)
{
        map_batch_delete(&p->entry_batch, p->mappings_fd, pr->keys, sizeof(*pr->keys), pr->n_keys);
        p->n_mapping_entries -= pr->n_keys;
        pr->keys = mfree(pr->keys);
        pr->values = mfree(pr->values);
        pr->n_keys = 0;
}

/* All of pr's pieces as one unwind_proc_maps entry (profd-unwind-pool.h): written unless it holds
 * them already, then the LPM keys of an earlier push deleted. */
static int write_array(TablePool *p, Proc *pr, const struct profd_unwind_mapping *pieces, size_t n)
{
        _cleanup_free_ struct profd_unwind_proc_maps *a = NULL;
        _cleanup_free_ struct profd_unwind_mapping *copy = NULL;
        uint32_t key = pr->pid;

        if (pr->in_array && pr->array && pr->n_array == n &&
            memcmp(pr->array, pieces, n * sizeof(*pieces)) == 0) {
                p->array_unchanged++;
                return 0;
        }
        a = calloc(1, sizeof(*a));
        copy = calloc(n ?: 1, sizeof(*copy));
        if (!a || !copy)
                return -ENOMEM;
        a->n = n;
        memcpy(a->m, pieces, n * sizeof(*pieces));
        memcpy(copy, pieces, n * sizeof(*pieces));
        for (size_t i = n; i < PROFD_PROC_MAPS_MAX; i++)
                a->m[i].start = a->m[i].end = PROFD_PROC_MAPS_UNUSED;
        p->array_writes++;
        if (bpf_map_update_elem(p->proc_maps_fd, &key, a, BPF_ANY) < 0) {
                int r = -errno;

                /* What the map holds for pid is unknown now: never taken as written next time. */
                pr->array = mfree(pr->array);
                p->entry_errors++;
                return r;
        }
        if (!pr->in_array)
                p->n_array_procs++;
        pr->in_array = true;
        free(pr->array);
        pr->array = TAKE_PTR(copy);
        pr->n_array = n;
        delete_keys(p, pr);
        return 0;
}

/* pr's pieces moved to LPM keys (more than an array entry holds): its array entry goes. */
static void delete_array(TablePool *p, Proc *pr)
{
        if (!pr->in_array)
                return;
        (void)bpf_map_delete_elem(p->proc_maps_fd, &(uint32_t){pr->pid});
        pr->array = mfree(pr->array);
        pr->in_array = false;
        p->n_array_procs--;
}

typedef struct Entry {
        struct profd_unwind_mapping_key key;
        struct profd_unwind_mapping value;
} Entry;

static int cmp_entry(const void *a, const void *b)
{
        return cmp_key(&((const Entry *)a)->key, &((const Entry *)b)->key);
}

/* Writes pr's entries for m (new and changed ones first, then deletes the keys no longer used, so
 * a pc never goes missing during the update). An entry the map already holds with the same value
 * is not written again: the loader's start-up read of a new process, a table placed for one of
 * its files, or a compaction touch a few of the process's entries, not all of them. */
int pool_proc_write_entries(TablePool *p, Proc *pr, const PoolMapping *m, size_t n)
{
        _cleanup_free_ struct profd_unwind_mapping_key *keys = NULL;
        _cleanup_free_ struct profd_unwind_mapping *values = NULL, *pieces = NULL;
        _cleanup_free_ Entry *e = NULL;
        size_t n_keys = 0, cap = 0, n_pieces = 0, cap_pieces = 0, j = 0;
        int r, ret = 0;

        for (size_t i = 0; i < n; i++) {
                if (m[i].end <= m[i].start)
                        continue;
                r = mapping_pieces(&m[i], &pieces, &n_pieces, &cap_pieces);
                if (r < 0)
                        return r; /* nothing written yet */
        }
        if (n_pieces > 1)
                qsort_safe(pieces, n_pieces, sizeof(*pieces), cmp_piece);
        if (p->proc_maps_fd >= 0 && n_pieces <= PROFD_PROC_MAPS_MAX && pieces_apart(pieces, n_pieces))
                return write_array(p, pr, pieces, n_pieces);
        for (size_t i = 0; i < n_pieces; i++) {
                size_t first = n_keys;
                /* Overlapping pieces (never from /proc/PID/maps) get no room beyond themselves. */
                uint64_t room_lo = i == 0 ? 0 : pieces[i - 1].end,
                         room_last = i + 1 == n_pieces ? UINT64_MAX : pieces[i + 1].start - 1;

                if (room_lo > pieces[i].start)
                        room_lo = pieces[i].start;
                if (room_last < pieces[i].end - 1)
                        room_last = pieces[i].end - 1;
                r = add_piece_keys(pr->pid, pieces[i].start, pieces[i].end, room_lo, room_last, &keys,
                                   &n_keys, &cap);
                if (r < 0)
                        return r;
                void *nv = reallocarray(values, cap, sizeof(*values));
                if (!nv)
                        return -ENOMEM;
                values = nv;
                for (size_t k = first; k < n_keys; k++)
                        values[k] = pieces[i];
        }
        e = calloc(n_keys ?: 1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        for (size_t k = 0; k < n_keys; k++)
                e[k] = (Entry){.key = keys[k], .value = values[k]};
        if (n_keys > 1)
                qsort_safe(e, n_keys, sizeof(*e), cmp_entry);
        for (size_t k = 0; k < n_keys; k++) {
                keys[k] = e[k].key;
                values[k] = e[k].value;
        }

        /* pr->keys is sorted: write what it lacks or holds with another value, in one batch
         * (e is no longer needed: it holds the batch). */
        size_t n_write = 0;
        for (size_t k = 0; k < n_keys; k++) {
                while (j < pr->n_keys && cmp_key(&pr->keys[j], &keys[k]) < 0)
                        j++;
                if (j < pr->n_keys && cmp_key(&pr->keys[j], &keys[k]) == 0 &&
                    memcmp(&pr->values[j], &values[k], sizeof(values[k])) == 0) {
                        p->entries_unchanged++;
                        continue;
                }
                e[n_write++] = (Entry){.key = keys[k], .value = values[k]};
        }
        if (n_write > 0) {
                _cleanup_free_ struct profd_unwind_mapping_key *wk = calloc(n_write, sizeof(*wk));
                _cleanup_free_ struct profd_unwind_mapping *wv = calloc(n_write, sizeof(*wv));

                if (!wk || !wv)
                        return -ENOMEM; /* nothing written yet */
                for (size_t k = 0; k < n_write; k++) {
                        wk[k] = e[k].key;
                        wv[k] = e[k].value;
                }
                p->entries_written += n_write;
                r = map_batch_update(&p->entry_batch, p->mappings_fd, wk, sizeof(*wk), wv, sizeof(*wv),
                                     n_write, entry_write_failed, wv);
                if (r < 0) {
                        ret = r;
                        /* Not what the map holds: never taken as written next time. */
                        for (size_t k = 0, w = 0; k < n_keys && w < n_write; k++)
                                if (cmp_key(&keys[k], &wk[w]) == 0) {
                                        if (wv[w].flags == UINT32_MAX) {
                                                values[k].flags = UINT32_MAX;
                                                p->entry_errors++;
                                        }
                                        w++;
                                }
                }
        }

        /* Delete what the new set lacks. */
        j = 0;
        size_t n_delete = 0;
        _cleanup_free_ struct profd_unwind_mapping_key *dk =
                pr->n_keys ? calloc(pr->n_keys, sizeof(*dk)) : NULL;
        for (size_t i = 0; i < pr->n_keys; i++) {
                while (j < n_keys && cmp_key(&keys[j], &pr->keys[i]) < 0)
                        j++;
                if (j < n_keys && cmp_key(&keys[j], &pr->keys[i]) == 0)
                        continue;
                if (dk)
                        dk[n_delete++] = pr->keys[i];
                else
                        (void)bpf_map_delete_elem(p->mappings_fd, &pr->keys[i]);
        }
        map_batch_delete(&p->entry_batch, p->mappings_fd, dk, sizeof(*dk), n_delete);
        p->n_mapping_entries = p->n_mapping_entries - pr->n_keys + n_keys;
        free(pr->keys);
        free(pr->values);
        pr->keys = TAKE_PTR(keys);
        pr->values = TAKE_PTR(values);
        pr->n_keys = n_keys;
        /* Where a write failed, the array entry (if any) keeps the last whole set for BPF. */
        if (ret == 0)
                delete_array(p, pr);
        return ret;
}

/* Whether pid exec'd after maps_ns (so mappings read at maps_ns are the old image's). The exec
 * time read is kept in pr: the tracker asks for it right after the push (table_pool_checked_exec()). */
static bool exec_after(TablePool *p, Proc *pr, uint64_t maps_ns)
{
        uint32_t key = pr->pid;
        uint64_t exec_ns;

        if (bpf_map_lookup_elem(p->execs_fd, &key, &exec_ns) < 0) {
                pr->exec_ns = 0;
                return false;
        }
        pr->exec_ns = exec_ns;
        return exec_ns > maps_ns;
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
        Proc *pr;
        int r, w;

        if (!p || pid <= 0 || (n && !m))
                return -EINVAL;

        if (n) {
                copy = calloc(n, sizeof(*copy));
                if (!copy)
                        return -ENOMEM;
                memcpy(copy, m, n * sizeof(*copy));
        }

        pr = proc_find(p, pid, NULL);
        if (!pr) {
                if (pid_table_size(&p->procs) >= PROFD_POOL_MAX_PROCS)
                        return -ENOSPC;
                pr = calloc(1, sizeof(*pr));
                if (!pr)
                        return -ENOMEM;
                pr->pid = pid;
                r = pid_table_add(&p->procs, pr);
                if (r < 0) {
                        free(pr);
                        return r;
                }
        }

        for (size_t k = 0; k < n; k++)
                table_pool_ref(copy[k].table);
        r = pool_proc_write_entries(p, pr, copy, n);
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
        info.runtimes = pr->runtimes;
        if (exec_after(p, pr, maps_ns)) {
                pool_procs_delete(p, key);
                p->stale_snapshots++;
                return r < 0 ? r : -ESTALE;
        }
        w = pool_procs_write(p, key, &info, BPF_ANY);
        if (w < 0 && r >= 0)
                r = w;
        pr->procs_written_ns = now_ns(CLOCK_MONOTONIC);
        if (exec_after(p, pr, maps_ns)) {
                pool_procs_delete(p, key);
                p->stale_snapshots++;
                return r < 0 ? r : -ESTALE;
        }
        return r;
}

int table_pool_checked_exec(TablePool *p, pid_t pid, uint64_t *ret_ns)
{
        const Proc *pr;

        if (!p || pid <= 0 || !ret_ns)
                return -EINVAL;
        pr = proc_find(p, pid, NULL);
        if (!pr || pr->exec_ns == 0)
                return -ENOENT;
        *ret_ns = pr->exec_ns;
        return 0;
}

int table_pool_forget_report(TablePool *p, pid_t pid)
{
        uint32_t key = pid;

        if (!p || pid <= 0)
                return -EINVAL;
        if (p->reported_fd < 0)
                return 0;
        if (bpf_map_delete_elem(p->reported_fd, &key) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

_Static_assert(TABLE_POOL_RUNTIME_PYTHON == PROFD_PROC_RUNTIME_PYTHON, "runtime bits");
_Static_assert(TABLE_POOL_RUNTIME_HOTSPOT == PROFD_PROC_RUNTIME_HOTSPOT, "runtime bits");
_Static_assert(TABLE_POOL_RUNTIME_V8 == PROFD_PROC_RUNTIME_V8, "runtime bits");

int table_pool_set_process_runtimes(TablePool *p, pid_t pid, uint32_t runtimes)
{
        struct profd_unwind_proc info;
        uint32_t key = pid;
        Proc *pr;
        int r;

        if (!p || pid <= 0)
                return -EINVAL;
        pr = proc_find(p, pid, NULL);
        if (!pr)
                return -ENOENT;
        if (pr->runtimes == runtimes)
                return 0;
        pr->runtimes = runtimes;
        /* BPF_EXIST: an exec since the last push deleted the entry, and the next push writes the
         * new image's mappings with these bits; writing it here would revive the old ones. */
        if (bpf_map_lookup_elem(p->procs_fd, &key, &info) < 0)
                return errno == ENOENT ? 0 : -errno;
        info.runtimes = runtimes;
        r = pool_procs_write(p, key, &info, BPF_EXIST);
        return r == -ENOENT ? 0 : r;
}

void table_pool_set_exit_hook(TablePool *p, bool attached)
{
        if (p)
                p->exit_hook = attached;
}

/* An unwind_procs write this close before the exit BPF saw may have come after the BPF exit hook's
 * delete (the hook and the exit event are two programs on the same tracepoint, microseconds
 * apart): then the daemon deletes it itself. */
#define EXIT_WRITE_MARGIN_NS (1000 * 1000ULL)

static int remove_process(TablePool *p, pid_t pid, uint64_t exit_ns)
{
        uint32_t key = pid;
        size_t i = 0;
        Proc *pr;

        if (!p)
                return -EINVAL;
        pr = proc_find(p, pid, &i);
        if (!pr)
                return -ENOENT;
        if (exit_ns && p->exit_hook && pr->procs_written_ns + EXIT_WRITE_MARGIN_NS < exit_ns)
                p->exit_deletes_left++;
        else {
                pool_procs_delete(p, key);
                /* A later process with this pid did not exec then; a stale exec time would make its
                 * fork-copied mappings look older than its image. */
                (void)bpf_map_delete_elem(p->execs_fd, &key);
        }
        delete_keys(p, pr);
        delete_array(p, pr);
        for (size_t k = 0; k < pr->n_maps; k++)
                table_pool_release(p, pr->maps[k].table);
        (void)pid_table_remove_at(&p->procs, i);
        pool_proc_free(pr);
        return 0;
}

int table_pool_remove_process(TablePool *p, pid_t pid)
{
        return remove_process(p, pid, 0);
}

int table_pool_remove_exited(TablePool *p, pid_t pid, uint64_t exit_ns)
{
        return remove_process(p, pid, exit_ns);
}
