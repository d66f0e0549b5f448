/* SPDX-License-Identifier: GPL-2.0-only */
/* libdebuginfod's threads (debuginfod-worker.h). The one place in profd that runs outside the
 * event loop: every slot of the job table is owned either by the loop (free, done) or by the
 * threads (queued, running), and changes hands under the mutex only. */
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "symbolizer/debuginfod-worker.h"
#include "util/macro.h"
#include "util/time-util.h"

typedef enum SlotState { SLOT_FREE, SLOT_QUEUED, SLOT_RUNNING, SLOT_DONE } SlotState;

typedef struct Slot {
        SlotState state;
        uint64_t seq; /* submission order: the oldest queued job runs first */
        DebuginfodJob job;
} Slot;

/* What a thread's progress callback needs: libdebuginfod calls it about once a second while a
 * transfer runs, also while nothing arrives, and aborts the transfer when it returns non-zero. */
typedef struct Thread {
        DebuginfodWorkers *w;
        pthread_t tid;
        bool started;
        uint64_t deadline_ns;
        bool timed_out;
} Thread;

struct DebuginfodWorkers {
        pthread_mutex_t lock;
        pthread_cond_t wake;
        bool stop;
        uint64_t timeout_ns, next_seq;
        int efd;
        int null_fd; /* libdebuginfod's verbose output, see worker_main() */
        Slot slots[DEBUGINFOD_QUEUE_MAX];
        Thread threads[DEBUGINFOD_WORKERS];
};

static int on_progress(debuginfod_client *c, long a, long b)
{
        Thread *t = debuginfod_get_user_data(c);
        bool stop;

        pthread_mutex_lock(&t->w->lock);
        stop = t->w->stop;
        pthread_mutex_unlock(&t->w->lock);
        if (stop)
                return 1;
        if (now_ns(CLOCK_MONOTONIC) > t->deadline_ns) {
                t->timed_out = true;
                return 1;
        }
        return 0;
}

static Slot *oldest_queued(DebuginfodWorkers *w)
{
        Slot *best = NULL;

        for (size_t i = 0; i < DEBUGINFOD_QUEUE_MAX; i++)
                if (w->slots[i].state == SLOT_QUEUED && (!best || w->slots[i].seq < best->seq))
                        best = &w->slots[i];
        return best;
}

static void *worker_main(void *arg)
{
        Thread *t = arg;
        DebuginfodWorkers *w = t->w;
        debuginfod_client *client = debuginfod_begin();

        if (client) {
                debuginfod_set_user_data(client, t);
                debuginfod_set_progressfn(client, on_progress);
                /* libdebuginfod 0.188 writes "using max size" to its verbose descriptor when it is
                 * not 0, also when it is -1 (none), and glibc's dprintf() leaks its 8 KiB buffer
                 * on a bad descriptor: one leak per fetch. A valid descriptor that discards. */
                if (w->null_fd >= 0)
                        debuginfod_set_verbose_fd(client, w->null_fd);
        }
        pthread_mutex_lock(&w->lock);
        for (;;) {
                Slot *s = NULL;
                DebuginfodJob job;
                uint64_t start;
                uint64_t one = 1;

                while (!w->stop && !(s = oldest_queued(w)))
                        pthread_cond_wait(&w->wake, &w->lock);
                if (w->stop)
                        break;
                s->state = SLOT_RUNNING;
                job = s->job;
                pthread_mutex_unlock(&w->lock);

                start = now_ns(CLOCK_MONOTONIC);
                t->deadline_ns = start + w->timeout_ns;
                t->timed_out = false;
                job.path = NULL;
                if (client) {
                        job.fd = debuginfod_find_debuginfo(client, job.build_id, (int)job.build_id_size,
                                                           &job.path);
                        job.error = job.fd < 0 ? job.fd : 0;
                } else {
                        job.fd = -1;
                        job.error = -ENOMEM;
                }
                job.timed_out = t->timed_out;
                job.duration_ns = now_ns(CLOCK_MONOTONIC) - start;

                pthread_mutex_lock(&w->lock);
                s->job = job;
                s->state = SLOT_DONE;
                /* The loop reads the counter and then takes every finished job. */
                (void)!write(w->efd, &one, sizeof(one));
        }
        pthread_mutex_unlock(&w->lock);
        debuginfod_end(client);
        return NULL;
}

