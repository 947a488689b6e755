/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/api.h - the REST API of the control plane (docs/reference/api.md §5 intro, §5.1,
 * §5.1b, §5.2): routes, bearer-token authentication, roles and JSON errors, on top of http/server.
 *
 * sl_api_handle() is an sl_http_handler_fn. GET /healthz and the dashboard's static files
 * (control/web/dashboard.h, no token) are answered on the loop; every other request becomes one
 * uv_queue_work job that authenticates the caller, runs the whole request against the store
 * (SQLite never runs on the loop) and builds the response body; the after-work callback on the
 * loop answers the exchange and, when the job committed a change, calls the `changed` callback
 * (the daemon pushes a new snapshot from there).
 *
 * For the dashboard (docs/dashboard.md): GET /api/v1/me → {"name","admin"}; GET
 * /api/v1/sandboxes → the caller's open sandboxes in every repository; GET
 * /api/v1/audit?limit=N&filters → the last N (1-500, default 100) lines of `audit_log` that pass
 * the filters, newest first, read in the job (control/web/audittail.h) with the suggestion of each
 * policy refusal (control/web/suggest.h); GET /api/v1/audit/refusals → those refusals grouped,
 * each with the rule to apply. Admins see every line, other users the lines of the sandboxes they
 * created: the owners are copied from the sandbox manager on the loop when the job is queued.
 * GET /api/v1/overview → those lines' decisions per minute over the last hour and the caller's
 * jobs (in the job), then the snapshot and proxies from the `status` hook and the caller's open
 * sandboxes (on the loop).
 *
 * `/mcp` is the MCP endpoint (control/web/mcp.h), whose tool calls come back in through
 * sl_api_dispatch().
 *
 * Who may do what (docs/reference/api.md, "Authentication and roles"): a token has a scope
 * (read, write, admin) and may be expired; a disabled user's tokens are refused; the admin
 * actions need an admin's token of scope admin. Repositories and roles come from the git
 * platform (control/git/gitplat.h). A change that removes access (a static client deleted, a
 * user disabled or demoted, a member removed or lowered, a repository changed or deleted)
 * answers only once every proxy acknowledged a snapshot without that access, or 503 naming the
 * ones that did not (the `revoked` hook).
 *
 * Lifecycle: fill a struct sl_api (caller storage) -> sl_api_init() -> pass sl_api_handle and
 * the struct to sl_http_server_create() -> on stop, close the server and let the loop run until
 * sl_api_pending() is 0 (every job has answered its exchange) -> release the store and key.
 */
#ifndef SL_CONTROL_WEB_API_H
#define SL_CONTROL_WEB_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "base/err.h"
#include "control/git/gitplat.h"
#include "control/sandbox/sandbox.h"
#include "control/store/secrets.h"
#include "control/store/store.h"
#include "http/server.h"

/* The answer to a request made with sl_api_dispatch(): the HTTP status and the JSON body (a new
 * reference the callee takes; NULL or JSON null when the answer has none, as a 204). */
typedef void sl_api_reply_fn(void *arg, int status, json_t *body);

/* A REST request made inside the control plane (the MCP tools). Every pointer is borrowed for
 * the call to sl_api_dispatch(), which copies what it keeps. */
struct sl_api_request {
    /* "GET", "POST", ... */
    const char *method;
    /* The path as it would come over HTTP (segments percent-encoded), without a query. */
    const char *path;
    /* The query string without '?'; NULL for none. */
    const char *query;
    /* The caller's Authorization header value ("Bearer TOKEN"); NULL for none. */
    const char *authorization;
    /* The body (JSON text); NULL when `body_len` is 0. */
    const void *body;
    size_t body_len;
};

/* Called on the loop after a job committed a change to the database. */
typedef void sl_api_changed_fn(void *arg);

/* Called on the loop to add members to the document of GET /api/v1/status (`doc`, borrowed):
 * what only the loop knows, such as the pusher's state. */
typedef void sl_api_status_fn(void *arg, json_t *doc);

/* The end of the wait for a change that removed access: `failure` is NULL once every proxy
 * acknowledged a snapshot built after the change, else what went wrong, for a person (the
 * answer becomes 503 with it). `job` is the hook's. */
typedef void sl_api_settled_fn(void *job, const char *failure);

/* Called on the loop after a job committed a change that removed access, instead of
 * `changed`: the daemon builds and pushes a snapshot and calls `done(job, ...)` once, on the
 * loop, when every proxy acknowledged it or after 5 s; at once (from this call) when there is
 * nothing to wait for (no proxy) or the daemon is stopping. */
