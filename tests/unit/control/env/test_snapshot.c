/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/env/test_snapshot.c - the snapshot compiler (control/env/snapshot): a database
 * of environments and static clients becomes a document the proxy's own parser accepts, and the
 * proxy's decision on it gives a static client its environment's rules with the opened
 * credential. Values that do not open drop their rule or client (reported, never half-injected),
 * extra (sandbox) clients are included with their git access, and damage fails closed for the
 * damaged row alone: an environment the proxy would refuse compiles as deny-all, a client is
 * left out, both reported, and the rest is built.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/slice.h"
#include "control/env/environment.h"
#include "control/env/snapshot.h"
#include "control/store/model.h"
#include "control/store/secrets.h"
#include "control/store/store.h"
#include "policy/decision.h"
#include "policy/host.h"
#include "policy/snapshot.h"
#include "tests/support/tmpdir.h"

/* Two different keys: values sealed under OTHER_KEY do not open under KEY. */
#define KEY       "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
#define OTHER_KEY "HxwdHh8AAQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRo="

struct fixture {
    char dir[64];
    char path[PATH_MAX];
    struct sl_store *st;
    struct sl_secrets *sec;
    struct sl_secrets *other;
    struct sl_buf out;
    struct sl_snapshot_build_report report;
    struct sl_snapshot *snap;
};

static int setup(void **state)
{
    struct fixture *f = sl_calloc(1, sizeof(*f));
    char err[256] = "";

    assert_non_null(f);
    assert_int_equal(sl_test_tmpdir(f->dir, sizeof(f->dir), "sl-snap"), 0);
    assert_int_equal(sl_test_join(f->path, sizeof(f->path), f->dir, "sluice.db"), 0);
    assert_int_equal(sl_store_open(f->path, &f->st, err, sizeof(err)), 0);
    assert_int_equal(sl_secrets_create_from_base64(KEY, &f->sec, err, sizeof(err)), 0);
    assert_int_equal(sl_secrets_create_from_base64(OTHER_KEY, &f->other, err, sizeof(err)), 0);
    sl_buf_init(&f->out, SL_SNAPSHOT_MAX_BYTES);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    sl_snapshot_unref(f->snap);
    sl_snapshot_build_report_finish(&f->report);
    sl_buf_finish(&f->out);
    sl_secrets_destroy(f->sec);
    sl_secrets_destroy(f->other);
    sl_store_close(f->st);
    assert_int_equal(sl_test_rmtree(f->dir), 0);
    sl_free(f);
    return 0;
}

/* ---- the sealer adapter over control/store/secrets ---- */

/* The sealer's `arg`: the key to seal with (the callbacks take a non-const pointer). */
struct key_ref {
    const struct sl_secrets *sec;
};

static int seal_with(void *arg, const void *p, size_t n, struct sl_buf *out)
{
    const struct key_ref *k = arg;

    return sl_secrets_seal(k->sec, p, n, out);
}

static int open_with(void *arg, const char *sealed, size_t n, struct sl_buf *out)
{
    const struct key_ref *k = arg;

    return sl_secrets_open(k->sec, sealed, n, out);
}

/* Stores the environment of API body `body`, sealed with `key`; its id goes to `id`. The
 * environment is global unless `owner_id` is given. */
static void add_env(struct fixture *f, const struct sl_secrets *key, const char *owner_id,
                    const char *body, char id[SL_UUID_LEN + 1])
{
    struct key_ref k = { .sec = key };
    struct sl_env_sealer sealer = { .seal = seal_with, .open = open_with, .arg = &k };
    struct sl_env_errors errs = { 0 };
    struct sl_env_spec spec = { 0 };
    struct sl_env_row row = { 0 };

    if (sl_env_spec_parse(body, strlen(body), &spec, &errs) != 0) {
        fail_msg("spec: %s %s", errs.message, errs.count > 0 ? errs.items[0].message : "");
    }
    assert_int_equal(sl_env_spec_to_row(&spec, NULL, &sealer, &row, &errs), 0);
    if (owner_id != NULL) {
        memcpy(row.owner_id, owner_id, SL_UUID_LEN + 1);
    }
    assert_int_equal(sl_store_env_insert(f->st, &row, NULL), 0);
    memcpy(id, row.id, SL_UUID_LEN + 1);
    sl_env_row_finish(&row);
    sl_env_spec_finish(&spec);
    sl_env_errors_finish(&errs);
}

/* Stores a static client; `token` (plaintext, may be NULL) is sealed with `key`. */
static void add_client(struct fixture *f, const struct sl_secrets *key, const char *id,
                       const char *env_id, const char *ip, const char *cidr, const char *token)
{
    struct sl_store_client c = { 0 };
    struct sl_buf sealed;

    sl_buf_init(&sealed, 4096);
    if (token != NULL) {
        assert_int_equal(sl_secrets_seal(key, token, strlen(token), &sealed), 0);
        c.token_sealed = sl_strdup(sl_buf_cstr(&sealed));
        assert_non_null(c.token_sealed);
    }
    c.id = sl_strdup(id);
    c.ip = ip != NULL ? sl_strdup(ip) : NULL;
    c.cidr = cidr != NULL ? sl_strdup(cidr) : NULL;
    memcpy(c.env_id, env_id, SL_UUID_LEN + 1);
    assert_int_equal(sl_store_client_create(f->st, &c), 0);
    sl_store_client_finish(&c);
    sl_buf_finish(&sealed);
}

