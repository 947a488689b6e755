/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/store/store_users.c - the users and their API and sandbox tokens (store.h, "users
 * and tokens"). A token is stored only as its hash, found by index and compared in constant
 * time; its record (id, name, scope, expiry) is what its owner sees of it.
 */
#include <stdio.h>
#include <string.h>

#include <sodium.h>
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

static int user_create(struct sl_store *st, const char *name, bool is_admin, const char *email,
                       struct sl_user *out)
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
    u.email = email != NULL ? sl_strdup(email) : NULL;
    if (u.name == NULL || (email != NULL && u.email == NULL)) {
        rc = SL_ENOMEM;
        goto fail;
    }
    rc = sl__store_stmt(st, SL__STMT_USER_INSERT, &s);
    if (rc < 0) {
        goto fail;
    }
    sl__store_bind_text(s, 1, u.id, &acc);
    sl__store_bind_text(s, 2, u.name, &acc);
    sl__store_bind_int64(s, 3, is_admin ? 1 : 0, &acc);
    sl__store_bind_text(s, 4, u.created_at, &acc);
    sl__store_bind_text(s, 5, u.email, &acc);
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

/* The check and the insert in one transaction: two requests cannot add `Alice` and `alice`
 * side by side. A database that holds both already (written before the rule) keeps them. */
static int user_create_unique(struct sl_store *st, const char *name, bool is_admin,
                              const char *email, struct sl_user *out)
{
    int rc = sl__store_get_by(st, SL__STMT_USER_BY_NAME_NOCASE, name, &sl__store_user_rows, out,
                              "user-get");

    if (rc == 0) {
        return SL_EEXIST;
    }
    return rc == SL_ENOTFOUND ? user_create(st, name, is_admin, email, out) : rc;
}

int sl_store_user_create(struct sl_store *st, const char *name, bool is_admin, const char *email,
                         struct sl_user *out)
{
    SL_ENSURE(name != NULL && out != NULL, SL_EINVAL);
    memset(out, 0, sizeof(*out));
    SL_TRY(sl__store_change_begin(st));
    return sl__store_change_end(st, user_create_unique(st, name, is_admin, email, out));
}

int sl_store_user_get(struct sl_store *st, const char *id, struct sl_user *out)
{
    SL_ENSURE(id != NULL, SL_EINVAL);
    return sl__store_locked_get(st, SL__STMT_USER_BY_ID, id, &sl__store_user_rows, out, "user-get");
}

int sl_store_user_get_by_name(struct sl_store *st, const char *name, struct sl_user *out)
{
    SL_ENSURE(name != NULL, SL_EINVAL);
    return sl__store_locked_get(st, SL__STMT_USER_BY_NAME, name, &sl__store_user_rows, out,
                                "user-get");
}

void sl_store_free_users(struct sl_user *v, size_t n)
{
    sl__store_free_rows(&sl__store_user_rows, v, n);
}

int sl_store_user_list(struct sl_store *st, struct sl_user **out, size_t *n)
{
    return sl__store_locked_list(st, SL__STMT_USER_LIST, NULL, &sl__store_user_rows, "user-list",
                                 out, n);
}

/* The number of enabled admins, in `*n`. */
static int count_admins(struct sl_store *st, int64_t *n)
{
    sqlite3_stmt *s = NULL;
    int rc;

    SL_TRY(sl__store_stmt(st, SL__STMT_USER_ADMINS, &s));
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *n = sqlite3_column_int64(s, 0);
        rc = 0;
    } else {
        rc = sl__store_db_error(st, rc, "user-admins");
    }
    sl__store_stmt_done(s);
    return rc;
}

/* The change itself, inside the transaction: the update, then the rule that some enabled admin
 * is left (checked after the change, so that it holds whatever the change was). */
