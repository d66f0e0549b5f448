/* SPDX-License-Identifier: GPL-2.0-only */
/* What the sampler's files share: the Sampler itself and the buffers of a drain. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "runtimes/python-stack.h"
#include "sampler/sampler.h"
#include "util/macro.h"

struct profile_bpf;
struct ring_buffer;

/* Time between flipping the generation and reading the retired one. A perf_event program runs
 * for microseconds with preemption off; 10 ms is orders of magnitude beyond any straggler. */
#define SAMPLER_DRAIN_DELAY_NS (10 * 1000 * 1000ULL)
/* How often the online CPU list is read again: a CPU that comes online (or back online: a CPU's
 * perf event is removed from it when it goes offline) is sampled from the next check on. */
#define SAMPLER_HOTPLUG_CHECK_NS (2 * NSEC_PER_SEC)

/* A drained stack: frames live in Drain.frames at off. */
_Static_assert(SAMPLER_MAX_NAMERS <= 8, "DrainedStack.pending has a bit per namer");
typedef struct DrainedStack {
        uint64_t hash;
        size_t off;
        uint32_t len, flags;
        uint8_t pending; /* by Drain.namers index: has that runtime's entries, not named yet */
        uint64_t salt;   /* what the namers returned: mixed into the records' user hash */
} DrainedStack;

/* Buffers of one drain, kept between drains so a steady state allocates nothing. */
typedef struct Drain {
        struct profd_count_key *keys;
        uint64_t *counts;
        size_t n_counts, cap_counts;

        struct profd_offcpu_key *offcpu_keys;
        struct profd_offcpu_value *offcpu_values;
        size_t n_offcpu, cap_offcpu;

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
        PythonFrameIds *python_ids; /* for the splice; NULL: Python frames stay unnamed */

        /* Runtime namers (sampler.h), highest entry bit first; namer_bits: all their bits, what
         * makes a frame worth classifying. */
        SamplerNamer namers[SAMPLER_MAX_NAMERS];
        size_t n_namers;
        uint64_t namer_bits;
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
        struct bpf_link *exit_link;          /* optional: see sampler_exit_hook_attached() */
        struct bpf_link *offcpu_link;        /* --off-cpu: sched_switch */
        struct bpf_link *offcpu_waking_link; /* --off-cpu: sched_waking (the unwind's stretch) */
        uint32_t offcpu_threads_entries, offcpu_pending_entries;
        bool offcpu_have_cut; /* profd_offcpu_cut loaded (5.13+) */
        uint64_t offcpu_cuts, offcpu_cut_errors;
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

        /* New Python stacks (sampler-python.c) */
        struct ring_buffer *python_rb;
        sd_event_source *python_io;
        struct profd_stack *python_stack;
        sampler_python_stack_cb_t python_cb;
        void *python_userdata;
        uint64_t python_events, python_events_drained, python_events_malformed;
        uint64_t python_delay_ns_sum, python_delay_ns_max;

        /* metrics */
        uint64_t drains, drain_ns_total, drain_ns_last, drain_errors;
        uint64_t cuts_coalesced;
        uint64_t missing_stacks;
        uint64_t last_counts, last_stacks, last_kstacks, last_offcpu;
        uint64_t max_counts, max_stacks, max_kstacks, max_offcpu;
};

/* sampler-python.c */
void sampler_python_done(Sampler *s);
/* c: the BPF counters (NULL: not readable). */
void sampler_write_python_metrics(const Sampler *s, const uint64_t *c, FILE *f);
