/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/store/store_users.c - the users and their API and sandbox tokens (store.h, "users
 * and tokens"). A token is stored only as its hash, found by index and compared in constant
 * time.
 */
#include <string.h>

#include <sqlite3.h>

#include "base/mem.h"
#include "control/store/secrets.h"
#include "control/store/store.h"
#include "control/store/store_int.h"

static const char *token_kind_text(enum sl_token_kind kind)
{
    switch (kind) {
    case SL_TOKEN_KIND_API:
        return "api";
    case SL_TOKEN_KIND_SANDBOX:
        return "sandbox";
    }
    return NULL;
}

/* Reads a user from columns first .. first + 3 (id, name, is_admin, created_at). */
static int read_user(struct sl_store *st, sqlite3_stmt *s, int first, struct sl_user *u)
{
    int rc;

    memset(u, 0, sizeof(*u));
    rc = sl__store_col_copy(st, s, first, u->id, sizeof(u->id));
    if (rc == 0) {
        rc = sl__store_col_dup_required(st, s, first + 1, &u->name);
    }
    if (rc == 0) {
        u->is_admin = sqlite3_column_int(s, first + 2) != 0;
        rc = sl__store_col_copy(st, s, first + 3, u->created_at, sizeof(u->created_at));
    }
    if (rc < 0) {
        sl_user_finish(u);
    }
    return rc;
}

static int read_user_row(struct sl_store *st, sqlite3_stmt *s, void *row)
{
    return read_user(st, s, 0, row);
}

static int user_create(struct sl_store *st, const char *name, bool is_admin, struct sl_user *out)
{
    struct sl_user u = { 0 };
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_ENSURE(name != NULL && name[0] != '\0', SL_EINVAL);
    SL_TRY(sl_uuid_v4(u.id));
    sl__store_now(u.created_at);
    u.is_admin = is_admin;
    /* Allocated before the insert, so that a created user is always reported as created. */
    u.name = sl_strdup(name);
    if (u.name == NULL) {
        return SL_ENOMEM;
    }
    rc = sl__store_stmt(st, SL__STMT_USER_INSERT, &s);
    if (rc < 0) {
        goto fail;
    }
    sl__store_bind_text(s, 1, u.id, &acc);
    sl__store_bind_text(s, 2, u.name, &acc);
    sl__store_bind_int64(s, 3, is_admin ? 1 : 0, &acc);
    sl__store_bind_text(s, 4, u.created_at, &acc);
    rc = sl__store_exec(st, s, acc, "user-create");
    if (rc < 0) {
        goto fail;
    }
    *out = u;
    return 0;

fail:
    sl_user_finish(&u);
    return rc;
}

int sl_store_user_create(struct sl_store *st, const char *name, bool is_admin, struct sl_user *out)
{
    int rc;

    sl__store_lock(st);
    rc = user_create(st, name, is_admin, out);
    sl__store_unlock(st);
    return rc;
}

/* Runs a one-row user query with one text parameter. */
static int user_get(struct sl_store *st, enum sl__store_stmt id, const char *key,
                    struct sl_user *out)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;

    SL_ENSURE(key != NULL, SL_EINVAL);
    SL_TRY(sl__store_stmt(st, id, &s));
    sl__store_bind_text(s, 1, key, &acc);
    return sl__store_get_one(st, s, acc, read_user_row, out, "user-get");
}

int sl_store_user_get(struct sl_store *st, const char *id, struct sl_user *out)
{
    int rc;

    sl__store_lock(st);
    rc = user_get(st, SL__STMT_USER_BY_ID, id, out);
    sl__store_unlock(st);
    return rc;
}

int sl_store_user_get_by_name(struct sl_store *st, const char *name, struct sl_user *out)
{
    int rc;

    sl__store_lock(st);
    rc = user_get(st, SL__STMT_USER_BY_NAME, name, out);
    sl__store_unlock(st);
    return rc;
}

void sl_store_free_users(struct sl_user *v, size_t n)
{
    if (v == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        sl_user_finish(&v[i]);
    }
    sl_free(v);
}

