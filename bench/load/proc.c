/* SPDX-License-Identifier: Apache-2.0 */
#include "bench/load/proc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/mem.h"

/* Parses an unsigned decimal field starting at *p (within end) and moves *p past it and the
 * following space. */
static int parse_field(const char **p, const char *end, uint64_t *out)
{
    const char *q = *p;
    uint64_t v = 0;

    /* Signed fields (ppid may be 0, cutime never negative in practice) keep their digits. */
    if (q < end && *q == '-') {
        q++;
    }
    if (q >= end || !isdigit((unsigned char)*q)) {
        return SL_EINVAL;
    }
    while (q < end && isdigit((unsigned char)*q)) {
        if (v > (UINT64_MAX - 9) / 10) {
            return SL_EINVAL;
        }
        v = v * 10 + (uint64_t)(*q - '0');
        q++;
    }
    if (q < end && *q != ' ' && *q != '\n') {
        return SL_EINVAL;
    }
    if (q < end) {
        q++;
    }
    *p = q;
    *out = v;
    return 0;
}

/* Skips one space-separated field. */
static int skip_field(const char **p, const char *end)
{
    const char *q = *p;

    if (q >= end || *q == ' ') {
        return SL_EINVAL;
    }
    while (q < end && *q != ' ' && *q != '\n') {
        q++;
    }
    if (q < end) {
        q++;
    }
    *p = q;
    return 0;
}

int sl_proc_stat_parse(const char *line, size_t n, struct sl_proc_stat *out)
{
    const char *end = line + n;
    const char *p = line;
    const char *close = NULL;
    const char *q;
    uint64_t v;
    int field;

    SL_TRY(parse_field(&p, end, &v));
    SL_ENSURE(v > 0 && v <= INT32_MAX, SL_EINVAL);
    out->pid = (int)v;
    /* The comm is "(...)" and may hold anything, ')' included: it ends at the last ')'. */
    SL_ENSURE(p < end && *p == '(', SL_EINVAL);
    for (q = p; q < end; q++) {
        if (*q == ')') {
            close = q;
        }
    }
    SL_ENSURE(close != NULL && close + 2 < end && close[1] == ' ', SL_EINVAL);
    p = close + 2;
    SL_ENSURE(isalpha((unsigned char)*p) && p + 1 < end && p[1] == ' ', SL_EINVAL);
    out->state = *p;
    p += 2;
    /* Fields 4 (ppid) to 17 (cstime), numbered as in proc(5). */
    for (field = 4; field <= 17; field++) {
        if (field == 4 || field >= 14) {
            SL_TRY(parse_field(&p, end, &v));
        } else {
            SL_TRY(skip_field(&p, end));
            continue;
        }
        switch (field) {
        case 4:
            SL_ENSURE(v <= INT32_MAX, SL_EINVAL);
            out->ppid = (int)v;
            break;
        case 14:
            out->utime = v;
            break;
        case 15:
            out->stime = v;
            break;
        case 16:
            out->cutime = v;
            break;
        default:
            out->cstime = v;
            break;
        }
    }
    return 0;
}

/* Reads a small /proc file into buf (NUL-terminated); returns its length or a negative code. */
static int read_small(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    size_t n;

    if (f == NULL) {
        return errno == ENOENT || errno == ESRCH ? SL_ENOTFOUND : SL_EIO;
    }
    n = fread(buf, 1, cap - 1, f);
    if (ferror(f)) {
        (void)fclose(f);
        return SL_ENOTFOUND; /* ESRCH: the process exited while we read. */
    }
    (void)fclose(f);
    buf[n] = '\0';
    return (int)n;
}

int sl_proc_stat_read(int pid, struct sl_proc_stat *out)
{
    char path[64];
    char buf[1024];
    int n;

    (void)snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    n = read_small(path, buf, sizeof(buf));
    if (n < 0) {
        return n;
    }
    return sl_proc_stat_parse(buf, (size_t)n, out);
}

