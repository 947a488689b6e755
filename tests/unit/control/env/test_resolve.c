/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/env/test_resolve.c - environment resolution (docs/reference/api.md §5.2): each
 * step of the precedence, webhook runs, visibility of an explicit choice, candidates that must
 * never be picked, the merge with the global default and the built-in defaults, the JSON of `GET
 * /api/v1/resolve`, and the allocation-failure sweep.
 *
 * Rows are made the way the API makes them (sl_env_spec_parse + sl_env_spec_to_row) with the
 * toy sealer of tests/support/toyseal: "k<key>:" and the hex of each byte XOR the key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/buf.h"
#include "base/mem.h"
#include "control/env/environment.h"
#include "control/env/resolve.h"
#include "control/store/model.h"
#include "tests/support/sqjson.h"
#include "tests/support/toyseal.h"

#define ALICE "a11ce000-0000-4000-8000-000000000001"
#define BOB   "b0b00000-0000-4000-8000-000000000002"
#define REPO  "acme/website"

/* ---- the toy sealer (tests/support/toyseal) ---------------------------------------------- */

static struct sl_test_toy toy_a = { .key = 0x5a };
static struct sl_test_toy toy_b = { .key = 0x21 };
static const struct sl_env_sealer sealer_a = { sl_test_toy_seal, sl_test_toy_open, &toy_a };
static const struct sl_env_sealer sealer_b = { sl_test_toy_seal, sl_test_toy_open, &toy_b };

/* ---- rows --------------------------------------------------------------------------------- */

/* Makes a row from a request body (single quotes for double) as POST would store it. */
static void make_row(struct sl_env_row *row, const char *id, const char *owner, bool is_default,
                     const char *body_sq)
{
    struct sl_env_errors errs = { 0 };
    struct sl_env_spec spec;
    struct sl_buf b;

    sl_buf_init(&b, (size_t)1 << 20);
    assert_int_equal(sl_test_sqjson(&b, body_sq), 0);
    memset(row, 0, sizeof(*row));
    if (sl_env_spec_parse(b.p, b.len, &spec, &errs) != 0) {
        fail_msg("%s: %s %s", body_sq, errs.count > 0 ? errs.items[0].path : errs.message,
                 errs.count > 0 ? errs.items[0].message : "");
    }
    assert_int_equal(sl_env_spec_to_row(&spec, NULL, &sealer_a, row, &errs), 0);
    (void)snprintf(row->id, sizeof(row->id), "%s", id);
    (void)snprintf(row->owner_id, sizeof(row->owner_id), "%s", owner);
    row->is_default = is_default;
    sl_env_spec_finish(&spec);
    sl_buf_finish(&b);
}

/* The rows of the tests, made once per test by setup(). */
struct world {
    /* Alice's user environment binding REPO. */
    struct sl_env_row alice_bound;
    /* Alice's user environment binding nothing. */
    struct sl_env_row alice_other;
    /* Bob's user environment binding REPO. */
    struct sl_env_row bob_bound;
    /* A global, non-default environment binding REPO. */
    struct sl_env_row global_bound;
    /* A global, non-default environment binding another repository. */
    struct sl_env_row global_other;
    /* The global default, binding nothing. */
    struct sl_env_row deflt;
};

