/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdlib.h>

#include "util/hash.h"
#include "util/pid-index.h"

/* The first allocation: room for 512 pids at the load kept below one half. */
#define PID_INDEX_MIN_CAP 1024

static size_t home(const PidIndex *ix, pid_t pid)
{
        return hash_mix64((uint64_t)(uint32_t)pid) & (ix->cap - 1);
}

void pid_index_done(PidIndex *ix)
{
        free(ix->slots);
        *ix = (PidIndex){};
}

size_t pid_index_bytes(const PidIndex *ix)
{
        return ix->cap * sizeof(PidSlot);
}

static int pid_index_grow(PidIndex *ix)
{
        PidIndex n = {};

        n.cap = ix->cap ? ix->cap * 2 : PID_INDEX_MIN_CAP;
        n.slots = calloc(n.cap, sizeof(*n.slots));
        if (!n.slots)
                return -ENOMEM;
        for (size_t i = 0; i < ix->cap; i++)
                if (ix->slots[i].pid)
                        (void)pid_index_set(&n, ix->slots[i].pid, ix->slots[i].pos);
        pid_index_done(ix);
        *ix = n;
        return 0;
}

int pid_index_set(PidIndex *ix, pid_t pid, uint32_t pos)
{
        size_t i;
        int r;

        if (pid <= 0)
                return -EINVAL;
        /* A known pid moves in place: never a growth, so a move cannot fail. */
        for (i = ix->cap ? home(ix, pid) : 0; ix->cap && ix->slots[i].pid; i = (i + 1) & (ix->cap - 1))
                if (ix->slots[i].pid == pid) {
                        ix->slots[i].pos = pos;
                        return 0;
                }
        if ((ix->n + 1) * 2 > ix->cap) {
                r = pid_index_grow(ix);
                if (r < 0)
                        return r;
        }
        for (i = home(ix, pid); ix->slots[i].pid; i = (i + 1) & (ix->cap - 1))
                ;
        ix->slots[i] = (PidSlot){.pid = pid, .pos = pos};
        ix->n++;
        return 0;
}

bool pid_index_get(const PidIndex *ix, pid_t pid, uint32_t *ret_pos)
{
        if (ix->cap == 0 || pid <= 0)
                return false;
        for (size_t i = home(ix, pid); ix->slots[i].pid; i = (i + 1) & (ix->cap - 1))
                if (ix->slots[i].pid == pid) {
                        *ret_pos = ix->slots[i].pos;
                        return true;
                }
        return false;
}

void pid_index_remove(PidIndex *ix, pid_t pid)
{
        size_t i, j, mask = ix->cap - 1;

        if (ix->cap == 0 || pid <= 0)
                return;
        for (i = home(ix, pid); ix->slots[i].pid != pid; i = (i + 1) & mask)
                if (!ix->slots[i].pid)
                        return;
        /* Backward shift: later slots of the same run move into the hole when their home is not
         * between the hole and them, so every lookup still finds its pid before an empty slot. */
        for (j = (i + 1) & mask; ix->slots[j].pid; j = (j + 1) & mask) {
                size_t h = home(ix, ix->slots[j].pid);
                if (((j - h) & mask) >= ((j - i) & mask)) {
                        ix->slots[i] = ix->slots[j];
                        i = j;
                }
        }
        ix->slots[i] = (PidSlot){};
        ix->n--;
}
