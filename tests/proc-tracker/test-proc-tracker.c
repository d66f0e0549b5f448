/* SPDX-License-Identifier: GPL-2.0-only */
/* The process tracker end to end with the real BPF programs: sampler (profile.bpf.c, whose maps
 * hold the table pool), process event hooks (events.bpf.c), process table, table pool. A real
 * child execs, dlopen()s a library built by the test, forks and exits; the test checks that the
 * pool entries follow, and measures the start-up scan and exec-to-ready for a cached executable.
 * Figures are printed, not asserted (timing depends on the machine). Needs root; SKIPs (77). */
#include <bpf/libbpf.h>
#include <inttypes.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <systemd/sd-event.h>

#include "driver.h"
#include "sampler/sampler.h"
#include "tracker/proc-tracker.h"
#include "tracker/process-table.h"
#include "unwind/table-pool.h"
#include "util/log.h"

static sd_event *event;
static ProcTracker *tracker;
static bool mmap_hooked; /* every mmap(PROT_EXEC) is reported, not only the loader's */

static void on_interval(void *userdata, uint64_t start_ns, uint64_t end_ns, const SampleRecord *records,
                        size_t n)
{
}

static bool ready(void *arg);
static void describe_timeout(bool (*cond)(void *), void *arg);

/* Runs the loop until cond() holds or timeout_ms pass; returns whether it holds. */
typedef bool (*cond_fn)(void *arg);
static bool run_until(cond_fn cond, void *arg, unsigned timeout_ms)
{
        uint64_t deadline = mono_ns() + (uint64_t)timeout_ms * 1000000ULL;

        while (!cond(arg)) {
                if (mono_ns() >= deadline) {
                        describe_timeout(cond, arg);
                        return false;
                }
                (void)sd_event_run(event, 1000);
        }
        return true;
}

static bool idle(void *arg)
{
        return !proc_tracker_busy(tracker);
}

typedef struct Want {
        pid_t pid;
        const char *suffix, *suffix2; /* mappings whose path ends so, pushed with their table */
} Want;

static bool has(pid_t pid, const char *suffix)
{
        bool has_table = false;
        return !suffix || (proc_tracker_find_mapping(tracker, pid, suffix, &has_table) >= 0 && has_table);
}

/* pid was pushed to the pool with every file mapping's table, including the wanted ones. */
static bool ready(void *arg)
{
        const Want *w = arg;
        ProcTrackerProcess p;

        if (proc_tracker_get_process(tracker, w->pid, &p) < 0 || p.n_pending > 0)
                return false;
        return has(w->pid, w->suffix) && has(w->pid, w->suffix2);
}

/* The wanted mapping was pushed (with or without a table). */
static bool known(void *arg)
{
        const Want *w = arg;
        bool has_table;
        return proc_tracker_find_mapping(tracker, w->pid, w->suffix, &has_table) >= 0;
}

/* What the tracker has for a pid we waited for in vain. */
static void describe_timeout(bool (*cond)(void *), void *arg)
{
        ProcTrackerProcess p;
        pid_t pid;
        int r;

        if (cond != ready)
                return;
        pid = ((const Want *)arg)->pid;
        r = proc_tracker_get_process(tracker, pid, &p);
        if (r < 0)
                printf("     timed out: pid %d not in the pool (%s); tracker busy: %d\n", (int)pid,
                       strerror(-r), proc_tracker_busy(tracker));
        else
                printf("     timed out: pid %d has %zu mappings, %zu with tables, %zu pending; tracker "
                       "busy: %d\n",
                       (int)pid, p.n_mappings, p.n_with_table, p.n_pending, proc_tracker_busy(tracker));
}

static bool gone(void *arg)
{
        ProcTrackerProcess p;
        return proc_tracker_get_process(tracker, *(pid_t *)arg, &p) == -ENOENT;
}

/* The helper binary with another GNU build ID: a new executable identity whose table has to be
 * built from the file the test then makes hard to reach (deleted, memfd). */
