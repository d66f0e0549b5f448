/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/array.h"
#include "util/pid-table.h"

static pid_t item_pid(const PidTable *t, const void *item)
{
        pid_t pid;

        memcpy(&pid, (const char *)item + t->pid_offset, sizeof(pid));
        return pid;
}

void *pid_table_find(const PidTable *t, pid_t pid, size_t *ret_pos)
{
        uint32_t pos;

        if (!pid_index_get(&t->index, pid, &pos))
                return NULL;
        if (ret_pos)
                *ret_pos = pos;
        return t->items[pos];
}

int pid_table_add(PidTable *t, void *item)
{
        pid_t pid = item_pid(t, item);
        int r;

        if (pid <= 0)
                return -EINVAL;
        if (pid_table_find(t, pid, NULL))
                return -EEXIST;
        if (t->n >= UINT32_MAX)
                return -ENOMEM;
        r = ARRAY_GROW(t->items, t->cap, t->n + 1, 64);
        if (r < 0)
                return r;
        r = pid_index_set(&t->index, pid, (uint32_t)t->n);
        if (r < 0)
                return r;
        t->items[t->n++] = item;
        return 0;
}

void *pid_table_remove_at(PidTable *t, size_t pos)
{
        void *item = t->items[pos];

        pid_index_remove(&t->index, item_pid(t, item));
        if (pos != --t->n) {
                t->items[pos] = t->items[t->n];
                /* Cannot fail: the pid is in the index, only its position changes. */
                (void)pid_index_set(&t->index, item_pid(t, t->items[pos]), (uint32_t)pos);
        }
        return item;
}

void *pid_table_remove(PidTable *t, pid_t pid)
{
        size_t pos;

        return pid_table_find(t, pid, &pos) ? pid_table_remove_at(t, pos) : NULL;
}

size_t pid_table_bytes(const PidTable *t)
{
        return t->cap * sizeof(*t->items) + pid_index_bytes(&t->index);
}

void pid_table_done(PidTable *t)
{
        free(t->items);
        pid_index_done(&t->index);
        *t = (PidTable){.pid_offset = t->pid_offset};
}
