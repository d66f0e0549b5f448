/* SPDX-License-Identifier: GPL-2.0-only */
/* Reads /proc/PID/stat and /proc/PID/maps into a process of the table: its executable mappings,
 * each with its file (opened safely, shared), build ID and load bias. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "tracker/proc-maps.h"
#include "tracker/process-files.h"
#include "tracker/process-read.h"
#include "util/array.h"
#include "util/log.h"
#include "util/time-util.h"

/* A process read again this soon after its stat file was read (and not exec'd since) is taken to
 * be the same process with the same name: see process_read(). */
#define STAT_REUSE_NS (100 * 1000 * 1000ULL)
/* A mount namespace given by an exec event is taken for reads of the new image this long after it;
 * later reads look it up (a process that changes namespace right after its exec, rare, is taken
 * to be in the old one until then). */
#define EXEC_NS_HINT_NS (1 * NSEC_PER_SEC)

static void mapping_set_bias(ProcMapping *m)
{
        const ProcFile *f = m->file;
        int best = -1;

        if (!f || !f->elf_ok)
                return;
        /* The PT_LOAD holding the mapped file offset; executable segments first since the
         * same page can start both a read-only and an executable segment. */
        for (size_t i = 0; i < f->n_loads; i++) {
                uint64_t page_off = f->loads[i].offset & ~(uint64_t)0xfff;
                if (m->offset < page_off || m->offset >= f->loads[i].offset + f->loads[i].filesz)
                        continue;
                if (best < 0 || ((f->loads[i].flags & PF_X) && !(f->loads[best].flags & PF_X)))
                        best = (int)i;
        }
        if (best < 0)
                return;
        m->load_bias = m->start - (f->loads[best].vaddr + m->offset - f->loads[best].offset);
        m->bias_known = true;
}

typedef struct ReadCtx {
        ProcessTable *t;
        pid_t pid;
        ProcMapping *mappings;
        size_t n, cap;
        size_t max_mappings;
        uint64_t now;
        bool foreign_ns; /* the process is in another mount namespace than profd */
        bool truncated;
        unsigned no_file;
        unsigned dropped; /* mappings past max_mappings */
} ReadCtx;

static int read_cb(const ProcMapsLine *l, void *userdata)
{
        ReadCtx *c = userdata;
        ProcMapping m = {};

        if (!l->executable)
                return 0;
        /* The kernel's out-of-line slots for uprobes (profd's own on the loader): created when a
         * process first hits one, between the loader's two start-up reports, so it changed the
         * maps of every new process after the first report; a pc in it runs one instruction. */
        if (strcmp(l->path, "[uprobes]") == 0)
                return 0;
        if (c->n >= c->max_mappings) {
                c->truncated = true;
                c->dropped++;
                return 0;
        }
        if (ARRAY_GROW(c->mappings, c->cap, c->n + 1, 32) < 0)
                return -ENOMEM;
        m.start = l->start;
        m.end = l->end;
        m.offset = l->offset;
        m.dev = makedev(l->dev_major, l->dev_minor);
        m.inode = l->inode;
        m.executable = true;
        m.deleted = l->deleted;
        m.path = string_pool_ref(c->t->paths, l->path);
        if (!m.path)
                return -ENOMEM;

        if (strcmp(l->path, "[vdso]") == 0) {
                m.file = proc_file_vdso(c->t);
                if (m.file)
                        m.file->refs++;
        } else if (l->inode != 0 && !proc_maps_path_is_pseudo(l->path)) {
                ProcFile *f = proc_file_find(c->t, m.dev, m.inode);
                if (f) {
                        f->refs++;
                        f->used_ns = c->now;
                        f->precious = f->precious || m.deleted || c->foreign_ns;
                } else {
                        SafeMapping sm = {.pid = c->pid,
                                          .alive = true,
                                          .start = l->start,
                                          .end = l->end,
                                          .path = l->path,
                                          .deleted = l->deleted,
                                          .dev = m.dev,
                                          .ino = m.inode};
                        FileIdentity id;
                        bool maps_match = false;
                        _cleanup_close_ int fd = safe_open_mapping(&sm, &id, &maps_match);
                        if (fd >= 0) {
                                f = proc_file_find_id(c->t, &id, m.dev, m.inode);
                                if (f) {
                                        f->refs++;
                                        f->used_ns = c->now;
                                        f->precious = f->precious || m.deleted || c->foreign_ns;
                                } else
                                        f = proc_file_new(c->t, fd, m.dev, m.inode, &id, maps_match,
                                                          m.deleted || c->foreign_ns);
                        } else {
                                log_debug_errno(fd, "Cannot open %s mapped by pid %d: %m", l->path,
                                                (int)c->pid);
                                c->no_file++;
                        }
                }
                m.file = f;
        }
        if (m.file) {
                m.build_id = m.file->build_id_size ? m.file->build_id : NULL;
                m.build_id_size = (uint8_t)m.file->build_id_size;
                mapping_set_bias(&m);
        }
        c->mappings[c->n++] = m;
        return 0;
}

