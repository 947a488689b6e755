/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/policy/test_placeholder.c - placeholder credentials and observe
 * (docs/reference/snapshot.md §3): the placeholder's shape, the scan and the replacement
 * (Bearer, any header, Basic decoded and encoded again), the mask; `placeholder_env`,
 * `placeholders` and `observe_until` in a snapshot, with their errors; and the decisions they
 * make: the placeholder replaced only toward its rule's host over TLS, placeholder-misuse in the
 * host name and the target, observe letting out what no rule allows until its deadline.
 *
 * JSON is written with single quotes and turned into double quotes before parsing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/buf.h"
#include "policy/decision.h"
#include "policy/host.h"
#include "policy/placeholder.h"
#include "policy/snapshot.h"
#include "tests/support/sqjson.h"

/* 2026-11-30T00:00:00Z. */
#define NOW 1795996800

#define PH_A "sluice-ph-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2"
#define PH_B "sluice-ph-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb3"
#define PH_C "sluice-ph-ccccccccccccccccccccccccccccccccccccccc4"

static const char policy[] =
        "{ 'version': 1, 'environments': {"
        "  'ci': { 'default': 'deny', 'rules': ["
        "    { 'host': 'api.openai.test',"
        "      'credential': { 'header': 'Authorization', 'value': 'sk-real-openai',"
        "                      'placeholder_env': 'OPENAI_API_KEY' } },"
        "    { 'host': 'api.anthropic.test', 'methods': ['POST'],"
        "      'credential': { 'header': 'x-api-key', 'value': 'sk-ant-real',"
        "                      'placeholder_env': 'ANTHROPIC_API_KEY' } },"
        "    { 'host': 'injected.test',"
        "      'credential': { 'header': 'Authorization', 'value': 'Bearer inj' } },"
        "    { 'host': 'other.test' },"
        "    { 'host': 'get-only.test', 'methods': ['GET'] },"
        "    { 'host': 'cred-get.test', 'methods': ['GET'],"
        "      'credential': { 'header': 'X-K', 'value': 'v' } },"
        "    { 'host': 'pinned.test:8443', 'tls': 'passthrough' },"
        "    { 'host': 'git.test' }"
        "  ] },"
        "  'learn': { 'default': 'deny', 'observe_until': '2026-11-30T01:00:00Z', 'rules': ["
        "    { 'host': 'get-only.test', 'methods': ['GET'] },"
        "    { 'host': 'cred-get.test', 'methods': ['GET'],"
        "      'credential': { 'header': 'X-K', 'value': 'v' } },"
        "    { 'host': 'pinned.test:8443', 'tls': 'passthrough' },"
        "    { 'host': 'plain-cred.test', 'credential': { 'header': 'X-K', 'value': 'v' } }"
        "  ] },"
        "  'over': { 'default': 'deny', 'observe_until': '2026-11-29T23:59:59Z' }"
        "}, 'clients': ["
        "  { 'id': 'sb', 'ip': '10.0.0.1', 'environment': 'ci',"
        "    'placeholders': { 'OPENAI_API_KEY': '" PH_A "', 'ANTHROPIC_API_KEY': '" PH_B "' } },"
        "  { 'id': 'static', 'ip': '10.0.0.2', 'environment': 'ci' },"
        "  { 'id': 'learner', 'ip': '10.0.0.3', 'environment': 'learn',"
        "    'git': { 'host': 'git.test', 'repo': 'acme/site', 'access': 'write',"
        "             'credential': { 'header': 'Authorization', 'value': 'Basic Z2l0' },"
        "             'default_branch': 'main' } },"
        "  { 'id': 'late', 'ip': '10.0.0.4', 'environment': 'over' },"
        "  { 'id': 'own', 'ip': '10.0.0.5', 'environment': 'ci', 'rules': ["
        "    { 'host': 'mine.test', 'credential': { 'header': 'Authorization', 'value': 'tok',"
        "      'placeholder_env': 'MINE' } } ],"
        "    'placeholders': { 'MINE': '" PH_C "' } }"
        "] }";

static struct sl_snapshot *parse_text(const char *text)
{
    struct sl_snapshot *s = NULL;
    char why[512];

