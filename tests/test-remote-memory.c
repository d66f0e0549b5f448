/* SPDX-License-Identifier: GPL-2.0-only */
/* Remote memory reads (daemon/runtimes/remote-memory.c) against a real hostile FUSE filesystem: its file
 * "blob" opens fine but a read of it is never answered. A child maps blob without touching it, next
 * to an anonymous page of known bytes. Reads of the anonymous page return its bytes; reads of the
 * mapping, or spanning into it, and CPython code objects there or naming strings there, are refused
 * at once, and not one read request reaches the FUSE server; so are they once the child has detached
 * the mount, which leaves its device named by no mountinfo. Then a raw process_vm_readv of the same
 * address does reach the server and is still waiting a second later: the hazard is real.
 *
 * As with a container, the filesystem is mounted in a private mount namespace that the server and
 * the child share while the checks run in the test's own: only the child's mountinfo tells what the
 * device is. The mount goes away with those two processes whatever happens. The checks run in a
 * child the top process watches: a read that blocks (a regression) fails the test after
 * WATCHDOG_SEC instead of hanging it. On every path the top process kills the server (which fails
 * every read waiting on it), unmounts, reaps every process and removes its directory. */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/test-util.h"
#include "runtimes/python-code.h"
#include "runtimes/python-offsets.h"
#include "runtimes/remote-memory.h"
#include "tracker/process-table.h"

#define BLOB_SIZE (64u << 10)
#define WATCHDOG_SEC 20
/* daemon/runtimes/remote-memory.c's REMOTE_PAUSE_NS */
#define PAUSE_MS 10000
/* How long the raw read must still be waiting on the server to count as blocked. */
#define BLOCKED_MS 1000
/* ob_type values of the fake code object: never dereferenced, only compared. */
#define FAKE_CODE_TYPE 0x7f0000c0de00ULL
#define FAKE_STR_TYPE 0x7f00005a5a00ULL
/* In the child's anonymous page: a fake code object at 0, known bytes from PATTERN_OFF to its end. */
#define PATTERN_OFF 1024u
#define FSTYPE_SUBTYPE "profd-test"

static char dir[] = "/tmp/profd-remote-memory-XXXXXX";
static char mnt[sizeof(dir) + 8], tmp[sizeof(dir) + 8];

typedef struct Addrs {
        uint64_t anon, page_size, fuse, fuse_len;
        uint64_t tmpfs; /* a page of a file on a tmpfs of the child's namespace only; 0: none */
} Addrs;

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static double ms_since(uint64_t t)
{
        return (double)(now_ns() - t) / 1e6;
}

static uint8_t pattern_byte(size_t i)
{
        return (uint8_t)(i * 7 + 3);
}

static bool is_pattern(const uint8_t *buf, size_t off, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (buf[i] != pattern_byte(off + i))
                        return false;
        return true;
}

/* --- the FUSE server: blob opens, its reads never answer -------------------------------------- */

static int server_notify_fd = -1;

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
        memset(st, 0, sizeof(*st));
        if (strcmp(path, "/") == 0) {
                st->st_mode = S_IFDIR | 0755;
                st->st_nlink = 2;
                return 0;
        }
        if (strcmp(path, "/blob") == 0) {
                st->st_mode = S_IFREG | 0444;
                st->st_nlink = 1;
                st->st_size = BLOB_SIZE;
                return 0;
        }
        return -ENOENT;
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
        if (strcmp(path, "/blob") != 0)
                return -ENOENT;
        return (fi->flags & O_ACCMODE) == O_RDONLY ? 0 : -EACCES;
}

/* Tells the test a read arrived, then never answers: the server's only thread waits here until it
 * is killed, which aborts the connection and fails the read in the kernel. */
static int fs_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
        if (write(server_notify_fd, "r", 1) < 0)
                _exit(3);
        for (;;)
                pause();
}

static const struct fuse_operations fs_ops = {
        .getattr = fs_getattr,
        .open = fs_open,
        .read = fs_read,
};

/* Mounts at mnt in a new mount namespace when allowed, with a tmpfs at tmp (else in the current
 * one, through fusermount3, and no tmpfs), writes 'P' (mounted in its own namespace), 'R' (in the
 * current one) or 'F' (cannot) to ready_fd, then serves one request at a time. */
static _Noreturn void run_target(bool private, int sock, const PythonOffsets *o);
static pid_t fork_child(void);

