/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/api_sandboxes.c - resolution (docs/reference/api.md §5.2) and sandboxes (§5.3) of the
 * REST API: which environment a repository gets, and a sandbox's create prepared in the job (who
 * may, by the git platform's roles; the values opened, the git credential issued, the spec built)
 * for control/sandbox/sandbox to finish on the loop; the calls into a sandbox are checked the same
 * way and deferred to the loop.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "control/env/environment.h"
#include "control/env/resolve.h"
#include "control/web/api.h"
#include "control/web/api_int.h"

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
static int resolve_for(struct sl__api_call *c, const char *repo, const char *envkey, bool webhook,
                       struct sl_env_row rows[4], struct sl_resolve_result *out)
{
    const struct sl_env_row *cands[3];
    struct sl_resolve_request rq;
    size_t n = 0;
    int rc = 0;

    memset(&rq, 0, sizeof(rq));
    rq.webhook = webhook;
    if (envkey != NULL) {
        rc = sl__api_find_visible(c, envkey, &rows[3]);
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

void sl__api_resolve(struct sl__api_call *c)
{
    char repo[SL__API_SEGMENT_MAX] = "";
    char envkey[SL__API_SEGMENT_MAX] = "";
    char trigger[32] = "";
    struct sl_env_row rows[4];
    struct sl_resolve_result out;
    bool webhook;
    bool named;
    json_t *doc = NULL;
    int rc;

    memset(rows, 0, sizeof(rows));
    memset(&out, 0, sizeof(out));
    if (sl__api_query_get(c->req->query, "repo", repo, sizeof(repo)) < 0
        || !sl_env_repo_is_valid(repo, strlen(repo))) {
        sl__api_set_error(c->res, 400, "repo: a repository path like owner/name is required");
        return;
    }
    rc = sl__api_query_get(c->req->query, "trigger", trigger, sizeof(trigger));
    if (rc == 0 && strcmp(trigger, "webhook") != 0) {
        sl__api_set_error(c->res, 400, "trigger: only 'webhook' is known");
        return;
    }
    webhook = rc == 0;
    rc = sl__api_query_get(c->req->query, "environment", envkey, sizeof(envkey));
    if (rc == SL_EINVAL) {
        sl__api_set_error(c->res, 400, "environment: malformed");
        return;
    }
    named = rc == 0;
    rc = resolve_for(c, repo, named ? envkey : NULL, webhook, rows, &out);
    if (rc == 0) {
        rc = sl_resolve_render(&out, repo, &c->sealer, &doc);
    }
    if (rc == 0) {
        sl__api_set_json(c->res, 200, doc);
    } else if (rc == SL_ENOTFOUND) {
        sl__api_set_errorf(c->res, 404, "no environment '%s'", envkey);
    } else if (rc == SL_EINVAL) {
        sl__api_set_error(c->res, 400, "repo: a repository path like owner/name is required");
    } else {
        sl__api_set_internal(c->res, "resolving", rc);
    }
    sl_resolve_finish(&out);
    for (size_t i = 0; i < SL_ARRAY_LEN(rows); i++) {
        sl_env_row_finish(&rows[i]);
    }
}

/* ---- sandboxes (§5.3): prepared here, finished by control/sandbox/sandbox on the loop -------- */

/* Opens one sealed value into a new string (NULL when it does not open). */
static char *open_string(struct sl__api_call *c, const char *sealed)
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

/* The variables (opened; values that do not open are dropped with a warning, docs/reference/api.md
 * §5.1), the secrets to redact (secret variables and the chosen environment's credentials) and
 * the variables of its placeholder credentials. */
static int fill_values(struct sl__api_call *c, const struct sl_resolve_result *r,
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
        const char *env = json_string_value(
                json_object_get(json_object_get(rule, "credential"), "placeholder_env"));
        char *value;

        if (rc < 0 || !json_is_string(sealed)) {
            continue;
        }
        value = open_string(c, json_string_value(sealed));
        if (value != NULL) {
            rc = push_str(&spec->secrets, &spec->n_secrets, value);
        }
        /* The sandbox gets a placeholder in this variable, never the value (snapshot.md §3). */
        if (rc == 0 && env != NULL) {
            rc = push_str(&spec->placeholder_envs, &spec->n_placeholder_envs, sl_strdup(env));
        }
    }
    json_decref(egress);
    return rc;
}

/* The registry's credentials of the resolved image, the password opened. One that does not
 * open (the key changed) is left out with a warning: the pull then goes without, and the
 * registry says what it thinks of that. */
static int fill_registry(struct sl__api_call *c, const struct sl_resolve_result *r,
                         struct sl_sandbox_spec *spec)
{
    json_t *stored = NULL;
    int rc;

