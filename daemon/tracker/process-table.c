/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "util/hash.h"
#include "util/log.h"
#include "tracker/proc-maps.h"
#include "tracker/process-table.h"
#include "util/safe-open.h"
#include "util/string-pool.h"
#include "util/time-util.h"

/* PT_LOAD segments remembered per file; real ELF files have 2-5, more is hostile input. */
#define PROC_FILE_MAX_LOADS 16
/* Go build IDs are 83 bytes ("actionID/contentID" in base64); -ldflags=-buildid=... may set any
 * string, longer ones than this are not kept. */
#define GO_BUILD_ID_MAX 128
/* Type of the Go linker's build ID note (owner "Go", section .note.go.buildid). */
#define NT_GO_BUILD_ID 4
/* Liveness checks (/proc/PID/stat) per gc call: bounds the work of one call. */
#define GC_CHECKS_PER_CALL 256
/* A live process is re-checked for exit / pid reuse this often. */
#define GC_CHECK_INTERVAL_NS (5 * NSEC_PER_SEC)

struct ProcFile {
        ProcFile *next; /* hash chain */
        dev_t dev;      /* as /proc/PID/maps prints it */
        uint64_t inode;
        FileIdentity id;  /* fstat() of what was opened: the key of every cache of its content */
        bool maps_match;  /* id has the device and inode /proc/PID/maps shows: found by them */
        uint64_t used_ns; /* CLOCK_MONOTONIC of the last read of a process that maps it */
        int fd;           /* -1 when over the descriptor budget */
        unsigned refs;
        /* Mapped deleted, or by a process in another mount namespace: once its processes exit,
         * the kept descriptor is the only way to read it. Gives its descriptor up last. */
        bool precious;
        bool elf_ok;
        uint16_t e_type;
        uint8_t build_id[64];
        size_t build_id_size;
        char *go_build_id; /* a Go binary's build ID when it has no GNU one, else NULL */
        size_t n_loads;
        struct {
                uint64_t vaddr, offset, filesz;
                uint32_t flags;
        } loads[PROC_FILE_MAX_LOADS];
};

struct ProcessTable {
        uint64_t exit_grace_ns;
        Process **procs; /* sorted by pid */
        size_t n_procs, cap_procs;
        ProcFile **file_buckets; /* by device + inode; power-of-two count */
        size_t n_files, n_file_buckets;
        unsigned n_open_fds, max_open_fds;
        StringPool *paths;
        uint64_t self_mnt_ns; /* inode of profd's mount namespace */
        size_t max_bytes;
        size_t proc_bytes; /* Process structs and their mapping arrays */
        ProcFile *vdso;
        bool vdso_tried;
        size_t gc_cursor;

        uint64_t n_forks_copied, n_fork_no_parent, n_fork_skipped, n_fork_copies_dropped;
        uint64_t n_reads, n_read_errors, n_bad_lines, n_pid_reuse, n_exited_total, n_forgotten, n_evicted,
                n_table_full, n_truncated, n_no_file, n_not_elf, n_evicted_memory, n_truncated_memory,
                n_fd_evicted;
};

#define FILE_MIN_BUCKETS 256

static size_t file_bucket(const ProcessTable *t, dev_t dev, uint64_t inode)
{
        return hash_mix64(inode ^ hash_mix64(dev)) & (t->n_file_buckets - 1);
}

static size_t process_bytes(const Process *p)
{
        return sizeof(*p) + p->n_mappings * sizeof(ProcMapping);
}

static void proc_file_unref(ProcessTable *t, ProcFile *f)
{
        if (!f || --f->refs > 0)
                return;
        if (f != t->vdso) {
                for (ProcFile **link = &t->file_buckets[file_bucket(t, f->dev, f->inode)]; *link;
                     link = &(*link)->next)
                        if (*link == f) {
                                *link = f->next;
                                t->n_files--;
                                break;
                        }
        }
        if (f->fd >= 0) {
                close(f->fd);
                t->n_open_fds--;
        }
        free(f->go_build_id);
        free(f);
}

static void process_free(ProcessTable *t, Process *p)
{
        if (!p)
                return;
        t->proc_bytes -= process_bytes(p);
        for (size_t i = 0; i < p->n_mappings; i++) {
                string_pool_unref(t->paths, p->mappings[i].path);
                proc_file_unref(t, p->mappings[i].file);
        }
        free(p->mappings);
        free(p);
}

/* How many mapped files to keep open. systemd starts services with a soft RLIMIT_NOFILE of 1024
 * and a high hard limit, expecting programs that need more to raise the soft limit themselves;
 * at most half of what is available goes to kept files so the rest of the daemon (perf events,
 * BPF maps, HTTP connections) never runs out. */
