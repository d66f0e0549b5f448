/* SPDX-License-Identifier: GPL-2.0-only */
/* Wall-clock instants as HTTP parameters and headers take them: RFC 3339 or unix seconds in,
 * RFC 3339 (UTC, nanoseconds) out. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* "2026-11-25T19:40:01Z", "2026-11-25T19:40:01.25+01:00" (a ' ' for the '+' too: a '+' in a query
 * string decodes to a space), or unix seconds "1795635601" / "1795635601.25". Nanoseconds since
 * the epoch; -EINVAL for anything else or before 1970. */
int timestamp_parse(const char *s, uint64_t *ret_ns);

/* "2026-11-25T19:40:01.250000000Z" */
void timestamp_format(uint64_t ns, char *buf, size_t size);
#define TIMESTAMP_MAX 40
