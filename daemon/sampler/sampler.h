/* SPDX-License-Identifier: GPL-2.0-only */
/* BPF sampler: loads bpf/profile.bpf.c, opens a cpu-clock perf event per online CPU, attaches,
 * and drains the in-kernel counts. Two map generations: a "cut" flips the generation index in
 * .bss (so the boundary is exact), and the retired generation is read and emptied ~10 ms later
 * (an sd-event timer, so programs that read the old index before the flip have finished). */
#pragma once

#include <linux/types.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <systemd/sd-event.h>

#include "bpf/profd-filter.h"
#include "bpf/profd-sample.h"
#include "bpf/profd-offcpu.h"
#include "runtimes/python-frame-ids.h"
#include "util/macro.h"

typedef struct Sampler Sampler;

typedef struct SamplerOptions {
        unsigned frequency_hz;
        uint64_t drain_interval_ns;        /* periodic cut, ~1 s */
        struct profd_filter_config filter; /* --pid/--comm/--unit/--cgroup for rodata; zeroes: none */
        bool measure_cost;   /* BPF times each recorded sample (benchmarks): profd_bpf_recorded_ns_total */
        bool verifier_stats; /* log each program's verifier statistics (instructions processed) */
        const char *online_cpus_path; /* NULL: /sys/devices/system/cpu/online (tests fake hotplug) */
        /* Off-CPU waits (docs/off-cpu.md): a wait shorter than the threshold is unwound with
         * probability wait / threshold and then weighs the threshold. */
        bool off_cpu;
        uint64_t off_cpu_threshold_ns; /* 0: SAMPLER_OFF_CPU_THRESHOLD_DEFAULT_NS */
} SamplerOptions;

#define SAMPLER_OFF_CPU_THRESHOLD_DEFAULT_NS (1000 * 1000ULL)
/* Below 2^32 ns: the BPF draw computes wait << 32 for waits shorter than the threshold. */
#define SAMPLER_OFF_CPU_THRESHOLD_MAX_NS (4000 * 1000 * 1000ULL)

/* One (pid, tid, comm, cgroup, user stack, kernel stack) with its count in one interval.
 * Frame arrays are valid only during the callback. */
typedef struct SampleRecord {
        uint32_t pid, tid;
        uint64_t cgroup_id;
        char comm[PROFD_COMM_LEN + 1];
        char thread_comm[PROFD_COMM_LEN + 1];
        uint64_t user_hash, kernel_hash; /* 0: none */
        const uint64_t *user_frames;     /* leaf first */
        uint32_t n_user;
        /* Per user frame: 1 = exact pc (the sampled pc, or the pc a signal interrupted), symbolize
         * as is; 0 = return address, symbolize pc - 1. NULL: frame 0 exact, the others not. */
        const uint8_t *user_exact;
        uint32_t user_flags; /* PROFD_STACK_* and stop reason */
        const uint64_t *kernel_frames;
        uint32_t n_kernel;
        uint64_t count;
        /* An off-CPU record (docs/off-cpu.md): count waits that ended in the interval and together
         * weigh off_cpu_ns, the estimated time the thread spent off CPU in this stack;
         * off_cpu_state is enum profd_offcpu_state (bpf/profd-offcpu.h). count == 0: only the
         * stacks of a wait that began in the interval. A nonzero hash without frames: the stack
         * came in an earlier interval (look it up by hash). */
        bool off_cpu;
        uint8_t off_cpu_state;
        uint64_t off_cpu_ns;
} SampleRecord;

/* Called once per cut with every record of the interval [start_ns, end_ns) (CLOCK_REALTIME). */
typedef void (*sampler_interval_cb_t)(void *userdata, uint64_t start_ns, uint64_t end_ns,
                                      const SampleRecord *records, size_t n);

int sampler_new(sd_event *e, const SamplerOptions *o, sampler_interval_cb_t cb, void *userdata,
                Sampler **ret);
