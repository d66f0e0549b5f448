/* SPDX-License-Identifier: GPL-2.0-only */
/* The unwind-table pool on the real BPF maps: places synthetic tables (one larger than a shard,
 * so split into segments), fills the pool, checks that a table that cannot fit fails cleanly,
 * then that releasing one lets eviction and shard compaction make room. After every step each
 * table is read back the way the BPF unwinder reads it (LPM mapping entry, shard page index,
 * bounded binary search, global rule list) and compared with unwind_table_lookup() on the
 * original table. Needs root for the BPF maps; SKIPs otherwise. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <linux/types.h>

#include "bpf/profd-filter.h"
#include "bpf/profd-sample.h"
#include "bpf/profd-unwind-pool.h"
#include "profile.skel.h"
#include "unwind/table-pool.h"

#define N_RULES 40
#define FAKE_PID_BASE 4000000 /* above pid_max: entries are data only */

static struct profd_unwind_rule rules[N_RULES];
static uint64_t rng = 88172645463325252ULL;

static uint64_t next_rand(void)
{
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return rng;
}

/* A table of n_rows rows spread over pages of rows_per_page, as unwind-tables/ lays them out. */
static UnwindTable *make_table(uint8_t id, uint32_t n_rows, uint32_t rows_per_page)
{
        UnwindTable *t = calloc(1, sizeof(*t));
        uint32_t r = 0;

        t->id[0] = id;
        t->id_size = 20;
        t->base = 0x400000;
        t->n_pages = (n_rows + rows_per_page - 1) / rows_per_page;
        t->page_index = calloc(t->n_pages + 1, sizeof(uint32_t));
        t->n_rows = n_rows;
        t->rows = calloc(n_rows, sizeof(*t->rows));
        t->n_rules = N_RULES;
        t->rules = malloc(sizeof(rules));
        /* Table-local rule order differs from table to table: the pool must remap. */
        for (uint32_t i = 0; i < N_RULES; i++)
                t->rules[i] = rules[(i + id) % N_RULES];
        for (uint32_t p = 0; p < t->n_pages; p++) {
                uint32_t k = n_rows - r < rows_per_page ? n_rows - r : rows_per_page;
                uint32_t step = 65536 / k;

                t->page_index[p] = r;
                for (uint32_t i = 0; i < k; i++, r++) {
                        t->rows[r].pc_low = i * step;
                        t->rows[r].rule = next_rand() % N_RULES;
                }
        }
        t->page_index[t->n_pages] = n_rows;
        return t;
}

static void free_table(UnwindTable *t)
{
        free(t->page_index);
        free(t->rows);
        free(t->rules);
        free(t);
}

typedef struct Maps {
        int shards, rules, mappings, proc_maps;
} Maps;

/* The pool's entry for pid's mapping holding pc, as the BPF unwinder finds it: the process's
 * array entry if it has one (searched with BPF's own function), its LPM entry otherwise; false
 * for none. */
static bool find_entry(const Maps *m, pid_t pid, uint64_t pc, struct profd_unwind_mapping *ret)
{
        struct profd_unwind_mapping_key key = {
                .prefixlen = 96, .pid_be = __builtin_bswap32(pid), .addr_be = __builtin_bswap64(pc)};
        struct profd_unwind_proc_maps pm;
        uint32_t k = pid;

        if (bpf_map_lookup_elem(m->proc_maps, &k, &pm) == 0) {
                const struct profd_unwind_mapping *v = profd_proc_maps_find(&pm, pc);

                if (!v)
                        return false;
                *ret = *v;
        } else if (bpf_map_lookup_elem(m->mappings, &key, ret) < 0)
                return false;
        /* An LPM entry's prefix may be wider than its mapping; the piece before pc may end below. */
        return pc >= ret->start && pc < ret->end;
}

/* Copies of shard contents by map id; emptied before each check (the pool may have moved). */
static struct {
        uint32_t id;
        uint32_t *words;
} shard_cache[4];