/* The last build's report counts: environments, clients, rules, credentials, drops. */
static void expect_counts(const struct fixture *f, size_t envs, size_t clients, size_t rules,
                          size_t credentials, size_t drops)
{
    assert_int_equal(f->report.n_envs, envs);
    assert_int_equal(f->report.n_clients, clients);
    assert_int_equal(f->report.n_rules, rules);
    assert_int_equal(f->report.n_credentials, credentials);
    assert_int_equal(f->report.n_drops, drops);
}

/* Builds with `extra`, checks that the proxy's parser takes the document and keeps it in
 * f->snap. */
static void build_ok(struct fixture *f, int64_t version,
                     const struct sl_snapshot_build_client *extra, size_t n_extra)
{
    struct sl_policy_errors errs = { 0 };
    int rc = sl_control_snapshot_build_with_clients(f->st, f->sec, version, extra, n_extra, &f->out,
                                                    &f->report);

    if (rc != 0) {
        fail_msg("build: %s", sl_strerror(rc));
    }
    sl_snapshot_unref(f->snap);
    f->snap = NULL;
    rc = sl_snapshot_parse(f->out.p, f->out.len, &f->snap, &errs);
    if (rc != 0) {
        fail_msg("parse: %s at %s: %s", sl_strerror(rc), errs.count > 0 ? errs.items[0].path : "",
                 errs.count > 0 ? errs.items[0].message : "");
    }
    assert_int_equal(sl_snapshot_version(f->snap), version);
    sl_policy_errors_finish(&errs);
}

static const struct sl_client *by_address(struct fixture *f, const char *ip)
{
    struct sockaddr_in sin = { .sin_family = AF_INET };

    assert_int_equal(inet_pton(AF_INET, ip, &sin.sin_addr), 1);
    return sl_policy_identify(f->snap, NULL, NULL, (const struct sockaddr *)&sin);
}

/* Decides `method` on https://host for client `c` (NULL method = a CONNECT). */
static void decide(struct fixture *f, const struct sl_client *c, const char *host,
                   const char *method, struct sl_decision *d)
{
    struct sl_host h;
    struct sl_request_view req = { .host = &h, .port = 443, .method = method, .tls = true };

    assert_int_equal(sl_host_normalize(sl_slice_str(host), 0, &h, NULL), 0);
    sl_policy_decide(f->snap, c, &req, 0, d);
}

static const char *const CI_BODY =
        "{\"name\":\"ci\",\"scope\":\"global\",\"base_image\":\"debian:12\",\"network\":\"on\","
        "\"egress\":{\"default\":\"deny\",\"rules\":["
        "{\"host\":\"pkgs.example.org\"},"
        "{\"host\":\"api.example.com\",\"methods\":[\"GET\"],"
        "\"credential\":{\"header\":\"Authorization\",\"value\":\"Bearer s3cr3t\"}}]}}";

/* ---- tests ---- */

static void empty_database_gives_a_valid_snapshot_without_environments_or_clients(void **state)
{
    struct fixture *f = *state;

    build_ok(f, 1, NULL, 0);
    assert_string_equal(sl_buf_cstr(&f->out), "{\"version\":1,\"environments\":{},\"clients\":[]}");
    assert_int_equal(sl_snapshot_env_count(f->snap), 0);
    assert_int_equal(sl_snapshot_client_count(f->snap), 0);
    assert_int_equal(f->report.n_envs, 0);
    assert_int_equal(f->report.n_drops, 0);
}

static void static_client_gets_its_environments_rules_with_the_opened_credential(void **state)
{
    struct fixture *f = *state;
    char ci[SL_UUID_LEN + 1];
    struct sl_decision d;
    const struct sl_client *c;

    add_env(f, f->sec, NULL, CI_BODY, ci);
    add_client(f, f->sec, "runners", ci, NULL, "10.20.0.0/16", NULL);
    add_client(f, f->sec, "builder", ci, "10.30.0.5", NULL, NULL);
    add_client(f, f->sec, "laptop", ci, NULL, NULL, "pt_laptop-token");
    build_ok(f, 7, NULL, 0);
    assert_non_null(sl_snapshot_find_env(f->snap, ci));
    assert_int_equal(sl_snapshot_client_count(f->snap), 3);
    expect_counts(f, 1, 3, 2, 1, 0);

    c = by_address(f, "10.20.7.9");
    assert_non_null(c);
    assert_string_equal(sl_client_id(c), "runners");
    assert_string_equal(sl_env_name(sl_client_env(c)), ci);
    decide(f, c, "api.example.com", "GET", &d);
    assert_true(d.allow);
    assert_string_equal(d.credential_header, "Authorization");
    assert_string_equal(d.credential_value, "Bearer s3cr3t");
    decide(f, c, "api.example.com", "POST", &d);
    assert_int_equal(d.reason, SL_REASON_METHOD_NOT_ALLOWED);
    decide(f, c, "pkgs.example.org", "POST", &d);
    assert_true(d.allow);
    assert_null(d.credential_value);
    decide(f, c, "other.example.org", "GET", &d);
    assert_int_equal(d.reason, SL_REASON_HOST_NOT_ALLOWED);

    c = by_address(f, "10.30.0.5");
    assert_non_null(c);
    assert_string_equal(sl_client_id(c), "builder");
    assert_null(by_address(f, "10.30.0.6"));

    c = sl_policy_identify(f->snap, "laptop", "pt_laptop-token", NULL);
    assert_non_null(c);
    assert_true(sl_client_has_token(c));
    assert_null(sl_policy_identify(f->snap, "laptop", "pt_wrong", NULL));
    /* The document carries opened values, never sealed ones. */
    assert_non_null(strstr(sl_buf_cstr(&f->out), "\"token\":\"pt_laptop-token\""));
    assert_non_null(strstr(sl_buf_cstr(&f->out), "\"value\":\"Bearer s3cr3t\""));
}

