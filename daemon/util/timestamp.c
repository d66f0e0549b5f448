/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/macro.h"
#include "util/timestamp.h"

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

/* Exactly n digits at *p. */
static int digits(const char **p, unsigned n, int *ret)
{
        int v = 0;
        for (unsigned i = 0; i < n; i++) {
                if (!is_digit((*p)[i]))
                        return -EINVAL;
                v = v * 10 + ((*p)[i] - '0');
        }
        *p += n;
        *ret = v;
        return 0;
}

/* ".123" after seconds: up to 9 digits count, more are ignored (below a nanosecond). */
static int fraction(const char **p, uint64_t *ret_ns)
{
        uint64_t ns = 0, scale = 100000000;
        if (**p != '.')
                return 0;
        (*p)++;
        if (!is_digit(**p))
                return -EINVAL;
        for (; is_digit(**p); (*p)++) {
                ns += (uint64_t)(**p - '0') * scale;
                scale /= 10;
        }
        *ret_ns = ns;
        return 0;
}

static int parse_unix(const char *s, uint64_t *ret_ns)
{
        uint64_t sec = 0, ns = 0;
        const char *p = s;
        if (!is_digit(*p))
                return -EINVAL;
        for (; is_digit(*p); p++) {
                sec = sec * 10 + (uint64_t)(*p - '0');
                if (sec > UINT64_MAX / NSEC_PER_SEC / 2)
                        return -EINVAL;
        }
        if (fraction(&p, &ns) < 0 || *p)
                return -EINVAL;
        *ret_ns = sec * NSEC_PER_SEC + ns;
        return 0;
}

static int parse_rfc3339(const char *s, uint64_t *ret_ns)
{
        const char *p = s;
        int Y, M, D, h, m, sec, oh = 0, om = 0, sign = 0;
        uint64_t ns = 0;

        if (digits(&p, 4, &Y) < 0 || *p++ != '-' || digits(&p, 2, &M) < 0 || *p++ != '-' ||
            digits(&p, 2, &D) < 0 || (*p != 'T' && *p != 't' && *p != ' '))
                return -EINVAL;
        p++;
        if (digits(&p, 2, &h) < 0 || *p++ != ':' || digits(&p, 2, &m) < 0 || *p++ != ':' ||
            digits(&p, 2, &sec) < 0 || fraction(&p, &ns) < 0)
                return -EINVAL;
        if (*p == 'Z' || *p == 'z')
                p++;
        else if (*p == '+' || *p == ' ' || *p == '-') {
                sign = *p == '-' ? -1 : 1;
                p++;
                if (digits(&p, 2, &oh) < 0 || *p++ != ':' || digits(&p, 2, &om) < 0 || oh > 23 || om > 59)
                        return -EINVAL;
        } else
                return -EINVAL;
        if (*p || M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60)
                return -EINVAL;

        struct tm tm = {.tm_year = Y - 1900,
                        .tm_mon = M - 1,
                        .tm_mday = D,
                        .tm_hour = h,
                        .tm_min = m,
                        .tm_sec = sec > 59 ? 59 : sec}; /* a leap second is its minute's last */
        time_t t = timegm(&tm);
        if (t == (time_t)-1 || tm.tm_mday != D) /* timegm() normalises 31 April into 1 May */
                return -EINVAL;
        int64_t utc = (int64_t)t - (int64_t)sign * (oh * 3600 + om * 60);
        if (utc < 0)
                return -EINVAL;
        *ret_ns = (uint64_t)utc * NSEC_PER_SEC + ns;
        return 0;
}

int timestamp_parse(const char *s, uint64_t *ret_ns)
{
        if (!s || !*s)
                return -EINVAL;
        /* A date has its '-' fifth; unix seconds have none. */
        if (strlen(s) > 4 && s[4] == '-')
                return parse_rfc3339(s, ret_ns);
        return parse_unix(s, ret_ns);
}

void timestamp_format(uint64_t ns, char *buf, size_t size)
{
        time_t t = (time_t)(ns / NSEC_PER_SEC);
        struct tm tm;
        char date[32];
        if (!gmtime_r(&t, &tm) || strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
                date[0] = 0;
        snprintf(buf, size, "%s.%09" PRIu64 "Z", date, (uint64_t)(ns % NSEC_PER_SEC));
}
