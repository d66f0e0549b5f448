/* SPDX-License-Identifier: GPL-2.0-only */
/* BPF side of the sampler: sizes the maps and configures bpf/profile.bpf.c for the running
 * kernel (kernel-features.h), loads it, and attaches a cpu-clock perf event per online CPU, also to
 * CPUs that come online later. */
#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sampler/kernel-features.h"
#include "sampler/sampler-bpf.h"
#include "sampler/sampler-internal.h"
#include "sampler/sampler-offcpu.h"
#include "util/log.h"
#include "util/macro.h"

#include "profile.skel.h"

/* Map sizes: expected distinct keys per interval are at most samples per interval; headroom x2,
 * clamped so a tiny host still has room for bursts and a huge one stays bounded. */
#define SAMPLER_MAP_MIN_ENTRIES 4096u
#define SAMPLER_COUNTS_MAX_ENTRIES 262144u
#define SAMPLER_STACKS_MAX_ENTRIES 65536u
/* Preallocated maps (kernels before 6.1, see kernel-features.h) hold their whole size in kernel
 * memory from the start (~4 KiB per user stack entry): sized to twice the samples of one interval
 * like the others, from a smaller floor, and capped so a 64-CPU host at 99 Hz still fits. */
#define SAMPLER_PREALLOC_MIN_ENTRIES 1024u
#define SAMPLER_PREALLOC_MAX_ENTRIES 16384u
/* With --off-cpu: the least entries of the counts and stacks maps (see sampler_load()). */
#define SAMPLER_OFFCPU_MIN_ENTRIES 32768u
#define SAMPLER_OFFCPU_PREALLOC_MIN_ENTRIES 4096u
#define SAMPLER_ONLINE_CPUS_PATH "/sys/devices/system/cpu/online"

void sampler_detach(Sampler *s)
{
        for (size_t i = 0; i < s->n_cpu_slots; i++)
                bpf_link__destroy(s->links[i]);
        s->links = mfree(s->links);
        s->seen_offline = mfree(s->seen_offline);
        s->n_cpu_slots = 0;
        s->n_links = 0;
        bpf_link__destroy(s->exec_link);
        s->exec_link = NULL;
        bpf_link__destroy(s->exit_link);
        s->exit_link = NULL;
        sampler_offcpu_detach(s);
}

/* Parses a CPU list such as "0-3,8,10-11" (sysfs "online"; path: tests may point it elsewhere). */
static int read_online_cpus(const char *path, bool **ret, int *ret_n)
{
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ bool *cpus = NULL;
        char buf[4096], *p, *tok, *save = NULL;
        int n = libbpf_num_possible_cpus();

        if (n <= 0)
                return n < 0 ? n : -ENODEV;
        f = fopen(path, "re");
        if (!f)
                return -errno;
        if (!fgets(buf, sizeof(buf), f))
                return -EIO;
        cpus = calloc(n, sizeof(bool));
        if (!cpus)
                return -ENOMEM;
        for (p = buf; (tok = strtok_r(p, ",\n", &save)); p = NULL) {
                unsigned a, b;
                int k = sscanf(tok, "%u-%u", &a, &b);

                if (k == 1)
                        b = a;
                else if (k != 2)
                        return -EINVAL;
                if (a > b || b >= (unsigned)n)
                        return -EINVAL;
                for (unsigned c = a; c <= b; c++)
                        cpus[c] = true;
        }
        *ret = TAKE_PTR(cpus);
        *ret_n = n;
        return 0;
}

static uint32_t clamp_u32(uint64_t v, uint32_t lo, uint32_t hi)
{
        return v < lo ? lo : v > hi ? hi : (uint32_t)v;
}

