/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/jobs/cron.h - 5-field cron expressions for scheduled jobs (docs/reference/api.md §5.5,
 * docs/jobs.md): `minute hour day-of-month month day-of-week`, each `*`, a number, a range `a-b`, a
 * step
 * `*` `/n` or `a-b/n` or `a/n`, or a comma list of those; months JAN-DEC and days SUN-SAT by
 * name (any case); day-of-week 0-7 with 0 and 7 both Sunday. Classic cron's rule for the two
 * day fields: when both are restricted (neither starts with `*`), a day matches when either
 * matches; otherwise the restricted one decides. Times are UTC.
 *
 * sl_cron_words() says a parsed expression in plain English ("at 02:30, Monday through Friday
 * (UTC)"), from what it matches rather than how it was written, so `MON-FRI` and `1-5` read alike.
 *
 * Pure: no clock, no allocation, no I/O. Every input is bounded (SL_CRON_TEXT_MAX bytes).
 */
#ifndef SL_CONTROL_JOBS_CRON_H
#define SL_CONTROL_JOBS_CRON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Longest expression accepted, in bytes. */
#define SL_CRON_TEXT_MAX 256
/* Room sl_cron_words() needs at most, the NUL included. */
#define SL_CRON_WORDS_MAX 1024

/* A parsed expression: bit i set = value i allowed. Caller storage. */
struct sl_cron {
    uint64_t minutes; /* 0-59 */
    uint32_t hours;   /* 0-23 */
    uint32_t days;    /* 1-31 */
    uint16_t months;  /* 1-12 */
    uint8_t weekdays; /* 0-6, Sunday = 0 */
    bool days_star;   /* day-of-month starts with '*' */
    bool weekdays_star;
};

/*
 * Parses `text` (NUL-terminated). Returns 0 with `*out` filled, or SL_EINVAL with a message in
 * `err` that names the field first, e.g. "day-of-week: 8 is out of range 0-7" or
 * "expected 5 fields (minute hour day-of-month month day-of-week), got 4".
 */
SL_MUST_CHECK int sl_cron_parse(const char *text, struct sl_cron *out, char *err, size_t errlen);

/* The first minute strictly after `after` (Unix seconds, UTC) that the expression matches, in
 * Unix seconds; -1 when none comes within nine years (e.g. `0 0 30 2 *`). */
int64_t sl_cron_next(const struct sl_cron *c, int64_t after);

/*
 * Writes what `c` matches in plain English into `out` (NUL-terminated; `cap` of
 * SL_CRON_WORDS_MAX always holds it whole, a smaller one cuts it short). The clock part first
 * ("every 15 minutes", "at minute 0 past every hour", "at 02:30 and 14:30", "every minute past
 * hours 9 through 17"), then the days ("Monday through Friday", "on day 1 of the month",
 * "on day 13 of the month or on Friday" when both day fields are restricted, "on every 2nd day
 * of the month if it is Monday" when one of them starts with `*`), the months ("in January and
 * July"), and " (UTC)" when more than the minute is restricted. An expression that can never
 * match (day 30 of February) starts with "never (no such date): ".
 */
void sl_cron_words(const struct sl_cron *c, char *out, size_t cap);

#endif
