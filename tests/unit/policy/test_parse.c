/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/policy/test_parse.c - snapshot validation: every rule of docs/reference/snapshot.md §3
 * with the exact JSON path of its error, every limit at and over its bound, the files of
 * tests/data/policy, and the allocation-failure sweep over parse + compile (jansson included).
 *
 * JSON in this file is written with single quotes for readability; json() turns them into
 * double quotes before parsing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/buf.h"
#include "base/mem.h"
#include "policy/decision.h"
#include "policy/snapshot.h"
#include "tests/support/lines.h"
#include "tests/support/sqjson.h"

/* Cap of the test's document buffers (the limit tests build a few MiB). */
#define TEST_BUF_MAX ((size_t)256 << 20)

#define DOC_RULES(r)   "{'version':1,'environments':{'ci':{'default':'deny','rules':[" r "]}}}"
#define DOC_CLIENTS(c) "{'version':1,'environments':{'ci':{'default':'deny'}},'clients':[" c "]}"

/* The document with ' turned into ", in a buffer the caller finishes. */
static void json(struct sl_buf *b, const char *text)
{
    sl_buf_init(b, TEST_BUF_MAX);
    assert_int_equal(sl_test_sqjson(b, text), 0);
}

static void error_line(const void *list, size_t i, char *out, size_t cap)
{
    const struct sl_policy_errors *errs = list;

    (void)snprintf(out, cap, "%s: %s", errs->items[i].path, errs->items[i].message);
}

/* Parses `b` and checks the errors against `want` (NULL-terminated; "...*" matches a prefix). */
static void expect_errors_in(const struct sl_buf *b, const char *const *want)
{
    struct sl_policy_errors errs = { NULL, 0, false };
    struct sl_snapshot *s = NULL;
    int rc = sl_snapshot_parse(b->p, b->len, &s, &errs);
    char why[2048];

    if (sl_test_lines_check(error_line, &errs, errs.count, want, why, sizeof(why)) != 0) {
        fail_msg("errors of %s: %s", (const char *)b->p, why);
    }
    if (want[0] == NULL) {
        assert_int_equal(rc, 0);
        assert_non_null(s);
    } else {
        assert_int_equal(rc, SL_EPOLICY);
        assert_null(s);
    }
    sl_snapshot_unref(s);
    sl_policy_errors_finish(&errs);
}

static void expect_errors(const char *text, const char *const *want)
{
    struct sl_buf b;

    json(&b, text);
    expect_errors_in(&b, want);
    sl_buf_finish(&b);
}

#define EXPECT(text, ...) expect_errors((text), SL_TEST_LINES(__VA_ARGS__))

#define EXPECT_VALID(text) EXPECT((text), NULL)

static void accepts_the_smallest_documents(void **state)
{
    (void)state;
    EXPECT_VALID("{'version':1,'environments':{}}");
    EXPECT_VALID("{'version':9007199254740993,'environments':{},'clients':[]}");
    EXPECT_VALID("{'version':1,'environments':{'e':{'default':'allow','rules':[]}}}");
    EXPECT_VALID(DOC_RULES("{'host':'a.example.com','methods':[]}"));
    EXPECT_VALID(
            DOC_RULES("{'host':'a.example.com','credential':{'header':'X-K','value':'a\\tb'}}"));
    EXPECT_VALID(DOC_CLIENTS("{'id':'a','ip':'10.0.0.1','environment':'ci'}"));
}

static void reports_the_root_and_version(void **state)
{
    (void)state;
    EXPECT("[]", "$: the snapshot must be a JSON object");
    EXPECT("{'verison':1,'environments':{}}",
           "$.verison: unknown field (expected version, environments, clients)",
           "$.version: required field missing");
    EXPECT("{'version':0,'environments':{}}", "$.version: must be an integer >= 1");
    EXPECT("{'version':-3,'environments':{}}", "$.version: must be an integer >= 1");
    EXPECT("{'version':'7','environments':{}}", "$.version: must be an integer >= 1");
    EXPECT("{'version':7.0,'environments':{}}", "$.version: must be an integer >= 1");
    EXPECT("{'version':null,'environments':{}}", "$.version: must be an integer >= 1");
    EXPECT("{'version':1}", "$.environments: required field missing");
    EXPECT("{'version':1,'environments':[]}",
           "$.environments: must be an object of environments by name");
    EXPECT("{'version':1,'environments':{},'clients':{}}",
           "$.clients: must be an array of clients");
}

static void reports_malformed_json_without_quoting_it(void **state)
{
    (void)state;
    EXPECT("{'version':1,", "$: invalid JSON at line 1, column *");
    EXPECT("", "$: invalid JSON at line 1, column *");
    EXPECT("{'version':1,'environments':{}} x", "$: invalid JSON at line 1, column *");
    EXPECT("{'version':1,'version':2,'environments':{}}",
           "$: invalid JSON at line 1, column 22: duplicate object key");
    /* jansson would quote the text near the error; a secret may be there. */
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'header':'X','value':'s3cr3t\\q'}}"),
           "$: invalid JSON at line 1, column 121: invalid escape");
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'header':'X','value':'s3\\u0000t'}}"),
           "$: invalid JSON at line 1, column 123: strings must not contain NUL characters "
           "(\\u0000)");
}

static void refuses_nesting_deeper_than_the_schema_needs(void **state)
{
    struct sl_buf b;

    (void)state;
    sl_buf_init(&b, TEST_BUF_MAX);
    for (int i = 0; i < 17; i++) {
        assert_int_equal(sl_buf_append_str(&b, "["), 0);
    }
    for (int i = 0; i < 17; i++) {
        assert_int_equal(sl_buf_append_str(&b, "]"), 0);
    }
    expect_errors_in(&b, (const char *const[]){ "$: nested deeper than 16 levels", NULL });
    sl_buf_finish(&b);
    /* Brackets inside strings do not count. */
    EXPECT_VALID("{'version':1,'environments':{'e':{'default':'deny','rules':[{'host':'a.com',"
                 "'credential':{'header':'X','value':'[[[[[[[[[[[[[[[[[[[[{{{{{{{{{{'}}]}}}");
}

