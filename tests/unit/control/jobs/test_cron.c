/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/jobs/test_cron.c - control/jobs/cron: parsing the five fields (numbers, names,
 * ranges, steps, lists, `*`), errors that name the field, and the next run: across hour, day, month
 * and year ends, leap days, and classic cron's OR rule for day-of-month and day-of-week; the
 * expression in words (steps, ranges, lists, names, the day rule, never) and the runs after one
 * another.
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

static void expect_words(const char *expr, const char *want)
{
    struct sl_cron c = parse_ok(expr);
    char out[SL_CRON_WORDS_MAX];

    memset(out, 'x', sizeof(out));
    sl_cron_words(&c, out, sizeof(out));
    if (strcmp(out, want) != 0) {
        fail_msg("'%s': got \"%s\", want \"%s\"", expr, out, want);
    }
}

static void words_say_the_clock(void **state)
{
    (void)state;
    expect_words("* * * * *", "every minute");
    /* Steps: a divisor of the hour in minutes, else an ordinal; a stretch of a step. */
    expect_words("*/15 * * * *", "every 15 minutes");
    expect_words("*/30 * * * *", "every 30 minutes");
    expect_words("*/7 * * * *", "every 7th minute");
    expect_words("10/20 * * * *", "every 20th minute from 10 through 50");
    expect_words("0-30/10 * * * *", "every 10th minute from 0 through 30");
    expect_words("0,20,40 * * * *", "every 20 minutes");
    /* A single minute of every hour, lists and ranges of minutes. */
    expect_words("0 * * * *", "at minute 0 past every hour");
    expect_words("15,45 * * * *", "at minutes 15 and 45 past every hour");
    expect_words("0-4,30 * * * *", "at minutes 0 through 4 and 30 past every hour");
    expect_words("5,6 * * * *", "at minutes 5 and 6 past every hour");
    /* A few times of day are listed. */
    expect_words("30 2 * * *", "at 02:30 (UTC)");
    expect_words("30 2,14 * * *", "at 02:30 and 14:30 (UTC)");
    expect_words("0,30 9 * * *", "at 09:00 and 09:30 (UTC)");
    expect_words("0 */6 * * *", "at 00:00, 06:00, 12:00 and 18:00 (UTC)");
    /* Hours otherwise. */
    expect_words("0 9-17 * * *", "at minute 0 past hours 9 through 17 (UTC)");
    expect_words("* 9 * * *", "every minute past hour 9 (UTC)");
    expect_words("23 0-20/2 * * *", "at minute 23 past every 2nd hour from 0 through 20 (UTC)");
    expect_words("15 */3 * * *", "at minute 15 past every 3rd hour (UTC)");
    expect_words("*/15 9-17 * * *", "every 15 minutes past hours 9 through 17 (UTC)");
    expect_words("0 0,12 * * *", "at 00:00 and 12:00 (UTC)");
    expect_words("0,30 0,12,18 * * *", "every 30 minutes past hours 0, 12 and 18 (UTC)");
}

static void words_say_the_days(void **state)
{
    (void)state;
    /* Weekdays by name or number alike, Monday first; a run of three or more is a range. */
    expect_words("30 2 * * MON-FRI", "at 02:30, Monday through Friday (UTC)");
    expect_words("30 2 * * 1-5", "at 02:30, Monday through Friday (UTC)");
    expect_words("0 0 * * 5-7", "at 00:00, Friday through Sunday (UTC)");
    expect_words("0 0 * * sat,SUN", "at 00:00, on Saturday and Sunday (UTC)");
    expect_words("0 0 * * 0", "at 00:00, on Sunday (UTC)");
    expect_words("0 0 * * 7", "at 00:00, on Sunday (UTC)");
    expect_words("0 0 * * 1,3,5", "at 00:00, on Monday, Wednesday and Friday (UTC)");
    /* Days of the month. */
    expect_words("0 0 1 * *", "at 00:00, on day 1 of the month (UTC)");
    expect_words("0 0 1,15 * *", "at 00:00, on days 1 and 15 of the month (UTC)");
    expect_words("0 4 8-14 * *", "at 04:00, on days 8 through 14 of the month (UTC)");
    expect_words("0 0 */2 * *", "at 00:00, on every 2nd day of the month (UTC)");
    expect_words("0 0 2-30/7 * *",
                 "at 00:00, on every 7th day of the month from 2 through 30 (UTC)");
    /* Months, by name or number. */
    expect_words("0 0 1 1 *", "at 00:00, on day 1 of the month, in January (UTC)");
    expect_words("0 0 1 jan,JUL *", "at 00:00, on day 1 of the month, in January and July (UTC)");
    expect_words("0 0 1 */3 *", "at 00:00, on day 1 of the month, in every 3rd month (UTC)");
    expect_words("0 0 1 FEB-NOV/3 *",
                 "at 00:00, on day 1 of the month, in every 3rd month from February through "
                 "November (UTC)");
    expect_words("* * * 6-8 *", "every minute, in June through August (UTC)");
}

