/* SPDX-License-Identifier: GPL-2.0-only */
/* For tests/test-hotspot-vmstructs.py: the interpreted Java frames of every Java thread of PID
 * that is in native or VM code, walked from the thread's JavaFrameAnchor (_last_Java_fp) down the
 * frame pointer chain with the offsets the walker is given (hotspot-offsets.c: the Method* and bcp
 * slots of the interpreter frame), each named by daemon/runtimes/hotspot-method.c:
 *   thread TID
 *   frame METHOD BCI CLASS.NAME SIGNATURE FILE:LINE     (interpreted frames, innermost first)
 *   end PC_IN_INTERPRETER|outside                       (what stopped the walk)
 * then, for the first frame found, the checks of a method's identity:
 *   shifted ERR       the same method's address + 8 (not a Method): an error, never a name
 * Usage: hotspot-jstack PID */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtimes/hotspot-method.h"
#include "runtimes/hotspot-offsets.h"
#include "runtimes/hotspot-vmstructs.h"
#include "runtimes/remote-memory.h"

/* Frames per thread walked, at most (the test's chain is 5 deep). */
#define MAX_FRAMES 64
#define MAX_THREADS 4096

static int read_remote(void *userdata, uint64_t addr, void *buf, size_t n)
{
        return remote_memory_read(userdata, addr, buf, n);
}

static uint64_t u64_at(RemoteMemory *m, uint64_t addr)
{
        uint64_t v = 0;

        return remote_memory_read(m, addr, &v, sizeof(v)) < 0 ? 0 : v;
}

static uint64_t field(const HotspotVMStructs *vs, const char *type, const char *name, bool is_static)
{
        const HotspotField *f = hotspot_vmstructs_field(vs, type, name);

        if (!f || f->is_static != is_static) {
                fprintf(stderr, "no %s::%s in the tables\n", type, name);
                exit(1);
        }
        return is_static ? f->address : f->offset;
}

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
        uint64_t bias = 0, list, threads, code, interp_lo, interp_hi, first_method = 0;
        uint64_t o_list, o_len, o_threads, o_anchor, o_fp, o_osthread, o_tid;
        const char *missing = NULL;
        char path[4200];
        HotspotElf elf;
        HotspotOffsets o;
        uint32_t n_threads = 0;
        int32_t limit = 0;
        pid_t pid;
        int fd, r;

        if (argc != 2) {
                fprintf(stderr, "usage: %s PID\n", argv[0]);
                return 2;
        }
        pid = atoi(argv[1]);
        if (find_libjvm(pid, path, sizeof(path), &bias) < 0 || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
                fprintf(stderr, "no libjvm.so in pid %d\n", (int)pid);
                return 1;
        }
        r = hotspot_elf_probe(fd, &elf);
        close(fd);
        if (r >= 0)
                r = remote_memory_open(pid, &mem);
        if (r >= 0)
                r = hotspot_vmstructs_read(&elf, bias, read_remote, mem, &vs);
        if (r >= 0)
                r = hotspot_offsets_from_vmstructs(vs, bias, &o, &missing);
        if (r >= 0)
                r = hotspot_offsets_read_version(&o, bias, read_remote, mem);
        if (r < 0) {
                fprintf(stderr, "pid %d: %s (%s)\n", (int)pid, strerror(-r), missing ?: "");
                return 1;
        }

        /* The interpreter's code: what a Java frame's return address lies in when its caller is
         * interpreted. */
        code = u64_at(mem, bias + o.interpreter_code);
        interp_lo = u64_at(mem, code + o.stub_queue_stub_buffer);
        (void)remote_memory_read(mem, code + o.stub_queue_buffer_limit, &limit, sizeof(limit));
        interp_hi = interp_lo + (uint64_t)(limit > 0 ? limit : 0);
        printf("interpreter 0x%" PRIx64 "-0x%" PRIx64 "\n", interp_lo, interp_hi);

        o_list = field(vs, "ThreadsSMRSupport", "_java_thread_list", true);
        o_len = field(vs, "ThreadsList", "_length", false);
        o_threads = field(vs, "ThreadsList", "_threads", false);
        o_anchor = field(vs, "JavaThread", "_anchor", false);
        o_fp = field(vs, "JavaFrameAnchor", "_last_Java_fp", false);
        /* JDK 25 moved it up to Thread. */
        o_osthread = hotspot_vmstructs_field(vs, "JavaThread", "_osthread")
                             ? field(vs, "JavaThread", "_osthread", false)
                             : field(vs, "Thread", "_osthread", false);
        o_tid = field(vs, "OSThread", "_thread_id", false);

        list = u64_at(mem, o_list);
        (void)remote_memory_read(mem, list + o_len, &n_threads, sizeof(n_threads));
        threads = u64_at(mem, list + o_threads);
        for (uint32_t i = 0; i < n_threads && i < MAX_THREADS; i++) {
                uint64_t t = u64_at(mem, threads + (uint64_t)i * 8), fp, pc;
                int32_t tid = 0;
                int n = 0;

                (void)remote_memory_read(mem, u64_at(mem, t + o_osthread) + o_tid, &tid, sizeof(tid));
                printf("thread %d\n", tid);
                fp = u64_at(mem, t + o_anchor + o_fp);
                /* The anchor's frame is the interpreted (or native method's) frame that called
                 * out; each caller's frame is found through the saved fp while the return address
                 * is in the interpreter. */
                for (pc = interp_lo; fp && n < MAX_FRAMES; n++) {
                        uint64_t method = u64_at(mem, fp + 8 * (int64_t)o.frame_interpreter_method);
                        uint64_t bcp = u64_at(mem, fp + 8 * (int64_t)o.frame_interpreter_bcp);
                        uint64_t cm = u64_at(mem, method + o.method_const_method);
                        uint64_t code_base = cm + o.const_method_sizeof, bci = 0;
                        HotspotMethodInfo info;

                        if (pc < interp_lo || pc >= interp_hi)
                                break;
                        r = hotspot_method_read(&o, read_remote, mem, method, 0, &info);
                        if (r >= 0 && bcp >= code_base && bcp < code_base + info.code_size)
                                bci = bcp - code_base;
                        if (r >= 0)
                                r = hotspot_method_read(&o, read_remote, mem, method, (uint32_t)bci, &info);
                        if (r < 0)
                                printf("frame 0x%" PRIx64 " %" PRIu64 " error %d\n", method, bci, -r);
                        else
                                printf("frame 0x%" PRIx64 " %" PRIu64 " %s.%s %s %s:%u\n", method, bci,
                                       info.klass, info.name, info.signature, info.file, info.line);
                        if (r >= 0 && !first_method)
                                first_method = method;
                        pc = u64_at(mem, fp + 8);
                        fp = u64_at(mem, fp);
                }
                if (n > 0)
                        printf("end %s\n", pc >= interp_lo && pc < interp_hi ? "interpreter" : "outside");
        }
        if (first_method) {
                HotspotMethodInfo info;

                r = hotspot_method_read(&o, read_remote, mem, first_method + 8, 0, &info);
                printf("shifted %d\n", r < 0 ? -r : 0);
        }
        return 0;
}
