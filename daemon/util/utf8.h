/* SPDX-License-Identifier: GPL-2.0-only */
/* Every text profd serves (pprof strings, folded stacks, the flame graph page) is valid UTF-8,
 * while comms, paths and symbol names are arbitrary bytes chosen by whoever runs a process. */
#pragma once

#include <stddef.h>

/* Bytes of the valid UTF-8 character without control characters that starts s (len bytes
 * available); 0 when s[0] does not start one. */
size_t utf8_char_len(const char *s, size_t len);
/* *ret = s with every byte that is not part of such a character written as \xNN, or NULL when s
 * needs no change. -ENOMEM. */
int utf8_escape(const char *s, char **ret);