int sampler_load(Sampler *s)
{
        const KernelFeatures *kf;
        bool dynamic_maps;
        uint64_t per_interval;
        int r;

        s->skel = profile_bpf__open();
        if (!s->skel)
                return log_error_errno(-errno, "Failed to open BPF object: %m");

        s->n_possible_cpus = libbpf_num_possible_cpus();
        if (s->n_possible_cpus <= 0)
                return log_error_errno(s->n_possible_cpus, "Failed to count CPUs: %m");

        /* Distinct keys per interval cannot exceed samples per interval. */
        per_interval = (uint64_t)s->opts.frequency_hz * (uint64_t)s->n_possible_cpus *
                       (s->opts.drain_interval_ns / 1000000 + 1) / 1000;
        kf = kernel_features_get();
        dynamic_maps = kf->have[KERNEL_FEATURE_PERF_EVENT_DYNAMIC_MAPS];
        if (dynamic_maps) {
                s->counts_entries =
                        clamp_u32(2 * per_interval, SAMPLER_MAP_MIN_ENTRIES, SAMPLER_COUNTS_MAX_ENTRIES);
                s->stacks_entries =
                        clamp_u32(2 * per_interval, SAMPLER_MAP_MIN_ENTRIES, SAMPLER_STACKS_MAX_ENTRIES);
        } else {
                s->counts_entries = clamp_u32(2 * per_interval, SAMPLER_PREALLOC_MIN_ENTRIES,
                                              SAMPLER_PREALLOC_MAX_ENTRIES);
                s->stacks_entries = s->counts_entries;
        }

        if (!dynamic_maps) {
                /* Preallocated, the per-process mapping arrays would take 1.5 KiB per possible pid:
                 * one entry, unused; every process's mappings are LPM keys (profd-unwind-pool.h). */
                struct bpf_map *pm = s->skel->maps.unwind_proc_maps;

                r = bpf_map__set_max_entries(pm, 1);
                if (r >= 0)
                        r = bpf_map__set_map_flags(pm, bpf_map__map_flags(pm) & ~BPF_F_NO_PREALLOC);
                if (r < 0)
                        return log_error_errno(r, "Failed to size BPF map unwind_proc_maps: %m");
        }

        if (s->opts.off_cpu) {
                /* Waits are unwound at the rate threads switch, not at --frequency: thousands of
                 * distinct stacks a second on a busy host. Dynamic maps take memory only for what
                 * they hold; preallocated ones all of it, hence the smaller floor. */
                uint32_t floor =
                        dynamic_maps ? SAMPLER_OFFCPU_MIN_ENTRIES : SAMPLER_OFFCPU_PREALLOC_MIN_ENTRIES;

                s->counts_entries = s->counts_entries > floor ? s->counts_entries : floor;
                s->stacks_entries = s->stacks_entries > floor ? s->stacks_entries : floor;
        }

        struct bpf_map *sized[] = {
                s->skel->maps.counts_0,        s->skel->maps.counts_1,  s->skel->maps.offcpu_counts_0,
                s->skel->maps.offcpu_counts_1, s->skel->maps.stacks_0,  s->skel->maps.stacks_1,
                s->skel->maps.kstacks_0,       s->skel->maps.kstacks_1,
        };
        for (size_t i = 0; i < ELEMENTSOF(sized); i++) {
                r = bpf_map__set_max_entries(sized[i], i < 4 ? s->counts_entries : s->stacks_entries);
                if (r >= 0 && !dynamic_maps)
                        r = bpf_map__set_map_flags(sized[i],
                                                   bpf_map__map_flags(sized[i]) & ~BPF_F_NO_PREALLOC);
                if (r < 0)
                        return log_error_errno(r, "Failed to size BPF map %s: %m", bpf_map__name(sized[i]));
        }

        /* --pid/--comm and whether cgroups filter (the cgroup list is a map, see filter.bpf.h). */
        memcpy((void *)&s->skel->rodata->profd_filter, &s->opts.filter, sizeof(s->opts.filter));
        s->skel->rodata->profd_measure_cost = s->opts.measure_cost;
        s->skel->rodata->profd_have_task_btf = kf->have[KERNEL_FEATURE_TASK_BTF];
        s->skel->rodata->profd_have_task_pt_regs = kf->have[KERNEL_FEATURE_TASK_PT_REGS];
        s->skel->rodata->profd_thread_size = kf->thread_size;
        r = sampler_offcpu_configure(s);
        if (r < 0)
                return r;

        /* BPF_LOG_STATS: only the verifier's closing statistics, even when the load succeeds. */
        char stats[24][512]; /* every program */
        struct bpf_program *prog;
        size_t n_prog = 0;
        if (s->opts.verifier_stats)
                bpf_object__for_each_program(prog, s->skel->obj)
                {
                        if (n_prog >= ELEMENTSOF(stats))
                                break;
                        stats[n_prog][0] = 0;
                        (void)bpf_program__set_log_level(prog, 4);
                        (void)bpf_program__set_log_buf(prog, stats[n_prog++], sizeof(stats[0]));
                }

        r = profile_bpf__load(s->skel);
        n_prog = 0;
        if (s->opts.verifier_stats && r >= 0)
                bpf_object__for_each_program(prog, s->skel->obj)
                {
                        const char *p;
                        if (n_prog >= ELEMENTSOF(stats))
                                break;
                        p = strstr(stats[n_prog++], "processed ");
                        log_info("Verifier: %s: %.*s", bpf_program__name(prog),
                                 p ? (int)strcspn(p, "\n") : 2, p ?: "-");
                }
        if (r < 0)
                return log_error_errno(r, "Failed to load BPF programs (root or CAP_BPF+CAP_PERFMON needed, "
                                          "kernel with BTF): %m");

        /* In the order of the slots in bpf/profile.bpf.c. */
        struct bpf_program *slots[] = {s->skel->progs.profd_step, s->skel->progs.profd_python,
                                       s->skel->progs.profd_hotspot, s->skel->progs.profd_step_hotspot,
                                       s->skel->progs.profd_step_v8};
        int progs_fd = bpf_map__fd(s->skel->maps.progs);
        for (uint32_t i = 0; i < ELEMENTSOF(slots); i++) {
                int fd = bpf_program__fd(slots[i]);

                if (bpf_map_update_elem(progs_fd, &i, &fd, BPF_ANY) < 0)
                        return log_error_errno(-errno, "Failed to install tail-call program %s: %m",
                                               bpf_program__name(slots[i]));
        }
        return sampler_offcpu_install(s);
}

