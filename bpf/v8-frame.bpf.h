/* SPDX-License-Identifier: GPL-2.0-only */
/* V8 (Node.js): a JavaScript frame's function, noted by the native walk where it takes a
 * frame-pointer step (bpf/profd-v8.h). Defines no maps. */
#pragma once

#include "vmlinux.h"

#include "profd-sample.h"
#include "profd-v8.h"
#include "sample-state.bpf.h"
#include "stack-hash.bpf.h"
#include "stack-read.bpf.h"

/* The frame at st->fp is about to be left by a frame-pointer step (JIT code in anonymous memory,
 * builtins without CFI). In a V8 process, a JavaScript frame there gets a PROFD_FRAME_V8 entry with
 * its function after the entry of its pc (bpf/profd-v8.h). The daemon checks what it names. */
static __always_inline void v8_note_frame(struct sample_state *st)
{
        const struct profd_v8_proc *v8 = &st->v8;
        __u64 ctx[2], fn[2], rec;
        __u32 len = st->user.len;

        if (!st->v8_active || st->fp == 0 || (st->fp & 7) || st->fp < st->sp)
                return;
        if (read_stack(st, st->fp + v8->fp_context, ctx, 8) < 0 ||
            read_stack(st, st->fp + v8->fp_function, fn, 8) < 0) {
                count(PROFD_CNT_V8_BAD_READ);
                return;
        }
        /* A typed frame's marker is an untagged small integer; a JavaScript frame holds its
         * context, a heap object. */
        if ((ctx[0] & v8->heap_object_tag_mask) != v8->heap_object_tag) {
                count(ctx[0] < PROFD_V8_MARKER_MAX ? PROFD_CNT_V8_TYPED : PROFD_CNT_V8_NOT_JS);
                return;
        }
        if ((fn[0] & v8->heap_object_tag_mask) != v8->heap_object_tag || fn[0] > PROFD_V8_ADDR_MASK ||
            fn[0] < 4096) {
                count(PROFD_CNT_V8_NOT_JS);
                return;
        }
        if (len >= PROFD_MAX_USER_FRAMES) {
                count(PROFD_CNT_V8_NO_ROOM);
                return;
        }
        rec = PROFD_FRAME_V8 | fn[0];
        st->user.ips[len & (PROFD_MAX_USER_FRAMES - 1)] = rec;
        st->user.len = len + 1;
        st->uhash = hash_mix(st->uhash, rec);
        count(PROFD_CNT_V8_FRAMES);
}
