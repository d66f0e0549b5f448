/* SPDX-License-Identifier: GPL-2.0-only */
/* The DWARF unwinder on real processes: this program is built -O2 -fomit-frame-pointer, so only
 * .eh_frame can unwind it. Children recurse 20, 100, 300 and 600 deep and burn CPU in a leaf; the
 * parent builds the unwind tables of every executable mapping (this program, libc, ld.so),
 * places them in the BPF table pool, registers the children's mappings, and checks the sampled
 * stacks: complete down to _start with the exact recursion depth, or for 600 (deeper than
 * PROFD_MAX_USER_FRAMES) truncated and flagged as such. Also prints BPF ns per sample per
 * depth (kernel.bpf_stats_enabled through BPF_ENABLE_STATS). */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "sampler/kernel-features.h"
#include "sampler/sampler.h"
#include "unwind-tables/unwind-table.h"
#include "unwind/table-pool.h"

#define FREQ_HZ 499
#define PHASE_USEC (1500 * 1000)

static volatile uint64_t sink;
static volatile bool leaf_stop;

/* Returns in theory (leaf_stop), so gcc keeps it a real call with a frame of recurse(0) above. */
__attribute__((noinline)) static void leaf(void)
{
        while (!leaf_stop)
                for (int i = 0; i < 1000; i++)
                        sink = sink * 31 + i;
}

/* MODE_NOCFI: leaf() called from assembly without CFI, with a frame pointer: the unwinder has
 * no row there and must step it with the frame pointer. */
void nocfi_call_leaf(void);
#if defined(__aarch64__)
__asm__(".text\n"
        ".globl nocfi_call_leaf\n"
        ".type nocfi_call_leaf, @function\n"
        "nocfi_call_leaf:\n"
        "        stp x29, x30, [sp, #-16]!\n"
        "        mov x29, sp\n"
        "        bl leaf_for_asm\n"
        "        ldp x29, x30, [sp], #16\n"
        "        ret\n"
        ".size nocfi_call_leaf, .-nocfi_call_leaf\n");
#else
__asm__(".text\n"
        ".globl nocfi_call_leaf\n"
        ".type nocfi_call_leaf, @function\n"
        "nocfi_call_leaf:\n"
        "        push %rbp\n"
        "        mov %rsp, %rbp\n"
        "        call leaf_for_asm\n"
        "        pop %rbp\n"
        "        ret\n"
        ".size nocfi_call_leaf, .-nocfi_call_leaf\n");
#endif

__attribute__((noinline, used)) void leaf_for_asm(void)
{
        leaf();
}

static bool use_nocfi;

/* The volatile local and the use of the result keep gcc from turning this into a loop. */
__attribute__((noinline)) static int recurse(int n)
{
        volatile int x = n;
        int r;

        if (n == 0) {
                if (use_nocfi)
                        nocfi_call_leaf();
                else
                        leaf();
                return 0;
        }
        r = recurse(n - 1);
        return r + x;
}

/* MODE_SIGNAL: a SIGALRM handler burning CPU on top of recurse()/leaf(). */
static volatile uint64_t handler_sink;

__attribute__((noinline)) static void handler_leaf(void)
{
        for (int i = 0; i < 1000000; i++)
                handler_sink = handler_sink * 31 + i;
}

static void on_alarm(int sig)
{
        handler_leaf();
}

static void arm_alarm(void)
{
        struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};
        struct itimerval it = {.it_interval = {0, 4000}, .it_value = {0, 4000}};

        sigaction(SIGALRM, &sa, NULL);
        setitimer(ITIMER_REAL, &it, NULL);
}

/* labs() from libc through this executable's PLT (the test is built with -fno-builtin): samples
 * land in the PLT stub, whose unwind rule is the PLT expression, and in libc. */
__attribute__((noinline)) static void plt_loop(void)
{
        long acc = 1; /* in a register: a volatile would take all samples with its store/load */

        while (!leaf_stop)
                acc += labs(acc - 5);
        sink = acc;
}

typedef struct Range {
        uint64_t lo, hi;
} Range;

static bool in_range(const Range *r, uint64_t pc)
{
        return pc >= r->lo && pc < r->hi;
}

/* Runtime address range of a symbol of this executable. */
static int symbol_range(const char *name, uint64_t bias, Range *ret)
{
        Elf_Scn *scn = NULL;
        int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC), r = -ENOENT;
        Elf *e;

        if (fd < 0)
                return -errno;
        e = elf_begin(fd, ELF_C_READ, NULL);
        while (e && (scn = elf_nextscn(e, scn))) {
                GElf_Shdr sh;
                Elf_Data *d;

                if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !(d = elf_getdata(scn, NULL)))
                        continue;
                for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
                        GElf_Sym sym;
                        const char *n;

                        if (!gelf_getsym(d, i, &sym) || !(n = elf_strptr(e, sh.sh_link, sym.st_name)))
                                continue;
                        if (strcmp(n, name) == 0 && sym.st_size > 0) {
                                ret->lo = bias + sym.st_value;
                                ret->hi = ret->lo + sym.st_size;
                                r = 0;
                        }
                }
        }
        elf_end(e);
        close(fd);
        return r;
}

