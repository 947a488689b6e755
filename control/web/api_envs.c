/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/api_envs.c - environments (docs/reference/api.md §5.1) and static clients (§5.1b) of
 * the REST API: what a caller may see, create, replace and delete, each answered from the store in
 * the job (see api.c).
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "base/buf.h"
#include "base/mem.h"
#include "control/env/environment.h"
#include "control/web/api.h"
#include "control/web/api_int.h"

/* Longest static client id. */
#define CLIENT_ID_MAX 128

static void set_env_errors(struct sl__api_result *res, const struct sl_env_errors *errs)
{
    json_t *doc = NULL;

    if (sl_env_errors_render(errs, &doc) < 0) {
        sl__api_set_internal(res, "rendering errors", SL_ENOMEM);
        return;
    }
    sl__api_set_json(res, errs->status != 0 ? errs->status : 422, doc);
}

/* ---- environments ------------------------------------------------------------------------- */

static bool can_see(const struct sl__api_call *c, const struct sl_env_row *r)
{
    return r->scope == SL_SCOPE_GLOBAL || strcmp(r->owner_id, c->user.id) == 0;
}

/* Looks up the environment `key` (an id or a name) among those the caller sees: by id, or by
 * name among the caller's own first, then the global ones. Returns 0, SL_ENOTFOUND or an
 * error. */
int sl__api_find_visible(struct sl__api_call *c, const char *key, struct sl_env_row *out)
{
    int rc;

    if (sl__api_is_uuid_shaped(key)) {
        rc = sl_store_env_get(c->api->store, key, out);
        if (rc == 0 && !can_see(c, out)) {
            sl_env_row_finish(out);
            rc = SL_ENOTFOUND;
        }
        return rc;
    }
    rc = sl_store_env_get_by_name(c->api->store, SL_SCOPE_USER, c->user.id, key, out);
    if (rc == SL_ENOTFOUND) {
        rc = sl_store_env_get_by_name(c->api->store, SL_SCOPE_GLOBAL, NULL, key, out);
    }
    return rc;
}

const char *sl__api_owner_name(const struct sl__api_call *c, const struct sl_env_row *r)
{
    return r->scope == SL_SCOPE_USER ? c->user.name : NULL;
}

/* Answers the environment `r`, with the request's `warnings` (a JSON array, stolen; NULL: none)
 * beside its members. */
static void set_env_warned(struct sl__api_call *c, int status, const struct sl_env_row *r,
                           json_t *warnings)
{
    json_t *doc = NULL;
    int rc = sl_env_render(r, sl__api_owner_name(c, r), &c->sealer, &doc);

    if (rc == 0 && warnings != NULL) {
        rc = json_object_set_new(doc, "warnings", warnings) == 0 ? 0 : SL_ENOMEM;
        warnings = NULL;
    }
    json_decref(warnings);
    if (rc < 0) {
        json_decref(doc);
        sl__api_set_internal(c->res, "rendering an environment", rc);
        return;
    }
    sl__api_set_json(c->res, status, doc);
}

static void set_env(struct sl__api_call *c, int status, const struct sl_env_row *r)
{
    set_env_warned(c, status, r, NULL);
}

/* Answers a refusal of the store with its conflict. */
static void set_conflict(struct sl__api_call *c, int rc, const struct sl_store_conflict_info *ci,
                         const char *what)
{
    switch (ci->kind) {
    case SL_STORE_CONFLICT_NAME:
        sl__api_set_errorf(c->res, 409, "an environment named '%s' exists already in this scope",
                           ci->env_name != NULL ? ci->env_name : "");
        return;
    case SL_STORE_CONFLICT_REPO:
        sl__api_set_errorf(c->res, 409, "repository '%s' is bound by environment '%s' (%s)",
                           ci->repo != NULL ? ci->repo : "",
                           ci->env_name != NULL ? ci->env_name : "", ci->env_id);
        return;
    case SL_STORE_CONFLICT_ID:
        sl__api_set_error(c->res, 409, "an environment with this id exists already");
        return;
    case SL_STORE_CONFLICT_REPO_TWICE:
        sl__api_set_errorf(c->res, 422, "repository '%s' is listed twice",
                           ci->repo != NULL ? ci->repo : "");
        return;
    case SL_STORE_CONFLICT_IS_DEFAULT:
        sl__api_set_error(c->res, 409,
                          "this is the default environment; promote another first (set-default)");
        return;
    case SL_STORE_CONFLICT_NOT_GLOBAL:
        sl__api_set_error(c->res, 422, "only a global environment can be the default");
        return;
    case SL_STORE_CONFLICT_IN_USE:
        sl__api_set_error(c->res, 409, "static clients use this environment; delete them first");
        return;
    case SL_STORE_CONFLICT_NONE:
        break;
    }
    if (rc == SL_ENOTFOUND) {
        sl__api_set_error(c->res, 404, "no such environment");
        return;
    }
    sl__api_set_internal(c->res, what, rc);
}

