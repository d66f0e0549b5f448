/* SPDX-License-Identifier: GPL-2.0-only */
/* New user stacks with Python frames, reported by BPF as they go into the stacks map
 * (python_events, bpf/python.bpf.h): each is read from the map and handed over at once, so that
 * its code objects are read while they exist (a module's is freed once its import ran; a process
 * may exit right after its last sample). The drain hands over every stack again later. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sampler/sampler-internal.h"
#include "util/log.h"
#include "util/metrics-writer.h"
#include "util/time-util.h"

#include "profile.skel.h"

static int on_python_event(void *ctx, void *data, size_t size)
{
        Sampler *s = ctx;
        struct profd_python_event ev;
        uint64_t now;
        int fd;

        if (size < sizeof(ev)) {
                s->python_events_malformed++;
                return 0;
        }
        memcpy(&ev, data, sizeof(ev));
        s->python_events++;
        fd = bpf_map__fd(ev.gen & 1 ? s->skel->maps.stacks_1 : s->skel->maps.stacks_0);
        /* Gone: drained meanwhile (the drain hands it over). */
        if (bpf_map_lookup_elem(fd, &ev.user_hash, s->python_stack) < 0) {
                s->python_events_drained++;
                return 0;
        }
        s->python_cb(s->python_userdata, ev.pid, (const uint64_t *)s->python_stack->ips,
                     s->python_stack->len < PROFD_MAX_USER_FRAMES ? s->python_stack->len
                                                                  : PROFD_MAX_USER_FRAMES);
        /* From the sample to its code objects read: what a code object must outlive to be named. */
        now = now_ns(CLOCK_MONOTONIC);
        if (now > ev.ktime_ns) {
                s->python_delay_ns_sum += now - ev.ktime_ns;
                if (now - ev.ktime_ns > s->python_delay_ns_max)
                        s->python_delay_ns_max = now - ev.ktime_ns;
        }
        return 0;
}

static int on_python_io(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
        Sampler *s = userdata;
        int r;

        r = ring_buffer__consume(s->python_rb);
        if (r < 0)
                log_warning_errno_ratelimited(r, "Reading the Python stack ring buffer failed: %m");
        return 0;
}

int sampler_watch_python_stacks(Sampler *s, sampler_python_stack_cb_t cb, void *userdata)
{
        int r;

        if (!s || !s->skel || !cb)
                return -EINVAL;
        if (s->python_rb)
                return -EBUSY;
        s->python_stack = calloc(1, sizeof(*s->python_stack));
        if (!s->python_stack)
                return -ENOMEM;
        s->python_rb = ring_buffer__new(bpf_map__fd(s->skel->maps.python_events), on_python_event, s, NULL);
        if (!s->python_rb)
                return -errno;
        r = sd_event_add_io(s->event, &s->python_io, ring_buffer__epoll_fd(s->python_rb), EPOLLIN,
                            on_python_io, s);
        if (r < 0)
                return r;
        (void)sd_event_source_set_description(s->python_io, "python-stacks");
        /* Ahead of every other source: a module's code object lives only while its import runs,
         * often a few milliseconds. */
        r = sd_event_source_set_priority(s->python_io, SD_EVENT_PRIORITY_IMPORTANT);
        if (r < 0)
                return r;
        s->python_cb = cb;
        s->python_userdata = userdata;
        return 0;
}

void sampler_python_done(Sampler *s)
{
        s->python_io = sd_event_source_disable_unref(s->python_io);
        ring_buffer__free(s->python_rb);
        s->python_rb = NULL;
        s->python_stack = mfree(s->python_stack);
}

/* The Python namer: the splice (runtimes/python-stack.h), for stacks with Python entries or eval
 * frames. */
static uint64_t python_namer(void *userdata, uint32_t pid, uint32_t flags, uint64_t *frames, uint8_t *exact,
                             size_t *n)
{
        Drain *d = userdata;

        *n = python_stack_splice(frames, exact, *n, flags, d->python_ids, &d->python_splice);
        return 0;
}

int sampler_set_python_frame_ids(Sampler *s, PythonFrameIds *ids)
{
        if (!s)
                return -EINVAL;
        s->drain.python_ids = ids;
        return sampler_add_namer(s, &(SamplerNamer){.entry_bit = PROFD_FRAME_PYTHON,
                                                    .mark_bit = PROFD_FRAME_PY_EVAL,
                                                    .name = python_namer,
                                                    .userdata = &s->drain});
}

void sampler_write_python_metrics(const Sampler *s, const uint64_t *c, FILE *f)
{
        metric_counter(f, "profd_python_frames_without_fingerprint_total",
                       "Python frames BPF recorded without the fingerprint of their code object (it was not "
                       "readable): they stay unnamed.",
                       c ? c[PROFD_CNT_PY_NO_FINGERPRINT] : 0);
        metric_counter(
                f, "profd_python_frames_without_id_total",
                "Python frames in drained stacks without an id for their code object (no fingerprint, "
                "or ids used up): they stay unnamed.",
                s->drain.python_splice.frames_without_id);
        metric_labelled(f, "profd_python_stack_reports_total", "counter",
                        "New stacks with Python frames BPF reported for their code objects to be read at "
                        "once, by outcome: read (handed over), drained (already drained when looked up: "
                        "read at the drain), ratelimited and ringbuf_full (not sent: read at the drain), "
                        "malformed.",
                        "outcome",
                        (const char *const[]){"read", "drained", "ratelimited", "ringbuf_full", "malformed"},
                        (const uint64_t[]){s->python_events - s->python_events_drained,
                                           s->python_events_drained,
                                           c ? c[PROFD_CNT_PY_EVENTS_RATELIMITED] : 0,
                                           c ? c[PROFD_CNT_PY_EVENTS_FULL] : 0, s->python_events_malformed},
                        5);
        metric_family(f, "profd_python_stack_report_delay_seconds", "summary",
                      "Time from a reported sample to its code objects read, for reports read.");
        metric_sample_double(f, "profd_python_stack_report_delay_seconds_sum", NULL,
                             (double)s->python_delay_ns_sum / NSEC_PER_SEC);
        metric_sample(f, "profd_python_stack_report_delay_seconds_count", NULL,
                      s->python_events - s->python_events_drained);
        metric_gauge_seconds(f, "profd_python_stack_report_delay_max_seconds",
                             "Longest time from a reported sample to its code objects read.",
                             s->python_delay_ns_max);
}