/* Runtime address range of a section of this executable. */
static int section_range(const char *name, uint64_t bias, Range *ret)
{
        int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC), r = -ENOENT;
        Elf_Scn *scn = NULL;
        size_t shstrndx;
        Elf *e;

        if (fd < 0)
                return -errno;
        e = elf_begin(fd, ELF_C_READ, NULL);
        if (e && elf_getshdrstrndx(e, &shstrndx) == 0)
                while ((scn = elf_nextscn(e, scn))) {
                        GElf_Shdr sh;
                        const char *n;

                        if (gelf_getshdr(scn, &sh) && (n = elf_strptr(e, shstrndx, sh.sh_name)) &&
                            strcmp(n, name) == 0) {
                                ret->lo = bias + sh.sh_addr;
                                ret->hi = ret->lo + sh.sh_size;
                                r = 0;
                        }
                }
        elf_end(e);
        close(fd);
        return r;
}

/* runtime - ELF vaddr for the file mapping [start, ...) at file offset off. */
static int elf_load_bias(const char *path, uint64_t start, uint64_t off, uint64_t *ret)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC), r = -ENOENT;
        size_t n;
        Elf *e;

        if (fd < 0)
                return -errno;
        e = elf_begin(fd, ELF_C_READ, NULL);
        if (e && elf_getphdrnum(e, &n) == 0)
                for (size_t i = 0; i < n; i++) {
                        GElf_Phdr ph;

                        if (!gelf_getphdr(e, i, &ph) || ph.p_type != PT_LOAD)
                                continue;
                        if ((ph.p_offset & ~0xfffULL) <= off && off < ph.p_offset + ph.p_filesz) {
                                *ret = start - (ph.p_vaddr + off - ph.p_offset);
                                r = 0;
                                break;
                        }
                }
        elf_end(e);
        close(fd);
        return r;
}

typedef struct Exe {
        char path[512];
        PoolTable *table;
} Exe;

static Exe exes[32];
static size_t n_exes;

static PoolTable *table_for(TablePool *pool, const char *path)
{
        UnwindTable *t = NULL;
        char *err = NULL;
        int r;

        for (size_t i = 0; i < n_exes; i++)
                if (strcmp(exes[i].path, path) == 0)
                        return exes[i].table;
        if (n_exes >= ELEMENTSOF(exes))
                return NULL;
        snprintf(exes[n_exes].path, sizeof(exes[n_exes].path), "%s", path);
        r = unwind_table_build_path(path, NULL, &t, &err);
        if (r < 0) {
                fprintf(stderr, "no unwind table for %s: %s\n", path, err ? err : strerror(-r));
                free(err);
        } else {
                r = table_pool_acquire(pool, t, &exes[n_exes].table);
                if (r < 0)
                        fprintf(stderr, "table_pool_acquire %s: %s\n", path, strerror(-r));
                else
                        printf("table %s: %" PRIu32 " rows, %" PRIu32 " pages, %zu bytes\n", path, t->n_rows,
                               t->n_pages, unwind_table_bytes(t));
                unwind_table_free(t);
        }
        return exes[n_exes++].table;
}

/* Registers the executable mappings of pid with the pool, the way the process tracker does.
 * pending: this executable's table is "still being built" (NULL, table_pending). */
static int register_process(TablePool *pool, pid_t pid, bool pending)
{
        char self[512];
        ssize_t ls = readlink("/proc/self/exe", self, sizeof(self) - 1);

        self[ls > 0 ? ls : 0] = 0;
        PoolMapping m[64];
        size_t n = 0;
        char fn[64], line[1024];
        FILE *f;

        snprintf(fn, sizeof(fn), "/proc/%d/maps", pid);
        f = fopen(fn, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f) && n < ELEMENTSOF(m)) {
                uint64_t a, b, off, bias = 0;
                char perms[8], *path = strchr(line, '/');

                if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64, &a, &b, perms, &off) != 4 ||
                    perms[2] != 'x')
                        continue;
                m[n] = (PoolMapping){.start = a, .end = b};
                if (path) {
                        path[strcspn(path, "\n")] = 0;
                        if (elf_load_bias(path, a, off, &bias) == 0) {
                                m[n].load_bias = bias;
                                if (pending && strcmp(path, self) == 0)
                                        m[n].table_pending = true;
                                else
                                        m[n].table = table_for(pool, path);
                        }
                }
                n++;
        }
        fclose(f);

        /* PROFD_BENCH_FAKE_PROCS=N: N more (non-existent) pids with the same mappings, so the
         * mapping trie is as full as on a busy host. Benchmark knob only. */
        const char *fake = getenv("PROFD_BENCH_FAKE_PROCS");
        for (int i = 0; fake && i < atoi(fake); i++)
                (void)table_pool_set_process(pool, 4000000 + pid * 1000 + i, m, n);

        struct timespec t0, t1;
        int r;

        clock_gettime(CLOCK_MONOTONIC, &t0);
        r = table_pool_set_process(pool, pid, m, n);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("set_process pid %d: %zu mappings in %.0f us\n", pid, n,
               (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3);
        return r;
}

