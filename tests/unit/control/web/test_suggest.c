/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/web/test_suggest.c - learn mode's suggestions (control/web/suggest): which
 * audit lines count (the environment's observed allows and its refusals for host, port and
 * method), one rule per host and port with the methods seen, counts and the last time, what the
 * environment allows by now left out, a `*` rule's methods kept in the exact rule that outranks
 * it, hosts grouped by domain, and wildcards only when asked; the rule of one refusal (for each
 * refusal reason, none for the rest, none once allowed, a rule for exactly the host extended)
 * and its sentence (docs/reference/proxy.md §4.5).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/mem.h"
#include "control/web/suggest.h"

#define ENV "5d0c0000-0000-4000-8000-000000000001"

static const char egress[] = "{\"default\":\"deny\",\"rules\":["
                             "{\"host\":\"pkgs.test\",\"methods\":[]},"
                             "{\"host\":\"get-only.test\",\"methods\":[\"GET\"]},"
                             "{\"host\":\"c2.x.com\",\"methods\":[\"GET\"]},"
                             "{\"host\":\"*.cdn.test\",\"methods\":[\"GET\",\"HEAD\"]},"
                             "{\"host\":\"api.test\",\"methods\":[],\"credential\":"
                             "{\"header\":\"A\",\"sealed\":\"x\"}}]}";

/* An audit line as the proxy writes one (the fields suggestions read). */
static json_t *line(const char *env, const char *decision, const char *reason, bool observed,
                    const char *would, const char *method, const char *host, int port,
                    const char *ts)
{
    json_t *j = json_pack("{s:s, s:s, s:s?, s:s?, s:s, s:i, s:s}", "environment", env, "decision",
                          decision, "reason", reason, "method", method, "host", host, "port", port,
                          "ts", ts);

    assert_non_null(j);
    if (observed) {
        assert_int_equal(json_object_set_new(j, "observed", json_true()), 0);
        assert_int_equal(json_object_set_new(j, "would_deny", json_string(would)), 0);
    }
    return j;
}

static bool add(struct sl_suggest *sg, json_t *j)
{
    bool counted = sl_suggest_add(sg, j);

    json_decref(j);
    return counted;
}

static void feed(struct sl_suggest *sg)
{
    /* Newest first. */
    assert_true(add(sg, line(ENV, "allow", NULL, true, "host-not-allowed", "POST", "a.x.com", 443,
                             "2026-11-30T10:00:09Z")));
    assert_true(add(sg, line(ENV, "allow", NULL, true, "host-not-allowed", "GET", "a.x.com", 443,
                             "2026-11-30T10:00:08Z")));
    assert_true(add(sg, line(ENV, "allow", NULL, true, "host-not-allowed", "CONNECT", "a.x.com",
                             443, "2026-11-30T10:00:07Z")));
    assert_true(add(sg, line(ENV, "deny", "host-not-allowed", false, NULL, "GET", "B.x.com", 443,
                             "2026-11-30T10:00:06Z")));
    assert_true(add(sg, line(ENV, "allow", NULL, true, "port-not-allowed", "CONNECT", "c.other.com",
                             8443, "2026-11-30T10:00:05Z")));
    assert_true(add(sg, line(ENV, "allow", NULL, true, "method-not-allowed", "POST",
                             "get-only.test", 443, "2026-11-30T10:00:04Z")));
    assert_true(add(sg, line(ENV, "allow", NULL, true, "method-not-allowed", "POST", "c2.x.com",
                             443, "2026-11-30T10:00:04Z")));
    assert_true(add(sg, line(ENV, "deny", "method-not-allowed", false, NULL, "POST", "img.cdn.test",
                             443, "2026-11-30T10:00:03Z")));
    /* Allowed by now (the rule was added since): counted, not proposed. */
    assert_true(add(sg, line(ENV, "deny", "host-not-allowed", false, NULL, "GET", "pkgs.test", 443,
                             "2026-11-30T10:00:02Z")));
    /* Not for suggestions: another environment, a plain allow, another refusal, a challenge. */
    assert_false(add(sg, line("other", "allow", NULL, true, "host-not-allowed", "GET", "z.test",
                              443, "2026-11-30T10:00:01Z")));
    assert_false(add(sg, line(ENV, "allow", NULL, false, NULL, "GET", "y.test", 443,
                              "2026-11-30T10:00:01Z")));
    assert_false(add(sg, line(ENV, "deny", "credential-needs-tls", false, NULL, "GET", "api.test",
                              80, "2026-11-30T10:00:01Z")));
    assert_false(add(sg, line(ENV, "challenge", "no-identity", false, NULL, "CONNECT", "w.test",
                              443, "2026-11-30T10:00:01Z")));
    assert_false(add(sg, line(ENV, "deny", "host-not-allowed", false, NULL, "GET", "bad host", 443,
                              "2026-11-30T10:00:01Z")));
}

