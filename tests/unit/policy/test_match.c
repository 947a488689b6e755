/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/policy/test_match.c - the decision (docs/reference/snapshot.md §3 rule choice),
 * identity (§3 clients, docs/reference/proxy.md §4.2), hints (§4.5), refcounting across threads,
 * and the hot path's speed.
 *
 * The decision test is one table: each row is a request as the proxy would see it (raw host,
 * port, method, TLS or not, which client) and the verdict it must get. Hosts go through
 * sl_host_normalize() first, as in the proxy; a refused host is reason `bad-host`.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "base/buf.h"
#include "policy/auth.h"
#include "policy/decision.h"
#include "policy/host.h"
#include "policy/snapshot.h"
#include "tests/support/sqjson.h"

/* 2026-11-30T00:00:00Z: "now" for every row. */
#define NOW 1795996800

#define PATTERN_253                                                    \
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa." \
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb." \
    "ccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc." \
    "dddddddddddddddddddddddddddddddddddddddddddddddddd.github.com"
#define LABEL_64 "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"

static const char policy[] =
        "{ 'version': 1, 'environments': {"
        "  'ci': { 'default': 'deny', 'rules': ["
        "    { 'host': '*.github.com', 'methods': ['GET', 'HEAD'] },"
        "    { 'host': 'api.github.com', 'methods': ['GET', 'POST'] },"
        "    { 'host': 'raw.github.com:8443' },"
        "    { 'host': 'pkgs.example.org' },"
        "    { 'host': 'api.example.com:8443',"
        "      'credential': { 'header': 'Authorization', 'value': 'Bearer s3cr3t' } },"
        "    { 'host': '*.cdn.example.net' },"
        "    { 'host': '*.example.net', 'methods': ['GET'] },"
        "    { 'host': 'img-*.example.net', 'methods': ['GET', 'PUT'] },"
        "    { 'host': '10.0.0.7' },"
        "    { 'host': '[2001:db8::1]:8080' },"
        "    { 'host': '0x7f.1:9000' },"
        "    { 'host': 'dup.example.com', 'methods': ['GET'] },"
        "    { 'host': 'dup.example.com', 'methods': ['POST'] },"
        "    { 'host': 'secret.example.com',"
        "      'credential': { 'header': 'X-Api-Key', 'value': 'k3y' } }"
        "  ] },"
        "  'open': { 'default': 'allow', 'rules': ["
        "    { 'host': 'blocked.example.com', 'methods': ['GET'] },"
        "    { 'host': 'cred.example.com', 'credential': { 'header': 'X-K', 'value': 'v' } }"
        "  ] },"
        "  'glob': { 'default': 'deny', 'rules': ["
        "    { 'host': '*.org', 'methods': ['GET'] },"
        "    { 'host': '*.example.com' },"
        "    { 'host': 'x-*.example.org' }"
        "  ] },"
        "  'empty': { 'default': 'deny' }"
        "}, 'clients': ["
        "  { 'id': 'c-ci', 'ip': '10.1.0.1', 'environment': 'ci' },"
        "  { 'id': 'c-rt', 'ip': '10.1.0.2', 'environment': 'ci', 'rules': ["
        "    { 'host': 'git.example.com',"
        "      'credential': { 'header': 'Authorization', 'value': 'Basic Z2l0' } },"
        "    { 'host': 'api.github.com', 'methods': ['DELETE'] },"
        "    { 'host': '*.github.com', 'methods': ['PATCH'] } ] },"
        "  { 'id': 'c-open', 'ip': '10.1.0.3', 'environment': 'open' },"
        "  { 'id': 'c-glob', 'ip': '10.1.0.4', 'environment': 'glob' },"
        "  { 'id': 'c-empty', 'ip': '10.1.0.5', 'environment': 'empty' },"
        "  { 'id': 'c-old', 'ip': '10.1.0.6', 'environment': 'ci',"
        "    'expires_at': '2026-11-29T23:59:59Z' },"
        "  { 'id': 'c-now', 'ip': '10.1.0.7', 'environment': 'ci',"
        "    'expires_at': '2026-11-30T00:00:00Z' },"
        "  { 'id': 'c-new', 'ip': '10.1.0.8', 'environment': 'ci',"
        "    'expires_at': '2026-11-30T02:00:01+02:00' }"
        "] }";

static struct sl_snapshot *parse_text(const char *text)
{
    struct sl_snapshot *s = NULL;
    char why[512];

