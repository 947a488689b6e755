/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/support/sqjson.h - JSON written with single quotes, so that a document fits in a C
 * string without a backslash per member: {'name':'ci'} becomes {"name":"ci"}. Tests of the
 * snapshot, environment, resolution and MCP parsers write their inputs and expectations so.
 * (A document that needs a real ' cannot be written this way.)
 */
#ifndef SL_TESTS_SUPPORT_SQJSON_H
#define SL_TESTS_SUPPORT_SQJSON_H

#include "base/buf.h"
#include "base/err.h"

/* Appends `text` to `b` with every ' turned into ". 0, or sl_buf_append_str()'s error (the
 * buffer's cap). */
SL_MUST_CHECK int sl_test_sqjson(struct sl_buf *b, const char *text);

#endif