/* starttime (field 22), comm and state of /proc/PID/stat (path relative to dirfd). comm may hold
 * spaces and ')', so fields are counted from the last ')'. */
static int read_stat_at(int dirfd, const char *path, uint64_t *ret_start, char comm[17], char *ret_state)
{
        char buf[1024];
        _cleanup_close_ int fd = -1;
        ssize_t n;
        char *open_paren, *close_paren, *p;

        fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? -ESRCH : -errno;
        n = read(fd, buf, sizeof(buf) - 1);
        if (n < 0)
                return errno == ESRCH ? -ESRCH : -errno;
        buf[n] = 0;
        open_paren = strchr(buf, '(');
        close_paren = strrchr(buf, ')');
        if (!open_paren || !close_paren || close_paren < open_paren)
                return -EBADMSG;
        if (comm) {
                size_t len = (size_t)(close_paren - open_paren - 1);
                if (len > 16)
                        len = 16;
                memcpy(comm, open_paren + 1, len);
                comm[len] = 0;
        }
        /* After ") ": field 3 (state) ... field 22 (starttime) = 19 separators later. */
        p = close_paren + 1;
        if (ret_state)
                *ret_state = p[0] == ' ' ? p[1] : 0;
        for (int field = 3; field < 22; field++) {
                p = strchr(p + 1, ' ');
                if (!p)
                        return -EBADMSG;
        }
        errno = 0;
        *ret_start = strtoull(p + 1, NULL, 10);
        return errno ? -errno : 0;
}

static int read_stat_full(pid_t pid, uint64_t *ret_start, char comm[17], char *ret_state)
{
        char path[64];

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        return read_stat_at(AT_FDCWD, path, ret_start, comm, ret_state);
}

int process_read_stat(pid_t pid, uint64_t *ret_start, char comm[17])
{
        return read_stat_full(pid, ret_start, comm, NULL);
}

int process_read_start_time(pid_t pid, uint64_t *ret)
{
        return read_stat_full(pid, ret, NULL, NULL);
}

static void mappings_free(ProcessTable *t, ProcMapping *m, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                string_pool_unref(t->paths, m[i].path);
                proc_file_unref(t, m[i].file);
        }
        free(m);
}

/* What pid's exec event gave, when it came less than EXEC_NS_HINT_NS ago (the newest of its
 * events): NULL if none. */
static const ExecNsHint *exec_ns_hint(const ProcessTable *t, pid_t pid, uint64_t now)
{
        const ExecNsHint *best = NULL;

        for (unsigned i = 0; i < EXEC_NS_HINTS; i++) {
                const ExecNsHint *h = &t->exec_ns[i];
                if (h->pid == pid && h->mnt_ns && now - h->at_ns < EXEC_NS_HINT_NS &&
                    (!best || h->at_ns > best->at_ns))
                        best = h;
        }
        return best;
}

/* Whether the process of dirfd (/proc/PID) is in another mount namespace than profd: from its exec
 * event when there is one (hint), else from its ns/mnt. */
static bool foreign_mnt_ns(ProcessTable *t, int dirfd, const ExecNsHint *hint)
{
        struct stat ns;

        if (t->self_mnt_ns == 0 && stat("/proc/self/ns/mnt", &ns) == 0)
                t->self_mnt_ns = ns.st_ino;
        if (hint)
                return hint->mnt_ns != t->self_mnt_ns;
        return fstatat(dirfd, "ns/mnt", &ns, 0) == 0 && ns.st_ino != t->self_mnt_ns;
}

