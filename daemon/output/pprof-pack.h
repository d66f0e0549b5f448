/* SPDX-License-Identifier: GPL-2.0-only */
/* The pprof encoder's last phase: the interned tables serialized field by field and gzipped, a
 * chunk per step, so that a large profile never holds the event loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "profile.pb-c.h"

/* What goes out: the scalar fields of the Profile message, then its repeated fields. */
typedef struct PprofTables {
        int64_t time_nanos, duration_nanos, period;
        int64_t str_samples, str_count, str_cpu, str_nanoseconds;
        Perftools__Profiles__Sample *const *samples;
        size_t n_samples;
        Perftools__Profiles__Mapping *const *mappings;
        size_t n_mappings;
        Perftools__Profiles__Location *const *locations;
        size_t n_locations;
        Perftools__Profiles__Function *const *functions;
        size_t n_functions;
        char *const *strings;
        size_t n_strings;
} PprofTables;

typedef struct PprofPack {
        uint8_t *packed; /* the chunk being serialized */
        size_t packed_size, packed_cap;
        unsigned pack_section; /* 0: header not written yet, else the field being written */
        size_t pack_index;
        z_stream z;
        bool z_init, done;
        uint8_t *out;
        size_t out_size, out_cap;
} PprofPack;

/* Serializes and compresses the next chunk of t (the same tables every call): 0 while more
 * remains, 1 when the gzip stream is complete, <0 on error. */
int pprof_pack_step(PprofPack *p, const PprofTables *t);
/* After step returned 1: the gzipped bytes (ownership passes to the caller). */
int pprof_pack_take(PprofPack *p, void **ret_data, size_t *ret_size);
void pprof_pack_done(PprofPack *p);
