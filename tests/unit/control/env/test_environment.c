/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/env/test_environment.c - the environments API of docs/reference/api.md §5.1
 * without the database: every validation rule with the exact field path of its error,
 * keep-on-resave, the sealed stored form and its limits, the rendering (masking, has_value,
 * undecryptable), agreement with the proxy's own credential validation, and the allocation-failure
 * sweep.
 *
 * Values are sealed by a toy: "k<key>:" and the hex of each byte XOR the key. Opening with
 * another key fails, which is how a changed encryption key looks to the module.
 *
 * JSON in this file is written with single quotes for readability; json() turns them into
 * double quotes before parsing (write \\u0027 for a real apostrophe).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/buf.h"
#include "base/mem.h"
#include "control/env/environment.h"
#include "control/store/model.h"
#include "policy/snapshot.h"
#include "tests/support/lines.h"
#include "tests/support/sqjson.h"
#include "tests/support/toyseal.h"

#define TEST_BUF_MAX ((size_t)64 << 20)

#define BASE            "'name':'ci','base_image':'python:3.12-slim'"
#define OFF             "{" BASE ",'network':'off'"
#define ON(e)           "{" BASE ",'network':'on','egress':" e
#define EGRESS_RULES(r) ON("{'default':'deny','rules':[" r "]}")
#define RULES(r)        EGRESS_RULES(r) "}"

/* ---- the toy sealer (tests/support/toyseal) ---------------------------------------------- */

static struct sl_test_toy toy_a = { .key = 0x5a };
static struct sl_test_toy toy_b = { .key = 0x21 };
static struct sl_test_toy toy_broken = { .key = 0x5a, .broken = true };
static const struct sl_env_sealer sealer_a = { sl_test_toy_seal, sl_test_toy_open, &toy_a };
/* The same store read after the encryption key changed. */
static const struct sl_env_sealer sealer_b = { sl_test_toy_seal, sl_test_toy_open, &toy_b };
static const struct sl_env_sealer sealer_broken = { sl_test_toy_seal, sl_test_toy_open,
                                                    &toy_broken };

/* ---- helpers ------------------------------------------------------------------------------ */

/* The document with ' turned into ", in a buffer the caller finishes. */
static void json(struct sl_buf *b, const char *text)
{
    sl_buf_init(b, TEST_BUF_MAX);
    assert_int_equal(sl_test_sqjson(b, text), 0);
}

static int parse(const char *text, struct sl_env_spec *spec, struct sl_env_errors *errs)
{
    struct sl_buf b;
    int rc;

    json(&b, text);
    rc = sl_env_spec_parse(b.p, b.len, spec, errs);
    sl_buf_finish(&b);
    return rc;
}

static void error_line(const void *list, size_t i, char *out, size_t cap)
{
    const struct sl_env_errors *errs = list;

    (void)snprintf(out, cap, "%s: %s", errs->items[i].path, errs->items[i].message);
}

/* Checks the errors against `want` (NULL-terminated "field: message"; "...*" matches a
 * prefix). */
static void check_errors(const char *what, const struct sl_env_errors *errs,
                         const char *const *want)
{
    char why[2048];

    if (sl_test_lines_check(error_line, errs, errs->count, want, why, sizeof(why)) != 0) {
        fail_msg("errors of %.300s: %s", what, why);
    }
}

static void expect_errors(const char *text, const char *const *want)
{
    struct sl_env_spec spec;
    struct sl_env_errors errs = { 0 };
    int rc = parse(text, &spec, &errs);

    check_errors(text, &errs, want);
    if (want[0] == NULL) {
        assert_int_equal(rc, 0);
        assert_int_equal(errs.status, 0);
    } else {
        assert_int_equal(rc, SL_EPOLICY);
        assert_int_equal(errs.status, 422);
        assert_null(spec.name);
    }
    sl_env_spec_finish(&spec);
    sl_env_errors_finish(&errs);
}

#define EXPECT(text, ...) expect_errors((text), SL_TEST_LINES(__VA_ARGS__))

#define EXPECT_VALID(text) EXPECT((text), NULL)

/* Parses `text` (which must be valid) into `spec`. */
static void parse_ok(const char *text, struct sl_env_spec *spec)
{
    struct sl_env_errors errs = { 0 };
    int rc = parse(text, spec, &errs);

    if (rc != 0) {
        fail_msg("%.300s: rc %d, first error %s: %s", text, rc,
                 errs.count > 0 ? errs.items[0].path : "-",
                 errs.count > 0 ? errs.items[0].message : errs.message);
    }
    sl_env_errors_finish(&errs);
}

/* Parses and stores `text` over `prev` with `sealer` into `row`; returns the result and leaves
 * the errors in `errs`. The row gets an id and timestamps as the store would give it. */
static int store(const char *text, const struct sl_env_row *prev,
                 const struct sl_env_sealer *sealer, struct sl_env_row *row,
                 struct sl_env_errors *errs)
{
    struct sl_env_spec spec;
    int rc;

    parse_ok(text, &spec);
    memset(row, 0, sizeof(*row));
    rc = sl_env_spec_to_row(&spec, prev, sealer, row, errs);
    sl_env_spec_finish(&spec);
    (void)snprintf(row->id, sizeof(row->id), "%s", "5d0c0000-0000-4000-8000-000000000001");
    (void)snprintf(row->created_at, sizeof(row->created_at), "%s", "2026-01-02T03:04:05Z");
    (void)snprintf(row->updated_at, sizeof(row->updated_at), "%s", "2026-01-02T03:04:05Z");
    return rc;
}

static void store_ok(const char *text, const struct sl_env_row *prev, struct sl_env_row *row)
{
    struct sl_env_errors errs = { 0 };
    int rc = store(text, prev, &sealer_a, row, &errs);

    if (rc != 0) {
        fail_msg("%.300s: rc %d, first error %s: %s", text, rc,
                 errs.count > 0 ? errs.items[0].path : "-",
                 errs.count > 0 ? errs.items[0].message : errs.message);
    }
    sl_env_errors_finish(&errs);
}

/* Stores `text` over `prev` and expects a refusal with `status` and the errors `want`. */
static void expect_store_errors(const char *text, const struct sl_env_row *prev,
                                const struct sl_env_sealer *sealer, int status,
                                const char *const *want)
{
    struct sl_env_errors errs = { 0 };
    struct sl_env_row row;

    assert_int_equal(store(text, prev, sealer, &row, &errs), SL_EPOLICY);
    assert_int_equal(errs.status, status);
    check_errors(text, &errs, want);
    assert_null(row.name);
    assert_null(row.env_json);
    assert_null(row.egress_json);
    sl_env_row_finish(&row);
    sl_env_errors_finish(&errs);
}

#define EXPECT_STORE(text, prev, sealer, status, ...)                   \
    do {                                                                \
        const char *const want_[] = { __VA_ARGS__, NULL };              \
        expect_store_errors((text), (prev), (sealer), (status), want_); \
    } while (0)

/* Serialises `j` with SL_ENV_JSON_FLAGS into a C string the caller frees with sl_free() (jansson
 * allocates through base/mem in this test). */
static char *dump(const json_t *j)
{
    char *s = json_dumps(j, SL_ENV_JSON_FLAGS);

    assert_non_null(s);
    return s;
}

static void expect_json(const json_t *j, const char *want_sq)
{
    struct sl_buf want;
    char *got = dump(j);

    json(&want, want_sq);
    if (strcmp(got, (const char *)want.p) != 0) {
        fail_msg("\n  got:  %s\n  want: %s", got, (const char *)want.p);
    }
    sl_free(got);
    sl_buf_finish(&want);
}

static void expect_render(const struct sl_env_row *row, const struct sl_env_sealer *sealer,
                          const char *want_sq)
{
    json_t *j = NULL;

    assert_int_equal(sl_env_render(row, NULL, sealer, &j), 0);
    expect_json(j, want_sq);
    json_decref(j);
}

/* The plaintext of a sealed value, opened with `sealer`. */
static void expect_opens_to(const struct sl_env_sealer *sealer, const char *sealed,
                            const char *want)
{
    struct sl_buf plain;

    sl_buf_init(&plain, TEST_BUF_MAX);
    assert_int_equal(sealer->open(sealer->arg, sealed, strlen(sealed), &plain), 0);
    assert_int_equal(plain.len, strlen(want));
    assert_memory_equal(plain.p, want, plain.len);
    sl_buf_finish(&plain);
}

/* A string of `n` copies of `c`. Freed by the caller with sl_free(). */
static char *repeat(const char *c, size_t n)
{
    size_t cn = strlen(c);
    char *s = sl_malloc(n * cn + 1);

    assert_non_null(s);
    for (size_t i = 0; i < n; i++) {
        memcpy(s + i * cn, c, cn);
    }
    s[n * cn] = '\0';
    return s;
}

/* `prefix` + `middle` + `suffix`, in a buffer the caller finishes. */
static void concat(struct sl_buf *b, const char *prefix, const char *middle, const char *suffix)
{
    sl_buf_init(b, TEST_BUF_MAX);
    assert_int_equal(sl_buf_append_str(b, prefix), 0);
    assert_int_equal(sl_buf_append_str(b, middle), 0);
    assert_int_equal(sl_buf_append_str(b, suffix), 0);
}

/* ---- the request: whole documents --------------------------------------------------------- */

static void accepts_a_minimal_request_with_defaults(void **state)
{
    struct sl_env_spec spec;

    (void)state;
    parse_ok(OFF "}", &spec);
    assert_string_equal(spec.name, "ci");
    assert_string_equal(spec.description, "");
    assert_int_equal(spec.scope, SL_SCOPE_USER);
    assert_string_equal(spec.base_image, "python:3.12-slim");
    assert_int_equal(spec.cpus_centi, -1);
    assert_int_equal(spec.memory_bytes, -1);
    assert_false(spec.network);
    assert_int_equal(spec.n_vars, 0);
    assert_int_equal(spec.n_rules, 0);
    assert_int_equal(spec.n_repos, 0);
    sl_env_spec_finish(&spec);
}

static void reads_every_field_of_a_full_request(void **state)
{
    struct sl_env_spec spec;

    (void)state;
    parse_ok("{'name':'ci-python','description':'CI','scope':'global',"
             "'base_image':'python:3.12-slim','cpus':1.5,'memory':'2GiB','network':'on',"
             "'env':[{'name':'LOG_LEVEL','value':'debug'},"
             "{'name':'PYPI_TOKEN','value':'s3cr3t','secret':true}],"
             "'egress':{'default':'deny','rules':[{'host':'PKGS.Example.org.'},"
             "{'host':'*.github.com','methods':['GET','HEAD']},"
             "{'host':'api.example.com:8443','credential':{'header':'Authorization',"
             "'value':'Bearer x'}}]},"
             "'repositories':['acme/website','group/sub/repo']}",
             &spec);
    assert_string_equal(spec.description, "CI");
    assert_int_equal(spec.scope, SL_SCOPE_GLOBAL);
    assert_int_equal(spec.cpus_centi, 150);
    assert_int_equal(spec.memory_bytes, (int64_t)2 << 30);
    assert_true(spec.network);
    assert_int_equal(spec.n_vars, 2);
    assert_string_equal(spec.vars[0].name, "LOG_LEVEL");
    assert_false(spec.vars[0].secret);
    assert_true(spec.vars[1].secret);
    assert_string_equal(spec.vars[1].value, "s3cr3t");
    assert_false(spec.egress_allow);
    assert_int_equal(spec.n_rules, 3);
    /* Hosts are normalised by policy/host.h, with a warning that says so. */
    assert_string_equal(spec.rules[0].host, "pkgs.example.org");
    assert_int_equal(spec.n_warnings, 1);
    assert_string_equal(spec.warnings[0].path, "egress.rules[0].host");
    assert_string_equal(spec.warnings[0].message,
                        "host pattern \"PKGS.Example.org.\" is stored as \"pkgs.example.org\" "
                        "(host names are matched in lower case, and the trailing dot is dropped)");
    assert_int_equal(spec.rules[1].n_methods, 2);
    assert_string_equal(spec.rules[1].methods[1], "HEAD");
    assert_null(spec.rules[1].header);
    assert_string_equal(spec.rules[2].host, "api.example.com:8443");
    assert_string_equal(spec.rules[2].header, "Authorization");
    assert_string_equal(spec.rules[2].value, "Bearer x");
    assert_int_equal(spec.n_repos, 2);
    assert_string_equal(spec.repos[1], "group/sub/repo");
    sl_env_spec_finish(&spec);
}

