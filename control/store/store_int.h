/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/store/store_int.h - what the files of the store share, and nobody else: the
 * connection, its cached statements, transactions, and the helpers that bind parameters, run
 * statements and read columns and rows.
 *
 * The store is one file per table group around store.c, which opens the database, upgrades
 * its schema and holds every SQL text and the rows the statements return (the schema, the
 * statements and the row layouts that must match it stay side by side): store_users.c (users and
 * tokens), store_envs.c (environments and their repositories), store_clients.c (static clients),
 * store_jobs.c (jobs and schedules), store_repos.c (repositories of the local git platform and
 * their members).
 *
 * Every public function of store.h takes the lock (sl__store_lock) for its whole run; the
 * helpers below run with it held and never take it themselves, but for the whole operations
 * at the end, which are all some public functions do.
 *
 * Binders are sticky: each does nothing once `*acc` holds an error, so a run of binds is
 * checked once at its end (by sl__store_exec(), sl__store_get_one() or sl__store_list(), which
 * take `acc`).
 * Text is bound SQLITE_STATIC: it must outlive the statement's use, which ends with
 * sl__store_stmt_done() in the same function. NULL binds SQL NULL.
 */
#ifndef SL_CONTROL_STORE_STORE_INT_H
#define SL_CONTROL_STORE_STORE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "base/err.h"
#include "control/store/store.h"

/* Size of an RFC 3339 UTC timestamp buffer: 2026-11-30T01:02:03Z, or with milliseconds. */
#define SL__STORE_TIMESTAMP_SIZE 32

/* The cached statements, prepared on first use; store.c holds their SQL. */
enum sl__store_stmt {
    SL__STMT_BEGIN = 0,
    SL__STMT_COMMIT,
    SL__STMT_ROLLBACK,
    SL__STMT_USER_INSERT,
    SL__STMT_USER_BY_ID,
    SL__STMT_USER_BY_NAME,
    SL__STMT_USER_BY_NAME_NOCASE,
    SL__STMT_USER_LIST,
    SL__STMT_USER_UPDATE,
    SL__STMT_USER_ADMINS,
    SL__STMT_TOKEN_INSERT,
    SL__STMT_TOKEN_FIND,
    SL__STMT_TOKEN_LIST,
    SL__STMT_TOKEN_DELETE,
    SL__STMT_TOKEN_DELETE_ID,
    SL__STMT_TOKEN_LIVE,
    SL__STMT_ENV_INSERT,
    SL__STMT_ENV_UPDATE,
    SL__STMT_ENV_DELETE,
    SL__STMT_ENV_BY_ID,
    SL__STMT_ENV_BY_NAME,
    SL__STMT_ENV_BY_REPO,
    SL__STMT_ENV_LIST_VISIBLE,
    SL__STMT_ENV_LIST_ALL,
    SL__STMT_ENV_DEFAULT,
    SL__STMT_ENV_STATE,
    SL__STMT_ENV_NAME_HOLDER,
    SL__STMT_ENV_DEMOTE,
    SL__STMT_ENV_PROMOTE,
    SL__STMT_ENV_OBSERVE_SET,
    SL__STMT_ENV_OBSERVE_DUE,
    SL__STMT_ENV_OBSERVE_END,
    SL__STMT_REPO_INSERT,
    SL__STMT_REPO_DELETE,
    SL__STMT_REPO_LIST,
    SL__STMT_REPO_HOLDER,
    SL__STMT_CLIENT_INSERT,
    SL__STMT_CLIENT_LIST,
    SL__STMT_CLIENT_DELETE,
    SL__STMT_REPOSITORY_PUT,
    SL__STMT_REPOSITORY_GET,
    SL__STMT_REPOSITORY_DELETE,
    SL__STMT_REPOSITORY_LIST,
    SL__STMT_MEMBER_GET,
    SL__STMT_MEMBER_UPSERT,
    SL__STMT_MEMBER_DELETE,
    SL__STMT_MEMBER_LIST,
    SL__STMT_SNAPSHOT_NEXT,
    SL__STMT_JOB_INSERT,
    SL__STMT_JOB_GET,
    SL__STMT_JOB_LIST,
    SL__STMT_JOB_NEXT,
    SL__STMT_JOB_START,
    SL__STMT_JOB_SET_RUN,
    SL__STMT_JOB_FINISH,
    SL__STMT_JOB_ABANDON,
    SL__STMT_SCHED_INSERT,
    SL__STMT_SCHED_UPDATE,
    SL__STMT_SCHED_DELETE,
    SL__STMT_SCHED_GET,
    SL__STMT_SCHED_LIST,
    SL__STMT_SCHED_DUE,
    SL__STMT_SCHED_FIRED,
    SL__STMT_COUNT,
};

