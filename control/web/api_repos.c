/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/api_repos.c - repositories and their members (docs/reference/api.md §5.9) of the
 * REST API, and the routes under a repository: /api/v1/repos/{owner}/{repo} itself (global
 * admins register, change and delete; whoever can see it reads it), its members (the
 * repository's admins and global admins manage them; whoever can see it lists them), and its
 * sandboxes (api_sandboxes.c). What a caller sees and may do is the git platform's role
 * (control/git/gitplat.h); the records are the local platform's, in the store.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "base/mem.h"
#include "control/git/gitplat.h"
#include "control/web/api.h"
#include "control/web/api_int.h"

/* The caller's role in `repo` (NONE: they cannot see it). False with a 500 set on failure. */
static bool caller_role(struct sl__api_call *c, const char *repo, enum sl_repo_role *role)
{
    int rc = c->api->git->ops->role(c->api->git, repo, c->user.id, c->user.is_admin, role);

    if (rc < 0) {
        sl__api_set_internal(c->res, "reading a role", rc);
        return false;
    }
    return true;
}

bool sl__api_seen_role(struct sl__api_call *c, const char *repo, enum sl_repo_role *role)
{
    if (!caller_role(c, repo, role)) {
        return false;
    }
    if (*role == SL_REPO_ROLE_NONE) {
        sl__api_set_error(c->res, 404, "repository not found");
        return false;
    }
    return true;
}

/* The API form of a repository, with the caller's role in it. */
static json_t *repo_json(const struct sl_store_repo *r, enum sl_repo_role role)
{
    json_t *protected = json_loads(r->protected_json, 0, NULL);

    if (!json_is_array(protected)) {
        json_decref(protected);
        protected = json_array();
    }
    return json_pack("{s:s, s:s, s:s, s:o, s:b, s:s?, s:s, s:s}", "name", r->name, "visibility",
                     r->is_public ? "public" : "private", "default_branch", r->default_branch,
                     "protected_branches", protected, "archived", r->archived, "role",
                     role != SL_REPO_ROLE_NONE ? sl_repo_role_name(role) : NULL, "created_at",
                     r->created_at, "updated_at", r->updated_at);
}

void sl__api_list_repos(struct sl__api_call *c)
{
    struct sl_store_repo *v = NULL;
    size_t n = 0;
    json_t *arr;
    int rc = sl_store_repo_list(c->api->store, c->user.is_admin ? NULL : c->user.id, &v, &n);

    if (rc < 0) {
        sl__api_set_internal(c->res, "listing repositories", rc);
        return;
    }
    arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        enum sl_repo_role role = SL_REPO_ROLE_NONE;

        if (!caller_role(c, v[i].name, &role)) {
            json_decref(arr);
            sl_store_free_repos(v, n);
            return;
        }
        if (json_array_append_new(arr, repo_json(&v[i], role)) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    sl_store_free_repos(v, n);
    sl__api_set_json(c->res, 200, arr != NULL ? json_pack("{s:o}", "repos", arr) : NULL);
}

/* One field's 422. */
static void set_invalid(struct sl__api_call *c, const char *field, const char *message)
{
    sl__api_set_invalid(c->res, "the repository is invalid", field, message);
}

/* Reads a PUT body into `r` (name set by the caller; strings owned). False with the answer
 * set. */
static bool parse_repo(struct sl__api_call *c, json_t *root, struct sl_store_repo *r)
{
    /* The fields of the answer that are not the repository's to set are ignored. */
    static const char *const known[] = { "visibility", "default_branch", "protected_branches",
                                         "archived",   "name",           "role",
                                         "created_at", "updated_at" };
    const json_t *vis = json_object_get(root, "visibility");
    const json_t *def = json_object_get(root, "default_branch");
    const json_t *prot = json_object_get(root, "protected_branches");
    const json_t *arch = json_object_get(root, "archived");
    json_t *value;
    size_t i;

    if (!sl__api_only_known(c->res, root, known, SL_ARRAY_LEN(known), "the repository is invalid",
                            "unknown field (expected visibility, default_branch, "
                            "protected_branches, archived)")) {
        return false;
    }
    if (vis != NULL && !json_is_null(vis)
        && (!json_is_string(vis)
            || (strcmp(json_string_value(vis), "private") != 0
                && strcmp(json_string_value(vis), "public") != 0))) {
        set_invalid(c, "visibility", "\"private\" or \"public\"");
        return false;
    }
    r->is_public = json_is_string(vis) && strcmp(json_string_value(vis), "public") == 0;
    if (def != NULL && !json_is_null(def)
        && (!json_is_string(def) || !sl_git_branch_is_valid(json_string_value(def))
            || strlen(json_string_value(def)) != json_string_length(def))) {
        set_invalid(c, "default_branch",
                    "a branch name (1-255 bytes, as git takes one: no spaces, no '..', ...)");
        return false;
    }
    r->default_branch = sl_strdup(json_is_string(def) ? json_string_value(def) : "main");
    if (arch != NULL && !json_is_null(arch) && !json_is_boolean(arch)) {
        set_invalid(c, "archived", "true or false");
        return false;
    }
    r->archived = json_is_true(arch);
    if (prot != NULL && !json_is_null(prot)
        && (!json_is_array(prot) || json_array_size(prot) > SL_GIT_PROTECTED_MAX)) {
        set_invalid(c, "protected_branches", "an array of at most 32 branch globs");
        return false;
    }
    json_array_foreach(prot, i, value)
    {
        char field[48];

        (void)snprintf(field, sizeof(field), "protected_branches[%zu]", i);
        if (!json_is_string(value) || strlen(json_string_value(value)) != json_string_length(value)
            || !sl_git_branch_glob_is_valid(json_string_value(value))) {
            set_invalid(c, field,
                        "a glob over branch names (1-255 bytes; '*' matches any run of "
                        "characters, '/' included)");
            return false;
        }
        for (size_t k = 0; k < i; k++) {
            if (json_equal(value, json_array_get(prot, k))) {
                set_invalid(c, field, "listed twice");
                return false;
            }
        }
    }
    r->protected_json = json_is_array(prot) ? json_dumps(prot, JSON_COMPACT) : sl_strdup("[]");
    if (r->default_branch == NULL || r->protected_json == NULL) {
        sl__api_set_internal(c->res, "reading a repository", SL_ENOMEM);
        return false;
    }
    return true;
}

/* A name a new repository may take: not ending in `.git`, and no other repository's in another
 * case. Git servers commonly take both for the same repository (OWNER/NAME.git is OWNER/NAME; a
 * hosted platform's names ignore case): a second record under such a name would give its
 * members another role and other protected branches for the same upstream repository. False
 * with the answer set. */
static bool new_name_ok(struct sl__api_call *c, const char *name)
{
    size_t n = strlen(name);
    struct sl_store_repo *v = NULL;
    size_t count = 0;
    int rc;

    if (n >= 4 && strcasecmp(name + n - 4, ".git") == 0) {
        sl__api_set_error(c->res, 400,
                          "a repository name must not end in .git: git servers take OWNER/NAME.git "
                          "for OWNER/NAME");
        return false;
    }
    rc = sl_store_repo_list(c->api->store, NULL, &v, &count);
    if (rc < 0) {
        sl__api_set_internal(c->res, "reading the repositories", rc);
        return false;
    }
    for (size_t i = 0; i < count; i++) {
        if (strcasecmp(v[i].name, name) == 0) {
            char why[SL_ENV_REPO_MAX + 160];

            (void)snprintf(why, sizeof(why),
                           "repository '%s' is registered: names that differ only in case are "
                           "one repository to many git servers",
                           v[i].name);
            sl__api_set_error(c->res, 409, why);
            sl_store_free_repos(v, count);
            return false;
        }
    }
    sl_store_free_repos(v, count);
    return true;
}

static void repo_put(struct sl__api_call *c, const char *name)
{
    struct sl_store_repo r;
    bool created = false;
    json_t *root;
    int rc;

    memset(&r, 0, sizeof(r));
    if (!c->user.is_admin) {
        sl__api_set_error(c->res, 403, "only admins may register or change repositories");
        return;
    }
    rc = sl_store_repo_get(c->api->store, name, &r);
    sl_store_repo_finish(&r);
    memset(&r, 0, sizeof(r));
    if (rc < 0 && rc != SL_ENOTFOUND) {
        sl__api_set_internal(c->res, "reading a repository", rc);
        return;
    }
    if (rc == SL_ENOTFOUND && !new_name_ok(c, name)) {
        return;
    }
    root = sl__api_body_object(c);
    if (root == NULL) {
        return;
    }
    r.name = sl_strdup(name);
    if (r.name != NULL && parse_repo(c, root, &r)) {
        rc = sl_store_repo_put(c->api->store, &r, &created);
        if (rc < 0) {
            sl__api_set_internal(c->res, "writing a repository", rc);
        } else {
            c->res->changed = true;
            /* A change of an existing one may take access away (archived, private again). */
            c->res->revokes = !created;
            sl__api_set_json(c->res, created ? 201 : 200, repo_json(&r, SL_REPO_ROLE_ADMIN));
        }
    } else if (r.name == NULL) {
        sl__api_set_internal(c->res, "reading a repository", SL_ENOMEM);
    }
    json_decref(root);
    sl_store_repo_finish(&r);
}

static void repo_one(struct sl__api_call *c, const char *name)
{
    const char *m = c->req->method;
    enum sl_repo_role role = SL_REPO_ROLE_NONE;
    struct sl_store_repo r;
    int rc;

    memset(&r, 0, sizeof(r));
    if (strcmp(m, "PUT") == 0) {
        repo_put(c, name);
        return;
    }
    if (strcmp(m, "GET") != 0 && strcmp(m, "DELETE") != 0) {
        sl__api_set_error(c->res, 405, "use GET, PUT or DELETE");
        return;
    }
    if (!sl__api_seen_role(c, name, &role)) {
        return;
    }
    if (strcmp(m, "DELETE") == 0) {
        if (!c->user.is_admin) {
            sl__api_set_error(c->res, 403, "only admins may delete repositories");
            return;
        }
        rc = sl_store_repo_delete(c->api->store, name);
        if (sl__api_store_ok(c->res, rc, "deleting a repository", "repository not found")) {
            c->res->changed = true;
            c->res->revokes = true;
            c->res->status = 204;
        }
        return;
    }
    rc = sl_store_repo_get(c->api->store, name, &r);
    if (sl__api_store_ok(c->res, rc, "reading a repository", "repository not found")) {
        sl__api_set_json(c->res, 200, repo_json(&r, role));
    }
    sl_store_repo_finish(&r);
}

/* ---- members ------------------------------------------------------------------------------ */

static json_t *member_json(const char *user, enum sl_repo_role role)
{
    return json_pack("{s:s, s:s}", "user", user, "role", sl_repo_role_name(role));
}

static json_t *member_item(const void *item)
{
    const struct sl_store_member *m = item;

    return member_json(m->user_name, m->role);
}

static void members_list(struct sl__api_call *c, const char *repo)
{
    struct sl_store_member *v = NULL;
    size_t n = 0;
    int rc = sl_store_member_list(c->api->store, repo, &v, &n);

    sl__api_set_list(c->res, rc, "listing members", "members", v, n, sizeof(*v), member_item);
    sl_store_free_members(v, n);
}

/* PUT .../members/{user} {"role"}. */
static void member_put(struct sl__api_call *c, const char *repo, const struct sl_user *u)
{
    enum sl_repo_role role = SL_REPO_ROLE_NONE;
    static const char *const known[] = { "role", "user" };
    enum sl_repo_role before = SL_REPO_ROLE_NONE;
    json_t *root = sl__api_body_known(c, known, SL_ARRAY_LEN(known), "the member is invalid",
                                      "unknown field (expected role)");
    int rc;

    if (root == NULL) {
        return;
    }
    if (!sl_repo_role_parse(json_string_value(json_object_get(root, "role")), &role)) {
        sl__api_set_invalid(c->res, "the member is invalid", "role",
                            "\"read\", \"write\" or \"admin\"");
        json_decref(root);
        return;
    }
    json_decref(root);
    rc = sl_store_member_put(c->api->store, repo, u->id, role, &before);
    if (rc == SL_ENOTFOUND) {
        sl__api_set_error(c->res, 404, "repository not found");
        return;
    }
    if (rc < 0) {
        sl__api_set_internal(c->res, "writing a member", rc);
        return;
    }
    c->res->changed = true;
    c->res->revokes = role < before;
    sl__api_set_json(c->res, before == SL_REPO_ROLE_NONE ? 201 : 200, member_json(u->name, role));
}

static void member_one(struct sl__api_call *c, const char *repo, enum sl_repo_role caller,
                       const char *name)
{
    const char *m = c->req->method;
    enum sl_repo_role role = SL_REPO_ROLE_NONE;
    struct sl_user u;
    int rc;

    memset(&u, 0, sizeof(u));
    if (strcmp(m, "GET") != 0 && strcmp(m, "PUT") != 0 && strcmp(m, "DELETE") != 0) {
        sl__api_set_error(c->res, 405, "use GET, PUT or DELETE");
        return;
    }
    if (strcmp(m, "GET") != 0 && caller < SL_REPO_ROLE_ADMIN) {
        sl__api_set_error(c->res, 403, "only admins of this repository may manage its members");
        return;
    }
    rc = sl_store_user_get_by_name(c->api->store, name, &u);
    /* Only whoever adds members learns which users exist: to anyone else (every user reads the
     * members of a public repository) a user that does not exist is no member either. */
    if (!sl__api_store_ok(c->res, rc, "reading a user",
                          strcmp(m, "PUT") == 0 ? "no user '%.128s'" : "no member '%.128s'",
                          name)) {
        return;
    }
    if (strcmp(m, "PUT") == 0) {
        member_put(c, repo, &u);
    } else if (strcmp(m, "DELETE") == 0) {
        rc = sl_store_member_delete(c->api->store, repo, u.id);
        if (sl__api_store_ok(c->res, rc, "deleting a member", "no member '%.128s'", name)) {
            c->res->changed = true;
            c->res->revokes = true;
            c->res->status = 204;
        }
    } else {
        rc = sl_store_member_role(c->api->store, repo, u.id, &role);
        if (rc < 0) {
            sl__api_set_internal(c->res, "reading a member", rc);
        } else if (role == SL_REPO_ROLE_NONE) {
            sl__api_set_errorf(c->res, 404, "no member '%.128s'", name);
        } else {
            sl__api_set_json(c->res, 200, member_json(u.name, role));
        }
    }
    sl_user_finish(&u);
}

/* /api/v1/repos/{repo}/members`tail`. */
static void members(struct sl__api_call *c, const char *repo, const char *tail)
{
    enum sl_repo_role role = SL_REPO_ROLE_NONE;
    char user[SL__API_SEGMENT_MAX];
    const char *rest = NULL;

    if (!sl__api_split_tail(tail, user, sizeof(user), &rest) || rest != NULL) {
        sl__api_set_error(c->res, 404, "no such resource");
        return;
    }
    if (!sl__api_seen_role(c, repo, &role)) {
        return;
    }
    if (user[0] != '\0') {
        member_one(c, repo, role, user);
    } else if (strcmp(c->req->method, "GET") == 0) {
        members_list(c, repo);
    } else {
        sl__api_set_error(c->res, 405, "use GET");
    }
}

/* ---- the routes under /api/v1/repos/ -------------------------------------------------------- */

void sl__api_route_repos(struct sl__api_call *c, const char *tail)
{
    char owner[SL__API_SEGMENT_MAX];
    char name[SL__API_SEGMENT_MAX];
    char kind[SL__API_SEGMENT_MAX];
    char repo[SL__API_SEGMENT_MAX];
    char buf[SL__API_SEGMENT_MAX + 2];
    const char *rest = NULL;
    const char *sub = NULL;

    if (snprintf(buf, sizeof(buf), "/%s", tail) >= (int)sizeof(buf)
        || !sl__api_split_tail(buf, owner, sizeof(owner), &rest) || owner[0] == '\0' || rest == NULL
        || snprintf(buf, sizeof(buf), "/%s", rest) >= (int)sizeof(buf)
        || !sl__api_split_tail(buf, name, sizeof(name), &rest) || name[0] == '\0') {
        sl__api_set_error(c->res, 404, "no such resource");
        return;
    }
    kind[0] = '\0';
    if (rest != NULL
        && (snprintf(buf, sizeof(buf), "/%s", rest) >= (int)sizeof(buf)
            || !sl__api_split_tail(buf, kind, sizeof(kind), &sub)
            || (strcmp(kind, "sandboxes") != 0 && strcmp(kind, "members") != 0))) {
        sl__api_set_error(c->res, 404, "no such resource");
        return;
    }
    if (snprintf(repo, sizeof(repo), "%s/%s", owner, name) >= (int)sizeof(repo)
        || strchr(name, '/') != NULL || strchr(owner, '/') != NULL
        || !sl_git_repo_name_is_valid(repo)) {
        sl__api_set_error(c->res, 400, "the repository must be owner/name");
        return;
    }
    /* The tail after the kind: "" or "/..." as the kind's routes take it. */
    if (sub != NULL && snprintf(buf, sizeof(buf), "/%s", sub) >= (int)sizeof(buf)) {
        sl__api_set_error(c->res, 404, "no such resource");
        return;
    }
    if (strcmp(kind, "sandboxes") == 0) {
        sl__api_route_sandboxes(c, repo, sub != NULL ? buf : "");
    } else if (strcmp(kind, "members") == 0) {
        members(c, repo, sub != NULL ? buf : "");
    } else {
        repo_one(c, repo);
    }
}
