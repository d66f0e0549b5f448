/* SPDX-License-Identifier: GPL-2.0-only */
/* Logging to stderr; with JOURNAL_STREAM set, lines carry syslog "<N>" prefixes so journald keeps
 * priorities. log_* return -abs(error) so callers can `return log_error_errno(r, ...)`. */
#pragma once

#include <syslog.h>

#include "macro.h"

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