static void reports_environment_errors(void **state)
{
    (void)state;
    EXPECT("{'version':1,'environments':{'ci':[]}}",
           "$.environments.ci: an environment must be an object");
    EXPECT("{'version':1,'environments':{'ci':{}}}",
           "$.environments.ci.default: required field missing");
    EXPECT("{'version':1,'environments':{'ci':{'default':'block'}}}",
           "$.environments.ci.default: must be \"deny\" or \"allow\"");
    EXPECT("{'version':1,'environments':{'ci':{'default':'Deny'}}}",
           "$.environments.ci.default: must be \"deny\" or \"allow\"");
    EXPECT("{'version':1,'environments':{'ci':{'default':true}}}",
           "$.environments.ci.default: must be a string");
    EXPECT("{'version':1,'environments':{'ci':{'default':'deny','rule':[]}}}",
           "$.environments.ci.rule: unknown field (expected default, rules, label, observe_until)");
    EXPECT("{'version':1,'environments':{'ci':{'default':'deny','label':''}}}",
           "$.environments.ci.label: must be 1-512 bytes without control characters");
    EXPECT("{'version':1,'environments':{'ci':{'default':'deny','label':'a\\nb'}}}",
           "$.environments.ci.label: must be 1-512 bytes without control characters");
    EXPECT("{'version':1,'environments':{'ci':{'default':'deny','label':7}}}",
           "$.environments.ci.label: must be a string");
    EXPECT("{'version':1,'environments':{'ci':{'default':'deny','rules':{}}}}",
           "$.environments.ci.rules: must be an array of rules");
    EXPECT("{'version':1,'environments':{'bad name!':{'default':'deny'}}}",
           "$.environments[\"bad name!\"]: environment names are 1-128 characters of A-Z a-z "
           "0-9 . _ -");
    EXPECT("{'version':1,'environments':{'':{'default':'deny'}}}",
           "$.environments[\"\"]: environment names are 1-128 characters of A-Z a-z 0-9 . _ -");
    EXPECT("{'version':1,'environments':{'ci.py':{'default':'deny','rules':[{'host':'a..b'}]}}}",
           "$.environments[\"ci.py\"].rules[0].host: bad host pattern \"a..b\": empty label");
}

static void reports_rule_host_errors(void **state)
{
    (void)state;
    EXPECT(DOC_RULES("'a.com'"), "$.environments.ci.rules[0]: a rule must be an object");
    EXPECT(DOC_RULES("{'hots':'a.com'}"),
           "$.environments.ci.rules[0].hots: unknown field (expected host, methods, credential, "
           "tls)",
           "$.environments.ci.rules[0].host: required field missing");
    EXPECT(DOC_RULES("{'host':12}"), "$.environments.ci.rules[0].host: must be a string");
    EXPECT(DOC_RULES("{'host':'ok.com'},{'host':'a..b'}"),
           "$.environments.ci.rules[1].host: bad host pattern \"a..b\": empty label");
    EXPECT(DOC_RULES("{'host':'10.0.0.*'}"),
           "$.environments.ci.rules[0].host: bad host pattern \"10.0.0.*\": '*' is not allowed "
           "in IP addresses");
    EXPECT(DOC_RULES("{'host':'*.10'}"),
           "$.environments.ci.rules[0].host: bad host pattern \"*.10\": numeric last label but "
           "not an IPv4 address");
    EXPECT(DOC_RULES("{'host':'[::1%eth0]'}"),
           "$.environments.ci.rules[0].host: bad host pattern \"[::1%eth0]\": IPv6 zone ids are "
           "not allowed");
    EXPECT(DOC_RULES("{'host':'a_b.com'}"),
           "$.environments.ci.rules[0].host: bad host pattern \"a_b.com\": contains '_'");
    EXPECT(DOC_RULES("{'host':'ex ample.com'}"),
           "$.environments.ci.rules[0].host: bad host pattern \"ex ample.com\": contains white "
           "space");
    EXPECT(DOC_RULES("{'host':'caf\\u00e9.com'}"),
           "$.environments.ci.rules[0].host: bad host pattern \"caf\\xc3\\xa9.com\": contains "
           "non-ASCII bytes (IDNs must use their xn-- form)");
    EXPECT(DOC_RULES("{'host':'a.com:0'}"),
           "$.environments.ci.rules[0].host: bad host pattern \"a.com:0\": port out of range");
    EXPECT(DOC_RULES("{'host':'a.com:'}"),
           "$.environments.ci.rules[0].host: bad host pattern \"a.com:\": empty port");
    EXPECT(DOC_RULES("{'host':':443'}"),
           "$.environments.ci.rules[0].host: bad host pattern \":443\": empty host");
    EXPECT(DOC_RULES("{'host':'a.com:https'}"),
           "$.environments.ci.rules[0].host: bad host pattern \"a.com:https\": port is not a "
           "decimal number");
    EXPECT(DOC_RULES("{'host':''}"),
           "$.environments.ci.rules[0].host: bad host pattern \"\": empty host");
    EXPECT(DOC_RULES("{'host':'1.2.3.4.5'}"),
           "$.environments.ci.rules[0].host: bad host pattern \"1.2.3.4.5\": numeric last label "
           "but not an IPv4 address");
    /* A '*' without a label boundary, and an xn-- label that is no A-label. */
    EXPECT(DOC_RULES("{'host':'*'},{'host':'*github.test'},{'host':'a.*.b.test'},"
                     "{'host':'xn--zz'},{'host':'api.xn--zz.test:8443'}"),
           "$.environments.ci.rules[0].host: bad host pattern \"*\": '*' alone would match "
           "every host*",
           "$.environments.ci.rules[1].host: bad host pattern \"*github.test\": '*' must end "
           "the first label, right before a dot: *example.com would also match evilexample.com "
           "(write *.example.com)",
           "$.environments.ci.rules[2].host: bad host pattern \"a.*.b.test\": '*' only in the "
           "first label*",
           "$.environments.ci.rules[3].host: bad host pattern \"xn--zz\": an xn-- label that is "
           "not valid Punycode (RFC 3492)",
           "$.environments.ci.rules[4].host: bad host pattern \"api.xn--zz.test:8443\": an "
           "xn-- label that is not valid Punycode (RFC 3492)");
    EXPECT_VALID(DOC_RULES("{'host':'*.github.test'},{'host':'api-*.github.test:8443'},"
                           "{'host':'xn--bcher-kva.test'}"));
}