static _Noreturn void run_server(int ready_fd, int notify_fd, const int sock[2], const PythonOffsets *o)
{
        char *argv[] = {"profd-test-fuse", "-o", "fsname=profd-test,subtype=" FSTYPE_SUBTYPE, NULL};
        struct fuse_args args = FUSE_ARGS_INIT(3, argv);
        struct fuse *f;
        bool private = false;

        server_notify_fd = notify_fd;
        if (unshare(CLONE_NEWNS) == 0) {
                /* Nothing mounted here may show in the namespace it came from. */
                if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
                    mount("tmpfs", tmp, "tmpfs", 0, "size=1m") < 0) {
                        perror("mount");
                        (void)!write(ready_fd, "F", 1);
                        _exit(1);
                }
                private = true;
        }
        f = fuse_new(&args, &fs_ops, sizeof(fs_ops), NULL);
        if (!f || fuse_mount(f, mnt) < 0) {
                (void)!write(ready_fd, "F", 1);
                _exit(1);
        }
        if (private) {
                /* The target is forked here, in this namespace: a process cannot join a mount
                 * namespace by setns() from inside a chroot (the tests may run in one). */
                pid_t t = fork_child();
                char msg[1 + sizeof(pid_t)] = {'P'};

                if (t == 0) {
                        close(fuse_session_fd(fuse_get_session(f))); /* the server's alone */
                        close(sock[0]);
                        close(ready_fd);
                        run_target(true, sock[1], o);
                }
                memcpy(msg + 1, &t, sizeof(t));
                (void)!write(ready_fd, t > 0 ? msg : "F", t > 0 ? sizeof(msg) : 1);
        } else {
                (void)!write(ready_fd, "R", 1);
        }
        close(sock[0]);
        close(sock[1]);
        close(ready_fd);
        fuse_loop(f);
        _exit(0);
}

/* --- the target: an anonymous page, then blob mapped right after it, never touched ------------ */

/* A page of the file tmp/data, which has known bytes. */
static uint8_t *map_tmpfs_file(size_t page)
{
        char path[PATH_MAX];
        uint8_t *p;
        int fd;

        snprintf(path, sizeof(path), "%s/data", tmp);
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)page) < 0)
                _exit(2);
        p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
                _exit(2);
        close(fd);
        for (size_t i = 0; i < page; i++)
                p[i] = pattern_byte(i);
        return p;
}

/* In the server's namespace (private) maps blob and a file on its tmpfs, sends their addresses
 * on sock, then detaches the FUSE mount whenever sock asks ('u'), answering with 0 or the errno. */
