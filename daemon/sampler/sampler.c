/* SPDX-License-Identifier: GPL-2.0-only */
/* Loads bpf/profile.bpf.c, samples every online CPU, and turns the in-kernel counts into
 * per-interval records. See sampler.h for the generation protocol. */
#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "util/log.h"
#include "util/macro.h"
#include "sampler/kernel-features.h"
#include "runtimes/python-stack.h"
#include "sampler/sampler.h"

#include "profile.skel.h"

/* Time between flipping the generation and reading the retired one. A perf_event program runs
 * for microseconds with preemption off; 10 ms is orders of magnitude beyond any straggler. */
#define SAMPLER_DRAIN_DELAY_NS (10 * 1000 * 1000ULL)
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
/* How often the online CPU list is read again: a CPU that comes online (or back online: a CPU's
 * perf event is removed from it when it goes offline) is sampled from the next check on. */
#define SAMPLER_HOTPLUG_CHECK_NS (2 * NSEC_PER_SEC)
#define SAMPLER_ONLINE_CPUS_PATH "/sys/devices/system/cpu/online"
/* Entries per batch syscall while draining; grown on -ENOSPC (a bucket larger than the batch). */
#define SAMPLER_BATCH 256u

static const char *const counter_names[PROFD_CNT__MAX] = {
        [PROFD_DROP_COUNTS_FULL] = "counts_full",
        [PROFD_DROP_USER_STACKS_FULL] = "user_stacks_full",
        [PROFD_DROP_KERNEL_STACKS_FULL] = "kernel_stacks_full",
        [PROFD_DROP_NO_SCRATCH] = "no_scratch",
        [PROFD_DROP_TAIL_CALL] = "tail_call",
        [PROFD_DROP_EVENTS_RINGBUF_FULL] = "events_ringbuf_full",
        [PROFD_ERR_KERNEL_STACK] = "kernel_stack",
        [PROFD_ERR_USER_REGS] = "user_regs",
        [PROFD_CNT_UNKNOWN_PID_FP] = "unknown_pid_fp",
        [PROFD_ERR_UNWIND_POOL] = "unwind_pool",
};

static const char *const stop_names[PROFD_STOP__MAX] = {
        [PROFD_STOP_OK] = "ok",
        [PROFD_STOP_DEPTH] = "depth",
        [PROFD_STOP_BAD_READ] = "bad_read",
        [PROFD_STOP_NO_MAPPING] = "no_mapping",
        [PROFD_STOP_NO_ROW] = "no_row",
        [PROFD_STOP_UNSUPPORTED] = "unsupported",
        [PROFD_STOP_UNKNOWN_PID] = "unknown_pid",
        [PROFD_STOP_BAD_FRAME] = "bad_frame",
        [PROFD_STOP_KERNEL_THREAD] = "kernel_thread",
        [PROFD_STOP_TABLE_PENDING] = "table_pending",
};

static const char *const py_stop_names[PROFD_PY_STOP__MAX] = {
        [PROFD_PY_STOP_OK] = "ok",
        [PROFD_PY_STOP_NO_THREAD] = "no_thread",
        [PROFD_PY_STOP_IDLE] = "idle",
        [PROFD_PY_STOP_BAD_READ] = "bad_read",
        [PROFD_PY_STOP_DEPTH] = "depth",
        [PROFD_PY_STOP_TAIL_CALLS] = "tail_calls",
};

/* A drained stack: frames live in Drain.frames at off. */
typedef struct DrainedStack {
        uint64_t hash;
        size_t off;
        uint32_t len, flags;
} DrainedStack;

/* Buffers of one drain, kept between drains so a steady state allocates nothing. */
typedef struct Drain {
        struct profd_count_key *keys;
        uint64_t *counts;
        size_t n_counts, cap_counts;

        DrainedStack *stacks, *kstacks;
        size_t n_stacks, cap_stacks, n_kstacks, cap_kstacks;
        uint64_t *frames;
        uint8_t *exact; /* parallel to frames: PROFD_FRAME_EXACT of user frames */
        size_t n_frames, cap_frames, cap_exact;

        void *batch_keys, *batch_values;
        size_t batch_keys_size, batch_values_size;

        SampleRecord *records;
        size_t cap_records;

        PythonSpliceStats python_splice;
} Drain;

struct Sampler {
        sd_event *event;
        SamplerOptions opts;
        sampler_interval_cb_t cb;
        void *userdata;

        struct profile_bpf *skel;
        struct bpf_link **links; /* by CPU number */
        bool *seen_offline;      /* by CPU: attached, then seen offline (its event is gone) */
        size_t n_cpu_slots;
        size_t n_links;
        sd_event_source *hotplug_timer;
        uint64_t hotplug_attached;
        struct bpf_link *exec_link;
        int n_possible_cpus;
        uint32_t counts_entries, stacks_entries;

