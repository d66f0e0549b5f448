/* SPDX-License-Identifier: GPL-2.0-only */
/* Parser for /proc/PID/maps lines. The kernel prints
 *   start-end perms offset major:minor inode<spaces>path
 * where path may be empty (anonymous), contain spaces, be a pseudo name ("[vdso]", "[heap]"),
 * a memfd ("/memfd:name (deleted)") or end in " (deleted)". Anything else is rejected with
 * -EBADMSG so a caller can count it instead of guessing. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ProcMapsLine {
        uint64_t start, end, offset;
        unsigned dev_major, dev_minor;
        uint64_t inode;
        bool readable, writable, executable, shared;
        bool deleted;     /* " (deleted)" was stripped from path */
        const char *path; /* points into the parsed line; "" for anonymous mappings */
} ProcMapsLine;

/* Parses one line in place (the trailing newline and " (deleted)" are cut off). */
int proc_maps_parse_line(char *line, ProcMapsLine *ret);

/* Calls cb for every well-formed line of f; stops early if cb returns < 0 and returns that.
 * *ret_bad (optional) gets the number of malformed lines skipped. */
typedef int (*proc_maps_cb_t)(const ProcMapsLine *l, void *userdata);
int proc_maps_read(FILE *f, proc_maps_cb_t cb, void *userdata, unsigned *ret_bad);

/* Calls cb for every executable mapping of the maps file fd through the PROCMAP_QUERY ioctl
 * (Linux 6.11+): one call per executable mapping, without the kernel formatting the other ones.
 * -EOPNOTSUPP before any cb call: the kernel has no such ioctl; -ENAMETOOLONG (possibly after cb
 * calls): a path longer than the ioctl takes. Read the text instead then. Does not move the file
 * position. */
int proc_maps_query_executable(int fd, proc_maps_cb_t cb, void *userdata);

/* Pseudo mappings the kernel names in brackets: "[vdso]", "[vsyscall]", "[stack]", ... */
static inline bool proc_maps_path_is_pseudo(const char *path)
{
        return path[0] == '[';
}
