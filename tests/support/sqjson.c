/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/support/sqjson.c - JSON written with single quotes (see sqjson.h).
 */
#include "tests/support/sqjson.h"

int sl_test_sqjson(struct sl_buf *b, const char *text)
{
    size_t start = b->len;

    SL_TRY(sl_buf_append_str(b, text));
    for (size_t i = start; i < b->len; i++) {
        if (b->p[i] == '\'') {
            b->p[i] = '"';
        }
    }
    return 0;
}
