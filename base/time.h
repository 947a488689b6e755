/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/time.h - RFC 3339 date-times read into instants, for the parsers that meet them (a
 * static client's expiry in a snapshot, the audit tail's filters and its lines' "ts"). Pure
 * functions, no state, no time zone database (the civil calendar is computed).
 */
#ifndef SL_BASE_TIME_H
#define SL_BASE_TIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* The longest date-time read: `YYYY-MM-DDTHH:MM:SS` + 32 fraction digits + `+HH:MM`. */
#define SL_RFC3339_MAX 64

/* What sl_time_parse_rfc3339() read. */
struct sl_rfc3339 {
    int64_t ms;         /* milliseconds since 1970-01-01T00:00:00Z (negative before), the
                         * fraction cut after its third digit */
    bool finer;         /* the fraction had a digit other than 0 past its third */
    bool utc;           /* the offset was `Z` or `z` (not `+00:00`) */
    size_t frac_digits; /* how many fraction digits there were (0: none) */
};

/* Days from 1970-01-01 to the proleptic Gregorian date y-m-d (negative before 1970); m is
 * 1-12, d 1-31. Exact for any year an int64_t day count holds. */
int64_t sl_time_days_from_civil(int64_t y, int m, int d);

/* Reads the RFC 3339 §5.6 date-time s[0 .. n): `YYYY-MM-DD` `T` `HH:MM:SS`, an optional
 * fraction `.` and 1 or more digits, then `Z` or `+HH:MM`/`-HH:MM` (`t` and `z` as §5.6's note
 * allows). The date must exist (leap years counted), hours 00-23, minutes 00-59, seconds 00-60
 * (a leap second reads as the next second's 0); at most SL_RFC3339_MAX bytes. 0, or SL_EINVAL
 * for anything else (nothing in *out then). */
SL_MUST_CHECK int sl_time_parse_rfc3339(const char *s, size_t n, struct sl_rfc3339 *out);

#endif
