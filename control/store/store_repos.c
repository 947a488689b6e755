/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/store/store_repos.c - the repositories of the local git platform and their members'
 * roles (store.h, "repositories and their members"). The store keeps what the API validated:
 * names, the protected branch globs as a JSON array, roles; who may see or change what is the
 * API's and control/git's to decide.
 */
#include <string.h>

#include <sqlite3.h>

#include "base/mem.h"
#include "control/store/store.h"
#include "control/store/store_int.h"

void sl_store_repo_finish(struct sl_store_repo *r)
{
    sl__store_free_cols(&sl__store_repo_rows, r);
}

void sl_store_free_repos(struct sl_store_repo *v, size_t n)
{
    sl__store_free_rows(&sl__store_repo_rows, v, n);
}

void sl_store_free_members(struct sl_store_member *v, size_t n)
{
    sl__store_free_rows(&sl__store_member_rows, v, n);
}

/* True in `*exists` when a repository of that name is there. */
static int repo_exists(struct sl_store *st, const char *name, bool *exists)
{
    struct sl_store_repo r;
    int rc = sl__store_get_by(st, SL__STMT_REPOSITORY_GET, name, &sl__store_repo_rows, &r,
                              "repo-get");

    *exists = rc == 0;
    if (rc == 0) {
        sl_store_repo_finish(&r);
    }
    return rc == SL_ENOTFOUND ? 0 : rc;
}

static int repo_put(struct sl_store *st, struct sl_store_repo *r, bool *created)
{
    char now[SL__STORE_TIMESTAMP_SIZE];
    sqlite3_stmt *s = NULL;
    bool exists = false;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(repo_exists(st, r->name, &exists));
    sl__store_now(now);
    SL_TRY(sl__store_stmt(st, SL__STMT_REPOSITORY_PUT, &s));
    sl__store_bind_text(s, 1, r->name, &acc);
    sl__store_bind_text(s, 2, r->is_public ? "public" : "private", &acc);
    sl__store_bind_text(s, 3, r->default_branch, &acc);
    sl__store_bind_text(s, 4, r->protected_json != NULL ? r->protected_json : "[]", &acc);
    sl__store_bind_int64(s, 5, r->archived ? 1 : 0, &acc);
    sl__store_bind_text(s, 6, now, &acc);
    rc = acc == SQLITE_OK ? sqlite3_step(s) : acc;
    if (rc == SQLITE_ROW) {
        rc = sl__store_col_copy(st, s, 0, r->created_at, sizeof(r->created_at));
        if (rc == 0 && sqlite3_step(s) != SQLITE_DONE) {
            rc = sl__store_db_error(st, sqlite3_errcode(st->db), "repo-put");
        }
    } else {
        rc = sl__store_db_error(st, rc, "repo-put");
    }
    sl__store_stmt_done(s);
    SL_TRY(rc);
    memcpy(r->updated_at, now, sizeof(r->updated_at));
    if (created != NULL) {
        *created = !exists;
    }
    return 0;
}

int sl_store_repo_put(struct sl_store *st, struct sl_store_repo *r, bool *created)
{
    SL_ENSURE(r != NULL && r->name != NULL && r->name[0] != '\0' && r->default_branch != NULL,
              SL_EINVAL);
    SL_TRY(sl__store_change_begin(st));
    return sl__store_change_end(st, repo_put(st, r, created));
}

int sl_store_repo_get(struct sl_store *st, const char *name, struct sl_store_repo *out)
{
    SL_ENSURE(name != NULL, SL_EINVAL);
    return sl__store_locked_get(st, SL__STMT_REPOSITORY_GET, name, &sl__store_repo_rows, out,
                                "repo-get");
}

int sl_store_repo_delete(struct sl_store *st, const char *name)
{
    SL_ENSURE(name != NULL, SL_EINVAL);
    return sl__store_locked_delete(st, SL__STMT_REPOSITORY_DELETE, name, NULL, NULL, "repo-delete");
}

int sl_store_repo_list(struct sl_store *st, const char *user_id, struct sl_store_repo **out,
                       size_t *n)
{
    return sl__store_locked_list(st, SL__STMT_REPOSITORY_LIST, user_id, &sl__store_repo_rows,
                                 "repo-list", out, n);
}

/* ---- members ---- */

/* The member role of `user_id` in `repo` into `*out` (NONE when none). */
static int member_role(struct sl_store *st, const char *repo, const char *user_id,
                       enum sl_repo_role *out)
{
    const unsigned char *text;
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    *out = SL_REPO_ROLE_NONE;
    SL_TRY(sl__store_stmt(st, SL__STMT_MEMBER_GET, &s));
    sl__store_bind_text(s, 1, repo, &acc);
    sl__store_bind_text(s, 2, user_id, &acc);
    rc = acc == SQLITE_OK ? sqlite3_step(s) : acc;
    if (rc == SQLITE_ROW) {
        text = sqlite3_column_text(s, 0);
        /* The schema allows nothing else; anything else grants nothing. */
        if (text == NULL || !sl_repo_role_parse((const char *)text, out)) {
            *out = SL_REPO_ROLE_NONE;
        }
        rc = 0;
    } else {
        rc = rc == SQLITE_DONE ? 0 : sl__store_db_error(st, rc, "member-get");
    }
    sl__store_stmt_done(s);
    return rc;
}

int sl_store_member_role(struct sl_store *st, const char *repo, const char *user_id,
                         enum sl_repo_role *out)
{
    SL_ENSURE(repo != NULL && user_id != NULL, SL_EINVAL);
    sl__store_lock(st);
    return sl__store_release(st, member_role(st, repo, user_id, out));
}

static int member_put(struct sl_store *st, const char *repo, const char *user_id,
                      enum sl_repo_role role, enum sl_repo_role *previous)
{
    char now[SL__STORE_TIMESTAMP_SIZE];
    enum sl_repo_role before = SL_REPO_ROLE_NONE;
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;

    SL_TRY(member_role(st, repo, user_id, &before));
    sl__store_now(now);
    SL_TRY(sl__store_stmt(st, SL__STMT_MEMBER_UPSERT, &s));
    sl__store_bind_text(s, 1, repo, &acc);
    sl__store_bind_text(s, 2, user_id, &acc);
    sl__store_bind_text(s, 3, sl_repo_role_name(role), &acc);
    sl__store_bind_text(s, 4, now, &acc);
    SL_TRY(sl__store_exec(st, s, acc, "member-put"));
    if (previous != NULL) {
        *previous = before;
    }
    return 0;
}

int sl_store_member_put(struct sl_store *st, const char *repo, const char *user_id,
                        enum sl_repo_role role, enum sl_repo_role *previous)
{
    SL_ENSURE(repo != NULL && user_id != NULL && role != SL_REPO_ROLE_NONE, SL_EINVAL);
    SL_TRY(sl__store_change_begin(st));
    return sl__store_change_end(st, member_put(st, repo, user_id, role, previous));
}

int sl_store_member_delete(struct sl_store *st, const char *repo, const char *user_id)
{
    SL_ENSURE(repo != NULL && user_id != NULL, SL_EINVAL);
    return sl__store_locked_delete(st, SL__STMT_MEMBER_DELETE, repo, user_id, NULL,
                                   "member-delete");
}

int sl_store_member_list(struct sl_store *st, const char *repo, struct sl_store_member **out,
                         size_t *n)
{
    SL_ENSURE(repo != NULL, SL_EINVAL);
    return sl__store_locked_list(st, SL__STMT_MEMBER_LIST, repo, &sl__store_member_rows,
                                 "member-list", out, n);
}