/* Lists the warnings of `text` (a valid document) against `want`. */
static void expect_warnings(const char *text, const char *const *want)
{
    struct sl_buf b;
    struct sl_policy_errors errs = { NULL, 0, false };
    struct sl_policy_errors warns = { NULL, 0, false };
    struct sl_snapshot *s = NULL;
    char why[2048];

    json(&b, text);
    assert_int_equal(sl_snapshot_parse_warn(b.p, b.len, &s, &errs, &warns), 0);
    assert_int_equal(errs.count, 0);
    if (sl_test_lines_check(error_line, &warns, warns.count, want, why, sizeof(why)) != 0) {
        fail_msg("warnings of %s: %s", (const char *)b.p, why);
    }
    sl_snapshot_unref(s);
    sl_policy_errors_finish(&errs);
    sl_policy_errors_finish(&warns);
    sl_buf_finish(&b);
}

static void warns_of_hosts_normalised_behind_the_authors_back(void **state)
{
    (void)state;
    expect_warnings(
            DOC_RULES("{'host':'API.GITHUB.TEST'},{'host':'api.github.test.'},"
                      "{'host':'pkgs.example.org'},{'host':'*.Example.org.:8443'}"),
            SL_TEST_LINES("$.environments.ci.rules[0].host: host pattern \"API.GITHUB.TEST\" "
                          "is matched as \"api.github.test\" (host names are matched in lower "
                          "case)",
                          "$.environments.ci.rules[1].host: host pattern \"api.github.test.\" "
                          "is matched as \"api.github.test\" (the trailing dot is dropped)",
                          "$.environments.ci.rules[3].host: host pattern "
                          "\"*.Example.org.:8443\" is matched as \"*.example.org:8443\" (host "
                          "names are matched in lower case, and the trailing dot is dropped)"));
    expect_warnings(DOC_RULES("{'host':'pkgs.example.org'}"), SL_TEST_LINES(NULL));
}

static void reports_method_errors(void **state)
{
    (void)state;
    EXPECT(DOC_RULES("{'host':'a.com','methods':['get']}"),
           "$.environments.ci.rules[0].methods[0]: methods are case-sensitive: \"get\" would "
           "never match; did you mean \"GET\"?");
    EXPECT(DOC_RULES("{'host':'a.com','methods':['GET','Post']}"),
           "$.environments.ci.rules[0].methods[1]: methods are case-sensitive: \"Post\" would "
           "never match; did you mean \"POST\"?");
    EXPECT(DOC_RULES("{'host':'a.com','methods':['GET','HEAD','GET']}"),
           "$.environments.ci.rules[0].methods[2]: duplicate method \"GET\"");
    EXPECT(DOC_RULES("{'host':'a.com','methods':'GET'}"),
           "$.environments.ci.rules[0].methods: must be an array of method names");
    EXPECT(DOC_RULES("{'host':'a.com','methods':[1]}"),
           "$.environments.ci.rules[0].methods[0]: must be a string");
    EXPECT(DOC_RULES("{'host':'a.com','methods':['G T']}"),
           "$.environments.ci.rules[0].methods[0]: \"G T\" is not a method name (RFC 9110 token "
           "characters only)");
    EXPECT(DOC_RULES("{'host':'a.com','methods':['']}"),
           "$.environments.ci.rules[0].methods[0]: \"\" is not a method name (1-32 characters)");
    EXPECT(DOC_RULES("{'host':'a.com','methods':['ABCDEFGHIJABCDEFGHIJABCDEFGHIJABC']}"),
           "$.environments.ci.rules[0].methods[0]: \"ABCDEFGHIJABCDEFGHIJABCDEFGHIJABC\" is not "
           "a method name (1-32 characters)");
    EXPECT_VALID(DOC_RULES("{'host':'a.com','methods':['ABCDEFGHIJABCDEFGHIJABCDEFGHIJAB',"
                           "'PROPFIND','M-SEARCH','X_Y!']}"));
}

static void reports_credential_errors_without_quoting_the_value(void **state)
{
    (void)state;
    EXPECT(DOC_RULES("{'host':'a.com','credential':'Bearer x'}"),
           "$.environments.ci.rules[0].credential: must be an object with \"header\" and "
           "\"value\"");
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'header':'Authorization','val':'x'}}"),
           "$.environments.ci.rules[0].credential.val: unknown field (expected header, value, "
           "placeholder_env)",
           "$.environments.ci.rules[0].credential.value: required field missing");
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'value':'x'}}"),
           "$.environments.ci.rules[0].credential.header: required field missing");
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'header':'Content-Length','value':'0'}}"),
           "$.environments.ci.rules[0].credential.header: \"Content-Length\" cannot carry a "
           "credential: it is a framing, hop-by-hop or routing header");
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'header':'PROXY-AUTHORIZATION','value':'x'}}"),
           "$.environments.ci.rules[0].credential.header: \"PROXY-AUTHORIZATION\" cannot carry "
           "a credential: it is a framing, hop-by-hop or routing header");
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'header':'te','value':'x'}}"),
           "$.environments.ci.rules[0].credential.header: \"te\" cannot carry a credential: it "
           "is a framing, hop-by-hop or routing header");
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'header':'Expect','value':'100-continue'}}"),
           "$.environments.ci.rules[0].credential.header: \"Expect\" cannot carry a credential: "
           "it is a framing, hop-by-hop or routing header");
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'header':'X:Y','value':'x'}}"),
           "$.environments.ci.rules[0].credential.header: \"X:Y\" is not a header name (RFC "
           "9110 token characters only)");
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'header':'','value':'x'}}"),
           "$.environments.ci.rules[0].credential.header: \"\" is not a header name (1-128 "
           "characters)");
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'header':'X','value':'s3cr3t\\r'}}"),
           "$.environments.ci.rules[0].credential.value: contains a carriage return (CR), which "
           "would split the header");
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'header':'X','value':'s3cr3t\\nX-Evil: 1'}}"),
           "$.environments.ci.rules[0].credential.value: contains a line feed (LF), which would "
           "split the header");
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'header':'X','value':'s3\\u001bt'}}"),
           "$.environments.ci.rules[0].credential.value: contains a control character");
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'header':'X','value':'s3\\u007ft'}}"),
           "$.environments.ci.rules[0].credential.value: contains a control character");
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'header':'X','value':''}}"),
           "$.environments.ci.rules[0].credential.value: must not be empty");
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'header':'X','value':'s3cr3t '}}"),
           "$.environments.ci.rules[0].credential.value: must not start or end with a space or "
           "tab");
    EXPECT(DOC_RULES("{'host':'a.com','credential':{'header':'X','value':7}}"),
           "$.environments.ci.rules[0].credential.value: must be a string");
}

