/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/api_int.h - what the files of the REST API share, and nobody else: the state of
 * one request in its thread-pool job (struct sl__api_call), the result it builds, and the
 * routes of each file.
 *
 *   api.c            results, small parsers, authentication (scopes, expiry, disabled users),
 *                    the content type of writes, the MCP and jobs routes, the job;
 *   api_envs.c       environments (§5.1) and static clients (§5.1b);
 *   api_learn.c      learn mode of an environment (§5.1): observe, suggestions, applying them;
 *   api_sandboxes.c  resolution (§5.2) and sandboxes (§5.3);
 *   api_audit.c      the audit tail, its refusals grouped, and the admins' list of sandboxes;
 *   api_overview.c   the dashboard's overview (decisions per minute, proxies, sandboxes, jobs);
 *   api_users.c      users and API tokens (§5.8);
 *   api_repos.c      repositories and their members (§5.9), and the routes under a
 *                    repository (its sandboxes go to api_sandboxes.c).
 *
 * Everything here runs in the job, on a thread-pool thread, except where a comment says the
 * loop finishes it (struct sl__api_defer).
 */
#ifndef SL_CONTROL_WEB_API_INT_H
#define SL_CONTROL_WEB_API_INT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "base/err.h"
#include "control/env/environment.h"
#include "control/env/jbody.h"
#include "control/sandbox/sandbox.h"
#include "control/store/model.h"
#include "control/web/api.h"
#include "control/web/mcp.h"
#include "http/server.h"

/* Longest path segment or query value we decode (names are at most 128 code points). */
#define SL__API_SEGMENT_MAX 1024

enum sl__api_defer_kind {
    SL__API_DEFER_NONE = 0,
    SL__API_DEFER_CREATE,
    SL__API_DEFER_CALL,
    SL__API_DEFER_LIST,
    SL__API_DEFER_MCP,
};

struct sl__api_defer {
    enum sl__api_defer_kind kind;
    /* SL__API_DEFER_CREATE: the prepared create (owned). */
    struct sl_sandbox_spec *spec;
    char user_id[SL_UUID_LEN + 1];
    /* The caller may call every sandbox of the repository (struct sl_sandbox_caller). */
    bool any_sandbox;
    char repo[SL__API_SEGMENT_MAX];
    char id[SL__API_SEGMENT_MAX];
    char action[16];
    /* SL__API_DEFER_CALL: the parsed body (owned; NULL when empty). */
    json_t *body;
    /* SL__API_DEFER_MCP: the prepared MCP message (owned). */
    struct sl_mcp_plan *mcp;
};

/* The answer a job builds. */
struct sl__api_result {
    int status;
    /* JSON text (sl_malloc'd via jansson) or NULL for no body. */
    char *body;
    /* The job committed a change. */
    bool changed;
    /* ... one that removed access: the answer waits for the proxies (struct sl_api revoked). */
    bool revokes;
    /* The job queued jobs (control/jobs/jobs). */
    bool jobs_queued;
    /* A document the loop completes (status) before it becomes `body`; owned. */
    json_t *doc;
    /* GET /api/v1/overview: the caller's user id, for whom the loop completes `doc` after the
     * status hook (sl__api_overview_finish()); "" for every other request. */
    char overview_for[SL_UUID_LEN + 1];
    /* Sandbox work the loop finishes (the manager lives there); the exchange is answered by
     * the manager's reply. */
    struct sl__api_defer defer;
};

/* What a job knows about its caller and its store. */
struct sl__api_call {
    struct sl_api *api;
    const struct sl_http_request *req;
    /* The caller. `user.is_admin` is true only for an admin's token of scope admin: what a
     * request may do as an admin; `account_admin` is the account's own flag. */
    struct sl_user user;
    bool account_admin;
    enum sl_token_scope scope;
    /* The expiry of the token the request came with (RFC 3339 UTC), "" for one without end. */
    char token_expires_at[32];
    struct sl_env_sealer sealer;
    struct sl__api_result *res;
    /* Borrowed from the job. */
    const json_t *owners;
};

/* ---- api.c ---- */

/* Readies `c` for a request of `api` whose answer goes to `res`: zeroed, with the sealer of
 * api->secrets. */
void sl__api_call_init(struct sl__api_call *c, struct sl_api *api, struct sl__api_result *res);