/* How a child is made known to the unwinder. */
enum {
        MODE_TABLES,  /* mappings with their tables */
        MODE_PENDING, /* this executable's table not placed yet */
        MODE_UNKNOWN, /* never registered */
        MODE_EXEC,    /* registered, then execs this program again: old mappings must not be used */
        MODE_SIGNAL,  /* a signal handler on top: exact pcs through the signal frame */
        MODE_NOCFI,   /* a frame without CFI on the way: frame-pointer step there */
};

typedef struct Child {
        int depth;
        int mode;
        pid_t pid;
        int go_fd;
        uint64_t delta; /* address shift of the exec'd image against ours */
        bool plt;
        uint64_t samples, in_leaf, complete, truncated, dwarf, wrong, in_plt;
        uint64_t exec_complete, exec_wrong; /* MODE_EXEC, once registered again */
        bool stale_refused;
        uint64_t sig_ok, sig_bad; /* MODE_SIGNAL: samples in the handler, exact flags right or not */
        uint64_t stops[PROFD_STOP__MAX];
        bool printed;
} Child;

static Child children[] = {
        {.depth = 20},
        {.depth = 100},
        {.depth = 300},
        {.depth = 600},
#ifndef PROFD_BENCH_FP
        {.plt = true},
        {.depth = 20, .mode = MODE_PENDING},
        {.depth = 20, .mode = MODE_UNKNOWN},
        {.depth = 20, .mode = MODE_EXEC},
        {.depth = 5, .mode = MODE_SIGNAL},
        {.depth = 10, .mode = MODE_NOCFI},
#endif
};
static Range r_leaf, r_recurse, r_start, r_plt_loop, r_plt[2], r_handler_leaf;
static uint64_t restorer; /* libc's __restore_rt, the handlers' return address */
static Range r_nocfi, r_leaf_for_asm;

static const char *child_name(const Child *c)
{
        static char buf[4][64];
        static unsigned n;
        char *b = buf[n++ % 4];

        if (c->plt)
                return "plt";
        snprintf(b, sizeof(buf[0]), "depth %d%s", c->depth,
                 c->mode == MODE_PENDING   ? " table pending"
                 : c->mode == MODE_UNKNOWN ? " unknown pid"
                 : c->mode == MODE_EXEC    ? " after exec"
                 : c->mode == MODE_SIGNAL  ? " signal handler"
                 : c->mode == MODE_NOCFI   ? " through code without CFI"
                                           : "");
        return b;
}

static void check_plt_record(Child *c, const SampleRecord *r)
{
        uint32_t stop = r->user_flags & PROFD_STACK_REASON_MASK;
        bool in_loop = false;

        c->samples += r->count;
        for (uint32_t i = 0; i < r->n_user && i < 2; i++)
                in_loop = in_loop || in_range(&r_plt_loop, r->user_frames[i]);
        /* A sample in the stub whose unwinding failed would not show plt_loop: count it too. */
        in_loop = in_loop || (r->n_user > 0 && (in_range(&r_plt[0], r->user_frames[0]) ||
                                                in_range(&r_plt[1], r->user_frames[0])));
        if (!in_loop)
                return; /* startup */
        c->in_leaf += r->count;
        if (stop < PROFD_STOP__MAX)
                c->stops[stop] += r->count;
        if (in_range(&r_plt[0], r->user_frames[0]) || in_range(&r_plt[1], r->user_frames[0]))
                c->in_plt += r->count;
        if (getenv("PROFD_TEST_DEBUG"))
                printf("plt sample: %" PRIx64 " %" PRIx64 " n %u count %" PRIu64 "\n", r->user_frames[0],
                       r->n_user > 1 ? r->user_frames[1] : 0, r->n_user, r->count);
        if (stop == PROFD_STOP_OK && in_range(&r_start, r->user_frames[r->n_user - 1]))
                c->complete += r->count;
        else
                c->wrong += r->count;
}

