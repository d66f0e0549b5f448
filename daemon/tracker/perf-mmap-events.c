/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tracker/perf-mmap-events.h"
#include "util/log.h"
#include "util/metrics-writer.h"
#include "util/time-util.h"

/* Data pages per CPU ring (power of two): ~300 mmap records between two reads. */
#define RING_PAGES 8
/* A process mapping files in a loop (dlopen/dlclose) makes a record for every mapping, and each
 * would wake the daemon: after a drain that came less than this after the one before, the rings
 * are left alone this long and drained together (records then wait at most this long). */
#define HOLDOFF_NS (5 * 1000 * 1000ULL)
/* Except after a drain that delivered new anonymous executable ranges (JIT code about to run):
 * those are handled at once, up to PROMPT_BURST in a row, then PROMPT_PER_SEC a second, so a
 * process mapping ever new anonymous code in a loop cannot keep the daemon awake either. */
#define PROMPT_BURST 50
#define PROMPT_PER_SEC 200
/* Largest record read (an MMAP2 record carries a path of up to PATH_MAX); longer ones skipped. */
#define RECORD_MAX 8192

typedef struct Ring {
        int fd;
        void *base;
        sd_event_source *io;
} Ring;

struct PerfMmapEvents {
        perf_mmap_event_fn fn;
        void (*drained)(void *userdata);
        void *userdata;
        Ring *rings;
        int n_rings;
        sd_event_source *holdoff; /* re-enables the rings' sources after a hold-off */
        uint64_t last_drain_ns;
        uint64_t prompt_tokens, prompt_refill_ns;
        uint64_t n_holdoffs;
        size_t page_size;
        pid_t self;
        uint64_t n_sent, n_lost, n_records, n_skipped;
};

/* The MMAP2 record (perf_event.h documents it field by field; sample_id_all is off). */
struct mmap2_record {
        struct perf_event_header header;
        uint32_t pid, tid;
        uint64_t addr, len, pgoff;
        uint32_t maj, min;
        uint64_t ino, ino_generation;
        uint32_t prot, flags;
        char filename[];
};

static bool is_anon_name(const char *name, size_t max)
{
        /* "//anon" for private and shared anonymous memory, "[anon:NAME]" once named by prctl. */
        return strnlen(name, max) < max &&
               (strncmp(name, "//anon", 6) == 0 || strncmp(name, "[anon:", 6) == 0 ||
                strncmp(name, "[anon_shmem:", 12) == 0);
}

static void on_record(PerfMmapEvents *pm, const struct perf_event_header *h)
{
        const struct mmap2_record *m = (const void *)h;
        struct profd_event ev = {.type = PROFD_EV_ANON_EXEC};

        pm->n_records++;
        if (h->type == PERF_RECORD_LOST) {
                const struct {
                        struct perf_event_header header;
                        uint64_t id, lost;
                } *l = (const void *)h;
                if (h->size >= sizeof(*l))
                        pm->n_lost += l->lost;
                return;
        }
        if (h->type != PERF_RECORD_MMAP2 || h->size < sizeof(*m) + 1)
                return;
        if (m->ino != 0 || !(m->prot & PROT_EXEC) || (pid_t)m->pid == pm->self || m->pid == 0 ||
            !is_anon_name(m->filename, h->size - sizeof(*m)))
                return;
        ev.pid = m->pid;
        ev.addr = m->addr;
        ev.len = m->len;
        pm->n_sent++;
        pm->fn(&ev, pm->userdata);
}

/* Everything the ring holds now: at most RING_PAGES pages of records, so the work is bounded. */
static void ring_consume(PerfMmapEvents *pm, Ring *r)
{
        struct perf_event_mmap_page *meta = r->base;
        const uint8_t *data = (const uint8_t *)r->base + pm->page_size;
        uint64_t size = RING_PAGES * pm->page_size;
        uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE), tail = meta->data_tail;
        _Alignas(8) uint8_t buf[RECORD_MAX];

        while (tail < head) {
                struct perf_event_header h;
                uint64_t off = tail % size;

                if (off + sizeof(h) <= size)
                        memcpy(&h, data + off, sizeof(h));
                else {
                        memcpy(&h, data + off, size - off);
                        memcpy((uint8_t *)&h + (size - off), data, sizeof(h) - (size - off));
                }
                if (h.size < sizeof(h) || h.size > head - tail)
                        break; /* torn: never expected, do not loop on it */
                if (h.size > sizeof(buf))
                        pm->n_skipped++;
                else {
                        if (off + h.size <= size)
                                memcpy(buf, data + off, h.size);
                        else {
                                memcpy(buf, data + off, size - off);
                                memcpy(buf + (size - off), data, h.size - (size - off));
                        }
                        on_record(pm, (const struct perf_event_header *)buf);
                }
                tail += h.size;
        }
        __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
}

static void rings_enable(PerfMmapEvents *pm, int how)
{
        for (int i = 0; i < pm->n_rings; i++)
                if (pm->rings[i].io)
                        (void)sd_event_source_set_enabled(pm->rings[i].io, how);
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        PerfMmapEvents *pm = userdata;
        uint64_t now = now_ns(CLOCK_MONOTONIC);

        uint64_t sent = pm->n_sent;
        bool prompt = false;

        for (int i = 0; i < pm->n_rings; i++)
                if (pm->rings[i].fd == fd)
                        ring_consume(pm, &pm->rings[i]);
        if (pm->drained)
                pm->drained(pm->userdata);
        if (pm->n_sent != sent) {
                uint64_t refill = (now - pm->prompt_refill_ns) / (NSEC_PER_SEC / PROMPT_PER_SEC);
                if (refill > 0) {
                        pm->prompt_tokens = pm->prompt_tokens + refill > PROMPT_BURST
                                                    ? PROMPT_BURST
                                                    : pm->prompt_tokens + refill;
                        pm->prompt_refill_ns = now;
                }
                if (pm->prompt_tokens > 0) {
                        pm->prompt_tokens--;
                        prompt = true;
                }
        }
        if (pm->holdoff && !prompt && now - pm->last_drain_ns < HOLDOFF_NS) {
                pm->n_holdoffs++;
                rings_enable(pm, SD_EVENT_OFF);
                (void)sd_event_source_set_time(pm->holdoff, (now + HOLDOFF_NS) / NSEC_PER_USEC);
                (void)sd_event_source_set_enabled(pm->holdoff, SD_EVENT_ONESHOT);
        }
        pm->last_drain_ns = now;
        return 0;
}

