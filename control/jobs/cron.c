/* SPDX-License-Identifier: Apache-2.0 */
#include "control/jobs/cron.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* How far sl_cron_next() looks: nine years cover the longest gap between two February 29ths
 * (eight years, across a century that is not a leap year). */
#define SEARCH_DAYS (366 * 9)

struct field {
    const char *name;
    int lo;
    int hi;
    /* Names for lo, lo+1, ... (NULL when the field has none). */
    const char *const *names;
    int n_names;
};

static const char *const month_names[] = { "JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                           "JUL", "AUG", "SEP", "OCT", "NOV", "DEC" };
static const char *const day_names[] = { "SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT" };

static const struct field fields[5] = {
    { "minute", 0, 59, NULL, 0 },          { "hour", 0, 23, NULL, 0 },
    { "day-of-month", 1, 31, NULL, 0 },    { "month", 1, 12, month_names, 12 },
    { "day-of-week", 0, 7, day_names, 7 },
};

/* Reads a number or a name at `*p` (within [*p, end)). Returns 0 with `*v`, or SL_EINVAL with
 * the message in `err`. */
static int read_value(const struct field *f, const char **p, const char *end, int *v, char *err,
                      size_t errlen)
{
    const char *s = *p;
    long n = 0;
    size_t digits = 0;

    while (s < end && *s >= '0' && *s <= '9') {
        if (digits++ < 6) {
            n = n * 10 + (*s - '0');
        }
        s++;
    }
    if (digits > 0) {
        if (digits > 6 || n < f->lo || n > f->hi) {
            (void)snprintf(err, errlen, "%s: %.*s is out of range %d-%d", f->name,
                           (int)(digits > 12 ? 12 : digits), *p, f->lo, f->hi);
            return SL_EINVAL;
        }
        *v = (int)n;
        *p = s;
        return 0;
    }
    if (f->names != NULL && end - s >= 3) {
        for (int i = 0; i < f->n_names; i++) {
            if (strncasecmp(s, f->names[i], 3) == 0
                && (end - s == 3 || s[3] == '-' || s[3] == '/' || s[3] == ',')) {
                *v = (f->names == month_names ? 1 : 0) + i;
                *p = s + 3;
                return 0;
            }
        }
    }
    if (s >= end) {
        (void)snprintf(err, errlen, "%s: a value is missing", f->name);
    } else {
        (void)snprintf(err, errlen, "%s: '%c' is not a number%s", f->name,
                       (*s >= 0x21 && *s < 0x7f) ? *s : '?', f->names != NULL ? " or a name" : "");
    }
    return SL_EINVAL;
}

/* Parses one comma-separated item ([start, end)) into `bits`. */
static int parse_item(const struct field *f, const char *s, const char *end, uint64_t *bits,
                      char *err, size_t errlen)
{
    int lo = f->lo;
    int hi = f->hi;
    long step = 1;
    bool range = false;

    if (s == end) {
        (void)snprintf(err, errlen, "%s: an empty list item", f->name);
        return SL_EINVAL;
    }
    if (*s == '*') {
        s++;
        range = true;
    } else {
        SL_TRY(read_value(f, &s, end, &lo, err, errlen));
        hi = lo;
        if (s < end && *s == '-') {
            s++;
            SL_TRY(read_value(f, &s, end, &hi, err, errlen));
            if (hi < lo) {
                (void)snprintf(err, errlen, "%s: the range %d-%d runs backwards", f->name, lo, hi);
                return SL_EINVAL;
            }
            range = true;
        }
    }
    if (s < end && *s == '/') {
        size_t digits = 0;

        s++;
        step = 0;
        while (s < end && *s >= '0' && *s <= '9') {
            if (digits++ < 6) {
                step = step * 10 + (*s - '0');
            }
            s++;
        }
        if (digits == 0 || digits > 6 || step < 1 || step > f->hi) {
            (void)snprintf(err, errlen, "%s: the step must be a number from 1 to %d", f->name,
                           f->hi);
            return SL_EINVAL;
        }
        if (!range) {
            /* `a/n` means a to the end of the field, every n. */
            hi = f->hi;
        }
    }
    if (s != end) {
        (void)snprintf(err, errlen, "%s: unexpected '%c'", f->name,
                       (*s >= 0x21 && *s < 0x7f) ? *s : '?');
        return SL_EINVAL;
    }
    for (int v = lo; v <= hi; v += (int)step) {
        *bits |= (uint64_t)1 << v;
    }
    return 0;
}

static int parse_field(const struct field *f, const char *s, const char *end, uint64_t *bits,
                       char *err, size_t errlen)
{
    *bits = 0;
    for (;;) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *stop = comma != NULL ? comma : end;

        SL_TRY(parse_item(f, s, stop, bits, err, errlen));
        if (comma == NULL) {
            return 0;
        }
        s = comma + 1;
    }
}