static void env_list(struct sl__api_call *c)
{
    struct sl_env_row *rows = NULL;
    size_t n = 0;
    json_t *arr;
    int rc = sl_store_env_list_visible(c->api->store, c->user.id, &rows, &n);

    if (rc < 0) {
        sl__api_set_internal(c->res, "listing environments", rc);
        return;
    }
    arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        json_t *item = NULL;

        rc = sl_env_render_item(&rows[i], sl__api_owner_name(c, &rows[i]), &item);
        if (rc < 0 || json_array_append_new(arr, item) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    sl_store_free_envs(rows, n);
    if (arr == NULL) {
        sl__api_set_internal(c->res, "rendering environments", rc < 0 ? rc : SL_ENOMEM);
        return;
    }
    sl__api_set_json(c->res, 200, json_pack("{s:o}", "environments", arr));
}

/* Parses the body (or takes `doc`, borrowed, when not NULL) and builds the row for a POST (prev
 * NULL) or PUT. Returns true with `row` filled and `*warnings` the request's warnings (a new JSON
 * array, or NULL when there are none), or false with the answer set. */
static bool build_row(struct sl__api_call *c, const struct sl_env_row *prev, json_t *doc,
                      struct sl_env_row *row, json_t **warnings)
{
    struct sl_env_spec spec;
    struct sl_env_errors errs;
    int rc;

    *warnings = NULL;
    memset(&spec, 0, sizeof(spec));
    memset(&errs, 0, sizeof(errs));
    rc = doc != NULL ? sl_env_spec_from_json(doc, &spec, &errs)
                     : sl_env_spec_parse(c->req->body.p, c->req->body.n, &spec, &errs);
    if (rc == 0 && spec.n_warnings > 0) {
        rc = sl_env_warnings_render(spec.warnings, spec.n_warnings, warnings);
    }
    if (rc == 0 && !c->user.is_admin
        && (spec.scope == SL_SCOPE_GLOBAL || (prev != NULL && prev->scope == SL_SCOPE_GLOBAL))) {
        sl__api_set_error(c->res, 403, "only admins may create or change global environments");
        sl_env_spec_finish(&spec);
        json_decref(*warnings);
        *warnings = NULL;
        return false;
    }
    if (rc == 0) {
        rc = sl_env_spec_to_row(&spec, prev, &c->sealer, row, &errs);
    }
    sl_env_spec_finish(&spec);
    if (rc == SL_EPOLICY) {
        set_env_errors(c->res, &errs);
    } else if (rc < 0) {
        sl__api_set_internal(c->res, "building an environment", rc);
    }
    sl_env_errors_finish(&errs);
    if (rc < 0) {
        json_decref(*warnings);
        *warnings = NULL;
        sl_env_row_finish(row);
        return false;
    }
    (void)snprintf(row->owner_id, sizeof(row->owner_id), "%s",
                   row->scope == SL_SCOPE_USER ? c->user.id : "");
    return true;
}

void sl__api_env_write(struct sl__api_call *c, const struct sl_env_row *prev, json_t *doc)
{
    struct sl_env_row row;
    struct sl_store_conflict_info ci;
    json_t *warnings = NULL;
    int rc;

    memset(&row, 0, sizeof(row));
    memset(&ci, 0, sizeof(ci));
    if (!build_row(c, prev, doc, &row, &warnings)) {
        return;
    }
    if (prev != NULL) {
        (void)snprintf(row.id, sizeof(row.id), "%s", prev->id);
        rc = sl_store_env_replace(c->api->store, &row, &ci);
    } else {
        rc = sl_store_env_insert(c->api->store, &row, &ci);
    }
    if (rc == 0) {
        c->res->changed = true;
        set_env_warned(c, prev != NULL ? 200 : 201, &row, warnings);
        warnings = NULL;
    } else {
        set_conflict(c, rc, &ci,
                     prev != NULL ? "replacing an environment" : "creating an environment");
    }
    json_decref(warnings);
    sl_store_conflict_finish(&ci);
    sl_env_row_finish(&row);
}

static void env_create(struct sl__api_call *c)
{
    sl__api_env_write(c, NULL, NULL);
}

static void env_delete(struct sl__api_call *c, const struct sl_env_row *r)
{
    struct sl_store_conflict_info ci;
    int rc;

    if (r->scope == SL_SCOPE_GLOBAL && !c->user.is_admin) {
        sl__api_set_error(c->res, 403, "only admins may delete global environments");
        return;
    }
    memset(&ci, 0, sizeof(ci));
    rc = sl_store_env_delete(c->api->store, r->id, &ci);
    if (rc == 0) {
        c->res->changed = true;
        c->res->status = 204;
    } else {
        set_conflict(c, rc, &ci, "deleting an environment");
    }
    sl_store_conflict_finish(&ci);
}

static void env_set_default(struct sl__api_call *c, const struct sl_env_row *r)
{
    struct sl_store_conflict_info ci;
    struct sl_env_row now;
    int rc;

    if (!c->user.is_admin) {
        sl__api_set_error(c->res, 403, "only admins may choose the default environment");
        return;
    }
    if (r->scope != SL_SCOPE_GLOBAL) {
        sl__api_set_error(c->res, 422, "only a global environment can be the default");
        return;
    }
    memset(&ci, 0, sizeof(ci));
    memset(&now, 0, sizeof(now));
    rc = sl_store_env_set_default(c->api->store, r->id, &ci);
    if (rc == 0) {
        c->res->changed = true;
        rc = sl_store_env_get(c->api->store, r->id, &now);
        if (rc == 0) {
            set_env(c, 200, &now);
        } else {
            set_conflict(c, rc, &ci, "reading the new default");
        }
    } else {
        set_conflict(c, rc, &ci, "setting the default");
    }
    sl_env_row_finish(&now);
    sl_store_conflict_finish(&ci);
}

void sl__api_route_envs(struct sl__api_call *c, const char *tail)
{
    const char *m = c->req->method;
    char seg[SL__API_SEGMENT_MAX] = "";
    const char *rest = NULL;
    struct sl_env_row r;
    int rc;

    if (!sl__api_route_collection(c, tail, NULL, env_list, env_create, seg, &rest)) {
        return;
    }
    if (rest != NULL && strcmp(rest, "set-default") != 0 && !sl__api_is_learn_route(rest)) {
        sl__api_set_error(c->res, 404, "no such resource");
        return;
    }
    memset(&r, 0, sizeof(r));
    rc = sl__api_find_visible(c, seg, &r);
    if (!sl__api_store_ok(c->res, rc, "reading an environment", "no environment '%s'", seg)) {
        return;
    }
    if (rest == NULL && r.scope == SL_SCOPE_GLOBAL && !c->user.is_admin
        && (strcmp(m, "PUT") == 0 || strcmp(m, "DELETE") == 0)) {
        sl__api_set_error(c->res, 403, "only admins may change or delete global environments");
    } else if (rest != NULL && sl__api_is_learn_route(rest)) {
        sl__api_route_learn(c, &r, rest);
    } else if (rest != NULL) {
        if (strcmp(m, "POST") == 0) {
            env_set_default(c, &r);
        } else {
            sl__api_set_error(c->res, 405, "use POST");
        }
    } else if (strcmp(m, "GET") == 0) {
        set_env(c, 200, &r);
    } else if (strcmp(m, "PUT") == 0) {
        sl__api_env_write(c, &r, NULL);
    } else if (strcmp(m, "DELETE") == 0) {
        env_delete(c, &r);
    } else {
        sl__api_set_error(c->res, 405, "use GET, PUT or DELETE");
    }
    sl_env_row_finish(&r);
}

/* ---- static clients (§5.1b) --------------------------------------------------------------- */

static bool is_ip(const char *s)
{
    unsigned char buf[16];

    return uv_inet_pton(AF_INET, s, buf) == 0 || uv_inet_pton(AF_INET6, s, buf) == 0;
}

static bool is_cidr(const char *s)
{
    char addr[64];
    const char *slash = strchr(s, '/');
    unsigned char buf[16];
    unsigned long bits = 0;
    size_t alen;
    unsigned max;

    if (slash == NULL || slash[1] == '\0' || strlen(slash + 1) > 3) {
        return false;
    }
    alen = (size_t)(slash - s);
    if (alen == 0 || alen >= sizeof(addr)) {
        return false;
    }
    memcpy(addr, s, alen);
    addr[alen] = '\0';
    if (uv_inet_pton(AF_INET, addr, buf) == 0) {
        max = 32;
    } else if (uv_inet_pton(AF_INET6, addr, buf) == 0) {
        max = 128;
    } else {
        return false;
    }
    for (const char *p = slash + 1; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            return false;
        }
        bits = bits * 10 + (unsigned long)(*p - '0');
    }
    return bits <= max;
}