static void refuses_bodies_that_are_not_a_json_object_with_400(void **state)
{
    static const char *const bodies[] = {
        "", "{", "[]", "'x'", "null", "42", "{'name':'a'} x", "{'name':'a','name':'b'}",
    };

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(bodies); i++) {
        struct sl_env_spec spec;
        struct sl_env_errors errs = { 0 };

        assert_int_equal(parse(bodies[i], &spec, &errs), SL_EPOLICY);
        assert_int_equal(errs.status, 400);
        assert_int_equal(errs.count, 0);
        assert_true(strlen(errs.message) > 0);
        sl_env_errors_finish(&errs);
    }
}

static void refuses_deep_nesting_before_parsing(void **state)
{
    struct sl_env_spec spec;
    struct sl_env_errors errs = { 0 };
    struct sl_buf b;
    char *open = repeat("[", 17);
    char *close = repeat("]", 17);

    (void)state;
    concat(&b, OFF ",'id':", open, "");
    assert_int_equal(sl_buf_append_str(&b, close), 0);
    assert_int_equal(sl_buf_append_str(&b, "}"), 0);
    assert_int_equal(sl_env_spec_parse(b.p, b.len, &spec, &errs), SL_EPOLICY);
    assert_int_equal(errs.status, 400);
    assert_string_equal(errs.message, "the request body is nested too deeply");
    sl_env_errors_finish(&errs);
    sl_buf_finish(&b);
    sl_free(open);
    sl_free(close);
}

static void does_not_quote_a_secret_near_a_syntax_error(void **state)
{
    struct sl_env_spec spec;
    struct sl_env_errors errs = { 0 };

    (void)state;
    assert_int_equal(parse(OFF ",'env':[{'name':'A','value':'s3cr3t\\q'}]}", &spec, &errs),
                     SL_EPOLICY);
    assert_int_equal(errs.status, 400);
    assert_null(strstr(errs.message, "s3cr3t"));
    sl_env_errors_finish(&errs);
}

static void reports_unknown_fields_and_ignores_read_only_ones(void **state)
{
    (void)state;
    EXPECT(OFF ",'colour':'red'}",
           "colour: unknown field (expected name, description, scope, base_image, image_pull, "
           "registry_auth, cpus, memory, network, env, egress, repositories)");
    EXPECT(OFF ",'bad key!':1}", "[\"bad key!\"]: unknown field*");
    EXPECT(OFF ",'env':[{'name':'A','value':'1','secrte':true}]}",
           "env[0].secrte: unknown field (expected name, value, secret)");
    EXPECT(RULES("{'host':'a.com','method':['GET']}"),
           "egress.rules[0].method: unknown field (expected host, methods, credential, tls)");
    EXPECT(ON("{'default':'allow','rule':[]}}"),
           "egress.rule: unknown field (expected default, rules)");
    EXPECT(RULES("{'host':'a.com','credential':{'header':'X-K','value':'v','extra':1}}"),
           "egress.rules[0].credential.extra: unknown field (expected header, value, "
           "placeholder_env)");
    /* What GET returns can be sent back as it is. */
    EXPECT_VALID(OFF ",'id':'5d0c','owner':'alice','is_default':false,'created_at':'x',"
                     "'updated_at':'y','undecryptable':['A'],'observe_until':null}");
    EXPECT_VALID(RULES("{'host':'a.com','credential':{'header':'X-K','has_value':true,"
                       "'value':'v'}}"));
}

static void treats_null_as_absent_for_optional_fields(void **state)
{
    struct sl_env_spec spec;

    (void)state;
    parse_ok(OFF ",'description':null,'scope':null,'cpus':null,'memory':null,'env':null,"
                 "'egress':null,'repositories':null}",
             &spec);
    assert_string_equal(spec.description, "");
    assert_int_equal(spec.scope, SL_SCOPE_USER);
    assert_int_equal(spec.cpus_centi, -1);
    assert_int_equal(spec.memory_bytes, -1);
    sl_env_spec_finish(&spec);
    EXPECT("{'name':null,'base_image':null,'network':null}", "name: required field missing",
           "base_image: required field missing",
           "network: required field missing: \"on\" or \"off\" (never inherited from the "
           "default)");
}

/* ---- name, description, scope, image ------------------------------------------------------ */

static void requires_a_name_of_1_to_128_characters(void **state)
{
    char *name128 = repeat("\xc3\xa9", 128); /* 128 characters, 256 bytes */
    char *name129 = repeat("a", 129);
    struct sl_buf b;

    (void)state;
    EXPECT("{'base_image':'x','network':'off'}", "name: required field missing");
    EXPECT("{'name':'','base_image':'x','network':'off'}", "name: must not be empty");
    EXPECT("{'name':7,'base_image':'x','network':'off'}", "name: must be a string");
    concat(&b, "{'name':'", name128, "','base_image':'x','network':'off'}");
    EXPECT_VALID((const char *)b.p);
    sl_buf_finish(&b);
    concat(&b, "{'name':'", name129, "','base_image':'x','network':'off'}");
    EXPECT((const char *)b.p, "name: longer than 128 characters");
    sl_buf_finish(&b);
    sl_free(name128);
    sl_free(name129);
}

static void refuses_a_10_mb_name(void **state)
{
    char *big = repeat("a", (size_t)10 << 20);
    struct sl_buf b;

    (void)state;
    concat(&b, "{'name':'", big, "','base_image':'x','network':'off'}");
    EXPECT((const char *)b.p, "name: longer than 128 characters");
    sl_buf_finish(&b);
    sl_free(big);
}

static void refuses_control_characters_and_ambiguous_names(void **state)
{
    (void)state;
    EXPECT("{'name':'a\\nb','base_image':'x','network':'off'}",
           "name: must not contain control characters");
    EXPECT("{'name':'a\\u007fb','base_image':'x','network':'off'}",
           "name: must not contain control characters");
    EXPECT("{'name':'a\\u0085b','base_image':'x','network':'off'}",
           "name: must not contain control characters");
    /* A name that reads as another: "ci" + U+200B, and one reversed by U+202E. */
    EXPECT("{'name':'ci\\u200b','base_image':'x','network':'off'}",
           "name: must not contain invisible or reordering characters (zero-width, "
           "bidirectional controls)");
    EXPECT("{'name':'\\u202eic','base_image':'x','network':'off'}",
           "name: must not contain invisible or reordering characters (zero-width, "
           "bidirectional controls)");
    EXPECT("{'name':' ci','base_image':'x','network':'off'}",
           "name: must not start or end with a space");
    EXPECT("{'name':'5d0c1e2f-0000-4000-8000-00000000abcd','base_image':'x','network':'off'}",
           "name: must not look like an environment id (a UUID)");
    EXPECT_VALID("{'name':'5d0c1e2f-0000-4000-8000-00000000abcg','base_image':'x',"
                 "'network':'off'}");
}

static void refuses_nul_in_every_string_with_its_field(void **state)
{
    (void)state;
    EXPECT("{'name':'a\\u0000b','base_image':'x','network':'off'}",
           "name: must not contain NUL characters");
    EXPECT(OFF ",'description':'\\u0000'}", "description: must not contain NUL characters");
    EXPECT("{'name':'a','base_image':'x\\u0000','network':'off'}",
           "base_image: must not contain NUL characters");
    EXPECT(OFF ",'env':[{'name':'A','value':'x\\u0000y','secret':true}]}",
           "env[0].value: must not contain NUL characters");
    EXPECT(OFF ",'repositories':['a/b\\u0000']}",
           "repositories[0]: must not contain NUL characters");
    EXPECT(RULES("{'host':'a.com','credential':{'header':'X-K','value':'a\\u0000'}}"),
           "egress.rules[0].credential.value: must not contain NUL characters");
    EXPECT(RULES("{'host':'a.com\\u0000'}"), "egress.rules[0].host: must not contain NUL*");
}

static void refuses_nul_in_an_already_parsed_document(void **state)
{
    struct sl_env_spec spec;
    struct sl_env_errors errs = { 0 };
    json_t *root = json_pack("{s:s%, s:s, s:s}", "name", "a\0b", (size_t)3, "base_image", "x",
                             "network", "off");

    (void)state;
    assert_non_null(root);
    assert_int_equal(sl_env_spec_from_json(root, &spec, &errs), SL_EPOLICY);
    check_errors("from_json", &errs,
                 (const char *const[]){ "name: must not contain NUL characters", NULL });
    sl_env_errors_finish(&errs);
    json_decref(root);
}

static void keeps_sql_metacharacters_and_unicode_verbatim(void **state)
{
    static const char name[] = "x'; DROP TABLE environments; -- "
                               "\xc3\xbc"
                               "n"
                               "\xc3\xaf"
                               "c"
                               "\xc3\xb8"
                               "d"
                               "\xc3\xa9"
                               " "
                               "\xf0\x9f\x9a\x80";
    static const char value[] = "' OR 1=1; --\"\\ \xe2\x82\xac";
    json_t *root = json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:s}]}", "name", name, "description",
                             "\"quoted\" `ticks` \\ %s %n", "base_image", "x", "network", "off",
                             "env", "name", "A", "value", value);
    struct sl_env_errors errs = { 0 };
    struct sl_env_spec spec;
    struct sl_env_row row = { 0 };
    json_t *out = NULL;
    json_t *vars = NULL;

    (void)state;
    assert_int_equal(sl_env_spec_from_json(root, &spec, &errs), 0);
    assert_string_equal(spec.name, name);
    assert_string_equal(spec.description, "\"quoted\" `ticks` \\ %s %n");
    assert_int_equal(sl_env_spec_to_row(&spec, NULL, &sealer_a, &row, &errs), 0);
    assert_string_equal(row.name, name);
    assert_int_equal(sl_env_render(&row, NULL, &sealer_a, &out), 0);
    assert_string_equal(json_string_value(json_object_get(out, "name")), name);
    vars = json_object_get(out, "env");
    assert_string_equal(json_string_value(json_object_get(json_array_get(vars, 0), "value")),
                        value);
    json_decref(out);
    json_decref(root);
    sl_env_row_finish(&row);
    sl_env_spec_finish(&spec);
}

static void limits_the_description(void **state)
{
    char *ok = repeat("\xe2\x82\xac", 4096);
    char *long_ = repeat("d", 4097);
    struct sl_buf b;

    (void)state;
    concat(&b, OFF ",'description':'", ok, "'}");
    EXPECT_VALID((const char *)b.p);
    sl_buf_finish(&b);
    concat(&b, OFF ",'description':'", long_, "'}");
    EXPECT((const char *)b.p, "description: longer than 4096 characters");
    sl_buf_finish(&b);
    EXPECT_VALID(OFF ",'description':'two\\nlines\\tand a tab'}");
    EXPECT(OFF ",'description':'bell\\u0007'}",
           "description: must not contain control characters but tab and newline");
    EXPECT(OFF ",'description':['x']}", "description: must be a string");
    sl_free(ok);
    sl_free(long_);
}

static void accepts_user_or_global_scope(void **state)
{
    struct sl_env_spec spec;

    (void)state;
    parse_ok(OFF ",'scope':'global'}", &spec);
    assert_int_equal(spec.scope, SL_SCOPE_GLOBAL);
    sl_env_spec_finish(&spec);
    parse_ok(OFF ",'scope':'user'}", &spec);
    assert_int_equal(spec.scope, SL_SCOPE_USER);
    sl_env_spec_finish(&spec);
    EXPECT(OFF ",'scope':'admin'}", "scope: must be \"user\" or \"global\"");
    EXPECT(OFF ",'scope':'Global'}", "scope: must be \"user\" or \"global\"");
}

