/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtimes/remote-memory.h"
#include "tracker/proc-maps.h"
#include "util/array.h"
#include "util/metrics-writer.h"
#include "util/time-util.h"

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

/* --- the reader process ---------------------------------------------------------------------------
 * The check above is made on a snapshot; the process may map a FUSE file under the address before
 * the read (there is no way to read another process's memory that fails instead of waiting). So
 * the read itself happens in a child process: the loop waits for its answer at most
 * REMOTE_READ_TIMEOUT_MS; past that the child is killed (a FUSE wait ends on SIGKILL), the read
 * fails with -ETIMEDOUT, the process it was reading is not read again for REMOTE_BLOCK_NS, and
 * no process is for REMOTE_PAUSE_NS. A new child starts at the next read. */
#define REMOTE_READ_TIMEOUT_MS 100
/* A new child says it is ready before its first read is timed: its start (being scheduled on a
 * loaded host) is profd's own work, no user's file; timed with the read, it had a process blocked
 * for a minute (the first read of a test on a 2-CPU host at load 7: every JavaScript frame of that
 * node unnamed). It may take this long, past which the start fails (-EIO, nothing blocked); starts
 * are rare (the first read, after a timeout's pause, after a death). */
#define REMOTE_READER_START_TIMEOUT_MS 1000
/* A read past REMOTE_READ_TIMEOUT_MS whose child is runnable (state R: waiting for a CPU, not in a
 * FUSE or network filesystem wait, where it sleeps) is waited for a little longer, at most this
 * long in all: on a loaded host a child's wake-up alone took over 100 ms, and each such timeout
 * left a process unread for a minute. */
#define REMOTE_READ_RUNNABLE_MAX_MS 1000
#define REMOTE_BLOCK_NS (60 * 1000000000ULL)
/* After a timeout no process is read for this long: many processes doing the same cannot hold the
 * loop more than REMOTE_READ_TIMEOUT_MS per pause (1%). */
#define REMOTE_PAUSE_NS (10 * 1000000000ULL)
#define REMOTE_BLOCKED_MAX 64
#define REMOTE_READ_MAX (64u << 10) /* bytes per request (python-code reads at most 64 KiB) */

typedef struct ReadRequest {
        int32_t pid;
        uint32_t len;
        uint64_t addr;
} ReadRequest;

typedef struct ReadReply {
        int32_t err; /* 0 or negative errno */
        uint32_t len;
} ReadReply;

static struct {
        pid_t child;
        int fd;
        pid_t dead[8]; /* killed children not reaped yet */
        struct {
                pid_t pid;
                uint64_t until_ns;
        } blocked[REMOTE_BLOCKED_MAX];
        uint64_t paused_until_ns;
        uint64_t n_ok, n_failed, n_timeout, n_blocked, n_refused, n_starts;
} reader = {.fd = -1};

__attribute__((noreturn)) static void reader_main(int fd)
{
        static uint8_t buf[sizeof(ReadReply) + REMOTE_READ_MAX];

        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* Ready: an empty reply (see REMOTE_READER_START_TIMEOUT_MS). */
        *(ReadReply *)buf = (ReadReply){};
        if (send(fd, buf, sizeof(ReadReply), MSG_NOSIGNAL) < 0)
                _exit(1);
        for (;;) {
                ReadRequest q;
                ReadReply *a = (ReadReply *)buf;
                ssize_t k = recv(fd, &q, sizeof(q), 0);

                if (k != sizeof(q))
                        _exit(k == 0 ? 0 : 1);
                *a = (ReadReply){};
                if (q.len > REMOTE_READ_MAX)
                        a->err = -EINVAL;
                else {
                        struct iovec local = {.iov_base = buf + sizeof(*a), .iov_len = q.len};
                        struct iovec remote = {.iov_base = (void *)(uintptr_t)q.addr, .iov_len = q.len};

                        k = process_vm_readv(q.pid, &local, 1, &remote, 1, 0);
                        a->err = k < 0                ? (errno == ESRCH ? -ESRCH : -EFAULT)
                                 : (size_t)k == q.len ? 0
                                                      : -EFAULT;
                        a->len = a->err == 0 ? q.len : 0;
                }
                if (send(fd, buf, sizeof(*a) + a->len, MSG_NOSIGNAL) < 0)
                        _exit(1);
        }
}

