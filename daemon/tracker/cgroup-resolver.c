/* SPDX-License-Identifier: GPL-2.0-only */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tracker/cgroup-resolver.h"
#include "util/log.h"
#include "util/metrics-writer.h"
#include "util/time-util.h"

/* A failed resolution (cgroup already gone, or not yet visible) is retried after this long, so a
 * storm of samples from one unresolvable id costs one syscall per period, not one per sample. */
#define CGROUP_RETRY_NS (5 * NSEC_PER_SEC)
/* Upper bound on directories visited by one tree walk (fallback resolution, --unit lookup): a host
 * with many thousands of containers has far fewer cgroups than this. */
#define CGROUP_WALK_MAX 65536
/* cgroup nesting deeper than this is not walked (kubernetes uses ~6 levels). */
#define CGROUP_WALK_MAX_DEPTH 32
/* systemd's UNIT_NAME_MAX. */
#define UNIT_NAME_MAX 256
#define CONTAINER_ID_LEN 64

/* open_by_handle_at() on kernfs: an 8-byte handle holding the cgroup id. */
#define KERNFS_HANDLE_BYTES 8

typedef struct Entry {
        CgroupInfo info;
        uint64_t last_used_ns;
        uint64_t retry_ns; /* unresolved: when to try again */
        int next;          /* hash chain, -1 ends */
        bool used;
} Entry;

struct CgroupResolver {
        char *root; /* mount point, no trailing slash */
        int root_fd;
        int handle_type; /* -1: resolve by walking */
        size_t max_entries;
        uint64_t keep_ns;

        Entry *entries; /* max_entries slots */
        int *buckets;   /* n_buckets heads */
        size_t n_buckets;
        int free_head; /* chain of unused slots through next */
        size_t n_used;

        uint64_t n_resolved, n_failed, n_evicted, n_walks;
};

static const char *const unit_suffixes[] = {
        "service", "socket", "device", "mount", "automount", "swap",
        "target",  "path",   "timer",  "slice", "scope",
};

static bool unit_char_ok(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               strchr(":-_.\\@", c);
}

static bool unit_name_valid(const char *s, size_t n)
{
        const char *dot = NULL;

        if (n == 0 || n >= UNIT_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                if (!unit_char_ok(s[i]))
                        return false;
                if (s[i] == '.')
                        dot = s + i;
        }
        if (!dot || dot == s)
                return false;
        size_t sl = n - (size_t)(dot + 1 - s);
        for (size_t i = 0; i < ELEMENTSOF(unit_suffixes); i++)
                if (strlen(unit_suffixes[i]) == sl && strncmp(dot + 1, unit_suffixes[i], sl) == 0)
                        return true;
        return false;
}

/* systemd prefixes cgroup names that would clash with kernel files with '_' (cg_escape). */
static void component_unescape(const char **s, size_t *n)
{
        if (*n > 0 && **s == '_') {
                (*s)++;
                (*n)--;
        }
}

static bool is_slice(const char *s, size_t n)
{
        return n > 6 && strncmp(s + n - 6, ".slice", 6) == 0 && unit_name_valid(s, n);
}

int cgroup_path_get_unit(const char *path, char **ret)
{
        const char *p = path;

        for (;;) {
                p += strspn(p, "/");
                size_t n = strcspn(p, "/");
                if (n == 0) {
                        *ret = NULL;
                        return 0;
                }
                const char *c = p;
                size_t cn = n;
                component_unescape(&c, &cn);
                if (is_slice(c, cn)) {
                        p += n;
                        continue;
                }
                if (!unit_name_valid(c, cn)) {
                        *ret = NULL;
                        return 0;
                }
                char *u = strndup(c, cn);
                if (!u)
                        return -ENOMEM;
                *ret = u;
                return 0;
        }
}

