/* SPDX-License-Identifier: GPL-2.0-only */
/* A new process's mapping entries are some 10-30 LPM keys written after its exec and deleted at
 * its exit: one bpf() call each, bpf() being a fifth of profd's CPU per exec. The kernel's batch
 * operations (generic_map_{update,delete}_batch, which newer kernels give the LPM trie) do the
 * same per-element work in one call and stop at the first element that fails, saying how many
 * were done: that element is retried alone, then the batch goes on. A kernel without them
 * refuses the first batch, and elements go one call each as before. */
#include <errno.h>

#include <bpf/bpf.h>

#include "unwind/map-batch.h"

/* ENOTSUPP (524), the kernel's own "no such operation for this map type", is not in libc's
 * errno.h. */
#define KERNEL_ENOTSUPP 524

/* The kernel has no batch operation for the map type (ENOTSUPP), or no batch commands at all
 * (EINVAL, before 5.6: then also an element's own error; see the callers). */
static bool batch_refused(int error, unsigned done)
{
        return done == 0 && (error == -KERNEL_ENOTSUPP || error == -EOPNOTSUPP);
}

int map_batch_update(MapBatch *b, int fd, const void *keys, size_t key_size, const void *values,
                     size_t value_size, size_t n, MapBatchFailedFn failed, void *userdata)
{
        LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
        const char *k = keys, *v = values;
        int ret = 0;

        for (size_t i = 0; i < n;) {
                bool maybe_refused = false;

                if (!b->unsupported && n - i > 1) {
                        __u32 count = (__u32)(n - i);
                        int r;

                        b->calls++;
                        r = bpf_map_update_batch(fd, k + i * key_size, v + i * value_size, &count, &opts);
                        if (r == 0) {
                                b->elements += n - i;
                                return ret;
                        }
                        r = -errno;
                        /* Filled in by the kernel once it went through elements; a refused
                         * command leaves it as passed: then nothing is known done. */
                        if (count >= n - i)
                                count = 0;
                        b->elements += count;
                        i += count;
                        if (batch_refused(r, count))
                                b->unsupported = true;
                        /* EINVAL for the first element: a refused command if it alone is fine. */
                        maybe_refused = r == -EINVAL && count == 0;
                        /* Element i failed (or the batch was refused): once alone, below. */
                }
                b->calls++;
                b->elements++;
                if (bpf_map_update_elem(fd, k + i * key_size, v + i * value_size, BPF_ANY) == 0) {
                        if (maybe_refused)
                                b->unsupported = true;
                } else {
                        int r = -errno;

                        if (ret == 0)
                                ret = r;
                        if (failed)
                                failed(i, r, userdata);
                }
                i++;
        }
        return ret;
}

void map_batch_delete(MapBatch *b, int fd, const void *keys, size_t key_size, size_t n)
{
        LIBBPF_OPTS(bpf_map_batch_opts, opts);
        const char *k = keys;

        for (size_t i = 0; i < n;) {
                if (!b->unsupported && n - i > 1) {
                        __u32 count = (__u32)(n - i);
                        int r;

                        b->calls++;
                        r = bpf_map_delete_batch(fd, k + i * key_size, &count, &opts);
                        if (r == 0) {
                                b->elements += n - i;
                                return;
                        }
                        r = -errno;
                        if (count >= n - i)
                                count = 0;
                        b->elements += count;
                        i += count;
                        /* A key not in the map stops a batch with ENOENT, so EINVAL at the first
                         * is the command refused. */
                        if (batch_refused(r, count) || (r == -EINVAL && count == 0))
                                b->unsupported = true;
                        if (i >= n)
                                return;
                }
                /* Element i is not in the map (ENOENT stops a batch), or no batches. */
                b->calls++;
                b->elements++;
                (void)bpf_map_delete_elem(fd, k + i * key_size);
                i++;
        }
}
