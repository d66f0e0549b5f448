/* SPDX-License-Identifier: GPL-2.0-only */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/bpf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zlib.h>

#include "sampler/kernel-features.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/metrics-writer.h"

static const char *const feature_names[_KERNEL_FEATURE_MAX] = {
        [KERNEL_FEATURE_TASK_BTF] = "task_btf",
        [KERNEL_FEATURE_TASK_PT_REGS] = "task_pt_regs",
        [KERNEL_FEATURE_PERF_EVENT_DYNAMIC_MAPS] = "perf_event_dynamic_maps",
};

static const char *const fallbacks[_KERNEL_FEATURE_MAX] = {
        [KERNEL_FEATURE_TASK_BTF] = "bpf_get_current_task_btf() is missing: task fields are read with "
                                    "bpf_probe_read_kernel()",
        [KERNEL_FEATURE_TASK_PT_REGS] = "bpf_task_pt_regs() is missing: user registers of tasks sampled in "
                                        "the kernel are read from the top of their kernel stack",
        [KERNEL_FEATURE_PERF_EVENT_DYNAMIC_MAPS] =
                "perf_event programs cannot use non-preallocated hash maps: the in-kernel stack and count "
                "maps are preallocated, sized to the sample rate (more kernel memory while idle)",
};

/* libbpf's own probe: loads a perf_event program that calls the helper. */
static bool have_helper(enum bpf_func_id id)
{
        return libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, id, NULL) == 1;
}

/* A perf_event program that looks up a BPF_F_NO_PREALLOC hash map: before 6.1 the verifier refuses
 * it ("perf_event programs can only use preallocated hash map"). */
static bool have_perf_event_dynamic_maps(void)
{
        LIBBPF_OPTS(bpf_map_create_opts, mopts, .map_flags = BPF_F_NO_PREALLOC);
        _cleanup_close_ int map_fd = -EBADF;
        _cleanup_close_ int prog_fd = -EBADF;

        map_fd = bpf_map_create(BPF_MAP_TYPE_HASH, "profd_probe", sizeof(uint32_t), sizeof(uint64_t), 1,
                                &mopts);
        if (map_fd < 0)
                return false;
        struct bpf_insn insns[] = {
                /* *(u32 *)(r10 - 4) = 0 */
                {.code = BPF_ST | BPF_MEM | BPF_W, .dst_reg = BPF_REG_10, .off = -4, .imm = 0},
                /* r2 = r10 - 4 */
                {.code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_10},
                {.code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = BPF_REG_2, .imm = -4},
                /* r1 = map (two instructions) */
                {.code = BPF_LD | BPF_DW | BPF_IMM,
                 .dst_reg = BPF_REG_1,
                 .src_reg = BPF_PSEUDO_MAP_FD,
                 .imm = map_fd},
                {},
                {.code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_map_lookup_elem},
                {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
                {.code = BPF_JMP | BPF_EXIT},
        };
        prog_fd = bpf_prog_load(BPF_PROG_TYPE_PERF_EVENT, "profd_probe", "GPL", insns, ELEMENTSOF(insns),
                                NULL);
        return prog_fd >= 0;
}

/* CONFIG_KASAN doubles x86-64's THREAD_SIZE. The kernel's config, where one is published. */
static bool kernel_has_kasan(void)
{
        char path[300], line[256];
        struct utsname u;
        bool kasan = false;
        gzFile gz;

        if (uname(&u) < 0)
                return false;
        snprintf(path, sizeof(path), "/boot/config-%s", u.release);
        gz = gzopen(access(path, R_OK) == 0 ? path : "/proc/config.gz", "r");
        if (!gz)
                return false;
        while (gzgets(gz, line, sizeof(line)))
                if (strcmp(line, "CONFIG_KASAN=y\n") == 0) {
                        kasan = true;
                        break;
                }
        gzclose(gz);
        return kasan;
}

/* PROFD_KERNEL_FEATURES_OFF=name,name: behave as if the kernel lacked them (to measure and test the
 * fallbacks on a kernel that has everything). */
static void apply_forced_off(KernelFeatures *k)
{
        const char *env = getenv("PROFD_KERNEL_FEATURES_OFF");
        _cleanup_free_ char *copy = NULL;
        char *tok, *save = NULL;

        if (!env || !*env)
                return;
        copy = strdup(env);
        if (!copy)
                return;
        for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                bool known = false;
                for (size_t i = 0; i < _KERNEL_FEATURE_MAX; i++)
                        if (strcmp(tok, feature_names[i]) == 0) {
                                k->forced_off[i] = true;
                                k->have[i] = false;
                                known = true;
                        }
                if (!known)
                        log_warning("PROFD_KERNEL_FEATURES_OFF: unknown kernel feature '%s' ignored", tok);
        }
}

const KernelFeatures *kernel_features_get(void)
{
        static KernelFeatures k;
        static bool probed;

        if (probed)
                return &k;
        probed = true;
        k.have[KERNEL_FEATURE_TASK_BTF] = have_helper(BPF_FUNC_get_current_task_btf);
        k.have[KERNEL_FEATURE_TASK_PT_REGS] = have_helper(BPF_FUNC_task_pt_regs);
        k.have[KERNEL_FEATURE_PERF_EVENT_DYNAMIC_MAPS] = have_perf_event_dynamic_maps();
        k.thread_size = kernel_has_kasan() ? 32768 : 16384;
        apply_forced_off(&k);
        for (size_t i = 0; i < _KERNEL_FEATURE_MAX; i++)
                if (!k.have[i])
                        log_notice("Kernel feature %s %s: %s", feature_names[i],
                                   k.forced_off[i] ? "turned off by PROFD_KERNEL_FEATURES_OFF" : "missing",
                                   fallbacks[i]);
        return &k;
}

void kernel_features_write_metrics(const KernelFeatures *k, FILE *f)
{
        uint64_t have[_KERNEL_FEATURE_MAX];

        for (size_t i = 0; i < _KERNEL_FEATURE_MAX; i++)
                have[i] = k->have[i];
        metric_labelled(f, "profd_kernel_feature", "gauge",
                        "1 when the running kernel's BPF has the feature; 0: profd uses its fallback (see "
                        "docs/kernels.md).",
                        "name", feature_names, have, _KERNEL_FEATURE_MAX);
}
