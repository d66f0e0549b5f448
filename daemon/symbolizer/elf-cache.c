/* SPDX-License-Identifier: GPL-2.0-only */
/* The cache of opened executables: a Dwfl per file identity, opened through the process's
 * descriptor, with separate debug files searched also in the process's own root. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "symbolizer/elf-cache.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/time-util.h"

void exe_free(Exe *e)
{
        if (!e)
                return;
        if (e->dwfl)
                dwfl_end(e->dwfl);
        free(e->syms);
        for (size_t i = 0; i < e->n_plt; i++)
                free((char *)e->plt[i].name);
        free(e->plt);
        free(e->cus);
        free(e->identity);
        debuginfo_search_done(&e->search);
        free(e);
}

Exe *exe_lookup(ExeCache *c, const char *identity)
{
        uint64_t h = hash_fnv1a(HASH_FNV1A_INIT, identity, strlen(identity));
        for (size_t i = 0; i < c->n_exes; i++)
                if (c->exes[i]->hash == h && strcmp(c->exes[i]->identity, identity) == 0)
                        return c->exes[i];
        return NULL;
}

static void exe_evict_lru(ExeCache *c)
{
        size_t victim = 0;
        for (size_t i = 1; i < c->n_exes; i++)
                if (c->exes[i]->last_use < c->exes[victim]->last_use)
                        victim = i;
        exe_free(c->exes[victim]);
        c->exes[victim] = c->exes[--c->n_exes];
        c->n_exe_evicted++;
}

static bool same_file(const char *a, const char *b)
{
        struct stat sa, sb;
        return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* A process in another mount namespace or a chroot (a container) has its own /usr/lib/debug:
 * searched after ours, by build ID, so a debug package installed in the image names its stripped
 * binaries. Not reachable once the process is gone: its executables are usually opened by the
 * first profile that has its samples, while it still runs. */
static char *process_root(pid_t pid)
{
        char root[64], ns[64];

        snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
        snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)pid);
        if (pid <= 0 || (same_file(root, "/") && same_file(ns, "/proc/self/ns/mnt")) ||
            access(root, X_OK) < 0)
                return NULL;
        return strdup(root);
}

int exe_open(ExeCache *c, const Process *p, const ProcMapping *m, const char *identity, Exe **ret)
{
        struct stat st;
        Exe *e;
        int fd;

        if (c->n_exes >= SYMBOLIZER_MAX_EXES)
                exe_evict_lru(c);
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->identity = strdup(identity);
        if (!e->identity) {
                free(e);
                return -ENOMEM;
        }
        e->hash = hash_fnv1a(HASH_FNV1A_INIT, identity, strlen(identity));
        e->id = ++c->next_exe_id;
        c->exes[c->n_exes++] = e;

        fd = process_open_mapping(p, m);
        if (fd < 0) {
                e->failed_ns = now_ns(CLOCK_MONOTONIC);
                c->n_exe_failed++;
                *ret = e;
                return 0;
        }
        e->callbacks = c->callbacks;
        e->search.path = c->debuginfo_path;
        e->search.root = process_root(p->pid);
        if (fstat(fd, &st) == 0) {
                e->search.main_dev = st.st_dev;
                e->search.main_ino = st.st_ino;
        }
        e->dwfl = dwfl_begin(&e->callbacks);
        if (!e->dwfl) {
                close(fd);
                e->failed_ns = now_ns(CLOCK_MONOTONIC);
                c->n_exe_failed++;
                *ret = e;
                return 0;
        }
        /* Placed at its ELF addresses (bias 0): callers subtract the per-mapping load bias, so
         * one Dwfl serves every process whatever its ASLR layout. */
        dwfl_report_begin(e->dwfl);
        e->mod = dwfl_report_elf(e->dwfl, m->path[0] ? m->path : "[anon]", m->path, fd, 0, true);
        dwfl_report_end(e->dwfl, NULL, NULL);
        if (!e->mod) {
                log_debug("Cannot read %s as ELF: %s", m->path, dwfl_errmsg(-1));
                close(fd);
                dwfl_end(e->dwfl);
                e->dwfl = NULL;
                e->failed_ns = now_ns(CLOCK_MONOTONIC);
                c->n_exe_failed++;
        } else {
                debuginfo_search_attach(&e->search, e->mod);
                c->n_exe_opened++;
        }
        *ret = e;
        return 0;
}
