/* SPDX-License-Identifier: GPL-2.0-only */
/* Loads the real process event hooks (bpf/events.bpf.c) and checks that exec, dlopen (new
 * executable mapping), fork and exit of a real child arrive over the ring buffer, with the right
 * pids and the address of the library's mapping. Needs root; SKIPs (77) otherwise. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/sysmacros.h>
#include <systemd/sd-event.h>

#include "driver.h"
#include "tracker/proc-events.h"
#include "util/log.h"

#define MAX_EVENTS 4096

static struct profd_event events[MAX_EVENTS];
static size_t n_events;

static void on_event(const struct profd_event *ev, void *userdata)
{
        if (n_events < MAX_EVENTS)
                events[n_events++] = *ev;
}

/* addr != 0: an event whose range holds addr, or a "loader changed its link map" event that
 * arrived after index since (loader uprobe mode: no address). */
static size_t since;
static const struct profd_event *find(uint32_t type, uint32_t pid, uint64_t addr, uint64_t unused)
{
        for (size_t i = 0; i < n_events; i++) {
                const struct profd_event *e = &events[i];
                if (e->type != type || e->pid != pid)
                        continue;
                if (!addr || (e->addr <= addr && addr < e->addr + e->len) ||
                    (i >= since && e->addr == PROFD_EV_ADDR_LOADER))
                        return e;
        }
        return NULL;
}

/* Runs the loop until the event shows up or 5 s pass. */
static const struct profd_event *wait_for(sd_event *e, uint32_t type, uint32_t pid, uint64_t addr)
{
        uint64_t deadline = mono_ns() + 5000000000ULL;
        const struct profd_event *ev;

        while (!(ev = find(type, pid, addr, addr ? 1 : 0)) && mono_ns() < deadline)
                (void)sd_event_run(e, 100 * 1000);
        return ev;
}

/* A value of the hooks' /metrics, or UINT64_MAX when the sample is not there. */
static uint64_t metric_value(const ProcEvents *pe, const char *name)
{
        char buf[8192];
        const char *at;
        unsigned long long v;
        FILE *f = fmemopen(buf, sizeof(buf), "w");

        if (!f)
                return UINT64_MAX;
        proc_events_write_metrics(pe, f);
        fclose(f);
        buf[sizeof(buf) - 1] = 0;
        for (at = strstr(buf, name); at; at = strstr(at + 1, name))
                if ((at == buf || at[-1] == '\n') && at[strlen(name)] == ' ' &&
                    sscanf(at + strlen(name), " %llu", &v) == 1)
                        return v;
        return UINT64_MAX;
}

