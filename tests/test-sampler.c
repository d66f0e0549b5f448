/* SPDX-License-Identifier: GPL-2.0-only */
/* Loads the real BPF sampler, runs two busy children (one in user space, one in read(2) of
 * /dev/zero), and checks what the sampler reports for them: a plausible sample count, complete
 * frame-pointer user stacks inside this executable (also when the sample hit the kernel),
 * kernel frames for the syscall child, names, and intervals that tile time without gaps. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sampler/sampler.h"

#define FREQ_HZ 199
#define RUN_SECONDS 2
/* A return address lies a few bytes after a call instruction inside its caller. */
#define FUNC_SPAN 256

static volatile uint64_t sink;

/* The volatile local makes the leaf use its stack: gcc sets up no frame (even with
 * -fno-omit-frame-pointer) in a function that does not, and its caller would then be skipped. */
__attribute__((noinline)) static void busy_leaf(void)
{
        volatile uint64_t acc[2] = {0, 0};

        for (int i = 0; i < 1000; i++)
                acc[i & 1] = acc[(i + 1) & 1] * 31 + i;
        sink = acc[0];
}

__attribute__((noinline)) static void busy_mid(void)
{
        for (;;) {
                busy_leaf();
                __asm__ volatile("" ::: "memory");
        }
}

__attribute__((noinline)) static void sys_mid(void)
{
        static char buf[1 << 16];
        long fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);

        /* The syscall instruction inline, not libc's read(): libc has no frame pointers, so the
         * user pc must be in this function for the chain check to be exact. */
        for (;;) {
#if defined(__aarch64__)
                register long x0 __asm__("x0") = fd;
                register long x1 __asm__("x1") = (long)buf;
                register long x2 __asm__("x2") = sizeof(buf);
                register long x8 __asm__("x8") = SYS_read;

                __asm__ volatile("svc #0" : "+r"(x0) : "r"(x1), "r"(x2), "r"(x8) : "memory");
                long ret = x0;
#else
                long ret;

                __asm__ volatile("syscall"
                                 : "=a"(ret)
                                 : "0"((long)SYS_read), "D"(fd), "S"(buf), "d"(sizeof(buf))
                                 : "rcx", "r11", "memory");
#endif
                if (ret < 0)
                        _exit(3);
        }
}

static uint64_t exe_start, exe_end;

typedef struct Stats {
        pid_t pid;
        uint64_t samples, with_user, in_exe, chain_ok, with_kernel, kernel_with_user_chain;
        uint64_t cpu_ns;
        bool comm_ok, printed;
} Stats;

static Stats busy = {}, sys = {};
static uint64_t last_end, intervals, gaps, total_records;

static bool in_func(uint64_t pc, void (*f)(void))
{
        return pc > (uint64_t)f && pc < (uint64_t)f + FUNC_SPAN;
}

static bool has_frame_in(const SampleRecord *r, void (*f)(void))
{
        for (uint32_t i = 0; i < r->n_user; i++)
                if (in_func(r->user_frames[i], f))
                        return true;
        return false;
}

static void account(Stats *st, const SampleRecord *r, void (*mid)(void), const char *comm)
{
        st->samples += r->count;
        if (strcmp(r->comm, comm) == 0 && strcmp(r->thread_comm, comm) == 0)
                st->comm_ok = true;
        if (r->n_user == 0)
                return;
        st->with_user += r->count;
        if (!st->printed && r->n_kernel > 0) {
                st->printed = true;
                printf("%s pid %u stack (user flags 0x%x):", comm, r->pid, r->user_flags);
                for (uint32_t i = 0; i < r->n_user; i++)
                        printf(" %#" PRIx64, r->user_frames[i]);
                printf(" | kernel:");
                for (uint32_t i = 0; i < r->n_kernel; i++)
                        printf(" %#" PRIx64, r->kernel_frames[i]);
                printf("\n");
        }
        if (r->user_frames[0] >= exe_start && r->user_frames[0] < exe_end)
                st->in_exe += r->count;
        if (has_frame_in(r, mid))
                st->chain_ok += r->count;
        if (r->n_kernel > 0) {
                st->with_kernel += r->count;
                if (has_frame_in(r, mid))
                        st->kernel_with_user_chain += r->count;
        }
}