int sl_cron_parse(const char *text, struct sl_cron *out, char *err, size_t errlen)
{
    const char *starts[5];
    const char *ends[5];
    uint64_t bits[5];
    size_t n = 0;
    size_t len = strnlen(text, SL_CRON_TEXT_MAX + 1);
    const char *p = text;
    const char *end = text + len;

    if (len > SL_CRON_TEXT_MAX) {
        (void)snprintf(err, errlen, "longer than %d bytes", SL_CRON_TEXT_MAX);
        return SL_EINVAL;
    }
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t')) {
            p++;
        }
        if (p == end) {
            break;
        }
        if (n == 5) {
            n++;
            break;
        }
        starts[n] = p;
        while (p < end && *p != ' ' && *p != '\t') {
            p++;
        }
        ends[n++] = p;
    }
    if (n != 5) {
        (void)snprintf(err, errlen,
                       "expected 5 fields (minute hour day-of-month month day-of-week), got %s%zu",
                       n > 5 ? "more than " : "", n > 5 ? (size_t)5 : n);
        return SL_EINVAL;
    }
    for (size_t i = 0; i < 5; i++) {
        SL_TRY(parse_field(&fields[i], starts[i], ends[i], &bits[i], err, errlen));
    }
    memset(out, 0, sizeof(*out));
    out->minutes = bits[0];
    out->hours = (uint32_t)bits[1];
    out->days = (uint32_t)bits[2];
    out->months = (uint16_t)bits[3];
    /* 7 is Sunday too. */
    out->weekdays = (uint8_t)((bits[4] | (bits[4] >> 7)) & 0x7f);
    out->days_star = *starts[2] == '*';
    out->weekdays_star = *starts[4] == '*';
    return 0;
}

static bool day_matches(const struct sl_cron *c, const struct tm *tm)
{
    bool dom = (c->days >> tm->tm_mday) & 1;
    bool dow = (c->weekdays >> tm->tm_wday) & 1;

    if (c->days_star || c->weekdays_star) {
        return dom && dow;
    }
    return dom || dow;
}

int64_t sl_cron_next(const struct sl_cron *c, int64_t after)
{
    int64_t first;
    int64_t day0;

    if (after < 0) {
        after = -60;
    }
    /* The first candidate minute, then day by day (UTC days are 86400 s: no leap seconds in
     * Unix time), each day's time of day read from the bits. */
    first = (after / 60 + 1) * 60;
    day0 = first / 86400;
    for (int64_t day = day0; day < day0 + SEARCH_DAYS; day++) {
        time_t t = (time_t)(day * 86400);
        int start = day == day0 ? (int)((first - day * 86400) / 60) : 0;
        struct tm tm;

        if (gmtime_r(&t, &tm) == NULL) {
            return -1;
        }
        if (!((c->months >> (tm.tm_mon + 1)) & 1) || !day_matches(c, &tm)) {
            continue;
        }
        for (int minute = start; minute < 24 * 60; minute++) {
            if (((c->hours >> (minute / 60)) & 1) && ((c->minutes >> (minute % 60)) & 1)) {
                return day * 86400 + (int64_t)minute * 60;
            }
        }
    }
    return -1;
}
