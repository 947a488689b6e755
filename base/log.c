/* SPDX-License-Identifier: Apache-2.0 */
#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int log_level = SL_LOG_INFO;

static const char *const level_names[] = { "error", "warn", "info", "debug", "trace" };

void sl_log_set_level(enum sl_log_level level)
{
    atomic_store(&log_level, (int)level);
}

int sl_log_level_parse(const char *name, enum sl_log_level *out)
{
    for (size_t i = 0; i < SL_ARRAY_LEN(level_names); i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *out = (enum sl_log_level)i;
            return 0;
        }
    }
    return SL_EINVAL;
}

bool sl_log_enabled(enum sl_log_level level)
{
    return (int)level <= atomic_load(&log_level);
}

/* One write(2) per line keeps lines from different threads whole. */
static void write_line(char *line, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, line, n);
        if (w == -1) {
            return;
        }
        line += w;
        n -= (size_t)w;
    }
}

/* Formats the message after the `n` bytes of prefix already in `line` (SL_LOG_LINE_MAX bytes),
 * cuts it to fit with its newline, and writes it. */
static void finish_line(char *line, size_t n, const char *fmt, va_list ap) SL_PRINTF(3, 0);

static void finish_line(char *line, size_t n, const char *fmt, va_list ap)
{
    int w = vsnprintf(line + n, SL_LOG_LINE_MAX - n, fmt, ap);

    if (w < 0) {
        return;
    }
    n += (size_t)w;
    if (n > SL_LOG_LINE_MAX - 2) {
        n = SL_LOG_LINE_MAX - 2;
    }
    line[n++] = '\n';
    write_line(line, n);
}

void sl_log(enum sl_log_level level, uint64_t conn, const char *fmt, ...)
{
    char line[SL_LOG_LINE_MAX];
    struct timespec ts;
    struct tm tm;
    va_list ap;
    size_t n;
    int w;

    if (!sl_log_enabled(level)) {
        return;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    w = snprintf(line + n, sizeof(line) - n, ".%03ldZ %s conn=%llu ", ts.tv_nsec / 1000000L,
                 level_names[level], (unsigned long long)conn);
    if (w < 0) {
        return;
    }
    n += (size_t)w;
    va_start(ap, fmt);
    finish_line(line, n, fmt, ap);
    va_end(ap);
}

void sl_eprintf(const char *fmt, ...)
{
    char line[SL_LOG_LINE_MAX];
    va_list ap;

    memcpy(line, "sluice: ", 8);
    va_start(ap, fmt);
    finish_line(line, 8, fmt, ap);
    va_end(ap);
}