/* Keeps fd (p's maps, just read) for the quick re-read, in place of the oldest one kept. */
static void maps_fd_keep(ProcessTable *t, Process *p, int fd)
{
        Process *oldest = t->kept_maps[t->kept_next];

        if (oldest)
                process_maps_fd_drop(t, oldest);
        process_maps_fd_drop(t, p);
        p->maps_fd = fd;
        t->kept_maps[t->kept_next] = p;
        t->kept_next = (t->kept_next + 1) % MAPS_FDS_KEPT;
}

/* The quick re-read through the maps descriptor kept from the read before (see process_read()):
 * > 0 done, 0 when it cannot tell (the process exec'd or is gone since: the memory the descriptor
 * was opened on is not the process's any more) and the whole read must be made, < 0 error. */
static int read_kept(ProcessTable *t, Process *p, ReadCtx *c)
{
        int r = proc_maps_query_executable(p->maps_fd, read_cb, c);

        if (r >= 0 && c->n > 0)
                return 1;
        mappings_free(t, c->mappings, c->n);
        c->mappings = NULL;
        c->n = c->cap = 0;
        c->truncated = false;
        c->no_file = c->dropped = 0;
        process_maps_fd_drop(t, p);
        return r == -ENOMEM ? r : 0;
}

/* Reads /proc/PID/{stat,maps} into p (which keeps its old mappings on failure). */
int process_read(ProcessTable *t, Process *p)
{
        char path[64];
        _cleanup_fclose_ FILE *f = NULL;
        ReadCtx c = {
                .t = t, .pid = p->pid, .now = now_ns(CLOCK_MONOTONIC), .max_mappings = PROCESS_MAX_MAPPINGS};
        bool over_budget = process_table_memory(t) > t->max_bytes;
        _cleanup_close_ int dirfd = -1;
        uint64_t start;
        char comm[17], state = 0;
        unsigned bad = 0;
        bool quick;
        _cleanup_close_ int fd = -1;
        int r;

        t->n_reads++;
        quick = p->stat_ns && c.now - p->stat_ns < STAT_REUSE_NS;
        if (quick && p->maps_fd >= 0) {
                if (over_budget)
                        c.max_mappings = PROCESS_MAX_MAPPINGS_OVER_BUDGET;
                c.foreign_ns = p->foreign_ns;
                r = read_kept(t, p, &c);
                if (r < 0)
                        goto fail;
                if (r > 0) {
                        t->n_quick_reads++;
                        start = p->start_time;
                        memcpy(comm, p->comm, sizeof(comm));
                        goto done;
                }
                c.foreign_ns = false;
                c.max_mappings = PROCESS_MAX_MAPPINGS;
        }
        /* The loader's start-up report reads a new process again a millisecond after its exec
         * was read: its start time, name and mount namespace are those of that read (an exec
         * clears stat_ns, and a pid is not reused within STAT_REUSE_NS). */
        const ExecNsHint *hint = quick ? NULL : exec_ns_hint(t, p->pid, c.now);

        snprintf(path, sizeof(path), "/proc/%d", (int)p->pid);
        if (quick || (hint && hint->start_time)) {
                /* Nothing to read but the maps (the rest is known, see below): their descriptor
                 * names the process as a /proc/PID one would, one open and close fewer. */
                snprintf(path, sizeof(path), "/proc/%d/maps", (int)p->pid);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        r = errno == ENOENT ? -ESRCH : -errno;
                        goto fail;
                }
        } else {
                /* Everything through one descriptor of /proc/PID: it names this very process, so
                 * a pid reused while we read fails the reads (ENOENT, ESRCH) instead of handing
                 * us another process's maps, and the start time need not be read again
                 * afterwards. */
                dirfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (dirfd < 0) {
                        r = errno == ENOENT ? -ESRCH : -errno;
                        goto fail;
                }
        }

        if (quick) {
                start = p->start_time;
                memcpy(comm, p->comm, sizeof(comm));
                c.foreign_ns = p->foreign_ns;
                t->n_quick_reads++;
        } else if (hint && hint->start_time) {
                /* The first read of a new image: its exec event gave the start time and name (a
                 * zombie has no mappings: the stat file is read below when none are found). */
                start = hint->start_time;
                memcpy(comm, hint->comm, sizeof(comm));
                c.foreign_ns = foreign_mnt_ns(t, dirfd, hint);
                t->n_exec_event_reads++;
        } else {
                r = read_stat_at(dirfd, "stat", &start, comm, &state);
                if (r == -ENOENT)
                        r = -ESRCH;
                if (r < 0)
                        goto fail;
                /* A zombie (or a dying task) has no mappings left: reading them would replace
                 * what we knew with nothing. It is gone for our purposes. */
                if (state == 'Z' || state == 'X' || state == 'x') {
                        r = -ESRCH;
                        goto fail;
                }
                c.foreign_ns = foreign_mnt_ns(t, dirfd, hint);
        }
        if (over_budget)
                c.max_mappings = PROCESS_MAX_MAPPINGS_OVER_BUDGET;
        if (fd < 0)
                fd = openat(dirfd, "maps", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                r = errno == ENOENT ? -ESRCH : -errno;
                goto fail;
        }
        /* Only the executable mappings, without the kernel printing every other one: most of
         * what reading a process cost. */
        r = t->maps_query_unsupported ? -EOPNOTSUPP : proc_maps_query_executable(fd, read_cb, &c);
        if (r == -EOPNOTSUPP)
                t->maps_query_unsupported = true;
        if (r == -EOPNOTSUPP || r == -ENAMETOOLONG || r == -ESRCH) {
                mappings_free(t, c.mappings, c.n);
                c.mappings = NULL;
                c.n = c.cap = 0;
                c.truncated = false;
                c.no_file = c.dropped = 0;
                /* ESRCH: the memory the file was opened on is gone (exit, or exec since): no
                 * mappings, as the text would read; what that means is decided below. */
                if (r == -ESRCH)
                        r = 0;
                else {
                        /* The text, through a FILE made only now: most reads never need one. */
                        f = fdopen(fd, "re");
                        if (f)
                                fd = -1; /* the FILE owns it */
                        r = f ? proc_maps_read(f, read_cb, &c, &bad) : -errno;
                }
        }
        if (r < 0) {
                mappings_free(t, c.mappings, c.n);
                goto fail;
        }
        /* A process that had executable mappings and now has none is either tearing its memory
         * down on the way out or in the middle of an exec (the old image gone, the new one not
         * mapped yet): keep what we knew and let the caller look again; its exit event says
         * which. Calling it exited here lost the new image for good (the start time does not
         * change at exec, so no later read undid it). */
        if (c.n == 0) {
                /* No mappings at all: a kernel thread, a process gone (or a zombie) while we
                 * read, or one mid-exec: the stat file tells. */
                if (dirfd < 0) {
                        /* Read through the maps alone: /proc/PID now may be another process. */
                        snprintf(path, sizeof(path), "/proc/%d", (int)p->pid);
                        dirfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
                }
                r = dirfd < 0 ? -ESRCH : read_stat_at(dirfd, "stat", &start, NULL, &state);
                if (r < 0 || state == 'Z' || state == 'X' || state == 'x')
                        r = -ESRCH;
                else if (p->n_mappings > 0 && (start == p->start_time || p->start_time == 0))
                        r = -EAGAIN;
        }
        if (r < 0) {
                mappings_free(t, c.mappings, c.n);
                goto fail;
        }
        /* Read with PROCMAP_QUERY (no FILE took the descriptor): kept for the re-read to come. */
        if (fd >= 0 && c.n > 0 && !quick)
                maps_fd_keep(t, p, TAKE_FD(fd));
done:
        /* Exact size: the snapshot may outlive the process by the whole history window. */
        if (c.n > 0 && c.n < c.cap) {
                ProcMapping *n = reallocarray(c.mappings, c.n, sizeof(*n));
                if (n)
                        c.mappings = n;
        }
        mappings_free(t, p->mappings, p->n_mappings);
        t->proc_bytes += (c.n - p->n_mappings) * sizeof(ProcMapping);
        p->mappings = c.mappings;
        p->n_mappings = c.n;
        p->start_time = start;
        memcpy(p->comm, comm, sizeof(comm));
        p->foreign_ns = c.foreign_ns;
        if (!quick)
                p->stat_ns = c.now;
        p->generation++;
        p->bad_lines = bad;
        p->mappings_truncated = c.truncated;
        p->inherited = false;
        p->checked_ns = now_ns(CLOCK_REALTIME);
        t->n_bad_lines += bad;
        t->n_truncated += c.truncated && !over_budget;
        if (over_budget)
                t->n_truncated_memory += c.dropped;
        t->n_no_file += c.no_file;
        return 0;
fail:
        t->n_read_errors += r != -ESRCH && r != -EAGAIN;
        return r;
}
