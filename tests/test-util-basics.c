/* SPDX-License-Identifier: GPL-2.0-only */
/* The shared basics: growable arrays, arrays sorted by pid, the pid index, the Prometheus writer, who holds
 * the memory and the budget over its owners, the id ring, jobs run by threads. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/test-util.h"
#include "util/array.h"
#include "util/id-ring.h"
#include "util/macro.h"
#include "util/memory-budget.h"
#include "util/memory-owners.h"
#include "util/metrics-writer.h"
#include "util/pid-index.h"
#include "util/pid-table.h"
#include "util/chain-hash.h"
#include "util/work-threads.h"

typedef struct Item {
        int pid;
} Item;

static void test_grow(void)
{
        int *v = NULL;
        size_t cap = 0;

        CHECK(ARRAY_GROW(v, cap, 1, 16) == 0 && cap == 16, "first allocation: min_cap");
        CHECK(ARRAY_GROW(v, cap, 16, 16) == 0 && cap == 16, "fits: unchanged");
        CHECK(ARRAY_GROW(v, cap, 17, 16) == 0 && cap == 32, "doubles");
        CHECK(ARRAY_GROW(v, cap, 200, 16) == 0 && cap == 256, "doubles until it fits");
        size_t old = cap;
        CHECK(array_grow((void **)&v, &cap, SIZE_MAX, sizeof(*v), 16) == -ENOMEM && cap == old,
              "too large: -ENOMEM, unchanged");
        free(v);
}

static void test_sorted(void)
{
        Item *v[8], items[8];
        size_t n = 0;
        bool found;
        int pids[] = {5, 1, 9, 3, 7};

        for (size_t k = 0; k < ELEMENTSOF(pids); k++) {
                items[k].pid = pids[k];
                size_t i = SORTED_INDEX(v, n, _e->pid, pids[k], &found);
                CHECK(!found);
                ARRAY_INSERT_AT(v, n, i, &items[k]);
        }
        CHECK(n == 5 && v[0]->pid == 1 && v[1]->pid == 3 && v[2]->pid == 5 && v[3]->pid == 7 &&
                      v[4]->pid == 9,
              "kept sorted");
        CHECK(SORTED_INDEX(v, n, _e->pid, 7, &found) == 3 && found, "finds 7");
        CHECK(SORTED_INDEX(v, n, _e->pid, 4, &found) == 2 && !found, "4 would go before 5");
        CHECK(SORTED_INDEX(v, n, _e->pid, 10, &found) == 5 && !found, "past the end");
        CHECK(SORTED_INDEX(v, 0, _e->pid, 1, &found) == 0 && !found, "empty");
        ARRAY_REMOVE_AT(v, n, 0);
        ARRAY_REMOVE_AT(v, n, 3);
        CHECK(n == 3 && v[0]->pid == 3 && v[1]->pid == 5 && v[2]->pid == 7, "removed first and last");

        Item s[4] = {{2}, {4}, {6}};
        size_t ns = 3;
        CHECK(SORTED_INDEX(s, ns, _e.pid, 4, &found) == 1 && found, "array of structs");
}

/* The chained hash against a reference: records found by key through their links in chains shared
 * with other keys (a weak hash on purpose), unlinked from the middle of chains, across growth; a
 * walk that frees sees each record once. */
typedef struct HashRec {
        uint64_t key;
        HashLink link;
        bool in;
} HashRec;

/* 97 hashes for all the keys (many keys per chain), spread over all bits (buckets change as they grow). */
static uint64_t hash_rec_hash(uint64_t key)
{
        return (key % 97 + 1) * 0x9e3779b97f4a7c15ULL;
}

static HashRec *hash_rec_find(const ChainHash *h, uint64_t key)
{
        uint64_t hash = hash_rec_hash(key);

        for (HashLink *l = chain_hash_first(h, hash); l; l = l->next) {
                HashRec *r = CHAIN_HASH_ENTRY(l, HashRec, link);

                if (l->hash == hash && r->key == key)
                        return r;
        }
        return NULL;
}

