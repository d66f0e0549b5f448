/* SPDX-License-Identifier: GPL-2.0-only */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "events.skel.h"
#include "log.h"
#include "proc-events.h"

/* One hook: the BTF-typed program, and the one attached when that cannot be. */
typedef struct Hook {
        const char *name;     /* metrics label */
        const char *btf_name; /* what must exist in vmlinux BTF for the primary to load */
        int btf_kind;
        struct bpf_program *primary, *fallback;
        struct bpf_link *link;
        const char *attached; /* "tp_btf", "fentry", "raw_tp", "kprobe", or NULL: not attached */
} Hook;

enum { HOOK_EXEC, HOOK_EXIT, HOOK_FORK, HOOK_MMAP, HOOK_MPROTECT, _HOOK_MAX };

struct ProcEvents {
        struct events_bpf *skel;
        struct ring_buffer *rb;
        sd_event_source *io;
        proc_event_fn fn;
        void *userdata;
        Hook hooks[_HOOK_MAX];
        uint64_t received[PROFD_EVCNT_DROPPED]; /* by type, as read by the daemon */
        uint64_t malformed;
};

static const char *const event_type_names[PROFD_EVCNT_DROPPED] = {
        [PROFD_EV_EXEC] = "exec",
        [PROFD_EV_EXIT] = "exit",
        [PROFD_EV_MMAP_EXEC] = "mmap_exec",
        [PROFD_EV_FORK] = "fork",
        [PROFD_EV_UNKNOWN_PID] = "unknown_pid",
        [PROFD_EV_UNKNOWN_PC] = "unknown_pc",
};

static int on_ringbuf_event(void *ctx, void *data, size_t size)
{
        ProcEvents *pe = ctx;
        struct profd_event ev;

        if (size < sizeof(ev)) {
                pe->malformed++;
                return 0;
        }
        memcpy(&ev, data, sizeof(ev));
        if (ev.type >= PROFD_EVCNT_DROPPED || !event_type_names[ev.type]) {
                pe->malformed++;
                return 0;
        }
        pe->received[ev.type]++;
        pe->fn(&ev, pe->userdata);
        return 0;
}

static int on_ringbuf_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        ProcEvents *pe = userdata;
        int r;

        r = ring_buffer__consume(pe->rb);
        if (r < 0)
                log_warning_errno_ratelimited(r, "Reading process event ring buffer failed: %m");
        return 0;
}

int proc_events_consume(ProcEvents *pe)
{
        return pe ? ring_buffer__consume(pe->rb) : 0;
}

static bool btf_has(const struct btf *btf, const char *name, int kind)
{
        return btf && btf__find_by_name_kind(btf, name, kind) > 0;
}

static int hooks_attach(ProcEvents *pe)
{
        unsigned n_attached = 0;

        for (size_t i = 0; i < _HOOK_MAX; i++) {
                Hook *h = &pe->hooks[i];
                struct bpf_link *l = NULL;
                int r = -ENOENT;

                if (bpf_program__autoload(h->primary)) {
                        l = bpf_program__attach(h->primary);
                        if (l) {
                                h->attached = i <= HOOK_FORK   ? "tp_btf"
                                              : i == HOOK_MMAP ? "fexit"
                                                               : "fentry";
                        } else {
                                r = -errno;
                                log_debug_errno(r, "Attaching %s hook %s failed, trying fallback: %m",
                                                h->name, bpf_program__section_name(h->primary));
                        }
                }
                if (!l) {
                        l = bpf_program__attach(h->fallback);
                        if (l)
                                h->attached = i <= HOOK_FORK ? "raw_tp" : "kprobe";
                        else {
                                r = -errno;
                                log_warning_errno(r,
                                                  "Cannot attach %s hook (%s): %m; %s events come only from "
                                                  "the reconcile sweep",
                                                  h->name, bpf_program__section_name(h->fallback), h->name);
                        }
                }
                h->link = l;
                if (l)
                        n_attached++;
        }
        return n_attached > 0 ? 0 : -ENOENT;
}