static void network_off_lets_nothing_out_and_allow_default_is_kept(void **state)
{
    struct fixture *f = *state;
    char off[SL_UUID_LEN + 1];
    char open[SL_UUID_LEN + 1];
    char expect[128];
    struct sl_decision d;

    add_env(f, f->sec, NULL,
            "{\"name\":\"offline\",\"scope\":\"global\",\"base_image\":\"debian:12\","
            "\"network\":\"off\"}",
            off);
    add_env(f, f->sec, NULL,
            "{\"name\":\"open\",\"scope\":\"global\",\"base_image\":\"debian:12\","
            "\"network\":\"on\",\"egress\":{\"default\":\"allow\",\"rules\":[]}}",
            open);
    add_client(f, f->sec, "off-host", off, "10.0.0.1", NULL, NULL);
    add_client(f, f->sec, "open-host", open, "10.0.0.2", NULL, NULL);
    build_ok(f, 3, NULL, 0);

    (void)snprintf(expect, sizeof(expect),
                   "\"%s\":{\"default\":\"deny\",\"rules\":[],\"label\":\"offline\"}", off);
    assert_non_null(strstr(sl_buf_cstr(&f->out), expect));
    assert_false(sl_env_default_allows(sl_snapshot_find_env(f->snap, off)));
    decide(f, by_address(f, "10.0.0.1"), "pkgs.example.org", "GET", &d);
    assert_false(d.allow);
    assert_int_equal(d.reason, SL_REASON_HOST_NOT_ALLOWED);

    assert_true(sl_env_default_allows(sl_snapshot_find_env(f->snap, open)));
    decide(f, by_address(f, "10.0.0.2"), "pkgs.example.org", "GET", &d);
    assert_true(d.allow);
}

static void same_name_in_two_scopes_gives_two_environments_keyed_by_id(void **state)
{
    struct fixture *f = *state;
    struct sl_user alice = { 0 };
    char mine[SL_UUID_LEN + 1];
    char global[SL_UUID_LEN + 1];

    assert_int_equal(sl_store_user_create(f->st, "alice", false, NULL, &alice), 0);
    add_env(f, f->sec, NULL, CI_BODY, global);
    add_env(f, f->sec, alice.id,
            "{\"name\":\"ci\",\"base_image\":\"debian:12\",\"network\":\"off\"}", mine);
    build_ok(f, 2, NULL, 0);
    assert_int_equal(sl_snapshot_env_count(f->snap), 2);
    assert_true(sl_env_default_allows(sl_snapshot_find_env(f->snap, mine)) == false);
    assert_non_null(sl_snapshot_find_env(f->snap, global));
    assert_null(sl_snapshot_find_env(f->snap, "ci"));
    /* Both are labelled with their name: refusals say "environment ci". */
    assert_string_equal(sl_env_label(sl_snapshot_find_env(f->snap, mine)), "ci");
    assert_string_equal(sl_env_label(sl_snapshot_find_env(f->snap, global)), "ci");
    sl_user_finish(&alice);
}

static void credential_under_another_key_drops_its_rule_and_is_reported(void **state)
{
    struct fixture *f = *state;
    char ci[SL_UUID_LEN + 1];
    struct sl_decision d;
    const struct sl_client *c;

    add_env(f, f->other, NULL, CI_BODY, ci);
    add_client(f, f->sec, "runners", ci, NULL, "10.20.0.0/16", NULL);
    add_client(f, f->other, "laptop", ci, NULL, NULL, "pt_laptop-token");
    build_ok(f, 4, NULL, 0);

    expect_counts(f, 1, 1, 1, 0, 2);
    assert_int_equal(f->report.drops[0].kind, SL_SNAPSHOT_DROP_RULE);
    assert_string_equal(f->report.drops[0].env_id, ci);
    assert_string_equal(f->report.drops[0].env_name, "ci");
    assert_string_equal(f->report.drops[0].subject, "api.example.com");
    assert_int_equal(f->report.drops[1].kind, SL_SNAPSHOT_DROP_CLIENT);
    assert_string_equal(f->report.drops[1].env_id, ci);
    assert_string_equal(f->report.drops[1].subject, "laptop");

    /* The whole rule is gone: no uncredentialed allow, no half credential. */
    c = by_address(f, "10.20.0.1");
    decide(f, c, "api.example.com", "GET", &d);
    assert_false(d.allow);
    assert_int_equal(d.reason, SL_REASON_HOST_NOT_ALLOWED);
    decide(f, c, "pkgs.example.org", "GET", &d);
    assert_true(d.allow);
    assert_null(sl_snapshot_find_client(f->snap, "laptop"));
    assert_null(strstr(sl_buf_cstr(&f->out), "credential"));
    assert_null(strstr(sl_buf_cstr(&f->out), "token"));
}

