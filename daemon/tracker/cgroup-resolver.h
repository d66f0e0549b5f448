/* SPDX-License-Identifier: GPL-2.0-only */
/* cgroup id (as the BPF side records it: the task's cgroup in the v2 hierarchy) -> cgroup path ->
 * systemd unit and container id. On cgroup v2 a cgroup's id is the inode number of its directory,
 * so an id resolves with open_by_handle_at() on the cgroup2 mount (or, without
 * CAP_DAC_READ_SEARCH, by walking the tree). Works on the unified layout (/sys/fs/cgroup) and the
 * hybrid one (/sys/fs/cgroup/unified). Results are cached per id and kept for a while after the
 * cgroup is gone, so profiles of a window still name a unit that stopped meanwhile. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tracker/labels.h"
#include "util/macro.h"

typedef struct CgroupResolver CgroupResolver;

typedef struct CgroupInfo {
        uint64_t id;
        char *path;         /* relative to the cgroup2 root, "/" for the root; NULL: unresolved */
        char *unit;         /* NULL: none */
        char *container_id; /* NULL: none */
} CgroupInfo;

/* root: the cgroup2 mount point; NULL finds it in /proc/self/mountinfo. Keeps at most max_entries
 * ids; an id unused for keep_ns may be forgotten. -ENOENT if there is no cgroup2 mount. */
int cgroup_resolver_new(const char *root, size_t max_entries, uint64_t keep_ns, CgroupResolver **ret);
CgroupResolver *cgroup_resolver_free(CgroupResolver *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(CgroupResolver *, cgroup_resolver_free);

const char *cgroup_resolver_root(const CgroupResolver *r);

/* Resolves (or finds in the cache) and marks the id used at now_ns. Never NULL for id != 0: a
 * cgroup that cannot be resolved yields an entry with path == NULL (retried later). The pointer
 * stays valid until the next cgroup_resolver_get()/gc() call. */
const CgroupInfo *cgroup_resolver_get(CgroupResolver *r, uint64_t id, uint64_t now_ns);
/* Resolve ids seen in a drain right away, while their cgroups still exist. */
void cgroup_resolver_note(CgroupResolver *r, uint64_t id, uint64_t now_ns);
/* Forget ids unused for keep_ns. */
void cgroup_resolver_gc(CgroupResolver *r, uint64_t now_ns);
void cgroup_resolver_write_metrics(const CgroupResolver *r, FILE *f);
/* Heap it holds: the slots (all written at start) and the names resolved (profd_memory_bytes). */
size_t cgroup_resolver_memory(const CgroupResolver *r);

/* For PprofOptions.cgroup_label (userdata: the resolver): the sample's unit or container id, or
 * NULL when it has none. */
const char *cgroup_resolver_label(void *userdata, Label label, uint64_t cgroup_id);

/* A cgroup directory found by name or path, for filters. level: depth below the v2 root (root 0),
 * as bpf_get_current_ancestor_cgroup_id() counts it. */
typedef struct CgroupMatch {
        uint64_t id;
        int level;
} CgroupMatch;

/* spec: a path relative to the cgroup2 root ("/system.slice/x.service") or an absolute path
 * below the mount ("/sys/fs/cgroup/system.slice/x.service"). */
int cgroup_resolver_find_path(CgroupResolver *r, const char *spec, CgroupMatch *ret);
/* Every cgroup whose unit (see cgroup_path_get_unit) is `unit`, outermost only (its descendants
 * are covered by ancestor matching). Walks at most CGROUP_WALK_MAX directories. Returns the
 * number found (0 if none), up to max. */
int cgroup_resolver_find_unit(CgroupResolver *r, const char *unit, CgroupMatch *ret, size_t max);

/* Pure path parsing, unit-testable. path is relative to the cgroup2 root. */
/* systemd's notion: the first non-slice unit-named component (system unit; a user manager's
 * processes yield user@UID.service, login sessions session-N.scope). NULL if none. */
int cgroup_path_get_unit(const char *path, char **ret);
/* docker (docker-ID.scope, /docker/ID), containerd (cri-containerd-ID.scope, /kubepods/.../ID),
 * cri-o (crio-ID.scope), podman (libpod-ID.scope, libpod-ID.scope/container), nerdctl: the
 * innermost 64-hex container id. NULL if none. */
int cgroup_path_get_container_id(const char *path, char **ret);
/* Number of components: "/" 0, "/a" 1, "/a/b" 2. */
int cgroup_path_level(const char *path);
