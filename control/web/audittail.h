/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/audittail.h - the recent end of the proxy's audit log (docs/reference/proxy.md §4.7)
 * for GET /api/v1/audit, its grouped refusals, learn mode's suggestions and the dashboard's live
 * tail: the reader, and the filters of the API on its lines (docs/reference/api.md §5.7). The
 * rule that would allow a refusal is control/web/suggest's.
 *
 * sl_audittail_read() reads a file backwards in chunks, from its end, never more than a byte
 * budget, and hands complete lines, newest first, to a callback; sl_audittail_per_minute() counts
 * the decisions of the last hour with it (GET /api/v1/overview). Both block on file I/O: call
 * them from a thread-pool job, never on the loop. The filter functions are pure; a filter is
 * caller storage (zeroed: keeps every line), set one parameter at a time.
 */
#ifndef SL_CONTROL_WEB_AUDITTAIL_H
#define SL_CONTROL_WEB_AUDITTAIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"

/* GET /api/v1/audit?limit=N: the default and the largest N. */
#define SL_AUDITTAIL_DEFAULT 100u
#define SL_AUDITTAIL_MAX     500u
/* Longest audit line returned (longer ones are skipped); the proxy's own lines stay far below
 * it (host, path and names are capped there). */
#define SL_AUDITTAIL_LINE_MAX ((size_t)16 << 10)
/* GET /api/v1/audit/refusals: the groups answered at most, and tracked at most (the refusals of
 * further groups are counted as left out). */
#define SL_AUDITTAIL_GROUPS_MAX     200u
#define SL_AUDITTAIL_GROUPS_TRACKED 1000u
/* Most bytes read from the end of the log for one call. */
#define SL_AUDITTAIL_BUDGET_BYTES ((size_t)4 << 20)

/* What a callback makes of a line. */
enum sl_audittail_take {
    /* The line does not count towards the limit. */
    SL_AUDITTAIL_SKIP = 0,
    /* It counts. */
    SL_AUDITTAIL_COUNT,
    /* Stop reading: nothing older is wanted (the line does not count). */
    SL_AUDITTAIL_STOP,
};

/* One complete line, without its '\n' (`line` borrowed for the call, not NUL-terminated,
 * `n` > 0). */
typedef enum sl_audittail_take sl_audittail_line_fn(void *arg, const char *line, size_t n);

/* Calls `fn` for the lines of `path`, newest first, until `limit` lines were counted, `fn`
 * said stop, the file's start was reached, or `budget_bytes` were read from its end (then the
 * oldest line read so far, cut, is dropped). The last line is dropped when it does not end in
 * '\n' (the proxy may be writing it); empty lines and lines longer than `line_max` bytes are
 * skipped (their bytes are never held whole). Memory used: about 64 KiB + `line_max`.
 * `*cut` (when not NULL) is set to whether the budget ended the read with older bytes of the file
 * left unread (not the limit, not a stop, not the file's start).
 * Returns 0 (also when the file does not exist: no line), SL_ENOMEM, SL_ENOTFILE (not a regular
 * file) or a negative errno of open/read. */
SL_MUST_CHECK int sl_audittail_read(const char *path, size_t limit, size_t line_max,
                                    size_t budget_bytes, sl_audittail_line_fn *fn, void *arg,
                                    bool *cut);

/* ---- filters (GET /api/v1/audit?client=...&since=...) ---- */

/* Longest value of a text filter, in bytes (the proxy caps names at 256 bytes, hosts at 512). */
#define SL_AUDITTAIL_FILTER_VALUE_MAX 512u
/* A line this much older than `since` ends the scan: the file is in the order lines were made,
 * but lines of several workers may be a little out of order. */
#define SL_AUDITTAIL_SINCE_SLACK_MS ((int64_t)60 * 1000)

/* The lines wanted; every member empty (or `has_*` false) keeps every line. */
struct sl_audittail_filter {
    /* Exact client id. */
    char client[SL_AUDITTAIL_FILTER_VALUE_MAX + 1];
    /* The environment's id or name, exactly as the line names it (its "environment" or its
     * name). */
    char environment[SL_AUDITTAIL_FILTER_VALUE_MAX + 1];
    /* allow, deny, error, challenge or dns. */
    char decision[16];
    /* Exact reason code. */
    char reason[SL_AUDITTAIL_FILTER_VALUE_MAX + 1];
    /* A substring of the host, any case (stored lower-case). */
    char host[SL_AUDITTAIL_FILTER_VALUE_MAX + 1];
    /* Milliseconds since the epoch: since inclusive, until exclusive. */
    bool has_since;
    bool has_until;
    int64_t since_ms;
    int64_t until_ms;
};

