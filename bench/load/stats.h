/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/load/stats.h - the latency histogram of sluice-load and its request-rate schedule.
 *
 * struct sl_hist is a value type, embedded by its owner (one per load thread) and initialised
 * with sl_hist_init(); it never allocates, so recording costs no allocation per request. It is
 * log-linear: values below SL_HIST_SUB are kept exactly, and each power of two above that is cut
 * into SL_HIST_SUB / 2 equal buckets. A bucket [lo, hi] reports its midpoint, so a reported
 * value differs from the true one by at most SL_HIST_REL_ERR of the true value (the widest bucket
 * is 1/64 of its lower bound wide; half of it is 1/128). Values above SL_HIST_MAX are clamped.
 *
 * struct sl_sched is the fixed-rate schedule of rate mode: request k is due at
 * start + k * interval. A request is timed from its *scheduled* time, not from when a free
 * connection finally sent it, so a slow server cannot hide its queueing delay (no coordinated
 * omission).
 */
#ifndef SL_BENCH_LOAD_STATS_H
#define SL_BENCH_LOAD_STATS_H

#include <stdbool.h>
#include <stdint.h>

/* Sub-buckets per power of two below which values are exact. */
#define SL_HIST_SUB_BITS 7
#define SL_HIST_SUB      (1u << SL_HIST_SUB_BITS)
/* The largest value kept apart (about 12.7 days in microseconds); larger ones are clamped. */
#define SL_HIST_MAX_BITS 40
#define SL_HIST_MAX      ((UINT64_C(1) << SL_HIST_MAX_BITS) - 1)
/* Number of buckets: the exact ones, then SL_HIST_SUB / 2 per power of two above them. */
#define SL_HIST_BUCKETS (SL_HIST_SUB + (SL_HIST_MAX_BITS - SL_HIST_SUB_BITS) * (SL_HIST_SUB / 2))
/* The bound on the relative error of a reported value (see above). */
#define SL_HIST_REL_ERR (1.0 / 128.0)

struct sl_hist {
    /* Values recorded per bucket. */
    uint64_t buckets[SL_HIST_BUCKETS];
    /* Values recorded in all. */
    uint64_t count;
    /* Their exact sum, minimum and maximum (after clamping to SL_HIST_MAX); min is
     * UINT64_MAX while count is 0. */
    uint64_t sum;
    uint64_t min;
    uint64_t max;
};

/* Empties `h` (caller storage). */
void sl_hist_init(struct sl_hist *h);

/* Records one value (any unit; sluice-load records microseconds). */
void sl_hist_record(struct sl_hist *h, uint64_t v);

/* Adds every value of `src` to `dst` (the per-thread histograms into one). */
void sl_hist_merge(struct sl_hist *dst, const struct sl_hist *src);

/* The value at percentile `p` (0 < p <= 100): the smallest recorded value v such that at least
 * p % of the values are <= v, within SL_HIST_REL_ERR, and never outside [min, max]. 0 for an
 * empty histogram. */
uint64_t sl_hist_percentile(const struct sl_hist *h, double p);

/* The exact mean, 0 for an empty histogram. */
double sl_hist_mean(const struct sl_hist *h);

/* The bucket `v` falls in, and the midpoint value that bucket reports (exposed for tests). */
unsigned sl_hist_bucket(uint64_t v);
uint64_t sl_hist_bucket_value(unsigned bucket);

struct sl_sched {
    /* When request 0 is due, and the spacing of requests, in nanoseconds of CLOCK_MONOTONIC. */
    uint64_t start_ns;
    double interval_ns;
    /* Requests taken so far (sent, or handed to a connection). */
    uint64_t taken;
};

/* A schedule of `rate_per_s` (> 0) requests per second from `start_ns` on. */
void sl_sched_init(struct sl_sched *s, uint64_t start_ns, double rate_per_s);

/* When the next request not yet taken is due. */
uint64_t sl_sched_next_ns(const struct sl_sched *s);

/* True when the next request is due at `now_ns` (it may be overdue: it then waited for a free
 * connection, and that wait is part of its latency). */
bool sl_sched_is_due(const struct sl_sched *s, uint64_t now_ns);

/* Takes the next request and returns the time it was scheduled for: the time its latency is
 * measured from. */
uint64_t sl_sched_take(struct sl_sched *s);

/* The latency, in microseconds, of a request that was scheduled at `start_ns` (rate mode: its
 * scheduled time; other modes: when it was sent) and complete at `done_ns`. 0 when done_ns is
 * not after start_ns. */
uint64_t sl_latency_us(uint64_t start_ns, uint64_t done_ns);

#endif
