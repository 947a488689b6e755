/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/api.c - routes, authentication and JSON errors of the REST API (docs/reference/api.md
 * §5): the results a job builds, the small parsers of paths and queries, authentication (token
 * scopes, expiry, disabled users), the content type of writes, the MCP and jobs routes, and the job
 * itself with its wait for the proxies after a change that removed access. Environments and
 * static clients are api_envs.c, resolution and sandboxes api_sandboxes.c, the audit tail
 * api_audit.c, the dashboard's overview api_overview.c, users and tokens api_users.c,
 * repositories and members api_repos.c.
 *
 * Each request is one thread-pool job: the job owns copies of what it needs from the request
 * and a result (status and body text); the loop only queues jobs and answers exchanges.
 */
#include "control/web/api.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>
#include <sodium.h>

#include "base/buf.h"
#include "base/hex.h"
#include "base/log.h"
#include "base/mem.h"
#include "control/env/environment.h"
#include "control/jobs/jobs.h"
#include "control/sandbox/sandbox.h"
#include "control/store/model.h"
#include "control/web/api_int.h"
#include "control/web/dashboard.h"
#include "control/web/mcp.h"

#define ENVS_PREFIX    "/api/v1/environments"
#define CLIENTS_PREFIX "/api/v1/clients"
#define REPOS_PATH     "/api/v1/repos"
#define REPOS_PREFIX   "/api/v1/repos/"
#define USERS_PREFIX   "/api/v1/users"
#define TOKENS_PREFIX  "/api/v1/tokens"
#define AUDIT_PATH     "/api/v1/audit"
#define OVERVIEW_PATH  "/api/v1/overview"
#define JOBS_PATH      "/api/v1/jobs"

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
    /* GET /api/v1/audit[/refusals] and /api/v1/overview: {"<sandbox id>":"<owner id>"} taken on
     * the loop (owned; NULL when sandboxes are off or for other requests). */
    json_t *owners;
    /* A job of sl_api_gate(): it only authenticates, and `admitted` says whether it did. */
    bool gate;
    bool admitted;
    struct sl__api_result res;
};

/* ---- results ------------------------------------------------------------------------------ */

/* Takes ownership of `doc`. */
void sl__api_set_json(struct sl__api_result *res, int status, json_t *doc)
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

/* {"message": MESSAGE}. A message that is not UTF-8 (it names what a client sent, or was cut
 * inside a character) has those bytes as U+FFFD: an error is never turned into a 500. */
static json_t *message_doc(const char *message)
{
    json_t *doc = json_pack("{s:s}", "message", message);
    json_t *text;
    struct sl_buf b;

    if (doc != NULL || sl_http_utf8_valid(message, strlen(message))) {
        return doc;
    }
    sl_buf_init(&b, 16 * 1024);
    if (sl_http_json_append_string(&b, message, strlen(message) < 1024 ? strlen(message) : 1024)
        == 0) {
        text = json_loadb((const char *)b.p, b.len, JSON_DECODE_ANY, NULL);
        doc = json_is_string(text) ? json_pack("{s:o}", "message", text) : NULL;
        if (doc == NULL && !json_is_string(text)) {
            json_decref(text);
        }
    }
    sl_buf_finish(&b);
    return doc;
}

void sl__api_set_error(struct sl__api_result *res, int status, const char *message)
{
    sl__api_set_json(res, status, message_doc(message));
}

static void set_errorv(struct sl__api_result *res, int status, const char *fmt, va_list ap)
        SL_PRINTF(3, 0);

static void set_errorv(struct sl__api_result *res, int status, const char *fmt, va_list ap)
{
    char msg[512];

    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    sl__api_set_error(res, status, msg);
}

void sl__api_set_errorf(struct sl__api_result *res, int status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    set_errorv(res, status, fmt, ap);
    va_end(ap);
}

void sl__api_set_internal(struct sl__api_result *res, const char *what, int rc)
{
    sl_log(SL_LOG_ERROR, 0, "msg=\"API request failed\" during=\"%s\" err=%s", what,
           sl_strerror(rc));
    sl__api_set_error(res, rc == SL_ENOMEM ? 503 : 500,
                      "internal error; see the control plane's log");
}

bool sl__api_store_ok(struct sl__api_result *res, int rc, const char *what, const char *fmt, ...)
{
    va_list ap;

    if (rc == SL_ENOTFOUND) {
        va_start(ap, fmt);
        set_errorv(res, 404, fmt, ap);
        va_end(ap);
    } else if (rc < 0) {
        sl__api_set_internal(res, what, rc);
    }
    return rc >= 0;
}

void sl__api_set_invalid(struct sl__api_result *res, const char *what, const char *field,
                         const char *message)
{
    json_t *doc = json_pack("{s:s, s:[{s:s, s:s}]}", "message", what, "errors", "field", field,
                            "message", message);

    sl__api_set_json(res, 422, doc);
}