Sampler *sampler_free(Sampler *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(Sampler *, sampler_free);

/* Load the BPF object (its maps exist from then on) and attach the exec hook, without sampling
 * yet: the unwind table pool and the process tracker fill the maps first. Logs its errors. */
int sampler_prepare(Sampler *s);
/* Prepare if not done, attach to every online CPU, start the periodic cut timer. After success
 * sampling is live. */
int sampler_start(Sampler *s);
/* Cut now: the current interval ends at *ret_cut_ns (CLOCK_REALTIME); its records arrive through
 * the callback shortly after. Within ~10 ms of the previous cut (its generation still draining)
 * no new cut is made: *ret_cut_ns is that previous, equally exact, boundary. */
int sampler_cut(Sampler *s, uint64_t *ret_cut_ns);
bool sampler_is_live(const Sampler *s);
/* With --off-cpu: whether the wakeup program (the unwind's stretch, docs/off-cpu.md) is attached. */
bool sampler_offcpu_waking_attached(const Sampler *s);
/* CPUs with an attached perf event (CPUs that come online are added within ~2 s). */
size_t sampler_n_cpus(const Sampler *s);
/* Samples recorded per second over the last interval, for STATUS=. */
double sampler_rate(const Sampler *s);
/* The loaded BPF object (maps for the process tracker and table pool); NULL before start. */
struct bpf_object *sampler_bpf_object(Sampler *s);
/* Whether the BPF exit hook (bpf/profile.bpf.c, profd_exit) deletes an exited process's pool
 * entries of unwind_procs and unwind_execs (table_pool_set_exit_hook()). */
bool sampler_exit_hook_attached(const Sampler *s);
void sampler_write_metrics(const Sampler *s, FILE *f);
/* Ring buffer of struct profd_event (bpf/profd-events.h) where the unwinder reports pids and pcs
 * it has no mappings for (rate-limited per pid); -EBADF before start. Only written once a
 * table pool exists on the object (table_pool_new). */
int sampler_unwinder_events_fd(Sampler *s);
/* The BPF map of processes whose Python frames are walked (bpf/profd-python.h). */
int sampler_python_procs_fd(Sampler *s);
/* The BPF map hotspot_procs (bpf/profd-hotspot.h); -EBADF without BPF. */
int sampler_hotspot_procs_fd(Sampler *s);
/* The BPF map of processes whose V8 frames are read (bpf/profd-v8.h). */
int sampler_v8_procs_fd(Sampler *s);
/* A user stack with Python frames that BPF stored for the first time (sampler-python.c): pid's
 * frames as BPF wrote them (bpf/profd-python.h: two entries per Python frame), valid during the
 * call. */
typedef void (*sampler_python_stack_cb_t)(void *userdata, uint32_t pid, const uint64_t *frames, size_t n);
/* After sampler_start(): cb gets each such stack as soon as it is reported. */
int sampler_watch_python_stacks(Sampler *s, sampler_python_stack_cb_t cb, void *userdata);
/* Registers the Python namer (below): the drain splices Python frames into user stacks, with the
 * ids of ids (runtimes/python-frame-ids.h; NULL: they stay unnamed). */
int sampler_set_python_frame_ids(Sampler *s, PythonFrameIds *ids);
/* Runtime namers. A runtime whose BPF walk puts its own entries in user stacks registers the bit
 * that marks them: the drain counts each runtime's entries per stack in its one pass over the
 * frames, and calls a runtime's namer only for the stacks with its entries, once per stack per
 * drain, at the stack's first record (while its process runs). An entry belongs to the runtime of
 * its highest registered bit (the value below a runtime's bit may hold other runtimes' bits);
 * an entry with no registered entry bit but a runtime's mark bit (Python's eval frames: native
 * frames the runtime rewrites) is that runtime's too. Namers run from the highest bit down. */
#define SAMPLER_MAX_NAMERS 4
/* Names (or rewrites) the stack of pid in place: frames and exact (per frame) are rewritten, *n may
 * shrink; flags are the stack's PROFD_STACK_*. Returns a salt (0: none) that the stack's records'
 * user_hash is xored with, so that the aggregator keeps the stack apart from the same BPF stack
 * named differently in another drain. */
typedef uint64_t (*sampler_namer_cb_t)(void *userdata, uint32_t pid, uint32_t flags, uint64_t *frames,
                                       uint8_t *exact, size_t *n);
/* Called at each cut just before the new generation can take its first sample: what a namer must
 * know of the processes as they were before any of that generation's samples (the state its
 * drain is compared with). */
typedef void (*sampler_cut_cb_t)(void *userdata);
typedef struct SamplerNamer {
        uint64_t entry_bit; /* one bit (PROFD_FRAME_HOTSPOT, ...) */
        uint64_t mark_bit;  /* 0: none */
        sampler_namer_cb_t name;
        sampler_cut_cb_t cut; /* NULL: none */
        void *userdata;
} SamplerNamer;
/* -EEXIST: that entry bit has a namer; -E2BIG: SAMPLER_MAX_NAMERS already. */
int sampler_add_namer(Sampler *s, const SamplerNamer *n);