static bool is_hex_id(const char *s, size_t n)
{
        if (n != CONTAINER_ID_LEN)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

/* Runtime-specific prefixes of systemd scope names. conmon scopes (crio-conmon-ID,
 * libpod-conmon-ID) belong to the monitor, not the container, and do not match because
 * "conmon-ID" is not 64 hex digits. */
static const char *const container_prefixes[] = {
        "docker-", "cri-containerd-", "crio-", "libpod-", "nerdctl-", "containerd-",
};

int cgroup_path_get_container_id(const char *path, char **ret)
{
        size_t len = strlen(path);

        /* Innermost first: with nested runtimes (docker in a pod) the inner one ran the task. */
        while (len > 0) {
                while (len > 0 && path[len - 1] == '/')
                        len--;
                size_t start = len;
                while (start > 0 && path[start - 1] != '/')
                        start--;
                const char *c = path + start;
                size_t n = len - start;
                if (n > 6 && strncmp(c + n - 6, ".scope", 6) == 0)
                        n -= 6;
                for (size_t i = 0; i < ELEMENTSOF(container_prefixes); i++) {
                        size_t pl = strlen(container_prefixes[i]);
                        if (n > pl && strncmp(c, container_prefixes[i], pl) == 0) {
                                c += pl;
                                n -= pl;
                                break;
                        }
                }
                if (is_hex_id(c, n)) {
                        char *id = strndup(c, n);
                        if (!id)
                                return -ENOMEM;
                        *ret = id;
                        return 0;
                }
                len = start;
        }
        *ret = NULL;
        return 0;
}

int cgroup_path_level(const char *path)
{
        int level = 0;

        for (const char *p = path;;) {
                p += strspn(p, "/");
                size_t n = strcspn(p, "/");
                if (n == 0)
                        return level;
                level++;
                p += n;
        }
}

/* /proc/self/mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape_octal(char *s)
{
        char *w = s;
        for (char *r = s; *r;) {
                if (r[0] == '\\' && r[1] >= '0' && r[1] <= '7' && r[2] >= '0' && r[2] <= '7' &&
                    r[3] >= '0' && r[3] <= '7') {
                        *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
                        r += 4;
                } else
                        *w++ = *r++;
        }
        *w = 0;
}

static int find_cgroup2_mount(char **ret)
{
        _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;

        if (!f)
                return -errno;
        while (getline(&line, &cap, f) > 0) {
                /* id parent maj:min root mountpoint options [optional...] - fstype source super */
                char *sep = strstr(line, " - ");
                if (!sep || strncmp(sep + 3, "cgroup2 ", 8) != 0)
                        continue;
                char mnt[PATH_MAX];
                if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
                        continue;
                unescape_octal(mnt);
                char *m = strdup(mnt);
                if (!m)
                        return -ENOMEM;
                *ret = m;
                return 0;
        }
        return -ENOENT;
}

static void probe_handles(CgroupResolver *r)
{
        struct {
                struct file_handle fh;
                uint64_t id;
        } h = {.fh.handle_bytes = KERNFS_HANDLE_BYTES};
        struct stat st;
        int mnt_id;

        r->handle_type = -1;
        if (name_to_handle_at(r->root_fd, "", &h.fh, &mnt_id, AT_EMPTY_PATH) < 0) {
                log_debug_errno(errno, "cgroup: name_to_handle_at on %s failed, resolving by walking: %m",
                                r->root);
                return;
        }
        if (fstat(r->root_fd, &st) < 0 || h.fh.handle_bytes != KERNFS_HANDLE_BYTES || h.id != st.st_ino) {
                log_debug("cgroup: file handles of %s are not cgroup ids, resolving by walking", r->root);
                return;
        }
        r->handle_type = h.fh.handle_type;
}

