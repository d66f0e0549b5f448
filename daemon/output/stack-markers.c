/* SPDX-License-Identifier: GPL-2.0-only */
#include <stdio.h>

#include "output/stack-markers.h"

static const char *const stop_names[PROFD_STOP__MAX] = {
        [PROFD_STOP_OK] = "ok",
        [PROFD_STOP_DEPTH] = "depth limit",
        [PROFD_STOP_BAD_READ] = "stack read failed",
        [PROFD_STOP_NO_MAPPING] = "pc outside any mapping",
        [PROFD_STOP_NO_ROW] = "no unwind info",
        [PROFD_STOP_UNSUPPORTED] = "unsupported unwind rule",
        [PROFD_STOP_UNKNOWN_PID] = "process not yet known",
        [PROFD_STOP_BAD_FRAME] = "bad frame",
        [PROFD_STOP_KERNEL_THREAD] = "kernel thread",
        [PROFD_STOP_TABLE_PENDING] = "unwind table not ready",
        [PROFD_STOP_IN_EXEC] = "process in exec",
};

bool stack_marker(const Stack *user, char *buf, size_t size)
{
        unsigned reason = user->flags & PROFD_STACK_REASON_MASK;

        if (user->flags & PROFD_STACK_TRUNCATED || reason == PROFD_STOP_DEPTH)
                snprintf(buf, size, "[truncated: %u+ frames]", user->n);
        /* A kernel thread has no user stack to complete. */
        else if (reason == PROFD_STOP_OK || reason == PROFD_STOP_KERNEL_THREAD)
                return false;
        /* A newer BPF object may report a reason this daemon has no words for: keep its number. */
        else if (reason < PROFD_STOP__MAX && stop_names[reason])
                snprintf(buf, size, "[unwind stopped: %s]", stop_names[reason]);
        else
                snprintf(buf, size, "[unwind stopped: reason %u]", reason);
        return true;
}
