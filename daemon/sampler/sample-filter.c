/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sampler/sample-filter.h"
#include "util/log.h"
#include "util/time-util.h"

/* How often --unit/--cgroup are looked up again. A unit restarted within this period is missed
 * for at most this long (its samples count as filtered meanwhile). */
#define CGROUP_FILTER_REFRESH_USEC (2 * USEC_PER_SEC)
/* While every filter has its cgroup and those still exist (one stat each), the tree is walked
 * only this often: a walk visits every slice, which on a node with thousands of pods is real work.
 * A second instance of a unit (user units) appears within this period. */
#define CGROUP_FILTER_WALK_USEC (30 * USEC_PER_SEC)

static int parse_pid(const char *v, uint32_t *ret)
{
        unsigned long long n = 0;

        if (!v || !*v)
                return -EINVAL;
        for (const char *p = v; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                n = n * 10 + (unsigned)(*p - '0');
                if (n > 0x7fffffff) /* beyond PID_MAX_LIMIT anyway */
                        return -ERANGE;
        }
        if (n == 0)
                return -ERANGE;
        *ret = (uint32_t)n;
        return 0;
}

int sample_filter_add(SampleFilter *f, const char *kind, const char *value, char *err, size_t errlen)
{
        unsigned *n;

        if (strcmp(kind, "pid") == 0)
                n = &f->n_pids;
        else if (strcmp(kind, "comm") == 0)
                n = &f->n_comms;
        else if (strcmp(kind, "unit") == 0)
                n = &f->n_units;
        else if (strcmp(kind, "cgroup") == 0)
                n = &f->n_cgroups;
        else {
                snprintf(err, errlen, "unknown filter '%s'", kind);
                return -EINVAL;
        }
        if (*n >= SAMPLE_FILTER_MAX) {
                snprintf(err, errlen, "%s: at most %d values", kind, SAMPLE_FILTER_MAX);
                return -E2BIG;
        }
        if (!value || !*value) {
                snprintf(err, errlen, "%s: empty value", kind);
                return -EINVAL;
        }
        if (n == &f->n_pids) {
                if (parse_pid(value, &f->pids[*n]) < 0) {
                        snprintf(err, errlen, "pid: '%.32s' is not a process id (a positive integer)",
                                 value);
                        return -EINVAL;
                }
        } else if (n == &f->n_comms) {
                /* The kernel keeps 15 characters of a name; longer ones match on those. */
                snprintf(f->comms[*n], sizeof(f->comms[*n]), "%s", value);
        } else {
                size_t len = strlen(value);
                if (len >= SAMPLE_FILTER_VALUE_MAX) {
                        snprintf(err, errlen, "%s: value longer than %d characters", kind,
                                 SAMPLE_FILTER_VALUE_MAX - 1);
                        return -EINVAL;
                }
                for (size_t i = 0; i < len; i++)
                        if ((unsigned char)value[i] < 0x20) {
                                snprintf(err, errlen, "%s: control character in value", kind);
                                return -EINVAL;
                        }
                memcpy(n == &f->n_units ? f->units[*n] : f->cgroups[*n], value, len + 1);
        }
        (*n)++;
        return 0;
}

bool sample_filter_is_empty(const SampleFilter *f)
{
        return f->n_pids == 0 && f->n_comms == 0 && f->n_units == 0 && f->n_cgroups == 0;
}

void sample_filter_describe(const SampleFilter *f, char *buf, size_t size)
{
        size_t o = 0;

#define APPEND(...)                                                                                         \
        do {                                                                                                \
                if (o < size)                                                                               \
                        o += (size_t)snprintf(buf + o, size - o, __VA_ARGS__);                              \
        } while (0)
        buf[0] = 0;
        for (unsigned i = 0; i < f->n_pids; i++)
                APPEND("%s%s%u", o ? (i ? "," : " ") : "", i ? "" : "pid=", f->pids[i]);
        for (unsigned i = 0; i < f->n_comms; i++)
                APPEND("%s%s%s", o ? (i ? "," : " ") : "", i ? "" : "comm=", f->comms[i]);
        for (unsigned i = 0; i < f->n_units; i++)
                APPEND("%s%s%s", o ? (i ? "," : " ") : "", i ? "" : "unit=", f->units[i]);
        for (unsigned i = 0; i < f->n_cgroups; i++)
                APPEND("%s%s%s", o ? (i ? "," : " ") : "", i ? "" : "cgroup=", f->cgroups[i]);
#undef APPEND
}

void sample_filter_to_bpf(const SampleFilter *f, struct profd_filter_config *ret)
{
        *ret = (struct profd_filter_config){};
        for (unsigned i = 0; i < f->n_pids && i < PROFD_FILTER_MAX_PIDS; i++)
                ret->pids[ret->n_pids++] = f->pids[i];
        for (unsigned i = 0; i < f->n_comms && i < PROFD_FILTER_MAX_COMMS; i++)
                memcpy(ret->comms[ret->n_comms++], f->comms[i], PROFD_FILTER_COMM_LEN);
        ret->cgroups = f->n_units > 0 || f->n_cgroups > 0;
}

struct CgroupFilter {
        SampleFilter filter;
        CgroupResolver *cg;
        int map_fd;
        sd_event_source *timer;
        struct profd_filter_cgroups current;
        char *paths[PROFD_FILTER_MAX_CGROUPS]; /* of current.ids, for the cheap check */
        bool written;
        bool all_found; /* every --unit/--cgroup had a cgroup at the last walk */
        uint64_t last_walk_usec;
};