static _Noreturn void run_target(bool private, int sock, const PythonOffsets *o)
{
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        uint8_t *base, *fuse, *file = NULL;
        char blob[PATH_MAX], c;
        Addrs a;
        int fd;

        if (private)
                file = map_tmpfs_file(page);
        snprintf(blob, sizeof(blob), "%s/blob", mnt);
        /* One reservation, so the two mappings are adjacent and a read can span both. */
        base = mmap(NULL, page + BLOB_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED || mprotect(base, page, PROT_READ | PROT_WRITE) < 0)
                _exit(2);
        fd = open(blob, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                _exit(2);
        fuse = mmap(base + page, BLOB_SIZE, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
        if (fuse == MAP_FAILED)
                _exit(2);
        /* Kept open: 'r' maps blob again, over the anonymous page, after profd's snapshot. */

        /* A code object of the fake type whose name, file name and line table are in blob. */
        memset(base, 0, PATTERN_OFF);
        *(uint64_t *)(base + 8) = FAKE_CODE_TYPE; /* ob_type */
        *(uint64_t *)(base + o->code_qualname) = (uint64_t)(uintptr_t)(fuse + 64);
        *(uint64_t *)(base + o->code_filename) = (uint64_t)(uintptr_t)(fuse + 128);
        *(uint64_t *)(base + o->code_linetable) = (uint64_t)(uintptr_t)(fuse + 256);
        *(int32_t *)(base + o->code_firstlineno) = 1;
        for (size_t i = PATTERN_OFF; i < page; i++)
                base[i] = pattern_byte(i);

        a = (Addrs){(uint64_t)(uintptr_t)base, page, (uint64_t)(uintptr_t)fuse, BLOB_SIZE,
                    (uint64_t)(uintptr_t)file};
        if (write(sock, &a, sizeof(a)) != sizeof(a))
                _exit(2);
        while (read(sock, &c, 1) == 1 && (c == 'u' || c == 'r')) {
                int e;

                if (c == 'u')
                        e = umount2(mnt, MNT_DETACH) < 0 ? errno : 0;
                else
                        e = mmap(base, page, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED ? errno
                                                                                                      : 0;

                if (write(sock, &e, sizeof(e)) != sizeof(e))
                        _exit(2);
        }
        for (;;)
                pause();
}

/* --- the checks -------------------------------------------------------------------------------- */

static const char *err(int r)
{
        return r == 0 ? "0" : strerror(-r);
}

static unsigned long long refused_total(const PythonCodeCache *c)
{
        static const char name[] = "\nprofd_python_code_reads_refused_total ";
        char *buf = NULL, *p;
        size_t size = 0;
        unsigned long long v = ULLONG_MAX;
        FILE *f = open_memstream(&buf, &size);

        if (!f)
                return v;
        python_code_cache_write_metrics(c, f);
        fclose(f);
        p = strstr(buf, name);
        if (p)
                v = strtoull(p + strlen(name), NULL, 10);
        free(buf);
        return v;
}

/* Whether the FUSE server got a read request, waiting up to timeout_ms. */
static bool server_got_read(int notify_fd, int timeout_ms)
{
        struct pollfd p = {.fd = notify_fd, .events = POLLIN};
        char c;

        return poll(&p, 1, timeout_ms) == 1 && read(notify_fd, &c, 1) == 1;
}

static void check_reads(pid_t target, const Addrs *a, int notify_fd)
{
        _cleanup_(remote_memory_freep) RemoteMemory *m = NULL;
        uint8_t buf[4096];
        uint64_t t;
        size_t n;
        int r;

        t = now_ns();
        r = remote_memory_open(target, &m);
        if (!check(r == 0, "remote_memory_open(child): %s (%.2f ms)", err(r), ms_since(t)))
                return;

        t = now_ns();
        r = remote_memory_read(m, a->anon + PATTERN_OFF, buf, 256);
        check(r == 0 && is_pattern(buf, PATTERN_OFF, 256),
              "anonymous buffer, 256 bytes: %s, its bytes (%.3f ms)", err(r), ms_since(t));
        /* Up to the last byte before the FUSE mapping. */
        n = a->page_size - PATTERN_OFF < sizeof(buf) ? a->page_size - PATTERN_OFF : sizeof(buf);
        r = remote_memory_read(m, a->anon + a->page_size - n, buf, n);
        check(r == 0 && is_pattern(buf, a->page_size - n, n), "anonymous buffer up to the FUSE mapping: %s",
              err(r));

        t = now_ns();
        r = remote_memory_read(m, a->fuse, buf, 1);
        check(r == -ENOTSUP, "first byte of the FUSE mapping: %s, want ENOTSUP (%.3f ms)", err(r),
              ms_since(t));
        r = remote_memory_read(m, a->fuse + a->fuse_len / 2, buf, 64);
        check(r == -ENOTSUP, "middle of the FUSE mapping: %s, want ENOTSUP", err(r));
        r = remote_memory_read(m, a->fuse + a->fuse_len - 8, buf, 8);
        check(r == -ENOTSUP, "last bytes of the FUSE mapping: %s, want ENOTSUP", err(r));
        r = remote_memory_read(m, a->anon + a->page_size - 16, buf, 32);
        check(r == -ENOTSUP, "read from the anonymous page into the FUSE mapping: %s, want ENOTSUP", err(r));
        /* A file system of the child's namespace only, which the kernel serves: read. */
        if (a->tmpfs) {
                r = remote_memory_read(m, a->tmpfs, buf,
                                       a->page_size < sizeof(buf) ? a->page_size : sizeof(buf));
                check(r == 0 && is_pattern(buf, 0, a->page_size < sizeof(buf) ? a->page_size : sizeof(buf)),
                      "file on a tmpfs mounted in the child's namespace only: %s, its bytes", err(r));
        }
        r = remote_memory_read(m, 4096, buf, 8);
        check(r == -EFAULT, "unmapped address: %s, want EFAULT", err(r));

        check(!server_got_read(notify_fd, 0), "no read request reached the FUSE server");
}

static void check_python_code(pid_t target, const Addrs *a, int notify_fd)
{
        _cleanup_(python_code_cache_freep) PythonCodeCache *c = NULL;
        const PythonOffsets *o = python_offsets_find(3, 11);
        uint64_t start_time = 0, t;

        (void)process_read_start_time(target, &start_time);
        PythonFrameInfo info;
        int r;

        if (!check(o && start_time != 0, "CPython 3.11 offsets and the child's start time"))
                return;
        r = python_code_cache_new(0, 0, &c);
        if (!check(r == 0, "python_code_cache_new: %s", err(r)))
                return;

        t = now_ns();
        r = python_code_resolve(c, target, start_time, o, FAKE_CODE_TYPE, FAKE_STR_TYPE, a->fuse + 4096, 1,
                                0, &info);
        check(r == -EFAULT, "code object inside the FUSE mapping: %s, want EFAULT (%.3f ms)", err(r),
              ms_since(t));
        check(refused_total(c) == 1, "profd_python_code_reads_refused_total %llu, want 1", refused_total(c));

        /* A code object in anonymous memory whose name is in the FUSE mapping: the name is refused. */
        t = now_ns();
        r = python_code_resolve(c, target, start_time, o, FAKE_CODE_TYPE, FAKE_STR_TYPE, a->anon, 1, 0, &info);
        check(r < 0, "code object whose name is in the FUSE mapping: %s, want an error (%.3f ms)", err(r),
              ms_since(t));
        check(refused_total(c) == 2, "profd_python_code_reads_refused_total %llu, want 2", refused_total(c));

        /* Anonymous memory that is no code object: read, found wrong, not counted as refused. */
        r = python_code_resolve(c, target, start_time, o, FAKE_CODE_TYPE, FAKE_STR_TYPE,
                                a->anon + PATTERN_OFF, 1, 0, &info);
        check(r == -EBADMSG, "anonymous memory that is no code object: %s, want EBADMSG", err(r));
        check(refused_total(c) == 2, "profd_python_code_reads_refused_total still %llu, want 2",
              refused_total(c));

        check(!server_got_read(notify_fd, 0), "still no read request reached the FUSE server");
}

/* Whether /proc/PID/mountinfo (0: this process's) lists the test's filesystem. */
static bool mountinfo_has_fuse(pid_t pid)
{
        char path[64], *line = NULL;
        size_t cap = 0;
        bool found = false;
        FILE *f;

        if (pid > 0)
                snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
        else
                snprintf(path, sizeof(path), "/proc/self/mountinfo");
        f = fopen(path, "re");
        while (f && !found && getline(&line, &cap, f) > 0)
                found = strstr(line, " - fuse." FSTYPE_SUBTYPE " ") != NULL;
        if (f)
                fclose(f);
        free(line);
        return found;
}

/* A process that exited but is not reaped yet (profd often sees the exit first), then one reaped. */
static void check_exited(void)
{
        _cleanup_(remote_memory_freep) RemoteMemory *m = NULL;
        siginfo_t si;
        pid_t pid = fork();
        int r;

        if (pid == 0)
                _exit(0);
        if (!check(pid > 0 && waitid(P_PID, pid, &si, WEXITED | WNOWAIT) == 0, "exited child"))
                return;
        r = remote_memory_open(pid, &m);
        check(r == -ESRCH, "remote_memory_open of a process that exited, not reaped: %s, want ESRCH",
              err(r));
        m = remote_memory_free(m);
        waitpid(pid, NULL, 0);
        r = remote_memory_open(pid, &m);
        check(r == -ESRCH, "remote_memory_open of a process reaped: %s, want ESRCH", err(r));
}

/* The child detaches the mount: its device is in no mountinfo any more, the mapping still reads
 * through the server. Nothing says what serves it, so it stays refused. */
static void check_detached(pid_t target, int sock, const Addrs *a, int notify_fd)
{
        _cleanup_(remote_memory_freep) RemoteMemory *m = NULL;
        uint8_t buf[256];
        int r, e = -1;

        if (write(sock, "u", 1) != 1 || read(sock, &e, sizeof(e)) != sizeof(e))
                e = -1;
        if (!check(e == 0, "child detached the FUSE mount: %s", e < 0 ? "no answer" : e ? strerror(e) : "0"))
                return;
        check(!mountinfo_has_fuse(target) && !mountinfo_has_fuse(0), "the FUSE mount is in no mountinfo");
        r = remote_memory_open(target, &m);
        if (!check(r == 0, "remote_memory_open(child) after the detach: %s", err(r)))
                return;
        r = remote_memory_read(m, a->fuse, buf, 1);
        check(r == -ENOTSUP, "FUSE mapping of a device no mountinfo names: %s, want ENOTSUP", err(r));
        r = remote_memory_read(m, a->anon + PATTERN_OFF, buf, sizeof(buf));
        check(r == 0 && is_pattern(buf, PATTERN_OFF, sizeof(buf)), "anonymous buffer after the detach: %s",
              err(r));
        check(!server_got_read(notify_fd, 0), "after the detach, no read request reached the FUSE server");
}

/* Without the check, the same read waits on the server: a grandchild's raw process_vm_readv of the
 * mapping reaches the server and has not returned BLOCKED_MS later. It is killed then; the top
 * process (its subreaper) reaps it once the server is gone and the read has failed. */
static void check_hazard(pid_t target, const Addrs *a, int notify_fd)
{
        uint64_t t = now_ns();
        struct pollfd p;
        int done[2];
        pid_t pid;
        bool reached;

        if (pipe2(done, O_CLOEXEC) < 0) {
                check(false, "pipe: %m");
                return;
        }
        pid = fork();
        if (pid < 0) {
                check(false, "fork: %m");
                return;
        }
        if (pid == 0) {
                char b;
                struct iovec local = {&b, 1}, remote = {(void *)(uintptr_t)a->fuse, 1};
                ssize_t k;

                prctl(PR_SET_PDEATHSIG, SIGKILL);
                k = process_vm_readv(target, &local, 1, &remote, 1, 0);
                (void)!write(done[1], k == 1 ? "1" : "e", 1);
                _exit(0);
        }
        close(done[1]);
        reached = server_got_read(notify_fd, BLOCKED_MS);
        check(reached,
              "raw process_vm_readv of the FUSE mapping: the read reached the FUSE server (%.1f ms)",
              ms_since(t));
        while (reached && ms_since(t) < BLOCKED_MS)
                usleep(10000);
        p = (struct pollfd){.fd = done[0], .events = POLLIN};
        check(reached && waitpid(pid, NULL, WNOHANG) == 0 && poll(&p, 1, 0) == 0,
              "raw process_vm_readv of the FUSE mapping is still waiting after %.0f ms", ms_since(t));
        kill(pid, SIGKILL);
        close(done[0]);
}

/* The snapshot is taken, then the child maps blob over its anonymous page: the check passes on the
 * snapshot, and the read itself would wait on the server. It must fail within the reader's timeout
 * (its child killed), the process must not be read again for a while, and reads of others go on. */
static void check_remap(pid_t target, int sock, const Addrs *a, int notify_fd)
{
        _cleanup_(remote_memory_freep) RemoteMemory *m = NULL, *self = NULL;
        uint8_t buf[256];
        uint64_t t;
        int r, e = -1;

        r = remote_memory_open(target, &m);
        if (!check(r == 0, "snapshot of the child before it remaps: %s", err(r)))
                return;
        if (write(sock, "r", 1) != 1 || read(sock, &e, sizeof(e)) != sizeof(e))
                e = -1;
        if (!check(e == 0, "child mapped blob over its anonymous page: %s",
                   e < 0 ? "no answer"
                   : e   ? strerror(e)
                         : "0"))
                return;
        t = now_ns();
        r = remote_memory_read(m, a->anon + PATTERN_OFF, buf, sizeof(buf));
        check(r == -ETIMEDOUT && ms_since(t) < 1000,
              "read of the remapped page through the old snapshot: %s, want ETIMEDOUT, in %.1f ms", err(r),
              ms_since(t));
        t = now_ns();
        r = remote_memory_read(m, a->anon + PATTERN_OFF, buf, sizeof(buf));
        check(r == -ETIMEDOUT && ms_since(t) < 5, "the process is not read again: %s in %.3f ms", err(r),
              ms_since(t));
        r = remote_memory_open(getpid(), &self);
        if (check(r == 0, "snapshot of the test itself: %s", err(r))) {
                static const uint8_t mine[16] = "profd remote ok";
                uint8_t got[16] = {};

                /* Many processes doing the same must not hold the loop 100 ms each: after a
                 * timeout no process is read for REMOTE_PAUSE_NS (10 s). */
                t = now_ns();
                r = remote_memory_read(self, (uint64_t)(uintptr_t)mine, got, sizeof(got));
                check(r == -ETIMEDOUT && ms_since(t) < 5, "right after, no other process is read either: %s",
                      err(r));
                while (ms_since(t) < PAUSE_MS + 100)
                        usleep(50000);
                r = remote_memory_read(self, (uint64_t)(uintptr_t)mine, got, sizeof(got));
                check(r == 0 && memcmp(got, mine, sizeof(mine)) == 0,
                      "after the pause another process is read by a new reader: %s", err(r));
        }
}

static _Noreturn void run_checker(pid_t target, int sock, bool private, int notify_fd)
{
        Addrs a;
        ssize_t k = read(sock, &a, sizeof(a));

        if (!check(k == sizeof(a), "child mapped blob and sent its addresses"))
                _exit(1);
        printf("child %d: anonymous page 0x%llx, blob mapped at 0x%llx (%llu bytes)\n", (int)target,
               (unsigned long long)a.anon, (unsigned long long)a.fuse, (unsigned long long)a.fuse_len);
        if (private)
                check(!mountinfo_has_fuse(0) && mountinfo_has_fuse(target),
                      "the FUSE mount is in the child's mountinfo only");
        check_reads(target, &a, notify_fd);
        check_python_code(target, &a, notify_fd);
        check_exited();
        if (private)
                check_detached(target, sock, &a, notify_fd);
        else
                printf("note: no private mount namespace: the child cannot detach the mount, not checked\n");
        check_hazard(target, &a, notify_fd);
        check_remap(target, sock, &a, notify_fd);
        _exit(failures ? 1 : 0);
}

/* --- the top process: sets up, watches, tears down -------------------------------------------- */

static bool made_dir, made_mnt, made_tmp, private_ns;
static pid_t server = -1, target = -1, checker = -1;
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
        stop = sig;
}

static void unmount(void)
{
        pid_t pid;

        if (umount2(mnt, MNT_DETACH) == 0 || errno == EINVAL || errno == ENOENT)
                return;
        /* Not allowed (not root, mounted through fusermount3): let fusermount3 undo it. */
        pid = fork();
        if (pid == 0) {
                execlp("fusermount3", "fusermount3", "-u", "-z", mnt, (char *)NULL);
                _exit(127);
        }
        if (pid > 0)
                waitpid(pid, NULL, 0);
}

/* Kills what is left (the server last: its death fails every read still waiting on it), unmounts,
 * reaps every process including orphaned grandchildren, removes the directories. */
static void cleanup(void)
{
        uint64_t t;
        pid_t pid;

        if (checker > 0)
                kill(checker, SIGKILL);
        if (target > 0)
                kill(target, SIGKILL);
        if (server > 0)
                kill(server, SIGKILL);
        /* A private namespace's mount goes with its processes; the current one's stays until undone. */
        if (made_mnt && !private_ns)
                unmount();
        t = now_ns();
        for (;;) {
                pid = waitpid(-1, NULL, WNOHANG);
                if (pid < 0)
                        break;
                if (pid == 0) {
                        if (ms_since(t) > 5000) {
                                printf("FAIL processes still running 5 s after the FUSE server was "
                                       "killed\n");
                                failures++;
                                break;
                        }
                        usleep(10000);
                }
        }
        if (made_mnt && rmdir(mnt) < 0)
                printf("warning: rmdir %s: %m\n", mnt);
        if (made_tmp && rmdir(tmp) < 0)
                printf("warning: rmdir %s: %m\n", tmp);
        if (made_dir && rmdir(dir) < 0)
                printf("warning: rmdir %s: %m\n", dir);
}

static int finish(int code)
{
        cleanup();
        if (code == 0 && failures)
                code = 1;
        printf("%s\n", code == 0 ? "PASS" : code == 77 ? "SKIP" : "FAIL");
        return code;
}

static void check_fstypes(void)
{
        static const struct {
                const char *fstype;
                bool untrusted;
        } cases[] = {
                {"fuse", true},  {"fuse.sshfs", true}, {"fuseblk", true}, {"nfs4", true},     {"coda", true},
                {"pvfs2", true}, {"ext4", false},      {"tmpfs", false},  {"overlay", false},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                check(remote_memory_fstype_untrusted(cases[i].fstype) == cases[i].untrusted,
                      "remote_memory_fstype_untrusted(\"%s\") is %s", cases[i].fstype,
                      cases[i].untrusted ? "true" : "false");
}

static pid_t fork_child(void)
{
        pid_t parent = getpid(), pid = fork();

        if (pid == 0) {
                /* No process outlives the test, whatever kills it. */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(1);
        }
        return pid;
}

int main(void)
{
        const PythonOffsets *o = python_offsets_find(3, 11);
        int ready[2], notify[2], sock[2], status;
        char c = 0;
        struct pollfd p;
        uint64_t t;

        setvbuf(stdout, NULL, _IOLBF, 0);
        check_fstypes();
        if (!check(o != NULL, "CPython 3.11 offsets"))
                return 1;

        if (access("/dev/fuse", R_OK | W_OK) < 0) {
                printf("SKIP: /dev/fuse: %m\n");
                return failures ? 1 : 77;
        }
        /* Grandchildren left waiting on the server come here to be reaped. */
        prctl(PR_SET_CHILD_SUBREAPER, 1);
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);
        signal(SIGHUP, on_signal);

        if (!mkdtemp(dir)) {
                printf("FAIL mkdtemp: %m\n");
                return 1;
        }
        made_dir = true;
        snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
        if (mkdir(mnt, 0755) < 0) {
                printf("FAIL mkdir %s: %m\n", mnt);
                return finish(1);
        }
        made_mnt = true;
        snprintf(tmp, sizeof(tmp), "%s/tmp", dir);
        if (mkdir(tmp, 0755) < 0) {
                printf("FAIL mkdir %s: %m\n", tmp);
                return finish(1);
        }
        made_tmp = true;
        if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(notify, O_CLOEXEC | O_NONBLOCK) < 0) {
                printf("FAIL pipe: %m\n");
                return finish(1);
        }

        /* Only the target and the checker hold an end: if the target dies, the checker reads EOF. */
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock) < 0) {
                printf("FAIL socketpair: %m\n");
                return finish(1);
        }
        server = fork_child();
        if (server == 0)
                run_server(ready[1], notify[1], sock, o);
        close(ready[1]);
        p = (struct pollfd){.fd = ready[0], .events = POLLIN};
        if (server < 0 || poll(&p, 1, WATCHDOG_SEC * 1000) != 1 || read(ready[0], &c, 1) != 1 ||
            (c != 'P' && c != 'R')) {
                printf("SKIP: cannot mount a FUSE filesystem at %s (see the error above)\n", mnt);
                return finish(failures ? 1 : 77);
        }
        private_ns = c == 'P';
        printf("FUSE filesystem mounted at %s (server %d) %s\n", mnt, (int)server,
               private_ns ? "in a mount namespace of its own" : "in the test's mount namespace");
        if (private_ns) {
                /* The server forked the target inside its namespace and says its pid. */
                if (read(ready[0], &target, sizeof(target)) != sizeof(target) || target <= 0) {
                        printf("FAIL the server did not start the target\n");
                        return finish(1);
                }
        } else {
                target = fork_child();
                if (target == 0) {
                        close(sock[0]);
                        run_target(false, sock[1], o);
                }
        }
        close(sock[1]);
        checker = fork_child();
        if (checker == 0)
                run_checker(target, sock[0], private_ns, notify[0]);
        close(sock[0]);
        if (target < 0 || checker < 0) {
                printf("FAIL fork: %m\n");
                return finish(1);
        }

        t = now_ns();
        for (;;) {
                pid_t pid = waitpid(checker, &status, WNOHANG);

                if (pid == checker) {
                        checker = -1;
                        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                                printf("FAIL checks failed (status 0x%x)\n", (unsigned)status);
                                failures++;
                        }
                        break;
                }
                if (stop) {
                        printf("FAIL interrupted by signal %d\n", (int)stop);
                        failures++;
                        break;
                }
                if (ms_since(t) > WATCHDOG_SEC * 1000.0) {
                        printf("FAIL the checks are still running after %d s: a read is waiting on the FUSE "
                               "server, which never answers. Remote memory reads must refuse a FUSE mapping "
                               "without touching it.\n",
                               WATCHDOG_SEC);
                        failures++;
                        break;
                }
                usleep(10000);
        }
        printf("checks took %.1f ms\n", ms_since(t));
        return finish(0);
}