bool sl__api_only_known(struct sl__api_result *res, json_t *root, const char *const *known,
                        size_t n, const char *what, const char *expected)
{
    const char *key;
    json_t *value;

    json_object_foreach(root, key, value)
    {
        bool ok = false;

        for (size_t i = 0; !ok && i < n; i++) {
            ok = strcmp(key, known[i]) == 0;
        }
        if (!ok) {
            char field[80];

            (void)snprintf(field, sizeof(field), "%.64s", key);
            sl__api_set_invalid(res, what, field, expected);
            return false;
        }
    }
    return true;
}

json_t *sl__api_body_known(struct sl__api_call *c, const char *const *known, size_t n,
                           const char *what, const char *expected)
{
    json_t *root = sl__api_body_object(c);

    if (root != NULL && !sl__api_only_known(c->res, root, known, n, what, expected)) {
        json_decref(root);
        root = NULL;
    }
    return root;
}

json_t *sl__api_with_token(json_t *doc, const char *token)
{
    if (doc != NULL && json_object_set_new(doc, "token", json_string(token)) < 0) {
        json_decref(doc);
        doc = NULL;
    }
    return doc;
}

void sl__api_set_list(struct sl__api_result *res, int rc, const char *what, const char *key,
                      const void *v, size_t n, size_t size, sl__api_item_fn *item)
{
    json_t *arr;

    if (rc < 0) {
        sl__api_set_internal(res, what, rc);
        return;
    }
    arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        if (json_array_append_new(arr, item((const uint8_t *)v + i * size)) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    sl__api_set_json(res, 200, arr != NULL ? json_pack("{s:o}", key, arr) : NULL);
}

bool sl__api_route_collection(struct sl__api_call *c, const char *tail, const char *admins_only,
                              sl__api_handler_fn *list, sl__api_handler_fn *create, char *seg,
                              const char **rest)
{
    const char *m = c->req->method;
    const char *after = NULL;

    if (!sl__api_split_tail(tail, seg, SL__API_SEGMENT_MAX, &after)
        || (rest == NULL && after != NULL)) {
        sl__api_set_error(c->res, 404, "no such resource");
        return false;
    }
    if (admins_only != NULL && !c->user.is_admin) {
        sl__api_set_error(c->res, 403, admins_only);
        return false;
    }
    if (seg[0] == '\0') {
        if (strcmp(m, "GET") == 0) {
            list(c);
        } else if (strcmp(m, "POST") == 0) {
            create(c);
        } else {
            sl__api_set_error(c->res, 405, "use GET or POST");
        }
        return false;
    }
    if (rest != NULL) {
        *rest = after;
    }
    return true;
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

void sl__api_call_init(struct sl__api_call *c, struct sl_api *api, struct sl__api_result *res)
{
    memset(c, 0, sizeof(*c));
    c->api = api;
    c->res = res;
    c->sealer.seal = seal_value;
    c->sealer.open = open_value;
    c->sealer.arg = api->secrets;
}

/* ---- small parsers ------------------------------------------------------------------------ */

/* Percent-decodes `n` bytes of `s` into `out` (`cap` bytes); '+' is a space when `plus`.
 * Returns 0, or SL_EINVAL for a bad escape, a NUL byte, a value too long or one that is not
 * UTF-8 (every name and key is). */
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
            hi = sl_hex_value(s[i + 1]);
            lo = sl_hex_value(s[i + 2]);
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
    return sl_http_utf8_valid(out, o) ? 0 : SL_EINVAL;
}

/* True when `s` percent-decoded ('+' a space when `plus`; a bad escape left as it is, for its
 * route to refuse) is UTF-8. */
static bool decodes_to_utf8(const char *s, bool plus)
{
    size_t n = strlen(s);
    char *out = sl_malloc(n + 1);
    size_t o = 0;
    bool ok;

    if (out == NULL) {
        return true; /* the route decodes it again and refuses it then */
    }
    for (size_t i = 0; i < n; i++) {
        int hi = s[i] == '%' && i + 2 < n ? sl_hex_value(s[i + 1]) : -1;
        int lo = hi >= 0 ? sl_hex_value(s[i + 2]) : -1;

        if (hi >= 0 && lo >= 0) {
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = s[i] == '+' && plus ? ' ' : s[i];
        }
    }
    ok = sl_http_utf8_valid(out, o);
    sl_free(out);
    return ok;
}

/* Finds `key` in the query string and decodes its value into `out`. Returns 0, SL_ENOTFOUND
 * or SL_EINVAL. */
int sl__api_query_get(const char *query, const char *key, char *out, size_t cap)
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
bool sl__api_split_tail(const char *tail, char *seg, size_t cap, const char **rest)
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

bool sl__api_is_uuid_shaped(const char *s)
{
    if (strlen(s) != SL_UUID_LEN) {
        return false;
    }
    for (size_t i = 0; i < SL_UUID_LEN; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;

        if (dash ? s[i] != '-' : sl_hex_value(s[i]) < 0) {
            return false;
        }
    }
    return true;
}

json_t *sl__api_body_object(struct sl__api_call *c)
{
    char why[SL_JBODY_MSG_MAX];
    json_t *root = NULL;
    int rc = sl_jbody_parse(c->req->body.p, c->req->body.n, 0, &root, why, sizeof(why));

    if (rc == SL_EINVAL) {
        sl__api_set_error(c->res, 400, why);
    } else if (rc < 0) {
        sl__api_set_error(c->res, 503, "out of memory");
    }
    return root;
}

struct sl_gitplat_caller sl__api_git_caller(const struct sl__api_call *c)
{
    struct sl_gitplat_caller who = { c->user.id, c->user.is_admin,
                                     c->scope >= SL_TOKEN_SCOPE_WRITE };

    return who;
}

/* ---- MCP (§5.5): read here, answered by control/web/mcp on the loop -------------------------- */

/* A header's value (NUL-terminated in the request's arena), or NULL. */
static const char *header_value(const struct sl_http_request *req, const char *name)
{
    const struct sl_h1_header *h = sl_h1_find(req->head, name);

    return h != NULL ? (const char *)h->value.p : NULL;
}

static void route_mcp(struct sl__api_call *c)
{
    struct sl_mcp_input in;
    struct sl_mcp_plan *plan;

    if (c->req->head == NULL) {
        /* A tool call never routes to /mcp itself. */
        sl__api_set_error(c->res, 404, "no such resource");
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
        sl__api_set_internal(c->res, "reading an MCP message", SL_ENOMEM);
        return;
    }
    c->res->defer.kind = SL__API_DEFER_MCP;
    c->res->defer.mcp = plan;
}

/* ---- jobs and schedules (§5.5): control/jobs/jobs -------------------------------------------- */

static int jobs_find_env(void *arg, const char *key, char id[SL_UUID_LEN + 1], char **name)
{
    struct sl__api_call *c = arg;
    struct sl_env_row r;
    int rc;

    memset(&r, 0, sizeof(r));
    rc = sl__api_find_visible(c, key, &r);
    if (rc == 0) {
        (void)snprintf(id, SL_UUID_LEN + 1, "%s", r.id);
        *name = sl_strdup(r.name);
        rc = *name != NULL ? 0 : SL_ENOMEM;
    }
    sl_env_row_finish(&r);
    return rc;
}

static void route_jobs(struct sl__api_call *c)
{
    struct sl_jobs_http rq = {
        .store = c->api->store,
        .git = c->api->git,
        .user = &c->user,
        .token_writes = c->scope >= SL_TOKEN_SCOPE_WRITE,
        .account_admin = c->account_admin,
        .method = c->req->method,
        .path = c->req->path,
        .query = c->req->query,
        .body = c->req->body.p,
        .body_len = c->req->body.n,
        .find_env = jobs_find_env,
        .query_get = sl__api_query_get,
        .arg = c,
    };
    json_t *doc = NULL;
    int status = 500;
    bool kick = false;

    rq.sandboxes_on = c->api->sandboxes != NULL;
    rq.why_off = "jobs need sandboxes, which are not enabled: the control plane needs "
                 "--proxy-admin-socket and a reachable container runtime (--docker-socket)";
    sl_jobs_http(&rq, &status, &doc, &kick);
    c->res->jobs_queued = kick;
    if (doc == NULL) {
        c->res->status = status;
        sl_free(c->res->body);
        c->res->body = NULL;
        if (status != 204) {
            sl__api_set_internal(c->res, "answering a jobs request", SL_ENOMEM);
        }
        return;
    }
    sl__api_set_json(c->res, status, doc);
}

/* ---- the route table: which methods each path has (405 and Allow, RFC 9110 §15.5.6) --------- */

enum {
    M_GET = 1 << 0,
    M_POST = 1 << 1,
    M_PUT = 1 << 2,
    M_PATCH = 1 << 3,
    M_DELETE = 1 << 4,
};

/* Every path of the REST API and its methods (docs/reference/api.md, the table at the top); `*`
 * stands for one segment. The first match wins. A method a path does not have is a 405 built
 * from here, message and Allow alike, before the route looks the path's names up: the same
 * answer whatever exists. /mcp and /dashboard/ answer their own. */
static const struct route_spec {
    const char *path;
    unsigned methods;
} routes[] = {
    { "/healthz", M_GET },
    { "/readyz", M_GET },
    { ENVS_PREFIX, M_GET | M_POST },
    { ENVS_PREFIX "/*", M_GET | M_PUT | M_DELETE },
    { ENVS_PREFIX "/*/set-default", M_POST },
    { ENVS_PREFIX "/*/observe", M_POST | M_DELETE },
    { ENVS_PREFIX "/*/suggestions", M_GET },
    { ENVS_PREFIX "/*/suggestions/apply", M_POST },
    { CLIENTS_PREFIX, M_GET | M_POST },
    { CLIENTS_PREFIX "/*", M_DELETE },
    { "/api/v1/resolve", M_GET },
    { REPOS_PATH, M_GET },
    { REPOS_PREFIX "*/*", M_GET | M_PUT | M_DELETE },
    { REPOS_PREFIX "*/*/members", M_GET },
    { REPOS_PREFIX "*/*/members/*", M_GET | M_PUT | M_DELETE },
    { REPOS_PREFIX "*/*/sandboxes", M_GET | M_POST },
    { REPOS_PREFIX "*/*/sandboxes/*/*", M_POST },
    { JOBS_PATH, M_GET | M_POST },
    { JOBS_PATH "/*", M_GET },
    { "/api/v1/schedules", M_GET | M_POST },
    { "/api/v1/schedules/preview", M_GET },
    { "/api/v1/schedules/*", M_GET | M_PUT | M_DELETE },
    { USERS_PREFIX, M_GET | M_POST },
    { USERS_PREFIX "/*", M_GET | M_PATCH },
    { TOKENS_PREFIX, M_GET | M_POST },
    { TOKENS_PREFIX "/*", M_DELETE },
    { AUDIT_PATH, M_GET },
    { AUDIT_PATH "/refusals", M_GET },
    { "/api/v1/me", M_GET },
    { "/api/v1/sandboxes", M_GET },
    { OVERVIEW_PATH, M_GET },
    { "/api/v1/status", M_GET },
};

/* In the order Allow lists them; HEAD follows GET (a route that takes GET takes HEAD). */
static const struct {
    unsigned bit;
    const char *name;
} method_names[] = {
    { M_GET, "GET" },     { M_POST, "POST" },     { M_PUT, "PUT" },
    { M_PATCH, "PATCH" }, { M_DELETE, "DELETE" },
};

/* Does `path` match `pattern` (`*` one non-empty segment)? */
static bool path_matches(const char *pattern, const char *path)
{
    while (*pattern != '\0') {
        if (*pattern == '*') {
            size_t n = strcspn(path, "/");

            if (n == 0) {
                return false;
            }
            pattern++;
            path += n;
        } else if (*pattern++ != *path++) {
            return false;
        }
    }
    return *path == '\0';
}

/* The methods of `path` (0: a path the table does not have). */
static unsigned path_methods(const char *path)
{
    for (size_t i = 0; i < SL_ARRAY_LEN(routes); i++) {
        if (path_matches(routes[i].path, path)) {
            return routes[i].methods;
        }
    }
    return 0;
}

static unsigned method_bit(const char *m)
{
    for (size_t i = 0; i < SL_ARRAY_LEN(method_names); i++) {
        if (strcmp(m, method_names[i].name) == 0) {
            return method_names[i].bit;
        }
    }
    return 0;
}

/* `methods` as the 405's message words them ("use GET, PUT or DELETE") or, `allow`, as its
 * Allow line ("Allow: GET, HEAD, PUT, DELETE"), into `out`. */
static void methods_text(unsigned methods, bool allow, char *out, size_t cap)
{
    size_t n = 0;
    size_t k = 0;
    size_t o;

    for (size_t i = 0; i < SL_ARRAY_LEN(method_names); i++) {
        n += (methods & method_names[i].bit) != 0;
    }
    o = (size_t)snprintf(out, cap, "%s", allow ? "Allow: " : "use ");
    for (size_t i = 0; i < SL_ARRAY_LEN(method_names) && o < cap; i++) {
        if ((methods & method_names[i].bit) == 0) {
            continue;
        }
        k++;
        o += (size_t)snprintf(out + o, cap - o, "%s%s%s",
                              k == 1 ? "" : (allow || k < n ? ", " : " or "), method_names[i].name,
                              allow && method_names[i].bit == M_GET ? ", HEAD" : "");
    }
}

/* ---- the job ------------------------------------------------------------------------------
 */

/* The token of the Authorization value `v` (NUL-terminated; NULL for none): `Bearer` in any
 * case, one or more spaces, then the token (RFC 9110 §11.1, §11.4: credentials = auth-scheme
 * [ 1*SP token68 ]). NULL for any other shape, a tab or an empty token included. The REST
 * routes, /mcp and its tool calls, and the check for a sandbox's proxy token all read it so. */
static const char *bearer_token(const char *v)
{
    if (v == NULL || strncasecmp(v, "Bearer", 6) != 0 || v[6] != ' ') {
        return NULL;
    }
    v += 6;
    while (*v == ' ') {
        v++;
    }
    return *v != '\0' ? v : NULL;
}

/* Finds the caller. Returns true with c->user and c->scope filled, or false with the answer
 * set. */
static bool authenticate(struct sl__api_call *c, const char *auth)
{
    const char *token = bearer_token(auth);
    uint8_t hash[SL_TOKEN_HASH_BYTES];
    struct sl_store_token tok;
    char now[32];
    time_t t = time(NULL);
    struct tm tm;
    int rc;

    memset(&tok, 0, sizeof(tok));
    if (token == NULL) {
        sl__api_set_error(c->res, 401, "an API token is required: Authorization: Bearer TOKEN");
        return false;
    }
    rc = sl_token_hash(token, hash);
    if (rc == 0) {
        rc = sl_store_token_find_user(c->api->store, hash, &c->user, &tok);
    }
    if (rc == SL_ENOTFOUND) {
        sl__api_set_error(c->res, 401, "unknown API token");
        return false;
    }
    if (rc < 0) {
        sl__api_set_internal(c->res, "checking a token", rc);
        return false;
    }
    c->scope = tok.scope;
    (void)snprintf(c->token_expires_at, sizeof(c->token_expires_at), "%s", tok.expires_at);
    c->account_admin = c->user.is_admin;
    /* The admin actions need both: an admin, and a token of scope admin. */
    c->user.is_admin = c->user.is_admin && tok.scope == SL_TOKEN_SCOPE_ADMIN;
    if (gmtime_r(&t, &tm) == NULL || strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        now[0] = '\0';
    }
    if (c->user.disabled) {
        sl__api_set_error(c->res, 401, "account disabled");
    } else if (tok.expires_at[0] != '\0' && strcmp(now, tok.expires_at) >= 0) {
        /* Both texts are RFC 3339 UTC to the second: their order is the times' order. */
        sl__api_set_error(c->res, 401, "token expired");
    } else {
        sl_store_token_finish(&tok);
        return true;
    }
    sl_store_token_finish(&tok);
    return false;
}

/* True when the Content-Type value `v` is application/json, parameters allowed (RFC 9110 §8.3:
 * the type and subtype are case-insensitive). */
static bool is_json_type(const char *v)
{
    static const char want[] = "application/json";

    while (*v == ' ' || *v == '\t') {
        v++;
    }
    if (strncasecmp(v, want, sizeof(want) - 1) != 0) {
        return false;
    }
    v += sizeof(want) - 1;
    while (*v == ' ' || *v == '\t') {
        v++;
    }
    return *v == '\0' || *v == ';';
}

/* REST writes carry JSON and say so: a POST, PUT or PATCH with a body needs Content-Type
 * application/json (the MCP endpoint has its own rules, and the requests of
 * sl_api_dispatch() have no headers: they are JSON by construction). False with the 415 set. */
static bool content_type_ok(struct sl__api_call *c)
{
    const char *m = c->req->method;
    const struct sl_h1_header *h;
    char type[64];

    if (c->req->head == NULL || c->req->body.n == 0 || strcmp(c->req->path, "/mcp") == 0
        || (strcmp(m, "POST") != 0 && strcmp(m, "PUT") != 0 && strcmp(m, "PATCH") != 0)) {
        return true;
    }
    h = sl_h1_find(c->req->head, "content-type");
    if (h != NULL && is_json_type((const char *)h->value.p)) {
        return true;
    }
    if (h == NULL) {
        sl__api_set_error(c->res, 415,
                          "a request body needs Content-Type: application/json (none was given)");
        return false;
    }
    /* Named, cut to fit, without what would break the message. */
    (void)snprintf(type, sizeof(type), "%.*s", (int)(h->value.n < 60 ? h->value.n : 60),
                   (const char *)h->value.p);
    for (char *p = type; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f || *p == '\'') {
            *p = '?';
        }
    }
    sl__api_set_errorf(c->res, 415, "Content-Type must be application/json, not '%s'", type);
    return false;
}