typedef void sl_api_revoked_fn(void *arg, sl_api_settled_fn *done, void *job);
/* Called on the loop for GET /readyz (docs/reference/api.md §5.7): adds what it checked to `doc`
 * (borrowed) and returns whether the control plane is ready. */
typedef bool sl_api_ready_fn(void *arg, json_t *doc);

struct sl_api {
    /* The loop the server runs on. Borrowed. */
    uv_loop_t *loop;
    /* The database and the key; borrowed, used from thread-pool jobs (both are thread-safe). */
    struct sl_store *store;
    struct sl_secrets *secrets;
    /* The git platform (repositories, roles, credentials); borrowed, used from jobs. */
    struct sl_gitplat *git;
    /* The sandbox manager (loop side), NULL when sandboxes are off. Borrowed. */
    struct sl_sandboxes *sandboxes;
    /* The built-in base image for resolution (`--image`); NULL for the default. Borrowed. */
    const char *default_image;
    /* The proxy's audit log that GET /api/v1/audit tails (`--audit-log`); NULL answers an
     * empty list. Borrowed. */
    const char *audit_log;
    /* Optional hooks (NULL for none), called on the loop with `hook_arg`. */
    sl_api_changed_fn *changed;
    sl_api_status_fn *status;
    /* NULL: such a change answers at once, as any other (after `changed`). */
    sl_api_revoked_fn *revoked;
    /* GET /readyz; NULL answers ready. */
    sl_api_ready_fn *ready;
    /* Jobs were queued (control/jobs/jobs): the pool may start them. */
    sl_api_changed_fn *jobs_queued;
    void *hook_arg;
    /* Jobs queued and not yet answered; only the module writes it. */
    size_t _pending;
    /* MCP tool calls dispatched and not yet answered; only control/web/mcp writes it. */
    size_t _mcp_calls;
};

/* Prepares `api` after the caller set the public members. */
void sl_api_init(struct sl_api *api);

/* The request handler (an sl_http_handler_fn); `arg` is the struct sl_api. */
void sl_api_handle(struct sl_http_exchange *x, const struct sl_http_request *req, void *arg);

/* The gate of request bodies (sl_http_server_config.gate; `arg` is the struct sl_api): a
 * request with a body is let in only with a token that authenticates (a user's, not disabled,
 * not expired); anything else gets the answer the handler would give without reading it (401,
 * the public paths', a refused Origin's, a sandbox token's 403), and its body is never read. */
void sl_api_gate(struct sl_http_exchange *x, const struct sl_http_request *req, void *arg);

/* Runs the REST request `r` as if it had come over HTTP: the same authentication (with
 * r->authorization), routes, permissions, answers and `changed` hook; the answer goes to
 * `reply(arg, ...)` on the loop, never before this function returned. The path /mcp is not a
 * route here (404). Loop thread only. Returns 0 (reply will be called exactly once), or
 * SL_ENOMEM or a UV_E* code (reply will not be called). */
SL_MUST_CHECK int sl_api_dispatch(struct sl_api *api, const struct sl_api_request *r,
                                  sl_api_reply_fn *reply, void *arg);

/*
 * Prepares the sandbox of a job (control/jobs/jobs) off the loop, as a POST .../sandboxes of the
 * user `user_id` would: the user must be enabled and may use the repository (its roles, as
 * their account can act), resolution (docs/reference/api.md §5.2) with the environment `envkey` (an
 * id or name visible to the user; NULL resolves), values opened, the git credential issued. Returns
 * 0 with
 * `*spec` (owned by the caller, marked as a job's) and `*env` ({"id","name","matched_by"}, a new
 * reference), SL_ENOTFOUND (the user or the environment is gone; "no environment 'X'"),
 * SL_EINVAL (the user is disabled or may not use the repository: "account disabled",
 * "repository not found", "write access required", ...) or another failure, with the reason in
 * `err`. Blocks: thread pool only.
 */
SL_MUST_CHECK int sl_api_prepare_sandbox(struct sl_api *api, const char *user_id, const char *repo,
                                         const char *ref, const char *envkey,
                                         struct sl_sandbox_spec **spec, json_t **env, char *err,
                                         size_t errlen);

/* Jobs still running; the store must stay open until this is 0. */
size_t sl_api_pending(const struct sl_api *api);

#endif