static void test_chain_hash(void)
{
        enum { N = 3000 };
        static HashRec recs[N];
        ChainHash h = {};
        unsigned seed = 99, mismatches = 0;
        size_t n = 0, seen = 0;

        CHECK(chain_hash_first(&h, 5) == NULL && chain_hash_bytes(&h) == 0,
              "empty: no buckets, nothing found");
        for (size_t i = 0; i < N; i++) {
                recs[i] = (HashRec){.key = i * 1000003};
                if (chain_hash_add(&h, &recs[i].link, hash_rec_hash(recs[i].key)) < 0)
                        mismatches++;
                recs[i].in = true;
        }
        CHECK(mismatches == 0 && h.n == N && h.n_buckets >= N && (h.n_buckets & (h.n_buckets - 1)) == 0,
              "%d added: %zu buckets, a power of two, one per record at least", N, h.n_buckets);
        for (unsigned round = 0; round < 4000; round++) {
                size_t i = rand_r(&seed) % N;

                if (recs[i].in) {
                        chain_hash_remove(&h, &recs[i].link);
                        recs[i].in = false;
                }
        }
        for (size_t i = 0; i < N; i++) {
                HashRec *r = hash_rec_find(&h, recs[i].key);

                n += recs[i].in;
                if (recs[i].in ? r != &recs[i] : r != NULL)
                        mismatches++;
        }
        CHECK(mismatches == 0 && h.n == n,
              "finds agree with the reference after removals (%u mismatches, %zu of %zu)", mismatches, h.n,
              n);
        CHAIN_HASH_FOREACH (l, &h) {
                HashRec *r = CHAIN_HASH_ENTRY(l, HashRec, link);

                seen += r->in;
                l->next = (HashLink *)0x1; /* what freeing may leave: the walk took next already */
        }
        CHECK(seen == n, "a walk sees every record once (%zu of %zu)", seen, n);
        CHECK(chain_hash_bytes(&h) == h.n_buckets * sizeof(HashLink *), "bytes counted");
        chain_hash_done(&h);
        CHECK(h.buckets == NULL && h.n == 0 && h.n_buckets == 0, "done: freed");
}

/* The pid table against a reference: records found by their own pid, removal by pid and by
 * position (the last record takes the hole), a walk backwards that removes, refusals. */
typedef struct PidRec {
        uint64_t tag;
        pid_t pid;
        bool gone;
} PidRec;

static void test_pid_table(void)
{
        enum { N = 5000 };
        static PidRec recs[N];
        PidTable t = PID_TABLE_INIT(PidRec, pid);
        PidRec zero = {.pid = 0}, neg = {.pid = -4}, dup;
        unsigned seed = 777, mismatches = 0;
        size_t pos, live = 0;

        CHECK(pid_table_find(&t, 1, &pos) == NULL && pid_table_remove(&t, 1) == NULL,
              "empty: nothing found");
        for (size_t i = 0; i < N; i++) {
                recs[i] = (PidRec){.tag = i * 3, .pid = (pid_t)(100000 + i * 7)};
                if (pid_table_add(&t, &recs[i]) < 0)
                        mismatches++;
        }
        dup = recs[10];
        CHECK(pid_table_add(&t, &dup) == -EEXIST && pid_table_add(&t, &zero) == -EINVAL &&
                      pid_table_add(&t, &neg) == -EINVAL && pid_table_size(&t) == N,
              "a known pid and pids <= 0 refused, nothing changed");
        /* Random removals by pid and by position. */
        for (unsigned round = 0; round < 2000; round++) {
                size_t i = rand_r(&seed) % N;
                PidRec *r;

                if (recs[i].gone)
                        continue;
                if (round & 1) {
                        r = pid_table_remove(&t, recs[i].pid);
                } else {
                        r = pid_table_find(&t, recs[i].pid, &pos);
                        r = r ? pid_table_remove_at(&t, pos) : NULL;
                }
                if (r != &recs[i])
                        mismatches++;
                recs[i].gone = true;
        }
        for (size_t i = 0; i < N; i++) {
                PidRec *r = pid_table_find(&t, recs[i].pid, &pos);

                live += !recs[i].gone;
                if (recs[i].gone
                            ? r != NULL
                            : (r != &recs[i] || pos >= pid_table_size(&t) || pid_table_at(&t, pos) != r))
                        mismatches++;
        }
        CHECK(mismatches == 0 && pid_table_size(&t) == live,
              "pid table agrees with the reference after removals (%u mismatches, %zu of %zu)", mismatches,
              pid_table_size(&t), live);
        /* A walk backwards that removes every record with an odd tag looks at each once. */
        {
                size_t seen = 0, odd = 0;

                for (size_t k = pid_table_size(&t); k-- > 0;) {
                        PidRec *r = pid_table_at(&t, k);

                        seen++;
                        if (r->tag & 1) {
                                odd++;
                                (void)pid_table_remove_at(&t, k);
                                r->gone = true;
                        }
                }
                mismatches = 0;
                for (size_t k = 0; k < pid_table_size(&t); k++)
                        mismatches += (((PidRec *)pid_table_at(&t, k))->tag & 1) != 0;
                CHECK(seen == live && mismatches == 0 && pid_table_size(&t) == live - odd,
                      "a backward walk that removes sees every record once (%zu of %zu, %zu removed)", seen,
                      live, odd);
        }
        CHECK(pid_table_bytes(&t) == t.cap * sizeof(void *) + pid_index_bytes(&t.index), "bytes counted");
        pid_table_done(&t);
        CHECK(t.items == NULL && t.n == 0 && t.index.slots == NULL && t.pid_offset == offsetof(PidRec, pid),
              "done: freed, still for the same records");
}

