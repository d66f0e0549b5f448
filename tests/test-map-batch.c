/* SPDX-License-Identifier: GPL-2.0-only */
/* map-batch.h on a real LPM trie (the unwinder's mapping entries are one): a batch with a bad
 * element in the middle writes every other element and reports that one; deletes go on past keys
 * that are not in the map; the same with batches off (kernels without them). Needs root for the
 * BPF map; SKIPs otherwise. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "lib/test-util.h"
#include "unwind/map-batch.h"

#define N_KEYS 10
#define BAD_KEY 4

struct key {
        uint32_t prefixlen;
        uint32_t data;
};

static size_t failed_at = SIZE_MAX;
static unsigned n_failed;

static void on_failed(size_t i, int error, void *userdata)
{
        (void)userdata;
        check(error == -EINVAL, "element %zu failed with %d", i, error);
        failed_at = i;
        n_failed++;
}

static void run(bool batches)
{
        LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = BPF_F_NO_PREALLOC);
        struct key keys[N_KEYS];
        uint64_t values[N_KEYS], v;
        MapBatch b = {.unsupported = !batches};
        unsigned present = 0;
        int fd, r;

        fd = bpf_map_create(BPF_MAP_TYPE_LPM_TRIE, "test_batch", sizeof(struct key), sizeof(uint64_t), 64,
                            &o);
        if (!check(fd >= 0, "an LPM trie created (%d)", fd))
                return;
        for (unsigned i = 0; i < N_KEYS; i++) {
                /* Prefix longer than the key: the kernel refuses this element alone. */
                keys[i] = (struct key){.prefixlen = i == BAD_KEY ? 33 : 32, .data = 0x01000000u + i};
                values[i] = 1000 + i;
        }
        failed_at = SIZE_MAX;
        n_failed = 0;
        r = map_batch_update(&b, fd, keys, sizeof(*keys), values, sizeof(*values), N_KEYS, on_failed, NULL);
        check(r == -EINVAL && n_failed == 1 && failed_at == BAD_KEY,
              "%s: update returns the bad element's error (%d) and reports it alone (%u, at %zu)",
              batches ? "batches" : "one by one", r, n_failed, failed_at);
        for (unsigned i = 0; i < N_KEYS; i++)
                if (i != BAD_KEY && bpf_map_lookup_elem(fd, &keys[i], &v) == 0 && v == values[i])
                        present++;
        check(present == N_KEYS - 1, "%s: the %u others written (%u)", batches ? "batches" : "one by one",
              N_KEYS - 1, present);
        if (batches && b.unsupported)
                printf("NOTE: this kernel has no batch operations for LPM tries: one call per element\n");
        else if (batches)
                check(b.calls <= 3, "batches: %llu bpf() calls for %d elements", b.calls, N_KEYS);
        else
                check(b.calls == N_KEYS, "one by one: %llu bpf() calls", b.calls);

        /* The bad key was never written: ENOENT stops a batch there, the rest must still go. */
        map_batch_delete(&b, fd, keys, sizeof(*keys), N_KEYS);
        present = 0;
        for (unsigned i = 0; i < N_KEYS; i++)
                if (i != BAD_KEY && bpf_map_lookup_elem(fd, &keys[i], &v) == 0)
                        present++;
        check(present == 0, "%s: delete removes all, past a missing key (%u left)",
              batches ? "batches" : "one by one", present);
        close(fd);
}

/* A map type without batch operations (a devmap: the kernel says ENOTSUPP, leaving the count as
 * passed): every element must still be written, one call each from then on. */
static void run_refused(void)
{
        uint32_t keys[3] = {0, 1, 2}, ifindex[3] = {1, 1, 1}, v;
        MapBatch b = {};
        int fd, r, present = 0;

        fd = bpf_map_create(BPF_MAP_TYPE_DEVMAP, "test_devmap", 4, 4, 3, NULL);
        if (!check(fd >= 0, "a devmap created (%d)", fd))
                return;
        r = map_batch_update(&b, fd, keys, sizeof(*keys), ifindex, sizeof(*ifindex), 3, NULL, NULL);
        for (int i = 0; i < 3; i++)
                if (bpf_map_lookup_elem(fd, &keys[i], &v) == 0 && v == 1)
                        present++;
        check(r == 0 && present == 3, "%s batch: all 3 written (%d, %d), %llu calls",
              b.unsupported ? "refused" : "accepted", r, present, b.calls);
        if (!b.unsupported)
                printf("NOTE: this kernel has devmap batches: the refused path was not exercised\n");
        close(fd);
}

int main(void)
{
        if (geteuid() != 0) {
                fprintf(stderr, "SKIP: test-map-batch needs root for a BPF map\n");
                return 77;
        }
        run(true);
        run(false);
        run_refused();
        printf("%s: %u failures\n", failures ? "FAIL" : "ok", failures);
        return failures ? 1 : 0;
}