static void reader_reap(void)
{
        for (size_t i = 0; i < ELEMENTSOF(reader.dead); i++)
                if (reader.dead[i] > 0 && waitpid(reader.dead[i], NULL, WNOHANG) != 0)
                        reader.dead[i] = 0;
}

static void reader_stop(void)
{
        if (reader.child > 0) {
                (void)kill(reader.child, SIGKILL);
                /* Reaped later, without waiting here (it may take a moment to leave the FUSE wait). */
                if (waitpid(reader.child, NULL, WNOHANG) == 0)
                        for (size_t i = 0; i < ELEMENTSOF(reader.dead); i++)
                                if (reader.dead[i] <= 0) {
                                        reader.dead[i] = reader.child;
                                        break;
                                }
        }
        reader.child = 0;
        if (reader.fd >= 0)
                close(reader.fd);
        reader.fd = -1;
}

static int reader_start(void)
{
        int sv[2];
        pid_t pid;

        reader_reap();
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                int r = -errno;
                close(sv[0]);
                close(sv[1]);
                return r;
        }
        if (pid == 0) {
                /* Nothing of the daemon's but the socket: no listening sockets, no BPF objects. */
                if (dup2(sv[1], 3) < 0)
                        _exit(1);
                (void)close_range(4, ~0U, 0);
                reader_main(3);
        }
        close(sv[1]);
        reader.child = pid;
        reader.fd = sv[0];
        reader.n_starts++;
        /* Each read waits in recv() itself, bounded by this timeout: a poll() before it was a third
         * system call per read, and hosts with Python, Java or node processes make hundreds of
         * reads a second. */
        struct timeval tv = {.tv_sec = 0, .tv_usec = REMOTE_READ_TIMEOUT_MS * 1000};
        if (setsockopt(reader.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
                int r = -errno;
                reader_stop();
                return r;
        }

        struct pollfd p = {.fd = reader.fd, .events = POLLIN};
        ReadReply hello;

        if (poll(&p, 1, REMOTE_READER_START_TIMEOUT_MS) <= 0 ||
            recv(reader.fd, &hello, sizeof(hello), 0) != sizeof(hello) || hello.err != 0 || hello.len != 0) {
                reader_stop();
                return -EIO;
        }
        return 0;
}

static bool reader_blocked(pid_t pid, uint64_t now)
{
        for (size_t i = 0; i < REMOTE_BLOCKED_MAX; i++)
                if (reader.blocked[i].pid == pid && now < reader.blocked[i].until_ns)
                        return true;
        return false;
}

static void reader_block(pid_t pid, uint64_t now)
{
        size_t oldest = 0;

        for (size_t i = 0; i < REMOTE_BLOCKED_MAX; i++) {
                if (reader.blocked[i].until_ns <= now) {
                        oldest = i;
                        break;
                }
                if (reader.blocked[i].until_ns < reader.blocked[oldest].until_ns)
                        oldest = i;
        }
        reader.blocked[oldest].pid = pid;
        reader.blocked[oldest].until_ns = now + REMOTE_BLOCK_NS;
}

/* Is the reader child runnable (running or waiting for a CPU)? Its /proc stat, a kernel file. */
static bool reader_runnable(void)
{
        char path[64], buf[256];
        const char *close_paren;
        ssize_t k;
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)reader.child);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        k = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (k <= 0)
                return false;
        buf[k] = 0;
        close_paren = strrchr(buf, ')');
        return close_paren && close_paren[1] == ' ' && close_paren[2] == 'R';
}

/* The reply to the request just sent: its size, or -EAGAIN once REMOTE_READ_TIMEOUT_MS passed
 * without it (SO_RCVTIMEO, set at the reader's start), or another negative errno. */
