/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/bench/test_loadstats.c - sluice-load's numbers: the latency histogram (percentiles of
 * known distributions, its stated relative error bound, merging per-thread histograms), the
 * rate schedule's no-coordinated-omission rule, and the /proc readers.
 */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/err.h"
#include "bench/load/proc.h"
#include "bench/load/stats.h"

static struct sl_hist h1;
static struct sl_hist h2;
static struct sl_hist h3;

/* `got` is within the histogram's stated relative error of `want`. */
static void assert_close(uint64_t got, uint64_t want)
{
    double err = fabs((double)got - (double)want);

    if (err > (double)want * SL_HIST_REL_ERR) {
        fail_msg("got %llu, want %llu within %.4f%%", (unsigned long long)got,
                 (unsigned long long)want, SL_HIST_REL_ERR * 100.0);
    }
}

static void uniform_1_to_1000_has_exact_rank_percentiles(void **state)
{
    (void)state;
    sl_hist_init(&h1);
    for (uint64_t v = 1; v <= 1000; v++) {
        sl_hist_record(&h1, v);
    }
    assert_int_equal(h1.count, 1000);
    assert_int_equal(h1.min, 1);
    assert_int_equal(h1.max, 1000);
    assert_true(fabs(sl_hist_mean(&h1) - 500.5) < 1e-9);
    /* The p-th percentile of 1..1000 is the value of rank ceil(p * 10). */
    assert_close(sl_hist_percentile(&h1, 50.0), 500);
    assert_close(sl_hist_percentile(&h1, 90.0), 900);
    assert_close(sl_hist_percentile(&h1, 99.0), 990);
    assert_close(sl_hist_percentile(&h1, 99.9), 999);
    assert_int_equal(sl_hist_percentile(&h1, 100.0), 1000);
    /* Below SL_HIST_SUB every value has its own bucket: exact. */
    assert_int_equal(sl_hist_percentile(&h1, 10.0), 100);
    assert_int_equal(sl_hist_percentile(&h1, 0.1), 1);
}

static void constant_gives_that_value_everywhere(void **state)
{
    (void)state;
    sl_hist_init(&h1);
    for (int i = 0; i < 10000; i++) {
        sl_hist_record(&h1, 12345);
    }
    assert_int_equal(sl_hist_percentile(&h1, 1.0), 12345);
    assert_int_equal(sl_hist_percentile(&h1, 50.0), 12345);
    assert_int_equal(sl_hist_percentile(&h1, 99.9), 12345);
    assert_int_equal(sl_hist_percentile(&h1, 100.0), 12345);
    assert_true(fabs(sl_hist_mean(&h1) - 12345.0) < 1e-9);
}

static void bimodal_splits_at_the_right_rank(void **state)
{
    (void)state;
    sl_hist_init(&h1);
    /* 90 % fast (1000..1899 us), 10 % slow (50000..50099 us). */
    for (uint64_t v = 1000; v < 1900; v++) {
        sl_hist_record(&h1, v);
    }
    for (uint64_t v = 50000; v < 50100; v++) {
        sl_hist_record(&h1, v);
    }
    assert_close(sl_hist_percentile(&h1, 50.0), 1499);
    assert_close(sl_hist_percentile(&h1, 90.0), 1899);
    assert_close(sl_hist_percentile(&h1, 90.1), 50000);
    assert_close(sl_hist_percentile(&h1, 99.0), 50089);
    assert_int_equal(sl_hist_percentile(&h1, 100.0), 50099);
    assert_true(fabs(sl_hist_mean(&h1) - (900.0 * 1449.5 + 100.0 * 50049.5) / 1000.0) < 1e-6);
}

static void empty_histogram_reports_zero(void **state)
{
    (void)state;
    sl_hist_init(&h1);
    assert_int_equal(h1.count, 0);
    assert_int_equal(sl_hist_percentile(&h1, 50.0), 0);
    assert_int_equal(sl_hist_percentile(&h1, 99.9), 0);
    assert_int_equal(sl_hist_percentile(&h1, 100.0), 0);
    assert_true(sl_hist_mean(&h1) == 0.0);
}