static unsigned open_files_budget(void)
{
        struct rlimit rl;
        uint64_t avail;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return 256;
        if (rl.rlim_cur < 16384 && rl.rlim_max > rl.rlim_cur) {
                rl.rlim_cur = rl.rlim_max < 16384 ? rl.rlim_max : 16384;
                (void)setrlimit(RLIMIT_NOFILE, &rl);
                (void)getrlimit(RLIMIT_NOFILE, &rl);
        }
        avail = rl.rlim_cur > 512 ? (rl.rlim_cur - 512) / 2 : 0;
        return avail < PROCESS_TABLE_MAX_OPEN_FILES ? (unsigned)avail : PROCESS_TABLE_MAX_OPEN_FILES;
}

int process_table_new(uint64_t exit_grace_ns, ProcessTable **ret)
{
        ProcessTable *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        (void)elf_version(EV_CURRENT);
        t->exit_grace_ns = exit_grace_ns;
        t->max_open_fds = open_files_budget();
        t->max_bytes = PROCESS_TABLE_DEFAULT_MEMORY;
        t->file_buckets = calloc(FILE_MIN_BUCKETS, sizeof(*t->file_buckets));
        if (!t->file_buckets || string_pool_new(&t->paths) < 0) {
                free(t->file_buckets);
                free(t);
                return -ENOMEM;
        }
        t->n_file_buckets = FILE_MIN_BUCKETS;
        *ret = t;
        return 0;
}

void process_table_set_memory_budget(ProcessTable *t, size_t bytes)
{
        t->max_bytes = bytes ?: PROCESS_TABLE_DEFAULT_MEMORY;
}

size_t process_table_memory(const ProcessTable *t)
{
        return t->proc_bytes + t->n_files * sizeof(ProcFile) + t->n_file_buckets * sizeof(ProcFile *) +
               string_pool_bytes(t->paths) + t->cap_procs * sizeof(Process *);
}

ProcessTable *process_table_free(ProcessTable *t)
{
        if (!t)
                return NULL;
        for (size_t i = 0; i < t->n_procs; i++)
                process_free(t, t->procs[i]);
        free(t->procs);
        proc_file_unref(t, t->vdso);
        free(t->file_buckets);
        string_pool_free(t->paths);
        return mfree(t);
}

/* Reads the NT_GNU_BUILD_ID note and the PT_LOAD segments: build IDs name the executable in
 * the profile and for debuginfo lookup; segments turn runtime addresses into ELF addresses. A Go
 * binary linked without a GNU build ID (Go's internal linker) names itself by its Go build ID. */
static void proc_file_read_elf(ProcFile *f, int fd)
{
        Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        GElf_Ehdr ehdr;
        size_t phnum;

        if (!elf)
                return;
        if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr) || elf_getphdrnum(elf, &phnum) < 0)
                goto out;
        f->e_type = ehdr.e_type;
        for (size_t i = 0; i < phnum; i++) {
                GElf_Phdr ph;
                if (!gelf_getphdr(elf, (int)i, &ph))
                        continue;
                if (ph.p_type == PT_LOAD && f->n_loads < PROC_FILE_MAX_LOADS) {
                        f->loads[f->n_loads].vaddr = ph.p_vaddr;
                        f->loads[f->n_loads].offset = ph.p_offset;
                        f->loads[f->n_loads].filesz = ph.p_filesz;
                        f->loads[f->n_loads].flags = ph.p_flags;
                        f->n_loads++;
                } else if (ph.p_type == PT_NOTE && f->build_id_size == 0) {
                        Elf_Data *d = elf_getdata_rawchunk(elf, ph.p_offset, ph.p_filesz,
                                                           ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
                        size_t off = 0, name_off, desc_off;
                        GElf_Nhdr nh;
                        if (!d)
                                continue;
                        while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
                                const char *name = (const char *)d->d_buf + name_off,
                                           *desc = (const char *)d->d_buf + desc_off;
                                if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                                    memcmp(name, "GNU", 4) == 0 && nh.n_descsz > 0 &&
                                    nh.n_descsz <= sizeof(f->build_id)) {
                                        memcpy(f->build_id, desc, nh.n_descsz);
                                        f->build_id_size = nh.n_descsz;
                                        break;
                                }
                                /* The Go linker writes the owner as "Go\0\0" (namesz 4). */
                                if (nh.n_type == NT_GO_BUILD_ID && (nh.n_namesz == 3 || nh.n_namesz == 4) &&
                                    memcmp(name, "Go", 3) == 0 && !f->go_build_id) {
                                        size_t n = strnlen(desc, nh.n_descsz);
                                        if (n > 0 && n <= GO_BUILD_ID_MAX)
                                                f->go_build_id = strndup(desc, n);
                                }
                        }
                }
        }
        f->elf_ok = f->n_loads > 0;
        if (f->build_id_size > 0)
                f->go_build_id = mfree(f->go_build_id);
out:
        elf_end(elf);
}

