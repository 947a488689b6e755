/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/web/test_audittail.c - the end of the audit log (control/web/audittail.h): the
 * last N lines newest first, across chunk boundaries; a last line without its newline (being
 * written) is left out; lines over the cap are skipped whole while their neighbours are kept; the
 * byte budget bounds the read (and the read says so); a callback's stop ends it; a missing file
 * is no line; a directory is refused; the filters of GET /api/v1/audit (each parameter, their
 * AND, the time range, bad values, the early end of a scan past `since`); the decisions of the
 * last hour per minute (a fixture log, tests/data/audit/per-minute.log: the minutes' edges, the
 * three decisions counted and the others not, lines of others, after the window, unreadable or
 * still being written left out, the scan's end at the first line past the window and its slack,
 * and "partial" when the budget ends it first). The suggested rule of a refusal is
 * test_suggest.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/err.h"
#include "control/web/audittail.h"

#define MAX_SEEN 4096

/* What the callback saw. */
struct seen {
    size_t n;
    char *lines[MAX_SEEN];
    /* Accept only lines starting with this (NULL: all). */
    const char *prefix;
    /* Stop at a line starting with this (NULL: never). */
    const char *stop;
};

static enum sl_audittail_take collect(void *arg, const char *line, size_t n)
{
    struct seen *s = arg;
    char *copy;

    if (s->stop != NULL && n >= strlen(s->stop) && memcmp(line, s->stop, strlen(s->stop)) == 0) {
        return SL_AUDITTAIL_STOP;
    }
    if (s->prefix != NULL
        && (n < strlen(s->prefix) || memcmp(line, s->prefix, strlen(s->prefix)) != 0)) {
        return SL_AUDITTAIL_SKIP;
    }
    assert_true(s->n < MAX_SEEN);
    copy = test_malloc(n + 1);
    memcpy(copy, line, n);
    copy[n] = '\0';
    s->lines[s->n++] = copy;
    return SL_AUDITTAIL_COUNT;
}

static void seen_free(struct seen *s)
{
    for (size_t i = 0; i < s->n; i++) {
        test_free(s->lines[i]);
    }
    s->n = 0;
}