static void extra_clients_are_included_with_their_runtime_rules(void **state)
{
    struct fixture *f = *state;
    char ci[SL_UUID_LEN + 1];
    static const char *const get_only[] = { "GET" };
    const struct sl_snapshot_build_rule git = { .host = "git.example.com",
                                                .methods = get_only,
                                                .n_methods = 1,
                                                .header = "Authorization",
                                                .value = "Basic Z2l0OnRva2Vu" };
    struct sl_snapshot_build_client extra[] = {
        { .id = "sb_4f2a",
          .env_id = ci,
          .token = "pt_sandbox",
          .ip = "10.213.0.5",
          .expires_at = "2099-11-30T23:00:00Z",
          .rules = &git,
          .n_rules = 1 },
        { .id = "sb_bench", .env_id = ci, .cidr = "127.0.0.0/8" },
    };
    struct sockaddr_in sin = { .sin_family = AF_INET };
    const struct sl_client *c;
    struct sl_decision d;
    int64_t at_s;

    add_env(f, f->sec, NULL, CI_BODY, ci);
    add_client(f, f->sec, "runners", ci, NULL, "10.20.0.0/16", NULL);
    build_ok(f, 9, extra, SL_ARRAY_LEN(extra));
    assert_int_equal(sl_snapshot_client_count(f->snap), 3);
    assert_int_equal(f->report.n_clients, 3);
    assert_int_equal(f->report.n_rules, 3);
    assert_int_equal(f->report.n_credentials, 2);

    assert_int_equal(inet_pton(AF_INET, "10.213.0.5", &sin.sin_addr), 1);
    c = sl_policy_identify(f->snap, "sb_4f2a", "pt_sandbox", (const struct sockaddr *)&sin);
    assert_non_null(c);
    assert_true(sl_client_expiry(c, &at_s));
    decide(f, c, "git.example.com", "GET", &d);
    assert_true(d.allow);
    assert_string_equal(d.credential_value, "Basic Z2l0OnRva2Vu");
    decide(f, c, "git.example.com", "POST", &d);
    assert_int_equal(d.reason, SL_REASON_METHOD_NOT_ALLOWED);
    decide(f, c, "api.example.com", "GET", &d);
    assert_string_equal(d.credential_value, "Bearer s3cr3t");

    c = by_address(f, "127.0.0.1");
    assert_non_null(c);
    assert_string_equal(sl_client_id(c), "sb_bench");
    /* The runtime rule is the sandbox's alone. */
    decide(f, by_address(f, "10.20.0.1"), "git.example.com", "GET", &d);
    assert_int_equal(d.reason, SL_REASON_HOST_NOT_ALLOWED);
}

/* A sandbox whose environment was deleted keeps its identity but reaches nothing but its own
 * runtime rules; the rest of the policy is still built. A client without id or environment
 * fails the build. */
static void extra_client_of_an_unknown_environment_gets_no_egress(void **state)
{
    struct fixture *f = *state;
    const struct sl_snapshot_build_rule git = { .host = "git.example.com" };
    const struct sl_snapshot_build_client extra[] = {
        { .id = "sb_1",
          .env_id = "no-such-environment",
          .ip = "10.0.0.1",
          .rules = &git,
          .n_rules = 1 },
        { .id = "sb_2", .env_id = SL_SNAPSHOT_OFFLINE_ENV, .ip = "10.0.0.2" },
    };
    const struct sl_snapshot_build_client no_env[] = {
        { .id = "sb_1", .env_id = NULL, .ip = "10.0.0.1" },
    };
    struct sl_decision d;
    char ci[SL_UUID_LEN + 1];

    add_env(f, f->sec, NULL, CI_BODY, ci);
    build_ok(f, 1, extra, SL_ARRAY_LEN(extra));
    assert_non_null(strstr(sl_buf_cstr(&f->out), "\"" SL_SNAPSHOT_OFFLINE_ENV "\""));
    decide(f, by_address(f, "10.0.0.1"), "pypi.org", "GET", &d);
    assert_int_equal(d.reason, SL_REASON_HOST_NOT_ALLOWED);
    decide(f, by_address(f, "10.0.0.1"), "git.example.com", "GET", &d);
    assert_true(d.allow);
    decide(f, by_address(f, "10.0.0.2"), "git.example.com", "GET", &d);
    assert_false(d.allow);
    assert_int_equal(sl_control_snapshot_build_with_clients(f->st, f->sec, 2, no_env, 1, &f->out,
                                                            &f->report),
                     SL_EINVAL);
    assert_int_equal(f->out.len, 0);
}

/* A client the proxy would refuse on its own (an id taken twice, a block with host bits set,
 * written behind the API's back) is left out and reported; everything else goes out. */
static void clients_the_proxy_would_refuse_are_left_out_and_reported(void **state)
{
    struct fixture *f = *state;
    char ci[SL_UUID_LEN + 1];
    const struct sl_snapshot_build_client extra[] = {
        { .id = "runners", .env_id = ci, .ip = "10.0.0.1" },
        { .id = "sb_ok", .env_id = ci, .ip = "10.0.0.2" },
    };

    add_env(f, f->sec, NULL, CI_BODY, ci);
    add_client(f, f->sec, "runners", ci, NULL, "10.20.0.0/16", NULL);
    add_client(f, f->sec, "sloppy", ci, NULL, "10.30.0.1/16", NULL);
    build_ok(f, 1, extra, SL_ARRAY_LEN(extra));
    assert_int_equal(sl_snapshot_client_count(f->snap), 2);
    assert_int_equal(f->report.n_clients, 2);
    assert_int_equal(f->report.n_drops, 2);
    assert_int_equal(f->report.drops[0].kind, SL_SNAPSHOT_DROP_CLIENT_INVALID);
    assert_string_equal(f->report.drops[0].subject, "sloppy");
    assert_non_null(strstr(f->report.drops[0].message, "has host bits set"));
    assert_int_equal(f->report.drops[1].kind, SL_SNAPSHOT_DROP_CLIENT_INVALID);
    assert_string_equal(f->report.drops[1].subject, "runners");
    assert_non_null(by_address(f, "10.0.0.2"));
    assert_null(by_address(f, "10.0.0.1"));
}

