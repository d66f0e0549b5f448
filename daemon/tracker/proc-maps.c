/* SPDX-License-Identifier: GPL-2.0-only */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include <linux/types.h>

#include "tracker/proc-maps.h"
#include "util/macro.h"

static int parse_hex(const char **p, char terminator, uint64_t *ret)
{
        const char *s = *p;
        uint64_t v = 0;
        unsigned digits = 0;

        for (; isxdigit((unsigned char)*s); s++, digits++) {
                if (digits >= 16)
                        return -EBADMSG;
                v = v << 4 | (uint64_t)(isdigit((unsigned char)*s) ? *s - '0' : (tolower(*s) - 'a' + 10));
        }
        if (digits == 0 || *s != terminator)
                return -EBADMSG;
        *p = s + 1;
        *ret = v;
        return 0;
}

int proc_maps_parse_line(char *line, ProcMapsLine *ret)
{
        const char *p = line;
        uint64_t start, end, offset, major, minor, inode = 0;
        ProcMapsLine l = {};
        size_t len;
        int r;

        len = strlen(line);
        if (len > 0 && line[len - 1] == '\n')
                line[--len] = 0;

        r = parse_hex(&p, '-', &start);
        if (r < 0)
                return r;
        r = parse_hex(&p, ' ', &end);
        if (r < 0)
                return r;
        if (end < start)
                return -EBADMSG;

        if (strlen(p) < 5 || p[4] != ' ')
                return -EBADMSG;
        if ((p[0] != 'r' && p[0] != '-') || (p[1] != 'w' && p[1] != '-') || (p[2] != 'x' && p[2] != '-') ||
            (p[3] != 'p' && p[3] != 's'))
                return -EBADMSG;
        l.readable = p[0] == 'r';
        l.writable = p[1] == 'w';
        l.executable = p[2] == 'x';
        l.shared = p[3] == 's';
        p += 5;

        r = parse_hex(&p, ' ', &offset);
        if (r < 0)
                return r;
        r = parse_hex(&p, ':', &major);
        if (r < 0)
                return r;
        r = parse_hex(&p, ' ', &minor);
        if (r < 0)
                return r;

        if (!isdigit((unsigned char)*p))
                return -EBADMSG;
        for (unsigned digits = 0; isdigit((unsigned char)*p); p++, digits++) {
                if (digits >= 20)
                        return -EBADMSG;
                inode = inode * 10 + (uint64_t)(*p - '0');
        }
        if (*p != ' ' && *p != 0)
                return -EBADMSG;
        /* The kernel pads with spaces up to a column before the path; the path itself may start
         * with a space only in theory (a file named " x" shows as "/dir/ x"), so skipping
         * leading blanks loses nothing real. */
        while (*p == ' ')
                p++;

        static const char deleted[] = " (deleted)";
        len = strlen(p);
        if (len >= sizeof(deleted) - 1 && strcmp(p + len - (sizeof(deleted) - 1), deleted) == 0) {
                line[(p - line) + len - (sizeof(deleted) - 1)] = 0;
                l.deleted = true;
        }

        l.start = start;
        l.end = end;
        l.offset = offset;
        l.dev_major = (unsigned)major;
        l.dev_minor = (unsigned)minor;
        l.inode = inode;
        l.path = p;
        *ret = l;
        return 0;
}

int proc_maps_read(FILE *f, proc_maps_cb_t cb, void *userdata, unsigned *ret_bad)
{
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        unsigned bad = 0;
        ssize_t n;
        int r = 0;

        while ((n = getline(&line, &size, f)) >= 0) {
                ProcMapsLine l;

                /* A NUL inside a line cannot come from the kernel's format: reject it. */
                if ((size_t)n != strlen(line)) {
                        bad++;
                        continue;
                }
                if (proc_maps_parse_line(line, &l) < 0) {
                        bad++;
                        continue;
                }
                r = cb(&l, userdata);
                if (r < 0)
                        break;
        }
        if (r >= 0 && ferror(f))
                r = -EIO;
        if (ret_bad)
                *ret_bad = bad;
        return r < 0 ? r : 0;
}

