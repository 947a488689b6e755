/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/env/environment_render.c - the API form of a stored environment (docs/reference/api.md
 * §5.1): secret values masked, other values opened, credentials without their value, and the names
 * of what no longer opens; the list entry without any value; and the error answer of a refused
 * request.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "base/buf.h"
#include "control/env/environment.h"
#include "control/env/environment_int.h"

/* ---- rendering ---------------------------------------------------------------------------- */

static int set_new(json_t *obj, const char *key, json_t *v)
{
    return json_object_set_new(obj, key, v) == 0 ? 0 : SL_ENOMEM;
}

/* Appends `name` to the array `list` unless it is there already. */
static int note_once(json_t *list, const char *name)
{
    size_t i;
    json_t *v;

    json_array_foreach(list, i, v)
    {
        if (strcmp(json_string_value(v), name) == 0) {
            return 0;
        }
    }
    return json_array_append_new(list, json_string(name)) == 0 ? 0 : SL_ENOMEM;
}

void sl_env_format_memory(int64_t bytes, char *buf, size_t cap)
{
    if (bytes % SL__ENV_GIB == 0) {
        (void)snprintf(buf, cap, "%lldGiB", (long long)(bytes / SL__ENV_GIB));
    } else {
        (void)snprintf(buf, cap, "%lldMiB", (long long)(bytes / SL__ENV_MIB));
    }
}

json_t *sl_env_cpus_json(int64_t cpus_centi)
{
    if (cpus_centi < 0) {
        return json_null();
    }
    return json_real((double)cpus_centi / 100.0);
}

static json_t *memory_json(int64_t bytes)
{
    char text[32];

    if (bytes < 0) {
        return json_null();
    }
    sl_env_format_memory(bytes, text, sizeof(text));
    return json_string(text);
}

/* Until when the environment is in observe (RFC 3339 UTC), or null when it is not now: an
 * observe_until in the past is over even before the deadline's sweep clears it. */
static json_t *observe_json(int64_t until)
{
    char text[32];
    time_t t = (time_t)until;
    struct tm tm;

    if (until <= (int64_t)time(NULL) || gmtime_r(&t, &tm) == NULL
        || strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        return json_null();
    }
    return json_string(text);
}

/* The value member of a rendered variable: opens `sealed`, notes it when it does not open. */
static int var_value(const char *name, bool secret, const char *sealed,
                     const struct sl_env_sealer *sealer, json_t *undecryptable, json_t *entry)
{
    struct sl_buf plain;
    json_t *v;
    int rc = sl__env_open_value(sealer, sealed, &plain);

    if (rc == 1) {
        rc = note_once(undecryptable, name);
        v = secret ? json_string(SL_ENV_MASK) : json_null();
    } else if (rc == 0) {
        v = secret ? json_string(SL_ENV_MASK) : json_stringn(sl_buf_cstr(&plain), plain.len);
    } else {
        v = NULL;
    }
    sl__env_finish_plain(&plain);
    if (rc == 0) {
        rc = set_new(entry, "value", v);
    } else {
        json_decref(v);
    }
    return rc;
}

int sl_env_render_var(const char *name, bool secret, const char *sealed,
                      const struct sl_env_sealer *sealer, json_t *undecryptable, json_t **out)
{
    json_t *entry = json_object();
    int rc = entry != NULL ? set_new(entry, "name", json_string(name)) : SL_ENOMEM;

    if (rc == 0 && sealer != NULL) {
        rc = var_value(name, secret, sealed, sealer, undecryptable, entry);
    }
    if (rc == 0) {
        rc = set_new(entry, "secret", json_boolean(secret));
    }
    if (rc != 0) {
        json_decref(entry);
        entry = NULL;
    }
    *out = entry;
    return rc;
}

