/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/env/resolve.h - which environment a run in a repository gets, and the effective runtime
 * after merging it with the global default (docs/reference/api.md §5.2, `GET /api/v1/resolve`).
 *
 * Pure logic over rows the caller has loaded: no database, no HTTP. The caller passes the
 * explicit choice (if the request named one and it exists) and the candidate rows; this module
 * applies the precedence and the merge, and re-checks every candidate itself (owner, scope,
 * binding), so a store query that returns too much can never hand one user's environment to
 * another.
 *
 * Lifecycle: sl_resolve_run() fills caller storage -> read it / sl_resolve_render() ->
 * sl_resolve_finish(). The result borrows from the request's rows: they must outlive it.
 */
#ifndef SL_CONTROL_ENV_RESOLVE_H
#define SL_CONTROL_ENV_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/err.h"
#include "control/env/environment.h"
#include "control/store/model.h"

/* How the environment was chosen; sl_resolve_matched_by_name() gives the API text. */
enum sl_matched_by {
    /* The request named it. */
    SL_MATCHED_BY_EXPLICIT = 0,
    /* The caller's own user environment binds the repository. */
    SL_MATCHED_BY_USER_BINDING,
    /* A global environment other than the default binds the repository. */
    SL_MATCHED_BY_GLOBAL_BINDING,
    /* Nothing binds it; the global default applies. */
    SL_MATCHED_BY_GLOBAL_DEFAULT,
    /* No environment at all: built-in defaults, network off. */
    SL_MATCHED_BY_NONE,
};

struct sl_resolve_request {
    /* The caller's user id; NULL or "" when there is none. Borrowed. */
    const char *user_id;
    /* Whether the caller is an admin. Admins see global environments as everyone does, and
     * not other users' user environments: those stay private (docs/reference/api.md §5.1 lists "the
     * caller's user environments and all global ones"), so this widens nothing here. */
    bool is_admin;
    /* The repository path, checked with sl_env_repo_is_valid(). Borrowed. */
    const char *repo;
    /* trigger=webhook: no signed-in user, so user bindings are skipped (step 2). */
    bool webhook;
    /* The environment named by `environment=ID-OR-NAME`, already looked up; NULL when the
     * request named none. Borrowed. */
    const struct sl_env_row *explicit_env;
    /* Candidate rows: the caller's user environments binding the repo, the global
     * non-default ones binding it, and the global default (is_default set). Extra rows are
     * harmless: each is checked again. When several rows qualify for one step (the store's
     * uniqueness rules should prevent it), the first in this order wins. Borrowed. */
    const struct sl_env_row *const *candidates;
    size_t n_candidates;
    /* The built-in base image (`sluice control --image`); NULL for SL_ENV_DEFAULT_IMAGE. */
    const char *default_image;
};

/* One variable of the effective runtime. Strings borrowed from the result. */
struct sl_resolve_var {
    const char *name;
    /* The stored sealed value (docs/control-plane.md); open it to use it. */
    const char *sealed;
    bool secret;
    /* Comes from the global default rather than the chosen environment. */
    bool inherited;
};

/* The effective runtime. Caller storage, filled by sl_resolve_run(). */
struct sl_resolve_result {
    enum sl_matched_by matched_by;
    /* The chosen environment, NULL for SL_MATCHED_BY_NONE. Borrowed from the request. */
    const struct sl_env_row *chosen;
    /* The global default merged in, NULL when there is none. Borrowed from the request. */
    const struct sl_env_row *fallback;
    /* From the chosen environment when set, else from the default, else built in; the pull
     * policy and the registry's credentials ({"username","sealed"}, NULL for none; borrowed)
     * of the same environment (if-missing and none for the built-in image). */
    const char *base_image;
    bool image_pull_always;
    const char *registry_json;
    int64_t cpus_centi;
    int64_t memory_bytes;
    /* From the chosen environment only; off when none was chosen. */
    bool network;
    /* The chosen environment's stored egress_json; NULL when the network is off. Borrowed. */
    const char *egress_json;
    /* The union of both environments' variables: the chosen one's first, in its stored
     * order, then the default's whose names the chosen one does not use. Owned array. */
    struct sl_resolve_var *vars;
    size_t n_vars;
    /* The parsed env_json of the chosen environment and of the default; the strings of
     * `vars` point into them. Owned. */
    json_t *_chosen_vars;
    json_t *_fallback_vars;
};

/* Resolves. Returns:
 *   0             `*out` is filled (finish it);
 *   SL_EINVAL     `req->repo` is not a repository path (answer 400);
 *   SL_ENOTFOUND  `explicit_env` is another user's user environment (answer 404, as if it
 *                 did not exist: its existence is not the caller's business);
 *   SL_EIO        a row's stored env_json is damaged (answer 500);
 *   SL_ENOMEM.
 * On failure `*out` is zeroed. */
SL_MUST_CHECK int sl_resolve_run(const struct sl_resolve_request *req,
                                 struct sl_resolve_result *out);

/* Frees what the result owns and zeroes it. A zeroed result is fine. */
void sl_resolve_finish(struct sl_resolve_result *r);

/* "explicit", "user-binding", "global-binding", "global-default" or "none". */
const char *sl_resolve_matched_by_name(enum sl_matched_by m);

/* The JSON of `GET /api/v1/resolve`:
 *   {"repo", "matched_by", "environment": {"id","name","scope"} or null,
 *    "default_environment": {"id","name"} or null, "base_image", "image_pull", "cpus", "memory",
 *    "network", "env": [{"name","value","secret","inherited"}...], "egress": {...} or null,
 *    "undecryptable": [...] (only when some value does not open)}
 * with values shown as sl_env_render() shows them (secrets masked, credentials as has_value).
 * `sealer` (borrowed) opens the non-secret values. Returns 0 with `*out` a new reference,
 * SL_EIO when stored JSON is damaged, or SL_ENOMEM. */
SL_MUST_CHECK int sl_resolve_render(const struct sl_resolve_result *r, const char *repo,
                                    const struct sl_env_sealer *sealer, json_t **out);

#endif