    if (sl_test_sqjson_snapshot(text, (size_t)64 << 20, &s, why, sizeof(why)) != 0) {
        fail_msg("policy invalid: %s", why);
    }
    return s;
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

struct row {
    const char *client;
    const char *host;
    uint16_t port;
    const char *method;
    bool tls;
    /* Expected: reason (SL_REASON_NONE = allowed), rule text or NULL, credential header. */
    enum sl_reason reason;
    const char *rule;
    const char *header;
};

#define ALLOW SL_REASON_NONE
#define HOST  SL_REASON_HOST_NOT_ALLOWED
#define PORT  SL_REASON_PORT_NOT_ALLOWED
#define METH  SL_REASON_METHOD_NOT_ALLOWED
#define NOTLS SL_REASON_CREDENTIAL_NEEDS_TLS
#define BAD   SL_REASON_BAD_HOST

static const struct row rows[] = {
    /* `*.github.com` and friends: the classic suffix cases. */
    { "c-ci", "github.com", 443, "GET", true, HOST, NULL, NULL },
    { "c-ci", "api.github.com", 443, "GET", true, ALLOW, "api.github.com", NULL },
    { "c-ci", "api.github.com", 443, "POST", true, ALLOW, "api.github.com", NULL },
    { "c-ci", "a.b.github.com", 443, "GET", true, ALLOW, "*.github.com", NULL },
    { "c-ci", "a.b.github.com", 443, "POST", true, METH, "*.github.com", NULL },
    { "c-ci", "evilgithub.com", 443, "GET", true, HOST, NULL, NULL },
    { "c-ci", "github.com.evil.com", 443, "GET", true, HOST, NULL, NULL },
    { "c-ci", "API.GitHub.COM.", 443, "GET", true, ALLOW, "api.github.com", NULL },
    { "c-ci", "WWW.GITHUB.COM", 443, "HEAD", true, ALLOW, "*.github.com", NULL },
    { "c-ci", "x.github.co", 443, "GET", true, HOST, NULL, NULL },
    { "c-ci", "github.com.", 443, "GET", true, HOST, NULL, NULL },
    /* Most specific wins, and never rescues: HEAD is fine for *.github.com, not for the exact
     * api.github.com rule that wins. */
    { "c-ci", "api.github.com", 443, "HEAD", true, METH, "api.github.com", NULL },
    { "c-ci", "api.github.com", 443, "DELETE", true, METH, "api.github.com", NULL },
    /* Ports: none = 443 and 80; explicit = that one only; a losing port hands over. */
    { "c-ci", "www.github.com", 80, "GET", false, ALLOW, "*.github.com", NULL },
    { "c-ci", "www.github.com", 8443, "GET", true, PORT, NULL, NULL },
    { "c-ci", "www.github.com", 8080, "GET", false, PORT, NULL, NULL },
    { "c-ci", "raw.github.com", 8443, "GET", true, ALLOW, "raw.github.com:8443", NULL },
    { "c-ci", "raw.github.com", 8443, "POST", true, ALLOW, "raw.github.com:8443", NULL },
    { "c-ci", "raw.github.com", 443, "GET", true, ALLOW, "*.github.com", NULL },
    { "c-ci", "raw.github.com", 443, "POST", true, METH, "*.github.com", NULL },
    { "c-ci", "raw.github.com", 8444, "GET", true, PORT, NULL, NULL },
    { "c-ci", "pkgs.example.org", 443, "GET", true, ALLOW, "pkgs.example.org", NULL },
    { "c-ci", "pkgs.example.org", 80, "GET", false, ALLOW, "pkgs.example.org", NULL },
    { "c-ci", "pkgs.example.org", 443, "DELETE", true, ALLOW, "pkgs.example.org", NULL },
    { "c-ci", "pkgs.example.org", 8080, "GET", false, PORT, NULL, NULL },
    { "c-ci", "pkgs.example.org", 1, "GET", true, PORT, NULL, NULL },
    { "c-ci", "sub.pkgs.example.org", 443, "GET", true, HOST, NULL, NULL },
    { "c-ci", "example.org", 443, "GET", true, HOST, NULL, NULL },
    /* Credentials: TLS only, never with TRACE, only on their own port. */
    { "c-ci", "api.example.com", 8443, "GET", true, ALLOW, "api.example.com:8443",
      "Authorization" },
    { "c-ci", "api.example.com", 8443, "POST", true, ALLOW, "api.example.com:8443",
      "Authorization" },
    { "c-ci", "api.example.com", 8443, "GET", false, NOTLS, "api.example.com:8443", NULL },
    { "c-ci", "api.example.com", 8443, "TRACE", true, METH, "api.example.com:8443", NULL },
    { "c-ci", "api.example.com", 443, "GET", true, PORT, NULL, NULL },
    { "c-ci", "secret.example.com", 443, "GET", true, ALLOW, "secret.example.com", "X-Api-Key" },
    { "c-ci", "secret.example.com", 443, "PUT", true, ALLOW, "secret.example.com", "X-Api-Key" },
    { "c-ci", "secret.example.com", 80, "GET", false, NOTLS, "secret.example.com", NULL },
    { "c-ci", "secret.example.com", 443, "TRACE", true, METH, "secret.example.com", NULL },
    { "c-ci", "secret.example.com", 80, "TRACE", false, METH, "secret.example.com", NULL },
    /* Longest literal suffix, then longest pattern. */
    { "c-ci", "x.cdn.example.net", 443, "POST", true, ALLOW, "*.cdn.example.net", NULL },
    { "c-ci", "a.b.cdn.example.net", 443, "GET", true, ALLOW, "*.cdn.example.net", NULL },
    { "c-ci", "www.example.net", 443, "GET", true, ALLOW, "*.example.net", NULL },
    { "c-ci", "www.example.net", 443, "POST", true, METH, "*.example.net", NULL },
    { "c-ci", "img-1.example.net", 443, "PUT", true, ALLOW, "img-*.example.net", NULL },
    { "c-ci", "img-1.example.net", 443, "DELETE", true, METH, "img-*.example.net", NULL },
    { "c-ci", "img-a.b.example.net", 443, "PUT", true, ALLOW, "img-*.example.net", NULL },
    { "c-ci", "img-1.cdn.example.net", 443, "POST", true, ALLOW, "*.cdn.example.net", NULL },
    { "c-ci", "img.example.net", 443, "PUT", true, METH, "*.example.net", NULL },
    { "c-ci", "cdn.example.net", 443, "POST", true, METH, "*.example.net", NULL },
    { "c-ci", "example.net", 443, "GET", true, HOST, NULL, NULL },
    /* IP literals: canonical spellings match IP rules literally. */
    { "c-ci", "10.0.0.7", 443, "GET", true, ALLOW, "10.0.0.7", NULL },
    { "c-ci", "167772167", 443, "GET", true, ALLOW, "10.0.0.7", NULL },
    { "c-ci", "0xa.0.0.7", 80, "GET", false, ALLOW, "10.0.0.7", NULL },
    { "c-ci", "10.7", 443, "GET", true, ALLOW, "10.0.0.7", NULL },
    { "c-ci", "010.0.0.07", 443, "GET", true, HOST, NULL, NULL },
    { "c-ci", "10.0.0.8", 443, "GET", true, HOST, NULL, NULL },
    { "c-ci", "10.0.0.7", 8443, "GET", true, PORT, NULL, NULL },
    { "c-ci", "[2001:db8::1]", 8080, "GET", false, ALLOW, "[2001:db8::1]:8080", NULL },
    { "c-ci", "[2001:DB8:0:0::1]", 8080, "GET", false, ALLOW, "[2001:db8::1]:8080", NULL },
    { "c-ci", "[2001:db8::1]", 443, "GET", true, PORT, NULL, NULL },
    { "c-ci", "[2001:db8::2]", 8080, "GET", true, HOST, NULL, NULL },
    { "c-ci", "[::ffff:10.0.0.7]", 443, "GET", true, HOST, NULL, NULL },
    { "c-ci", "127.0.0.1", 9000, "GET", false, ALLOW, "127.0.0.1:9000", NULL },
    { "c-ci", "2130706433", 9000, "GET", false, ALLOW, "127.0.0.1:9000", NULL },
    { "c-ci", "0177.0.0.1", 9000, "GET", false, ALLOW, "127.0.0.1:9000", NULL },
    { "c-ci", "0x7f000001", 9000, "GET", false, ALLOW, "127.0.0.1:9000", NULL },
    /* Same host twice: the first in order wins, the second never rescues. */
    { "c-ci", "dup.example.com", 443, "GET", true, ALLOW, "dup.example.com", NULL },
    { "c-ci", "dup.example.com", 443, "POST", true, METH, "dup.example.com", NULL },
    /* Malformed names never get as far as a rule. */
    { "c-ci", "api.github.com%00", 443, "GET", true, BAD, NULL, NULL },
    { "c-ci", "api github.com", 443, "GET", true, BAD, NULL, NULL },
    { "c-ci", "api.github.com ", 443, "GET", true, BAD, NULL, NULL },
    { "c-ci", "a..github.com", 443, "GET", true, BAD, NULL, NULL },
    { "c-ci", ".github.com", 443, "GET", true, BAD, NULL, NULL },
    { "c-ci", LABEL_64 ".github.com", 443, "GET", true, BAD, NULL, NULL },
    { "c-ci", PATTERN_253, 443, "GET", true, ALLOW, "*.github.com", NULL },
    { "c-ci", "x" PATTERN_253, 443, "GET", true, BAD, NULL, NULL },
    { "c-ci", "\xc3\xa4pi.github.com", 443, "GET", true, BAD, NULL, NULL },
    { "c-ci", "api_x.github.com", 443, "GET", true, BAD, NULL, NULL },
    { "c-ci", "*.github.com", 443, "GET", true, BAD, NULL, NULL },
    { "c-ci", "1.2.3.4.5", 443, "GET", true, BAD, NULL, NULL },
    { "c-ci", "999.1.1.1", 443, "GET", true, BAD, NULL, NULL },
    { "c-ci", "[::1%25eth0]", 443, "GET", true, BAD, NULL, NULL },
    { "c-ci", "", 443, "GET", true, BAD, NULL, NULL },
    { "c-ci", "-api.github.com", 443, "GET", true, BAD, NULL, NULL },
    /* Runtime client rules come first and compete on the same specificity. */
    { "c-rt", "git.example.com", 443, "GET", true, ALLOW, "git.example.com", "Authorization" },
    { "c-rt", "git.example.com", 80, "GET", false, NOTLS, "git.example.com", NULL },
    { "c-rt", "git.example.com", 8443, "GET", true, PORT, NULL, NULL },
    { "c-rt", "api.github.com", 443, "DELETE", true, ALLOW, "api.github.com", NULL },
    { "c-rt", "api.github.com", 443, "GET", true, METH, "api.github.com", NULL },
    { "c-rt", "www.github.com", 443, "PATCH", true, ALLOW, "*.github.com", NULL },
    { "c-rt", "www.github.com", 443, "GET", true, METH, "*.github.com", NULL },
    { "c-rt", "x.cdn.example.net", 443, "GET", true, ALLOW, "*.cdn.example.net", NULL },
    { "c-rt", "pkgs.example.org", 443, "GET", true, ALLOW, "pkgs.example.org", NULL },
    { "c-ci", "git.example.com", 443, "GET", true, HOST, NULL, NULL },
    /* default: allow lets unmatched requests through without a credential. */
    { "c-open", "anything.example.com", 443, "GET", true, ALLOW, NULL, NULL },
    { "c-open", "anything.example.com", 8080, "DELETE", false, ALLOW, NULL, NULL },
    { "c-open", "10.9.9.9", 443, "GET", true, ALLOW, NULL, NULL },
    { "c-open", "blocked.example.com", 443, "GET", true, ALLOW, "blocked.example.com", NULL },
    { "c-open", "blocked.example.com", 443, "POST", true, METH, "blocked.example.com", NULL },
    { "c-open", "blocked.example.com", 8443, "POST", true, ALLOW, NULL, NULL },
    { "c-open", "cred.example.com", 443, "GET", true, ALLOW, "cred.example.com", "X-K" },
    { "c-open", "cred.example.com", 80, "GET", false, NOTLS, "cred.example.com", NULL },
    /* General globs: `*` matches any run, dots included, always before a dot (the suffix
     * after it starts at a label); never an IP. */
    { "c-glob", "anything.org", 443, "GET", true, ALLOW, "*.org", NULL },
    { "c-glob", "anything.org", 443, "POST", true, METH, "*.org", NULL },
    { "c-glob", "a", 443, "GET", true, HOST, NULL, NULL },
    { "c-glob", "org", 443, "GET", true, HOST, NULL, NULL },
    { "c-glob", "example.com", 443, "POST", true, HOST, NULL, NULL },
    { "c-glob", "a.example.com", 443, "POST", true, ALLOW, "*.example.com", NULL },
    { "c-glob", "x-a.example.org", 443, "POST", true, ALLOW, "x-*.example.org", NULL },
    { "c-glob", "x-a.b.example.org", 443, "POST", true, ALLOW, "x-*.example.org", NULL },
    { "c-glob", "ax-y.example.org", 443, "POST", true, METH, "*.org", NULL },
    { "c-glob", "x-a.evilexample.org", 443, "POST", true, METH, "*.org", NULL },
    { "c-glob", "anything.org", 8443, "GET", true, PORT, NULL, NULL },
    { "c-glob", "10.0.0.7", 443, "GET", true, HOST, NULL, NULL },
    { "c-glob", "[::1]", 443, "GET", true, HOST, NULL, NULL },
    { "c-empty", "example.com", 443, "GET", true, HOST, NULL, NULL },
    { "c-empty", "10.0.0.7", 443, "GET", true, HOST, NULL, NULL },
    /* Expiry is per request: expires_at <= now is expired. */
    { "c-old", "pkgs.example.org", 443, "GET", true, SL_REASON_EXPIRED, NULL, NULL },
    { "c-now", "pkgs.example.org", 443, "GET", true, SL_REASON_EXPIRED, NULL, NULL },
    { "c-new", "pkgs.example.org", 443, "GET", true, ALLOW, "pkgs.example.org", NULL },
    { "c-new", "evil.example.org", 443, "GET", true, HOST, NULL, NULL },
    /* A CONNECT (no method) is decided on host and port alone: any winning rule opens the
     * tunnel, whatever its methods, and nothing is injected into a tunnel. */
    { "c-ci", "api.github.com", 443, NULL, true, ALLOW, "api.github.com", NULL },
    { "c-ci", "a.b.github.com", 443, NULL, true, ALLOW, "*.github.com", NULL },
    { "c-ci", "api.example.com", 8443, NULL, false, ALLOW, "api.example.com:8443", NULL },
    { "c-ci", "dup.example.com", 443, NULL, true, ALLOW, "dup.example.com", NULL },
    { "c-ci", "github.com", 443, NULL, true, HOST, NULL, NULL },
    { "c-ci", "pkgs.example.org", 8080, NULL, false, PORT, NULL, NULL },
    { "c-rt", "api.github.com", 443, NULL, true, ALLOW, "api.github.com", NULL },
    { "c-glob", "anything.org", 443, NULL, true, ALLOW, "*.org", NULL },
    { "c-old", "pkgs.example.org", 443, NULL, true, SL_REASON_EXPIRED, NULL, NULL },
    /* No client: no identity, whatever the request. */
    { NULL, "pkgs.example.org", 443, "GET", true, SL_REASON_NO_IDENTITY, NULL, NULL },
};

/* Field by field: the struct has padding, so memcmp() would compare garbage. */
static bool same_decision(const struct sl_decision *a, const struct sl_decision *b)
{
    return a->allow == b->allow && a->reason == b->reason && a->rule == b->rule
           && a->credential_header == b->credential_header
           && a->credential_value == b->credential_value
           && a->rule_has_credential == b->rule_has_credential && a->passthrough == b->passthrough
           && a->client == b->client && a->environment == b->environment
           && a->_rule_exact == b->_rule_exact && a->_rule_of_client == b->_rule_of_client
           && a->_rule_methods == b->_rule_methods && a->_rule_n_methods == b->_rule_n_methods;
}

static void decide_row(const struct sl_snapshot *s, const struct row *r, struct sl_decision *d)
{
    struct sl_host h;
    struct sl_request_view req = { &h, r->port, r->method, r->tls, NULL };
    const struct sl_client *c = r->client != NULL ? sl_snapshot_find_client(s, r->client) : NULL;

    if (r->client != NULL) {
        assert_non_null(c);
    }
    if (sl_host_normalize(sl_slice_str(r->host), 0, &h, NULL) != 0) {
        *d = (struct sl_decision){ .allow = false, .reason = SL_REASON_BAD_HOST };
        return;
    }
    sl_policy_decide(s, c, &req, NOW, d);
}

static void decides_every_row_of_the_table(void **state)
{
    const struct sl_snapshot *s = *state;

    assert_true(SL_ARRAY_LEN(rows) >= 80);
    for (size_t i = 0; i < SL_ARRAY_LEN(rows); i++) {
        const struct row *r = &rows[i];
        struct sl_decision d;
        struct sl_decision again;
        bool ok;

        decide_row(s, r, &d);
        ok = d.allow == (r->reason == ALLOW) && d.reason == r->reason;
        ok = ok && (r->rule == NULL ? d.rule == NULL : d.rule != NULL && !strcmp(d.rule, r->rule));
        ok = ok
             && (r->header == NULL
                         ? d.credential_header == NULL
                         : d.credential_header != NULL && !strcmp(d.credential_header, r->header));
        if (!ok) {
            fail_msg("row %zu: %s %s %s:%u (%s): got %s %s rule=%s header=%s, want %s rule=%s "
                     "header=%s",
                     i, r->client ? r->client : "-", r->method ? r->method : "CONNECT", r->host,
                     r->port, r->tls ? "tls" : "plain", d.allow ? "allow" : "deny",
                     sl_reason_code(d.reason), d.rule ? d.rule : "-",
                     d.credential_header ? d.credential_header : "-", sl_reason_code(r->reason),
                     r->rule ? r->rule : "-", r->header ? r->header : "-");
        }
        /* Credential value comes with the header, and only then. */
        assert_true((d.credential_header == NULL) == (d.credential_value == NULL));
        assert_true(r->method != NULL || d.credential_header == NULL);
        if (r->client != NULL && d.reason != BAD) {
            assert_string_equal(d.client, r->client);
            assert_non_null(d.environment);
        }
        /* Deterministic: the same question gets the same answer. */
        decide_row(s, r, &again);
        assert_true(same_decision(&d, &again));
    }
}

static void injects_the_credential_value_with_its_header(void **state)
{
    const struct sl_snapshot *s = *state;
    struct sl_host h;
    struct sl_request_view req = { &h, 8443, "GET", true, NULL };
    struct sl_decision d;

    assert_int_equal(sl_host_normalize(sl_slice_str("api.example.com"), 0, &h, NULL), 0);
    sl_policy_decide(s, sl_snapshot_find_client(s, "c-ci"), &req, NOW, &d);
    assert_true(d.allow);
    assert_string_equal(d.credential_header, "Authorization");
    assert_string_equal(d.credential_value, "Bearer s3cr3t");
    assert_true(d.rule_has_credential);
    assert_string_equal(d.environment, "ci");
    req.tls = false;
    sl_policy_decide(s, sl_snapshot_find_client(s, "c-ci"), &req, NOW, &d);
    assert_false(d.allow);
    assert_null(d.credential_value);
    assert_true(d.rule_has_credential);
}

static void refuses_everything_without_a_snapshot(void **state)
{
    struct sl_host h;
    struct sl_request_view req = { &h, 443, "GET", true, NULL };
    struct sl_decision d;

    (void)state;
    assert_int_equal(sl_host_normalize(sl_slice_str("example.com"), 0, &h, NULL), 0);
    sl_policy_decide(NULL, NULL, &req, NOW, &d);
    assert_false(d.allow);
    assert_int_equal(d.reason, SL_REASON_NO_POLICY);
    assert_null(sl_policy_identify(NULL, NULL, NULL, NULL));
}

static void expires_at_the_second(void **state)
{
    const struct sl_snapshot *s = *state;
    const struct sl_client *c = sl_snapshot_find_client(s, "c-new");
    struct sl_host h;
    struct sl_request_view req = { &h, 443, "GET", true, NULL };
    struct sl_decision d;
    int64_t at = 0;

    assert_int_equal(sl_host_normalize(sl_slice_str("pkgs.example.org"), 0, &h, NULL), 0);
    assert_true(sl_client_expiry(c, &at));
    assert_int_equal(at, NOW + 1);
    sl_policy_decide(s, c, &req, at - 1, &d);
    assert_true(d.allow);
    sl_policy_decide(s, c, &req, at, &d);
    assert_int_equal(d.reason, SL_REASON_EXPIRED);
    assert_string_equal(d.client, "c-new");
    sl_policy_decide(s, c, &req, at + 86400, &d);
    assert_int_equal(d.reason, SL_REASON_EXPIRED);
}

/* ---- hints ---- */

static void hint_for(const struct sl_snapshot *s, const char *client, const char *host,
                     uint16_t port, const char *method, bool tls, const char *want)
{
    struct sl_host h;
    struct sl_request_view req = { &h, port, method, tls, NULL };
    struct sl_decision d;
    char buf[SL_POLICY_HINT_MAX];
    int n;

    assert_int_equal(sl_host_normalize(sl_slice_str(host), 0, &h, NULL), 0);
    sl_policy_decide(s, sl_snapshot_find_client(s, client), &req, NOW, &d);
    n = sl_policy_hint(&d, &req, buf, sizeof(buf));
    assert_true(n >= 0);
    assert_int_equal((size_t)n, strlen(buf));
    assert_string_equal(buf, want);
}

static const char passthrough_policy[] =
        "{ 'version': 1, 'environments': {"
        "  'pin': { 'default': 'deny', 'rules': ["
        "    { 'host': 'pinned.example.com', 'tls': 'passthrough' },"
        "    { 'host': '*.pin.example.net', 'tls': 'passthrough', 'methods': [] },"
        "    { 'host': 'api.pin.example.net', 'tls': 'intercept', 'methods': ['GET'] },"
        "    { 'host': 'port.example.com:8443', 'tls': 'passthrough' },"
        "    { 'host': 'iport.example.com:8443' },"
        "    { 'host': 'shared.example.com', 'methods': ['GET'] }"
        "  ] },"
        "  'open': { 'default': 'allow' }"
        "}, 'clients': ["
        "  { 'id': 'p', 'ip': '10.2.0.1', 'environment': 'pin', 'rules': ["
        "    { 'host': 'shared.example.com', 'tls': 'passthrough' } ] },"
        "  { 'id': 'q', 'ip': '10.2.0.2', 'environment': 'pin' },"
        "  { 'id': 'o', 'ip': '10.2.0.3', 'environment': 'open' }"
        "] }";

/* Decides one request under passthrough_policy and checks the verdict and the flag. */
static void expect_passthrough(const struct sl_snapshot *s, const char *client, const char *host,
                               uint16_t port, const char *method, bool tls, enum sl_reason want,
                               bool want_passthrough)
{
    struct sl_host h;
    struct sl_request_view req = { &h, port, method, tls, NULL };
    struct sl_decision d;

    assert_int_equal(sl_host_normalize(sl_slice_str(host), 0, &h, NULL), 0);
    sl_policy_decide(s, sl_snapshot_find_client(s, client), &req, NOW, &d);
    if (d.reason != want || d.allow != (want == SL_REASON_NONE)
        || d.passthrough != want_passthrough) {
        fail_msg("%s %s %s:%u: got %s passthrough=%d, want %s passthrough=%d", client,
                 method != NULL ? method : "CONNECT", host, port, sl_reason_code(d.reason),
                 d.passthrough, sl_reason_code(want), want_passthrough);
    }
    /* A passthrough rule never hands out a credential. */
    assert_null(d.credential_header);
}

static void carries_the_passthrough_flag_of_the_winning_rule(void **state)
{
    struct sl_snapshot *s = parse_text(passthrough_policy);

    (void)state;
    /* A CONNECT: allowed, and the flag says how to carry the tunnel. */
    expect_passthrough(s, "q", "pinned.example.com", 443, NULL, true, SL_REASON_NONE, true);
    expect_passthrough(s, "q", "a.pin.example.net", 443, NULL, true, SL_REASON_NONE, true);
    /* The more specific intercepting rule wins over the passthrough wildcard. */
    expect_passthrough(s, "q", "api.pin.example.net", 443, NULL, true, SL_REASON_NONE, false);
    expect_passthrough(s, "q", "api.pin.example.net", 443, "POST", true,
                       SL_REASON_METHOD_NOT_ALLOWED, false);
    /* A port the rule does not cover: no winner, but the flag says that a passthrough rule
     * names the host (the proxy then never intercepts it to say so); not for an intercepting
     * rule. */
    expect_passthrough(s, "q", "port.example.com", 8443, NULL, true, SL_REASON_NONE, true);
    expect_passthrough(s, "q", "port.example.com", 443, NULL, true, SL_REASON_PORT_NOT_ALLOWED,
                       true);
    expect_passthrough(s, "q", "iport.example.com", 443, NULL, true, SL_REASON_PORT_NOT_ALLOWED,
                       false);
    expect_passthrough(s, "q", "deep.pin.example.net", 443, NULL, true, SL_REASON_NONE, true);
    /* Plain HTTP under a passthrough rule: refused, not-tls. */
    expect_passthrough(s, "q", "pinned.example.com", 80, "GET", false, SL_REASON_NOT_TLS, true);
    expect_passthrough(s, "q", "pinned.example.com", 80, NULL, false, SL_REASON_NONE, true);
    /* Inside an intercepted tunnel (opened under an older snapshot): any method. */
    expect_passthrough(s, "q", "pinned.example.com", 443, "DELETE", true, SL_REASON_NONE, true);
    /* A client's runtime rule wins the tie, and brings its passthrough with it. */
    expect_passthrough(s, "p", "shared.example.com", 443, NULL, true, SL_REASON_NONE, true);
    expect_passthrough(s, "q", "shared.example.com", 443, NULL, true, SL_REASON_NONE, false);
    /* Intercepting by default: no rule, no passthrough. */
    expect_passthrough(s, "o", "pinned.example.com", 443, NULL, true, SL_REASON_NONE, false);
    hint_for(s, "q", "pinned.example.com", 80, "GET", false,
             "to allow it, use https: rule {\"host\":\"pinned.example.com\",\"tls\":"
             "\"passthrough\"} only relays TLS tunnels, uninspected");
    sl_snapshot_unref(s);
}

static void says_what_would_allow_a_refusal(void **state)
{
    const struct sl_snapshot *s = *state;

    hint_for(s, "c-ci", "evil.example.org", 443, "POST", true,
             "to allow it, add {\"host\":\"evil.example.org\",\"methods\":[\"POST\"]} to "
             "environment "
             "ci");
    hint_for(s, "c-ci", "pkgs.example.org", 8080, "GET", false,
             "to allow it, add {\"host\":\"pkgs.example.org:8080\",\"methods\":[\"GET\"]} to "
             "environment ci");
    hint_for(s, "c-ci", "a.b.github.com", 443, "POST", true,
             "to allow it, add {\"host\":\"a.b.github.com\",\"methods\":[\"GET\",\"HEAD\","
             "\"POST\"]} to environment ci");
    hint_for(s, "c-ci", "api.github.com", 443, "HEAD", true,
             "to allow it, add \"HEAD\" to the methods of {\"host\":\"api.github.com\"} in "
             "environment ci");
    hint_for(s, "c-rt", "api.github.com", 443, "GET", true,
             "to allow it, add \"GET\" to the methods of {\"host\":\"api.github.com\"} in the "
             "runtime rules of client c-rt");
    hint_for(s, "c-ci", "[2001:db8::1]", 443, "GET", true,
             "to allow it, add {\"host\":\"[2001:db8::1]\",\"methods\":[\"GET\"]} to environment "
             "ci");
    hint_for(s, "c-ci", "secret.example.com", 80, "GET", false,
             "to allow it, use https: credentials are only injected over TLS");
    hint_for(s, "c-ci", "secret.example.com", 443, "TRACE", true,
             "TRACE is never allowed through a rule with a credential (it would echo the secret)");
    hint_for(s, "c-ci", "evil.example.org", 443, NULL, true,
             "to allow it, add {\"host\":\"evil.example.org\"} to environment ci");
    hint_for(s, "c-ci", "pkgs.example.org", 8080, NULL, false,
             "to allow it, add {\"host\":\"pkgs.example.org:8080\"} to environment ci");
    hint_for(s, "c-old", "pkgs.example.org", 443, "GET", true, "");
    hint_for(s, "c-ci", "pkgs.example.org", 443, "GET", true, "");
}

/* An environment keyed by an id and labelled with a name (as the control plane compiles them):
 * the decision keeps the key (audit lines, lookups), refusals and hints show the label. */
static void hints_name_an_environment_by_its_label(void **state)
{
    struct sl_snapshot *s = parse_text(
            "{ 'version': 1, 'environments': {"
            "  '5d0c6f7e-0000-4000-8000-000000000001': { 'default': 'deny', 'label': 'ci python',"
            "    'rules': [ { 'host': 'pkgs.example.org', 'methods': ['GET'] } ] },"
            "  'plain': { 'default': 'deny' }"
            "}, 'clients': ["
            "  { 'id': 'l', 'ip': '10.3.0.1', 'environment': "
            "'5d0c6f7e-0000-4000-8000-000000000001' },"
            "  { 'id': 'p', 'ip': '10.3.0.2', 'environment': 'plain' }"
            "] }");
    struct sl_host h;
    struct sl_request_view req = { &h, 443, "GET", true, NULL };
    struct sl_decision d;

    (void)state;
    assert_int_equal(sl_host_normalize(sl_slice_str("evil.example.org"), 0, &h, NULL), 0);
    sl_policy_decide(s, sl_snapshot_find_client(s, "l"), &req, NOW, &d);
    assert_string_equal(d.environment, "5d0c6f7e-0000-4000-8000-000000000001");
    assert_string_equal(d.environment_label, "ci python");
    hint_for(s, "l", "evil.example.org", 443, "GET", true,
             "to allow it, add {\"host\":\"evil.example.org\",\"methods\":[\"GET\"]} to "
             "environment ci python");
    hint_for(s, "l", "pkgs.example.org", 443, "POST", true,
             "to allow it, add \"POST\" to the methods of {\"host\":\"pkgs.example.org\"} in "
             "environment ci python");
    /* Without a label, the name is what people see. */
    sl_policy_decide(s, sl_snapshot_find_client(s, "p"), &req, NOW, &d);
    assert_string_equal(d.environment_label, "plain");
    assert_string_equal(sl_env_label(sl_snapshot_find_env(s, "plain")), "plain");
    sl_snapshot_unref(s);
}

static void refuses_to_cut_a_hint_short(void **state)
{
    const struct sl_snapshot *s = *state;
    struct sl_host h;
    struct sl_request_view req = { &h, 443, "GET", true, NULL };
    struct sl_decision d;
    char buf[16];

    assert_int_equal(sl_host_normalize(sl_slice_str("evil.example.org"), 0, &h, NULL), 0);
    sl_policy_decide(s, sl_snapshot_find_client(s, "c-ci"), &req, NOW, &d);
    assert_int_equal(sl_policy_hint(&d, &req, buf, sizeof(buf)), SL_ETOOBIG);
    assert_string_equal(buf, "");
    assert_int_equal(sl_policy_hint(&d, &req, buf, 0), SL_ETOOBIG);
}

static void names_every_reason_code(void **state)
{
    static const char *const codes[] = { "none",
                                         "no-policy",
                                         "no-identity",
                                         "expired",
                                         "bad-request",
                                         "bad-host",
                                         "host-not-allowed",
                                         "port-not-allowed",
                                         "method-not-allowed",
                                         "credential-needs-tls",
                                         "host-mismatch",
                                         "private-address",
                                         "not-tls",
                                         "dns",
                                         "upstream-unreachable",
                                         "upstream-tls",
                                         "upstream-timeout",
                                         "too-large",
                                         "overloaded",
                                         "audit-unavailable",
                                         "git-read-only",
                                         "git-protected-branch",
                                         "git-bad-push",
                                         "placeholder-misuse",
                                         "upstream-closed",
                                         "client-overloaded",
                                         "out-of-memory" };
    static const int status[] = { 200, 503, 407, 403, 400, 400, 403, 403, 403,
                                  403, 421, 403, 400, 502, 502, 502, 504, 431,
                                  503, 503, 403, 403, 400, 403, 502, 503, 503 };

    (void)state;
    for (int r = SL_REASON_NONE; r <= SL_REASON_LAST; r++) {
        assert_string_equal(sl_reason_code((enum sl_reason)r), codes[r]);
        assert_int_equal(sl_reason_status((enum sl_reason)r), status[r]);
    }
}

/* ---- identity ---- */

static const char identity_policy[] =
        "{ 'version': 1, 'environments': { 'e': { 'default': 'deny' } }, 'clients': ["
        "  { 'id': 'tok', 'token': 'secret-1', 'environment': 'e' },"
        "  { 'id': 'tok-ip', 'token': 'secret-2', 'ip': '10.0.0.2', 'environment': 'e' },"
        "  { 'id': 'tok-cidr', 'token': 'secret-3', 'cidr': '10.9.0.0/16', 'environment': 'e' },"
        "  { 'id': 'ip1', 'ip': '10.0.0.1', 'environment': 'e' },"
        "  { 'id': 'ip1-again', 'ip': '10.0.0.1', 'environment': 'e' },"
        "  { 'id': 'ip-and-cidr', 'ip': '10.0.0.3', 'cidr': '10.0.0.0/30', 'environment': 'e' },"
        "  { 'id': 'ip-not-in-cidr', 'ip': '10.0.0.9', 'cidr': '10.5.0.0/16', 'environment': 'e' },"
        "  { 'id': 'net8', 'cidr': '10.0.0.0/8', 'environment': 'e' },"
        "  { 'id': 'net16', 'cidr': '10.1.0.0/16', 'environment': 'e' },"
        "  { 'id': 'net16-again', 'cidr': '10.1.0.0/16', 'environment': 'e' },"
        "  { 'id': 'net24', 'cidr': '10.1.2.0/24', 'environment': 'e' },"
        "  { 'id': 'v6', 'ip': '2001:db8::5', 'environment': 'e' },"
        "  { 'id': 'v6net', 'cidr': '2001:db8::/32', 'environment': 'e' },"
        "  { 'id': 'v6tok', 'token': 'secret-6', 'cidr': '2001:db8:6::/48', 'environment': 'e' },"
        "  { 'id': 'mapped', 'ip': '::ffff:192.0.2.1', 'environment': 'e' },"
        "  { 'id': 'mapped-net', 'cidr': '::ffff:198.51.100.0/120', 'environment': 'e' }"
        "] }";

struct id_row {
    const char *id;
    const char *token;
    /* Source address text (IPv4 or IPv6, or "mapped:a.b.c.d"), NULL for none. */
    const char *src;
    /* Expected client id, NULL for none. */
    const char *want;
};

static const struct id_row id_rows[] = {
    /* A token client: id and token must both be right; no fallback either way. */
    { "tok", "secret-1", "172.16.0.1", "tok" },
    { "tok", "secret-1", NULL, "tok" },
    { "tok", "secret-2", "172.16.0.1", NULL },
    { "tok", "secret-1x", "172.16.0.1", NULL },
    { "tok", "secret-", "172.16.0.1", NULL },
    { "tok", "Secret-1", "172.16.0.1", NULL },
    { "tok", NULL, "172.16.0.1", NULL },
    { NULL, "secret-1", "172.16.0.1", NULL },
    { "nobody", "secret-1", "172.16.0.1", NULL },
    { "TOK", "secret-1", "172.16.0.1", NULL },
    /* Wrong credentials from an address that would match: still nobody (a 407). */
    { "tok", "wrong", "10.0.0.1", NULL },
    { "ip1", "anything", "10.0.0.1", NULL },
    { "net8", "anything", "10.200.0.1", NULL },
    /* Token plus address: both must hold. */
    { "tok-ip", "secret-2", "10.0.0.2", "tok-ip" },
    { "tok-ip", "secret-2", "10.0.0.5", NULL },
    { "tok-ip", "secret-2", NULL, NULL },
    { "tok-cidr", "secret-3", "10.9.1.1", "tok-cidr" },
    { "tok-cidr", "secret-3", "10.8.0.1", NULL },
    { "v6tok", "secret-6", "2001:db8:6::1", "v6tok" },
    { "v6tok", "secret-6", "2001:db8:7::1", NULL },
    /* A token client is never found by its address alone. */
    { NULL, NULL, "10.0.0.2", "net8" },
    { NULL, NULL, "10.9.1.1", "net8" },
    { NULL, NULL, "2001:db8:6::1", "v6net" },
    /* Exact ip first (ties by order), then the longest cidr (ties by order). */
    { NULL, NULL, "10.0.0.1", "ip1" },
    { NULL, NULL, "10.0.0.3", "ip-and-cidr" },
    { NULL, NULL, "10.0.0.9", "net8" },
    { NULL, NULL, "10.1.2.3", "net24" },
    { NULL, NULL, "10.1.3.3", "net16" },
    { NULL, NULL, "10.200.0.1", "net8" },
    { NULL, NULL, "11.0.0.1", NULL },
    { NULL, NULL, "2001:db8::5", "v6" },
    { NULL, NULL, "2001:db8::6", "v6net" },
    { NULL, NULL, "2001:db9::1", NULL },
    { NULL, NULL, NULL, NULL },
    /* IPv4-mapped sources count as IPv4, and mapped policy addresses too. */
    { NULL, NULL, "mapped:10.1.2.3", "net24" },
    { NULL, NULL, "mapped:10.0.0.1", "ip1" },
    { NULL, NULL, "192.0.2.1", "mapped" },
    { NULL, NULL, "mapped:192.0.2.1", "mapped" },
    { NULL, NULL, "198.51.100.77", "mapped-net" },
    { "tok-ip", "secret-2", "mapped:10.0.0.2", "tok-ip" },
};

/* Fills `ss` from the row's source text. Returns NULL for none. */
static const struct sockaddr *source(const char *text, struct sockaddr_storage *ss)
{
    struct sockaddr_in *sin = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

    memset(ss, 0, sizeof(*ss));
    if (text == NULL) {
        return NULL;
    }
    if (strncmp(text, "mapped:", 7) == 0) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_addr.s6_addr[10] = 0xff;
        sin6->sin6_addr.s6_addr[11] = 0xff;
        assert_int_equal(inet_pton(AF_INET, text + 7, &sin6->sin6_addr.s6_addr[12]), 1);
    } else if (inet_pton(AF_INET, text, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons(40112);
    } else {
        assert_int_equal(inet_pton(AF_INET6, text, &sin6->sin6_addr), 1);
        sin6->sin6_family = AF_INET6;
    }
    return (const struct sockaddr *)ss;
}

static void identifies_clients_by_token_and_address(void **state)
{
    struct sl_snapshot *s = parse_text(identity_policy);

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(id_rows); i++) {
        const struct id_row *r = &id_rows[i];
        struct sockaddr_storage ss;
        const struct sl_client *c = sl_policy_identify(s, r->id, r->token, source(r->src, &ss));
        const char *got = c != NULL ? sl_client_id(c) : NULL;

        if (r->want == NULL ? got != NULL : got == NULL || strcmp(got, r->want) != 0) {
            fail_msg("row %zu: id=%s token=%s src=%s: got %s, want %s", i, r->id ? r->id : "-",
                     r->token ? r->token : "-", r->src ? r->src : "-", got ? got : "none",
                     r->want ? r->want : "none");
        }
    }
    sl_snapshot_unref(s);
}