static void reports_passthrough_errors(void **state)
{
    (void)state;
    EXPECT_VALID(DOC_RULES("{'host':'a.com','tls':'passthrough'}"));
    EXPECT_VALID(DOC_RULES("{'host':'a.com','tls':'passthrough','methods':[]}"));
    EXPECT_VALID(DOC_RULES("{'host':'a.com','tls':'intercept','methods':['GET'],"
                           "'credential':{'header':'X-K','value':'v'}}"));
    EXPECT(DOC_RULES("{'host':'a.com','tls':'passthrough','methods':['GET','HEAD']}"),
           "$.environments.ci.rules[0].methods: a \"tls\": \"passthrough\" rule cannot filter "
           "methods: the proxy does not see the requests inside the tunnel");
    EXPECT(DOC_RULES("{'host':'a.com','tls':'passthrough','credential':{'header':'X-K',"
                     "'value':'s3cr3t'}}"),
           "$.environments.ci.rules[0].credential: a \"tls\": \"passthrough\" rule cannot carry "
           "a credential: the proxy does not see the requests inside the tunnel");
    /* Both at once, and in a client's runtime rules too. */
    EXPECT(DOC_CLIENTS("{'id':'a','environment':'ci','ip':'10.0.0.1','rules':[{'host':'a.com',"
                       "'methods':['GET'],'tls':'passthrough','credential':{'header':'X-K',"
                       "'value':'v'}}]}"),
           "$.clients[0].rules[0].methods: a \"tls\": \"passthrough\" rule cannot filter "
           "methods*",
           "$.clients[0].rules[0].credential: a \"tls\": \"passthrough\" rule cannot carry*");
    EXPECT(DOC_RULES("{'host':'a.com','tls':'Passthrough'}"),
           "$.environments.ci.rules[0].tls: must be \"intercept\" or \"passthrough\"");
    EXPECT(DOC_RULES("{'host':'a.com','tls':''}"),
           "$.environments.ci.rules[0].tls: must be \"intercept\" or \"passthrough\"");
    EXPECT(DOC_RULES("{'host':'a.com','tls':null}"), "$.environments.ci.rules[0].tls: must be a "
                                                     "string");
}

static void reports_client_errors(void **state)
{
    (void)state;
    EXPECT(DOC_CLIENTS("'x'"), "$.clients[0]: a client must be an object");
    EXPECT(DOC_CLIENTS("{}"), "$.clients[0].id: required field missing",
           "$.clients[0].environment: required field missing",
           "$.clients[0]: a client needs at least one of \"token\", \"ip\" and \"cidr\"");
    EXPECT(DOC_CLIENTS("{'id':'a','tokne':'t','environment':'ci'}"),
           "$.clients[0].tokne: unknown field (expected id, environment, token, ip, cidr, "
           "expires_at, rules, git, placeholders)",
           "$.clients[0]: a client needs at least one of \"token\", \"ip\" and \"cidr\"");
    EXPECT(DOC_CLIENTS("{'id':'a:b','token':'t','environment':'ci'}"),
           "$.clients[0].id: \"a:b\": client ids are 1-128 characters of A-Z a-z 0-9 . _ -");
    EXPECT(DOC_CLIENTS("{'id':'','token':'t','environment':'ci'}"),
           "$.clients[0].id: \"\": client ids are 1-128 characters of A-Z a-z 0-9 . _ -");
    EXPECT(DOC_CLIENTS("{'id':'a','token':'t','environment':'ci'},"
                       "{'id':'b','token':'t','environment':'ci'},"
                       "{'id':'a','token':'u','environment':'ci'}"),
           "$.clients[2].id: duplicate id \"a\" (first used at $.clients[0])");
    EXPECT(DOC_CLIENTS("{'id':'a','token':'t','environment':'cd'}"),
           "$.clients[0].environment: unknown environment \"cd\"");
    EXPECT(DOC_CLIENTS("{'id':'a','token':'t','environment':'CI'}"),
           "$.clients[0].environment: unknown environment \"CI\"");
    EXPECT(DOC_CLIENTS("{'id':'a','token':'','environment':'ci'}"),
           "$.clients[0].token: a token is 1-256 visible ASCII characters (no spaces)");
    EXPECT(DOC_CLIENTS("{'id':'a','token':'pt secret','environment':'ci'}"),
           "$.clients[0].token: a token is 1-256 visible ASCII characters (no spaces)");
    EXPECT(DOC_CLIENTS("{'id':'a','token':'pt\\u00e9','environment':'ci'}"),
           "$.clients[0].token: a token is 1-256 visible ASCII characters (no spaces)");
    EXPECT(DOC_CLIENTS("{'id':'a','token':true,'environment':'ci'}"),
           "$.clients[0].token: must be a string");
}

