/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtimes/hotspot-perfdata.h"
#include "util/macro.h"

/* PerfDataPrologue and PerfDataEntry (perfMemory.hpp), as laid out in the process. */
#define PROLOGUE_SIZE 32
#define ENTRY_SIZE 20
#define PERFDATA_LITTLE_ENDIAN 1
#define PERFDATA_MAJOR 2

static uint32_t u32_at(const uint8_t *p)
{
        uint32_t v;

        memcpy(&v, p, sizeof(v));
        return v;
}

int hotspot_perfdata_find_long(HotspotReadFn read_fn, void *userdata, uint64_t start, const char *name,
                               uint64_t *ret_addr)
{
        static const uint8_t magic[4] = {0xca, 0xfe, 0xc0, 0xc0};
        _cleanup_free_ uint8_t *buf = NULL;
        uint8_t pro[PROLOGUE_SIZE];
        uint32_t used, off, n;
        size_t name_len = strlen(name);
        int r;

        if (start == 0 || start % 8)
                return -ENOENT;
        r = read_fn(userdata, start, pro, sizeof(pro));
        if (r < 0)
                return r;
        /* Only the host's byte order (a JVM writes its own). */
        if (memcmp(pro, magic, sizeof(magic)) != 0 || pro[4] != PERFDATA_LITTLE_ENDIAN ||
            pro[5] != PERFDATA_MAJOR)
                return -EBADMSG;
        used = u32_at(pro + 8);
        off = u32_at(pro + 24);
        n = u32_at(pro + 28);
        if (used < PROLOGUE_SIZE || used > HOTSPOT_PERFDATA_MAX_BYTES || off < PROLOGUE_SIZE || off > used)
                return -EBADMSG;
        buf = malloc(used);
        if (!buf)
                return -ENOMEM;
        r = read_fn(userdata, start, buf, used);
        if (r < 0)
                return r;
        /* Bounded by HOTSPOT_PERFDATA_MAX_ENTRIES: num_entries comes from the process. */
        for (uint32_t i = 0; i < n && i < HOTSPOT_PERFDATA_MAX_ENTRIES; i++) {
                const uint8_t *e = buf + off;
                uint32_t len, name_off, vector_len, data_off;

                if (used - off < ENTRY_SIZE)
                        return -ENOENT; /* entries being added: the prologue ran ahead */
                len = u32_at(e);
                name_off = u32_at(e + 4);
                vector_len = u32_at(e + 8);
                data_off = u32_at(e + 16);
                if (len < ENTRY_SIZE || len > used - off || name_off >= len || data_off > len)
                        return -EBADMSG;
                if (len - name_off > name_len && memcmp(e + name_off, name, name_len + 1) == 0) {
                        /* A long scalar: type 'J', no vector, 8 aligned 8 bytes inside the entry. */
                        if (e[12] != 'J' || vector_len != 0 || len - data_off < 8 ||
                            (start + off + data_off) % 8)
                                return -EBADMSG;
                        *ret_addr = start + off + data_off;
                        return 0;
                }
                off += len;
        }
        return -ENOENT;
}