static void on_interval(void *userdata, uint64_t start_ns, uint64_t end_ns, const SampleRecord *records,
                        size_t n)
{
        if (last_end && start_ns != last_end)
                gaps++;
        last_end = end_ns;
        intervals++;
        total_records += n;
        for (size_t i = 0; i < n; i++) {
                const SampleRecord *r = &records[i];

                if ((pid_t)r->pid == busy.pid)
                        account(&busy, r, busy_mid, "profd-busy");
                else if ((pid_t)r->pid == sys.pid)
                        account(&sys, r, sys_mid, "profd-sys");
        }
}

static int on_stop(sd_event_source *s, uint64_t usec, void *userdata)
{
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

static int on_extra_cut(sd_event_source *s, uint64_t usec, void *userdata)
{
        uint64_t t;

        /* Two cuts back to back: the second coalesces with the first while it drains. */
        if (sampler_cut(userdata, &t) < 0 || sampler_cut(userdata, &t) < 0)
                fprintf(stderr, "sampler_cut failed\n");
        return 0;
}

static void find_exe_mapping(void)
{
        char exe[4096], line[8192];
        ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        FILE *f = fopen("/proc/self/maps", "re");

        if (k <= 0 || !f)
                exit(1);
        exe[k] = 0;
        while (fgets(line, sizeof(line), f)) {
                uint64_t a, b;
                char perms[8];
                char *path = strchr(line, '/');

                if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s", &a, &b, perms) != 3 || !path)
                        continue;
                path[strcspn(path, "\n")] = 0;
                if (perms[2] == 'x' && strcmp(path, exe) == 0) {
                        exe_start = a;
                        exe_end = b;
                }
        }
        fclose(f);
}

__attribute__((noinline)) static pid_t spawn(void (*body)(void), const char *name)
{
        pid_t pid = fork();

        if (pid == 0) {
                prctl(PR_SET_NAME, name);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                body();
                _exit(0);
        }
        return pid;
}

/* Kills and reaps a child; returns the CPU time it used, which is what samples measure (the
 * machine may be busy with other work, so wall time says little). */
static int fail(const char *what, uint64_t got, const char *want)
{
        fprintf(stderr, "FAIL: %s: got %" PRIu64 ", want %s\n", what, got, want);
        return 1;
}

static int on_phase(sd_event_source *src, uint64_t usec, void *userdata)
{
        *(bool *)userdata = true;
        return 0;
}

/* sd_event_exit() would end the loop for good: phases use a flag instead. */
static void run_for(sd_event *e, uint64_t usec)
{
        bool done = false;

        sd_event_add_time_relative(e, NULL, CLOCK_MONOTONIC, usec, 0, on_phase, &done);
        while (!done)
                if (sd_event_run(e, UINT64_MAX) < 0)
                        break;
}

static void write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "we");

        if (f) {
                fputs(text, f);
                fclose(f);
        }
}

static void on_interval_ignore(void *userdata, uint64_t start_ns, uint64_t end_ns,
                               const SampleRecord *records, size_t n)
{
}

/* CPU hotplug as the sampler sees it: the online list it reads is a file here, so CPUs can "come
 * online" without taking real ones away from the machine. The perf events are real. */
