/* SPDX-License-Identifier: GPL-2.0-only */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "util/log.h"
#include "util/time-util.h"

static int max_level = LOG_INFO;
static bool use_prefix;

void log_set_max_level(int level)
{
        max_level = level;
}

int log_get_max_level(void)
{
        return max_level;
}

void log_open(void)
{
        /* journald sets JOURNAL_STREAM=dev:ino of the stream; only prefix when stderr is still it
         * (not when a service's child was started with stderr redirected to a file). */
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        use_prefix = e && sscanf(e, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0 &&
                     (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

int log_level_from_string(const char *s)
{
        static const char *const names[] = {"emerg",   "alert",  "crit", "err",
                                            "warning", "notice", "info", "debug"};
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (strcmp(s, names[i]) == 0)
                        return (int)i;
        if (strcmp(s, "error") == 0)
                return LOG_ERR;
        if (strcmp(s, "warn") == 0)
                return LOG_WARNING;
        if (s[0] >= '0' && s[0] <= '7' && s[1] == 0)
                return s[0] - '0';
        return -EINVAL;
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...)
{
        int saved = errno;
        if (error < 0)
                error = -error;
        if (level > max_level)
                goto out;

        char buf[2048];
        va_list ap;
        va_start(ap, fmt);
        errno = error; /* so %m works */
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);

        if (use_prefix)
                fprintf(stderr, "<%d>%s\n", level, buf);
        else if (max_level >= LOG_DEBUG)
                fprintf(stderr, "%s:%d: %s\n", file, line, buf);
        else
                fprintf(stderr, "%s\n", buf);
out:
        errno = saved;
        return -error;
}

bool log_ratelimit_test(LogRateLimit *rl, unsigned *ret_suppressed)
{
        uint64_t now = now_ns(CLOCK_MONOTONIC);

        if (rl->begin_ns == 0 || now - rl->begin_ns >= rl->interval_ns) {
                rl->begin_ns = now;
                rl->num = 0;
        }
        if (rl->num < rl->burst) {
                rl->num++;
                if (ret_suppressed)
                        *ret_suppressed = rl->suppressed;
                rl->suppressed = 0;
                return true;
        }
        rl->suppressed++;
        return false;
}