/* One stored rule in API form; notes the host when its credential does not open. */
static int render_rule(json_t *stored, const struct sl_env_sealer *sealer, json_t *undecryptable,
                       json_t *rules)
{
    json_t *c = json_object_get(stored, "credential");
    const char *host = json_string_value(json_object_get(stored, "host"));
    json_t *rule =
            json_pack("{s:s, s:O}", "host", host, "methods", json_object_get(stored, "methods"));
    int rc;

    if (rule == NULL || json_array_append_new(rules, rule) != 0) {
        return SL_ENOMEM;
    }
    if (json_object_get(stored, "tls") != NULL) {
        /* Returned only when set, so that rules stored before the field read back unchanged. */
        SL_TRY(set_new(rule, "tls", json_string("passthrough")));
    }
    if (c == NULL) {
        return 0;
    }
    rc = set_new(rule, "credential",
                 json_pack("{s:s, s:b}", "header", json_string_value(json_object_get(c, "header")),
                           "has_value", true));
    if (rc == 0 && json_object_get(c, "placeholder_env") != NULL) {
        /* Returned only when set, as "tls": rules stored before the field read back as they
         * were. */
        rc = set_new(json_object_get(rule, "credential"), "placeholder_env",
                     json_incref(json_object_get(c, "placeholder_env")));
    }
    if (rc == 0 && sealer != NULL) {
        rc = sl__env_still_opens(sealer, json_string_value(json_object_get(c, "sealed")));
        rc = rc < 0 ? rc : rc == 1 ? 0 : note_once(undecryptable, host);
    }
    return rc;
}

int sl_env_render_egress(const char *egress_json, const struct sl_env_sealer *sealer,
                         json_t *undecryptable, json_t **out)
{
    json_t *stored = NULL;
    json_t *rules = json_array();
    json_t *r;
    size_t i;
    int rc = egress_json != NULL ? sl__env_load_egress(egress_json, &stored) : 0;

    *out = NULL;
    if (rc == 0 && egress_json == NULL) {
        json_decref(rules);
        *out = json_null();
        return 0;
    }
    if (rc == 0) {
        *out = json_pack("{s:O, s:o}", "default", json_object_get(stored, "default"), "rules",
                         rules);
        rules = NULL;
        rc = *out != NULL ? 0 : SL_ENOMEM;
    }
    json_array_foreach(json_object_get(stored, "rules"), i, r)
    {
        if (rc == 0) {
            rc = render_rule(r, sealer, undecryptable, json_object_get(*out, "rules"));
        }
    }
    json_decref(rules);
    json_decref(stored);
    if (rc != 0) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}

static int render_vars(const struct sl_env_row *row, const struct sl_env_sealer *sealer,
                       json_t *undecryptable, json_t *obj)
{
    json_t *stored = NULL;
    json_t *list = json_array();
    json_t *v;
    size_t i;
    int rc = set_new(obj, "env", list);

    if (rc == 0) {
        rc = sl_env_load_vars(row->env_json, &stored);
    }
    json_array_foreach(stored, i, v)
    {
        json_t *entry = NULL;

        if (rc == 0) {
            rc = sl_env_render_var(json_string_value(json_object_get(v, "name")),
                                   json_is_true(json_object_get(v, "secret")),
                                   json_string_value(json_object_get(v, "sealed")), sealer,
                                   undecryptable, &entry);
        }
        if (rc == 0 && json_array_append_new(list, entry) != 0) {
            rc = SL_ENOMEM;
        }
    }
    json_decref(stored);
    return rc;
}

static int render_repos(const struct sl_env_row *row, json_t *obj)
{
    json_t *list = json_array();
    int rc = set_new(obj, "repositories", list);

    for (size_t i = 0; i < row->n_repos && rc == 0; i++) {
        rc = json_array_append_new(list, json_string(row->repos[i])) == 0 ? 0 : SL_ENOMEM;
    }
    return rc;
}