static const char *online_cpus_path(const Sampler *s)
{
        return s->opts.online_cpus_path ? s->opts.online_cpus_path : SAMPLER_ONLINE_CPUS_PATH;
}

/* Opens the cpu-clock event on cpu and attaches the sampler. -ENODEV: the CPU is offline. */
static int attach_cpu(Sampler *s, int cpu)
{
        struct perf_event_attr attr = {
                .type = PERF_TYPE_SOFTWARE,
                .size = sizeof(attr),
                .config = PERF_COUNT_SW_CPU_CLOCK,
                .freq = 1,
                .sample_freq = s->opts.frequency_hz,
        };
        struct bpf_link *link;
        int fd, r;

        fd = syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0)
                return -errno;
        link = bpf_program__attach_perf_event(s->skel->progs.profd_sample, fd);
        if (!link) {
                r = -errno;
                close(fd);
                return r;
        }
        s->links[cpu] = link; /* the link owns fd now */
        s->seen_offline[cpu] = false;
        s->n_links++;
        return 0;
}

int sampler_attach(Sampler *s)
{
        _cleanup_free_ bool *online = NULL;
        int n, r;

        r = read_online_cpus(online_cpus_path(s), &online, &n);
        if (r < 0)
                return log_error_errno(r, "Failed to read online CPUs: %m");

        /* Before the perf events: no sample may use a pid's mappings from before an exec. */
        if (!s->exec_link) {
                s->exec_link = bpf_program__attach(s->skel->progs.profd_exec);
                if (!s->exec_link)
                        return log_error_errno(-errno, "Failed to attach the BPF exec hook: %m");
        }

        s->links = calloc(n, sizeof(*s->links));
        s->seen_offline = calloc(n, sizeof(*s->seen_offline));
        if (!s->links || !s->seen_offline)
                return -ENOMEM;
        s->n_cpu_slots = n;

        for (int cpu = 0; cpu < n; cpu++) {
                if (!online[cpu])
                        continue;
                r = attach_cpu(s, cpu);
                if (r == -ENODEV) /* went offline meanwhile: the hotplug check picks it up */
                        continue;
                if (r < 0)
                        return log_error_errno(r, "Failed to sample CPU %d (perf_event_open, attach): %m",
                                               cpu);
        }
        if (s->n_links == 0)
                return log_error_errno(-ENODEV, "No online CPU to sample");
        return sampler_offcpu_attach(s);
}

/* CPUs that came online since the last check get an event; one that went offline lost its
 * event (the kernel removes per-CPU events from an offline CPU) and gets a new one when back. */
int sampler_on_hotplug_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
        static LogRateLimit rl = LOG_RATELIMIT_INIT(60 * NSEC_PER_SEC, 3);
        _cleanup_free_ bool *online = NULL;
        Sampler *s = userdata;
        unsigned suppressed;
        int n, r;

        r = read_online_cpus(online_cpus_path(s), &online, &n);
        if (r >= 0)
                for (int cpu = 0; cpu < n && (size_t)cpu < s->n_cpu_slots; cpu++) {
                        if (!online[cpu]) {
                                if (s->links[cpu])
                                        s->seen_offline[cpu] = true;
                                continue;
                        }
                        if (s->links[cpu] && !s->seen_offline[cpu])
                                continue;
                        if (s->links[cpu]) {
                                bpf_link__destroy(s->links[cpu]);
                                s->links[cpu] = NULL;
                                s->n_links--;
                        }
                        r = attach_cpu(s, cpu);
                        if (r >= 0) {
                                s->hotplug_attached++;
                                log_info("CPU %d came online: sampling it (%zu CPUs)", cpu, s->n_links);
                        } else if (r != -ENODEV && log_ratelimit_test(&rl, &suppressed))
                                log_warning_errno(r,
                                                  "Failed to sample CPU %d, which came online (%u similar "
                                                  "suppressed): %m",
                                                  cpu, suppressed);
                }
        else if (log_ratelimit_test(&rl, &suppressed))
                log_warning_errno(r, "Failed to read online CPUs (%u similar suppressed): %m", suppressed);

        r = sd_event_source_set_time_relative(src, SAMPLER_HOTPLUG_CHECK_NS / NSEC_PER_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
        if (r < 0)
                return log_error_errno(r, "Failed to re-arm the CPU hotplug check: %m");
        return 0;
}
