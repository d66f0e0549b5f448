/* SPDX-License-Identifier: GPL-2.0-only */
/* debuginfod in the event loop: requests, results, the cache directory's bound (see
 * debuginfod-fetch.h). */
#include <dirent.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "symbolizer/debuginfo-search.h"
#include "symbolizer/debuginfod-fetch.h"
#include "symbolizer/debuginfod-worker.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/metrics-writer.h"
#include "util/time-util.h"

#define DEFAULT_CACHE_DIR "/var/cache/profd/debuginfod"
/* A fetched file stays known as fetched for this long; after that a file evicted from the cache
 * may be fetched again. */
#define DEBUGINFOD_KEEP_NS (3600ULL * NSEC_PER_SEC)

typedef enum FetchResult {
        FETCH_OK,
        FETCH_NOT_FOUND,
        FETCH_TIMEOUT,
        FETCH_ERROR,
        FETCH_WRONG_BUILD_ID,
        FETCH_NOT_ELF,
        _FETCH_RESULT_MAX,
} FetchResult;

static const char *const fetch_results[_FETCH_RESULT_MAX] = {
        [FETCH_OK] = "ok",       [FETCH_NOT_FOUND] = "not_found",           [FETCH_TIMEOUT] = "timeout",
        [FETCH_ERROR] = "error", [FETCH_WRONG_BUILD_ID] = "wrong_build_id", [FETCH_NOT_ELF] = "not_elf",
};

typedef enum Skip { SKIP_RECENTLY_FAILED, SKIP_QUEUE_FULL, _SKIP_MAX } Skip;

typedef enum RecentState { RECENT_PENDING, RECENT_OK, RECENT_FAILED } RecentState;

typedef struct Recent {
        uint8_t id[DEBUGINFOD_BUILD_ID_MAX];
        size_t size;
        RecentState state;
        uint64_t until_ns; /* CLOCK_MONOTONIC: the entry holds until then (pending: always) */
} Recent;

struct DebuginfodFetch {
        DebuginfodWorkers *workers;
        sd_event_source *source;
        DebuginfodReadyFn ready;
        void *userdata;
        char *cache_dir;
        uint64_t cache_max_bytes;
        Recent *recent; /* DEBUGINFOD_RECENT_MAX */
        size_t n_recent;
        uint64_t n_results[_FETCH_RESULT_MAX], n_skipped[_SKIP_MAX];
        uint64_t fetched_bytes, n_evicted;
        /* Bounds reached: a remembered build ID replaced (it may be asked again sooner); a size
         * check that stopped at DEBUGINFOD_CACHE_MAX_FILES (the rest is not summed). */
        uint64_t n_recent_replaced, n_cache_unscanned;
        uint64_t cache_bytes, cache_files;
        uint64_t fetch_ns; /* time spent in fetches, summed */
};

const char *debuginfod_fetch_cache_dir(const DebuginfodFetch *f)
{
        return f ? f->cache_dir : NULL;
}

static Recent *recent_find(DebuginfodFetch *f, const uint8_t *id, size_t size)
{
        for (size_t i = 0; i < f->n_recent; i++)
                if (f->recent[i].size == size && memcmp(f->recent[i].id, id, size) == 0)
                        return &f->recent[i];
        return NULL;
}

/* A new entry: a free one, else the one that expires first (never a pending one: its result
 * would find no entry, and the build ID would be asked for again while still in flight). */
static Recent *recent_add(DebuginfodFetch *f, const uint8_t *id, size_t size)
{
        Recent *r = NULL;

        if (f->n_recent < DEBUGINFOD_RECENT_MAX)
                r = &f->recent[f->n_recent++];
        else {
                for (size_t i = 0; i < f->n_recent; i++)
                        if (f->recent[i].state != RECENT_PENDING &&
                            (!r || f->recent[i].until_ns < r->until_ns))
                                r = &f->recent[i];
                f->n_recent_replaced += r != NULL;
        }
        if (!r)
                return NULL;
        *r = (Recent){.size = size};
        memcpy(r->id, id, size);
        return r;
}

void debuginfod_fetch_request(DebuginfodFetch *f, const uint8_t *id, size_t size)
{
        uint64_t now = now_ns(CLOCK_MONOTONIC);
        Recent *r;

        if (!f || size == 0 || size > DEBUGINFOD_BUILD_ID_MAX)
                return;
        r = recent_find(f, id, size);
        if (r && (r->state == RECENT_PENDING || now < r->until_ns)) {
                if (r->state == RECENT_FAILED)
                        f->n_skipped[SKIP_RECENTLY_FAILED]++;
                return;
        }
        if (debuginfod_workers_submit(f->workers, id, size) < 0) {
                f->n_skipped[SKIP_QUEUE_FULL]++;
                return;
        }
        if (!r)
                r = recent_add(f, id, size);
        if (r)
                r->state = RECENT_PENDING;
}

