/* SPDX-License-Identifier: GPL-2.0-only */
/* A service-like load for bench/offcpu-cost.py: client threads send requests over socketpairs to
 * worker threads; each request costs ~20 us of CPU, one in eight also waits 1 ms (a backend call),
 * and replies. Prints requests per second of wall time.
 *
 *   service-load SECONDS [PAIRS] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static atomic_ulong done;
static volatile int stop;
static volatile unsigned long sink;

static void nap(long ns)
{
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
}

__attribute__((noinline)) static void handle(unsigned long req)
{
        for (int i = 0; i < 4000; i++) /* ~20 us */
                sink += (req ^ (unsigned long)i) * 2654435761u;
        if ((req & 7) == 0)
                nap(1000 * 1000L);
}

static void *worker(void *arg)
{
        int fd = *(int *)arg;
        unsigned long req;

        while (read(fd, &req, sizeof(req)) == (ssize_t)sizeof(req)) {
                handle(req);
                if (write(fd, &req, sizeof(req)) != (ssize_t)sizeof(req))
                        break;
        }
        return NULL;
}

static void *client(void *arg)
{
        int fd = *(int *)arg;
        unsigned long req = (unsigned long)fd * 7919;

        while (!stop) {
                req++;
                if (write(fd, &req, sizeof(req)) != (ssize_t)sizeof(req) ||
                    read(fd, &req, sizeof(req)) != (ssize_t)sizeof(req))
                        break;
                atomic_fetch_add(&done, 1);
        }
        shutdown(fd, SHUT_WR);
        return NULL;
}

int main(int argc, char **argv)
{
        double seconds = argc > 1 ? atof(argv[1]) : 5;
        int pairs = argc > 2 ? atoi(argv[2]) : 8;
        pthread_t *t = calloc(2 * pairs, sizeof(pthread_t));
        int(*fds)[2] = calloc(pairs, sizeof(*fds));
        struct timespec a, b;

        if (!t || !fds)
                return 1;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int i = 0; i < pairs; i++) {
                if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds[i]) < 0)
                        return 1;
                pthread_create(&t[2 * i], NULL, worker, &fds[i][1]);
                pthread_create(&t[2 * i + 1], NULL, client, &fds[i][0]);
        }
        usleep((useconds_t)(seconds * 1e6));
        stop = 1;
        clock_gettime(CLOCK_MONOTONIC, &b);
        for (int i = 0; i < pairs; i++)
                pthread_join(t[2 * i + 1], NULL);
        double wall = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
        printf("requests %lu wall %.3f per_second %.1f\n", (unsigned long)atomic_load(&done), wall,
               (double)atomic_load(&done) / wall);
        return 0;
}