/* The members before "env", in the order of docs/reference/api.md §5.1. */
static json_t *render_head(const struct sl_env_row *row, const char *owner_name)
{
    json_t *stored = NULL;
    json_t *registry = json_null();
    json_t *head;

    /* The password never leaves: the username and has_value. A damaged record shows as none. */
    if (row->registry_json != NULL && sl_env_load_registry(row->registry_json, &stored) == 0) {
        registry = json_pack("{s:O, s:b}", "username", json_object_get(stored, "username"),
                             "has_value", true);
    }
    json_decref(stored);
    head = json_pack("{s:s, s:s, s:s, s:s, s:o, s:b, s:s, s:s, s:o, s:o, s:o, s:s}", "id", row->id,
                     "name", row->name, "description",
                     row->description != NULL ? row->description : "", "scope",
                     row->scope == SL_SCOPE_GLOBAL ? "global" : "user", "owner",
                     owner_name != NULL ? json_string(owner_name) : json_null(), "is_default",
                     row->is_default, "base_image", row->base_image, "image_pull",
                     row->image_pull_always ? "always" : "if-missing", "registry_auth", registry,
                     "cpus", sl_env_cpus_json(row->cpus_centi), "memory",
                     memory_json(row->memory_bytes), "network", row->network ? "on" : "off");
    return head;
}

static int render(const struct sl_env_row *row, const char *owner_name,
                  const struct sl_env_sealer *sealer, json_t **out)
{
    json_t *obj = render_head(row, owner_name);
    json_t *undecryptable = json_array();
    json_t *egress = NULL;
    int rc = obj != NULL && undecryptable != NULL ? 0 : SL_ENOMEM;

    if (rc == 0) {
        rc = render_vars(row, sealer, undecryptable, obj);
    }
    if (rc == 0) {
        rc = sl_env_render_egress(row->egress_json, sealer, undecryptable, &egress);
    }
    if (rc == 0) {
        rc = set_new(obj, "egress", egress);
    }
    if (rc == 0) {
        rc = render_repos(row, obj);
    }
    if (rc == 0) {
        rc = set_new(obj, "created_at", json_string(row->created_at));
    }
    if (rc == 0) {
        rc = set_new(obj, "updated_at", json_string(row->updated_at));
    }
    if (rc == 0) {
        rc = set_new(obj, "observe_until", observe_json(row->observe_until));
    }
    if (rc == 0 && json_array_size(undecryptable) > 0) {
        rc = set_new(obj, "undecryptable", json_incref(undecryptable));
    }
    json_decref(undecryptable);
    if (rc != 0) {
        json_decref(obj);
        obj = NULL;
    }
    *out = obj;
    return rc;
}

int sl_env_render(const struct sl_env_row *row, const char *owner_name,
                  const struct sl_env_sealer *sealer, json_t **out)
{
    return render(row, owner_name, sealer, out);
}

int sl_env_render_item(const struct sl_env_row *row, const char *owner_name, json_t **out)
{
    return render(row, owner_name, NULL, out);
}

int sl_env_warnings_render(const struct sl_errlist_item *w, size_t n, json_t **out)
{
    json_t *list = json_array();
    int rc = list != NULL ? 0 : SL_ENOMEM;

    for (size_t i = 0; i < n && rc == 0; i++) {
        json_t *item = json_pack("{s:s, s:s}", "field", w[i].path, "message", w[i].message);

        rc = json_array_append_new(list, item) == 0 ? 0 : SL_ENOMEM;
    }
    if (rc != 0) {
        json_decref(list);
        list = NULL;
    }
    *out = list;
    return rc;
}

int sl_env_errors_render(const struct sl_env_errors *e, json_t **out)
{
    json_t *obj = json_pack("{s:s}", "message", e->message);
    json_t *list = NULL;
    int rc = obj != NULL ? 0 : SL_ENOMEM;

    if (rc == 0 && e->count > 0) {
        list = json_array();
        rc = set_new(obj, "errors", list);
    }
    for (size_t i = 0; i < e->count && rc == 0; i++) {
        json_t *item =
                json_pack("{s:s, s:s}", "field", e->items[i].path, "message", e->items[i].message);

        rc = json_array_append_new(list, item) == 0 ? 0 : SL_ENOMEM;
    }
    if (rc != 0) {
        json_decref(obj);
        obj = NULL;
    }
    *out = obj;
    return rc;
}
