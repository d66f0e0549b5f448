/* SPDX-License-Identifier: GPL-2.0-only */
/* Reading the small files named on the command line (certificates, keys, tokens) from the event
 * loop, at start and on SIGHUP, without ever blocking on them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/* Reads a regular file of at most max_size bytes into a NUL-terminated buffer (*ret_size excludes
 * the NUL). Opened non-blocking so that a FIFO or device named by mistake fails (-EINVAL) instead
 * of holding the loop. With private, a file readable by every user fails with -EPERM (mode in
 * *ret_st). -EFBIG past max_size; other errors are open/read's. */
int config_file_read(const char *path, size_t max_size, bool private, char **ret, size_t *ret_size,
                     struct stat *ret_st);
/* Zeroes and frees a buffer that held a secret. */
void config_file_free_secret(char *p, size_t size);