static void requires_a_base_image_reference(void **state)
{
    static const char *const good[] = {
        "ubuntu",
        "python:3.12-slim",
        "library/python:3",
        "ghcr.io/acme/tools/img:v1.2_3",
        "localhost:5000/a/b",
        "registry.example.com:443/x-y__z.w",
        "r.io:1/x",
        "r.io:65535/x",
        "ghcr.io/acme/img@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "img:1@sha256:0123456789abcdef0123456789abcdef",
    };
    static const char *const bad[] = {
        "Python",
        "a b",
        "x:",
        ":tag",
        "/x",
        "x/",
        "a//b",
        "x@sha256:abc",
        "-x",
        "x-",
        "x..y",
        "x:.tag",
        "x@",
        "-.io/x",
        "a.io:/x",
        "x___y",
        /* Registry ports outside 1-65535, or written with a leading zero. */
        "r.io:0/x",
        "r.io:65536/x",
        "r.io:99999/x",
        "localhost:05000/x",
    };
    char *long_ = repeat("a", 256);
    struct sl_buf b;

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(good); i++) {
        concat(&b, "{'name':'n','network':'off','base_image':'", good[i], "'}");
        EXPECT_VALID((const char *)b.p);
        sl_buf_finish(&b);
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        concat(&b, "{'name':'n','network':'off','base_image':'", bad[i], "'}");
        EXPECT((const char *)b.p, "base_image: \"*");
        sl_buf_finish(&b);
    }
    concat(&b, "{'name':'n','network':'off','base_image':'", long_, "'}");
    EXPECT((const char *)b.p, "base_image: \"aaaa*");
    sl_buf_finish(&b);
    EXPECT("{'name':'n','network':'off','base_image':'Py'}",
           "base_image: \"Py\" is not an image reference: bad name (path components of "
           "lowercase letters and digits, joined by . _ __ or -, separated by /)");
    EXPECT("{'name':'n','network':'off'}", "base_image: required field missing");
    EXPECT("{'name':'n','network':'off','base_image':''}",
           "base_image: \"\" is not an image reference: must not be empty");
    sl_free(long_);
}

/* ---- cpus, memory, network ---------------------------------------------------------------- */

static void check_cpus(const char *value, int64_t centi)
{
    struct sl_env_spec spec;
    struct sl_buf b;

    concat(&b, OFF ",'cpus':", value, "}");
    parse_ok((const char *)b.p, &spec);
    assert_int_equal(spec.cpus_centi, centi);
    sl_env_spec_finish(&spec);
    sl_buf_finish(&b);
}

static void takes_cpus_above_0_with_two_decimals_or_null(void **state)
{
    (void)state;
    check_cpus("1.5", 150);
    check_cpus("2", 200);
    check_cpus("0.01", 1);
    check_cpus("1.1", 110);
    check_cpus("0.29", 29);
    check_cpus("1024", 102400);
    check_cpus("null", -1);
    EXPECT(OFF ",'cpus':0}", "cpus: must be greater than 0");
    EXPECT(OFF ",'cpus':-1}", "cpus: must be greater than 0");
    EXPECT(OFF ",'cpus':1.005}", "cpus: at most two decimals (0.01 steps)");
    EXPECT(OFF ",'cpus':1.234}", "cpus: at most two decimals (0.01 steps)");
    EXPECT(OFF ",'cpus':2.5001}", "cpus: at most two decimals (0.01 steps)");
    EXPECT(OFF ",'cpus':0.001}", "cpus: at most two decimals (0.01 steps)");
    EXPECT(OFF ",'cpus':1024.01}", "cpus: at most 1024");
    EXPECT(OFF ",'cpus':1e300}", "cpus: at most 1024");
    EXPECT(OFF ",'cpus':'2'}", "cpus: must be a number or null");
    EXPECT(OFF ",'cpus':true}", "cpus: must be a number or null");
}

static void check_memory(const char *value, int64_t bytes)
{
    struct sl_env_spec spec;
    struct sl_buf b;

    concat(&b, OFF ",'memory':", value, "}");
    parse_ok((const char *)b.p, &spec);
    assert_int_equal(spec.memory_bytes, bytes);
    sl_env_spec_finish(&spec);
    sl_buf_finish(&b);
}

static void takes_memory_in_mib_or_gib_up_to_1_tib(void **state)
{
    static const char *const bad[] = {
        "'512MB'",   "'512mib'", "'1.5GiB'", "'0512MiB'", "' 512MiB'",
        "'512 MiB'", "'MiB'",    "'-1GiB'",  "'1TiB'",    "''",
    };
    struct sl_buf b;

    (void)state;
    check_memory("'512MiB'", (int64_t)512 << 20);
    check_memory("'2GiB'", (int64_t)2 << 30);
    check_memory("'1024GiB'", (int64_t)1 << 40);
    check_memory("'1048576MiB'", (int64_t)1 << 40);
    check_memory("null", -1);
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        concat(&b, OFF ",'memory':", bad[i], "}");
        EXPECT((const char *)b.p,
               "memory: must be an integer followed by MiB or GiB, like \"512MiB\"");
        sl_buf_finish(&b);
    }
    EXPECT(OFF ",'memory':'0MiB'}", "memory: must be greater than 0");
    EXPECT(OFF ",'memory':'1025GiB'}", "memory: at most 1 TiB (1024GiB)");
    EXPECT(OFF ",'memory':'1048577MiB'}", "memory: at most 1 TiB (1024GiB)");
    EXPECT(OFF ",'memory':'99999999999999999999999GiB'}", "memory: at most 1 TiB (1024GiB)");
    EXPECT(OFF ",'memory':512}", "memory: must be a string");
}

static void requires_network_on_or_off_explicitly(void **state)
{
    (void)state;
    EXPECT("{" BASE "}",
           "network: required field missing: \"on\" or \"off\" (never inherited from the "
           "default)");
    EXPECT("{" BASE ",'network':'yes'}", "network: must be \"on\" or \"off\"");
    EXPECT("{" BASE ",'network':'ON'}", "network: must be \"on\" or \"off\"");
    EXPECT("{" BASE ",'network':true}", "network: must be a string");
}

static void refuses_network_on_with_deny_and_no_rules(void **state)
{
    static const char *const msg =
            "egress.rules: network is \"on\" with default \"deny\" and no rules, so nothing "
            "could get out: add a rule, set default to \"allow\", or set network to \"off\"";

    (void)state;
    EXPECT("{" BASE ",'network':'on'}", msg);
    EXPECT(ON("{'default':'deny'}") "}", msg);
    EXPECT(ON("{'rules':[]}") "}", msg);
    EXPECT(ON("{'default':'deny','rules':[]}") "}", msg);
    EXPECT_VALID(ON("{'default':'allow'}") "}");
    EXPECT_VALID(ON("{'rules':[{'host':'a.com'}]}") "}");
}

static void drops_egress_when_the_network_is_off(void **state)
{
    struct sl_env_spec spec;
    struct sl_env_row row;

    (void)state;
    /* Even an egress section that would be invalid is ignored with network off. */
    parse_ok(OFF ",'egress':{'default':'sometimes','rules':[{'host':'a..b'}],'x':1}}", &spec);
    assert_false(spec.network);
    assert_int_equal(spec.n_rules, 0);
    sl_env_spec_finish(&spec);
    store_ok(OFF ",'egress':{'default':'allow','rules':[{'host':'a.com'}]}}", NULL, &row);
    assert_null(row.egress_json);
    assert_false(row.network);
    sl_env_row_finish(&row);
    /* With network missing, egress is still checked so that every error shows at once. */
    EXPECT("{" BASE ",'egress':{'rules':[{'host':'a..b'}]}}", "network: required field missing*",
           "egress.rules[0].host: bad host pattern \"a..b\": empty label");
}

/* ---- env ---------------------------------------------------------------------------------- */

static void limits_env_to_100_variables(void **state)
{
    struct sl_buf b;

    (void)state;
    for (int n = 100; n <= 101; n++) {
        sl_buf_init(&b, TEST_BUF_MAX);
        assert_int_equal(sl_buf_append_str(&b, OFF ",'env':["), 0);
        for (int i = 0; i < n; i++) {
            assert_int_equal(sl_buf_printf(&b, "%s{'name':'V%d','value':'x'}", i ? "," : "", i), 0);
        }
        assert_int_equal(sl_buf_append_str(&b, "]}"), 0);
        if (n == 100) {
            EXPECT_VALID((const char *)b.p);
        } else {
            EXPECT((const char *)b.p, "env: too many variables (101; at most 100)");
        }
        sl_buf_finish(&b);
    }
}

static void requires_shell_identifiers_as_variable_names(void **state)
{
    static const char *const bad[] = { "1A", "A-B", "", "A B", "\xc3\xa4", "A=B", "$A" };
    char *long_ = repeat("A", 129);
    struct sl_buf b;

    (void)state;
    EXPECT_VALID(OFF ",'env':[{'name':'_','value':''},{'name':'a_1','value':''},"
                     "{'name':'Z9','value':''}]}");
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        concat(&b, OFF ",'env':[{'name':'OK','value':'1'},{'name':'", bad[i], "','value':'1'}]}");
        EXPECT((const char *)b.p,
               "env[1].name: must be a shell identifier ([A-Za-z_][A-Za-z0-9_]*)");
        sl_buf_finish(&b);
    }
    concat(&b, OFF ",'env':[{'name':'", long_, "','value':'1'}]}");
    EXPECT((const char *)b.p, "env[0].name: longer than 128 characters");
    sl_buf_finish(&b);
    sl_free(long_);
}

static void requires_unique_variable_names(void **state)
{
    (void)state;
    EXPECT(OFF ",'env':[{'name':'A','value':'1'},{'name':'B','value':'2'},"
               "{'name':'A','value':'3'}]}",
           "env[2].name: duplicate name (names must be unique)");
    /* Case matters to a shell. */
    EXPECT_VALID(OFF ",'env':[{'name':'A','value':'1'},{'name':'a','value':'2'}]}");
}

static void checks_variable_values_and_the_secret_flag(void **state)
{
    char *big = repeat("v", SL_ENV_VALUE_MAX + 1);
    struct sl_buf b;

    (void)state;
    EXPECT(OFF ",'env':[{'name':'A'}]}", "env[0].value: required field missing");
    EXPECT(OFF ",'env':[{'name':'A','value':1}]}", "env[0].value: must be a string");
    EXPECT(OFF ",'env':[{'name':'A','value':'1','secret':'yes'}]}",
           "env[0].secret: must be true or false");
    EXPECT(OFF ",'env':[{'value':'1'}]}", "env[0].name: required field missing");
    EXPECT(OFF ",'env':['A=1']}", "env[0]: must be an object with \"name\" and \"value\"");
    EXPECT(OFF ",'env':{'A':'1'}}", "env: must be an array of {\"name\", \"value\", \"secret\"}");
    concat(&b, OFF ",'env':[{'name':'A','value':'", big, "'}]}");
    EXPECT((const char *)b.p, "env[0].value: longer than 32768 bytes");
    sl_buf_finish(&b);
    sl_free(big);
}

/* ---- egress ------------------------------------------------------------------------------- */

static void limits_egress_to_100_rules(void **state)
{
    struct sl_buf b;

    (void)state;
    for (int n = 100; n <= 101; n++) {
        sl_buf_init(&b, TEST_BUF_MAX);
        assert_int_equal(sl_buf_append_str(&b, ON("{'rules':[")), 0);
        for (int i = 0; i < n; i++) {
            assert_int_equal(sl_buf_printf(&b,
                                           "%s{'host':'h%d.example.com','credential':"
                                           "{'header':'X-K','value':'v'}}",
                                           i ? "," : "", i),
                             0);
        }
        assert_int_equal(sl_buf_append_str(&b, "]}}"), 0);
        if (n == 100) {
            /* 100 credentials is the limit too, and allowed. */
            EXPECT_VALID((const char *)b.p);
        } else {
            EXPECT((const char *)b.p, "egress.rules: too many rules (101; at most 100)");
        }
        sl_buf_finish(&b);
    }
}

