/* SPDX-License-Identifier: GPL-2.0-only */
/* Opening files on a process's behalf. Whatever a process maps, names in its ELF files
 * (.gnu_debuglink, .gnu_debugaltlink) or puts in its root, profd opens it only as a regular
 * file, never blocking (a FIFO, a lease), never through a symlink or magic link that leads
 * outside what the process itself sees, and for a mapping only the very file the kernel says is
 * mapped (device and inode of /proc/PID/maps, or the identity of an earlier open).
 *
 * How: the path is resolved to an O_PATH descriptor first (nothing is opened: no FIFO or device
 * open), checked with fstat(), and only then reopened through /proc/self/fd/N with
 * O_RDONLY|O_CLOEXEC|O_NONBLOCK|O_NOCTTY. Paths under a process's root are resolved with
 * openat2(RESOLVE_IN_ROOT) where the kernel has it (5.6+). Refusals are counted by reason
 * (safe_open_write_metrics()). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

/* What makes two opens the same file in the same state: device and inode (st_dev, st_ino, as
 * fstat() reports them), plus size and modification/change times, which change with every
 * write (ctime cannot be set by a user). */
typedef struct FileIdentity {
        uint64_t dev, ino, size;
        int64_t mtime_ns, ctime_ns;
} FileIdentity;

void file_identity_from_stat(const struct stat *st, FileIdentity *ret);
bool file_identity_equal(const FileIdentity *a, const FileIdentity *b);

/* A mapping as /proc/PID/maps describes it. */
typedef struct SafeMapping {
        pid_t pid;
        bool alive; /* false: the process is gone, only the path in profd's own root is tried */
        uint64_t start, end;
        const char *path; /* as /proc/PID/maps shows it */
        bool deleted;
        uint64_t dev, ino;         /* as /proc/PID/maps shows them (dev = makedev(major, minor)) */
        const FileIdentity *known; /* identity of an earlier open of this mapping's file, or NULL */
} SafeMapping;

/* Opens the file mapped at [start, end): /proc/PID/map_files/START-END (the kernel's own link to
 * the mapped file; needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), else PATH under /proc/PID/root
 * (never following a symlink: /proc/PID/maps prints resolved paths, so a symlink there means the
 * path was replaced), else PATH in profd's root (for processes that exited). The file must be
 * regular and, when `known` is set, have exactly that identity; opened by path it must also have
 * the device and inode of /proc/PID/maps. What map_files opens is the mapped file even when its
 * device or inode read differently in /proc/PID/maps (overlayfs before Linux 6.x reports the
 * layer's inode there, btrfs the filesystem's device): then *ret_matches_maps is false and
 * callers must not share what they derive from it under the device and inode of
 * /proc/PID/maps. Returns the descriptor, or -ENOENT (nothing to open), -EBADFD/-EISDIR (not a
 * regular file), -ELOOP (symlink), -ESTALE (another file than the mapping's), -EAGAIN (would
 * block: a lease), or another negative errno. */
int safe_open_mapping(const SafeMapping *m, FileIdentity *ret_id, bool *ret_matches_maps);

/* Opens PATH (absolute, as seen from root) under root ("/proc/PID/root"; NULL or "/": profd's
 * own root) for reading: a separate debug file named by build ID or .gnu_debuglink. Symlinks are
 * followed, but only inside root (relative to it, never through a magic link); the result must
 * be a regular file. ret_st (optional) gets its fstat(). Returns the descriptor or a negative
 * errno as above. */
int safe_open_in_root(const char *root, const char *path, struct stat *ret_st);

/* The same, but no symlink anywhere on the path (-ELOOP): a file a process names by a fixed path
 * and anyone may create there (/tmp/perf-PID.map), whose content profd reads and serves. */
int safe_open_in_root_nofollow(const char *root, const char *path, struct stat *ret_st);

/* Ways a file was opened, for metrics. */
typedef enum SafeOpenVia {
        SAFE_OPEN_VIA_MAP_FILES,
        SAFE_OPEN_VIA_PROC_ROOT,
        SAFE_OPEN_VIA_HOST,
        SAFE_OPEN_VIA_DEBUG,
        _SAFE_OPEN_VIA_MAX,
} SafeOpenVia;

void safe_open_write_metrics(FILE *f);
