/* SPDX-License-Identifier: GPL-2.0-only */
/* For tests/test-hotspot-vmstructs.py: reads the vmStructs tables of the JVM PID through
 * daemon/runtimes/hotspot-vmstructs.c and remote-memory.c, as the daemon does, and prints them
 * in the words of the JDK's own `jhsdb clhsdb` (vmstructsdump, intConstant, longConstant):
 * (tab-separated: type names may have spaces, "unsigned char"):
 *   type NAME SUPERCLASS|null SIZE
 *   field TYPE FIELD TYPESTRING static|- OFFSET|0xADDRESS
 *   intConstant NAME VALUE
 *   longConstant NAME VALUE
 * then the offsets the walker is given (hotspot-offsets.c):
 *   offsets ok | offsets error ERRNO NAME
 *   offset MEMBER VALUE   (a selection)
 * Usage: hotspot-vmstructs-dump PID */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtimes/hotspot-offsets.h"
#include "runtimes/hotspot-vmstructs.h"
#include "runtimes/remote-memory.h"

static int read_remote(void *userdata, uint64_t addr, void *buf, size_t n)
{
        return remote_memory_read(userdata, addr, buf, n);
}

/* libjvm.so's load bias: the start of its mapping at file offset 0 (its first PT_LOAD has vaddr
 * 0, as every shared library Debian ships). */
static int find_libjvm(pid_t pid, char *path, size_t path_size, uint64_t *ret_bias)
{
        char maps[64], line[4096];
        FILE *f;

        snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
        f = fopen(maps, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                unsigned long long start, end, off;
                char perms[8], *p = strchr(line, '/');

                if (!p || sscanf(line, "%llx-%llx %7s %llx", &start, &end, perms, &off) != 4 || off != 0)
                        continue;
                p[strcspn(p, "\n")] = 0;
                if (strlen(p) < 10 || strcmp(p + strlen(p) - 10, "/libjvm.so") != 0)
                        continue;
                snprintf(path, path_size, "/proc/%d/root%s", (int)pid, p);
                *ret_bias = start;
                fclose(f);
                return 0;
        }
        fclose(f);
        return -ENOENT;
}

int main(int argc, char **argv)
{
        _cleanup_(hotspot_vmstructs_freep) HotspotVMStructs *vs = NULL;
        _cleanup_(remote_memory_freep) RemoteMemory *mem = NULL;
        const char *missing = NULL;
        char path[4200];
        HotspotElf elf;
        HotspotOffsets o;
        uint64_t bias = 0;
        pid_t pid;
        int fd, r;

        if (argc != 2) {
                fprintf(stderr, "usage: %s PID\n", argv[0]);
                return 2;
        }
        pid = atoi(argv[1]);
        r = find_libjvm(pid, path, sizeof(path), &bias);
        if (r < 0) {
                fprintf(stderr, "no libjvm.so in pid %d: %s\n", (int)pid, strerror(-r));
                return 1;
        }
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                fprintf(stderr, "%s: %m\n", path);
                return 1;
        }
        r = hotspot_elf_probe(fd, &elf);
        close(fd);
        if (r < 0) {
                fprintf(stderr, "%s: no vmStructs symbols: %s\n", path, strerror(-r));
                return 1;
        }
        r = remote_memory_open(pid, &mem);
        if (r >= 0)
                r = hotspot_vmstructs_read(&elf, bias, read_remote, mem, &vs);
        if (r < 0) {
                fprintf(stderr, "reading the tables of pid %d: %s\n", (int)pid, strerror(-r));
                return 1;
        }
        for (size_t i = 0; i < vs->n_types; i++)
                printf("type\t%s\t%s\t%" PRIu64 "\n", vs->types[i].name,
                       vs->types[i].superclass[0] ? vs->types[i].superclass : "null", vs->types[i].size);
        for (size_t i = 0; i < vs->n_fields; i++) {
                const HotspotField *f = &vs->fields[i];

                if (f->is_static)
                        printf("field\t%s\t%s\t%s\tstatic\t0x%" PRIx64 "\n", f->type, f->field,
                               f->type_string, f->address);
                else
                        printf("field\t%s\t%s\t%s\t-\t%" PRIu64 "\n", f->type, f->field, f->type_string,
                               f->offset);
        }
        for (size_t i = 0; i < vs->n_ints; i++)
                printf("intConstant\t%s\t%" PRId64 "\n", vs->ints[i].name, vs->ints[i].value);
        for (size_t i = 0; i < vs->n_longs; i++)
                printf("longConstant\t%s\t%" PRId64 "\n", vs->longs[i].name, vs->longs[i].value);
        printf("reads %zu\n", vs->reads);

        r = hotspot_offsets_from_vmstructs(vs, bias, &o, &missing);
        if (r < 0) {
                printf("offsets error %d %s\n", -r, missing ?: "?");
                return 0;
        }
        r = hotspot_offsets_read_version(&o, bias, read_remote, mem);
        printf("offsets ok\njdk %u %d\n", o.jdk_major, r);
#define P(m) printf("offset %s %" PRId64 "\n", #m, (int64_t)o.m)
        P(method_const_method);
        P(const_method_constants);
        P(const_method_flags);
        P(const_method_flags_size);
        P(const_method_code_size);
        P(const_method_name_index);
        P(const_method_signature_index);
        P(const_method_sizeof);
        P(const_method_has_linenumber_table);
        P(constant_pool_pool_holder);
        P(constant_pool_source_file_name_index);
        P(constant_pool_sizeof);
        P(klass_name);
        P(symbol_length);
        P(symbol_body);
        P(stub_queue_stub_buffer);
        P(stub_queue_buffer_limit);
        P(frame_interpreter_sender_sp);
        P(frame_interpreter_last_sp);
        P(code_blob_frame_size);
        P(compiled_method_method);
#undef P
        printf("static interpreter_code 0x%" PRIx64 "\n", o.interpreter_code + bias);
        printf("static code_cache_heaps 0x%" PRIx64 "\n", o.code_cache_heaps + bias);
        return 0;
}
