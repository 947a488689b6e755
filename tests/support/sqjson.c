/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/support/sqjson.c - JSON written with single quotes (see sqjson.h).
 */
#include "tests/support/sqjson.h"

#include <stdio.h>

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

int sl_test_sqjson_snapshot(const char *text, size_t cap, struct sl_snapshot **out, char *why,
                            size_t whylen)
{
    struct sl_buf b;
    struct sl_policy_errors errs = { NULL, 0, false };
    int rc;

    *out = NULL;
    why[0] = '\0';
    sl_buf_init(&b, cap);
    rc = sl_test_sqjson(&b, text);
    if (rc == 0) {
        rc = sl_snapshot_parse(b.p, b.len, out, &errs);
    }
    if (rc != 0 && errs.count > 0) {
        (void)snprintf(why, whylen, "%s: %s", errs.items[0].path, errs.items[0].message);
    } else if (rc != 0) {
        (void)snprintf(why, whylen, "%s", sl_strerror(rc));
    }
    sl_policy_errors_finish(&errs);
    sl_buf_finish(&b);
    return rc;
}
