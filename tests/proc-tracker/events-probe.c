/* SPDX-License-Identifier: GPL-2.0-only */
/* Static probe of bpf/events.bpf.c for a foreign kernel (Debian 12's 6.1 under qemu, see
 * tests/test-proc-events-6.1.py): loads the skeleton with its first-choice hooks, attaches each,
 * runs a child that execs, maps a file executable, mprotects a file mapping +X, forks and exits,
 * and prints what arrived. Then checks that the fallback programs load and attach too.
 * Output lines: "ATTACH <prog> ok|<error>", "EVENT <kind> <count>", "FALLBACK <prog> ok|<error>". */
#include <errno.h>
#include <fcntl.h>
#include <linux/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "bpf/profd-events.h"
#include "events.skel.h"

static unsigned long mmap_addr, mprotect_addr;
static pid_t child;
static int n_exec, n_exit, n_fork, n_mmap, n_mprotect;

static int on_event(void *ctx, void *data, size_t size)
{
        const struct profd_event *e = data;

        if (e->pid != (unsigned)child)
                return 0;
        switch (e->type) {
        case PROFD_EV_EXEC:
                n_exec++;
                break;
        case PROFD_EV_EXIT:
                n_exit++;
                break;
        case PROFD_EV_FORK:
                n_fork++;
                break;
        case PROFD_EV_MMAP_EXEC:
                n_mmap += e->addr == mmap_addr;
                n_mprotect += e->addr == mprotect_addr;
                break;
        }
        return 0;
}

static int print_warnings(enum libbpf_print_level level, const char *fmt, va_list ap)
{
        return level == LIBBPF_WARN ? vfprintf(stdout, fmt, ap) : 0;
}

static int child_main(const char *self)
{
        int fd = open(self, O_RDONLY | O_CLOEXEC);
        void *x, *p;

        /* fork: one more process; exec is how we got here */
        if (fork() == 0)
                _exit(0);
        wait(NULL);
        x = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
        p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
        if (x == MAP_FAILED || p == MAP_FAILED || mprotect(p, 4096, PROT_READ | PROT_EXEC) < 0)
                return 1;
        printf("%lx %lx\n", (unsigned long)x, (unsigned long)p);
        return 0;
}

int main(int argc, char **argv)
{
        struct events_bpf *s, *f;
        struct ring_buffer *rb;
        int pipefd[2], r;
        char buf[128] = "";

        if (argc > 1 && strcmp(argv[1], "child") == 0)
                return child_main(argv[0]);
        setvbuf(stdout, NULL, _IOLBF, 0);
        libbpf_set_print(print_warnings);

        s = events_bpf__open();
        if (!s)
                return printf("OPEN failed\n"), 1;
        r = events_bpf__load(s);
        printf("LOAD %s\n", r ? strerror(-r) : "ok");
        if (r)
                return 1;
        struct {
                struct bpf_program *p;
                const char *n;
        } first[] = {
                {s->progs.tp_exec, "tp_exec"},
                {s->progs.tp_exit, "tp_exit"},
                {s->progs.tp_fork, "tp_fork"},
                {s->progs.fexit_mmap, "fexit_mmap"},
                {s->progs.fentry_mprotect, "fentry_mprotect"},
        };
        for (size_t i = 0; i < sizeof(first) / sizeof(first[0]); i++)
                printf("ATTACH %s %s\n", first[i].n,
                       bpf_program__attach(first[i].p) ? "ok" : strerror(errno));

        rb = ring_buffer__new(bpf_map__fd(s->maps.events), on_event, NULL, NULL);
        if (!rb || pipe(pipefd) < 0)
                return 1;
        child = fork();
        if (child == 0) {
                dup2(pipefd[1], 1);
                execl("/proc/self/exe", argv[0], "child", (char *)NULL);
                _exit(127);
        }
        close(pipefd[1]);
        (void)!read(pipefd[0], buf, sizeof(buf) - 1);
        sscanf(buf, "%lx %lx", &mmap_addr, &mprotect_addr);
        waitpid(child, NULL, 0);
        for (int i = 0; i < 10; i++)
                ring_buffer__poll(rb, 50);
        printf("EVENT exec %d\nEVENT exit %d\nEVENT fork %d\nEVENT mmap %d\nEVENT mprotect %d\n", n_exec,
               n_exit, n_fork, n_mmap, n_mprotect);

        /* The fallbacks, as the daemon loads them where trampolines are refused. */
        f = events_bpf__open();
        bpf_program__set_autoload(f->progs.fexit_mmap, false);
        bpf_program__set_autoload(f->progs.fentry_mprotect, false);
        r = events_bpf__load(f);
        printf("FALLBACK load %s\n", r ? strerror(-r) : "ok");
        if (r)
                return 1;
        struct {
                struct bpf_program *p;
                const char *n;
        } fb[] = {
                {f->progs.raw_exec, "raw_exec"},         {f->progs.raw_exit, "raw_exit"},
                {f->progs.raw_fork, "raw_fork"},         {f->progs.kp_mmap, "kp_mmap"},
                {f->progs.kp_mprotect, "kp_mprotect"},   {f->progs.tp_sys_exit, "tp_sys_exit"},
                {f->progs.raw_sys_exit, "raw_sys_exit"},
        };
        for (size_t i = 0; i < sizeof(fb) / sizeof(fb[0]); i++)
                printf("FALLBACK %s %s\n", fb[i].n, bpf_program__attach(fb[i].p) ? "ok" : strerror(errno));
        LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = "main");
        printf("FALLBACK uprobe %s\n",
               bpf_program__attach_uprobe_opts(f->progs.uprobe_dl_debug_state, -1, "/proc/self/exe", 0, &uo)
                       ? "ok"
                       : strerror(errno));
        return 0;
}
