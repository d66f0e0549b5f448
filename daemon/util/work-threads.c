/* SPDX-License-Identifier: GPL-2.0-only */
/* Jobs run by threads off the event loop (work-threads.h). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/macro.h"
#include "util/work-threads.h"

typedef enum SlotState { SLOT_FREE, SLOT_QUEUED, SLOT_RUNNING, SLOT_DONE } SlotState;

typedef struct Slot {
        SlotState state;
        uint64_t seq; /* submission order: the oldest queued job runs first */
} Slot;

typedef struct Thread {
        WorkThreads *w;
        pthread_t tid;
        bool started;
        void *job; /* the copy of the job it runs */
} Thread;

struct WorkThreads {
        pthread_mutex_t lock;
        pthread_cond_t wake;
        bool stop;
        int efd;
        uint64_t next_seq;
        const WorkThreadsOps *ops;
        void *userdata;
        size_t job_size, n_slots, n_threads;
        Slot *slots;
        uint8_t *jobs; /* n_slots jobs of job_size bytes */
        Thread *threads;
};

static void *job_at(WorkThreads *w, size_t i)
{
        return w->jobs + i * w->job_size;
}

static void wake_loop(WorkThreads *w)
{
        uint64_t one = 1;

        (void)!write(w->efd, &one, sizeof(one));
}

static Slot *oldest_queued(WorkThreads *w)
{
        Slot *best = NULL;

        for (size_t i = 0; i < w->n_slots; i++)
                if (w->slots[i].state == SLOT_QUEUED && (!best || w->slots[i].seq < best->seq))
                        best = &w->slots[i];
        return best;
}

static void *thread_main(void *arg)
{
        Thread *t = arg;
        WorkThreads *w = t->w;
        void *state = w->ops->thread_begin ? w->ops->thread_begin(w, w->userdata) : NULL;
        void *job = t->job;

        pthread_mutex_lock(&w->lock);
        for (;;) {
                Slot *s = NULL;

                while (!w->stop && !(s = oldest_queued(w)))
                        pthread_cond_wait(&w->wake, &w->lock);
                if (w->stop)
                        break;
                s->state = SLOT_RUNNING;
                memcpy(job, job_at(w, (size_t)(s - w->slots)), w->job_size);
                pthread_mutex_unlock(&w->lock);

                w->ops->run(job, state);

                pthread_mutex_lock(&w->lock);
                memcpy(job_at(w, (size_t)(s - w->slots)), job, w->job_size);
                s->state = SLOT_DONE;
                wake_loop(w);
        }
        pthread_mutex_unlock(&w->lock);
        if (w->ops->thread_end)
                w->ops->thread_end(state);
        return NULL;
}

int work_threads_new(size_t n_threads, size_t n_slots, size_t job_size, const WorkThreadsOps *ops,
                     void *userdata, WorkThreads **ret, int *ret_eventfd)
{
        WorkThreads *w;
        sigset_t all, old;
        int r = 0;

        if (n_threads == 0 || n_threads > WORK_THREADS_MAX || n_slots == 0 || n_slots > WORK_SLOTS_MAX ||
            job_size == 0 || !ops || !ops->run)
                return -EINVAL;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->ops = ops;
        w->userdata = userdata;
        w->job_size = job_size;
        w->n_slots = n_slots;
        w->n_threads = n_threads;
        w->slots = calloc(n_slots, sizeof(*w->slots));
        w->jobs = calloc(n_slots, job_size);
        w->threads = calloc(n_threads, sizeof(*w->threads));
        w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->efd < 0)
                r = -errno;
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->wake, NULL);
        if (!w->slots || !w->jobs || !w->threads)
                r = -ENOMEM;
        for (size_t i = 0; r == 0 && i < n_threads; i++)
                if (!(w->threads[i].job = malloc(job_size)))
                        r = -ENOMEM;
        if (r < 0) {
                work_threads_free(w);
                return r;
        }
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        for (size_t i = 0; i < n_threads; i++) {
                w->threads[i].w = w;
                r = -pthread_create(&w->threads[i].tid, NULL, thread_main, &w->threads[i]);
                if (r < 0)
                        break;
                w->threads[i].started = true;
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0) {
                work_threads_free(w);
                return r;
        }
        *ret = w;
        *ret_eventfd = w->efd;
        return 0;
}

WorkThreads *work_threads_free(WorkThreads *w)
{
        if (!w)
                return NULL;
        pthread_mutex_lock(&w->lock);
        w->stop = true;
        pthread_cond_broadcast(&w->wake);
        pthread_mutex_unlock(&w->lock);
        for (size_t i = 0; w->threads && i < w->n_threads; i++)
                if (w->threads[i].started)
                        pthread_join(w->threads[i].tid, NULL);
        for (size_t i = 0; w->slots && w->jobs && i < w->n_slots; i++)
                if (w->slots[i].state != SLOT_FREE && w->ops->discard)
                        w->ops->discard(job_at(w, i));
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
        if (w->efd >= 0)
                close(w->efd);
        for (size_t i = 0; w->threads && i < w->n_threads; i++)
                free(w->threads[i].job);
        free(w->slots);
        free(w->jobs);
        free(w->threads);
        return mfree(w);
}

int work_threads_submit(WorkThreads *w, const void *job)
{
        int r = -EAGAIN;

        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < w->n_slots; i++)
                if (w->slots[i].state == SLOT_FREE) {
                        w->slots[i] = (Slot){.state = SLOT_QUEUED, .seq = w->next_seq++};
                        memcpy(job_at(w, i), job, w->job_size);
                        pthread_cond_signal(&w->wake);
                        r = 0;
                        break;
                }
        pthread_mutex_unlock(&w->lock);
        return r;
}

size_t work_threads_take(WorkThreads *w, void *ret, size_t max)
{
        uint64_t v;
        size_t n = 0;
        bool left = false;

        (void)!read(w->efd, &v, sizeof(v));
        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < w->n_slots; i++) {
                if (w->slots[i].state != SLOT_DONE)
                        continue;
                if (n == max) {
                        left = true;
                        break;
                }
                memcpy((uint8_t *)ret + n++ * w->job_size, job_at(w, i), w->job_size);
                w->slots[i] = (Slot){};
        }
        if (left) /* for the next call: the loop wakes again */
                wake_loop(w);
        pthread_mutex_unlock(&w->lock);
        return n;
}

size_t work_threads_pending(WorkThreads *w)
{
        size_t n = 0;

        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < w->n_slots; i++)
                n += w->slots[i].state != SLOT_FREE;
        pthread_mutex_unlock(&w->lock);
        return n;
}

bool work_threads_find(WorkThreads *w, bool (*match)(const void *job, const void *arg), const void *arg)
{
        bool found = false;

        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < w->n_slots && !found; i++)
                found = w->slots[i].state != SLOT_FREE && match(job_at(w, i), arg);
        pthread_mutex_unlock(&w->lock);
        return found;
}

bool work_threads_stopping(WorkThreads *w)
{
        bool stop;

        pthread_mutex_lock(&w->lock);
        stop = w->stop;
        pthread_mutex_unlock(&w->lock);
        return stop;
}
