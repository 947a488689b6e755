/* SPDX-License-Identifier: Apache-2.0 */
#include "bench/load/stats.h"

#include <math.h>
#include <string.h>

void sl_hist_init(struct sl_hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

unsigned sl_hist_bucket(uint64_t v)
{
    unsigned msb;
    unsigned shift;

    if (v > SL_HIST_MAX) {
        v = SL_HIST_MAX;
    }
    if (v < SL_HIST_SUB) {
        return (unsigned)v;
    }
    msb = 63u - (unsigned)__builtin_clzll(v);
    /* v >> shift keeps the top SL_HIST_SUB_BITS - 1 bits: 64 buckets per power of two. */
    shift = msb - (SL_HIST_SUB_BITS - 1);
    return SL_HIST_SUB + (shift - 1) * (SL_HIST_SUB / 2)
           + (unsigned)((v >> shift) - SL_HIST_SUB / 2);
}

uint64_t sl_hist_bucket_value(unsigned bucket)
{
    unsigned k;
    unsigned shift;
    uint64_t lo;

    if (bucket < SL_HIST_SUB) {
        return bucket;
    }
    k = bucket - SL_HIST_SUB;
    shift = k / (SL_HIST_SUB / 2) + 1;
    lo = (uint64_t)(SL_HIST_SUB / 2 + k % (SL_HIST_SUB / 2)) << shift;
    return lo + ((UINT64_C(1) << shift) >> 1);
}

void sl_hist_record(struct sl_hist *h, uint64_t v)
{
    if (v > SL_HIST_MAX) {
        v = SL_HIST_MAX;
    }
    h->buckets[sl_hist_bucket(v)]++;
    h->count++;
    h->sum += v;
    if (v < h->min) {
        h->min = v;
    }
    if (v > h->max) {
        h->max = v;
    }
}

void sl_hist_merge(struct sl_hist *dst, const struct sl_hist *src)
{
    size_t i;

    if (src->count == 0) {
        return;
    }
    for (i = 0; i < SL_HIST_BUCKETS; i++) {
        dst->buckets[i] += src->buckets[i];
    }
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->min < dst->min) {
        dst->min = src->min;
    }
    if (src->max > dst->max) {
        dst->max = src->max;
    }
}

uint64_t sl_hist_percentile(const struct sl_hist *h, double p)
{
    uint64_t rank;
    uint64_t seen = 0;
    uint64_t v = 0;
    size_t i;

    if (h->count == 0) {
        return 0;
    }
    if (p <= 0.0) {
        return h->min;
    }
    if (p >= 100.0) {
        return h->max;
    }
    rank = (uint64_t)ceil(p / 100.0 * (double)h->count);
    if (rank < 1) {
        rank = 1;
    }
    if (rank > h->count) {
        rank = h->count;
    }
    for (i = 0; i < SL_HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            v = sl_hist_bucket_value((unsigned)i);
            break;
        }
    }
    if (v < h->min) {
        v = h->min;
    }
    if (v > h->max) {
        v = h->max;
    }
    return v;
}

double sl_hist_mean(const struct sl_hist *h)
{
    if (h->count == 0) {
        return 0.0;
    }
    return (double)h->sum / (double)h->count;
}

void sl_sched_init(struct sl_sched *s, uint64_t start_ns, double rate_per_s)
{
    s->start_ns = start_ns;
    s->interval_ns = 1e9 / rate_per_s;
    s->taken = 0;
}

uint64_t sl_sched_next_ns(const struct sl_sched *s)
{
    /* Computed from the start every time, so rounding never accumulates over a long run. */
    return s->start_ns + (uint64_t)((double)s->taken * s->interval_ns);
}

bool sl_sched_is_due(const struct sl_sched *s, uint64_t now_ns)
{
    return sl_sched_next_ns(s) <= now_ns;
}

uint64_t sl_sched_take(struct sl_sched *s)
{
    uint64_t at = sl_sched_next_ns(s);

    s->taken++;
    return at;
}

uint64_t sl_latency_us(uint64_t start_ns, uint64_t done_ns)
{
    if (done_ns <= start_ns) {
        return 0;
    }
    return (done_ns - start_ns + 500) / 1000;
}
