/* SPDX-License-Identifier: GPL-2.0-only */
/* Growable arrays and arrays kept sorted by an integer key (a pid): one way to grow, insert,
 * remove and find, instead of a doubling loop and a memmove at every use. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Makes room for need elements of elem bytes in *p, whose room is *cap elements: doubles from
 * min_cap (the first allocation) until need fits. On -ENOMEM *p and *cap are unchanged. */
static inline int array_grow(void **p, size_t *cap, size_t need, size_t elem, size_t min_cap)
{
        size_t n;
        void *q;

        if (need <= *cap)
                return 0;
        n = *cap ? *cap : (min_cap ? min_cap : 1);
        while (n < need) {
                if (n > SIZE_MAX / 2)
                        return -ENOMEM;
                n *= 2;
        }
        q = reallocarray(*p, n, elem);
        if (!q)
                return -ENOMEM;
        *p = q;
        *cap = n;
        return 0;
}

/* ARRAY_GROW(v, cap, n + 1, 64): the typed form, for `T *v; size_t cap;`. */
#define ARRAY_GROW(array, cap, need, min_cap)                                                               \
        array_grow((void **)&(array), &(cap), (need), sizeof(*(array)), (min_cap))

/* Opens a slot at index i of an array of *n elements (room for one more ensured by the caller) and
 * copies value into it. */
static inline void array_insert_at(void *base, size_t *n, size_t elem, size_t i, const void *value)
{
        char *b = base;

        memmove(b + (i + 1) * elem, b + i * elem, (*n - i) * elem);
        memcpy(b + i * elem, value, elem);
        (*n)++;
}

/* Closes the slot at index i of an array of *n elements. */
static inline void array_remove_at(void *base, size_t *n, size_t elem, size_t i)
{
        char *b = base;

        memmove(b + i * elem, b + (i + 1) * elem, (*n - i - 1) * elem);
        (*n)--;
}

#define ARRAY_INSERT_AT(array, n, i, value)                                                                 \
        ({                                                                                                  \
                __typeof__(*(array)) _v = (value);                                                          \
                array_insert_at((array), &(n), sizeof(*(array)), (i), &_v);                                 \
        })
#define ARRAY_REMOVE_AT(array, n, i) array_remove_at((array), &(n), sizeof(*(array)), (i))

/* In an array of n elements sorted by KEY(element) ascending (KEY an expression of `_e`, the
 * element: `_e->pid` for an array of pointers, `_e.pid` for one of structs): the index of key, or
 * where it would be inserted; *ret_found tells which. */
#define SORTED_INDEX(array, n, KEY, key, ret_found)                                                         \
        ({                                                                                                  \
                size_t _n = (n), _lo = 0, _hi = _n;                                                         \
                while (_lo < _hi) {                                                                         \
                        size_t _mid = _lo + (_hi - _lo) / 2;                                                \
                        __typeof__((array)[0]) _e = (array)[_mid];                                          \
                        if ((KEY) < (key))                                                                  \
                                _lo = _mid + 1;                                                             \
                        else                                                                                \
                                _hi = _mid;                                                                 \
                }                                                                                           \
                if (_lo < _n) {                                                                             \
                        __typeof__((array)[0]) _e = (array)[_lo];                                           \
                        *(ret_found) = (KEY) == (key);                                                      \
                } else                                                                                      \
                        *(ret_found) = false;                                                               \
                _lo;                                                                                        \
        })
