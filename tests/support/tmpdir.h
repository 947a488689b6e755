/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/support/tmpdir.h - scratch directories for tests that write files (a database, a key
 * file, a CA): made fresh under /tmp, removed with everything in them afterwards.
 *
 * Lifecycle: sl_test_tmpdir() in a test's setup -> files written below it (sl_test_write_text()
 * or the code under test) -> sl_test_rmtree() in its teardown. Nothing here asserts: callers
 * check the result.
 */
#ifndef SL_TESTS_SUPPORT_TMPDIR_H
#define SL_TESTS_SUPPORT_TMPDIR_H

#include <stddef.h>

#include "base/err.h"

/* Makes a new directory /tmp/`prefix`-XXXXXX (mode 0700, mkdtemp()) and writes its path to
 * `dir` (`cap` bytes). 0, or -1 (errno set; ENAMETOOLONG when the path does not fit). */
SL_MUST_CHECK int sl_test_tmpdir(char *dir, size_t cap, const char *prefix);

/* Writes `dir`/`name` to `out` (`cap` bytes). 0, or -1 when it does not fit. */
SL_MUST_CHECK int sl_test_join(char *out, size_t cap, const char *dir, const char *name);

/* Creates or truncates `path` and writes `text` to it ("" leaves it empty). 0, or -1 (errno
 * set) when it could not be opened, written or closed. */
SL_MUST_CHECK int sl_test_write_text(const char *path, const char *text);

/* Removes `path` and everything below it, depth first, following no symbolic link. 0, or -1
 * (errno set) when something could not be removed. */
SL_MUST_CHECK int sl_test_rmtree(const char *path);

#endif