/* The pid index against a plain array of positions, through adds, moves and removals that leave
 * long probe runs behind (pids that share a home slot, the table grown several times). */
static void test_pid_index(void)
{
        enum { MAXPID = 40000 };
        static int64_t ref[MAXPID]; /* pid -> position, -1: not there */
        PidIndex ix = {};
        unsigned seed = 12345, mismatches = 0;
        uint32_t pos;
        size_t n = 0;

        for (size_t i = 0; i < MAXPID; i++)
                ref[i] = -1;
        CHECK(!pid_index_get(&ix, 1, &pos), "empty: nothing found");
        CHECK(pid_index_set(&ix, 0, 1) == -EINVAL && pid_index_set(&ix, -3, 1) == -EINVAL,
              "pid <= 0 refused");
        pid_index_remove(&ix, 7); /* nothing there: nothing happens */
        for (unsigned round = 0; round < 400000; round++) {
                pid_t pid = 1 + (int)(rand_r(&seed) % (MAXPID - 1));
                unsigned op = rand_r(&seed) % 8;
                if (op < 4) {
                        if (ref[pid] < 0)
                                n++;
                        ref[pid] = round;
                        if (pid_index_set(&ix, pid, round) < 0)
                                mismatches++;
                } else if (op < 6) {
                        if (ref[pid] >= 0)
                                n--;
                        ref[pid] = -1;
                        pid_index_remove(&ix, pid);
                } else {
                        bool found = pid_index_get(&ix, pid, &pos);
                        if (found != (ref[pid] >= 0) || (found && pos != (uint32_t)ref[pid]))
                                mismatches++;
                }
        }
        for (pid_t pid = 1; pid < MAXPID; pid++) {
                bool found = pid_index_get(&ix, pid, &pos);
                if (found != (ref[pid] >= 0) || (found && pos != (uint32_t)ref[pid]))
                        mismatches++;
        }
        CHECK(mismatches == 0, "pid index agrees with the reference (%u mismatches)", mismatches);
        CHECK(ix.n == n, "pid index holds %zu pids, the reference %zu", ix.n, n);
        CHECK(ix.n * 2 <= ix.cap && pid_index_bytes(&ix) == ix.cap * sizeof(PidSlot),
              "load at most one half (%zu in %zu slots)", ix.n, ix.cap);
        /* Full up to the load that makes the next add grow it: a move of a known pid does not. */
        {
                PidIndex full = {};
                size_t cap;

                (void)pid_index_set(&full, 1, 1);
                cap = full.cap;
                for (pid_t pid = 2; full.n * 2 < cap; pid++)
                        (void)pid_index_set(&full, pid, (uint32_t)pid);
                CHECK(pid_index_set(&full, 1, 77) == 0 && full.cap == cap && pid_index_get(&full, 1, &pos) &&
                              pos == 77,
                      "a move at the growth threshold stays in place (%zu slots)", full.cap);
                CHECK(pid_index_set(&full, 999999, 5) == 0 && full.cap == cap * 2, "the next add grows it");
                pid_index_done(&full);
        }
        for (pid_t pid = 1; pid < MAXPID; pid++)
                pid_index_remove(&ix, pid);
        CHECK(ix.n == 0 && !pid_index_get(&ix, 1, &pos), "all removed: empty");
        pid_index_done(&ix);
        CHECK(ix.slots == NULL && ix.cap == 0, "done: freed");
}