/* The columns the readers of rows expect, in their order: the user and the token of
 * store_users.c (read_user, read_token), the environment of store_envs.c (read_env), the job and
 * the schedule of store_jobs.c (read_job, read_schedule), the repository of store_repos.c
 * (read_repo). */
#define SL__STORE_USER_COLS   "id, name, is_admin, disabled, email, created_at"
#define SL__STORE_USER_COLS_U "u.id, u.name, u.is_admin, u.disabled, u.email, u.created_at"
#define SL__STORE_TOKEN_COLS  "t.id, t.user_id, t.kind, t.scope, t.name, t.created_at, t.expires_at"
#define SL__STORE_REPO_COLS                                                                \
    "r.name, r.visibility, r.default_branch, r.protected_json, r.archived, r.created_at, " \
    "r.updated_at"
#define SL__STORE_ENV_COLS                                                               \
    "e.id, e.name, e.description, e.scope, e.owner_key, e.is_default, e.base_image, "    \
    "e.cpus_centi, e.memory_bytes, e.network, e.env_json, e.egress_json, e.created_at, " \
    "e.updated_at, e.observe_until, e.image_pull, e.registry_json"
#define SL__STORE_JOB_COLS                                                                   \
    "id, owner_id, schedule_id, repo, ref, command, env_key, timeout_ms, status, env_json, " \
    "sandbox_id, result_json, error, created_at, started_at, finished_at"
#define SL__STORE_SCHED_COLS                                                                  \
    "id, owner_id, name, cron, repos_json, command, env_key, timeout_ms, enabled, next_run, " \
    "last_run, created_at, updated_at"

struct sl_store {
    /* The connection; opened without SQLite's own mutex because `lock` serialises it. */
    sqlite3 *db;
    /* Held by every public function for its whole run. */
    pthread_mutex_t lock;
    /* Prepared on first use, finalised by sl_store_close(). Each is reset after every use. */
    sqlite3_stmt *stmts[SL__STMT_COUNT];
    /* The database's path, for log lines. Owned. */
    char *path;
};

/* Takes and releases the store's lock (an error there is a bug: abort). */
void sl__store_lock(struct sl_store *st);
void sl__store_unlock(struct sl_store *st);

/* Releases the lock and returns `rc`: the end of a public function,
 * `sl__store_lock(st); return sl__store_release(st, work(st, ...));`. */
int sl__store_release(struct sl_store *st, int rc);

/* A public change in one transaction: sl__store_change_begin() takes the lock and begins the
 * transaction (and releases the lock when that fails); sl__store_change_end() ends it with the
 * outcome `rc` of the work (see sl__store_tx_end()) and releases the lock:
 * `SL_TRY(sl__store_change_begin(st)); return sl__store_change_end(st, work(st, ...));`. */
SL_MUST_CHECK int sl__store_change_begin(struct sl_store *st);
SL_MUST_CHECK int sl__store_change_end(struct sl_store *st, int rc);

/* Writes the current time as RFC 3339 UTC with seconds (the epoch if the clock fails). */
void sl__store_now(char out[SL__STORE_TIMESTAMP_SIZE]);

/* True when a fixed-size text member of `cap` bytes is terminated (caller storage is checked
 * before it is bound). */
bool sl__store_is_terminated(const char *s, size_t cap);

/*
 * Turns an SQLite result code into an sl_err. Constraint failures that a caller did not handle
 * itself map by kind; anything unexpected is logged here, with SQLite's message and `what`
 * (the operation), because only here is that message known.
 */
int sl__store_db_error(struct sl_store *st, int rc, const char *what);

/* The cached statement `id` in `*out`, prepared on first use. Returns 0 or an sl_err. */
SL_MUST_CHECK int sl__store_stmt(struct sl_store *st, enum sl__store_stmt id, sqlite3_stmt **out);

/* Resets a statement after use, so that it holds no read transaction and no bound pointers. */
void sl__store_stmt_done(sqlite3_stmt *s);

/* The sticky binders (see the top of this file). bind_optional binds -1 ("inherit") as NULL;
 * bind_hash binds 32 bytes as a blob. */
