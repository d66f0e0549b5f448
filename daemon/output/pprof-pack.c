/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <string.h>

#include "output/pprof-pack.h"
#include "util/array.h"
#include "util/macro.h"

/* Bytes of serialized profile produced and compressed per step. */
#define PACK_CHUNK (256 * 1024)

/* The profile is serialized field by field so no step packs everything at once: a message's
 * encoding is the concatenation of its fields in any order, and a repeated field is its
 * elements in order, each as key + length + bytes. The scalar fields go first (a Profile
 * holding only those, packed by protobuf-c), then samples, mappings, locations, functions and
 * strings. Each step appends up to PACK_CHUNK bytes and compresses them. */
enum {
        FIELD_SAMPLE = 2,
        FIELD_MAPPING = 3,
        FIELD_LOCATION = 4,
        FIELD_FUNCTION = 5,
        FIELD_STRING_TABLE = 6,
};

static size_t put_varint(uint8_t *out, uint64_t v)
{
        size_t n = 0;
        while (v >= 0x80) {
                out[n++] = (uint8_t)(v | 0x80);
                v >>= 7;
        }
        out[n++] = (uint8_t)v;
        return n;
}

static bool chunk_reserve(PprofPack *j, size_t more)
{
        return array_grow((void **)&j->packed, &j->packed_cap, j->packed_size + more, 1, 4096) >= 0;
}

static int chunk_put_message(PprofPack *j, unsigned field, const ProtobufCMessage *m)
{
        size_t size = protobuf_c_message_get_packed_size(m);
        if (!chunk_reserve(j, 20 + size))
                return -ENOMEM;
        j->packed_size += put_varint(j->packed + j->packed_size, (uint64_t)field << 3 | 2);
        j->packed_size += put_varint(j->packed + j->packed_size, size);
        j->packed_size += protobuf_c_message_pack(m, j->packed + j->packed_size);
        return 0;
}

static int chunk_put_string(PprofPack *j, const char *str)
{
        size_t size = strlen(str);
        if (!chunk_reserve(j, 20 + size))
                return -ENOMEM;
        j->packed_size += put_varint(j->packed + j->packed_size, (uint64_t)FIELD_STRING_TABLE << 3 | 2);
        j->packed_size += put_varint(j->packed + j->packed_size, size);
        memcpy(j->packed + j->packed_size, str, size);
        j->packed_size += size;
        return 0;
}

static int pack_header(PprofPack *j, const PprofTables *t)
{
        Perftools__Profiles__Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
        Perftools__Profiles__ValueType vt_samples = PERFTOOLS__PROFILES__VALUE_TYPE__INIT,
                                       vt_cpu = PERFTOOLS__PROFILES__VALUE_TYPE__INIT,
                                       period_type = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
        Perftools__Profiles__ValueType *sample_types[2] = {&vt_samples, &vt_cpu};
        size_t size;

        vt_samples.type = t->str_samples;
        vt_samples.unit = t->str_count;
        vt_cpu.type = t->str_cpu;
        vt_cpu.unit = t->str_nanoseconds;
        period_type = vt_cpu;
        p.n_sample_type = 2;
        p.sample_type = sample_types;
        p.time_nanos = t->time_nanos;
        p.duration_nanos = t->duration_nanos;
        p.period_type = &period_type;
        p.period = t->period;

        size = perftools__profiles__profile__get_packed_size(&p);
        if (!chunk_reserve(j, size))
                return -ENOMEM;
        j->packed_size += perftools__profiles__profile__pack(&p, j->packed + j->packed_size);
        return 0;
}

/* Appends the next items to the chunk; returns 1 once everything has been serialized. */
static int pack_step(PprofPack *j, const PprofTables *t)
{
        int r;

        if (j->pack_section == 0) {
                r = pack_header(j, t);
                if (r < 0)
                        return r;
                j->pack_section = FIELD_SAMPLE;
                j->pack_index = 0;
        }
        while (j->packed_size < PACK_CHUNK && j->pack_section <= FIELD_STRING_TABLE) {
                size_t n = j->pack_section == FIELD_SAMPLE     ? t->n_samples
                           : j->pack_section == FIELD_MAPPING  ? t->n_mappings
                           : j->pack_section == FIELD_LOCATION ? t->n_locations
                           : j->pack_section == FIELD_FUNCTION ? t->n_functions
                                                               : t->n_strings;
                if (j->pack_index >= n) {
                        j->pack_section++;
                        j->pack_index = 0;
                        continue;
                }
                size_t i = j->pack_index++;
                switch (j->pack_section) {
                case FIELD_SAMPLE:
                        r = chunk_put_message(j, FIELD_SAMPLE, &t->samples[i]->base);
                        break;
                case FIELD_MAPPING:
                        r = chunk_put_message(j, FIELD_MAPPING, &t->mappings[i]->base);
                        break;
                case FIELD_LOCATION:
                        r = chunk_put_message(j, FIELD_LOCATION, &t->locations[i]->base);
                        break;
                case FIELD_FUNCTION:
                        r = chunk_put_message(j, FIELD_FUNCTION, &t->functions[i]->base);
                        break;
                default:
                        r = chunk_put_string(j, t->strings[i]);
                        break;
                }
                if (r < 0)
                        return r;
        }
        return j->pack_section > FIELD_STRING_TABLE;
}

/* Compresses the chunk; finish: end the gzip stream. */
static int deflate_chunk(PprofPack *j, bool finish)
{
        int r;

        if (!j->z_init) {
                /* windowBits 15 + 16: gzip framing, which is what pprof readers expect. Level 1
                 * like Go's runtime/pprof: ~3x faster than the default for ~10% more bytes. */
                if (deflateInit2(&j->z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
                        return -ENOMEM;
                j->z_init = true;
        }
        j->z.next_in = j->packed;
        j->z.avail_in = (uInt)j->packed_size;
        for (;;) {
                if (j->out_size == j->out_cap &&
                    array_grow((void **)&j->out, &j->out_cap,
                               j->out_cap + deflateBound(&j->z, j->z.avail_in) + 64, 1, 4096) < 0)
                        return -ENOMEM;
                j->z.next_out = j->out + j->out_size;
                j->z.avail_out = (uInt)(j->out_cap - j->out_size);
                r = deflate(&j->z, finish ? Z_FINISH : Z_NO_FLUSH);
                j->out_size = j->out_cap - j->z.avail_out;
                if (r == Z_STREAM_ERROR)
                        return -EIO;
                if (finish ? r == Z_STREAM_END : (j->z.avail_in == 0 && j->z.avail_out > 0))
                        break;
                if (j->z.avail_out > 0 && r == Z_BUF_ERROR)
                        return -EIO;
        }
        j->packed_size = 0;
        return 0;
}

int pprof_pack_step(PprofPack *p, const PprofTables *t)
{
        int r = pack_step(p, t);
        if (r < 0)
                return r;
        bool done = r > 0;
        r = deflate_chunk(p, done);
        if (r < 0)
                return r;
        if (!done)
                return 0;
        p->packed = mfree(p->packed);
        p->packed_cap = 0;
        p->done = true;
        return 1;
}

int pprof_pack_take(PprofPack *p, void **ret_data, size_t *ret_size)
{
        if (!p->done || !p->out)
                return -EBUSY;
        *ret_data = TAKE_PTR(p->out);
        *ret_size = p->out_size;
        return 0;
}

void pprof_pack_done(PprofPack *p)
{
        free(p->packed);
        if (p->z_init)
                deflateEnd(&p->z);
        free(p->out);
        *p = (PprofPack){};
}
