/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_cron.c - control/jobs/cron on arbitrary bytes.
 *
 * Invariants, not just "no crash": a refused expression has a non-empty message; an accepted
 * one has every field non-empty and inside its range; the next run after a few instants taken
 * from the input is -1 or a whole minute strictly later that matches every field (day fields
 * by the OR rule), and asking again from there moves strictly forward; the words are printable
 * ASCII that SL_CRON_WORDS_MAX holds with room to spare, and when they say "never" no run comes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mem.h"
#include "control/jobs/cron.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool matches(const struct sl_cron *c, int64_t t)
{
    time_t tt = (time_t)t;
    struct tm tm;
    bool dom;
    bool dow;

    if (gmtime_r(&tt, &tm) == NULL) {
        return false;
    }
    dom = (c->days >> tm.tm_mday) & 1;
    dow = (c->weekdays >> tm.tm_wday) & 1;
    return ((c->minutes >> tm.tm_min) & 1) && ((c->hours >> tm.tm_hour) & 1)
           && ((c->months >> (tm.tm_mon + 1)) & 1)
           && ((c->days_star || c->weekdays_star) ? (dom && dow) : (dom || dow));
}

static void check_next(const struct sl_cron *c, int64_t after)
{
    int64_t next = sl_cron_next(c, after);
    int64_t again;

    if (next == -1) {
        return;
    }
    if (next <= after || next % 60 != 0 || !matches(c, next)) {
        abort();
    }
    again = sl_cron_next(c, next);
    if (again != -1 && (again <= next || !matches(c, again))) {
        abort();
    }
}

static void check_words(const struct sl_cron *c, int64_t after)
{
    char out[SL_CRON_WORDS_MAX];
    size_t len;

    sl_cron_words(c, out, sizeof(out));
    len = strlen(out);
    /* Cut short would end exactly at the cap: the longest real text is far below it. */
    if (len == 0 || len + 1 >= sizeof(out)) {
        abort();
    }
    for (size_t i = 0; i < len; i++) {
        if (out[i] < 0x20 || out[i] > 0x7e) {
            abort();
        }
    }
    if (strncmp(out, "never", 5) == 0
        && (sl_cron_next(c, 0) != -1 || sl_cron_next(c, after) != -1)) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = size > SL_CRON_TEXT_MAX + 8 ? SL_CRON_TEXT_MAX + 8 : size;
    char *text = sl_malloc(n + 1);
    struct sl_cron c;
    char err[256];
    uint32_t seed = 0;

    if (text == NULL) {
        return 0;
    }
    memcpy(text, data, n);
    text[n] = '\0';
    err[0] = '\0';
    if (sl_cron_parse(text, &c, err, sizeof(err)) != 0) {
        if (err[0] == '\0' || memchr(err, '\0', sizeof(err)) == NULL) {
            abort();
        }
        sl_free(text);
        return 0;
    }
    if (c.minutes == 0 || (c.minutes >> 60) != 0 || c.hours == 0 || (c.hours >> 24) != 0
        || c.days == 0 || (c.days & 1) != 0 || c.months == 0 || (c.months & 1) != 0
        || (c.months >> 13) != 0 || c.weekdays == 0 || (c.weekdays >> 7) != 0) {
        abort();
    }
    for (size_t i = 0; i < size; i++) {
        seed = seed * 31u + data[i];
    }
    check_next(&c, 0);
    check_next(&c, 1796083200);                    /* 2026-12-01 */
    check_next(&c, (int64_t)(seed % 4102444800u)); /* before 2100 */
    check_words(&c, (int64_t)(seed % 4102444800u));
    sl_free(text);
    return 0;
}
