/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/store/store_envs.c - environments and the repositories they bind (store.h,
 * "environments"): the rules the store enforces on a row, the uniqueness checks that name the
 * environment in the way (struct sl_store_conflict_info), and the one global default.
 */
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include "base/mem.h"
#include "control/store/secrets.h"
#include "control/store/store.h"
#include "control/store/store_int.h"

static const char *scope_text(enum sl_scope scope)
{
    switch (scope) {
    case SL_SCOPE_USER:
        return "user";
    case SL_SCOPE_GLOBAL:
        return "global";
    }
    return NULL;
}

/* The key that makes (scope, owner) unique: the owner's id for user scope, "" for global. */
static const char *owner_key(enum sl_scope scope, const char *owner_id)
{
    return scope == SL_SCOPE_GLOBAL || owner_id == NULL ? "" : owner_id;
}

void sl_store_conflict_finish(struct sl_store_conflict_info *c)
{
    if (c == NULL) {
        return;
    }
    sl_free(c->env_name);
    sl_free(c->repo);
    memset(c, 0, sizeof(*c));
}

/* Records a refusal. The strings are copied; when a copy fails the refusal is reported as
 * SL_ENOMEM instead, because a half-filled info would mislead. */
static int conflict(struct sl_store_conflict_info *c, int rc, enum sl_store_conflict kind,
                    const char *env_id, const char *env_name, const char *repo)
{
    if (c == NULL) {
        return rc;
    }
    sl_store_conflict_finish(c);
    c->kind = kind;
    if (env_id != NULL) {
        (void)snprintf(c->env_id, sizeof(c->env_id), "%s", env_id);
    }
    if (env_name != NULL) {
        c->env_name = sl_strdup(env_name);
    }
    if (repo != NULL) {
        c->repo = sl_strdup(repo);
    }
    if ((env_name != NULL && c->env_name == NULL) || (repo != NULL && c->repo == NULL)) {
        sl_store_conflict_finish(c);
        return SL_ENOMEM;
    }
    return rc;
}

/* The rules of store.h on a row about to be written. */
static int check_env_row(const struct sl_env_row *r)
{
    SL_ENSURE(r->name != NULL && r->name[0] != '\0' && r->env_json != NULL, SL_EINVAL);
    SL_ENSURE(sl__store_is_terminated(r->id, sizeof(r->id)), SL_EINVAL);
    SL_ENSURE(sl__store_is_terminated(r->owner_id, sizeof(r->owner_id)), SL_EINVAL);
    SL_ENSURE(scope_text(r->scope) != NULL, SL_EINVAL);
    SL_ENSURE((r->scope == SL_SCOPE_USER) == (r->owner_id[0] != '\0'), SL_EINVAL);
    SL_ENSURE(r->cpus_centi == -1 || r->cpus_centi > 0, SL_EINVAL);
    SL_ENSURE(r->memory_bytes == -1 || r->memory_bytes > 0, SL_EINVAL);
    SL_ENSURE(r->network || r->egress_json == NULL, SL_EINVAL);
    SL_ENSURE(r->n_repos == 0 || r->repos != NULL, SL_EINVAL);
    for (size_t i = 0; i < r->n_repos; i++) {
        SL_ENSURE(r->repos[i] != NULL && r->repos[i][0] != '\0', SL_EINVAL);
    }
    return 0;
}

/* Runs a one-row environment query whose parameters `p1`..`p3` are text (NULL ones unbound). */
static int env_get(struct sl_store *st, enum sl__store_stmt id, const char *p1, const char *p2,
                   const char *p3, struct sl_env_row *out)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;

    SL_TRY(sl__store_stmt(st, id, &s));
    if (p1 != NULL) {
        sl__store_bind_text(s, 1, p1, &acc);
    }
    if (p2 != NULL) {
        sl__store_bind_text(s, 2, p2, &acc);
    }
    if (p3 != NULL) {
        sl__store_bind_text(s, 3, p3, &acc);
    }
    return sl__store_get_one(st, s, acc, &sl__store_env_rows, out, "env-get");
}

int sl_store_env_get(struct sl_store *st, const char *id, struct sl_env_row *out)
{
    SL_ENSURE(id != NULL, SL_EINVAL);
    sl__store_lock(st);
    return sl__store_release(st, env_get(st, SL__STMT_ENV_BY_ID, id, NULL, NULL, out));
}

/* The one-row query `id` for `key` (a name or a repository) in `scope` and, for user scope,
 * of `owner_id`. */
