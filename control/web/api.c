/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/api.c - routes, authentication and JSON errors of the REST API (SPEC.md §5).
 *
 * Each request is one thread-pool job: the job owns copies of what it needs from the request
 * and a result (status and body text); the loop only queues jobs and answers exchanges.
 */
#include "control/web/api.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <sodium.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "control/env/environment.h"
#include "control/env/resolve.h"
#include "control/jobs/jobs.h"
#include "control/sandbox/sandbox.h"
#include "control/store/model.h"
#include "control/web/audittail.h"
#include "control/web/dashboard.h"
#include "control/web/mcp.h"

#define ENVS_PREFIX    "/api/v1/environments"
#define CLIENTS_PREFIX "/api/v1/clients"
#define REPOS_PREFIX   "/api/v1/repos/"
#define AUDIT_PATH     "/api/v1/audit"
/* Longest path segment or query value we decode (names are at most 128 code points). */
#define SEGMENT_MAX 1024
/* Longest static client id. */
#define CLIENT_ID_MAX 128

enum defer_kind {
    DEFER_NONE = 0,
    DEFER_CREATE,
    DEFER_CALL,
    DEFER_LIST,
    DEFER_MCP,
};

struct defer {
    enum defer_kind kind;
    /* DEFER_CREATE: the prepared create (owned). */
    struct sl_sandbox_spec *spec;
    char user_id[SL_UUID_LEN + 1];
    bool is_admin;
    char repo[SEGMENT_MAX];
    char id[SEGMENT_MAX];
    char action[16];
    /* DEFER_CALL: the parsed body (owned; NULL when empty). */
    json_t *body;
    /* DEFER_MCP: the prepared MCP message (owned). */
    struct sl_mcp_plan *mcp;
};

/* The answer a job builds. */
struct result {
    int status;
    /* JSON text (sl_malloc'd via jansson) or NULL for no body. */
    char *body;
    /* The job committed a change. */
    bool changed;
    /* The job queued jobs (control/jobs/jobs). */
    bool jobs_queued;
    /* A document the loop completes (status) before it becomes `body`; owned. */
    json_t *doc;
    /* Sandbox work the loop finishes (the manager lives there); the exchange is answered by
     * the manager's reply. */
    struct defer defer;
};

struct job {
    uv_work_t work;
    struct sl_api *api;
    /* The exchange to answer; NULL for a request of sl_api_dispatch(), answered by `reply`. */
    struct sl_http_exchange *x;
    sl_api_reply_fn *reply;
    void *reply_arg;
    /* Borrowed from the exchange, which stays valid until it is answered; or `&ireq`. */
    const struct sl_http_request *req;
    /* The request of sl_api_dispatch() (`head` is NULL: such a request has no headers), and
     * the copies its pointers point to, owned. */
    struct sl_http_request ireq;
    char *own_method;
    char *own_path;
    char *own_query;
    char *own_body;
    /* The Authorization header's value, copied (NULL when absent). */
    char *auth;
    /* GET /api/v1/audit: {"<sandbox id>":"<owner id>"} taken on the loop (owned; NULL when
     * sandboxes are off or for other requests). */
    json_t *owners;
    struct result res;
};

/* What a job knows about its caller and its store. */
struct call {
    struct sl_api *api;
    const struct sl_http_request *req;
    struct sl_user user;
    struct sl_env_sealer sealer;
    struct result *res;
    /* Borrowed from the job. */
    const json_t *owners;
};

/* ---- results ------------------------------------------------------------------------------ */

/* Takes ownership of `doc`. */
static void set_json(struct result *res, int status, json_t *doc)
{
    res->status = status;
    sl_free(res->body);
    res->body = NULL;
    if (doc == NULL) {
        res->status = 500;
        return;
    }
    res->body = json_dumps(doc, SL_ENV_JSON_FLAGS);
    json_decref(doc);
    if (res->body == NULL) {
        res->status = 500;
    }
}

static void set_error(struct result *res, int status, const char *message)
{
    set_json(res, status, json_pack("{s:s}", "message", message));
}

static void set_errorf(struct result *res, int status, const char *fmt, ...) SL_PRINTF(3, 4);

static void set_errorf(struct result *res, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    set_error(res, status, msg);
}

static void set_internal(struct result *res, const char *what, int rc)
{
    sl_log(SL_LOG_ERROR, 0, "msg=\"API request failed\" during=\"%s\" err=%s", what,
           sl_strerror(rc));
    set_error(res, rc == SL_ENOMEM ? 503 : 500, "internal error; see the control plane's log");
}

static void set_env_errors(struct result *res, const struct sl_env_errors *errs)
{
    json_t *doc = NULL;

    if (sl_env_errors_render(errs, &doc) < 0) {
        set_internal(res, "rendering errors", SL_ENOMEM);
        return;
    }
    set_json(res, errs->status != 0 ? errs->status : 422, doc);
}

/* ---- sealing through control/store/secrets --------------------------------------------------- */

static int seal_value(void *arg, const void *p, size_t n, struct sl_buf *out)
{
    return sl_secrets_seal(arg, p, n, out);
}

static int open_value(void *arg, const char *sealed, size_t n, struct sl_buf *out)
{
    return sl_secrets_open(arg, sealed, n, out);
}

/* ---- small parsers ------------------------------------------------------------------------ */

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* Percent-decodes `n` bytes of `s` into `out` (`cap` bytes); '+' is a space when `plus`.
 * Returns 0, or SL_EINVAL for a bad escape, a NUL byte or a value too long. */
static int decode(const char *s, size_t n, bool plus, char *out, size_t cap)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];

        if (c == '%') {
            int hi;
            int lo;

            if (i + 2 >= n) {
                return SL_EINVAL;
            }
            hi = hex_value(s[i + 1]);
            lo = hex_value(s[i + 2]);
            if (hi < 0 || lo < 0) {
                return SL_EINVAL;
            }
            c = hi * 16 + lo;
            i += 2;
        } else if (c == '+' && plus) {
            c = ' ';
        }
        if (c == 0 || o + 1 >= cap) {
            return SL_EINVAL;
        }
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return 0;
}

/* Finds `key` in the query string and decodes its value into `out`. Returns 0, SL_ENOTFOUND
 * or SL_EINVAL. */
static int query_get(const char *query, const char *key, char *out, size_t cap)
{
    size_t klen = strlen(key);
    const char *p = query;

    while (*p != '\0') {
        const char *end = strchr(p, '&');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);

        if (len > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            return decode(p + klen + 1, len - klen - 1, true, out, cap);
        }
        p += len;
        if (*p == '&') {
            p++;
        }
    }
    return SL_ENOTFOUND;
}

/* Splits the part of a path after a prefix: "" (nothing), "/SEG" or "/SEG/REST". Returns
 * false when the path has another shape. */