int cgroup_resolver_new(const char *root, size_t max_entries, uint64_t keep_ns, CgroupResolver **ret)
{
        _cleanup_(cgroup_resolver_freep) CgroupResolver *r = NULL;
        int err;

        if (max_entries == 0 || max_entries > INT_MAX / 2)
                return -EINVAL;
        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->root_fd = -1;
        r->max_entries = max_entries;
        r->keep_ns = keep_ns;
        if (root) {
                r->root = strdup(root);
                if (!r->root)
                        return -ENOMEM;
        } else {
                err = find_cgroup2_mount(&r->root);
                if (err < 0)
                        return err;
        }
        size_t l = strlen(r->root);
        while (l > 1 && r->root[l - 1] == '/')
                r->root[--l] = 0;

        r->root_fd = open(r->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (r->root_fd < 0)
                return -errno;
        probe_handles(r);

        r->n_buckets = 1;
        while (r->n_buckets < max_entries)
                r->n_buckets <<= 1;
        r->entries = calloc(max_entries, sizeof(Entry));
        r->buckets = malloc(r->n_buckets * sizeof(int));
        if (!r->entries || !r->buckets)
                return -ENOMEM;
        for (size_t i = 0; i < r->n_buckets; i++)
                r->buckets[i] = -1;
        for (size_t i = 0; i < max_entries; i++)
                r->entries[i].next = i + 1 < max_entries ? (int)i + 1 : -1;
        r->free_head = 0;

        *ret = TAKE_PTR(r);
        return 0;
}

static void info_clear(CgroupInfo *i)
{
        i->path = mfree(i->path);
        i->unit = mfree(i->unit);
        i->container_id = mfree(i->container_id);
}

CgroupResolver *cgroup_resolver_free(CgroupResolver *r)
{
        if (!r)
                return NULL;
        if (r->entries)
                for (size_t i = 0; i < r->max_entries; i++)
                        info_clear(&r->entries[i].info);
        free(r->entries);
        free(r->buckets);
        if (r->root_fd >= 0)
                close(r->root_fd);
        free(r->root);
        free(r);
        return NULL;
}

const char *cgroup_resolver_root(const CgroupResolver *r)
{
        return r->root;
}

static size_t bucket_of(const CgroupResolver *r, uint64_t id)
{
        return (size_t)((id * 0x9E3779B97F4A7C15ULL) >> 32) & (r->n_buckets - 1);
}

static Entry *lookup(CgroupResolver *r, uint64_t id)
{
        for (int i = r->buckets[bucket_of(r, id)]; i >= 0; i = r->entries[i].next)
                if (r->entries[i].info.id == id)
                        return &r->entries[i];
        return NULL;
}

static void remove_entry(CgroupResolver *r, Entry *e)
{
        int idx = (int)(e - r->entries);
        int *link = &r->buckets[bucket_of(r, e->info.id)];

        while (*link >= 0 && *link != idx)
                link = &r->entries[*link].next;
        if (*link == idx)
                *link = e->next;
        info_clear(&e->info);
        *e = (Entry){.next = r->free_head};
        r->free_head = idx;
        r->n_used--;
}

static Entry *insert(CgroupResolver *r, uint64_t id)
{
        if (r->free_head < 0) {
                /* Full: the least recently used entry goes. */
                Entry *lru = NULL;
                for (size_t i = 0; i < r->max_entries; i++)
                        if (r->entries[i].used && (!lru || r->entries[i].last_used_ns < lru->last_used_ns))
                                lru = &r->entries[i];
                remove_entry(r, lru);
                r->n_evicted++;
        }
        int idx = r->free_head;
        Entry *e = &r->entries[idx];
        r->free_head = e->next;
        size_t b = bucket_of(r, id);
        *e = (Entry){.info.id = id, .used = true, .next = r->buckets[b]};
        r->buckets[b] = idx;
        r->n_used++;
        return e;
}

typedef int (*walk_cb_t)(const char *rel, const struct stat *st, int level, void *userdata);

/* Depth-first over the cgroup tree. cb returns <0 to abort, 1 to stop, 2 to skip the subtree, 0
 * to go on. Returns cb's stop value, 0 when the walk completed, or -E2BIG at CGROUP_WALK_MAX. */
static int walk_dir(int dfd, char *rel, size_t rel_len, int level, unsigned *budget, walk_cb_t cb, void *ud)
{
        DIR *d = fdopendir(dfd);
        struct dirent *de;
        int r = 0;

        if (!d) {
                close(dfd);
                return -errno;
        }
        while ((de = readdir(d))) {
                struct stat st;
                if (de->d_type != DT_DIR || strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (*budget == 0) {
                        r = -E2BIG;
                        break;
                }
                (*budget)--;
                size_t nl = strlen(de->d_name);
                if (rel_len + 1 + nl + 1 > PATH_MAX)
                        continue;
                rel[rel_len] = '/';
                memcpy(rel + rel_len + 1, de->d_name, nl + 1);
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* removed meanwhile */
                r = cb(rel, &st, level + 1, ud);
                if (r == 0 && level + 1 < CGROUP_WALK_MAX_DEPTH) {
                        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                        if (sub >= 0)
                                r = walk_dir(sub, rel, rel_len + 1 + nl, level + 1, budget, cb, ud);
                }
                rel[rel_len] = 0;
                if (r == 2)
                        r = 0;
                if (r != 0)
                        break;
        }
        closedir(d);
        return r;
}

static int walk(CgroupResolver *r, walk_cb_t cb, void *ud)
{
        char rel[PATH_MAX] = "";
        unsigned budget = CGROUP_WALK_MAX;
        int fd = openat(r->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        r->n_walks++;
        return walk_dir(fd, rel, 0, 0, &budget, cb, ud);
}

struct find_ino {
        uint64_t ino;
        char *path;
};

static int find_ino_cb(const char *rel, const struct stat *st, int level, void *ud)
{
        struct find_ino *f = ud;
        if (st->st_ino != f->ino)
                return 0;
        f->path = strdup(rel);
        return f->path ? 1 : -ENOMEM;
}

static int resolve_path(CgroupResolver *r, uint64_t id, char **ret)
{
        struct stat st;

        if (fstat(r->root_fd, &st) >= 0 && st.st_ino == id) {
                *ret = strdup("/");
                return *ret ? 0 : -ENOMEM;
        }
        if (r->handle_type >= 0) {
                struct {
                        struct file_handle fh;
                        uint64_t id;
                } h = {.fh.handle_bytes = KERNFS_HANDLE_BYTES, .fh.handle_type = r->handle_type, .id = id};
                char proc[64], target[PATH_MAX];
                _cleanup_close_ int fd = open_by_handle_at(r->root_fd, &h.fh, O_PATH | O_CLOEXEC);
                if (fd < 0) {
                        if (errno != EPERM && errno != EOPNOTSUPP)
                                return -errno; /* ESTALE: gone */
                        log_debug_errno(errno,
                                        "cgroup: open_by_handle_at not permitted, walking instead: %m");
                        r->handle_type = -1;
                } else {
                        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
                        ssize_t n = readlink(proc, target, sizeof(target) - 1);
                        if (n < 0)
                                return -errno;
                        target[n] = 0;
                        size_t rl = strlen(r->root);
                        if (strncmp(target, r->root, rl) != 0 || (target[rl] != '/' && target[rl] != 0))
                                return -EXDEV; /* outside our view of the hierarchy */
                        *ret = strdup(target[rl] ? target + rl : "/");
                        return *ret ? 0 : -ENOMEM;
                }
        }
        struct find_ino f = {.ino = id};
        int k = walk(r, find_ino_cb, &f);
        if (k < 0 && !f.path)
                return k;
        if (!f.path)
                return -ENOENT;
        *ret = f.path;
        return 0;
}

static void resolve(CgroupResolver *r, Entry *e, uint64_t now_ns)
{
        _cleanup_free_ char *path = NULL, *unit = NULL, *cid = NULL;
        int k = resolve_path(r, e->info.id, &path);

        if (k >= 0)
                k = cgroup_path_get_unit(path, &unit);
        if (k >= 0)
                k = cgroup_path_get_container_id(path, &cid);
        if (k < 0) {
                /* Typically the cgroup was removed before we saw its id: counted, retried later. */
                log_debug_errno(k, "cgroup: cannot resolve cgroup id %" PRIu64 ": %m", e->info.id);
                e->retry_ns = now_ns + CGROUP_RETRY_NS;
                r->n_failed++;
                return;
        }
        info_clear(&e->info);
        e->info.path = TAKE_PTR(path);
        e->info.unit = TAKE_PTR(unit);
        e->info.container_id = TAKE_PTR(cid);
        r->n_resolved++;
}

const CgroupInfo *cgroup_resolver_get(CgroupResolver *r, uint64_t id, uint64_t now_ns)
{
        Entry *e = lookup(r, id);

        if (!e) {
                e = insert(r, id);
                resolve(r, e, now_ns);
        } else if (!e->info.path && now_ns >= e->retry_ns)
                resolve(r, e, now_ns);
        e->last_used_ns = now_ns;
        return &e->info;
}

void cgroup_resolver_note(CgroupResolver *r, uint64_t id, uint64_t now_ns)
{
        if (id != 0)
                (void)cgroup_resolver_get(r, id, now_ns);
}

const char *cgroup_resolver_label(void *userdata, Label label, uint64_t cgroup_id)
{
        CgroupResolver *r = userdata;

        if (!r || cgroup_id == 0)
                return NULL;
        const CgroupInfo *i = cgroup_resolver_get(r, cgroup_id, now_ns(CLOCK_REALTIME));
        switch (label) {
        case LABEL_UNIT:
                return i->unit;
        case LABEL_CONTAINER_ID:
                return i->container_id;
        default:
                return NULL;
        }
}

void cgroup_resolver_gc(CgroupResolver *r, uint64_t now_ns)
{
        for (size_t i = 0; i < r->max_entries; i++) {
                Entry *e = &r->entries[i];
                if (e->used && e->last_used_ns + r->keep_ns < now_ns)
                        remove_entry(r, e);
        }
}

void cgroup_resolver_write_metrics(const CgroupResolver *r, FILE *f)
{
        metric_gauge(f, "profd_cgroup_cache_entries", "cgroup ids with a cached path/unit/container id.",
                     r->n_used);
        metric_labelled(f, "profd_cgroup_resolutions_total", "counter",
                        "cgroup id resolutions by result (failed: cgroup gone).", "result",
                        (const char *const[]){"ok", "failed"},
                        (const uint64_t[]){r->n_resolved, r->n_failed}, 2);
        metric_counter(f, "profd_cgroup_cache_evictions_total",
                       "cgroup ids forgotten because the cache was full.", r->n_evicted);
        metric_counter(f, "profd_cgroup_tree_walks_total",
                       "walks of the cgroup tree (--unit lookup, fallback).", r->n_walks);
}

int cgroup_resolver_find_path(CgroupResolver *r, const char *spec, CgroupMatch *ret)
{
        size_t rl = strlen(r->root);
        const char *rel = spec;
        struct stat st;

        if (strncmp(spec, r->root, rl) == 0 && (spec[rl] == '/' || spec[rl] == 0))
                rel = spec + rl;
        rel += strspn(rel, "/");
        if (*rel == 0) {
                if (fstat(r->root_fd, &st) < 0)
                        return -errno;
        } else if (fstatat(r->root_fd, rel, &st, 0) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        *ret = (CgroupMatch){.id = st.st_ino, .level = cgroup_path_level(rel)};
        return 0;
}

struct find_unit {
        const char *unit;
        CgroupMatch *out;
        size_t max, n;
};

static int find_unit_cb(const char *rel, const struct stat *st, int level, void *ud)
{
        struct find_unit *f = ud;
        _cleanup_free_ char *u = NULL;
        const char *base = strrchr(rel, '/');

        base = base ? base + 1 : rel;
        size_t bl = strlen(base);
        component_unescape(&base, &bl);
        /* Only directories named like a unit can start one; a non-slice unit ends the search
         * below it (its children belong to it). */
        if (!unit_name_valid(base, bl))
                return 2;
        if (cgroup_path_get_unit(rel, &u) < 0)
                return -ENOMEM;
        if (u && strcmp(u, f->unit) == 0) {
                if (f->n < f->max)
                        f->out[f->n] = (CgroupMatch){.id = st->st_ino, .level = level};
                f->n++;
                return 2;
        }
        /* Slices go on (units live below them); other units' subtrees hold no other unit. */
        return is_slice(base, bl) ? 0 : 2;
}

int cgroup_resolver_find_unit(CgroupResolver *r, const char *unit, CgroupMatch *ret, size_t max)
{
        struct find_unit f = {.unit = unit, .out = ret, .max = max};
        int k = walk(r, find_unit_cb, &f);

        if (k < 0)
                return k;
        return (int)(f.n < max ? f.n : max);
}

size_t cgroup_resolver_memory(const CgroupResolver *r)
{
        size_t b;

        if (!r)
                return 0;
        /* Every slot is written at start (the free chain). */
        b = sizeof(*r) + r->max_entries * sizeof(Entry) + r->n_buckets * sizeof(int);
        for (size_t i = 0; i < r->max_entries; i++)
                if (r->entries[i].used)
                        b += (r->entries[i].info.path ? strlen(r->entries[i].info.path) + 1 : 0) +
                             (r->entries[i].info.unit ? strlen(r->entries[i].info.unit) + 1 : 0) +
                             (r->entries[i].info.container_id ? strlen(r->entries[i].info.container_id) + 1
                                                              : 0);
        return b;
}