static void identifies_from_a_proxy_authorization_header(void **state)
{
    struct sl_snapshot *s = parse_text(identity_policy);
    struct sockaddr_storage ss;
    char id[SL_AUTH_ID_MAX + 1];
    char token[SL_AUTH_TOKEN_MAX + 1];
    const struct sl_client *c;

    (void)state;
    /* base64("tok:secret-1") */
    assert_int_equal(sl_auth_parse_basic(sl_slice_str("Basic dG9rOnNlY3JldC0x"), id, sizeof(id),
                                         token, sizeof(token)),
                     0);
    c = sl_policy_identify(s, id, token, source("172.16.0.9", &ss));
    assert_non_null(c);
    assert_string_equal(sl_client_id(c), "tok");
    /* An unknown address family identifies nobody by address. */
    ss.ss_family = AF_UNIX;
    assert_null(sl_policy_identify(s, NULL, NULL, (const struct sockaddr *)&ss));
    sl_snapshot_unref(s);
}

static void matches_everyone_with_a_zero_length_prefix(void **state)
{
    struct sl_snapshot *s = parse_text(
            "{ 'version': 1, 'environments': { 'e': { 'default': 'deny' } }, 'clients': ["
            "  { 'id': 'lan', 'cidr': '192.168.0.0/16', 'environment': 'e' },"
            "  { 'id': 'all', 'cidr': '0.0.0.0/0', 'environment': 'e' },"
            "  { 'id': 'all6', 'cidr': '::/0', 'environment': 'e' } ] }");
    struct sockaddr_storage ss;

    (void)state;
    assert_string_equal(sl_client_id(sl_policy_identify(s, NULL, NULL, source("192.168.1.1", &ss))),
                        "lan");
    assert_string_equal(sl_client_id(sl_policy_identify(s, NULL, NULL, source("8.8.8.8", &ss))),
                        "all");
    assert_string_equal(sl_client_id(sl_policy_identify(s, NULL, NULL, source("::1", &ss))),
                        "all6");
    sl_snapshot_unref(s);
}

