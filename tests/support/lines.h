/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/support/lines.h - checks a list of messages (the errors of a snapshot or an environment
 * body, one "where: what" line each) against the lines a test expects, in order; an expected
 * line ending in '*' matches any line that starts with what comes before the '*'.
 */
#ifndef SL_TESTS_SUPPORT_LINES_H
#define SL_TESTS_SUPPORT_LINES_H

#include <stddef.h>

#include "base/err.h"

/* The expected lines as a NULL-terminated array (a compound literal of the enclosing block):
 * SL_TEST_LINES("a: x", "b: y"); SL_TEST_LINES(NULL) expects none. */
#define SL_TEST_LINES(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* Writes the `i`-th line of `list` (NUL-terminated, truncated to `cap` bytes) to `out`. */
typedef void sl_test_line_fn(const void *list, size_t i, char *out, size_t cap);

/* Compares the `n` lines that `line` gives for `list` with `want` (NULL-terminated). 0 when
 * they match; -1 with the first difference described in `why` (`cap` bytes) otherwise. */
SL_MUST_CHECK int sl_test_lines_check(sl_test_line_fn *line, const void *list, size_t n,
                                      const char *const *want, char *why, size_t cap);

#endif
