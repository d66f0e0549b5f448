/* SPDX-License-Identifier: GPL-2.0-only */
/* Off-CPU recording's BPF side (docs/off-cpu.md): one tp_btf program on sched_switch and its
 * tail-call chain; without --off-cpu none of it is loaded and its maps take no memory. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sampler/sampler-offcpu.h"
#include "sampler/sampler.h"
#include "util/log.h"
#include "util/macro.h"

#include "profile.skel.h"

/* Threads remembered (each wanted thread that ever waited, until it exits; ~80 bytes each,
 * preallocated) and unwound waits going on at once (~130 bytes each). Past them a wait is counted
 * (profd_offcpu_drops_total) and not recorded. */
#define SAMPLER_OFFCPU_THREADS_ENTRIES 32768u
#define SAMPLER_OFFCPU_PENDING_ENTRIES 16384u

int sampler_offcpu_configure(Sampler *s)
{
        struct bpf_program *progs[] = {
                s->skel->progs.profd_offcpu_switch,       s->skel->progs.profd_offcpu_step,
                s->skel->progs.profd_offcpu_python,       s->skel->progs.profd_offcpu_cut,
                s->skel->progs.profd_offcpu_switch_cut,   s->skel->progs.profd_offcpu_hotspot,
                s->skel->progs.profd_offcpu_step_hotspot, s->skel->progs.profd_offcpu_step_v8,
                s->skel->progs.profd_offcpu_waking,
        };
        int r;

        if (!s->opts.off_cpu) {
                for (size_t i = 0; i < ELEMENTSOF(progs); i++)
                        (void)bpf_program__set_autoload(progs[i], false);
                s->offcpu_threads_entries = s->offcpu_pending_entries = 1;
        } else {
                s->offcpu_threads_entries = SAMPLER_OFFCPU_THREADS_ENTRIES;
                s->offcpu_pending_entries = SAMPLER_OFFCPU_PENDING_ENTRIES;
                s->skel->rodata->profd_offcpu_threshold_ns =
                        s->opts.off_cpu_threshold_ns ?: SAMPLER_OFF_CPU_THRESHOLD_DEFAULT_NS;
                s->skel->rodata->profd_self_tgid = getpid();
                /* bpf_for_each_map_elem (5.13) comes after the atomics the cut needs (5.12). */
                s->offcpu_have_cut = libbpf_probe_bpf_helper(BPF_PROG_TYPE_RAW_TRACEPOINT,
                                                             BPF_FUNC_for_each_map_elem, NULL) > 0;
                /* One build of the sched_switch program: with the cut's exchange or without. */
                (void)bpf_program__set_autoload(s->offcpu_have_cut ? s->skel->progs.profd_offcpu_switch
                                                                   : s->skel->progs.profd_offcpu_switch_cut,
                                                false);
                if (!s->offcpu_have_cut) {
                        (void)bpf_program__set_autoload(s->skel->progs.profd_offcpu_cut, false);
                        log_info("Off-CPU: no bpf_for_each_map_elem() (kernel before 5.13): a wait counts "
                                 "whole in the interval it ends in");
                }
        }
        r = bpf_map__set_max_entries(s->skel->maps.offcpu_threads, s->offcpu_threads_entries);
        if (r >= 0)
                r = bpf_map__set_max_entries(s->skel->maps.offcpu_pending, s->offcpu_pending_entries);
        if (r < 0)
                return log_error_errno(r, "Failed to size the off-CPU BPF maps: %m");
        return 0;
}

int sampler_offcpu_install(Sampler *s)
{
        if (!s->opts.off_cpu)
                return 0;

        /* In the order of the slots in bpf/profile.bpf.c. */
        struct bpf_program *slots[] = {s->skel->progs.profd_offcpu_step, s->skel->progs.profd_offcpu_python,
                                       s->skel->progs.profd_offcpu_hotspot,
                                       s->skel->progs.profd_offcpu_step_hotspot,
                                       s->skel->progs.profd_offcpu_step_v8};
        int fd_map = bpf_map__fd(s->skel->maps.offcpu_progs);
        for (uint32_t i = 0; i < ELEMENTSOF(slots); i++) {
                int fd = bpf_program__fd(slots[i]);

                if (bpf_map_update_elem(fd_map, &i, &fd, BPF_ANY) < 0)
                        return log_error_errno(-errno, "Failed to install tail-call program %s: %m",
                                               bpf_program__name(slots[i]));
        }
        return 0;
}

int sampler_offcpu_attach(Sampler *s)
{
        if (!s->opts.off_cpu || s->offcpu_link)
                return 0;
        s->offcpu_link = bpf_program__attach(s->offcpu_have_cut ? s->skel->progs.profd_offcpu_switch_cut
                                                                : s->skel->progs.profd_offcpu_switch);
        if (!s->offcpu_link)
                return log_error_errno(-errno, "--off-cpu: failed to attach to sched_switch: %m");
        /* Without it the estimate stays unbiased for waits longer than their unwind only. */
        s->offcpu_waking_link = bpf_program__attach(s->skel->progs.profd_offcpu_waking);
        if (!s->offcpu_waking_link)
                log_warning_errno(-errno, "--off-cpu: failed to attach to sched_waking, waits shorter than "
                                          "their unwind will read high: %m");
        log_info("Off-CPU recording on (sched_switch; waits predicted to last %" PRIu64 " us or more are "
                 "always unwound)",
                 (uint64_t)s->skel->rodata->profd_offcpu_threshold_ns / 1000);
        return 0;
}

bool sampler_offcpu_waking_attached(const Sampler *s)
{
        return s && s->offcpu_waking_link;
}

void sampler_offcpu_detach(Sampler *s)
{
        bpf_link__destroy(s->offcpu_link);
        s->offcpu_link = NULL;
        bpf_link__destroy(s->offcpu_waking_link);
        s->offcpu_waking_link = NULL;
}

int sampler_offcpu_cut(Sampler *s)
{
        uint64_t args[1] = {};
        DECLARE_LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = args, .ctx_size_in = sizeof(args));
        int r;

        if (!s->opts.off_cpu || !s->offcpu_have_cut || !s->offcpu_link)
                return 0;
        r = bpf_prog_test_run_opts(bpf_program__fd(s->skel->progs.profd_offcpu_cut), &opts);
        if (r < 0) {
                s->offcpu_cut_errors++;
                return r;
        }
        s->offcpu_cuts++;
        return 0;
}