static void file_buckets_grow(ProcessTable *t)
{
        size_t n = t->n_file_buckets * 2;
        ProcFile **b = calloc(n, sizeof(*b));

        if (!b)
                return; /* longer chains, still correct */
        for (size_t i = 0; i < t->n_file_buckets; i++)
                for (ProcFile *f = t->file_buckets[i], *next; f; f = next) {
                        next = f->next;
                        f->next = b[hash_mix64(f->inode ^ hash_mix64(f->dev)) & (n - 1)];
                        b[hash_mix64(f->inode ^ hash_mix64(f->dev)) & (n - 1)] = f;
                }
        free(t->file_buckets);
        t->file_buckets = b;
        t->n_file_buckets = n;
}

/* At the descriptor budget: the open file that was mapped least recently (usually one that only
 * exited processes still reference) gives its descriptor up, one that can be opened again by its
 * path in our namespace before a precious one. A linear scan, done only when a new file arrives
 * at the budget. Returns false when nothing can give one up. */
static bool proc_file_evict_fd(ProcessTable *t, uint64_t now)
{
        ProcFile *victim = NULL;

        for (size_t i = 0; i < t->n_file_buckets; i++)
                for (ProcFile *f = t->file_buckets[i]; f; f = f->next)
                        if (f->fd >= 0 &&
                            (!victim || (victim->precious && !f->precious) ||
                             (victim->precious == f->precious && f->used_ns < victim->used_ns)))
                                victim = f;
        /* Mapped in the last second: churn, not staleness; keep it and go without. */
        if (!victim || victim->used_ns + NSEC_PER_SEC > now)
                return false;
        close(victim->fd);
        victim->fd = -1;
        t->n_open_fds--;
        t->n_fd_evicted++;
        return true;
}

static ProcFile *proc_file_new(ProcessTable *t, int fd, dev_t dev, uint64_t inode, const FileIdentity *id,
                               bool maps_match, bool precious)
{
        uint64_t now = now_ns(CLOCK_MONOTONIC);
        ProcFile *f = calloc(1, sizeof(*f));
        size_t b;

        if (!f)
                return NULL;
        f->dev = dev;
        f->inode = inode;
        f->id = *id;
        f->maps_match = maps_match;
        f->fd = -1;
        f->refs = 1;
        f->used_ns = now;
        f->precious = precious;
        proc_file_read_elf(f, fd);
        if (!f->elf_ok)
                t->n_not_elf++;
        if (t->n_open_fds < t->max_open_fds || proc_file_evict_fd(t, now)) {
                f->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                if (f->fd >= 0)
                        t->n_open_fds++;
        }
        b = file_bucket(t, dev, inode);
        f->next = t->file_buckets[b];
        t->file_buckets[b] = f;
        if (++t->n_files > t->n_file_buckets)
                file_buckets_grow(t);
        return f;
}

/* Only files held open are shared: the descriptor keeps the inode from being freed and its number
 * given to another file, so device + inode cannot name something else meanwhile. Looked up by
 * what /proc/PID/maps shows (no open needed) when that is what fstat() said too. */
static ProcFile *proc_file_find(ProcessTable *t, dev_t dev, uint64_t inode)
{
        for (ProcFile *f = t->file_buckets[file_bucket(t, dev, inode)]; f; f = f->next)
                if (f->fd >= 0 && f->maps_match && f->dev == dev && f->inode == inode)
                        return f;
        return NULL;
}

/* An open file with this identity. Files are hashed by what /proc/PID/maps shows: one whose
 * fstat() differs from that (maps_dev, maps_inode) is in the bucket of the latter. */
static ProcFile *proc_file_find_id(ProcessTable *t, const FileIdentity *id, dev_t maps_dev,
                                   uint64_t maps_inode)
{
        size_t b[2] = {file_bucket(t, id->dev, id->ino), file_bucket(t, maps_dev, maps_inode)};

        for (size_t i = 0; i < 2; i++)
                for (ProcFile *f = t->file_buckets[b[i]]; f; f = f->next)
                        if (f->fd >= 0 && file_identity_equal(&f->id, id))
                                return f;
        return NULL;
}

/* The vDSO is the same image in every process of this kernel (64-bit): a copy of ours in a memfd
 * gives it a file descriptor like any other mapped file. */
static ProcFile *vdso_file(ProcessTable *t)
{
        _cleanup_close_ int fd = -1;
        unsigned long base;
        _cleanup_fclose_ FILE *maps = NULL;
        char line[512];
        uint64_t size = 0;
        struct stat st;

        if (t->vdso_tried)
                return t->vdso;
        t->vdso_tried = true;

        base = getauxval(AT_SYSINFO_EHDR);
        if (!base)
                return NULL;
        maps = fopen("/proc/self/maps", "re");
        if (!maps)
                return NULL;
        while (fgets(line, sizeof(line), maps)) {
                ProcMapsLine l;
                if (proc_maps_parse_line(line, &l) >= 0 && l.start == base) {
                        size = l.end - l.start;
                        break;
                }
        }
        if (size == 0 || size > 64 * 1024 * 1024)
                return NULL;
        fd = memfd_create("profd-vdso", MFD_CLOEXEC);
        if (fd < 0)
                return NULL;
        if (write(fd, (const void *)base, size) != (ssize_t)size)
                return NULL;
        t->vdso = calloc(1, sizeof(ProcFile));
        if (!t->vdso)
                return NULL;
        if (fstat(fd, &st) == 0)
                file_identity_from_stat(&st, &t->vdso->id);
        t->vdso->fd = TAKE_FD(fd);
        t->vdso->refs = 1;
        t->n_open_fds++;
        proc_file_read_elf(t->vdso, t->vdso->fd);
        return t->vdso;
}

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
        if (c->n >= c->max_mappings) {
                c->truncated = true;
                c->dropped++;
                return 0;
        }
        if (c->n == c->cap) {
                size_t cap = c->cap ? c->cap * 2 : 32;
                ProcMapping *n = reallocarray(c->mappings, cap, sizeof(*n));
                if (!n)
                        return -ENOMEM;
                c->mappings = n;
                c->cap = cap;
        }
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
                m.file = vdso_file(c->t);
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