/* Children the unwinder cannot know (yet): every sample must say so, whatever frames it has.
 * A frame-pointer walk through code without frame pointers often "ends" after one frame. */
static void check_unverified_record(Child *c, const SampleRecord *r)
{
        uint32_t stop = r->user_flags & PROFD_STACK_REASON_MASK;
        uint32_t want = c->mode == MODE_PENDING ? PROFD_STOP_TABLE_PENDING : PROFD_STOP_UNKNOWN_PID;

        c->samples += r->count;
        if (c->mode == MODE_PENDING && (r->n_user == 0 || !in_range(&r_leaf, r->user_frames[0])))
                return;
        c->in_leaf += r->count;
        if (stop < PROFD_STOP__MAX)
                c->stops[stop] += r->count;
        /* pending: the leaf is in the executable, so the stack stops right there */
        if (stop == want && (c->mode != MODE_PENDING || r->n_user == 1))
                c->complete += r->count;
        else
                c->wrong += r->count;
        if (!c->printed && stop != want) {
                c->printed = true;
                printf("%s: %u frames, flags %#x, first %#" PRIx64 "\n", child_name(c), r->n_user,
                       r->user_flags, r->n_user ? r->user_frames[0] : 0);
        }
}

static bool in_range_d(const Range *r, uint64_t pc, uint64_t delta)
{
        return pc - delta >= r->lo && pc - delta < r->hi;
}

static void check_record(Child *c, const SampleRecord *r)
{
        uint32_t n_rec = 0, stop = r->user_flags & PROFD_STACK_REASON_MASK;
        bool truncated = r->user_flags & PROFD_STACK_TRUNCATED;

        if (c->plt) {
                check_plt_record(c, r);
                return;
        }
        if (c->mode == MODE_PENDING || c->mode == MODE_UNKNOWN || (c->mode == MODE_EXEC && !c->delta)) {
                check_unverified_record(c, r);
                return;
        }
        if (c->mode == MODE_SIGNAL && r->n_user > 0 && in_range(&r_handler_leaf, r->user_frames[0])) {
                /* handler_leaf, on_alarm (unless it tail-called), __restore_rt (exact: symbolized as is),
                 * the interrupted pc (exact), its callers (return addresses), down to _start. */
                bool ok = stop == PROFD_STOP_OK && in_range(&r_start, r->user_frames[r->n_user - 1]) &&
                          r->user_exact;
                uint32_t t = 0;

                for (uint32_t i = 1; i < r->n_user; i++)
                        if (r->user_frames[i] == restorer)
                                t = i;
                ok = ok && t >= 1 && t + 1 < r->n_user;
                for (uint32_t i = 0; ok && i < r->n_user; i++)
                        ok = !!r->user_exact[i] == (i == 0 || i == t || i == t + 1);
                if (ok)
                        c->sig_ok += r->count;
                else
                        c->sig_bad += r->count;
                if (!ok && !c->printed) {
                        c->printed = true;
                        printf("signal: %u frames, flags %#x, trampoline at %u, exact:", r->n_user,
                               r->user_flags, t);
                        for (uint32_t i = 0; i < r->n_user && r->user_exact; i++)
                                printf(" %u", r->user_exact[i]);
                        printf("\n");
                }
                return;
        }
        if (c->mode == MODE_EXEC) {
                /* Re-registered after the exec: complete stacks in the new image. Samples taken
                 * before that may still be drained now: unverified, they say so. */
                if (stop == PROFD_STOP_UNKNOWN_PID)
                        return;
                if (r->n_user == 0 || !in_range_d(&r_leaf, r->user_frames[0], c->delta))
                        return;
                for (uint32_t i = 1; i < r->n_user; i++)
                        if (in_range_d(&r_recurse, r->user_frames[i], c->delta))
                                n_rec++;
                if (stop == PROFD_STOP_OK && n_rec == (uint32_t)c->depth + 1 &&
                    in_range_d(&r_start, r->user_frames[r->n_user - 1], c->delta))
                        c->exec_complete += r->count;
                else
                        c->exec_wrong += r->count;
                return;
        }
        c->samples += r->count;
        if (r->n_user == 0 || !in_range(&r_leaf, r->user_frames[0]))
                return; /* not yet burning: startup, pipe read */
        c->in_leaf += r->count;
        if (stop < PROFD_STOP__MAX)
                c->stops[stop] += r->count;
        if (r->user_flags & PROFD_STACK_DWARF)
                c->dwarf += r->count;
        for (uint32_t i = 1; i < r->n_user; i++)
                if (in_range(&r_recurse, r->user_frames[i]))
                        n_rec++;
        if (c->depth + 1 + 8 > PROFD_MAX_USER_FRAMES) {
                if (truncated && r->n_user == PROFD_MAX_USER_FRAMES && stop == PROFD_STOP_DEPTH &&
                    n_rec == PROFD_MAX_USER_FRAMES - 1)
                        c->truncated += r->count;
                else
                        c->wrong += r->count;
#ifdef PROFD_BENCH_FP
        } else if (n_rec >= (uint32_t)c->depth) {
                /* Frame pointers: the frameless leaf hides recurse(0); libc ends the chain. */
                c->complete += r->count;
#endif
        } else if (c->mode == MODE_NOCFI &&
                   (r->n_user < 4 || !(in_range(&r_nocfi, r->user_frames[1]) ||
                                       (in_range(&r_leaf_for_asm, r->user_frames[1]) &&
                                        in_range(&r_nocfi, r->user_frames[2]))))) {
                /* leaf, leaf_for_asm (unless it tail-called), nocfi_call_leaf, recurse... */
                c->wrong += r->count;
        } else if (stop == PROFD_STOP_OK && !truncated && n_rec == (uint32_t)c->depth + 1 &&
                   in_range(&r_start, r->user_frames[r->n_user - 1])) {
                c->complete += r->count;
        } else {
                c->wrong += r->count;
        }
        if (!c->printed && (c->depth < 100 || c->wrong)) {
                c->printed = true;
                printf("depth %d: %u frames, flags %#x, recurse frames %u, last %#" PRIx64 "\n", c->depth,
                       r->n_user, r->user_flags, n_rec, r->user_frames[r->n_user - 1]);
        }
}