/* The query parameters of a filter, in the order they are checked (NULL-terminated). */
extern const char *const sl_audittail_filter_params[];

/* Sets the filter parameter `param` (one of sl_audittail_filter_params) to `value` (NUL-
 * terminated, borrowed; "" leaves it unset). Returns 0, or SL_EINVAL with `*why` pointing at what
 * the value must be, in words after "must be " (a static string), e.g. "one of allow, deny, error,
 * challenge, dns". */
SL_MUST_CHECK int sl_audittail_filter_set(struct sl_audittail_filter *f, const char *param,
                                          const char *value, const char **why);

/* Checks the parameters together: `until` must come after `since`. Returns 0, or SL_EINVAL with
 * `*param` and `*why` set as by sl_audittail_filter_set(). */
SL_MUST_CHECK int sl_audittail_filter_check(const struct sl_audittail_filter *f, const char **param,
                                            const char **why);

/* Does the audit line `line` (a parsed object, borrowed), whose environment is named `env_name`
 * (NULL: unknown), pass `f`? A line without a time that parses fails a time filter. */
bool sl_audittail_filter_match(const struct sl_audittail_filter *f, const json_t *line,
                               const char *env_name);

/* Is `line` so much older than `since` (SL_AUDITTAIL_SINCE_SLACK_MS) that no older line can
 * pass? False without `since` or when the line has no time. */
bool sl_audittail_filter_is_past(const struct sl_audittail_filter *f, const json_t *line);

/* Parses an RFC 3339 UTC time (`YYYY-MM-DDTHH:MM:SS[.fraction]Z`, 't' and 'z' too) into
 * milliseconds since the epoch, a fraction finer than that rounded up (so comparing with
 * millisecond times is exact). Returns 0 or SL_EINVAL. */
SL_MUST_CHECK int sl_audittail_time_parse(const char *s, int64_t *ms);

/* ---- decisions per minute (GET /api/v1/overview) ---- */

/* The minutes counted, the newest being the current one. */
#define SL_AUDITTAIL_MINUTES 60u

/* The decisions of one minute. */
struct sl_audittail_minute {
    /* The minute's first second, seconds since the epoch (UTC). */
    int64_t start_s;
    /* Lines whose "decision" is allow, deny and error; other decisions (challenge, dns) are
     * not counted. */
    uint64_t allowed;
    uint64_t refused;
    uint64_t errors;
};

/* Whether the line `entry` (a parsed JSON object, borrowed) counts for the caller. */
typedef bool sl_audittail_visible_fn(void *arg, const json_t *entry);

/*
 * Counts the decisions of `path`'s lines (NULL: no log, every minute zero) per minute into
 * `out[0..n)`, oldest first: out[n - 1] is the minute holding `now_s` (seconds since the epoch),
 * each one's start_s set, minutes without lines left at zero. A line counts when it is a JSON
 * object whose "ts" parses (sl_audittail_time_parse()) into one of the minutes and
 * `visible(arg, line)` says so; lines from after the last minute, without a readable "ts" or not
 * JSON are skipped. The file is read by sl_audittail_read() (SL_AUDITTAIL_LINE_MAX, at most
 * `budget_bytes` from its end), newest first, until a line older than out[0]'s start by more
 * than SL_AUDITTAIL_SINCE_SLACK_MS (lines may be a little out of order). `*partial` is set when
 * the budget ended the read first (its `cut`): older lines of the window were not counted.
 * Returns 0 (a missing file: no line, not partial), SL_ENOMEM, SL_ENOTFILE or a negative errno of
 * open/read (then `out` holds what was counted).
 */
SL_MUST_CHECK int sl_audittail_per_minute(const char *path, int64_t now_s,
                                          struct sl_audittail_minute *out, size_t n,
                                          size_t budget_bytes, sl_audittail_visible_fn *visible,
                                          void *arg, bool *partial);

#endif