    if (sl_test_sqjson_snapshot(text, (size_t)1 << 20, &s, why, sizeof(why)) != 0) {
        fail_msg("policy invalid: %s", why);
    }
    return s;
}

/* The first error of `text`, "path: message", into `out`; "" when it parses. */
static void first_error(const char *text, char *out, size_t cap)
{
    struct sl_snapshot *s = NULL;
    int rc = sl_test_sqjson_snapshot(text, (size_t)1 << 20, &s, out, cap);

    if (rc != 0) {
        assert_int_equal(rc, SL_EPOLICY);
    }
    sl_snapshot_unref(s);
}

static int setup(void **state)
{
    *state = parse_text(policy);
    return 0;
}

static int teardown(void **state)
{
    sl_snapshot_unref(*state);
    return 0;
}

/* Decides `method` `host`:`port` (TLS or not, `target` may be NULL) for client `id`. */
static void decide(const struct sl_snapshot *s, const char *id, const char *host, uint16_t port,
                   const char *method, bool tls, const char *target, int64_t now,
                   struct sl_decision *d)
{
    struct sl_host h;
    struct sl_request_view v;

    assert_int_equal(sl_host_normalize(sl_slice_str(host), 0, &h, NULL), 0);
    v = (struct sl_request_view){ &h, port, method, tls, target };
    sl_policy_decide(s, sl_snapshot_find_client(s, id), &v, now, d);
}

/* ---- the placeholder itself ---- */

