/* SPDX-License-Identifier: GPL-2.0-only */
/* Reading another process's memory without ever waiting on its owner. process_vm_readv() faults
 * the pages in: a page of a file on FUSE (or a network filesystem) is read through whoever serves
 * it, who may never answer, and the event loop would wait with it. So reads are allowed only inside
 * the process's mappings that are anonymous (heap, stacks, arenas) or of files on filesystems the
 * kernel serves itself; the mappings and the filesystem of each come from /proc/PID/maps and
 * /proc/PID/mountinfo, read when the snapshot is taken. The process may map such a file under an
 * address after that: the read itself runs in a child process, waited for at most 100 ms, killed
 * past that (remote-memory.c). (userfaultfd cannot hold such a read:
 * unprivileged users get user-mode-only handling, which does not see faults of remote reads.) */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "util/macro.h"

typedef struct RemoteMemory RemoteMemory;

/* Mappings kept per snapshot; a process with more has the rest refused (counted by the caller's
 * errors: -EFAULT). */
#define REMOTE_MEMORY_MAX_RANGES 65536

/* Snapshot of where pid's memory may be read. -ESRCH: gone; -EACCES/-EPERM; -ENOMEM. */
int remote_memory_open(pid_t pid, RemoteMemory **ret);
RemoteMemory *remote_memory_free(RemoteMemory *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(RemoteMemory *, remote_memory_free);

/* n bytes at addr. -EFAULT: not (wholly) inside readable memory the snapshot allows, or unmapped
 * now; -ENOTSUP: inside a mapping of a file on FUSE or a network filesystem (never read); -ESRCH:
 * the process is gone; -ETIMEDOUT: the read did not finish in time (the process is not read again
 * for a minute); -EIO: the reader process died or did not start (the next read starts another);
 * -EINVAL: more than 64 KiB. */
int remote_memory_read(const RemoteMemory *m, uint64_t addr, void *buf, size_t n);

/* Reads made so far, whatever their result (not those refused or blocked before reading): callers
 * count their own share by the difference. */
uint64_t remote_memory_reads_done(void);
/* Prometheus text: profd_remote_reads_total{result}, profd_remote_reader_starts_total. */
void remote_memory_write_metrics(FILE *f);

/* Whether a filesystem type (mountinfo's, e.g. "fuse.sshfs") may block reads on a user: FUSE and
 * network filesystems. */
bool remote_memory_fstype_untrusted(const char *fstype);
