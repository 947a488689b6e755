/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/env/test_jbody.c - the JSON body of an API request (control/env/jbody.h):
 * what every route answers for a body the strict parser refuses (truncated JSON, a duplicate
 * key, a NUL in a string, an integer past 64 bits, not an object, empty), with line and
 * column, never quoting the body; NUL allowed only when asked; an empty body as no document
 * when asked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/err.h"
#include "control/env/jbody.h"

/* Parses the NUL-terminated `text` with `flags`; expects a refusal with exactly `want`. */
static void expect_refused(const char *text, unsigned flags, const char *want)
{
    char msg[SL_JBODY_MSG_MAX];
    json_t *doc = (json_t *)1;

    assert_int_equal(sl_jbody_parse(text, strlen(text), flags, &doc, msg, sizeof(msg)), SL_EINVAL);
    assert_null(doc);
    assert_string_equal(msg, want);
}

static void names_each_refusal_with_line_and_column(void **state)
{
    (void)state;
    expect_refused("{\"name\":\"a\",", 0,
                   "the body is not valid JSON (line 1, column 12: string or '}' expected near end "
                   "of file)");
    expect_refused("{\"name\":\"a\",\"scope\":\"read\",\"scope\":\"admin\"}", 0,
                   "the body is not valid JSON (line 1, column 34: duplicate object key)");
    expect_refused("{\"command\":\"a\\u0000b\"}", 0,
                   "the body is not valid JSON (line 1, column 21: a string holds \\u0000, a NUL "
                   "byte, which is not allowed)");
    expect_refused("{\"n\":123456789012345678901234567890}", 0,
                   "the body is not valid JSON (line 1, column 35: too big integer)");
    expect_refused("[1]", 0, "the body must be a JSON object");
    /* Valid JSON that is no object is named so, not as JSON the parser refused. */
    expect_refused("null", 0, "the body must be a JSON object");
    expect_refused("42", 0, "the body must be a JSON object");
    expect_refused("\"text\"", SL_JBODY_ALLOW_NUL, "the body must be a JSON object");
    expect_refused(" true\n", 0, "the body must be a JSON object");
    expect_refused("", 0, "the body must be a JSON object");
}

static void never_quotes_the_body(void **state)
{
    char msg[SL_JBODY_MSG_MAX];
    const char *text = "{\"value\":\"s3cr3t\\q\"}";
    json_t *doc = NULL;

    (void)state;
    assert_int_equal(sl_jbody_parse(text, strlen(text), 0, &doc, msg, sizeof(msg)), SL_EINVAL);
    assert_null(strstr(msg, "s3cr3t"));
    assert_non_null(strstr(msg, "the body is not valid JSON (line 1, column "));
}

static void allows_nul_and_an_empty_body_when_asked(void **state)
{
    char msg[SL_JBODY_MSG_MAX];
    const char *text = "{\"command\":\"a\\u0000b\"}";
    json_t *doc = NULL;

    (void)state;
    assert_int_equal(sl_jbody_parse(text, strlen(text), SL_JBODY_ALLOW_NUL, &doc, msg, sizeof(msg)),
                     0);
    assert_int_equal(json_string_length(json_object_get(doc, "command")), 3);
    json_decref(doc);
    doc = (json_t *)1;
    assert_int_equal(sl_jbody_parse(NULL, 0, SL_JBODY_EMPTY_OK, &doc, msg, sizeof(msg)), 0);
    assert_null(doc);
    assert_int_equal(sl_jbody_parse("{}", 2, 0, &doc, msg, sizeof(msg)), 0);
    assert_true(json_is_object(doc));
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_each_refusal_with_line_and_column),
        cmocka_unit_test(never_quotes_the_body),
        cmocka_unit_test(allows_nul_and_an_empty_body_when_asked),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