static void normalises_rule_hosts_with_the_policy_parser(void **state)
{
    struct sl_env_spec spec;

    (void)state;
    parse_ok(RULES("{'host':'API.Example.COM.'},{'host':'*.GitHub.com:8443'},"
                   "{'host':'0x7f.1'},{'host':'[2001:DB8::1]:443'}"),
             &spec);
    assert_string_equal(spec.rules[0].host, "api.example.com");
    assert_string_equal(spec.rules[1].host, "*.github.com:8443");
    assert_string_equal(spec.rules[2].host, "127.0.0.1");
    assert_string_equal(spec.rules[3].host, "[2001:db8::1]:443");
    sl_env_spec_finish(&spec);
    EXPECT(RULES("{'host':'ok.com'},{'host':'ok2.com'},{'host':'a..b'}"),
           "egress.rules[2].host: bad host pattern \"a..b\": empty label");
    EXPECT(RULES("{'host':'10.0.*.1'}"), "egress.rules[0].host: bad host pattern \"10.0.*.1\": *");
    /* The proxy's pattern rules too: a '*' at a label boundary, A-labels. */
    EXPECT(RULES("{'host':'*'}"), "egress.rules[0].host: bad host pattern \"*\": '*' alone *");
    EXPECT(RULES("{'host':'*github.test'}"),
           "egress.rules[0].host: bad host pattern \"*github.test\": '*' must end the first *");
    EXPECT(RULES("{'host':'xn--zz.test'}"),
           "egress.rules[0].host: bad host pattern \"xn--zz.test\": an xn-- label that is not "
           "valid Punycode (RFC 3492)");
    EXPECT(RULES("{'host':'a.com:0'}"), "egress.rules[0].host: bad host pattern \"a.com:0\": *");
    EXPECT(RULES("{'host':'a.com:'}"), "egress.rules[0].host: bad host pattern \"a.com:\": *");
    EXPECT(RULES("{'host':'a b.com'}"), "egress.rules[0].host: bad host pattern \"a b.com\": *");
    EXPECT(RULES("{'methods':['GET']}"), "egress.rules[0].host: required field missing");
    EXPECT(RULES("'a.com'"), "egress.rules[0]: a rule must be an object with \"host\"");
    EXPECT(ON("{'rules':{}}") "}", "egress.rules: must be an array of rules");
    EXPECT(ON("[]") "}", "egress: must be an object with \"default\" and \"rules\"");
    EXPECT(ON("{'default':'block','rules':[{'host':'a.com'}]}") "}",
           "egress.default: must be \"deny\" or \"allow\"");
}

static void requires_uppercase_method_tokens(void **state)
{
    (void)state;
    EXPECT_VALID(RULES("{'host':'a.com','methods':[]}"));
    EXPECT_VALID(RULES("{'host':'a.com','methods':['GET','PROPFIND','M-SEARCH']}"));
    EXPECT(RULES("{'host':'a.com','methods':['GET','get']}"),
           "egress.rules[0].methods[1]: \"get\": methods are case-sensitive and must be "
           "uppercase");
    EXPECT(RULES("{'host':'a.com','methods':['GET','GET']}"),
           "egress.rules[0].methods[1]: duplicate method \"GET\"");
    EXPECT(RULES("{'host':'a.com','methods':['GE T']}"),
           "egress.rules[0].methods[0]: \"GE T\" is not a method name (RFC 9110 token "
           "characters only)");
    EXPECT(RULES("{'host':'a.com','methods':['']}"),
           "egress.rules[0].methods[0]: \"\" is not a method name (1-32 characters)");
    EXPECT(RULES("{'host':'a.com','methods':[1]}"), "egress.rules[0].methods[0]: must be a string");
    EXPECT(RULES("{'host':'a.com','methods':'GET'}"),
           "egress.rules[0].methods: must be an array of method names");
}

static void checks_credential_headers_and_values(void **state)
{
    (void)state;
    EXPECT(RULES("{'host':'a.com','credential':{'header':'Connection','value':'v'}}"),
           "egress.rules[0].credential.header: \"Connection\" cannot carry a credential: it is "
           "a framing, hop-by-hop or routing header");
    EXPECT(RULES("{'host':'a.com','credential':{'header':'proxy-authorization','value':'v'}}"),
           "egress.rules[0].credential.header: \"proxy-authorization\" cannot carry*");
    EXPECT(RULES("{'host':'a.com','credential':{'header':'X K','value':'v'}}"),
           "egress.rules[0].credential.header: \"X K\" is not a header name (RFC 9110 token "
           "characters only)");
    EXPECT(RULES("{'host':'a.com','credential':{'value':'v'}}"),
           "egress.rules[0].credential.header: required field missing");
    EXPECT(RULES("{'host':'a.com','credential':{'header':'X-K','value':'a\\r\\nEvil: 1'}}"),
           "egress.rules[0].credential.value: contains a line break (CR or LF), which would "
           "split the header");
    EXPECT(RULES("{'host':'a.com','credential':{'header':'X-K','value':'a\\nb'}}"),
           "egress.rules[0].credential.value: contains a line break*");
    EXPECT(RULES("{'host':'a.com','credential':{'header':'X-K','value':''}}"),
           "egress.rules[0].credential.value: must not be empty");
    EXPECT(RULES("{'host':'a.com','credential':{'header':'X-K','value':' v'}}"),
           "egress.rules[0].credential.value: must not start or end with a space or tab");
    EXPECT(RULES("{'host':'a.com','credential':{'header':'X-K','value':'a\\u0001'}}"),
           "egress.rules[0].credential.value: contains a control character");
    EXPECT(RULES("{'host':'a.com','credential':'Bearer x'}"),
           "egress.rules[0].credential: must be an object with \"header\" and \"value\"");
    /* On the request side, the value may be left out (keep the stored one). */
    EXPECT_VALID(RULES("{'host':'a.com','credential':{'header':'X-K'}}"));
}

/* Every header and value that this module accepts, the proxy's snapshot parser accepts too,
 * and the reverse: the two lists of rules must not drift apart. */
static void agrees_with_the_proxy_on_credentials(void **state)
{
    static const char *const headers[] = {
        "Authorization",
        "X-Api-Key",
        "host",
        "Host",
        "Content-Length",
        "TE",
        "te",
        "Trailer",
        "Upgrade",
        "Keep-Alive",
        "Proxy-Connection",
        "Proxy-Authenticate",
        "Expect",
        "Transfer-Encoding",
        "X K",
        "X:K",
        "X(K)",
        "!#$%&\\u0027*+-.^_`|~",
    };
    static const char *const values[] = {
        "Bearer x", "a\\tb", "a\\rb", "\\tx", "x ", "a\\u007fb", "a\\u001bb", "\\u00e9t\\u00e9",
    };

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(headers) + SL_ARRAY_LEN(values); i++) {
        bool is_header = i < SL_ARRAY_LEN(headers);
        const char *h = is_header ? headers[i] : "X-K";
        const char *v = is_header ? "v" : values[i - SL_ARRAY_LEN(headers)];
        struct sl_env_spec spec;
        struct sl_env_errors errs = { 0 };
        struct sl_snapshot *snap = NULL;
        struct sl_buf ours;
        struct sl_buf theirs;
        int rc_ours;
        int rc_theirs;

        sl_buf_init(&ours, TEST_BUF_MAX);
        sl_buf_init(&theirs, TEST_BUF_MAX);
        assert_int_equal(sl_buf_printf(&ours,
                                       RULES("{'host':'a.com','credential':{'header':'%s',"
                                             "'value':'%s'}}"),
                                       h, v),
                         0);
        assert_int_equal(sl_buf_printf(&theirs,
                                       "{'version':1,'environments':{'e':{'default':'deny',"
                                       "'rules':[{'host':'a.com','credential':{'header':'%s',"
                                       "'value':'%s'}}]}}}",
                                       h, v),
                         0);
        for (size_t j = 0; j < theirs.len; j++) {
            theirs.p[j] = theirs.p[j] == '\'' ? '"' : theirs.p[j];
        }
        rc_ours = parse(sl_buf_cstr(&ours), &spec, &errs);
        rc_theirs = sl_snapshot_parse(theirs.p, theirs.len, &snap, NULL);
        if ((rc_ours == 0) != (rc_theirs == 0)) {
            fail_msg("header %s value %s: environment says %d, snapshot says %d", h, v, rc_ours,
                     rc_theirs);
        }
        sl_snapshot_unref(snap);
        sl_env_spec_finish(&spec);
        sl_env_errors_finish(&errs);
        sl_buf_finish(&ours);
        sl_buf_finish(&theirs);
    }
}

/* ---- repositories ------------------------------------------------------------------------- */

static void requires_slash_separated_repository_paths(void **state)
{
    static const char *const good[] = { "acme/website", "group/sub/repo", "a.b/c_d-e", "A/B",
                                        "x/.github" };
    static const char *const bad[] = { "acme",      "/acme/x",  "acme/x/",  "acme//x",
                                       "acme/../x", "acme/./x", "acme/x y", "\xc3\xa4/b",
                                       "a\\\\b/c",  "" };
    char *long_ = repeat("a", 254);
    struct sl_buf b;

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(good); i++) {
        concat(&b, OFF ",'repositories':['", good[i], "']}");
        EXPECT_VALID((const char *)b.p);
        sl_buf_finish(&b);
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        concat(&b, OFF ",'repositories':['ok/one','", bad[i], "']}");
        EXPECT((const char *)b.p, "repositories[1]: \"*");
        sl_buf_finish(&b);
    }
    concat(&b, OFF ",'repositories':['a/", long_, "']}");
    EXPECT((const char *)b.p, "repositories[0]: \"a/aaa*");
    sl_buf_finish(&b);
    long_[253] = '\0';
    concat(&b, OFF ",'repositories':['a/", long_, "']}");
    EXPECT_VALID((const char *)b.p);
    sl_buf_finish(&b);
    EXPECT(OFF ",'repositories':['a/b','c/d','a/b']}", "repositories[2]: duplicate repository");
    EXPECT(OFF ",'repositories':'a/b'}", "repositories: must be an array of repository paths");
    EXPECT(OFF ",'repositories':[7]}", "repositories[0]: must be a string");
    sl_free(long_);
}

static void limits_repositories_to_1000(void **state)
{
    struct sl_buf b;

    (void)state;
    for (int n = 1000; n <= 1001; n++) {
        sl_buf_init(&b, TEST_BUF_MAX);
        assert_int_equal(sl_buf_append_str(&b, OFF ",'repositories':["), 0);
        for (int i = 0; i < n; i++) {
            assert_int_equal(sl_buf_printf(&b, "%s'o/r%d'", i ? "," : "", i), 0);
        }
        assert_int_equal(sl_buf_append_str(&b, "]}"), 0);
        if (n == 1000) {
            EXPECT_VALID((const char *)b.p);
        } else {
            EXPECT((const char *)b.p, "repositories: too many repositories (1001; at most 1000)");
        }
        sl_buf_finish(&b);
    }
}

static void reports_every_error_at_once(void **state)
{
    (void)state;
    EXPECT("{'name':'','scope':'x','base_image':'UP','cpus':0,'memory':'1TB','network':'on',"
           "'env':[{'name':'1','value':'v'}],'egress':{'rules':[{'host':'a..b',"
           "'methods':['get']}]},'repositories':['x']}",
           "name: must not be empty", "scope: must be \"user\" or \"global\"",
           "base_image: \"UP\" is not an image reference: bad name*",
           "cpus: must be greater than 0", "memory: must be an integer*",
           "env[0].name: must be a shell identifier*", "egress.rules[0].host: bad host pattern*",
           "egress.rules[0].methods[0]: \"get\": methods are case-sensitive*",
           "repositories[0]: \"x\" is not a repository path*");
}

/* ---- the stored form ---------------------------------------------------------------------- */

