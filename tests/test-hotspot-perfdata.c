/* SPDX-License-Identifier: GPL-2.0-only */
/* hotspot_perfdata_find_long() on perf data laid out as OpenJDK 17 writes it (x86-64): the
 * counter found at its value's address; absent, or past what the prologue says is used: -ENOENT;
 * another magic, byte order or version, an entry running past the used bytes, a counter of
 * another type: -EBADMSG. */
#include <errno.h>
#include <string.h>

#include "lib/test-util.h"
#include "runtimes/hotspot-perfdata.h"

#define BASE 0x7f0000010000ULL
#define NAME "java.cls.unloadedClasses"

static uint8_t mem[4096];

static int read_mem(void *userdata, uint64_t addr, void *buf, size_t n)
{
        (void)userdata;
        if (addr < BASE || addr - BASE > sizeof(mem) || n > sizeof(mem) - (addr - BASE))
                return -EFAULT;
        memcpy(buf, mem + (addr - BASE), n);
        return 0;
}

static void put32(size_t off, uint32_t v)
{
        memcpy(mem + off, &v, sizeof(v));
}

/* An entry at off: header, name, 8-aligned long value; returns the next entry's offset. */
static size_t entry(size_t off, const char *name, char type, uint64_t value)
{
        size_t name_off = 20, data_off = (name_off + strlen(name) + 1 + 7) / 8 * 8, len = data_off + 8;

        put32(off, (uint32_t)len);
        put32(off + 4, (uint32_t)name_off);
        put32(off + 8, 0);
        mem[off + 12] = (uint8_t)type;
        mem[off + 13] = 0;
        mem[off + 14] = 1;
        mem[off + 15] = 3;
        put32(off + 16, (uint32_t)data_off);
        strcpy((char *)mem + off + name_off, name);
        memcpy(mem + off + data_off, &value, sizeof(value));
        return off + len;
}

/* Three entries, the counter last; returns the counter's value offset. */
static size_t build(void)
{
        size_t off = 32;

        memset(mem, 0, sizeof(mem));
        mem[0] = 0xca, mem[1] = 0xfe, mem[2] = 0xc0, mem[3] = 0xc0;
        mem[4] = 1; /* little endian */
        mem[5] = 2, mem[6] = 0, mem[7] = 1;
        off = entry(off, "sun.rt._sync_Inflations", 'J', 3);
        off = entry(off, "java.cls.loadedClasses", 'J', 500);
        off = entry(off, NAME, 'J', 7);
        put32(8, (uint32_t)off); /* used */
        put32(24, 32);           /* entry offset */
        put32(28, 3);            /* entries */
        return off - 8;
}

int main(void)
{
        uint64_t addr = 0, v = 0;
        size_t value = build();
        int r;

        r = hotspot_perfdata_find_long(read_mem, NULL, BASE, NAME, &addr);
        check(r == 0 && addr == BASE + value, "found at its value (r %d, 0x%llx)", r,
              (unsigned long long)addr);
        check(read_mem(NULL, addr, &v, sizeof(v)) == 0 && v == 7, "its value read (%llu)",
              (unsigned long long)v);
        r = hotspot_perfdata_find_long(read_mem, NULL, BASE, "java.cls.unloaded", &addr);
        check(r == -ENOENT, "a prefix of its name is not it (r %d)", r);
        r = hotspot_perfdata_find_long(read_mem, NULL, 0, NAME, &addr);
        check(r == -ENOENT, "no perf data (-XX:-UsePerfData) (r %d)", r);

        put32(28, 2);
        r = hotspot_perfdata_find_long(read_mem, NULL, BASE, NAME, &addr);
        check(r == -ENOENT, "not created yet (r %d)", r);
        put32(28, 1000);
        r = hotspot_perfdata_find_long(read_mem, NULL, BASE, "absent", &addr);
        check(r == -ENOENT, "more entries announced than used bytes hold (r %d)", r);

        build();
        mem[0] = 0xc0;
        r = hotspot_perfdata_find_long(read_mem, NULL, BASE, NAME, &addr);
        check(r == -EBADMSG, "another magic (r %d)", r);
        build();
        mem[4] = 0;
        r = hotspot_perfdata_find_long(read_mem, NULL, BASE, NAME, &addr);
        check(r == -EBADMSG, "big endian (r %d)", r);
        build();
        put32(8, 1 << 30);
        r = hotspot_perfdata_find_long(read_mem, NULL, BASE, NAME, &addr);
        check(r == -EBADMSG, "used bytes past the bound (r %d)", r);
        build();
        put32(32, 4000);
        r = hotspot_perfdata_find_long(read_mem, NULL, BASE, NAME, &addr);
        check(r == -EBADMSG, "an entry past the used bytes (r %d)", r);
        build();
        {
                size_t off = 32;

                for (int i = 0; i < 2; i++) {
                        uint32_t len;

                        memcpy(&len, mem + off, sizeof(len));
                        off += len;
                }
                mem[off + 12] = 'I';
        }
        r = hotspot_perfdata_find_long(read_mem, NULL, BASE, NAME, &addr);
        check(r == -EBADMSG, "the counter of another type (r %d)", r);
        printf("%s\n", failures ? "FAILED" : "all checks passed");
        return failures ? 1 : 0;
}
