/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtimes/perf-map.h"
#include "util/array.h"
#include "util/log.h"
#include "util/metrics-writer.h"
#include "util/safe-open.h"
#include "util/time-util.h"

/* A map already read is checked for growth at most this often by the periodic refresh (so that
 * what a process wrote shortly before it exits is mostly read: its /tmp is reachable only while it
 * runs)... */
#define PERF_MAP_CHECK_NS (2 * NSEC_PER_SEC)
/* ...and by a lookup that found no entry (a function compiled since the last read). */
#define PERF_MAP_MISS_CHECK_NS (1 * NSEC_PER_SEC)
/* Steps read by one perf_maps_tick() over all processes. */
#define PERF_MAP_STEPS_PER_TICK 4
/* Entries looked at before the one found by binary search, for a function that contains the
 * address but starts before another entry (overlapping entries: JITs reuse memory). */
#define PERF_MAP_LOOKBACK 8
/* Bytes just before the read offset, compared on the next read: equal, the file was only appended
 * to (perf maps are append-only); different, it was rewritten and is read again from the start. */
#define PERF_MAP_TAIL 32

typedef struct PerfMapEntry {
        uint64_t start;
        uint32_t size;
        uint32_t name; /* offset into names; grows with file order, so it also orders entries in time */
} PerfMapEntry;
_Static_assert(sizeof(PerfMapEntry) == 16, "PerfMapEntry is per JIT function");

typedef struct PerfMap {
        pid_t pid, nspid;
        uid_t uid;
        uint64_t start_time;
        bool status_read, exited;
        PerfMapEntry *entries; /* sorted by start, one entry per start (the latest written) */
        size_t n_entries, cap_entries;
        char *names;
        size_t names_size, names_cap;
        /* What was read of the file: its identity, how far (a line boundary), the bytes before. */
        bool have_file, skipping; /* skipping: inside an overlong line, until its newline */
        bool more;                /* the last step stopped before the end of the file */
        bool capped;              /* over PERF_MAP_MAX_BYTES_PER_PROCESS: the rest is not read */
        uint64_t dev, ino, offset, size_seen;
        uint8_t tail[PERF_MAP_TAIL];
        size_t tail_len;
        uint64_t checked_ns;
        int last_error;
        char file[48]; /* "/tmp/perf-NSPID.map" */
} PerfMap;

enum {
        ERR_NOT_REGULAR,
        ERR_SYMLINK,
        ERR_NOT_OWNER,
        ERR_WOULD_BLOCK,
        ERR_READ,
        _ERR_MAX,
};
static const char *const err_names[_ERR_MAX] = {
        [ERR_NOT_REGULAR] = "not_regular", [ERR_SYMLINK] = "symlink", [ERR_NOT_OWNER] = "not_owner",
        [ERR_WOULD_BLOCK] = "would_block", [ERR_READ] = "read_error",
};

enum {
        DROP_PROCESS_CAP,
        DROP_TOTAL_CAP,
        _DROP_MAX,
};

struct PerfMaps {
        PerfMap **maps; /* sorted by pid */
        size_t n_maps, cap_maps;
        size_t bytes; /* entries and names of every map */
        size_t tick_cursor;
        uint64_t n_reads_full, n_reads_incremental, n_bytes_read, n_bytes_skipped, n_entries_loaded,
                n_malformed, n_dropped[_DROP_MAX], n_errors[_ERR_MAX], n_processes_dropped, n_lookups,
                n_found;
        char *scratch; /* one read step */
};

static size_t perf_map_bytes(const PerfMap *m)
{
        return m->cap_entries * sizeof(PerfMapEntry) + m->names_cap;
}

static void perf_map_clear(PerfMaps *pm, PerfMap *m)
{
        pm->bytes -= perf_map_bytes(m);
        free(m->entries);
        free(m->names);
        m->entries = NULL;
        m->names = NULL;
        m->n_entries = m->cap_entries = m->names_size = m->names_cap = 0;
        m->have_file = m->skipping = m->capped = false;
        m->offset = m->size_seen = m->tail_len = 0;
}

static void perf_map_free(PerfMaps *pm, PerfMap *m)
{
        if (!m)
                return;
        perf_map_clear(pm, m);
        free(m);
}

