/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/validate.h - the checks of a rule's method names and credential
 * (docs/reference/snapshot.md §3, docs/reference/proxy.md §4.6) that sl_snapshot_parse() applies,
 * for modules that must accept exactly what it accepts (the control plane validates environments
 * with these before it stores them).
 *
 * Each check gives a verdict and a static phrase that completes a message: the caller writes
 * the quoted text (never a credential value: it is secret) and the path around it.
 */
#ifndef SL_POLICY_VALIDATE_H
#define SL_POLICY_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>

/* Is `s` (`n` bytes) a header name a credential may be set under: an RFC 9110 token of
 * 1-SL_POLICY_HEADER_MAX characters that is not a framing, hop-by-hop or routing header (Host,
 * Content-Length, Transfer-Encoding, Connection, ...; any case)? When not, `*why` is set to a
 * phrase such as "is not a header name (1-128 characters)", to follow the quoted name. */
bool sl_policy_header_name_ok(const char *s, size_t n, const char **why);

enum sl_policy_method_fault {
    SL_POLICY_METHOD_OK = 0,
    /* Empty or longer than SL_POLICY_METHOD_LEN_MAX. */
    SL_POLICY_METHOD_LENGTH,
    /* A byte that is not an RFC 9110 tchar. */
    SL_POLICY_METHOD_NOT_TOKEN,
    /* A token with lowercase letters: methods are case-sensitive and never match lowercase. */
    SL_POLICY_METHOD_LOWERCASE,
};

/* What is wrong with method name `s` (`n` bytes); a non-token byte anywhere is reported before
 * lowercase letters. */
enum sl_policy_method_fault sl_policy_method_check(const char *s, size_t n);

/* The phrase for `f`, to follow the quoted method ("is not a method name (1-32 characters)");
 * NULL for SL_POLICY_METHOD_OK. */
const char *sl_policy_method_phrase(enum sl_policy_method_fault f);

enum sl_policy_value_fault {
    SL_POLICY_VALUE_OK = 0,
    SL_POLICY_VALUE_EMPTY,
    /* Longer than SL_POLICY_VALUE_MAX. */
    SL_POLICY_VALUE_TOO_LONG,
    SL_POLICY_VALUE_CR,
    SL_POLICY_VALUE_LF,
    /* Starts or ends with a space or a tab. */
    SL_POLICY_VALUE_EDGE_SPACE,
    /* A control character other than HTAB, or DEL. */
    SL_POLICY_VALUE_CONTROL,
};

/* What is wrong with credential value `s` (`n` bytes): RFC 9110 §5.5 field-value, without the
 * obs-text leniency about controls. Faults are reported in the order of the enum. */
enum sl_policy_value_fault sl_policy_credential_value_check(const char *s, size_t n);

/* The message for `f` ("must not be empty"); it says what is wrong, never what the value is.
 * NULL for SL_POLICY_VALUE_OK. */
const char *sl_policy_value_phrase(enum sl_policy_value_fault f);

#endif