static void test_metrics(void)
{
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        const char *const names[] = {"a", NULL, "c"};
        const uint64_t values[] = {1, 2, 3};

        metric_counter(f, "profd_x_total", "Things.", 7);
        metric_gauge_seconds(f, "profd_y_seconds", "Time.", 1500000000);
        metric_labelled(f, "profd_z_total", "counter", "By reason.", "reason", names, values, 3);
        metric_sample(f, "profd_w", "a=\"1\",b=\"2\"", 18446744073709551615ULL);
        metric_sample_fixed(f, "process_cpu_seconds_total", NULL, 1.005, 2);
        fclose(f);
        CHECK(strcmp(buf,
                     "# HELP profd_x_total Things.\n# TYPE profd_x_total counter\nprofd_x_total 7\n"
                     "# HELP profd_y_seconds Time.\n# TYPE profd_y_seconds gauge\nprofd_y_seconds 1.500000\n"
                     "# HELP profd_z_total By reason.\n# TYPE profd_z_total counter\n"
                     "profd_z_total{reason=\"a\"} 1\nprofd_z_total{reason=\"c\"} 3\n"
                     "profd_w{a=\"1\",b=\"2\"} 18446744073709551615\n"
                     "process_cpu_seconds_total 1.00\n") == 0,
              "exposition:\n%s", buf);
        free(buf);
}

/* gcc defines __SANITIZE_ADDRESS__, clang has the feature test. */
static bool built_with_asan(void)
{
#if defined(__SANITIZE_ADDRESS__)
        return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
        return true;
#endif
#endif
        return false;
}

/* A file mapped whole and partly read: its resident part is what was read, and a mapping
 * of part of it (a library's segment) is not counted. */