/* starttime (field 22), comm and state of /proc/PID/stat. comm may hold spaces and ')', so
 * fields are counted from the last ')'. */
static int read_stat_full(pid_t pid, uint64_t *ret_start, char comm[17], char *ret_state)
{
        char path[64], buf[1024];
        _cleanup_close_ int fd = -1;
        ssize_t n;
        char *open_paren, *close_paren, *p;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
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

static int read_stat(pid_t pid, uint64_t *ret_start, char comm[17])
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

/* Reads /proc/PID/{stat,maps} into p (which keeps its old mappings on failure). */
static int process_read(ProcessTable *t, Process *p)
{
        char path[64];
        _cleanup_fclose_ FILE *f = NULL;
        ReadCtx c = {
                .t = t, .pid = p->pid, .now = now_ns(CLOCK_MONOTONIC), .max_mappings = PROCESS_MAX_MAPPINGS};
        bool over_budget = process_table_memory(t) > t->max_bytes;
        struct stat ns;
        uint64_t start, start_after;
        char comm[17], state = 0;
        unsigned bad = 0;
        int r;

        t->n_reads++;
        r = read_stat_full(p->pid, &start, comm, &state);
        if (r < 0)
                goto fail;
        /* A zombie (or a dying task) has no mappings left: reading them would replace what we
         * knew with nothing. It is gone for our purposes. */
        if (state == 'Z' || state == 'X' || state == 'x') {
                r = -ESRCH;
                goto fail;
        }
        if (over_budget)
                c.max_mappings = PROCESS_MAX_MAPPINGS_OVER_BUDGET;
        snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)p->pid);
        if (t->self_mnt_ns == 0 && stat("/proc/self/ns/mnt", &ns) == 0)
                t->self_mnt_ns = ns.st_ino;
        c.foreign_ns = stat(path, &ns) == 0 && ns.st_ino != t->self_mnt_ns;
        snprintf(path, sizeof(path), "/proc/%d/maps", (int)p->pid);
        f = fopen(path, "re");
        if (!f) {
                r = errno == ENOENT ? -ESRCH : -errno;
                goto fail;
        }
        r = proc_maps_read(f, read_cb, &c, &bad);
        if (r < 0) {
                mappings_free(t, c.mappings, c.n);
                goto fail;
        }
        /* The pid may have been reused while we read: then the maps belong to someone else. */
        r = read_stat(p->pid, &start_after, NULL);
        if (r >= 0 && start_after != start)
                r = -ESRCH;
        /* A process that had executable mappings and now has none is either tearing its memory
         * down on the way out or in the middle of an exec (the old image gone, the new one not
         * mapped yet): keep what we knew and let the caller look again; its exit event says
         * which. Calling it exited here lost the new image for good (the start time does not
         * change at exec, so no later read undid it). */
        if (r >= 0 && c.n == 0 && p->n_mappings > 0 && start == p->start_time)
                r = -EAGAIN;
        if (r < 0) {
                mappings_free(t, c.mappings, c.n);
                goto fail;
        }

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

static size_t find_index(const ProcessTable *t, pid_t pid, bool *found)
{
        size_t lo = 0, hi = t->n_procs;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (t->procs[mid]->pid < pid)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *found = lo < t->n_procs && t->procs[lo]->pid == pid;
        return lo;
}

static void remove_at(ProcessTable *t, size_t i)
{
        process_free(t, t->procs[i]);
        memmove(t->procs + i, t->procs + i + 1, (t->n_procs - i - 1) * sizeof(*t->procs));
        t->n_procs--;
}

/* Makes room by forgetting the process that exited longest ago (never keep). */
static int evict_one(ProcessTable *t, const Process *keep)
{
        size_t victim = SIZE_MAX;
        for (size_t i = 0; i < t->n_procs; i++)
                if (t->procs[i]->exited_ns && t->procs[i] != keep &&
                    (victim == SIZE_MAX || t->procs[i]->exited_ns < t->procs[victim]->exited_ns))
                        victim = i;
        if (victim == SIZE_MAX)
                return -ENOSPC;
        remove_at(t, victim);
        return 0;
}

