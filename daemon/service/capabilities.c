/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "service/capabilities.h"
#include "util/log.h"

/* Older uapi headers than the kernels profd runs on. */
#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif
#ifndef CAP_CHECKPOINT_RESTORE
#define CAP_CHECKPOINT_RESTORE 40
#endif

/* Mirrors the kernel's own checks: bpf_capable() and perfmon_capable() accept CAP_SYS_ADMIN, and so
 * does checkpoint_restore_ns_capable() for /proc/PID/map_files. */
static const CapabilityNeed needed[] = {
        {CAP_BPF, CAP_SYS_ADMIN, "CAP_BPF", "to load the BPF sampling programs and create their maps"},
        {CAP_PERFMON, CAP_SYS_ADMIN, "CAP_PERFMON",
         "to open system-wide perf events on every CPU and attach tracing programs"},
        {CAP_SYS_PTRACE, -1, "CAP_SYS_PTRACE", "to read /proc/PID/maps of other users' processes"},
        {CAP_DAC_READ_SEARCH, -1, "CAP_DAC_READ_SEARCH",
         "to read every process's executables and libraries"},
        {CAP_CHECKPOINT_RESTORE, CAP_SYS_ADMIN, "CAP_CHECKPOINT_RESTORE",
         "to open mapped files through /proc/PID/map_files"},
        {CAP_SYSLOG, -1, "CAP_SYSLOG", "to read kernel symbol addresses from /proc/kallsyms"},
};

const CapabilityNeed *capabilities_needed(size_t *ret_n)
{
        *ret_n = ELEMENTSOF(needed);
        return needed;
}

int capabilities_effective(uint64_t *ret)
{
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
        struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {};

        if (syscall(SYS_capget, &h, d) < 0)
                return -errno;
        *ret = (uint64_t)d[0].effective | ((uint64_t)d[1].effective << 32);
        return 0;
}

static int read_int_file(const char *path, int *ret)
{
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        if (fscanf(f, "%d", ret) != 1)
                return -EINVAL;
        return 0;
}

/* The kernel shows real /proc/kallsyms addresses without CAP_SYSLOG only when kptr_restrict is 0
 * and perf_event_paranoid <= 1 (kallsyms_show_value()); Debian's default paranoia (3) needs it. */
static bool kallsyms_needs_syslog(void)
{
        int kptr = 1, paranoid = 2;
        (void)read_int_file("/proc/sys/kernel/kptr_restrict", &kptr);
        (void)read_int_file("/proc/sys/kernel/perf_event_paranoid", &paranoid);
        if (kptr >= 2)
                log_warning("kernel.kptr_restrict=%d hides kernel addresses from everyone: kernel frames "
                            "will not be named",
                            kptr);
        return !(kptr == 0 && paranoid <= 1);
}

int capabilities_check(const CapabilityNeed **ret_missing)
{
        uint64_t eff;
        int r;

        r = capabilities_effective(&eff);
        if (r < 0)
                return log_error_errno(r, "Failed to read this process's capabilities: %m");

        for (size_t i = 0; i < ELEMENTSOF(needed); i++) {
                const CapabilityNeed *c = &needed[i];
                bool have = eff & (1ULL << c->cap);
                if (!have && c->alt_cap >= 0)
                        have = eff & (1ULL << c->alt_cap);
                if (have)
                        continue;
                if (c->cap == CAP_SYSLOG && !kallsyms_needs_syslog())
                        continue;
                log_error("profd: missing capability %s (needed %s); run as root or grant it, e.g. "
                          "AmbientCapabilities= in profd.service",
                          c->name, c->why);
                if (ret_missing)
                        *ret_missing = c;
                return -EPERM;
        }
        return 0;
}

int kernel_check_release(const char *release)
{
        unsigned major = 0, minor = 0;

        if (sscanf(release, "%u.%u", &major, &minor) == 2 &&
            (major < PROFD_MIN_KERNEL_MAJOR ||
             (major == PROFD_MIN_KERNEL_MAJOR && minor < PROFD_MIN_KERNEL_MINOR))) {
                log_error("profd: unsupported kernel %s: Linux %d.%d or newer is needed (see docs/kernels.md)",
                          release, PROFD_MIN_KERNEL_MAJOR, PROFD_MIN_KERNEL_MINOR);
                return -EOPNOTSUPP;
        }
        /* A known kernel bug, not a missing feature, so a version is all there is to go by: on 5.19 and
         * 6.0 a BPF program reading user memory from a perf event (every sample profd takes) can lock up
         * the machine (Debian bug #1033398, parca-agent #1675). Fixed in 6.1 and later stable releases;
         * those two series ended without the fix. */
        if ((major == 5 && minor == 19) || (major == 6 && minor == 0)) {
                const char *allow = getenv("PROFD_ALLOW_UNSAFE_KERNEL");

                if (!allow || strcmp(allow, "1") != 0) {
                        log_error("profd: kernel %s has a known bug that can freeze the whole machine when BPF "
                                  "reads user memory from perf events, as profd does on every sample "
                                  "(5.19 and 6.0; fixed from 6.1, see docs/kernels.md). Upgrade the kernel, "
                                  "or set PROFD_ALLOW_UNSAFE_KERNEL=1 to run anyway",
                                  release);
                        return -EOPNOTSUPP;
                }
                log_warning("Kernel %s has a known bug that can freeze the machine under BPF profiling; running "
                            "anyway because PROFD_ALLOW_UNSAFE_KERNEL=1",
                            release);
        }
        return 0;
}

int kernel_check_supported(void)
{
        struct utsname u;
        int r;

        if (uname(&u) < 0)
                return log_error_errno(-errno, "profd: cannot read the kernel release: %m");
        r = kernel_check_release(u.release);
        if (r < 0)
                return r;
        /* CO-RE relocations need the running kernel's type information. */
        if (access("/sys/kernel/btf/vmlinux", R_OK) < 0) {
                log_error("profd: unsupported kernel: /sys/kernel/btf/vmlinux is missing (kernel built "
                          "without "
                          "CONFIG_DEBUG_INFO_BTF); profd needs kernel BTF");
                return -EOPNOTSUPP;
        }
        return 0;
}