        sd_event_source *cut_timer;
        sd_event_source *drain_timer;

        unsigned active_gen;
        uint64_t interval_start_ns; /* CLOCK_REALTIME start of the active interval */

        bool drain_pending;
        unsigned pending_gen;
        uint64_t pending_start_ns, pending_end_ns;

        bool live;
        double rate;

        Drain drain;

        /* metrics */
        uint64_t drains, drain_ns_total, drain_ns_last, drain_errors;
        uint64_t cuts_coalesced;
        uint64_t missing_stacks;
        uint64_t last_counts, last_stacks, last_kstacks;
        uint64_t max_counts, max_stacks, max_kstacks;
};

static uint64_t now_ns(clockid_t clock)
{
        struct timespec ts;

        clock_gettime(clock, &ts);
        return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
        size_t n;
        void *q;

        if (need <= *cap)
                return 0;
        n = *cap ? *cap : 64;
        while (n < need)
                n *= 2;
        q = reallocarray(*p, n, elem);
        if (!q)
                return -ENOMEM;
        *p = q;
        *cap = n;
        return 0;
}

static void drain_done(Drain *d)
{
        free(d->keys);
        free(d->counts);
        free(d->stacks);
        free(d->kstacks);
        free(d->frames);
        free(d->exact);
        free(d->batch_keys);
        free(d->batch_values);
        free(d->records);
        *d = (Drain){};
}

int sampler_new(sd_event *e, const SamplerOptions *o, sampler_interval_cb_t cb, void *userdata,
                Sampler **ret)
{
        Sampler *s;

        if (!e || !o || !cb || !ret)
                return -EINVAL;
        if (o->frequency_hz == 0 || o->drain_interval_ns < 2 * SAMPLER_DRAIN_DELAY_NS)
                return -EINVAL;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->event = sd_event_ref(e);
        s->opts = *o;
        s->cb = cb;
        s->userdata = userdata;
        *ret = s;
        return 0;
}

static void sampler_detach(Sampler *s)
{
        for (size_t i = 0; i < s->n_cpu_slots; i++)
                bpf_link__destroy(s->links[i]);
        s->links = mfree(s->links);
        s->seen_offline = mfree(s->seen_offline);
        s->n_cpu_slots = 0;
        s->n_links = 0;
        bpf_link__destroy(s->exec_link);
        s->exec_link = NULL;
}

Sampler *sampler_free(Sampler *s)
{
        if (!s)
                return NULL;
        sampler_detach(s);
        sd_event_source_disable_unref(s->cut_timer);
        sd_event_source_disable_unref(s->drain_timer);
        sd_event_source_disable_unref(s->hotplug_timer);
        profile_bpf__destroy(s->skel);
        drain_done(&s->drain);
        sd_event_unref(s->event);
        free(s);
        return NULL;
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

static int sampler_load(Sampler *s)
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
                s->counts_entries = clamp_u32(2 * per_interval, SAMPLER_MAP_MIN_ENTRIES, SAMPLER_COUNTS_MAX_ENTRIES);
                s->stacks_entries = clamp_u32(2 * per_interval, SAMPLER_MAP_MIN_ENTRIES, SAMPLER_STACKS_MAX_ENTRIES);
        } else {
                s->counts_entries = clamp_u32(2 * per_interval, SAMPLER_PREALLOC_MIN_ENTRIES,
                                              SAMPLER_PREALLOC_MAX_ENTRIES);
                s->stacks_entries = s->counts_entries;
        }

        struct bpf_map *sized[] = {
                s->skel->maps.counts_0, s->skel->maps.counts_1,  s->skel->maps.stacks_0,
                s->skel->maps.stacks_1, s->skel->maps.kstacks_0, s->skel->maps.kstacks_1,
        };
        for (size_t i = 0; i < ELEMENTSOF(sized); i++) {
                r = bpf_map__set_max_entries(sized[i], i < 2 ? s->counts_entries : s->stacks_entries);
                if (r >= 0 && !dynamic_maps)
                        r = bpf_map__set_map_flags(sized[i], bpf_map__map_flags(sized[i]) & ~BPF_F_NO_PREALLOC);
                if (r < 0)
                        return log_error_errno(r, "Failed to size BPF map %s: %m", bpf_map__name(sized[i]));
        }

        /* --pid/--comm and whether cgroups filter (the cgroup list is a map, see filter.bpf.h). */
        memcpy((void *)&s->skel->rodata->profd_filter, &s->opts.filter, sizeof(s->opts.filter));
        s->skel->rodata->profd_measure_cost = s->opts.measure_cost;
        s->skel->rodata->profd_have_task_btf = kf->have[KERNEL_FEATURE_TASK_BTF];
        s->skel->rodata->profd_have_task_pt_regs = kf->have[KERNEL_FEATURE_TASK_PT_REGS];
        s->skel->rodata->profd_thread_size = kf->thread_size;

        /* BPF_LOG_STATS: only the verifier's closing statistics, even when the load succeeds. */
        char stats[4][512]; /* entry, step, finalize (and room for one more) */
        struct bpf_program *prog;
        size_t n_prog = 0;
        if (s->opts.verifier_stats)
                bpf_object__for_each_program(prog, s->skel->obj) {
                        if (n_prog >= ELEMENTSOF(stats))
                                break;
                        stats[n_prog][0] = 0;
                        (void)bpf_program__set_log_level(prog, 4);
                        (void)bpf_program__set_log_buf(prog, stats[n_prog++], sizeof(stats[0]));
                }

        r = profile_bpf__load(s->skel);
        n_prog = 0;
        if (s->opts.verifier_stats && r >= 0)
                bpf_object__for_each_program(prog, s->skel->obj) {
                        const char *p;
                        if (n_prog >= ELEMENTSOF(stats))
                                break;
                        p = strstr(stats[n_prog++], "processed ");
                        log_info("Verifier: %s: %.*s", bpf_program__name(prog), p ? (int)strcspn(p, "\n") : 2,
                                 p ?: "-");
                }
        if (r < 0)
                return log_error_errno(r, "Failed to load BPF programs (root or CAP_BPF+CAP_PERFMON needed, "
                                          "kernel with BTF): %m");

        /* In the order of the slots in bpf/profile.bpf.c. */
        struct bpf_program *slots[] = {s->skel->progs.profd_step, s->skel->progs.profd_finalize,
                                       s->skel->progs.profd_python};
        int progs_fd = bpf_map__fd(s->skel->maps.progs);
        for (uint32_t i = 0; i < ELEMENTSOF(slots); i++) {
                int fd = bpf_program__fd(slots[i]);

                if (bpf_map_update_elem(progs_fd, &i, &fd, BPF_ANY) < 0)
                        return log_error_errno(-errno, "Failed to install tail-call program %s: %m",
                                               bpf_program__name(slots[i]));
        }
        return 0;
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

