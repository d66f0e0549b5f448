/* SPDX-License-Identifier: GPL-2.0-only */
/* A set of per-process records found by pid: the records' pointers in an array in no order, and a
 * PidIndex from pid to position. Adding, finding and removing cost the same however many are
 * kept (an array sorted by pid moved a pointer per record at every fork, exec and exit of a busy
 * host); removal moves the last pointer into the hole. The process table, the tracker and the
 * table pool keep their processes in one each. The records are the caller's: the table neither
 * allocates nor frees them. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/pid-index.h"

typedef struct PidTable {
        void **items; /* in no order */
        size_t n, cap;
        size_t pid_offset; /* where each record holds its pid_t */
        PidIndex index;    /* pid -> position in items */
} PidTable;

/* An empty table of records of type T whose pid is T.member. */
#define PID_TABLE_INIT(T, member) ((PidTable){.pid_offset = offsetof(T, member)})

/* The record of pid (NULL if none), and its position for pid_table_remove_at(). */
void *pid_table_find(const PidTable *t, pid_t pid, size_t *ret_pos);
/* Adds item, whose pid (> 0) the table must not hold yet: -EEXIST if it does, -EINVAL for a pid
 * <= 0, -ENOMEM when the table cannot grow (then nothing changed). */
int pid_table_add(PidTable *t, void *item);
/* Takes the record at pos out and returns it: the last record takes its position, so a walk over
 * the positions that removes looks at pos again. */
void *pid_table_remove_at(PidTable *t, size_t pos);
/* Takes pid's record out and returns it (NULL if none). */
void *pid_table_remove(PidTable *t, pid_t pid);
/* Memory of the table itself (not the records). */
size_t pid_table_bytes(const PidTable *t);
/* Frees the table's arrays (not the records) and leaves it empty, for the same type. */
void pid_table_done(PidTable *t);

static inline size_t pid_table_size(const PidTable *t)
{
        return t->n;
}

static inline void *pid_table_at(const PidTable *t, size_t pos)
{
        return t->items[pos];
}
