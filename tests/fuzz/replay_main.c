/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/replay_main.c - runs a fuzz target over every file of its corpus directories, for
 * builds without libFuzzer (gcc). Registered in CTest as fuzz-replay.<target>.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/log.h"
#include "base/mem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *data = NULL;
    long size;
    int rc = -1;

    if (f == NULL) {
        sl_eprintf("cannot open %s", path);
        return -1;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        sl_eprintf("cannot size %s", path);
        goto out;
    }
    data = sl_malloc((size_t)size);
    if (data == NULL || fread(data, 1, (size_t)size, f) != (size_t)size) {
        sl_eprintf("cannot read %s", path);
        goto out;
    }
    (void)LLVMFuzzerTestOneInput(data, (size_t)size);
    rc = 0;
out:
    sl_free(data);
    if (fclose(f) != 0) {
        rc = -1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    int files = 0;

    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        struct dirent *e;

        if (d == NULL) {
            sl_eprintf("cannot open corpus directory %s", argv[i]);
            return 1;
        }
        while ((e = readdir(d)) != NULL) {
            char path[4096];
            struct stat st;
            int n = snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);

            if (n < 0 || (size_t)n >= sizeof(path) || stat(path, &st) != 0
                || !S_ISREG(st.st_mode)) {
                continue;
            }
            if (replay_file(path) != 0) {
                closedir(d);
                return 1;
            }
            files++;
        }
        closedir(d);
    }
    if (files == 0) {
        sl_eprintf("no corpus files found");
        return 1;
    }
    printf("replayed %d inputs\n", files);
    return 0;
}
