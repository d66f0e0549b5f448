/* SPDX-License-Identifier: GPL-2.0-only */
/* V8 (Node.js): the processes whose JavaScript frames the native walk reads (bpf/profd-v8.h).
 * Defines the map "v8_procs": include from profile.bpf.c only. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "profd-v8.h"

struct {
        __uint(type, BPF_MAP_TYPE_HASH);
        __uint(max_entries, PROFD_V8_MAX_PROCS);
        __type(key, __u32);
        __type(value, struct profd_v8_proc);
} v8_procs SEC(".maps");