static int setup(void **state)
{
    struct world *w = sl_calloc(1, sizeof(*w));

    if (w == NULL) {
        return -1;
    }
    make_row(&w->alice_bound, "00000000-0000-4000-8000-00000000000a", ALICE, false,
             "{'name':'alice-web','base_image':'alice/img:1','cpus':2,'network':'on',"
             "'env':[{'name':'SHARED','value':'from-alice'},"
             "{'name':'ALICE_TOKEN','value':'t0k','secret':true}],"
             "'egress':{'rules':[{'host':'pkgs.example.org'},{'host':'api.example.com',"
             "'methods':['GET'],'credential':{'header':'Authorization','value':'Bearer a'}}]},"
             "'repositories':['" REPO "']}");
    make_row(&w->alice_other, "00000000-0000-4000-8000-00000000000b", ALICE, false,
             "{'name':'alice-other','base_image':'other:1','network':'off',"
             "'repositories':['acme/other']}");
    make_row(&w->bob_bound, "00000000-0000-4000-8000-00000000000c", BOB, false,
             "{'name':'bob-web','base_image':'bob/img:1','network':'off',"
             "'repositories':['" REPO "']}");
    make_row(&w->global_bound, "00000000-0000-4000-8000-00000000000d", "", false,
             "{'name':'global-web','scope':'global','base_image':'global/img:1',"
             "'memory':'2GiB','network':'off','repositories':['" REPO "']}");
    make_row(&w->global_other, "00000000-0000-4000-8000-00000000000f", "", false,
             "{'name':'global-other','scope':'global','base_image':'other/img:1',"
             "'network':'off','repositories':['acme/other']}");
    make_row(&w->deflt, "00000000-0000-4000-8000-00000000000e", "", true,
             "{'name':'default','scope':'global','base_image':'default/img:1','cpus':0.5,"
             "'memory':'4GiB','network':'on','egress':{'default':'allow'},"
             "'env':[{'name':'SHARED','value':'from-default'},"
             "{'name':'DEFAULT_ONLY','value':'d'},"
             "{'name':'DEFAULT_SECRET','value':'ds','secret':true}]}");
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    struct world *w = *state;

    sl_env_row_finish(&w->alice_bound);
    sl_env_row_finish(&w->alice_other);
    sl_env_row_finish(&w->bob_bound);
    sl_env_row_finish(&w->global_bound);
    sl_env_row_finish(&w->global_other);
    sl_env_row_finish(&w->deflt);
    sl_free(w);
    return 0;
}

/* A request from `user` for REPO over the candidates given (NULL-terminated). */
static struct sl_resolve_request request(const char *user, const struct sl_env_row **cands)
{
    size_t n = 0;

    while (cands[n] != NULL) {
        n++;
    }
    return (struct sl_resolve_request){
        .user_id = user,
        .repo = REPO,
        .candidates = cands,
        .n_candidates = n,
    };
}

static void expect_pick(const struct sl_resolve_request *req, enum sl_matched_by m,
                        const struct sl_env_row *chosen)
{
    struct sl_resolve_result r;

    assert_int_equal(sl_resolve_run(req, &r), 0);
    if (r.matched_by != m) {
        fail_msg("matched_by %s, want %s", sl_resolve_matched_by_name(r.matched_by),
                 sl_resolve_matched_by_name(m));
    }
    assert_ptr_equal(r.chosen, chosen);
    sl_resolve_finish(&r);
}

static const struct sl_resolve_var *find_var(const struct sl_resolve_result *r, const char *name)
{
    for (size_t i = 0; i < r->n_vars; i++) {
        if (strcmp(r->vars[i].name, name) == 0) {
            return &r->vars[i];
        }
    }
    return NULL;
}

/* ---- precedence --------------------------------------------------------------------------- */

static void an_explicit_choice_wins_over_every_binding(void **state)
{
    struct world *w = *state;
    const struct sl_env_row *cands[] = { &w->alice_bound, &w->global_bound, &w->deflt, NULL };
    struct sl_resolve_request req = request(ALICE, cands);

    req.explicit_env = &w->alice_other;
    expect_pick(&req, SL_MATCHED_BY_EXPLICIT, &w->alice_other);
    /* Even the global default, named explicitly, is "explicit". */
    req.explicit_env = &w->deflt;
    expect_pick(&req, SL_MATCHED_BY_EXPLICIT, &w->deflt);
    /* And it holds for webhook runs too. */
    req.webhook = true;
    req.explicit_env = &w->global_bound;
    expect_pick(&req, SL_MATCHED_BY_EXPLICIT, &w->global_bound);
}

static void an_explicit_choice_must_be_visible_to_the_caller(void **state)
{
    struct world *w = *state;
    const struct sl_env_row *cands[] = { &w->deflt, NULL };
    struct sl_resolve_request req = request(BOB, cands);
    struct sl_resolve_result r;

    req.explicit_env = &w->alice_bound;
    assert_int_equal(sl_resolve_run(&req, &r), SL_ENOTFOUND);
    assert_null(r.chosen);
    /* Being an admin does not open other users' private environments. */
    req.is_admin = true;
    assert_int_equal(sl_resolve_run(&req, &r), SL_ENOTFOUND);
    /* Without a user, no user environment is visible. */
    req.user_id = NULL;
    assert_int_equal(sl_resolve_run(&req, &r), SL_ENOTFOUND);
    /* Global environments are visible to everyone. */
    req.user_id = BOB;
    req.is_admin = false;
    req.explicit_env = &w->global_bound;
    expect_pick(&req, SL_MATCHED_BY_EXPLICIT, &w->global_bound);
}

