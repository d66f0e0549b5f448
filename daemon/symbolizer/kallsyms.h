/* SPDX-License-Identifier: GPL-2.0-only */
/* The running kernel's names: text symbols of /proc/kallsyms (reread when modules change) and its
 * build ID. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct KSym {
        uint64_t addr;
        uint32_t name;   /* offset into knames */
        uint32_t module; /* offset into knames; 0 = vmlinux ("" at offset 0) */
} KSym;

typedef struct Kallsyms {
        KSym *ksyms; /* sorted by addr */
        size_t n_ksyms;
        char *knames;
        size_t knames_size;
        uint64_t kallsyms_loaded_ns;
        bool kallsyms_hidden;
        bool kallsyms_pinned; /* loaded from a file given by the caller: never reread */
        uint64_t modules_hash, modules_checked_ns;
        uint8_t kernel_build_id[64];
        size_t kernel_build_id_size;
        bool kernel_build_id_read;
        int kallsyms_error;
        uint64_t n_kallsyms_loads;
} Kallsyms;

/* Text symbols of a file in /proc/kallsyms format, sorted. With kptr_restrict every address reads
 * as 0: then the table stays empty and kallsyms_hidden is set. */
int kallsyms_load(Kallsyms *k, const char *path);
/* Whether /proc/kallsyms should be read again (never when pinned). */
bool kallsyms_stale(Kallsyms *k);
/* Reads /proc/kallsyms again, and remembers the modules it reflects. */
void kallsyms_refresh(Kallsyms *k);
/* Reads the running kernel's build ID into k (once). */
void kallsyms_read_kernel_build_id(Kallsyms *k);