static void reports_client_address_and_expiry_errors(void **state)
{
    (void)state;
    EXPECT(DOC_CLIENTS("{'id':'a','ip':'10.0.0.256','environment':'ci'}"),
           "$.clients[0].ip: \"10.0.0.256\" is not an IPv4 or IPv6 address");
    EXPECT(DOC_CLIENTS("{'id':'a','ip':'0x7f.1','environment':'ci'}"),
           "$.clients[0].ip: \"0x7f.1\" is not an IPv4 or IPv6 address");
    EXPECT(DOC_CLIENTS("{'id':'a','ip':'[::1]','environment':'ci'}"),
           "$.clients[0].ip: \"[::1]\" is not an IPv4 or IPv6 address (write IPv6 without "
           "brackets)");
    EXPECT(DOC_CLIENTS("{'id':'a','ip':'fe80::1%eth0','environment':'ci'}"),
           "$.clients[0].ip: \"fe80::1%eth0\" is not an IPv4 or IPv6 address");
    EXPECT(DOC_CLIENTS("{'id':'a','cidr':'10.0.0.1/8','environment':'ci'}"),
           "$.clients[0].cidr: \"10.0.0.1/8\" has host bits set; did you mean \"10.0.0.0/8\"?");
    EXPECT(DOC_CLIENTS("{'id':'a','cidr':'fd00::1/8','environment':'ci'}"),
           "$.clients[0].cidr: \"fd00::1/8\" has host bits set; did you mean \"fd00::/8\"?");
    EXPECT(DOC_CLIENTS("{'id':'a','cidr':'10.0.0.0/33','environment':'ci'}"),
           "$.clients[0].cidr: \"10.0.0.0/33\" is not a CIDR range (like 10.0.0.0/8 or fd00::/8)");
    EXPECT(DOC_CLIENTS("{'id':'a','cidr':'10.0.0.0/08','environment':'ci'}"),
           "$.clients[0].cidr: \"10.0.0.0/08\" is not a CIDR range (like 10.0.0.0/8 or fd00::/8)");
    EXPECT(DOC_CLIENTS("{'id':'a','cidr':'10.0.0.0','environment':'ci'}"),
           "$.clients[0].cidr: \"10.0.0.0\" is not a CIDR range (like 10.0.0.0/8 or fd00::/8)");
    EXPECT(DOC_CLIENTS("{'id':'a','cidr':'fd00::/129','environment':'ci'}"),
           "$.clients[0].cidr: \"fd00::/129\" is not a CIDR range (like 10.0.0.0/8 or fd00::/8)");
    EXPECT_VALID(DOC_CLIENTS("{'id':'a','cidr':'0.0.0.0/0','environment':'ci'},"
                             "{'id':'b','cidr':'fd00::/128','environment':'ci'},"
                             "{'id':'c','cidr':'10.1.2.3/32','ip':'10.1.2.3','environment':'ci'}"));
    EXPECT(DOC_CLIENTS("{'id':'a','ip':'10.0.0.1','expires_at':'2026-11-30','environment':'ci'}"),
           "$.clients[0].expires_at: \"2026-11-30\" is not an RFC 3339 date-time (like "
           "2026-11-30T23:00:00Z)");
    EXPECT(DOC_CLIENTS("{'id':'a','ip':'10.0.0.1','expires_at':7,'environment':'ci'}"),
           "$.clients[0].expires_at: must be a string");
}

static void reports_rfc3339_errors(void **state)
{
    const char *bad[] = {
        "2026-11-30T23:00:00",
        "2026-11-30T24:00:00Z",
        "2026-11-30T23:60:00Z",
        "2026-11-30T23:00:61Z",
        "2026-13-01T00:00:00Z",
        "2026-00-01T00:00:00Z",
        "2026-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-11-30T23:00:00+2:00",
        "2026-11-30T23:00:00+24:00",
        "2026-11-30T23:00:00+02:60",
        "2026-11-30T23:00:00+0200",
        "2026-11-30T23:00:00.Z",
        "2026-11-30 23:00:00Z",
        "26-11-30T23:00:00Z",
        "2026-11-30T23:00Z",
        "2026-11-30T23:00:00ZZ",
        "+2026-11-30T23:00:00Z",
        "2026-1-30T23:00:00Z",
        "2026-11-30T23:00:00 Z",
        "2026-11-30T23:00:00.12345678901234567890123456789012345678901234567890Z",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char doc[512];
        char want[512];

        (void)snprintf(
                doc, sizeof(doc),
                DOC_CLIENTS("{'id':'a','ip':'10.0.0.1','expires_at':'%s','environment':'ci'}"),
                bad[i]);
        (void)snprintf(want, sizeof(want),
                       "$.clients[0].expires_at: \"%.64s%s\" is not an RFC 3339 date-time (like "
                       "2026-11-30T23:00:00Z)",
                       bad[i], strlen(bad[i]) > 64 ? "..." : "");
        expect_errors(doc, (const char *const[]){ want, NULL });
    }
}

static struct sl_snapshot *parse_ok(const char *text)
{
    struct sl_buf b;
    struct sl_snapshot *s = NULL;

    json(&b, text);
    assert_int_equal(sl_snapshot_parse(b.p, b.len, &s, NULL), 0);
    sl_buf_finish(&b);
    return s;
}

static void reads_rfc3339_times_to_the_second(void **state)
{
    struct time_case {
        const char *text;
        int64_t at;
    } cases[] = {
        { "1970-01-01T00:00:00Z", 0 },
        { "1970-01-01t00:00:01z", 1 },
        { "2026-11-30T23:00:00Z", 1796079600 },
        { "2026-11-30T23:00:00.999Z", 1796079600 },
        { "2026-12-01T01:00:00+02:00", 1796079600 },
        { "2026-11-30T20:30:00-02:30", 1796079600 },
        { "2000-02-29T12:00:00Z", 951825600 },
        { "2016-12-31T23:59:60Z", 1483228800 },
        { "1969-12-31T23:59:59Z", -1 },
        { "9999-12-31T23:59:59Z", 253402300799 },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char doc[256];
        struct sl_snapshot *s;
        int64_t at = 0;

        (void)snprintf(
                doc, sizeof(doc),
                DOC_CLIENTS("{'id':'a','ip':'10.0.0.1','expires_at':'%s','environment':'ci'}"),
                cases[i].text);
        s = parse_ok(doc);
        assert_true(sl_client_expiry(sl_snapshot_find_client(s, "a"), &at));
        if (at != cases[i].at) {
            fail_msg("%s: %lld, want %lld", cases[i].text, (long long)at, (long long)cases[i].at);
        }
        sl_snapshot_unref(s);
    }
}