/* Writes a row straight to the store, as a damaged or hand-edited database would hold it. */
static void add_raw_env(struct fixture *f, const char *name, const char *egress_json,
                        char id[SL_UUID_LEN + 1])
{
    struct sl_env_row row = { 0 };

    row.name = sl_strdup(name);
    row.description = sl_strdup("");
    row.scope = SL_SCOPE_GLOBAL;
    row.base_image = sl_strdup("debian:12");
    row.cpus_centi = -1;
    row.memory_bytes = -1;
    row.network = true;
    row.env_json = sl_strdup("[]");
    row.egress_json = egress_json != NULL ? sl_strdup(egress_json) : NULL;
    assert_int_equal(sl_store_env_insert(f->st, &row, NULL), 0);
    memcpy(id, row.id, SL_UUID_LEN + 1);
    sl_env_row_finish(&row);
}

static void damaged_egress_compiles_as_deny_and_is_reported(void **state)
{
    struct fixture *f = *state;
    char bad[SL_UUID_LEN + 1];
    char unknown[SL_UUID_LEN + 1];
    struct sl_decision d;

    add_raw_env(f, "bad \"quoted\"\nname", "{\"default\":\"allow\",\"rules\":[{\"host\":1}]}", bad);
    add_raw_env(f, "odd", "{\"default\":\"maybe\",\"rules\":[]}", unknown);
    add_client(f, f->sec, "host", bad, "10.0.0.1", NULL, NULL);
    build_ok(f, 5, NULL, 0);
    assert_int_equal(f->report.n_drops, 2);
    assert_int_equal(f->report.drops[0].kind, SL_SNAPSHOT_DROP_EGRESS);
    assert_null(f->report.drops[0].subject);
    assert_false(sl_env_default_allows(sl_snapshot_find_env(f->snap, bad)));
    assert_false(sl_env_default_allows(sl_snapshot_find_env(f->snap, unknown)));
    decide(f, by_address(f, "10.0.0.1"), "pkgs.example.org", "GET", &d);
    assert_false(d.allow);
}

static void passthrough_rules_compile_into_the_snapshot(void **state)
{
    struct fixture *f = *state;
    char pin[SL_UUID_LEN + 1];
    char odd[SL_UUID_LEN + 1];
    struct sl_decision d;
    const struct sl_client *c;

    add_env(f, f->sec, NULL,
            "{\"name\":\"pinned\",\"scope\":\"global\",\"base_image\":\"debian:12\","
            "\"network\":\"on\",\"egress\":{\"default\":\"deny\",\"rules\":["
            "{\"host\":\"pinned.example.com\",\"tls\":\"passthrough\",\"methods\":[]},"
            "{\"host\":\"pkgs.example.org\",\"tls\":\"intercept\"}]}}",
            pin);
    /* Stored by hand: a passthrough rule with a credential is damaged, never compiled. */
    add_raw_env(f, "odd",
                "{\"default\":\"allow\",\"rules\":[{\"host\":\"a.com\",\"methods\":[],"
                "\"tls\":\"passthrough\",\"credential\":{\"header\":\"X\",\"sealed\":\"x\"}}]}",
                odd);
    add_client(f, f->sec, "host", pin, "10.0.0.1", NULL, NULL);
    build_ok(f, 2, NULL, 0);
    assert_non_null(strstr(sl_buf_cstr(&f->out),
                           "{\"host\":\"pinned.example.com\",\"tls\":\"passthrough\"}"));
    assert_non_null(strstr(sl_buf_cstr(&f->out), "{\"host\":\"pkgs.example.org\"}"));
    assert_int_equal(f->report.n_drops, 1);
    assert_int_equal(f->report.drops[0].kind, SL_SNAPSHOT_DROP_EGRESS);
    c = by_address(f, "10.0.0.1");
    assert_non_null(c);
    decide(f, c, "pinned.example.com", NULL, &d);
    assert_true(d.allow);
    assert_true(d.passthrough);
    decide(f, c, "pkgs.example.org", NULL, &d);
    assert_true(d.allow);
    assert_false(d.passthrough);
}

/* A stored environment the proxy would refuse (over its limits, a host that is no host, written
 * behind the API's back) compiles as deny-all, is reported with the parser's reason, and the
 * rest of the snapshot is built: one damaged row never holds back a revocation. */
