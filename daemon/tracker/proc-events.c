/* SPDX-License-Identifier: GPL-2.0-only */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "events.skel.h"
#include "tracker/perf-mmap-events.h"
#include "tracker/proc-events.h"
#include "util/log.h"
#include "util/metrics-writer.h"

/* Ways to attach one hook, best first. */
#define HOOK_MAX_WAYS 5
/* Dynamic loader files (distinct inodes: host plus container images) watched by uprobe. */
#define MAX_LOADERS 64
/* Exits and shared-memory forks do not wake the daemon (bpf/events.bpf.c, deferrable()): when no
 * other event comes, they are read this often at the latest. The accuracy lets the loop fold this
 * into the wake-ups its other timers make anyway. */
#define PROC_EVENTS_DEFERRED_DRAIN_USEC (100 * 1000ULL)
#define PROC_EVENTS_DEFERRED_DRAIN_ACCURACY_USEC (50 * 1000ULL)

typedef struct HookWay {
        struct bpf_program *prog;
        const char *via;      /* metrics label: "tp_btf", "fexit", "kprobe", "sys_exit", ... */
        const char *btf_name; /* must exist in vmlinux BTF for prog to load (NULL: no need) */
        int btf_kind;
        bool trampoline;    /* fentry/fexit: some kernels refuse to load these at all */
        bool loader_uprobe; /* attached later per loader file (proc_events_watch_loader) */
        bool per_syscall;   /* runs on every syscall: only when nothing cheaper works */
        int helper;         /* BPF helper the program needs (0: none beyond the old ones) */
} HookWay;

typedef struct Hook {
        const char *name; /* metrics label */
        HookWay ways[HOOK_MAX_WAYS];
        struct bpf_link *link; /* NULL when attached through another hook's program */
        const char *attached;  /* via of the way in use, or NULL */
        struct bpf_program *attached_prog;
} Hook;

enum { HOOK_EXEC, HOOK_EXIT, HOOK_FORK, HOOK_MMAP, HOOK_MPROTECT, _HOOK_MAX };

typedef struct Loader {
        uint64_t dev, inode;
        struct bpf_link *link; /* NULL: attaching failed, not retried */
} Loader;

struct ProcEvents {
        const char *mmap_via; /* only this way for mmap/mprotect (tests), or NULL */
        bool loader_uprobes;  /* mmap events come from uprobes on the loaders' _dl_debug_state */
        Loader loaders[MAX_LOADERS];
        size_t n_loaders;
        uint64_t n_loader_failures;
        struct events_bpf *skel;
        struct ring_buffer *rb;
        sd_event_source *io;
        sd_event_source *deferred_drain; /* periodic: events sent without a wake-up */
        proc_event_fn fn;
        void (*drained)(void *userdata);
        void *userdata;
        Hook hooks[_HOOK_MAX];
        uint64_t received[PROFD_EVCNT_DROPPED]; /* by type, as read by the daemon */
        uint64_t malformed;
        bool anon_exec;       /* anonymous executable memory is reported (PROFD_MMAP_HOOK != 0) */
        const char *anon_via; /* how: the BPF hooks' way, "perf_mmap", or NULL (not seen) */
        PerfMmapEvents *perf; /* where no BPF hook sees anonymous mmap/mprotect */
};

static const char *const event_type_names[PROFD_EVCNT_DROPPED] = {
        [PROFD_EV_EXEC] = "exec",
        [PROFD_EV_EXIT] = "exit",
        [PROFD_EV_MMAP_EXEC] = "mmap_exec",
        [PROFD_EV_FORK] = "fork",
        [PROFD_EV_UNKNOWN_PID] = "unknown_pid",
        [PROFD_EV_UNKNOWN_PC] = "unknown_pc",
        [PROFD_EV_ANON_EXEC] = "anon_exec",
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
        if (pe->drained)
                pe->drained(pe->userdata);
        return 0;
}