/* ---- limits, each at and over its bound ---- */

static void append(struct sl_buf *b, const char *fmt, ...) SL_PRINTF(2, 3);

static void append(struct sl_buf *b, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof(text));
    assert_int_equal(sl_buf_append(b, text, (size_t)n), 0);
}

/* An environment `ci` with `n` rules, `creds` of them with a credential. */
static void doc_with_rules(struct sl_buf *b, size_t n, size_t creds)
{
    sl_buf_init(b, TEST_BUF_MAX);
    append(b, "{\"version\":1,\"environments\":{\"ci\":{\"default\":\"deny\",\"rules\":[");
    for (size_t i = 0; i < n; i++) {
        append(b, "%s{\"host\":\"h%zu.example.com\"%s}", i > 0 ? "," : "", i,
               i < creds ? ",\"credential\":{\"header\":\"X-K\",\"value\":\"v\"}" : "");
    }
    append(b, "]}}}");
}

static void enforces_the_rule_and_credential_limits(void **state)
{
    struct sl_buf b;

    (void)state;
    doc_with_rules(&b, 100, 100);
    expect_errors_in(&b, (const char *const[]){ NULL });
    sl_buf_finish(&b);
    doc_with_rules(&b, 101, 0);
    expect_errors_in(
            &b, (const char *const[]){ "$.environments.ci.rules: too many rules (101; at most 100)",
                                       NULL });
    sl_buf_finish(&b);
    doc_with_rules(&b, 101, 101);
    expect_errors_in(&b, (const char *const[]){
                                 "$.environments.ci.rules: too many rules (101; at most 100)",
                                 "$.environments.ci.rules: too many credentials (101; at most 100)",
                                 NULL });
    sl_buf_finish(&b);
}

static void enforces_the_limits_on_client_rules(void **state)
{
    struct sl_buf b;

    (void)state;
    for (size_t n = 100; n <= 101; n++) {
        sl_buf_init(&b, TEST_BUF_MAX);
        append(&b, "{\"version\":1,\"environments\":{\"ci\":{\"default\":\"deny\"}},\"clients\":"
                   "[{\"id\":\"a\",\"ip\":\"10.0.0.1\",\"environment\":\"ci\",\"rules\":[");
        for (size_t i = 0; i < n; i++) {
            append(&b, "%s{\"host\":\"h%zu.example.com\"}", i > 0 ? "," : "", i);
        }
        append(&b, "]}]}");
        if (n == 100) {
            expect_errors_in(&b, (const char *const[]){ NULL });
        } else {
            expect_errors_in(
                    &b, (const char *const[]){
                                "$.clients[0].rules: too many rules (101; at most 100)", NULL });
        }
        sl_buf_finish(&b);
    }
}

static void enforces_the_environment_limit(void **state)
{
    struct sl_buf b;

    (void)state;
    for (size_t n = 4096; n <= 4097; n++) {
        sl_buf_init(&b, TEST_BUF_MAX);
        append(&b, "{\"version\":1,\"environments\":{");
        for (size_t i = 0; i < n; i++) {
            append(&b, "%s\"env-%zu\":{\"default\":\"deny\"}", i > 0 ? "," : "", i);
        }
        append(&b, "}}");
        if (n == 4096) {
            expect_errors_in(&b, (const char *const[]){ NULL });
        } else {
            expect_errors_in(
                    &b,
                    (const char *const[]){
                            "$.environments: too many environments (4097; at most 4096)", NULL });
        }
        sl_buf_finish(&b);
    }
}

static void enforces_the_client_limit(void **state)
{
    struct sl_buf b;

    (void)state;
    for (size_t n = 65536; n <= 65537; n++) {
        sl_buf_init(&b, TEST_BUF_MAX);
        append(&b, "{\"version\":1,\"environments\":{\"ci\":{\"default\":\"deny\"}},\"clients\":[");
        for (size_t i = 0; i < n; i++) {
            append(&b, "%s{\"id\":\"c%zu\",\"cidr\":\"10.%zu.%zu.0/24\",\"environment\":\"ci\"}",
                   i > 0 ? "," : "", i, (i >> 8) & 0xff, i & 0xff);
        }
        append(&b, "]}");
        if (n == 65536) {
            expect_errors_in(&b, (const char *const[]){ NULL });
        } else {
            expect_errors_in(
                    &b, (const char *const[]){ "$.clients: too many clients (65537; at most 65536)",
                                               NULL });
        }
        sl_buf_finish(&b);
    }
}