static int events_load(ProcEvents *pe, bool primaries)
{
        struct btf *vmlinux = NULL;
        int r;

        pe->skel = events_bpf__open();
        if (!pe->skel)
                return log_error_errno(-errno, "Opening process events BPF object failed: %m");
        pe->skel->rodata->self_tgid = getpid();

        pe->hooks[HOOK_EXEC] = (Hook){"exec", "btf_trace_sched_process_exec", BTF_KIND_TYPEDEF,
                                      pe->skel->progs.tp_exec, pe->skel->progs.raw_exec};
        pe->hooks[HOOK_EXIT] = (Hook){"exit", "btf_trace_sched_process_exit", BTF_KIND_TYPEDEF,
                                      pe->skel->progs.tp_exit, pe->skel->progs.raw_exit};
        pe->hooks[HOOK_FORK] = (Hook){"fork", "btf_trace_sched_process_fork", BTF_KIND_TYPEDEF,
                                      pe->skel->progs.tp_fork, pe->skel->progs.raw_fork};
        pe->hooks[HOOK_MMAP] = (Hook){"mmap", "vm_mmap_pgoff", BTF_KIND_FUNC, pe->skel->progs.fexit_mmap,
                                      pe->skel->progs.kp_mmap};
        pe->hooks[HOOK_MPROTECT] = (Hook){"mprotect", "security_file_mprotect", BTF_KIND_FUNC,
                                          pe->skel->progs.fentry_mprotect, pe->skel->progs.kp_mprotect};

        /* A trampoline whose target is missing from BTF fails the whole object's load: leave
         * those out up front rather than learn it from the verifier. */
        vmlinux = btf__load_vmlinux_btf();
        for (size_t i = 0; i < _HOOK_MAX; i++) {
                Hook *h = &pe->hooks[i];
                bool ok = primaries && btf_has(vmlinux, h->btf_name, h->btf_kind);

                bpf_program__set_autoload(h->primary, ok);
        }
        btf__free(vmlinux);

        r = events_bpf__load(pe->skel);
        if (r < 0)
                return log_full_errno(primaries ? LOG_DEBUG : LOG_ERR, r,
                                      "Loading process events BPF programs%s failed: %m",
                                      primaries ? "" : " (fallback hooks only)");
        return 0;
}

int proc_events_new(sd_event *e, proc_event_fn fn, void *userdata, ProcEvents **ret)
{
        ProcEvents *pe;
        int r;

        pe = calloc(1, sizeof(*pe));
        if (!pe)
                return -ENOMEM;
        pe->fn = fn;
        pe->userdata = userdata;

        r = events_load(pe, true);
        if (r < 0) {
                events_bpf__destroy(pe->skel);
                pe->skel = NULL;
                memset(pe->hooks, 0, sizeof(pe->hooks));
                r = events_load(pe, false);
                if (r < 0)
                        goto fail;
        }
        r = hooks_attach(pe);
        if (r < 0) {
                log_error_errno(r, "No process event hook could be attached");
                goto fail;
        }

        pe->rb = ring_buffer__new(bpf_map__fd(pe->skel->maps.events), on_ringbuf_event, pe, NULL);
        if (!pe->rb) {
                r = log_error_errno(-errno, "Creating process event ring buffer reader failed: %m");
                goto fail;
        }
        r = sd_event_add_io(e, &pe->io, ring_buffer__epoll_fd(pe->rb), EPOLLIN, on_ringbuf_io, pe);
        if (r < 0) {
                log_error_errno(r, "Watching process event ring buffer failed: %m");
                goto fail;
        }
        (void)sd_event_source_set_description(pe->io, "process-events");

        for (size_t i = 0; i < _HOOK_MAX; i++)
                log_debug("Process event hook %s: %s", pe->hooks[i].name,
                          pe->hooks[i].attached ?: "not attached");
        *ret = pe;
        return 0;
fail:
        proc_events_free(pe);
        return r;
}

