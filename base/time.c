/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/time.c - RFC 3339 date-times (see base/time.h).
 */
#include "base/time.h"

#include "base/hex.h"

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int days_in_month(int y, int m)
{
    static const int days[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

    return m == 2 && leap ? 29 : days[m - 1];
}

/* Howard Hinnant's days_from_civil: whole 400-year eras, then the year of the era counted from
 * March, so that a leap day is the last of its year. */
int64_t sl_time_days_from_civil(int64_t y, int m, int d)
{
    int64_t era;
    int64_t yoe;
    int64_t doy;
    int64_t doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* `+HH:MM`, `-HH:MM`, `Z` or `z` at s[0 .. n): seconds east of UTC, and whether it was Z. */
static int parse_offset(const char *s, size_t n, int64_t *out, bool *utc)
{
    int hh;
    int mm;

    if (n == 1 && (s[0] == 'Z' || s[0] == 'z')) {
        *out = 0;
        *utc = true;
        return 0;
    }
    if (n != 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':') {
        return SL_EINVAL;
    }
    hh = sl_dec_digits(s + 1, 2);
    mm = sl_dec_digits(s + 4, 2);
    if (hh < 0 || hh > 23 || mm < 0 || mm > 59) {
        return SL_EINVAL;
    }
    *out = (s[0] == '-' ? -1 : 1) * (int64_t)(hh * 3600 + mm * 60);
    *utc = false;
    return 0;
}

int sl_time_parse_rfc3339(const char *s, size_t n, struct sl_rfc3339 *out)
{
    struct sl_rfc3339 r = { 0 };
    size_t pos = 19;
    int64_t frac = 0;
    int64_t offset;
    int y;
    int mo;
    int d;
    int h;
    int mi;
    int sec;

    if (n < 20 || n > SL_RFC3339_MAX || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't')
        || s[13] != ':' || s[16] != ':') {
        return SL_EINVAL;
    }
    y = sl_dec_digits(s, 4);
    mo = sl_dec_digits(s + 5, 2);
    d = sl_dec_digits(s + 8, 2);
    h = sl_dec_digits(s + 11, 2);
    mi = sl_dec_digits(s + 14, 2);
    sec = sl_dec_digits(s + 17, 2);
    if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h < 0 || h > 23 || mi < 0
        || mi > 59 || sec < 0 || sec > 60) {
        return SL_EINVAL;
    }
    if (s[pos] == '.') {
        size_t start = ++pos;

        while (pos < n && is_digit(s[pos])) {
            if (pos - start < 3) {
                frac = frac * 10 + (s[pos] - '0');
            } else if (s[pos] != '0') {
                r.finer = true;
            }
            pos++;
        }
        r.frac_digits = pos - start;
        if (r.frac_digits == 0) {
            return SL_EINVAL;
        }
        for (size_t i = r.frac_digits; i < 3; i++) {
            frac *= 10;
        }
    }
    if (parse_offset(s + pos, n - pos, &offset, &r.utc) != 0) {
        return SL_EINVAL;
    }
    r.ms = (sl_time_days_from_civil(y, mo, d) * 86400 + (int64_t)h * 3600 + (int64_t)mi * 60 + sec
            - offset)
                   * 1000
           + frac;
    *out = r;
    return 0;
}
