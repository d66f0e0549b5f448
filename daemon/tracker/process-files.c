/* SPDX-License-Identifier: GPL-2.0-only */
/* The table's mapped files: a hash by device + inode, the ELF facts read from each (build IDs,
 * PT_LOAD segments), the descriptors kept open and the budget they live in, the vDSO. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tracker/proc-maps.h"
#include "tracker/process-files.h"
#include "util/hash.h"
#include "util/time-util.h"

/* Go build IDs are 83 bytes ("actionID/contentID" in base64); -ldflags=-buildid=... may set any
 * string, longer ones than this are not kept. */
#define GO_BUILD_ID_MAX 128
/* Type of the Go linker's build ID note (owner "Go", section .note.go.buildid). */
#define NT_GO_BUILD_ID 4
static uint64_t file_hash(dev_t dev, uint64_t inode)
{
        return hash_mix64(inode ^ hash_mix64(dev));
}

void proc_file_unref(ProcessTable *t, ProcFile *f)
{
        if (!f || --f->refs > 0)
                return;
        if (f != t->vdso) /* the vDSO's file is not in the hash */
                chain_hash_remove(&t->files, &f->link);
        if (f->fd >= 0) {
                close(f->fd);
                t->n_open_fds--;
        }
        free(f->go_build_id);
        free(f);
}

/* How many mapped files to keep open. systemd starts services with a soft RLIMIT_NOFILE of 1024
 * and a high hard limit, expecting programs that need more to raise the soft limit themselves;
 * at most half of what is available goes to kept files so the rest of the daemon (perf events,
 * BPF maps, HTTP connections) never runs out. */
unsigned proc_file_open_budget(void)
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

/* At the descriptor budget: the open file that was mapped least recently (usually one that only
 * exited processes still reference) gives its descriptor up, one that can be opened again by its
 * path in our namespace before a precious one. A linear scan, done only when a new file arrives
 * at the budget. Returns false when nothing can give one up. */
static bool proc_file_evict_fd(ProcessTable *t, uint64_t now)
{
        ProcFile *victim = NULL;

        CHAIN_HASH_FOREACH (l, &t->files) {
                ProcFile *f = CHAIN_HASH_ENTRY(l, ProcFile, link);

                if (f->fd >= 0 && (!victim || (victim->precious && !f->precious) ||
                                   (victim->precious == f->precious && f->used_ns < victim->used_ns)))
                        victim = f;
        }
        /* Mapped in the last second: churn, not staleness; keep it and go without. */
        if (!victim || victim->used_ns + NSEC_PER_SEC > now)
                return false;
        close(victim->fd);
        victim->fd = -1;
        t->n_open_fds--;
        t->n_fd_evicted++;
        return true;
}

ProcFile *proc_file_new(ProcessTable *t, int fd, dev_t dev, uint64_t inode, const FileIdentity *id,
                        bool maps_match, bool precious)
{
        uint64_t now = now_ns(CLOCK_MONOTONIC);
        ProcFile *f = calloc(1, sizeof(*f));

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
        if (chain_hash_add(&t->files, &f->link, file_hash(dev, inode)) < 0)
                return mfree(f);
        proc_file_read_elf(f, fd);
        if (!f->elf_ok)
                t->n_not_elf++;
        if (t->n_open_fds < t->max_open_fds || proc_file_evict_fd(t, now)) {
                f->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                if (f->fd >= 0)
                        t->n_open_fds++;
        }
        return f;
}

/* Only files held open are shared: the descriptor keeps the inode from being freed and its number
 * given to another file, so device + inode cannot name something else meanwhile. Looked up by
 * what /proc/PID/maps shows (no open needed) when that is what fstat() said too. */
ProcFile *proc_file_find(ProcessTable *t, dev_t dev, uint64_t inode)
{
        for (HashLink *l = chain_hash_first(&t->files, file_hash(dev, inode)); l; l = l->next) {
                ProcFile *f = CHAIN_HASH_ENTRY(l, ProcFile, link);

                if (f->fd >= 0 && f->maps_match && f->dev == dev && f->inode == inode)
                        return f;
        }
        return NULL;
}

/* An open file with this identity. Files are hashed by what /proc/PID/maps shows: one whose
 * fstat() differs from that (maps_dev, maps_inode) is in the bucket of the latter. */
ProcFile *proc_file_find_id(ProcessTable *t, const FileIdentity *id, dev_t maps_dev, uint64_t maps_inode)
{
        uint64_t h[2] = {file_hash(id->dev, id->ino), file_hash(maps_dev, maps_inode)};

        /* Whole chains: a file is in the chain of its maps device and inode, not of its id. */
        for (size_t i = 0; i < 2; i++)
                for (HashLink *l = chain_hash_first(&t->files, h[i]); l; l = l->next) {
                        ProcFile *f = CHAIN_HASH_ENTRY(l, ProcFile, link);

                        if (f->fd >= 0 && file_identity_equal(&f->id, id))
                                return f;
                }
        return NULL;
}

/* The vDSO is the same image in every process of this kernel (64-bit): a copy of ours in a memfd
 * gives it a file descriptor like any other mapped file. */
ProcFile *proc_file_vdso(ProcessTable *t)
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