static void enforces_length_limits_on_names(void **state)
{
    char name[300];
    char doc[1024];
    char want[1024];

    (void)state;
    /* Host patterns: 253 characters (labels of 63), then 254. */
    memset(name, 'b', 253);
    name[63] = name[127] = name[191] = '.';
    name[253] = '\0';
    (void)snprintf(doc, sizeof(doc), DOC_RULES("{'host':'%s'}"), name);
    EXPECT_VALID(doc);
    (void)snprintf(doc, sizeof(doc), DOC_RULES("{'host':'%s:8443'}"), name);
    EXPECT_VALID(doc);
    (void)snprintf(doc, sizeof(doc), DOC_RULES("{'host':'*.%s'}"), name + 2);
    EXPECT_VALID(doc);
    name[253] = 'c';
    name[254] = '\0';
    (void)snprintf(doc, sizeof(doc), DOC_RULES("{'host':'%s'}"), name);
    (void)snprintf(
            want, sizeof(want),
            "$.environments.ci.rules[0].host: bad host pattern \"%.64s...\": longer than 253 "
            "characters",
            name);
    expect_errors(doc, (const char *const[]){ want, NULL });
    /* Environment names and client ids: 128 characters, then 129. */
    memset(name, 'e', 129);
    name[128] = '\0';
    (void)snprintf(doc, sizeof(doc), "{'version':1,'environments':{'%s':{'default':'deny'}}}",
                   name);
    EXPECT_VALID(doc);
    (void)snprintf(doc, sizeof(doc), DOC_CLIENTS("{'id':'%s','token':'t','environment':'ci'}"),
                   name);
    EXPECT_VALID(doc);
    name[128] = 'e';
    name[129] = '\0';
    (void)snprintf(doc, sizeof(doc), "{'version':1,'environments':{'%s':{'default':'deny'}}}",
                   name);
    (void)snprintf(
            want, sizeof(want),
            "$.environments[\"%.64s...\"]: environment names are 1-128 characters of A-Z a-z "
            "0-9 . _ -",
            name);
    expect_errors(doc, (const char *const[]){ want, NULL });
    (void)snprintf(doc, sizeof(doc), DOC_CLIENTS("{'id':'%s','token':'t','environment':'ci'}"),
                   name);
    (void)snprintf(
            want, sizeof(want),
            "$.clients[0].id: \"%.64s...\": client ids are 1-128 characters of A-Z a-z 0-9 . _ -",
            name);
    expect_errors(doc, (const char *const[]){ want, NULL });
}

static void enforces_the_token_and_method_limits(void **state)
{
    char token[300];
    char doc[2048];
    char methods[1024];
    size_t len = 0;

    (void)state;
    memset(token, 'T', 257);
    token[256] = '\0';
    (void)snprintf(doc, sizeof(doc), DOC_CLIENTS("{'id':'a','token':'%s','environment':'ci'}"),
                   token);
    EXPECT_VALID(doc);
    token[256] = 'T';
    token[257] = '\0';
    (void)snprintf(doc, sizeof(doc), DOC_CLIENTS("{'id':'a','token':'%s','environment':'ci'}"),
                   token);
    EXPECT(doc, "$.clients[0].token: a token is 1-256 visible ASCII characters (no spaces)");
    for (int i = 0; i < 33; i++) {
        len += (size_t)snprintf(methods + len, sizeof(methods) - len, "%s'M%d'", i ? "," : "", i);
        if (i == 31) {
            (void)snprintf(doc, sizeof(doc), DOC_RULES("{'host':'a.com','methods':[%s]}"), methods);
            EXPECT_VALID(doc);
        }
    }
    (void)snprintf(doc, sizeof(doc), DOC_RULES("{'host':'a.com','methods':[%s]}"), methods);
    EXPECT(doc, "$.environments.ci.rules[0].methods: too many methods (33; at most 32)");
}

static void stops_recording_at_the_error_cap(void **state)
{
    struct sl_buf b;
    struct sl_policy_errors errs = { NULL, 0, false };
    struct sl_snapshot *s = NULL;

    (void)state;
    sl_buf_init(&b, TEST_BUF_MAX);
    append(&b, "{\"version\":1,\"environments\":{\"ci\":{\"default\":\"deny\"}},\"clients\":[");
    for (int i = 0; i < 150; i++) {
        append(&b, "%s{\"id\":\"c %d\",\"ip\":\"10.0.0.1\",\"environment\":\"ci\"}", i ? "," : "",
               i);
    }
    append(&b, "]}");
    assert_int_equal(sl_snapshot_parse(b.p, b.len, &s, &errs), SL_EPOLICY);
    assert_null(s);
    assert_int_equal(errs.count, SL_POLICY_ERRORS_MAX);
    assert_true(errs.truncated);
    assert_string_equal(errs.items[99].path, "$.clients[99].id");
    sl_policy_errors_finish(&errs);
    assert_int_equal(errs.count, 0);
    /* Without an error list the verdict is the same. */
    assert_int_equal(sl_snapshot_parse(b.p, b.len, &s, NULL), SL_EPOLICY);
    sl_buf_finish(&b);
}

/* ---- files of tests/data/policy ---- */

static void read_data(const char *name, struct sl_buf *b)
{
    const char *dir = getenv("SLUICE_TEST_DATA");
    char path[1024];
    char chunk[4096];
    FILE *f;
    size_t n;

    assert_non_null(dir);
    (void)snprintf(path, sizeof(path), "%s/policy/%s", dir, name);
    f = fopen(path, "rb");
    if (f == NULL) {
        fail_msg("cannot open %s", path);
    }
    sl_buf_init(b, TEST_BUF_MAX);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        assert_int_equal(sl_buf_append(b, chunk, n), 0);
    }
    assert_int_equal(fclose(f), 0);
}

static void accepts_the_valid_example_files(void **state)
{
    const char *files[] = { "valid-spec.json", "valid-minimal.json", "valid-full.json" };

    (void)state;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        struct sl_buf b;

        read_data(files[i], &b);
        expect_errors_in(&b, (const char *const[]){ NULL });
        sl_buf_finish(&b);
    }
}

/* Each invalid-X.json comes with invalid-X.errors, its errors one per line. */
static void reports_the_errors_listed_beside_each_invalid_file(void **state)
{
    const char *names[] = { "invalid-typos",  "invalid-credentials", "invalid-clients",
                            "invalid-syntax", "invalid-passthrough", "invalid-git" };

    (void)state;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        struct sl_buf doc;
        struct sl_buf lines;
        const char *want[SL_POLICY_ERRORS_MAX + 1];
        size_t n = 0;
        char file[256];
        char *p;

        (void)snprintf(file, sizeof(file), "%s.json", names[i]);
        read_data(file, &doc);
        (void)snprintf(file, sizeof(file), "%s.errors", names[i]);
        read_data(file, &lines);
        p = (char *)lines.p;
        while (p != NULL && *p != '\0' && n < SL_POLICY_ERRORS_MAX) {
            char *nl = strchr(p, '\n');

            want[n++] = p;
            if (nl != NULL) {
                *nl = '\0';
                nl++;
            }
            p = nl;
        }
        want[n] = NULL;
        expect_errors_in(&doc, want);
        sl_buf_finish(&doc);
        sl_buf_finish(&lines);
    }
}

