/* SPDX-License-Identifier: GPL-2.0-only */
/* What a process's mapping gives its users: the mapping at an address, its file opened (again)
 * safely, and the key its derived data (unwind tables, symbols) is shared under. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tracker/proc-maps.h"
#include "tracker/process-files.h"

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