int sl_proc_status_kib(int pid, const char *field, uint64_t *kib)
{
    char path[64];
    char buf[4096];
    size_t flen = strlen(field);
    const char *p;
    int n;

    (void)snprintf(path, sizeof(path), "/proc/%d/status", pid);
    n = read_small(path, buf, sizeof(buf));
    if (n < 0) {
        return n;
    }
    for (p = buf; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p != NULL ? p + 1 : NULL) {
        if (strncmp(p, field, flen) == 0 && p[flen] == ':') {
            char *endp;
            unsigned long long v;

            errno = 0;
            v = strtoull(p + flen + 1, &endp, 10);
            SL_ENSURE(errno == 0 && endp != p + flen + 1, SL_EINVAL);
            *kib = v;
            return 0;
        }
    }
    return SL_ENOTFOUND;
}

struct proc_entry {
    int pid;
    int ppid;
    bool in_tree;
};

/* Lists every process of /proc with its parent into a new array (*out, *n). */
static int list_procs(struct proc_entry **out, size_t *n)
{
    DIR *d = opendir("/proc");
    struct proc_entry *v = NULL;
    size_t len = 0;
    size_t cap = 0;
    struct dirent *e;

    if (d == NULL) {
        return SL_EIO;
    }
    while ((e = readdir(d)) != NULL) {
        struct sl_proc_stat st;
        char *endp;
        long pid;

        if (!isdigit((unsigned char)e->d_name[0])) {
            continue;
        }
        pid = strtol(e->d_name, &endp, 10);
        if (*endp != '\0' || pid <= 0 || pid > INT32_MAX) {
            continue;
        }
        if (sl_proc_stat_read((int)pid, &st) < 0) {
            continue; /* Gone since readdir, or unreadable: not ours to count. */
        }
        if (len == cap) {
            size_t ncap = cap == 0 ? 256 : cap * 2;
            struct proc_entry *nv = sl_realloc(v, ncap * sizeof(*nv));

            if (nv == NULL) {
                sl_free(v);
                (void)closedir(d);
                return SL_ENOMEM;
            }
            v = nv;
            cap = ncap;
        }
        v[len++] = (struct proc_entry){ .pid = st.pid, .ppid = st.ppid, .in_tree = false };
    }
    (void)closedir(d);
    *out = v;
    *n = len;
    return 0;
}

/* Marks the roots and, until nothing changes, every child of a marked process. */
static void mark_trees(struct proc_entry *v, size_t len, const int *roots, size_t n)
{
    bool changed = true;
    size_t i;
    size_t j;

    for (i = 0; i < len; i++) {
        for (j = 0; j < n; j++) {
            if (v[i].pid == roots[j]) {
                v[i].in_tree = true;
            }
        }
    }
    while (changed) {
        changed = false;
        for (i = 0; i < len; i++) {
            if (v[i].in_tree) {
                continue;
            }
            for (j = 0; j < len; j++) {
                if (v[j].in_tree && v[j].pid == v[i].ppid) {
                    v[i].in_tree = true;
                    changed = true;
                    break;
                }
            }
        }
    }
}

static bool is_root(int pid, const int *roots, size_t n)
{
    size_t j;

    for (j = 0; j < n; j++) {
        if (roots[j] == pid) {
            return true;
        }
    }
    return false;
}

int sl_proc_sample_trees(const int *roots, size_t n, struct sl_proc_sample *out)
{
    struct proc_entry *v = NULL;
    size_t len = 0;
    uint64_t ticks = 0;
    long hz = sysconf(_SC_CLK_TCK);
    size_t i;

    memset(out, 0, sizeof(*out));
    SL_TRY(list_procs(&v, &len));
    mark_trees(v, len, roots, n);
    for (i = 0; i < len; i++) {
        struct sl_proc_stat st;
        uint64_t kib;

        if (!v[i].in_tree || sl_proc_stat_read(v[i].pid, &st) < 0) {
            continue;
        }
        ticks += st.utime + st.stime;
        if (is_root(st.pid, roots, n)) {
            ticks += st.cutime + st.cstime;
        }
        if (sl_proc_status_kib(st.pid, "VmRSS", &kib) == 0) {
            out->rss_kib += kib;
        }
        if (sl_proc_status_kib(st.pid, "VmHWM", &kib) == 0) {
            out->hwm_kib += kib;
        }
        out->nprocs++;
    }
    sl_free(v);
    if (hz <= 0) {
        hz = 100;
    }
    out->cpu_us = ticks * 1000000u / (uint64_t)hz;
    return 0;
}
