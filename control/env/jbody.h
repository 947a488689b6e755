/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/env/jbody.h - the JSON body of an API request (REST and the sandbox calls), parsed
 * strictly and in one way for every route: duplicate keys, a NUL (\u0000) in a string, an
 * integer past 64 bits and anything else jansson refuses are all refused with a message that
 * says what was wrong and where (docs/reference/api.md "Errors").
 *
 * Stateless; no allocation beyond the document it returns.
 */
#ifndef SL_CONTROL_ENV_JBODY_H
#define SL_CONTROL_ENV_JBODY_H

#include <stddef.h>

#include <jansson.h>

#include "base/err.h"

/* Room enough for every message sl_jbody_parse() writes. */
#define SL_JBODY_MSG_MAX 256

/* Flags of sl_jbody_parse(). */
enum {
    /* Accept \u0000 in strings (the caller's validator names the field that holds one). */
    SL_JBODY_ALLOW_NUL = 1u << 0,
    /* Accept an empty body as no document: 0 with *out NULL. */
    SL_JBODY_EMPTY_OK = 1u << 1,
};

/*
 * Parses the `n` bytes at `body` (borrowed; NULL when n is 0) as one JSON object.
 * Returns 0 with `*out` the object (owned; NULL for an empty body with SL_JBODY_EMPTY_OK);
 * SL_EINVAL with `*out` NULL and `msg` (`cap` bytes, at least SL_JBODY_MSG_MAX) the refusal for
 * the client, which answers 400 with it: "the body must be a JSON object" (empty, or JSON that
 * is not an object), "the body is not valid JSON (line L, column C: WHAT)", or for a NUL
 * "the body is not valid JSON (line L, column C: a string holds \u0000, a NUL byte, which
 * is not allowed)". The message never quotes the body (it may hold a secret). SL_ENOMEM when
 * out of memory.
 */
SL_MUST_CHECK int sl_jbody_parse(const void *body, size_t n, unsigned flags, json_t **out,
                                 char *msg, size_t cap);

#endif
