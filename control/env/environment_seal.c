/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/env/environment_seal.c - the stored form of an environment (docs/control-plane.md):
 * the shape checks of a stored env_json and egress_json, the sealing of every value on its own,
 * and keep-on-resave, which takes a value the request masks or leaves out from the row it
 * replaces (see sl_env_spec_to_row() in environment.h).
 */
#include <string.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/mem.h"
#include "control/env/environment.h"
#include "control/env/environment_int.h"

/* ---- stored JSON -------------------------------------------------------------------------- */

/* Parses stored JSON. Returns 0, SL_EIO (damaged) or SL_ENOMEM. jansson reports some
 * allocation failures as syntax errors, so under memory pressure SL_EIO may stand for
 * SL_ENOMEM; both mean "answer 500", and neither is ever read as "nothing stored". */
static int load_stored(const char *text, json_t **out)
{
    json_error_t jerr;

    *out = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (*out != NULL) {
        return 0;
    }
    return json_error_code(&jerr) == json_error_out_of_memory ? SL_ENOMEM : SL_EIO;
}

static bool is_string_member(json_t *obj, const char *key)
{
    return json_is_string(json_object_get(obj, key));
}

int sl_env_load_vars(const char *env_json, json_t **out)
{
    size_t i;
    json_t *v;

    *out = NULL;
    SL_TRY(load_stored(env_json, out));
    if (!json_is_array(*out)) {
        goto fail_damaged;
    }
    json_array_foreach(*out, i, v)
    {
        if (!is_string_member(v, "name") || !is_string_member(v, "sealed")
            || !json_is_boolean(json_object_get(v, "secret"))) {
            goto fail_damaged;
        }
    }
    return 0;
fail_damaged:
    json_decref(*out);
    *out = NULL;
    return SL_EIO;
}

/* A stored rule has no `tls` (intercept) or "tls":"passthrough" without methods or credential. */
static bool stored_tls_ok(json_t *r)
{
    json_t *tls = json_object_get(r, "tls");

    return tls == NULL
           || (json_is_string(tls) && strcmp(json_string_value(tls), "passthrough") == 0
               && json_array_size(json_object_get(r, "methods")) == 0
               && json_object_get(r, "credential") == NULL);
}

static bool stored_rule_ok(json_t *r)
{
    json_t *methods = json_object_get(r, "methods");
    json_t *c = json_object_get(r, "credential");
    size_t i;
    json_t *m;

    if (!is_string_member(r, "host") || !json_is_array(methods)) {
        return false;
    }
    json_array_foreach(methods, i, m)
    {
        if (!json_is_string(m)) {
            return false;
        }
    }
    if (!stored_tls_ok(r)) {
        return false;
    }
    return c == NULL
           || (is_string_member(c, "header") && is_string_member(c, "sealed")
               && (json_object_get(c, "placeholder_env") == NULL
                   || is_string_member(c, "placeholder_env")));
}

/* Parses a stored egress_json and checks its shape. Same results as load_stored(). */
int sl__env_load_egress(const char *egress_json, json_t **out)
{
    json_t *rules;
    size_t i;
    json_t *r;

    SL_TRY(load_stored(egress_json, out));
    rules = json_object_get(*out, "rules");
    if (!is_string_member(*out, "default") || !json_is_array(rules)) {
        goto fail_damaged;
    }
    json_array_foreach(rules, i, r)
    {
        if (!stored_rule_ok(r)) {
            goto fail_damaged;
        }
    }
    return 0;
fail_damaged:
    json_decref(*out);
    *out = NULL;
    return SL_EIO;
}

struct dump {
    struct sl_buf buf;
    int rc;
};

static int on_dump(const char *s, size_t n, void *arg)
{
    struct dump *d = arg;

    d->rc = sl_buf_append(&d->buf, s, n);
    return d->rc == 0 ? 0 : -1;
}