int main(int argc, char **argv)
{
        _cleanup_(proc_events_freep) ProcEvents *pe = NULL;
        sd_event *e = NULL;
        Helper h = {};
        char line[256], metrics[8192];
        const struct profd_event *ev;
        unsigned long fn_addr = 0;
        int fork_pid = 0, r;
        FILE *mf;

        if (argc < 3) {
                fprintf(stderr, "usage: %s HELPER LIB\n", argv[0]);
                return 2;
        }
        if (geteuid() != 0) {
                printf("======================================================================\n"
                       "SKIP: loading BPF needs root\n"
                       "======================================================================\n");
                return 77;
        }
        log_set_max_level(getenv("PROFD_TEST_DEBUG") ? LOG_DEBUG : LOG_INFO);
        r = sd_event_default(&e);
        if (r < 0)
                return 1;
        r = proc_events_new(e, on_event, NULL, NULL, &pe);
        if (r < 0) {
                printf("FAIL loading process event hooks: %s\n", strerror(-r));
                return 1;
        }

        r = helper_start(&h, argv[1], argv[2]);
        CHECK(r >= 0 && helper_cmd(&h, NULL, line, sizeof(line)) >= 0 && strcmp(line, "ready") == 0,
              "helper started (pid %d)", (int)h.pid);
        ev = wait_for(e, PROFD_EV_FORK, h.pid, 0);
        CHECK(ev && ev->ppid == (uint32_t)getpid(), "fork event for the helper with our pid as parent");
        ev = wait_for(e, PROFD_EV_EXEC, h.pid, 0);
        CHECK(ev, "exec event for the helper");
        if (ev)
                printf("     exec event delivered %.3f ms after fork()\n",
                       (double)(ev->ktime_ns - h.spawned_ns) / 1e6);
        /* The daemon's first read of the new image takes these instead of /proc/PID/stat. */
        {
                unsigned long long start = 0;
                char path[64], comm[17] = "", stat_comm[17] = "";
                long hz = sysconf(_SC_CLK_TCK);
                FILE *sf;

                snprintf(path, sizeof(path), "/proc/%d/stat", (int)h.pid);
                sf = fopen(path, "re");
                if (sf && fscanf(sf,
                                 "%*d (%16[^)]) %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
                                 "%*d %*d %*d %*d %llu",
                                 stat_comm, &start) != 2)
                        start = 0;
                if (sf)
                        fclose(sf);
                if (ev)
                        memcpy(comm, ev->comm, 16);
                CHECK(ev && start > 0 && ev->start_ns / (1000000000ULL / hz) == start &&
                              strcmp(comm, stat_comm) == 0,
                      "exec event carries the start time and name /proc/PID/stat gives (%llu ticks \"%s\"; "
                      "event: %llu \"%s\")",
                      start, stat_comm,
                      ev ? (unsigned long long)(ev->start_ns / (1000000000ULL / hz)) : 0ULL, comm);
        }

        /* Where no mmap hook attaches, dlopen is seen by a uprobe on the loader (the tracker names
         * the loaders it meets; here the test does). */
        {
                char path[64], l[512];
                FILE *maps;
                int n = 0;

                snprintf(path, sizeof(path), "/proc/%d/maps", (int)h.pid);
                maps = fopen(path, "re");
                while (maps && fgets(l, sizeof(l), maps)) {
                        unsigned long start, end, inode;
                        unsigned maj, min;
                        char file[256] = "", lib_path[300];
                        if (sscanf(l, "%lx-%lx %*s %*x %x:%x %lu %255s", &start, &end, &maj, &min, &inode,
                                   file) < 6 ||
                            !strstr(file, "/ld-linux"))
                                continue;
                        snprintf(lib_path, sizeof(lib_path), "/proc/%d/root%s", (int)h.pid, file);
                        r = proc_events_watch_loader(pe, lib_path, makedev(maj, min), inode, 2);
                        n += r > 0;
                        break;
                }
                if (maps)
                        fclose(maps);
                printf("     loader uprobes attached: %d\n", n);
        }

        /* What the helper's start-up produced is not the dlopen's. */
        for (uint64_t until = mono_ns() + 50000000ULL; mono_ns() < until;)
                (void)sd_event_run(e, 10 * 1000);
        since = n_events;
        CHECK(helper_cmd(&h, "dlopen", line, sizeof(line)) >= 0 && sscanf(line, "dlopen %lx", &fn_addr) == 1,
              "helper dlopen()ed the library: %s", line);
        ev = wait_for(e, PROFD_EV_MMAP_EXEC, h.pid, fn_addr);
        CHECK(ev,
              "mmap_exec event whose range holds the library function at %#lx (or, with the loader uprobe, "
              "a link map change after the dlopen)",
              fn_addr);
        if (ev)
                printf("     mapping %#llx+%#llx\n", (unsigned long long)ev->addr,
                       (unsigned long long)ev->len);

        CHECK(helper_cmd(&h, "fork", line, sizeof(line)) >= 0 && sscanf(line, "fork %d", &fork_pid) == 1,
              "helper forked: %s", line);
        ev = wait_for(e, PROFD_EV_FORK, fork_pid, 0);
        CHECK(ev && ev->ppid == (uint32_t)h.pid, "fork event for the grandchild, parent = helper");
        CHECK(wait_for(e, PROFD_EV_EXIT, fork_pid, 0), "exit event for the grandchild");

        CHECK(helper_finish(&h) == 0, "helper exited cleanly");
        CHECK(wait_for(e, PROFD_EV_EXIT, h.pid, 0), "exit event for the helper");

        /* Threads are not processes: a multi-threaded exit must give one exit event. */
        size_t exits = 0;
        for (size_t i = 0; i < n_events; i++)
                exits += events[i].type == PROFD_EV_EXIT && events[i].pid == (uint32_t)h.pid;
        CHECK(exits == 1, "exactly one exit event for the helper (got %zu)", exits);

        /* With the loader watched by uprobe, a program's exec and glibc's first start-up report
         * (before the libraries are mapped) do not wake the daemon: the last report does, and
         * brings them along, the exec first. */
        if (metric_value(pe, "profd_process_event_hook{hook=\"mmap\",via=\"loader_uprobe\"}") == 1) {
                Helper h2 = {};
                uint64_t before = metric_value(pe, "profd_process_events_exec_deferred_total");
                const struct profd_event *exec_ev, *report;

                CHECK(helper_start(&h2, argv[1], argv[2]) >= 0 &&
                              helper_cmd(&h2, NULL, line, sizeof(line)) >= 0 && strcmp(line, "ready") == 0,
                      "second helper started (pid %d)", (int)h2.pid);
                since = n_events;
                exec_ev = wait_for(e, PROFD_EV_EXEC, h2.pid, 0);
                report = wait_for(e, PROFD_EV_MMAP_EXEC, h2.pid, PROFD_EV_ADDR_LOADER);
                CHECK(exec_ev && report && exec_ev < report,
                      "its exec event, then its loader's start-up report");
                CHECK(metric_value(pe, "profd_process_events_exec_deferred_total") > before,
                      "execs of programs with a watched loader sent without a wake-up (%" PRIu64
                      " -> %" PRIu64 ")",
                      before, metric_value(pe, "profd_process_events_exec_deferred_total"));
                CHECK(helper_finish(&h2) == 0, "second helper exited cleanly");
        }

        mf = fmemopen(metrics, sizeof(metrics), "w");
        proc_events_write_metrics(pe, mf);
        fclose(mf);
        CHECK(strstr(metrics, "profd_process_events_dropped_total{type=\"exec\",reason=\"ringbuf_full\"} 0"),
              "no exec event dropped");
        {
                const char *none = strstr(metrics, "via=\"none\"");
                bool uprobe_mode = strstr(metrics, "{hook=\"mmap\",via=\"loader_uprobe\"}") != NULL;
                bool only_mprotect = none && strstr(metrics, "{hook=\"mprotect\",via=\"none\"}") &&
                                     !strstr(none + 1, "via=\"none\"");
                CHECK(!none || (uprobe_mode && only_mprotect),
                      "every hook attached (under loader uprobes, mprotect is left to unknown-pc reports)");
        }
        printf("%s", metrics);

        sd_event_unref(e);
        printf("%s\n", failures ? "FAILED" : "all checks passed");
        return failures ? 1 : 0;
}