static json_t *render(struct sl_suggest *sg, bool wildcards)
{
    json_t *out = NULL;

    assert_int_equal(sl_suggest_render(sg, wildcards, &out), 0);
    assert_non_null(out);
    return out;
}

static void expect_text(json_t *j, const char *want)
{
    char *got = json_dumps(j, JSON_COMPACT);

    assert_non_null(got);
    if (strcmp(got, want) != 0) {
        fail_msg("\n  got:  %s\n  want: %s", got, want);
    }
    sl_free(got);
}

static void condenses_lines_into_rules(void **state)
{
    struct sl_suggest *sg = NULL;
    json_t *out;

    (void)state;
    assert_int_equal(sl_suggest_create(ENV, egress, &sg), 0);
    feed(sg);
    out = render(sg, false);
    expect_text(out,
                "{\"suggestions\":["
                "{\"rule\":{\"host\":\"c.other.com:8443\",\"methods\":[]},\"count\":1,"
                "\"observed\":1,\"refused\":0,\"last_seen\":\"2026-11-30T10:00:05Z\","
                "\"would_deny\":[\"port-not-allowed\"]},"
                "{\"rule\":{\"host\":\"a.x.com\",\"methods\":[\"GET\",\"POST\"]},\"count\":3,"
                "\"observed\":3,\"refused\":0,\"last_seen\":\"2026-11-30T10:00:09Z\","
                "\"would_deny\":[\"host-not-allowed\"]},"
                "{\"rule\":{\"host\":\"b.x.com\",\"methods\":[\"GET\"]},\"count\":1,"
                "\"observed\":0,\"refused\":1,\"last_seen\":\"2026-11-30T10:00:06Z\","
                "\"would_deny\":[\"host-not-allowed\"]},"
                "{\"rule\":{\"host\":\"c2.x.com\",\"methods\":[\"POST\"]},\"count\":1,"
                "\"observed\":1,\"refused\":0,\"last_seen\":\"2026-11-30T10:00:04Z\","
                "\"would_deny\":[\"method-not-allowed\"]},"
                "{\"rule\":{\"host\":\"img.cdn.test\",\"methods\":[\"GET\",\"HEAD\",\"POST\"]},"
                "\"count\":1,\"observed\":0,\"refused\":1,\"last_seen\":\"2026-11-30T10:00:03Z\","
                "\"would_deny\":[\"method-not-allowed\"]},"
                "{\"rule\":{\"host\":\"get-only.test\",\"methods\":[\"POST\"]},\"count\":1,"
                "\"observed\":1,\"refused\":0,\"last_seen\":\"2026-11-30T10:00:04Z\","
                "\"would_deny\":[\"method-not-allowed\"]}],"
                "\"lines\":9,\"left_out\":0}");
    json_decref(out);
    sl_suggest_destroy(sg);
}