static void shard_cache_clear(void)
{
        for (size_t i = 0; i < ELEMENTSOF(shard_cache); i++) {
                free(shard_cache[i].words);
                shard_cache[i].words = NULL;
        }
}

static const uint32_t *shard_words(uint32_t id)
{
        uint32_t zero = 0;
        size_t i;
        int fd;

        for (i = 0; i < ELEMENTSOF(shard_cache) && shard_cache[i].words; i++)
                if (shard_cache[i].id == id)
                        return shard_cache[i].words;
        if (i == ELEMENTSOF(shard_cache))
                return NULL;
        fd = bpf_map_get_fd_by_id(id);
        if (fd < 0)
                return NULL;
        shard_cache[i].words = malloc(PROFD_SHARD_BYTES);
        if (shard_cache[i].words && bpf_map_lookup_elem(fd, &zero, shard_cache[i].words) < 0) {
                free(shard_cache[i].words);
                shard_cache[i].words = NULL;
        }
        shard_cache[i].id = id;
        close(fd);
        return shard_cache[i].words;
}

/* The BPF unwinder's lookup, in user space. Returns 0 and the rule, or -ENOENT. */
static int bpf_view_lookup(const Maps *m, pid_t pid, uint64_t pc, struct profd_unwind_rule *ret)
{
        struct profd_unwind_mapping v;
        uint32_t id, page, lo, hi, l, r, rows, w, idx;
        const uint32_t *words;
        uint64_t elf_pc;

        if (!find_entry(m, pid, pc, &v))
                return -ENOENT;
        elf_pc = pc - v.load_bias;
        if (elf_pc < v.base || ((elf_pc - v.base) >> PROFD_UT_PAGE_SHIFT) >= v.n_pages)
                return -ENOENT;
        page = (elf_pc - v.base) >> PROFD_UT_PAGE_SHIFT;
        if (bpf_map_lookup_elem(m->shards, &v.shard, &id) < 0)
                return -ESRCH;
        words = shard_words(id);
        if (!words)
                return -EIO;
        lo = words[(v.offset + page) & (PROFD_SHARD_WORDS - 1)]; /* masked like BPF */
        hi = words[(v.offset + page + 1) & (PROFD_SHARD_WORDS - 1)];
        rows = v.offset + v.n_pages + 1;
        l = lo;
        r = hi;
        for (int i = 0; i < 17 && l < r; i++) { /* bounded like BPF */
                uint32_t mid = l + (r - l) / 2;

                if ((words[(rows + mid) & (PROFD_SHARD_WORDS - 1)] & 0xffff) <= (elf_pc & 0xffff))
                        l = mid + 1;
                else
                        r = mid;
        }
        if (l <= lo)
                return -ENOENT;
        w = words[(rows + l - 1) & (PROFD_SHARD_WORDS - 1)];
        idx = w >> 16;
        return bpf_map_lookup_elem(m->rules, &idx, ret) < 0 ? -errno : 0;
}

/* Compares 2000 random pcs of t as seen through pid's mapping with the table itself. */
static int check_table(const Maps *m, pid_t pid, const UnwindTable *t, uint64_t bias, const char *what)
{
        unsigned bad = 0;

        shard_cache_clear();
        for (int i = 0; i < 2000; i++) {
                uint64_t elf_pc = t->base + next_rand() % ((uint64_t)t->n_pages << PROFD_UT_PAGE_SHIFT);
                struct profd_unwind_rule want, got;
                int a = unwind_table_lookup(t, elf_pc, &want),
                    b = bpf_view_lookup(m, pid, elf_pc + bias, &got);

                if ((a < 0) != (b < 0) || (a >= 0 && memcmp(&want, &got, sizeof(got)) != 0)) {
                        if (bad++ < 3)
                                fprintf(stderr, "%s: pc %#" PRIx64 ": table says %d, pool says %d\n", what,
                                        elf_pc, a, b);
                }
        }
        if (bad) {
                fprintf(stderr, "FAIL: %s: %u of 2000 lookups differ\n", what, bad);
                return 1;
        }
        printf("ok: %s\n", what);
        return 0;
}