/* Transparent connections and DNS queries carry no token: the address alone names the client,
 * a token client's `ip` included (a sandbox's entry), never a token client's range. */
static void identifies_by_address_alone_token_clients_included(void **state)
{
    static const struct {
        const char *src;
        const char *want;
    } by_addr[] = {
        { "10.0.0.2", "tok-ip" },
        { "mapped:10.0.0.2", "tok-ip" },
        /* The first by document order among those with that ip, token or not. */
        { "10.0.0.1", "ip1" },
        { "10.0.0.3", "ip-and-cidr" },
        /* An ip whose own cidr does not hold is no match; the ranges then decide. */
        { "10.0.0.9", "net8" },
        /* A token client's cidr is no identity without its token. */
        { "10.9.1.1", "net8" },
        { "2001:db8:6::1", "v6net" },
        { "10.1.2.3", "net24" },
        { "11.0.0.1", NULL },
        { "192.0.2.1", "mapped" },
        { NULL, NULL },
    };
    struct sl_snapshot *s = parse_text(identity_policy);
    struct sl_snapshot *first = parse_text(
            "{ 'version': 1, 'environments': { 'e': { 'default': 'deny' } }, 'clients': ["
            "  { 'id': 'sb', 'token': 't', 'ip': '10.213.0.5', 'environment': 'e' },"
            "  { 'id': 'static', 'ip': '10.213.0.5', 'environment': 'e' } ] }");
    struct sockaddr_storage ss;

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(by_addr); i++) {
        const struct sl_client *c = sl_policy_identify_address(s, source(by_addr[i].src, &ss));
        const char *got = c != NULL ? sl_client_id(c) : NULL;

        if (by_addr[i].want == NULL ? got != NULL
                                    : got == NULL || strcmp(got, by_addr[i].want) != 0) {
            fail_msg("row %zu: src=%s: got %s, want %s", i, by_addr[i].src ? by_addr[i].src : "-",
                     got ? got : "none", by_addr[i].want ? by_addr[i].want : "none");
        }
    }
    /* The explicit proxy's address walk still skips the token client... */
    assert_string_equal(
            sl_client_id(sl_policy_identify(first, NULL, NULL, source("10.213.0.5", &ss))),
            "static");
    /* ...which the address alone finds first, by document order. */
    assert_string_equal(sl_client_id(sl_policy_identify_address(first, source("10.213.0.5", &ss))),
                        "sb");
    assert_null(sl_policy_identify_address(NULL, source("10.213.0.5", &ss)));
    ss.ss_family = AF_UNIX;
    assert_null(sl_policy_identify_address(s, (const struct sockaddr *)&ss));
    sl_snapshot_unref(first);
    sl_snapshot_unref(s);
}