static void groups_subdomains_only_when_asked(void **state)
{
    struct sl_suggest *sg = NULL;
    json_t *out;
    json_t *first;

    (void)state;
    assert_int_equal(sl_suggest_create(ENV, egress, &sg), 0);
    feed(sg);
    out = render(sg, true);
    first = json_array_get(json_object_get(out, "suggestions"), 1);
    expect_text(first,
                "{\"rule\":{\"host\":\"*.x.com\",\"methods\":[\"GET\",\"POST\"]},"
                "\"count\":4,\"observed\":3,\"refused\":1,"
                "\"last_seen\":\"2026-11-30T10:00:09Z\","
                "\"would_deny\":[\"host-not-allowed\"],\"hosts\":[\"a.x.com\",\"b.x.com\"]}");
    /* A host its own exact rule decides stays out of the wildcard (that rule would outrank it);
     * one host of a domain stays exact; never *.test for the hosts of a one-label domain. */
    expect_text(json_object_get(json_array_get(json_object_get(out, "suggestions"), 2), "rule"),
                "{\"host\":\"c2.x.com\",\"methods\":[\"POST\"]}");
    assert_int_equal(json_array_size(json_object_get(out, "suggestions")), 5);
    expect_text(json_object_get(json_array_get(json_object_get(out, "suggestions"), 3), "rule"),
                "{\"host\":\"img.cdn.test\",\"methods\":[\"GET\",\"HEAD\",\"POST\"]}");
    json_decref(out);
    sl_suggest_destroy(sg);
}

/* No egress (network off), or a damaged one: nothing is allowed, everything seen is proposed. */
static void without_rules_everything_seen_is_proposed(void **state)
{
    struct sl_suggest *sg = NULL;
    json_t *out;

    (void)state;
    assert_int_equal(sl_suggest_create(ENV, "not json", &sg), 0);
    feed(sg);
    out = render(sg, false);
    assert_int_equal(json_array_size(json_object_get(out, "suggestions")), 7);
    json_decref(out);
    sl_suggest_destroy(sg);
    assert_int_equal(sl_suggest_create(ENV, NULL, &sg), 0);
    out = render(sg, true);
    expect_text(out, "{\"suggestions\":[],\"lines\":0,\"left_out\":0}");
    json_decref(out);
    sl_suggest_destroy(sg);
}

static void bounds_the_hosts_it_tracks(void **state)
{
    struct sl_suggest *sg = NULL;
    json_t *out;
    char host[64];

    (void)state;
    assert_int_equal(sl_suggest_create(ENV, NULL, &sg), 0);
    for (int i = 0; i < SL_SUGGEST_HOSTS_MAX + 5; i++) {
        (void)snprintf(host, sizeof(host), "h%d.test", i);
        (void)add(sg, line(ENV, "deny", "host-not-allowed", false, NULL, "GET", host, 443,
                           "2026-11-30T10:00:00Z"));
    }
    out = render(sg, false);
    assert_int_equal(json_array_size(json_object_get(out, "suggestions")), SL_SUGGEST_HOSTS_MAX);
    assert_int_equal(json_integer_value(json_object_get(out, "left_out")), 5);
    json_decref(out);
    sl_suggest_destroy(sg);
}

/* ---- the rule of one refusal and its sentence ---------------------------------------------- */

/* The suggestion of the line `text` in environment `env` whose egress is `egr`, as JSON text and
 * as the sentence for the name `name` ("" when none). */
static void expect_one(const char *egr, const char *text, const char *want_json, const char *name,
                       const char *want_sentence)
{
    struct sl_suggest *sg = NULL;
    json_t *l = json_loads(text, 0, NULL);
    json_t *s = NULL;
    char out[512];
    int n;

    assert_non_null(l);
    assert_int_equal(sl_suggest_create("ci", egr, &sg), 0);
    assert_int_equal(sl_suggest_line(sg, l, &s), 0);
    if (want_json == NULL) {
        assert_null(s);
    } else {
        assert_non_null(s);
        expect_text(s, want_json);
        n = sl_suggest_sentence(s, name, out, sizeof(out));
        assert_string_equal(out, want_sentence);
        assert_int_equal(n, (int)strlen(want_sentence));
    }
    json_decref(s);
    json_decref(l);
    sl_suggest_destroy(sg);
}