static int user_change(struct sl_store *st, const char *name, const struct sl_store_user_change *ch)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int64_t admins = 0;

    SL_TRY(sl__store_stmt(st, SL__STMT_USER_UPDATE, &s));
    sl__store_bind_text(s, 1, name, &acc);
    sl__store_bind_optional(s, 2, ch->set_disabled ? (ch->disabled ? 1 : 0) : -1, &acc);
    sl__store_bind_optional(s, 3, ch->set_admin ? (ch->is_admin ? 1 : 0) : -1, &acc);
    sl__store_bind_int64(s, 4, ch->set_email ? 1 : 0, &acc);
    sl__store_bind_text(s, 5, ch->email, &acc);
    SL_TRY(sl__store_exec(st, s, acc, "user-update"));
    SL_ENSURE(sqlite3_changes(st->db) > 0, SL_ENOTFOUND);
    SL_TRY(count_admins(st, &admins));
    return admins > 0 ? 0 : SL_EINVAL;
}

int sl_store_user_update(struct sl_store *st, const char *name,
                         const struct sl_store_user_change *ch, struct sl_user *out)
{
    int rc;

    SL_ENSURE(name != NULL && ch != NULL, SL_EINVAL);
    sl__store_lock(st);
    rc = sl__store_tx_begin(st);
    if (rc == 0) {
        rc = sl__store_tx_end(st, user_change(st, name, ch));
    }
    if (rc == 0 && out != NULL) {
        rc = sl__store_get_by(st, SL__STMT_USER_BY_NAME, name, &sl__store_user_rows, out,
                              "user-get");
    }
    sl__store_unlock(st);
    return rc;
}

/* ---- tokens ---- */

const char *sl_token_scope_name(enum sl_token_scope scope)
{
    switch (scope) {
    case SL_TOKEN_SCOPE_READ:
        return "read";
    case SL_TOKEN_SCOPE_WRITE:
        return "write";
    case SL_TOKEN_SCOPE_ADMIN:
        return "admin";
    }
    return "read";
}

bool sl_token_scope_parse(const char *text, enum sl_token_scope *out)
{
    static const enum sl_token_scope scopes[] = { SL_TOKEN_SCOPE_READ, SL_TOKEN_SCOPE_WRITE,
                                                  SL_TOKEN_SCOPE_ADMIN };

    for (size_t i = 0; text != NULL && i < SL_ARRAY_LEN(scopes); i++) {
        if (strcmp(text, sl_token_scope_name(scopes[i])) == 0) {
            *out = scopes[i];
            return true;
        }
    }
    return false;
}

void sl_store_token_finish(struct sl_store_token *t)
{
    sl__store_free_cols(&sl__store_token_rows, t);
}

void sl_store_free_tokens(struct sl_store_token *v, size_t n)
{
    sl__store_free_rows(&sl__store_token_rows, v, n);
}

static int token_add(struct sl_store *st, const uint8_t hash[32], struct sl_store_token *t)
{
    const char *kind_text = token_kind_text(t->kind);
    char now[SL__STORE_TIMESTAMP_SIZE];
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;

    SL_ENSURE(hash != NULL && kind_text != NULL, SL_EINVAL);
    SL_ENSURE(sl__store_is_terminated(t->user_id, sizeof(t->user_id))
                      && sl__store_is_terminated(t->id, sizeof(t->id))
                      && sl__store_is_terminated(t->expires_at, sizeof(t->expires_at)),
              SL_EINVAL);
    if (t->id[0] == '\0') {
        unsigned char raw[8];

        randombytes_buf(raw, sizeof(raw));
        memcpy(t->id, "tok_", 4);
        (void)sodium_bin2hex(t->id + 4, sizeof(t->id) - 4, raw, sizeof(raw));
    }
    sl__store_now(now);
    SL_TRY(sl__store_stmt(st, SL__STMT_TOKEN_INSERT, &s));
    sl__store_bind_text(s, 1, t->id, &acc);
    sl__store_bind_hash(s, 2, hash, &acc);
    sl__store_bind_text(s, 3, t->user_id, &acc);
    sl__store_bind_text(s, 4, kind_text, &acc);
    sl__store_bind_text(s, 5, t->name != NULL ? t->name : "", &acc);
    sl__store_bind_text(s, 6, sl_token_scope_name(t->scope), &acc);
    sl__store_bind_text(s, 7, now, &acc);
    sl__store_bind_text(s, 8, t->expires_at[0] != '\0' ? t->expires_at : NULL, &acc);
    SL_TRY(sl__store_exec(st, s, acc, "token-add"));
    memcpy(t->created_at, now, sizeof(t->created_at));
    return 0;
}