static int sampler_attach(Sampler *s)
{
        _cleanup_free_ bool *online = NULL;
        int n, r;

        r = read_online_cpus(online_cpus_path(s), &online, &n);
        if (r < 0)
                return log_error_errno(r, "Failed to read online CPUs: %m");

        /* Before the perf events: no sample may use a pid's mappings from before an exec. */
        s->exec_link = bpf_program__attach(s->skel->progs.profd_exec);
        if (!s->exec_link)
                return log_error_errno(-errno, "Failed to attach the BPF exec hook: %m");

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
        return 0;
}

/* CPUs that came online since the last check get an event; one that went offline lost its
 * event (the kernel removes per-CPU events from an offline CPU) and gets a new one when back. */
static int on_hotplug_timer(sd_event_source *src, uint64_t usec, void *userdata)
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

/* Reads and deletes every entry of a hash map into d->batch_keys/values (appending from index
 * *n). Nothing writes the map meanwhile: it is the retired generation. */
static int map_drain_all(Drain *d, int fd, size_t key_size, size_t value_size, size_t *ret_n)
{
        DECLARE_LIBBPF_OPTS(bpf_map_batch_opts, opts);
        uint64_t in_batch = 0, out_batch = 0;
        size_t n = 0, batch = SAMPLER_BATCH;
        bool first = true;
        int r;

        for (;;) {
                uint32_t count = batch;

                r = grow(&d->batch_keys, &d->batch_keys_size, (n + batch) * key_size, 1);
                if (r < 0)
                        return r;
                r = grow(&d->batch_values, &d->batch_values_size, (n + batch) * value_size, 1);
                if (r < 0)
                        return r;

                r = bpf_map_lookup_and_delete_batch(fd, first ? NULL : &in_batch, &out_batch,
                                                    (char *)d->batch_keys + n * key_size,
                                                    (char *)d->batch_values + n * value_size, &count, &opts);
                if (r < 0 && r != -ENOENT) {
                        if (r == -ENOSPC && batch < (1u << 20)) {
                                batch *= 2; /* one hash bucket holds more than a batch */
                                continue;
                        }
                        return r;
                }
                n += count;
                if (r == -ENOENT)
                        break;
                in_batch = out_batch;
                first = false;
        }
        *ret_n = n;
        return 0;
}

static int cmp_stack(const void *a, const void *b)
{
        const DrainedStack *x = a, *y = b;

        return x->hash < y->hash ? -1 : x->hash > y->hash;
}

static const DrainedStack *find_stack(const DrainedStack *v, size_t n, uint64_t hash)
{
        DrainedStack k = {.hash = hash};

        return hash ? bsearch(&k, v, n, sizeof(*v), cmp_stack) : NULL;
}

/* Copies the drained stack values (len-prefixed arrays of max_frames) into the frame pool. User
 * frames: PROFD_FRAME_EXACT moves from the address into d->exact (kernel addresses have bit 63
 * set by nature). */