/* ---- sharing across threads ---- */

struct sharer {
    struct sl_snapshot *s;
    int allowed;
};

static void *share(void *arg)
{
    struct sharer *sh = arg;
    struct sl_host h;
    struct sl_request_view req = { &h, 443, "GET", true, NULL };

    if (sl_host_normalize(sl_slice_str("api.github.com"), 0, &h, NULL) != 0) {
        return NULL;
    }
    for (int i = 0; i < 20000; i++) {
        struct sl_snapshot *mine = sl_snapshot_ref(sh->s);
        struct sl_decision d;

        sl_policy_decide(mine, sl_snapshot_find_client(mine, "c-ci"), &req, NOW, &d);
        sh->allowed += d.allow;
        sl_snapshot_unref(mine);
    }
    sl_snapshot_unref(sh->s); /* the reference the main thread handed over */
    return NULL;
}

static void is_shared_read_only_by_threads(void **state)
{
    struct sl_snapshot *s = parse_text(policy);
    pthread_t threads[4];
    struct sharer sh[4];

    (void)state;
    for (int i = 0; i < 4; i++) {
        sh[i] = (struct sharer){ sl_snapshot_ref(s), 0 };
        assert_int_equal(pthread_create(&threads[i], NULL, share, &sh[i]), 0);
    }
    sl_snapshot_unref(s); /* the workers hold the last references now */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(threads[i], NULL), 0);
        assert_int_equal(sh[i].allowed, 20000);
    }
}