/* Serialises `j` compactly into a new sl_malloc'd string of at most `max` bytes. Returns 0,
 * SL_ETOOBIG or SL_ENOMEM. Going through a capped sl_buf keeps jansson's allocator out of the
 * row's strings, which are freed with sl_free. */
static int dump_json(json_t *j, size_t max, char **out)
{
    struct dump d = { .rc = 0 };
    int rc = 0;

    sl_buf_init(&d.buf, max);
    if (json_dump_callback(j, on_dump, &d, JSON_COMPACT) != 0) {
        rc = d.rc != 0 ? d.rc : SL_ENOMEM;
    } else if ((*out = sl_strndup(sl_buf_cstr(&d.buf), d.buf.len)) == NULL) {
        rc = SL_ENOMEM;
    }
    sl_buf_finish(&d.buf);
    return rc;
}

/* ---- sealing and keep-on-resave ----------------------------------------------------------- */

/* Seals `n` bytes into `out` (initialised here; the caller finishes it on success). Returns 0,
 * SL_ETOOBIG (the sealed text alone is past SL_ENV_SEALED_MAX), SL_ENOMEM, SL_ECRYPTO (the
 * sealer wrote something that is not printable ASCII) or the sealer's own error. */
static int seal_value(const struct sl_env_sealer *s, const void *v, size_t n, struct sl_buf *out)
{
    int rc;

    sl_buf_init(out, SL_ENV_SEALED_MAX);
    rc = s->seal(s->arg, v, n, out);
    for (size_t i = 0; rc == 0 && i < out->len; i++) {
        if (out->p[i] < 0x20 || out->p[i] > 0x7e) {
            rc = SL_ECRYPTO;
        }
    }
    if (rc == 0 && out->len == 0) {
        rc = SL_ECRYPTO;
    }
    if (rc != 0) {
        sl_buf_finish(out);
    }
    return rc;
}

/* Opens `sealed` into `plain` (initialised here; finish it with sl__env_finish_plain()). Returns 0
 * when it opens, 1 when it does not, SL_ENOMEM. */
int sl__env_open_value(const struct sl_env_sealer *s, const char *sealed, struct sl_buf *plain)
{
    int rc;

    sl_buf_init(plain, SL_ENV_SEALED_MAX);
    rc = s->open(s->arg, sealed, strlen(sealed), plain);
    if (rc == SL_ENOMEM) {
        return rc;
    }
    return rc == 0 ? 0 : 1;
}

void sl__env_finish_plain(struct sl_buf *plain)
{
    if (plain->p != NULL) {
        sl__env_wipe(plain->p, plain->len);
    }
    sl_buf_finish(plain);
}

/* 1 when the sealed text still opens, 0 when not, or SL_ENOMEM. */
int sl__env_still_opens(const struct sl_env_sealer *s, const char *sealed)
{
    struct sl_buf plain;
    int rc = sl__env_open_value(s, sealed, &plain);

    sl__env_finish_plain(&plain);
    return rc < 0 ? rc : rc == 0;
}

/* A kept value that does not open: 409, as docs/reference/api.md §5.1 asks for undecryptable
 * values. */
static void conflict(struct sl__env_parse *p, const char *key)
{
    p->n_conflicts++;
    sl__env_key_error(
            p, key,
            "the stored value no longer decrypts (the encryption key changed): give it anew");
}

static json_t *find_var(json_t *vars, const char *name)
{
    size_t i;
    json_t *v;

    json_array_foreach(vars, i, v)
    {
        if (strcmp(json_string_value(json_object_get(v, "name")), name) == 0) {
            return v;
        }
    }
    return NULL;
}

static int append_var(json_t *arr, const struct sl_env_var *v, const char *sealed)
{
    json_t *entry =
            json_pack("{s:s, s:b, s:s}", "name", v->name, "secret", v->secret, "sealed", sealed);

    return json_array_append_new(arr, entry) == 0 ? 0 : SL_ENOMEM;
}

