/* SPDX-License-Identifier: Apache-2.0 */
#include "control/jobs/cron.h"

#include <stdarg.h>
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

/* ---- in words ----------------------------------------------------------------------------- */

#define ALL_MINUTES  ((((uint64_t)1) << 60) - 1)
#define ALL_HOURS    ((((uint64_t)1) << 24) - 1)
#define ALL_DAYS     (((((uint64_t)1) << 31) - 1) << 1)
#define ALL_MONTHS   (((((uint64_t)1) << 12) - 1) << 1)
#define ALL_WEEKDAYS 0x7fu

static const char *const month_words[] = { "January",   "February", "March",    "April",
                                           "May",       "June",     "July",     "August",
                                           "September", "October",  "November", "December" };
/* Indexed 1-7, Monday first: a week read aloud runs Monday through Sunday. */
static const char *const weekday_words[] = { "",         "Monday", "Tuesday",  "Wednesday",
                                             "Thursday", "Friday", "Saturday", "Sunday" };

/* A bounded text: appends past the end are cut, never overflow. */
struct words {
    char *p;
    size_t cap;
    size_t len;
};

static void put(struct words *w, const char *fmt, ...) SL_PRINTF(2, 3);

static void put(struct words *w, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (w->len + 1 >= w->cap) {
        return;
    }
    va_start(ap, fmt);
    n = vsnprintf(w->p + w->len, w->cap - w->len, fmt, ap);
    va_end(ap);
    if (n > 0) {
        w->len += (size_t)n < w->cap - w->len ? (size_t)n : w->cap - w->len - 1;
    }
}

/* How one value of a field is said. */
typedef void say_fn(struct words *w, int v);

static void say_number(struct words *w, int v)
{
    put(w, "%d", v);
}

static void say_month(struct words *w, int v)
{
    put(w, "%s", month_words[v - 1]);
}

static void say_weekday(struct words *w, int v)
{
    put(w, "%s", weekday_words[v]);
}

static int count(uint64_t bits)
{
    return __builtin_popcountll(bits);
}

static bool has(uint64_t bits, int v)
{
    return (bits >> v) & 1;
}

/* "2nd", "13th", "21st". */
static void say_ordinal(struct words *w, int v)
{
    const char *suffix = "th";

    if (v % 100 < 11 || v % 100 > 13) {
        suffix = v % 10 == 1 ? "st" : v % 10 == 2 ? "nd" : v % 10 == 3 ? "rd" : "th";
    }
    put(w, "%d%s", v, suffix);
}

/* The values of `bits` (within lo..hi) in order: single values, and runs of three or more as
 * "a through b", joined by ", " and a last " and " or " or " (`conj`). */
static void say_list(struct words *w, uint64_t bits, int lo, int hi, const char *conj, say_fn *say)
{
    int items[64][2];
    int n = 0;

    for (int v = lo; v <= hi; v++) {
        int end = v;

        if (!has(bits, v)) {
            continue;
        }
        while (end < hi && has(bits, end + 1)) {
            end++;
        }
        if (end - v >= 2) {
            items[n][0] = v;
            items[n++][1] = end;
        } else {
            for (int x = v; x <= end; x++) {
                items[n][0] = x;
                items[n++][1] = x;
            }
        }
        v = end;
    }
    for (int i = 0; i < n; i++) {
        if (i > 0) {
            put(w, "%s", i == n - 1 ? conj : ", ");
        }
        say(w, items[i][0]);
        if (items[i][1] != items[i][0]) {
            put(w, " through ");
            say(w, items[i][1]);
        }
    }
}

/* A step through a field: `n` values first, first + step, ... last. */
struct run {
    int first;
    int step;
    int last;
    int n;
};

/* True when the values of `bits` (within lo..hi) are such a step, at least two of them and
 * `step` 2 or more; `*r` says which. */
static bool is_progression(uint64_t bits, int lo, int hi, struct run *r)
{
    uint64_t want = 0;

    r->n = count(bits);
    if (r->n < 2) {
        return false;
    }
    r->first = lo;
    while (!has(bits, r->first)) {
        r->first++;
    }
    r->step = r->first + 1;
    while (!has(bits, r->step)) {
        r->step++;
    }
    r->step -= r->first;
    r->last = r->first;
    for (int v = r->first; v <= hi; v += r->step) {
        want |= (uint64_t)1 << v;
        r->last = has(bits, v) ? v : r->last;
    }
    /* The generated set may run past the last value: trim it there. */
    for (int v = r->last + r->step; v <= hi; v += r->step) {
        want &= ~((uint64_t)1 << v);
    }
    return r->step >= 2 && want == bits;
}

/* A step over the whole field from its start (`*` `/s`): "every 15 minutes" when it divides the
 * field evenly (`size`) and the unit has a plural (`units`), "every 7th minute" or "every 6th
 * hour" otherwise; a shorter stretch of a step when three or more values make it one. Returns
 * false when the values are better said as a list (two values are, but for "every 30
 * minutes"). */