static int env_get_scoped(struct sl_store *st, enum sl__store_stmt id, enum sl_scope scope,
                          const char *owner_id, const char *key, struct sl_env_row *out)
{
    const char *scope_name = scope_text(scope);

    SL_ENSURE(scope_name != NULL && key != NULL, SL_EINVAL);
    sl__store_lock(st);
    return sl__store_release(st, env_get(st, id, scope_name, owner_key(scope, owner_id), key, out));
}

int sl_store_env_get_by_name(struct sl_store *st, enum sl_scope scope, const char *owner_id,
                             const char *name, struct sl_env_row *out)
{
    return env_get_scoped(st, SL__STMT_ENV_BY_NAME, scope, owner_id, name, out);
}

int sl_store_env_find_by_repo(struct sl_store *st, enum sl_scope scope, const char *owner_id,
                              const char *repo, struct sl_env_row *out)
{
    return env_get_scoped(st, SL__STMT_ENV_BY_REPO, scope, owner_id, repo, out);
}

int sl_store_env_get_default(struct sl_store *st, struct sl_env_row *out)
{
    sl__store_lock(st);
    return sl__store_release(st, env_get(st, SL__STMT_ENV_DEFAULT, NULL, NULL, NULL, out));
}

void sl_store_free_envs(struct sl_env_row *v, size_t n)
{
    sl__store_free_rows(&sl__store_env_rows, v, n);
}

int sl_store_env_list_visible(struct sl_store *st, const char *user_id, struct sl_env_row **out,
                              size_t *n)
{
    /* "" matches no user-scope row: their owner_key is a user id. */
    return sl__store_locked_list(st, SL__STMT_ENV_LIST_VISIBLE, user_id == NULL ? "" : user_id,
                                 &sl__store_env_rows, "env-list", out, n);
}

int sl_store_env_list_all(struct sl_store *st, struct sl_env_row **out, size_t *n)
{
    return sl__store_locked_list(st, SL__STMT_ENV_LIST_ALL, NULL, &sl__store_env_rows, "env-list",
                                 out, n);
}

/* Inside a transaction: the environment other than `self_id`, of the scope and owner of `r`,
 * that holds `value` by the query `id` (a name or a repository). Returns 1 with its id in
 * `holder` and, when `name` is not NULL, its name in `*name` (owned), 0 when there is none, or
 * an sl_err (`what` names the query). */
static int find_holder(struct sl_store *st, enum sl__store_stmt id, const struct sl_env_row *r,
                       const char *self_id, const char *value, char holder[SL_UUID_LEN + 1],
                       char **name, const char *what)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(sl__store_stmt(st, id, &s));
    sl__store_bind_text(s, 1, scope_text(r->scope), &acc);
    sl__store_bind_text(s, 2, owner_key(r->scope, r->owner_id), &acc);
    sl__store_bind_text(s, 3, value, &acc);
    sl__store_bind_text(s, 4, self_id, &acc);
    rc = acc == SQLITE_OK ? sqlite3_step(s) : acc;
    if (rc == SQLITE_ROW) {
        rc = sl__store_col_copy(st, s, 0, holder, SL_UUID_LEN + 1);
        if (rc == 0 && name != NULL) {
            rc = sl__store_col_dup_required(st, s, 1, name);
        }
        rc = rc == 0 ? 1 : rc;
    } else {
        rc = rc == SQLITE_DONE ? 0 : sl__store_db_error(st, rc, what);
    }
    sl__store_stmt_done(s);
    return rc;
}

/* Inside a transaction: refuses the name of `r` when another environment (not `self_id`) of
 * the same scope and owner has it. */
static int check_name_free(struct sl_store *st, const struct sl_env_row *r, const char *self_id,
                           struct sl_store_conflict_info *c)
{
    char holder[SL_UUID_LEN + 1];
    int rc = find_holder(st, SL__STMT_ENV_NAME_HOLDER, r, self_id, r->name, holder, NULL,
                         "env-name");

    return rc > 0 ? conflict(c, SL_EEXIST, SL_STORE_CONFLICT_NAME, holder, r->name, NULL) : rc;
}

/* Inside a transaction: refuses `repo` when another environment of the same scope and owner
 * binds it, naming that environment. */
static int check_repo_free(struct sl_store *st, const struct sl_env_row *r, const char *self_id,
                           const char *repo, struct sl_store_conflict_info *c)
{
    char holder[SL_UUID_LEN + 1];
    char *holder_name = NULL;
    int rc = find_holder(st, SL__STMT_REPO_HOLDER, r, self_id, repo, holder, &holder_name,
                         "repo-holder");

    if (rc > 0) {
        rc = conflict(c, SL_EEXIST, SL_STORE_CONFLICT_REPO, holder, holder_name, repo);
    }
    sl_free(holder_name);
    return rc;
}

