/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/api_audit.c - the audit tail of the REST API (GET /api/v1/audit): the newest lines
 * of the proxy's audit log that the caller may see, each with the suggestion of a refusal
 * (control/web/audittail), and the admins' list of every sandbox.
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
    json_t *entries;
    /* Environment ids already looked up: {"<id>":"<name>"} (owned). */
    json_t *names;
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

static bool on_audit_line(void *arg, const char *line, size_t n)
{
    struct tail *t = arg;
    char hint[1024];
    const char *name;
    json_t *entry;
    int len;

    if (t->rc < 0) {
        return false;
    }
    entry = json_loadb(line, n, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(entry) || !sl__api_may_see_line(t->c, entry)) {
        json_decref(entry);
        return false;
    }
    name = env_name_of(t, json_string_value(json_object_get(entry, "environment")));
    if (name != NULL && json_object_set_new(entry, "environment_name", json_string(name)) < 0) {
        json_decref(entry);
        t->rc = SL_ENOMEM;
        return false;
    }
    len = sl_audittail_suggest(entry, name, hint, sizeof(hint));
    if ((len > 0 && json_object_set_new(entry, "suggestion", json_string(hint)) < 0)
        || json_array_append_new(t->entries, entry) < 0) {
        t->rc = SL_ENOMEM;
        return false;
    }
    return true;
}

_Static_assert(SL_AUDITTAIL_MAX == 500, "the 422 message of sl__api_audit_tail() names 500");

void sl__api_audit_tail(struct sl__api_call *c)
{
    char text[16] = "";
    unsigned long limit = SL_AUDITTAIL_DEFAULT;
    struct tail t = { c, NULL, NULL, 0 };
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
        sl__api_set_json(c->res, 422,
                         json_pack("{s:s,s:[{s:s,s:s}]}", "message",
                                   "limit: a whole number from 1 to 500", "errors", "field",
                                   "limit", "message", "must be a whole number from 1 to 500"));
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
                                     SL_AUDITTAIL_BUDGET_BYTES, on_audit_line, &t);
    if (rc == 0) {
        rc = t.rc;
    }
    json_decref(t.names);
    if (rc < 0) {
        json_decref(t.entries);
        sl_log(SL_LOG_WARN, 0, "msg=\"cannot read the audit log\" path=\"%s\" err=%s",
               c->api->audit_log, sl_strerror(rc));
        sl__api_set_error(c->res, 500, "the audit log cannot be read; see the control plane's log");
        return;
    }
    sl__api_set_json(c->res, 200,
                     json_pack("{s:o,s:b}", "entries", t.entries, "all", c->user.is_admin));
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