int perf_maps_new(PerfMaps **ret)
{
        PerfMaps *pm = calloc(1, sizeof(*pm));
        if (!pm)
                return -ENOMEM;
        *ret = pm;
        return 0;
}

PerfMaps *perf_maps_free(PerfMaps *pm)
{
        if (!pm)
                return NULL;
        for (size_t i = 0; i < pm->n_maps; i++)
                perf_map_free(pm, pm->maps[i]);
        free(pm->maps);
        free(pm->scratch);
        return mfree(pm);
}

size_t perf_maps_memory(const PerfMaps *pm)
{
        return pm->bytes + pm->n_maps * sizeof(PerfMap) + (pm->scratch ? PERF_MAP_READ_STEP + 1 : 0);
}

static bool has_anon_exec(const Process *p)
{
        for (size_t i = 0; i < p->n_mappings; i++)
                if (p->mappings[i].path[0] == 0)
                        return true;
        return false;
}

static void remove_at(PerfMaps *pm, size_t i)
{
        perf_map_free(pm, pm->maps[i]);
        ARRAY_REMOVE_AT(pm->maps, pm->n_maps, i);
}

/* The map state of p, created if p runs and may have JIT code. NULL if none. */
static PerfMap *perf_map_get(PerfMaps *pm, const Process *p, bool create)
{
        bool found;
        size_t i = SORTED_INDEX(pm->maps, pm->n_maps, _e->pid, p->pid, &found);
        PerfMap *m;

        if (found) {
                m = pm->maps[i];
                if (m->start_time == p->start_time) {
                        m->exited = m->exited || p->exited_ns;
                        return m;
                }
                /* The pid belongs to another process now. */
                if (p->exited_ns)
                        return NULL;
                remove_at(pm, i);
        }
        if (!create || p->exited_ns || !has_anon_exec(p))
                return NULL;
        if (pm->n_maps >= PERF_MAP_MAX_PROCESSES) {
                /* An exited process's map first, else that of a process which wrote none. */
                size_t victim = SIZE_MAX;
                for (size_t k = 0; k < pm->n_maps && (victim == SIZE_MAX || !pm->maps[victim]->exited); k++)
                        if (pm->maps[k]->exited || (victim == SIZE_MAX && !pm->maps[k]->have_file))
                                victim = k;
                if (victim == SIZE_MAX) {
                        pm->n_processes_dropped++;
                        return NULL;
                }
                remove_at(pm, victim);
        }
        if (ARRAY_GROW(pm->maps, pm->cap_maps, pm->n_maps + 1, 16) < 0)
                return NULL;
        m = calloc(1, sizeof(*m));
        if (!m)
                return NULL;
        m->pid = p->pid;
        m->start_time = p->start_time;
        i = SORTED_INDEX(pm->maps, pm->n_maps, _e->pid, p->pid, &found);
        ARRAY_INSERT_AT(pm->maps, pm->n_maps, i, m);
        return m;
}

/* Whether pid is still the process m was made for (its /proc/PID/stat start time): else the pid
 * was reused, and its root and /tmp are another process's. */
static bool same_process(const PerfMap *m)
{
        uint64_t start;
        return process_read_start_time(m->pid, &start) >= 0 && start == m->start_time;
}

/* The pid in the process's innermost pid namespace (the one it writes into the file name) and
 * its effective uid (who may own the file), from /proc/PID/status. */
static int read_status(PerfMap *m)
{
        char path[64], *line = NULL;
        size_t size = 0;
        bool have_ns = false, have_uid = false;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)m->pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while (getline(&line, &size, f) > 0) {
                if (strncmp(line, "NSpid:", 6) == 0) {
                        char *last = strrchr(line, '\t') ?: line + 6;
                        long v = strtol(last, NULL, 10);
                        if (v > 0) {
                                m->nspid = (pid_t)v;
                                have_ns = true;
                        }
                } else if (strncmp(line, "Uid:", 4) == 0) {
                        unsigned long r, e;
                        if (sscanf(line + 4, "%lu %lu", &r, &e) == 2) {
                                m->uid = (uid_t)e;
                                have_uid = true;
                        }
                }
        }
        free(line);
        fclose(f);
        if (!have_uid)
                return -ENODATA;
        /* Kernels before 4.1 have no NSpid: the process sees its pid as ours. */
        if (!have_ns)
                m->nspid = m->pid;
        snprintf(m->file, sizeof(m->file), "/tmp/perf-%d.map", (int)m->nspid);
        m->status_read = true;
        return 0;
}