/* Over the memory budget, exited processes go oldest first (their samples in older windows lose
 * their names; counted). Live ones stay: their reads are cut short instead (process_read). */
static void enforce_budget(ProcessTable *t, const Process *keep)
{
        while (process_table_memory(t) > t->max_bytes && evict_one(t, keep) >= 0)
                t->n_evicted_memory++;
}

/* Puts p (not in the table yet) at its place; frees it on failure. */
static int table_insert(ProcessTable *t, Process *p)
{
        bool found;
        size_t i;

        if (t->n_procs == t->cap_procs) {
                size_t cap = t->cap_procs ? t->cap_procs * 2 : 256;
                Process **n = reallocarray(t->procs, cap, sizeof(*n));
                if (!n) {
                        process_free(t, p);
                        return -ENOMEM;
                }
                t->procs = n;
                t->cap_procs = cap;
        }
        i = find_index(t, p->pid, &found);
        memmove(t->procs + i + 1, t->procs + i, (t->n_procs - i) * sizeof(*t->procs));
        t->procs[i] = p;
        t->n_procs++;
        return 0;
}

static int insert_new(ProcessTable *t, pid_t pid, Process **ret)
{
        Process *p;
        int r;

        if (t->n_procs >= PROCESS_TABLE_MAX_PROCESSES) {
                r = evict_one(t, NULL);
                if (r < 0) {
                        t->n_table_full++;
                        return r;
                }
                t->n_evicted++;
        }
        enforce_budget(t, NULL);
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->pid = pid;
        t->proc_bytes += sizeof(*p);
        r = process_read(t, p);
        if (r < 0) {
                t->proc_bytes -= sizeof(*p);
                free(p);
                return r;
        }
        r = table_insert(t, p);
        if (r < 0)
                return r;
        *ret = p;
        return 0;
}

int process_table_get(ProcessTable *t, pid_t pid, Process **ret)
{
        bool found;
        size_t i;

        if (pid <= 0)
                return -EINVAL;
        i = find_index(t, pid, &found);
        if (found) {
                Process *p = t->procs[i];
                uint64_t start;
                /* An exited entry whose pid is alive again with another start time was reused:
                 * new samples of this pid belong to the new process. Checked at most once a
                 * second per entry: a profile asks for the same pid once per sample. */
                if (p->exited_ns && p->checked_ns + NSEC_PER_SEC <= now_ns(CLOCK_REALTIME) &&
                    (p->checked_ns = now_ns(CLOCK_REALTIME), read_stat(pid, &start, NULL) >= 0) &&
                    start != p->start_time) {
                        t->n_pid_reuse++;
                        remove_at(t, i);
                        return insert_new(t, pid, ret);
                }
                /* A fork copy of a live process stands in until its maps are read: read them now,
                 * as for a process not known at all (it may have mapped more since the fork). If
                 * it is gone, the copy is what is left. */
                if (p->inherited && !p->exited_ns) {
                        int r;
                        enforce_budget(t, p);
                        r = process_read(t, p);
                        if (r == -ESRCH) {
                                p->exited_ns = now_ns(CLOCK_REALTIME);
                                t->n_exited_total++;
                        }
                }
                *ret = p;
                return 0;
        }
        return insert_new(t, pid, ret);
}

int process_table_refresh(ProcessTable *t, pid_t pid, Process **ret)
{
        Process *p;
        uint64_t old_start;
        bool found;
        size_t i;
        int r;

        if (pid <= 0)
                return -EINVAL;
        i = find_index(t, pid, &found);
        if (!found)
                return insert_new(t, pid, ret);
        p = t->procs[i];
        old_start = p->start_time;
        enforce_budget(t, p);
        r = process_read(t, p);
        if (r == -ESRCH) {
                /* Gone: keep what we knew for the grace period. */
                if (!p->exited_ns) {
                        p->exited_ns = now_ns(CLOCK_REALTIME);
                        t->n_exited_total++;
                }
                *ret = p;
                return 0;
        }
        if (r < 0)
                return r;
        if (p->start_time != old_start && old_start != 0)
                t->n_pid_reuse++;
        /* Read just now: alive, whatever an earlier look concluded. */
        p->exited_ns = 0;
        *ret = p;
        return 0;
}

const Process *process_table_find(const ProcessTable *t, pid_t pid)
{
        bool found;
        size_t i = find_index(t, pid, &found);
        return found ? t->procs[i] : NULL;
}