static ssize_t reply_recv(void *buf, size_t n)
{
        ssize_t k = recv(reader.fd, buf, n, 0);

        return k < 0 ? -errno : k;
}

static int reader_read(pid_t pid, uint64_t addr, void *buf, size_t n)
{
        static uint8_t reply[sizeof(ReadReply) + REMOTE_READ_MAX];
        ReadRequest q = {.pid = pid, .len = n, .addr = addr};
        uint64_t now = now_ns(CLOCK_MONOTONIC);
        ReadReply a;
        ssize_t k;
        int r;

        if (n > REMOTE_READ_MAX)
                return -EINVAL;
        if (now < reader.paused_until_ns || reader_blocked(pid, now)) {
                reader.n_blocked++;
                return -ETIMEDOUT;
        }
        if (reader.fd < 0 && (r = reader_start()) < 0) {
                reader.n_failed++;
                return r;
        }
        if (send(reader.fd, &q, sizeof(q), MSG_NOSIGNAL) != sizeof(q)) {
                reader_stop(); /* it died: the next read starts another */
                reader.n_failed++;
                return -EIO;
        }
        k = reply_recv(reply, sizeof(reply));
        for (unsigned waited = REMOTE_READ_TIMEOUT_MS;
             (k == -EAGAIN || k == -EINTR) && waited < REMOTE_READ_RUNNABLE_MAX_MS && reader_runnable();
             waited += REMOTE_READ_TIMEOUT_MS)
                k = reply_recv(reply, sizeof(reply));
        if (k == -EAGAIN || k == -EINTR) {
                reader_stop();
                reader_block(pid, now);
                reader.paused_until_ns = now_ns(CLOCK_MONOTONIC) + REMOTE_PAUSE_NS;
                reader.n_timeout++;
                return -ETIMEDOUT;
        }
        if (k < (ssize_t)sizeof(a)) {
                reader_stop();
                reader.n_failed++;
                return -EIO;
        }
        memcpy(&a, reply, sizeof(a));
        if (a.err < 0 || a.len != n || (size_t)k != sizeof(a) + n) {
                reader.n_failed++;
                return a.err < 0 ? a.err : -EIO;
        }
        memcpy(buf, reply + sizeof(a), n);
        reader.n_ok++;
        return 0;
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
        if (ARRAY_GROW(m->ranges, m->cap_ranges, m->n_ranges + 1, 64) < 0)
                return -ENOMEM;
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
        uint64_t at = addr;

        if (n == 0)
                return 0;
        if (addr + n < addr)
                return -EFAULT;
        /* Every byte inside allowed ranges (a read may span adjacent mappings). */
        while (at < addr + n) {
                const Range *r = find_range(m, at);

                if (!r)
                        return -EFAULT;
                if (r->untrusted) {
                        reader.n_refused++;
                        return -ENOTSUP;
                }
                at = r->end;
        }
        return reader_read(m->pid, addr, buf, n);
}

uint64_t remote_memory_reads_done(void)
{
        return reader.n_ok + reader.n_failed + reader.n_timeout;
}

void remote_memory_write_metrics(FILE *f)
{
        static const char *const result_names[] = {"ok", "failed", "timeout", "blocked", "refused"};

        metric_labelled(
                f, "profd_remote_reads_total", "counter",
                "Reads of other processes' memory (Python code objects), by result: ok, failed "
                "(unmapped, gone), timeout (the reader was killed: the process remapped a file a user "
                "serves under the address), blocked (a process that timed out before, or any within "
                "10 s of a timeout), refused (FUSE or network filesystem mapping, not read).",
                "result", result_names,
                (const uint64_t[]){reader.n_ok, reader.n_failed, reader.n_timeout, reader.n_blocked,
                                   reader.n_refused},
                ELEMENTSOF(result_names));
        metric_counter(f, "profd_remote_reader_starts_total",
                       "Reader processes started (the first, and one after each timeout or death).",
                       reader.n_starts);
}
