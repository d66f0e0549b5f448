/* SPDX-License-Identifier: GPL-2.0-only */
/* Reads of the user stack for the native walk, through the per-CPU window in the sample state
 * (one bpf_probe_read_user serves several frames). Defines no maps. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "sample-state.bpf.h"

/* Reads 16 bytes of user stack at addr through the window, refilling it from addr to the end of
 * addr's page on a miss. Within 16 bytes of a page end only the need (8 or 16) bytes the caller
 * uses are read, exactly. */
static __always_inline int read_stack(struct sample_state *st, __u64 addr, __u64 ret[2], __u32 need)
{
        __u64 off = addr - st->win_base;

        if (!st->win_base || addr < st->win_base || off + 16 > st->win_len) {
                /* Up to the end of addr's page: that page is mapped (the frame is there), so the
                 * read never faults. A read past the top of the stack mapping would, and a fault
                 * costs ~0.8 us, more than several reads. */
                __u32 len = PROFD_PAGE_SIZE - (addr & (PROFD_PAGE_SIZE - 1));

                if (len > PROFD_STACK_WINDOW)
                        len = PROFD_STACK_WINDOW;
                if (len < 16 || bpf_probe_read_user(st->win, len, (void *)addr) < 0) {
                        st->win_base = 0;
                        ret[1] = 0;
                        return bpf_probe_read_user(ret, need == 8 ? 8 : 16, (void *)addr);
                }
                st->win_base = addr;
                st->win_len = len;
                off = 0;
        }
        off &= PROFD_STACK_WINDOW - 1;
        __builtin_memcpy(ret, st->win + off, 16);
        return 0;
}
