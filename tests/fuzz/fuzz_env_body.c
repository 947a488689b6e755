/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_env_body.c - the REST body validator of control/env/environment on arbitrary
 * bytes: sl_env_spec_parse(), then for an accepted body sl_env_spec_to_row() (a POST: no
 * previous row) with a toy reversible sealer and sl_env_render() of the row.
 *
 * Invariants, not just "no crash": the rendering and the error document are valid JSON (their
 * dump parses again), every secret variable renders as SL_ENV_MASK, credentials render as
 * {"header", "has_value"} only, and no secret or credential value shows up in any string of the
 * rendering unless the request also sent that text in a field that is shown. LSan checks that
 * everything is freed.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/mem.h"
#include "control/env/environment.h"
#include "control/store/model.h"
#include "tests/support/toyseal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- the toy sealer (tests/support/toyseal) ---------------------------------------------- */

static struct sl_test_toy toy_key = { .key = 0x5a };
static const struct sl_env_sealer toy = { sl_test_toy_seal, sl_test_toy_open, &toy_key };

/* ---- checks ------------------------------------------------------------------------------- */

static bool contains(const char *hay, size_t hn, const char *needle, size_t nn)
{
    if (nn == 0) {
        return true;
    }
    for (size_t i = 0; nn <= hn && i <= hn - nn; i++) {
        if (hay[i] == needle[0] && memcmp(hay + i, needle, nn) == 0) {
            return true;
        }
    }
    return false;
}

/* True when `v` occurs in a field of the request that the rendering legitimately shows. */
static bool is_public_text(const struct sl_env_spec *spec, const char *v, size_t n)
{
    const char *fields[] = { spec->name, spec->description, spec->base_image };

    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (fields[i] != NULL && contains(fields[i], strlen(fields[i]), v, n)) {
            return true;
        }
    }
    for (size_t i = 0; i < spec->n_vars; i++) {
        const struct sl_env_var *var = &spec->vars[i];

        if (contains(var->name, strlen(var->name), v, n)
            || (!var->secret && contains(var->value, var->value_len, v, n))) {
            return true;
        }
    }
    for (size_t i = 0; spec->network && i < spec->n_rules; i++) {
        const struct sl_env_rule *r = &spec->rules[i];

        if (contains(r->host, strlen(r->host), v, n)
            || (r->header != NULL && contains(r->header, strlen(r->header), v, n))) {
            return true;
        }
        for (size_t m = 0; m < r->n_methods; m++) {
            if (contains(r->methods[m], strlen(r->methods[m]), v, n)) {
                return true;
            }
        }
    }
    for (size_t i = 0; i < spec->n_repos; i++) {
        if (contains(spec->repos[i], strlen(spec->repos[i]), v, n)) {
            return true;
        }
    }
    /* The fixed vocabulary of the rendering (member names, "on", "deny", the mask...). */
    return n <= 16;
}

/* Every string (value or member name) of `j`, recursively, is free of the secret `v`. */
static void check_no_leak(json_t *j, const char *v, size_t n)
{
    const char *key;
    json_t *item;
    size_t i;

    switch (json_typeof(j)) {
    case JSON_OBJECT:
        json_object_foreach(j, key, item)
        {
            SL_BUG_ON(contains(key, strlen(key), v, n));
            check_no_leak(item, v, n);
        }
        break;
    case JSON_ARRAY:
        json_array_foreach(j, i, item)
        {
            check_no_leak(item, v, n);
        }
        break;
    case JSON_STRING:
        SL_BUG_ON(contains(json_string_value(j), json_string_length(j), v, n));
        break;
    default:
        break;
    }
}

/* Dumps `j`, checks that the dump parses again to an equal document, and returns the parse
 * (a new reference). */
static json_t *reparse(const json_t *j)
{
    char *text = json_dumps(j, SL_ENV_JSON_FLAGS);
    json_t *back;
    json_error_t err;

    SL_BUG_ON(text == NULL);
    back = json_loads(text, 0, &err);
    SL_BUG_ON(back == NULL);
    sl_free(text);
    return back;
}