/* The answer `status` with the document `doc` (takes ownership; NULL is a 500). */
void sl__api_set_json(struct sl__api_result *res, int status, json_t *doc);

/* The answer `status` with {"message": message}, or printf-style. */
void sl__api_set_error(struct sl__api_result *res, int status, const char *message);
void sl__api_set_errorf(struct sl__api_result *res, int status, const char *fmt, ...)
        SL_PRINTF(3, 4);

/* A failure of this side: logged with `what`; 503 for SL_ENOMEM, 500 otherwise. */
void sl__api_set_internal(struct sl__api_result *res, const char *what, int rc);

/* Finds `key` in the query string and decodes its value into `out`. Returns 0, SL_ENOTFOUND
 * or SL_EINVAL. */
SL_MUST_CHECK int sl__api_query_get(const char *query, const char *key, char *out, size_t cap);

/* Splits the part of a path after a prefix: "" (nothing), "/SEG" or "/SEG/REST". Returns
 * false when the path has another shape. */
bool sl__api_split_tail(const char *tail, char *seg, size_t cap, const char **rest);

/* True when `s` has the shape of a UUID (36 characters, hex digits and dashes). */
bool sl__api_is_uuid_shaped(const char *s);

/* Parses the request body as a JSON object (sl_jbody_parse(): no duplicate keys, no NUL).
 * Returns it (a new reference), or NULL with the 400 that names the problem set (503 when out
 * of memory). */
json_t *sl__api_body_object(struct sl__api_call *c);

/* The caller as the git platform sees them (struct sl_gitplat_caller). */
struct sl_gitplat_caller sl__api_git_caller(const struct sl__api_call *c);

/* The store's answer `rc` about one thing: true when it succeeded (`rc` >= 0), with nothing
 * set; false otherwise, with a 404 of the printf-style message for SL_ENOTFOUND, or
 * sl__api_set_internal() with `what`. */
bool sl__api_store_ok(struct sl__api_result *res, int rc, const char *what, const char *fmt, ...)
        SL_PRINTF(4, 5);

/* The 422 {"message": `what`, "errors": [{"field": `field`, "message": `message`}]}. */
void sl__api_set_invalid(struct sl__api_result *res, const char *what, const char *field,
                         const char *message);

/* True when the object `root` has no member but the `n` names in `known`; false with the 422 of
 * sl__api_set_invalid() for the first other one (its name, cut at 64 bytes, as the field and
 * `expected` as the message). */
bool sl__api_only_known(struct sl__api_result *res, json_t *root, const char *const *known,
                        size_t n, const char *what, const char *expected);

/* sl__api_body_object() whose members must be among the `n` names in `known`
 * (sl__api_only_known()). NULL with the answer set. */
json_t *sl__api_body_known(struct sl__api_call *c, const char *const *known, size_t n,
                           const char *what, const char *expected);

/* `doc` (taken) with the member "token": the secret `token`, shown this once. NULL when that
 * fails (or `doc` is NULL). */
json_t *sl__api_with_token(json_t *doc, const char *token);

/* The API form of one element of a list (a new reference; NULL when out of memory). */
typedef json_t *sl__api_item_fn(const void *item);

/* The answer to listing: for the store's failure `rc`, sl__api_set_internal() with `what`;
 * else 200 {"`key`": [...]} with `item` of each of the `n` elements of `size` bytes at `v`. */
void sl__api_set_list(struct sl__api_result *res, int rc, const char *what, const char *key,
                      const void *v, size_t n, size_t size, sl__api_item_fn *item);

/* A route's whole answer. */
typedef void sl__api_handler_fn(struct sl__api_call *c);

/*
 * The start of the routes of a collection, /api/v1/NAME`tail`: a 404 unless `tail` is "",
 * "/SEG" or, when `rest` is not NULL, "/SEG/REST"; then a 403 of the message `admins_only` for
 * a caller who is no admin (NULL: for nobody); then for "" the collection itself, `list` for
 * GET and `create` for POST (405 otherwise). True when `tail` names one item, whose answer is
 * the caller's: `seg` (SL__API_SEGMENT_MAX bytes) holds it and `*rest` what follows (NULL for
 * nothing). False when the answer is set.
 */