static int collect_stacks(Drain *d, size_t n, size_t value_size, size_t max_frames, bool user,
                          DrainedStack **stacks, size_t *n_stacks, size_t *cap_stacks)
{
        int r;

        r = grow((void **)stacks, cap_stacks, n, sizeof(DrainedStack));
        if (r < 0)
                return r;
        *n_stacks = 0;
        for (size_t i = 0; i < n; i++) {
                const uint8_t *v = (const uint8_t *)d->batch_values + i * value_size;
                uint32_t len, flags;

                memcpy(&len, v, sizeof(len));
                memcpy(&flags, v + 4, sizeof(flags));
                if (len > max_frames)
                        len = max_frames;
                r = grow((void **)&d->frames, &d->cap_frames, d->n_frames + len, sizeof(uint64_t));
                if (r < 0)
                        return r;
                r = grow((void **)&d->exact, &d->cap_exact, d->n_frames + len, sizeof(uint8_t));
                if (r < 0)
                        return r;
                memcpy(d->frames + d->n_frames, v + 8, len * sizeof(uint64_t));
                for (size_t k = d->n_frames; k < d->n_frames + len; k++) {
                        d->exact[k] = user && (d->frames[k] & PROFD_FRAME_EXACT);
                        if (user)
                                d->frames[k] &= ~PROFD_FRAME_EXACT;
                }
                if (user)
                        len = python_stack_splice(d->frames + d->n_frames, d->exact + d->n_frames, len, flags,
                                                  &d->python_splice);
                memcpy(&(*stacks)[*n_stacks].hash, (const uint8_t *)d->batch_keys + i * sizeof(uint64_t),
                       sizeof(uint64_t));
                (*stacks)[*n_stacks].off = d->n_frames;
                (*stacks)[*n_stacks].len = len;
                (*stacks)[*n_stacks].flags = flags;
                (*n_stacks)++;
                d->n_frames += len;
        }
        qsort_safe(*stacks, *n_stacks, sizeof(DrainedStack), cmp_stack);
        return 0;
}

static void copy_comm(char dst[PROFD_COMM_LEN + 1], const char src[PROFD_COMM_LEN])
{
        memcpy(dst, src, PROFD_COMM_LEN);
        dst[PROFD_COMM_LEN] = 0;
}

static int sampler_drain(Sampler *s)
{
        Drain *d = &s->drain;
        unsigned g = s->pending_gen;
        int counts_fd = bpf_map__fd(g ? s->skel->maps.counts_1 : s->skel->maps.counts_0);
        int stacks_fd = bpf_map__fd(g ? s->skel->maps.stacks_1 : s->skel->maps.stacks_0);
        int kstacks_fd = bpf_map__fd(g ? s->skel->maps.kstacks_1 : s->skel->maps.kstacks_0);
        uint64_t t0 = now_ns(CLOCK_MONOTONIC), total = 0, dt;
        size_t n;
        int r;

        d->n_frames = 0;

        r = map_drain_all(d, counts_fd, sizeof(struct profd_count_key), sizeof(uint64_t), &n);
        if (r < 0)
                return log_error_errno(r, "Failed to drain counts map: %m");
        if (n > d->cap_counts) {
                size_t cap = d->cap_counts;
                void *c;

                r = grow((void **)&d->keys, &cap, n, sizeof(*d->keys));
                if (r < 0)
                        return r;
                c = reallocarray(d->counts, cap, sizeof(uint64_t));
                if (!c)
                        return -ENOMEM;
                d->counts = c;
                d->cap_counts = cap;
        }
        memcpy_safe(d->keys, d->batch_keys, n * sizeof(*d->keys));
        memcpy_safe(d->counts, d->batch_values, n * sizeof(uint64_t));
        d->n_counts = n;

        r = map_drain_all(d, stacks_fd, sizeof(uint64_t), sizeof(struct profd_stack), &n);
        if (r < 0)
                return log_error_errno(r, "Failed to drain user stacks map: %m");
        r = collect_stacks(d, n, sizeof(struct profd_stack), PROFD_MAX_USER_FRAMES, true, &d->stacks,
                           &d->n_stacks, &d->cap_stacks);
        if (r < 0)
                return r;

        r = map_drain_all(d, kstacks_fd, sizeof(uint64_t), sizeof(struct profd_kstack), &n);
        if (r < 0)
                return log_error_errno(r, "Failed to drain kernel stacks map: %m");
        r = collect_stacks(d, n, sizeof(struct profd_kstack), PROFD_MAX_KERNEL_FRAMES, false, &d->kstacks,
                           &d->n_kstacks, &d->cap_kstacks);
        if (r < 0)
                return r;

        r = grow((void **)&d->records, &d->cap_records, d->n_counts, sizeof(SampleRecord));
        if (r < 0)
                return r;
        for (size_t i = 0; i < d->n_counts; i++) {
                const struct profd_count_key *k = &d->keys[i];
                const DrainedStack *us = find_stack(d->stacks, d->n_stacks, k->user_hash);
                const DrainedStack *ks = find_stack(d->kstacks, d->n_kstacks, k->kernel_hash);
                SampleRecord *rec = &d->records[i];

                if ((k->user_hash && !us) || (k->kernel_hash && !ks))
                        s->missing_stacks++;
                *rec = (SampleRecord){
                        .pid = k->pid,
                        .tid = k->tid,
                        .cgroup_id = k->cgroup_id,
                        .user_hash = us ? k->user_hash : 0,
                        .kernel_hash = ks ? k->kernel_hash : 0,
                        .user_frames = us ? d->frames + us->off : NULL,
                        .user_exact = us ? d->exact + us->off : NULL,
                        .n_user = us ? us->len : 0,
                        .user_flags = us ? us->flags : 0,
                        .kernel_frames = ks ? d->frames + ks->off : NULL,
                        .n_kernel = ks ? ks->len : 0,
                        .count = d->counts[i],
                };
                copy_comm(rec->comm, k->comm);
                copy_comm(rec->thread_comm, k->thread_comm);
                total += d->counts[i];
        }

        s->last_counts = d->n_counts;
        s->last_stacks = d->n_stacks;
        s->last_kstacks = d->n_kstacks;
        if (s->last_counts > s->max_counts)
                s->max_counts = s->last_counts;
        if (s->last_stacks > s->max_stacks)
                s->max_stacks = s->last_stacks;
        if (s->last_kstacks > s->max_kstacks)
                s->max_kstacks = s->last_kstacks;
        dt = s->pending_end_ns - s->pending_start_ns;
        s->rate = dt ? (double)total * NSEC_PER_SEC / (double)dt : 0;

        s->cb(s->userdata, s->pending_start_ns, s->pending_end_ns, d->records, d->n_counts);

        dt = now_ns(CLOCK_MONOTONIC) - t0;
        s->drains++;
        s->drain_ns_last = dt;
        s->drain_ns_total += dt;
        return 0;
}