/* Seals (or keeps) one variable at path env[i]; *too_big is set when its sealed form alone
 * exceeds the cap. Returns 0 (problems become errors), SL_ENOMEM or the sealer's error. */
static int seal_var(struct sl__env_parse *p, const struct sl_env_var *v, json_t *stored,
                    const struct sl_env_sealer *sealer, json_t *arr, bool *too_big)
{
    json_t *old = stored != NULL ? find_var(stored, v->name) : NULL;
    const char *kept = old != NULL ? json_string_value(json_object_get(old, "sealed")) : NULL;
    struct sl_buf b;
    int rc;

    if (v->masked && v->secret) {
        if (kept == NULL) {
            sl__env_key_error(p, "value",
                              "\"******\" keeps the stored value, but there is none for this name: "
                              "give the value");
            return 0;
        }
        rc = sl__env_still_opens(sealer, kept);
        if (rc <= 0) {
            if (rc == 0) {
                conflict(p, "value");
            }
            return rc;
        }
        return append_var(arr, v, kept);
    }
    if (v->masked && old != NULL && json_is_true(json_object_get(old, "secret"))) {
        sl__env_key_error(
                p, "value",
                "the stored value is secret: send the value itself to make it non-secret");
        return 0;
    }
    rc = seal_value(sealer, v->value, v->value_len, &b);
    if (rc == SL_ETOOBIG) {
        *too_big = true;
        return 0;
    }
    SL_TRY(rc);
    rc = append_var(arr, v, sl_buf_cstr(&b));
    sl_buf_finish(&b);
    return rc;
}

static int seal_vars(struct sl__env_parse *p, const struct sl_env_spec *spec, json_t *stored,
                     const struct sl_env_sealer *sealer, char **out)
{
    json_t *arr = json_array();
    size_t mark = sl__env_path_key(p, "env");
    size_t errors = p->n_errors;
    bool too_big = false;
    int rc = arr != NULL ? 0 : SL_ENOMEM;

    for (size_t i = 0; i < spec->n_vars && rc == 0; i++) {
        size_t m = sl__env_path_index(p, i);

        rc = seal_var(p, &spec->vars[i], stored, sealer, arr, &too_big);
        sl__env_path_pop(p, m);
    }
    if (rc == 0 && !too_big && p->n_errors == errors) {
        rc = dump_json(arr, SL_ENV_SEALED_MAX, out);
        too_big = rc == SL_ETOOBIG;
        rc = too_big ? 0 : rc;
    }
    if (too_big) {
        sl__env_add_error(p, "the variables take more than 32768 bytes (32 KiB) sealed");
    }
    sl__env_path_pop(p, mark);
    json_decref(arr);
    return rc;
}

/* The sealed credential value that rule `i` keeps: the k-th credential for its host in the
 * stored rules, where k counts the request's earlier credential rules for that host. */
static const char *stored_credential(json_t *stored, const struct sl_env_spec *spec, size_t i)
{
    const char *host = spec->rules[i].host;
    size_t k = 0;
    size_t j;
    json_t *r;

    for (j = 0; j < i; j++) {
        k += spec->rules[j].header != NULL && spec->rules[j].host != NULL
             && strcmp(spec->rules[j].host, host) == 0;
    }
    json_array_foreach(json_object_get(stored, "rules"), j, r)
    {
        json_t *c = json_object_get(r, "credential");

        if (c != NULL && strcmp(json_string_value(json_object_get(r, "host")), host) == 0) {
            if (k == 0) {
                return json_string_value(json_object_get(c, "sealed"));
            }
            k--;
        }
    }
    return NULL;
}

/* The credential of rule `i` as stored, {"header","sealed"}, into `entry`; `*total` adds up
 * the sealed values. Returns 0 (problems become errors), SL_ENOMEM or the sealer's error. */