/* Inside a transaction: binds every repository of `r` to the environment `id`. */
static int write_repos(struct sl_store *st, const struct sl_env_row *r, const char *id,
                       struct sl_store_conflict_info *c)
{
    sqlite3_stmt *s = NULL;
    int acc;
    int rc;

    for (size_t i = 0; i < r->n_repos; i++) {
        SL_TRY(check_repo_free(st, r, id, r->repos[i], c));
        SL_TRY(sl__store_stmt(st, SL__STMT_REPO_INSERT, &s));
        acc = SQLITE_OK;
        sl__store_bind_text(s, 1, id, &acc);
        sl__store_bind_text(s, 2, scope_text(r->scope), &acc);
        sl__store_bind_text(s, 3, owner_key(r->scope, r->owner_id), &acc);
        sl__store_bind_text(s, 4, r->repos[i], &acc);
        rc = acc == SQLITE_OK ? sl__store_run(s) : acc;
        sl__store_stmt_done(s);
        /* No other environment holds it (checked above): the row lists it twice. */
        if (rc == SQLITE_CONSTRAINT_UNIQUE) {
            return conflict(c, SL_EINVAL, SL_STORE_CONFLICT_REPO_TWICE, NULL, NULL, r->repos[i]);
        }
        if (rc != SQLITE_DONE) {
            return sl__store_db_error(st, rc, "repo-insert");
        }
    }
    return 0;
}

/* Inside a transaction: INSERT or UPDATE (by `id`) of the environment's own row. */
static int write_env(struct sl_store *st, enum sl__store_stmt id_stmt, const struct sl_env_row *r,
                     const char *id, const char *now)
{
    const char *key = owner_key(r->scope, r->owner_id);
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;

    SL_TRY(sl__store_stmt(st, id_stmt, &s));
    sl__store_bind_text(s, 1, id, &acc);
    sl__store_bind_text(s, 2, r->name, &acc);
    sl__store_bind_text(s, 3, r->description == NULL ? "" : r->description, &acc);
    sl__store_bind_text(s, 4, scope_text(r->scope), &acc);
    sl__store_bind_text(s, 5, key[0] == '\0' ? NULL : key, &acc);
    sl__store_bind_text(s, 6, key, &acc);
    if (id_stmt == SL__STMT_ENV_INSERT) {
        sl__store_bind_int64(s, 7, r->is_default ? 1 : 0, &acc);
    }
    sl__store_bind_text(s, 8, r->base_image, &acc);
    sl__store_bind_optional(s, 9, r->cpus_centi, &acc);
    sl__store_bind_optional(s, 10, r->memory_bytes, &acc);
    sl__store_bind_text(s, 11, r->network ? "on" : "off", &acc);
    sl__store_bind_text(s, 12, r->env_json, &acc);
    sl__store_bind_text(s, 13, r->egress_json, &acc);
    sl__store_bind_text(s, 14, now, &acc);
    sl__store_bind_text(s, 15, r->image_pull_always ? "always" : "if-missing", &acc);
    sl__store_bind_text(s, 16, r->registry_json, &acc);
    return sl__store_exec(st, s, acc, id_stmt == SL__STMT_ENV_INSERT ? "env-insert" : "env-update");
}

/* Inside a transaction: demotes the current default, if any. */
static int demote_default(struct sl_store *st, const char *now)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;

    SL_TRY(sl__store_stmt(st, SL__STMT_ENV_DEMOTE, &s));
    sl__store_bind_text(s, 1, now, &acc);
    return sl__store_exec(st, s, acc, "env-demote");
}

static int env_insert(struct sl_store *st, struct sl_env_row *r, struct sl_store_conflict_info *c)
{
    char id[SL_UUID_LEN + 1];
    char now[SL__STORE_TIMESTAMP_SIZE];
    int rc;

    SL_TRY(check_env_row(r));
    if (r->is_default && r->scope != SL_SCOPE_GLOBAL) {
        return conflict(c, SL_EINVAL, SL_STORE_CONFLICT_NOT_GLOBAL, NULL, NULL, NULL);
    }
    if (r->id[0] == '\0') {
        SL_TRY(sl_uuid_v4(id));
    } else {
        memcpy(id, r->id, sizeof(id));
    }
    sl__store_now(now);
    SL_TRY(sl__store_tx_begin(st));
    rc = check_name_free(st, r, id, c);
    if (rc == 0 && r->is_default) {
        rc = demote_default(st, now);
    }
    if (rc == 0) {
        rc = write_env(st, SL__STMT_ENV_INSERT, r, id, now);
        if (rc == SL_EEXIST) {
            /* The name is free (checked above), so the id is taken. */
            rc = conflict(c, SL_EEXIST, SL_STORE_CONFLICT_ID, id, NULL, NULL);
        }
    }
    if (rc == 0) {
        rc = write_repos(st, r, id, c);
    }
    rc = sl__store_tx_end(st, rc);
    if (rc == 0) {
        memcpy(r->id, id, sizeof(r->id));
        memcpy(r->created_at, now, sizeof(r->created_at));
        memcpy(r->updated_at, now, sizeof(r->updated_at));
    }
    return rc;
}