int sl_store_token_add(struct sl_store *st, const uint8_t hash[32], struct sl_store_token *t)
{
    SL_ENSURE(t != NULL, SL_EINVAL);
    sl__store_lock(st);
    return sl__store_release(st, token_add(st, hash, t));
}

/* The number of live API tokens (not expired; a revoked one is gone) of `user_id`, in `*n`. */
static int count_live(struct sl_store *st, const char *user_id, int64_t *n)
{
    char now[SL__STORE_TIMESTAMP_SIZE];
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    sl__store_now(now);
    SL_TRY(sl__store_stmt(st, SL__STMT_TOKEN_LIVE, &s));
    sl__store_bind_text(s, 1, user_id, &acc);
    sl__store_bind_text(s, 2, now, &acc);
    rc = acc == SQLITE_OK ? sqlite3_step(s) : acc;
    if (rc == SQLITE_ROW) {
        *n = sqlite3_column_int64(s, 0);
        rc = 0;
    } else {
        rc = sl__store_db_error(st, rc, "token-live");
    }
    sl__store_stmt_done(s);
    return rc;
}

static int token_add_capped(struct sl_store *st, const uint8_t hash[32], struct sl_store_token *t,
                            size_t max_live)
{
    int64_t n = 0;

    SL_ENSURE(sl__store_is_terminated(t->user_id, sizeof(t->user_id)), SL_EINVAL);
    SL_TRY(count_live(st, t->user_id, &n));
    SL_ENSURE(n >= 0 && (uint64_t)n < (uint64_t)max_live, SL_ETOOBIG);
    return token_add(st, hash, t);
}

int sl_store_token_add_capped(struct sl_store *st, const uint8_t hash[32], struct sl_store_token *t,
                              size_t max_live)
{
    SL_ENSURE(t != NULL && t->kind == SL_TOKEN_KIND_API, SL_EINVAL);
    SL_TRY(sl__store_change_begin(st));
    return sl__store_change_end(st, token_add_capped(st, hash, t, max_live));
}

static int token_find_user(struct sl_store *st, const uint8_t hash[32], struct sl_user *out,
                           struct sl_store_token *tok)
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
    rc = sl__store_read_row(st, s, 8, &sl__store_user_rows, out);
    if (rc == 0 && tok != NULL) {
        rc = sl__store_read_row(st, s, 1, &sl__store_token_rows, tok);
        if (rc < 0) {
            sl_user_finish(out);
        }
    }
done:
    sl__store_stmt_done(s);
    return rc;
}

int sl_store_token_find_user(struct sl_store *st, const uint8_t hash[32], struct sl_user *out,
                             struct sl_store_token *tok)
{
    sl__store_lock(st);
    return sl__store_release(st, token_find_user(st, hash, out, tok));
}

int sl_store_token_list(struct sl_store *st, const char *user_id, struct sl_store_token **out,
                        size_t *n)
{
    SL_ENSURE(user_id != NULL, SL_EINVAL);
    return sl__store_locked_list(st, SL__STMT_TOKEN_LIST, user_id, &sl__store_token_rows,
                                 "token-list", out, n);
}

int sl_store_token_delete(struct sl_store *st, const uint8_t hash[32])
{
    SL_ENSURE(hash != NULL, SL_EINVAL);
    return sl__store_locked_delete(st, SL__STMT_TOKEN_DELETE, NULL, NULL, hash, "token-delete");
}

int sl_store_token_delete_id(struct sl_store *st, const char *user_id, const char *id)
{
    SL_ENSURE(user_id != NULL && id != NULL, SL_EINVAL);
    return sl__store_locked_delete(st, SL__STMT_TOKEN_DELETE_ID, id, user_id, NULL, "token-delete");
}