static int seal_credential(struct sl__env_parse *p, const struct sl_env_spec *spec, size_t i,
                           json_t *stored, const struct sl_env_sealer *sealer, json_t *entry,
                           size_t *total)
{
    const struct sl_env_rule *r = &spec->rules[i];
    const char *kept = NULL;
    struct sl_buf b = { NULL, 0, 0, 0 };
    size_t mark = sl__env_path_key(p, "credential");
    int rc = 0;

    if (r->value != NULL) {
        rc = seal_value(sealer, r->value, r->value_len, &b);
        if (rc == SL_ETOOBIG) {
            *total += SL_ENV_SEALED_MAX + 1;
            rc = 0;
        } else if (rc == 0) {
            kept = sl_buf_cstr(&b);
        }
    } else if (stored != NULL && (kept = stored_credential(stored, spec, i)) != NULL) {
        rc = sl__env_still_opens(sealer, kept);
        if (rc == 0) {
            conflict(p, "value");
            kept = NULL;
        }
        rc = rc < 0 ? rc : 0;
    } else {
        sl__env_key_error(p, "value",
                          stored != NULL
                                  ? "no stored credential for this host to keep: give the value"
                                  : "required field missing");
    }
    sl__env_path_pop(p, mark);
    if (rc == 0 && kept != NULL) {
        *total += strlen(kept);
        json_t *c = json_pack("{s:s, s:s}", "header", r->header, "sealed", kept);

        if (c != NULL && r->placeholder_env != NULL
            && json_object_set_new(c, "placeholder_env", json_string(r->placeholder_env)) != 0) {
            json_decref(c);
            c = NULL;
        }
        if (json_object_set_new(entry, "credential", c) != 0) {
            rc = SL_ENOMEM;
        }
    }
    sl_buf_finish(&b);
    return rc;
}

static int seal_rule(struct sl__env_parse *p, const struct sl_env_spec *spec, size_t i,
                     json_t *stored, const struct sl_env_sealer *sealer, json_t *rules,
                     size_t *total)
{
    const struct sl_env_rule *r = &spec->rules[i];
    json_t *methods = json_array();
    json_t *entry = json_pack("{s:s, s:o}", "host", r->host, "methods", methods);

    if (entry == NULL || json_array_append_new(rules, entry) != 0) {
        return SL_ENOMEM;
    }
    for (size_t m = 0; m < r->n_methods; m++) {
        if (json_array_append_new(methods, json_string(r->methods[m])) != 0) {
            return SL_ENOMEM;
        }
    }
    if (r->passthrough && json_object_set_new(entry, "tls", json_string("passthrough")) != 0) {
        return SL_ENOMEM;
    }
    if (r->header == NULL) {
        return 0;
    }
    return seal_credential(p, spec, i, stored, sealer, entry, total);
}

static int seal_egress(struct sl__env_parse *p, const struct sl_env_spec *spec, json_t *stored,
                       const struct sl_env_sealer *sealer, char **out)
{
    json_t *rules = json_array();
    json_t *doc = json_pack("{s:s, s:o}", "default", spec->egress_allow ? "allow" : "deny", "rules",
                            rules);
    size_t mark = sl__env_path_key(p, "egress");
    size_t mark_rules = sl__env_path_key(p, "rules");
    size_t errors = p->n_errors;
    size_t total = 0;
    int rc = doc != NULL ? 0 : SL_ENOMEM;

    for (size_t i = 0; i < spec->n_rules && rc == 0; i++) {
        size_t m = sl__env_path_index(p, i);

        rc = seal_rule(p, spec, i, stored, sealer, rules, &total);
        sl__env_path_pop(p, m);
    }
    if (rc == 0 && total > SL_ENV_SEALED_MAX) {
        sl__env_add_error(p, "the credential values take more than 32768 bytes (32 KiB) sealed");
    }
    sl__env_path_pop(p, mark_rules);
    if (rc == 0 && p->n_errors == errors) {
        /* Bounded by the limits: 100 rules of a host, 32 methods and a credential. */
        rc = dump_json(doc, (size_t)1 << 20, out);
    }
    sl__env_path_pop(p, mark);
    json_decref(doc);
    return rc;
}

