/* SPDX-License-Identifier: GPL-2.0-only */
/* Reading a process from /proc/PID/{stat,maps} into the table (process-read.c). */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "tracker/process-table-internal.h"

/* Reads /proc/PID/{stat,maps} into p (which keeps its old mappings on failure). -ESRCH: gone (or a
 * zombie); -EAGAIN: mid-exec or exiting, look again. */
int process_read(ProcessTable *t, Process *p);
/* starttime and comm of /proc/PID/stat (comm may be NULL). */
int process_read_stat(pid_t pid, uint64_t *ret_start, char comm[17]);
