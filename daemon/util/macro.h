/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                         \
        static inline void func##p(type *p)                                                             \
        {                                                                                                \
                if (*p)                                                                                  \
                        *p = func(*p);                                                                   \
        }

static inline void freep(void *p)
{
        free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void closep(int *fd)
{
        if (*fd >= 0)
                close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f)
{
        if (*f)
                fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

static inline void *mfree(void *p)
{
        free(p);
        return NULL;
}

#define TAKE_PTR(p)                                                                                      \
        ({                                                                                               \
                __typeof__(p) _p = (p);                                                                  \
                (p) = NULL;                                                                              \
                _p;                                                                                      \
        })
#define TAKE_FD(fd)                                                                                      \
        ({                                                                                               \
                int _fd = (fd);                                                                          \
                (fd) = -1;                                                                               \
                _fd;                                                                                     \
        })

#define NSEC_PER_SEC 1000000000ULL
#define USEC_PER_SEC 1000000ULL
#define NSEC_PER_USEC 1000ULL

/* qsort() and memcpy() must not get NULL even for zero elements (C says so; UBSan checks it), and
 * an empty array is often still NULL: these do nothing for n == 0 (as systemd's do). */
static inline void qsort_safe(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
        if (n > 1)
                qsort(base, n, size, cmp);
}

static inline void *memcpy_safe(void *dst, const void *src, size_t n)
{
        if (n == 0)
                return dst;
        return __builtin_memcpy(dst, src, n);
}