/* ---- speed ---- */

/* 1000 environments x 100 rules (exact hosts, suffixes and 5 globs each), one client each. */
static struct sl_snapshot *big_snapshot(void)
{
    struct sl_buf b;
    struct sl_snapshot *s = NULL;
    char text[256];

    sl_buf_init(&b, (size_t)64 << 20);
    assert_int_equal(sl_buf_append_str(&b, "{\"version\":1,\"environments\":{"), 0);
    for (int e = 0; e < 1000; e++) {
        assert_true(
                sl_buf_printf(&b, "%s\"env-%d\":{\"default\":\"deny\",\"rules\":[", e ? "," : "", e)
                == 0);
        for (int r = 0; r < 100; r++) {
            if (r % 20 == 0) {
                (void)snprintf(text, sizeof(text), "g%d-*.e%d.example.org", r, e);
            } else if (r % 2 == 0) {
                (void)snprintf(text, sizeof(text), "*.s%d.e%d.example.com", r, e);
            } else {
                (void)snprintf(text, sizeof(text), "h%d.e%d.example.com", r, e);
            }
            assert_true(sl_buf_printf(&b, "%s{\"host\":\"%s\",\"methods\":[\"GET\",\"POST\"]}",
                                      r ? "," : "", text)
                        == 0);
        }
        assert_int_equal(sl_buf_append_str(&b, "]}"), 0);
    }
    assert_int_equal(sl_buf_append_str(&b, "},\"clients\":["), 0);
    for (int e = 0; e < 1000; e++) {
        assert_true(
                sl_buf_printf(&b,
                              "%s{\"id\":\"c%d\",\"ip\":\"10.%d.%d.1\",\"environment\":\"env-%d\"}",
                              e ? "," : "", e, e / 256, e % 256, e)
                == 0);
    }
    assert_int_equal(sl_buf_append_str(&b, "]}"), 0);
    assert_int_equal(sl_snapshot_parse(b.p, b.len, &s, NULL), 0);
    sl_buf_finish(&b);
    return s;
}