static void summarises_and_looks_up_the_spec_example(void **state)
{
    struct sl_buf b;
    struct sl_snapshot *s = NULL;
    const struct sl_client *c;
    int64_t at;

    (void)state;
    read_data("valid-spec.json", &b);
    assert_int_equal(sl_snapshot_parse(b.p, b.len, &s, NULL), 0);
    assert_int_equal(sl_snapshot_version(s), 7);
    assert_int_equal(sl_snapshot_env_count(s), 2);
    assert_int_equal(sl_snapshot_client_count(s), 2);
    assert_int_equal(sl_snapshot_rule_count(s), 4);
    assert_int_equal(sl_snapshot_credential_count(s), 2);
    assert_string_equal(sl_env_name(sl_snapshot_find_env(s, "offline")), "offline");
    assert_false(sl_env_default_allows(sl_snapshot_find_env(s, "offline")));
    assert_null(sl_snapshot_find_env(s, "Offline"));
    c = sl_snapshot_find_client(s, "sb_4f2a");
    assert_non_null(c);
    assert_string_equal(sl_client_id(c), "sb_4f2a");
    assert_string_equal(sl_env_name(sl_client_env(c)), "ci-python");
    assert_true(sl_client_has_token(c));
    assert_true(sl_client_expiry(c, &at));
    assert_false(sl_client_has_token(sl_snapshot_find_client(s, "bench")));
    assert_false(sl_client_expiry(sl_snapshot_find_client(s, "bench"), &at));
    assert_null(sl_snapshot_find_client(s, "sb_4f2b"));
    /* A re-push of the same bytes is recognised; one changed byte is not. */
    assert_true(sl_snapshot_is_identical(s, b.p, b.len));
    b.p[b.len - 2] = b.p[b.len - 2] == ' ' ? '\t' : ' ';
    assert_false(sl_snapshot_is_identical(s, b.p, b.len));
    assert_false(sl_snapshot_is_identical(s, b.p, b.len - 1));
    /* A second reference keeps it alive after the first is dropped. */
    assert_ptr_equal(sl_snapshot_ref(s), s);
    sl_snapshot_unref(s);
    assert_int_equal(sl_snapshot_version(s), 7);
    sl_snapshot_unref(s);
    sl_snapshot_unref(NULL);
    sl_buf_finish(&b);
}

/* Fails the 1st, 2nd, ... allocation until a parse succeeds untouched: every failing run must
 * return an error and leave nothing behind (LeakSanitizer checks the latter in sanitizer
 * builds). jansson allocates through sl_malloc, so its failures are covered too. */
static void sweep(const uint8_t *doc, size_t n, int want_rc)
{
    long runs = 0;

    for (long fail_at = 1;; fail_at++) {
        struct sl_policy_errors errs = { NULL, 0, false };
        struct sl_snapshot *s = (struct sl_snapshot *)&runs; /* must be reset to NULL */
        long failures;
        int rc;

        sl_mem_fail_after(fail_at);
        rc = sl_snapshot_parse(doc, n, &s, &errs);
        failures = sl_mem_failures();
        sl_mem_fail_after(0);
        runs++;
        if (failures == 0) {
            assert_int_equal(rc, want_rc);
            if (want_rc == 0) {
                assert_non_null(s);
                sl_snapshot_unref(s);
            }
            sl_policy_errors_finish(&errs);
            break;
        }
        if (rc >= 0) {
            fail_msg("allocation %ld failed but the parse returned %d", fail_at, rc);
        }
        assert_null(s);
        sl_policy_errors_finish(&errs);
        assert_true(fail_at < 100000);
    }
    assert_true(runs > 10);
}

static void survives_every_allocation_failure(void **state)
{
    const char *files[] = { "valid-spec.json", "valid-full.json" };

    (void)state;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        struct sl_buf b;

        read_data(files[i], &b);
        sweep(b.p, b.len, 0);
        sl_buf_finish(&b);
    }
}

static void survives_every_allocation_failure_while_reporting_errors(void **state)
{
    struct sl_buf b;

    (void)state;
    read_data("invalid-clients.json", &b);
    sweep(b.p, b.len, SL_EPOLICY);
    sl_buf_finish(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepts_the_smallest_documents),
        cmocka_unit_test(reports_the_root_and_version),
        cmocka_unit_test(reports_malformed_json_without_quoting_it),
        cmocka_unit_test(refuses_nesting_deeper_than_the_schema_needs),
        cmocka_unit_test(reports_environment_errors),
        cmocka_unit_test(reports_rule_host_errors),
        cmocka_unit_test(warns_of_hosts_normalised_behind_the_authors_back),
        cmocka_unit_test(reports_method_errors),
        cmocka_unit_test(reports_credential_errors_without_quoting_the_value),
        cmocka_unit_test(reports_passthrough_errors),
        cmocka_unit_test(reports_client_errors),
        cmocka_unit_test(reports_client_address_and_expiry_errors),
        cmocka_unit_test(reports_rfc3339_errors),
        cmocka_unit_test(reads_rfc3339_times_to_the_second),
        cmocka_unit_test(enforces_the_rule_and_credential_limits),
        cmocka_unit_test(enforces_the_limits_on_client_rules),
        cmocka_unit_test(enforces_the_environment_limit),
        cmocka_unit_test(enforces_the_client_limit),
        cmocka_unit_test(enforces_length_limits_on_names),
        cmocka_unit_test(enforces_the_token_and_method_limits),
        cmocka_unit_test(stops_recording_at_the_error_cap),
        cmocka_unit_test(accepts_the_valid_example_files),
        cmocka_unit_test(reports_the_errors_listed_beside_each_invalid_file),
        cmocka_unit_test(summarises_and_looks_up_the_spec_example),
        cmocka_unit_test(survives_every_allocation_failure),
        cmocka_unit_test(survives_every_allocation_failure_while_reporting_errors),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