static int test_hotplug(void)
{
        char path[] = "/tmp/profd-test-online-XXXXXX", real[256] = "";
        SamplerOptions o = {.frequency_hz = FREQ_HZ, .drain_interval_ns = 250 * 1000 * 1000ULL};
        Sampler *s = NULL;
        sd_event *e = NULL;
        size_t n0, n1, n2, n3;
        int fd, failures = 0;
        FILE *f = fopen("/sys/devices/system/cpu/online", "re");

        if (!f || !fgets(real, sizeof(real), f)) {
                if (f)
                        fclose(f);
                return fail("read /sys/devices/system/cpu/online", 0, "1");
        }
        fclose(f);
        if (strchr(real, '-') == NULL && strchr(real, ',') == NULL) {
                printf("hotplug: one online CPU (%s), nothing to add: skipped\n", real);
                return 0;
        }
        fd = mkstemp(path);
        if (fd < 0)
                return fail("mkstemp", errno, "0");
        close(fd);
        write_file(path, "0\n");
        o.online_cpus_path = path;
        if (sd_event_new(&e) < 0 || sampler_new(e, &o, on_interval_ignore, NULL, &s) < 0 ||
            sampler_start(s) < 0) {
                unlink(path);
                return fail("hotplug sampler start", 0, "0");
        }
        n0 = sampler_n_cpus(s);
        write_file(path, real);
        run_for(e, 2600 * 1000);
        n1 = sampler_n_cpus(s);
        write_file(path, "0\n"); /* every other CPU goes offline */
        run_for(e, 2600 * 1000);
        n2 = sampler_n_cpus(s);
        write_file(path, real); /* and comes back: new events */
        run_for(e, 2600 * 1000);
        n3 = sampler_n_cpus(s);
        printf("hotplug: online %s sampled CPUs: %zu at start (list \"0\"), %zu after the list grew, %zu "
               "while "
               "the others were offline, %zu after they came back\n",
               strtok(real, "\n"), n0, n1, n2, n3);
        char *text = NULL;
        size_t text_size = 0;
        FILE *m = open_memstream(&text, &text_size);
        unsigned long late = 0;

        if (m) {
                sampler_write_metrics(s, m);
                fclose(m);
        }
        const char *l = text ? strstr(text, "\nprofd_sampled_cpus_attached_late_total ") : NULL;
        if (l)
                late = strtoul(l + strlen("\nprofd_sampled_cpus_attached_late_total "), NULL, 10);
        free(text);
        printf("hotplug: CPUs attached after start: %lu\n", late);
        if (late != 2 * (n1 - 1))
                failures +=
                        fail("CPUs attached after start (came online, came back)", late, "2 x (CPUs - 1)");
        if (n0 != 1)
                failures += fail("CPUs sampled with online list \"0\"", n0, "1");
        if (n1 < 2)
                failures += fail("CPUs sampled after more came online", n1, ">= 2");
        if (n3 != n1)
                failures += fail("CPUs sampled after going offline and back", n3, "as before");
        sampler_free(s);
        sd_event_unref(e);
        unlink(path);
        return failures;
}