static int map_table(TablePool *pool, pid_t pid, PoolTable *pt, const UnwindTable *t, uint64_t bias)
{
        PoolMapping m = {
                .start = t->base + bias,
                .end = t->base + bias + ((uint64_t)t->n_pages << PROFD_UT_PAGE_SHIFT),
                .load_bias = bias,
                .table = pt,
        };
        return table_pool_set_process(pool, pid, &m, 1);
}

/* Which of pid's mappings BPF finds for pc (the test mappings carry their index + 1 as load bias);
 * 0 for none. */
static uint64_t entry_owner(const Maps *m, pid_t pid, uint64_t pc)
{
        struct profd_unwind_mapping v;

        return find_entry(m, pid, pc, &v) ? v.load_bias : 0;
}

/* A metric of the pool's /metrics text (first sample whose line starts with name). */
static uint64_t pool_metric(const TablePool *pool, const char *name)
{
        char *buf = NULL, *at;
        size_t size = 0;
        uint64_t v = UINT64_MAX;
        FILE *f = open_memstream(&buf, &size);

        if (!f)
                return v;
        table_pool_write_metrics(pool, f);
        fclose(f);
        for (at = buf; at && *at; at = strchr(at, '\n') ? strchr(at, '\n') + 1 : NULL)
                if (strncmp(at, name, strlen(name)) == 0 && at[strlen(name)] == ' ') {
                        v = strtoull(at + strlen(name) + 1, NULL, 10);
                        break;
                }
        free(buf);
        return v;
}

/* Mapping entries may be wider than their mapping (one per mapping where the neighbours allow):
 * every pc of every mapping must still find that very mapping, and a pc between mappings none.
 * Random layouts: adjacent mappings, single pages beside huge ones, many in one aligned block. */
static int check_cover(TablePool *pool, const Maps *m)
{
        const pid_t pid = FAKE_PID_BASE + 10;
        PoolMapping maps[48];
        unsigned bad = 0, lookups = 0, in_array = 0;
        uint64_t arrays_before = pool_metric(pool, "profd_unwind_pool_array_processes");

        for (int round = 0; round < 300; round++) {
                uint64_t at = 0x7f0000000000ULL + (next_rand() % 0x100000) * 4096;
                size_t n = 1 + next_rand() % ELEMENTSOF(maps);

                for (size_t i = 0; i < n; i++) {
                        uint64_t pages = round % 3 == 0         ? 1 + next_rand() % 4
                                         : next_rand() % 4 == 0 ? 1 + next_rand() % 65536
                                                                : 1 + next_rand() % 64;
                        uint64_t gap = next_rand() % 3 == 0 ? 0 : next_rand() % 512;

                        at += gap * 4096;
                        maps[i] = (PoolMapping){.start = at, .end = at + pages * 4096, .load_bias = i + 1};
                        at += pages * 4096;
                }
                if (table_pool_set_process(pool, pid, maps, n) < 0) {
                        fprintf(stderr, "FAIL: cover round %d: pushing %zu mappings failed\n", round, n);
                        return 1;
                }
                /* Up to 32 pieces in one array entry, more as LPM keys: both, and moves between them
                 * (the same pid every round). */
                if (pool_metric(pool, "profd_unwind_pool_array_processes") > arrays_before)
                        in_array++;
                for (size_t i = 0; i < n; i++) {
                        uint64_t span = maps[i].end - maps[i].start;
                        uint64_t pcs[] = {maps[i].start, maps[i].end - 1,
                                          maps[i].start + next_rand() % span};

                        for (size_t k = 0; k < ELEMENTSOF(pcs); k++, lookups++)
                                if (entry_owner(m, pid, pcs[k]) != i + 1 && bad++ < 3)
                                        fprintf(stderr,
                                                "cover round %d: pc %#" PRIx64
                                                " of mapping %zu found %" PRIu64 "\n",
                                                round, pcs[k], i + 1, entry_owner(m, pid, pcs[k]));
                        /* Just below it, when that is a gap. */
                        if ((i == 0 || maps[i - 1].end < maps[i].start) && maps[i].start > 0) {
                                lookups++;
                                if (entry_owner(m, pid, maps[i].start - 1) != 0 && bad++ < 3)
                                        fprintf(stderr,
                                                "cover round %d: gap pc %#" PRIx64 " found a mapping\n",
                                                round, maps[i].start - 1);
                        }
                }
                lookups++;
                if (entry_owner(m, pid, maps[n - 1].end) != 0 && bad++ < 3)
                        fprintf(stderr, "cover round %d: pc past the last mapping found one\n", round);
        }
        table_pool_remove_process(pool, pid);
        if (bad) {
                fprintf(stderr, "FAIL: mapping cover: %u of %u lookups wrong\n", bad, lookups);
                return 1;
        }
        if (in_array == 0 || in_array == 300) {
                fprintf(stderr,
                        "FAIL: mapping cover: %u of 300 layouts in an array entry (want both kinds)\n",
                        in_array);
                return 1;
        }
        printf("ok: mapping cover (%u lookups over 300 random layouts, %u in an array entry, %u as LPM "
               "entries)\n",
               lookups, in_array, 300 - in_array);
        return 0;
}

