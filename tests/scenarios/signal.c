/* SPDX-License-Identifier: GPL-2.0-only */
/* A SIGALRM handler (setitimer, every 20 ms) interrupting a computation. The handler burns ~14 ms
 * of each period, so most samples are taken inside it and must unwind through the kernel's signal
 * frame (__restore_rt, rt_sigframe) into the interrupted computation:
 *   main -> sig_compute -> sig_compute_leaf -> [signal frame] -> sig_handler -> sig_handler_leaf
 *   main -> sig_compute -> sig_compute_leaf                     (between signals) */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "scenario.h"

#define SIG_PERIOD_US 20000
/* Handler work per signal: well under the period, or a handler that is still running when the
 * next signal is due would be re-entered at once and starve the computation. */
#define SIG_HANDLER_SECONDS 0.014

static volatile sig_atomic_t sig_stop;
static volatile uint64_t sig_sink;

SCEN_NOINLINE uint64_t sig_handler_leaf(uint64_t seed)
{
        volatile uint64_t scratch[4];
        uint64_t acc = seed;

        SCEN_BURN(acc, SCEN_SLICE_ITERATIONS / 4);
        scratch[acc & 3] = acc;
        return acc + scratch[acc & 3];
}

SCEN_NOINLINE void sig_handler(int sig)
{
        /* clock_gettime and setitimer are async-signal-safe */
        double until = scen_now() + SIG_HANDLER_SECONDS;
        uint64_t acc = sig_sink + (uint64_t)sig;

        do
                acc = sig_handler_leaf(acc);
        while (scen_now() < until);
        sig_sink = acc;
        if (scen_expired()) {
                struct itimerval off = {};
                setitimer(ITIMER_REAL, &off, NULL);
                sig_stop = 1;
        }
}

/* Never returns to sig_compute until the run ends: the interrupted frame is always this one. */
SCEN_NOINLINE uint64_t sig_compute_leaf(uint64_t seed)
{
        uint64_t acc = seed;

        while (!sig_stop)
                SCEN_BURN(acc, 1u << 12);
        return acc;
}

SCEN_NOINLINE uint64_t sig_compute(uint64_t x)
{
        uint64_t r = sig_compute_leaf(x);
        SCEN_KEEP(r);
        return r + 1;
}

int main(int argc, char **argv)
{
        struct sigaction sa;
        struct itimerval it = {
                .it_interval = {.tv_usec = SIG_PERIOD_US},
                .it_value = {.tv_usec = SIG_PERIOD_US},
        };
        uint64_t r;

        scen_init(argc, argv);
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = sig_handler;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGALRM, &sa, NULL) < 0 || setitimer(ITIMER_REAL, &it, NULL) < 0) {
                perror("sigaction/setitimer");
                return 1;
        }
        r = sig_compute(9);
        printf("%llu\n", (unsigned long long)((r ^ sig_sink) & 1));
        return 0;
}
