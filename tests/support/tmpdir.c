/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/support/tmpdir.c - scratch directories (see tmpdir.h).
 */
#define _XOPEN_SOURCE 700 /* nftw() and its flags */
#include "tests/support/tmpdir.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int sl_test_tmpdir(char *dir, size_t cap, const char *prefix)
{
    int n = snprintf(dir, cap, "/tmp/%s-XXXXXX", prefix);

    if (n < 0 || (size_t)n >= cap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkdtemp(dir) != NULL ? 0 : -1;
}

int sl_test_join(char *out, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", dir, name);

    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int sl_test_write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    int rc = 0;

    if (f == NULL) {
        return -1;
    }
    if (fputs(text, f) < 0) {
        rc = -1;
    }
    if (fclose(f) != 0) {
        rc = -1;
    }
    return rc;
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return type == FTW_DP ? rmdir(path) : unlink(path);
}

int sl_test_rmtree(const char *path)
{
    return nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}
