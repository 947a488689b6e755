/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/load/proc.h - what sluice-load reads from /proc about the processes it measures
 * (--measure-pid): CPU time and memory of a process and all its descendants.
 *
 * Everything here is synchronous file reading, done by the main thread at the edges of the
 * measured window, never on a load thread.
 */
#ifndef SL_BENCH_LOAD_PROC_H
#define SL_BENCH_LOAD_PROC_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* The fields of /proc/<pid>/stat that sluice-load uses; times are in clock ticks. */
struct sl_proc_stat {
    int pid;
    int ppid;
    char state;
    uint64_t utime;
    uint64_t stime;
    /* CPU time of waited-for (exited and reaped) children. */
    uint64_t cutime;
    uint64_t cstime;
};

/* Parses one /proc/<pid>/stat line of `n` bytes (borrowed; need not be NUL-terminated). The
 * comm field may hold spaces and ')' : it ends at the *last* ')' of the line. Returns 0, or
 * SL_EINVAL when the line is malformed (`*out` is then unspecified). */
SL_MUST_CHECK int sl_proc_stat_parse(const char *line, size_t n, struct sl_proc_stat *out);

/* Reads and parses /proc/<pid>/stat. Returns 0, SL_ENOTFOUND when the process is gone, or
 * SL_EINVAL. */
SL_MUST_CHECK int sl_proc_stat_read(int pid, struct sl_proc_stat *out);

/* Reads the `field` line ("VmRSS", "VmHWM") of /proc/<pid>/status into `*kib`. Returns 0,
 * SL_ENOTFOUND when the process or the field is missing (kernel threads have no VmRSS). */
SL_MUST_CHECK int sl_proc_status_kib(int pid, const char *field, uint64_t *kib);

/* One look at the process trees rooted at some pids. */
struct sl_proc_sample {
    /* utime + stime of every live process of the trees, plus cutime + cstime of the roots, in
     * microseconds. Subtract two samples for the CPU spent in between. */
    uint64_t cpu_us;
    /* VmRSS and VmHWM summed over the live processes of the trees, in KiB. */
    uint64_t rss_kib;
    uint64_t hwm_kib;
    /* Processes counted (roots that are gone are not). */
    size_t nprocs;
};

/* Samples the trees of the `n` pids in `roots` (borrowed): each root and every process whose
 * parent chain leads to it, found by scanning /proc. A root counted twice (a descendant of
 * another root) is counted once. Returns 0, SL_ENOMEM, or SL_EIO when /proc cannot be read. */
SL_MUST_CHECK int sl_proc_sample_trees(const int *roots, size_t n, struct sl_proc_sample *out);

#endif