/* Parses a stored registry_json, {"username","sealed"}. Same results as load_stored(). */
int sl_env_load_registry(const char *registry_json, json_t **out)
{
    SL_TRY(load_stored(registry_json, out));
    if (!is_string_member(*out, "username") || !is_string_member(*out, "sealed")) {
        json_decref(*out);
        *out = NULL;
        return SL_EIO;
    }
    return 0;
}

/* True when both image references are pulled from one registry. */
static bool same_registry(const char *a, const char *b)
{
    char ra[256];
    char rb[256];

    sl_env_image_registry(a, ra, sizeof(ra));
    sl_env_image_registry(b, rb, sizeof(rb));
    return strcmp(ra, rb) == 0;
}

/* registry_json of the row: the request's username with its password sealed, or the stored
 * sealed password kept (it must be there and still open). Returns 0 (problems become errors),
 * SL_EIO (the stored one is damaged), SL_ENOMEM or the sealer's error. */
static int seal_registry(struct sl__env_parse *p, const struct sl_env_spec *spec,
                         const struct sl_env_row *prev, const struct sl_env_sealer *sealer,
                         char **out)
{
    struct sl_buf b = { NULL, 0, 0, 0 };
    json_t *stored = NULL;
    json_t *doc = NULL;
    const char *sealed = NULL;
    size_t mark;
    int rc = 0;

    if (!spec->has_registry) {
        return 0;
    }
    mark = sl__env_path_key(p, "registry_auth");
    if (spec->registry_password != NULL) {
        rc = seal_value(sealer, spec->registry_password, spec->registry_password_len, &b);
        sealed = rc == 0 ? sl_buf_cstr(&b) : NULL;
    } else if (prev != NULL && prev->registry_json != NULL
               && !same_registry(prev->base_image, spec->base_image)) {
        /* A password goes to the registry it was given for, never to another one. */
        sl__env_key_error(p, "password",
                          "base_image names another registry than the stored password's: give "
                          "the password");
    } else if (prev != NULL && prev->registry_json != NULL) {
        rc = sl_env_load_registry(prev->registry_json, &stored);
        sealed = rc == 0 ? json_string_value(json_object_get(stored, "sealed")) : NULL;
        rc = sealed != NULL ? sl__env_still_opens(sealer, sealed) : rc;
        if (rc == 0) {
            conflict(p, "password");
            sealed = NULL;
        }
        rc = rc < 0 ? rc : 0;
    } else {
        sl__env_key_error(p, "password",
                          prev != NULL ? "no stored password to keep: give the password"
                                       : "required field missing");
    }
    if (rc == 0 && sealed != NULL) {
        doc = json_pack("{s:s, s:s}", "username", spec->registry_username, "sealed", sealed);
        rc = doc != NULL ? dump_json(doc, (size_t)1 << 16, out) : SL_ENOMEM;
    }
    sl__env_path_pop(p, mark);
    json_decref(doc);
    json_decref(stored);
    sl_buf_finish(&b);
    return rc;
}

/* The members of `row` that sl_env_spec_to_row() fills, without the sealed JSON. */
static int copy_plain(const struct sl_env_spec *spec, struct sl_env_row *row)
{
    row->name = sl_strdup(spec->name);
    row->description = sl_strdup(spec->description);
    row->base_image = sl_strdup(spec->base_image);
    SL_ENSURE(row->name != NULL && row->description != NULL && row->base_image != NULL, SL_ENOMEM);
    row->scope = spec->scope;
    row->cpus_centi = spec->cpus_centi;
    row->memory_bytes = spec->memory_bytes;
    row->network = spec->network;
    row->image_pull_always = spec->image_pull_always;
    if (spec->n_repos > 0) {
        row->repos = sl_calloc(spec->n_repos, sizeof(*row->repos));
        SL_ENSURE(row->repos != NULL, SL_ENOMEM);
    }
    for (size_t i = 0; i < spec->n_repos; i++) {
        row->repos[i] = sl_strdup(spec->repos[i]);
        SL_ENSURE(row->repos[i] != NULL, SL_ENOMEM);
        row->n_repos++;
    }
    return 0;
}

