/* SPDX-License-Identifier: GPL-2.0-only */
/* Code made at run time in anonymous memory, as a JIT does: every 250 ms for argv[1] seconds a new
 * region is mapped (every other one RW then mprotect'ed RX, the others RWX at once) and a small
 * function written into it, with a frame-pointer prologue, that counts down in a loop; jit_caller()
 * calls it until the next region is due. The profiler learns of each region from the kernel after
 * it read the process: its samples there must unwind through jit_caller and main. */
#include <string.h>
#include <sys/mman.h>

#include "scenario.h"

#define REGION_BYTES (4 * 4096)
#define PERIOD_S 0.25

typedef uint64_t (*jit_fn)(uint64_t);

/* push %rbp; mov %rsp,%rbp; mov %rdi,%rax; 1: dec %rax; jnz 1b; pop %rbp; ret */
static const uint8_t code[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0x89, 0xf8, 0x48,
                               0xff, 0xc8, 0x75, 0xfb, 0x5d, 0xc3};

SCEN_NOINLINE uint64_t jit_caller(jit_fn f, uint64_t n)
{
        uint64_t r = f(n);
        SCEN_KEEP(r);
        return r + 1;
}

int main(int argc, char **argv)
{
        double end = scen_now() + (argc > 1 ? atof(argv[1]) : 10);

        for (unsigned i = 0; scen_now() < end; i++) {
                uint8_t *p;
                if (i % 2 == 0) {
                        p = mmap(NULL, REGION_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                        if (p == MAP_FAILED)
                                return 1;
                        memcpy(p + 64 * (i % 64), code, sizeof(code));
                        if (mprotect(p, REGION_BYTES, PROT_READ | PROT_EXEC) < 0)
                                return 1;
                } else {
                        p = mmap(NULL, REGION_BYTES, PROT_READ | PROT_WRITE | PROT_EXEC,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                        if (p == MAP_FAILED)
                                return 1;
                        memcpy(p + 64 * (i % 64), code, sizeof(code));
                }
                /* A guard page keeps the kernel from merging the next region into this one. */
                (void)mmap(p + REGION_BYTES, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                           -1, 0);
                double due = scen_now() + PERIOD_S;
                while (scen_now() < due)
                        jit_caller((jit_fn)(p + 64 * (i % 64)), 2000000);
        }
        return 0;
}