static void the_callers_user_binding_comes_next(void **state)
{
    struct world *w = *state;
    /* Order of the candidates does not matter. */
    const struct sl_env_row *cands[] = { &w->deflt, &w->global_bound, &w->alice_bound, NULL };
    struct sl_resolve_request req = request(ALICE, cands);

    expect_pick(&req, SL_MATCHED_BY_USER_BINDING, &w->alice_bound);
}

static void a_webhook_run_skips_user_bindings(void **state)
{
    struct world *w = *state;
    const struct sl_env_row *cands[] = { &w->alice_bound, &w->global_bound, &w->deflt, NULL };
    struct sl_resolve_request req = request(ALICE, cands);

    req.webhook = true;
    expect_pick(&req, SL_MATCHED_BY_GLOBAL_BINDING, &w->global_bound);
    req = request(ALICE, (const struct sl_env_row *[]){ &w->alice_bound, &w->deflt, NULL });
    req.webhook = true;
    expect_pick(&req, SL_MATCHED_BY_GLOBAL_DEFAULT, &w->deflt);
}

static void a_global_binding_comes_before_the_default(void **state)
{
    struct world *w = *state;
    const struct sl_env_row *cands[] = { &w->deflt, &w->global_bound, NULL };
    struct sl_resolve_request req = request(BOB, cands);

    expect_pick(&req, SL_MATCHED_BY_GLOBAL_BINDING, &w->global_bound);
}

static void the_default_applies_when_nothing_binds(void **state)
{
    struct world *w = *state;
    const struct sl_env_row *cands[] = { &w->alice_other, &w->global_other, &w->deflt, NULL };
    struct sl_resolve_request req = request(ALICE, cands);

    /* Neither Alice's other environment nor the other global one binds REPO. */
    expect_pick(&req, SL_MATCHED_BY_GLOBAL_DEFAULT, &w->deflt);
}

static void nothing_at_all_gives_built_in_defaults_and_no_network(void **state)
{
    const struct sl_env_row *cands[] = { NULL };
    struct sl_resolve_request req = request(ALICE, cands);
    struct sl_resolve_result r;

    (void)state;
    assert_int_equal(sl_resolve_run(&req, &r), 0);
    assert_int_equal(r.matched_by, SL_MATCHED_BY_NONE);
    assert_null(r.chosen);
    assert_null(r.fallback);
    assert_string_equal(r.base_image, "sluice/sandbox:bookworm");
    assert_int_equal(r.cpus_centi, 100);
    assert_int_equal(r.memory_bytes, (int64_t)1 << 30);
    assert_false(r.network);
    assert_null(r.egress_json);
    assert_int_equal(r.n_vars, 0);
    sl_resolve_finish(&r);
    /* `sluice control --image` replaces the built-in image. */
    req.default_image = "corp/sandbox:2";
    assert_int_equal(sl_resolve_run(&req, &r), 0);
    assert_string_equal(r.base_image, "corp/sandbox:2");
    sl_resolve_finish(&r);
}

static void never_picks_another_users_environment(void **state)
{
    struct world *w = *state;
    const struct sl_env_row *cands[] = { &w->bob_bound, &w->alice_other, NULL };
    struct sl_resolve_request req = request(ALICE, cands);

    /* Bob's binding is not Alice's, and Alice's other environment does not bind REPO. */
    expect_pick(&req, SL_MATCHED_BY_NONE, NULL);
    req.is_admin = true;
    expect_pick(&req, SL_MATCHED_BY_NONE, NULL);
    /* With no caller at all, no user environment is anyone's. */
    req.user_id = "";
    expect_pick(&req, SL_MATCHED_BY_NONE, NULL);
    req = request(BOB, cands);
    expect_pick(&req, SL_MATCHED_BY_USER_BINDING, &w->bob_bound);
}

