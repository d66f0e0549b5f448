/* SPDX-License-Identifier: GPL-2.0-only */
/* The cost of naming Python frames (daemon/runtimes/python-code.c) with this machine's python3.11: reading
 * 20 000 code objects from a live process, naming them again from the cache, the line of the last
 * instruction of a function whose line table is near the 64 KiB bound, and memory per entry.
 * Prints figures, never fails on them (docs/runtimes.md records them). */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tracker/process-table.h"
#include "runtimes/python-code.h"
#include "runtimes/python-offsets.h"

#define N_FUNCS 20000

static const char program[] =
        "import sys\n"
        "src = ''.join('def f%d(a):\\n    b = a + 1\\n    return b * 2\\n' % i for i in range(20000))\n"
        "ns = {}\n"
        "exec(compile(src, '/srv/app/generated_module.py', 'exec'), ns)\n"
        "exec(compile('def big():\\n' + '    x = 1\\n' * 9000, '/srv/app/big.py', 'exec'), ns)\n"
        "big = ns['big'].__code__\n"
        "print('T', id(type(big)), id(str), id(big), len(big.co_code) // 2 - 1, len(big.co_linetable))\n"
        "for i in range(20000):\n"
        "    print('C', id(ns['f%d' % i].__code__))\n"
        "print('END', flush=True)\n"
        "sys.stdin.readline()\n";

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(void)
{
        _cleanup_(python_code_cache_freep) PythonCodeCache *c = NULL;
        const PythonOffsets *o = python_offsets_find(3, 11);
        static uint64_t codes[N_FUNCS];
        static uint32_t fps[N_FUNCS];
        uint32_t big_fp = 0;
        uint64_t code_type, str_type, big, big_last, big_table, start;
        int to_child[2], from_child[2];
        PythonFrameInfo info;
        char line[256];
        size_t n = 0;
        FILE *in;
        pid_t pid;
        double t0, t1;
        unsigned sink = 0;

        if (access("/usr/bin/python3.11", X_OK) != 0) {
                printf("SKIP: /usr/bin/python3.11 is missing\n");
                return 77;
        }
        if (pipe2(to_child, O_CLOEXEC) < 0 || pipe2(from_child, O_CLOEXEC) < 0)
                return 1;
        pid = fork();
        if (pid < 0)
                return 1;
        if (pid == 0) {
                dup2(to_child[0], 0);
                dup2(from_child[1], 1);
                close(to_child[0]);
                close(to_child[1]);
                close(from_child[0]);
                close(from_child[1]);
                execl("/usr/bin/python3.11", "python3.11", "-S", "-c", program, (char *)NULL);
                _exit(127);
        }
        close(to_child[0]);
        close(from_child[1]);
        in = fdopen(from_child[0], "r");
        if (!in || !fgets(line, sizeof(line), in) ||
            sscanf(line, "T %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &code_type, &str_type,
                   &big, &big_last, &big_table) != 5)
                return 1;
        while (fgets(line, sizeof(line), in) && strncmp(line, "END", 3) != 0)
                if (n < N_FUNCS && sscanf(line, "C %" SCNu64, &codes[n]) == 1)
                        n++;
        if (process_read_start_time(pid, &start) < 0 || python_code_cache_new(0, 0, &c) < 0)
                return 1;

        for (size_t i = 0; i < n; i++)
                if (python_code_fingerprint_at(pid, o, codes[i], &fps[i]) < 0)
                        return 1;
        if (python_code_fingerprint_at(pid, o, big, &big_fp) < 0)
                return 1;
        t0 = now_s();
        for (size_t i = 0; i < n; i++)
                if (python_code_resolve(c, pid, start, o, code_type, str_type, codes[i], fps[i], 3, &info) <
                    0)
                        return 1;
        t1 = now_s();
        printf("read from the process: %zu code objects in %.1f ms, %.2f us each\n", n, (t1 - t0) * 1e3,
               (t1 - t0) * 1e6 / n);
        printf("memory: %zu bytes for %zu entries, %.0f bytes per entry (names, line table, index)\n",
               python_code_cache_bytes(c), python_code_cache_entries(c),
               (double)python_code_cache_bytes(c) / python_code_cache_entries(c));

        t0 = now_s();
        for (unsigned round = 0; round < 20; round++)
                for (size_t i = 0; i < n; i++) {
                        if (python_code_resolve(c, pid, start, o, code_type, str_type, codes[i], fps[i], 3,
                                                &info) < 0)
                                return 1;
                        sink += info.line;
                }
        t1 = now_s();
        printf("from the cache (small line table): %.0f ns per frame\n", (t1 - t0) * 1e9 / (20.0 * n));

        if (python_code_resolve(c, pid, start, o, code_type, str_type, big, big_fp, (uint32_t)big_last,
                                &info) < 0)
                return 1;
        t0 = now_s();
        for (unsigned i = 0; i < 2000; i++) {
                python_code_resolve(c, pid, start, o, code_type, str_type, big, big_fp, (uint32_t)big_last,
                                    &info);
                sink += info.line;
        }
        t1 = now_s();
        printf("from the cache, last instruction of a %" PRIu64
               "-byte line table (line %u): %.1f us per frame\n",
               big_table, info.line, (t1 - t0) * 1e6 / 2000);

        fclose(in);
        close(to_child[1]);
        waitpid(pid, NULL, 0);
        return sink == 0xdeadbeef;
}
