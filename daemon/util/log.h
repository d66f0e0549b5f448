/* SPDX-License-Identifier: GPL-2.0-only */
/* Logging to stderr; with JOURNAL_STREAM set, lines carry syslog "<N>" prefixes so journald keeps
 * priorities. log_* return -abs(error) so callers can `return log_error_errno(r, ...)`. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <syslog.h>

#include "util/macro.h"

void log_set_max_level(int level);
int log_get_max_level(void);
int log_level_from_string(const char *s); /* "err", "warning", "info", "debug" or 0..7; -EINVAL */
void log_open(void);                      /* reads JOURNAL_STREAM */

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) _printf_(5, 6);

#define log_full_errno(level, error, ...) log_internal(level, error, __FILE__, __LINE__, __VA_ARGS__)
#define log_debug(...) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_ERR, 0, __VA_ARGS__)
#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, e, __VA_ARGS__)

/* Rate limit for repeated errors: at most `burst` messages per `interval_ns`; the first message
 * after a suppressed period says how many were suppressed. */
typedef struct LogRateLimit {
        uint64_t interval_ns;
        unsigned burst;
        uint64_t begin_ns;
        unsigned num;
        unsigned suppressed;
} LogRateLimit;
#define LOG_RATELIMIT_INIT(interval_ns_, burst_) { .interval_ns = (interval_ns_), .burst = (burst_) }
/* true: log it. *ret_suppressed gets the count dropped since the last logged message. */
bool log_ratelimit_test(LogRateLimit *rl, unsigned *ret_suppressed);

/* For errors that can repeat per sample, process, event or request: at most `burst` lines per
 * `interval_ns` from this call site, and the next line that gets through says how many were
 * suppressed. Evaluates to -abs(error) like log_full_errno(). */
#define log_full_errno_ratelimited(interval_ns, burst, level, error, fmt, ...)                              \
        ({                                                                                                  \
                static LogRateLimit _rl = LOG_RATELIMIT_INIT(interval_ns, burst);                           \
                unsigned _suppressed = 0;                                                                   \
                int _e = (error);                                                                           \
                if (log_ratelimit_test(&_rl, &_suppressed)) {                                               \
                        if (_suppressed > 0)                                                                \
                                log_full_errno(level, _e, fmt " (%u similar messages suppressed)",          \
                                               ##__VA_ARGS__, _suppressed);                                 \
                        else                                                                                \
                                log_full_errno(level, _e, fmt, ##__VA_ARGS__);                              \
                }                                                                                           \
                _e < 0 ? _e : -_e;                                                                          \
        })
/* 10 lines per minute per call site. */
#define LOG_RATELIMIT_INTERVAL_NS (60 * NSEC_PER_SEC)
#define LOG_RATELIMIT_BURST 10
#define log_warning_errno_ratelimited(e, ...)                                                               \
        log_full_errno_ratelimited(LOG_RATELIMIT_INTERVAL_NS, LOG_RATELIMIT_BURST, LOG_WARNING, e,          \
                                   __VA_ARGS__)
#define log_error_errno_ratelimited(e, ...)                                                                 \
        log_full_errno_ratelimited(LOG_RATELIMIT_INTERVAL_NS, LOG_RATELIMIT_BURST, LOG_ERR, e, __VA_ARGS__)
