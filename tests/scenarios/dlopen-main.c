/* SPDX-License-Identifier: GPL-2.0-only */
/* A library loaded with dlopen while the profiler already runs: the program first sleeps
 * (argv[3] ms), so the module's code appears in the process only later, then burns in it:
 *   main -> dl_run -> (dlsym) [module] dl_module_entry -> dl_module_mid -> dl_module_leaf
 * Usage: scen-dlopen SECONDS MODULE_PATH DELAY_MS   (SECONDS counts from after the dlopen)
 * With SCEN_WAIT_GO=1 the delay is a line on stdin instead, and another line starts the burn. */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

#include "scenario.h"

typedef uint64_t (*dl_entry_fn)(uint64_t);

SCEN_NOINLINE uint64_t dl_run(dl_entry_fn entry, uint64_t x)
{
        uint64_t r = entry(x);
        SCEN_KEEP(r);
        return r + 1;
}

int main(int argc, char **argv)
{
        uint64_t acc = 1;
        void *module;
        dl_entry_fn entry;

        if (argc < 3) {
                fprintf(stderr, "usage: %s SECONDS MODULE_PATH [DELAY_MS]\n", argv[0]);
                return 2;
        }
        if (getenv("SCEN_WAIT_GO"))
                scen_wait_go();
        else
                usleep((useconds_t)(argc > 3 ? atoi(argv[3]) : 1000) * 1000);
        module = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
        if (!module) {
                fprintf(stderr, "dlopen: %s\n", dlerror());
                return 1;
        }
        entry = (dl_entry_fn)dlsym(module, "dl_module_entry");
        if (!entry) {
                fprintf(stderr, "dlsym: %s\n", dlerror());
                return 1;
        }
        scen_init(argc, argv);
        while (!scen_expired())
                acc = dl_run(entry, acc);
        printf("%llu\n", (unsigned long long)(acc & 1));
        return 0;
}
