/* SPDX-License-Identifier: GPL-2.0-only */
/* The non-cryptographic hashes of the daemon's in-memory tables. Nothing hashed here is stored
 * or sent anywhere, so the values may change between versions. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* MurmurHash3's 64-bit finalizer: every input bit reaches the low bits that pick a bucket, so
 * pointers, pids and already-weak hashes spread evenly over power-of-two tables. */
static inline uint64_t hash_mix64(uint64_t x)
{
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdULL;
        x ^= x >> 33;
        x *= 0xc4ceb9fe1a85ec53ULL;
        x ^= x >> 33;
        return x;
}

/* 64-bit FNV-1a. Start from HASH_FNV1A_INIT; feeding the result back as h hashes data that
 * arrives in pieces (a file read in chunks) as if it were one buffer. */
#define HASH_FNV1A_INIT 0xcbf29ce484222325ULL

static inline uint64_t hash_fnv1a(uint64_t h, const void *p, size_t n)
{
        const unsigned char *s = p;
        for (size_t i = 0; i < n; i++)
                h = (h ^ s[i]) * 0x100000001b3ULL;
        return h;
}