static void every_bucket_is_within_the_stated_relative_error(void **state)
{
    unsigned prev = 0;
    double worst = 0.0;

    (void)state;
    /* Every value up to 2^20, then a geometric sweep up to SL_HIST_MAX. */
    for (uint64_t v = 0; v <= SL_HIST_MAX; v = v < (1u << 20) ? v + 1 : v + v / 997 + 1) {
        unsigned b = sl_hist_bucket(v);
        uint64_t rep = sl_hist_bucket_value(b);
        double err = fabs((double)rep - (double)v);

        assert_true(b < SL_HIST_BUCKETS);
        assert_true(b >= prev); /* monotonic: percentiles walk buckets in value order */
        prev = b;
        if (v < SL_HIST_SUB) {
            assert_int_equal(rep, v);
            continue;
        }
        if (err > (double)v * SL_HIST_REL_ERR) {
            fail_msg("value %llu reported as %llu", (unsigned long long)v, (unsigned long long)rep);
        }
        if (err / (double)v > worst) {
            worst = err / (double)v;
        }
    }
    /* The bound is tight, not vacuous: some value comes close to it. */
    assert_true(worst > SL_HIST_REL_ERR * 0.9);
    assert_int_equal(sl_hist_bucket(SL_HIST_MAX), SL_HIST_BUCKETS - 1);
    assert_int_equal(sl_hist_bucket(UINT64_MAX), SL_HIST_BUCKETS - 1);
    sl_hist_init(&h1);
    sl_hist_record(&h1, UINT64_MAX);
    assert_int_equal(h1.max, SL_HIST_MAX);
}

static void merged_threads_equal_one_histogram(void **state)
{
    (void)state;
    sl_hist_init(&h1);
    sl_hist_init(&h2);
    sl_hist_init(&h3);
    for (uint64_t v = 1; v <= 100000; v += 7) {
        sl_hist_record(&h3, v);
        sl_hist_record(v % 2 == 0 ? &h1 : &h2, v);
    }
    sl_hist_merge(&h1, &h2);
    assert_int_equal(h1.count, h3.count);
    assert_int_equal(h1.sum, h3.sum);
    assert_int_equal(h1.min, h3.min);
    assert_int_equal(h1.max, h3.max);
    assert_memory_equal(h1.buckets, h3.buckets, sizeof(h1.buckets));
    assert_int_equal(sl_hist_percentile(&h1, 99.0), sl_hist_percentile(&h3, 99.0));
    /* Merging an empty histogram changes nothing; merging into one copies. */
    sl_hist_init(&h2);
    sl_hist_merge(&h1, &h2);
    assert_int_equal(h1.min, h3.min);
    sl_hist_merge(&h2, &h3);
    assert_int_equal(h2.count, h3.count);
    assert_int_equal(h2.min, h3.min);
    assert_int_equal(h2.max, h3.max);
}

static void late_request_counts_from_its_scheduled_time(void **state)
{
    const uint64_t t0 = UINT64_C(5000000000);
    const uint64_t ms = 1000000;
    struct sl_sched s;
    uint64_t at;

    (void)state;
    sl_sched_init(&s, t0, 1000.0); /* one request per millisecond */
    assert_false(sl_sched_is_due(&s, t0 - 1));
    assert_true(sl_sched_is_due(&s, t0));
    /* Every connection was busy until t0 + 5 ms: request 0 is sent 5 ms late. */
    at = sl_sched_take(&s);
    assert_int_equal(at, t0);
    /* It completes 0.5 ms after it was sent: its latency is 5.5 ms, not 0.5 ms. */
    assert_int_equal(sl_latency_us(at, t0 + 5 * ms + ms / 2), 5500);
    /* The requests that fell due meanwhile keep their own times. */
    for (uint64_t k = 1; k <= 5; k++) {
        assert_true(sl_sched_is_due(&s, t0 + 5 * ms));
        assert_int_equal(sl_sched_take(&s), t0 + k * ms);
    }
    assert_false(sl_sched_is_due(&s, t0 + 5 * ms));
    assert_int_equal(sl_sched_next_ns(&s), t0 + 6 * ms);
    /* No drift over a long run. */
    s.taken = 1000000;
    assert_int_equal(sl_sched_next_ns(&s), t0 + 1000000 * ms);
    assert_int_equal(sl_latency_us(t0, t0), 0);
    assert_int_equal(sl_latency_us(t0 + 1, t0), 0);
}

