/* SPDX-License-Identifier: GPL-2.0-only */
/* Child process for the process tracking tests, driven one step per line read from stdin:
 *   "dlopen"  dlopen argv[1], call into it, print "dlopen ADDR" (the function's address)
 *   "fork"    fork a child that exits at once, reap it, print "fork PID"
 *   "mmapx PATH"  map PATH readable+executable (any file, e.g. a malformed ELF), print "mmapx ADDR"
 *   "exit"    exit 0
 * It prints "ready" once started. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
        char line[64];

        setvbuf(stdout, NULL, _IOLBF, 0);
        printf("ready\n");
        while (fgets(line, sizeof(line), stdin)) {
                if (strncmp(line, "dlopen", 6) == 0) {
                        void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW) : NULL;
                        int (*fn)(int) = h ? (int (*)(int))dlsym(h, "proc_helper_lib_work") : NULL;
                        if (!fn) {
                                printf("error %s\n", dlerror());
                                continue;
                        }
                        fn(1000);
                        printf("dlopen %lx\n", (unsigned long)fn);
                } else if (strncmp(line, "fork", 4) == 0) {
                        pid_t p = fork();
                        if (p == 0)
                                _exit(0);
                        waitpid(p, NULL, 0);
                        printf("fork %d\n", (int)p);
                } else if (strncmp(line, "mmapx ", 6) == 0) {
                        struct stat st;
                        void *p = MAP_FAILED;
                        int fd;

                        line[strcspn(line, "\n")] = 0;
                        fd = open(line + 6, O_RDONLY | O_CLOEXEC);
                        if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0)
                                p = mmap(NULL, st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
                        if (fd >= 0)
                                close(fd);
                        if (p == MAP_FAILED)
                                printf("error mmap %s\n", line + 6);
                        else
                                printf("mmapx %lx\n", (unsigned long)p);
                } else if (strncmp(line, "exit", 4) == 0)
                        return 0;
        }
        return 0;
}
