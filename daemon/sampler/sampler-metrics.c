/* SPDX-License-Identifier: GPL-2.0-only */
/* The sampler's /metrics: BPF counters (per-CPU array summed), drains, map fill. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sampler/kernel-features.h"
#include "sampler/sampler-internal.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/metrics-writer.h"

#include "profile.skel.h"

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
        [PROFD_STOP_IN_EXEC] = "in_exec",
};

static const char *const py_stop_names[PROFD_PY_STOP__MAX] = {
        [PROFD_PY_STOP_OK] = "ok",       [PROFD_PY_STOP_NO_THREAD] = "no_thread",
        [PROFD_PY_STOP_IDLE] = "idle",   [PROFD_PY_STOP_BAD_READ] = "bad_read",
        [PROFD_PY_STOP_DEPTH] = "depth", [PROFD_PY_STOP_TAIL_CALLS] = "tail_calls",
};

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

        metric_gauge(f, "profd_sampling_live", "1 once the perf events are attached.", s->live ? 1 : 0);
        if (!s->skel || !s->live)
                return;

        metric_gauge(f, "profd_sampled_cpus", "CPUs with an attached cpu-clock perf event.", s->n_links);
        metric_counter(f, "profd_sampled_cpus_attached_late_total",
                       "CPUs that came online (or back online) after start and were attached then.",
                       s->hotplug_attached);
        metric_gauge(f, "profd_sampling_frequency_hertz", "Samples per second per CPU.",
                     s->opts.frequency_hz);

        if (read_counters(s, c) >= 0) {
                const char *drops[PROFD_STOP_REASON_BASE];

                metric_counter(f, "profd_bpf_samples_total", "perf_event samples seen by the BPF program.",
                               c[PROFD_CNT_SAMPLES]);
                metric_counter(f, "profd_bpf_recorded_samples_total",
                               "Samples counted in the in-kernel maps.", c[PROFD_CNT_RECORDED]);
                metric_counter(f, "profd_bpf_idle_samples_total", "Samples of the idle task (not recorded).",
                               c[PROFD_CNT_IDLE]);
                metric_counter(f, "profd_bpf_filtered_samples_total",
                               "Samples outside the configured filters.", c[PROFD_CNT_FILTERED]);

                /* The counters that are not drops have families of their own. */
                for (unsigned i = 0; i < PROFD_STOP_REASON_BASE; i++)
                        drops[i] = i != PROFD_ERR_KERNEL_STACK && i != PROFD_ERR_USER_REGS &&
                                                   i != PROFD_CNT_UNKNOWN_PID_FP &&
                                                   i != PROFD_ERR_UNWIND_POOL &&
                                                   i != PROFD_CNT_RECORDED_NS && i != PROFD_CNT_ENTRY_NS &&
                                                   i != PROFD_CNT_UNWIND_NS
                                           ? counter_names[i]
                                           : NULL;
                metric_labelled(f, "profd_bpf_drops_total", "counter", "Samples dropped in BPF, by reason.",
                                "reason", drops, c, PROFD_STOP_REASON_BASE);
                metric_labelled(f, "profd_bpf_errors_total", "counter",
                                "Samples kept without one of their stacks, by reason.", "reason",
                                (const char *const[]){"kernel_stack", "user_regs", "unwind_pool"},
                                (const uint64_t[]){c[PROFD_ERR_KERNEL_STACK], c[PROFD_ERR_USER_REGS],
                                                   c[PROFD_ERR_UNWIND_POOL]},
                                3);
                metric_counter(
                        f, "profd_bpf_unknown_pid_fp_total",
                        "Stacks walked with frame pointers because the pid's mappings were not loaded "
                        "yet.",
                        c[PROFD_CNT_UNKNOWN_PID_FP]);
                metric_counter(f, "profd_bpf_shared_mm_samples_total",
                               "Samples of a child sharing its parent's memory (vfork, posix_spawn) "
                               "unwound with the parent's mappings.",
                               c[PROFD_CNT_SHARED_MM]);
                metric_labelled(f, "profd_hotspot_bpf_frames_total", "counter",
                                "Frames in a JVM's code the native walk met, by kind: interpreted (taken "
                                "as a Java frame), bad_method (its method could not be read: kept as "
                                "an address), other_code (a stub or adapter: stepped by its frame "
                                "pointer), compiled (a compiled method, named), compiled_unnamed "
                                "(compiled code stepped by its frame size, kept as an address), "
                                "no_blob (not found in the code heap's segment map), unsure (the sampled "
                                "pc where its frame is not whole: the stack ends there), epilogue (the "
                                "sampled pc in a compiled method's epilogue, its caller found).",
                                "kind",
                                (const char *const[]){"interpreted", "bad_method", "other_code", "compiled",
                                                      "compiled_unnamed", "no_blob", "unsure", "epilogue"},
                                c + PROFD_HS_CNT_BASE, PROFD_HS_EVENT_COUNT);
                metric_counter(f, "profd_bpf_row_searches_total",
                               "Binary searches of an unwind table page: lookups the per-CPU row cache "
                               "did not answer.",
                               c[PROFD_CNT_ROW_SEARCHES]);
                metric_counter(f, "profd_bpf_process_lookups_total",
                               "Lookups of the sampled process in unwind_procs: samples the per-CPU copy "
                               "of the last sampled process's entry did not answer (another process, or "
                               "unwind_procs changed since).",
                               c[PROFD_CNT_PROC_LOOKUPS]);
                metric_labelled(f, "profd_v8_bpf_frames_total", "counter",
                                "Frame-pointer frames of V8 processes BPF looked at, by outcome.", "outcome",
                                (const char *const[]){"javascript", "typed", "not_javascript", "bad_read",
                                                      "no_room", "leaf_unsure"},
                                (const uint64_t[]){c[PROFD_CNT_V8_FRAMES], c[PROFD_CNT_V8_TYPED],
                                                   c[PROFD_CNT_V8_NOT_JS], c[PROFD_CNT_V8_BAD_READ],
                                                   c[PROFD_CNT_V8_NO_ROOM], c[PROFD_CNT_V8_LEAF_UNSURE]},
                                6);
                metric_labelled(f, "profd_v8_bpf_bytecode_offsets_total", "counter",
                                "Bytecode offsets of interpreted JavaScript frames BPF recorded, or not "
                                "by reason.",
                                "outcome",
                                (const char *const[]){"recorded", "too_far", "no_room", "bad_read"},
                                (const uint64_t[]){c[PROFD_CNT_V8_BC_RECORDED], c[PROFD_CNT_V8_BC_TOO_FAR],
                                                   c[PROFD_CNT_V8_BC_NO_ROOM], c[PROFD_CNT_V8_BC_BAD_READ]},
                                4);
                if (s->opts.measure_cost) {
                        /* Nanoseconds: 9 decimals, finer than metric_counter_seconds(). */
                        metric_family(f, "profd_bpf_recorded_seconds_total", "counter",
                                      "BPF time spent on recorded samples (entry to end of finalize).");
                        metric_sample_fixed(f, "profd_bpf_recorded_seconds_total", NULL,
                                            (double)c[PROFD_CNT_RECORDED_NS] / NSEC_PER_SEC, 9);
                }
                metric_labelled(f, "profd_bpf_unwind_stops_total", "counter",
                                "How user stack unwinding ended, by reason.", "reason", stop_names,
                                c + PROFD_STOP_REASON_BASE, PROFD_STOP__MAX);
                metric_counter(f, "profd_python_stacks_walked_total",
                               "Samples of CPython processes whose Python frames BPF walked.",
                               c[PROFD_CNT_PY_STACKS]);
                metric_counter(f, "profd_python_frames_read_total", "Python frames BPF recorded.",
                               c[PROFD_CNT_PY_FRAMES]);
                metric_counter(f, "profd_python_thread_walks_total",
                               "Thread lists BPF walked to find a thread's PyThreadState (then cached).",
                               c[PROFD_CNT_PY_THREAD_WALKS]);
                metric_labelled(f, "profd_python_stops_total", "counter",
                                "How Python walks ended, by reason.", "reason", py_stop_names,
                                c + PROFD_PY_STOP_BASE, PROFD_PY_STOP__MAX);
                sampler_write_python_metrics(s, c, f);

                /* Off-CPU (docs/off-cpu.md); zeros without --off-cpu. */
                metric_gauge(f, "profd_offcpu_enabled", "1 with --off-cpu.", s->opts.off_cpu ? 1 : 0);
                metric_counter(f, "profd_offcpu_waits_started_total",
                               "Switch-outs of wanted threads (off-CPU waits started).",
                               c[PROFD_CNT_OFFCPU_SWITCH_OUTS]);
                metric_counter(f, "profd_offcpu_waits_ended_total",
                               "Switch-ins of remembered threads (off-CPU waits ended).",
                               c[PROFD_CNT_OFFCPU_SWITCH_INS]);
                metric_counter(f, "profd_offcpu_waits_unwound_total",
                               "Off-CPU waits whose stacks were unwound at their start.",
                               c[PROFD_CNT_OFFCPU_UNWOUND]);
                metric_counter(f, "profd_offcpu_waits_recorded_total",
                               "Unwound off-CPU waits counted at their end.", c[PROFD_CNT_OFFCPU_RECORDED]);
                metric_family(f, "profd_offcpu_recorded_seconds_total", "counter",
                              "Estimated off-CPU time of the recorded waits (what the profiles add up).");
                metric_sample_fixed(f, "profd_offcpu_recorded_seconds_total", NULL,
                                    (double)c[PROFD_CNT_OFFCPU_RECORDED_NS] / NSEC_PER_SEC, 6);
                metric_counter(f, "profd_offcpu_cut_parts_total",
                               "Parts of off-CPU waits in progress counted at a cut (the part before it).",
                               c[PROFD_CNT_OFFCPU_CUT_PARTS]);
                metric_counter(
                        f, "profd_offcpu_unwind_wakes_total",
                        "Recorded off-CPU waits whose thread was woken while their stack was unwound.",
                        c[PROFD_CNT_OFFCPU_UNWIND_WAKES]);
                metric_family(
                        f, "profd_offcpu_unwind_stretch_seconds_total", "counter",
                        "Time those waits were lengthened by their unwind (counted once, not weighted).");
                metric_sample_fixed(f, "profd_offcpu_unwind_stretch_seconds_total", NULL,
                                    (double)c[PROFD_CNT_OFFCPU_STRETCH_NS] / NSEC_PER_SEC, 6);
                metric_labelled(f, "profd_offcpu_cuts_total", "counter",
                                "Cuts at which the waits in progress were counted, by outcome (5.13+).",
                                "outcome", (const char *const[]){"ok", "failed"},
                                (const uint64_t[]){s->offcpu_cuts, s->offcpu_cut_errors}, 2);
                metric_labelled(f, "profd_offcpu_skipped_total", "counter",
                                "Context switches not recorded by design, by reason.", "reason",
                                (const char *const[]){"unwanted", "exiting", "sampled_out"},
                                (const uint64_t[]){c[PROFD_CNT_OFFCPU_UNWANTED], c[PROFD_CNT_OFFCPU_EXITING],
                                                   c[PROFD_CNT_OFFCPU_SAMPLED_OUT]},
                                3);
                metric_labelled(
                        f, "profd_offcpu_drops_total", "counter", "Off-CPU waits lost, by reason.", "reason",
                        (const char *const[]){"threads_full", "pending_full", "pending_lost", "counts_full"},
                        (const uint64_t[]){
                                c[PROFD_DROP_OFFCPU_THREADS_FULL], c[PROFD_DROP_OFFCPU_PENDING_FULL],
                                c[PROFD_DROP_OFFCPU_PENDING_LOST], c[PROFD_DROP_OFFCPU_COUNTS_FULL]},
                        4);
        }
        metric_labelled(
                f, "profd_python_groups_total", "counter",
                "Groups of Python frames (one call of the eval function each) put into native stacks, "
                "by where they went.",
                "place", (const char *const[]){"eval_frame", "stack_end"},
                (const uint64_t[]){s->drain.python_splice.groups_placed,
                                   s->drain.python_splice.groups_outside},
                2);
        metric_counter(
                f, "profd_python_eval_frames_unmatched_total",
                "Eval-function frames left without Python frames (sampled while entering or leaving a "
                "call).",
                s->drain.python_splice.evals_unmatched);

        static const char *const maps[] = {"counts", "stacks", "kernel_stacks"};
        metric_labelled(f, "profd_bpf_map_entries", "gauge",
                        "Entries drained from a map generation in the last interval.", "map", maps,
                        (const uint64_t[]){s->last_counts, s->last_stacks, s->last_kstacks}, 3);
        metric_labelled(f, "profd_bpf_map_entries_peak", "gauge",
                        "Largest number of entries drained from one generation.", "map", maps,
                        (const uint64_t[]){s->max_counts, s->max_stacks, s->max_kstacks}, 3);
        metric_labelled(f, "profd_bpf_map_max_entries", "gauge", "Capacity of one map generation.", "map",
                        maps, (const uint64_t[]){s->counts_entries, s->stacks_entries, s->stacks_entries},
                        3);

        metric_gauge(f, "profd_offcpu_map_entries",
                     "Entries drained from the off-CPU counts map in the last interval.", s->last_offcpu);
        metric_gauge(f, "profd_offcpu_map_entries_peak",
                     "Largest number of entries drained from one off-CPU counts generation.", s->max_offcpu);
        metric_labelled(f, "profd_offcpu_map_max_entries", "gauge", "Capacity of the off-CPU thread maps.",
                        "map", (const char *const[]){"threads", "pending"},
                        (const uint64_t[]){s->offcpu_threads_entries, s->offcpu_pending_entries}, 2);

        metric_family(f, "profd_drain_seconds", "summary",
                      "Time to read, empty and hand over one map generation.");
        metric_sample_double(f, "profd_drain_seconds_sum", NULL, (double)s->drain_ns_total / NSEC_PER_SEC);
        metric_sample(f, "profd_drain_seconds_count", NULL, s->drains);
        metric_gauge_seconds(f, "profd_drain_last_seconds", "Duration of the last drain.", s->drain_ns_last);
        metric_counter(f, "profd_drain_errors_total",
                       "Drains that failed; their interval's samples are lost.", s->drain_errors);
        metric_counter(f, "profd_drain_missing_stacks_total",
                       "Counted keys whose stack was not in the stacks map.", s->missing_stacks);
        metric_counter(f, "profd_cuts_coalesced_total",
                       "Cuts requested while the previous one was still draining.", s->cuts_coalesced);
}