static int entry_cmp(const void *a, const void *b)
{
        const PerfMapEntry *x = a, *y = b;
        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        return x->name < y->name ? -1 : x->name > y->name;
}

/* Sorts the entries appended since the last step (from index old) and merges them with the
 * sorted ones; of entries with the same start, the one written last stays, as in perf. */
static int merge_new(PerfMaps *pm, PerfMap *m, size_t old)
{
        size_t n_new = m->n_entries - old, a = 0, b = old, w = 0;
        PerfMapEntry *out;

        if (n_new == 0)
                return 0;
        qsort_safe(m->entries + old, n_new, sizeof(PerfMapEntry), entry_cmp);
        out = malloc(m->cap_entries * sizeof(*out));
        if (!out) {
                /* No memory for a merge: sort all in place (slower), keep the latest per start. */
                qsort_safe(m->entries, m->n_entries, sizeof(PerfMapEntry), entry_cmp);
                for (a = 0; a < m->n_entries; a++)
                        if (a + 1 == m->n_entries || m->entries[a + 1].start != m->entries[a].start)
                                m->entries[w++] = m->entries[a];
                m->n_entries = w;
                return 0;
        }
        while (a < old || b < m->n_entries) {
                PerfMapEntry e;
                /* Equal starts: the new one (written later) is taken, the old one skipped below. */
                if (b >= m->n_entries || (a < old && m->entries[a].start < m->entries[b].start))
                        e = m->entries[a++];
                else
                        e = m->entries[b++];
                if (w > 0 && out[w - 1].start == e.start && out[w - 1].name < e.name)
                        out[w - 1] = e;
                else if (w == 0 || out[w - 1].start != e.start)
                        out[w++] = e;
        }
        free(m->entries);
        m->entries = out;
        m->n_entries = w;
        return 0;
}

static bool reserve(PerfMaps *pm, PerfMap *m, size_t name_len)
{
        if (m->capped) {
                pm->n_dropped[DROP_PROCESS_CAP]++;
                return false;
        }
        size_t before = perf_map_bytes(m), need_names = m->names_size + name_len + 1;
        size_t cap_e = m->cap_entries, cap_n = m->names_cap;

        if (m->n_entries == cap_e)
                cap_e = cap_e ? cap_e * 2 : 256;
        while (cap_n < need_names)
                cap_n = cap_n ? cap_n * 2 : 16384;
        if (need_names > UINT32_MAX)
                return false;
        /* Doubling past the cap would leave up to half of it unused: grow to what is left instead,
         * split between entries and names as the entries so far use them (16 bytes and their
         * name's), so that neither runs out while the other has room. */
        if (cap_e * sizeof(PerfMapEntry) + cap_n > PERF_MAP_MAX_BYTES_PER_PROCESS) {
                size_t max = PERF_MAP_MAX_BYTES_PER_PROCESS, esz = sizeof(PerfMapEntry);
                size_t min_e = cap_e != m->cap_entries ? m->n_entries + 1 : cap_e;
                size_t min_n = cap_n != m->names_cap ? need_names : cap_n;
                if (min_e * esz + min_n <= max) {
                        uint64_t room = max - min_e * esz - min_n, used = m->names_size + m->n_entries * esz;
                        uint64_t to_names = used ? room * m->names_size / used : room / 2;
                        if (cap_e != m->cap_entries)
                                cap_e = min_e + (size_t)((room - to_names) / esz);
                        if (cap_n != m->names_cap)
                                cap_n = min_n + (size_t)to_names;
                }
        }
        size_t after = cap_e * sizeof(PerfMapEntry) + cap_n;
        if (after > PERF_MAP_MAX_BYTES_PER_PROCESS) {
                pm->n_dropped[DROP_PROCESS_CAP]++;
                m->capped = true;
                return false;
        }
        if (pm->bytes - before + after > PERF_MAP_MAX_BYTES_TOTAL) {
                pm->n_dropped[DROP_TOTAL_CAP]++;
                return false;
        }
        if (cap_e != m->cap_entries) {
                PerfMapEntry *n = reallocarray(m->entries, cap_e, sizeof(*n));
                if (!n)
                        return false;
                m->entries = n;
                m->cap_entries = cap_e;
        }
        if (cap_n != m->names_cap) {
                char *n = realloc(m->names, cap_n);
                if (!n)
                        return false;
                m->names = n;
                m->names_cap = cap_n;
        }
        pm->bytes = pm->bytes - before + perf_map_bytes(m);
        return true;
}