int process_table_add_anon(ProcessTable *t, pid_t pid, uint64_t start, uint64_t end)
{
        bool found;
        size_t i = find_index(t, pid, &found), at = 0, lo, hi, n;
        ProcMapping *m, *maps;
        const char *anon;

        if (!found || end <= start)
                return -ENOENT;
        Process *p = t->procs[i];
        if (p->exited_ns)
                return -ESRCH;
        m = p->mappings;
        while (at < p->n_mappings && m[at].end <= start)
                at++;
        /* Overlapping entries [lo, hi) must all be anonymous: the new range takes them in. */
        lo = at;
        for (hi = at; hi < p->n_mappings && m[hi].start < end; hi++) {
                if (m[hi].start <= start && end <= m[hi].end && !m[hi].inode)
                        return 0; /* known already */
                if (m[hi].inode || m[hi].file || (m[hi].path && m[hi].path[0]))
                        return -EEXIST; /* part of a file mapping: only a read of the maps tells */
        }
        if (lo < hi) {
                start = m[lo].start < start ? m[lo].start : start;
                end = m[hi - 1].end > end ? m[hi - 1].end : end;
        }
        n = p->n_mappings - (hi - lo) + 1;
        if (n > PROCESS_MAX_MAPPINGS || process_table_memory(t) + sizeof(ProcMapping) > t->max_bytes)
                return -ENOSPC;
        anon = string_pool_ref(t->paths, "");
        if (!anon)
                return -ENOMEM;
        maps = calloc(n, sizeof(*maps));
        if (!maps) {
                string_pool_unref(t->paths, anon);
                return -ENOMEM;
        }
        memcpy(maps, m, lo * sizeof(*maps));
        maps[lo] = (ProcMapping){.start = start, .end = end, .path = anon, .executable = true};
        memcpy(maps + lo + 1, m + hi, (p->n_mappings - hi) * sizeof(*maps));
        /* The merged entries were anonymous: only their interned paths to drop. */
        for (size_t k = lo; k < hi; k++)
                string_pool_unref(t->paths, m[k].path);
        free(m);
        t->proc_bytes += sizeof(ProcMapping);
        t->proc_bytes -= (hi - lo) * sizeof(ProcMapping);
        p->mappings = maps;
        p->n_mappings = n;
        p->generation++;
        return 1;
}

void process_table_mark_exited(ProcessTable *t, pid_t pid, uint64_t now_ns)
{
        bool found;
        size_t i = find_index(t, pid, &found);
        if (!found || t->procs[i]->exited_ns)
                return;
        t->procs[i]->exited_ns = now_ns ? now_ns : 1;
        t->n_exited_total++;
}

int process_table_fork(ProcessTable *t, pid_t parent, pid_t child)
{
        _cleanup_free_ ProcMapping *m = NULL;
        const Process *pp;
        Process *c;
        bool found;
        size_t i;
        int r;

        if (parent <= 0 || child <= 0)
                return -EINVAL;
        i = find_index(t, child, &found);
        if (found && !t->procs[i]->exited_ns)
                return 0;
        if (found) {
                /* An earlier process with this pid, exited: the new one is not it. */
                t->n_pid_reuse++;
                remove_at(t, i);
        }
        i = find_index(t, parent, &found);
        if (!found || t->procs[i]->n_mappings == 0 || t->procs[i]->exited_ns) {
                t->n_fork_no_parent++;
                return -ENOENT;
        }
        pp = t->procs[i];
        /* Bounded like a read: never evicts a live process, never goes over the budget for a copy
         * (a read of the child's maps may still happen later). */
        enforce_budget(t, NULL);
        if (t->n_procs >= PROCESS_TABLE_MAX_PROCESSES && evict_one(t, NULL) < 0) {
                t->n_fork_skipped++;
                return -ENOSPC;
        }
        if (process_table_memory(t) + sizeof(*c) + pp->n_mappings * sizeof(ProcMapping) > t->max_bytes) {
                t->n_fork_skipped++;
                return -ENOSPC;
        }
        m = malloc(pp->n_mappings * sizeof(*m));
        c = calloc(1, sizeof(*c));
        if (!m || !c) {
                free(c);
                return -ENOMEM;
        }
        memcpy(m, pp->mappings, pp->n_mappings * sizeof(*m));
        for (size_t k = 0; k < pp->n_mappings; k++) {
                m[k].path = string_pool_ref(t->paths, pp->mappings[k].path);
                if (m[k].file)
                        m[k].file->refs++;
        }
        c->pid = child;
        c->mappings = TAKE_PTR(m);
        c->n_mappings = pp->n_mappings;
        c->mappings_truncated = pp->mappings_truncated;
        c->inherited = true;
        memcpy(c->comm, pp->comm, sizeof(c->comm));
        c->checked_ns = now_ns(CLOCK_REALTIME);
        /* Its own start time tells a reused pid apart later; a child already gone has none. */
        if (read_stat(child, &c->start_time, NULL) < 0)
                c->exited_ns = c->checked_ns;
        t->proc_bytes += process_bytes(c);
        r = table_insert(t, c);
        if (r < 0)
                return r;
        t->n_forks_copied++;
        return 0;
}

void process_table_exec(ProcessTable *t, pid_t pid)
{
        bool found;
        size_t i = find_index(t, pid, &found);

        if (found && t->procs[i]->inherited) {
                remove_at(t, i);
                t->n_fork_copies_dropped++;
        }
}