static void check_rendering(const struct sl_env_spec *spec, json_t *out)
{
    json_t *env = json_object_get(out, "env");
    json_t *egress = json_object_get(out, "egress");
    json_t *rules = json_object_get(egress, "rules");

    SL_BUG_ON(!json_is_object(out));
    SL_BUG_ON(json_array_size(env) != spec->n_vars);
    for (size_t i = 0; i < spec->n_vars; i++) {
        const struct sl_env_var *var = &spec->vars[i];
        json_t *e = json_array_get(env, i);
        const char *value = json_string_value(json_object_get(e, "value"));

        SL_BUG_ON(strcmp(json_string_value(json_object_get(e, "name")), var->name) != 0);
        SL_BUG_ON(value == NULL);
        if (var->secret) {
            SL_BUG_ON(strcmp(value, SL_ENV_MASK) != 0);
            SL_BUG_ON(json_object_get(e, "secret") != json_true());
            if (!is_public_text(spec, var->value, var->value_len)) {
                check_no_leak(out, var->value, var->value_len);
            }
        } else {
            SL_BUG_ON(json_string_length(json_object_get(e, "value")) != var->value_len
                      || memcmp(value, var->value, var->value_len) != 0);
        }
    }
    SL_BUG_ON(!spec->network && !json_is_null(egress));
    if (!spec->network) {
        return;
    }
    SL_BUG_ON(json_array_size(rules) != spec->n_rules);
    for (size_t i = 0; i < spec->n_rules; i++) {
        const struct sl_env_rule *r = &spec->rules[i];
        json_t *c = json_object_get(json_array_get(rules, i), "credential");

        if (r->header == NULL) {
            SL_BUG_ON(c != NULL && !json_is_null(c));
            continue;
        }
        /* A POST without a previous row cannot keep a value, so every credential has one. */
        SL_BUG_ON(r->value == NULL);
        SL_BUG_ON(json_object_size(c) != 2 || json_object_get(c, "has_value") != json_true());
        SL_BUG_ON(strcmp(json_string_value(json_object_get(c, "header")), r->header) != 0);
        if (!is_public_text(spec, r->value, r->value_len)) {
            check_no_leak(out, r->value, r->value_len);
        }
    }
}

static void check_errors(const struct sl_env_errors *errs)
{
    json_t *j = NULL;
    json_t *back;

    SL_BUG_ON(errs->status != 400 && errs->status != 409 && errs->status != 422);
    SL_BUG_ON(errs->status == 400 && errs->count != 0);
    SL_BUG_ON(errs->count > SL_ENV_ERRORS_MAX);
    if (sl_env_errors_render(errs, &j) != 0) {
        return;
    }
    back = reparse(j);
    SL_BUG_ON(!json_is_string(json_object_get(back, "message")));
    SL_BUG_ON(json_array_size(json_object_get(back, "errors")) != errs->count);
    json_decref(back);
    json_decref(j);
}

static void store_and_render(const struct sl_env_spec *spec)
{
    struct sl_env_errors errs = { 0 };
    struct sl_env_row row = { 0 };
    json_t *out = NULL;
    json_t *back;
    int rc;

    rc = sl_env_spec_to_row(spec, NULL, &toy, &row, &errs);
    if (rc == SL_EPOLICY) {
        /* Only the size caps can refuse a POST here. */
        SL_BUG_ON(errs.status != 422);
        check_errors(&errs);
        goto out;
    }
    SL_BUG_ON(rc != 0 && rc != SL_ENOMEM);
    if (rc != 0) {
        goto out;
    }
    SL_BUG_ON(row.env_json == NULL || (spec->network != (row.egress_json != NULL)));
    rc = sl_env_render(&row, NULL, &toy, &out);
    SL_BUG_ON(rc != 0 && rc != SL_ENOMEM);
    if (rc != 0) {
        goto out;
    }
    SL_BUG_ON(json_object_get(out, "undecryptable") != NULL
              && json_array_size(json_object_get(out, "undecryptable")) != 0);
    back = reparse(out);
    check_rendering(spec, back);
    json_decref(back);
out:
    json_decref(out);
    sl_env_row_finish(&row);
    sl_env_errors_finish(&errs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    struct sl_env_errors errs = { 0 };
    struct sl_env_spec spec;
    int rc;

    if (!ready) {
        json_set_alloc_funcs(sl_malloc, sl_free);
        ready = true;
    }
    rc = sl_env_spec_parse(data, size, &spec, &errs);
    if (rc == 0) {
        SL_BUG_ON(errs.status != 0);
        store_and_render(&spec);
        sl_env_spec_finish(&spec);
    } else if (rc == SL_EPOLICY) {
        check_errors(&errs);
    } else {
        SL_BUG_ON(rc != SL_ENOMEM);
    }
    sl_env_errors_finish(&errs);
    return 0;
}
