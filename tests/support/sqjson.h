/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/support/sqjson.h - JSON written with single quotes, so that a document fits in a C
 * string without a backslash per member: {'name':'ci'} becomes {"name":"ci"}. Tests of the
 * snapshot, environment, resolution and MCP parsers write their inputs and expectations so.
 * (A document that needs a real ' cannot be written this way.) sl_test_sqjson_snapshot() parses
 * such a document as a policy snapshot.
 */
#ifndef SL_TESTS_SUPPORT_SQJSON_H
#define SL_TESTS_SUPPORT_SQJSON_H

#include "base/buf.h"
#include "base/err.h"
#include "policy/snapshot.h"

/* Appends `text` to `b` with every ' turned into ". 0, or sl_buf_append_str()'s error (the
 * buffer's cap). */
SL_MUST_CHECK int sl_test_sqjson(struct sl_buf *b, const char *text);

/* sl_snapshot_parse() of `text` written with single quotes (at most `cap` bytes of JSON): its
 * result, the snapshot in *out (a new reference) on 0. `why` gets "" on 0, else the first
 * error as "path: message" (or the error code's text when there is no list). */
SL_MUST_CHECK int sl_test_sqjson_snapshot(const char *text, size_t cap, struct sl_snapshot **out,
                                          char *why, size_t whylen);

#endif