static void seals_every_value_on_its_own(void **state)
{
    struct sl_env_row row;
    json_t *vars = NULL;
    json_t *egress = NULL;
    json_t *c;

    (void)state;
    store_ok("{'name':'ci','description':'d','scope':'global','base_image':'img','cpus':1.5,"
             "'memory':'512MiB','network':'on','env':[{'name':'LOG','value':'debug'},"
             "{'name':'TOKEN','value':'s3cr3t','secret':true}],"
             "'egress':{'default':'deny','rules':[{'host':'a.com','methods':['GET']},"
             "{'host':'API.b.com:8443','credential':{'header':'Authorization',"
             "'value':'Bearer zz'}}]},'repositories':['acme/web']}",
             NULL, &row);
    assert_string_equal(row.name, "ci");
    assert_string_equal(row.description, "d");
    assert_int_equal(row.scope, SL_SCOPE_GLOBAL);
    assert_string_equal(row.base_image, "img");
    assert_int_equal(row.cpus_centi, 150);
    assert_int_equal(row.memory_bytes, (int64_t)512 << 20);
    assert_true(row.network);
    assert_int_equal(row.n_repos, 1);
    assert_string_equal(row.repos[0], "acme/web");
    /* docs/control-plane.md: [{"name","secret","sealed"}], every value sealed. */
    assert_null(strstr(row.env_json, "debug"));
    assert_null(strstr(row.env_json, "s3cr3t"));
    assert_int_equal(sl_env_load_vars(row.env_json, &vars), 0);
    assert_int_equal(json_array_size(vars), 2);
    assert_int_equal(json_object_size(json_array_get(vars, 0)), 3);
    assert_false(json_is_true(json_object_get(json_array_get(vars, 0), "secret")));
    assert_true(json_is_true(json_object_get(json_array_get(vars, 1), "secret")));
    expect_opens_to(&sealer_a,
                    json_string_value(json_object_get(json_array_get(vars, 0), "sealed")), "debug");
    expect_opens_to(&sealer_a,
                    json_string_value(json_object_get(json_array_get(vars, 1), "sealed")),
                    "s3cr3t");
    /* {"default","rules":[{"host","methods":[],"credential":{"header","sealed"}}]} */
    assert_null(strstr(row.egress_json, "Bearer"));
    egress = json_loads(row.egress_json, 0, NULL);
    assert_non_null(egress);
    assert_string_equal(json_string_value(json_object_get(egress, "default")), "deny");
    assert_int_equal(json_array_size(json_object_get(egress, "rules")), 2);
    assert_string_equal(json_string_value(json_object_get(
                                json_array_get(json_object_get(egress, "rules"), 1), "host")),
                        "api.b.com:8443");
    assert_int_equal(json_array_size(json_object_get(
                             json_array_get(json_object_get(egress, "rules"), 0), "methods")),
                     1);
    c = json_object_get(json_array_get(json_object_get(egress, "rules"), 1), "credential");
    assert_int_equal(json_object_size(c), 2);
    assert_string_equal(json_string_value(json_object_get(c, "header")), "Authorization");
    expect_opens_to(&sealer_a, json_string_value(json_object_get(c, "sealed")), "Bearer zz");
    json_decref(vars);
    json_decref(egress);
    sl_env_row_finish(&row);
}

static void stores_empty_env_as_an_empty_array(void **state)
{
    struct sl_env_row row;

    (void)state;
    store_ok(OFF "}", NULL, &row);
    assert_string_equal(row.env_json, "[]");
    assert_null(row.egress_json);
    sl_env_row_finish(&row);
    store_ok(ON("{'default':'allow'}") "}", NULL, &row);
    assert_string_equal(row.egress_json, "{\"default\":\"allow\",\"rules\":[]}");
    sl_env_row_finish(&row);
}

static void keeps_a_masked_secret_by_name(void **state)
{
    struct sl_env_row prev;
    struct sl_env_row row;
    json_t *vars = NULL;

    (void)state;
    store_ok(OFF ",'env':[{'name':'A','value':'alpha','secret':true},"
                 "{'name':'B','value':'beta','secret':true}]}",
             NULL, &prev);
    /* Reordered, and B given anew. */
    store_ok(OFF ",'env':[{'name':'B','value':'beta2','secret':true},"
                 "{'name':'A','value':'******','secret':true}]}",
             &prev, &row);
    assert_int_equal(sl_env_load_vars(row.env_json, &vars), 0);
    assert_string_equal(json_string_value(json_object_get(json_array_get(vars, 1), "name")), "A");
    expect_opens_to(&sealer_a,
                    json_string_value(json_object_get(json_array_get(vars, 1), "sealed")), "alpha");
    expect_opens_to(&sealer_a,
                    json_string_value(json_object_get(json_array_get(vars, 0), "sealed")), "beta2");
    json_decref(vars);
    sl_env_row_finish(&row);
    sl_env_row_finish(&prev);
}

static void refuses_a_mask_with_nothing_stored_to_keep(void **state)
{
    struct sl_env_row prev;

    (void)state;
    store_ok(OFF ",'env':[{'name':'A','value':'alpha','secret':true}]}", NULL, &prev);
    EXPECT_STORE(OFF ",'env':[{'name':'A','value':'******','secret':true},"
                     "{'name':'NEW','value':'******','secret':true}]}",
                 &prev, &sealer_a, 422,
                 "env[1].value: \"******\" keeps the stored value, but there is none for this "
                 "name: give the value");
    /* On POST nothing is stored at all. */
    EXPECT_STORE(OFF ",'env':[{'name':'A','value':'******','secret':true}]}", NULL, &sealer_a, 422,
                 "env[0].value: \"******\" keeps the stored value*");
    sl_env_row_finish(&prev);
}

static void takes_a_mask_literally_for_non_secrets_but_never_unmasks(void **state)
{
    struct sl_env_row prev;
    struct sl_env_row row;
    json_t *vars = NULL;

    (void)state;
    store_ok(OFF ",'env':[{'name':'A','value':'alpha','secret':true},"
                 "{'name':'B','value':'plain'}]}",
             NULL, &prev);
    /* Making a secret visible needs its value. */
    EXPECT_STORE(OFF ",'env':[{'name':'A','value':'******','secret':false}]}", &prev, &sealer_a,
                 422,
                 "env[0].value: the stored value is secret: send the value itself to make it "
                 "non-secret");
    /* A non-secret value is shown in full, so "******" is what the client saw and means. */
    store_ok(OFF ",'env':[{'name':'B','value':'******'}]}", &prev, &row);
    assert_int_equal(sl_env_load_vars(row.env_json, &vars), 0);
    expect_opens_to(&sealer_a,
                    json_string_value(json_object_get(json_array_get(vars, 0), "sealed")),
                    "******");
    json_decref(vars);
    sl_env_row_finish(&row);
    /* A visible value can be hidden by masking it. */
    store_ok(OFF ",'env':[{'name':'B','value':'******','secret':true}]}", &prev, &row);
    assert_int_equal(sl_env_load_vars(row.env_json, &vars), 0);
    expect_opens_to(&sealer_a,
                    json_string_value(json_object_get(json_array_get(vars, 0), "sealed")), "plain");
    json_decref(vars);
    sl_env_row_finish(&row);
    sl_env_row_finish(&prev);
}

static void refuses_to_keep_values_that_no_longer_open_with_409(void **state)
{
    struct sl_env_row prev;
    struct sl_env_row row;
    struct sl_env_errors errs = { 0 };

    (void)state;
    store_ok("{" BASE ",'network':'on','env':[{'name':'A','value':'alpha','secret':true}],"
             "'egress':{'rules':[{'host':'a.com','credential':{'header':'X-K','value':'v'}}]}}",
             NULL, &prev);
    /* The key changed: sealer_b cannot open what sealer_a sealed. */
    EXPECT_STORE("{" BASE ",'network':'on','env':[{'name':'A','value':'******','secret':true}],"
                 "'egress':{'rules':[{'host':'a.com','credential':{'header':'X-K'}}]}}",
                 &prev, &sealer_b, 409,
                 "env[0].value: the stored value no longer decrypts (the encryption key "
                 "changed): give it anew",
                 "egress.rules[0].credential.value: the stored value no longer decrypts*");
    /* Given anew, the PUT passes. */
    assert_int_equal(store("{" BASE ",'network':'on','env':[{'name':'A','value':'new',"
                           "'secret':true}],'egress':{'rules':[{'host':'a.com',"
                           "'credential':{'header':'X-K','value':'v2'}}]}}",
                           &prev, &sealer_b, &row, &errs),
                     0);
    sl_env_row_finish(&row);
    /* A validation problem as well makes it a 422. */
    EXPECT_STORE("{" BASE ",'network':'on','env':[{'name':'A','value':'******','secret':true},"
                 "{'name':'B','value':'******','secret':true}],'egress':{'default':'allow'}}",
                 &prev, &sealer_b, 422, "env[0].value: the stored value no longer decrypts*",
                 "env[1].value: \"******\" keeps the stored value*");
    sl_env_errors_finish(&errs);
    sl_env_row_finish(&prev);
}

static void keeps_a_credential_without_value_for_the_same_host(void **state)
{
    struct sl_env_row prev;
    struct sl_env_row row;
    json_t *egress;
    json_t *rules;

    (void)state;
    store_ok(
            RULES("{'host':'a.com','credential':{'header':'X-A','value':'va'}},"
                  "{'host':'b.com','methods':['GET'],'credential':{'header':'X-B1','value':'vb1'}},"
                  "{'host':'b.com','methods':['POST'],'credential':{'header':'X-B2','value':'vb2'}"
                  "}"),
            NULL, &prev);
    /* Reordered across hosts, new header name for a.com; b.com pairs by position. */
    store_ok(RULES("{'host':'b.com','methods':['GET'],'credential':{'header':'X-B1'}},"
                   "{'host':'c.com'},"
                   "{'host':'A.COM','credential':{'header':'Authorization'}},"
                   "{'host':'b.com','methods':['POST'],'credential':{'header':'X-B2'}}"),
             &prev, &row);
    egress = json_loads(row.egress_json, 0, NULL);
    rules = json_object_get(egress, "rules");
    expect_opens_to(&sealer_a,
                    json_string_value(json_object_get(
                            json_object_get(json_array_get(rules, 0), "credential"), "sealed")),
                    "vb1");
    expect_opens_to(&sealer_a,
                    json_string_value(json_object_get(
                            json_object_get(json_array_get(rules, 2), "credential"), "sealed")),
                    "va");
    assert_string_equal(json_string_value(json_object_get(
                                json_object_get(json_array_get(rules, 2), "credential"), "header")),
                        "Authorization");
    expect_opens_to(&sealer_a,
                    json_string_value(json_object_get(
                            json_object_get(json_array_get(rules, 3), "credential"), "sealed")),
                    "vb2");
    json_decref(egress);
    sl_env_row_finish(&row);
    /* A value never moves to another host, nor to a port the stored rule did not name. */
    EXPECT_STORE(RULES("{'host':'evil.com','credential':{'header':'X-A'}}"), &prev, &sealer_a, 422,
                 "egress.rules[0].credential.value: no stored credential for this host to keep: "
                 "give the value");
    EXPECT_STORE(RULES("{'host':'a.com:8443','credential':{'header':'X-A'}}"), &prev, &sealer_a,
                 422, "egress.rules[0].credential.value: no stored credential*");
    /* A third b.com credential has nothing to pair with. */
    EXPECT_STORE(RULES("{'host':'b.com','credential':{'header':'X'}},"
                       "{'host':'b.com','credential':{'header':'X'}},"
                       "{'host':'b.com','credential':{'header':'X'}}"),
                 &prev, &sealer_a, 422, "egress.rules[2].credential.value: no stored*");
    /* POST: nothing to keep. */
    EXPECT_STORE(RULES("{'host':'a.com','credential':{'header':'X-A'}}"), NULL, &sealer_a, 422,
                 "egress.rules[0].credential.value: required field missing");
    sl_env_row_finish(&prev);
}

/* image_pull and registry_auth: validated, the password sealed on its own, never rendered (the
 * username and has_value), kept on a resave without it, refused to keep when there is none or
 * it no longer opens. */
