/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/config-file.h"
#include "util/macro.h"

int config_file_read(const char *path, size_t max_size, bool private, char **ret, size_t *ret_size,
                     struct stat *ret_st)
{
        _cleanup_close_ int fd = -1;
        struct stat st;
        char *buf;
        size_t n = 0;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (ret_st)
                *ret_st = st;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if (private && (st.st_mode & S_IROTH))
                return -EPERM;
        if ((size_t)st.st_size > max_size)
                return -EFBIG;
        buf = malloc(max_size + 1);
        if (!buf)
                return -ENOMEM;
        /* Up to max_size + 1 bytes: a file that grew since fstat() is still caught. */
        while (n <= max_size) {
                ssize_t k = read(fd, buf + n, max_size + 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        int r = -errno;
                        config_file_free_secret(buf, n);
                        return r;
                }
                if (k == 0)
                        break;
                n += (size_t)k;
        }
        if (n > max_size) {
                config_file_free_secret(buf, n);
                return -EFBIG;
        }
        buf[n] = 0;
        *ret = buf;
        *ret_size = n;
        return 0;
}

void config_file_free_secret(char *p, size_t size)
{
        if (!p)
                return;
        explicit_bzero(p, size);
        free(p);
}
