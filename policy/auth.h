/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/auth.h - the client's proxy credentials (docs/reference/snapshot.md §3 clients,
 * docs/reference/proxy.md §4.2).
 *
 * A sandbox sends `Proxy-Authorization: Basic base64(id:token)` (RFC 7617). This module takes
 * that header value apart and compares tokens without leaking where they differ. It parses
 * hostile bytes: bounded, no allocation, results in caller buffers.
 */
#ifndef SL_POLICY_AUTH_H
#define SL_POLICY_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "base/slice.h"

/* Longest client id (docs/reference/snapshot.md §3: `[A-Za-z0-9._-]{1,128}`) and token (1-256
 * visible ASCII). Buffers for sl_auth_parse_basic() need one more byte each for the terminator. */
#define SL_AUTH_ID_MAX    128
#define SL_AUTH_TOKEN_MAX 256

/* Parses a Proxy-Authorization value: the scheme `Basic` in any case, one or more spaces (not
 * tabs: RFC 9110 §11.4), and strict base64 (RFC 4648 §4: padding required, no line breaks or
 * inner spaces, zero trailing bits) of `id:token`. Spaces and tabs around the whole value are
 * ignored. The id is everything before the first ':', the token everything after it; both
 * must be non-empty and of visible ASCII, the id at most `id_cap - 1`, the token at most
 * `token_cap - 1` bytes. On success both are NUL-terminated in the caller's buffers and 0 is
 * returned; otherwise SL_EINVAL (SL_ETOOBIG when a part is too long for its buffer) and the
 * buffers hold unspecified bytes. */
SL_MUST_CHECK int sl_auth_parse_basic(struct sl_slice value, char *id, size_t id_cap, char *token,
                                      size_t token_cap);

/* Decodes strict base64 (RFC 4648 §4: a non-empty multiple of 4 characters of its alphabet, '='
 * only as one or two final pad characters, the bits the padding leaves over zero) from `in` into
 * `out` (`cap` bytes). Returns 0 with `*out_n` the decoded length, SL_EINVAL, or SL_ETOOBIG when
 * `cap` is too small. The placeholders' Basic values (policy/placeholder.h) are read with it too.
 */
SL_MUST_CHECK int sl_auth_base64_decode(struct sl_slice in, uint8_t *out, size_t cap,
                                        size_t *out_n);

/* Compares `a` (presented) with `b` (expected) in time that depends only on b.n, never on the
 * contents or on where they differ. */
bool sl_auth_equal(struct sl_slice a, struct sl_slice b);

#endif
