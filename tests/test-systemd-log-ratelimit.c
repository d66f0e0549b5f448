/* SPDX-License-Identifier: GPL-2.0-only */
/* Repeated errors are rate limited per call site, and the next line that gets through says how
 * many were suppressed; the macro still returns the error for `return log_..._ratelimited(r, ...)`. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

#define INTERVAL_NS (200 * 1000 * 1000ULL)
#define BURST 3

static int failures;

#define CHECK(cond, ...)                                                                                    \
        do {                                                                                                \
                if (!(cond)) {                                                                              \
                        printf("FAIL: " __VA_ARGS__);                                                       \
                        printf("\n");                                                                       \
                        failures++;                                                                         \
                }                                                                                           \
        } while (0)

static int flaky(int i)
{
        return log_full_errno_ratelimited(INTERVAL_NS, BURST, LOG_WARNING, -ENOENT,
                                          "reading thing %d failed: %m", i);
}

int main(void)
{
        char path[] = "/tmp/profd-ratelimit-XXXXXX";
        int fd = mkstemp(path);
        int saved = dup(STDERR_FILENO);
        char buf[8192] = "";

        if (fd < 0 || saved < 0 || dup2(fd, STDERR_FILENO) < 0)
                return 99;
        unlink(path);
        log_open();

        for (int i = 0; i < 10; i++)
                CHECK(flaky(i) == -ENOENT, "call %d returns -ENOENT", i);
        struct timespec ts = {.tv_nsec = (long)INTERVAL_NS + 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        CHECK(flaky(10) == -ENOENT, "call after the interval returns -ENOENT");
        /* Another call site has its own budget. */
        (void)log_warning_errno_ratelimited(-EIO, "other site: %m");

        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        buf[n > 0 ? n : 0] = 0;
        printf("%s", buf);

        unsigned lines = 0;
        for (char *p = buf; (p = strchr(p, '\n')); p++)
                lines++;
        CHECK(lines == BURST + 2, "%u lines, want %u (burst, then one after the interval, other site)",
              lines, BURST + 2);
        CHECK(strstr(buf, "reading thing 2 failed: No such file or directory\n") != NULL,
              "burst lines pass");
        CHECK(strstr(buf, "reading thing 3") == NULL, "lines past the burst are suppressed");
        CHECK(strstr(buf,
                     "reading thing 10 failed: No such file or directory (7 similar messages suppressed)") !=
                      NULL,
              "the next line says how many were suppressed");
        CHECK(strstr(buf, "other site: Input/output error") != NULL, "other call sites are not affected");
        if (failures == 0)
                printf("all checks passed\n");
        return failures ? 1 : 0;
}