static void environment_the_proxy_would_refuse_compiles_as_deny_and_is_reported(void **state)
{
    struct fixture *f = *state;
    struct sl_buf egress;
    char huge[SL_UUID_LEN + 1];
    char bad[SL_UUID_LEN + 1];
    char ci[SL_UUID_LEN + 1];
    struct sl_decision d;
    json_t *problems;
    const char *msg;

    sl_buf_init(&egress, 1 << 20);
    assert_int_equal(sl_buf_append_str(&egress, "{\"default\":\"allow\",\"rules\":["), 0);
    for (int i = 0; i <= SL_POLICY_RULES_MAX; i++) {
        assert_int_equal(sl_buf_printf(&egress, "%s{\"host\":\"h%d.example.com\",\"methods\":[]}",
                                       i > 0 ? "," : "", i),
                         0);
    }
    assert_int_equal(sl_buf_append_str(&egress, "]}"), 0);
    add_raw_env(f, "huge", sl_buf_cstr(&egress), huge);
    add_raw_env(f, "bad",
                "{\"default\":\"allow\",\"rules\":[{\"host\":\"pkgs.example.org\",\"methods\":[]},"
                "{\"host\":\"not a host!\",\"methods\":[]}]}",
                bad);
    add_env(f, f->sec, NULL, CI_BODY, ci);
    add_client(f, f->sec, "on-bad", bad, "10.0.0.1", NULL, NULL);
    add_client(f, f->sec, "on-ci", ci, "10.0.0.2", NULL, NULL);
    build_ok(f, 1, NULL, 0);
    assert_int_equal(f->report.n_envs, 3);
    assert_int_equal(f->report.n_rules, 2);
    assert_int_equal(f->report.n_drops, 2);
    assert_int_equal(f->report.drops[0].kind, SL_SNAPSHOT_DROP_ENV_INVALID);
    /* In the order of the store: by name. */
    assert_int_equal(f->report.drops[1].kind, SL_SNAPSHOT_DROP_ENV_INVALID);
    assert_string_equal(f->report.drops[1].env_id, huge);
    assert_string_equal(f->report.drops[0].env_id, bad);
    assert_string_equal(f->report.drops[0].env_name, "bad");
    assert_non_null(strstr(f->report.drops[0].message, "rules[1].host: "));
    assert_false(sl_env_default_allows(sl_snapshot_find_env(f->snap, huge)));
    decide(f, by_address(f, "10.0.0.1"), "pkgs.example.org", "GET", &d);
    assert_false(d.allow);
    decide(f, by_address(f, "10.0.0.2"), "pkgs.example.org", "GET", &d);
    assert_true(d.allow);

    problems = sl_snapshot_build_report_problems(&f->report);
    assert_non_null(problems);
    assert_int_equal(json_array_size(problems), 2);
    assert_string_equal(
            json_string_value(json_object_get(json_array_get(problems, 0), "environment")), bad);
    assert_string_equal(json_string_value(json_object_get(json_array_get(problems, 0), "name")),
                        "bad");
    msg = json_string_value(json_object_get(json_array_get(problems, 0), "message"));
    assert_non_null(strstr(msg, "refused by the proxy's validation (rules[1].host: "));
    assert_non_null(strstr(msg, "compiled as deny-all"));
    assert_null(json_object_get(json_array_get(problems, 0), "client"));
    json_decref(problems);
    sl_buf_finish(&egress);
}

/* True when the proxy's parser knows the `git` object of a client (docs/reference/snapshot.md
 * §3): the proxy's half of issue 16 adds it. */
static bool parser_knows_git(void)
{
    static const char doc[] =
            "{\"version\":1,\"environments\":{\"e\":{\"default\":\"deny\"}},\"clients\":[{"
            "\"id\":\"c\",\"token\":\"t\",\"environment\":\"e\",\"git\":{\"host\":\"git.example."
            "com\","
            "\"base_path\":\"\",\"repo\":\"acme/site\",\"access\":\"read\",\"credential\":{"
            "\"header\":\"Authorization\",\"value\":\"Basic eA==\"},\"default_branch\":\"main\","
            "\"protected_branches\":[]}}]}";
    struct sl_snapshot *snap = NULL;
    int rc = sl_snapshot_parse(doc, strlen(doc), &snap, NULL);

    sl_snapshot_unref(snap);
    return rc == 0;
}

/* A sandbox's git access goes into its entry as the `git` object, with the git host's rule
 * (no credential); an entry whose caller reports a problem is reported and has none. */