void sl__store_bind_text(sqlite3_stmt *s, int i, const char *v, int *acc);
void sl__store_bind_int64(sqlite3_stmt *s, int i, int64_t v, int *acc);
void sl__store_bind_optional(sqlite3_stmt *s, int i, int64_t v, int *acc);
void sl__store_bind_hash(sqlite3_stmt *s, int i, const uint8_t hash[32], int *acc);

/* Runs a statement that returns no rows and resets it. Returns an SQLite code (SQLITE_DONE on
 * success), for the callers that tell constraint failures apart. */
int sl__store_run(sqlite3_stmt *s);

/* Runs the bound statement `s` that returns no rows, unless binding failed (`acc`), and resets
 * it. Returns 0, or the sl_err of the failure (`what` names the operation). */
SL_MUST_CHECK int sl__store_exec(struct sl_store *st, sqlite3_stmt *s, int acc, const char *what);

/* Begins a transaction (BEGIN IMMEDIATE). Returns 0 or an sl_err. */
SL_MUST_CHECK int sl__store_tx_begin(struct sl_store *st);

/* Ends the transaction begun by sl__store_tx_begin() with the outcome `rc` of its work:
 * commits when `rc` is 0 (a failed commit rolls back and is returned), rolls back otherwise and
 * returns `rc`. */
SL_MUST_CHECK int sl__store_tx_end(struct sl_store *st, int rc);

/* ---- reading columns ---- */

/* Copies text column `i` into fixed storage. SQL NULL reads as "". A value that does not fit is
 * a database this code did not write: SL_EIO. */
SL_MUST_CHECK int sl__store_col_copy(struct sl_store *st, sqlite3_stmt *s, int i, char *dst,
                                     size_t cap);

/* Copies text column `i` to the heap (*out, sl_malloc); SQL NULL reads as NULL. */
SL_MUST_CHECK int sl__store_col_dup(sqlite3_stmt *s, int i, char **out);

/* As sl__store_col_dup() for a column that is never NULL; NULL would be a foreign row:
 * SL_EIO. */
SL_MUST_CHECK int sl__store_col_dup_required(struct sl_store *st, sqlite3_stmt *s, int i,
                                             char **out);

/* True when text column `i` is `text`. */
bool sl__store_col_is(sqlite3_stmt *s, int i, const char *text);

/*
 * Grows an array of `size`-byte elements to hold one more than `len`. `array` points to the
 * caller's pointer variable (of any object pointer type); it is read and written with memcpy so
 * that no pointer is accessed through an lvalue of another type.
 */
SL_MUST_CHECK int sl__store_grow(void *array, size_t *cap, size_t len, size_t size);

/* ---- rows ---- */

/* What a column is read into (struct sl__store_col). */
enum sl__store_col_kind {
    /* A char array: text, SQL NULL as "" (sl__store_col_copy()). */
    SL__STORE_COL_TEXT = 0,
    /* A char *, owned: text, SQL NULL as NULL (sl__store_col_dup()). */
    SL__STORE_COL_DUP,
    /* As SL__STORE_COL_DUP, of a column that is never NULL (sl__store_col_dup_required()). */
    SL__STORE_COL_DUP_REQUIRED,
    /* An int64_t. */
    SL__STORE_COL_INT64,
    /* An int64_t, SQL NULL as -1 (what sl__store_bind_optional() binds as NULL). */
    SL__STORE_COL_OPTIONAL,
    /* A bool: the integer is not 0. */
    SL__STORE_COL_FLAG,
    /* Read by the row's own reader (an enum, a flag spelled as text); skipped by the table. */
    SL__STORE_COL_OWN,
};

/* One column of a query and the member of the row struct it is read into. */
struct sl__store_col {
    enum sl__store_col_kind kind;
    /* The member's offset in the row struct and its size in bytes. */
    size_t offset;
    size_t size;
};

/* The table entry for a column read as `kind` (TEXT, DUP, ...) into `member` of `type`. */
#define SL__STORE_COL(kind, type, member)                                         \
    {                                                                             \
        SL__STORE_COL_##kind, offsetof(type, member), sizeof(((type *)0)->member) \
    }

/* Reads the current row of a statement, from column `first` on, into `row`; on failure `row`
 * holds nothing. */
typedef int sl__store_read_row_fn(struct sl_store *st, sqlite3_stmt *s, int first, void *row);
/* Frees what one row owns and zeroes it. */
typedef void sl__store_finish_row_fn(void *row);

/*
 * A kind of row: its struct, the columns the queries that return it select (in that order:
 * the SL__STORE_*_COLS above) and what each is read into, and the reader and finisher of rows
 * that need more than the table.
 */
