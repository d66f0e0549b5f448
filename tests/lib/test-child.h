/* SPDX-License-Identifier: GPL-2.0-only */
/* Test programs that print what the test needs (their addresses) on stdout and then run until
 * their stdin is closed, so they stay alive exactly as long as the test looks at them. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

/* fork() with the child's stdin and stdout on pipes. Returns like fork(): 0 in the child, which
 * then execs; the pid in the parent, with *ret_to writing to the child's stdin and *ret_from
 * reading its stdout; -errno on failure. O_CLOEXEC: the exec'd child keeps only fds 0 and 1. */
static inline pid_t fork_piped(int *ret_to, int *ret_from)
{
        int in[2], out[2];
        pid_t pid;

        if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                dup2(in[0], 0);
                dup2(out[1], 1);
                return 0;
        }
        close(in[0]);
        close(out[1]);
        *ret_to = in[1];
        *ret_from = out[0];
        return pid;
}