static int on_drain_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
        Sampler *s = userdata;
        static LogRateLimit rl = LOG_RATELIMIT_INIT(60 * NSEC_PER_SEC, 3);
        unsigned suppressed;
        int r;

        r = sampler_drain(s);
        if (r < 0) {
                /* The retired generation may be partly read; what is left is emptied so that the
                 * generation can be reused. Its samples are lost: counted as drain errors. */
                s->drain_errors++;
                if (log_ratelimit_test(&rl, &suppressed))
                        log_error_errno(r, "Draining BPF generation %u failed (%u similar suppressed): %m",
                                        s->pending_gen, suppressed);
                Drain *d = &s->drain;
                size_t n;
                unsigned g = s->pending_gen;
                (void)map_drain_all(d, bpf_map__fd(g ? s->skel->maps.counts_1 : s->skel->maps.counts_0),
                                    sizeof(struct profd_count_key), sizeof(uint64_t), &n);
                (void)map_drain_all(d, bpf_map__fd(g ? s->skel->maps.stacks_1 : s->skel->maps.stacks_0),
                                    sizeof(uint64_t), sizeof(struct profd_stack), &n);
                (void)map_drain_all(d, bpf_map__fd(g ? s->skel->maps.kstacks_1 : s->skel->maps.kstacks_0),
                                    sizeof(uint64_t), sizeof(struct profd_kstack), &n);
        }
        s->drain_pending = false;
        return 0;
}

int sampler_cut(Sampler *s, uint64_t *ret_cut_ns)
{
        uint64_t t;
        int r;

        if (!s || !s->live)
                return -ESTALE;

        if (s->drain_pending) {
                /* The retired generation is not empty yet, so it cannot take samples again. The
                 * previous cut, at most SAMPLER_DRAIN_DELAY_NS ago, is an exact boundary too. */
                s->cuts_coalesced++;
                if (ret_cut_ns)
                        *ret_cut_ns = s->pending_end_ns;
                return 0;
        }

        r = sd_event_source_set_time_relative(s->drain_timer, SAMPLER_DRAIN_DELAY_NS / NSEC_PER_USEC);
        if (r < 0)
                return r;
        r = sd_event_source_set_enabled(s->drain_timer, SD_EVENT_ONESHOT);
        if (r < 0)
                return r;

        s->pending_gen = s->active_gen;
        s->active_gen ^= 1;
        __atomic_store_n(&s->skel->bss->profd_gen, s->active_gen, __ATOMIC_SEQ_CST);
        t = now_ns(CLOCK_REALTIME);

        s->pending_start_ns = s->interval_start_ns;
        s->pending_end_ns = t;
        s->interval_start_ns = t;
        s->drain_pending = true;
        if (ret_cut_ns)
                *ret_cut_ns = t;
        return 0;
}

