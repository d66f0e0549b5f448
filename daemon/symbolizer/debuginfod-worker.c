/* SPDX-License-Identifier: GPL-2.0-only */
/* libdebuginfod's threads (debuginfod-worker.h), run by work-threads.h: each has a client of its
 * own, made and ended in the thread. */
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "symbolizer/debuginfod-worker.h"
#include "util/macro.h"
#include "util/time-util.h"
#include "util/work-threads.h"

/* A thread's own: its client, and what the progress callback needs. libdebuginfod calls that
 * about once a second while a transfer runs, also while nothing arrives, and aborts the transfer
 * when it returns non-zero. */
typedef struct Thread {
        DebuginfodWorkers *w;
        debuginfod_client *client;
        uint64_t deadline_ns;
        bool timed_out;
} Thread;

struct DebuginfodWorkers {
        WorkThreads *threads;
        uint64_t timeout_ns;
        int null_fd; /* libdebuginfod's verbose output, see thread_begin() */
};

static int on_progress(debuginfod_client *c, long a, long b)
{
        Thread *t = debuginfod_get_user_data(c);

        if (work_threads_stopping(t->w->threads))
                return 1;
        if (now_ns(CLOCK_MONOTONIC) > t->deadline_ns) {
                t->timed_out = true;
                return 1;
        }
        return 0;
}

static void *thread_begin(WorkThreads *threads, void *userdata)
{
        Thread *t = calloc(1, sizeof(*t));

        if (!t)
                return NULL;
        t->w = userdata;
        t->client = debuginfod_begin();
        if (t->client) {
                debuginfod_set_user_data(t->client, t);
                debuginfod_set_progressfn(t->client, on_progress);
                /* libdebuginfod 0.188 writes "using max size" to its verbose descriptor when it is
                 * not 0, also when it is -1 (none), and glibc's dprintf() leaks its 8 KiB buffer
                 * on a bad descriptor: one leak per fetch. A valid descriptor that discards. */
                if (t->w->null_fd >= 0)
                        debuginfod_set_verbose_fd(t->client, t->w->null_fd);
        }
        return t;
}

static void thread_end(void *state)
{
        Thread *t = state;

        if (t)
                debuginfod_end(t->client);
        free(t);
}

static void run_fetch(void *arg, void *state)
{
        DebuginfodJob *job = arg;
        Thread *t = state;
        uint64_t start = now_ns(CLOCK_MONOTONIC);

        job->path = NULL;
        job->fd = -1;
        job->error = -ENOMEM;
        if (t && t->client) {
                t->deadline_ns = start + t->w->timeout_ns;
                t->timed_out = false;
                job->fd = debuginfod_find_debuginfo(t->client, job->build_id, (int)job->build_id_size,
                                                    &job->path);
                job->error = job->fd < 0 ? job->fd : 0;
                job->timed_out = t->timed_out;
        }
        job->duration_ns = now_ns(CLOCK_MONOTONIC) - start;
}

static void discard_fetch(void *arg)
{
        DebuginfodJob *job = arg;

        if (job->fd >= 0)
                close(job->fd);
        free(job->path);
}

static const WorkThreadsOps fetch_ops = {
        .thread_begin = thread_begin,
        .thread_end = thread_end,
        .run = run_fetch,
        .discard = discard_fetch,
};

int debuginfod_workers_new(uint64_t timeout_ns, DebuginfodWorkers **ret, int *ret_eventfd)
{
        DebuginfodWorkers *w = calloc(1, sizeof(*w));
        int r;

        if (!w)
                return -ENOMEM;
        w->timeout_ns = timeout_ns;
        w->null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC | O_NOCTTY);
        r = work_threads_new(DEBUGINFOD_WORKERS, DEBUGINFOD_QUEUE_MAX, sizeof(DebuginfodJob), &fetch_ops, w,
                             &w->threads, ret_eventfd);
        if (r < 0) {
                debuginfod_workers_free(w);
                return r;
        }
        *ret = w;
        return 0;
}

DebuginfodWorkers *debuginfod_workers_free(DebuginfodWorkers *w)
{
        if (!w)
                return NULL;
        work_threads_free(w->threads);
        if (w->null_fd >= 0)
                close(w->null_fd);
        return mfree(w);
}

int debuginfod_workers_submit(DebuginfodWorkers *w, const uint8_t *build_id, size_t size)
{
        DebuginfodJob job = {.build_id_size = size, .fd = -1};

        if (size == 0 || size > DEBUGINFOD_BUILD_ID_MAX)
                return -EINVAL;
        memcpy(job.build_id, build_id, size);
        return work_threads_submit(w->threads, &job);
}

size_t debuginfod_workers_take(DebuginfodWorkers *w, DebuginfodJob *ret, size_t max)
{
        return work_threads_take(w->threads, ret, max);
}

size_t debuginfod_workers_pending(DebuginfodWorkers *w)
{
        return work_threads_pending(w->threads);
}
