/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/validate.c - method names, credential header names and values (validate.h).
 */
#include "policy/validate.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "policy/snapshot.h"

_Static_assert(SL_POLICY_HEADER_MAX == 128, "the header name phrase says 1-128");
_Static_assert(SL_POLICY_METHOD_LEN_MAX == 32, "the method phrase says 1-32");
_Static_assert(SL_POLICY_VALUE_MAX == 8192, "the value phrase says 8192");

/* Headers that frame, route or end a hop (RFC 9110 §7.6.1, RFC 9112 §6-§7, docs/reference/proxy.md
 * §4.6): a credential under one of these names would let the policy rewrite the request's framing
 * or its destination. */
static const char *const forbidden_headers[] = {
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "proxy-connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    /* Expect: 100-continue changes how the body is exchanged with the upstream. */
    "expect",
    "proxy-authorization",
    "proxy-authenticate",
};

static bool is_tchar(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
           || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

bool sl_policy_header_name_ok(const char *s, size_t n, const char **why)
{
    if (n == 0 || n > SL_POLICY_HEADER_MAX) {
        *why = "is not a header name (1-128 characters)";
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_tchar((uint8_t)s[i])) {
            *why = "is not a header name (RFC 9110 token characters only)";
            return false;
        }
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(forbidden_headers); i++) {
        if (strlen(forbidden_headers[i]) == n && strncasecmp(s, forbidden_headers[i], n) == 0) {
            *why = "cannot carry a credential: it is a framing, hop-by-hop or routing header";
            return false;
        }
    }
    return true;
}

enum sl_policy_method_fault sl_policy_method_check(const char *s, size_t n)
{
    bool lower = false;

    if (n == 0 || n > SL_POLICY_METHOD_LEN_MAX) {
        return SL_POLICY_METHOD_LENGTH;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_tchar((uint8_t)s[i])) {
            return SL_POLICY_METHOD_NOT_TOKEN;
        }
        lower = lower || (s[i] >= 'a' && s[i] <= 'z');
    }
    return lower ? SL_POLICY_METHOD_LOWERCASE : SL_POLICY_METHOD_OK;
}

const char *sl_policy_method_phrase(enum sl_policy_method_fault f)
{
    switch (f) {
    case SL_POLICY_METHOD_OK:
        break;
    case SL_POLICY_METHOD_LENGTH:
        return "is not a method name (1-32 characters)";
    case SL_POLICY_METHOD_NOT_TOKEN:
        return "is not a method name (RFC 9110 token characters only)";
    case SL_POLICY_METHOD_LOWERCASE:
        return "would never match: methods are case-sensitive";
    }
    return NULL;
}

enum sl_policy_value_fault sl_policy_credential_value_check(const char *s, size_t n)
{
    if (n == 0) {
        return SL_POLICY_VALUE_EMPTY;
    }
    if (n > SL_POLICY_VALUE_MAX) {
        return SL_POLICY_VALUE_TOO_LONG;
    }
    if (memchr(s, '\r', n) != NULL) {
        return SL_POLICY_VALUE_CR;
    }
    if (memchr(s, '\n', n) != NULL) {
        return SL_POLICY_VALUE_LF;
    }
    if (s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' || s[n - 1] == '\t') {
        return SL_POLICY_VALUE_EDGE_SPACE;
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];

        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            return SL_POLICY_VALUE_CONTROL;
        }
    }
    return SL_POLICY_VALUE_OK;
}

const char *sl_policy_value_phrase(enum sl_policy_value_fault f)
{
    switch (f) {
    case SL_POLICY_VALUE_OK:
        break;
    case SL_POLICY_VALUE_EMPTY:
        return "must not be empty";
    case SL_POLICY_VALUE_TOO_LONG:
        return "longer than 8192 bytes";
    case SL_POLICY_VALUE_CR:
        return "contains a carriage return (CR), which would split the header";
    case SL_POLICY_VALUE_LF:
        return "contains a line feed (LF), which would split the header";
    case SL_POLICY_VALUE_EDGE_SPACE:
        return "must not start or end with a space or tab";
    case SL_POLICY_VALUE_CONTROL:
        return "contains a control character";
    }
    return NULL;
}
