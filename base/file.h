/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/file.h - reading a whole small file into a capped buffer (configuration, certificates,
 * keys), and making a private directory. Blocking: call them at start-up or on a thread-pool
 * job, never on a loop thread.
 */
#ifndef SL_BASE_FILE_H
#define SL_BASE_FILE_H

#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"

/*
 * Appends the content of the regular file `path` to `out` (whose cap bounds it). Returns 0,
 * SL_ENOTFOUND (no such file), SL_ETOOBIG (past the cap), SL_EIO (not a regular file, or a
 * read failed) or SL_ENOMEM, with a sentence naming the file in `err` (`errlen` bytes, may be
 * 0). The stack chunk used for reading is wiped (the file may hold key material); on failure
 * `out` may hold a prefix, which the caller wipes if it matters.
 */
SL_MUST_CHECK int sl_file_read(const char *path, struct sl_buf *out, char *err, size_t errlen);

/*
 * Makes the directory `dir` (mode 0700) unless it exists; an existing one is kept as it is.
 * Returns 0, or SL_EIO with a sentence naming `what` and the directory in `err` (`errlen`
 * bytes, may be 0) when it cannot be made or is not a directory.
 */
SL_MUST_CHECK int sl_file_ensure_dir(const char *dir, const char *what, char *err, size_t errlen);

#endif