static bool say_step(struct words *w, uint64_t bits, int lo, int hi, int size, const char *unit,
                     const char *units, say_fn *say)
{
    struct run r;

    if (!is_progression(bits, lo, hi, &r)) {
        return false;
    }
    if (r.first == lo && r.last + r.step > hi
        && (r.n >= 3 || (units != NULL && size % r.step == 0))) {
        if (size % r.step == 0 && units != NULL) {
            put(w, "every %d %s", r.step, units);
        } else {
            put(w, "every ");
            say_ordinal(w, r.step);
            put(w, " %s", unit);
        }
        return true;
    }
    if (r.n < 3) {
        return false;
    }
    put(w, "every ");
    say_ordinal(w, r.step);
    put(w, " %s from ", unit);
    say(w, r.first);
    put(w, " through ");
    say(w, r.last);
    return true;
}

/* The clock: minutes and hours. */
static void say_clock(struct words *w, uint64_t minutes, uint64_t hours)
{
    bool every_hour = hours == ALL_HOURS;
    bool listed = false;

    if (minutes != ALL_MINUTES && !every_hour && count(minutes) * count(hours) <= 4) {
        /* A few times of day: say them. */
        int n = count(minutes) * count(hours);
        int i = 0;

        put(w, "at ");
        for (int h = 0; h < 24; h++) {
            for (int m = 0; has(hours, h) && m < 60; m++) {
                if (has(minutes, m)) {
                    put(w, "%s%02d:%02d", i == 0 ? "" : i == n - 1 ? " and " : ", ", h, m);
                    i++;
                }
            }
        }
        return;
    }
    if (minutes == ALL_MINUTES) {
        put(w, "every minute");
    } else if (!say_step(w, minutes, 0, 59, 60, "minute", "minutes", say_number)) {
        put(w, "at minute%s ", count(minutes) > 1 ? "s" : "");
        say_list(w, minutes, 0, 59, " and ", say_number);
        listed = true;
    }
    if (every_hour) {
        if (listed) {
            put(w, " past every hour");
        }
        return;
    }
    put(w, " past ");
    if (!say_step(w, hours, 0, 23, 24, "hour", NULL, say_number)) {
        put(w, "hour%s ", count(hours) > 1 ? "s" : "");
        say_list(w, hours, 0, 23, " and ", say_number);
    }
}

static void say_month_days(struct words *w, uint64_t days)
{
    put(w, "on ");
    if (!say_step(w, days, 1, 31, 31, "day of the month", NULL, say_number)) {
        put(w, "day%s ", count(days) > 1 ? "s" : "");
        say_list(w, days, 1, 31, " and ", say_number);
        put(w, " of the month");
    }
}

/* Weekdays Monday first (1-7, Sunday 7). */
static uint64_t monday_first(uint8_t weekdays)
{
    return ((uint64_t)(weekdays & 0x7e)) | ((uint64_t)(weekdays & 1) << 7);
}

static bool is_one_run(uint64_t bits)
{
    uint64_t low = bits & -bits;

    /* bits + its lowest bit carries through a single run of ones. */
    return bits != 0 && ((bits + low) & bits) == 0;
}

/* Cron's day rule (sl_cron_next()'s day_matches()), said. Returns false when every day
 * matches. */
static bool say_days(struct words *w, const struct sl_cron *c)
{
    bool some_days = c->days != ALL_DAYS;
    bool some_weekdays = c->weekdays != ALL_WEEKDAYS;
    uint64_t week = monday_first(c->weekdays);

    if (!c->days_star && !c->weekdays_star) {
        /* Both restricted: either one is enough, so one that matches every day wins. */
        if (!some_days || !some_weekdays) {
            return false;
        }
        put(w, ", ");
        say_month_days(w, c->days);
        put(w, " or on ");
        say_list(w, week, 1, 7, " or ", say_weekday);
        return true;
    }
    if (!some_days && !some_weekdays) {
        return false;
    }
    put(w, ", ");
    if (some_days) {
        say_month_days(w, c->days);
        if (some_weekdays) {
            put(w, " if it is ");
            say_list(w, week, 1, 7, " or ", say_weekday);
        }
    } else {
        put(w, "%s", is_one_run(week) && count(week) >= 3 ? "" : "on ");
        say_list(w, week, 1, 7, " and ", say_weekday);
    }
    return true;
}

/* The day of the month decides, and none of its days comes in any of the months. */
static bool is_never(const struct sl_cron *c)
{
    static const int month_days[12] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

    if (c->days == ALL_DAYS || (!c->days_star && !c->weekdays_star)) {
        return false;
    }
    for (int m = 1; m <= 12; m++) {
        uint64_t in_month = (((uint64_t)1 << month_days[m - 1]) - 1) << 1;

        if (has(c->months, m) && (c->days & in_month) != 0) {
            return false;
        }
    }
    return true;
}

void sl_cron_words(const struct sl_cron *c, char *out, size_t cap)
{
    struct words w = { out, cap, 0 };
    bool utc = c->hours != ALL_HOURS || c->months != ALL_MONTHS;

    if (cap == 0) {
        return;
    }
    out[0] = '\0';
    if (is_never(c)) {
        put(&w, "never (no such date): ");
    }
    say_clock(&w, c->minutes, c->hours);
    utc = say_days(&w, c) || utc;
    if (c->months != ALL_MONTHS) {
        put(&w, ", in ");
        if (!say_step(&w, c->months, 1, 12, 12, "month", NULL, say_month)) {
            say_list(&w, c->months, 1, 12, " and ", say_month);
        }
    }
    if (utc) {
        put(&w, " (UTC)");
    }
}