static void words_follow_the_day_rule(void **state)
{
    (void)state;
    /* Both restricted: either one. */
    expect_words("0 0 13 * FRI", "at 00:00, on day 13 of the month or on Friday (UTC)");
    expect_words("0 0 1 * MON-FRI",
                 "at 00:00, on day 1 of the month or on Monday through Friday (UTC)");
    expect_words("0 0 1,15 * 6,0",
                 "at 00:00, on days 1 and 15 of the month or on Saturday or Sunday (UTC)");
    /* ... so that one matching every day makes every day match. */
    expect_words("0 0 1-31 * MON", "at 00:00 (UTC)");
    expect_words("0 0 13 * 0-6", "at 00:00 (UTC)");
    /* One starts with `*`: both must match. */
    expect_words("0 0 */2 * MON", "at 00:00, on every 2nd day of the month if it is Monday (UTC)");
    expect_words("0 0 */2 * SAT,SUN",
                 "at 00:00, on every 2nd day of the month if it is Saturday or Sunday (UTC)");
    expect_words("0 0 */1 * FRI", "at 00:00, on Friday (UTC)");
}

static void words_say_never(void **state)
{
    (void)state;
    expect_words("0 0 30 2 *",
                 "never (no such date): at 00:00, on day 30 of the month, in February (UTC)");
    expect_words("0 0 31 4,6,9,11 *",
                 "never (no such date): at 00:00, on day 31 of the month, in April, June, "
                 "September and November (UTC)");
    /* A leap day comes, and so does a 31st in one of the months. */
    expect_words("0 0 29 2 *", "at 00:00, on day 29 of the month, in February (UTC)");
    expect_words("0 0 31 4,5 *", "at 00:00, on day 31 of the month, in April and May (UTC)");
    /* Either rule: Fridays of February come. */
    expect_words("0 0 30 2 FRI",
                 "at 00:00, on day 30 of the month or on Friday, in February (UTC)");
}

static void words_fit_and_cut_short(void **state)
{
    /* The longest kinds of lists in every field: runs of three apart by one. */
    static const char longest[] = "0-2,4-6,8-10,12-14,16-18,20-22,24-26,28-30,32-34,36-38,40-42,"
                                  "44-46,48-50,52-54,56-58 0-2,4-6,8-10,12-14,16-18,20-22 "
                                  "1-3,5-7,9-11,13-15,17-19,21-23,25-27,29-31 1-3,5-7,9-11 1-3,5-7";
    struct sl_cron c = parse_ok(longest);
    char out[SL_CRON_WORDS_MAX];
    char small[12];
    static const char tail[] =
            "January through March, May through July and September through November (UTC)";

    (void)state;
    sl_cron_words(&c, out, sizeof(out));
    assert_true(strlen(out) > 500 && strlen(out) < sizeof(out) - 100);
    assert_string_equal(out + strlen(out) - strlen(tail), tail);
    c = parse_ok("30 2 * * MON-FRI");
    sl_cron_words(&c, small, sizeof(small));
    assert_string_equal(small, "at 02:30, M");
    sl_cron_words(&c, small, 1);
    assert_string_equal(small, "");
}

/* The runs after one another, as the API lists the next five. */
static void next_runs_in_a_row(void **state)
{
    static const char *const want[] = { "2026-12-04 02:30", "2026-12-07 02:30", "2026-12-08 02:30",
                                        "2026-12-09 02:30", "2026-12-10 02:30" };
    struct sl_cron c = parse_ok("30 2 * * MON-FRI");
    int64_t t = at("2026-12-03 02:30");

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(want); i++) {
        t = sl_cron_next(&c, t);
        assert_int_equal(t, at(want[i]));
    }
    c = parse_ok("0 0 29 2 *");
    t = sl_cron_next(&c, at("2026-01-01 00:00"));
    assert_int_equal(t, at("2028-02-29 00:00"));
    t = sl_cron_next(&c, t);
    assert_int_equal(t, at("2032-02-29 00:00"));
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
        cmocka_unit_test(words_say_the_clock),
        cmocka_unit_test(words_say_the_days),
        cmocka_unit_test(words_follow_the_day_rule),
        cmocka_unit_test(words_say_never),
        cmocka_unit_test(words_fit_and_cut_short),
        cmocka_unit_test(next_runs_in_a_row),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