static const char ci_egress[] = "{\"default\":\"deny\",\"rules\":["
                                "{\"host\":\"api.example.com\",\"methods\":[\"GET\"]},"
                                "{\"host\":\"*.example.com\",\"methods\":[\"GET\"]},"
                                "{\"host\":\"pkgs.example.org\"}]}";

static void one_refusal_gets_the_rule_that_allows_it(void **state)
{
    (void)state;
    expect_one(NULL,
               "{\"decision\":\"deny\",\"reason\":\"host-not-allowed\",\"environment\":"
               "\"ci\",\"method\":\"POST\",\"host\":\"api.github.com\",\"port\":443}",
               "{\"rule\":{\"host\":\"api.github.com\",\"methods\":[\"POST\"]}}", "ci-python",
               "to allow it, add {\"host\":\"api.github.com\",\"methods\":[\"POST\"]} to "
               "environment ci-python");
    /* A port other than 80/443 goes into the host. */
    expect_one(ci_egress,
               "{\"decision\":\"deny\",\"reason\":\"port-not-allowed\",\"environment\":"
               "\"ci\",\"method\":\"GET\",\"host\":\"pkgs.example.org\",\"port\":8080}",
               "{\"rule\":{\"host\":\"pkgs.example.org:8080\",\"methods\":[\"GET\"]}}", "ci",
               "to allow it, add {\"host\":\"pkgs.example.org:8080\",\"methods\":[\"GET\"]} to "
               "environment ci");
    /* A refused tunnel: a rule for the host, every method. */
    expect_one(NULL,
               "{\"decision\":\"deny\",\"reason\":\"host-not-allowed\",\"environment\":"
               "\"ci\",\"method\":\"CONNECT\",\"host\":\"evil.example\",\"port\":443}",
               "{\"rule\":{\"host\":\"evil.example\"}}", "ci",
               "to allow it, add {\"host\":\"evil.example\"} to environment ci");
    expect_one(NULL,
               "{\"decision\":\"deny\",\"reason\":\"host-not-allowed\",\"environment\":"
               "\"ci\",\"method\":null,\"host\":\"evil.example\",\"port\":443}",
               "{\"rule\":{\"host\":\"evil.example\"}}", "ci",
               "to allow it, add {\"host\":\"evil.example\"} to environment ci");
}

static void a_refused_method_extends_the_rule_for_exactly_its_host(void **state)
{
    (void)state;
    /* The rule is for exactly this host: applying adds the method to it. */
    expect_one(ci_egress,
               "{\"decision\":\"deny\",\"reason\":\"method-not-allowed\",\"environment\":"
               "\"ci\",\"method\":\"DELETE\",\"host\":\"api.example.com\",\"port\":443,"
               "\"rule\":\"api.example.com\"}",
               "{\"rule\":{\"host\":\"api.example.com\",\"methods\":[\"DELETE\"]},"
               "\"extends\":\"api.example.com\"}",
               "ci",
               "to allow it, add \"DELETE\" to the methods of {\"host\":\"api.example.com\"} in "
               "environment ci");
    /* A wildcard rule refused it: an exact rule, which outranks the wildcard for this host, keeps
     * the wildcard's methods. */
    expect_one(ci_egress,
               "{\"decision\":\"deny\",\"reason\":\"method-not-allowed\",\"environment\":"
               "\"ci\",\"method\":\"PUT\",\"host\":\"a.example.com\",\"port\":443,"
               "\"rule\":\"*.example.com\"}",
               "{\"rule\":{\"host\":\"a.example.com\",\"methods\":[\"GET\",\"PUT\"]}}", "ci",
               "to allow it, add {\"host\":\"a.example.com\",\"methods\":[\"GET\",\"PUT\"]} "
               "to environment ci");
}