int sl_store_env_insert(struct sl_store *st, struct sl_env_row *r,
                        struct sl_store_conflict_info *conflict_out)
{
    sl_store_conflict_finish(conflict_out);
    sl__store_lock(st);
    return sl__store_release(st, env_insert(st, r, conflict_out));
}

/* What an existing environment is, read inside a transaction. */
struct env_state {
    bool is_global;
    bool is_default;
    char created_at[SL__STORE_TIMESTAMP_SIZE];
    /* Unix seconds; -1 when not in observe (as struct sl_env_row). */
    int64_t observe_until;
};

static int read_state(struct sl_store *st, sqlite3_stmt *s, int first, void *row)
{
    struct env_state *out = row;

    out->is_global = sl__store_col_is(s, first, "global");
    out->is_default = sqlite3_column_int(s, first + 1) != 0;
    out->observe_until = sqlite3_column_type(s, first + 3) == SQLITE_NULL
                                 ? -1
                                 : sqlite3_column_int64(s, first + 3);
    return sl__store_col_copy(st, s, first + 2, out->created_at, sizeof(out->created_at));
}

static const struct sl__store_rows state_rows = {
    .size = sizeof(struct env_state),
    .read = read_state,
};

static int env_state(struct sl_store *st, const char *id, struct env_state *out)
{
    return sl__store_get_by(st, SL__STMT_ENV_STATE, id, &state_rows, out, "env-state");
}

static int env_replace(struct sl_store *st, struct sl_env_row *r, struct sl_store_conflict_info *c)
{
    struct env_state was;
    char now[SL__STORE_TIMESTAMP_SIZE];
    int rc;

    SL_TRY(check_env_row(r));
    SL_ENSURE(r->id[0] != '\0', SL_EINVAL);
    sl__store_now(now);
    SL_TRY(sl__store_tx_begin(st));
    rc = env_state(st, r->id, &was);
    if (rc == 0 && was.is_default && r->scope != SL_SCOPE_GLOBAL) {
        rc = conflict(c, SL_EINVAL, SL_STORE_CONFLICT_IS_DEFAULT, NULL, NULL, NULL);
    }
    if (rc == 0) {
        rc = check_name_free(st, r, r->id, c);
    }
    if (rc == 0) {
        rc = write_env(st, SL__STMT_ENV_UPDATE, r, r->id, now);
    }
    if (rc == 0) {
        rc = sl__store_delete_one(st, SL__STMT_REPO_DELETE, r->id, NULL, NULL, "repo-delete");
        /* An environment without repositories deletes nothing. */
        rc = rc == SL_ENOTFOUND ? 0 : rc;
    }
    if (rc == 0) {
        rc = write_repos(st, r, r->id, c);
    }
    rc = sl__store_tx_end(st, rc);
    if (rc == 0) {
        r->is_default = was.is_default;
        /* A replacement keeps observe (sl_store_env_set_observe() alone changes it). */
        r->observe_until = was.observe_until;
        memcpy(r->created_at, was.created_at, sizeof(r->created_at));
        memcpy(r->updated_at, now, sizeof(r->updated_at));
    }
    return rc;
}

int sl_store_env_replace(struct sl_store *st, struct sl_env_row *r,
                         struct sl_store_conflict_info *conflict_out)
{
    sl_store_conflict_finish(conflict_out);
    sl__store_lock(st);
    return sl__store_release(st, env_replace(st, r, conflict_out));
}