static void test_files_rss(void)
{
        char path[] = "/tmp/profd-memtest-XXXXXX";
        const size_t page = 4096, size = 64 * page;
        MemoryFile f = {};
        uint64_t rss[2] = {1, 1}, before = 0, after = 0;
        struct stat st;
        int fd = mkstemp(path);

        if (!check(fd >= 0, "scratch file"))
                return;
        unlink(path);
        CHECK(ftruncate(fd, size) == 0);
        CHECK(fstat(fd, &st) == 0);
        f = (MemoryFile){.dev = st.st_dev, .ino = st.st_ino, .size = size};
        volatile const char *whole = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        const char *part = mmap(NULL, 4 * page, PROT_READ, MAP_PRIVATE, fd, 0);
        CHECK(whole != MAP_FAILED && part != MAP_FAILED);
        /* No read-around: without it the kernel reads ahead in large folios (ext4 on 6.16+) and maps
         * whole folios at a fault, so more pages than were read could be resident. */
        CHECK(madvise((void *)whole, size, MADV_RANDOM) == 0 &&
              madvise((void *)part, 4 * page, MADV_RANDOM) == 0);
        CHECK(memory_files_rss(&f, 1, rss) == 0 && rss[0] == 0, "untouched: %llu",
              (unsigned long long)rss[0]);
        /* Only pages read are in the page cache (the file is all holes), so fault-around maps
         * no others. */
        for (size_t i = 0; i < 16; i++)
                (void)whole[i * page];
        (void)*(volatile const char *)part;
        MemoryFile two[2] = {f, {}};
        int r = memory_files_rss(two, 2, rss);
        check(r == 0 && rss[0] == 16 * page && rss[1] == 0,
              "whole mapping: 16 pages read -> %llu bytes; partial mapping and size 0 not counted",
              (unsigned long long)rss[0]);
        /* Dropped: no longer resident, and read again it is still the file's data. */
        CHECK(pwrite(fd, "profd", 5, 3 * page) == 5);
        r = memory_files_rss_drop(two, 2, rss);
        CHECK(r == 0 && rss[0] == 16 * page, "measured before the drop: %llu", (unsigned long long)rss[0]);
        r = memory_files_rss(two, 2, rss);
        check(r == 0 && rss[0] == 0 && memcmp((const char *)whole + 3 * page, "profd", 5) == 0,
              "dropped pages: %llu bytes resident, read again from the file", (unsigned long long)rss[0]);
        /* A page written in a private mapping (as libelf rewrites section headers) is kept. */
        char *rw = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        if (check(rw != MAP_FAILED && madvise(rw, size, MADV_RANDOM) == 0, "writable private mapping")) {
                for (size_t i = 0; i < 8; i++)
                        (void)*(volatile char *)(rw + i * page);
                memcpy(rw + 2 * page, "copy", 4);
                MemoryFile one = f;
                r = memory_files_rss_drop(&one, 1, rss);
                check(r == 0 && memcmp(rw + 2 * page, "copy", 4) == 0 &&
                              memcmp(rw + 3 * page, "profd", 5) == 0,
                      "drop keeps the written page, file pages read again");
                munmap(rw, size);
        }
        munmap((void *)whole, size);
        munmap((void *)part, 4 * page);
        close(fd);

        /* A freed peak is given back: 32 MiB in 4 KiB blocks, all freed but the last (the heap's
         * top stays put, so only malloc_trim's release of free pages inside it helps). */
        enum { N = 8192 };
        char **v = calloc(N, sizeof(*v));
        CHECK(v);
        for (size_t i = 0; v && i < N; i++) {
                v[i] = malloc(4000);
                if (v[i])
                        memset(v[i], 1, 4000);
        }
        for (size_t i = 0; v && i + 1 < N; i++)
                free(v[i]);
        CHECK(memory_self_rss(&before) == 0);
        memory_release_free();
        CHECK(memory_self_rss(&after) == 0);
        if (built_with_asan())
                /* ASan's allocator stands in for glibc's (freed blocks wait in its quarantine), so
                 * malloc_trim() gives nothing back: glibc's is checked in the plain build
                 * (tests/run-all.sh runs this test in both). */
                printf("NOTE: AddressSanitizer build: glibc's malloc_trim() not checked here (RSS %llu -> "
                       "%llu KiB)\n",
                       (unsigned long long)before >> 10, (unsigned long long)after >> 10);
        else
                check(before > after && before - after >= 16u << 20,
                      "free heap given back: RSS %llu -> %llu KiB", (unsigned long long)before >> 10,
                      (unsigned long long)after >> 10);

        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        MemoryOwners o = {};
        const char *fr = NULL;
        memory_owners_add(&o, "a", 1);
        memory_owners_add(&o, "a", 2);
        memory_owners_write_metrics(&o, m);
        fclose(m);
        CHECK(buf && strstr(buf, "profd_memory_bytes{owner=\"a\"} 3\n") &&
                      (fr = strstr(buf, "profd_memory_bytes{owner=\"allocator_free\"} ")) &&
                      strstr(buf, "profd_memory_bytes{owner=\"code\"} ") &&
                      strstr(buf, "profd_memory_bytes{owner=\"other\"} "),
              "%s", buf);
        /* The 16+ MiB freed above are still on malloc's free list (v[N - 1] holds the heap's top)
         * but no longer resident: not counted as held. */
        if (buf && fr)
                check(strtoull(fr + strlen("profd_memory_bytes{owner=\"allocator_free\"} "), NULL, 10) <
                              8u << 20,
                      "allocator_free counts only resident free heap: %s", fr);
        free(buf);
        if (v)
                free(v[N - 1]);
        free(v);
}

/* An owner of the budget test: entries of 1 KiB, released down to the bound it is given. */
typedef struct FakeOwner {
        uint64_t bytes, limit;
} FakeOwner;

static uint64_t fake_bytes(void *userdata)
{
        return ((FakeOwner *)userdata)->bytes;
}

static uint64_t fake_set_limit(void *userdata, uint64_t max_bytes)
{
        FakeOwner *o = userdata;
        uint64_t n = o->bytes > max_bytes ? (o->bytes - max_bytes) >> 10 : 0;

        o->limit = max_bytes;
        if (o->bytes > max_bytes)
                o->bytes = max_bytes;
        return n;
}