/* linux/fs.h of Linux 6.11; the build headers may be older than the kernel profd runs on. */
struct profd_procmap_query {
        __u64 size;
        __u64 query_flags;
        __u64 query_addr;
        __u64 vma_start;
        __u64 vma_end;
        __u64 vma_flags;
        __u64 vma_page_size;
        __u64 vma_offset;
        __u64 inode;
        __u32 dev_major;
        __u32 dev_minor;
        __u32 vma_name_size;
        __u32 build_id_size;
        __u64 vma_name_addr;
        __u64 build_id_addr;
};
#define PROFD_PROCMAP_QUERY _IOWR('f', 17, struct profd_procmap_query)
#define PROFD_PROCMAP_QUERY_VMA_READABLE 0x01
#define PROFD_PROCMAP_QUERY_VMA_WRITABLE 0x02
#define PROFD_PROCMAP_QUERY_VMA_EXECUTABLE 0x04
#define PROFD_PROCMAP_QUERY_VMA_SHARED 0x08
#define PROFD_PROCMAP_QUERY_COVERING_OR_NEXT_VMA 0x10

int proc_maps_query_executable(int fd, proc_maps_cb_t cb, void *userdata)
{
        static const char deleted[] = " (deleted)";
        char name[PATH_MAX]; /* the kernel's limit for the name too */
        uint64_t addr = 0;
        bool first = true;
        int r;

        for (;;) {
                struct profd_procmap_query q = {
                        .size = sizeof(q),
                        .query_flags = PROFD_PROCMAP_QUERY_COVERING_OR_NEXT_VMA |
                                       PROFD_PROCMAP_QUERY_VMA_EXECUTABLE,
                        .query_addr = addr,
                        .vma_name_size = sizeof(name),
                        .vma_name_addr = (uintptr_t)name,
                };
                ProcMapsLine l = {};
                size_t len;

                if (ioctl(fd, PROFD_PROCMAP_QUERY, &q) < 0) {
                        if (errno == ENOENT)
                                return 0; /* no executable mapping at or after addr */
                        if (first && (errno == ENOTTY || errno == EINVAL))
                                return -EOPNOTSUPP;
                        return -errno;
                }
                first = false;
                if (q.vma_end <= q.vma_start || q.vma_start < addr)
                        return -EBADMSG;
                if (q.vma_name_size == 0)
                        name[0] = 0;
                name[sizeof(name) - 1] = 0;
                /* As the text shows it: d_path() appends " (deleted)" to an unlinked file. */
                len = strlen(name);
                if (len >= sizeof(deleted) - 1 && strcmp(name + len - (sizeof(deleted) - 1), deleted) == 0) {
                        name[len - (sizeof(deleted) - 1)] = 0;
                        l.deleted = true;
                }
                l.start = q.vma_start;
                l.end = q.vma_end;
                l.offset = q.vma_offset;
                l.dev_major = q.dev_major;
                l.dev_minor = q.dev_minor;
                l.inode = q.inode;
                l.readable = q.vma_flags & PROFD_PROCMAP_QUERY_VMA_READABLE;
                l.writable = q.vma_flags & PROFD_PROCMAP_QUERY_VMA_WRITABLE;
                l.executable = true;
                l.shared = q.vma_flags & PROFD_PROCMAP_QUERY_VMA_SHARED;
                l.path = name;
                if (strchr(name, '\n')) {
                        /* The text escapes a newline in a path ("\012", seq_file_path()): the same
                         * path whichever way it was read. */
                        _cleanup_free_ char *esc = malloc(4 * strlen(name) + 1);
                        char *o = esc;

                        if (!esc)
                                return -ENOMEM;
                        for (const char *i = name; *i; i++)
                                if (*i == '\n')
                                        o = stpcpy(o, "\\012");
                                else
                                        *o++ = *i;
                        *o = 0;
                        l.path = esc;
                        r = cb(&l, userdata);
                } else
                        r = cb(&l, userdata);
                if (r < 0)
                        return r;
                addr = q.vma_end;
        }
}
