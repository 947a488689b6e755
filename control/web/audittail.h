/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/audittail.h - the recent end of the proxy's audit log (docs/reference/proxy.md §4.7)
 * for GET /api/v1/audit and the dashboard's live tail, and the rule that would allow a policy
 * refusal (docs/reference/proxy.md §4.5).
 *
 * sl_audittail_read() reads a file backwards in chunks, from its end, never more than a byte
 * budget, and hands complete lines, newest first, to a callback. It blocks on file I/O: call it
 * from a thread-pool job, never on the loop. sl_audittail_suggest() is pure.
 */
#ifndef SL_CONTROL_WEB_AUDITTAIL_H
#define SL_CONTROL_WEB_AUDITTAIL_H

#include <stdbool.h>
#include <stddef.h>

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