static void test_budget(void)
{
        const uint64_t M = 1 << 20;
        _cleanup_(memory_budget_freep) MemoryBudget *b = NULL;
        FakeOwner a = {40 * M, 40 * M}, p = {8 * M, 8 * M};
        char *buf = NULL;
        size_t size = 0;
        FILE *m;

        CHECK(memory_budget_new(100 * M, &b) == 0, "new");
        if (!b)
                return;
        CHECK(memory_budget_add(b, &(MemoryBudgetOwner){"a", fake_bytes, fake_set_limit, 50 * M, 40 * M,
                                                        &a}) == -EINVAL,
              "a floor over the ceiling is refused");
        CHECK(memory_budget_add(
                      b, &(MemoryBudgetOwner){"a", fake_bytes, fake_set_limit, 16 * M, 40 * M, &a}) == 0 &&
                      memory_budget_add(
                              b, &(MemoryBudgetOwner){"p", fake_bytes, fake_set_limit, M, 8 * M, &p}) == 0,
              "add");
        /* Under the target: nothing moves. */
        CHECK(memory_budget_check(b, 90 * M) == 0 && a.bytes == 40 * M && p.bytes == 8 * M,
              "under the target");
        /* 10 MiB over: the first owner gives it all, the second keeps its own. */
        CHECK(memory_budget_check(b, 110 * M) == 10240 && a.limit == 30 * M && p.limit == 8 * M &&
                      memory_budget_limit(b, "a") == 30 * M,
              "10 MiB over: a %" PRIu64 " p %" PRIu64, a.limit, p.limit);
        /* 30 MiB over: the first down to its floor, the second too, and 9 MiB still over: counted. */
        CHECK(memory_budget_check(b, 130 * M) == 14336 + 7168 && a.limit == 16 * M && p.limit == M,
              "30 MiB over: a %" PRIu64 " p %" PRIu64, a.limit, p.limit);
        /* Within the slack under the target: the bounds stay low. */
        CHECK(memory_budget_check(b, 95 * M) == 0 && a.limit == 16 * M && p.limit == M, "in the slack");
        /* 12 MiB of room: the first owner gets it back first. */
        memory_budget_check(b, 80 * M);
        CHECK(a.limit == 28 * M && p.limit == M, "raised: a %" PRIu64 " p %" PRIu64, a.limit, p.limit);
        memory_budget_check(b, 50 * M);
        CHECK(a.limit == 40 * M && p.limit == 8 * M, "back to their own: a %" PRIu64 " p %" PRIu64, a.limit,
              p.limit);

        m = open_memstream(&buf, &size);
        if (!m)
                return;
        memory_budget_write_metrics(b, m);
        fclose(m);
        CHECK(buf && strstr(buf, "profd_memory_budget_evictions_total{owner=\"a\"} 24576\n") &&
                      strstr(buf, "profd_memory_budget_evictions_total{owner=\"p\"} 7168\n") &&
                      strstr(buf, "profd_memory_budget_over_total 1\n") &&
                      strstr(buf, "profd_memory_target_bytes 104857600\n") &&
                      strstr(buf, "profd_memory_budget_limit_bytes{owner=\"a\"} 41943040\n"),
              "%s", buf);
        free(buf);
}

/* The hysteresis of an owner dear to lose: asked only after `patience` checks over in a row, and
 * lowered a step a check. */
static void test_budget_hysteresis(void)
{
        const uint64_t M = 1 << 20;
        _cleanup_(memory_budget_freep) MemoryBudget *b = NULL;
        FakeOwner a = {40 * M, 40 * M}, p = {8 * M, 8 * M};
        char *buf = NULL;
        size_t size = 0;
        FILE *m;

        CHECK(memory_budget_new(100 * M, &b) == 0, "new");
        if (!b)
                return;
        CHECK(memory_budget_add(
                      b, &(MemoryBudgetOwner){"a", fake_bytes, fake_set_limit, 16 * M, 40 * M, &a}) == 0 &&
                      memory_budget_add(b, &(MemoryBudgetOwner){"p", fake_bytes, fake_set_limit, M, 8 * M,
                                                                &p, .patience = 2, .step = M}) == 0,
              "add");
        /* A peak of two checks: the first owner gives all it can, the patient one nothing, and
         * the checks are not counted as over with every owner at its floor. */
        memory_budget_check(b, 130 * M);
        memory_budget_check(b, 130 * M);
        CHECK(a.limit == 16 * M && p.limit == 8 * M, "peak: a %" PRIu64 " p %" PRIu64, a.limit, p.limit);
        /* A check under the target ends the run: the next peak waits again. */
        memory_budget_check(b, 99 * M);
        memory_budget_check(b, 130 * M);
        memory_budget_check(b, 130 * M);
        CHECK(p.limit == 8 * M, "a run restarts under the target: p %" PRIu64, p.limit);
        /* The third check over in a row: a step of 1 MiB, then one more each check, down to the floor. */
        memory_budget_check(b, 130 * M);
        CHECK(p.limit == 7 * M, "one step: p %" PRIu64, p.limit);
        for (int i = 0; i < 10; i++)
                memory_budget_check(b, 130 * M);
        CHECK(p.limit == M && p.bytes == M, "at its floor after steps: p %" PRIu64, p.limit);

        m = open_memstream(&buf, &size);
        if (!m)
                return;
        memory_budget_write_metrics(b, m);
        fclose(m);
        /* Of the 10 checks after the first step, 5 were over (from 2 MiB to 1 and after) with both at their
         * floors. */
        CHECK(buf && strstr(buf, "profd_memory_budget_over_total 5\n"), "%s", buf);
        free(buf);
}