typedef struct CacheFile {
        int64_t ctime_ns;
        uint64_t size;
        char name[2 * DEBUGINFOD_BUILD_ID_MAX + 1];
} CacheFile;

static int cache_file_cmp(const void *a, const void *b)
{
        const CacheFile *x = a, *y = b;
        return (x->ctime_ns > y->ctime_ns) - (x->ctime_ns < y->ctime_ns);
}

static bool is_hex_name(const char *s)
{
        size_t n = strspn(s, "0123456789abcdef");
        return n >= 2 && n <= 2 * DEBUGINFOD_BUILD_ID_MAX && s[n] == 0;
}

/* Sums the fetched files (DIR/HEXID/debuginfo) and removes the oldest fetched while the sum is
 * over the bound. The directory is profd's own (no other user writes there), so reading it in the
 * loop cannot block on someone else's file; its size is bounded by the scan limit. ctime, not
 * mtime: libdebuginfod gives a file the server's Last-Modified time, ctime is when it came. */
static void cache_enforce_bound(DebuginfodFetch *f)
{
        _cleanup_free_ CacheFile *files = NULL;
        size_t n = 0;
        uint64_t total = 0;
        struct dirent *de;
        DIR *d;

        d = opendir(f->cache_dir);
        if (!d)
                return;
        files = calloc(DEBUGINFOD_CACHE_MAX_FILES, sizeof(*files));
        if (!files) {
                closedir(d);
                return;
        }
        while ((de = readdir(d))) {
                char path[sizeof(files->name) + sizeof("/debuginfo")];
                struct stat st;

                if (!is_hex_name(de->d_name))
                        continue;
                if (n >= DEBUGINFOD_CACHE_MAX_FILES) {
                        f->n_cache_unscanned++;
                        break;
                }
                snprintf(path, sizeof(path), "%.128s/debuginfo", de->d_name);
                /* Empty: libdebuginfod's own mark of a build ID no server had, which it expires
                 * itself; it holds no space, and removing it would only ask the servers again. */
                if (fstatat(dirfd(d), path, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
                    st.st_size == 0)
                        continue;
                files[n] = (CacheFile){.ctime_ns = (int64_t)st.st_ctim.tv_sec * (int64_t)NSEC_PER_SEC +
                                                   st.st_ctim.tv_nsec,
                                       .size = (uint64_t)st.st_size};
                snprintf(files[n].name, sizeof(files[n].name), "%.128s", de->d_name);
                total += files[n].size;
                n++;
        }
        qsort(files, n, sizeof(*files), cache_file_cmp);
        f->cache_files = n;
        for (size_t i = 0; i < n && total > f->cache_max_bytes; i++) {
                char path[sizeof(files->name) + sizeof("/debuginfo")];

                snprintf(path, sizeof(path), "%s/debuginfo", files[i].name);
                if (unlinkat(dirfd(d), path, 0) < 0)
                        continue;
                (void)unlinkat(dirfd(d), files[i].name, AT_REMOVEDIR); /* fails if not empty: fine */
                total -= files[i].size;
                f->cache_files--;
                f->n_evicted++;
        }
        f->cache_bytes = total;
        closedir(d);
}

/* Whether fd is an ELF file with exactly this build ID. */
static FetchResult check_file(int fd, const uint8_t *id, size_t size, uint8_t *alt_id, size_t *alt_size)
{
        const void *bid = NULL;
        FetchResult r;
        ssize_t n;
        Elf *elf;

        /* pread-based: the file is read once, for its headers and notes. */
        elf = elf_begin(fd, ELF_C_READ, NULL);
        if (!elf || elf_kind(elf) != ELF_K_ELF)
                r = FETCH_NOT_ELF;
        else if ((n = dwelf_elf_gnu_build_id(elf, &bid)) <= 0 || (size_t)n != size ||
                 memcmp(bid, id, size) != 0)
                r = FETCH_WRONG_BUILD_ID;
        else {
                r = FETCH_OK;
                *alt_size = debuginfo_elf_altlink_id(elf, alt_id);
        }
        elf_end(elf);
        return r;
}

/* libdebuginfod names files in the cache directory it was given; nothing else is removed. */
static bool path_in_cache(const DebuginfodFetch *f, const char *path)
{
        size_t n = strlen(f->cache_dir);

        return strncmp(path, f->cache_dir, n) == 0 && path[n] == '/' && !strstr(path + n, "/../");
}

static void handle_result(DebuginfodFetch *f, DebuginfodJob *job)
{
        uint8_t alt_id[DEBUGINFOD_BUILD_ID_MAX];
        size_t alt_size = 0;
        uint64_t now = now_ns(CLOCK_MONOTONIC);
        FetchResult res;
        struct stat st;
        Recent *r;

        f->fetch_ns += job->duration_ns;
        if (job->fd >= 0) {
                res = check_file(job->fd, job->build_id, job->build_id_size, alt_id, &alt_size);
                /* A file that is not what was asked for is not left where the lookup finds it
                 * (it would be refused there too, its build ID is checked again). */
                if (res != FETCH_OK && job->path && path_in_cache(f, job->path)) {
                        if (unlink(job->path) < 0)
                                log_debug("Cannot remove %s: %m", job->path);
                } else if (res == FETCH_OK && fstat(job->fd, &st) == 0)
                        f->fetched_bytes += (uint64_t)st.st_size;
        } else if (job->timed_out)
                res = FETCH_TIMEOUT;
        else if (job->error == -ENOENT)
                res = FETCH_NOT_FOUND;
        else
                res = FETCH_ERROR;
        f->n_results[res]++;
        if (res != FETCH_OK && res != FETCH_NOT_FOUND)
                log_debug("debuginfod: fetch of a build ID failed: %s (%s)", fetch_results[res],
                          job->error < 0 ? strerror(-job->error) : "checked");

        r = recent_find(f, job->build_id, job->build_id_size);
        if (!r)
                r = recent_add(f, job->build_id, job->build_id_size);
        if (r) {
                r->state = res == FETCH_OK ? RECENT_OK : RECENT_FAILED;
                r->until_ns = now + (res == FETCH_OK ? DEBUGINFOD_KEEP_NS : DEBUGINFOD_RETRY_NS);
        }
        if (job->fd >= 0)
                close(job->fd);
        free(job->path);
        job->path = NULL;
        if (res != FETCH_OK)
                return;
        cache_enforce_bound(f);
        /* DWARF made smaller with dwz refers to a shared file by its build ID, which debuginfod
         * serves as well. */
        if (alt_size > 0)
                debuginfod_fetch_request(f, alt_id, alt_size);
        if (f->ready)
                f->ready(f->userdata, job->build_id, job->build_id_size);
}

static int on_results(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        DebuginfodFetch *f = userdata;
        DebuginfodJob jobs[DEBUGINFOD_QUEUE_MAX];
        size_t n = debuginfod_workers_take(f->workers, jobs, ELEMENTSOF(jobs));

        for (size_t i = 0; i < n; i++)
                handle_result(f, &jobs[i]);
        return 0;
}

static int mkdir_parents(const char *path, mode_t mode)
{
        _cleanup_free_ char *p = strdup(path);

        if (!p)
                return -ENOMEM;
        for (char *s = p + 1; *s; s++)
                if (*s == '/') {
                        *s = 0;
                        if (mkdir(p, mode) < 0 && errno != EEXIST)
                                return -errno;
                        *s = '/';
                }
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

static char *default_cache_dir(void)
{
        const char *cd = getenv("CACHE_DIRECTORY"); /* systemd's CacheDirectory=; ':'-separated */
        char *r;

        if (!cd || cd[0] != '/')
                return strdup(DEFAULT_CACHE_DIR);
        if (asprintf(&r, "%.*s/debuginfod", (int)strcspn(cd, ":"), cd) < 0)
                return NULL;
        return r;
}

/* libdebuginfod reads its configuration from the environment at every fetch: set here, once,
 * before the threads start, and never changed afterwards (setenv() is not thread-safe). libdwfl
 * reads DEBUGINFOD_URLS too, but only in its standard callbacks, which profd does not use
 * (debuginfo-search.h): the loop itself never fetches. */
static int set_environment(const DebuginfodOptions *o, const char *cache_dir)
{
        char timeout[32], size[32];
        uint64_t secs = (o->timeout_ns + NSEC_PER_SEC - 1) / NSEC_PER_SEC;

        snprintf(timeout, sizeof(timeout), "%" PRIu64, secs ?: 1);
        snprintf(size, sizeof(size), "%" PRIu64, o->cache_max_bytes);
        if (setenv("DEBUGINFOD_URLS", o->urls, 1) < 0 || setenv("DEBUGINFOD_CACHE_PATH", cache_dir, 1) < 0 ||
            setenv("DEBUGINFOD_TIMEOUT", timeout, 1) < 0 || setenv("DEBUGINFOD_MAXTIME", timeout, 1) < 0 ||
            /* A file larger than the whole cache would only be evicted again. */
            setenv("DEBUGINFOD_MAXSIZE", size, 1) < 0 || unsetenv("DEBUGINFOD_PROGRESS") < 0 ||
            unsetenv("DEBUGINFOD_VERBOSE") < 0)
                return -errno;
        return 0;
}

int debuginfod_fetch_new(sd_event *event, const DebuginfodOptions *o, DebuginfodReadyFn ready,
                         void *userdata, DebuginfodFetch **ret)
{
        DebuginfodFetch *f;
        int efd, r;

        if (!o->urls || !o->urls[0])
                return -EINVAL;
        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->ready = ready;
        f->userdata = userdata;
        f->cache_max_bytes = o->cache_max_bytes;
        f->cache_dir = o->cache_dir ? strdup(o->cache_dir) : default_cache_dir();
        f->recent = calloc(DEBUGINFOD_RECENT_MAX, sizeof(*f->recent));
        if (!f->cache_dir || !f->recent) {
                r = -ENOMEM;
                goto fail;
        }
        r = mkdir_parents(f->cache_dir, 0700);
        if (r < 0) {
                log_error_errno(r, "Cannot create the debuginfod cache directory %s: %m", f->cache_dir);
                goto fail;
        }
        r = set_environment(o, f->cache_dir);
        if (r < 0)
                goto fail;
        /* A restart finds what earlier runs fetched, and a lowered bound applies at once. */
        cache_enforce_bound(f);
        r = debuginfod_workers_new(o->timeout_ns, &f->workers, &efd);
        if (r < 0)
                goto fail;
        r = sd_event_add_io(event, &f->source, efd, EPOLLIN, on_results, f);
        if (r < 0)
                goto fail;
        (void)sd_event_source_set_description(f->source, "debuginfod-results");
        *ret = f;
        return 0;
fail:
        debuginfod_fetch_free(f);
        return r;
}

DebuginfodFetch *debuginfod_fetch_free(DebuginfodFetch *f)
{
        if (!f)
                return NULL;
        sd_event_source_disable_unref(f->source);
        debuginfod_workers_free(f->workers);
        free(f->recent);
        free(f->cache_dir);
        return mfree(f);
}

void debuginfod_fetch_write_metrics(const DebuginfodFetch *f, FILE *out)
{
        static const char *const skips[_SKIP_MAX] = {
                [SKIP_RECENTLY_FAILED] = "recently_failed",
                [SKIP_QUEUE_FULL] = "queue_full",
        };
        const DebuginfodFetch zero = {};

        if (!f)
                f = &zero;
        metric_gauge(out, "profd_debuginfod_enabled",
                     "1 if debug files are fetched from debuginfod servers.", f != &zero);
        metric_labelled(out, "profd_debuginfod_fetches_total", "counter",
                        "Debug files asked of debuginfod by build ID, by result: ok, not_found, timeout, "
                        "error (connection, HTTP), wrong_build_id and not_elf (the file was removed).",
                        "result", fetch_results, f->n_results, _FETCH_RESULT_MAX);
        metric_labelled(out, "profd_debuginfod_skipped_total", "counter",
                        "Build IDs not asked for: failed less than 10 minutes ago, or too many fetches "
                        "waiting.",
                        "reason", skips, f->n_skipped, _SKIP_MAX);
        metric_counter(out, "profd_debuginfod_fetched_bytes_total",
                       "Bytes of the debug files fetched and kept.", f->fetched_bytes);
        metric_counter_seconds(out, "profd_debuginfod_fetch_seconds_total",
                               "Time the fetches took, summed (outside the event loop).", f->fetch_ns);
        metric_gauge(out, "profd_debuginfod_in_flight",
                     "Fetches queued, running, or done and not yet taken in by the loop (at its next turn).",
                     f->workers ? debuginfod_workers_pending(f->workers) : 0);
        metric_gauge(out, "profd_debuginfod_cache_bytes", "Bytes of the debuginfod cache directory's files.",
                     f->cache_bytes);
        metric_gauge(out, "profd_debuginfod_cache_files", "Debug files in the debuginfod cache directory.",
                     f->cache_files);
        metric_counter(out, "profd_debuginfod_cache_evicted_total",
                       "Debug files removed to keep the cache directory under its size bound.",
                       f->n_evicted);
        metric_labelled(out, "profd_debuginfod_bound_reached_total", "counter",
                        "Bounds reached: a remembered build ID replaced (4096 kept), a cache size check "
                        "stopped at 8192 files.",
                        "bound", (const char *const[]){"build_ids", "cache_files"},
                        (const uint64_t[]){f->n_recent_replaced, f->n_cache_unscanned}, 2);
}