/* true: every current cgroup is still there with the same id (no walk needed). */
static bool cgroup_filter_still_valid(CgroupFilter *c)
{
        if (!c->written || !c->all_found ||
            now_usec(CLOCK_MONOTONIC) - c->last_walk_usec >= CGROUP_FILTER_WALK_USEC)
                return false;
        for (uint32_t i = 0; i < c->current.n; i++) {
                CgroupMatch m;
                if (!c->paths[i] || cgroup_resolver_find_path(c->cg, c->paths[i], &m) < 0 ||
                    m.id != c->current.ids[i])
                        return false;
        }
        return true;
}

static bool cgroup_filter_resolve(CgroupFilter *c, struct profd_filter_cgroups *v)
{
        bool all = true;

        *v = (struct profd_filter_cgroups){};
        for (unsigned i = 0; i < c->filter.n_cgroups; i++) {
                CgroupMatch m;
                if (cgroup_resolver_find_path(c->cg, c->filter.cgroups[i], &m) < 0 ||
                    v->n >= PROFD_FILTER_MAX_CGROUPS) {
                        all = false;
                        continue;
                }
                v->ids[v->n] = m.id;
                v->levels[v->n++] = (uint32_t)m.level;
        }
        for (unsigned i = 0; i < c->filter.n_units; i++) {
                CgroupMatch m[PROFD_FILTER_MAX_CGROUPS];
                int n = v->n < PROFD_FILTER_MAX_CGROUPS
                                ? cgroup_resolver_find_unit(c->cg, c->filter.units[i], m,
                                                            PROFD_FILTER_MAX_CGROUPS - v->n)
                                : 0;
                if (n <= 0)
                        all = false;
                for (int k = 0; k < n; k++) {
                        v->ids[v->n] = m[k].id;
                        v->levels[v->n++] = (uint32_t)m[k].level;
                }
        }
        return all;
}

static int cgroup_filter_refresh(CgroupFilter *c)
{
        struct profd_filter_cgroups v;
        uint32_t zero = 0;

        if (cgroup_filter_still_valid(c))
                return 0;
        c->all_found = cgroup_filter_resolve(c, &v);
        c->last_walk_usec = now_usec(CLOCK_MONOTONIC);
        if (c->written && memcmp(&v, &c->current, sizeof(v)) == 0)
                return 0;
        if (bpf_map_update_elem(c->map_fd, &zero, &v, BPF_ANY) < 0)
                return log_error_errno_ratelimited(errno, "Cannot update the cgroup filter map: %m");
        if (v.n == 0)
                log_notice("Filter: no cgroup of the --unit/--cgroup filters exists now: every sample is "
                           "filtered until one appears");
        else
                log_info("Filter: sampling %u cgroup(s) and their descendants", v.n);
        c->current = v;
        c->written = true;
        uint64_t now_ns = now_usec(CLOCK_REALTIME) * NSEC_PER_USEC;
        for (uint32_t i = 0; i < PROFD_FILTER_MAX_CGROUPS; i++) {
                c->paths[i] = mfree(c->paths[i]);
                if (i < v.n) {
                        const CgroupInfo *ci = cgroup_resolver_get(c->cg, v.ids[i], now_ns);
                        c->paths[i] = ci->path ? strdup(ci->path) : NULL; /* NULL: walk next time */
                }
        }
        return 0;
}

static int on_refresh(sd_event_source *es, uint64_t usec, void *userdata)
{
        CgroupFilter *c = userdata;

        (void)cgroup_filter_refresh(c);
        (void)sd_event_source_set_time_relative(es, CGROUP_FILTER_REFRESH_USEC);
        return sd_event_source_set_enabled(es, SD_EVENT_ONESHOT);
}

int cgroup_filter_new(sd_event *e, const SampleFilter *f, CgroupResolver *cg, struct bpf_object *obj,
                      CgroupFilter **ret)
{
        _cleanup_(cgroup_filter_freep) CgroupFilter *c = NULL;
        struct bpf_map *map;
        int r;

        if (f->n_units == 0 && f->n_cgroups == 0) {
                *ret = NULL;
                return 0;
        }
        if (!cg)
                return log_error_errno(-ENOENT,
                                       "--unit/--cgroup need a cgroup v2 hierarchy, none is mounted");
        map = obj ? bpf_object__find_map_by_name(obj, "profd_filter_cgroups") : NULL;
        if (!map)
                return log_error_errno(-ENOENT, "BPF map profd_filter_cgroups not found");
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->filter = *f;
        c->cg = cg;
        c->map_fd = bpf_map__fd(map);
        /* A --cgroup path that does not exist at start is a typo far more often than a cgroup
         * about to appear: say so loudly (units are looked for again). */
        for (unsigned i = 0; i < f->n_cgroups; i++) {
                CgroupMatch m;
                r = cgroup_resolver_find_path(cg, f->cgroups[i], &m);
                if (r < 0)
                        log_warning_errno(r, "--cgroup %s: not found below %s (yet): %m", f->cgroups[i],
                                          cgroup_resolver_root(cg));
        }
        r = cgroup_filter_refresh(c);
        if (r < 0)
                return r;
        r = sd_event_add_time_relative(e, &c->timer, CLOCK_MONOTONIC, CGROUP_FILTER_REFRESH_USEC,
                                       USEC_PER_SEC / 10, on_refresh, c);
        if (r < 0)
                return log_error_errno(r, "Cannot add the cgroup filter timer: %m");
        *ret = TAKE_PTR(c);
        return 0;
}

CgroupFilter *cgroup_filter_free(CgroupFilter *c)
{
        if (!c)
                return NULL;
        sd_event_source_disable_unref(c->timer);
        for (uint32_t i = 0; i < PROFD_FILTER_MAX_CGROUPS; i++)
                free(c->paths[i]);
        free(c);
        return NULL;
}