static void stores_the_pull_policy_and_registry_credentials(void **state)
{
    struct sl_env_row prev;
    struct sl_env_row row;
    json_t *reg;
    json_t *j = NULL;
    char *text;

    (void)state;
    EXPECT(OFF ",'image_pull':'never'}", "image_pull: must be \"if-missing\" or \"always\"");
    EXPECT(OFF ",'registry_auth':'u:p'}",
           "registry_auth: must be an object with \"username\" and \"password\", or null");
    EXPECT(OFF ",'registry_auth':{'password':'p'}}",
           "registry_auth.username: required field missing");
    EXPECT(OFF ",'registry_auth':{'username':'u','password':'a\\nb'}}",
           "registry_auth.password: must be 1-4096 bytes without control characters");
    EXPECT(OFF ",'registry_auth':{'username':'u','password':'p','token':'t'}}",
           "registry_auth.token: unknown field (expected username, password)");
    EXPECT_VALID(OFF ",'image_pull':null,'registry_auth':null}");
    store_ok(OFF
             ",'image_pull':'always','registry_auth':{'username':'bob','password':'s3cret-PW'}}",
             NULL, &prev);
    assert_true(prev.image_pull_always);
    reg = json_loads(prev.registry_json, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(reg, "username")), "bob");
    expect_opens_to(&sealer_a, json_string_value(json_object_get(reg, "sealed")), "s3cret-PW");
    json_decref(reg);
    assert_null(strstr(prev.registry_json, "s3cret-PW"));
    expect_render(&prev, &sealer_a,
                  "{'id':'5d0c0000-0000-4000-8000-000000000001','name':'ci','description':'',"
                  "'scope':'user','owner':null,"
                  "'is_default':false,'base_image':'python:3.12-slim','image_pull':'always',"
                  "'registry_auth':{'username':'bob','has_value':true},'cpus':null,"
                  "'memory':null,'network':'off','env':[],'egress':null,'repositories':[],"
                  "'created_at':'2026-01-02T03:04:05Z','updated_at':'2026-01-02T03:04:05Z',"
                  "'observe_until':null}");
    assert_int_equal(sl_env_render(&prev, NULL, &sealer_a, &j), 0);
    text = dump(j);
    assert_null(strstr(text, "s3cret-PW"));
    sl_free(text);
    json_decref(j);
    /* A resave without the password keeps it (a new username is fine); has_value is ignored. */
    store_ok(OFF ",'registry_auth':{'username':'carol','has_value':true}}", &prev, &row);
    assert_false(row.image_pull_always);
    reg = json_loads(row.registry_json, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(reg, "username")), "carol");
    expect_opens_to(&sealer_a, json_string_value(json_object_get(reg, "sealed")), "s3cret-PW");
    json_decref(reg);
    sl_env_row_finish(&row);
    /* Left out: none any more. */
    store_ok(OFF "}", &prev, &row);
    assert_null(row.registry_json);
    sl_env_row_finish(&row);
    EXPECT_STORE(OFF ",'registry_auth':{'username':'u'}}", NULL, &sealer_a, 422,
                 "registry_auth.password: required field missing");
    EXPECT_STORE(OFF ",'registry_auth':{'username':'u'}}", &prev, &sealer_b, 409,
                 "registry_auth.password: the stored value no longer decrypts*");
    /* The stored password was given for Docker Hub's python:3.12-slim: an image of another
     * registry does not take it along, whatever the spelling of its name. */
    static const char *const elsewhere[] = {
        "evil.example.net/python:3.12-slim",
        "localhost/python",
        "127.0.0.1:5000/python",
        "registry-1.docker.io:443/library/python",
    };
    for (size_t i = 0; i < SL_ARRAY_LEN(elsewhere); i++) {
        char body[512];

        (void)snprintf(body, sizeof(body),
                       "{'name':'ci','base_image':'%s','network':'off',"
                       "'registry_auth':{'username':'bob'}}",
                       elsewhere[i]);
        EXPECT_STORE(body, &prev, &sealer_a, 422,
                     "registry_auth.password: base_image names another registry than the stored "
                     "password's: give the password");
    }
    /* Another image of the same registry keeps it. */
    store_ok("{'name':'ci','base_image':'library/node:22','network':'off',"
             "'registry_auth':{'username':'bob'}}",
             &prev, &row);
    reg = json_loads(row.registry_json, 0, NULL);
    expect_opens_to(&sealer_a, json_string_value(json_object_get(reg, "sealed")), "s3cret-PW");
    json_decref(reg);
    sl_env_row_finish(&row);
    sl_env_row_finish(&prev);
}

static void caps_the_sealed_env_at_32_kib(void **state)
{
    /* The toy doubles each byte: 8000 bytes seal to 16004 characters. */
    char *v = repeat("v", 8000);
    struct sl_buf b;
    struct sl_env_row row;

    (void)state;
    sl_buf_init(&b, TEST_BUF_MAX);
    assert_int_equal(sl_buf_printf(&b,
                                   OFF ",'env':[{'name':'A','value':'%s'},"
                                       "{'name':'B','value':'%s'}]}",
                                   v, v),
                     0);
    store_ok((const char *)b.p, NULL, &row);
    assert_true(strlen(row.env_json) <= SL_ENV_SEALED_MAX);
    sl_env_row_finish(&row);
    sl_buf_reset(&b);
    assert_int_equal(sl_buf_printf(&b,
                                   OFF ",'env':[{'name':'A','value':'%s'},"
                                       "{'name':'B','value':'%s'},{'name':'C','value':'x'}]}",
                                   v, v),
                     0);
    store_ok((const char *)b.p, NULL, &row);
    sl_env_row_finish(&row);
    sl_buf_reset(&b);
    assert_int_equal(sl_buf_printf(&b,
                                   OFF ",'env':[{'name':'A','value':'%s'},"
                                       "{'name':'B','value':'%s'},{'name':'C','value':'%.400s'}]}",
                                   v, v, v),
                     0);
    EXPECT_STORE((const char *)b.p, NULL, &sealer_a, 422,
                 "env: the variables take more than 32768 bytes (32 KiB) sealed");
    /* One value whose sealed form alone is too big. */
    sl_buf_reset(&b);
    assert_int_equal(sl_buf_printf(&b, OFF ",'env':[{'name':'A','value':'%s%s%s'}]}", v, v, v), 0);
    EXPECT_STORE((const char *)b.p, NULL, &sealer_a, 422,
                 "env: the variables take more than 32768 bytes (32 KiB) sealed");
    sl_buf_finish(&b);
    sl_free(v);
}

static void caps_the_sealed_credentials_at_32_kib(void **state)
{
    /* 8 credentials of 2000 bytes seal to 8 x 4004 = 32032; a ninth passes the cap. */
    char *v = repeat("v", 2000);
    struct sl_buf b;
    struct sl_env_row row;

    (void)state;
    for (int n = 8; n <= 9; n++) {
        sl_buf_init(&b, TEST_BUF_MAX);
        assert_int_equal(sl_buf_append_str(&b, ON("{'rules':[")), 0);
        for (int i = 0; i < n; i++) {
            assert_int_equal(sl_buf_printf(&b,
                                           "%s{'host':'h%d.com','credential':{'header':"
                                           "'X-K','value':'%s'}}",
                                           i ? "," : "", i, v),
                             0);
        }
        assert_int_equal(sl_buf_append_str(&b, "]}}"), 0);
        if (n == 8) {
            store_ok((const char *)b.p, NULL, &row);
            sl_env_row_finish(&row);
        } else {
            EXPECT_STORE((const char *)b.p, NULL, &sealer_a, 422,
                         "egress.rules: the credential values take more than 32768 bytes (32 "
                         "KiB) sealed");
        }
        sl_buf_finish(&b);
    }
    sl_free(v);
}

static void passes_a_sealer_failure_on_and_leaves_the_row_clean(void **state)
{
    struct sl_env_errors errs = { 0 };
    struct sl_env_row row;

    (void)state;
    assert_int_equal(
            store(OFF ",'env':[{'name':'A','value':'x'}]}", NULL, &sealer_broken, &row, &errs),
            SL_ECRYPTO);
    assert_null(row.name);
    assert_null(row.env_json);
    assert_int_equal(errs.count, 0);
    sl_env_row_finish(&row);
    sl_env_errors_finish(&errs);
}

/* Seals into raw bytes, which cannot go into JSON text. */
static int raw_seal(void *arg, const void *p, size_t n, struct sl_buf *out)
{
    (void)arg;
    (void)p;
    (void)n;
    return sl_buf_append(out, "\x01\xff", 2);
}

static void refuses_sealed_text_that_is_not_printable_ascii(void **state)
{
    const struct sl_env_sealer raw = { raw_seal, sl_test_toy_open, NULL };
    struct sl_env_errors errs = { 0 };
    struct sl_env_row row;

    (void)state;
    assert_int_equal(store(OFF ",'env':[{'name':'A','value':'x'}]}", NULL, &raw, &row, &errs),
                     SL_ECRYPTO);
    assert_null(row.env_json);
    sl_env_row_finish(&row);
    sl_env_errors_finish(&errs);
}

/* A stored egress, opened, is a valid snapshot environment: what the API accepts, the proxy
 * loads. */
static void stores_egress_the_proxy_accepts(void **state)
{
    struct sl_env_row row;
    json_t *egress;
    json_t *doc;
    json_t *r;
    size_t i;
    struct sl_snapshot *snap = NULL;
    struct sl_policy_errors perrs = { NULL, 0, false };
    char *text;

    (void)state;
    store_ok(RULES("{'host':'*.Example.org'},{'host':'[::1]:8443','methods':['GET','PUT']},"
                   "{'host':'api.x.com','credential':{'header':'Authorization',"
                   "'value':'Bearer a\\tb'}}"),
             NULL, &row);
    egress = json_loads(row.egress_json, 0, NULL);
    json_array_foreach(json_object_get(egress, "rules"), i, r)
    {
        json_t *c = json_object_get(r, "credential");
        struct sl_buf plain;
        const char *sealed;

        if (c == NULL) {
            continue;
        }
        sealed = json_string_value(json_object_get(c, "sealed"));
        sl_buf_init(&plain, TEST_BUF_MAX);
        assert_int_equal(sl_test_toy_open(&toy_a, sealed, strlen(sealed), &plain), 0);
        assert_int_equal(json_object_set_new(c, "value", json_string(sl_buf_cstr(&plain))), 0);
        assert_int_equal(json_object_del(c, "sealed"), 0);
        sl_buf_finish(&plain);
    }
    doc = json_pack("{s:i, s:{s:O}}", "version", 1, "environments", "ci", egress);
    text = json_dumps(doc, JSON_COMPACT);
    assert_int_equal(sl_snapshot_parse(text, strlen(text), &snap, &perrs), 0);
    assert_int_equal(sl_snapshot_rule_count(snap), 3);
    assert_int_equal(sl_snapshot_credential_count(snap), 1);
    sl_snapshot_unref(snap);
    sl_policy_errors_finish(&perrs);
    sl_free(text);
    json_decref(doc);
    json_decref(egress);
    sl_env_row_finish(&row);
}

/* ---- rendering ---------------------------------------------------------------------------- */

static void renders_the_api_form_with_secrets_masked(void **state)
{
    struct sl_env_row row;
    json_t *j = NULL;
    char *text;

    (void)state;
    store_ok("{'name':'ci-python','base_image':'python:3.12-slim','cpus':1.5,'memory':'2GiB',"
             "'network':'on','env':[{'name':'LOG_LEVEL','value':'debug'},"
             "{'name':'PYPI_TOKEN','value':'s3cr3t','secret':true}],"
             "'egress':{'rules':[{'host':'pkgs.example.org'},{'host':'api.example.com',"
             "'methods':['GET'],'credential':{'header':'Authorization','value':'Bearer zz'}}]},"
             "'repositories':['acme/website','group/sub/repo']}",
             NULL, &row);
    expect_render(&row, &sealer_a,
                  "{'id':'5d0c0000-0000-4000-8000-000000000001','name':'ci-python',"
                  "'description':'','scope':'user','owner':null,'is_default':false,"
                  "'base_image':'python:3.12-slim','image_pull':'if-missing',"
                  "'registry_auth':null,'cpus':1.5,'memory':'2GiB','network':'on',"
                  "'env':[{'name':'LOG_LEVEL','value':'debug','secret':false},"
                  "{'name':'PYPI_TOKEN','value':'******','secret':true}],"
                  "'egress':{'default':'deny','rules':[{'host':'pkgs.example.org','methods':[]},"
                  "{'host':'api.example.com','methods':['GET'],"
                  "'credential':{'header':'Authorization','has_value':true}}]},"
                  "'repositories':['acme/website','group/sub/repo'],"
                  "'created_at':'2026-01-02T03:04:05Z','updated_at':'2026-01-02T03:04:05Z',"
                  "'observe_until':null}");
    assert_int_equal(sl_env_render(&row, "alice", &sealer_a, &j), 0);
    assert_string_equal(json_string_value(json_object_get(j, "owner")), "alice");
    text = dump(j);
    assert_null(strstr(text, "s3cr3t"));
    assert_null(strstr(text, "Bearer"));
    assert_null(strstr(text, "sealed"));
    sl_free(text);
    json_decref(j);
    sl_env_row_finish(&row);
}