/* Ids are never reused: a forgotten one names nothing, also once its slot holds a newer entry. */
static void test_id_ring(void)
{
        _cleanup_(id_ring_freep) IdRing *r = NULL;
        int v[8];
        void *gone;
        uint64_t id, ids[8];

        CHECK(id_ring_new(0, 10, &r) == -EINVAL, "max 0 refused");
        CHECK(id_ring_new(3, 6, &r) == 0, "new");
        if (!r)
                return;
        CHECK(!id_ring_get(r, 0) && !id_ring_get(r, 1), "nothing given yet");
        for (int i = 0; i < 3; i++) {
                ids[i] = id_ring_push(r, &v[i], &gone);
                CHECK(ids[i] == (uint64_t)i + 1 && !gone, "push %d: id %" PRIu64, i, ids[i]);
        }
        CHECK(id_ring_count(r) == 3 && id_ring_get(r, 2) == &v[1], "kept");
        /* Full: the oldest is handed back, its id names nothing, its slot holds id 4. */
        ids[3] = id_ring_push(r, &v[3], &gone);
        CHECK(ids[3] == 4 && gone == &v[0] && !id_ring_get(r, 1) && id_ring_get(r, 4) == &v[3] &&
                      id_ring_count(r) == 3,
              "pushed out: id %" PRIu64, ids[3]);
        /* Forgotten early: id 3's slot stays empty, the others kept; twice is nothing. */
        CHECK(id_ring_forget(r, 3) == &v[2] && !id_ring_forget(r, 3) && !id_ring_get(r, 3) &&
                      id_ring_count(r) == 2,
              "forgotten early");
        /* Oldest first, skipping the one forgotten early. */
        CHECK(id_ring_pop_oldest(r, &id) == &v[1] && id == 2, "pop: id %" PRIu64, id);
        CHECK(id_ring_pop_oldest(r, &id) == &v[3] && id == 4, "pop past the gap: id %" PRIu64, id);
        CHECK(!id_ring_pop_oldest(r, &id) && id_ring_count(r) == 0, "empty");
        CHECK(!id_ring_get(r, 4) && !id_ring_get(r, 5), "popped and never given name nothing");
        /* max_id 6: ids 5 and 6, then none (counted). */
        CHECK(id_ring_push(r, &v[5], &gone) == 5 && id_ring_push(r, &v[6], &gone) == 6 &&
                      id_ring_push(r, &v[7], &gone) == 0 && id_ring_used_up(r) == 1,
              "ids used up");
        CHECK(id_ring_get(r, 5) == &v[5] && id_ring_get(r, 6) == &v[6] && id_ring_forgotten(r) == 4,
              "forgotten %" PRIu64, id_ring_forgotten(r));
}

typedef struct SumJob {
        uint64_t n, sum;
        int thread; /* which thread's state ran it */
} SumJob;

static int threads_begun, threads_ended, jobs_discarded;
static pthread_mutex_t sum_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER; /* held: jobs wait */

static void *sum_begin(WorkThreads *w, void *userdata)
{
        int *id = malloc(sizeof(*id));

        pthread_mutex_lock(&sum_lock);
        *id = ++threads_begun;
        pthread_mutex_unlock(&sum_lock);
        return id;
}

static void sum_end(void *state)
{
        pthread_mutex_lock(&sum_lock);
        threads_ended++;
        pthread_mutex_unlock(&sum_lock);
        free(state);
}