static void extra_clients_carry_their_git_access(void **state)
{
    struct fixture *f = *state;
    char ci[SL_UUID_LEN + 1];
    static const char *const protected[] = { "release/*" };
    const struct sl_snapshot_build_rule host = { .host = "git.example.com:8443" };
    const struct sl_snapshot_build_git git = { .host = "git.example.com:8443",
                                               .base_path = "/git",
                                               .repo = "acme/site",
                                               .access = "write",
                                               .header = "Authorization",
                                               .value = "Basic eDp5",
                                               .default_branch = "main",
                                               .protected_branches = protected,
                                               .n_protected = 1 };
    const struct sl_snapshot_build_client extra[] = {
        { .id = "sb_git",
          .env_id = ci,
          .token = "pt_1",
          .rules = &host,
          .n_rules = 1,
          .git = &git },
        { .id = "sb_broken",
          .env_id = ci,
          .token = "pt_2",
          .rules = &host,
          .n_rules = 1,
          .problem = "the record of its repository acme/other is damaged" },
    };
    json_t *doc;
    json_t *entry;
    json_t *problems;
    json_t *want;
    char *rules;

    if (!parser_knows_git()) {
        print_message("skipped: this build's proxy parser does not know the `git` object yet\n");
        skip();
    }
    add_env(f, f->sec, NULL, CI_BODY, ci);
    build_ok(f, 3, extra, SL_ARRAY_LEN(extra));
    assert_int_equal(f->report.n_credentials, 2);
    doc = json_loads(sl_buf_cstr(&f->out), 0, NULL);
    assert_non_null(doc);
    entry = json_array_get(json_object_get(doc, "clients"), 0);
    assert_string_equal(json_string_value(json_object_get(entry, "id")), "sb_git");
    /* The git host without a credential: that goes on the repository's paths only. */
    rules = json_dumps(json_object_get(entry, "rules"), JSON_COMPACT);
    assert_string_equal(rules, "[{\"host\":\"git.example.com:8443\"}]");
    sl_free(rules);
    want = json_pack("{s:s,s:s,s:s,s:s,s:{s:s,s:s},s:s,s:[s]}", "host", "git.example.com:8443",
                     "base_path", "/git", "repo", "acme/site", "access", "write", "credential",
                     "header", "Authorization", "value", "Basic eDp5", "default_branch", "main",
                     "protected_branches", "release/*");
    assert_true(json_equal(json_object_get(entry, "git"), want));
    json_decref(want);
    entry = json_array_get(json_object_get(doc, "clients"), 1);
    assert_null(json_object_get(entry, "git"));
    assert_int_equal(f->report.n_drops, 1);
    assert_int_equal(f->report.drops[0].kind, SL_SNAPSHOT_DROP_GIT);
    problems = sl_snapshot_build_report_problems(&f->report);
    assert_string_equal(json_string_value(json_object_get(json_array_get(problems, 0), "client")),
                        "sb_broken");
    assert_string_equal(
            json_string_value(json_object_get(json_array_get(problems, 0), "message")),
            "sandbox sb_broken gets no git access: the record of its repository acme/other is "
            "damaged");
    json_decref(problems);
    json_decref(doc);
}

/* A placeholder credential compiles with its placeholder_env; a sandbox's placeholders go into
 * its entry only for a variable its environment still names (an edited environment, a
 * credential that does not open); an environment in observe compiles with its deadline while it
 * is ahead (never with the network off), and the report says when to build again. */
static void placeholders_and_observe_compile_into_the_snapshot(void **state)
{
    struct fixture *f = *state;
    char ph[SL_UUID_LEN + 1];
    char off[SL_UUID_LEN + 1];
    const struct sl_snapshot_build_placeholder phs[] = {
        { "OPENAI_API_KEY", "sluice-ph-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2" },
        { "GONE_KEY", "sluice-ph-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb3" },
    };
    const struct sl_snapshot_build_client extra[] = {
        { .id = "sb_1",
          .env_id = ph,
          .cidr = "10.9.0.0/16",
          .placeholders = phs,
          .n_placeholders = 2 },
    };
    const struct sl_client *c;
    struct sl_decision d;
    int64_t until = (int64_t)time(NULL) + 3600;

    add_env(f, f->sec, NULL,
            "{\"name\":\"ph\",\"scope\":\"global\",\"base_image\":\"debian:12\",\"network\":\"on\","
            "\"egress\":{\"default\":\"deny\",\"rules\":[{\"host\":\"api.openai.com\","
            "\"credential\":{\"header\":\"Authorization\",\"value\":\"sk-real\","
            "\"placeholder_env\":\"OPENAI_API_KEY\"}}]}}",
            ph);
    add_env(f, f->sec, NULL,
            "{\"name\":\"off\",\"scope\":\"global\",\"base_image\":\"debian:12\","
            "\"network\":\"off\"}",
            off);
    assert_int_equal(sl_store_env_set_observe(f->st, ph, until), 0);
    assert_int_equal(sl_store_env_set_observe(f->st, off, until - 10), 0);
    build_ok(f, 3, extra, SL_ARRAY_LEN(extra));
    assert_int_equal(f->report.next_observe_end, until);
    assert_non_null(strstr((const char *)f->out.p, "\"placeholder_env\":\"OPENAI_API_KEY\""));
    assert_non_null(strstr((const char *)f->out.p,
                           "\"placeholders\":{\"OPENAI_API_KEY\":\"sluice-ph-aaaa"));
    assert_null(strstr((const char *)f->out.p, "GONE_KEY"));
    c = by_address(f, "10.9.0.1");
    assert_non_null(c);
    decide(f, c, "api.openai.com", "GET", &d);
    assert_true(d.allow);
    assert_null(d.credential_header);
    assert_non_null(d.placeholder);
    assert_string_equal(d.placeholder->secret, "sk-real");
    /* In observe: what no rule allows is let out, marked. */
    decide(f, c, "elsewhere.example", "GET", &d);
    assert_true(d.allow);
    assert_true(d.observed);

    /* Past the deadline: compiled without it. */
    assert_int_equal(sl_store_env_set_observe(f->st, ph, (int64_t)time(NULL) - 1), 0);
    build_ok(f, 4, extra, SL_ARRAY_LEN(extra));
    assert_int_equal(f->report.next_observe_end, 0);
    assert_null(strstr((const char *)f->out.p, "observe_until"));
}

static void output_past_the_buffers_cap_fails_the_build(void **state)
{
    struct fixture *f = *state;
    char ci[SL_UUID_LEN + 1];

    add_env(f, f->sec, NULL, CI_BODY, ci);
    sl_buf_finish(&f->out);
    sl_buf_init(&f->out, 64);
    assert_int_equal(sl_control_snapshot_build(f->st, f->sec, 1, &f->out, NULL), SL_ETOOBIG);
    assert_int_equal(f->out.len, 0);
}