static void free_filled(struct sl_env_row *row)
{
    sl_free(row->name);
    sl_free(row->description);
    sl_free(row->base_image);
    sl_free(row->env_json);
    sl_free(row->egress_json);
    sl_free(row->registry_json);
    row->registry_json = NULL;
    for (size_t i = 0; i < row->n_repos; i++) {
        sl_free(row->repos[i]);
    }
    sl_free(row->repos);
    row->name = row->description = row->base_image = row->env_json = row->egress_json = NULL;
    row->repos = NULL;
    row->n_repos = 0;
}

/* Does the request keep anything of the row it replaces (or need to know whether a variable
 * was secret)? */
static bool needs_previous(const struct sl_env_spec *spec)
{
    for (size_t i = 0; i < spec->n_vars; i++) {
        if (spec->vars[i].masked) {
            return true;
        }
    }
    for (size_t i = 0; spec->network && i < spec->n_rules; i++) {
        if (spec->rules[i].header != NULL && spec->rules[i].value == NULL) {
            return true;
        }
    }
    return false;
}

/* The previous row's variables and egress as JSON, loaded only when the request keeps
 * something, so that a PUT giving every value anew replaces a damaged row. Returns 0,
 * SL_EIO (damaged) or SL_ENOMEM. */
static int load_previous(const struct sl_env_spec *spec, const struct sl_env_row *prev,
                         json_t **vars, json_t **egress)
{
    *vars = NULL;
    *egress = NULL;
    if (prev == NULL || !needs_previous(spec)) {
        return 0;
    }
    SL_TRY(sl_env_load_vars(prev->env_json != NULL ? prev->env_json : "[]", vars));
    if (prev->egress_json != NULL) {
        int rc = sl__env_load_egress(prev->egress_json, egress);

        if (rc != 0) {
            json_decref(*vars);
            *vars = NULL;
            return rc;
        }
    }
    return 0;
}

int sl_env_spec_to_row(const struct sl_env_spec *spec, const struct sl_env_row *prev,
                       const struct sl_env_sealer *sealer, struct sl_env_row *row,
                       struct sl_env_errors *errs)
{
    struct sl__env_parse p = { .errs = errs };
    json_t *vars = NULL;
    json_t *egress = NULL;
    int rc;

    sl_env_errors_finish(errs);
    rc = load_previous(spec, prev, &vars, &egress);
    if (rc == 0) {
        rc = copy_plain(spec, row);
    }
    if (rc == 0) {
        rc = seal_vars(&p, spec, vars, sealer, &row->env_json);
    }
    if (rc == 0 && spec->network) {
        rc = seal_egress(&p, spec, egress, sealer, &row->egress_json);
    }
    if (rc == 0) {
        rc = seal_registry(&p, spec, prev, sealer, &row->registry_json);
    }
    json_decref(vars);
    json_decref(egress);
    rc = rc != 0 ? rc : p.rc;
    if (rc == 0 && p.n_errors > 0) {
        if (p.n_errors == p.n_conflicts) {
            sl__env_refuse(errs, 409,
                           "stored values no longer decrypt (the encryption key changed): "
                           "give them anew");
        } else {
            sl__env_refuse(errs, 422, "the environment is invalid");
        }
        rc = SL_EPOLICY;
    }
    if (rc != 0) {
        free_filled(row);
    }
    if (rc != 0 && rc != SL_EPOLICY) {
        sl_env_errors_finish(errs);
    }
    return rc;
}
