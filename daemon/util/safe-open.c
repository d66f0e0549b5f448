/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/macro.h"
#include "util/metrics-writer.h"
#include "util/safe-open.h"

enum {
        REFUSED_NOT_REGULAR,
        REFUSED_SYMLINK,
        REFUSED_IDENTITY,
        REFUSED_WOULD_BLOCK,
        _REFUSED_MAX,
};
static const char *const refused_names[_REFUSED_MAX] = {
        [REFUSED_NOT_REGULAR] = "not_regular",
        [REFUSED_SYMLINK] = "symlink",
        [REFUSED_IDENTITY] = "identity_mismatch",
        [REFUSED_WOULD_BLOCK] = "would_block",
};
static const char *const via_names[_SAFE_OPEN_VIA_MAX] = {
        [SAFE_OPEN_VIA_MAP_FILES] = "map_files",
        [SAFE_OPEN_VIA_PROC_ROOT] = "proc_root",
        [SAFE_OPEN_VIA_HOST] = "host",
        [SAFE_OPEN_VIA_DEBUG] = "debug_file",
};

/* The daemon has one thread; these are its counters. */
static struct {
        uint64_t opened[_SAFE_OPEN_VIA_MAX];
        uint64_t refused[_REFUSED_MAX];
        uint64_t maps_identity_differs;
        int have_openat2; /* -1: not probed yet */
} state = {.have_openat2 = -1};

void file_identity_from_stat(const struct stat *st, FileIdentity *ret)
{
        *ret = (FileIdentity){
                .dev = st->st_dev,
                .ino = st->st_ino,
                .size = (uint64_t)st->st_size,
                .mtime_ns = (int64_t)st->st_mtim.tv_sec * (int64_t)NSEC_PER_SEC + st->st_mtim.tv_nsec,
                .ctime_ns = (int64_t)st->st_ctim.tv_sec * (int64_t)NSEC_PER_SEC + st->st_ctim.tv_nsec,
        };
}

bool file_identity_equal(const FileIdentity *a, const FileIdentity *b)
{
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns &&
               a->ctime_ns == b->ctime_ns;
}

static int refuse(unsigned reason, int r)
{
        state.refused[reason]++;
        return r;
}

/* openat2() is in Linux 5.6+; glibc 2.36 has no wrapper. Probed once: ENOSYS, or EPERM from a
 * seccomp filter that predates it, means resolving the old way. */
static bool have_openat2(void)
{
        if (state.have_openat2 < 0) {
                struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_MAGICLINKS};
                long fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
                state.have_openat2 = fd >= 0;
                if (fd >= 0)
                        close((int)fd);
        }
        return state.have_openat2 > 0;
}

/* An O_PATH descriptor of path under dirfd (AT_FDCWD with an absolute path: profd's root).
 * in_root: dirfd is a root to stay in. follow: symlinks are followed (inside that root);
 * else any symlink on the way is -ELOOP. Magic links (/proc/PID/...) are never followed. */