/* Samples in the records handed over by the drains. */
static uint64_t records_total;

static void on_interval(void *userdata, uint64_t start_ns, uint64_t end_ns, const SampleRecord *records,
                        size_t n)
{
        for (size_t i = 0; i < n; i++)
                records_total += records[i].count;
        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < ELEMENTSOF(children); k++)
                        if ((pid_t)records[i].pid == children[k].pid)
                                check_record(&children[k], &records[i]);
}

static pid_t spawn(Child *c)
{
        int p[2];
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -1;
        pid = fork();
        if (pid == 0) {
                char b;

                close(p[1]);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (read(p[0], &b, 1) != 1)
                        _exit(2);
                if (c->mode == MODE_EXEC) {
                        char depth[16];

                        snprintf(depth, sizeof(depth), "%d", c->depth);
                        execl("/proc/self/exe", "test-unwinder", "--recurse", depth, (char *)NULL);
                        _exit(3);
                }
                if (c->mode == MODE_SIGNAL)
                        arm_alarm();
                use_nocfi = c->mode == MODE_NOCFI;
                if (c->plt)
                        plt_loop();
                else
                        recurse(c->depth);
                _exit(0);
        }
        close(p[0]);
        c->go_fd = p[1];
        return pid;
}

static int on_phase_end(sd_event_source *s, uint64_t usec, void *userdata)
{
        *(bool *)userdata = true;
        return 0;
}

/* sd_event_exit() would end the loop for good: phases use a flag instead. */
static void run_loop(sd_event *e, uint64_t usec)
{
        bool done = false;

        sd_event_add_time_relative(e, NULL, CLOCK_MONOTONIC, usec, 0, on_phase_end, &done);
        while (!done)
                if (sd_event_run(e, UINT64_MAX) < 0)
                        break;
}

/* Start address of the first mapping of this program's file in pid (0: none). */
static uint64_t exe_base(pid_t pid)
{
        char fn[64], line[1024], self[512];
        ssize_t ls = readlink("/proc/self/exe", self, sizeof(self) - 1);
        uint64_t base = 0;
        FILE *f;

        if (ls <= 0)
                return 0;
        self[ls] = 0;
        snprintf(fn, sizeof(fn), "/proc/%d/maps", pid);
        f = fopen(fn, "re");
        if (!f)
                return 0;
        while (!base && fgets(line, sizeof(line), f)) {
                char *path = strchr(line, '/');

                if (path) {
                        path[strcspn(path, "\n")] = 0;
                        if (strcmp(path, self) == 0)
                                (void)sscanf(line, "%" SCNx64, &base);
                }
        }
        fclose(f);
        return base;
}

/* The MODE_EXEC child has exec'd: its pre-exec mappings must be refused, fresh ones accepted. */
static void run_exec_followup(sd_event *e, TablePool *pool, Child *c)
{
        uint64_t base = exe_base(c->pid), ours = exe_base(getpid());
        int r;

        run_loop(e, 300 * 1000); /* let the drains hand over the unverified samples first */
        /* A snapshot taken before the exec (right after boot: certainly before; "an hour ago"
         * wrapped around on a machine up for less than an hour). */
        r = table_pool_set_process_at(pool, c->pid, 1, NULL, 0);
        c->stale_refused = r == -ESTALE;
        if (!base || !ours || register_process(pool, c->pid, false) < 0)
                return;
        c->delta = base - ours;
        if (!c->delta)
                c->delta = 1; /* no ASLR: the ranges are ours, in_range_d() is off by one byte */
        run_loop(e, PHASE_USEC);
}

