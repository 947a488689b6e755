/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/api_audit.c - the audit tail of the REST API (GET /api/v1/audit): the newest lines
 * of the proxy's audit log that the caller may see and that pass the query's filters, each with
 * the suggestion of a refusal (control/web/audittail), and the admins' list of every sandbox.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/log.h"
#include "control/env/environment.h"
#include "control/web/api.h"
#include "control/web/api_int.h"
#include "control/web/audittail.h"

/* ---- the audit tail (GET /api/v1/audit) ------------------------------------------------- */

struct tail {
    const struct sl__api_call *c;
    const struct sl_audittail_filter *filter;
    json_t *entries;
    /* Environment ids already looked up: {"<id>":"<name>"} (owned). */
    json_t *names;
    /* The time of the oldest line looked at (owned; NULL before the first). */
    json_t *scanned_to;
    int rc;
};

/* The name of environment `id` (the proxy's audit lines carry the snapshot's key, the id), or
 * NULL when it is not an id or no longer exists. Borrowed from t->names. */
static const char *env_name_of(struct tail *t, const char *id)
{
    struct sl_env_row row;
    const char *name;

    if (id == NULL || !sl__api_is_uuid_shaped(id)) {
        return NULL;
    }
    /* Misses are cached too (as null): a deleted environment is looked up once. */
    if (json_object_get(t->names, id) == NULL) {
        memset(&row, 0, sizeof(row));
        (void)json_object_set_new(t->names, id,
                                  sl_store_env_get(t->c->api->store, id, &row) == 0
                                          ? json_string(row.name)
                                          : json_null());
        sl_env_row_finish(&row);
    }
    name = json_string_value(json_object_get(t->names, id));
    return name;
}

/* Admins see every line; others the lines of the sandboxes they created (a client id the
 * manager knows as theirs). Static clients are admins' (§5.1b). */
bool sl__api_may_see_line(const struct sl__api_call *c, const json_t *line)
{
    const char *client = json_string_value(json_object_get(line, "client"));
    const char *owner;

    if (c->user.is_admin) {
        return true;
    }
    if (client == NULL || c->owners == NULL) {
        return false;
    }
    owner = json_string_value(json_object_get(c->owners, client));
    return owner != NULL && strcmp(owner, c->user.id) == 0;
}

/* Parses one line the caller may see and that passes the filter: the line with
 * "environment_name" when its environment exists, or NULL (`*take` says whether to go on). */
static json_t *visible_line(struct tail *t, const char *line, size_t n,
                            enum sl_audittail_take *take, const char **env_name)
{
    json_t *entry = json_loadb(line, n, JSON_REJECT_DUPLICATES, NULL);
    const char *name;

    *take = SL_AUDITTAIL_SKIP;
    *env_name = NULL;
    if (t->rc < 0) {
        json_decref(entry);
        *take = SL_AUDITTAIL_STOP;
        return NULL;
    }
    if (!json_is_object(entry)) {
        json_decref(entry);
        return NULL;
    }
    if (json_is_string(json_object_get(entry, "ts"))) {
        json_decref(t->scanned_to);
        t->scanned_to = json_incref(json_object_get(entry, "ts"));
    }
    if (sl_audittail_filter_is_past(t->filter, entry)) {
        json_decref(entry);
        *take = SL_AUDITTAIL_STOP;
        return NULL;
    }
    if (!sl__api_may_see_line(t->c, entry)) {
        json_decref(entry);
        return NULL;
    }
    name = env_name_of(t, json_string_value(json_object_get(entry, "environment")));
    if (!sl_audittail_filter_match(t->filter, entry, name)) {
        json_decref(entry);
        return NULL;
    }
    if (name != NULL && json_object_set_new(entry, "environment_name", json_string(name)) < 0) {
        json_decref(entry);
        t->rc = SL_ENOMEM;
        *take = SL_AUDITTAIL_STOP;
        return NULL;
    }
    *env_name = name;
    return entry;
}

static enum sl_audittail_take on_audit_line(void *arg, const char *line, size_t n)
{
    struct tail *t = arg;
    char hint[1024];
    const char *name;
    enum sl_audittail_take take;
    json_t *entry = visible_line(t, line, n, &take, &name);
    int len;

    if (entry == NULL) {
        return take;
    }
    len = sl_audittail_suggest(entry, name, hint, sizeof(hint));
    if ((len > 0 && json_object_set_new(entry, "suggestion", json_string(hint)) < 0)
        || json_array_append_new(t->entries, entry) < 0) {
        t->rc = SL_ENOMEM;
        return SL_AUDITTAIL_STOP;
    }
    return SL_AUDITTAIL_COUNT;
}

/* The 422 of a query parameter: {"message":"PARAM: WHY","errors":[{"field":PARAM,"message":"must
 * be WHY"}]}. */