/* A temporary file holding `n` bytes of `p`; returns its path in `path` (64 bytes). */
static void write_file(char *path, const void *p, size_t n)
{
    int fd;

    (void)snprintf(path, 64, "/tmp/sl-audittail-XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, p, n), (ssize_t)n);
    assert_int_equal(close(fd), 0);
}

static void returns_the_last_lines_newest_first(void **state)
{
    const char text[] = "one\ntwo\nthree\nfour\n";
    struct seen s = { 0 };
    char path[64];

    (void)state;
    write_file(path, text, strlen(text));
    assert_int_equal(sl_audittail_read(path, 2, 1024, 1 << 20, collect, &s, NULL), 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.lines[0], "four");
    assert_string_equal(s.lines[1], "three");
    seen_free(&s);
    /* More asked than there are: all of them, the first line included. */
    assert_int_equal(sl_audittail_read(path, 100, 1024, 1 << 20, collect, &s, NULL), 0);
    assert_int_equal(s.n, 4);
    assert_string_equal(s.lines[3], "one");
    seen_free(&s);
    assert_int_equal(unlink(path), 0);
}

static void drops_a_last_line_still_being_written(void **state)
{
    const char text[] = "one\ntwo\n{\"half\":";
    struct seen s = { 0 };
    char path[64];

    (void)state;
    write_file(path, text, strlen(text));
    assert_int_equal(sl_audittail_read(path, 10, 1024, 1 << 20, collect, &s, NULL), 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.lines[0], "two");
    assert_string_equal(s.lines[1], "one");
    seen_free(&s);
    assert_int_equal(unlink(path), 0);
}

static void skips_empty_lines_and_counts_only_accepted_ones(void **state)
{
    const char text[] = "a1\n\nb2\na3\nb4\n\n";
    struct seen s = { 0 };
    char path[64];

    (void)state;
    write_file(path, text, strlen(text));
    s.prefix = "a";
    assert_int_equal(sl_audittail_read(path, 2, 1024, 1 << 20, collect, &s, NULL), 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.lines[0], "a3");
    assert_string_equal(s.lines[1], "a1");
    seen_free(&s);
    assert_int_equal(unlink(path), 0);
}

/* Many lines over many 64 KiB chunks: every line comes back whole and in order. */
static void lines_spanning_chunks_come_back_whole(void **state)
{
    size_t cap = 3000 * 64;
    char *text = test_malloc(cap);
    size_t len = 0;
    struct seen s = { 0 };
    char path[64];
    char want[64];

    (void)state;
    for (int i = 0; i < 3000; i++) {
        /* Lines of varying length, so that chunk edges fall everywhere. */
        len += (size_t)snprintf(text + len, cap - len, "line-%04d-%.*s\n", i, i % 37,
                                "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    }
    write_file(path, text, len);
    test_free(text);
    assert_int_equal(sl_audittail_read(path, 3000, 1024, 1 << 20, collect, &s, NULL), 0);
    assert_int_equal(s.n, 3000);
    for (int i = 0; i < 3000; i++) {
        (void)snprintf(want, sizeof(want), "line-%04d-%.*s", 2999 - i, (2999 - i) % 37,
                       "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
        assert_string_equal(s.lines[i], want);
    }
    seen_free(&s);
    assert_int_equal(unlink(path), 0);
}

/* A line of 300 KiB (over the cap, over several chunks) is skipped; its neighbours are not. */
static void a_huge_line_is_skipped_whole(void **state)
{
    size_t huge = 300 * 1024;
    size_t cap = huge + 64;
    char *text = test_malloc(cap);
    size_t len = 0;
    struct seen s = { 0 };
    char path[64];

    (void)state;
    len += (size_t)snprintf(text, cap, "before\n");
    memset(text + len, 'h', huge);
    len += huge;
    len += (size_t)snprintf(text + len, cap - len, "\nafter\n");
    write_file(path, text, len);
    test_free(text);
    assert_int_equal(sl_audittail_read(path, 10, 16 * 1024, 1 << 20, collect, &s, NULL), 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.lines[0], "after");
    assert_string_equal(s.lines[1], "before");
    seen_free(&s);
    /* A line just over the cap inside one chunk is skipped too; one at the cap is kept. */
    {
        char t2[64];

        (void)snprintf(t2, sizeof(t2), "12345\n123456\n1234\n");
        assert_int_equal(unlink(path), 0);
        write_file(path, t2, strlen(t2));
        assert_int_equal(sl_audittail_read(path, 10, 5, 1 << 20, collect, &s, NULL), 0);
        assert_int_equal(s.n, 2);
        assert_string_equal(s.lines[0], "1234");
        assert_string_equal(s.lines[1], "12345");
        seen_free(&s);
    }
    assert_int_equal(unlink(path), 0);
}

/* The budget bounds what is read: the oldest line cut by it is not returned, and the read says
 * it was cut; neither the file's start, the limit nor a stop is a cut. */
static void the_budget_bounds_the_read(void **state)
{
    const char text[] = "aaaaaaaaaa\nbbbbbbbbbb\ncccccccccc\n";
    struct seen s = { 0 };
    bool cut = false;
    char path[64];

    (void)state;
    write_file(path, text, strlen(text));
    /* 15 bytes from the end are "bbb\ncccccccccc\n": only the c line is whole. */
    assert_int_equal(sl_audittail_read(path, 10, 1024, 15, collect, &s, &cut), 0);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.lines[0], "cccccccccc");
    assert_true(cut);
    seen_free(&s);
    /* The whole file within the budget. */
    assert_int_equal(sl_audittail_read(path, 10, 1024, 33, collect, &s, &cut), 0);
    assert_int_equal(s.n, 3);
    assert_false(cut);
    seen_free(&s);
    /* The limit reached before the budget. */
    assert_int_equal(sl_audittail_read(path, 1, 1024, 15, collect, &s, &cut), 0);
    assert_int_equal(s.n, 1);
    assert_false(cut);
    seen_free(&s);
    /* A stop before the budget. */
    s.stop = "b";
    assert_int_equal(sl_audittail_read(path, 10, 1024, 25, collect, &s, &cut), 0);
    assert_int_equal(s.n, 1);
    assert_false(cut);
    seen_free(&s);
    assert_int_equal(unlink(path), 0);
}

/* A stop ends the read at once: nothing older is handed over, and it does not count. */
static void a_stop_ends_the_read(void **state)
{
    const char text[] = "a1\nb2\na3\nstop\na4\n";
    struct seen s = { 0 };
    char path[64];

    (void)state;
    write_file(path, text, strlen(text));
    s.stop = "stop";
    assert_int_equal(sl_audittail_read(path, 10, 1024, 1 << 20, collect, &s, NULL), 0);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.lines[0], "a4");
    seen_free(&s);
    assert_int_equal(unlink(path), 0);
}

/* ---- filters ------------------------------------------------------------------------------ */

static void times_parse_to_milliseconds(void **state)
{
    int64_t ms = 0;

    (void)state;
    assert_int_equal(sl_audittail_time_parse("1970-01-01T00:00:00Z", &ms), 0);
    assert_int_equal(ms, 0);
    assert_int_equal(sl_audittail_time_parse("2026-11-30T02:07:42.286Z", &ms), 0);
    assert_int_equal(ms, 1796004462286LL);
    /* Fewer digits are tenths and hundredths; finer ones round up (a millisecond time compares
     * exactly with them). */
    assert_int_equal(sl_audittail_time_parse("2026-11-30T02:07:42.2Z", &ms), 0);
    assert_int_equal(ms, 1796004462200LL);
    assert_int_equal(sl_audittail_time_parse("2026-11-30t02:07:42.286000001z", &ms), 0);
    assert_int_equal(ms, 1796004462287LL);
    assert_int_equal(sl_audittail_time_parse("2026-11-30T02:07:42.286000000Z", &ms), 0);
    assert_int_equal(ms, 1796004462286LL);
    /* A leap day, and a time before 1970. */
    assert_int_equal(sl_audittail_time_parse("2024-02-29T00:00:00Z", &ms), 0);
    assert_int_equal(ms, 1709164800000LL);
    assert_int_equal(sl_audittail_time_parse("1969-12-31T23:59:59Z", &ms), 0);
    assert_int_equal(ms, -1000);
    /* Not UTC, not a date, not whole. */
    assert_int_equal(sl_audittail_time_parse("2026-11-30T02:07:42+01:00", &ms), SL_EINVAL);
    assert_int_equal(sl_audittail_time_parse("2026-11-30T02:07:42", &ms), SL_EINVAL);
    assert_int_equal(sl_audittail_time_parse("2026-11-30", &ms), SL_EINVAL);
    assert_int_equal(sl_audittail_time_parse("2025-02-29T00:00:00Z", &ms), SL_EINVAL);
    assert_int_equal(sl_audittail_time_parse("2026-13-01T00:00:00Z", &ms), SL_EINVAL);
    assert_int_equal(sl_audittail_time_parse("2026-11-30T24:00:00Z", &ms), SL_EINVAL);
    assert_int_equal(sl_audittail_time_parse("2026-11-30T02:07:42.Z", &ms), SL_EINVAL);
    assert_int_equal(sl_audittail_time_parse("2026-11-30T02:07:42.1234567891Z", &ms), SL_EINVAL);
    assert_int_equal(sl_audittail_time_parse("2026-11-30T02:07:42Zx", &ms), SL_EINVAL);
    assert_int_equal(sl_audittail_time_parse("yesterday", &ms), SL_EINVAL);
    assert_int_equal(sl_audittail_time_parse("", &ms), SL_EINVAL);
}

static void set(struct sl_audittail_filter *f, const char *param, const char *value)
{
    const char *why = NULL;

    assert_int_equal(sl_audittail_filter_set(f, param, value, &why), 0);
}

static void refuse(const char *param, const char *value, const char *want_why)
{
    struct sl_audittail_filter f;
    const char *why = NULL;

    memset(&f, 0, sizeof(f));
    assert_int_equal(sl_audittail_filter_set(&f, param, value, &why), SL_EINVAL);
    assert_non_null(why);
    assert_non_null(strstr(why, want_why));
}

static bool passes(const struct sl_audittail_filter *f, const char *line, const char *env_name)
{
    json_t *e = json_loads(line, 0, NULL);
    bool ok;

    assert_non_null(e);
    ok = sl_audittail_filter_match(f, e, env_name);
    json_decref(e);
    return ok;
}

#define LINE_A                                                                          \
    "{\"ts\":\"2026-11-30T02:00:00.000Z\",\"client\":\"sb_1\",\"environment\":\"e-1\"," \
    "\"decision\":\"deny\",\"reason\":\"host-not-allowed\",\"host\":\"b.Sluice.test\"}"
#define LINE_B                                                                        \
    "{\"ts\":\"2026-11-30T02:00:01.500Z\",\"client\":\"ci\",\"environment\":\"e-2\"," \
    "\"decision\":\"allow\",\"reason\":null,\"host\":\"a.sluice.test\"}"

static void a_zeroed_filter_keeps_every_line(void **state)
{
    struct sl_audittail_filter f;

    (void)state;
    memset(&f, 0, sizeof(f));
    assert_true(passes(&f, LINE_A, NULL));
    assert_true(passes(&f, "{}", NULL));
    /* An empty value is no filter. */
    set(&f, "client", "");
    set(&f, "since", "");
    assert_true(passes(&f, "{}", NULL));
}

static void each_filter_keeps_its_lines(void **state)
{
    struct sl_audittail_filter f;

    (void)state;
    memset(&f, 0, sizeof(f));
    set(&f, "client", "sb_1");
    assert_true(passes(&f, LINE_A, NULL));
    assert_false(passes(&f, LINE_B, NULL));
    /* Exact: a prefix is not the client. */
    memset(&f, 0, sizeof(f));
    set(&f, "client", "sb_");
    assert_false(passes(&f, LINE_A, NULL));

    /* The environment by the line's key or by its name. */
    memset(&f, 0, sizeof(f));
    set(&f, "environment", "e-1");
    assert_true(passes(&f, LINE_A, "web"));
    assert_false(passes(&f, LINE_B, "web"));
    memset(&f, 0, sizeof(f));
    set(&f, "environment", "web");
    assert_true(passes(&f, LINE_A, "web"));
    assert_false(passes(&f, LINE_A, NULL));
    assert_false(passes(&f, LINE_A, "webby"));

    memset(&f, 0, sizeof(f));
    set(&f, "decision", "allow");
    assert_false(passes(&f, LINE_A, NULL));
    assert_true(passes(&f, LINE_B, NULL));

    memset(&f, 0, sizeof(f));
    set(&f, "reason", "host-not-allowed");
    assert_true(passes(&f, LINE_A, NULL));
    assert_false(passes(&f, LINE_B, NULL));

    /* A substring of the host, in any case. */
    memset(&f, 0, sizeof(f));
    set(&f, "host", "SLUICE.t");
    assert_true(passes(&f, LINE_A, NULL));
    assert_true(passes(&f, LINE_B, NULL));
    memset(&f, 0, sizeof(f));
    set(&f, "host", "b.sl");
    assert_true(passes(&f, LINE_A, NULL));
    assert_false(passes(&f, LINE_B, NULL));
    assert_false(passes(&f, "{\"host\":null}", NULL));

    /* All of them at once: AND. */
    memset(&f, 0, sizeof(f));
    set(&f, "client", "sb_1");
    set(&f, "decision", "allow");
    assert_false(passes(&f, LINE_A, NULL));
    assert_false(passes(&f, LINE_B, NULL));
}

static void the_time_range_is_since_inclusive_until_exclusive(void **state)
{
    struct sl_audittail_filter f;
    const char *param = NULL;
    const char *why = NULL;

    (void)state;
    memset(&f, 0, sizeof(f));
    set(&f, "since", "2026-11-30T02:00:00Z");
    assert_true(passes(&f, LINE_A, NULL));
    assert_true(passes(&f, LINE_B, NULL));
    /* A line without a time fails a time filter. */
    assert_false(passes(&f, "{\"decision\":\"deny\"}", NULL));
    assert_false(passes(&f, "{\"ts\":\"soon\"}", NULL));
    set(&f, "until", "2026-11-30T02:00:01.5Z");
    assert_int_equal(sl_audittail_filter_check(&f, &param, &why), 0);
    assert_true(passes(&f, LINE_A, NULL));
    assert_false(passes(&f, LINE_B, NULL));
    memset(&f, 0, sizeof(f));
    set(&f, "since", "2026-11-30T02:00:00.0001Z");
    assert_false(passes(&f, LINE_A, NULL));
    assert_true(passes(&f, LINE_B, NULL));
    /* until must come after since. */
    set(&f, "until", "2026-11-30T02:00:00.0001Z");
    assert_int_equal(sl_audittail_filter_check(&f, &param, &why), SL_EINVAL);
    assert_string_equal(param, "until");
    assert_non_null(strstr(why, "after since"));
}

static void a_line_far_older_than_since_ends_the_scan(void **state)
{
    struct sl_audittail_filter f;
    json_t *near = json_loads("{\"ts\":\"2026-11-30T01:59:30.000Z\"}", 0, NULL);
    json_t *far = json_loads("{\"ts\":\"2026-11-30T01:58:59.999Z\"}", 0, NULL);

    (void)state;
    memset(&f, 0, sizeof(f));
    assert_false(sl_audittail_filter_is_past(&f, far));
    set(&f, "since", "2026-11-30T02:00:00Z");
    /* Within the slack (a line of another worker may come a little late): go on. */
    assert_false(sl_audittail_filter_is_past(&f, near));
    assert_true(sl_audittail_filter_is_past(&f, far));
    json_decref(near);
    json_decref(far);
}

static void bad_values_are_refused_with_what_they_must_be(void **state)
{
    char big[SL_AUDITTAIL_FILTER_VALUE_MAX + 2];

    (void)state;
    refuse("decision", "refused", "one of allow, deny, error, challenge, dns");
    refuse("decision", "DENY", "one of allow");
    refuse("reason", "Host Not Allowed", "a reason code");
    refuse("since", "yesterday", "RFC 3339 UTC time");
    refuse("until", "2026-11-30T02:00:00+00:00", "RFC 3339 UTC time");
    refuse("client", "a\tb", "without control characters");
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    refuse("host", big, "at most 512 bytes");
    refuse("color", "red", "a known parameter");
}

static void a_missing_file_is_no_line(void **state)
{
    struct seen s = { 0 };

    (void)state;
    assert_int_equal(sl_audittail_read("/tmp/sl-audittail-does-not-exist/x.log", 10, 1024, 1 << 20,
                                       collect, &s, NULL),
                     0);
    assert_int_equal(s.n, 0);
}

static void an_empty_file_or_a_zero_limit_is_no_line(void **state)
{
    struct seen s = { 0 };
    char path[64];

    (void)state;
    write_file(path, "", 0);
    assert_int_equal(sl_audittail_read(path, 10, 1024, 1 << 20, collect, &s, NULL), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(unlink(path), 0);
    write_file(path, "x\n", 2);
    assert_int_equal(sl_audittail_read(path, 0, 1024, 1 << 20, collect, &s, NULL), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(unlink(path), 0);
}

static void a_directory_is_refused(void **state)
{
    struct seen s = { 0 };

    (void)state;
    assert_int_equal(sl_audittail_read("/tmp", 10, 1024, 1 << 20, collect, &s, NULL), SL_ENOTFILE);
}

/* ---- decisions per minute ---------------------------------------------------------------- */

/* 2026-12-01T10:05:30Z, and the start of its minute. */
#define NOW_S    INT64_C(1796119530)
#define MINUTE_S INT64_C(1796119500)

/* Lines of client "sb_mine" only; counts the calls. */
static bool mine_only(void *arg, const json_t *entry)
{
    size_t *calls = arg;

    (*calls)++;
    return strcmp(json_string_value(json_object_get(entry, "client")), "sb_mine") == 0;
}

static bool every_line(void *arg, const json_t *entry)
{
    (void)arg;
    (void)entry;
    return true;
}

static void fixture_path(char *path, size_t cap)
{
    const char *data = getenv("SLUICE_TEST_DATA");

    assert_non_null(data);
    assert_true((size_t)snprintf(path, cap, "%s/audit/per-minute.log", data) < cap);
}

static void counts_the_last_hour_per_minute(void **state)
{
    struct sl_audittail_minute m[SL_AUDITTAIL_MINUTES];
    char path[4096];
    size_t calls = 0;
    bool partial = true;
    uint64_t total = 0;

    (void)state;
    fixture_path(path, sizeof(path));
    assert_int_equal(sl_audittail_per_minute(path, NOW_S, m, SL_AUDITTAIL_MINUTES,
                                             SL_AUDITTAIL_BUDGET_BYTES, mine_only, &calls,
                                             &partial),
                     0);
    /* The scan ended at the line from 09:04:10, before the file's start: not partial. */
    assert_false(partial);
    assert_true(m[59].start_s == MINUTE_S);
    assert_true(m[0].start_s == MINUTE_S - 59 * 60);
    for (size_t i = 1; i < SL_AUDITTAIL_MINUTES; i++) {
        assert_true(m[i].start_s == m[i - 1].start_s + 60);
    }
    /* 09:06:00.000 and 09:06:59.999 are the first minute's. */
    assert_int_equal(m[0].allowed, 1);
    assert_int_equal(m[0].refused, 1);
    assert_int_equal(m[0].errors, 0);
    /* 09:40: one error; the challenge, the lookup and the line with an offset are not counted. */
    assert_int_equal(m[34].allowed, 0);
    assert_int_equal(m[34].refused, 0);
    assert_int_equal(m[34].errors, 1);
    /* 10:05: two allowed and one refused of sb_mine; sb_other's line, 10:06:10 and the line
     * still being written are not. */
    assert_int_equal(m[59].allowed, 2);
    assert_int_equal(m[59].refused, 1);
    assert_int_equal(m[59].errors, 0);
    for (size_t i = 0; i < SL_AUDITTAIL_MINUTES; i++) {
        total += m[i].allowed + m[i].refused + m[i].errors;
    }
    /* Nothing else: the 09:30 line behind the stop, 09:05:30 (in the slack) are not counted. */
    assert_int_equal(total, 6);
    /* Asked only about lines inside the window: 09:06 x2, 09:40 x3, 10:05 x4. */
    assert_int_equal(calls, 9);
}

static void a_window_without_lines_is_zeros(void **state)
{
    struct sl_audittail_minute m[3];
    char path[4096];
    bool partial = true;

    (void)state;
    fixture_path(path, sizeof(path));
    /* A day later: the newest line is older than the window, the scan stops at once. */
    assert_int_equal(sl_audittail_per_minute(path, NOW_S + 86400, m, 3, SL_AUDITTAIL_BUDGET_BYTES,
                                             every_line, NULL, &partial),
                     0);
    assert_false(partial);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(m[i].allowed + m[i].refused + m[i].errors, 0);
    }
    assert_true(m[2].start_s == MINUTE_S + 86400);
    /* A missing file: zeros, not partial. */
    partial = true;
    assert_int_equal(sl_audittail_per_minute("/tmp/sl-audittail-does-not-exist/x.log", NOW_S, m, 3,
                                             SL_AUDITTAIL_BUDGET_BYTES, every_line, NULL, &partial),
                     0);
    assert_false(partial);
    assert_int_equal(m[0].allowed + m[1].allowed + m[2].allowed, 0);
    /* No log at all: the same. */
    m[1].allowed = 7;
    assert_int_equal(sl_audittail_per_minute(NULL, NOW_S, m, 3, SL_AUDITTAIL_BUDGET_BYTES,
                                             every_line, NULL, &partial),
                     0);
    assert_false(partial);
    assert_int_equal(m[1].allowed, 0);
    assert_true(m[2].start_s == MINUTE_S);
}

/* `n_old` lines from two hours before NOW_S, then `n_new` allowed lines of the current minute. */
static void write_hour(char *path, size_t n_old, size_t n_new)
{
    static const char old[] = "{\"ts\":\"2026-12-01T08:00:00.000Z\",\"decision\":\"deny\","
                              "\"client\":\"sb_mine\",\"pad\":\".........................\"}\n";
    static const char cur[] = "{\"ts\":\"2026-12-01T10:05:10.000Z\",\"decision\":\"allow\","
                              "\"client\":\"sb_mine\",\"pad\":\"........................\"}\n";
    size_t n = (n_old + n_new) * (sizeof(old) - 1);
    char *text = test_malloc(n);

    assert_int_equal(sizeof(old), sizeof(cur));
    for (size_t i = 0; i < n_old + n_new; i++) {
        memcpy(text + i * (sizeof(old) - 1), i < n_old ? old : cur, sizeof(old) - 1);
    }
    write_file(path, text, n);
    test_free(text);
}

static void the_budget_makes_the_count_partial(void **state)
{
    struct sl_audittail_minute m[SL_AUDITTAIL_MINUTES];
    char path[64];
    bool partial = false;

    (void)state;
    /* 3000 lines of this minute, about 300 KiB: more than a 64 KiB budget holds. */
    write_hour(path, 0, 3000);
    assert_int_equal(sl_audittail_per_minute(path, NOW_S, m, SL_AUDITTAIL_MINUTES, (size_t)64 << 10,
                                             every_line, NULL, &partial),
                     0);
    assert_true(partial);
    assert_true(m[59].allowed > 0 && m[59].allowed < 3000);
    /* The whole file within the budget (across several chunks): every line, not partial. */
    assert_int_equal(sl_audittail_per_minute(path, NOW_S, m, SL_AUDITTAIL_MINUTES,
                                             SL_AUDITTAIL_BUDGET_BYTES, every_line, NULL, &partial),
                     0);
    assert_false(partial);
    assert_int_equal(m[59].allowed, 3000);
    assert_int_equal(unlink(path), 0);
    /* Older lines first: the scan stops at the newest of them, well within the budget, although
     * the file's start is far: not partial. */
    write_hour(path, 3000, 10);
    assert_int_equal(sl_audittail_per_minute(path, NOW_S, m, SL_AUDITTAIL_MINUTES, (size_t)64 << 10,
                                             every_line, NULL, &partial),
                     0);
    assert_false(partial);
    assert_int_equal(m[59].allowed, 10);
    assert_int_equal(m[0].refused, 0);
    assert_int_equal(unlink(path), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(returns_the_last_lines_newest_first),
        cmocka_unit_test(drops_a_last_line_still_being_written),
        cmocka_unit_test(skips_empty_lines_and_counts_only_accepted_ones),
        cmocka_unit_test(lines_spanning_chunks_come_back_whole),
        cmocka_unit_test(a_huge_line_is_skipped_whole),
        cmocka_unit_test(the_budget_bounds_the_read),
        cmocka_unit_test(a_stop_ends_the_read),
        cmocka_unit_test(times_parse_to_milliseconds),
        cmocka_unit_test(a_zeroed_filter_keeps_every_line),
        cmocka_unit_test(each_filter_keeps_its_lines),
        cmocka_unit_test(the_time_range_is_since_inclusive_until_exclusive),
        cmocka_unit_test(a_line_far_older_than_since_ends_the_scan),
        cmocka_unit_test(bad_values_are_refused_with_what_they_must_be),
        cmocka_unit_test(a_missing_file_is_no_line),
        cmocka_unit_test(an_empty_file_or_a_zero_limit_is_no_line),
        cmocka_unit_test(a_directory_is_refused),
        cmocka_unit_test(counts_the_last_hour_per_minute),
        cmocka_unit_test(a_window_without_lines_is_zeros),
        cmocka_unit_test(the_budget_makes_the_count_partial),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