/* One line (without its newline): "START SIZE name", START and SIZE hex with or without 0x. */
static void parse_line(PerfMaps *pm, PerfMap *m, char *line, size_t len)
{
        char *p = line, *end;
        uint64_t start, size;
        size_t name_len;

        if (len > 0 && line[len - 1] == '\r')
                line[--len] = 0;
        if (len == 0)
                return;
        errno = 0;
        start = strtoull(p, &end, 16);
        if (errno || end == p || *end != ' ' || *p == '-' || *p == '+' || *p == ' ')
                goto malformed;
        p = end + 1;
        size = strtoull(p, &end, 16);
        if (errno || end == p || *end != ' ' || *p == '-' || *p == '+' || *p == ' ')
                goto malformed;
        p = end + 1;
        name_len = len - (size_t)(p - line);
        if (name_len == 0 || size == 0 || size > UINT32_MAX || start + size < start)
                goto malformed;
        if (!reserve(pm, m, name_len))
                return;
        /* Kept as written: the encoders escape what is not printable UTF-8 (utf8.h). */
        memcpy(m->names + m->names_size, p, name_len);
        m->names[m->names_size + name_len] = 0;
        m->entries[m->n_entries++] =
                (PerfMapEntry){.start = start, .size = (uint32_t)size, .name = (uint32_t)m->names_size};
        m->names_size += name_len + 1;
        pm->n_entries_loaded++;
        return;
malformed:
        pm->n_malformed++;
}

static void note_error(PerfMaps *pm, PerfMap *m, int r)
{
        unsigned reason;

        switch (r) {
        case -ELOOP:
                reason = ERR_SYMLINK;
                break;
        case -EBADFD:
        case -EISDIR:
                reason = ERR_NOT_REGULAR;
                break;
        case -EAGAIN:
                reason = ERR_WOULD_BLOCK;
                break;
        case -EPERM:
                reason = ERR_NOT_OWNER;
                break;
        default:
                reason = ERR_READ;
        }
        pm->n_errors[reason]++;
        if (m->last_error != r)
                log_debug("Not reading %s of process %d: %s", m->file, (int)m->pid, err_names[reason]);
        m->last_error = r;
}

static ssize_t pread_full(int fd, void *buf, size_t n, uint64_t off)
{
        size_t got = 0;
        while (got < n) {
                ssize_t k = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                got += (size_t)k;
        }
        return (ssize_t)got;
}