static bool split_tail(const char *tail, char *seg, size_t cap, const char **rest)
{
    const char *slash;

    *rest = NULL;
    seg[0] = '\0';
    if (*tail == '\0') {
        return true;
    }
    if (*tail != '/' || tail[1] == '\0') {
        return false;
    }
    tail++;
    slash = strchr(tail, '/');
    if (decode(tail, slash != NULL ? (size_t)(slash - tail) : strlen(tail), false, seg, cap) < 0
        || seg[0] == '\0') {
        return false;
    }
    if (slash != NULL) {
        *rest = slash + 1;
    }
    return true;
}

static bool is_uuid_shaped(const char *s)
{
    if (strlen(s) != SL_UUID_LEN) {
        return false;
    }
    for (size_t i = 0; i < SL_UUID_LEN; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;

        if (dash ? s[i] != '-' : hex_value(s[i]) < 0) {
            return false;
        }
    }
    return true;
}

/* ---- environments ------------------------------------------------------------------------- */

static bool can_see(const struct call *c, const struct sl_env_row *r)
{
    return r->scope == SL_SCOPE_GLOBAL || strcmp(r->owner_id, c->user.id) == 0;
}

/* Looks up the environment `key` (an id or a name) among those the caller sees: by id, or by
 * name among the caller's own first, then the global ones. Returns 0, SL_ENOTFOUND or an
 * error. */