static void formats_and_recognises_placeholders(void **state)
{
    uint8_t raw[SL_PLACEHOLDER_RAW_BYTES];
    char a[SL_PLACEHOLDER_LEN + 1];
    char b[SL_PLACEHOLDER_LEN + 1];

    (void)state;
    memset(raw, 0, sizeof(raw));
    sl_placeholder_format(raw, a);
    assert_string_equal(a, "sluice-ph-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    memset(raw, 0xff, sizeof(raw));
    sl_placeholder_format(raw, b);
    assert_string_equal(b, "sluice-ph-7777777777777777777777777777777777777777");
    /* RFC 4648's test vector "foobar" spelt in lowercase: MZXW6YTBOI... */
    memset(raw, 0, sizeof(raw));
    memcpy(raw, "fooba", 5);
    sl_placeholder_format(raw, a);
    assert_memory_equal(a + SL_PLACEHOLDER_PREFIX_LEN, "mzxw6ytb", 8);
    assert_true(sl_placeholder_is_valid(a, strlen(a)));
    assert_true(sl_placeholder_is_valid(PH_A, strlen(PH_A)));
    assert_false(sl_placeholder_is_valid(PH_A, strlen(PH_A) - 1));
    assert_false(sl_placeholder_is_valid("sluice-ph-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 50));
    assert_false(sl_placeholder_is_valid("sluice-ph-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1", 50));
    assert_false(sl_placeholder_is_valid("sluice_ph-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 50));
    assert_true(sl_placeholder_env_ok("OPENAI_API_KEY", 14));
    assert_true(sl_placeholder_env_ok("_x1", 3));
    assert_false(sl_placeholder_env_ok("1X", 2));
    assert_false(sl_placeholder_env_ok("A-B", 3));
    assert_false(sl_placeholder_env_ok("", 0));
}

static const struct sl_placeholder set[] = {
    { "OPENAI_API_KEY", PH_A, "api.openai.test", "Authorization", "sk-real" },
    { "OTHER", PH_B, "other.test", "X-Key", "s3cr3t:with:colons" },
};

static void scans_values_and_basic_credentials(void **state)
{
    /* base64("user:" PH_A) and base64(PH_B ":pw"). */
    static const char basic_a[] =
            "Basic "
            "dXNlcjpzbHVpY2UtcGgtYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhMg==";
    static const char basic_b[] =
            "basic   "
            "c2x1aWNlLXBoLWJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYjM6cHc=";

    (void)state;
    assert_null(sl_placeholder_scan(set, 2, sl_slice_str("Bearer sk-nothing"), NULL));
    assert_null(sl_placeholder_scan(set, 0, sl_slice_str("Bearer " PH_A), NULL));
    assert_ptr_equal(sl_placeholder_scan(set, 2, sl_slice_str("Bearer " PH_A), NULL), &set[0]);
    assert_null(sl_placeholder_scan(set, 2, sl_slice_str("Bearer " PH_A), &set[0]));
    assert_ptr_equal(sl_placeholder_scan(set, 2, sl_slice_str(PH_A "x" PH_B), &set[0]), &set[1]);
    /* Another shape-alike that is none of the client's: not ours to refuse. */
    assert_null(sl_placeholder_scan(set, 2, sl_slice_str(PH_C), NULL));
    /* Cut short: not the placeholder. */
    assert_null(sl_placeholder_scan(set, 2, sl_slice_of(PH_A, 49), NULL));
    assert_ptr_equal(sl_placeholder_scan(set, 2, sl_slice_str(basic_a), NULL), &set[0]);
    assert_ptr_equal(sl_placeholder_scan(set, 2, sl_slice_str(basic_b), NULL), &set[1]);
    assert_null(sl_placeholder_scan(set, 2, sl_slice_str(basic_a), &set[0]));
    /* Not strict base64 (no padding): not read as Basic. */
    assert_null(sl_placeholder_scan(
            set, 2,
            sl_slice_str(
                    "Basic "
                    "dXNlcjpzbHVpY2UtcGgtYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhMg"),
            NULL));
}

/* sl_placeholder_replace() of `in` with set[i]: the text and the count. */
static void expect_replaced(size_t i, const char *in, const char *want, unsigned want_count)
{
    struct sl_buf b;
    unsigned count = 0;

    sl_buf_init(&b, 1 << 16);
    assert_int_equal(sl_placeholder_replace(&b, sl_slice_str(in), &set[i], &count), 0);
    assert_int_equal(b.len, strlen(want));
    assert_memory_equal(b.p, want, b.len);
    assert_int_equal(count, want_count);
    sl_buf_finish(&b);
}

static void replaces_in_bearer_any_header_and_basic(void **state)
{
    (void)state;
    expect_replaced(0, "Bearer " PH_A, "Bearer sk-real", 1);
    expect_replaced(0, PH_A, "sk-real", 1);
    expect_replaced(0, "token " PH_A " and " PH_A "!", "token sk-real and sk-real!", 2);
    expect_replaced(0, "Bearer sk-other", "Bearer sk-other", 0);
    /* Another client's or rule's placeholder is left alone (the scan refuses it). */
    expect_replaced(0, "Bearer " PH_B, "Bearer " PH_B, 0);
    /* user:PH_A -> user:sk-real */
    expect_replaced(0,
                    "Basic "
                    "dXNlcjpzbHVpY2UtcGgtYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhMg==",
                    "Basic dXNlcjpzay1yZWFs", 1);
    /* PH_B:pw -> s3cr3t:with:colons:pw (the user part), padding kept right. */
    expect_replaced(1,
                    "BASIC "
                    "c2x1aWNlLXBoLWJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYmJiYjM6cHc=",
                    "Basic czNjcjN0OndpdGg6Y29sb25zOnB3", 1);
    /* A Basic value without the placeholder is copied as sent. */
    expect_replaced(0, "Basic dXNlcjpwdw==", "Basic dXNlcjpwdw==", 0);
}

static void replacing_stops_at_the_buffers_cap(void **state)
{
    struct sl_buf b;
    unsigned count = 0;

    (void)state;
    sl_buf_init(&b, 8);
    assert_int_equal(sl_placeholder_replace(&b, sl_slice_str("Bearer " PH_A), &set[0], &count),
                     SL_ETOOBIG);
    sl_buf_finish(&b);
}

static void masks_every_placeholder_shape(void **state)
{
    char s[] = "/v1/" PH_A "/x?k=" PH_C;

    (void)state;
    assert_true(sl_placeholder_seen(s, strlen(s)));
    sl_placeholder_mask(s, strlen(s));
    assert_string_equal(s, "/v1/sluice-ph-****************************************/x?k="
                           "sluice-ph-****************************************");
    assert_false(sl_placeholder_seen(s, strlen(s)));
    assert_false(sl_placeholder_seen("/plain", 6));
}

/* ---- the snapshot ---- */

static void parses_placeholders_and_observe(void **state)
{
    struct sl_snapshot *s = *state;
    struct sl_decision d;

    /* A credential with a placeholder_env counts like any other (the git one too). */
    assert_int_equal(sl_snapshot_credential_count(s), 8);
    decide(s, "late", "x.test", 443, "GET", true, "/", NOW, &d);
    assert_false(d.allow);
    assert_false(d.observed);
}

static void reports_placeholder_errors(void **state)
{
    char why[1024];

    (void)state;
    first_error("{'version':1,'environments':{'e':{'default':'deny','rules':[{'host':'a.test',"
                "'credential':{'header':'A','value':'v','placeholder_env':'1BAD'}}]}}}",
                why, sizeof(why));
    assert_string_equal(why, "$.environments.e.rules[0].credential.placeholder_env: \"1BAD\" is "
                             "not a variable name (a shell identifier of 1-128 characters)");
    first_error("{'version':1,'environments':{'e':{'default':'deny','rules':["
                "{'host':'a.test','credential':{'header':'A','value':'v','placeholder_env':'K'}},"
                "{'host':'b.test','credential':{'header':'A','value':'w','placeholder_env':'K'}}"
                "]}}}",
                why, sizeof(why));
    assert_string_equal(why, "$.environments.e.rules[1].credential.placeholder_env: \"K\" is the "
                             "placeholder_env of rule 0 too (a variable holds one placeholder)");
    first_error("{'version':1,'environments':{'e':{'default':'deny'}},'clients':[{'id':'c',"
                "'ip':'10.0.0.1','environment':'e','placeholders':{'K':'" PH_A "'}}]}",
                why, sizeof(why));
    assert_string_equal(why, "$.clients[0].placeholders.K: no credential of this client or of its "
                             "environment has \"K\" as its placeholder_env");
    first_error("{'version':1,'environments':{'e':{'default':'deny','rules':[{'host':'a.test',"
                "'credential':{'header':'A','value':'v','placeholder_env':'K'}}]}},'clients':["
                "{'id':'c','ip':'10.0.0.1','environment':'e','placeholders':{'K':'sk-real'}}]}",
                why, sizeof(why));
    assert_string_equal(why, "$.clients[0].placeholders.K: a placeholder is \"sluice-ph-\" and 40 "
                             "characters of a-z and 2-7");
    first_error("{'version':1,'environments':{'e':{'default':'deny','rules':["
                "{'host':'a.test','credential':{'header':'A','value':'v','placeholder_env':'K'}},"
                "{'host':'b.test','credential':{'header':'A','value':'w','placeholder_env':'L'}}"
                "]}},'clients':[{'id':'c','ip':'10.0.0.1','environment':'e','placeholders':"
                "{'K':'" PH_A "','L':'" PH_A "'}}]}",
                why, sizeof(why));
    assert_string_equal(why, "$.clients[0].placeholders.L: the same placeholder is given to two "
                             "variables");
    first_error("{'version':1,'environments':{'e':{'default':'deny','rules':[{'host':'a.test',"
                "'credential':{'header':'A','value':'v','placeholder_env':'K'}}]}},'clients':["
                "{'id':'c','ip':'10.0.0.1','environment':'e','rules':[{'host':'b.test',"
                "'credential':{'header':'A','value':'v','placeholder_env':'K'}}],"
                "'placeholders':{'K':'" PH_A "'}}]}",
                why, sizeof(why));
    assert_string_equal(why, "$.clients[0].placeholders.K: both a rule of this client and one of "
                             "its environment name \"K\" as their placeholder_env");
    first_error("{'version':1,'environments':{'e':{'default':'deny','observe_until':'soon'}}}", why,
                sizeof(why));
    assert_string_equal(why, "$.environments.e.observe_until: \"soon\" is not an RFC 3339 "
                             "date-time (like 2026-11-30T23:00:00Z)");
    first_error("{'version':1,'environments':{'e':{'default':'deny','observe_until':7}}}", why,
                sizeof(why));
    assert_string_equal(why, "$.environments.e.observe_until: must be a string");
}

/* ---- decisions ---- */

static void replaces_only_toward_the_rules_host_over_tls(void **state)
{
    struct sl_snapshot *s = *state;
    struct sl_decision d;

    decide(s, "sb", "api.openai.test", 443, "POST", true, "/v1/chat", NOW, &d);
    assert_true(d.allow);
    assert_null(d.credential_header);
    assert_non_null(d.placeholder);
    assert_string_equal(d.placeholder->value, PH_A);
    assert_string_equal(d.placeholder->header, "Authorization");
    assert_string_equal(d.placeholder->secret, "sk-real-openai");
    assert_string_equal(d.placeholder->rule, "api.openai.test");
    assert_int_equal(d.n_placeholders, 2);
    /* Plain HTTP: refused as for any credential; TRACE too. */
    decide(s, "sb", "api.openai.test", 80, "POST", false, "/v1/chat", NOW, &d);
    assert_false(d.allow);
    assert_int_equal(d.reason, SL_REASON_CREDENTIAL_NEEDS_TLS);
    assert_null(d.placeholder);
    decide(s, "sb", "api.openai.test", 443, "TRACE", true, "/", NOW, &d);
    assert_int_equal(d.reason, SL_REASON_METHOD_NOT_ALLOWED);
    /* A rule's methods refuse as ever. */
    decide(s, "sb", "api.anthropic.test", 443, "GET", true, "/", NOW, &d);
    assert_int_equal(d.reason, SL_REASON_METHOD_NOT_ALLOWED);
    decide(s, "sb", "api.anthropic.test", 443, "POST", true, "/", NOW, &d);
    assert_true(d.allow);
    assert_string_equal(d.placeholder->env, "ANTHROPIC_API_KEY");
    /* Elsewhere: the scan set, nothing to replace. */
    decide(s, "sb", "other.test", 443, "GET", true, "/", NOW, &d);
    assert_true(d.allow);
    assert_null(d.placeholder);
    assert_int_equal(d.n_placeholders, 2);
    /* The injecting credential injects as ever. */
    decide(s, "sb", "injected.test", 443, "GET", true, "/", NOW, &d);
    assert_string_equal(d.credential_header, "Authorization");
    assert_string_equal(d.credential_value, "Bearer inj");
    /* A client without placeholders: nothing injected, nothing replaced, nothing scanned. */
    decide(s, "static", "api.openai.test", 443, "GET", true, "/", NOW, &d);
    assert_true(d.allow);
    assert_null(d.credential_header);
    assert_null(d.placeholder);
    assert_null(d.placeholders);
    /* A client's own rule with a placeholder. */
    decide(s, "own", "mine.test", 443, "GET", true, "/", NOW, &d);
    assert_string_equal(d.placeholder->value, PH_C);
    assert_string_equal(d.placeholder->secret, "tok");
}

static void refuses_placeholders_in_the_host_or_target(void **state)
{
    struct sl_snapshot *s = *state;
    struct sl_decision d;
    char hint[SL_POLICY_HINT_MAX];
    struct sl_host h;
    struct sl_request_view v;

    decide(s, "sb", "other.test", 443, "GET", true, "/k?key=" PH_A, NOW, &d);
    assert_false(d.allow);
    assert_int_equal(d.reason, SL_REASON_PLACEHOLDER_MISUSE);
    assert_ptr_equal(d.misused, d.placeholders);
    /* Toward its own host too: the placeholder is replaced in its header only. */
    decide(s, "sb", "api.openai.test", 443, "GET", true, "/" PH_A, NOW, &d);
    assert_int_equal(d.reason, SL_REASON_PLACEHOLDER_MISUSE);
    /* A host name (a CONNECT's), refused before its rule is looked at. */
    decide(s, "sb", PH_B ".evil.test", 443, NULL, true, NULL, NOW, &d);
    assert_int_equal(d.reason, SL_REASON_PLACEHOLDER_MISUSE);
    assert_string_equal(d.misused->env, "ANTHROPIC_API_KEY");
    assert_int_equal(sl_reason_status(d.reason), 403);
    assert_string_equal(sl_reason_code(d.reason), "placeholder-misuse");
    assert_int_equal(sl_host_normalize(sl_slice_str("other.test"), 0, &h, NULL), 0);
    v = (struct sl_request_view){ &h, 443, "GET", true, "/" };
    d.misused = &d.placeholders[0];
    assert_true(sl_policy_hint(&d, &v, hint, sizeof(hint)) > 0);
    assert_string_equal(hint, "the placeholder in OPENAI_API_KEY stands for a credential of "
                              "{\"host\":\"api.openai.test\"}: it is replaced only in its "
                              "Authorization header of requests over https to that host");
    /* Not the client's: no business of this check. */
    decide(s, "static", "other.test", 443, "GET", true, "/" PH_A, NOW, &d);
    assert_true(d.allow);
}

static void observe_lets_out_what_no_rule_allows(void **state)
{
    struct sl_snapshot *s = *state;
    struct sl_decision d;

    decide(s, "learner", "new.test", 443, "GET", true, "/x", NOW, &d);
    assert_true(d.allow);
    assert_true(d.observed);
    assert_int_equal(d.would_deny, SL_REASON_HOST_NOT_ALLOWED);
    assert_int_equal(d.reason, SL_REASON_NONE);
    assert_null(d.rule);
    /* A CONNECT, intercepted even to a port a passthrough rule names elsewhere. */
    decide(s, "learner", "pinned.test", 443, NULL, true, NULL, NOW, &d);
    assert_true(d.allow);
    assert_int_equal(d.would_deny, SL_REASON_PORT_NOT_ALLOWED);
    assert_false(d.passthrough);
    /* A method the winner refuses: out, without the winner's credential. */
    decide(s, "learner", "get-only.test", 443, "POST", true, "/", NOW, &d);
    assert_true(d.observed);
    assert_int_equal(d.would_deny, SL_REASON_METHOD_NOT_ALLOWED);
    assert_string_equal(d.rule, "get-only.test");
    decide(s, "learner", "cred-get.test", 443, "POST", true, "/", NOW, &d);
    assert_true(d.observed);
    assert_null(d.credential_header);
    /* What a rule refuses for safety stays refused: TRACE through a credential (outside the
     * rule's methods it is let out, without the credential, like any method). */
    decide(s, "learner", "plain-cred.test", 443, "TRACE", true, "/", NOW, &d);
    assert_false(d.allow);
    assert_false(d.observed);
    assert_int_equal(d.reason, SL_REASON_METHOD_NOT_ALLOWED);
    decide(s, "learner", "cred-get.test", 443, "TRACE", true, "/", NOW, &d);
    assert_true(d.observed);
    assert_null(d.credential_header);
    decide(s, "learner", "plain-cred.test", 80, "GET", false, "/", NOW, &d);
    assert_int_equal(d.reason, SL_REASON_CREDENTIAL_NEEDS_TLS);
    decide(s, "learner", "pinned.test", 8443, "GET", false, "/", NOW, &d);
    assert_int_equal(d.reason, SL_REASON_NOT_TLS);
    /* What is allowed is not observed; a git host let out by observe gets no git credential. */
    decide(s, "learner", "get-only.test", 443, "GET", true, "/", NOW, &d);
    assert_true(d.allow);
    assert_false(d.observed);
    decide(s, "learner", "git.test", 443, "GET", true,
           "/acme/site/info/refs?service=git-upload-pack", NOW, &d);
    assert_true(d.observed);
    assert_null(d.credential_header);
    assert_false(d.git_credential);
    /* At the deadline it is over, whoever has not rebuilt the snapshot. */
    decide(s, "learner", "new.test", 443, "GET", true, "/x", NOW + 3600, &d);
    assert_false(d.allow);
    assert_int_equal(d.reason, SL_REASON_HOST_NOT_ALLOWED);
    decide(s, "learner", "new.test", 443, "GET", true, "/x", NOW + 3599, &d);
    assert_true(d.observed);
    decide(s, "late", "new.test", 443, "GET", true, "/x", NOW, &d);
    assert_false(d.allow);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(formats_and_recognises_placeholders),
        cmocka_unit_test(scans_values_and_basic_credentials),
        cmocka_unit_test(replaces_in_bearer_any_header_and_basic),
        cmocka_unit_test(replacing_stops_at_the_buffers_cap),
        cmocka_unit_test(masks_every_placeholder_shape),
        cmocka_unit_test(reports_placeholder_errors),
        cmocka_unit_test_setup_teardown(parses_placeholders_and_observe, setup, teardown),
        cmocka_unit_test_setup_teardown(replaces_only_toward_the_rules_host_over_tls, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(refuses_placeholders_in_the_host_or_target, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(observe_lets_out_what_no_rule_allows, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