/* Placeholder credentials (docs/reference/api.md §5.1): `placeholder_env` validated (a shell
 * identifier, none sluice sets itself, one per variable, never a variable of the environment too),
 * stored and rendered beside the header, its value never; observe_until rendered only while in
 * the future. */
static void validates_stores_and_renders_placeholder_credentials(void **state)
{
    struct sl_env_row row;
    json_t *egress;
    json_t *c;
    json_t *j = NULL;
    char *text;

    (void)state;
    EXPECT_VALID(RULES("{'host':'api.openai.com','credential':{'header':'Authorization',"
                       "'value':'sk-1','placeholder_env':'OPENAI_API_KEY'}}"));
    EXPECT(RULES("{'host':'a.com','credential':{'header':'A','value':'v','placeholder_env':'1X'}}"),
           "egress.rules[0].credential.placeholder_env: must be a shell identifier "
           "([A-Za-z_][A-Za-z0-9_]*) of at most 128 characters");
    EXPECT(RULES("{'host':'a.com','credential':{'header':'A','value':'v','placeholder_env':7}}"),
           "egress.rules[0].credential.placeholder_env: must be a string");
    EXPECT(RULES("{'host':'a.com','credential':{'header':'A','value':'v',"
                 "'placeholder_env':'HTTPS_PROXY'}}"),
           "egress.rules[0].credential.placeholder_env: is a variable sluice sets itself in "
           "every sandbox (docs/reference/containers.md §5.4)");
    EXPECT(RULES("{'host':'a.com','credential':{'header':'A','value':'v',"
                 "'placeholder_env':'SLUICE_API_URL'}}"),
           "egress.rules[0].credential.placeholder_env: is a variable sluice sets itself*");
    EXPECT(RULES("{'host':'a.com','credential':{'header':'A','value':'v','placeholder_env':'K'}},"
                 "{'host':'b.com','credential':{'header':'A','value':'w','placeholder_env':'K'}}"),
           "egress.rules[1].credential.placeholder_env: \"K\" is the placeholder_env of an "
           "earlier rule too (a variable holds one placeholder)");
    EXPECT("{" BASE ",'network':'on','env':[{'name':'K','value':'x'}],'egress':{'default':'deny',"
           "'rules':[{'host':'a.com','credential':{'header':'A','value':'v',"
           "'placeholder_env':'K'}}]}}",
           "egress.rules[0].credential.placeholder_env: \"K\" is also a variable of this "
           "environment (\"env\"): the sandbox would get both");

    store_ok(RULES("{'host':'api.openai.com','credential':{'header':'Authorization',"
                   "'value':'sk-1','placeholder_env':'OPENAI_API_KEY'}},"
                   "{'host':'b.com','credential':{'header':'X-K','value':'v'}}"),
             NULL, &row);
    egress = json_loads(row.egress_json, 0, NULL);
    assert_non_null(egress);
    c = json_object_get(json_array_get(json_object_get(egress, "rules"), 0), "credential");
    assert_string_equal(json_string_value(json_object_get(c, "placeholder_env")), "OPENAI_API_KEY");
    assert_null(json_object_get(
            json_object_get(json_array_get(json_object_get(egress, "rules"), 1), "credential"),
            "placeholder_env"));
    json_decref(egress);
    row.observe_until = (int64_t)time(NULL) - 1;
    assert_int_equal(sl_env_render(&row, NULL, &sealer_a, &j), 0);
    text = dump(j);
    assert_non_null(strstr(text, "{\"host\":\"api.openai.com\",\"methods\":[],\"credential\":"
                                 "{\"header\":\"Authorization\",\"has_value\":true,"
                                 "\"placeholder_env\":\"OPENAI_API_KEY\"}}"));
    assert_non_null(strstr(text, "\"credential\":{\"header\":\"X-K\",\"has_value\":true}}"));
    assert_null(strstr(text, "sk-1"));
    assert_non_null(strstr(text, "\"observe_until\":null"));
    sl_free(text);
    json_decref(j);
    row.observe_until = 4102444800; /* 2100-01-01 */
    assert_int_equal(sl_env_render(&row, NULL, &sealer_a, &j), 0);
    text = dump(j);
    assert_non_null(strstr(text, "\"observe_until\":\"2100-01-01T00:00:00Z\""));
    sl_free(text);
    json_decref(j);
    sl_env_row_finish(&row);
}

static void validates_stores_and_renders_passthrough_rules(void **state)
{
    struct sl_env_row row;
    json_t *egress;
    json_t *rule;
    json_t *j = NULL;
    char *text;

    (void)state;
    EXPECT_VALID(RULES("{'host':'a.com','tls':'passthrough'}"));
    EXPECT_VALID(RULES("{'host':'a.com','tls':'passthrough','methods':[]}"));
    EXPECT_VALID(RULES("{'host':'a.com','tls':'intercept','methods':['GET']}"));
    EXPECT(RULES("{'host':'a.com','tls':'passthrough','methods':['GET']}"),
           "egress.rules[0].methods: a \"tls\": \"passthrough\" rule cannot filter methods: the "
           "proxy does not see the requests inside the tunnel");
    EXPECT(RULES("{'host':'a.com','tls':'passthrough','credential':{'header':'X-K','value':'v'}}"),
           "egress.rules[0].credential: a \"tls\": \"passthrough\" rule cannot carry a "
           "credential: the proxy does not see the requests inside the tunnel");
    EXPECT(RULES("{'host':'a.com','tls':'pass'}"),
           "egress.rules[0].tls: must be \"intercept\" or \"passthrough\"");
    EXPECT(RULES("{'host':'a.com','tls':1}"), "egress.rules[0].tls: must be a string");

    store_ok(RULES("{'host':'Pinned.example.com','tls':'passthrough'},{'host':'b.com',"
                   "'tls':'intercept'}"),
             NULL, &row);
    egress = json_loads(row.egress_json, 0, NULL);
    assert_non_null(egress);
    rule = json_array_get(json_object_get(egress, "rules"), 0);
    assert_string_equal(json_string_value(json_object_get(rule, "tls")), "passthrough");
    /* The default is not stored: rules from before the field look the same. */
    assert_null(json_object_get(json_array_get(json_object_get(egress, "rules"), 1), "tls"));
    json_decref(egress);
    assert_int_equal(sl_env_render(&row, NULL, &sealer_a, &j), 0);
    text = dump(j);
    assert_non_null(strstr(text, "\"egress\":{\"default\":\"deny\",\"rules\":[{\"host\":"
                                 "\"pinned.example.com\",\"methods\":[],\"tls\":"
                                 "\"passthrough\"},{\"host\":\"b.com\",\"methods\":[]}]}"));
    sl_free(text);
    json_decref(j);
    sl_env_row_finish(&row);
}

static void renders_cpus_and_memory_or_null(void **state)
{
    struct sl_env_row row;
    json_t *j = NULL;
    char *text;

    (void)state;
    store_ok(OFF ",'cpus':0.29,'memory':'512MiB','scope':'global'}", NULL, &row);
    row.is_default = true;
    assert_int_equal(sl_env_render(&row, NULL, &sealer_a, &j), 0);
    text = dump(j);
    assert_non_null(strstr(text, "\"cpus\":0.29,\"memory\":\"512MiB\",\"network\":\"off\""));
    assert_non_null(strstr(text, "\"scope\":\"global\",\"owner\":null,\"is_default\":true"));
    assert_non_null(strstr(text, "\"egress\":null"));
    sl_free(text);
    json_decref(j);
    sl_env_row_finish(&row);
    store_ok(OFF ",'cpus':2,'memory':'1024GiB'}", NULL, &row);
    assert_int_equal(sl_env_render(&row, NULL, &sealer_a, &j), 0);
    text = dump(j);
    assert_non_null(strstr(text, "\"cpus\":2.0,\"memory\":\"1024GiB\""));
    sl_free(text);
    json_decref(j);
    sl_env_row_finish(&row);
    store_ok(OFF "}", NULL, &row);
    assert_int_equal(sl_env_render(&row, NULL, &sealer_a, &j), 0);
    text = dump(j);
    assert_non_null(strstr(text, "\"cpus\":null,\"memory\":null"));
    sl_free(text);
    json_decref(j);
    sl_env_row_finish(&row);
}

static void lists_what_does_not_open_as_undecryptable(void **state)
{
    struct sl_env_row row;
    json_t *j = NULL;
    json_t *vars;

    (void)state;
    store_ok("{" BASE ",'network':'on','env':[{'name':'PLAIN','value':'p'},"
             "{'name':'TOKEN','value':'t','secret':true}],'egress':{'rules':["
             "{'host':'a.com','credential':{'header':'X-K','value':'k'}},"
             "{'host':'a.com','methods':['GET'],'credential':{'header':'X-K','value':'k'}},"
             "{'host':'b.com'}]}}",
             NULL, &row);
    /* Readable with the key it was sealed with: no "undecryptable" member at all. */
    assert_int_equal(sl_env_render(&row, NULL, &sealer_a, &j), 0);
    assert_null(json_object_get(j, "undecryptable"));
    json_decref(j);
    assert_int_equal(sl_env_render(&row, NULL, &sealer_b, &j), 0);
    expect_json(json_object_get(j, "undecryptable"), "['PLAIN','TOKEN','a.com']");
    vars = json_object_get(j, "env");
    assert_true(json_is_null(json_object_get(json_array_get(vars, 0), "value")));
    assert_string_equal(json_string_value(json_object_get(json_array_get(vars, 1), "value")),
                        SL_ENV_MASK);
    json_decref(j);
    sl_env_row_finish(&row);
}

static void renders_list_items_without_values(void **state)
{
    struct sl_env_row row;
    json_t *j = NULL;
    unsigned long opens = toy_a.opens;
    char *text;

    (void)state;
    store_ok(
            EGRESS_RULES(
                    "{'host':'a.com','credential':{'header':'X-K','value':'k'}}") ",'env':[{'name':"
                                                                                  "'PLAIN','value':"
                                                                                  "'p'},{'name':'"
                                                                                  "TOKEN','value':'"
                                                                                  "t','secret':"
                                                                                  "true}]}",
            NULL, &row);
    assert_int_equal(sl_env_render_item(&row, "bob", &j), 0);
    assert_int_equal(toy_a.opens, opens);
    expect_json(json_object_get(j, "env"),
                "[{'name':'PLAIN','secret':false},{'name':'TOKEN','secret':true}]");
    text = dump(j);
    assert_null(strstr(text, "\"value\""));
    assert_null(strstr(text, "undecryptable"));
    assert_non_null(strstr(text, "\"has_value\":true"));
    sl_free(text);
    json_decref(j);
    sl_env_row_finish(&row);
}

static void refuses_to_render_damaged_rows(void **state)
{
    struct sl_env_row row;
    json_t *j = NULL;

    (void)state;
    store_ok(OFF "}", NULL, &row);
    sl_free(row.env_json);
    row.env_json = sl_strdup("[{\"name\":\"A\"}]");
    assert_int_equal(sl_env_render(&row, NULL, &sealer_a, &j), SL_EIO);
    assert_null(j);
    sl_free(row.env_json);
    row.env_json = sl_strdup("[]");
    row.egress_json = sl_strdup("{\"default\":\"deny\",\"rules\":[{\"host\":1}]}");
    assert_int_equal(sl_env_render(&row, NULL, &sealer_a, &j), SL_EIO);
    assert_null(j);
    sl_env_row_finish(&row);
}

