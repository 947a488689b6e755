/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/log.h - the one place that writes diagnostics to standard error.
 *
 * Daemon lines are logfmt, one event per line:
 *   2026-11-30T01:40:00.123Z warn conn=17 msg="policy reload failed" file=/etc/p.json
 * The caller's format produces everything after `conn=`; it must never contain secrets,
 * cookies, authorization headers or bodies. Lines longer than SL_LOG_LINE_MAX are cut.
 * sl_eprintf() is for command-line tools: a plain "sluice: ..." line for a person.
 * All functions are thread-safe; a line is written with one write(2).
 */
#ifndef SL_BASE_LOG_H
#define SL_BASE_LOG_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

#define SL_LOG_LINE_MAX 4096

enum sl_log_level {
    SL_LOG_ERROR = 0,
    SL_LOG_WARN,
    SL_LOG_INFO,
    SL_LOG_DEBUG,
    SL_LOG_TRACE,
};

/* Sets the most verbose level that is written (default SL_LOG_INFO). */
void sl_log_set_level(enum sl_log_level level);

/* Parses "error", "warn", "info", "debug" or "trace" into `*out`. Returns 0 or SL_EINVAL. */
SL_MUST_CHECK int sl_log_level_parse(const char *name, enum sl_log_level *out);

/* True when a line of `level` would be written; lets callers skip expensive formatting. */
bool sl_log_enabled(enum sl_log_level level);

/* Writes one logfmt line. `conn` is the connection id, 0 when there is none. */
void sl_log(enum sl_log_level level, uint64_t conn, const char *fmt, ...) SL_PRINTF(3, 4);

/* Writes "sluice: <message>\n" to standard error, for command-line diagnostics. */
void sl_eprintf(const char *fmt, ...) SL_PRINTF(1, 2);

#ifdef SL_TRACE
#define sl_trace(conn, ...) sl_log(SL_LOG_TRACE, (conn), __VA_ARGS__)
#else
#define sl_trace(conn, ...) \
    do {                    \
    } while (0)
#endif

#endif
