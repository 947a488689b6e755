/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/jpath.h - JSON paths for error messages (`$.environments.ci.rules[3].host`,
 * `egress.rules[2].host`), the quoting of untrusted text in them, and the list of the members
 * a document may have.
 *
 * A path lives in the caller's buffer `path` of `cap` bytes, NUL-terminated, `*len` bytes
 * long; it is cut when it would overrun, never overrun. Entering a member or an element returns
 * a mark; sl_jpath_pop() with that mark leaves it again. No JSON library is involved: these only
 * build strings.
 */
#ifndef SL_BASE_JPATH_H
#define SL_BASE_JPATH_H

#include <stddef.h>

/* Quoted texts and path keys are cut after this many bytes. */
#define SL_JPATH_QUOTE_MAX 64
/* Room for any sl_jpath_quote() output: quotes, 64 bytes escaped as \xNN, "..." and NUL. */
#define SL_JPATH_QUOTED_CAP (SL_JPATH_QUOTE_MAX * 4 + 8)

/* Writes `"s"` into `dst`, with `"` and `\` escaped, bytes outside printable ASCII as \xNN (so a
 * message never carries raw control bytes) and the text cut after SL_JPATH_QUOTE_MAX bytes
 * (marked `...`). For messages only; never for secrets. `cap` below 8 gives "". */
void sl_jpath_quote(char *dst, size_t cap, const char *s, size_t n);

/* Enters member `key`: `.key` (no dot on an empty path), or `["key"]` (quoted as above) for a
 * key that is not 1-64 characters of A-Z a-z 0-9 _ -. Returns the mark. */
size_t sl_jpath_key(char *path, size_t cap, size_t *len, const char *key);

/* Enters element `i`: `[i]`. Returns the mark. */
size_t sl_jpath_index(char *path, size_t cap, size_t *len, size_t i);

/* Cuts the path back to `mark`. */
void sl_jpath_pop(char *path, size_t *len, size_t mark);

/* Writes the `n` names of `names` as `a, b, c` into `dst` of `cap` > 0 bytes, cut when it is
 * full: the list of an "unknown field (expected ...)" message. */
void sl_jpath_join(char *dst, size_t cap, const char *const *names, size_t n);

#endif