static int on_deferred_drain(sd_event_source *s, uint64_t usec, void *userdata)
{
        ProcEvents *pe = userdata;
        int r;

        r = ring_buffer__consume(pe->rb);
        if (r < 0)
                log_warning_errno_ratelimited(r, "Reading process event ring buffer failed: %m");
        if (r > 0 && pe->drained)
                pe->drained(pe->userdata);
        (void)sd_event_source_set_time(s, usec + PROC_EVENTS_DEFERRED_DRAIN_USEC);
        return 0;
}

void proc_events_set_drained(ProcEvents *pe, void (*fn)(void *userdata))
{
        if (pe)
                pe->drained = fn;
}

int proc_events_consume(ProcEvents *pe)
{
        if (!pe)
                return 0;
        perf_mmap_events_consume(pe->perf);
        return ring_buffer__consume(pe->rb);
}

/* Expected failures while finding the best hook (a kernel refusing trampolines, no kprobe PMU)
 * would print libbpf warnings that look like errors: while probing, libbpf speaks at debug level. */
static int libbpf_print_debug(enum libbpf_print_level level, const char *fmt, va_list ap)
{
        char buf[512];

        if (level > LIBBPF_WARN || log_get_max_level() < LOG_DEBUG)
                return 0;
        vsnprintf(buf, sizeof(buf), fmt, ap);
        buf[strcspn(buf, "\n")] = 0;
        log_debug("%s", buf);
        return 0;
}

static bool btf_has(const struct btf *btf, const char *name, int kind)
{
        return btf && btf__find_by_name_kind(btf, name, kind) > 0;
}

/* The first way of each hook that attaches wins; a program that serves two hooks (the syscall
 * exit tracepoint sees mmap and mprotect) is attached once. */
static int hooks_attach(ProcEvents *pe)
{
        unsigned n_attached = 0;

        for (size_t i = 0; i < _HOOK_MAX; i++) {
                Hook *h = &pe->hooks[i];

                for (size_t w = 0; w < HOOK_MAX_WAYS && h->ways[w].prog && !h->attached; w++) {
                        HookWay *way = &h->ways[w];
                        struct bpf_link *l;

                        if (!bpf_program__autoload(way->prog))
                                continue;
                        if (pe->mmap_via && (i == HOOK_MMAP || i == HOOK_MPROTECT) &&
                            strcmp(way->via, pe->mmap_via) != 0 &&
                            !(i == HOOK_MPROTECT && strcmp(pe->mmap_via, "fexit") == 0 &&
                              strcmp(way->via, "fentry") == 0))
                                continue;
                        if (way->loader_uprobe) {
                                /* No static attach point: each loader file gets its uprobe when
                                 * the tracker first sees it mapped. Needs the uprobe PMU. */
                                if (access("/sys/bus/event_source/devices/uprobe/type", F_OK) < 0)
                                        continue;
                                pe->loader_uprobes = true;
                                h->attached = way->via;
                                h->attached_prog = way->prog;
                                break;
                        }
                        if (way->per_syscall && pe->loader_uprobes)
                                continue;
                        for (size_t k = 0; k < i; k++)
                                if (pe->hooks[k].attached_prog == way->prog) {
                                        h->attached = way->via;
                                        h->attached_prog = way->prog;
                                }
                        if (h->attached)
                                break;
                        l = bpf_program__attach(way->prog);
                        if (!l) {
                                log_debug_errno(-errno, "Attaching %s hook as %s failed: %m", h->name,
                                                bpf_program__section_name(way->prog));
                                continue;
                        }
                        h->link = l;
                        h->attached = way->via;
                        h->attached_prog = way->prog;
                        if (way->per_syscall)
                                log_debug("Watching new executable mappings through the syscall exit "
                                          "tracepoint: no trampolines, kprobes or uprobes here; this "
                                          "adds a few hundred ns to every syscall on the host");
                }
                if (h->attached)
                        n_attached++;
                else if (pe->loader_uprobes)
                        log_debug("No %s hook: the loader uprobes see dlopen, and the unwinder's "
                                  "unknown-pc reports cover other new executable mappings",
                                  h->name);
                else
                        log_warning("Cannot attach the %s hook in any way; the reconcile sweep and the "
                                    "unwinder's unknown-pid/pc reports stand in for its events",
                                    h->name);
        }
        return n_attached > 0 ? 0 : -ENOENT;
}