static bool is_client_id(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > CLIENT_ID_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
              || ch == '-' || ch == '_' || ch == '.')) {
            return false;
        }
    }
    return true;
}

/* The API form of a static client, never with its token. `env_name` may be NULL. */
static json_t *client_json(const struct sl_store_client *cl, const char *env_name)
{
    return json_pack("{s:s,s:s,s:s?,s:s?,s:s?,s:b,s:s}", "id", cl->id, "environment_id", cl->env_id,
                     "environment", env_name, "ip", cl->ip, "cidr", cl->cidr, "has_token",
                     cl->token_sealed != NULL, "created_at", cl->created_at);
}

/* The 422 of a static client's `field`: the message "FIELD: WHY" (as it always read) with the
 * errors list of every validation error (docs/reference/api.md "Errors"). */
static void client_invalid(struct sl__api_call *c, const char *field, const char *why)
{
    char text[320];

    (void)snprintf(text, sizeof(text), "%s: %s", field, why);
    sl__api_set_invalid(c->res, text, field, why);
}

/* Reads and checks the POST body; answers 400/422 itself. Returns true when valid. */
static bool parse_client(struct sl__api_call *c, json_t *root, const char **id, const char **ip,
                         const char **cidr, bool *token, const char **env)
{
    json_t *v;
    const char *key;
    json_t *tok;

    json_object_foreach(root, key, v)
    {
        if (strcmp(key, "id") != 0 && strcmp(key, "ip") != 0 && strcmp(key, "cidr") != 0
            && strcmp(key, "token") != 0 && strcmp(key, "environment") != 0) {
            char text[96];
            char field[80];

            (void)snprintf(text, sizeof(text), "unknown field '%.64s'", key);
            (void)snprintf(field, sizeof(field), "%.64s", key);
            sl__api_set_invalid(c->res, text, field,
                                "unknown field (expected id, environment, ip, cidr, token)");
            return false;
        }
    }
    *id = json_string_value(json_object_get(root, "id"));
    *ip = json_string_value(json_object_get(root, "ip"));
    *cidr = json_string_value(json_object_get(root, "cidr"));
    *env = json_string_value(json_object_get(root, "environment"));
    tok = json_object_get(root, "token");
    *token = json_is_true(tok);
    if (*id == NULL || !is_client_id(*id)) {
        client_invalid(c, "id", "1-128 letters, digits, '-', '_' or '.' required");
    } else if (*env == NULL || (*env)[0] == '\0') {
        client_invalid(c, "environment", "an environment id or name is required");
    } else if (tok != NULL && !json_is_boolean(tok)) {
        client_invalid(c, "token", "true or false");
    } else if (json_object_get(root, "ip") != NULL && (*ip == NULL || !is_ip(*ip))) {
        client_invalid(c, "ip", "an IPv4 or IPv6 address");
    } else if (json_object_get(root, "cidr") != NULL && (*cidr == NULL || !is_cidr(*cidr))) {
        client_invalid(c, "cidr", "an address block like 10.20.0.0/16");
    } else if ((*ip != NULL) + (*cidr != NULL) + *token != 1) {
        /* Named by the first of them that was given, or ip when none was. */
        sl__api_set_invalid(c->res, "give exactly one of ip, cidr and \"token\": true",
                            *ip != NULL || *cidr == NULL ? "ip" : "cidr",
                            "give exactly one of ip, cidr and \"token\": true");
    } else {
        return true;
    }
    return false;
}

