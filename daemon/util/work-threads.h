/* SPDX-License-Identifier: GPL-2.0-only */
/* Jobs run off the event loop, for work that blocks and cannot be split into steps: a download
 * (libdebuginfod is synchronous) or inflating a large compressed file. A fixed table of job slots
 * (each job_size bytes, copied in at submission and out when taken), a few threads that run the
 * oldest queued job with no lock held, and an eventfd the loop watches: readable when finished
 * jobs wait to be taken.
 *
 * A slot is owned by the loop (free) or by the threads (queued, running, finished until taken)
 * and changes hands under the mutex only. The threads touch nothing but their own job and state,
 * and block every signal: signals are the loop's (signalfd). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Bounds of one table, so that a caller's mistake cannot start hundreds of threads. */
#define WORK_THREADS_MAX 8
#define WORK_SLOTS_MAX 256

typedef struct WorkThreads WorkThreads;

typedef struct WorkThreadsOps {
        /* Optional: per-thread state, made in the thread before its first job. */
        void *(*thread_begin)(WorkThreads *w, void *userdata);
        void (*thread_end)(void *state);
        /* Runs one job on the thread's own copy of it (written back when it returns). */
        void (*run)(void *job, void *state);
        /* Optional: releases what a job holds that is never taken (freed with the table while
         * queued or finished). */
        void (*discard)(void *job);
} WorkThreadsOps;

/* Starts n_threads threads over n_slots slots; the caller watches *ret_eventfd and calls
 * work_threads_take() when it is readable. ops and userdata must outlive the table. */
int work_threads_new(size_t n_threads, size_t n_slots, size_t job_size, const WorkThreadsOps *ops,
                     void *userdata, WorkThreads **ret, int *ret_eventfd);
/* Stops the threads (each finishes the job it runs first), discards the jobs left, frees all. */
WorkThreads *work_threads_free(WorkThreads *w);
/* Queues a copy of job; -EAGAIN when every slot is taken. */
int work_threads_submit(WorkThreads *w, const void *job);
/* Moves up to max finished jobs into ret (an array of job_size elements); returns how many. The
 * eventfd stays readable while more are left. */
size_t work_threads_take(WorkThreads *w, void *ret, size_t max);
/* Jobs queued, running or finished and not taken. */
size_t work_threads_pending(WorkThreads *w);
/* Whether a job queued, running or finished and not taken matches (match is called under the
 * lock, with a job's copy as submitted or finished). */
bool work_threads_find(WorkThreads *w, bool (*match)(const void *job, const void *arg), const void *arg);
/* For a running job that can give up early: whether the table is being freed. */
bool work_threads_stopping(WorkThreads *w);
