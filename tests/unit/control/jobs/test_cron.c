/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/jobs/test_cron.c - control/jobs/cron: parsing the five fields (numbers, names,
 * ranges, steps, lists, `*`), errors that name the field, and the next run: across hour, day, month
 * and year ends, leap days, and classic cron's OR rule for day-of-month and day-of-week.
 */
#define _DEFAULT_SOURCE 1 /* timegm() for the expected times */

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "control/jobs/cron.h"

/* "YYYY-MM-DD HH:MM" UTC to Unix seconds. */
static int64_t at(const char *text)
{
    struct tm tm;

    memset(&tm, 0, sizeof(tm));
    assert_int_equal(sscanf(text, "%d-%d-%d %d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                            &tm.tm_hour, &tm.tm_min),
                     5);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm);
}

static struct sl_cron parse_ok(const char *text)
{
    struct sl_cron c;
    char err[256] = "";

    if (sl_cron_parse(text, &c, err, sizeof(err)) != 0) {
        fail_msg("'%s' was refused: %s", text, err);
    }
    return c;
}

/* The next run after `from`, as text, for `expr`. */
static void expect_next(const char *expr, const char *from, const char *want)
{
    struct sl_cron c = parse_ok(expr);
    int64_t got = sl_cron_next(&c, at(from));

    if (got != at(want)) {
        time_t t = (time_t)got;
        struct tm tm;
        char text[64] = "none";

        if (got >= 0 && gmtime_r(&t, &tm) != NULL) {
            (void)strftime(text, sizeof(text), "%Y-%m-%d %H:%M", &tm);
        }
        fail_msg("'%s' after %s: got %s, want %s", expr, from, text, want);
    }
}

static void expect_error(const char *expr, const char *want)
{
    struct sl_cron c;
    char err[256] = "";

    assert_int_equal(sl_cron_parse(expr, &c, err, sizeof(err)), SL_EINVAL);
    if (strcmp(err, want) != 0) {
        fail_msg("'%s': got error '%s', want '%s'", expr, err, want);
    }
}

static void parses_the_field_forms(void **state)
{
    struct sl_cron c;

    (void)state;
    c = parse_ok("* * * * *");
    assert_true(c.minutes == (((uint64_t)1 << 60) - 1));
    assert_int_equal(c.hours, (1u << 24) - 1);
    assert_int_equal(c.days, ((1u << 31) - 1) << 1);
    assert_int_equal(c.months, ((1u << 12) - 1) << 1);
    assert_int_equal(c.weekdays, 0x7f);
    assert_true(c.days_star && c.weekdays_star);

    c = parse_ok("5 0-3 1,15,31 2-4/2 MON-FRI");
    assert_true(c.minutes == (uint64_t)1 << 5);
    assert_int_equal(c.hours, 0xf);
    assert_int_equal(c.days, (1u << 1) | (1u << 15) | (1u << 31));
    assert_int_equal(c.months, (1u << 2) | (1u << 4));
    assert_int_equal(c.weekdays, 0x3e);
    assert_false(c.days_star || c.weekdays_star);

    c = parse_ok("*/15 */6 * jan,Dec sun");
    assert_true(c.minutes
                == (((uint64_t)1 << 0) | ((uint64_t)1 << 15) | ((uint64_t)1 << 30)
                    | ((uint64_t)1 << 45)));
    assert_int_equal(c.hours, (1u << 0) | (1u << 6) | (1u << 12) | (1u << 18));
    assert_int_equal(c.months, (1u << 1) | (1u << 12));
    assert_int_equal(c.weekdays, 1);

    /* 7 is Sunday too; `a/n` runs to the end of the field; tabs and extra spaces separate. */
    c = parse_ok("  10/20\t1  * *   7,6 ");
    assert_true(c.minutes == (((uint64_t)1 << 10) | ((uint64_t)1 << 30) | ((uint64_t)1 << 50)));
    assert_int_equal(c.weekdays, (1u << 0) | (1u << 6));
    c = parse_ok("0 0 * * 5-7");
    assert_int_equal(c.weekdays, (1u << 5) | (1u << 6) | (1u << 0));
}