static int resolve_path(int dirfd, bool in_root, const char *path, bool follow)
{
        int fd;

        if (have_openat2()) {
                struct open_how how = {
                        .flags = O_PATH | O_CLOEXEC,
                        .resolve = RESOLVE_NO_MAGICLINKS | (in_root ? RESOLVE_IN_ROOT : 0) |
                                   (follow ? 0 : RESOLVE_NO_SYMLINKS),
                };
                fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        } else
                /* Older kernels: only the last component is kept from being a symlink (an earlier
                 * one may lead anywhere); what it leads to is still checked like any other file. */
                fd = openat(dirfd, in_root ? path + strspn(path, "/") : path,
                            O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
        if (fd < 0)
                return errno == ELOOP ? refuse(REFUSED_SYMLINK, -ELOOP) : -errno;
        return fd;
}

/* Checks what an O_PATH descriptor refers to, then opens it for reading: through /proc/self/fd,
 * which reopens that very inode without resolving any path again. */
static int reopen_regular(int path_fd, struct stat *st)
{
        char p[64];
        int fd;

        if (fstat(path_fd, st) < 0)
                return -errno;
        if (S_ISLNK(st->st_mode))
                return refuse(REFUSED_SYMLINK, -ELOOP);
        if (!S_ISREG(st->st_mode))
                return refuse(REFUSED_NOT_REGULAR, S_ISDIR(st->st_mode) ? -EISDIR : -EBADFD);
        snprintf(p, sizeof(p), "/proc/self/fd/%d", path_fd);
        /* O_NONBLOCK: an open that has to wait (a lease held by the file's owner) fails at once. */
        fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return errno == EWOULDBLOCK ? refuse(REFUSED_WOULD_BLOCK, -EAGAIN) : -errno;
        return fd;
}

static int open_mapping_by_path(const SafeMapping *m, pid_t root_pid, FileIdentity *ret_id)
{
        _cleanup_close_ int root_fd = -1, path_fd = -1;
        struct stat st;
        FileIdentity id;
        int fd;

        if (root_pid > 0) {
                char root[64];
                snprintf(root, sizeof(root), "/proc/%d/root", (int)root_pid);
                root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (root_fd < 0)
                        return -errno;
        }
        path_fd = resolve_path(root_fd >= 0 ? root_fd : AT_FDCWD, root_fd >= 0, m->path, false);
        if (path_fd < 0)
                return path_fd;
        if (fstat(path_fd, &st) < 0)
                return -errno;
        file_identity_from_stat(&st, &id);
        /* Checked before the file is opened: a path that now names another file (replaced,
         * or another namespace's) is never opened at all. */
        if (S_ISREG(st.st_mode) &&
            (m->known ? !file_identity_equal(m->known, &id) : st.st_dev != m->dev || st.st_ino != m->ino))
                return refuse(REFUSED_IDENTITY, -ESTALE);
        fd = reopen_regular(path_fd, &st);
        if (fd < 0)
                return fd;
        state.opened[root_pid > 0 ? SAFE_OPEN_VIA_PROC_ROOT : SAFE_OPEN_VIA_HOST]++;
        if (ret_id)
                *ret_id = id;
        return fd;
}

int safe_open_mapping(const SafeMapping *m, FileIdentity *ret_id, bool *ret_matches_maps)
{
        struct stat st;
        FileIdentity id;
        int fd, r;

        if (m->alive) {
                _cleanup_close_ int path_fd = -1;
                char p[96];

                snprintf(p, sizeof(p), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)m->pid, m->start,
                         m->end);
                path_fd = open(p, O_PATH | O_CLOEXEC);
                if (path_fd >= 0) {
                        bool matches;

                        if (fstat(path_fd, &st) < 0)
                                return -errno;
                        file_identity_from_stat(&st, &id);
                        if (S_ISREG(st.st_mode) && m->known && !file_identity_equal(m->known, &id))
                                return refuse(REFUSED_IDENTITY, -ESTALE);
                        fd = reopen_regular(path_fd, &st);
                        if (fd < 0)
                                return fd;
                        matches = id.dev == m->dev && id.ino == m->ino;
                        state.opened[SAFE_OPEN_VIA_MAP_FILES]++;
                        state.maps_identity_differs += !matches;
                        if (ret_id)
                                *ret_id = id;
                        if (ret_matches_maps)
                                *ret_matches_maps = matches;
                        return fd;
                }
                /* ENOENT: unmapped since; EPERM/EACCES: no CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE. */
        }
        if (m->deleted || m->path[0] != '/' || m->ino == 0)
                return -ENOENT;
        r = -ENOENT;
        if (m->alive) {
                r = open_mapping_by_path(m, m->pid, ret_id);
                /* A refusal stands: the same path in profd's root is no better. */
                if (r >= 0 || r == -ELOOP || r == -ESTALE || r == -EBADFD || r == -EISDIR || r == -EAGAIN)
                        goto done;
        }
        /* The process is gone (or its root unreachable): the same path in profd's root, if it is
         * still that very file. */
        r = open_mapping_by_path(m, 0, ret_id);
done:
        if (r >= 0 && ret_matches_maps)
                *ret_matches_maps = true;
        return r;
}

static int open_in_root(const char *root, const char *path, bool follow, struct stat *ret_st)
{
        _cleanup_close_ int root_fd = -1, path_fd = -1;
        struct stat st;
        int fd;

        if (!path || path[0] != '/')
                return -EINVAL;
        if (root && root[0] && strcmp(root, "/") != 0) {
                root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (root_fd < 0)
                        return -errno;
        }
        path_fd = resolve_path(root_fd >= 0 ? root_fd : AT_FDCWD, root_fd >= 0, path, follow);
        if (path_fd < 0)
                return path_fd;
        fd = reopen_regular(path_fd, &st);
        if (fd < 0)
                return fd;
        state.opened[follow ? SAFE_OPEN_VIA_DEBUG : SAFE_OPEN_VIA_PROC_ROOT]++;
        if (ret_st)
                *ret_st = st;
        return fd;
}

int safe_open_in_root(const char *root, const char *path, struct stat *ret_st)
{
        return open_in_root(root, path, true, ret_st);
}

int safe_open_in_root_nofollow(const char *root, const char *path, struct stat *ret_st)
{
        return open_in_root(root, path, false, ret_st);
}

void safe_open_write_metrics(FILE *f)
{
        metric_labelled(f, "profd_file_opens_total", "counter",
                        "Files opened on a process's behalf, by way: its mapping (/proc/PID/map_files), its "
                        "root (/proc/PID/root/PATH), profd's root (exited processes), separate debug files.",
                        "via", via_names, state.opened, _SAFE_OPEN_VIA_MAX);
        metric_labelled(f, "profd_file_open_refusals_total", "counter",
                        "Files not opened on a process's behalf: not a regular file (FIFO, device, "
                        "directory), a symlink where the path must not have one, another file than the one "
                        "mapped, or an open that would block.",
                        "reason", refused_names, state.refused, _REFUSED_MAX);
        metric_counter(f, "profd_file_maps_identity_differs_total",
                       "Files opened through /proc/PID/map_files whose device or inode differ from "
                       "/proc/PID/maps (overlayfs on older kernels, btrfs): used for that mapping, shared "
                       "only under their own identity.",
                       state.maps_identity_differs);
}