/* A process as an exec leaves it (executable, loader, libc, vDSO at their usual places): one array
 * entry, no LPM entry, and a second push of the same mappings writes nothing. The same with 40
 * mappings (more than an array entry holds): LPM entries, one or two per mapping, none written
 * again. */
static int check_entries_written(TablePool *pool)
{
        const pid_t pid = FAKE_PID_BASE + 11;
        PoolMapping maps[40] = {
                {.start = 0x55d4c3a0f000ULL, .end = 0x55d4c3a8e000ULL, .load_bias = 1},
                {.start = 0x7f3e91a28000ULL, .end = 0x7f3e91b7d000ULL, .load_bias = 2},
                {.start = 0x7f3e91c21000ULL, .end = 0x7f3e91c22000ULL, .load_bias = 3},
                {.start = 0x7f3e91c4c000ULL, .end = 0x7f3e91c71000ULL, .load_bias = 4},
                {.start = 0x7ffd2b5f1000ULL, .end = 0x7ffd2b5f3000ULL, .load_bias = 5},
        };
        const char *const written[] = {"profd_unwind_pool_array_writes_total{outcome=\"written\"}",
                                       "profd_unwind_pool_entry_writes_total{outcome=\"written\"}"};
        const char *const unchanged[] = {"profd_unwind_pool_array_writes_total{outcome=\"unchanged\"}",
                                         "profd_unwind_pool_entry_writes_total{outcome=\"unchanged\"}"};
        int failures = 0;

        for (size_t i = 5; i < ELEMENTSOF(maps); i++) /* libraries after libc, a gap between each */
                maps[i] = (PoolMapping){.start = 0x7f3e92000000ULL + i * 0x40000,
                                        .end = 0x7f3e92000000ULL + i * 0x40000 + 0x21000,
                                        .load_bias = i + 1};
        for (int lpm = 0; lpm <= 1; lpm++) {
                size_t n = lpm ? ELEMENTSOF(maps) : 5;
                uint64_t e0 = pool_metric(pool, "profd_unwind_pool_mapping_entries"),
                         a0 = pool_metric(pool, "profd_unwind_pool_array_processes"),
                         w0 = pool_metric(pool, written[lpm]), e1, a1, w1, w2, u1, u2;

                table_pool_set_process(pool, pid, maps, n);
                e1 = pool_metric(pool, "profd_unwind_pool_mapping_entries");
                a1 = pool_metric(pool, "profd_unwind_pool_array_processes");
                w1 = pool_metric(pool, written[lpm]);
                u1 = pool_metric(pool, unchanged[lpm]);
                /* LPM: one or two entries per mapping (an exact power-of-two cover takes up to two
                 * per bit of its size); array: one entry, no LPM entry. */
                if (lpm ? (e1 - e0 < n || e1 - e0 > 2 * n || a1 != a0)
                        : (e1 != e0 || a1 != a0 + 1 || w1 != w0 + 1)) {
                        fprintf(stderr,
                                "FAIL: %zu mappings: %" PRIu64 " LPM entries, %" PRIu64
                                " array entries, %" PRIu64 " written\n",
                                n, e1 - e0, a1 - a0, w1 - w0);
                        failures++;
                }
                table_pool_set_process(pool, pid, maps, n);
                w2 = pool_metric(pool, written[lpm]);
                u2 = pool_metric(pool, unchanged[lpm]);
                if (w2 != w1 || u2 - u1 != (lpm ? e1 - e0 : 1)) {
                        fprintf(stderr,
                                "FAIL: pushing the same %zu mappings again wrote %" PRIu64 ", left %" PRIu64
                                "\n",
                                n, w2 - w1, u2 - u1);
                        failures++;
                }
                table_pool_remove_process(pool, pid);
                if (pool_metric(pool, "profd_unwind_pool_mapping_entries") != e0 ||
                    pool_metric(pool, "profd_unwind_pool_array_processes") != a0) {
                        fprintf(stderr, "FAIL: entries left after the process of %zu mappings went\n", n);
                        failures++;
                }
                if (!failures)
                        printf("ok: %zu mappings: %" PRIu64 " LPM entries, %" PRIu64
                               " array entries, none written again\n",
                               n, e1 - e0, a1 - a0);
        }
        return failures;
}