/* Opens the file and reads at most PERF_MAP_READ_STEP bytes of what is new. */
static int perf_map_step(PerfMaps *pm, PerfMap *m)
{
        _cleanup_close_ int fd = -1;
        char root[64];
        struct stat st;
        size_t n, pos = 0, old = m->n_entries;
        bool newline = false;
        ssize_t k;
        int r;

        m->checked_ns = now_ns(CLOCK_MONOTONIC);
        if (!same_process(m))
                return -ESRCH;
        if (!m->status_read) {
                r = read_status(m);
                if (r < 0)
                        return r;
        }
        snprintf(root, sizeof(root), "/proc/%d/root", (int)m->pid);
        fd = safe_open_in_root_nofollow(root, m->file, &st);
        if (fd == -ENOENT)
                return 0; /* not written (yet) */
        if (fd < 0) {
                note_error(pm, m, fd);
                return fd;
        }
        /* As perf does: another user's file is not what this process wrote. */
        if (st.st_uid != 0 && st.st_uid != m->uid) {
                note_error(pm, m, -EPERM);
                return -EPERM;
        }
        if (m->have_file && (m->dev != (uint64_t)st.st_dev || m->ino != (uint64_t)st.st_ino ||
                             (uint64_t)st.st_size < m->offset))
                perf_map_clear(pm, m);
        else if (m->have_file && m->tail_len > 0) {
                uint8_t tail[PERF_MAP_TAIL];
                k = pread_full(fd, tail, m->tail_len, m->offset - m->tail_len);
                if (k != (ssize_t)m->tail_len || memcmp(tail, m->tail, m->tail_len) != 0)
                        perf_map_clear(pm, m);
        }
        old = m->n_entries;
        if (!m->have_file)
                pm->n_reads_full++;
        m->have_file = true;
        m->dev = st.st_dev;
        m->ino = st.st_ino;
        m->size_seen = (uint64_t)st.st_size;
        m->last_error = 0;
        m->more = false;
        if ((uint64_t)st.st_size <= m->offset)
                return 0;
        if (m->offset > 0)
                pm->n_reads_incremental++;

        if (!pm->scratch && !(pm->scratch = malloc(PERF_MAP_READ_STEP + 1)))
                return -ENOMEM;
        n = (uint64_t)st.st_size - m->offset;
        if (n > PERF_MAP_READ_STEP)
                n = PERF_MAP_READ_STEP;
        k = pread_full(fd, pm->scratch, n, m->offset);
        if (k < 0) {
                note_error(pm, m, (int)k);
                return (int)k;
        }
        n = (size_t)k;
        pm->n_bytes_read += n;
        pm->scratch[n] = 0;

        while (pos < n) {
                char *nl = memchr(pm->scratch + pos, '\n', n - pos);
                size_t len;

                if (!nl) {
                        /* An incomplete last line is read again once its newline is written,
                         * unless it is already too long to be one. */
                        if (n - pos >= PERF_MAP_MAX_LINE) {
                                if (!m->skipping)
                                        pm->n_malformed++;
                                m->skipping = true;
                                pos = n;
                        }
                        break;
                }
                len = (size_t)(nl - (pm->scratch + pos));
                *nl = 0;
                newline = true;
                if (m->skipping)
                        m->skipping = false;
                else if (len >= PERF_MAP_MAX_LINE)
                        pm->n_malformed++;
                else
                        parse_line(pm, m, pm->scratch + pos, len);
                pos += len + 1;
        }
        m->more = m->offset + n < (uint64_t)st.st_size;
        m->offset += pos;
        /* Over the cap, or a whole step without a newline (no perf map has such lines: a huge or
         * sparse file): what is left is not read, only what is appended later, from its next
         * line on. Bounds the reading a process can cause. */
        if (m->more && (m->capped || (m->skipping && !newline))) {
                pm->n_bytes_skipped += (uint64_t)st.st_size - m->offset;
                m->offset = (uint64_t)st.st_size;
                m->skipping = true;
                m->more = false;
        }
        m->tail_len = m->offset < PERF_MAP_TAIL ? m->offset : PERF_MAP_TAIL;
        if (m->tail_len > 0) {
                k = pread_full(fd, m->tail, m->tail_len, m->offset - m->tail_len);
                if (k != (ssize_t)m->tail_len)
                        m->tail_len = 0;
        }
        return merge_new(pm, m, old);
}

static bool step_due(const PerfMap *m, uint64_t interval)
{
        if (m->exited)
                return false;
        if (m->have_file && m->more && !m->last_error)
                return true;
        return m->checked_ns == 0 || now_ns(CLOCK_MONOTONIC) - m->checked_ns >= interval;
}