static int find_visible(struct call *c, const char *key, struct sl_env_row *out)
{
    int rc;

    if (is_uuid_shaped(key)) {
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

static const char *owner_name(const struct call *c, const struct sl_env_row *r)
{
    return r->scope == SL_SCOPE_USER ? c->user.name : NULL;
}

static void set_env(struct call *c, int status, const struct sl_env_row *r)
{
    json_t *doc = NULL;
    int rc = sl_env_render(r, owner_name(c, r), &c->sealer, &doc);

    if (rc < 0) {
        set_internal(c->res, "rendering an environment", rc);
        return;
    }
    set_json(c->res, status, doc);
}

/* Answers a refusal of the store with its conflict. */
static void set_conflict(struct call *c, int rc, const struct sl_store_conflict_info *ci,
                         const char *what)
{
    switch (ci->kind) {
    case SL_STORE_CONFLICT_NAME:
        set_errorf(c->res, 409, "an environment named '%s' exists already in this scope",
                   ci->env_name != NULL ? ci->env_name : "");
        return;
    case SL_STORE_CONFLICT_REPO:
        set_errorf(c->res, 409, "repository '%s' is bound by environment '%s' (%s)",
                   ci->repo != NULL ? ci->repo : "", ci->env_name != NULL ? ci->env_name : "",
                   ci->env_id);
        return;
    case SL_STORE_CONFLICT_ID:
        set_error(c->res, 409, "an environment with this id exists already");
        return;
    case SL_STORE_CONFLICT_REPO_TWICE:
        set_errorf(c->res, 422, "repository '%s' is listed twice",
                   ci->repo != NULL ? ci->repo : "");
        return;
    case SL_STORE_CONFLICT_IS_DEFAULT:
        set_error(c->res, 409,
                  "this is the default environment; promote another first (set-default)");
        return;
    case SL_STORE_CONFLICT_NOT_GLOBAL:
        set_error(c->res, 422, "only a global environment can be the default");
        return;
    case SL_STORE_CONFLICT_IN_USE:
        set_error(c->res, 409, "static clients use this environment; delete them first");
        return;
    case SL_STORE_CONFLICT_NONE:
        break;
    }
    if (rc == SL_ENOTFOUND) {
        set_error(c->res, 404, "no such environment");
        return;
    }
    set_internal(c->res, what, rc);
}

static void env_list(struct call *c)
{
    struct sl_env_row *rows = NULL;
    size_t n = 0;
    json_t *arr;
    int rc = sl_store_env_list_visible(c->api->store, c->user.id, &rows, &n);

    if (rc < 0) {
        set_internal(c->res, "listing environments", rc);
        return;
    }
    arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        json_t *item = NULL;

        rc = sl_env_render_item(&rows[i], owner_name(c, &rows[i]), &item);
        if (rc < 0 || json_array_append_new(arr, item) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    sl_store_free_envs(rows, n);
    if (arr == NULL) {
        set_internal(c->res, "rendering environments", rc < 0 ? rc : SL_ENOMEM);
        return;
    }
    set_json(c->res, 200, json_pack("{s:o}", "environments", arr));
}

/* Parses the body and builds the row for a POST (prev NULL) or PUT. Returns true with `row`
 * filled, or false with the answer set. */
static bool build_row(struct call *c, const struct sl_env_row *prev, struct sl_env_row *row)
{
    struct sl_env_spec spec;
    struct sl_env_errors errs;
    int rc;

    memset(&spec, 0, sizeof(spec));
    memset(&errs, 0, sizeof(errs));
    rc = sl_env_spec_parse(c->req->body.p, c->req->body.n, &spec, &errs);
    if (rc == 0 && !c->user.is_admin
        && (spec.scope == SL_SCOPE_GLOBAL || (prev != NULL && prev->scope == SL_SCOPE_GLOBAL))) {
        set_error(c->res, 403, "only admins may create or change global environments");
        sl_env_spec_finish(&spec);
        return false;
    }
    if (rc == 0) {
        rc = sl_env_spec_to_row(&spec, prev, &c->sealer, row, &errs);
    }
    sl_env_spec_finish(&spec);
    if (rc == SL_EPOLICY) {
        set_env_errors(c->res, &errs);
    } else if (rc < 0) {
        set_internal(c->res, "building an environment", rc);
    }
    sl_env_errors_finish(&errs);
    if (rc < 0) {
        sl_env_row_finish(row);
        return false;
    }
    (void)snprintf(row->owner_id, sizeof(row->owner_id), "%s",
                   row->scope == SL_SCOPE_USER ? c->user.id : "");
    return true;
}

static void env_create(struct call *c)
{
    struct sl_env_row row;
    struct sl_store_conflict_info ci;
    int rc;

    memset(&row, 0, sizeof(row));
    memset(&ci, 0, sizeof(ci));
    if (!build_row(c, NULL, &row)) {
        return;
    }
    rc = sl_store_env_insert(c->api->store, &row, &ci);
    if (rc == 0) {
        c->res->changed = true;
        set_env(c, 201, &row);
    } else {
        set_conflict(c, rc, &ci, "creating an environment");
    }
    sl_store_conflict_finish(&ci);
    sl_env_row_finish(&row);
}

static void env_replace(struct call *c, const struct sl_env_row *prev)
{
    struct sl_env_row row;
    struct sl_store_conflict_info ci;
    int rc;

    memset(&row, 0, sizeof(row));
    memset(&ci, 0, sizeof(ci));
    if (!build_row(c, prev, &row)) {
        return;
    }
    (void)snprintf(row.id, sizeof(row.id), "%s", prev->id);
    rc = sl_store_env_replace(c->api->store, &row, &ci);
    if (rc == 0) {
        c->res->changed = true;
        set_env(c, 200, &row);
    } else {
        set_conflict(c, rc, &ci, "replacing an environment");
    }
    sl_store_conflict_finish(&ci);
    sl_env_row_finish(&row);
}

static void env_delete(struct call *c, const struct sl_env_row *r)
{
    struct sl_store_conflict_info ci;
    int rc;

    if (r->scope == SL_SCOPE_GLOBAL && !c->user.is_admin) {
        set_error(c->res, 403, "only admins may delete global environments");
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

static void env_set_default(struct call *c, const struct sl_env_row *r)
{
    struct sl_store_conflict_info ci;
    struct sl_env_row now;
    int rc;

    if (!c->user.is_admin) {
        set_error(c->res, 403, "only admins may choose the default environment");
        return;
    }
    if (r->scope != SL_SCOPE_GLOBAL) {
        set_error(c->res, 422, "only a global environment can be the default");
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

static void route_envs(struct call *c, const char *tail)
{
    const char *m = c->req->method;
    char seg[SEGMENT_MAX] = "";
    const char *rest;
    struct sl_env_row r;
    int rc;

    if (!split_tail(tail, seg, sizeof(seg), &rest)) {
        set_error(c->res, 404, "no such resource");
        return;
    }
    if (seg[0] == '\0') {
        if (strcmp(m, "GET") == 0) {
            env_list(c);
        } else if (strcmp(m, "POST") == 0) {
            env_create(c);
        } else {
            set_error(c->res, 405, "use GET or POST");
        }
        return;
    }
    if (rest != NULL && strcmp(rest, "set-default") != 0) {
        set_error(c->res, 404, "no such resource");
        return;
    }
    memset(&r, 0, sizeof(r));
    rc = find_visible(c, seg, &r);
    if (rc == SL_ENOTFOUND) {
        set_errorf(c->res, 404, "no environment '%s'", seg);
        return;
    }
    if (rc < 0) {
        set_internal(c->res, "reading an environment", rc);
        return;
    }
    if (rest == NULL && r.scope == SL_SCOPE_GLOBAL && !c->user.is_admin
        && (strcmp(m, "PUT") == 0 || strcmp(m, "DELETE") == 0)) {
        set_error(c->res, 403, "only admins may change or delete global environments");
    } else if (rest != NULL) {
        if (strcmp(m, "POST") == 0) {
            env_set_default(c, &r);
        } else {
            set_error(c->res, 405, "use POST");
        }
    } else if (strcmp(m, "GET") == 0) {
        set_env(c, 200, &r);
    } else if (strcmp(m, "PUT") == 0) {
        env_replace(c, &r);
    } else if (strcmp(m, "DELETE") == 0) {
        env_delete(c, &r);
    } else {
        set_error(c->res, 405, "use GET, PUT or DELETE");
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

/* Reads and checks the POST body; answers 400/422 itself. Returns true when valid. */
static bool parse_client(struct call *c, json_t *root, const char **id, const char **ip,
                         const char **cidr, bool *token, const char **env)
{
    json_t *v;
    const char *key;
    json_t *tok;

    json_object_foreach(root, key, v)
    {
        if (strcmp(key, "id") != 0 && strcmp(key, "ip") != 0 && strcmp(key, "cidr") != 0
            && strcmp(key, "token") != 0 && strcmp(key, "environment") != 0) {
            set_errorf(c->res, 422, "unknown field '%.64s'", key);
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
        set_error(c->res, 422, "id: 1-128 letters, digits, '-', '_' or '.' required");
    } else if (*env == NULL || (*env)[0] == '\0') {
        set_error(c->res, 422, "environment: an environment id or name is required");
    } else if (tok != NULL && !json_is_boolean(tok)) {
        set_error(c->res, 422, "token: true or false");
    } else if (json_object_get(root, "ip") != NULL && (*ip == NULL || !is_ip(*ip))) {
        set_error(c->res, 422, "ip: an IPv4 or IPv6 address");
    } else if (json_object_get(root, "cidr") != NULL && (*cidr == NULL || !is_cidr(*cidr))) {
        set_error(c->res, 422, "cidr: an address block like 10.20.0.0/16");
    } else if ((*ip != NULL) + (*cidr != NULL) + *token != 1) {
        set_error(c->res, 422, "give exactly one of ip, cidr and \"token\": true");
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

static void client_create(struct call *c)
{
    struct sl_store_client cl;
    struct sl_env_row env;
    struct sl_buf sealed;
    char token[SL_TOKEN_SIZE] = "";
    const char *id, *ip, *cidr, *envname;
    bool want_token = false;
    json_error_t jerr;
    json_t *root =
            json_loadb((const char *)c->req->body.p, c->req->body.n, JSON_REJECT_DUPLICATES, &jerr);
    json_t *doc;
    int rc;

    memset(&cl, 0, sizeof(cl));
    memset(&env, 0, sizeof(env));
    sl_buf_init(&sealed, 4096);
    if (root == NULL || !json_is_object(root)) {
        set_error(c->res, 400, "the body must be a JSON object");
        goto out;
    }
    if (!parse_client(c, root, &id, &ip, &cidr, &want_token, &envname)) {
        goto out;
    }
    rc = find_visible(c, envname, &env);
    if (rc == SL_ENOTFOUND) {
        set_errorf(c->res, 422, "environment: no environment '%.200s'", envname);
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
        set_errorf(c->res, 409, "a static client '%s' exists already", id);
        goto out;
    }
    if (rc < 0) {
        set_internal(c->res, "creating a static client", rc);
        goto out;
    }
    c->res->changed = true;
    /* The token is shown here once; only its sealed form is kept. */
    doc = client_json(&cl, env.name);
    if (doc != NULL && want_token && json_object_set_new(doc, "token", json_string(token)) < 0) {
        json_decref(doc);
        doc = NULL;
    }
    set_json(c->res, 201, doc);
out:
    sl_store_client_finish(&cl);
    sl_env_row_finish(&env);
    sl_buf_finish(&sealed);
    sodium_memzero(token, sizeof(token));
    json_decref(root);
}

static void client_list(struct call *c)
{
    struct sl_store_client *v = NULL;
    size_t n = 0;
    json_t *arr;
    int rc = sl_store_client_list(c->api->store, &v, &n);

    if (rc < 0) {
        set_internal(c->res, "listing static clients", rc);
        return;
    }
    arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        if (json_array_append_new(arr, client_json(&v[i], v[i].env_name)) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    sl_store_free_clients(v, n);
    set_json(c->res, 200, arr != NULL ? json_pack("{s:o}", "clients", arr) : NULL);
}

static void route_clients(struct call *c, const char *tail)
{
    const char *m = c->req->method;
    char seg[SEGMENT_MAX] = "";
    const char *rest;
    int rc;

    if (!split_tail(tail, seg, sizeof(seg), &rest) || rest != NULL) {
        set_error(c->res, 404, "no such resource");
        return;
    }
    if (!c->user.is_admin) {
        set_error(c->res, 403, "static clients are for admins only");
        return;
    }
    if (seg[0] == '\0') {
        if (strcmp(m, "GET") == 0) {
            client_list(c);
        } else if (strcmp(m, "POST") == 0) {
            client_create(c);
        } else {
            set_error(c->res, 405, "use GET or POST");
        }
        return;
    }
    if (strcmp(m, "DELETE") != 0) {
        set_error(c->res, 405, "use DELETE");
        return;
    }
    rc = sl_store_client_delete(c->api->store, seg);
    if (rc == SL_ENOTFOUND) {
        set_errorf(c->res, 404, "no static client '%s'", seg);
    } else if (rc < 0) {
        set_internal(c->res, "deleting a static client", rc);
    } else {
        c->res->changed = true;
        c->res->status = 204;
    }
}

/* ---- resolution (§5.2) -------------------------------------------------------------------- */

/* Loads one candidate; a missing one is fine. */
static int load_candidate(int rc, struct sl_env_row *row, const struct sl_env_row **cands,
                          size_t *n)
{
    if (rc == SL_ENOTFOUND) {
        return 0;
    }
    if (rc == 0) {
        cands[(*n)++] = row;
    }
    return rc;
}

/* Loads the candidates for `repo` (and the explicit choice `envkey`, NULL for none) into
 * `rows` (4, zeroed; the caller finishes them) and resolves. Returns 0 with `*out` filled,
 * SL_ENOTFOUND (the explicit environment is not visible), SL_EINVAL (bad repo) or another
 * failure. */
static int resolve_for(struct call *c, const char *repo, const char *envkey, bool webhook,
                       struct sl_env_row rows[4], struct sl_resolve_result *out)
{
    const struct sl_env_row *cands[3];
    struct sl_resolve_request rq;
    size_t n = 0;
    int rc = 0;

    memset(&rq, 0, sizeof(rq));
    rq.webhook = webhook;
    if (envkey != NULL) {
        rc = find_visible(c, envkey, &rows[3]);
        if (rc < 0) {
            return rc;
        }
        rq.explicit_env = &rows[3];
    }
    rc = load_candidate(
            sl_store_env_find_by_repo(c->api->store, SL_SCOPE_USER, c->user.id, repo, &rows[0]),
            &rows[0], cands, &n);
    if (rc == 0) {
        rc = load_candidate(
                sl_store_env_find_by_repo(c->api->store, SL_SCOPE_GLOBAL, NULL, repo, &rows[1]),
                &rows[1], cands, &n);
    }
    if (rc == 0) {
        rc = load_candidate(sl_store_env_get_default(c->api->store, &rows[2]), &rows[2], cands, &n);
    }
    rq.user_id = c->user.id;
    rq.is_admin = c->user.is_admin;
    rq.repo = repo;
    rq.candidates = cands;
    rq.n_candidates = n;
    rq.default_image = c->api->default_image;
    if (rc == 0) {
        rc = sl_resolve_run(&rq, out);
    }
    return rc;
}

static void resolve(struct call *c)
{
    char repo[SEGMENT_MAX] = "";
    char envkey[SEGMENT_MAX] = "";
    char trigger[32] = "";
    struct sl_env_row rows[4];
    struct sl_resolve_result out;
    bool webhook;
    bool named;
    json_t *doc = NULL;
    int rc;

    memset(rows, 0, sizeof(rows));
    memset(&out, 0, sizeof(out));
    if (query_get(c->req->query, "repo", repo, sizeof(repo)) < 0
        || !sl_env_repo_is_valid(repo, strlen(repo))) {
        set_error(c->res, 400, "repo: a repository path like owner/name is required");
        return;
    }
    rc = query_get(c->req->query, "trigger", trigger, sizeof(trigger));
    if (rc == 0 && strcmp(trigger, "webhook") != 0) {
        set_error(c->res, 400, "trigger: only 'webhook' is known");
        return;
    }
    webhook = rc == 0;
    rc = query_get(c->req->query, "environment", envkey, sizeof(envkey));
    if (rc == SL_EINVAL) {
        set_error(c->res, 400, "environment: malformed");
        return;
    }
    named = rc == 0;
    rc = resolve_for(c, repo, named ? envkey : NULL, webhook, rows, &out);
    if (rc == 0) {
        rc = sl_resolve_render(&out, repo, &c->sealer, &doc);
    }
    if (rc == 0) {
        set_json(c->res, 200, doc);
    } else if (rc == SL_ENOTFOUND) {
        set_errorf(c->res, 404, "no environment '%s'", envkey);
    } else if (rc == SL_EINVAL) {
        set_error(c->res, 400, "repo: a repository path like owner/name is required");
    } else {
        set_internal(c->res, "resolving", rc);
    }
    sl_resolve_finish(&out);
    for (size_t i = 0; i < SL_ARRAY_LEN(rows); i++) {
        sl_env_row_finish(&rows[i]);
    }
}

/* ---- sandboxes (§5.3): prepared here, finished by control/sandbox/sandbox on the loop -------- */

/* Opens one sealed value into a new string (NULL when it does not open). */
static char *open_string(struct call *c, const char *sealed)
{
    struct sl_buf plain;
    char *s = NULL;

    sl_buf_init(&plain, 64 * 1024);
    if (c->sealer.open(c->sealer.arg, sealed, strlen(sealed), &plain) == 0) {
        s = sl_strndup(plain.p != NULL ? (const char *)plain.p : "", plain.len);
    }
    if (plain.p != NULL) {
        sodium_memzero(plain.p, plain.len);
    }
    sl_buf_finish(&plain);
    return s;
}

static int push_str(char ***v, size_t *n, char *s)
{
    char **grown;

    if (s == NULL) {
        return SL_ENOMEM;
    }
    grown = sl_realloc(*v, (*n + 1) * sizeof(char *));
    if (grown == NULL) {
        sodium_memzero(s, strlen(s));
        sl_free(s);
        return SL_ENOMEM;
    }
    grown[(*n)++] = s;
    *v = grown;
    return 0;
}

/* The variables (opened; values that do not open are dropped with a warning, SPEC §5.1) and
 * the secrets to redact (secret variables and the chosen environment's credentials). */
static int fill_values(struct call *c, const struct sl_resolve_result *r,
                       struct sl_sandbox_spec *spec)
{
    json_t *egress = NULL;
    json_t *rule;
    size_t i;
    int rc = 0;

    for (i = 0; rc == 0 && i < r->n_vars; i++) {
        char *value = open_string(c, r->vars[i].sealed);
        char *kv;
        size_t n;

        if (value == NULL) {
            sl_log(SL_LOG_WARN, 0,
                   "msg=\"a variable does not open (encryption key changed?); the sandbox starts "
                   "without it\" name=%s",
                   r->vars[i].name);
            continue;
        }
        n = strlen(r->vars[i].name) + 1 + strlen(value) + 1;
        kv = sl_malloc(n);
        if (kv != NULL) {
            (void)snprintf(kv, n, "%s=%s", r->vars[i].name, value);
        }
        rc = push_str(&spec->env, &spec->n_env, kv);
        if (rc == 0 && r->vars[i].secret) {
            rc = push_str(&spec->secrets, &spec->n_secrets, value);
            value = NULL;
        }
        if (value != NULL) {
            sodium_memzero(value, strlen(value));
            sl_free(value);
        }
    }
    if (rc == 0 && r->egress_json != NULL) {
        egress = json_loads(r->egress_json, 0, NULL);
    }
    json_array_foreach(json_object_get(egress, "rules"), i, rule)
    {
        const json_t *sealed = json_object_get(json_object_get(rule, "credential"), "sealed");
        char *value;

        if (rc < 0 || !json_is_string(sealed)) {
            continue;
        }
        value = open_string(c, json_string_value(sealed));
        if (value != NULL) {
            rc = push_str(&spec->secrets, &spec->n_secrets, value);
        }
    }
    json_decref(egress);
    return rc;
}

/* Resolves the environment for `repo` (`envkey` NULL resolves, else it must be visible) and
 * builds the create of a sandbox for the caller. Returns 0 with `*specp` (and `*envp`, when
 * not NULL: {"id","name","matched_by"}, ids null for none), SL_ENOTFOUND (the environment is
 * not visible) or another failure. */
static int prepare_spec(struct call *c, const char *repo, const char *ref, const char *envkey,
                        struct sl_sandbox_spec **specp, json_t **envp)
{
    struct sl_env_row rows[4];
    struct sl_resolve_result out;
    struct sl_sandbox_spec *spec = NULL;
    int rc;

    memset(rows, 0, sizeof(rows));
    memset(&out, 0, sizeof(out));
    rc = resolve_for(c, repo, envkey, false, rows, &out);
    if (rc == 0) {
        spec = sl_calloc(1, sizeof(*spec));
        rc = spec != NULL ? 0 : SL_ENOMEM;
    }
    if (rc == 0) {
        spec->owner_id = sl_strdup(c->user.id);
        spec->owner_name = sl_strdup(c->user.name);
        spec->repo = sl_strdup(repo);
        spec->ref = ref != NULL ? sl_strdup(ref) : NULL;
        spec->env_id = out.chosen != NULL ? sl_strdup(out.chosen->id) : NULL;
        spec->env_name = out.chosen != NULL ? sl_strdup(out.chosen->name) : NULL;
        spec->image = sl_strdup(out.base_image);
        spec->cpus_centi = out.cpus_centi;
        spec->memory_bytes = out.memory_bytes;
        if (spec->owner_id == NULL || spec->owner_name == NULL || spec->repo == NULL
            || (ref != NULL && spec->ref == NULL) || spec->image == NULL
            || (out.chosen != NULL && (spec->env_id == NULL || spec->env_name == NULL))) {
            rc = SL_ENOMEM;
        }
    }
    if (rc == 0) {
        rc = fill_values(c, &out, spec);
    }
    if (rc == 0 && envp != NULL) {
        *envp = json_pack("{s:s?, s:s?, s:s}", "id", out.chosen != NULL ? out.chosen->id : NULL,
                          "name", out.chosen != NULL ? out.chosen->name : NULL, "matched_by",
                          sl_resolve_matched_by_name(out.matched_by));
        rc = *envp != NULL ? 0 : SL_ENOMEM;
    }
    if (rc < 0) {
        sl_sandbox_spec_free(spec);
    } else {
        *specp = spec;
    }
    sl_resolve_finish(&out);
    for (size_t i = 0; i < SL_ARRAY_LEN(rows); i++) {
        sl_env_row_finish(&rows[i]);
    }
    return rc;
}

static void sandbox_create(struct call *c, const char *repo)
{
    json_error_t jerr;
    json_t *body = NULL;
    const json_t *ref;
    const json_t *env;
    struct sl_sandbox_spec *spec = NULL;
    int rc;

    if (c->req->body.n > 0) {
        body = json_loadb((const char *)c->req->body.p, c->req->body.n, JSON_REJECT_DUPLICATES,
                          &jerr);
        if (!json_is_object(body)) {
            json_decref(body);
            set_error(c->res, 400, "the body must be a JSON object");
            return;
        }
    }
    ref = json_object_get(body, "ref");
    env = json_object_get(body, "environment");
    if ((ref != NULL && !json_is_null(ref) && !json_is_string(ref))
        || (env != NULL && !json_is_null(env) && !json_is_string(env))) {
        json_decref(body);
        set_error(c->res, 400, "ref and environment must be strings");
        return;
    }
    rc = prepare_spec(c, repo, json_string_value(ref), json_string_value(env), &spec, NULL);
    if (rc == SL_ENOTFOUND) {
        set_errorf(c->res, 404, "no environment '%s'", json_string_value(env));
    } else if (rc < 0) {
        set_internal(c->res, "preparing the sandbox", rc);
    } else {
        c->res->defer.kind = DEFER_CREATE;
        c->res->defer.spec = spec;
    }
    json_decref(body);
}

int sl_api_prepare_sandbox(struct sl_api *api, const char *user_id, const char *repo,
                           const char *ref, const char *envkey, struct sl_sandbox_spec **spec,
                           json_t **env, char *err, size_t errlen)
{
    struct result res;
    struct call c;
    int rc;

    memset(&c, 0, sizeof(c));
    memset(&res, 0, sizeof(res));
    c.api = api;
    c.res = &res;
    c.sealer.seal = seal_value;
    c.sealer.open = open_value;
    c.sealer.arg = api->secrets;
    rc = sl_store_user_get(api->store, user_id, &c.user);
    if (rc == SL_ENOTFOUND) {
        (void)snprintf(err, errlen, "the job's owner no longer exists");
        return rc;
    }
    if (rc == 0) {
        rc = prepare_spec(&c, repo, ref, envkey, spec, env);
    }
    if (rc == SL_ENOTFOUND) {
        (void)snprintf(err, errlen, "no environment '%s'", envkey != NULL ? envkey : "");
    } else if (rc < 0) {
        (void)snprintf(err, errlen, "the sandbox could not be prepared: %s", sl_strerror(rc));
    }
    if (rc == 0) {
        (*spec)->job = true;
    }
    sl_user_finish(&c.user);
    return rc;
}

/* False, with the 503 set, when this control plane runs no sandboxes. */
static bool sandboxes_enabled(struct call *c)
{
    if (c->api->sandboxes != NULL) {
        return true;
    }
    set_error(c->res, 503,
              "sandboxes are not enabled: the control plane needs --proxy-admin-socket and a "
              "reachable container runtime (--docker-socket)");
    return false;
}

/* /api/v1/repos/{owner}/{repo}/sandboxes[/{id}[/{action}]] */
static void route_repos(struct call *c, const char *tail)
{
    const char *m = c->req->method;
    struct defer *d = &c->res->defer;
    char owner[SEGMENT_MAX];
    char name[SEGMENT_MAX];
    char kind[SEGMENT_MAX];
    const char *rest = NULL;
    char tailbuf[SEGMENT_MAX + 2];

    (void)snprintf(tailbuf, sizeof(tailbuf), "/%s", tail);
    if (!split_tail(tailbuf, owner, sizeof(owner), &rest) || owner[0] == '\0' || rest == NULL
        || snprintf(tailbuf, sizeof(tailbuf), "/%s", rest) >= (int)sizeof(tailbuf)
        || !split_tail(tailbuf, name, sizeof(name), &rest) || name[0] == '\0' || rest == NULL
        || snprintf(tailbuf, sizeof(tailbuf), "/%s", rest) >= (int)sizeof(tailbuf)
        || !split_tail(tailbuf, kind, sizeof(kind), &rest) || strcmp(kind, "sandboxes") != 0) {
        set_error(c->res, 404, "no such resource");
        return;
    }
    if (snprintf(d->repo, sizeof(d->repo), "%s/%s", owner, name) >= (int)sizeof(d->repo)
        || !sl_env_repo_is_valid(d->repo, strlen(d->repo)) || strchr(name, '/') != NULL
        || strchr(owner, '/') != NULL) {
        set_error(c->res, 400, "the repository must be owner/name");
        return;
    }
    if (!sandboxes_enabled(c)) {
        return;
    }
    (void)snprintf(d->user_id, sizeof(d->user_id), "%s", c->user.id);
    d->is_admin = c->user.is_admin;
    if (rest == NULL) {
        if (strcmp(m, "GET") == 0) {
            d->kind = DEFER_LIST;
        } else if (strcmp(m, "POST") == 0) {
            sandbox_create(c, d->repo);
        } else {
            set_error(c->res, 405, "use GET or POST");
        }
        return;
    }
    (void)snprintf(tailbuf, sizeof(tailbuf), "/%s", rest);
    if (!split_tail(tailbuf, d->id, sizeof(d->id), &rest) || d->id[0] == '\0') {
        set_error(c->res, 404, "sandbox not found");
        return;
    }
    if (rest == NULL || strchr(rest, '/') != NULL || strlen(rest) >= sizeof(d->action)) {
        set_error(c->res, 404, "unknown sandbox action");
        return;
    }
    if (strcmp(m, "POST") != 0) {
        set_error(c->res, 405, "use POST");
        return;
    }
    (void)snprintf(d->action, sizeof(d->action), "%s", rest);
    if (c->req->body.n > 0) {
        json_error_t jerr;

        d->body = json_loadb((const char *)c->req->body.p, c->req->body.n, JSON_REJECT_DUPLICATES,
                             &jerr);
        if (d->body == NULL) {
            set_errorf(c->res, 400, "the body is not JSON: %s", jerr.text);
            return;
        }
    }
    d->kind = DEFER_CALL;
}

/* ---- MCP (§5.5): read here, answered by control/web/mcp on the loop -------------------------- */

/* A header's value (NUL-terminated in the request's arena), or NULL. */
static const char *header_value(const struct sl_http_request *req, const char *name)
{
    const struct sl_h1_header *h = sl_h1_find(req->head, name);

    return h != NULL ? (const char *)h->value.p : NULL;
}

static void route_mcp(struct call *c)
{
    struct sl_mcp_input in;
    struct sl_mcp_plan *plan;

    if (c->req->head == NULL) {
        /* A tool call never routes to /mcp itself. */
        set_error(c->res, 404, "no such resource");
        return;
    }
    memset(&in, 0, sizeof(in));
    in.method = c->req->method;
    in.content_type = header_value(c->req, "content-type");
    in.accept = header_value(c->req, "accept");
    in.protocol_version = header_value(c->req, "mcp-protocol-version");
    in.mcp_method = header_value(c->req, "mcp-method");
    in.mcp_name = header_value(c->req, "mcp-name");
    in.body = c->req->body.p;
    in.body_len = c->req->body.n;
    plan = sl_calloc(1, sizeof(*plan));
    if (plan == NULL || sl_mcp_prepare(&in, plan) < 0) {
        sl_free(plan);
        set_internal(c->res, "reading an MCP message", SL_ENOMEM);
        return;
    }
    c->res->defer.kind = DEFER_MCP;
    c->res->defer.mcp = plan;
}

/* ---- jobs and schedules (§5.5): control/jobs/jobs -------------------------------------------- */

static int jobs_find_env(void *arg, const char *key, char id[SL_UUID_LEN + 1], char **name)
{
    struct call *c = arg;
    struct sl_env_row r;
    int rc;

    memset(&r, 0, sizeof(r));
    rc = find_visible(c, key, &r);
    if (rc == 0) {
        (void)snprintf(id, SL_UUID_LEN + 1, "%s", r.id);
        *name = sl_strdup(r.name);
        rc = *name != NULL ? 0 : SL_ENOMEM;
    }
    sl_env_row_finish(&r);
    return rc;
}

static void route_jobs(struct call *c)
{
    struct sl_jobs_http rq = {
        .store = c->api->store,
        .user = &c->user,
        .method = c->req->method,
        .path = c->req->path,
        .query = c->req->query,
        .body = c->req->body.p,
        .body_len = c->req->body.n,
        .find_env = jobs_find_env,
        .query_get = query_get,
        .arg = c,
    };
    json_t *doc = NULL;
    int status = 500;
    bool kick = false;

    if (strncmp(c->req->path, "/api/v1/jobs", 12) == 0 && strcmp(c->req->method, "POST") == 0
        && c->api->sandboxes == NULL) {
        set_error(c->res, 503,
                  "jobs need sandboxes, which are not enabled: the control plane needs "
                  "--proxy-admin-socket and a reachable container runtime (--docker-socket)");
        return;
    }
    sl_jobs_http(&rq, &status, &doc, &kick);
    c->res->jobs_queued = kick;
    if (doc == NULL) {
        c->res->status = status;
        sl_free(c->res->body);
        c->res->body = NULL;
        if (status != 204) {
            set_internal(c->res, "answering a jobs request", SL_ENOMEM);
        }
        return;
    }
    set_json(c->res, status, doc);
}

/* ---- the audit tail (GET /api/v1/audit) ------------------------------------------------- */

struct tail {
    const struct call *c;
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

    if (id == NULL || !is_uuid_shaped(id)) {
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
static bool may_see_line(const struct call *c, const json_t *line)
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
    if (!json_is_object(entry) || !may_see_line(t->c, entry)) {
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

_Static_assert(SL_AUDITTAIL_MAX == 500, "the 422 message of audit_tail() names 500");

static void audit_tail(struct call *c)
{
    char text[16] = "";
    unsigned long limit = SL_AUDITTAIL_DEFAULT;
    struct tail t = { c, NULL, NULL, 0 };
    int rc = query_get(c->req->query, "limit", text, sizeof(text));

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
        set_json(c->res, 422,
                 json_pack("{s:s,s:[{s:s,s:s}]}", "message", "limit: a whole number from 1 to 500",
                           "errors", "field", "limit", "message",
                           "must be a whole number from 1 to 500"));
        return;
    }
    t.entries = json_array();
    t.names = json_object();
    if (t.entries == NULL || t.names == NULL) {
        json_decref(t.entries);
        json_decref(t.names);
        set_internal(c->res, "reading the audit log", SL_ENOMEM);
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
        set_error(c->res, 500, "the audit log cannot be read; see the control plane's log");
        return;
    }
    set_json(c->res, 200, json_pack("{s:o,s:b}", "entries", t.entries, "all", c->user.is_admin));
}

/* GET /api/v1/sandboxes: the caller's open sandboxes in every repository (d->repo empty). */
static void list_all_sandboxes(struct call *c)
{
    struct defer *d = &c->res->defer;

    if (strcmp(c->req->method, "GET") != 0) {
        set_error(c->res, 405, "use GET");
        return;
    }
    if (!sandboxes_enabled(c)) {
        return;
    }
    (void)snprintf(d->user_id, sizeof(d->user_id), "%s", c->user.id);
    d->is_admin = c->user.is_admin;
    d->repo[0] = '\0';
    d->kind = DEFER_LIST;
}

/* ---- the job ------------------------------------------------------------------------------
 */

/* Finds the caller. Returns true with c->user filled, or false with the answer set. */
static bool authenticate(struct call *c, const char *auth)
{
    uint8_t hash[SL_TOKEN_HASH_BYTES];
    int rc;

    /* The scheme is case-insensitive (RFC 9110 §11.1). */
    if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0 || auth[7] == '\0') {
        set_error(c->res, 401, "an API token is required: Authorization: Bearer TOKEN");
        return false;
    }
    rc = sl_token_hash(auth + 7, hash);
    if (rc == 0) {
        rc = sl_store_token_find_user(c->api->store, hash, &c->user, NULL);
    }
    if (rc == SL_ENOTFOUND) {
        set_error(c->res, 401, "unknown API token");
        return false;
    }
    if (rc < 0) {
        set_internal(c->res, "checking a token", rc);
        return false;
    }
    return true;
}

static void route(struct call *c)
{
    const char *path = c->req->path;
    const char *m = c->req->method;

    if (strncmp(path, ENVS_PREFIX, strlen(ENVS_PREFIX)) == 0) {
        route_envs(c, path + strlen(ENVS_PREFIX));
    } else if (strncmp(path, CLIENTS_PREFIX, strlen(CLIENTS_PREFIX)) == 0) {
        route_clients(c, path + strlen(CLIENTS_PREFIX));
    } else if (strncmp(path, REPOS_PREFIX, strlen(REPOS_PREFIX)) == 0) {
        route_repos(c, path + strlen(REPOS_PREFIX));
    } else if (strcmp(path, "/api/v1/resolve") == 0) {
        if (strcmp(m, "GET") == 0) {
            resolve(c);
        } else {
            set_error(c->res, 405, "use GET");
        }
    } else if (strcmp(path, "/mcp") == 0) {
        route_mcp(c);
    } else if (sl_jobs_http_matches(path)) {
        route_jobs(c);
    } else if (strcmp(path, AUDIT_PATH) == 0) {
        if (strcmp(m, "GET") == 0) {
            audit_tail(c);
        } else {
            set_error(c->res, 405, "use GET");
        }
    } else if (strcmp(path, "/api/v1/me") == 0) {
        if (strcmp(m, "GET") == 0) {
            set_json(c->res, 200,
                     json_pack("{s:s,s:b}", "name", c->user.name, "admin", c->user.is_admin));
        } else {
            set_error(c->res, 405, "use GET");
        }
    } else if (strcmp(path, "/api/v1/sandboxes") == 0) {
        list_all_sandboxes(c);
    } else if (strcmp(path, "/api/v1/status") == 0) {
        c->res->doc = json_pack("{s:s,s:s}", "version", SLUICE_VERSION, "user", c->user.name);
        c->res->status = c->res->doc != NULL ? 200 : 500;
    } else {
        set_error(c->res, 404, "no such resource");
    }
}

static void on_work(uv_work_t *w)
{
    struct job *j = SL_CONTAINER_OF(w, struct job, work);
    struct call c;

    memset(&c, 0, sizeof(c));
    c.api = j->api;
    c.req = j->req;
    c.res = &j->res;
    c.sealer.seal = seal_value;
    c.sealer.open = open_value;
    c.sealer.arg = j->api->secrets;
    c.owners = j->owners;
    if (authenticate(&c, j->auth)) {
        route(&c);
    }
    sl_user_finish(&c.user);
}

static void free_job(struct job *j)
{
    json_decref(j->owners);
    sl_free(j->res.body);
    json_decref(j->res.defer.body);
    sl_sandbox_spec_free(j->res.defer.spec);
    if (j->res.defer.mcp != NULL) {
        sl_mcp_plan_finish(j->res.defer.mcp);
        sl_free(j->res.defer.mcp);
    }
    if (j->auth != NULL) {
        sodium_memzero(j->auth, strlen(j->auth));
        sl_free(j->auth);
    }
    sl_free(j->own_method);
    sl_free(j->own_path);
    sl_free(j->own_query);
    sl_free(j->own_body);
    j->api->_pending--;
    sl_free(j);
}

/* Answers the job's request: `body` is JSON text or NULL (then only a 204 is a good answer).
 * A 401 says how to authenticate (RFC 6750 §3). */
static void answer(struct job *j, int status, const char *body)
{
    static const char *const bearer[] = { "WWW-Authenticate: Bearer realm=\"sluice\"", NULL };
    json_t *doc = NULL;

    if (j->x == NULL) {
        if (body != NULL) {
            doc = json_loads(body, JSON_DECODE_ANY, NULL);
            if (doc == NULL) {
                status = 500;
                doc = json_pack("{s:s}", "message", "internal error");
            }
        } else if (status != 204) {
            status = 500;
            doc = json_pack("{s:s}", "message", "internal error");
        }
        j->reply(j->reply_arg, status, doc);
    } else if (body != NULL) {
        sl_http_respond_headers(j->x, status, status == 401 ? bearer : NULL, "application/json",
                                body, strlen(body));
    } else if (status == 204) {
        sl_http_respond(j->x, 204, NULL, NULL, 0);
    } else {
        sl_http_respond_error(j->x, 500, "internal error");
    }
}

/* The manager's answer to a sandbox request. */
static void on_sandbox_reply(void *arg, int status, json_t *body)
{
    struct sl_http_exchange *x = arg;
    char *text;

    if (status == 204 || body == NULL || json_is_null(body)) {
        json_decref(body);
        if (status == 204) {
            sl_http_respond(x, 204, NULL, NULL, 0);
        } else {
            sl_http_respond_error(x, 500, "internal error");
        }
        return;
    }
    text = json_dumps(body, SL_ENV_JSON_FLAGS);
    json_decref(body);
    if (text == NULL) {
        sl_http_respond_error(x, 500, "the answer could not be encoded");
        return;
    }
    sl_http_respond(x, status, "application/json", text, strlen(text));
    sodium_memzero(text, strlen(text));
    sl_free(text);
}

/* Hands sandbox work to the manager on the loop, whose reply answers the exchange (or goes to
 * the dispatcher's reply), and MCP messages to control/mcp. */
static void finish_deferred(struct job *j)
{
    struct defer *d = &j->res.defer;
    struct sl_sandbox_caller caller = { d->user_id, d->is_admin };
    struct sl_sandboxes *sb = j->api->sandboxes;
    sl_sandbox_reply_fn *reply = j->x != NULL ? on_sandbox_reply : j->reply;
    void *arg = j->x != NULL ? (void *)j->x : j->reply_arg;
    json_t *list;

    if (d->kind == DEFER_MCP) {
        sl_mcp_run(j->api, j->x, d->mcp, j->auth);
    } else if (sb == NULL) {
        reply(arg, 503, json_pack("{s:s}", "message", "sandboxes are not enabled"));
    } else if (d->kind == DEFER_CREATE) {
        sl_sandboxes_open(sb, d->spec, reply, arg);
        d->spec = NULL;
    } else if (d->kind == DEFER_CALL) {
        sl_sandboxes_call(sb, &caller, d->repo, d->id, d->action, d->body, reply, arg);
    } else {
        list = sl_sandboxes_list(sb, &caller, d->repo[0] != '\0' ? d->repo : NULL);
        reply(arg, list != NULL ? 200 : 500, list);
    }
    free_job(j);
}

static void on_work_done(uv_work_t *w, int status)
{
    struct job *j = SL_CONTAINER_OF(w, struct job, work);
    struct sl_api *api = j->api;
    bool changed = j->res.changed;
    bool queued = j->res.jobs_queued;

    (void)status;
    if (j->res.defer.kind != DEFER_NONE) {
        finish_deferred(j);
        return;
    }
    if (j->res.doc != NULL) {
        if (api->status != NULL) {
            api->status(api->hook_arg, j->res.doc);
        }
        set_json(&j->res, 200, j->res.doc);
        j->res.doc = NULL;
    }
    answer(j, j->res.status, j->res.body);
    free_job(j);
    if (changed && api->changed != NULL) {
        api->changed(api->hook_arg);
    }
    if (queued && api->jobs_queued != NULL) {
        api->jobs_queued(api->hook_arg);
    }
}

void sl_api_init(struct sl_api *api)
{
    api->_pending = 0;
    api->_mcp_calls = 0;
}

size_t sl_api_pending(const struct sl_api *api)
{
    return api->_pending;
}

int sl_api_dispatch(struct sl_api *api, const struct sl_api_request *r, sl_api_reply_fn *reply,
                    void *arg)
{
    struct job *j = sl_calloc(1, sizeof(*j));
    char *body;
    int rc;

    if (j == NULL) {
        return SL_ENOMEM;
    }
    j->api = api;
    j->reply = reply;
    j->reply_arg = arg;
    j->req = &j->ireq;
    j->ireq.method = j->own_method = sl_strdup(r->method);
    j->ireq.path = j->own_path = sl_strdup(r->path);
    j->ireq.query = j->own_query = sl_strdup(r->query != NULL ? r->query : "");
    /* As from the server: the body is followed by a NUL byte it does not count. */
    body = sl_malloc(r->body_len + 1);
    if (body != NULL) {
        if (r->body_len > 0) {
            memcpy(body, r->body, r->body_len);
        }
        body[r->body_len] = '\0';
    }
    j->own_body = body;
    j->ireq.body = sl_slice_of(body, r->body_len);
    j->ireq.peer = "internal";
    j->auth = r->authorization != NULL ? sl_strdup(r->authorization) : NULL;
    /* free_job() counts the job out. */
    api->_pending++;
    if (j->ireq.method == NULL || j->ireq.path == NULL || j->ireq.query == NULL || body == NULL
        || (r->authorization != NULL && j->auth == NULL)) {
        free_job(j);
        return SL_ENOMEM;
    }
    rc = uv_queue_work(api->loop, &j->work, on_work, on_work_done);
    if (rc < 0) {
        free_job(j);
        return rc;
    }
    return 0;
}

void sl_api_handle(struct sl_http_exchange *x, const struct sl_http_request *req, void *arg)
{
    static const char healthy[] = "{\"ok\":true}";
    struct sl_api *api = arg;
    const struct sl_h1_header *h;
    struct job *j;
    int rc;

    if (strcmp(req->path, "/healthz") == 0 && strcmp(req->method, "GET") == 0) {
        sl_http_respond(x, 200, "application/json", healthy, sizeof(healthy) - 1);
        return;
    }
    /* The dashboard's files are public (they hold no data); its API calls carry the token. */
    if (sl_dashboard_is_path(req->path)) {
        sl_dashboard_handle(x, req);
        return;
    }
    if (strcmp(req->path, "/mcp") == 0) {
        const struct sl_h1_header *origin = sl_h1_find(req->head, "origin");
        const struct sl_h1_header *host = sl_h1_find(req->head, "host");

        /* DNS-rebinding protection of the MCP transport (docs/mcp.md): before anything else. */
        if (!sl_mcp_origin_ok(origin != NULL ? (const char *)origin->value.p : NULL,
                              host != NULL ? (const char *)host->value.p : NULL)) {
            static const char refused[] = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{"
                                          "\"code\":-32600,\"message\":\"Forbidden: this "
                                          "Origin may not use /mcp\"}}";

            sl_http_respond(x, 403, "application/json", refused, sizeof(refused) - 1);
            return;
        }
    }
    h = sl_h1_find(req->head, "authorization");
    /* A sandbox's proxy token is not an API token; say so rather than "unknown token". */
    if (h != NULL && api->sandboxes != NULL && h->value.n > 7 && h->value.n < 200) {
        char token[200];

        memcpy(token, h->value.p + 7, h->value.n - 7);
        token[h->value.n - 7] = '\0';
        if (strncasecmp((const char *)h->value.p, "Bearer ", 7) == 0
            && sl_sandboxes_is_token(api->sandboxes, token)) {
            sodium_memzero(token, sizeof(token));
            sl_http_respond_error(x, 403, "sandbox tokens cannot use the API nor start sandboxes");
            return;
        }
        sodium_memzero(token, sizeof(token));
    }
    j = sl_calloc(1, sizeof(*j));
    if (j == NULL) {
        sl_http_respond_error(x, 503, "out of memory");
        return;
    }
    j->api = api;
    j->x = x;
    j->req = req;
    h = sl_h1_find(req->head, "authorization");
    if (h != NULL) {
        j->auth = sl_strndup((const char *)h->value.p, h->value.n);
        if (j->auth == NULL) {
            sl_free(j);
            sl_http_respond_error(x, 503, "out of memory");
            return;
        }
    }
    /* Who owns which sandbox is known on the loop only: hand the audit job a copy. */
    if (strcmp(req->path, AUDIT_PATH) == 0 && api->sandboxes != NULL) {
        j->owners = sl_sandboxes_owners(api->sandboxes);
        if (j->owners == NULL) {
            sl_free(j->auth);
            sl_free(j);
            sl_http_respond_error(x, 503, "out of memory");
            return;
        }
    }
    rc = uv_queue_work(api->loop, &j->work, on_work, on_work_done);
    if (rc < 0) {
        json_decref(j->owners);
        sl_free(j->auth);
        sl_free(j);
        sl_http_respond_error(x, 503, "cannot queue the request");
        return;
    }
    api->_pending++;
}