bool sl__api_route_collection(struct sl__api_call *c, const char *tail, const char *admins_only,
                              sl__api_handler_fn *list, sl__api_handler_fn *create, char *seg,
                              const char **rest);

/* ---- api_users.c ---- */

/* /api/v1/users`tail` and /api/v1/tokens`tail`. */
void sl__api_route_users(struct sl__api_call *c, const char *tail);
void sl__api_route_tokens(struct sl__api_call *c, const char *tail);

/* ---- api_repos.c ---- */

/* The caller's role in `repo`, which they must see. False with the answer set: 404
 * "repository not found" when they cannot see it or it does not exist, so that neither is told
 * apart. */
bool sl__api_seen_role(struct sl__api_call *c, const char *repo, enum sl_repo_role *role);

/* GET /api/v1/repos. */
void sl__api_list_repos(struct sl__api_call *c);

/* /api/v1/repos/{owner}/{repo}[/members[/{user}] | /sandboxes...] (`tail` after
 * /api/v1/repos/). */
void sl__api_route_repos(struct sl__api_call *c, const char *tail);

/* ---- api_envs.c ---- */

/* Looks up the environment `key` (an id or a name) among those the caller sees: by id, or by
 * name among the caller's own first, then the global ones. Returns 0, SL_ENOTFOUND or an
 * error. */
SL_MUST_CHECK int sl__api_find_visible(struct sl__api_call *c, const char *key,
                                       struct sl_env_row *out);

/* The name of the owner of `r` as the API shows it: the caller's for user scope, NULL for
 * global. */
const char *sl__api_owner_name(const struct sl__api_call *c, const struct sl_env_row *r);

/* A POST (`prev` NULL) or PUT (replacing `prev`) of an environment with the request's body, or
 * with `doc` (borrowed) when it is not NULL: validated, sealed, stored and answered. */
void sl__api_env_write(struct sl__api_call *c, const struct sl_env_row *prev, json_t *doc);

/* /api/v1/environments`tail` and /api/v1/clients`tail`. */
void sl__api_route_envs(struct sl__api_call *c, const char *tail);
void sl__api_route_clients(struct sl__api_call *c, const char *tail);

/* ---- api_sandboxes.c ---- */

/* GET /api/v1/resolve?repo=...[&environment=...]. */
void sl__api_resolve(struct sl__api_call *c);

/* False, with the 503 set, when this control plane runs no sandboxes. */
bool sl__api_sandboxes_enabled(struct sl__api_call *c);

/* /api/v1/repos/{repo}/sandboxes`rest` (`rest` is "" or "/{id}/{action}"; `repo` is a valid
 * owner/name). */
void sl__api_route_sandboxes(struct sl__api_call *c, const char *repo, const char *rest);

/* ---- api_learn.c ---- */

/* Is `rest` (what follows /api/v1/environments/{id}/) a route of learn mode: "observe",
 * "suggestions" or "suggestions/apply"? */
bool sl__api_is_learn_route(const char *rest);

/* The learn-mode route `rest` of the environment `r` (docs/reference/api.md §5.1): POST and DELETE
 * .../observe, GET .../suggestions, POST .../suggestions/apply. */
void sl__api_route_learn(struct sl__api_call *c, const struct sl_env_row *r, const char *rest);

/* ---- api_audit.c ---- */

/* GET /api/v1/audit (`path`) and GET /api/v1/audit/refusals. */
void sl__api_route_audit(struct sl__api_call *c, const char *path);

/* GET /api/v1/sandboxes: the caller's open sandboxes in every repository. */
void sl__api_list_all_sandboxes(struct sl__api_call *c);

/* Whether the caller may see the audit line `line` (a parsed object, borrowed): admins every
 * line, others those of the sandboxes they created (c->owners). */
bool sl__api_may_see_line(const struct sl__api_call *c, const json_t *line);

/* ---- api_overview.c ---- */

/* GET /api/v1/overview, the job's half: the decisions per minute and the jobs into
 * c->res->doc, and c->res->overview_for. */
void sl__api_overview(struct sl__api_call *c);

/* The loop's half, after the status hook filled res->doc: the snapshot and the proxies from the
 * status, the caller's open sandboxes from api->sandboxes. On failure res->doc is NULL (a 500). */
void sl__api_overview_finish(struct sl_api *api, struct sl__api_result *res);

#endif
