/* SPDX-License-Identifier: GPL-2.0-only */
/* Many elements of one BPF map written or deleted in one bpf() call (BPF_MAP_*_BATCH), falling
 * back to one call per element where the kernel lacks batch operations for the map type. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef struct MapBatch {
        bool unsupported; /* the kernel refused a batch: one call per element from then on */
        unsigned long long calls, elements; /* bpf() calls made, elements they carried */
} MapBatch;

/* Called with the index of an element that could not be written or deleted and -errno. */
typedef void (*MapBatchFailedFn)(size_t index, int error, void *userdata);

/* Writes keys[i] -> values[i] (BPF_ANY) for i < n, in order. Returns 0 or the first -errno; each
 * failed element is reported to failed (may be NULL) and the rest are still written. */
int map_batch_update(MapBatch *b, int fd, const void *keys, size_t key_size, const void *values,
                     size_t value_size, size_t n, MapBatchFailedFn failed, void *userdata);
/* Deletes keys[i] for i < n; a key not in the map is not an error. */
void map_batch_delete(MapBatch *b, int fd, const void *keys, size_t key_size, size_t n);