/* Copies the fields of a new client into `cl` (owned strings; `sealed` may be NULL). Returns 0
 * or SL_ENOMEM. */
static int fill_client(struct sl_store_client *cl, const char *id, const char *ip, const char *cidr,
                       const char *sealed)
{
    cl->id = sl_strdup(id);
    cl->ip = ip != NULL ? sl_strdup(ip) : NULL;
    cl->cidr = cidr != NULL ? sl_strdup(cidr) : NULL;
    cl->token_sealed = sealed != NULL ? sl_strdup(sealed) : NULL;
    if (cl->id == NULL || (ip != NULL && cl->ip == NULL) || (cidr != NULL && cl->cidr == NULL)
        || (sealed != NULL && cl->token_sealed == NULL)) {
        return SL_ENOMEM;
    }
    return 0;
}

static void client_create(struct sl__api_call *c)
{
    struct sl_store_client cl;
    struct sl_env_row env;
    struct sl_buf sealed;
    char token[SL_TOKEN_SIZE] = "";
    const char *id, *ip, *cidr, *envname;
    bool want_token = false;
    json_t *root = sl__api_body_object(c);
    json_t *doc;
    int rc;

    memset(&cl, 0, sizeof(cl));
    memset(&env, 0, sizeof(env));
    sl_buf_init(&sealed, 4096);
    if (root == NULL) {
        goto out;
    }
    if (!parse_client(c, root, &id, &ip, &cidr, &want_token, &envname)) {
        goto out;
    }
    rc = sl__api_find_visible(c, envname, &env);
    if (rc == SL_ENOTFOUND) {
        char why[240];

        (void)snprintf(why, sizeof(why), "no environment '%.200s'", envname);
        client_invalid(c, "environment", why);
        goto out;
    }
    if (rc == 0 && want_token) {
        rc = sl_token_new(token);
        if (rc == 0) {
            rc = sl_secrets_seal(c->api->secrets, token, strlen(token), &sealed);
        }
    }
    if (rc == 0) {
        rc = fill_client(&cl, id, ip, cidr, want_token ? sl_buf_cstr(&sealed) : NULL);
    }
    if (rc == 0) {
        (void)snprintf(cl.env_id, sizeof(cl.env_id), "%s", env.id);
        rc = sl_store_client_create(c->api->store, &cl);
    }
    if (rc == SL_EEXIST) {
        sl__api_set_errorf(c->res, 409, "a static client '%s' exists already", id);
        goto out;
    }
    if (rc < 0) {
        sl__api_set_internal(c->res, "creating a static client", rc);
        goto out;
    }
    c->res->changed = true;
    /* The token is shown here once; only its sealed form is kept. */
    doc = client_json(&cl, env.name);
    sl__api_set_json(c->res, 201, want_token ? sl__api_with_token(doc, token) : doc);
out:
    sl_store_client_finish(&cl);
    sl_env_row_finish(&env);
    sl_buf_finish(&sealed);
    sodium_memzero(token, sizeof(token));
    json_decref(root);
}

static json_t *client_item(const void *item)
{
    const struct sl_store_client *cl = item;

    return client_json(cl, cl->env_name);
}

static void client_list(struct sl__api_call *c)
{
    struct sl_store_client *v = NULL;
    size_t n = 0;
    int rc = sl_store_client_list(c->api->store, &v, &n);

    sl__api_set_list(c->res, rc, "listing static clients", "clients", v, n, sizeof(*v),
                     client_item);
    sl_store_free_clients(v, n);
}

void sl__api_route_clients(struct sl__api_call *c, const char *tail)
{
    char seg[SL__API_SEGMENT_MAX] = "";
    int rc;

    if (!sl__api_route_collection(c, tail, "static clients are for admins only", client_list,
                                  client_create, seg, NULL)) {
        return;
    }
    if (strcmp(c->req->method, "DELETE") != 0) {
        sl__api_set_error(c->res, 405, "use DELETE");
        return;
    }
    rc = sl_store_client_delete(c->api->store, seg);
    if (sl__api_store_ok(c->res, rc, "deleting a static client", "no static client '%s'", seg)) {
        c->res->changed = true;
        /* Its token or address stops working: answered once every proxy knows. */
        c->res->revokes = true;
        c->res->status = 204;
    }
}