struct sl__store_rows {
    /* The size of the row struct. */
    size_t size;
    /* The columns; NULL (and 0) for a kind that `read` reads alone. */
    const struct sl__store_col *cols;
    size_t n_cols;
    /* Reads a row; NULL: sl__store_read_cols(). */
    sl__store_read_row_fn *read;
    /* Finishes a row; NULL: sl__store_free_cols(). */
    sl__store_finish_row_fn *finish;
};

/* The kinds of row the queries return, next to their SQL in store.c. */
extern const struct sl__store_rows sl__store_user_rows;
extern const struct sl__store_rows sl__store_token_rows;
extern const struct sl__store_rows sl__store_env_rows;
extern const struct sl__store_rows sl__store_client_rows;
extern const struct sl__store_rows sl__store_job_rows;
extern const struct sl__store_rows sl__store_schedule_rows;
extern const struct sl__store_rows sl__store_repo_rows;
extern const struct sl__store_rows sl__store_member_rows;

/* Reads the current row of `s`, from column `first` on, into `row` as `kind` says (its `read`,
 * or else its columns). On failure `row` holds nothing. */
SL_MUST_CHECK int sl__store_read_row(struct sl_store *st, sqlite3_stmt *s, int first,
                                     const struct sl__store_rows *kind, void *row);

/* Zeroes `row` and reads columns `first` .. of the current row of `s` into it as `kind->cols`
 * says, stopping at the first failure; on failure `row` is freed and zeroed again. */
SL_MUST_CHECK int sl__store_read_cols(struct sl_store *st, sqlite3_stmt *s, int first,
                                      const struct sl__store_rows *kind, void *row);

/* Frees the members of `row` that `kind->cols` reads to the heap, and zeroes `row`. */
void sl__store_free_cols(const struct sl__store_rows *kind, void *row);

/* Finishes the first `n` rows of the array `rows` (NULL: nothing) and frees the array. */
void sl__store_free_rows(const struct sl__store_rows *kind, void *rows, size_t n);

/* Steps the bound statement `s` (unless binding failed: `acc`) to its one row and reads it
 * into `row`, then resets `s`. SL_ENOTFOUND when there is no row; `what` names the query in
 * errors. */
SL_MUST_CHECK int sl__store_get_one(struct sl_store *st, sqlite3_stmt *s, int acc,
                                    const struct sl__store_rows *kind, void *row, const char *what);

/* sl__store_get_one() of the cached statement `id` with the text `key` as its parameter 1. */
SL_MUST_CHECK int sl__store_get_by(struct sl_store *st, enum sl__store_stmt id, const char *key,
                                   const struct sl__store_rows *kind, void *row, const char *what);

/* Steps the bound statement `s` (unless binding failed: `acc`) to its end, reading every row
 * into a new array, then resets `s`. On success `out` (the address of the caller's pointer to
 * the element type, written with memcpy as in sl__store_grow()) and `*n` hold the array, which
 * sl__store_free_rows() frees; on failure nothing is left. `what` names the query in errors. */
SL_MUST_CHECK int sl__store_list(struct sl_store *st, sqlite3_stmt *s, int acc,
                                 const struct sl__store_rows *kind, const char *what, void *out,
                                 size_t *n);

/* Runs the DELETE `id`, keyed by its parameter 1: the blob `hash` when it is not NULL, the text
 * `key` otherwise; and by the text `key2` as parameter 2 when it is not NULL. SL_ENOTFOUND when
 * it deleted nothing. */
SL_MUST_CHECK int sl__store_delete_one(struct sl_store *st, enum sl__store_stmt id, const char *key,
                                       const char *key2, const uint8_t *hash, const char *what);

/* ---- whole operations ---- */

/* These are all a public function does, so unlike the helpers above they take the lock for
 * their whole run: sl__store_get_by(); sl__store_list() of the cached statement `id` with the
 * text `key` as its parameter 1 (none when `key` is NULL); sl__store_delete_one(). */
SL_MUST_CHECK int sl__store_locked_get(struct sl_store *st, enum sl__store_stmt id, const char *key,
                                       const struct sl__store_rows *kind, void *row,
                                       const char *what);
SL_MUST_CHECK int sl__store_locked_list(struct sl_store *st, enum sl__store_stmt id,
                                        const char *key, const struct sl__store_rows *kind,
                                        const char *what, void *out, size_t *n);
SL_MUST_CHECK int sl__store_locked_delete(struct sl_store *st, enum sl__store_stmt id,
                                          const char *key, const char *key2, const uint8_t *hash,
                                          const char *what);

#endif
