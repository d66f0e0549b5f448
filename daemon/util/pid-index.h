/* SPDX-License-Identifier: GPL-2.0-only */
/* An index from pids to positions in a table kept unsorted (the process table): finding, adding
 * and removing a process cost the same however many are kept, where an array sorted by pid moved
 * a pointer per process kept at every fork, exec and exit of a busy host. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* pid 0 marks an empty slot (no process has it); linear probing, so a lookup touches one or two
 * cache lines of 8-byte slots. */
typedef struct PidSlot {
        int32_t pid;
        uint32_t pos;
} PidSlot;

typedef struct PidIndex {
        PidSlot *slots;
        size_t cap, n;
} PidIndex;

/* Adds pid at pos (-ENOMEM when the index cannot grow), or moves it there if it is known (never
 * fails). pid must be > 0. */
int pid_index_set(PidIndex *ix, pid_t pid, uint32_t pos);
/* pid's position, if known. */
bool pid_index_get(const PidIndex *ix, pid_t pid, uint32_t *ret_pos);
/* Forgets pid (nothing if unknown). */
void pid_index_remove(PidIndex *ix, pid_t pid);
size_t pid_index_bytes(const PidIndex *ix);
void pid_index_done(PidIndex *ix);
