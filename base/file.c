/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/file.c - see file.h.
 */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"

int sl_file_read(const char *path, struct sl_buf *out, char *err, size_t errlen)
{
    char chunk[16384];
    struct stat st;
    int rc = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd == -1) {
        if (errlen > 0) {
            (void)snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        }
        return errno == ENOENT ? SL_ENOTFOUND : SL_EIO;
    }
    if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
        if (errlen > 0) {
            (void)snprintf(err, errlen, "cannot read %s: not a regular file", path);
        }
        rc = SL_EIO;
    }
    while (rc == 0) {
        ssize_t n = read(fd, chunk, sizeof(chunk));

        if (n == -1 && errno == EINTR) {
            continue;
        }
        if (n == -1) {
            if (errlen > 0) {
                (void)snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
            }
            rc = SL_EIO;
        } else if (n == 0) {
            break;
        } else {
            rc = sl_buf_append(out, chunk, (size_t)n);
            if (rc < 0 && errlen > 0) {
                (void)snprintf(err, errlen, "cannot read %s: %s", path,
                               rc == SL_ETOOBIG ? "larger than allowed" : "out of memory");
            }
        }
    }
    /* The empty asm that reads the chunk keeps the compiler from dropping the wipe. */
    memset(chunk, 0, sizeof(chunk));
    __asm__ __volatile__("" : : "r"(chunk) : "memory");
    (void)close(fd);
    return rc;
}

int sl_file_ensure_dir(const char *dir, const char *what, char *err, size_t errlen)
{
    struct stat st;

    if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
        if (errlen > 0) {
            (void)snprintf(err, errlen, "cannot create %s %s: %s", what, dir, strerror(errno));
        }
        return SL_EIO;
    }
    if (stat(dir, &st) == -1 || !S_ISDIR(st.st_mode)) {
        if (errlen > 0) {
            (void)snprintf(err, errlen, "%s %s is not a directory", what, dir);
        }
        return SL_EIO;
    }
    return 0;
}