    spec->image_pull_always = r->image_pull_always;
    if (r->registry_json == NULL) {
        return 0;
    }
    rc = sl_env_load_registry(r->registry_json, &stored);
    if (rc < 0) {
        return rc;
    }
    spec->registry_password = open_string(c, json_string_value(json_object_get(stored, "sealed")));
    if (spec->registry_password == NULL) {
        sl_log(SL_LOG_WARN, 0,
               "msg=\"a registry password does not open (encryption key changed?); the image is "
               "pulled without credentials\" image=%s",
               r->base_image);
    } else {
        spec->registry_username = sl_strdup(json_string_value(json_object_get(stored, "username")));
        rc = spec->registry_username != NULL ? 0 : SL_ENOMEM;
    }
    json_decref(stored);
    return rc;
}

/* Resolves the environment for `repo` (`envkey` NULL resolves, else it must be visible) and
 * builds the create of a sandbox for the caller. Returns 0 with `*specp` (and `*envp`, when
 * not NULL: {"id","name","matched_by"}, ids null for none), SL_ENOTFOUND (the environment is
 * not visible) or another failure. */
static int prepare_spec(struct sl__api_call *c, const char *repo, const char *ref,
                        const char *envkey, enum sl_repo_role role, struct sl_sandbox_spec **specp,
                        json_t **envp)
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
        spec->owner_email = c->user.email != NULL ? sl_strdup(c->user.email) : NULL;
        spec->role = role;
        spec->repo = sl_strdup(repo);
        spec->ref = ref != NULL ? sl_strdup(ref) : NULL;
        spec->env_id = out.chosen != NULL ? sl_strdup(out.chosen->id) : NULL;
        spec->env_name = out.chosen != NULL ? sl_strdup(out.chosen->name) : NULL;
        spec->image = sl_strdup(out.base_image);
        spec->cpus_centi = out.cpus_centi;
        spec->memory_bytes = out.memory_bytes;
        if (spec->owner_id == NULL || spec->owner_name == NULL || spec->repo == NULL
            || (c->user.email != NULL && spec->owner_email == NULL)
            || (ref != NULL && spec->ref == NULL) || spec->image == NULL
            || (out.chosen != NULL && (spec->env_id == NULL || spec->env_name == NULL))) {
            rc = SL_ENOMEM;
        }
    }
    if (rc == 0) {
        rc = fill_values(c, &out, spec);
    }
    if (rc == 0) {
        rc = fill_registry(c, &out, spec);
    }
    if (rc == 0) {
        /* The platform's credential for this sandbox: git access write at most (the proxy
         * narrows it at every snapshot, sl_git_access_of()). None without a remote. */
        rc = c->api->git->ops->credential(c->api->git, repo, c->user.id, SL_GIT_ACCESS_WRITE,
                                          &spec->git_cred);
        rc = rc == SL_ENOTFOUND ? 0 : rc;
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

/* May the caller create or call sandboxes in `repo`? False with the refusal set. `*role` gets
 * the caller's role. */
static bool may_use(struct sl__api_call *c, const char *repo, enum sl_repo_role *role)
{
    struct sl_gitplat_caller who = sl__api_git_caller(c);
    struct sl_gitplat_verdict v;
    int rc = sl_gitplat_may_use(c->api->git, repo, &who, &v);

    if (rc < 0) {
        sl__api_set_internal(c->res, "checking a repository's roles", rc);
        return false;
    }
    *role = v.role;
    if (v.status != 0) {
        sl__api_set_error(c->res, v.status, v.message);
        return false;
    }
    return true;
}

static void sandbox_create(struct sl__api_call *c, const char *repo)
{
    json_t *body = NULL;
    const json_t *ref;
    const json_t *env;
    struct sl_sandbox_spec *spec = NULL;
    enum sl_repo_role role = SL_REPO_ROLE_NONE;
    int rc;

    static const char *const known[] = { "ref", "environment" };

    /* Who may comes first, then what was asked: neither answer depends on whether containers
     * run here. */
    if (!may_use(c, repo, &role)) {
        return;
    }
    if (c->req->body.n > 0
        && (body = sl__api_body_known(c, known, SL_ARRAY_LEN(known), "the sandbox is invalid",
                                      "unknown field (expected ref, environment)"))
                   == NULL) {
        return;
    }
    ref = json_object_get(body, "ref");
    env = json_object_get(body, "environment");
    if ((ref != NULL && !json_is_null(ref) && !json_is_string(ref))
        || (env != NULL && !json_is_null(env) && !json_is_string(env))) {
        json_decref(body);
        sl__api_set_error(c->res, 400, "ref and environment must be strings");
        return;
    }
    if (json_is_string(ref) && !sl_git_ref_is_valid(json_string_value(ref))) {
        json_decref(body);
        sl__api_set_error(c->res, 422, "unknown ref");
        return;
    }
    if (!sl__api_sandboxes_enabled(c)) {
        json_decref(body);
        return;
    }
    rc = prepare_spec(c, repo, json_string_value(ref), json_string_value(env), role, &spec, NULL);
    if (rc == SL_ENOTFOUND) {
        sl__api_set_errorf(c->res, 404, "no environment '%s'", json_string_value(env));
    } else if (rc < 0) {
        sl__api_set_internal(c->res, "preparing the sandbox", rc);
    } else {
        c->res->defer.kind = SL__API_DEFER_CREATE;
        c->res->defer.spec = spec;
    }
    json_decref(body);
}

int sl_api_prepare_sandbox(struct sl_api *api, const char *user_id, const char *repo,
                           const char *ref, const char *envkey, struct sl_sandbox_spec **spec,
                           json_t **env, char *err, size_t errlen)
{
    struct sl__api_result res;
    struct sl__api_call c;
    struct sl_gitplat_caller who = { user_id, true, true };
    struct sl_gitplat_verdict v;
    int rc;

    memset(&res, 0, sizeof(res));
    memset(&v, 0, sizeof(v));
    sl__api_call_init(&c, api, &res);
    rc = sl_store_user_get(api->store, user_id, &c.user);
    if (rc == SL_ENOTFOUND) {
        (void)snprintf(err, errlen, "the job's owner no longer exists");
        return rc;
    }
    if (rc == 0 && c.user.disabled) {
        (void)snprintf(err, errlen, "account disabled");
        rc = SL_EINVAL;
    }
    /* As the owner's account can act: a schedule runs without a token. */
    if (rc == 0) {
        rc = sl_gitplat_may_use(api->git, repo, &who, &v);
    }
    if (rc == 0 && v.status != 0) {
        (void)snprintf(err, errlen, "%s", v.message);
        rc = SL_EINVAL;
    }
    if (rc == 0) {
        rc = prepare_spec(&c, repo, ref, envkey, v.role, spec, env);
        if (rc == SL_ENOTFOUND) {
            (void)snprintf(err, errlen, "no environment '%s'", envkey != NULL ? envkey : "");
        } else if (rc < 0) {
            (void)snprintf(err, errlen, "the sandbox could not be prepared: %s", sl_strerror(rc));
        }
    } else if (rc < 0 && rc != SL_EINVAL) {
        (void)snprintf(err, errlen, "the sandbox could not be prepared: %s", sl_strerror(rc));
    }
    if (rc == 0) {
        (*spec)->job = true;
    }
    sl_user_finish(&c.user);
    return rc;
}

/* False, with the 503 set, when this control plane runs no sandboxes. */
bool sl__api_sandboxes_enabled(struct sl__api_call *c)
{
    if (c->api->sandboxes != NULL) {
        return true;
    }
    sl__api_set_error(
            c->res, 503,
            "sandboxes are not enabled: the control plane needs --proxy-admin-socket and a "
            "reachable container runtime (--docker-socket)");
    return false;
}

/* /api/v1/repos/{repo}/sandboxes`rest` */
void sl__api_route_sandboxes(struct sl__api_call *c, const char *repo, const char *rest)
{
    const char *m = c->req->method;
    struct sl__api_defer *d = &c->res->defer;
    enum sl_repo_role role = SL_REPO_ROLE_NONE;
    char tailbuf[SL__API_SEGMENT_MAX + 2];

    (void)snprintf(d->repo, sizeof(d->repo), "%s", repo);
    (void)snprintf(d->user_id, sizeof(d->user_id), "%s", c->user.id);
    if (rest[0] == '\0') {
        if (strcmp(m, "GET") == 0) {
            enum sl_repo_role seen;

            /* A repository the caller cannot see, or that does not exist, is 404 (not []). */
            if (sl__api_seen_role(c, d->repo, &seen) && sl__api_sandboxes_enabled(c)) {
                d->kind = SL__API_DEFER_LIST;
            }
        } else if (strcmp(m, "POST") == 0) {
            sandbox_create(c, d->repo);
        } else {
            sl__api_set_error(c->res, 405, "use GET or POST");
        }
        return;
    }
    if (snprintf(tailbuf, sizeof(tailbuf), "%s", rest) >= (int)sizeof(tailbuf)
        || !sl__api_split_tail(tailbuf, d->id, sizeof(d->id), &rest) || d->id[0] == '\0') {
        sl__api_set_error(c->res, 404, "sandbox not found");
        return;
    }
    if (rest == NULL || strchr(rest, '/') != NULL || strlen(rest) >= sizeof(d->action)) {
        sl__api_set_error(c->res, 404, "unknown sandbox action");
        return;
    }
    if (strcmp(m, "POST") != 0) {
        sl__api_set_error(c->res, 405, "use POST");
        return;
    }
    /* Using a sandbox needs what creating one does, now: every call of a sandbox of an archived
     * repository is refused, and so is a creator who lost write access. */
    if (!may_use(c, d->repo, &role) || !sl__api_sandboxes_enabled(c)) {
        return;
    }
    d->any_sandbox = role == SL_REPO_ROLE_ADMIN;
    (void)snprintf(d->action, sizeof(d->action), "%s", rest);
    if (c->req->body.n > 0 && (d->body = sl__api_body_object(c)) == NULL) {
        return;
    }
    d->kind = SL__API_DEFER_CALL;
}