static int helper_variant(const char *path, uint8_t salt, char **ret_buf, size_t *ret_size)
{
        static const uint8_t note[] = {4, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0, 'G', 'N', 'U', 0};
        FILE *f = fopen(path, "re");
        char *buf;
        long size;

        if (!f)
                return -errno;
        fseek(f, 0, SEEK_END);
        size = ftell(f);
        rewind(f);
        buf = malloc(size);
        if (!buf || fread(buf, 1, size, f) != (size_t)size) {
                fclose(f);
                free(buf);
                return -EIO;
        }
        fclose(f);
        for (long i = 0; i + (long)sizeof(note) + 20 <= size; i++)
                if (memcmp(buf + i, note, sizeof(note)) == 0) {
                        buf[i + sizeof(note)] ^= salt;
                        *ret_buf = buf;
                        *ret_size = size;
                        return 0;
                }
        free(buf);
        return -ENOENT;
}

/* Child side of the mount-namespace case: a private mount namespace with a tmpfs over dir, the
 * binary written there, so that its path exists only inside (like a container's image). */
typedef struct NsPrep {
        const char *dir, *exe;
        const char *buf;
        size_t size;
} NsPrep;

static int ns_prep(void *arg)
{
        const NsPrep *n = arg;
        int fd;

        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("none", n->dir, "tmpfs", 0, "mode=0755") < 0)
                return -1;
        fd = open(n->exe, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
        if (fd < 0 || write(fd, n->buf, n->size) != (ssize_t)n->size)
                return -1;
        close(fd);
        return 0;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
        _cleanup_(sampler_freep) Sampler *sampler = NULL;
        _cleanup_(table_pool_freep) TablePool *pool = NULL;
        _cleanup_(process_table_freep) ProcessTable *procs = NULL;
        SamplerOptions so = {.frequency_hz = 19, .drain_interval_ns = 1000000000ULL};
        const char *helper, *lib;
        char line[256];
        Helper h = {};
        uint64_t t0, lat[8];
        size_t n_lat = 0;
        int r, grandchild = 0;
        struct bpf_map *rb;
        char *metrics = NULL;
        size_t metrics_size = 0;
        FILE *mf;

        if (argc < 3) {
                fprintf(stderr, "usage: %s HELPER LIB\n", argv[0]);
                return 2;
        }
        helper = argv[1];
        lib = argv[2];
        if (geteuid() != 0) {
                printf("======================================================================\n"
                       "SKIP: loading BPF needs root\n"
                       "======================================================================\n");
                return 77;
        }
        log_set_max_level(getenv("PROFD_TEST_DEBUG") ? LOG_DEBUG : LOG_INFO);
        if (sd_event_default(&event) < 0)
                return 1;

        r = sampler_new(event, &so, on_interval, NULL, &sampler);
        if (r >= 0)
                r = sampler_start(sampler);
        if (r < 0) {
                printf("FAIL starting the sampler: %s\n", strerror(-r));
                return 1;
        }
        r = table_pool_new(sampler_bpf_object(sampler), 64ull << 20, &pool);
        if (r < 0) {
                printf("FAIL creating the table pool: %s\n", strerror(-r));
                return 1;
        }
        r = process_table_new(60 * 1000000000ULL, &procs);
        if (r < 0)
                return 1;

        /* Start-up: every process on the host is read, then every executable's table built. */
        t0 = mono_ns();
        ProcTrackerOptions topts = {.mmap_via = argc > 3 ? argv[3] : NULL};
        if (topts.mmap_via)
                printf("     new mappings seen only through: %s\n", topts.mmap_via);
        r = proc_tracker_new(event, procs, pool, &topts, &tracker);
        if (r < 0) {
                printf("FAIL starting the tracker: %s\n", strerror(-r));
                return 1;
        }
        rb = bpf_object__find_map_by_name(sampler_bpf_object(sampler), "unwinder_events");
        CHECK(rb && proc_tracker_add_unwinder_events(tracker, bpf_map__fd(rb)) >= 0,
              "reading the unwinder's unknown pid/pc ring buffer");
        CHECK(run_until(idle, NULL, 60000), "start-up scan and table builds finished");
        {
                char *m = NULL;
                size_t ms = 0;
                FILE *f = open_memstream(&m, &ms);
                proc_tracker_write_metrics(tracker, f);
                fclose(f);
                mmap_hooked = !strstr(m, "{hook=\"mmap\",via=\"loader_uprobe\"}");
                free(m);
        }
        printf("     start-up: %zu processes tracked, scan + all table builds in %.1f ms\n",
               proc_tracker_n_processes(tracker), (double)(mono_ns() - t0) / 1e6);
        {
                ProcTrackerProcess self;
                bool libc = false;
                CHECK(proc_tracker_get_process(tracker, getpid(), &self) >= 0 && self.n_with_table > 0,
                      "this test process (present at start) is in the pool: %zu of %zu mappings with tables",
                      self.n_with_table, self.n_mappings);
                CHECK(proc_tracker_find_mapping(tracker, getpid(), "libc.so.6", &libc) >= 0 && libc,
                      "... including libc");
                CHECK(proc_tracker_find_mapping(tracker, getpid(), "[vdso]", &libc) >= 0 && libc,
                      "... and the vDSO");
        }

        /* A new executable: exec, then its table gets built. */
        r = helper_start(&h, helper, lib);
        CHECK(r >= 0 && helper_cmd(&h, NULL, line, sizeof(line)) >= 0 && strcmp(line, "ready") == 0,
              "helper started (pid %d)", (int)h.pid);
        {
                Want w = {h.pid, "proc-helper", NULL};
                CHECK(run_until(ready, &w, 10000),
                      "helper executable in the pool %.1f ms after fork (table built)",
                      (double)(mono_ns() - h.spawned_ns) / 1e6);
                w.suffix = "libc.so.6";
                CHECK(ready(&w), "helper's libc in the pool");
        }

        /* dlopen after start: the mmap event brings the library in. */
        CHECK(helper_cmd(&h, "dlopen", line, sizeof(line)) >= 0 && strncmp(line, "dlopen ", 7) == 0,
              "helper dlopen()ed the library: %s", line);
        {
                Want w = {h.pid, "libproc-helper-lib.so", NULL};
                t0 = mono_ns();
                CHECK(run_until(ready, &w, 10000), "dlopen()ed library in the pool after %.1f ms",
                      (double)(mono_ns() - t0) / 1e6);
        }

        /* Hostile mappings: a file that is not ELF and an ELF cut short after its headers, mapped
         * executable. They get no table (counted), and the process keeps being tracked. */
        {
                char junk[] = "/tmp/proc-junk-XXXXXX", cut[] = "/tmp/proc-cut-XXXXXX", *buf = NULL;
                size_t size = 0;
                int fd;

                fd = mkstemp(junk);
                if (fd >= 0) {
                        for (int i = 0; i < 512; i++)
                                (void)!write(fd, "not an ELF file\n", 16);
                        close(fd);
                }
                r = helper_variant(lib, 0x33, &buf, &size);
                fd = r >= 0 ? mkstemp(cut) : -1;
                if (fd >= 0) {
                        /* Headers and program headers intact, section data gone. */
                        (void)!write(fd, buf, size > 8192 ? 8192 : size / 2);
                        close(fd);
                }
                free(buf);
                snprintf(line, sizeof(line), "mmapx %s", junk);
                CHECK(helper_cmd(&h, line, line, sizeof(line)) >= 0 && strncmp(line, "mmapx ", 6) == 0,
                      "helper mapped a non-ELF file executable");
                snprintf(line, sizeof(line), "mmapx %s", cut);
                CHECK(helper_cmd(&h, line, line, sizeof(line)) >= 0 && strncmp(line, "mmapx ", 6) == 0,
                      "helper mapped a truncated ELF executable");
                /* Under loader uprobes (no mmap hook on this kernel) a plain mmap(2) is found by the
                 * unwinder's unknown-pc report once code there is sampled; stand in for it. */
                if (!mmap_hooked)
                        (void)proc_tracker_refresh_pid(tracker, h.pid);
                Want w = {h.pid, strrchr(cut, '/') + 1, NULL};
                bool has_table = true;
                CHECK(run_until(known, &w, 5000) && run_until(idle, NULL, 5000) &&
                              proc_tracker_find_mapping(tracker, h.pid, w.suffix, &has_table) >= 0 &&
                              !has_table,
                      "truncated ELF mapping pushed without a table");
                w.suffix = strrchr(junk, '/') + 1;
                CHECK(proc_tracker_find_mapping(tracker, h.pid, w.suffix, &has_table) >= 0 && !has_table,
                      "non-ELF mapping pushed without a table");
                w.suffix = "libproc-helper-lib.so";
                CHECK(ready(&w), "helper still tracked with its good mappings");
                unlink(junk);
                unlink(cut);
        }

        /* fork: the child gets the parent's entries; its exit removes them. */
        CHECK(helper_cmd(&h, "fork", line, sizeof(line)) >= 0 && sscanf(line, "fork %d", &grandchild) == 1,
              "helper forked: %s", line);
        CHECK(run_until(gone, &grandchild, 5000), "exited grandchild %d no longer in the pool", grandchild);

        CHECK(helper_finish(&h) == 0, "helper exited cleanly");
        CHECK(run_until(gone, &h.pid, 5000), "exited helper no longer in the pool");
        {
                Process *p = NULL;
                CHECK(process_table_get(procs, h.pid, &p) >= 0 && p->exited_ns != 0,
                      "exited helper still in the process table (for symbolization), marked exited");
        }

        /* A deleted executable: the tracker first hears of the process after the file is gone, so
         * the table must come from /proc/PID/map_files. */
        {
                char tmp[] = "/tmp/proc-helper-deleted-XXXXXX", *buf = NULL;
                size_t size = 0;
                int fd;
                Helper d = {};
                Want w;

                r = helper_variant(helper, 0x5a, &buf, &size);
                fd = r >= 0 ? mkstemp(tmp) : -1;
                if (fd >= 0) {
                        r = write(fd, buf, size) == (ssize_t)size && fchmod(fd, 0755) == 0 ? 0 : -errno;
                        close(fd);
                }
                free(buf);
                CHECK(fd >= 0 && r >= 0, "wrote a copy of the helper with another build ID to %s", tmp);
                r = helper_start(&d, tmp, lib);
                CHECK(r >= 0 && helper_cmd(&d, NULL, line, sizeof(line)) >= 0 && strcmp(line, "ready") == 0,
                      "deleted-binary helper started (pid %d)", (int)d.pid);
                unlink(tmp); /* before the loop runs: the tracker has not read the process yet */
                w = (Want){d.pid, "proc-helper-deleted-", NULL};
                w.suffix = strrchr(tmp, '/') + 1;
                CHECK(run_until(ready, &w, 10000), "deleted executable %s in the pool with its table", tmp);
                (void)helper_finish(&d);
        }

        /* A binary that exists only in another mount namespace (a container's image): opened
         * through /proc/PID/map_files, or /proc/PID/root. */
        {
                char dir[] = "/tmp/proc-ns-XXXXXX", exe[64], *buf = NULL;
                size_t size = 0;
                Helper n = {};
                NsPrep prep;
                Want w;

                r = helper_variant(helper, 0x3c, &buf, &size);
                CHECK(r >= 0 && mkdtemp(dir),
                      "helper copy with another build ID for a private mount namespace");
                snprintf(exe, sizeof(exe), "%s/proc-helper-ns", dir);
                prep = (NsPrep){dir, exe, buf, size};
                r = helper_start_prep(&n, exe, lib, ns_prep, &prep);
                CHECK(r >= 0 && helper_cmd(&n, NULL, line, sizeof(line)) >= 0 && strcmp(line, "ready") == 0,
                      "helper started from %s inside its own mount namespace (pid %d)", exe, (int)n.pid);
                CHECK(access(exe, F_OK) < 0, "%s does not exist outside that namespace", exe);
                w = (Want){n.pid, "/proc-helper-ns", NULL};
                CHECK(run_until(ready, &w, 10000), "its executable is in the pool with its table");
                (void)helper_finish(&n);
                free(buf);
                rmdir(dir);
        }

        /* Code in a memfd (exec of /proc/self/fd/N): maps shows "/memfd:NAME (deleted)". */
        {
                char *buf = NULL, path[64];
                size_t size = 0;
                int fd = -1;
                Helper m = {};
                Want w;

                r = helper_variant(helper, 0xa5, &buf, &size);
                if (r >= 0)
                        fd = memfd_create("proc-helper-memfd", 0);
                if (fd >= 0 && write(fd, buf, size) != (ssize_t)size)
                        r = -EIO;
                free(buf);
                CHECK(fd >= 0 && r >= 0, "helper copy with another build ID in a memfd");
                snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
                r = helper_start(&m, path, lib);
                CHECK(r >= 0 && helper_cmd(&m, NULL, line, sizeof(line)) >= 0 && strcmp(line, "ready") == 0,
                      "memfd helper started (pid %d)", (int)m.pid);
                if (fd >= 0)
                        close(fd);
                w = (Want){m.pid, "memfd:proc-helper-memfd", NULL};
                CHECK(run_until(ready, &w, 10000), "memfd executable in the pool with its table");
                (void)helper_finish(&m);
        }

        /* Cached executable: exec -> every mapping of the new image (exe, ld.so, libc, vdso)
         * pushed with its table. Measured from the kernel's exec event to the push. */
        for (size_t i = 0; i < ELEMENTSOF(lat); i++) {
                ProcTrackerProcess p = {};
                Helper c = {};
                Want w;
                r = helper_start(&c, helper, lib);
                w = (Want){c.pid, "proc-helper", "libc.so.6"};
                if (r < 0 || !run_until(ready, &w, 5000) ||
                    proc_tracker_get_process(tracker, c.pid, &p) < 0 || !p.exec_ns) {
                        CHECK(false, "cached helper run %zu ready (exec seen: %s)", i,
                              p.exec_ns ? "yes" : "no");
                } else
                        lat[n_lat++] = p.pushed_ns - p.exec_ns;
                (void)helper_cmd(&c, NULL, line, sizeof(line));
                (void)helper_finish(&c);
        }
        qsort(lat, n_lat, sizeof(lat[0]), cmp_u64);
        if (n_lat > 0)
                printf("     cached executable, exec -> all mappings pushed with tables: median %.2f ms, max "
                       "%.2f ms (%zu of %zu runs ready)\n",
                       lat[n_lat / 2] / 1e6, lat[n_lat - 1] / 1e6, n_lat, ELEMENTSOF(lat));

        mf = open_memstream(&metrics, &metrics_size);
        proc_tracker_write_metrics(tracker, mf);
        fclose(mf);
        CHECK(strstr(metrics, "profd_proc_tracker_exec_ready_seconds_count ") &&
                      !strstr(metrics, "profd_proc_tracker_exec_ready_seconds_count 0\n"),
              "exec-to-ready histogram has observations");
        CHECK(strstr(metrics, "profd_exe_cache_builds_total ") != NULL, "exe cache metrics present");
        if (getenv("PROFD_TEST_METRICS"))
                printf("%s", metrics);
        else
                for (char *l = strtok(metrics, "\n"); l; l = strtok(NULL, "\n"))
                        if (strncmp(l, "profd_proc_tracker_exec_ready", 29) == 0 ||
                            strncmp(l, "profd_proc_tracker_initial", 26) == 0 ||
                            strncmp(l, "profd_exe_cache_builds", 22) == 0 ||
                            strncmp(l, "profd_exe_cache_build_seconds", 29) == 0 ||
                            strncmp(l, "profd_process_event_hook", 24) == 0)
                                printf("     %s\n", l);
        free(metrics);

        tracker = proc_tracker_free(tracker);
        sd_event_unref(event);
        printf("%s\n", failures ? "FAILED" : "all checks passed");
        return failures ? 1 : 0;
}