static int on_holdoff(sd_event_source *s, uint64_t usec, void *userdata)
{
        PerfMmapEvents *pm = userdata;

        perf_mmap_events_consume(pm);
        if (pm->drained)
                pm->drained(pm->userdata);
        pm->last_drain_ns = now_ns(CLOCK_MONOTONIC);
        rings_enable(pm, SD_EVENT_ON);
        return 0;
}

void perf_mmap_events_consume(PerfMmapEvents *pm)
{
        if (!pm)
                return;
        for (int i = 0; i < pm->n_rings; i++)
                if (pm->rings[i].base)
                        ring_consume(pm, &pm->rings[i]);
}

int perf_mmap_events_new(sd_event *e, perf_mmap_event_fn fn, void (*drained)(void *userdata), void *userdata,
                         PerfMmapEvents **ret)
{
        _cleanup_(perf_mmap_events_freep) PerfMmapEvents *pm = NULL;
        long ncpus = sysconf(_SC_NPROCESSORS_CONF);
        int r, opened = 0;

        if (ncpus <= 0)
                return -EINVAL;
        pm = calloc(1, sizeof(*pm));
        if (!pm)
                return -ENOMEM;
        pm->fn = fn;
        pm->drained = drained;
        pm->prompt_tokens = PROMPT_BURST;
        pm->userdata = userdata;
        pm->self = getpid();
        pm->page_size = (size_t)sysconf(_SC_PAGESIZE);
        pm->rings = calloc(ncpus, sizeof(*pm->rings));
        if (!pm->rings)
                return -ENOMEM;
        pm->n_rings = (int)ncpus;
        for (int cpu = 0; cpu < ncpus; cpu++)
                pm->rings[cpu].fd = -1;
        for (int cpu = 0; cpu < ncpus; cpu++) {
                Ring *ring = &pm->rings[cpu];
                struct perf_event_attr attr = {
                        .type = PERF_TYPE_SOFTWARE,
                        .size = sizeof(attr),
                        .config = PERF_COUNT_SW_DUMMY,
                        .mmap = 1,
                        .mmap2 = 1,
                        /* Woken for every record: the point is to know before the first sample. */
                        .watermark = 1,
                        .wakeup_watermark = 1,
                };

                ring->fd = (int)syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
                if (ring->fd < 0) {
                        r = -errno;
                        if (r == -ENODEV || r == -EINVAL)
                                continue; /* CPU not present */
                        return log_debug_errno(r, "Opening perf mmap records on CPU %d failed: %m", cpu);
                }
                ring->base = mmap(NULL, (RING_PAGES + 1) * pm->page_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                                  ring->fd, 0);
                if (ring->base == MAP_FAILED) {
                        ring->base = NULL;
                        return log_debug_errno(-errno, "Mapping the perf mmap ring of CPU %d failed: %m",
                                               cpu);
                }
                r = sd_event_add_io(e, &ring->io, ring->fd, EPOLLIN, on_io, pm);
                if (r < 0)
                        return r;
                (void)sd_event_source_set_description(ring->io, "perf-mmap-records");
                opened++;
        }
        if (opened == 0)
                return -ENODEV;
        r = sd_event_add_time(e, &pm->holdoff, CLOCK_MONOTONIC, 0, 1000, on_holdoff, pm);
        if (r < 0)
                return r;
        (void)sd_event_source_set_enabled(pm->holdoff, SD_EVENT_OFF);
        *ret = TAKE_PTR(pm);
        return 0;
}

PerfMmapEvents *perf_mmap_events_free(PerfMmapEvents *pm)
{
        if (!pm)
                return NULL;
        sd_event_source_disable_unref(pm->holdoff);
        for (int i = 0; i < pm->n_rings; i++) {
                Ring *ring = &pm->rings[i];
                sd_event_source_disable_unref(ring->io);
                if (ring->base)
                        munmap(ring->base, (RING_PAGES + 1) * pm->page_size);
                if (ring->fd >= 0)
                        close(ring->fd);
        }
        free(pm->rings);
        return mfree(pm);
}

void perf_mmap_events_write_metrics(const PerfMmapEvents *pm, FILE *f)
{
        if (!pm)
                return;
        metric_counter(f, "profd_perf_mmap_records_total",
                       "Kernel perf mmap records read (anonymous executable memory where no BPF hook sees "
                       "mmap/mprotect).",
                       pm->n_records);
        metric_labelled(f, "profd_perf_mmap_records_dropped_total", "counter",
                        "Anonymous executable ranges not passed on, by reason.", "reason",
                        (const char *const[]){"ring_full", "too_long"},
                        (const uint64_t[]){pm->n_lost, pm->n_skipped}, 2);
        metric_counter(f, "profd_perf_mmap_holdoffs_total",
                       "Times the perf mmap rings were left alone for 5 ms because records kept coming (a "
                       "process mapping files in a loop).",
                       pm->n_holdoffs);
}