static void hooks_init(ProcEvents *pe)
{
        struct events_bpf *s = pe->skel;
        Hook *h = pe->hooks;

        h[HOOK_EXEC] =
                (Hook){"exec",
                       {{s->progs.tp_exec_watched, "tp_btf", "btf_trace_sched_process_exec",
                         BTF_KIND_TYPEDEF, .helper = BPF_FUNC_find_vma},
                        {s->progs.tp_exec, "tp_btf", "btf_trace_sched_process_exec", BTF_KIND_TYPEDEF},
                        {s->progs.raw_exec, "raw_tp"}}};
        h[HOOK_EXIT] =
                (Hook){"exit",
                       {{s->progs.tp_exit, "tp_btf", "btf_trace_sched_process_exit", BTF_KIND_TYPEDEF},
                        {s->progs.raw_exit, "raw_tp"}}};
        h[HOOK_FORK] =
                (Hook){"fork",
                       {{s->progs.tp_fork, "tp_btf", "btf_trace_sched_process_fork", BTF_KIND_TYPEDEF},
                        {s->progs.raw_fork, "raw_tp"}}};
        h[HOOK_MMAP] =
                (Hook){"mmap",
                       {{s->progs.fexit_mmap, "fexit", "vm_mmap_pgoff", BTF_KIND_FUNC, .trampoline = true},
                        {s->progs.kp_mmap, "kprobe"},
                        {s->progs.uprobe_dl_debug_state, "loader_uprobe", .loader_uprobe = true},
                        {s->progs.tp_sys_exit, "sys_exit", "btf_trace_sys_exit", BTF_KIND_TYPEDEF,
                         .per_syscall = true},
                        {s->progs.raw_sys_exit, "raw_sys_exit", .per_syscall = true}}};
        h[HOOK_MPROTECT] = (Hook){"mprotect",
                                  {{s->progs.fentry_mprotect, "fentry", "security_file_mprotect",
                                    BTF_KIND_FUNC, .trampoline = true},
                                   {s->progs.kp_mprotect, "kprobe"},
                                   {s->progs.tp_sys_exit, "sys_exit", "btf_trace_sys_exit", BTF_KIND_TYPEDEF,
                                    .per_syscall = true},
                                   {s->progs.raw_sys_exit, "raw_sys_exit", .per_syscall = true}}};
}

static int events_load(ProcEvents *pe, bool trampolines)
{
        struct btf *vmlinux = NULL;
        int r;

        pe->skel = events_bpf__open();
        if (!pe->skel)
                return log_error_errno(-errno, "Opening process events BPF object failed: %m");
        pe->skel->rodata->self_tgid = getpid();
        pe->skel->rodata->track_anon = pe->anon_exec;
        hooks_init(pe);

        /* A program whose target is missing from BTF fails the whole object's load: leave those
         * out up front rather than learn it from the verifier. */
        vmlinux = btf__load_vmlinux_btf();
        for (size_t i = 0; i < _HOOK_MAX; i++)
                for (size_t w = 0; w < HOOK_MAX_WAYS && pe->hooks[i].ways[w].prog; w++) {
                        const HookWay *way = &pe->hooks[i].ways[w];
                        /* A helper the kernel lacks fails the load as well (bpf_find_vma: 5.17+);
                         * the tracing helpers are the same for kprobes as for tp_btf. */
                        bool ok = (!way->btf_name || btf_has(vmlinux, way->btf_name, way->btf_kind)) &&
                                  (trampolines || !way->trampoline) &&
                                  (!way->helper ||
                                   libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, way->helper, NULL) > 0);
                        bpf_program__set_autoload(way->prog, ok);
                }
        btf__free(vmlinux);

        r = events_bpf__load(pe->skel);
        if (r < 0)
                return log_full_errno(trampolines ? LOG_DEBUG : LOG_ERR, r,
                                      "Loading process events BPF programs%s failed: %m",
                                      trampolines ? "" : " (without trampolines)");
        return 0;
}