static int on_cut_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
        Sampler *s = userdata;
        int r;

        r = sampler_cut(s, NULL);
        if (r < 0)
                log_warning_errno_ratelimited(r, "Periodic cut failed: %m");

        r = sd_event_source_set_time_relative(src, s->opts.drain_interval_ns / NSEC_PER_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
        if (r < 0)
                return log_error_errno(r, "Failed to re-arm the cut timer: %m");
        return 0;
}

int sampler_start(Sampler *s)
{
        int r;

        if (!s)
                return -EINVAL;
        if (s->live)
                return -EBUSY;

        r = sampler_load(s);
        if (r < 0)
                return r;

        r = sd_event_add_time_relative(s->event, &s->drain_timer, CLOCK_MONOTONIC,
                                       SAMPLER_DRAIN_DELAY_NS / NSEC_PER_USEC, 1000, on_drain_timer, s);
        if (r < 0)
                return log_error_errno(r, "Failed to add drain timer: %m");
        r = sd_event_source_set_enabled(s->drain_timer, SD_EVENT_OFF);
        if (r < 0)
                return r;
        (void)sd_event_source_set_description(s->drain_timer, "sampler-drain");

        r = sd_event_add_time_relative(s->event, &s->cut_timer, CLOCK_MONOTONIC,
                                       s->opts.drain_interval_ns / NSEC_PER_USEC, 1000, on_cut_timer, s);
        if (r < 0)
                return log_error_errno(r, "Failed to add cut timer: %m");
        (void)sd_event_source_set_description(s->cut_timer, "sampler-cut");

        s->active_gen = 0;
        s->skel->bss->profd_gen = 0;
        s->interval_start_ns = now_ns(CLOCK_REALTIME);

        r = sampler_attach(s);
        if (r < 0) {
                sampler_detach(s);
                (void)sd_event_source_set_enabled(s->cut_timer, SD_EVENT_OFF);
                return r;
        }
        r = sd_event_add_time_relative(s->event, &s->hotplug_timer, CLOCK_MONOTONIC,
                                       SAMPLER_HOTPLUG_CHECK_NS / NSEC_PER_USEC, 100 * 1000,
                                       on_hotplug_timer, s);
        if (r < 0) {
                sampler_detach(s);
                (void)sd_event_source_set_enabled(s->cut_timer, SD_EVENT_OFF);
                return log_error_errno(r, "Failed to add the CPU hotplug check: %m");
        }
        (void)sd_event_source_set_description(s->hotplug_timer, "sampler-hotplug");
        s->live = true;
        log_info("Sampling %zu CPUs at %u Hz", s->n_links, s->opts.frequency_hz);
        return 0;
}

bool sampler_is_live(const Sampler *s)
{
        return s && s->live;
}

size_t sampler_n_cpus(const Sampler *s)
{
        return s ? s->n_links : 0;
}

double sampler_rate(const Sampler *s)
{
        return s ? s->rate : 0;
}

struct bpf_object *sampler_bpf_object(Sampler *s)
{
        return s && s->skel ? s->skel->obj : NULL;
}

int sampler_python_procs_fd(Sampler *s)
{
        return s && s->skel ? bpf_map__fd(s->skel->maps.python_procs) : -EBADF;
}

int sampler_unwinder_events_fd(Sampler *s)
{
        return s && s->skel ? bpf_map__fd(s->skel->maps.unwinder_events) : -EBADF;
}

static int read_counters(const Sampler *s, uint64_t ret[PROFD_CNT__MAX])
{
        _cleanup_free_ uint64_t *v = NULL;
        int fd = bpf_map__fd(s->skel->maps.counters);

        v = calloc(s->n_possible_cpus, sizeof(uint64_t));
        if (!v)
                return -ENOMEM;
        for (uint32_t i = 0; i < PROFD_CNT__MAX; i++) {
                ret[i] = 0;
                if (bpf_map_lookup_elem(fd, &i, v) < 0)
                        return -errno;
                for (int c = 0; c < s->n_possible_cpus; c++)
                        ret[i] += v[c];
        }
        return 0;
}