static void refuses_a_malformed_repository(void **state)
{
    const struct sl_env_row *cands[] = { NULL };
    static const char *const bad[] = { "", "acme", "acme/../x", "/acme/x", "acme/x/" };
    struct sl_resolve_request req = request(ALICE, cands);
    struct sl_resolve_result r;

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        req.repo = bad[i];
        assert_int_equal(sl_resolve_run(&req, &r), SL_EINVAL);
    }
    req.repo = NULL;
    assert_int_equal(sl_resolve_run(&req, &r), SL_EINVAL);
}

static void names_every_way_of_matching(void **state)
{
    (void)state;
    assert_string_equal(sl_resolve_matched_by_name(SL_MATCHED_BY_EXPLICIT), "explicit");
    assert_string_equal(sl_resolve_matched_by_name(SL_MATCHED_BY_USER_BINDING), "user-binding");
    assert_string_equal(sl_resolve_matched_by_name(SL_MATCHED_BY_GLOBAL_BINDING), "global-binding");
    assert_string_equal(sl_resolve_matched_by_name(SL_MATCHED_BY_GLOBAL_DEFAULT), "global-default");
    assert_string_equal(sl_resolve_matched_by_name(SL_MATCHED_BY_NONE), "none");
}

/* ---- merge -------------------------------------------------------------------------------- */

static void takes_resources_from_the_chosen_then_the_default_then_built_in(void **state)
{
    struct world *w = *state;
    const struct sl_env_row *cands[] = { &w->alice_bound, &w->deflt, NULL };
    struct sl_resolve_request req = request(ALICE, cands);
    struct sl_resolve_result r;

    /* alice_bound sets cpus 2, memory inherits: 4GiB from the default. */
    assert_int_equal(sl_resolve_run(&req, &r), 0);
    assert_ptr_equal(r.fallback, &w->deflt);
    assert_string_equal(r.base_image, "alice/img:1");
    assert_int_equal(r.cpus_centi, 200);
    assert_int_equal(r.memory_bytes, (int64_t)4 << 30);
    sl_resolve_finish(&r);
    /* global_bound sets memory 2GiB, cpus inherits 0.5 from the default. */
    req = request(BOB, (const struct sl_env_row *[]){ &w->global_bound, &w->deflt, NULL });
    assert_int_equal(sl_resolve_run(&req, &r), 0);
    assert_string_equal(r.base_image, "global/img:1");
    assert_int_equal(r.cpus_centi, 50);
    assert_int_equal(r.memory_bytes, (int64_t)2 << 30);
    sl_resolve_finish(&r);
    /* No default: what the chosen one leaves unset is built in. */
    req = request(BOB, (const struct sl_env_row *[]){ &w->global_bound, NULL });
    assert_int_equal(sl_resolve_run(&req, &r), 0);
    assert_null(r.fallback);
    assert_int_equal(r.cpus_centi, 100);
    assert_int_equal(r.memory_bytes, (int64_t)2 << 30);
    sl_resolve_finish(&r);
}

static void takes_network_and_egress_from_the_chosen_one_only(void **state)
{
    struct world *w = *state;
    struct sl_resolve_request req =
            request(BOB, (const struct sl_env_row *[]){ &w->global_bound, &w->deflt, NULL });
    struct sl_resolve_result r;

    /* The default has network on and allows everything; the chosen one is off: off. */
    assert_int_equal(sl_resolve_run(&req, &r), 0);
    assert_false(r.network);
    assert_null(r.egress_json);
    sl_resolve_finish(&r);
    req = request(ALICE, (const struct sl_env_row *[]){ &w->alice_bound, &w->deflt, NULL });
    assert_int_equal(sl_resolve_run(&req, &r), 0);
    assert_true(r.network);
    assert_ptr_equal(r.egress_json, w->alice_bound.egress_json);
    sl_resolve_finish(&r);
}

