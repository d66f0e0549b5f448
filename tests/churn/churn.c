/* SPDX-License-Identifier: GPL-2.0-only */
/* Hostile load for profd's bounds (tests/test-hostile-load.py, bench/soak.py): what any unprivileged user
 * can do to a host-wide profiler.
 *
 *   churn storm DIR NFILES NPROCS PARALLEL LIFE_MS
 *       NFILES copies of DIR/lib.so under long names; NPROCS short-lived processes (PARALLEL at a
 *       time), each maps every copy executable, burns CPU for LIFE_MS and exits.
 *   churn dlopen LIB SECONDS [SPIN_SECONDS]
 *       dlopen/dlclose LIB in a loop: one mmap/munmap storm from one process. Then, with
 *       SPIN_SECONDS, keeps LIB loaded and runs its churn_lib_spin() that long: the mapping that
 *       outlived the storm must be unwound and named.
 *   churn exec SECONDS PARALLEL
 *       fork+exec /bin/true as fast as PARALLEL children allow.
 *   churn badname SECONDS
 *       burns CPU under a comm that is not UTF-8 and holds control characters and ';'.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void burn_until(double end)
{
        volatile unsigned long x = 0;
        while (now_s() < end)
                for (int i = 0; i < 100000; i++)
                        x += i;
}

static int copy_file(const char *src, const char *dst)
{
        char buf[65536];
        int in = open(src, O_RDONLY | O_CLOEXEC), out;
        ssize_t n;

        if (in < 0)
                return -1;
        out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
        if (out < 0) {
                close(in);
                return -1;
        }
        while ((n = read(in, buf, sizeof(buf))) > 0)
                if (write(out, buf, (size_t)n) != n) {
                        n = -1;
                        break;
                }
        close(in);
        close(out);
        return n < 0 ? -1 : 0;
}

static void copy_path(const char *dir, int i, char *buf, size_t size)
{
        /* ~200-byte names: what long container paths look like in /proc/PID/maps. */
        snprintf(buf, size,
                 "%s/a-rather-long-library-name-as-found-in-container-image-layers-%0120d-%05d.so", dir, 0,
                 i);
}

static int storm(const char *dir, int nfiles, int nprocs, int parallel, int life_ms)
{
        char src[4096], dst[4096];
        int running = 0;

        snprintf(src, sizeof(src), "%s/lib.so", dir);
        for (int i = 0; i < nfiles; i++) {
                copy_path(dir, i, dst, sizeof(dst));
                if (access(dst, F_OK) == 0)
                        continue;
                if (copy_file(src, dst) < 0) {
                        fprintf(stderr, "churn: cannot copy %s to %s: %m\n", src, dst);
                        return 1;
                }
        }
        for (int n = 0; n < nprocs; n++) {
                if (running >= parallel) {
                        wait(NULL);
                        running--;
                }
                pid_t pid = fork();
                if (pid < 0) {
                        perror("fork");
                        return 1;
                }
                if (pid == 0) {
                        for (int i = 0; i < nfiles; i++) {
                                copy_path(dir, i, dst, sizeof(dst));
                                int fd = open(dst, O_RDONLY | O_CLOEXEC);
                                if (fd < 0 || mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) ==
                                                      MAP_FAILED)
                                        _exit(2);
                                close(fd);
                        }
                        burn_until(now_s() + life_ms / 1000.0);
                        _exit(0);
                }
                running++;
        }
        while (running-- > 0)
                wait(NULL);
        return 0;
}

static int dlopen_loop(const char *lib, double seconds, double spin)
{
        double end = now_s() + seconds;
        unsigned long n = 0;

        while (now_s() < end) {
                void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
                if (!h) {
                        fprintf(stderr, "churn: %s\n", dlerror());
                        return 1;
                }
                dlclose(h);
                n++;
        }
        printf("dlopen cycles %lu\n", n);
        fflush(stdout);
        if (spin > 0) {
                void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
                double (*fn)(double) = h ? (double (*)(double))dlsym(h, "churn_lib_spin") : NULL;
                if (!fn) {
                        fprintf(stderr, "churn: no churn_lib_spin in %s: %s\n", lib, dlerror());
                        return 1;
                }
                printf("spin %f\n", fn(spin));
        }
        return 0;
}

static int exec_loop(double seconds, int parallel)
{
        double end = now_s() + seconds;
        unsigned long n = 0;
        int running = 0;

        while (now_s() < end) {
                if (running >= parallel) {
                        wait(NULL);
                        running--;
                }
                pid_t pid = fork();
                if (pid == 0) {
                        execl("/bin/true", "true", (char *)NULL);
                        _exit(127);
                }
                if (pid > 0) {
                        running++;
                        n++;
                }
        }
        while (running-- > 0)
                wait(NULL);
        printf("execs %lu\n", n);
        return 0;
}

int main(int argc, char **argv)
{
        if (argc == 7 && strcmp(argv[1], "storm") == 0)
                return storm(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
        if ((argc == 4 || argc == 5) && strcmp(argv[1], "dlopen") == 0)
                return dlopen_loop(argv[2], atof(argv[3]), argc == 5 ? atof(argv[4]) : 0);
        if (argc == 3 && strcmp(argv[1], "badname") == 0) {
                /* Not UTF-8 (0xff, a lone continuation byte), a control character, the folded
                 * format's separator. */
                prctl(PR_SET_NAME, "bad\xff\x80\x01;name", 0, 0, 0);
                burn_until(now_s() + atof(argv[2]));
                return 0;
        }
        if (argc == 4 && strcmp(argv[1], "exec") == 0)
                return exec_loop(atof(argv[2]), atoi(argv[3]));
        fprintf(stderr, "usage: churn storm DIR NFILES NPROCS PARALLEL LIFE_MS | dlopen LIB SECONDS "
                        "[SPIN_SECONDS] | "
                        "exec SECONDS PARALLEL | badname SECONDS\n");
        return 2;
}