static const PerfMapEntry *perf_map_find(const PerfMap *m, uint64_t addr)
{
        size_t lo = 0, hi = m->n_entries;
        const PerfMapEntry *best = NULL;

        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (m->entries[mid].start <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        for (size_t i = lo, tries = 0; i > 0 && tries < PERF_MAP_LOOKBACK; i--, tries++) {
                const PerfMapEntry *e = &m->entries[i - 1];
                if (addr - e->start < e->size && (!best || e->name > best->name))
                        best = e;
        }
        return best;
}

const char *perf_maps_lookup(PerfMaps *pm, const Process *p, uint64_t addr, const char **ret_file)
{
        PerfMap *m = perf_map_get(pm, p, true);
        const PerfMapEntry *e;

        pm->n_lookups++;
        if (!m)
                return NULL;
        e = perf_map_find(m, addr);
        if (!e && step_due(m, PERF_MAP_MISS_CHECK_NS) && perf_map_step(pm, m) >= 0)
                e = perf_map_find(m, addr);
        if (!e)
                return NULL;
        pm->n_found++;
        if (ret_file)
                *ret_file = m->file;
        return m->names + e->name;
}

void perf_maps_refresh(PerfMaps *pm, const Process *p)
{
        PerfMap *m = perf_map_get(pm, p, true);
        if (m && step_due(m, PERF_MAP_CHECK_NS))
                (void)perf_map_step(pm, m);
}

void perf_maps_tick(PerfMaps *pm, const Process *(*find)(pid_t pid, void *userdata), void *userdata)
{
        unsigned steps = 0;

        for (size_t i = 0; i < pm->n_maps;) {
                const Process *p = find(pm->maps[i]->pid, userdata);
                if (!p || p->start_time != pm->maps[i]->start_time) {
                        remove_at(pm, i);
                        continue;
                }
                pm->maps[i]->exited = pm->maps[i]->exited || p->exited_ns;
                i++;
        }
        /* Resumes where the last tick stopped: every map gets its turn however many there are. */
        for (size_t k = 0; k < pm->n_maps && steps < PERF_MAP_STEPS_PER_TICK; k++) {
                PerfMap *m;
                if (pm->tick_cursor >= pm->n_maps)
                        pm->tick_cursor = 0;
                m = pm->maps[pm->tick_cursor++];
                if (step_due(m, PERF_MAP_CHECK_NS)) {
                        steps++;
                        (void)perf_map_step(pm, m);
                }
        }
}

void perf_maps_write_metrics(const PerfMaps *pm, FILE *f)
{
        char help[160];
        size_t entries = 0;

        for (size_t i = 0; i < pm->n_maps; i++)
                entries += pm->maps[i]->n_entries;
        metric_gauge(f, "profd_perf_map_processes",
                     "Processes whose perf map (/tmp/perf-PID.map) is tracked.", pm->n_maps);
        metric_gauge(f, "profd_perf_map_entries", "JIT functions known from perf maps.", entries);
        metric_gauge(f, "profd_perf_map_bytes", "Memory of the perf map entries and names.", pm->bytes);
        metric_counter(f, "profd_perf_map_entries_loaded_total", "Perf map lines read as entries.",
                       pm->n_entries_loaded);
        metric_labelled(f, "profd_perf_map_reads_total", "counter",
                        "Perf map files read: from the start (first read, or rewritten), or only what was "
                        "appended.",
                        "kind", (const char *const[]){"full", "incremental"},
                        (const uint64_t[]){pm->n_reads_full, pm->n_reads_incremental}, 2);
        metric_counter(f, "profd_perf_map_read_bytes_total", "Bytes read from perf map files.",
                       pm->n_bytes_read);
        metric_counter(f, "profd_perf_map_skipped_bytes_total",
                       "Bytes of perf map files not read: past the per-process cap, or past a step without "
                       "any newline (a huge or sparse file).",
                       pm->n_bytes_skipped);
        snprintf(help, sizeof(help),
                 "Perf map lines skipped: not START SIZE name, size 0, or longer than %u bytes.",
                 PERF_MAP_MAX_LINE);
        metric_counter(f, "profd_perf_map_lines_malformed_total", help, pm->n_malformed);
        metric_labelled(f, "profd_perf_map_entries_dropped_total", "counter",
                        "Perf map entries not kept: over the bytes of one process or of all.", "reason",
                        (const char *const[]){"process_cap", "total_cap"},
                        (const uint64_t[]){pm->n_dropped[DROP_PROCESS_CAP], pm->n_dropped[DROP_TOTAL_CAP]},
                        2);
        metric_counter(f, "profd_perf_map_processes_dropped_total",
                       "Lookups and refreshes that could not track another process's perf map: as many "
                       "tracked as allowed, all running and with a map.",
                       pm->n_processes_dropped);
        metric_labelled(f, "profd_perf_map_lookups_total", "counter",
                        "Addresses in anonymous executable memory looked up in perf maps, by result.",
                        "result", (const char *const[]){"found", "not_found"},
                        (const uint64_t[]){pm->n_found, pm->n_lookups - pm->n_found}, 2);
        metric_labelled(f, "profd_perf_map_errors_total", "counter",
                        "Perf map files not read: not a regular file (FIFO, device), a symlink on the path, "
                        "owned by another user than the process's or root, an open that would block, a read "
                        "error.",
                        "reason", err_names, pm->n_errors, _ERR_MAX);
}