int debuginfod_workers_new(uint64_t timeout_ns, DebuginfodWorkers **ret, int *ret_eventfd)
{
        DebuginfodWorkers *w = calloc(1, sizeof(*w));
        sigset_t all, old;
        int r = 0;

        if (!w)
                return -ENOMEM;
        w->timeout_ns = timeout_ns;
        w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->efd < 0) {
                free(w);
                return -errno;
        }
        w->null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC | O_NOCTTY);
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->wake, NULL);
        /* Signals stay the loop's (signalfd): the threads block all of them. */
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        for (size_t i = 0; i < DEBUGINFOD_WORKERS; i++) {
                w->threads[i].w = w;
                r = -pthread_create(&w->threads[i].tid, NULL, worker_main, &w->threads[i]);
                if (r < 0)
                        break;
                w->threads[i].started = true;
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0) {
                debuginfod_workers_free(w);
                return r;
        }
        *ret = w;
        *ret_eventfd = w->efd;
        return 0;
}

DebuginfodWorkers *debuginfod_workers_free(DebuginfodWorkers *w)
{
        if (!w)
                return NULL;
        pthread_mutex_lock(&w->lock);
        w->stop = true;
        pthread_cond_broadcast(&w->wake);
        pthread_mutex_unlock(&w->lock);
        for (size_t i = 0; i < DEBUGINFOD_WORKERS; i++)
                if (w->threads[i].started)
                        pthread_join(w->threads[i].tid, NULL);
        for (size_t i = 0; i < DEBUGINFOD_QUEUE_MAX; i++)
                if (w->slots[i].state == SLOT_DONE) {
                        if (w->slots[i].job.fd >= 0)
                                close(w->slots[i].job.fd);
                        free(w->slots[i].job.path);
                }
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
        close(w->efd);
        if (w->null_fd >= 0)
                close(w->null_fd);
        return mfree(w);
}

int debuginfod_workers_submit(DebuginfodWorkers *w, const uint8_t *build_id, size_t size)
{
        int r = -EAGAIN;

        if (size == 0 || size > DEBUGINFOD_BUILD_ID_MAX)
                return -EINVAL;
        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < DEBUGINFOD_QUEUE_MAX; i++)
                if (w->slots[i].state == SLOT_FREE) {
                        Slot *s = &w->slots[i];

                        *s = (Slot){.state = SLOT_QUEUED, .seq = w->next_seq++};
                        memcpy(s->job.build_id, build_id, size);
                        s->job.build_id_size = size;
                        s->job.fd = -1;
                        pthread_cond_signal(&w->wake);
                        r = 0;
                        break;
                }
        pthread_mutex_unlock(&w->lock);
        return r;
}

size_t debuginfod_workers_take(DebuginfodWorkers *w, DebuginfodJob *ret, size_t max)
{
        uint64_t v;
        size_t n = 0;

        (void)!read(w->efd, &v, sizeof(v));
        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < DEBUGINFOD_QUEUE_MAX && n < max; i++)
                if (w->slots[i].state == SLOT_DONE) {
                        ret[n++] = w->slots[i].job;
                        w->slots[i] = (Slot){};
                }
        /* Left for the next call: wake the loop again. */
        for (size_t i = 0; i < DEBUGINFOD_QUEUE_MAX; i++)
                if (w->slots[i].state == SLOT_DONE) {
                        uint64_t one = 1;
                        (void)!write(w->efd, &one, sizeof(one));
                        break;
                }
        pthread_mutex_unlock(&w->lock);
        return n;
}

size_t debuginfod_workers_pending(DebuginfodWorkers *w)
{
        size_t n = 0;

        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < DEBUGINFOD_QUEUE_MAX; i++)
                n += w->slots[i].state == SLOT_QUEUED || w->slots[i].state == SLOT_RUNNING;
        pthread_mutex_unlock(&w->lock);
        return n;
}
