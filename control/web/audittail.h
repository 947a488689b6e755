/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/audittail.h - the recent end of the proxy's audit log (docs/reference/proxy.md §4.7)
 * for GET /api/v1/audit and the dashboard's live tail, and the rule that would allow a policy
 * refusal (docs/reference/proxy.md §4.5).
 *
 * sl_audittail_read() reads a file backwards in chunks, from its end, never more than a byte
 * budget, and hands complete lines, newest first, to a callback; sl_audittail_per_minute() counts
 * the decisions of the last hour with it (GET /api/v1/overview). Both block on file I/O: call
 * them from a thread-pool job, never on the loop. sl_audittail_suggest() is pure.
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
/* Most bytes read from the end of the log for one call. */
#define SL_AUDITTAIL_BUDGET_BYTES ((size_t)4 << 20)

/* One complete line, without its '\n' (`line` borrowed for the call, not NUL-terminated,
 * `n` > 0). Returns true when the line counts towards the limit. */
typedef bool sl_audittail_line_fn(void *arg, const char *line, size_t n);

/* Calls `fn` for the lines of `path`, newest first, until `limit` lines were counted, the file's
 * start was reached, or `budget_bytes` were read from its end (then the oldest line read so
 * far, cut, is dropped). The last line is dropped when it does not end in '\n' (the proxy may be
 * writing it); empty lines and lines longer than `line_max` bytes are skipped (their bytes are
 * never held whole). Memory used: about 64 KiB + `line_max`.
 * Returns 0 (also when the file does not exist: no line), SL_ENOMEM, SL_ENOTFILE (not a regular
 * file) or a negative errno of open/read. */
SL_MUST_CHECK int sl_audittail_read(const char *path, size_t limit, size_t line_max,
                                    size_t budget_bytes, sl_audittail_line_fn *fn, void *arg);

/* GET /api/v1/overview: the minutes counted, the newest being the current one. */
#define SL_AUDITTAIL_MINUTES 60u
/* How far past the first minute's start the scan goes on reading before it stops: lines are
 * written in about the order they were made, not exactly (docs/reference/proxy.md §4.7). */
#define SL_AUDITTAIL_SLACK_S 60

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
 * object whose "ts" (RFC 3339 UTC, "YYYY-MM-DDTHH:MM:SS[.fff]Z") falls in one of the minutes and
 * `visible(arg, line)` says so; lines from after the last minute, without a readable "ts" or not
 * JSON are skipped. The file is read as sl_audittail_read() reads it (SL_AUDITTAIL_LINE_MAX, at
 * most `budget_bytes` from its end), newest first, until a line older than out[0]'s start by
 * more than SL_AUDITTAIL_SLACK_S. `*partial` is set when the scan ended before that line and
 * before the file's start (the budget was spent, or the file shrank under the scan): older lines
 * of the window were not counted. Returns 0 (a missing file: no line, not partial), SL_ENOMEM,
 * SL_ENOTFILE or a negative errno of open/read (then `out` holds what was counted).
 */
SL_MUST_CHECK int sl_audittail_per_minute(const char *path, int64_t now_s,
                                          struct sl_audittail_minute *out, size_t n,
                                          size_t budget_bytes, sl_audittail_visible_fn *visible,
                                          void *arg, bool *partial);

/* What would allow the refusal of audit line `entry` (a parsed object, borrowed) in the
 * environment named `env_name` (NULL: the line's "environment", which the proxy writes as the
 * snapshot's environment key, the id for environments of the control plane), in the words
 * of docs/reference/proxy.md §4.5: `to allow it, add {"host":"api.example.com","methods":["POST"]}
 * to environment ci-python`, or, for a method refused by a rule for exactly that host, `to allow
 * it, add "POST" to the methods of {"host":"api.example.com"} in environment ci-python`. A tunnel
 * (method null or CONNECT) gets a rule without methods; a port other than 80 and 443 goes
 * into the host. Only for decision "deny" (never "allow" or "challenge") with reason
 * host-not-allowed, port-not-allowed or method-not-allowed, a host of host characters, a method
 * that is an HTTP token and an environment name without control characters or quotes. Writes the
 * NUL-terminated text to `out` (`cap` bytes) and returns its length, 0 when there is no suggestion
 * (`out` is then ""), or SL_ETOOBIG when it does not fit. */
SL_MUST_CHECK int sl_audittail_suggest(const json_t *entry, const char *env_name, char *out,
                                       size_t cap);

#endif