int proc_events_add_ringbuf(ProcEvents *pe, int map_fd)
{
        int r;

        r = ring_buffer__add(pe->rb, map_fd, on_ringbuf_event, pe);
        if (r < 0)
                return log_error_errno(r, "Adding ring buffer (fd %d) to process events failed: %m", map_fd);
        return 0;
}

ProcEvents *proc_events_free(ProcEvents *pe)
{
        if (!pe)
                return NULL;
        sd_event_source_disable_unref(pe->io);
        ring_buffer__free(pe->rb);
        for (size_t i = 0; i < _HOOK_MAX; i++)
                bpf_link__destroy(pe->hooks[i].link);
        events_bpf__destroy(pe->skel);
        free(pe);
        return NULL;
}

static void read_counters(const ProcEvents *pe, uint64_t ret[PROFD_EVCNT__MAX])
{
        int ncpus = libbpf_num_possible_cpus();
        uint64_t *v;

        memset(ret, 0, sizeof(uint64_t) * PROFD_EVCNT__MAX);
        if (ncpus <= 0)
                return;
        v = calloc(ncpus, sizeof(*v));
        if (!v)
                return;
        for (uint32_t k = 0; k < PROFD_EVCNT__MAX; k++) {
                if (bpf_map_lookup_elem(bpf_map__fd(pe->skel->maps.event_counters), &k, v) < 0)
                        continue;
                for (int c = 0; c < ncpus; c++)
                        ret[k] += v[c];
        }
        free(v);
}

void proc_events_write_metrics(const ProcEvents *pe, FILE *f)
{
        uint64_t c[PROFD_EVCNT__MAX];

        if (!pe)
                return;
        read_counters(pe, c);
        fputs("# HELP profd_process_events_sent_total Process events the kernel hooks delivered.\n"
              "# TYPE profd_process_events_sent_total counter\n",
              f);
        for (unsigned t = 1; t < PROFD_EVCNT_DROPPED; t++)
                if (event_type_names[t] && t <= PROFD_EV_FORK)
                        fprintf(f, "profd_process_events_sent_total{type=\"%s\"} %" PRIu64 "\n",
                                event_type_names[t], c[PROFD_EVCNT_SENT + t]);
        fputs("# HELP profd_process_events_dropped_total Process events lost in the kernel, by reason.\n"
              "# TYPE profd_process_events_dropped_total counter\n",
              f);
        for (unsigned t = 1; t < PROFD_EVCNT_DROPPED; t++)
                if (event_type_names[t] && t <= PROFD_EV_FORK)
                        fprintf(f,
                                "profd_process_events_dropped_total{type=\"%s\",reason=\"ringbuf_full\"} "
                                "%" PRIu64 "\n",
                                event_type_names[t], c[PROFD_EVCNT_DROPPED + t]);
        fprintf(f, "profd_process_events_dropped_total{type=\"any\",reason=\"malformed\"} %" PRIu64 "\n",
                pe->malformed);
        fputs("# HELP profd_process_events_received_total Process events the daemon read, by type.\n"
              "# TYPE profd_process_events_received_total counter\n",
              f);
        for (unsigned t = 1; t < PROFD_EVCNT_DROPPED; t++)
                if (event_type_names[t])
                        fprintf(f, "profd_process_events_received_total{type=\"%s\"} %" PRIu64 "\n",
                                event_type_names[t], pe->received[t]);
        fputs("# HELP profd_process_event_hook How each process event hook is attached (1 = this way).\n"
              "# TYPE profd_process_event_hook gauge\n",
              f);
        for (size_t i = 0; i < _HOOK_MAX; i++)
                fprintf(f, "profd_process_event_hook{hook=\"%s\",via=\"%s\"} 1\n", pe->hooks[i].name,
                        pe->hooks[i].attached ?: "none");
}