static void replaces_a_damaged_row_only_when_nothing_is_kept(void **state)
{
    struct sl_env_errors errs = { 0 };
    struct sl_env_row prev;
    struct sl_env_row row;

    (void)state;
    store_ok(OFF "}", NULL, &prev);
    sl_free(prev.env_json);
    prev.env_json = sl_strdup("{not json");
    /* Every value given anew: the damaged row is simply replaced. */
    store_ok(OFF ",'env':[{'name':'A','value':'a','secret':true}]}", &prev, &row);
    sl_env_row_finish(&row);
    /* Keeping needs the stored values: a damaged row is a server error, not "nothing stored". */
    assert_int_equal(store(OFF ",'env':[{'name':'A','value':'******','secret':true}]}", &prev,
                           &sealer_a, &row, &errs),
                     SL_EIO);
    assert_null(row.env_json);
    assert_int_equal(errs.count, 0);
    sl_env_errors_finish(&errs);
    sl_env_row_finish(&row);
    sl_env_row_finish(&prev);
}

static void round_trips_a_get_body_through_put(void **state)
{
    struct sl_env_row prev;
    struct sl_env_row row;
    json_t *first = NULL;
    json_t *again = NULL;
    char *body;

    (void)state;
    store_ok("{'name':'rt','base_image':'img','cpus':0.5,'memory':'256MiB','network':'on',"
             "'env':[{'name':'A','value':'a'},{'name':'S','value':'s','secret':true}],"
             "'egress':{'rules':[{'host':'x.com','methods':['GET'],'credential':{"
             "'header':'X-K','value':'k'}}]},'repositories':['o/r']}",
             NULL, &prev);
    assert_int_equal(sl_env_render(&prev, "me", &sealer_a, &first), 0);
    body = dump(first);
    store_ok(body, &prev, &row);
    assert_int_equal(sl_env_render(&row, "me", &sealer_a, &again), 0);
    assert_true(json_equal(first, again));
    assert_string_equal(prev.env_json, row.env_json);
    assert_string_equal(prev.egress_json, row.egress_json);
    sl_free(body);
    json_decref(first);
    json_decref(again);
    sl_env_row_finish(&row);
    sl_env_row_finish(&prev);
}

static void renders_errors_as_the_api_shows_them(void **state)
{
    struct sl_env_spec spec;
    struct sl_env_errors errs = { 0 };
    json_t *j = NULL;

    (void)state;
    assert_int_equal(parse(OFF ",'cpus':0,'env':[{'name':'1','value':'x'}]}", &spec, &errs),
                     SL_EPOLICY);
    assert_int_equal(sl_env_errors_render(&errs, &j), 0);
    expect_json(j, "{'message':'the environment is invalid','errors':["
                   "{'field':'cpus','message':'must be greater than 0'},"
                   "{'field':'env[0].name','message':'must be a shell identifier "
                   "([A-Za-z_][A-Za-z0-9_]*)'}]}");
    json_decref(j);
    assert_int_equal(parse("[", &spec, &errs), SL_EPOLICY);
    assert_int_equal(sl_env_errors_render(&errs, &j), 0);
    assert_null(json_object_get(j, "errors"));
    assert_non_null(json_object_get(j, "message"));
    json_decref(j);
    sl_env_errors_finish(&errs);
}

static void stops_recording_at_the_error_cap(void **state)
{
    struct sl_env_spec spec;
    struct sl_env_errors errs = { 0 };
    struct sl_buf b;

    (void)state;
    sl_buf_init(&b, TEST_BUF_MAX);
    assert_int_equal(sl_buf_append_str(&b, OFF ",'repositories':["), 0);
    for (int i = 0; i < 150; i++) {
        assert_int_equal(sl_buf_printf(&b, "%s'bad%d'", i ? "," : "", i), 0);
    }
    assert_int_equal(sl_buf_append_str(&b, "]}"), 0);
    assert_int_equal(parse((const char *)b.p, &spec, &errs), SL_EPOLICY);
    assert_int_equal(errs.count, SL_ENV_ERRORS_MAX);
    assert_true(errs.truncated);
    sl_env_errors_finish(&errs);
    sl_buf_finish(&b);
}

/* ---- allocation failures ------------------------------------------------------------------ */

/* Parse, store over `prev`, render: every step with the Nth allocation failing, for every N
 * until the whole run passes. Nothing may leak or crash (ASan builds check the leaks). */
static void sweep(const char *text, const struct sl_env_row *prev)
{
    struct sl_buf b;
    long n;

    json(&b, text);
    for (n = 1; n < 100000; n++) {
        struct sl_env_spec spec;
        struct sl_env_errors errs = { 0 };
        struct sl_env_row row = { 0 };
        json_t *j = NULL;
        int rc;

        sl_mem_fail_after(n);
        rc = sl_env_spec_parse(b.p, b.len, &spec, &errs);
        if (rc == 0) {
            rc = sl_env_spec_to_row(&spec, prev, &sealer_a, &row, &errs);
        }
        if (rc == 0) {
            rc = sl_env_render(&row, "o", &sealer_a, &j);
        }
        if (rc == 0) {
            json_decref(j);
            rc = sl_env_render_item(&row, "o", &j);
        }
        if (rc == 0 && sl_mem_failures() == 0) {
            sl_mem_fail_after(0);
            json_decref(j);
            sl_env_row_finish(&row);
            sl_env_spec_finish(&spec);
            break;
        }
        sl_mem_fail_after(0);
        /* jansson's lexer reports some allocation failures as syntax errors: a 400 for the
         * request, SL_EIO (damaged) for stored JSON. Never a validation error (422/409). */
        if (rc != SL_ENOMEM && rc != SL_EIO && !(rc == SL_EPOLICY && errs.status == 400)) {
            fail_msg("allocation %ld: rc %d status %d %s", n, rc, errs.status, errs.message);
        }
        json_decref(j);
        sl_env_row_finish(&row);
        sl_env_spec_finish(&spec);
        sl_env_errors_finish(&errs);
    }
    assert_true(n > 10);
    sl_buf_finish(&b);
}

static void survives_every_allocation_failure(void **state)
{
    struct sl_env_row prev;

    (void)state;
    store_ok("{'name':'p','base_image':'img','network':'on','env':[{'name':'S','value':'s',"
             "'secret':true}],'egress':{'rules':[{'host':'a.com','credential':{"
             "'header':'X-K','value':'k'}}]}}",
             NULL, &prev);
    sweep("{'name':'ci','description':'d','base_image':'img:1','cpus':1.5,'memory':'1GiB',"
          "'network':'on','env':[{'name':'A','value':'a'},{'name':'S','value':'******',"
          "'secret':true}],'egress':{'rules':[{'host':'a.com','methods':['GET','POST'],"
          "'credential':{'header':'X-K'}},{'host':'b.com'}]},'repositories':['o/r','o/s']}",
          &prev);
    sl_env_row_finish(&prev);
}

static void survives_every_allocation_failure_while_reporting_errors(void **state)
{
    long n;
    struct sl_buf b;

    (void)state;
    json(&b, "{'name':'','cpus':0,'x':1,'env':[{'name':'1'}],'egress':{'rules':[{'host':'a..b',"
             "'methods':['get']}]},'repositories':['x','x']}");
    for (n = 1; n < 100000; n++) {
        struct sl_env_spec spec;
        struct sl_env_errors errs = { 0 };
        json_t *j = NULL;
        int rc;

        sl_mem_fail_after(n);
        rc = sl_env_spec_parse(b.p, b.len, &spec, &errs);
        if (rc == SL_EPOLICY) {
            rc = sl_env_errors_render(&errs, &j);
        }
        sl_mem_fail_after(0);
        json_decref(j);
        sl_env_errors_finish(&errs);
        if (rc == 0 && sl_mem_failures() == 0) {
            break;
        }
        assert_int_equal(rc, SL_ENOMEM);
    }
    assert_true(n > 10);
    sl_buf_finish(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepts_a_minimal_request_with_defaults),
        cmocka_unit_test(reads_every_field_of_a_full_request),
        cmocka_unit_test(refuses_bodies_that_are_not_a_json_object_with_400),
        cmocka_unit_test(refuses_deep_nesting_before_parsing),
        cmocka_unit_test(does_not_quote_a_secret_near_a_syntax_error),
        cmocka_unit_test(reports_unknown_fields_and_ignores_read_only_ones),
        cmocka_unit_test(validates_stores_and_renders_passthrough_rules),
        cmocka_unit_test(validates_stores_and_renders_placeholder_credentials),
        cmocka_unit_test(treats_null_as_absent_for_optional_fields),
        cmocka_unit_test(requires_a_name_of_1_to_128_characters),
        cmocka_unit_test(refuses_a_10_mb_name),
        cmocka_unit_test(refuses_control_characters_and_ambiguous_names),
        cmocka_unit_test(refuses_nul_in_every_string_with_its_field),
        cmocka_unit_test(refuses_nul_in_an_already_parsed_document),
        cmocka_unit_test(keeps_sql_metacharacters_and_unicode_verbatim),
        cmocka_unit_test(limits_the_description),
        cmocka_unit_test(accepts_user_or_global_scope),
        cmocka_unit_test(requires_a_base_image_reference),
        cmocka_unit_test(takes_cpus_above_0_with_two_decimals_or_null),
        cmocka_unit_test(takes_memory_in_mib_or_gib_up_to_1_tib),
        cmocka_unit_test(requires_network_on_or_off_explicitly),
        cmocka_unit_test(refuses_network_on_with_deny_and_no_rules),
        cmocka_unit_test(drops_egress_when_the_network_is_off),
        cmocka_unit_test(limits_env_to_100_variables),
        cmocka_unit_test(requires_shell_identifiers_as_variable_names),
        cmocka_unit_test(requires_unique_variable_names),
        cmocka_unit_test(checks_variable_values_and_the_secret_flag),
        cmocka_unit_test(limits_egress_to_100_rules),
        cmocka_unit_test(normalises_rule_hosts_with_the_policy_parser),
        cmocka_unit_test(requires_uppercase_method_tokens),
        cmocka_unit_test(checks_credential_headers_and_values),
        cmocka_unit_test(agrees_with_the_proxy_on_credentials),
        cmocka_unit_test(requires_slash_separated_repository_paths),
        cmocka_unit_test(limits_repositories_to_1000),
        cmocka_unit_test(reports_every_error_at_once),
        cmocka_unit_test(seals_every_value_on_its_own),
        cmocka_unit_test(stores_empty_env_as_an_empty_array),
        cmocka_unit_test(keeps_a_masked_secret_by_name),
        cmocka_unit_test(refuses_a_mask_with_nothing_stored_to_keep),
        cmocka_unit_test(takes_a_mask_literally_for_non_secrets_but_never_unmasks),
        cmocka_unit_test(refuses_to_keep_values_that_no_longer_open_with_409),
        cmocka_unit_test(keeps_a_credential_without_value_for_the_same_host),
        cmocka_unit_test(stores_the_pull_policy_and_registry_credentials),
        cmocka_unit_test(caps_the_sealed_env_at_32_kib),
        cmocka_unit_test(caps_the_sealed_credentials_at_32_kib),
        cmocka_unit_test(passes_a_sealer_failure_on_and_leaves_the_row_clean),
        cmocka_unit_test(refuses_sealed_text_that_is_not_printable_ascii),
        cmocka_unit_test(stores_egress_the_proxy_accepts),
        cmocka_unit_test(renders_the_api_form_with_secrets_masked),
        cmocka_unit_test(renders_cpus_and_memory_or_null),
        cmocka_unit_test(lists_what_does_not_open_as_undecryptable),
        cmocka_unit_test(renders_list_items_without_values),
        cmocka_unit_test(refuses_to_render_damaged_rows),
        cmocka_unit_test(replaces_a_damaged_row_only_when_nothing_is_kept),
        cmocka_unit_test(round_trips_a_get_body_through_put),
        cmocka_unit_test(renders_errors_as_the_api_shows_them),
        cmocka_unit_test(stops_recording_at_the_error_cap),
        cmocka_unit_test(survives_every_allocation_failure),
        cmocka_unit_test(survives_every_allocation_failure_while_reporting_errors),
    };

    /* jansson allocates through base/mem, so the sweep fails its allocations too. */
    json_set_alloc_funcs(sl_malloc, sl_free);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