static bool way_sees_anon(const char *via, bool mmap)
{
        /* The kprobe on security_mmap_file runs before an anonymous mapping has its address. */
        return via && (strcmp(via, "fexit") == 0 || strcmp(via, "fentry") == 0 || strstr(via, "sys_exit") ||
                       (!mmap && strcmp(via, "kprobe") == 0));
}

static void on_perf_mmap_event(const struct profd_event *ev, void *userdata)
{
        ProcEvents *pe = userdata;

        pe->received[ev->type]++;
        pe->fn(ev, pe->userdata);
}

static void on_perf_mmap_drained(void *userdata)
{
        ProcEvents *pe = userdata;

        if (pe->drained)
                pe->drained(pe->userdata);
}

/* The BPF hooks report anonymous executable memory where they see mmap and mprotect with the
 * address (trampolines, kprobes, the syscall exit tracepoint). Elsewhere (kernels refusing
 * trampolines and built without kprobes) the kernel's perf mmap records do: they cost nothing
 * per syscall, only a record per executable mapping made. */
static void anon_exec_setup(ProcEvents *pe, sd_event *e)
{
        int r;

        if (!pe->anon_exec)
                return;
        if (way_sees_anon(pe->hooks[HOOK_MMAP].attached, true) &&
            way_sees_anon(pe->hooks[HOOK_MPROTECT].attached, false)) {
                pe->anon_via = pe->hooks[HOOK_MPROTECT].attached;
                return;
        }
        r = perf_mmap_events_new(e, on_perf_mmap_event, on_perf_mmap_drained, pe, &pe->perf);
        if (r < 0) {
                log_full_errno(LOG_NOTICE, r,
                               "Cannot read perf mmap records (%m): JIT code is found when first "
                               "sampled");
                return;
        }
        pe->anon_via = "perf_mmap";
}

int proc_events_new(sd_event *e, proc_event_fn fn, void *userdata, const char *mmap_via, ProcEvents **ret)
{
        ProcEvents *pe;
        int r;

        pe = calloc(1, sizeof(*pe));
        if (!pe)
                return -ENOMEM;
        pe->fn = fn;
        pe->userdata = userdata;
        pe->mmap_via = mmap_via;
        /* PROFD_MMAP_HOOK=0: anonymous executable memory is left to refreshes and the unwinder's
         * unknown-pc reports, as before it was tracked (benchmarks compare the two). */
        pe->anon_exec = !getenv("PROFD_MMAP_HOOK") || strcmp(getenv("PROFD_MMAP_HOOK"), "0") != 0;

        libbpf_print_fn_t old_print = libbpf_set_print(libbpf_print_debug);
        r = events_load(pe, true);
        if (r < 0) {
                events_bpf__destroy(pe->skel);
                pe->skel = NULL;
                memset(pe->hooks, 0, sizeof(pe->hooks));
                /* Kernels that refuse trampolines (EPERM under some BPF policies, ENOTSUPP without
                 * ftrace) fail the whole load: do without them. */
                r = events_load(pe, false);
                if (r < 0) {
                        libbpf_set_print(old_print);
                        goto fail;
                }
        }
        r = hooks_attach(pe);
        libbpf_set_print(old_print);
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
        r = sd_event_add_time_relative(e, &pe->deferred_drain, CLOCK_MONOTONIC,
                                       PROC_EVENTS_DEFERRED_DRAIN_USEC,
                                       PROC_EVENTS_DEFERRED_DRAIN_ACCURACY_USEC, on_deferred_drain, pe);
        if (r < 0) {
                log_error_errno(r, "Adding the process event drain timer failed: %m");
                goto fail;
        }
        (void)sd_event_source_set_enabled(pe->deferred_drain, SD_EVENT_ON);
        (void)sd_event_source_set_description(pe->deferred_drain, "process-events-deferred");

        anon_exec_setup(pe, e);

        log_debug("Process events via: exec %s, exit %s, fork %s, mmap %s, mprotect %s, anon exec %s",
                  pe->hooks[HOOK_EXEC].attached ?: "-", pe->hooks[HOOK_EXIT].attached ?: "-",
                  pe->hooks[HOOK_FORK].attached ?: "-", pe->hooks[HOOK_MMAP].attached ?: "-",
                  pe->hooks[HOOK_MPROTECT].attached ?: "-", pe->anon_via ?: "-");
        *ret = pe;
        return 0;
fail:
        proc_events_free(pe);
        return r;
}