static void sum_run(void *arg, void *state)
{
        SumJob *j = arg;

        pthread_mutex_lock(&gate);
        pthread_mutex_unlock(&gate);
        for (uint64_t i = 1; i <= j->n; i++)
                j->sum += i;
        j->thread = *(int *)state;
}

static void sum_discard(void *arg)
{
        jobs_discarded++;
}

static bool sum_is(const void *job, const void *arg)
{
        return ((const SumJob *)job)->n == *(const uint64_t *)arg;
}

static bool readable(int fd, int ms)
{
        struct pollfd p = {.fd = fd, .events = POLLIN};
        return poll(&p, 1, ms) == 1;
}

static void test_work_threads(void)
{
        static const WorkThreadsOps ops = {
                .thread_begin = sum_begin, .thread_end = sum_end, .run = sum_run, .discard = sum_discard};
        WorkThreads *w = NULL;
        SumJob got[8];
        size_t n = 0, taken;
        int efd;
        bool all_right = true;

        CHECK(work_threads_new(0, 8, sizeof(SumJob), &ops, NULL, &w, &efd) == -EINVAL &&
                      work_threads_new(2, WORK_SLOTS_MAX + 1, sizeof(SumJob), &ops, NULL, &w, &efd) ==
                              -EINVAL,
              "work threads: no threads or too many slots refused");
        pthread_mutex_lock(&gate);
        CHECK(work_threads_new(2, 8, sizeof(SumJob), &ops, NULL, &w, &efd) == 0, "work threads: started");
        if (!w)
                return;
        for (uint64_t i = 1; i <= 8; i++)
                CHECK(work_threads_submit(w, &(SumJob){.n = i * 1000}) == 0, "work threads: job %" PRIu64,
                      i);
        CHECK(work_threads_submit(w, &(SumJob){.n = 1}) == -EAGAIN, "work threads: a ninth is refused");
        uint64_t key = 5000, none = 77;
        CHECK(work_threads_find(w, sum_is, &key) && !work_threads_find(w, sum_is, &none),
              "work threads: a queued job found by its contents");
        CHECK(!readable(efd, 0) && work_threads_pending(w) == 8,
              "work threads: nothing finished while held");
        pthread_mutex_unlock(&gate);
        /* Taken 3 at a time: the eventfd stays readable while finished jobs are left. */
        bool threads_seen[3] = {false};
        for (int tries = 0; n < 8 && tries < 100; tries++) {
                if (!readable(efd, 100))
                        continue;
                taken = work_threads_take(w, got, 3);
                CHECK(taken <= 3, "work threads: at most max taken");
                for (size_t i = 0; i < taken; i++) {
                        uint64_t m = got[i].n;
                        all_right &= got[i].sum == m * (m + 1) / 2;
                        if (got[i].thread >= 1 && got[i].thread <= 2)
                                threads_seen[got[i].thread] = true;
                }
                n += taken;
        }
        CHECK(n == 8 && all_right, "work threads: all 8 finished and taken with their results (%zu)", n);
        CHECK(threads_seen[1] || threads_seen[2], "work threads: run with their thread's state");
        CHECK(work_threads_pending(w) == 0 && !work_threads_find(w, sum_is, &key),
              "work threads: none left once taken");
        /* Left at free: one finished not taken, several queued behind the gate. */
        CHECK(work_threads_submit(w, &(SumJob){.n = 10}) == 0, "work threads: one more");
        CHECK(readable(efd, 5000), "work threads: it finished");
        pthread_mutex_lock(&gate);
        for (int i = 0; i < 4; i++)
                work_threads_submit(w, &(SumJob){.n = 10});
        CHECK(!work_threads_stopping(w), "work threads: not stopping");
        pthread_mutex_unlock(&gate);
        work_threads_free(w);
        CHECK(threads_begun == 2 && threads_ended == 2,
              "work threads: each thread's state made and ended once");
        CHECK(jobs_discarded >= 1 && jobs_discarded <= 5,
              "work threads: the jobs not taken discarded at free (%d)", jobs_discarded);
}

int main(void)
{
        test_grow();
        test_sorted();
        test_pid_index();
        test_pid_table();
        test_chain_hash();
        test_metrics();
        test_files_rss();
        test_budget();
        test_budget_hysteresis();
        test_id_ring();
        test_work_threads();
        printf("%s: %u failures\n", failures ? "FAIL" : "ok", failures);
        return failures ? 1 : 0;
}