static uint64_t reap(pid_t pid)
{
        struct rusage ru = {};

        kill(pid, SIGKILL);
        if (wait4(pid, NULL, 0, &ru) < 0)
                return 0;
        return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ULL +
               (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ULL;
}

int main(void)
{
        _cleanup_(sampler_freep) Sampler *s = NULL;
        sd_event *e = NULL;
        SamplerOptions o = {.frequency_hz = FREQ_HZ, .drain_interval_ns = 250 * 1000 * 1000ULL};
        uint64_t expected;
        int r, failures = 0;

        if (geteuid() != 0) {
                fprintf(stderr, "SKIP: test-sampler needs root to load BPF programs\n");
                return 77;
        }
        find_exe_mapping();
        if (!exe_start)
                return fail("executable mapping found", 0, "1");
        printf("executable text %#" PRIx64 "-%#" PRIx64 ", busy_leaf %p busy_mid %p sys_mid %p spawn %p\n",
               exe_start, exe_end, (void *)busy_leaf, (void *)busy_mid, (void *)sys_mid, (void *)spawn);

        if (sd_event_new(&e) < 0)
                return 1;
        r = sampler_new(e, &o, on_interval, NULL, &s);
        if (r < 0)
                return fail("sampler_new", -r, "0");
        r = sampler_start(s);
        if (r < 0) {
                fprintf(stderr, "FAIL: sampler_start: %s\n", strerror(-r));
                return 1;
        }

        busy.pid = spawn(busy_mid, "profd-busy");
        sys.pid = spawn(sys_mid, "profd-sys");

        sd_event_add_time_relative(e, NULL, CLOCK_MONOTONIC, 700 * 1000, 0, on_extra_cut, s);
        sd_event_add_time_relative(e, NULL, CLOCK_MONOTONIC, RUN_SECONDS * USEC_PER_SEC, 0, on_stop, NULL);
        r = sd_event_loop(e);
        busy.cpu_ns = reap(busy.pid);
        sys.cpu_ns = reap(sys.pid);

        /* Flush the last interval through the callback. */
        uint64_t cut;
        if (sampler_cut(s, &cut) == 0) {
                sd_event_add_time_relative(e, NULL, CLOCK_MONOTONIC, 100 * 1000, 0, on_stop, NULL);
                sd_event_loop(e);
        }

        printf("intervals %" PRIu64 ", records %" PRIu64 ", gaps %" PRIu64 "\n", intervals, total_records,
               gaps);
        printf("busy: samples %" PRIu64 " with_user %" PRIu64 " in_exe %" PRIu64 " chain %" PRIu64 "\n",
               busy.samples, busy.with_user, busy.in_exe, busy.chain_ok);
        printf("sys: samples %" PRIu64 " with_user %" PRIu64 " chain %" PRIu64 " with_kernel %" PRIu64
               " kernel+chain %" PRIu64 "\n",
               sys.samples, sys.with_user, sys.chain_ok, sys.with_kernel, sys.kernel_with_user_chain);
        sampler_write_metrics(s, stdout);

        if (intervals < 5)
                failures += fail("intervals", intervals, ">= 5");
        if (gaps)
                failures += fail("gaps between intervals", gaps, "0");
        /* cpu-clock samples measure CPU time: FREQ_HZ per CPU second, within sampling noise. */
        expected = busy.cpu_ns * FREQ_HZ / 1000000000ULL;
        printf("busy child used %.3f s CPU: %" PRIu64 " samples expected\n", busy.cpu_ns / 1e9, expected);
        if (expected < 20 || busy.samples * 10 < expected * 7 || busy.samples * 10 > expected * 13)
                failures += fail("busy child samples", busy.samples, "CPU seconds * FREQ_HZ +- 30%");
        if (!busy.comm_ok)
                failures += fail("busy child comm", 0, "profd-busy");
        if (busy.in_exe * 100 < busy.samples * 95)
                failures += fail("busy samples with leaf pc in the executable", busy.in_exe, ">= 95%");
        if (busy.chain_ok * 100 < busy.samples * 90)
                failures += fail("busy samples with busy_mid on the stack", busy.chain_ok, ">= 90%");
        expected = sys.cpu_ns * FREQ_HZ / 1000000000ULL;
        printf("syscall child used %.3f s CPU: %" PRIu64 " samples expected\n", sys.cpu_ns / 1e9, expected);
        if (expected < 20 || sys.samples * 10 < expected * 7 || sys.samples * 10 > expected * 13)
                failures += fail("syscall child samples", sys.samples, "CPU seconds * FREQ_HZ +- 30%");
        if (sys.with_kernel * 2 < sys.samples)
                failures += fail("syscall child samples in the kernel", sys.with_kernel, ">= 50%");
        if (sys.kernel_with_user_chain * 100 < sys.with_kernel * 90)
                failures += fail("kernel samples with sys_mid on the user stack", sys.kernel_with_user_chain,
                                 ">= 90%");
        if (sys.in_exe * 100 < sys.samples * 90)
                failures += fail("syscall samples with user pc in the executable", sys.in_exe, ">= 90%");

        s = sampler_free(s);
        sd_event_unref(e);
        failures += test_hotplug();
        if (failures)
                return 1;
        printf("PASS\n");
        return 0;
}