static void version_below_one_is_refused(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(sl_control_snapshot_build(f->st, f->sec, 0, &f->out, &f->report), SL_EINVAL);
    assert_int_equal(sl_control_snapshot_build(f->st, f->sec, -3, &f->out, NULL), SL_EINVAL);
}

static void every_allocation_failure_is_reported_without_a_leak(void **state)
{
    struct fixture *f = *state;
    char ci[SL_UUID_LEN + 1];
    char off[SL_UUID_LEN + 1];
    const struct sl_snapshot_build_rule git = { .host = "git.example.com",
                                                .header = "Authorization",
                                                .value = "Basic eA==" };
    const struct sl_snapshot_build_client extra = {
        .id = "sb_1", .env_id = ci, .token = "pt_x", .rules = &git, .n_rules = 1
    };
    int rc = SL_ENOMEM;
    long n;

    add_env(f, f->sec, NULL, CI_BODY, ci);
    add_env(f, f->other, NULL,
            "{\"name\":\"old\",\"scope\":\"global\",\"base_image\":\"debian:12\","
            "\"network\":\"on\",\"egress\":{\"default\":\"deny\",\"rules\":[{\"host\":\"a.b\","
            "\"credential\":{\"header\":\"X-Key\",\"value\":\"k\"}}]}}",
            off);
    add_client(f, f->sec, "runners", ci, NULL, "10.20.0.0/16", "pt_runner");
    add_client(f, f->other, "stale", ci, "10.1.1.1", NULL, "pt_stale");
    sl_log_set_level(SL_LOG_ERROR); /* Each pass logs the two drops again. */
    for (n = 1; rc != 0; n++) {
        sl_mem_fail_after(n);
        rc = sl_control_snapshot_build_with_clients(f->st, f->sec, 1, &extra, 1, &f->out,
                                                    &f->report);
        sl_mem_fail_after(0);
        if (rc != 0) {
            if (rc != SL_ENOMEM && rc != SL_EIO) {
                fail_msg("allocation %ld: %s", n, sl_strerror(rc));
            }
            assert_int_equal(f->out.len, 0);
            assert_int_equal(f->report.n_drops, 0);
        }
    }
    sl_log_set_level(SL_LOG_INFO);
    assert_true(n > 10);
    assert_int_equal(f->report.n_drops, 2);
    build_ok(f, 1, &extra, 1);
}

static bool port_named(const struct fixture *f, unsigned p)
{
    return (f->report.named_ports[p / 8] & (1u << (p % 8))) != 0;
}

/* The ports the rules name (environments' and clients' runtime rules; IPv6 literals too) are
 * reported for the host's redirect set; a rule without a port names none. */
static void rules_named_ports_are_reported(void **state)
{
    struct fixture *f = *state;
    char ci[SL_UUID_LEN + 1];
    const struct sl_snapshot_build_rule git = { .host = "git.example.com:3000" };
    const struct sl_snapshot_build_client extra = {
        .id = "sb_1", .env_id = ci, .token = "pt_x", .rules = &git, .n_rules = 1
    };
    size_t named = 0;

    add_env(f, f->sec, NULL,
            "{\"name\":\"ports\",\"scope\":\"global\",\"base_image\":\"debian:12\","
            "\"network\":\"on\",\"egress\":{\"default\":\"deny\",\"rules\":["
            "{\"host\":\"api.example.com:8443\"},{\"host\":\"*.example.org:65535\"},"
            "{\"host\":\"[2001:db8::1]:9000\"},{\"host\":\"[2001:db8::2]\"},"
            "{\"host\":\"10.0.0.7:443\"},{\"host\":\"plain.example.com\"}]}}",
            ci);
    build_ok(f, 1, &extra, 1);
    for (unsigned p = 0; p < 65536u; p++) {
        named += port_named(f, p);
    }
    assert_true(port_named(f, 8443));
    assert_true(port_named(f, 65535));
    assert_true(port_named(f, 9000));
    assert_true(port_named(f, 443));
    assert_true(port_named(f, 3000));
    assert_int_equal(named, 5);
    /* Nothing named: nothing reported. */
    build_ok(f, 2, NULL, 0);
    assert_false(port_named(f, 3000));
    assert_true(port_named(f, 8443));
}

int main(void)
{
    /* As the daemon does: jansson allocates through base/mem, so the sweep covers it. */
    json_set_alloc_funcs(sl_malloc, sl_free);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(empty_database_gives_a_valid_snapshot_without_environments_or_clients),
        T(static_client_gets_its_environments_rules_with_the_opened_credential),
        T(network_off_lets_nothing_out_and_allow_default_is_kept),
        T(same_name_in_two_scopes_gives_two_environments_keyed_by_id),
        T(credential_under_another_key_drops_its_rule_and_is_reported),
        T(extra_clients_are_included_with_their_runtime_rules),
        T(extra_client_of_an_unknown_environment_gets_no_egress),
        T(clients_the_proxy_would_refuse_are_left_out_and_reported),
        T(damaged_egress_compiles_as_deny_and_is_reported),
        T(passthrough_rules_compile_into_the_snapshot),
        T(environment_the_proxy_would_refuse_compiles_as_deny_and_is_reported),
        T(extra_clients_carry_their_git_access),
        T(placeholders_and_observe_compile_into_the_snapshot),
        T(output_past_the_buffers_cap_fails_the_build),
        T(version_below_one_is_refused),
        T(every_allocation_failure_is_reported_without_a_leak),
        T(rules_named_ports_are_reported),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