static void free_user_rows(void *rows, size_t n)
{
    sl_store_free_users(rows, n);
}

static int user_list(struct sl_store *st, struct sl_user **out, size_t *n)
{
    sqlite3_stmt *s = NULL;
    void *v = NULL;
    int rc;

    SL_TRY(sl__store_stmt(st, SL__STMT_USER_LIST, &s));
    rc = sl__store_collect_rows(st, s, sizeof(**out), read_user_row, free_user_rows, "user-list",
                                &v, n);
    sl__store_stmt_done(s);
    if (rc == 0) {
        *out = v;
    }
    return rc;
}

int sl_store_user_list(struct sl_store *st, struct sl_user **out, size_t *n)
{
    int rc;

    sl__store_lock(st);
    rc = user_list(st, out, n);
    sl__store_unlock(st);
    return rc;
}

/* ---- tokens ---- */

static int token_add(struct sl_store *st, const uint8_t hash[32], const char *user_id,
                     enum sl_token_kind kind)
{
    const char *kind_text = token_kind_text(kind);
    char now[SL__STORE_TIMESTAMP_SIZE];
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;

    SL_ENSURE(hash != NULL && user_id != NULL && kind_text != NULL, SL_EINVAL);
    sl__store_now(now);
    SL_TRY(sl__store_stmt(st, SL__STMT_TOKEN_INSERT, &s));
    sl__store_bind_hash(s, 1, hash, &acc);
    sl__store_bind_text(s, 2, user_id, &acc);
    sl__store_bind_text(s, 3, kind_text, &acc);
    sl__store_bind_text(s, 4, now, &acc);
    return sl__store_exec(st, s, acc, "token-add");
}

int sl_store_token_add(struct sl_store *st, const uint8_t hash[32], const char *user_id,
                       enum sl_token_kind kind)
{
    int rc;

    sl__store_lock(st);
    rc = token_add(st, hash, user_id, kind);
    sl__store_unlock(st);
    return rc;
}

static int token_find_user(struct sl_store *st, const uint8_t hash[32], struct sl_user *out,
                           enum sl_token_kind *kind)
{
    const void *stored;
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_ENSURE(hash != NULL, SL_EINVAL);
    SL_TRY(sl__store_stmt(st, SL__STMT_TOKEN_FIND, &s));
    sl__store_bind_hash(s, 1, hash, &acc);
    rc = acc == SQLITE_OK ? sqlite3_step(s) : acc;
    if (rc == SQLITE_DONE) {
        rc = SL_ENOTFOUND;
        goto done;
    }
    if (rc != SQLITE_ROW) {
        rc = sl__store_db_error(st, rc, "token-find");
        goto done;
    }
    /* The index lookup found the row; the hash is still compared in constant time, so that
     * what decides is a comparison whose timing says nothing about the stored value. */
    stored = sqlite3_column_blob(s, 0);
    if (stored == NULL || sqlite3_column_bytes(s, 0) != SL_TOKEN_HASH_BYTES
        || !sl_token_hash_equal(stored, hash)) {
        rc = SL_ENOTFOUND;
        goto done;
    }
    rc = read_user(st, s, 2, out);
    if (rc == 0 && kind != NULL) {
        *kind = sl__store_col_is(s, 1, "sandbox") ? SL_TOKEN_KIND_SANDBOX : SL_TOKEN_KIND_API;
    }
done:
    sl__store_stmt_done(s);
    return rc;
}

int sl_store_token_find_user(struct sl_store *st, const uint8_t hash[32], struct sl_user *out,
                             enum sl_token_kind *kind)
{
    int rc;

    sl__store_lock(st);
    rc = token_find_user(st, hash, out, kind);
    sl__store_unlock(st);
    return rc;
}

int sl_store_token_delete(struct sl_store *st, const uint8_t hash[32])
{
    int rc;

    SL_ENSURE(hash != NULL, SL_EINVAL);
    sl__store_lock(st);
    rc = sl__store_delete_one(st, SL__STMT_TOKEN_DELETE, NULL, hash, "token-delete");
    sl__store_unlock(st);
    return rc;
}