bool proc_events_loader_unwatched(const ProcEvents *pe, uint64_t dev, uint64_t inode)
{
        if (!pe || !pe->loader_uprobes)
                return false;
        for (size_t i = 0; i < pe->n_loaders; i++)
                if (pe->loaders[i].dev == dev && pe->loaders[i].inode == inode)
                        return false;
        return true;
}

/* An exec of a program with this loader, and its start-up reports before the last, need not wake
 * the daemon (bpf/events.bpf.c, watched_loaders): the last report does. */
static void loader_quiet_start(ProcEvents *pe, uint64_t dev, uint64_t inode, unsigned quiet_reports)
{
        struct profd_loader_key key = {
                /* The kernel's dev_t, as the exec hook reads it from the loader's inode. */
                .dev = ((uint64_t)major(dev) << 20) | minor(dev),
                .inode = inode,
        };
        uint32_t v = quiet_reports;

        if (bpf_map_update_elem(bpf_map__fd(pe->skel->maps.watched_loaders), &key, &v, BPF_ANY) < 0) {
                log_debug_errno(-errno, "Cannot record watched loader for exec: %m");
                return;
        }
        pe->skel->bss->loaders_watched = 1;
}

int proc_events_watch_loader(ProcEvents *pe, const char *path, uint64_t dev, uint64_t inode,
                             unsigned start_reports)
{
        LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = "_dl_debug_state");
        libbpf_print_fn_t old_print;
        Loader *l;

        if (!pe || !pe->loader_uprobes)
                return 0;
        for (size_t i = 0; i < pe->n_loaders; i++)
                if (pe->loaders[i].dev == dev && pe->loaders[i].inode == inode)
                        return 0;
        if (pe->n_loaders >= MAX_LOADERS) {
                pe->n_loader_failures++;
                return -ENOSPC;
        }
        l = &pe->loaders[pe->n_loaders++];
        l->dev = dev;
        l->inode = inode;
        old_print = libbpf_set_print(libbpf_print_debug);
        l->link = bpf_program__attach_uprobe_opts(pe->skel->progs.uprobe_dl_debug_state, -1, path, 0, &opts);
        libbpf_set_print(old_print);
        if (!l->link) {
                pe->n_loader_failures++;
                return log_debug_errno(-errno, "Cannot watch dynamic loader %s: %m", path);
        }
        log_debug("Watching dynamic loader %s for dlopen", path);
        if (start_reports > 0)
                loader_quiet_start(pe, dev, inode, start_reports - 1);
        return 1;
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
        perf_mmap_events_free(pe->perf);
        sd_event_source_disable_unref(pe->deferred_drain);
        sd_event_source_disable_unref(pe->io);
        ring_buffer__free(pe->rb);
        for (size_t i = 0; i < _HOOK_MAX; i++)
                bpf_link__destroy(pe->hooks[i].link);
        for (size_t i = 0; i < pe->n_loaders; i++)
                bpf_link__destroy(pe->loaders[i].link);
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

uint64_t proc_events_dropped(const ProcEvents *pe)
{
        uint64_t c[PROFD_EVCNT__MAX], n = 0;

        if (!pe)
                return 0;
        read_counters(pe, c);
        for (unsigned t = 0; t < PROFD_EVCNT_DROPPED; t++)
                n += c[PROFD_EVCNT_DROPPED + t];
        return n;
}