static void unions_variables_with_the_chosen_names_shadowing(void **state)
{
    struct world *w = *state;
    struct sl_resolve_request req =
            request(ALICE, (const struct sl_env_row *[]){ &w->alice_bound, &w->deflt, NULL });
    struct sl_resolve_result r;
    const struct sl_resolve_var *v;

    assert_int_equal(sl_resolve_run(&req, &r), 0);
    assert_int_equal(r.n_vars, 4);
    /* The chosen one's first, in order, then the default's that are not shadowed. */
    assert_string_equal(r.vars[0].name, "SHARED");
    assert_string_equal(r.vars[1].name, "ALICE_TOKEN");
    assert_string_equal(r.vars[2].name, "DEFAULT_ONLY");
    assert_string_equal(r.vars[3].name, "DEFAULT_SECRET");
    v = find_var(&r, "SHARED");
    assert_false(v->inherited);
    assert_ptr_equal(v->sealed, json_string_value(json_object_get(json_array_get(r._chosen_vars, 0),
                                                                  "sealed")));
    assert_true(find_var(&r, "DEFAULT_ONLY")->inherited);
    assert_true(find_var(&r, "DEFAULT_SECRET")->secret);
    assert_true(find_var(&r, "ALICE_TOKEN")->secret);
    sl_resolve_finish(&r);
    /* The default chosen for itself: nothing is inherited, nothing is doubled. */
    req = request(ALICE, (const struct sl_env_row *[]){ &w->deflt, NULL });
    assert_int_equal(sl_resolve_run(&req, &r), 0);
    assert_int_equal(r.n_vars, 3);
    assert_false(r.vars[0].inherited);
    sl_resolve_finish(&r);
}

static void reports_a_damaged_row(void **state)
{
    struct world *w = *state;
    struct sl_resolve_request req =
            request(ALICE, (const struct sl_env_row *[]){ &w->alice_bound, &w->deflt, NULL });
    struct sl_resolve_result r;
    static char damaged[] = "[{\"name\":1}]";
    char *saved = w->deflt.env_json;

    w->deflt.env_json = damaged;
    assert_int_equal(sl_resolve_run(&req, &r), SL_EIO);
    assert_null(r.vars);
    w->deflt.env_json = saved;
}

/* ---- rendering ---------------------------------------------------------------------------- */

static void render(const struct sl_resolve_result *r, const struct sl_env_sealer *sealer,
                   const char *want_sq)
{
    json_t *j = NULL;
    char *got;
    struct sl_buf want;

    assert_int_equal(sl_resolve_render(r, REPO, sealer, &j), 0);
    got = json_dumps(j, SL_ENV_JSON_FLAGS);
    sl_buf_init(&want, (size_t)1 << 20);
    assert_int_equal(sl_test_sqjson(&want, want_sq), 0);
    if (strcmp(got, (const char *)want.p) != 0) {
        fail_msg("\n  got:  %s\n  want: %s", got, (const char *)want.p);
    }
    sl_free(got);
    sl_buf_finish(&want);
    json_decref(j);
}

static void renders_the_effective_runtime_with_secrets_masked(void **state)
{
    struct world *w = *state;
    struct sl_resolve_request req =
            request(ALICE, (const struct sl_env_row *[]){ &w->alice_bound, &w->deflt, NULL });
    struct sl_resolve_result r;

    assert_int_equal(sl_resolve_run(&req, &r), 0);
    render(&r, &sealer_a,
           "{'repo':'acme/website','matched_by':'user-binding',"
           "'environment':{'id':'00000000-0000-4000-8000-00000000000a','name':'alice-web',"
           "'scope':'user'},"
           "'default_environment':{'id':'00000000-0000-4000-8000-00000000000e',"
           "'name':'default'},"
           "'base_image':'alice/img:1','image_pull':'if-missing','cpus':2.0,'memory':'4GiB',"
           "'network':'on',"
           "'env':[{'name':'SHARED','value':'from-alice','secret':false,'inherited':false},"
           "{'name':'ALICE_TOKEN','value':'******','secret':true,'inherited':false},"
           "{'name':'DEFAULT_ONLY','value':'d','secret':false,'inherited':true},"
           "{'name':'DEFAULT_SECRET','value':'******','secret':true,'inherited':true}],"
           "'egress':{'default':'deny','rules':[{'host':'pkgs.example.org','methods':[]},"
           "{'host':'api.example.com','methods':['GET'],"
           "'credential':{'header':'Authorization','has_value':true}}]}}");
    sl_resolve_finish(&r);
}

