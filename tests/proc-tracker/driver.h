/* SPDX-License-Identifier: GPL-2.0-only */
/* Runs tests/proc-tracker/helper as a child and drives it over pipes; shared by the tests. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct Helper {
        pid_t pid;
        FILE *in, *out;      /* our ends: write commands to in, read replies from out */
        uint64_t spawned_ns; /* CLOCK_MONOTONIC just before fork */
} Helper;

static int failures;

#define CHECK(cond, ...)                                                                                    \
        do {                                                                                                \
                if (cond) {                                                                                 \
                        printf("ok   ");                                                                    \
                } else {                                                                                    \
                        printf("FAIL ");                                                                    \
                        failures++;                                                                         \
                }                                                                                           \
                printf(__VA_ARGS__);                                                                        \
                printf("\n");                                                                               \
                fflush(stdout);                                                                             \
        } while (0)

static inline uint64_t mono_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* prep (if any) runs in the child before exec, e.g. to enter other namespaces; it returns < 0 to
 * give up. */
static inline int helper_start_prep(Helper *h, const char *exe, const char *lib, int (*prep)(void *),
                                    void *arg)
{
        int to_child[2], from_child[2];

        if (pipe2(to_child, O_CLOEXEC) < 0 || pipe2(from_child, O_CLOEXEC) < 0)
                return -errno;
        h->spawned_ns = mono_ns();
        h->pid = fork();
        if (h->pid < 0)
                return -errno;
        if (h->pid == 0) {
                dup2(to_child[0], 0);
                dup2(from_child[1], 1);
                if (prep && prep(arg) < 0)
                        _exit(126);
                execl(exe, exe, lib, (char *)NULL);
                _exit(127);
        }
        close(to_child[0]);
        close(from_child[1]);
        h->in = fdopen(to_child[1], "w");
        h->out = fdopen(from_child[0], "r");
        setvbuf(h->in, NULL, _IOLBF, 0);
        return 0;
}

static inline int helper_start(Helper *h, const char *exe, const char *lib)
{
        return helper_start_prep(h, exe, lib, NULL, NULL);
}

/* Sends cmd (or nothing if NULL) and reads one reply line into buf. */
static inline int helper_cmd(Helper *h, const char *cmd, char *buf, size_t size)
{
        if (cmd && fprintf(h->in, "%s\n", cmd) < 0)
                return -EIO;
        if (!fgets(buf, (int)size, h->out))
                return -EIO;
        buf[strcspn(buf, "\n")] = 0;
        return 0;
}

static inline int helper_finish(Helper *h)
{
        int status = 0;

        if (h->in) {
                fprintf(h->in, "exit\n");
                fclose(h->in);
        }
        if (h->out)
                fclose(h->out);
        if (h->pid > 0 && waitpid(h->pid, &status, 0) < 0)
                return -errno;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