static void errors_name_the_field(void **state)
{
    (void)state;
    expect_error("* * * * 8", "day-of-week: 8 is out of range 0-7");
    expect_error("60 * * * *", "minute: 60 is out of range 0-59");
    expect_error("* 24 * * *", "hour: 24 is out of range 0-23");
    expect_error("* * 0 * *", "day-of-month: 0 is out of range 1-31");
    expect_error("* * 32 * *", "day-of-month: 32 is out of range 1-31");
    expect_error("* * * 13 *", "month: 13 is out of range 1-12");
    expect_error("* * * FOO *", "month: 'F' is not a number or a name");
    expect_error("* * * * MONDAY", "day-of-week: 'M' is not a number or a name");
    expect_error("x * * * *", "minute: 'x' is not a number");
    expect_error("5-1 * * * *", "minute: the range 5-1 runs backwards");
    expect_error("*/0 * * * *", "minute: the step must be a number from 1 to 59");
    expect_error("*/ * * * *", "minute: the step must be a number from 1 to 59");
    expect_error("1,,2 * * * *", "minute: an empty list item");
    expect_error("1- * * * *", "minute: a value is missing");
    expect_error("*5 * * * *", "minute: unexpected '5'");
    expect_error("99999999 * * * *", "minute: 99999999 is out of range 0-59");
    expect_error("* * * *",
                 "expected 5 fields (minute hour day-of-month month day-of-week), got 4");
    expect_error("* * * * * *",
                 "expected 5 fields (minute hour day-of-month month day-of-week), got more "
                 "than 5");
    expect_error("", "expected 5 fields (minute hour day-of-month month day-of-week), got 0");
}

static void refuses_long_text(void **state)
{
    char text[SL_CRON_TEXT_MAX + 2];
    struct sl_cron c;
    char err[64];

    (void)state;
    memset(text, ' ', sizeof(text) - 1);
    text[sizeof(text) - 1] = '\0';
    memcpy(text, "* * * * *", 9);
    assert_int_equal(sl_cron_parse(text, &c, err, sizeof(err)), SL_EINVAL);
    assert_string_equal(err, "longer than 256 bytes");
}

static void next_runs(void **state)
{
    /* An expression, a time and the next run after it. */
    static const struct {
        const char *expr;
        const char *from;
        const char *want;
    } cases[] = {
        /* Strictly after: the same minute does not count. */
        { "* * * * *", "2026-11-30 10:00", "2026-11-30 10:01" },
        { "*/5 * * * *", "2026-11-30 10:03", "2026-11-30 10:05" },
        { "*/5 * * * *", "2026-11-30 10:55", "2026-11-30 11:00" },
        /* Across the day, month and year ends. */
        { "30 23 * * *", "2026-11-30 23:30", "2026-12-01 23:30" },
        { "0 0 1 * *", "2026-12-15 08:00", "2027-01-01 00:00" },
        { "59 23 31 12 *", "2026-12-31 23:59", "2027-12-31 23:59" },
        { "0 12 31 * *", "2026-11-01 00:00", "2026-12-31 12:00" },
        /* Only months with a 31st. */
        { "0 0 31 * *", "2027-01-31 00:00", "2027-03-31 00:00" },
        /* Leap days: the next February 29th is 2028; after 2096 it is 2104 (2100 is no leap
         * year). */
        { "0 0 29 2 *", "2026-03-01 00:00", "2028-02-29 00:00" },
        { "0 0 29 2 *", "2096-03-01 00:00", "2104-02-29 00:00" },
        /* Day of week: 2026-11-30 is a Monday. */
        { "0 9 * * MON-FRI", "2026-12-04 09:00", "2026-12-07 09:00" },
        { "0 9 * * 0", "2026-11-30 10:00", "2026-12-06 09:00" },
        { "0 9 * * 7", "2026-11-30 10:00", "2026-12-06 09:00" },
        /* Hours and minutes in lists and ranges. */
        { "15,45 8-9 * * *", "2026-11-30 09:45", "2026-12-01 08:15" },
    };

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(cases); i++) {
        expect_next(cases[i].expr, cases[i].from, cases[i].want);
    }
}

static void day_fields_follow_the_or_rule(void **state)
{
    (void)state;
    /* Both restricted: the 13th OR a Friday. After Monday 2026-11-30: Friday 2026-12-04. */
    expect_next("0 0 13 * FRI", "2026-11-30 00:00", "2026-12-04 00:00");
    /* ... and the 13th (a Sunday) when it comes first. */
    expect_next("0 0 13 * FRI", "2026-12-12 00:00", "2026-12-13 00:00");
    /* Day-of-week is `*`: only the day of month decides. */
    expect_next("0 0 13 * *", "2026-11-30 00:00", "2026-12-13 00:00");
    /* Day-of-month is `*` (even with a step): only the weekday decides. */
    expect_next("0 0 */1 * FRI", "2026-11-30 00:00", "2026-12-04 00:00");
    expect_next("0 0 * * FRI", "2026-11-30 00:00", "2026-12-04 00:00");
}

static void never_when_the_date_does_not_exist(void **state)
{
    struct sl_cron c;

    (void)state;
    c = parse_ok("0 0 30 2 *");
    assert_int_equal(sl_cron_next(&c, at("2026-01-01 00:00")), -1);
    c = parse_ok("0 0 31 4,6,9,11 *");
    assert_int_equal(sl_cron_next(&c, at("2026-01-01 00:00")), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_the_field_forms),
        cmocka_unit_test(errors_name_the_field),
        cmocka_unit_test(refuses_long_text),
        cmocka_unit_test(next_runs),
        cmocka_unit_test(day_fields_follow_the_or_rule),
        cmocka_unit_test(never_when_the_date_does_not_exist),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