/* A token of scope read may only read: GET (and the MCP endpoint, whose tools come back in
 * through the REST routes with the same token). False with the 403 set. */
static bool scope_allows(struct sl__api_call *c)
{
    const char *path = c->req->path;

    if (c->scope >= SL_TOKEN_SCOPE_WRITE || strcmp(c->req->method, "GET") == 0
        || strcmp(path, "/mcp") == 0) {
        return true;
    }
    /* Sandboxes and jobs say what they need, as their other refusals do. */
    if (strncmp(path, REPOS_PREFIX, strlen(REPOS_PREFIX)) == 0
        && strstr(path, "/sandboxes") != NULL) {
        sl__api_set_error(c->res, 403, "write access required");
    } else if (strncmp(path, JOBS_PATH, strlen(JOBS_PATH)) == 0) {
        sl__api_set_error(c->res, 403, "write access required");
    } else {
        sl__api_set_error(c->res, 403, "this token may only read (scope read)");
    }
    return false;
}

/* Whether `path` is `prefix` or below it ("/api/v1/users", "/api/v1/users/..."). */
static bool under(const char *path, const char *prefix)
{
    size_t n = strlen(prefix);

    return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static void route(struct sl__api_call *c)
{
    const char *path = c->req->path;
    const char *m = c->req->method;
    unsigned methods;

    /* Every name, id and key is UTF-8: checked here once, so that no route meets another. */
    if (!decodes_to_utf8(path, false)) {
        sl__api_set_error(c->res, 400, "the path is not valid UTF-8 (once percent-decoded)");
        return;
    }
    if (!decodes_to_utf8(c->req->query, true)) {
        sl__api_set_error(c->res, 400, "the query is not valid UTF-8 (once percent-decoded)");
        return;
    }
    if (!scope_allows(c) || !content_type_ok(c)) {
        return;
    }
    methods = path_methods(path);
    if (methods == 0 && path[0] != '\0' && path[strlen(path) - 1] == '/') {
        /* No route ends in a slash: an empty last name is no resource (not a route's 405,
         * which the table could not give its Allow line). */
        sl__api_set_error(c->res, 404, "no such resource");
        return;
    }
    if (methods != 0 && (methods & method_bit(m)) == 0) {
        char text[64];

        methods_text(methods, false, text, sizeof(text));
        sl__api_set_error(c->res, 405, text);
        return;
    }
    if (strncmp(path, ENVS_PREFIX, strlen(ENVS_PREFIX)) == 0) {
        sl__api_route_envs(c, path + strlen(ENVS_PREFIX));
    } else if (strncmp(path, CLIENTS_PREFIX, strlen(CLIENTS_PREFIX)) == 0) {
        sl__api_route_clients(c, path + strlen(CLIENTS_PREFIX));
    } else if (strcmp(path, REPOS_PATH) == 0) {
        if (strcmp(m, "GET") == 0) {
            sl__api_list_repos(c);
        } else {
            sl__api_set_error(c->res, 405, "use GET");
        }
    } else if (strncmp(path, REPOS_PREFIX, strlen(REPOS_PREFIX)) == 0) {
        sl__api_route_repos(c, path + strlen(REPOS_PREFIX));
    } else if (under(path, USERS_PREFIX)) {
        sl__api_route_users(c, path + strlen(USERS_PREFIX));
    } else if (under(path, TOKENS_PREFIX)) {
        sl__api_route_tokens(c, path + strlen(TOKENS_PREFIX));
    } else if (strcmp(path, "/api/v1/resolve") == 0) {
        if (strcmp(m, "GET") == 0) {
            sl__api_resolve(c);
        } else {
            sl__api_set_error(c->res, 405, "use GET");
        }
    } else if (strcmp(path, "/mcp") == 0) {
        route_mcp(c);
    } else if (sl_jobs_http_matches(path)) {
        route_jobs(c);
    } else if (strcmp(path, AUDIT_PATH) == 0 || strcmp(path, AUDIT_PATH "/refusals") == 0) {
        sl__api_route_audit(c, path);
    } else if (strcmp(path, "/api/v1/me") == 0) {
        if (strcmp(m, "GET") == 0) {
            sl__api_set_json(c->res, 200,
                             json_pack("{s:s,s:b,s:s}", "name", c->user.name, "admin",
                                       c->user.is_admin, "scope", sl_token_scope_name(c->scope)));
        } else {
            sl__api_set_error(c->res, 405, "use GET");
        }
    } else if (strcmp(path, "/api/v1/sandboxes") == 0) {
        sl__api_list_all_sandboxes(c);
    } else if (strcmp(path, OVERVIEW_PATH) == 0) {
        sl__api_overview(c);
    } else if (strcmp(path, "/api/v1/status") == 0) {
        if (strcmp(m, "GET") != 0) {
            sl__api_set_error(c->res, 405, "use GET");
            return;
        }
        c->res->doc = json_pack("{s:s,s:s}", "version", SLUICE_VERSION, "user", c->user.name);
        c->res->status = c->res->doc != NULL ? 200 : 500;
    } else {
        sl__api_set_error(c->res, 404, "no such resource");
    }
}

static void on_work(uv_work_t *w)
{
    struct job *j = SL_CONTAINER_OF(w, struct job, work);
    struct sl__api_call c;

    sl__api_call_init(&c, j->api, &j->res);
    c.req = j->req;
    c.owners = j->owners;
    if (j->gate) {
        j->admitted = authenticate(&c, j->auth);
    } else if (authenticate(&c, j->auth)) {
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
 * A 401 says how to authenticate (RFC 6750 §3), a 405 which methods the path has, from the
 * route table (RFC 9110 §15.5.6). */
static void answer(struct job *j, int status, const char *body)
{
    static const char *const bearer[] = { "WWW-Authenticate: Bearer realm=\"sluice\"", NULL };
    char allow[96];
    const char *allowed[] = { allow, NULL };
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
    } else if (body != NULL && status == 405 && path_methods(j->req->path) != 0) {
        methods_text(path_methods(j->req->path), true, allow, sizeof(allow));
        sl_http_respond_headers(j->x, status, allowed, "application/json", body, strlen(body));
    } else if (body != NULL) {
        if (status == 405) {
            sl_log(SL_LOG_ERROR, 0, "msg=\"a 405 without its methods\" path=\"%.64s\"",
                   j->req->path);
        }
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
    struct sl__api_defer *d = &j->res.defer;
    struct sl_sandbox_caller caller = { d->user_id, d->any_sandbox };
    struct sl_sandboxes *sb = j->api->sandboxes;
    sl_sandbox_reply_fn *reply = j->x != NULL ? on_sandbox_reply : j->reply;
    void *arg = j->x != NULL ? (void *)j->x : j->reply_arg;
    json_t *list;

    if (d->kind == SL__API_DEFER_MCP) {
        sl_mcp_run(j->api, j->x, d->mcp, j->auth);
    } else if (sb == NULL) {
        reply(arg, 503, json_pack("{s:s}", "message", "sandboxes are not enabled"));
    } else if (d->kind == SL__API_DEFER_CREATE) {
        sl_sandboxes_open(sb, d->spec, reply, arg);
        d->spec = NULL;
    } else if (d->kind == SL__API_DEFER_CALL) {
        sl_sandboxes_call(sb, &caller, d->repo, d->id, d->action, d->body, reply, arg);
    } else {
        list = sl_sandboxes_list(sb, &caller, d->repo[0] != '\0' ? d->repo : NULL);
        reply(arg, list != NULL ? 200 : 500, list);
    }
    free_job(j);
}

/* The proxies hold a snapshot without the access the job's change removed, or not (then the
 * change stays, and the answer says who did not take it). */
static void on_settled(void *arg, const char *failure)
{
    struct job *j = arg;

    if (failure != NULL) {
        sl_log(SL_LOG_WARN, 0,
               "msg=\"a change that removed access is not everywhere yet\" why=\"%s\"", failure);
        sl__api_set_error(&j->res, 503, failure);
    }
    answer(j, j->res.status, j->res.body);
    free_job(j);
}

static void on_work_done(uv_work_t *w, int status)
{
    struct job *j = SL_CONTAINER_OF(w, struct job, work);
    struct sl_api *api = j->api;
    bool changed = j->res.changed;
    bool queued = j->res.jobs_queued;

    (void)status;
    if (j->gate) {
        /* The body is read, then the request comes back to sl_api_handle(), which
         * authenticates again: the token may be gone by then. */
        if (j->admitted) {
            sl_http_proceed(j->x);
        } else {
            answer(j, j->res.status, j->res.body);
        }
        free_job(j);
        return;
    }
    if (j->res.defer.kind != SL__API_DEFER_NONE) {
        finish_deferred(j);
        return;
    }
    if (j->res.revokes && api->revoked != NULL && j->res.status < 300) {
        /* Answered once the proxies took it (the hook builds and pushes the snapshot). */
        api->revoked(api->hook_arg, on_settled, j);
        return;
    }
    if (j->res.doc != NULL) {
        if (api->status != NULL) {
            api->status(api->hook_arg, j->res.doc);
        }
        if (j->res.overview_for[0] != '\0') {
            sl__api_overview_finish(api, &j->res);
        }
        sl__api_set_json(&j->res, 200, j->res.doc);
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

/* True for the requests that start sandboxes: POST /api/v1/repos/OWNER/NAME/sandboxes and POST
 * /api/v1/jobs. */
static bool starts_sandboxes(const struct sl_http_request *req)
{
    const char *p = req->path;
    const char *s1;
    const char *s2;

    if (strcmp(req->method, "POST") != 0) {
        return false;
    }
    if (strcmp(p, JOBS_PATH) == 0) {
        return true;
    }
    if (strncmp(p, REPOS_PREFIX, strlen(REPOS_PREFIX)) != 0) {
        return false;
    }
    p += strlen(REPOS_PREFIX);
    s1 = strchr(p, '/');
    s2 = s1 != NULL ? strchr(s1 + 1, '/') : NULL;
    return s2 != NULL && strcmp(s2, "/sandboxes") == 0;
}

/* GET /readyz, on the loop: the hook's checks, 200 when ready, else 503. */
static void answer_ready(struct sl_api *api, struct sl_http_exchange *x)
{
    /* "ready" first; set again once known. */
    json_t *doc = json_pack("{s:b}", "ready", 0);
    bool ready = doc != NULL && (api->ready == NULL || api->ready(api->hook_arg, doc));
    char *text = NULL;

    if (doc != NULL && json_object_set_new(doc, "ready", json_boolean(ready)) == 0) {
        text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    }
    json_decref(doc);
    if (text == NULL) {
        sl_http_respond_error(x, 503, "out of memory");
        return;
    }
    sl_http_respond(x, ready ? 200 : 503, "application/json", text, strlen(text));
    sl_free(text);
}

/* The answers given on the loop before any token is looked up, which no body changes: the
 * dashboard's files, /healthz and /readyz, a refused Origin on /mcp, a sandbox's proxy token.
 * True when `x` was answered. */
static bool answer_at_once(struct sl_api *api, struct sl_http_exchange *x,
                           const struct sl_http_request *req)
{
    static const char healthy[] = "{\"ok\":true}";
    static const char use_get[] = "{\"message\":\"use GET\"}";
    /* The API's answers carry private data (tokens, environments, audit lines): never stored by
     * a cache on the way or the browser's; and they are JSON, never to be sniffed as a page. */
    static const char *const no_store[] = { "Cache-Control: no-store",
                                            "X-Content-Type-Options: nosniff", NULL };
    const struct sl_h1_header *h;

    /* The dashboard's files are public (they hold no data); its API calls carry the token. */
    if (sl_dashboard_is_path(req->path)) {
        sl_dashboard_handle(x, req);
        return true;
    }
    sl_http_exchange_set_headers(x, no_store);
    if (strcmp(req->path, "/healthz") == 0 || strcmp(req->path, "/readyz") == 0) {
        if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
            char allow[64];
            const char *allow_get[] = { allow, NULL };

            methods_text(path_methods(req->path), true, allow, sizeof(allow));
            sl_http_respond_headers(x, 405, allow_get, "application/json", use_get,
                                    sizeof(use_get) - 1);
        } else if (req->path[1] == 'h') {
            sl_http_respond(x, 200, "application/json", healthy, sizeof(healthy) - 1);
        } else {
            answer_ready(api, x);
        }
        return true;
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
            return true;
        }
    }
    h = sl_h1_find(req->head, "authorization");
    /* A sandbox's proxy token is not an API token; say so rather than "unknown token". */
    if (h != NULL && api->sandboxes != NULL) {
        const char *token = bearer_token((const char *)h->value.p);

        if (token != NULL && strlen(token) < 200 && sl_sandboxes_is_token(api->sandboxes, token)) {
            sl_http_respond_error(
                    x, 403,
                    starts_sandboxes(req)
                            ? "job and sandbox tokens can't start sandboxes"
                            : "sandbox tokens cannot use the API nor start sandboxes");
            return true;
        }
    }
    return false;
}

/* Frees a job that was never queued (free_job() counts queued ones out) and answers its
 * exchange `message` with 503. */
static void job_drop(struct job *j, const char *message)
{
    struct sl_http_exchange *x = j->x;

    json_decref(j->owners);
    if (j->auth != NULL) {
        sodium_memzero(j->auth, strlen(j->auth));
        sl_free(j->auth);
    }
    sl_free(j->own_method);
    sl_free(j);
    sl_http_respond_error(x, 503, message);
}

/* A job for the request of `x`, its Authorization value copied; NULL with the 503 answered. */
static struct job *job_new(struct sl_api *api, struct sl_http_exchange *x,
                           const struct sl_http_request *req)
{
    const struct sl_h1_header *h = sl_h1_find(req->head, "authorization");
    struct job *j = sl_calloc(1, sizeof(*j));

    if (j == NULL) {
        sl_http_respond_error(x, 503, "out of memory");
        return NULL;
    }
    j->api = api;
    j->x = x;
    j->req = req;
    if (h != NULL) {
        j->auth = sl_strndup((const char *)h->value.p, h->value.n);
        if (j->auth == NULL) {
            job_drop(j, "out of memory");
            return NULL;
        }
    }
    return j;
}

/* Hands `j` to the thread pool (on_work(), then on_work_done() on the loop). */
static void job_queue(struct job *j)
{
    if (uv_queue_work(j->api->loop, &j->work, on_work, on_work_done) < 0) {
        job_drop(j, "cannot queue the request");
        return;
    }
    j->api->_pending++;
}

void sl_api_handle(struct sl_http_exchange *x, const struct sl_http_request *req, void *arg)
{
    struct sl_api *api = arg;
    struct job *j;

    if (answer_at_once(api, x, req)) {
        return;
    }
    j = job_new(api, x, req);
    if (j == NULL) {
        return;
    }
    /* HEAD is GET without the body (RFC 9110 §9.3.2): the routes see a GET, and the server
     * leaves the body out of the answer to a HEAD. */
    if (strcmp(req->method, "HEAD") == 0) {
        j->ireq = *req;
        j->ireq.method = j->own_method = sl_strdup("GET");
        j->req = &j->ireq;
        if (j->own_method == NULL) {
            job_drop(j, "out of memory");
            return;
        }
    }
    /* Who owns which sandbox is known on the loop only: hand the audit (and overview) job a
     * copy. */
    if ((under(req->path, AUDIT_PATH) || strcmp(req->path, OVERVIEW_PATH) == 0)
        && api->sandboxes != NULL) {
        j->owners = sl_sandboxes_owners(api->sandboxes);
        if (j->owners == NULL) {
            job_drop(j, "out of memory");
            return;
        }
    }
    job_queue(j);
}

void sl_api_gate(struct sl_http_exchange *x, const struct sl_http_request *req, void *arg)
{
    struct sl_api *api = arg;
    struct job *j;

    if (answer_at_once(api, x, req)) {
        return;
    }
    j = job_new(api, x, req);
    if (j != NULL) {
        j->gate = true;
        job_queue(j);
    }
}