void sampler_write_metrics(const Sampler *s, FILE *f)
{
        uint64_t c[PROFD_CNT__MAX];

        if (!s || !f)
                return;
        kernel_features_write_metrics(kernel_features_get(), f);

        fprintf(f,
                "# HELP profd_sampling_live 1 once the perf events are attached.\n"
                "# TYPE profd_sampling_live gauge\n"
                "profd_sampling_live %d\n",
                s->live ? 1 : 0);
        if (!s->skel || !s->live)
                return;

        fprintf(f,
                "# HELP profd_sampled_cpus CPUs with an attached cpu-clock perf event.\n"
                "# TYPE profd_sampled_cpus gauge\n"
                "profd_sampled_cpus %zu\n"
                "# HELP profd_sampled_cpus_attached_late_total CPUs that came online (or back online) after "
                "start and were attached then.\n"
                "# TYPE profd_sampled_cpus_attached_late_total counter\n"
                "profd_sampled_cpus_attached_late_total %" PRIu64 "\n"
                "# HELP profd_sampling_frequency_hertz Samples per second per CPU.\n"
                "# TYPE profd_sampling_frequency_hertz gauge\n"
                "profd_sampling_frequency_hertz %u\n",
                s->n_links, s->hotplug_attached, s->opts.frequency_hz);

        if (read_counters(s, c) >= 0) {
                fprintf(f,
                        "# HELP profd_bpf_samples_total perf_event samples seen by the BPF program.\n"
                        "# TYPE profd_bpf_samples_total counter\n"
                        "profd_bpf_samples_total %" PRIu64 "\n"
                        "# HELP profd_bpf_recorded_samples_total Samples counted in the in-kernel maps.\n"
                        "# TYPE profd_bpf_recorded_samples_total counter\n"
                        "profd_bpf_recorded_samples_total %" PRIu64 "\n"
                        "# HELP profd_bpf_idle_samples_total Samples of the idle task (not recorded).\n"
                        "# TYPE profd_bpf_idle_samples_total counter\n"
                        "profd_bpf_idle_samples_total %" PRIu64 "\n"
                        "# HELP profd_bpf_filtered_samples_total Samples outside the configured filters.\n"
                        "# TYPE profd_bpf_filtered_samples_total counter\n"
                        "profd_bpf_filtered_samples_total %" PRIu64 "\n",
                        c[PROFD_CNT_SAMPLES], c[PROFD_CNT_RECORDED], c[PROFD_CNT_IDLE],
                        c[PROFD_CNT_FILTERED]);

                fputs("# HELP profd_bpf_drops_total Samples dropped in BPF, by reason.\n"
                      "# TYPE profd_bpf_drops_total counter\n",
                      f);
                for (unsigned i = 0; i < PROFD_STOP_REASON_BASE; i++)
                        if (counter_names[i] && i != PROFD_ERR_KERNEL_STACK && i != PROFD_ERR_USER_REGS &&
                            i != PROFD_CNT_UNKNOWN_PID_FP && i != PROFD_ERR_UNWIND_POOL &&
                            i != PROFD_CNT_RECORDED_NS && i != PROFD_CNT_ENTRY_NS &&
                            i != PROFD_CNT_UNWIND_NS)
                                fprintf(f, "profd_bpf_drops_total{reason=\"%s\"} %" PRIu64 "\n",
                                        counter_names[i], c[i]);
                fprintf(f,
                        "# HELP profd_bpf_errors_total Samples kept without one of their stacks, by "
                        "reason.\n"
                        "# TYPE profd_bpf_errors_total counter\n"
                        "profd_bpf_errors_total{reason=\"kernel_stack\"} %" PRIu64 "\n"
                        "profd_bpf_errors_total{reason=\"user_regs\"} %" PRIu64 "\n"
                        "profd_bpf_errors_total{reason=\"unwind_pool\"} %" PRIu64 "\n"
                        "# HELP profd_bpf_unknown_pid_fp_total Stacks walked with frame pointers because "
                        "the "
                        "pid's mappings were not loaded yet.\n"
                        "# TYPE profd_bpf_unknown_pid_fp_total counter\n"
                        "profd_bpf_unknown_pid_fp_total %" PRIu64 "\n",
                        c[PROFD_ERR_KERNEL_STACK], c[PROFD_ERR_USER_REGS], c[PROFD_ERR_UNWIND_POOL],
                        c[PROFD_CNT_UNKNOWN_PID_FP]);
                if (s->opts.measure_cost)
                        fprintf(f,
                                "# HELP profd_bpf_recorded_seconds_total BPF time spent on recorded "
                                "samples (entry to end of finalize).\n"
                                "# TYPE profd_bpf_recorded_seconds_total counter\n"
                                "profd_bpf_recorded_seconds_total %.9f\n",
                                (double)c[PROFD_CNT_RECORDED_NS] / NSEC_PER_SEC);
                fputs("# HELP profd_bpf_unwind_stops_total How user stack unwinding ended, by reason.\n"
                      "# TYPE profd_bpf_unwind_stops_total counter\n",
                      f);
                for (unsigned i = 0; i < PROFD_STOP__MAX; i++)
                        fprintf(f, "profd_bpf_unwind_stops_total{reason=\"%s\"} %" PRIu64 "\n",
                                stop_names[i], c[PROFD_STOP_REASON_BASE + i]);
                fprintf(f,
                        "# HELP profd_python_stacks_walked_total Samples of CPython processes whose Python "
                        "frames BPF walked.\n"
                        "# TYPE profd_python_stacks_walked_total counter\n"
                        "profd_python_stacks_walked_total %" PRIu64 "\n"
                        "# HELP profd_python_frames_read_total Python frames BPF recorded.\n"
                        "# TYPE profd_python_frames_read_total counter\n"
                        "profd_python_frames_read_total %" PRIu64 "\n"
                        "# HELP profd_python_thread_walks_total Thread lists BPF walked to find a "
                        "thread's PyThreadState (then cached).\n"
                        "# TYPE profd_python_thread_walks_total counter\n"
                        "profd_python_thread_walks_total %" PRIu64 "\n"
                        "# HELP profd_python_stops_total How Python walks ended, by reason.\n"
                        "# TYPE profd_python_stops_total counter\n",
                        c[PROFD_CNT_PY_STACKS], c[PROFD_CNT_PY_FRAMES], c[PROFD_CNT_PY_THREAD_WALKS]);
                for (unsigned i = 0; i < PROFD_PY_STOP__MAX; i++)
                        fprintf(f, "profd_python_stops_total{reason=\"%s\"} %" PRIu64 "\n", py_stop_names[i],
                                c[PROFD_PY_STOP_BASE + i]);
        }
        fprintf(f,
                "# HELP profd_python_groups_total Groups of Python frames (one call of the eval function "
                "each) put into native stacks, by where they went.\n"
                "# TYPE profd_python_groups_total counter\n"
                "profd_python_groups_total{place=\"eval_frame\"} %" PRIu64 "\n"
                "profd_python_groups_total{place=\"stack_end\"} %" PRIu64 "\n"
                "# HELP profd_python_eval_frames_unmatched_total Eval-function frames left without Python "
                "frames (sampled while entering or leaving a call).\n"
                "# TYPE profd_python_eval_frames_unmatched_total counter\n"
                "profd_python_eval_frames_unmatched_total %" PRIu64 "\n",
                s->drain.python_splice.groups_placed, s->drain.python_splice.groups_outside,
                s->drain.python_splice.evals_unmatched);

        fprintf(f,
                "# HELP profd_bpf_map_entries Entries drained from a map generation in the last interval.\n"
                "# TYPE profd_bpf_map_entries gauge\n"
                "profd_bpf_map_entries{map=\"counts\"} %" PRIu64 "\n"
                "profd_bpf_map_entries{map=\"stacks\"} %" PRIu64 "\n"
                "profd_bpf_map_entries{map=\"kernel_stacks\"} %" PRIu64 "\n"
                "# HELP profd_bpf_map_entries_peak Largest number of entries drained from one generation.\n"
                "# TYPE profd_bpf_map_entries_peak gauge\n"
                "profd_bpf_map_entries_peak{map=\"counts\"} %" PRIu64 "\n"
                "profd_bpf_map_entries_peak{map=\"stacks\"} %" PRIu64 "\n"
                "profd_bpf_map_entries_peak{map=\"kernel_stacks\"} %" PRIu64 "\n"
                "# HELP profd_bpf_map_max_entries Capacity of one map generation.\n"
                "# TYPE profd_bpf_map_max_entries gauge\n"
                "profd_bpf_map_max_entries{map=\"counts\"} %" PRIu32 "\n"
                "profd_bpf_map_max_entries{map=\"stacks\"} %" PRIu32 "\n"
                "profd_bpf_map_max_entries{map=\"kernel_stacks\"} %" PRIu32 "\n",
                s->last_counts, s->last_stacks, s->last_kstacks, s->max_counts, s->max_stacks,
                s->max_kstacks, s->counts_entries, s->stacks_entries, s->stacks_entries);

        fprintf(f,
                "# HELP profd_drain_seconds Time to read, empty and hand over one map generation.\n"
                "# TYPE profd_drain_seconds summary\n"
                "profd_drain_seconds_sum %.6f\n"
                "profd_drain_seconds_count %" PRIu64 "\n"
                "# HELP profd_drain_last_seconds Duration of the last drain.\n"
                "# TYPE profd_drain_last_seconds gauge\n"
                "profd_drain_last_seconds %.6f\n"
                "# HELP profd_drain_errors_total Drains that failed; their interval's samples are lost.\n"
                "# TYPE profd_drain_errors_total counter\n"
                "profd_drain_errors_total %" PRIu64 "\n"
                "# HELP profd_drain_missing_stacks_total Counted keys whose stack was not in the stacks "
                "map.\n"
                "# TYPE profd_drain_missing_stacks_total counter\n"
                "profd_drain_missing_stacks_total %" PRIu64 "\n"
                "# HELP profd_cuts_coalesced_total Cuts requested while the previous one was still "
                "draining.\n"
                "# TYPE profd_cuts_coalesced_total counter\n"
                "profd_cuts_coalesced_total %" PRIu64 "\n",
                (double)s->drain_ns_total / NSEC_PER_SEC, s->drains, (double)s->drain_ns_last / NSEC_PER_SEC,
                s->drain_errors, s->missing_stacks, s->cuts_coalesced);
}