static double seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void decides_in_constant_time_with_a_thousand_environments(void **state)
{
    enum {
        HOSTS = 64,
        ROUNDS = 20000
    };
    struct sl_snapshot *s = big_snapshot();
    struct sl_host hosts[HOSTS];
    const struct sl_client *clients[HOSTS];
    double t0;
    double ns;
    long allowed = 0;

    (void)state;
    for (int i = 0; i < HOSTS; i++) {
        char name[128];
        int e = (i * 131) % 1000;
        int r = (i * 7) % 100;

        /* An exact host, a name under a suffix, a glob's name, a name nothing matches. */
        switch (i % 4) {
        case 0:
            (void)snprintf(name, sizeof(name), "h%d.e%d.example.com", r | 1, e);
            break;
        case 1:
            (void)snprintf(name, sizeof(name), "a.b.s%d.e%d.example.com", r - r % 2, e);
            break;
        case 2:
            (void)snprintf(name, sizeof(name), "g%d-x.e%d.example.org", r - r % 20, e);
            break;
        default:
            (void)snprintf(name, sizeof(name), "nope%d.e%d.example.net", r, e);
            break;
        }
        assert_int_equal(sl_host_normalize(sl_slice_str(name), 0, &hosts[i], NULL), 0);
        (void)snprintf(name, sizeof(name), "c%d", e);
        clients[i] = sl_snapshot_find_client(s, name);
        assert_non_null(clients[i]);
    }
    t0 = seconds();
    for (int k = 0; k < ROUNDS; k++) {
        for (int i = 0; i < HOSTS; i++) {
            struct sl_request_view req = { &hosts[i], 443, "GET", true, NULL };
            struct sl_decision d;

            sl_policy_decide(s, clients[i], &req, NOW, &d);
            allowed += d.allow;
        }
    }
    ns = (seconds() - t0) * 1e9 / ((double)ROUNDS * HOSTS);
    print_message("decision: %.0f ns on average over %d requests (%ld allowed)\n", ns,
                  ROUNDS * HOSTS, allowed);
    assert_true(allowed > 0 && allowed < (long)ROUNDS * HOSTS);
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* The budget is 300 ns on the machines we measure on; leave room for a loaded CI box. */
    assert_true(ns < 1500.0);
#endif
    sl_snapshot_unref(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(decides_every_row_of_the_table, setup, teardown),
        cmocka_unit_test_setup_teardown(injects_the_credential_value_with_its_header, setup,
                                        teardown),
        cmocka_unit_test(refuses_everything_without_a_snapshot),
        cmocka_unit_test_setup_teardown(expires_at_the_second, setup, teardown),
        cmocka_unit_test(carries_the_passthrough_flag_of_the_winning_rule),
        cmocka_unit_test_setup_teardown(says_what_would_allow_a_refusal, setup, teardown),
        cmocka_unit_test(hints_name_an_environment_by_its_label),
        cmocka_unit_test_setup_teardown(refuses_to_cut_a_hint_short, setup, teardown),
        cmocka_unit_test(names_every_reason_code),
        cmocka_unit_test(identifies_clients_by_token_and_address),
        cmocka_unit_test(identifies_from_a_proxy_authorization_header),
        cmocka_unit_test(matches_everyone_with_a_zero_length_prefix),
        cmocka_unit_test(identifies_by_address_alone_token_clients_included),
        cmocka_unit_test(is_shared_read_only_by_threads),
        cmocka_unit_test(decides_in_constant_time_with_a_thousand_environments),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
