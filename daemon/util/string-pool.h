/* SPDX-License-Identifier: GPL-2.0-only */
/* Reference-counted interned strings. Mapped-file paths repeat across processes (every process
 * maps libc under the same name) and are often long (container image layers): interning stores
 * each distinct path once however many mappings carry it. */
#pragma once

#include <stddef.h>

#include "util/macro.h"

typedef struct StringPool StringPool;

int string_pool_new(StringPool **ret);
StringPool *string_pool_free(StringPool *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(StringPool *, string_pool_free);

/* A reference to the pool's copy of s (NULL when out of memory). The result is valid until the
 * matching string_pool_unref(). */
const char *string_pool_ref(StringPool *p, const char *s);
/* NULL-safe. s must come from string_pool_ref() of the same pool. */
void string_pool_unref(StringPool *p, const char *s);

size_t string_pool_count(const StringPool *p);
/* Heap bytes held by the pool: strings, their headers and the bucket array. */
size_t string_pool_bytes(const StringPool *p);