static void renders_none_with_nulls(void **state)
{
    struct sl_resolve_request req = request(ALICE, (const struct sl_env_row *[]){ NULL });
    struct sl_resolve_result r;

    (void)state;
    req.webhook = true;
    assert_int_equal(sl_resolve_run(&req, &r), 0);
    render(&r, &sealer_a,
           "{'repo':'acme/website','matched_by':'none','environment':null,"
           "'default_environment':null,'base_image':'sluice/sandbox:bookworm',"
           "'image_pull':'if-missing','cpus':1.0,"
           "'memory':'1GiB','network':'off','env':[],'egress':null}");
    sl_resolve_finish(&r);
}

static void lists_values_that_do_not_open(void **state)
{
    struct world *w = *state;
    struct sl_resolve_request req =
            request(ALICE, (const struct sl_env_row *[]){ &w->alice_bound, &w->deflt, NULL });
    struct sl_resolve_result r;
    json_t *j = NULL;
    char *text;

    assert_int_equal(sl_resolve_run(&req, &r), 0);
    assert_int_equal(sl_resolve_render(&r, REPO, &sealer_b, &j), 0);
    text = json_dumps(json_object_get(j, "undecryptable"), JSON_COMPACT);
    assert_string_equal(text, "[\"SHARED\",\"ALICE_TOKEN\",\"DEFAULT_ONLY\",\"DEFAULT_SECRET\","
                              "\"api.example.com\"]");
    sl_free(text);
    text = json_dumps(j, JSON_COMPACT);
    assert_null(strstr(text, "t0k"));
    assert_null(strstr(text, "Bearer"));
    sl_free(text);
    json_decref(j);
    sl_resolve_finish(&r);
}

/* ---- allocation failures ------------------------------------------------------------------ */

static void survives_every_allocation_failure(void **state)
{
    struct world *w = *state;
    struct sl_resolve_request req =
            request(ALICE, (const struct sl_env_row *[]){ &w->alice_bound, &w->deflt, NULL });
    long n;

    for (n = 1; n < 100000; n++) {
        struct sl_resolve_result r;
        json_t *j = NULL;
        int rc;

        sl_mem_fail_after(n);
        rc = sl_resolve_run(&req, &r);
        if (rc == 0) {
            rc = sl_resolve_render(&r, REPO, &sealer_a, &j);
        }
        sl_mem_fail_after(0);
        json_decref(j);
        sl_resolve_finish(&r);
        if (rc == 0 && sl_mem_failures() == 0) {
            break;
        }
        /* jansson reports some allocation failures while parsing stored JSON as damage. */
        if (rc != SL_ENOMEM && rc != SL_EIO) {
            fail_msg("allocation %ld: rc %d", n, rc);
        }
    }
    assert_true(n > 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(an_explicit_choice_wins_over_every_binding, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(an_explicit_choice_must_be_visible_to_the_caller, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(the_callers_user_binding_comes_next, setup, teardown),
        cmocka_unit_test_setup_teardown(a_webhook_run_skips_user_bindings, setup, teardown),
        cmocka_unit_test_setup_teardown(a_global_binding_comes_before_the_default, setup, teardown),
        cmocka_unit_test_setup_teardown(the_default_applies_when_nothing_binds, setup, teardown),
        cmocka_unit_test(nothing_at_all_gives_built_in_defaults_and_no_network),
        cmocka_unit_test_setup_teardown(never_picks_another_users_environment, setup, teardown),
        cmocka_unit_test(refuses_a_malformed_repository),
        cmocka_unit_test(names_every_way_of_matching),
        cmocka_unit_test_setup_teardown(
                takes_resources_from_the_chosen_then_the_default_then_built_in, setup, teardown),
        cmocka_unit_test_setup_teardown(takes_network_and_egress_from_the_chosen_one_only, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(unions_variables_with_the_chosen_names_shadowing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(reports_a_damaged_row, setup, teardown),
        cmocka_unit_test_setup_teardown(renders_the_effective_runtime_with_secrets_masked, setup,
                                        teardown),
        cmocka_unit_test(renders_none_with_nulls),
        cmocka_unit_test_setup_teardown(lists_values_that_do_not_open, setup, teardown),
        cmocka_unit_test_setup_teardown(survives_every_allocation_failure, setup, teardown),
    };

    /* jansson allocates through base/mem, so the sweep fails its allocations too. */
    json_set_alloc_funcs(sl_malloc, sl_free);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