void process_table_gc(ProcessTable *t, uint64_t now_ns)
{
        unsigned checks = 0;

        for (size_t i = 0; i < t->n_procs;) {
                Process *p = t->procs[i];
                if (p->exited_ns && p->exited_ns + t->exit_grace_ns <= now_ns) {
                        remove_at(t, i);
                        t->n_forgotten++;
                        continue;
                }
                i++;
        }
        /* No exit events yet for every process: notice exits by polling a bounded batch,
         * resuming where the last call stopped. */
        for (size_t k = 0; k < t->n_procs && checks < GC_CHECKS_PER_CALL; k++) {
                Process *p;
                uint64_t start;
                int r;

                if (t->gc_cursor >= t->n_procs)
                        t->gc_cursor = 0;
                p = t->procs[t->gc_cursor++];
                if (p->exited_ns || p->checked_ns + GC_CHECK_INTERVAL_NS > now_ns)
                        continue;
                checks++;
                r = read_stat(p->pid, &start, NULL);
                p->checked_ns = now_ns;
                if (r == -ESRCH || (r >= 0 && start != p->start_time)) {
                        p->exited_ns = now_ns;
                        t->n_exited_total++;
                }
        }
}

const ProcMapping *process_find_mapping(const Process *p, uint64_t addr)
{
        size_t lo = 0, hi = p->n_mappings;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (p->mappings[mid].end <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo < p->n_mappings && p->mappings[lo].start <= addr && addr < p->mappings[lo].end)
                return &p->mappings[lo];
        return NULL;
}

static SafeMapping safe_mapping_of(const Process *p, const ProcMapping *m)
{
        return (SafeMapping){.pid = p->pid,
                             .alive = !p->exited_ns,
                             .start = m->start,
                             .end = m->end,
                             .path = m->path,
                             .deleted = m->deleted,
                             .dev = m->dev,
                             .ino = m->inode,
                             .known = m->file ? &m->file->id : NULL};
}

int process_open_mapping(const Process *p, const ProcMapping *m)
{
        SafeMapping sm = safe_mapping_of(p, m);
        int fd;

        if (m->file && m->file->fd >= 0) {
                fd = fcntl(m->file->fd, F_DUPFD_CLOEXEC, 3);
                return fd >= 0 ? fd : -errno;
        }
        if (m->inode == 0 || proc_maps_path_is_pseudo(m->path))
                return -ENOENT;
        /* Not kept open (over the budget): opened again, and it must be the file read then. */
        return safe_open_mapping(&sm, NULL, NULL);
}

bool process_mapping_reopen(const Process *p, const ProcMapping *m, SafeMapping *ret)
{
        /* The vDSO has no file to open again (its copy is always kept open). */
        if (!m->file || m->inode == 0 || proc_maps_path_is_pseudo(m->path))
                return false;
        *ret = safe_mapping_of(p, m);
        return true;
}

size_t process_mapping_key(const ProcMapping *m, uint8_t ret[PROCESS_MAPPING_KEY_MAX])
{
        const FileIdentity *id;
        size_t n, bid;

        if (!m->file)
                return 0;
        id = &m->file->id;
        n = 0;
#define PUT(v)                                                                                              \
        do {                                                                                                \
                uint64_t _v = (uint64_t)(v);                                                                \
                memcpy(ret + n, &_v, 8);                                                                    \
                n += 8;                                                                                     \
        } while (0)
        PUT(id->dev);
        PUT(id->ino);
        PUT(id->size);
        PUT(id->mtime_ns);
        PUT(id->ctime_ns);
#undef PUT
        bid = m->file->build_id_size < PROCESS_MAPPING_KEY_MAX - n ? m->file->build_id_size
                                                                   : PROCESS_MAPPING_KEY_MAX - n;
        memcpy(ret + n, m->file->build_id, bid);
        return n + bid;
}

const char *process_mapping_go_build_id(const ProcMapping *m)
{
        return m->file ? m->file->go_build_id : NULL;
}

size_t process_mapping_identity(const ProcMapping *m, char *buf, size_t size)
{
        static const char hex[] = "0123456789abcdef";
        uint8_t key[PROCESS_MAPPING_KEY_MAX];
        size_t n = process_mapping_key(m, key), k = 0;

        if (size == 0)
                return 0;
        for (size_t i = 0; i < n && k + 2 < size; i++) {
                buf[k++] = hex[key[i] >> 4];
                buf[k++] = hex[key[i] & 15];
        }
        buf[k] = 0;
        return k;
}

