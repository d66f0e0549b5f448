/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "proc-maps.h"
#include "remote-memory.h"

/* Filesystems (mountinfo's type) whose device numbers appear in the process's maps. */
#define REMOTE_MEMORY_MAX_MOUNTS 4096

typedef struct Range {
        uint64_t start, end;
        unsigned dev_major, dev_minor; /* 0:0 anonymous */
        bool untrusted;                /* file on FUSE / a network filesystem */
} Range;

typedef struct Mount {
        unsigned major, minor;
        bool untrusted;
} Mount;

struct RemoteMemory {
        pid_t pid;
        Range *ranges; /* sorted by start (maps lists them in order) */
        size_t n_ranges, cap_ranges;
        Mount *mounts;
        size_t n_mounts;
};

bool remote_memory_fstype_untrusted(const char *fstype)
{
        /* coda and pvfs2 (OrangeFS) are also answered by a daemon in user space (venus, client-core). */
        static const char *const network[] = {"nfs",      "nfs4", "cifs",      "smb3",   "smbfs", "9p",
                                              "ceph",     "afs",  "glusterfs", "lustre", "gfs2",  "ocfs2",
                                              "virtiofs", "coda", "pvfs2",     "beegfs", "gpfs"};

        if (strncmp(fstype, "fuse", 4) == 0) /* fuse, fuseblk, fuse.sshfs, fuse.fuse-overlayfs ... */
                return true;
        for (size_t i = 0; i < ELEMENTSOF(network); i++)
                if (strcmp(fstype, network[i]) == 0)
                        return true;
        return false;
}

RemoteMemory *remote_memory_free(RemoteMemory *m)
{
        if (!m)
                return NULL;
        free(m->ranges);
        free(m->mounts);
        free(m);
        return NULL;
}

/* A mountinfo file: "ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE ...".
 * Device numbers name a filesystem instance host-wide, so any view of it tells its type. */
static int read_mounts(RemoteMemory *m, const char *path)
{
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;

        f = fopen(path, "re");
        /* EINVAL: the process has no mount namespace any more: it exited and is not reaped yet. */
        if (!f)
                return errno == ENOENT || errno == EINVAL ? -ESRCH : -errno;
        if (!m->mounts) {
                m->mounts = calloc(REMOTE_MEMORY_MAX_MOUNTS, sizeof(*m->mounts));
                if (!m->mounts)
                        return -ENOMEM;
        }
        while (getline(&line, &cap, f) > 0 && m->n_mounts < REMOTE_MEMORY_MAX_MOUNTS) {
                unsigned major, minor;
                char *sep = strstr(line, " - "), fstype[64];

                if (sscanf(line, "%*u %*u %u:%u", &major, &minor) != 2 || !sep ||
                    sscanf(sep + 3, "%63s", fstype) != 1)
                        continue;
                m->mounts[m->n_mounts++] = (Mount){major, minor, remote_memory_fstype_untrusted(fstype)};
        }
        return 0;
}

/* A device no mount names (a filesystem mounted in another namespace only, since gone) is
 * untrusted: nothing says what serves it. */
static bool device_untrusted(const RemoteMemory *m, unsigned major, unsigned minor)
{
        bool found = false;

        for (size_t i = 0; i < m->n_mounts; i++)
                if (m->mounts[i].major == major && m->mounts[i].minor == minor) {
                        if (m->mounts[i].untrusted)
                                return true;
                        found = true;
                }
        return !found;
}

static int add_range(const ProcMapsLine *l, void *userdata)
{
        RemoteMemory *m = userdata;
        Range *r;

        if (!l->readable)
                return 0;
        if (m->n_ranges >= REMOTE_MEMORY_MAX_RANGES)
                return 0;
        if (m->n_ranges == m->cap_ranges) {
                size_t cap = m->cap_ranges ? m->cap_ranges * 2 : 64;
                Range *n = reallocarray(m->ranges, cap, sizeof(*n));

                if (!n)
                        return -ENOMEM;
                m->ranges = n;
                m->cap_ranges = cap;
        }
        r = &m->ranges[m->n_ranges++];
        *r = (Range){.start = l->start, .end = l->end, .dev_major = l->dev_major, .dev_minor = l->dev_minor};
        /* Anonymous memory (and the kernel's own [heap], [stack]) is never served by a user;
         * [vvar]/[vsyscall] and device mappings fail the read by themselves. */
        if (l->inode != 0 || l->dev_major != 0 || l->dev_minor != 0)
                r->untrusted = device_untrusted(m, l->dev_major, l->dev_minor);
        return 0;
}

int remote_memory_open(pid_t pid, RemoteMemory **ret)
{
        _cleanup_(remote_memory_freep) RemoteMemory *m = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        char path[64];
        int r;

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->pid = pid;
        /* The process's own view (its mount namespace), then profd's: a chroot hides the mounts
         * above its root from the process's mountinfo, not from its maps. */
        snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
        r = read_mounts(m, path);
        if (r < 0)
                return r;
        r = read_mounts(m, "/proc/self/mountinfo");
        if (r < 0)
                return r;
        snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? -ESRCH : -errno;
        r = proc_maps_read(f, add_range, m, NULL);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(m);
        return 0;
}

static const Range *find_range(const RemoteMemory *m, uint64_t addr)
{
        size_t lo = 0, hi = m->n_ranges;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (m->ranges[mid].end <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < m->n_ranges && m->ranges[lo].start <= addr ? &m->ranges[lo] : NULL;
}

int remote_memory_read(const RemoteMemory *m, uint64_t addr, void *buf, size_t n)
{
        struct iovec local = {.iov_base = buf, .iov_len = n};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = n};
        uint64_t at = addr;
        ssize_t k;

        if (n == 0)
                return 0;
        if (addr + n < addr)
                return -EFAULT;
        /* Every byte inside allowed ranges (a read may span adjacent mappings). */
        while (at < addr + n) {
                const Range *r = find_range(m, at);

                if (!r)
                        return -EFAULT;
                if (r->untrusted)
                        return -ENOTSUP;
                at = r->end;
        }
        k = process_vm_readv(m->pid, &local, 1, &remote, 1, 0);
        if (k < 0)
                return errno == ESRCH ? -ESRCH : -EFAULT;
        return (size_t)k == n ? 0 : -EFAULT;
}
