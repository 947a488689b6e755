/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/store/store_clients.c - static clients (store.h, "static clients"): hosts admitted
 * by address or by token, each bound to an environment that cannot be deleted while they use
 * it.
 */
#include <string.h>

#include <sqlite3.h>

#include "base/mem.h"
#include "control/store/store.h"
#include "control/store/store_int.h"

void sl_store_client_finish(struct sl_store_client *c)
{
    sl_free(c->id);
    sl_free(c->env_name);
    sl_free(c->ip);
    sl_free(c->cidr);
    sl_free(c->token_sealed);
    memset(c, 0, sizeof(*c));
}

void sl_store_free_clients(struct sl_store_client *v, size_t n)
{
    if (v == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        sl_store_client_finish(&v[i]);
    }
    sl_free(v);
}

static int client_create(struct sl_store *st, struct sl_store_client *c)
{
    char now[SL__STORE_TIMESTAMP_SIZE];
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;

    SL_ENSURE(c->id != NULL && c->id[0] != '\0', SL_EINVAL);
    SL_ENSURE(sl__store_is_terminated(c->env_id, sizeof(c->env_id)), SL_EINVAL);
    SL_ENSURE(c->ip != NULL || c->cidr != NULL || c->token_sealed != NULL, SL_EINVAL);
    sl__store_now(now);
    SL_TRY(sl__store_stmt(st, SL__STMT_CLIENT_INSERT, &s));
    sl__store_bind_text(s, 1, c->id, &acc);
    sl__store_bind_text(s, 2, c->env_id, &acc);
    sl__store_bind_text(s, 3, c->ip, &acc);
    sl__store_bind_text(s, 4, c->cidr, &acc);
    sl__store_bind_text(s, 5, c->token_sealed, &acc);
    sl__store_bind_text(s, 6, now, &acc);
    SL_TRY(sl__store_exec(st, s, acc, "client-create"));
    memcpy(c->created_at, now, sizeof(c->created_at));
    return 0;
}

int sl_store_client_create(struct sl_store *st, struct sl_store_client *c)
{
    int rc;

    sl__store_lock(st);
    rc = client_create(st, c);
    sl__store_unlock(st);
    return rc;
}

static int read_client(struct sl_store *st, sqlite3_stmt *s, struct sl_store_client *c)
{
    int rc;

    memset(c, 0, sizeof(*c));
    rc = sl__store_col_dup_required(st, s, 0, &c->id);
    if (rc == 0) {
        rc = sl__store_col_copy(st, s, 1, c->env_id, sizeof(c->env_id));
    }
    if (rc == 0) {
        rc = sl__store_col_dup_required(st, s, 2, &c->env_name);
    }
    if (rc == 0) {
        rc = sl__store_col_dup(s, 3, &c->ip);
    }
    if (rc == 0) {
        rc = sl__store_col_dup(s, 4, &c->cidr);
    }
    if (rc == 0) {
        rc = sl__store_col_dup(s, 5, &c->token_sealed);
    }
    if (rc == 0) {
        rc = sl__store_col_copy(st, s, 6, c->created_at, sizeof(c->created_at));
    }
    if (rc < 0) {
        sl_store_client_finish(c);
    }
    return rc;
}

static int read_client_row(struct sl_store *st, sqlite3_stmt *s, void *row)
{
    return read_client(st, s, row);
}

static void free_client_rows(void *rows, size_t n)
{
    sl_store_free_clients(rows, n);
}

static int client_list(struct sl_store *st, struct sl_store_client **out, size_t *n)
{
    sqlite3_stmt *s = NULL;
    void *v = NULL;
    int rc;

    SL_TRY(sl__store_stmt(st, SL__STMT_CLIENT_LIST, &s));
    rc = sl__store_collect_rows(st, s, sizeof(**out), read_client_row, free_client_rows,
                                "client-list", &v, n);
    sl__store_stmt_done(s);
    if (rc == 0) {
        *out = v;
    }
    return rc;
}

int sl_store_client_list(struct sl_store *st, struct sl_store_client **out, size_t *n)
{
    int rc;

    sl__store_lock(st);
    rc = client_list(st, out, n);
    sl__store_unlock(st);
    return rc;
}

int sl_store_client_delete(struct sl_store *st, const char *id)
{
    int rc;

    SL_ENSURE(id != NULL, SL_EINVAL);
    sl__store_lock(st);
    rc = sl__store_delete_one(st, SL__STMT_CLIENT_DELETE, id, NULL, "client-delete");
    sl__store_unlock(st);
    return rc;
}