typedef struct ProgStats {
        uint64_t run_time_ns, run_cnt;
} ProgStats;

static void prog_stats(Sampler *s, ProgStats *ret)
{
        struct bpf_program *prog = bpf_object__find_program_by_name(sampler_bpf_object(s), "profd_sample");
        struct bpf_prog_info info = {};
        uint32_t len = sizeof(info);

        *ret = (ProgStats){};
        if (prog && bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) == 0) {
                ret->run_time_ns = info.run_time_ns;
                ret->run_cnt = info.run_cnt;
        }
}

static uint64_t counter(Sampler *s, unsigned idx)
{
        struct bpf_map *m = bpf_object__find_map_by_name(sampler_bpf_object(s), "counters");
        int n = libbpf_num_possible_cpus();
        uint64_t v[n > 0 ? n : 1], sum = 0;

        if (!m || n <= 0 || bpf_map_lookup_elem(bpf_map__fd(m), &idx, v) < 0)
                return 0;
        for (int i = 0; i < n; i++)
                sum += v[i];
        return sum;
}

int main(int argc, char **argv)
{
        _cleanup_(sampler_freep) Sampler *s = NULL;
        _cleanup_(table_pool_freep) TablePool *pool = NULL;
        SamplerOptions o = {
                .frequency_hz = FREQ_HZ, .drain_interval_ns = 250 * 1000 * 1000ULL, .measure_cost = true};
        sd_event *e = NULL;
        int r, failures = 0, stats_fd;
        uint64_t bias = 0;

        if (argc == 3 && strcmp(argv[1], "--recurse") == 0) {
                /* MODE_EXEC child after its exec */
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                recurse(atoi(argv[2]));
                return 0;
        }
        if (geteuid() != 0) {
                fprintf(stderr, "SKIP: test-unwinder needs root to load BPF programs\n");
                return 77;
        }
        elf_version(EV_CURRENT);
        if (symbol_range("recurse", 0, &r_recurse) < 0) {
                fprintf(stderr, "FAIL: symbol recurse not found in the test executable\n");
                return 1;
        }
        bias = (uint64_t)(uintptr_t)recurse - r_recurse.lo; /* PIE or not */
        if (symbol_range("leaf", bias, &r_leaf) < 0 || symbol_range("recurse", bias, &r_recurse) < 0 ||
            symbol_range("_start", bias, &r_start) < 0 || symbol_range("plt_loop", bias, &r_plt_loop) < 0) {
                fprintf(stderr, "FAIL: symbols leaf/recurse/_start not found in the test executable\n");
                return 1;
        }
        if (symbol_range("nocfi_call_leaf", bias, &r_nocfi) < 0 ||
            symbol_range("leaf_for_asm", bias, &r_leaf_for_asm) < 0) {
                fprintf(stderr, "FAIL: symbols nocfi_call_leaf/leaf_for_asm not found\n");
                return 1;
        }
        if (symbol_range("handler_leaf", bias, &r_handler_leaf) < 0) {
                fprintf(stderr, "FAIL: symbol handler_leaf not found in the test executable\n");
                return 1;
        }
        {
                /* Our libc is the children's: its restorer is theirs. */
                struct sigaction sa = {.sa_handler = SIG_IGN}, old;

                sigaction(SIGURG, &sa, &old);
                sigaction(SIGURG, NULL, &sa);
                sigaction(SIGURG, &old, NULL);
                restorer = (uint64_t)(uintptr_t)sa.sa_restorer;
        }
        (void)section_range(".plt", bias, &r_plt[0]);
        (void)section_range(".plt.sec", bias, &r_plt[1]);
        if (getenv("PROFD_TEST_DEBUG"))
                printf("plt %#" PRIx64 "-%#" PRIx64 " plt_loop %#" PRIx64 "\n", r_plt[0].lo, r_plt[0].hi,
                       r_plt_loop.lo);

        /* Children first, so the BPF filter can name them: other work on the machine stays out of
         * the ns-per-sample figures. */
        for (size_t k = 0; k < ELEMENTSOF(children); k++) {
                children[k].pid = spawn(&children[k]);
                if (children[k].pid < 0)
                        return 1;
                o.filter.pids[o.filter.n_pids++] = children[k].pid;
        }

        if (sd_event_new(&e) < 0)
                return 1;
        r = sampler_new(e, &o, on_interval, NULL, &s);
        if (r >= 0)
                r = sampler_start(s);
        if (r < 0) {
                fprintf(stderr, "FAIL: sampler: %s\n", strerror(-r));
                return 1;
        }
        if (getenv("PROFD_KERNEL_FEATURES_OFF")) {
                /* The fallbacks really are in place: preallocated maps, untyped task reads. */
                const struct bpf_map *m = bpf_object__find_map_by_name(sampler_bpf_object(s), "stacks_0");
                const KernelFeatures *kf = kernel_features_get();

                if (!m || (bpf_map__map_flags(m) & BPF_F_NO_PREALLOC) ||
                    kf->have[KERNEL_FEATURE_PERF_EVENT_DYNAMIC_MAPS] || kf->have[KERNEL_FEATURE_TASK_PT_REGS] ||
                    kf->have[KERNEL_FEATURE_TASK_BTF]) {
                        fprintf(stderr, "FAIL: PROFD_KERNEL_FEATURES_OFF is set but the fallbacks are not used\n");
                        return 1;
                }
                printf("fallbacks in place: preallocated stack maps (%u entries), task fields through "
                       "bpf_probe_read_kernel, user registers from the kernel stack (THREAD_SIZE %u)\n",
                       bpf_map__max_entries(m), kf->thread_size);
        }
#ifdef PROFD_BENCH_FP
        r = 0; /* no pool: the unwinder walks frame pointers */
#else
        r = table_pool_new(sampler_bpf_object(s), 64ULL << 20, &pool);
#endif
        if (r < 0) {
                fprintf(stderr, "FAIL: table_pool_new: %s\n", strerror(-r));
                return 1;
        }
        stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
        if (stats_fd < 0)
                fprintf(stderr, "bpf_enable_stats: %s (no ns/sample figures)\n", strerror(errno));

        for (size_t k = 0; pool && k < ELEMENTSOF(children); k++) {
                if (children[k].mode == MODE_UNKNOWN)
                        continue;
                r = register_process(pool, children[k].pid, children[k].mode == MODE_PENDING);
                if (r < 0) {
                        fprintf(stderr, "FAIL: registering pid %d: %s\n", children[k].pid, strerror(-r));
                        return 1;
                }
        }

        /* Baseline: no child runs, every sample is another process's and filtered out. */
        double filtered_ns = 0;
        {
                ProgStats a, b;

                prog_stats(s, &a);
                run_loop(e, 500 * 1000);
                prog_stats(s, &b);
                if (b.run_cnt > a.run_cnt)
                        filtered_ns =
                                (double)(b.run_time_ns - a.run_time_ns) / (double)(b.run_cnt - a.run_cnt);
                printf("BENCH filtered-out sample: %.0f ns (%" PRIu64 " runs)\n", filtered_ns,
                       b.run_cnt - a.run_cnt);
        }

        /* One child at a time, so each phase's BPF time belongs to one depth. The filtered-out
         * samples of other processes in the phase are priced at the baseline and taken out. */
        for (size_t k = 0; k < ELEMENTSOF(children); k++) {
                ProgStats a, b;
                uint64_t rec0 = counter(s, PROFD_CNT_RECORDED), rec1;
                uint64_t ns0 = counter(s, PROFD_CNT_RECORDED_NS), ns1;
                uint64_t entry0 = counter(s, PROFD_CNT_ENTRY_NS), unwind0 = counter(s, PROFD_CNT_UNWIND_NS);

                prog_stats(s, &a);
                if (write(children[k].go_fd, "x", 1) != 1)
                        return 1;
                run_loop(e, PHASE_USEC);
                if (children[k].mode == MODE_EXEC)
                        run_exec_followup(e, pool, &children[k]);
                kill(children[k].pid, SIGSTOP);
                run_loop(e, 300 * 1000); /* drain what the phase recorded */
                prog_stats(s, &b);
                rec1 = counter(s, PROFD_CNT_RECORDED);
                ns1 = counter(s, PROFD_CNT_RECORDED_NS);
                uint64_t entry1 = counter(s, PROFD_CNT_ENTRY_NS), unwind1 = counter(s, PROFD_CNT_UNWIND_NS);
                /* Two views: the BPF clock around each recorded sample (only this child's
                 * samples), and bpf_stats run time with the filtered runs priced at the baseline. */
                if (rec1 > rec0 && b.run_cnt >= a.run_cnt + (rec1 - rec0)) {
                        uint64_t others = b.run_cnt - a.run_cnt - (rec1 - rec0);
                        double t = (double)(b.run_time_ns - a.run_time_ns) - filtered_ns * (double)others;

                        printf("BENCH %s: %.0f ns per recorded sample (BPF clock), %.0f ns "
                               "(bpf_stats; %" PRIu64 " recorded, %" PRIu64 " filtered runs)\n",
                               child_name(&children[k]), (double)(ns1 - ns0) / (double)(rec1 - rec0),
                               t / (double)(rec1 - rec0), rec1 - rec0, others);
                        double n = (double)(rec1 - rec0);
                        printf("BENCH %s: entry %.0f ns, unwind (steps) %.0f ns, finalize %.0f ns\n",
                               child_name(&children[k]), (double)(entry1 - entry0) / n,
                               (double)(unwind1 - unwind0) / n,
                               (double)((ns1 - ns0) - (entry1 - entry0) - (unwind1 - unwind0)) / n);
                }
        }
        /* Every child is stopped: the next drains hand over the last samples (a cut every 250 ms),
         * then every sample BPF recorded must be in a record, counted once. Waited for up to 5 s
         * (a slow sanitized build); a sample lost or counted twice never settles. */
        for (int i = 0; i < 50 && records_total != counter(s, PROFD_CNT_RECORDED); i++)
                run_loop(e, 100 * 1000);
        run_loop(e, 2 * 250 * 1000 + 100 * 1000); /* nothing more may arrive */
        {
                uint64_t recorded = counter(s, PROFD_CNT_RECORDED);

                printf("recorded in BPF %" PRIu64 ", in the records %" PRIu64 "\n", recorded, records_total);
                if (recorded == 0 || records_total != recorded) {
                        fprintf(stderr, "FAIL: the records do not hold every recorded sample once\n");
                        failures++;
                }
        }
        for (size_t k = 0; k < ELEMENTSOF(children); k++) {
                kill(children[k].pid, SIGKILL);
                waitpid(children[k].pid, NULL, 0);
        }
        if (stats_fd >= 0)
                close(stats_fd);

        table_pool_write_metrics(pool, stdout);
        for (size_t k = 0; k < ELEMENTSOF(children); k++) {
                Child *c = &children[k];

                printf("%s: samples %" PRIu64 " in leaf %" PRIu64 " complete %" PRIu64 " truncated %" PRIu64
                       " dwarf %" PRIu64 " wrong %" PRIu64 " in plt %" PRIu64 " stops:",
                       child_name(c), c->samples, c->in_leaf, c->complete, c->truncated, c->dwarf, c->wrong,
                       c->in_plt);
                for (unsigned i = 0; i < PROFD_STOP__MAX; i++)
                        printf(" %" PRIu64, c->stops[i]);
                printf("\n");
                if (c->in_leaf < 50) {
                        fprintf(stderr, "FAIL: %s: only %" PRIu64 " samples in the leaf\n", child_name(c),
                                c->in_leaf);
                        failures++;
                } else if ((c->complete + c->truncated) * 100 < c->in_leaf * 99) {
                        fprintf(stderr,
                                "FAIL: %s: %" PRIu64 " of %" PRIu64 " leaf samples correct, want 99%%\n",
                                child_name(c), c->complete + c->truncated, c->in_leaf);
                        failures++;
                } else if (c->plt && c->in_plt == 0) {
                        fprintf(stderr, "FAIL: plt: no sample landed in the PLT, its rule went untested\n");
                        failures++;
                }
                if (c->mode == MODE_SIGNAL) {
                        printf("%s: samples in the handler with the exact pcs flagged right: %" PRIu64
                               ", wrong: %" PRIu64 " (restorer %#" PRIx64 ")\n",
                               child_name(c), c->sig_ok, c->sig_bad, restorer);
                        if (c->sig_ok < 20 || c->sig_bad * 100 > (c->sig_ok + c->sig_bad)) {
                                fprintf(stderr, "FAIL: %s: exact pcs through the signal frame\n",
                                        child_name(c));
                                failures++;
                        }
                }
                if (c->mode == MODE_EXEC) {
                        printf("%s: after registering again: complete %" PRIu64 " wrong %" PRIu64
                               "; pre-exec mappings refused: %s\n",
                               child_name(c), c->exec_complete, c->exec_wrong,
                               c->stale_refused ? "yes" : "NO");
                        if (!c->stale_refused || c->exec_complete < 50 ||
                            c->exec_complete * 100 < (c->exec_complete + c->exec_wrong) * 99) {
                                fprintf(stderr,
                                        "FAIL: %s: mappings read before the exec were accepted, or the "
                                        "fresh ones did not unwind\n",
                                        child_name(c));
                                failures++;
                        }
                }
        }
        pool = table_pool_free(pool); /* its maps belong to the sampler's object */
        s = sampler_free(s);
        sd_event_unref(e);
        if (failures)
                return 1;
        printf("PASS\n");
        return 0;
}