void proc_events_write_metrics(const ProcEvents *pe, FILE *f)
{
        const char *sent[PROFD_EVCNT_DROPPED];
        uint64_t c[PROFD_EVCNT__MAX];
        char labels[128];

        if (!pe)
                return;
        read_counters(pe, c);
        /* The kernel hooks' event types; the unwinder's reports (unknown pid/pc) come from elsewhere. */
        for (unsigned t = 0; t < PROFD_EVCNT_DROPPED; t++)
                sent[t] = t > 0 && event_type_names[t] && (t <= PROFD_EV_FORK || t == PROFD_EV_ANON_EXEC)
                                  ? event_type_names[t]
                                  : NULL;
        metric_labelled(f, "profd_process_events_sent_total", "counter",
                        "Process events the kernel hooks delivered.", "type", sent, c + PROFD_EVCNT_SENT,
                        PROFD_EVCNT_DROPPED);
        metric_family(f, "profd_process_events_dropped_total", "counter",
                      "Process events lost in the kernel, by reason.");
        for (unsigned t = 0; t < PROFD_EVCNT_DROPPED; t++)
                if (sent[t]) {
                        snprintf(labels, sizeof(labels), "type=\"%s\",reason=\"ringbuf_full\"", sent[t]);
                        metric_sample(f, "profd_process_events_dropped_total", labels,
                                      c[PROFD_EVCNT_DROPPED + t]);
                }
        metric_sample(f, "profd_process_events_dropped_total", "type=\"any\",reason=\"malformed\"",
                      pe->malformed);
        metric_labelled(f, "profd_process_events_received_total", "counter",
                        "Process events the daemon read, by type.", "type", event_type_names + 1,
                        pe->received + 1, PROFD_EVCNT_DROPPED - 1);
        metric_family(f, "profd_process_event_hook", "gauge",
                      "How each process event hook is attached (1 = this way).");
        for (size_t i = 0; i < _HOOK_MAX; i++) {
                snprintf(labels, sizeof(labels), "hook=\"%s\",via=\"%s\"", pe->hooks[i].name,
                         pe->hooks[i].attached ?: "none");
                metric_sample(f, "profd_process_event_hook", labels, 1);
        }
        snprintf(labels, sizeof(labels), "hook=\"anon_exec\",via=\"%s\"", pe->anon_via ?: "none");
        metric_sample(f, "profd_process_event_hook", labels, 1);
        metric_labelled(f, "profd_process_events_ratelimited_total", "counter",
                        "Events not sent by BPF: mprotect +X within 100 ms of the process's last one, file "
                        "mappings past the process's burst of 64 (then one per 10 ms).",
                        "event", (const char *const[]){"mprotect", "mmap", "anon_exec"},
                        (const uint64_t[]){c[PROFD_EVCNT_RATELIMITED], c[PROFD_EVCNT_MMAP_RATELIMITED],
                                           c[PROFD_EVCNT_ANON_RATELIMITED]},
                        3);
        metric_counter(
                f, "profd_process_events_anon_deduped_total",
                "Anonymous executable ranges not sent: the same range was sent from that CPU just before "
                "(JIT W^X flips).",
                c[PROFD_EVCNT_ANON_DEDUPED]);
        metric_counter(f, "profd_process_events_deferred_total",
                       "Events sent without waking the daemon (exits, forks sharing the parent's memory, "
                       "execs and loader reports before the loader's last start-up report): read with the "
                       "next event that wakes it, or within 150 ms.",
                       c[PROFD_EVCNT_DEFERRED]);
        metric_counter(f, "profd_process_events_exec_deferred_total",
                       "Of those, execs of programs whose dynamic loader is watched: the loader's last "
                       "start-up report wakes the daemon.",
                       c[PROFD_EVCNT_EXEC_DEFERRED]);
        perf_mmap_events_write_metrics(pe->perf, f);
        if (pe->loader_uprobes) {
                size_t n = 0;
                for (size_t i = 0; i < pe->n_loaders; i++)
                        n += pe->loaders[i].link != NULL;
                metric_gauge(f, "profd_process_events_loaders_watched",
                             "Dynamic loader files with a dlopen uprobe.", n);
                metric_counter(f, "profd_process_events_loader_failures_total",
                               "Loader files that could not be watched.", pe->n_loader_failures);
        }
}