static void parses_own_proc_stat_and_sees_cpu_time(void **state)
{
    struct sl_proc_stat a;
    struct sl_proc_stat b;
    struct timespec start;
    struct timespec now;
    volatile uint64_t x = 1;

    (void)state;
    assert_int_equal(sl_proc_stat_read(getpid(), &a), 0);
    assert_int_equal(a.pid, getpid());
    assert_int_equal(a.ppid, getppid());
    assert_int_equal(a.state, 'R');
    /* Burn 80 ms of CPU: utime + stime (10 ms ticks) must move. */
    (void)clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start);
    do {
        for (int i = 0; i < 100000; i++) {
            x = x * 6364136223846793005ull + 1;
        }
        (void)clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < 80000000L);
    assert_int_equal(sl_proc_stat_read(getpid(), &b), 0);
    assert_true(b.utime + b.stime > a.utime + a.stime);
    assert_int_equal(sl_proc_stat_read(0, &b), SL_ENOTFOUND);
}

static void parses_comm_with_spaces_and_parens(void **state)
{
    static const char line[] = "4242 (evil) S 1 (x) y) R 77 4242 4242 0 -1 4194560 500 0 0 0 "
                               "111 222 333 444 20 0 3 0 12345 1000000 250 18446744073709551615\n";
    static const char no_close[] = "4242 (evil S 77 4242 4242 0 -1 4194560 500 0 0 0 1 2 3 4\n";
    static const char short_line[] = "4242 (a) S 77 4242 4242 0 -1 4194560 500 0 0 0 111 222\n";
    static const char bad_num[] = "4242 (a) S 77 4242 4242 0 -1 4194560 500 0 0 0 11x 222 3 4\n";
    struct sl_proc_stat st;

    (void)state;
    memset(&st, 0, sizeof(st));
    assert_int_equal(sl_proc_stat_parse(line, sizeof(line) - 1, &st), 0);
    assert_int_equal(st.pid, 4242);
    assert_int_equal(st.state, 'R');
    assert_int_equal(st.ppid, 77);
    assert_int_equal(st.utime, 111);
    assert_int_equal(st.stime, 222);
    assert_int_equal(st.cutime, 333);
    assert_int_equal(st.cstime, 444);
    assert_int_equal(sl_proc_stat_parse(no_close, sizeof(no_close) - 1, &st), SL_EINVAL);
    assert_int_equal(sl_proc_stat_parse(short_line, sizeof(short_line) - 1, &st), SL_EINVAL);
    assert_int_equal(sl_proc_stat_parse(bad_num, sizeof(bad_num) - 1, &st), SL_EINVAL);
    assert_int_equal(sl_proc_stat_parse("", 0, &st), SL_EINVAL);
    /* Not NUL-terminated: only `n` bytes are read. */
    assert_int_equal(sl_proc_stat_parse(line, 40, &st), SL_EINVAL);
}

static void tree_sample_counts_descendants(void **state)
{
    struct sl_proc_sample alone;
    struct sl_proc_sample with_child;
    int self = getpid();
    pid_t child;
    int status;

    (void)state;
    assert_int_equal(sl_proc_sample_trees(&self, 1, &alone), 0);
    assert_true(alone.nprocs >= 1);
    assert_true(alone.rss_kib > 0);
    assert_true(alone.hwm_kib >= alone.rss_kib);
    child = fork();
    assert_true(child != -1);
    if (child == 0) {
        pause();
        _exit(0);
    }
    assert_int_equal(sl_proc_sample_trees(&self, 1, &with_child), 0);
    assert_int_equal(with_child.nprocs, alone.nprocs + 1);
    assert_true(with_child.rss_kib > alone.rss_kib);
    /* The child alone is a tree of one; the same root twice is counted once. */
    {
        int roots[2] = { (int)child, (int)child };

        assert_int_equal(sl_proc_sample_trees(roots, 2, &alone), 0);
        assert_int_equal(alone.nprocs, 1);
    }
    (void)kill(child, SIGKILL);
    assert_int_equal(waitpid(child, &status, 0), child);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(uniform_1_to_1000_has_exact_rank_percentiles),
        cmocka_unit_test(constant_gives_that_value_everywhere),
        cmocka_unit_test(bimodal_splits_at_the_right_rank),
        cmocka_unit_test(empty_histogram_reports_zero),
        cmocka_unit_test(every_bucket_is_within_the_stated_relative_error),
        cmocka_unit_test(merged_threads_equal_one_histogram),
        cmocka_unit_test(late_request_counts_from_its_scheduled_time),
        cmocka_unit_test(parses_own_proc_stat_and_sees_cpu_time),
        cmocka_unit_test(parses_comm_with_spaces_and_parens),
        cmocka_unit_test(tree_sample_counts_descendants),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
