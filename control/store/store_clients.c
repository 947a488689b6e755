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
    sl__store_free_cols(&sl__store_client_rows, c);
}

void sl_store_free_clients(struct sl_store_client *v, size_t n)
{
    sl__store_free_rows(&sl__store_client_rows, v, n);
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
    sl__store_lock(st);
    return sl__store_release(st, client_create(st, c));
}

int sl_store_client_list(struct sl_store *st, struct sl_store_client **out, size_t *n)
{
    return sl__store_locked_list(st, SL__STMT_CLIENT_LIST, NULL, &sl__store_client_rows,
                                 "client-list", out, n);
}

int sl_store_client_delete(struct sl_store *st, const char *id)
{
    SL_ENSURE(id != NULL, SL_EINVAL);
    return sl__store_locked_delete(st, SL__STMT_CLIENT_DELETE, id, NULL, NULL, "client-delete");
}