static void set_bad_param(struct sl__api_call *c, const char *param, const char *why)
{
    char message[160];
    char field[160];

    (void)snprintf(message, sizeof(message), "%s: %s", param, why);
    (void)snprintf(field, sizeof(field), "must be %s", why);
    sl__api_set_json(c->res, 422,
                     json_pack("{s:s,s:[{s:s,s:s}]}", "message", message, "errors", "field", param,
                               "message", field));
}

/* The filters of the query into `f` (zeroed by the caller). False with the 422 set. */
static bool parse_filter(struct sl__api_call *c, struct sl_audittail_filter *f)
{
    /* One byte more than a value may have: a longer one does not fit and is refused. */
    char value[SL_AUDITTAIL_FILTER_VALUE_MAX + 2];
    const char *why = "";
    const char *param = NULL;

    for (size_t i = 0; sl_audittail_filter_params[i] != NULL; i++) {
        int rc;

        param = sl_audittail_filter_params[i];
        rc = sl__api_query_get(c->req->query, param, value, sizeof(value));
        if (rc == SL_ENOTFOUND) {
            continue;
        }
        if (rc < 0) {
            why = strcmp(param, "since") == 0 || strcmp(param, "until") == 0
                          ? "an RFC 3339 UTC time such as 2026-11-30T02:00:00Z"
                          : "at most 512 bytes without control characters";
        }
        if (rc < 0 || sl_audittail_filter_set(f, param, value, &why) < 0) {
            set_bad_param(c, param, why);
            return false;
        }
    }
    if (sl_audittail_filter_check(f, &param, &why) < 0) {
        set_bad_param(c, param, why);
        return false;
    }
    return true;
}

_Static_assert(SL_AUDITTAIL_MAX == 500, "the 422 message of sl__api_audit_tail() names 500");

void sl__api_audit_tail(struct sl__api_call *c)
{
    char text[16] = "";
    unsigned long limit = SL_AUDITTAIL_DEFAULT;
    struct sl_audittail_filter filter;
    struct tail t = { c, &filter, NULL, NULL, NULL, 0 };
    bool cut = false;
    int rc = sl__api_query_get(c->req->query, "limit", text, sizeof(text));

    if (rc == 0) {
        char *end = NULL;

        limit = strtoul(text, &end, 10);
        if (text[0] < '0' || text[0] > '9' || end == NULL || *end != '\0' || limit == 0
            || limit > SL_AUDITTAIL_MAX) {
            rc = SL_EINVAL;
        }
    } else if (rc == SL_ENOTFOUND) {
        rc = 0;
    }
    if (rc < 0) {
        set_bad_param(c, "limit", "a whole number from 1 to 500");
        return;
    }
    memset(&filter, 0, sizeof(filter));
    if (!parse_filter(c, &filter)) {
        return;
    }
    t.entries = json_array();
    t.names = json_object();
    if (t.entries == NULL || t.names == NULL) {
        json_decref(t.entries);
        json_decref(t.names);
        sl__api_set_internal(c->res, "reading the audit log", SL_ENOMEM);
        return;
    }
    rc = c->api->audit_log == NULL
                 ? 0
                 : sl_audittail_read(c->api->audit_log, limit, SL_AUDITTAIL_LINE_MAX,
                                     SL_AUDITTAIL_BUDGET_BYTES, on_audit_line, &t, &cut);
    if (rc == 0) {
        rc = t.rc;
    }
    json_decref(t.names);
    if (rc < 0) {
        json_decref(t.entries);
        json_decref(t.scanned_to);
        sl_log(SL_LOG_WARN, 0, "msg=\"cannot read the audit log\" path=\"%s\" err=%s",
               c->api->audit_log, sl_strerror(rc));
        sl__api_set_error(c->res, 500, "the audit log cannot be read; see the control plane's log");
        return;
    }
    sl__api_set_json(c->res, 200,
                     json_pack("{s:o,s:b,s:b,s:o}", "entries", t.entries, "all", c->user.is_admin,
                               "truncated", cut, "scanned_to",
                               t.scanned_to != NULL ? t.scanned_to : json_null()));
}

/* GET /api/v1/sandboxes: the caller's open sandboxes in every repository (d->repo empty). */
void sl__api_list_all_sandboxes(struct sl__api_call *c)
{
    struct sl__api_defer *d = &c->res->defer;

    if (strcmp(c->req->method, "GET") != 0) {
        sl__api_set_error(c->res, 405, "use GET");
        return;
    }
    if (!sl__api_sandboxes_enabled(c)) {
        return;
    }
    (void)snprintf(d->user_id, sizeof(d->user_id), "%s", c->user.id);
    d->any_sandbox = c->user.is_admin;
    d->repo[0] = '\0';
    d->kind = SL__API_DEFER_LIST;
}
