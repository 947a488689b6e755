/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/support/lines.c - message lists against expected lines (see lines.h).
 */
#include "tests/support/lines.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Longer lines are compared truncated: far above any message of the parsers under test. */
#define LINE_MAX_BYTES 1024

static bool matches(const char *line, const char *want)
{
    size_t wn = strlen(want);

    if (wn > 0 && want[wn - 1] == '*') {
        return strncmp(line, want, wn - 1) == 0;
    }
    return strcmp(line, want) == 0;
}

int sl_test_lines_check(sl_test_line_fn *line, const void *list, size_t n, const char *const *want,
                        char *why, size_t cap)
{
    char got[LINE_MAX_BYTES];
    size_t n_want = 0;

    while (want[n_want] != NULL) {
        n_want++;
    }
    for (size_t i = 0; i < n; i++) {
        line(list, i, got, sizeof(got));
        if (i >= n_want || !matches(got, want[i])) {
            (void)snprintf(why, cap, "line %zu\n  got:  %s\n  want: %s", i, got,
                           i < n_want ? want[i] : "(none)");
            return -1;
        }
    }
    if (n != n_want) {
        (void)snprintf(why, cap, "got %zu lines, want %zu", n, n_want);
        return -1;
    }
    return 0;
}