static void no_rule_for_other_lines(void **state)
{
    static const char *const lines[] = {
        /* Allowed now: the environment has a rule for it by now. */
        "{\"decision\":\"deny\",\"reason\":\"host-not-allowed\",\"environment\":\"ci\","
        "\"method\":\"GET\",\"host\":\"pkgs.example.org\",\"port\":443}",
        "{\"decision\":\"allow\",\"reason\":null,\"environment\":\"ci\",\"method\":"
        "\"GET\",\"host\":\"a.example\",\"port\":443}",
        "{\"decision\":\"deny\",\"reason\":\"no-identity\",\"environment\":null,"
        "\"method\":\"GET\",\"host\":\"a.example\",\"port\":443}",
        /* A challenge, even one that names an environment and a reason a rule could answer. */
        "{\"decision\":\"challenge\",\"reason\":\"host-not-allowed\",\"environment\":\"ci\","
        "\"method\":\"GET\",\"host\":\"a.example\",\"port\":443}",
        "{\"decision\":\"deny\",\"reason\":\"private-address\",\"environment\":\"ci\","
        "\"method\":\"GET\",\"host\":\"a.example\",\"port\":443}",
        /* Another environment's line. */
        "{\"decision\":\"deny\",\"reason\":\"host-not-allowed\",\"environment\":\"cd\","
        "\"method\":\"GET\",\"host\":\"a.example\",\"port\":443}",
        /* Hostile values are not echoed into a rule. */
        "{\"decision\":\"deny\",\"reason\":\"host-not-allowed\",\"environment\":\"ci\","
        "\"method\":\"GET\",\"host\":\"a\\\"b.example\",\"port\":443}",
        "{\"decision\":\"deny\",\"reason\":\"host-not-allowed\",\"environment\":\"ci\","
        "\"method\":\"G\\\"ET\",\"host\":\"a.example\",\"port\":443}",
        "{\"decision\":\"deny\",\"reason\":\"host-not-allowed\",\"environment\":\"ci\","
        "\"method\":\"GET\",\"host\":\"a.example\",\"port\":70000}",
        /* A refused tunnel to a host a rule lets tunnels to has no method to add. */
        "{\"decision\":\"deny\",\"reason\":\"method-not-allowed\",\"environment\":\"ci\","
        "\"method\":\"CONNECT\",\"host\":\"api.example.com\",\"port\":443}",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        expect_one(ci_egress, lines[i], NULL, NULL, NULL);
    }
}

static void the_sentence_refuses_a_bad_name_and_a_small_buffer(void **state)
{
    json_t *s = json_loads("{\"rule\":{\"host\":\"a.example\",\"methods\":[\"GET\"]}}", 0, NULL);
    char out[256];

    (void)state;
    assert_non_null(s);
    assert_int_equal(sl_suggest_sentence(s, "w\"eb", out, sizeof(out)), 0);
    assert_string_equal(out, "");
    assert_int_equal(sl_suggest_sentence(s, "c\ni", out, sizeof(out)), 0);
    assert_int_equal(sl_suggest_sentence(s, NULL, out, sizeof(out)), 0);
    assert_int_equal(sl_suggest_sentence(s, "web", out, 16), SL_ETOOBIG);
    assert_string_equal(out, "");
    assert_int_equal(sl_suggest_sentence(NULL, "web", out, sizeof(out)), 0);
    json_decref(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(condenses_lines_into_rules),
        cmocka_unit_test(groups_subdomains_only_when_asked),
        cmocka_unit_test(without_rules_everything_seen_is_proposed),
        cmocka_unit_test(bounds_the_hosts_it_tracks),
        cmocka_unit_test(one_refusal_gets_the_rule_that_allows_it),
        cmocka_unit_test(a_refused_method_extends_the_rule_for_exactly_its_host),
        cmocka_unit_test(no_rule_for_other_lines),
        cmocka_unit_test(the_sentence_refuses_a_bad_name_and_a_small_buffer),
    };

    json_set_alloc_funcs(sl_malloc, sl_free);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