void process_table_write_metrics(const ProcessTable *t, FILE *f)
{
        size_t exited = 0, mappings = 0;

        for (size_t i = 0; i < t->n_procs; i++) {
                exited += t->procs[i]->exited_ns != 0;
                mappings += t->procs[i]->n_mappings;
        }
        fprintf(f,
                "# HELP profd_process_table_processes Processes whose mappings are known (incl. exited, "
                "kept for symbolization).\n"
                "# TYPE profd_process_table_processes gauge\n"
                "profd_process_table_processes %zu\n"
                "# HELP profd_process_table_exited_processes Exited processes kept for the grace period.\n"
                "# TYPE profd_process_table_exited_processes gauge\n"
                "profd_process_table_exited_processes %zu\n"
                "# HELP profd_process_table_mappings Executable mappings known.\n"
                "# TYPE profd_process_table_mappings gauge\n"
                "profd_process_table_mappings %zu\n"
                "# HELP profd_process_table_files Distinct mapped files known.\n"
                "# TYPE profd_process_table_files gauge\n"
                "profd_process_table_files %zu\n"
                "# HELP profd_process_table_open_files Mapped files held open for later symbolization.\n"
                "# TYPE profd_process_table_open_files gauge\n"
                "profd_process_table_open_files %u\n"
                "# HELP profd_process_table_open_files_limit Most mapped files held open (half the fd "
                "limit, <= 256).\n"
                "# TYPE profd_process_table_open_files_limit gauge\n"
                "profd_process_table_open_files_limit %u\n"
                "# HELP profd_process_table_reads_total Reads of /proc/PID/maps.\n"
                "# TYPE profd_process_table_reads_total counter\n"
                "profd_process_table_reads_total %" PRIu64 "\n"
                "# HELP profd_process_table_errors_total Problems reading processes, by reason.\n"
                "# TYPE profd_process_table_errors_total counter\n"
                "profd_process_table_errors_total{reason=\"read_failed\"} %" PRIu64 "\n"
                "profd_process_table_errors_total{reason=\"malformed_maps_line\"} %" PRIu64 "\n"
                "profd_process_table_errors_total{reason=\"mappings_truncated\"} %" PRIu64 "\n"
                "profd_process_table_errors_total{reason=\"file_unopenable\"} %" PRIu64 "\n"
                "profd_process_table_errors_total{reason=\"not_elf\"} %" PRIu64 "\n"
                "profd_process_table_errors_total{reason=\"table_full\"} %" PRIu64 "\n"
                "# HELP profd_process_table_events_total Process lifecycle events seen by the table.\n"
                "# TYPE profd_process_table_events_total counter\n"
                "profd_process_table_events_total{event=\"exited\"} %" PRIu64 "\n"
                "profd_process_table_events_total{event=\"forgotten\"} %" PRIu64 "\n"
                "profd_process_table_events_total{event=\"evicted\"} %" PRIu64 "\n"
                "profd_process_table_events_total{event=\"pid_reused\"} %" PRIu64 "\n"
                "profd_process_table_events_total{event=\"evicted_memory\"} %" PRIu64 "\n"
                "profd_process_table_events_total{event=\"open_file_closed\"} %" PRIu64 "\n"
                "# HELP profd_process_table_memory_bytes Heap held by the table: snapshots, mappings, "
                "files, "
                "interned paths.\n"
                "# TYPE profd_process_table_memory_bytes gauge\n"
                "profd_process_table_memory_bytes %zu\n"
                "# HELP profd_process_table_memory_limit_bytes The table's budget "
                "(--process-table-memory).\n"
                "# TYPE profd_process_table_memory_limit_bytes gauge\n"
                "profd_process_table_memory_limit_bytes %zu\n"
                "# HELP profd_process_table_paths Distinct mapping paths (interned).\n"
                "# TYPE profd_process_table_paths gauge\n"
                "profd_process_table_paths %zu\n"
                "# HELP profd_process_table_mappings_dropped_total Executable mappings not kept when a "
                "process was read, by reason.\n"
                "# TYPE profd_process_table_mappings_dropped_total counter\n"
                "profd_process_table_mappings_dropped_total{reason=\"over_memory_budget\"} %" PRIu64 "\n",
                t->n_procs, exited, mappings, t->n_files, t->n_open_fds, t->max_open_fds, t->n_reads,
                t->n_read_errors, t->n_bad_lines, t->n_truncated, t->n_no_file, t->n_not_elf,
                t->n_table_full, t->n_exited_total, t->n_forgotten, t->n_evicted, t->n_pid_reuse,
                t->n_evicted_memory, t->n_fd_evicted, process_table_memory(t), t->max_bytes,
                string_pool_count(t->paths), t->n_truncated_memory);
        fprintf(f,
                "# HELP profd_process_table_fork_copies_total New processes given a copy of their "
                "parent's snapshot at fork, by outcome.\n"
                "# TYPE profd_process_table_fork_copies_total counter\n"
                "profd_process_table_fork_copies_total{outcome=\"copied\"} %" PRIu64 "\n"
                "profd_process_table_fork_copies_total{outcome=\"parent_unknown\"} %" PRIu64 "\n"
                "profd_process_table_fork_copies_total{outcome=\"over_bounds\"} %" PRIu64 "\n"
                "profd_process_table_fork_copies_total{outcome=\"dropped_at_exec\"} %" PRIu64 "\n",
                t->n_forks_copied, t->n_fork_no_parent, t->n_fork_skipped, t->n_fork_copies_dropped);
}
