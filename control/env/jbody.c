/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/env/jbody.c - the JSON body of an API request, parsed strictly, every refusal named
 * (see jbody.h).
 */
#include "control/env/jbody.h"

#include <stdio.h>
#include <string.h>

int sl_jbody_parse(const void *body, size_t n, unsigned flags, json_t **out, char *msg, size_t cap)
{
    json_error_t jerr;
    json_t *root;
    char *near;
    const char *what;

    *out = NULL;
    if (n == 0 && (flags & SL_JBODY_EMPTY_OK) != 0) {
        return 0;
    }
    if (n == 0) {
        (void)snprintf(msg, cap, "the body must be a JSON object");
        return SL_EINVAL;
    }
    /* Any JSON value is parsed (a scalar too), so that `null`, `42` or `"text"` are named as
     * what they are, valid JSON that is not an object, rather than as JSON the parser refused. */
    root = json_loadb(body, n,
                      JSON_REJECT_DUPLICATES | JSON_DECODE_ANY
                              | ((flags & SL_JBODY_ALLOW_NUL) != 0 ? JSON_ALLOW_NUL : 0),
                      &jerr);
    if (root == NULL) {
        if (json_error_code(&jerr) == json_error_out_of_memory) {
            return SL_ENOMEM;
        }
        /* jansson quotes the text near the error, which may be part of a secret. */
        near = strstr(jerr.text, " near '");
        if (near != NULL) {
            *near = '\0';
        }
        what = jerr.text[0] != '\0' ? jerr.text : "refused by the parser";
        if (json_error_code(&jerr) == json_error_null_character) {
            /* jansson's own text names a flag of its API, nothing a client can act on. */
            what = "a string holds \\u0000, a NUL byte, which is not allowed";
        }
        (void)snprintf(msg, cap, "the body is not valid JSON (line %d, column %d: %s)", jerr.line,
                       jerr.column, what);
        return SL_EINVAL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        (void)snprintf(msg, cap, "the body must be a JSON object");
        return SL_EINVAL;
    }
    *out = root;
    return 0;
}
