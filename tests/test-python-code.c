/* SPDX-License-Identifier: GPL-2.0-only */
/* Drives daemon/runtimes/python-code.c for tests/test-python-code.py: one command a line on stdin, one
 * answer a line on stdout (metrics: lines up to "end").
 *   new MAX_ENTRIES MAX_BYTES                 a new cache (0: default bounds)
 *   offsets PID MAJOR MINOR RUNTIME_ADDR      the offsets to read PID with: the table's entry, or
 *                                             for 3.13+ python_offsets_from_debug() of the bytes at
 *                                             _PyRuntime in /proc/PID/mem
 *   start PID                                 -> ok START_TIME
 *   resolve PID START CODE_TYPE STR_TYPE CODE INSTR
 *                                             with the fingerprint of the object at CODE now,
 *                                             read from /proc/PID/mem (and remembered for lookup)
 *   resolve-fp PID START CODE_TYPE STR_TYPE CODE FP INSTR   with fingerprint FP
 *   lookup PID START CODE INSTR               -> ok LINE FIRST_LINE\tNAME\tFILE | error ERRNO
 *   metrics                                   -> python_code_cache_write_metrics(), then "end" */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtimes/python-code.h"
#include "runtimes/python-offsets.h"
#include "tracker/process-table.h"

static const char *err_name(int r)
{
        switch (-r) {
        case EBADMSG:
                return "EBADMSG";
        case EFAULT:
                return "EFAULT";
        case ESRCH:
                return "ESRCH";
        case ENOENT:
                return "ENOENT";
        case EPROTONOSUPPORT:
                return "EPROTONOSUPPORT";
        case EINVAL:
                return "EINVAL";
        case EPERM:
                return "EPERM";
        case ESTALE:
                return "ESTALE";
        case ENODATA:
                return "ENODATA";
        default:
                return strerror(-r);
        }
}

static void print_info(int r, const PythonFrameInfo *info)
{
        if (r < 0)
                printf("error %s\n", err_name(r));
        else
                printf("ok %" PRIu32 " %" PRIu32 "\t%s\t%s\n", info->line, info->first_line, info->name,
                       info->file);
}

static int read_offsets(pid_t pid, unsigned major, unsigned minor, uint64_t runtime, PythonOffsets *ret)
{
        const PythonOffsets *o = python_offsets_find(major, minor);
        uint8_t buf[PYTHON_DEBUG_OFFSETS_SIZE];
        char path[64];
        ssize_t n;
        int fd;

        if (o) {
                *ret = *o;
                return 0;
        }
        snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = pread(fd, buf, sizeof(buf), (off_t)runtime);
        close(fd);
        if (n < 0)
                return -errno;
        return python_offsets_from_debug(buf, (size_t)n, ret);
}

/* Fingerprints computed by resolve, for lookups after the process exited. */
#define MAX_REMEMBERED 65536
static uint64_t remembered_addr[MAX_REMEMBERED];
static uint32_t remembered_fp[MAX_REMEMBERED];
static size_t n_remembered;

static uint32_t remembered(uint64_t addr)
{
        for (size_t i = n_remembered; i-- > 0;)
                if (remembered_addr[i] == addr)
                        return remembered_fp[i];
        return 0;
}

/* The fingerprint BPF would take of the code object at addr (0: unreadable). */
static uint32_t fingerprint_now(pid_t pid, const PythonOffsets *o, uint64_t addr)
{
        uint32_t fp;

        return python_code_fingerprint_at(pid, o, addr, &fp) < 0 ? 0 : fp;
}

int main(void)
{
        _cleanup_(python_code_cache_freep) PythonCodeCache *c = NULL;
        PythonOffsets o = {};
        bool have_offsets = false;
        char line[512];
        int r;

        setvbuf(stdout, NULL, _IOLBF, 0);
        r = python_code_cache_new(0, 0, &c);
        if (r < 0)
                return 1;
        while (fgets(line, sizeof(line), stdin)) {
                char cmd[16];
                long long a[7] = {0};
                PythonFrameInfo info;
                int n = sscanf(line, "%15s %lli %lli %lli %lli %lli %lli %lli", cmd, &a[0], &a[1], &a[2],
                               &a[3], &a[4], &a[5], &a[6]);

                if (n < 1)
                        continue;
                if (strcmp(cmd, "new") == 0 && n == 3) {
                        python_code_cache_free(c);
                        c = NULL;
                        r = python_code_cache_new(a[0], a[1], &c);
                        if (r < 0)
                                return 1;
                        printf("ok\n");
                } else if (strcmp(cmd, "offsets") == 0 && n == 5) {
                        r = read_offsets((pid_t)a[0], a[1], a[2], a[3], &o);
                        have_offsets = r >= 0;
                        if (r < 0)
                                printf("error %s\n", err_name(r));
                        else
                                printf("ok %u.%u %s\n", o.major, o.minor, o.source);
                } else if (strcmp(cmd, "start") == 0 && n == 2) {
                        uint64_t start;

                        r = process_read_start_time((pid_t)a[0], &start);
                        if (r < 0)
                                printf("error %s\n", err_name(r));
                        else
                                printf("ok %" PRIu64 "\n", start);
                } else if (strcmp(cmd, "resolve") == 0 && n == 7 && have_offsets) {
                        uint32_t fp = remembered(a[4]);

                        if (!fp && (fp = fingerprint_now((pid_t)a[0], &o, a[4])) &&
                            n_remembered < MAX_REMEMBERED) {
                                remembered_addr[n_remembered] = a[4];
                                remembered_fp[n_remembered++] = fp;
                        }
                        r = python_code_resolve(c, (pid_t)a[0], a[1], &o, a[2], a[3], a[4], fp ?: 1,
                                                (uint32_t)a[5], &info);
                        print_info(r, &info);
                } else if (strcmp(cmd, "resolve-fp") == 0 && n == 8 && have_offsets) {
                        r = python_code_resolve(c, (pid_t)a[0], a[1], &o, a[2], a[3], a[4], (uint32_t)a[5],
                                                (uint32_t)a[6], &info);
                        print_info(r, &info);
                } else if (strcmp(cmd, "lookup") == 0 && n == 5) {
                        r = python_code_lookup(c, (pid_t)a[0], a[1], a[2], remembered(a[2]), (uint32_t)a[3],
                                               &info);
                        print_info(r, &info);
                } else if (strcmp(cmd, "metrics") == 0) {
                        python_code_cache_write_metrics(c, stdout);
                        printf("end\n");
                } else
                        printf("error bad-command\n");
        }
        return 0;
}