static uint64_t monotonic_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* unwind_procs_gen as BPF reads it (through bpf(), not the pool's own mapping of it). */
static uint64_t procs_gen(struct profile_bpf *skel)
{
        struct profd_unwind_procs_gen g = {};
        uint32_t zero = 0;

        (void)bpf_map_lookup_elem(bpf_map__fd(skel->maps.unwind_procs_gen), &zero, &g);
        return g.gen;
}

/* The exit of a process: the BPF exit hook deletes its unwind_procs and unwind_execs entries (a real
 * child exiting with the hook attached), and the pool then leaves those two alone unless it wrote
 * them after the exit; the mapping entries, which only the pool knows, it always deletes. */
static int check_exit(struct profile_bpf *skel, TablePool *pool)
{
        const pid_t early = FAKE_PID_BASE + 21, late = FAKE_PID_BASE + 22;
        PoolMapping map = {.start = 0x7f3e91a28000ULL, .end = 0x7f3e91b7d000ULL, .load_bias = 1};
        int procs = bpf_map__fd(skel->maps.unwind_procs), execs = bpf_map__fd(skel->maps.unwind_execs);
        uint64_t e0 = pool_metric(pool, "profd_unwind_pool_mapping_entries"), exec_ns = 1, e1, g0, g1;
        struct profd_unwind_proc info = {.n_mappings = 1};
        struct bpf_link *link;
        int failures = 0, status;
        uint32_t key;
        pid_t child;

        link = bpf_program__attach(skel->progs.profd_exit);
        if (!link) {
                fprintf(stderr, "FAIL: attaching the BPF exit hook: %s\n", strerror(errno));
                return 1;
        }
        child = fork();
        if (child < 0) {
                bpf_link__destroy(link);
                return 1;
        }
        if (child == 0) {
                pause(); /* until the parent wrote its entries */
                _exit(0);
        }
        key = (uint32_t)child;
        g0 = procs_gen(skel);
        if (bpf_map_update_elem(procs, &key, &info, BPF_ANY) < 0 ||
            bpf_map_update_elem(execs, &key, &exec_ns, BPF_ANY) < 0) {
                fprintf(stderr, "FAIL: writing the child's entries: %s\n", strerror(errno));
                failures++;
        }
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
        bpf_link__destroy(link);
        if (bpf_map_lookup_elem(procs, &key, &info) == 0 ||
            bpf_map_lookup_elem(execs, &key, &exec_ns) == 0) {
                fprintf(stderr, "FAIL: the BPF exit hook left an exited process's entries\n");
                failures++;
        }
        /* The per-CPU copy of the entry (sample_state.pc_*) must not outlive the delete: a later
         * process with this pid would be unwound with it. */
        if (procs_gen(skel) == g0) {
                fprintf(stderr, "FAIL: the BPF exit hook's delete left unwind_procs_gen unchanged\n");
                failures++;
        }

        /* No hook attached from here on: what the pool deletes stays visible. */
        table_pool_set_exit_hook(pool, true);
        g0 = procs_gen(skel);
        table_pool_set_process(pool, early, &map, 1);
        g1 = procs_gen(skel);
        table_pool_set_process(pool, late, &map, 1);
        if (g1 == g0 || procs_gen(skel) == g1) {
                fprintf(stderr, "FAIL: a write of unwind_procs left unwind_procs_gen unchanged\n");
                failures++;
        }
        /* early exits a second after its write, late within the margin of it. */
        table_pool_remove_exited(pool, early, monotonic_ns() + 1000000000ULL);
        g0 = procs_gen(skel);
        table_pool_remove_exited(pool, late, monotonic_ns());
        if (procs_gen(skel) == g0) {
                fprintf(stderr, "FAIL: the pool's delete left unwind_procs_gen unchanged\n");
                failures++;
        }
        key = early;
        if (bpf_map_lookup_elem(procs, &key, &info) < 0) {
                fprintf(stderr, "FAIL: the pool deleted an entry the BPF exit hook deletes\n");
                failures++;
        }
        (void)bpf_map_delete_elem(procs, &key);
        key = late;
        if (bpf_map_lookup_elem(procs, &key, &info) == 0) {
                fprintf(stderr, "FAIL: an entry written right before the exit was left\n");
                failures++;
        }
        e1 = pool_metric(pool, "profd_unwind_pool_mapping_entries");
        if (e1 != e0) {
                fprintf(stderr, "FAIL: %" PRIu64 " mapping entries of exited processes left\n", e1 - e0);
                failures++;
        }
        if (pool_metric(pool, "profd_unwind_pool_exit_deletes_in_bpf_total") != 1) {
                fprintf(stderr, "FAIL: exits left to the BPF hook not counted once\n");
                failures++;
        }
        table_pool_set_exit_hook(pool, false);
        if (!failures)
                printf("ok: exit: the BPF hook deletes, the pool only what it wrote after the exit\n");
        return failures;
}

int main(void)
{
        struct profile_bpf *skel;
        TablePool *pool = NULL;
        PoolTable *p1, *p2, *p3;
        UnwindTable *t1, *t2, *t3;
        const uint64_t bias = 0x7f0000000000ULL;
        int r, failures = 0;
        Maps m;

        if (geteuid() != 0) {
                fprintf(stderr, "SKIP: test-table-pool needs root for BPF maps\n");
                return 77;
        }
        for (int i = 0; i < N_RULES; i++)
                rules[i] = (struct profd_unwind_rule){.cfa_kind = 1 + i % 2,
                                                      .rbp_kind = i % 3 == 0,
                                                      .rbp_offset = -16,
                                                      .cfa_offset = 8 * (i + 1)};

        skel = profile_bpf__open_and_load();
        if (!skel) {
                fprintf(stderr, "FAIL: loading the BPF object: %s\n", strerror(errno));
                return 1;
        }
        m.shards = bpf_map__fd(skel->maps.unwind_shards);
        m.rules = bpf_map__fd(skel->maps.unwind_rules);
        m.mappings = bpf_map__fd(skel->maps.unwind_mappings);
        m.proc_maps = bpf_map__fd(skel->maps.unwind_proc_maps);

        /* Three shards: two to fill, one held back for compaction. */
        r = table_pool_new(skel->obj, 3 * PROFD_SHARD_BYTES, &pool);
        if (r < 0) {
                fprintf(stderr, "FAIL: table_pool_new: %s\n", strerror(-r));
                return 1;
        }
        failures += check_cover(pool, &m);
        failures += check_entries_written(pool);
        failures += check_exit(skel, pool);

        t1 = make_table(1, 1500000, 60000); /* > one shard: two segments */
        t2 = make_table(2, 400000, 50000);
        t3 = make_table(3, 300000, 30000);

        r = table_pool_acquire(pool, t1, &p1);
        if (r < 0) {
                fprintf(stderr, "FAIL: placing a table larger than a shard: %s\n", strerror(-r));
                return 1;
        }
        r = table_pool_acquire(pool, t2, &p2);
        if (r < 0) {
                fprintf(stderr, "FAIL: placing the second table: %s\n", strerror(-r));
                return 1;
        }
        map_table(pool, FAKE_PID_BASE + 1, p1, t1, bias);
        map_table(pool, FAKE_PID_BASE + 2, p2, t2, bias + 0x100000000ULL);
        failures += check_table(&m, FAKE_PID_BASE + 1, t1, bias, "two-segment table");
        failures += check_table(&m, FAKE_PID_BASE + 2, t2, bias + 0x100000000ULL, "second table");

        /* Full, and nothing may be evicted: a clean -ENOSPC, everything else intact. */
        r = table_pool_acquire(pool, t3, &p3);
        if (r != -ENOSPC) {
                fprintf(stderr, "FAIL: placing into a full pool returned %d, want -ENOSPC\n", r);
                failures++;
        }
        failures +=
                check_table(&m, FAKE_PID_BASE + 1, t1, bias, "two-segment table after a failed placement");

        /* t2 unused: evicting it leaves dead space beside t1's second segment, so the pool must
         * compact that shard (and repoint pid 1's entries) to fit t3. */
        table_pool_remove_process(pool, FAKE_PID_BASE + 2);
        table_pool_release(pool, p2);
        r = table_pool_acquire(pool, t3, &p3);
        if (r < 0) {
                fprintf(stderr, "FAIL: placing after release: %s\n", strerror(-r));
                return 1;
        }
        map_table(pool, FAKE_PID_BASE + 3, p3, t3, bias);
        failures += check_table(&m, FAKE_PID_BASE + 1, t1, bias, "two-segment table after compaction");
        failures += check_table(&m, FAKE_PID_BASE + 3, t3, bias, "table placed by eviction + compaction");
        if (table_pool_find(pool, t2->id, t2->id_size)) {
                fprintf(stderr, "FAIL: the released table was not evicted\n");
                failures++;
        }

        /* Removing a process removes its entries. */
        table_pool_remove_process(pool, FAKE_PID_BASE + 3);
        {
                struct profd_unwind_rule rule;

                if (bpf_view_lookup(&m, FAKE_PID_BASE + 3, t3->base + bias, &rule) != -ENOENT) {
                        fprintf(stderr, "FAIL: entries of a removed process remain\n");
                        failures++;
                }
        }

        table_pool_write_metrics(pool, stdout);
        table_pool_remove_process(pool, FAKE_PID_BASE + 1);
        pool = table_pool_free(pool);
        profile_bpf__destroy(skel);
        free_table(t1);
        free_table(t2);
        free_table(t3);
        shard_cache_clear();
        if (failures)
                return 1;
        printf("PASS\n");
        return 0;
}