static int env_delete(struct sl_store *st, const char *id, struct sl_store_conflict_info *c)
{
    struct env_state was;
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(sl__store_tx_begin(st));
    rc = env_state(st, id, &was);
    if (rc == 0 && was.is_default) {
        rc = conflict(c, SL_EINVAL, SL_STORE_CONFLICT_IS_DEFAULT, NULL, NULL, NULL);
    }
    if (rc == 0) {
        rc = sl__store_stmt(st, SL__STMT_ENV_DELETE, &s);
    }
    if (rc == 0) {
        /* env_repos rows go by ON DELETE CASCADE; clients are ON DELETE RESTRICT. */
        sl__store_bind_text(s, 1, id, &acc);
        rc = acc == SQLITE_OK ? sl__store_run(s) : acc;
        sl__store_stmt_done(s);
        /* The one constraint deleting an environment can break is the clients' reference.
         * SQLite reports ON DELETE RESTRICT through a trigger (SQLITE_CONSTRAINT_TRIGGER), so
         * the primary code is what is compared. */
        if ((rc & 0xff) == SQLITE_CONSTRAINT) {
            rc = conflict(c, SL_EINVAL, SL_STORE_CONFLICT_IN_USE, NULL, NULL, NULL);
        } else {
            rc = rc == SQLITE_DONE ? 0 : sl__store_db_error(st, rc, "env-delete");
        }
    }
    return sl__store_tx_end(st, rc);
}

int sl_store_env_delete(struct sl_store *st, const char *id,
                        struct sl_store_conflict_info *conflict_out)
{
    SL_ENSURE(id != NULL, SL_EINVAL);
    sl_store_conflict_finish(conflict_out);
    sl__store_lock(st);
    return sl__store_release(st, env_delete(st, id, conflict_out));
}

static int env_set_default(struct sl_store *st, const char *id, struct sl_store_conflict_info *c)
{
    struct env_state was;
    char now[SL__STORE_TIMESTAMP_SIZE];
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    sl__store_now(now);
    SL_TRY(sl__store_tx_begin(st));
    rc = env_state(st, id, &was);
    if (rc == 0 && !was.is_global) {
        rc = conflict(c, SL_EINVAL, SL_STORE_CONFLICT_NOT_GLOBAL, NULL, NULL, NULL);
    }
    if (rc == 0 && !was.is_default) {
        rc = demote_default(st, now);
        if (rc == 0) {
            rc = sl__store_stmt(st, SL__STMT_ENV_PROMOTE, &s);
        }
        if (rc == 0) {
            sl__store_bind_text(s, 1, id, &acc);
            sl__store_bind_text(s, 2, now, &acc);
            rc = sl__store_exec(st, s, acc, "env-promote");
        }
    }
    return sl__store_tx_end(st, rc);
}

int sl_store_env_set_default(struct sl_store *st, const char *id,
                             struct sl_store_conflict_info *conflict_out)
{
    SL_ENSURE(id != NULL, SL_EINVAL);
    sl_store_conflict_finish(conflict_out);
    sl__store_lock(st);
    return sl__store_release(st, env_set_default(st, id, conflict_out));
}

/* ---- observe ---- */

static int set_observe(struct sl_store *st, const char *id, int64_t until)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;

    SL_TRY(sl__store_stmt(st, SL__STMT_ENV_OBSERVE_SET, &s));
    sl__store_bind_text(s, 1, id, &acc);
    sl__store_bind_optional(s, 2, until > 0 ? until : -1, &acc);
    SL_TRY(sl__store_exec(st, s, acc, "env-observe"));
    return sqlite3_changes(st->db) > 0 ? 0 : SL_ENOTFOUND;
}

int sl_store_env_set_observe(struct sl_store *st, const char *id, int64_t until)
{
    SL_ENSURE(id != NULL, SL_EINVAL);
    SL_TRY(sl__store_change_begin(st));
    return sl__store_change_end(st, set_observe(st, id, until));
}

static int end_observes(struct sl_store *st, int64_t now, struct sl_env_row **out, size_t *n)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;

    SL_TRY(sl__store_stmt(st, SL__STMT_ENV_OBSERVE_DUE, &s));
    sl__store_bind_int64(s, 1, now, &acc);
    SL_TRY(sl__store_list(st, s, acc, &sl__store_env_rows, "env-observe-due", out, n));
    if (*n == 0) {
        return 0;
    }
    SL_TRY(sl__store_stmt(st, SL__STMT_ENV_OBSERVE_END, &s));
    acc = SQLITE_OK;
    sl__store_bind_int64(s, 1, now, &acc);
    return sl__store_exec(st, s, acc, "env-observe-end");
}

int sl_store_env_end_observes(struct sl_store *st, int64_t now, struct sl_env_row **out, size_t *n)
{
    int rc;

    *out = NULL;
    *n = 0;
    SL_TRY(sl__store_change_begin(st));
    rc = sl__store_change_end(st, end_observes(st, now, out, n));
    if (rc != 0) {
        sl_store_free_envs(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}
