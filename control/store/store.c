/* SPDX-License-Identifier: Apache-2.0 */
#include "control/store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "base/log.h"
#include "base/mem.h"
#include "control/store/secrets.h"

/* Milliseconds a connection waits for another one's write lock (docs/control-plane.md). */
#define BUSY_TIMEOUT_MS 5000
/* Milliseconds between attempts where SQLite does not wait by itself (see set_pragmas). */
#define RETRY_PAUSE_MS 10
/* Length of an RFC 3339 UTC timestamp with seconds: 2026-11-30T01:02:03Z. */
#define TIMESTAMP_SIZE 32

/*
 * Migrations: migrations[v] takes a database from schema version v to v + 1. All of them run in
 * the one transaction that opening starts, so a database is never left half-upgraded. Version 0
 * is an empty database. The constraints repeat the rules the store checks in C, so that no
 * code path can store a row that breaks them.
 */
static const char *const migrations[SL_STORE_SCHEMA_VERSION] = {
    "CREATE TABLE schema_version (version INTEGER NOT NULL);"
    "INSERT INTO schema_version (version) VALUES (0);"
    "CREATE TABLE users ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  name TEXT NOT NULL UNIQUE,"
    "  is_admin INTEGER NOT NULL DEFAULT 0 CHECK (is_admin IN (0, 1)),"
    "  created_at TEXT NOT NULL);"
    "CREATE TABLE tokens ("
    "  hash BLOB PRIMARY KEY NOT NULL CHECK (length(hash) = 32),"
    "  user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,"
    "  kind TEXT NOT NULL CHECK (kind IN ('api', 'sandbox')),"
    "  created_at TEXT NOT NULL);"
    "CREATE INDEX tokens_user ON tokens (user_id);"
    "CREATE TABLE environments ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  name TEXT NOT NULL CHECK (name <> ''),"
    "  description TEXT NOT NULL DEFAULT '',"
    "  scope TEXT NOT NULL CHECK (scope IN ('user', 'global')),"
    "  owner_id TEXT REFERENCES users (id),"
    "  owner_key TEXT NOT NULL,"
    "  is_default INTEGER NOT NULL DEFAULT 0 CHECK (is_default IN (0, 1)),"
    "  base_image TEXT,"
    "  cpus_centi INTEGER CHECK (cpus_centi IS NULL OR cpus_centi > 0),"
    "  memory_bytes INTEGER CHECK (memory_bytes IS NULL OR memory_bytes > 0),"
    "  network TEXT NOT NULL CHECK (network IN ('on', 'off')),"
    "  env_json TEXT NOT NULL DEFAULT '[]',"
    "  egress_json TEXT,"
    "  created_at TEXT NOT NULL,"
    "  updated_at TEXT NOT NULL,"
    "  UNIQUE (scope, owner_key, name),"
    "  CHECK ((scope = 'global' AND owner_id IS NULL AND owner_key = '')"
    "      OR (scope = 'user' AND owner_id IS NOT NULL AND owner_key = owner_id)),"
    "  CHECK (is_default = 0 OR scope = 'global'));"
    "CREATE UNIQUE INDEX environments_one_default ON environments (is_default)"
    "  WHERE is_default = 1;"
    "CREATE INDEX environments_owner ON environments (owner_id);"
    "CREATE TABLE env_repos ("
    "  env_id TEXT NOT NULL REFERENCES environments (id) ON DELETE CASCADE,"
    "  scope TEXT NOT NULL,"
    "  owner_key TEXT NOT NULL,"
    "  repo TEXT NOT NULL CHECK (repo <> ''),"
    "  UNIQUE (scope, owner_key, repo));"
    "CREATE INDEX env_repos_env ON env_repos (env_id);"
    "CREATE TABLE clients ("
    "  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),"
    "  env_id TEXT NOT NULL REFERENCES environments (id) ON DELETE RESTRICT,"
    "  ip TEXT,"
    "  cidr TEXT,"
    "  token_sealed TEXT,"
    "  created_at TEXT NOT NULL);"
    "CREATE INDEX clients_env ON clients (env_id);"
    "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);"
    "INSERT INTO meta (key, value) VALUES ('snapshot_version', '0');",
    /* 1 -> 2: jobs and schedules (SPEC §5.5, docs/jobs.md). `seq` orders jobs (oldest runs
     * first, lists show newest first); a job keeps its schedule's id after the schedule is
     * deleted, so that column has no reference. */
    "CREATE TABLE jobs ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  id TEXT NOT NULL UNIQUE,"
    "  owner_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,"
    "  schedule_id TEXT,"
    "  repo TEXT NOT NULL CHECK (repo <> ''),"
    "  ref TEXT,"
    "  command TEXT NOT NULL CHECK (command <> ''),"
    "  env_key TEXT,"
    "  timeout_ms INTEGER NOT NULL DEFAULT 0 CHECK (timeout_ms >= 0),"
    "  status TEXT NOT NULL"
    "    CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'error')),"
    "  env_json TEXT,"
    "  sandbox_id TEXT,"
    "  result_json TEXT,"
    "  error TEXT,"
    "  created_at TEXT NOT NULL,"
    "  started_at TEXT,"
    "  finished_at TEXT);"
    "CREATE INDEX jobs_status ON jobs (status, seq);"
    "CREATE INDEX jobs_owner ON jobs (owner_id, seq);"
    "CREATE INDEX jobs_schedule ON jobs (schedule_id, seq);"
    "CREATE TABLE schedules ("
    "  id TEXT PRIMARY KEY NOT NULL,"
    "  owner_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,"
    "  name TEXT NOT NULL CHECK (name <> ''),"
    "  cron TEXT NOT NULL CHECK (cron <> ''),"
    "  repos_json TEXT NOT NULL,"
    "  command TEXT NOT NULL CHECK (command <> ''),"
    "  env_key TEXT,"
    "  timeout_ms INTEGER NOT NULL DEFAULT 0 CHECK (timeout_ms >= 0),"
    "  enabled INTEGER NOT NULL CHECK (enabled IN (0, 1)),"
    "  next_run INTEGER,"
    "  last_run INTEGER,"
    "  created_at TEXT NOT NULL,"
    "  updated_at TEXT NOT NULL);"
    "CREATE INDEX schedules_due ON schedules (next_run) WHERE enabled = 1;"
    "CREATE INDEX schedules_owner ON schedules (owner_id, name);",
};

/* The cached statements, prepared on first use. */
enum stmt_id {
    ST_BEGIN = 0,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_USER_INSERT,
    ST_USER_BY_ID,
    ST_USER_BY_NAME,
    ST_USER_LIST,
    ST_TOKEN_INSERT,
    ST_TOKEN_FIND,
    ST_TOKEN_DELETE,
    ST_ENV_INSERT,
    ST_ENV_UPDATE,
    ST_ENV_DELETE,
    ST_ENV_BY_ID,
    ST_ENV_BY_NAME,
    ST_ENV_BY_REPO,
    ST_ENV_LIST_VISIBLE,
    ST_ENV_LIST_ALL,
    ST_ENV_DEFAULT,
    ST_ENV_STATE,
    ST_ENV_NAME_HOLDER,
    ST_ENV_DEMOTE,
    ST_ENV_PROMOTE,
    ST_REPO_INSERT,
    ST_REPO_DELETE,
    ST_REPO_LIST,
    ST_REPO_HOLDER,
    ST_CLIENT_INSERT,
    ST_CLIENT_LIST,
    ST_CLIENT_DELETE,
    ST_SNAPSHOT_NEXT,
    ST_JOB_INSERT,
    ST_JOB_GET,
    ST_JOB_LIST,
    ST_JOB_NEXT,
    ST_JOB_START,
    ST_JOB_SET_RUN,
    ST_JOB_FINISH,
    ST_JOB_ABANDON,
    ST_SCHED_INSERT,
    ST_SCHED_UPDATE,
    ST_SCHED_DELETE,
    ST_SCHED_GET,
    ST_SCHED_LIST,
    ST_SCHED_DUE,
    ST_SCHED_FIRED,
    ST_COUNT,
};

/* The columns read_env() expects, in its order. */
#define ENV_COLS                                                                         \
    "e.id, e.name, e.description, e.scope, e.owner_key, e.is_default, e.base_image, "    \
    "e.cpus_centi, e.memory_bytes, e.network, e.env_json, e.egress_json, e.created_at, " \
    "e.updated_at"
#define USER_COLS "id, name, is_admin, created_at"
/* The columns read_job() expects, in its order. */
#define JOB_COLS                                                                             \
    "id, owner_id, schedule_id, repo, ref, command, env_key, timeout_ms, status, env_json, " \
    "sandbox_id, result_json, error, created_at, started_at, finished_at"
/* The columns read_schedule() expects, in its order. */
#define SCHED_COLS                                                                            \
    "id, owner_id, name, cron, repos_json, command, env_key, timeout_ms, enabled, next_run, " \
    "last_run, created_at, updated_at"

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_USER_INSERT] = "INSERT INTO users (id, name, is_admin, created_at) VALUES (?1, ?2, ?3, ?4)",
    [ST_USER_BY_ID] = "SELECT " USER_COLS " FROM users WHERE id = ?1",
    [ST_USER_BY_NAME] = "SELECT " USER_COLS " FROM users WHERE name = ?1",
    [ST_USER_LIST] = "SELECT " USER_COLS " FROM users ORDER BY name",
    [ST_TOKEN_INSERT] = "INSERT INTO tokens (hash, user_id, kind, created_at) "
                        "VALUES (?1, ?2, ?3, ?4)",
    [ST_TOKEN_FIND] = "SELECT t.hash, t.kind, u.id, u.name, u.is_admin, u.created_at "
                      "FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = ?1",
    [ST_TOKEN_DELETE] = "DELETE FROM tokens WHERE hash = ?1",
    [ST_ENV_INSERT] = "INSERT INTO environments (id, name, description, scope, owner_id, "
                      "owner_key, is_default, base_image, cpus_centi, memory_bytes, network, "
                      "env_json, egress_json, created_at, updated_at) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?14)",
    [ST_ENV_UPDATE] = "UPDATE environments SET name = ?2, description = ?3, scope = ?4, "
                      "owner_id = ?5, owner_key = ?6, base_image = ?8, cpus_centi = ?9, "
                      "memory_bytes = ?10, network = ?11, env_json = ?12, egress_json = ?13, "
                      "updated_at = ?14 WHERE id = ?1",
    [ST_ENV_DELETE] = "DELETE FROM environments WHERE id = ?1",
    [ST_ENV_BY_ID] = "SELECT " ENV_COLS " FROM environments e WHERE e.id = ?1",
    [ST_ENV_BY_NAME] = "SELECT " ENV_COLS " FROM environments e "
                       "WHERE e.scope = ?1 AND e.owner_key = ?2 AND e.name = ?3",
    [ST_ENV_BY_REPO] = "SELECT " ENV_COLS " FROM env_repos r JOIN environments e "
                       "ON e.id = r.env_id WHERE r.scope = ?1 AND r.owner_key = ?2 "
                       "AND r.repo = ?3",
    [ST_ENV_LIST_VISIBLE] = "SELECT " ENV_COLS " FROM environments e "
                            "WHERE (e.scope = 'user' AND e.owner_key = ?1) OR e.scope = 'global' "
                            "ORDER BY e.scope = 'global', e.name",
    [ST_ENV_LIST_ALL] = "SELECT " ENV_COLS " FROM environments e "
                        "ORDER BY e.scope = 'global', e.owner_key, e.name",
    [ST_ENV_DEFAULT] = "SELECT " ENV_COLS " FROM environments e WHERE e.is_default = 1",
    [ST_ENV_STATE] = "SELECT scope, is_default, created_at FROM environments WHERE id = ?1",
    [ST_ENV_NAME_HOLDER] = "SELECT id FROM environments "
                           "WHERE scope = ?1 AND owner_key = ?2 AND name = ?3 AND id <> ?4",
    [ST_ENV_DEMOTE] = "UPDATE environments SET is_default = 0, updated_at = ?1 "
                      "WHERE is_default = 1",
    [ST_ENV_PROMOTE] = "UPDATE environments SET is_default = 1, updated_at = ?2 WHERE id = ?1",
    [ST_REPO_INSERT] = "INSERT INTO env_repos (env_id, scope, owner_key, repo) "
                       "VALUES (?1, ?2, ?3, ?4)",
    [ST_REPO_DELETE] = "DELETE FROM env_repos WHERE env_id = ?1",
    /* rowid order is insertion order: repositories read back in the order they were given. */
    [ST_REPO_LIST] = "SELECT repo FROM env_repos WHERE env_id = ?1 ORDER BY rowid",
    [ST_REPO_HOLDER] = "SELECT e.id, e.name FROM env_repos r JOIN environments e "
                       "ON e.id = r.env_id WHERE r.scope = ?1 AND r.owner_key = ?2 "
                       "AND r.repo = ?3 AND r.env_id <> ?4",
    [ST_CLIENT_INSERT] = "INSERT INTO clients (id, env_id, ip, cidr, token_sealed, created_at) "
                         "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_CLIENT_LIST] = "SELECT c.id, c.env_id, e.name, c.ip, c.cidr, c.token_sealed, "
                       "c.created_at FROM clients c JOIN environments e ON e.id = c.env_id "
                       "ORDER BY c.id",
    [ST_CLIENT_DELETE] = "DELETE FROM clients WHERE id = ?1",
    [ST_SNAPSHOT_NEXT] = "UPDATE meta SET value = CAST(value AS INTEGER) + 1 "
                         "WHERE key = 'snapshot_version' RETURNING CAST(value AS INTEGER)",
    [ST_JOB_INSERT] = "INSERT INTO jobs (id, owner_id, schedule_id, repo, ref, command, env_key, "
                      "timeout_ms, status, created_at) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'queued', ?9)",
    [ST_JOB_GET] = "SELECT " JOB_COLS " FROM jobs WHERE id = ?1",
    [ST_JOB_LIST] = "SELECT " JOB_COLS " FROM jobs WHERE (?1 IS NULL OR owner_id = ?1) "
                    "AND (?2 IS NULL OR status = ?2) AND (?3 IS NULL OR schedule_id = ?3) "
                    "ORDER BY seq DESC LIMIT ?4",
    [ST_JOB_NEXT] = "SELECT " JOB_COLS " FROM jobs WHERE status = 'queued' ORDER BY seq LIMIT 1",
    [ST_JOB_START] = "UPDATE jobs SET status = 'running', started_at = ?2 "
                     "WHERE id = ?1 AND status = 'queued'",
    [ST_JOB_SET_RUN] = "UPDATE jobs SET env_json = coalesce(?2, env_json), "
                       "sandbox_id = coalesce(?3, sandbox_id) "
                       "WHERE id = ?1 AND status = 'running'",
    [ST_JOB_FINISH] = "UPDATE jobs SET status = ?2, result_json = ?3, error = ?4, "
                      "finished_at = ?5, env_json = coalesce(?6, env_json), "
                      "sandbox_id = coalesce(?7, sandbox_id) WHERE id = ?1 AND status = 'running'",
    [ST_JOB_ABANDON] = "UPDATE jobs SET status = 'error', error = ?1, finished_at = ?2 "
                       "WHERE status = 'running'",
    [ST_SCHED_INSERT] = "INSERT INTO schedules (id, owner_id, name, cron, repos_json, command, "
                        "env_key, timeout_ms, enabled, next_run, last_run, created_at, "
                        "updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL, ?11, "
                        "?11)",
    [ST_SCHED_UPDATE] = "UPDATE schedules SET name = ?3, cron = ?4, repos_json = ?5, "
                        "command = ?6, env_key = ?7, timeout_ms = ?8, enabled = ?9, "
                        "next_run = ?10, updated_at = ?11 WHERE id = ?1 AND owner_id = ?2",
    [ST_SCHED_DELETE] = "DELETE FROM schedules WHERE id = ?1",
    [ST_SCHED_GET] = "SELECT " SCHED_COLS " FROM schedules WHERE id = ?1",
    [ST_SCHED_LIST] = "SELECT " SCHED_COLS " FROM schedules WHERE (?1 IS NULL OR owner_id = ?1) "
                      "ORDER BY name, id LIMIT ?2",
    [ST_SCHED_DUE] = "SELECT " SCHED_COLS " FROM schedules WHERE enabled = 1 "
                     "AND next_run <= ?1 ORDER BY next_run LIMIT ?2",
    [ST_SCHED_FIRED] = "UPDATE schedules SET last_run = ?3, next_run = ?4 "
                       "WHERE id = ?1 AND enabled = 1 AND next_run = ?2",
};

struct sl_store {
    /* The connection; opened without SQLite's own mutex because `lock` serialises it. */
    sqlite3 *db;
    /* Held by every public function for its whole run. */
    pthread_mutex_t lock;
    /* Prepared on first use, finalised by sl_store_close(). Each is reset after every use. */
    sqlite3_stmt *stmts[ST_COUNT];
    /* The database's path, for log lines. Owned. */
    char *path;
};

static void now_rfc3339(char out[TIMESTAMP_SIZE])
{
    struct timespec ts;
    struct tm tm;

    if (clock_gettime(CLOCK_REALTIME, &ts) == -1 || gmtime_r(&ts.tv_sec, &tm) == NULL
        || strftime(out, TIMESTAMP_SIZE, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        memcpy(out, "1970-01-01T00:00:00Z", sizeof("1970-01-01T00:00:00Z"));
    }
}

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

/* The key that makes (scope, owner) unique: the owner's id for user scope, "" for global. */
static const char *owner_key(enum sl_scope scope, const char *owner_id)
{
    return scope == SL_SCOPE_GLOBAL || owner_id == NULL ? "" : owner_id;
}

/*
 * Turns an SQLite result code into an sl_err. Constraint failures that a caller did not handle
 * itself map by kind; anything unexpected is logged here, with SQLite's message, because only
 * here is that message known.
 */
static int db_error(struct sl_store *st, int rc, const char *what)
{
    switch (rc) {
    case SQLITE_NOMEM:
        return SL_ENOMEM;
    case SQLITE_CONSTRAINT_PRIMARYKEY:
    case SQLITE_CONSTRAINT_UNIQUE:
        return SL_EEXIST;
    case SQLITE_CONSTRAINT_FOREIGNKEY:
        return SL_ENOTFOUND;
    case SQLITE_CONSTRAINT_CHECK:
    case SQLITE_CONSTRAINT_NOTNULL:
    case SQLITE_TOOBIG:
        return SL_EINVAL;
    default:
        break;
    }
    sl_log(SL_LOG_ERROR, 0, "msg=\"database error\" op=%s file=%s code=%d err=\"%s\"", what,
           st->path, rc, sqlite3_errmsg(st->db));
    return SL_EIO;
}

/* Resets a statement after use, so that it holds no read transaction and no bound pointers. */
static void stmt_done(sqlite3_stmt *s)
{
    (void)sqlite3_reset(s);
    (void)sqlite3_clear_bindings(s);
}

static int stmt_get(struct sl_store *st, enum stmt_id id, sqlite3_stmt **out)
{
    int rc;

    if (st->stmts[id] == NULL) {
        rc = sqlite3_prepare_v3(st->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &st->stmts[id],
                                NULL);
        if (rc != SQLITE_OK) {
            st->stmts[id] = NULL;
            return db_error(st, rc, "prepare");
        }
    }
    *out = st->stmts[id];
    return 0;
}

/*
 * Sticky binders: each does nothing once `*acc` holds an error, so a run of binds is checked
 * once at its end. Text is bound SQLITE_STATIC: it must outlive the statement's use, which ends
 * with stmt_done() in the same function. NULL binds SQL NULL.
 */
static void bind_text(sqlite3_stmt *s, int i, const char *v, int *acc)
{
    if (*acc == SQLITE_OK) {
        *acc = v == NULL ? sqlite3_bind_null(s, i) : sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
    }
}

static void bind_int64(sqlite3_stmt *s, int i, int64_t v, int *acc)
{
    if (*acc == SQLITE_OK) {
        *acc = sqlite3_bind_int64(s, i, v);
    }
}

/* Binds -1 ("inherit") as NULL. */
static void bind_optional(sqlite3_stmt *s, int i, int64_t v, int *acc)
{
    if (*acc == SQLITE_OK) {
        *acc = v == -1 ? sqlite3_bind_null(s, i) : sqlite3_bind_int64(s, i, v);
    }
}

static void bind_hash(sqlite3_stmt *s, int i, const uint8_t hash[32], int *acc)
{
    if (*acc == SQLITE_OK) {
        *acc = sqlite3_bind_blob(s, i, hash, 32, SQLITE_STATIC);
    }
}

/* Runs a statement that returns no rows. Returns an SQLite code (SQLITE_DONE on success). */
static int run(sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);

    stmt_done(s);
    return rc;
}

/* Runs a cached statement with no parameters; returns 0 or an sl_err. */
static int run_plain(struct sl_store *st, enum stmt_id id, const char *what)
{
    sqlite3_stmt *s = NULL;
    int rc;

    SL_TRY(stmt_get(st, id, &s));
    rc = run(s);
    if (rc != SQLITE_DONE) {
        return db_error(st, rc, what);
    }
    return 0;
}

static int tx_begin(struct sl_store *st)
{
    return run_plain(st, ST_BEGIN, "begin");
}

static void tx_rollback(struct sl_store *st)
{
    /* A failed COMMIT or an I/O error may have ended the transaction already. */
    if (!sqlite3_get_autocommit(st->db)) {
        (void)run_plain(st, ST_ROLLBACK, "rollback");
    }
}

static int tx_commit(struct sl_store *st)
{
    int rc = run_plain(st, ST_COMMIT, "commit");

    if (rc < 0) {
        tx_rollback(st);
    }
    return rc;
}

/* ---- reading columns ---- */

/* Copies a text column into fixed storage. SQL NULL reads as "". A value that does not fit is
 * a database this code did not write: SL_EIO. */
static const char *col_name(sqlite3_stmt *s, int i)
{
    const char *name = sqlite3_column_name(s, i);

    return name == NULL ? "?" : name;
}

static int col_copy(struct sl_store *st, sqlite3_stmt *s, int i, char *dst, size_t cap)
{
    const unsigned char *t;
    size_t n;

    if (sqlite3_column_type(s, i) == SQLITE_NULL) {
        dst[0] = '\0';
        return 0;
    }
    t = sqlite3_column_text(s, i);
    if (t == NULL) {
        return SL_ENOMEM;
    }
    n = (size_t)sqlite3_column_bytes(s, i);
    if (n >= cap) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"database value too long\" file=%s column=%s", st->path,
               col_name(s, i));
        return SL_EIO;
    }
    memcpy(dst, t, n);
    dst[n] = '\0';
    return 0;
}

/* Copies a text column to the heap; SQL NULL reads as NULL. */
static int col_dup(sqlite3_stmt *s, int i, char **out)
{
    const unsigned char *t;

    *out = NULL;
    if (sqlite3_column_type(s, i) == SQLITE_NULL) {
        return 0;
    }
    t = sqlite3_column_text(s, i);
    if (t == NULL) {
        return SL_ENOMEM;
    }
    *out = sl_strndup((const char *)t, (size_t)sqlite3_column_bytes(s, i));
    return *out == NULL ? SL_ENOMEM : 0;
}

/* As col_dup() for a column that is never NULL; NULL would be a foreign row: SL_EIO. */
static int col_dup_required(struct sl_store *st, sqlite3_stmt *s, int i, char **out)
{
    SL_TRY(col_dup(s, i, out));
    if (*out == NULL) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"database value missing\" file=%s column=%s", st->path,
               col_name(s, i));
        return SL_EIO;
    }
    return 0;
}

static bool col_is(sqlite3_stmt *s, int i, const char *text)
{
    const unsigned char *t = sqlite3_column_text(s, i);

    return t != NULL && strcmp((const char *)t, text) == 0;
}

/*
 * Grows an array of `size`-byte elements to hold one more than `len`. `array` points to the
 * caller's pointer variable (of any object pointer type); it is read and written with memcpy so
 * that no pointer is accessed through an lvalue of another type.
 */
static int grow(void *array, size_t *cap, size_t len, size_t size)
{
    size_t want;
    void *v;
    void *p;

    if (len < *cap) {
        return 0;
    }
    want = *cap == 0 ? 8 : *cap * 2;
    if (want > SIZE_MAX / size) {
        return SL_ENOMEM;
    }
    memcpy(&v, array, sizeof(v));
    p = sl_realloc(v, want * size);
    if (p == NULL) {
        return SL_ENOMEM;
    }
    memcpy(array, &p, sizeof(p));
    *cap = want;
    return 0;
}

/* Reads the current row of a statement into `row` (a typed element of a list); on failure the
 * element holds nothing. */
typedef int read_row_fn(struct sl_store *st, sqlite3_stmt *s, void *row);
/* Frees the first `n` elements of a list and the list. */
typedef void free_rows_fn(void *rows, size_t n);

/* Steps `s` to its end, reading every row with `read` into a new array of `size`-byte elements:
 * *out and *n, freed with `free_rows`, which also frees what was read when a row fails. `what`
 * names the query in errors. The caller finishes `s`. */
static int collect_rows(struct sl_store *st, sqlite3_stmt *s, size_t size, read_row_fn *read,
                        free_rows_fn *free_rows, const char *what, void **out, size_t *n)
{
    uint8_t *v = NULL;
    size_t len = 0;
    size_t cap = 0;
    int rc;

    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        rc = grow(&v, &cap, len, size);
        if (rc == 0) {
            rc = read(st, s, v + len * size);
        }
        if (rc < 0) {
            free_rows(v, len);
            return rc;
        }
        len++;
    }
    if (rc != SQLITE_DONE) {
        free_rows(v, len);
        return db_error(st, rc, what);
    }
    *out = v;
    *n = len;
    return 0;
}

/* ---- users ---- */

/* Reads a user from columns first .. first + 3 (id, name, is_admin, created_at). */
static int read_user(struct sl_store *st, sqlite3_stmt *s, int first, struct sl_user *u)
{
    int rc;

    memset(u, 0, sizeof(*u));
    rc = col_copy(st, s, first, u->id, sizeof(u->id));
    if (rc == 0) {
        rc = col_dup_required(st, s, first + 1, &u->name);
    }
    if (rc == 0) {
        u->is_admin = sqlite3_column_int(s, first + 2) != 0;
        rc = col_copy(st, s, first + 3, u->created_at, sizeof(u->created_at));
    }
    if (rc < 0) {
        sl_user_finish(u);
    }
    return rc;
}

static void lock(struct sl_store *st)
{
    SL_BUG_ON(pthread_mutex_lock(&st->lock) != 0);
}

static void unlock(struct sl_store *st)
{
    SL_BUG_ON(pthread_mutex_unlock(&st->lock) != 0);
}

static int user_create(struct sl_store *st, const char *name, bool is_admin, struct sl_user *out)
{
    struct sl_user u = { 0 };
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_ENSURE(name != NULL && name[0] != '\0', SL_EINVAL);
    SL_TRY(sl_uuid_v4(u.id));
    now_rfc3339(u.created_at);
    u.is_admin = is_admin;
    /* Allocated before the insert, so that a created user is always reported as created. */
    u.name = sl_strdup(name);
    if (u.name == NULL) {
        return SL_ENOMEM;
    }
    rc = stmt_get(st, ST_USER_INSERT, &s);
    if (rc < 0) {
        goto fail;
    }
    bind_text(s, 1, u.id, &acc);
    bind_text(s, 2, u.name, &acc);
    bind_int64(s, 3, is_admin ? 1 : 0, &acc);
    bind_text(s, 4, u.created_at, &acc);
    rc = acc == SQLITE_OK ? run(s) : acc;
    stmt_done(s);
    if (rc != SQLITE_DONE) {
        rc = db_error(st, rc, "user-create");
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

    lock(st);
    rc = user_create(st, name, is_admin, out);
    unlock(st);
    return rc;
}

/* Runs a one-row user query with one text parameter. */
static int user_get(struct sl_store *st, enum stmt_id id, const char *key, struct sl_user *out)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_ENSURE(key != NULL, SL_EINVAL);
    SL_TRY(stmt_get(st, id, &s));
    bind_text(s, 1, key, &acc);
    rc = acc == SQLITE_OK ? sqlite3_step(s) : acc;
    if (rc == SQLITE_ROW) {
        rc = read_user(st, s, 0, out);
    } else if (rc == SQLITE_DONE) {
        rc = SL_ENOTFOUND;
    } else {
        rc = db_error(st, rc, "user-get");
    }
    stmt_done(s);
    return rc;
}

int sl_store_user_get(struct sl_store *st, const char *id, struct sl_user *out)
{
    int rc;

    lock(st);
    rc = user_get(st, ST_USER_BY_ID, id, out);
    unlock(st);
    return rc;
}

int sl_store_user_get_by_name(struct sl_store *st, const char *name, struct sl_user *out)
{
    int rc;

    lock(st);
    rc = user_get(st, ST_USER_BY_NAME, name, out);
    unlock(st);
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

static int read_user_row(struct sl_store *st, sqlite3_stmt *s, void *row)
{
    return read_user(st, s, 0, row);
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

    SL_TRY(stmt_get(st, ST_USER_LIST, &s));
    rc = collect_rows(st, s, sizeof(**out), read_user_row, free_user_rows, "user-list", &v, n);
    stmt_done(s);
    if (rc == 0) {
        *out = v;
    }
    return rc;
}

int sl_store_user_list(struct sl_store *st, struct sl_user **out, size_t *n)
{
    int rc;

    lock(st);
    rc = user_list(st, out, n);
    unlock(st);
    return rc;
}

/* ---- tokens ---- */

static int token_add(struct sl_store *st, const uint8_t hash[32], const char *user_id,
                     enum sl_token_kind kind)
{
    const char *kind_text = token_kind_text(kind);
    char now[TIMESTAMP_SIZE];
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_ENSURE(hash != NULL && user_id != NULL && kind_text != NULL, SL_EINVAL);
    now_rfc3339(now);
    SL_TRY(stmt_get(st, ST_TOKEN_INSERT, &s));
    bind_hash(s, 1, hash, &acc);
    bind_text(s, 2, user_id, &acc);
    bind_text(s, 3, kind_text, &acc);
    bind_text(s, 4, now, &acc);
    rc = acc == SQLITE_OK ? run(s) : acc;
    stmt_done(s);
    return rc == SQLITE_DONE ? 0 : db_error(st, rc, "token-add");
}

int sl_store_token_add(struct sl_store *st, const uint8_t hash[32], const char *user_id,
                       enum sl_token_kind kind)
{
    int rc;

    lock(st);
    rc = token_add(st, hash, user_id, kind);
    unlock(st);
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
    SL_TRY(stmt_get(st, ST_TOKEN_FIND, &s));
    bind_hash(s, 1, hash, &acc);
    rc = acc == SQLITE_OK ? sqlite3_step(s) : acc;
    if (rc == SQLITE_DONE) {
        rc = SL_ENOTFOUND;
        goto done;
    }
    if (rc != SQLITE_ROW) {
        rc = db_error(st, rc, "token-find");
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
        *kind = col_is(s, 1, "sandbox") ? SL_TOKEN_KIND_SANDBOX : SL_TOKEN_KIND_API;
    }
done:
    stmt_done(s);
    return rc;
}

int sl_store_token_find_user(struct sl_store *st, const uint8_t hash[32], struct sl_user *out,
                             enum sl_token_kind *kind)
{
    int rc;

    lock(st);
    rc = token_find_user(st, hash, out, kind);
    unlock(st);
    return rc;
}

/* Runs a DELETE keyed by one parameter; SL_ENOTFOUND when it changed nothing. */
static int delete_one(struct sl_store *st, enum stmt_id id, const char *key, const uint8_t *hash,
                      const char *what)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(stmt_get(st, id, &s));
    if (hash != NULL) {
        bind_hash(s, 1, hash, &acc);
    } else {
        bind_text(s, 1, key, &acc);
    }
    rc = acc == SQLITE_OK ? run(s) : acc;
    stmt_done(s);
    if (rc != SQLITE_DONE) {
        return db_error(st, rc, what);
    }
    return sqlite3_changes(st->db) == 0 ? SL_ENOTFOUND : 0;
}

int sl_store_token_delete(struct sl_store *st, const uint8_t hash[32])
{
    int rc;

    SL_ENSURE(hash != NULL, SL_EINVAL);
    lock(st);
    rc = delete_one(st, ST_TOKEN_DELETE, NULL, hash, "token-delete");
    unlock(st);
    return rc;
}

/* ---- environments ---- */

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

static bool fixed_is_terminated(const char *s, size_t cap)
{
    return memchr(s, '\0', cap) != NULL;
}

/* The rules of store.h on a row about to be written. */
static int check_env_row(const struct sl_env_row *r)
{
    SL_ENSURE(r->name != NULL && r->name[0] != '\0' && r->env_json != NULL, SL_EINVAL);
    SL_ENSURE(fixed_is_terminated(r->id, sizeof(r->id)), SL_EINVAL);
    SL_ENSURE(fixed_is_terminated(r->owner_id, sizeof(r->owner_id)), SL_EINVAL);
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

/* Reads the repositories of `r->id` into `r`. */
static int read_repos(struct sl_store *st, struct sl_env_row *r)
{
    size_t cap = 0;
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(stmt_get(st, ST_REPO_LIST, &s));
    bind_text(s, 1, r->id, &acc);
    if (acc != SQLITE_OK) {
        rc = db_error(st, acc, "repo-list");
        goto done;
    }
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        rc = grow(&r->repos, &cap, r->n_repos, sizeof(*r->repos));
        if (rc == 0) {
            rc = col_dup_required(st, s, 0, &r->repos[r->n_repos]);
        }
        if (rc < 0) {
            goto done;
        }
        r->n_repos++;
    }
    rc = rc == SQLITE_DONE ? 0 : db_error(st, rc, "repo-list");
done:
    stmt_done(s);
    return rc;
}

/* Reads the environment at the current row of `s` (columns ENV_COLS) and its repositories. */
static int read_env(struct sl_store *st, sqlite3_stmt *s, struct sl_env_row *r)
{
    int rc;

    memset(r, 0, sizeof(*r));
    rc = col_copy(st, s, 0, r->id, sizeof(r->id));
    if (rc == 0) {
        rc = col_dup_required(st, s, 1, &r->name);
    }
    if (rc == 0) {
        rc = col_dup_required(st, s, 2, &r->description);
    }
    if (rc == 0) {
        r->scope = col_is(s, 3, "global") ? SL_SCOPE_GLOBAL : SL_SCOPE_USER;
        rc = col_copy(st, s, 4, r->owner_id, sizeof(r->owner_id));
    }
    if (rc == 0) {
        r->is_default = sqlite3_column_int(s, 5) != 0;
        rc = col_dup(s, 6, &r->base_image);
    }
    if (rc == 0) {
        r->cpus_centi = sqlite3_column_type(s, 7) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, 7);
        r->memory_bytes =
                sqlite3_column_type(s, 8) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, 8);
        r->network = col_is(s, 9, "on");
        rc = col_dup_required(st, s, 10, &r->env_json);
    }
    if (rc == 0) {
        rc = col_dup(s, 11, &r->egress_json);
    }
    if (rc == 0) {
        rc = col_copy(st, s, 12, r->created_at, sizeof(r->created_at));
    }
    if (rc == 0) {
        rc = col_copy(st, s, 13, r->updated_at, sizeof(r->updated_at));
    }
    if (rc == 0) {
        rc = read_repos(st, r);
    }
    if (rc < 0) {
        sl_env_row_finish(r);
    }
    return rc;
}

/* Runs a one-row environment query whose parameters `p1`..`p3` are text (NULL ones unbound). */
static int env_get(struct sl_store *st, enum stmt_id id, const char *p1, const char *p2,
                   const char *p3, struct sl_env_row *out)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(stmt_get(st, id, &s));
    if (p1 != NULL) {
        bind_text(s, 1, p1, &acc);
    }
    if (p2 != NULL) {
        bind_text(s, 2, p2, &acc);
    }
    if (p3 != NULL) {
        bind_text(s, 3, p3, &acc);
    }
    rc = acc == SQLITE_OK ? sqlite3_step(s) : acc;
    if (rc == SQLITE_ROW) {
        rc = read_env(st, s, out);
    } else if (rc == SQLITE_DONE) {
        rc = SL_ENOTFOUND;
    } else {
        rc = db_error(st, rc, "env-get");
    }
    stmt_done(s);
    return rc;
}

int sl_store_env_get(struct sl_store *st, const char *id, struct sl_env_row *out)
{
    int rc;

    SL_ENSURE(id != NULL, SL_EINVAL);
    lock(st);
    rc = env_get(st, ST_ENV_BY_ID, id, NULL, NULL, out);
    unlock(st);
    return rc;
}

int sl_store_env_get_by_name(struct sl_store *st, enum sl_scope scope, const char *owner_id,
                             const char *name, struct sl_env_row *out)
{
    const char *scope_name = scope_text(scope);
    int rc;

    SL_ENSURE(scope_name != NULL && name != NULL, SL_EINVAL);
    lock(st);
    rc = env_get(st, ST_ENV_BY_NAME, scope_name, owner_key(scope, owner_id), name, out);
    unlock(st);
    return rc;
}

int sl_store_env_find_by_repo(struct sl_store *st, enum sl_scope scope, const char *owner_id,
                              const char *repo, struct sl_env_row *out)
{
    const char *scope_name = scope_text(scope);
    int rc;

    SL_ENSURE(scope_name != NULL && repo != NULL, SL_EINVAL);
    lock(st);
    rc = env_get(st, ST_ENV_BY_REPO, scope_name, owner_key(scope, owner_id), repo, out);
    unlock(st);
    return rc;
}

int sl_store_env_get_default(struct sl_store *st, struct sl_env_row *out)
{
    int rc;

    lock(st);
    rc = env_get(st, ST_ENV_DEFAULT, NULL, NULL, NULL, out);
    unlock(st);
    return rc;
}

void sl_store_free_envs(struct sl_env_row *v, size_t n)
{
    if (v == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        sl_env_row_finish(&v[i]);
    }
    sl_free(v);
}

static int read_env_row(struct sl_store *st, sqlite3_stmt *s, void *row)
{
    return read_env(st, s, row);
}

static void free_env_rows(void *rows, size_t n)
{
    sl_store_free_envs(rows, n);
}

static int env_list(struct sl_store *st, enum stmt_id id, const char *p1, struct sl_env_row **out,
                    size_t *n)
{
    sqlite3_stmt *s = NULL;
    void *v = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(stmt_get(st, id, &s));
    if (p1 != NULL) {
        bind_text(s, 1, p1, &acc);
    }
    if (acc != SQLITE_OK) {
        rc = db_error(st, acc, "env-list");
    } else {
        rc = collect_rows(st, s, sizeof(**out), read_env_row, free_env_rows, "env-list", &v, n);
    }
    stmt_done(s);
    if (rc == 0) {
        *out = v;
    }
    return rc;
}

int sl_store_env_list_visible(struct sl_store *st, const char *user_id, struct sl_env_row **out,
                              size_t *n)
{
    int rc;

    lock(st);
    /* "" matches no user-scope row: their owner_key is a user id. */
    rc = env_list(st, ST_ENV_LIST_VISIBLE, user_id == NULL ? "" : user_id, out, n);
    unlock(st);
    return rc;
}

int sl_store_env_list_all(struct sl_store *st, struct sl_env_row **out, size_t *n)
{
    int rc;

    lock(st);
    rc = env_list(st, ST_ENV_LIST_ALL, NULL, out, n);
    unlock(st);
    return rc;
}

/* Inside a transaction: refuses the name of `r` when another environment (not `self_id`) of
 * the same scope and owner has it. */
static int check_name_free(struct sl_store *st, const struct sl_env_row *r, const char *self_id,
                           struct sl_store_conflict_info *c)
{
    char holder[SL_UUID_LEN + 1];
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(stmt_get(st, ST_ENV_NAME_HOLDER, &s));
    bind_text(s, 1, scope_text(r->scope), &acc);
    bind_text(s, 2, owner_key(r->scope, r->owner_id), &acc);
    bind_text(s, 3, r->name, &acc);
    bind_text(s, 4, self_id, &acc);
    rc = acc == SQLITE_OK ? sqlite3_step(s) : acc;
    if (rc == SQLITE_ROW) {
        rc = col_copy(st, s, 0, holder, sizeof(holder));
        if (rc == 0) {
            rc = conflict(c, SL_EEXIST, SL_STORE_CONFLICT_NAME, holder, r->name, NULL);
        }
    } else {
        rc = rc == SQLITE_DONE ? 0 : db_error(st, rc, "env-name");
    }
    stmt_done(s);
    return rc;
}

/* Inside a transaction: refuses `repo` when another environment of the same scope and owner
 * binds it, naming that environment. */
static int check_repo_free(struct sl_store *st, const struct sl_env_row *r, const char *self_id,
                           const char *repo, struct sl_store_conflict_info *c)
{
    char holder[SL_UUID_LEN + 1];
    char *holder_name = NULL;
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(stmt_get(st, ST_REPO_HOLDER, &s));
    bind_text(s, 1, scope_text(r->scope), &acc);
    bind_text(s, 2, owner_key(r->scope, r->owner_id), &acc);
    bind_text(s, 3, repo, &acc);
    bind_text(s, 4, self_id, &acc);
    rc = acc == SQLITE_OK ? sqlite3_step(s) : acc;
    if (rc == SQLITE_ROW) {
        rc = col_copy(st, s, 0, holder, sizeof(holder));
        if (rc == 0) {
            rc = col_dup_required(st, s, 1, &holder_name);
        }
        if (rc == 0) {
            rc = conflict(c, SL_EEXIST, SL_STORE_CONFLICT_REPO, holder, holder_name, repo);
        }
        sl_free(holder_name);
    } else {
        rc = rc == SQLITE_DONE ? 0 : db_error(st, rc, "repo-holder");
    }
    stmt_done(s);
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
        SL_TRY(stmt_get(st, ST_REPO_INSERT, &s));
        acc = SQLITE_OK;
        bind_text(s, 1, id, &acc);
        bind_text(s, 2, scope_text(r->scope), &acc);
        bind_text(s, 3, owner_key(r->scope, r->owner_id), &acc);
        bind_text(s, 4, r->repos[i], &acc);
        rc = acc == SQLITE_OK ? run(s) : acc;
        stmt_done(s);
        /* No other environment holds it (checked above): the row lists it twice. */
        if (rc == SQLITE_CONSTRAINT_UNIQUE) {
            return conflict(c, SL_EINVAL, SL_STORE_CONFLICT_REPO_TWICE, NULL, NULL, r->repos[i]);
        }
        if (rc != SQLITE_DONE) {
            return db_error(st, rc, "repo-insert");
        }
    }
    return 0;
}

/* Inside a transaction: INSERT or UPDATE (by `id`) of the environment's own row. */
static int write_env(struct sl_store *st, enum stmt_id id_stmt, const struct sl_env_row *r,
                     const char *id, const char *now)
{
    const char *key = owner_key(r->scope, r->owner_id);
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(stmt_get(st, id_stmt, &s));
    bind_text(s, 1, id, &acc);
    bind_text(s, 2, r->name, &acc);
    bind_text(s, 3, r->description == NULL ? "" : r->description, &acc);
    bind_text(s, 4, scope_text(r->scope), &acc);
    bind_text(s, 5, key[0] == '\0' ? NULL : key, &acc);
    bind_text(s, 6, key, &acc);
    if (id_stmt == ST_ENV_INSERT) {
        bind_int64(s, 7, r->is_default ? 1 : 0, &acc);
    }
    bind_text(s, 8, r->base_image, &acc);
    bind_optional(s, 9, r->cpus_centi, &acc);
    bind_optional(s, 10, r->memory_bytes, &acc);
    bind_text(s, 11, r->network ? "on" : "off", &acc);
    bind_text(s, 12, r->env_json, &acc);
    bind_text(s, 13, r->egress_json, &acc);
    bind_text(s, 14, now, &acc);
    rc = acc == SQLITE_OK ? run(s) : acc;
    stmt_done(s);
    if (rc == SQLITE_DONE) {
        return 0;
    }
    return db_error(st, rc, id_stmt == ST_ENV_INSERT ? "env-insert" : "env-update");
}

/* Inside a transaction: demotes the current default, if any. */
static int demote_default(struct sl_store *st, const char *now)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(stmt_get(st, ST_ENV_DEMOTE, &s));
    bind_text(s, 1, now, &acc);
    rc = acc == SQLITE_OK ? run(s) : acc;
    stmt_done(s);
    return rc == SQLITE_DONE ? 0 : db_error(st, rc, "env-demote");
}

static int env_insert(struct sl_store *st, struct sl_env_row *r, struct sl_store_conflict_info *c)
{
    char id[SL_UUID_LEN + 1];
    char now[TIMESTAMP_SIZE];
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
    now_rfc3339(now);
    SL_TRY(tx_begin(st));
    rc = check_name_free(st, r, id, c);
    if (rc == 0 && r->is_default) {
        rc = demote_default(st, now);
    }
    if (rc == 0) {
        rc = write_env(st, ST_ENV_INSERT, r, id, now);
        if (rc == SL_EEXIST) {
            /* The name is free (checked above), so the id is taken. */
            rc = conflict(c, SL_EEXIST, SL_STORE_CONFLICT_ID, id, NULL, NULL);
        }
    }
    if (rc == 0) {
        rc = write_repos(st, r, id, c);
    }
    if (rc == 0) {
        rc = tx_commit(st);
    } else {
        tx_rollback(st);
    }
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
    int rc;

    sl_store_conflict_finish(conflict_out);
    lock(st);
    rc = env_insert(st, r, conflict_out);
    unlock(st);
    return rc;
}

/* What an existing environment is, read inside a transaction. */
struct env_state {
    bool is_global;
    bool is_default;
    char created_at[TIMESTAMP_SIZE];
};

static int env_state(struct sl_store *st, const char *id, struct env_state *out)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(stmt_get(st, ST_ENV_STATE, &s));
    bind_text(s, 1, id, &acc);
    rc = acc == SQLITE_OK ? sqlite3_step(s) : acc;
    if (rc == SQLITE_ROW) {
        out->is_global = col_is(s, 0, "global");
        out->is_default = sqlite3_column_int(s, 1) != 0;
        rc = col_copy(st, s, 2, out->created_at, sizeof(out->created_at));
    } else {
        rc = rc == SQLITE_DONE ? SL_ENOTFOUND : db_error(st, rc, "env-state");
    }
    stmt_done(s);
    return rc;
}

static int env_replace(struct sl_store *st, struct sl_env_row *r, struct sl_store_conflict_info *c)
{
    struct env_state was;
    char now[TIMESTAMP_SIZE];
    int rc;

    SL_TRY(check_env_row(r));
    SL_ENSURE(r->id[0] != '\0', SL_EINVAL);
    now_rfc3339(now);
    SL_TRY(tx_begin(st));
    rc = env_state(st, r->id, &was);
    if (rc == 0 && was.is_default && r->scope != SL_SCOPE_GLOBAL) {
        rc = conflict(c, SL_EINVAL, SL_STORE_CONFLICT_IS_DEFAULT, NULL, NULL, NULL);
    }
    if (rc == 0) {
        rc = check_name_free(st, r, r->id, c);
    }
    if (rc == 0) {
        rc = write_env(st, ST_ENV_UPDATE, r, r->id, now);
    }
    if (rc == 0) {
        rc = delete_one(st, ST_REPO_DELETE, r->id, NULL, "repo-delete");
        /* An environment without repositories deletes nothing. */
        rc = rc == SL_ENOTFOUND ? 0 : rc;
    }
    if (rc == 0) {
        rc = write_repos(st, r, r->id, c);
    }
    if (rc == 0) {
        rc = tx_commit(st);
    } else {
        tx_rollback(st);
    }
    if (rc == 0) {
        r->is_default = was.is_default;
        memcpy(r->created_at, was.created_at, sizeof(r->created_at));
        memcpy(r->updated_at, now, sizeof(r->updated_at));
    }
    return rc;
}

int sl_store_env_replace(struct sl_store *st, struct sl_env_row *r,
                         struct sl_store_conflict_info *conflict_out)
{
    int rc;

    sl_store_conflict_finish(conflict_out);
    lock(st);
    rc = env_replace(st, r, conflict_out);
    unlock(st);
    return rc;
}

static int env_delete(struct sl_store *st, const char *id, struct sl_store_conflict_info *c)
{
    struct env_state was;
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(tx_begin(st));
    rc = env_state(st, id, &was);
    if (rc == 0 && was.is_default) {
        rc = conflict(c, SL_EINVAL, SL_STORE_CONFLICT_IS_DEFAULT, NULL, NULL, NULL);
    }
    if (rc == 0) {
        rc = stmt_get(st, ST_ENV_DELETE, &s);
    }
    if (rc == 0) {
        /* env_repos rows go by ON DELETE CASCADE; clients are ON DELETE RESTRICT. */
        bind_text(s, 1, id, &acc);
        rc = acc == SQLITE_OK ? run(s) : acc;
        stmt_done(s);
        /* The one constraint deleting an environment can break is the clients' reference.
         * SQLite reports ON DELETE RESTRICT through a trigger (SQLITE_CONSTRAINT_TRIGGER), so
         * the primary code is what is compared. */
        if ((rc & 0xff) == SQLITE_CONSTRAINT) {
            rc = conflict(c, SL_EINVAL, SL_STORE_CONFLICT_IN_USE, NULL, NULL, NULL);
        } else {
            rc = rc == SQLITE_DONE ? 0 : db_error(st, rc, "env-delete");
        }
    }
    if (rc == 0) {
        rc = tx_commit(st);
    } else {
        tx_rollback(st);
    }
    return rc;
}

int sl_store_env_delete(struct sl_store *st, const char *id,
                        struct sl_store_conflict_info *conflict_out)
{
    int rc;

    SL_ENSURE(id != NULL, SL_EINVAL);
    sl_store_conflict_finish(conflict_out);
    lock(st);
    rc = env_delete(st, id, conflict_out);
    unlock(st);
    return rc;
}

static int env_set_default(struct sl_store *st, const char *id, struct sl_store_conflict_info *c)
{
    struct env_state was;
    char now[TIMESTAMP_SIZE];
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    now_rfc3339(now);
    SL_TRY(tx_begin(st));
    rc = env_state(st, id, &was);
    if (rc == 0 && !was.is_global) {
        rc = conflict(c, SL_EINVAL, SL_STORE_CONFLICT_NOT_GLOBAL, NULL, NULL, NULL);
    }
    if (rc == 0 && !was.is_default) {
        rc = demote_default(st, now);
        if (rc == 0) {
            rc = stmt_get(st, ST_ENV_PROMOTE, &s);
        }
        if (rc == 0) {
            bind_text(s, 1, id, &acc);
            bind_text(s, 2, now, &acc);
            rc = acc == SQLITE_OK ? run(s) : acc;
            stmt_done(s);
            rc = rc == SQLITE_DONE ? 0 : db_error(st, rc, "env-promote");
        }
    }
    if (rc == 0) {
        rc = tx_commit(st);
    } else {
        tx_rollback(st);
    }
    return rc;
}

int sl_store_env_set_default(struct sl_store *st, const char *id,
                             struct sl_store_conflict_info *conflict_out)
{
    int rc;

    SL_ENSURE(id != NULL, SL_EINVAL);
    sl_store_conflict_finish(conflict_out);
    lock(st);
    rc = env_set_default(st, id, conflict_out);
    unlock(st);
    return rc;
}

/* ---- static clients ---- */

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
    char now[TIMESTAMP_SIZE];
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_ENSURE(c->id != NULL && c->id[0] != '\0', SL_EINVAL);
    SL_ENSURE(fixed_is_terminated(c->env_id, sizeof(c->env_id)), SL_EINVAL);
    SL_ENSURE(c->ip != NULL || c->cidr != NULL || c->token_sealed != NULL, SL_EINVAL);
    now_rfc3339(now);
    SL_TRY(stmt_get(st, ST_CLIENT_INSERT, &s));
    bind_text(s, 1, c->id, &acc);
    bind_text(s, 2, c->env_id, &acc);
    bind_text(s, 3, c->ip, &acc);
    bind_text(s, 4, c->cidr, &acc);
    bind_text(s, 5, c->token_sealed, &acc);
    bind_text(s, 6, now, &acc);
    rc = acc == SQLITE_OK ? run(s) : acc;
    stmt_done(s);
    if (rc != SQLITE_DONE) {
        return db_error(st, rc, "client-create");
    }
    memcpy(c->created_at, now, sizeof(c->created_at));
    return 0;
}

int sl_store_client_create(struct sl_store *st, struct sl_store_client *c)
{
    int rc;

    lock(st);
    rc = client_create(st, c);
    unlock(st);
    return rc;
}

static int read_client(struct sl_store *st, sqlite3_stmt *s, struct sl_store_client *c)
{
    int rc;

    memset(c, 0, sizeof(*c));
    rc = col_dup_required(st, s, 0, &c->id);
    if (rc == 0) {
        rc = col_copy(st, s, 1, c->env_id, sizeof(c->env_id));
    }
    if (rc == 0) {
        rc = col_dup_required(st, s, 2, &c->env_name);
    }
    if (rc == 0) {
        rc = col_dup(s, 3, &c->ip);
    }
    if (rc == 0) {
        rc = col_dup(s, 4, &c->cidr);
    }
    if (rc == 0) {
        rc = col_dup(s, 5, &c->token_sealed);
    }
    if (rc == 0) {
        rc = col_copy(st, s, 6, c->created_at, sizeof(c->created_at));
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

    SL_TRY(stmt_get(st, ST_CLIENT_LIST, &s));
    rc = collect_rows(st, s, sizeof(**out), read_client_row, free_client_rows, "client-list", &v,
                      n);
    stmt_done(s);
    if (rc == 0) {
        *out = v;
    }
    return rc;
}

int sl_store_client_list(struct sl_store *st, struct sl_store_client **out, size_t *n)
{
    int rc;

    lock(st);
    rc = client_list(st, out, n);
    unlock(st);
    return rc;
}

int sl_store_client_delete(struct sl_store *st, const char *id)
{
    int rc;

    SL_ENSURE(id != NULL, SL_EINVAL);
    lock(st);
    rc = delete_one(st, ST_CLIENT_DELETE, id, NULL, "client-delete");
    unlock(st);
    return rc;
}

/* ---- meta ---- */

static int next_snapshot_version(struct sl_store *st, int64_t *out)
{
    sqlite3_stmt *s = NULL;
    int64_t v = 0;
    int rc;

    SL_TRY(tx_begin(st));
    rc = stmt_get(st, ST_SNAPSHOT_NEXT, &s);
    if (rc == 0) {
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            v = sqlite3_column_int64(s, 0);
            rc = sqlite3_step(s);
        }
        stmt_done(s);
        if (rc == SQLITE_DONE && v <= 0) {
            sl_log(SL_LOG_ERROR, 0, "msg=\"database has no snapshot version\" file=%s", st->path);
            rc = SL_EIO;
        } else {
            rc = rc == SQLITE_DONE ? 0 : db_error(st, rc, "snapshot-version");
        }
    }
    if (rc == 0) {
        rc = tx_commit(st);
    } else {
        tx_rollback(st);
    }
    if (rc == 0) {
        *out = v;
    }
    return rc;
}

int sl_store_next_snapshot_version(struct sl_store *st, int64_t *out)
{
    int rc;

    lock(st);
    rc = next_snapshot_version(st, out);
    unlock(st);
    return rc;
}

/* ---- opening ---- */

/*
 * Looks at the file before SQLite does: creates it (empty, 0600) when missing, and refuses one
 * that does not start with the SQLite header. SQLite would open such a file lazily and the
 * first write could damage it; this way nothing is ever written to a file that is not ours.
 */
static int check_file(const char *path, char *err, size_t errlen)
{
    static const char magic[16] = "SQLite format 3";
    char head[sizeof(magic)];
    struct stat stbuf;
    ssize_t got;
    int fd;
    int rc = 0;

    fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOCTTY, S_IRUSR | S_IWUSR);
    if (fd == -1) {
        sl_errf(err, errlen, "cannot open %s: %s", path, sl_strerror(-errno));
        return SL_EIO;
    }
    if (fstat(fd, &stbuf) == -1) {
        sl_errf(err, errlen, "cannot stat %s: %s", path, sl_strerror(-errno));
        rc = SL_EIO;
    } else if (!S_ISREG(stbuf.st_mode)) {
        sl_errf(err, errlen, "%s is not a regular file", path);
        rc = SL_EINVAL;
    } else if (stbuf.st_size > 0) {
        do {
            got = pread(fd, head, sizeof(head), 0);
        } while (got == -1 && errno == EINTR);
        if (got == -1) {
            sl_errf(err, errlen, "cannot read %s: %s", path, sl_strerror(-errno));
            rc = SL_EIO;
        } else if ((size_t)got != sizeof(head) || memcmp(head, magic, sizeof(magic)) != 0) {
            sl_errf(err, errlen,
                    "%s is not a sluice database (not an SQLite file); refusing to use it", path);
            rc = SL_EINVAL;
        }
    }
    (void)close(fd);
    return rc;
}

/* Steps a one-off statement to its first row; SQLITE_ROW, SQLITE_DONE or an error code. */
static int query_first(sqlite3 *db, const char *sql, sqlite3_stmt **out)
{
    int rc = sqlite3_prepare_v2(db, sql, -1, out, NULL);

    if (rc != SQLITE_OK) {
        *out = NULL;
        return rc;
    }
    return sqlite3_step(*out);
}

/*
 * Reads the schema version without writing anything: 0 for an empty database, the stored
 * version for a sluice database. Refuses a foreign database (tables but no schema_version), a
 * corrupt one and a newer one.
 */
static int read_version(struct sl_store *st, int *version, char *err, size_t errlen)
{
    sqlite3_stmt *s = NULL;
    bool has_version = false;
    int objects = 0;
    int rc;

    /* Every object counts (a database of views alone is not empty), SQLite's own excepted. */
    rc = query_first(st->db,
                     "SELECT name, type FROM sqlite_schema WHERE substr(name, 1, 7) <> 'sqlite_'",
                     &s);
    while (rc == SQLITE_ROW) {
        objects++;
        has_version = has_version || (col_is(s, 0, "schema_version") && col_is(s, 1, "table"));
        rc = sqlite3_step(s);
    }
    (void)sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        sl_errf(err, errlen, "%s is not a sluice database or is corrupt (%s); refusing to use it",
                st->path, sqlite3_errstr(rc));
        return rc == SQLITE_NOMEM ? SL_ENOMEM : SL_EINVAL;
    }
    if (objects == 0) {
        *version = 0;
        return 0;
    }
    if (!has_version) {
        sl_errf(err, errlen,
                "%s is not a sluice database (it has %d schema objects and no schema_version); "
                "refusing to use it",
                st->path, objects);
        return SL_EINVAL;
    }
    rc = query_first(st->db, "SELECT version, typeof(version) FROM schema_version", &s);
    if (rc == SQLITE_ROW && col_is(s, 1, "integer")) {
        *version = sqlite3_column_int(s, 0);
        rc = sqlite3_step(s) == SQLITE_DONE && *version >= 1 ? 0 : SL_EINVAL;
    } else {
        rc = SL_EINVAL;
    }
    (void)sqlite3_finalize(s);
    if (rc < 0) {
        sl_errf(err, errlen, "%s is corrupt: its schema_version table holds no version", st->path);
        return rc;
    }
    if (*version > SL_STORE_SCHEMA_VERSION) {
        sl_errf(err, errlen, "%s has schema version %d; this sluice knows %d: upgrade sluice",
                st->path, *version, SL_STORE_SCHEMA_VERSION);
        return SL_EINVAL;
    }
    return 0;
}

/* PRAGMA quick_check: the whole file is read, so a damaged page is found now rather than in
 * the middle of a request. The database is small; this takes milliseconds. */
static int check_integrity(struct sl_store *st, char *err, size_t errlen)
{
    sqlite3_stmt *s = NULL;
    int rc = query_first(st->db, "PRAGMA quick_check", &s);

    if (rc == SQLITE_ROW && col_is(s, 0, "ok")) {
        rc = 0;
    } else if (rc == SQLITE_ROW) {
        sl_errf(err, errlen, "%s is corrupt (%s); refusing to use it", st->path,
                (const char *)sqlite3_column_text(s, 0));
        rc = SL_EINVAL;
    } else {
        sl_errf(err, errlen, "%s is corrupt (%s); refusing to use it", st->path,
                sqlite3_errstr(rc));
        rc = rc == SQLITE_NOMEM ? SL_ENOMEM : SL_EINVAL;
    }
    (void)sqlite3_finalize(s);
    return rc;
}

/*
 * Sets the connection's pragmas; journal_mode is the first write the file may see. Leaving
 * rollback mode needs an exclusive lock, and when two connections that each hold a shared lock
 * want it (two first opens of a new file), SQLite answers SQLITE_BUSY at once instead of calling
 * the busy handler, since waiting could deadlock. So the switch is retried here, for as long as
 * the busy timeout.
 */
static int set_pragmas(struct sl_store *st, char *err, size_t errlen)
{
    const struct timespec pause = { 0, RETRY_PAUSE_MS * 1000000L };
    sqlite3_stmt *s = NULL;
    bool wal = false;
    int rc;

    for (int waited_ms = 0;; waited_ms += RETRY_PAUSE_MS) {
        rc = query_first(st->db, "PRAGMA journal_mode = WAL", &s);
        wal = rc == SQLITE_ROW && col_is(s, 0, "wal");
        (void)sqlite3_finalize(s);
        s = NULL;
        if (wal || (rc & 0xff) != SQLITE_BUSY || waited_ms >= BUSY_TIMEOUT_MS) {
            break;
        }
        (void)nanosleep(&pause, NULL);
    }
    if (!wal) {
        sl_errf(err, errlen, "cannot switch %s to WAL mode: %s", st->path, sqlite3_errmsg(st->db));
        return SL_EIO;
    }
    rc = sqlite3_exec(st->db, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        sl_errf(err, errlen, "cannot configure %s: %s", st->path, sqlite3_errmsg(st->db));
        return SL_EIO;
    }
    return 0;
}

/* Brings the schema to SL_STORE_SCHEMA_VERSION in one transaction. The version is read again
 * under the write lock, because another process may have upgraded it meanwhile. */
static int migrate(struct sl_store *st, char *err, size_t errlen)
{
    sqlite3_stmt *s = NULL;
    int version;
    int rc;

    rc = sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        sl_errf(err, errlen, "cannot lock %s: %s", st->path, sqlite3_errmsg(st->db));
        return SL_EIO;
    }
    rc = read_version(st, &version, err, errlen);
    if (rc < 0) {
        goto fail;
    }
    for (int v = version; v < SL_STORE_SCHEMA_VERSION; v++) {
        if (sqlite3_exec(st->db, migrations[v], NULL, NULL, NULL) != SQLITE_OK) {
            sl_errf(err, errlen, "cannot upgrade %s to schema version %d: %s", st->path, v + 1,
                    sqlite3_errmsg(st->db));
            rc = SL_EIO;
            goto fail;
        }
    }
    if (version < SL_STORE_SCHEMA_VERSION) {
        rc = sqlite3_prepare_v2(st->db, "UPDATE schema_version SET version = ?1", -1, &s, NULL);
        if (rc == SQLITE_OK) {
            rc = sqlite3_bind_int(s, 1, SL_STORE_SCHEMA_VERSION);
        }
        if (rc == SQLITE_OK) {
            rc = sqlite3_step(s);
        }
        (void)sqlite3_finalize(s);
        if (rc != SQLITE_DONE) {
            sl_errf(err, errlen, "cannot record the schema version of %s: %s", st->path,
                    sqlite3_errmsg(st->db));
            rc = SL_EIO;
            goto fail;
        }
    }
    if (sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        sl_errf(err, errlen, "cannot upgrade %s: %s", st->path, sqlite3_errmsg(st->db));
        rc = SL_EIO;
        goto fail;
    }
    return 0;

fail:
    if (!sqlite3_get_autocommit(st->db)) {
        (void)sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    }
    return rc;
}

/* Opens the connection and readies the schema: the steps of sl_store_open() after the file
 * check, in the order that never writes to a file that is not a sluice database. */
static int open_db(struct sl_store *st, char *err, size_t errlen)
{
    int version;
    int rc;

    rc = sqlite3_open_v2(st->path, &st->db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE, NULL);
    if (rc != SQLITE_OK) {
        sl_errf(err, errlen, "cannot open %s: %s", st->path,
                st->db != NULL ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
        return rc == SQLITE_NOMEM ? SL_ENOMEM : SL_EIO;
    }
    (void)sqlite3_extended_result_codes(st->db, 1);
    (void)sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS);
    SL_TRY(read_version(st, &version, err, errlen));
    if (version > 0) {
        SL_TRY(check_integrity(st, err, errlen));
    }
    SL_TRY(set_pragmas(st, err, errlen));
    return migrate(st, err, errlen);
}

int sl_store_open(const char *path, struct sl_store **out, char *err, size_t errlen)
{
    struct sl_store *st;
    int rc;

    SL_TRY(check_file(path, err, errlen));
    st = sl_calloc(1, sizeof(*st));
    if (st == NULL) {
        sl_errf(err, errlen, "cannot open %s: out of memory", path);
        return SL_ENOMEM;
    }
    st->path = sl_strdup(path);
    if (st->path == NULL) {
        sl_errf(err, errlen, "cannot open %s: out of memory", path);
        rc = SL_ENOMEM;
        goto fail_free;
    }
    if (pthread_mutex_init(&st->lock, NULL) != 0) {
        sl_errf(err, errlen, "cannot open %s: no mutex", path);
        rc = SL_ENOMEM;
        goto fail_free;
    }
    rc = open_db(st, err, errlen);
    if (rc < 0) {
        goto fail_close;
    }
    *out = st;
    return 0;

fail_close:
    /* sqlite3_close_v2 also frees a handle whose open failed. */
    (void)sqlite3_close_v2(st->db);
    (void)pthread_mutex_destroy(&st->lock);
fail_free:
    sl_free(st->path);
    sl_free(st);
    return rc;
}

void sl_store_close(struct sl_store *st)
{
    if (st == NULL) {
        return;
    }
    for (size_t i = 0; i < ST_COUNT; i++) {
        (void)sqlite3_finalize(st->stmts[i]);
    }
    if (sqlite3_close(st->db) != SQLITE_OK) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"database did not close cleanly\" file=%s err=\"%s\"",
               st->path, sqlite3_errmsg(st->db));
    }
    (void)pthread_mutex_destroy(&st->lock);
    sl_free(st->path);
    sl_free(st);
}

/* ---- jobs and schedules ---- */

/* RFC 3339 UTC with milliseconds: 2026-11-30T01:02:03.456Z. */
static void now_rfc3339_ms(char out[TIMESTAMP_SIZE])
{
    struct timespec ts;
    struct tm tm;
    unsigned ms;
    size_t n;

    if (clock_gettime(CLOCK_REALTIME, &ts) == -1 || gmtime_r(&ts.tv_sec, &tm) == NULL
        || (n = strftime(out, TIMESTAMP_SIZE - 6, "%Y-%m-%dT%H:%M:%S", &tm)) == 0) {
        memcpy(out, "1970-01-01T00:00:00.000Z", sizeof("1970-01-01T00:00:00.000Z"));
        return;
    }
    ms = (unsigned)(ts.tv_nsec / 1000000L) % 1000u;
    out[n++] = '.';
    out[n++] = (char)('0' + ms / 100);
    out[n++] = (char)('0' + ms / 10 % 10);
    out[n++] = (char)('0' + ms % 10);
    out[n++] = 'Z';
    out[n] = '\0';
}

void sl_store_job_finish(struct sl_store_job *j)
{
    if (j == NULL) {
        return;
    }
    sl_free(j->repo);
    sl_free(j->ref);
    sl_free(j->command);
    sl_free(j->env_key);
    sl_free(j->env_json);
    sl_free(j->sandbox_id);
    sl_free(j->result_json);
    sl_free(j->error);
    memset(j, 0, sizeof(*j));
}

void sl_store_free_jobs(struct sl_store_job *v, size_t n)
{
    for (size_t i = 0; v != NULL && i < n; i++) {
        sl_store_job_finish(&v[i]);
    }
    sl_free(v);
}

static int read_job(struct sl_store *st, sqlite3_stmt *s, struct sl_store_job *j)
{
    int rc;

    memset(j, 0, sizeof(*j));
    rc = col_copy(st, s, 0, j->id, sizeof(j->id));
    if (rc == 0) {
        rc = col_copy(st, s, 1, j->owner_id, sizeof(j->owner_id));
    }
    if (rc == 0) {
        rc = col_copy(st, s, 2, j->schedule_id, sizeof(j->schedule_id));
    }
    if (rc == 0) {
        rc = col_dup_required(st, s, 3, &j->repo);
    }
    if (rc == 0) {
        rc = col_dup(s, 4, &j->ref);
    }
    if (rc == 0) {
        rc = col_dup_required(st, s, 5, &j->command);
    }
    if (rc == 0) {
        rc = col_dup(s, 6, &j->env_key);
    }
    if (rc == 0) {
        j->timeout_ms = sqlite3_column_int64(s, 7);
        rc = col_copy(st, s, 8, j->status, sizeof(j->status));
    }
    if (rc == 0) {
        rc = col_dup(s, 9, &j->env_json);
    }
    if (rc == 0) {
        rc = col_dup(s, 10, &j->sandbox_id);
    }
    if (rc == 0) {
        rc = col_dup(s, 11, &j->result_json);
    }
    if (rc == 0) {
        rc = col_dup(s, 12, &j->error);
    }
    if (rc == 0) {
        rc = col_copy(st, s, 13, j->created_at, sizeof(j->created_at));
    }
    if (rc == 0) {
        rc = col_copy(st, s, 14, j->started_at, sizeof(j->started_at));
    }
    if (rc == 0) {
        rc = col_copy(st, s, 15, j->finished_at, sizeof(j->finished_at));
    }
    if (rc < 0) {
        sl_store_job_finish(j);
    }
    return rc;
}

/* Reads every row of a bound statement into a new array of jobs. */
static int read_job_row(struct sl_store *st, sqlite3_stmt *s, void *row)
{
    return read_job(st, s, row);
}

static void free_job_rows(void *rows, size_t n)
{
    sl_store_free_jobs(rows, n);
}

static int read_jobs(struct sl_store *st, sqlite3_stmt *s, struct sl_store_job **out, size_t *n)
{
    void *v = NULL;
    int rc = collect_rows(st, s, sizeof(**out), read_job_row, free_job_rows, "job-list", &v, n);

    stmt_done(s);
    if (rc == 0) {
        *out = v;
    }
    return rc;
}

/* Inserts the jobs inside the caller's transaction. */
static int insert_jobs(struct sl_store *st, struct sl_store_job *v, size_t n)
{
    sqlite3_stmt *s = NULL;

    SL_TRY(stmt_get(st, ST_JOB_INSERT, &s));
    for (size_t i = 0; i < n; i++) {
        struct sl_store_job *j = &v[i];
        int acc = SQLITE_OK;
        int rc;

        SL_ENSURE(j->repo != NULL && j->command != NULL, SL_EINVAL);
        SL_TRY(sl_uuid_v4(j->id));
        now_rfc3339_ms(j->created_at);
        (void)snprintf(j->status, sizeof(j->status), "queued");
        bind_text(s, 1, j->id, &acc);
        bind_text(s, 2, j->owner_id, &acc);
        bind_text(s, 3, j->schedule_id[0] != '\0' ? j->schedule_id : NULL, &acc);
        bind_text(s, 4, j->repo, &acc);
        bind_text(s, 5, j->ref, &acc);
        bind_text(s, 6, j->command, &acc);
        bind_text(s, 7, j->env_key, &acc);
        bind_int64(s, 8, j->timeout_ms, &acc);
        bind_text(s, 9, j->created_at, &acc);
        rc = acc == SQLITE_OK ? run(s) : acc;
        stmt_done(s);
        if (rc != SQLITE_DONE) {
            return db_error(st, rc, "job-insert");
        }
    }
    return 0;
}

int sl_store_jobs_insert(struct sl_store *st, struct sl_store_job *v, size_t n)
{
    int rc;

    lock(st);
    rc = tx_begin(st);
    if (rc == 0) {
        rc = insert_jobs(st, v, n);
        if (rc == 0) {
            rc = tx_commit(st);
        } else {
            tx_rollback(st);
        }
    }
    unlock(st);
    return rc;
}

static int job_get(struct sl_store *st, const char *id, struct sl_store_job *out)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(stmt_get(st, ST_JOB_GET, &s));
    bind_text(s, 1, id, &acc);
    rc = acc == SQLITE_OK ? sqlite3_step(s) : acc;
    if (rc == SQLITE_ROW) {
        rc = read_job(st, s, out);
    } else {
        rc = rc == SQLITE_DONE ? SL_ENOTFOUND : db_error(st, rc, "job-get");
    }
    stmt_done(s);
    return rc;
}

int sl_store_job_get(struct sl_store *st, const char *id, struct sl_store_job *out)
{
    int rc;

    lock(st);
    rc = job_get(st, id, out);
    unlock(st);
    return rc;
}

int sl_store_job_list(struct sl_store *st, const char *owner_id, const char *status,
                      const char *schedule_id, size_t limit, struct sl_store_job **out, size_t *n)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    lock(st);
    rc = stmt_get(st, ST_JOB_LIST, &s);
    if (rc == 0) {
        bind_text(s, 1, owner_id, &acc);
        bind_text(s, 2, status, &acc);
        bind_text(s, 3, schedule_id, &acc);
        bind_int64(s, 4, (int64_t)limit, &acc);
        rc = acc == SQLITE_OK ? read_jobs(st, s, out, n) : db_error(st, acc, "job-list");
        stmt_done(s);
    }
    unlock(st);
    return rc;
}

static int job_claim(struct sl_store *st, struct sl_store_job *out)
{
    sqlite3_stmt *s = NULL;
    struct sl_store_job j;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(stmt_get(st, ST_JOB_NEXT, &s));
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        rc = read_job(st, s, &j);
    } else {
        rc = rc == SQLITE_DONE ? SL_ENOTFOUND : db_error(st, rc, "job-next");
    }
    stmt_done(s);
    SL_TRY(rc);
    now_rfc3339_ms(j.started_at);
    (void)snprintf(j.status, sizeof(j.status), "running");
    rc = stmt_get(st, ST_JOB_START, &s);
    if (rc == 0) {
        bind_text(s, 1, j.id, &acc);
        bind_text(s, 2, j.started_at, &acc);
        rc = acc == SQLITE_OK ? run(s) : acc;
        stmt_done(s);
        rc = rc == SQLITE_DONE ? 0 : db_error(st, rc, "job-start");
    }
    if (rc < 0) {
        sl_store_job_finish(&j);
        return rc;
    }
    *out = j;
    return 0;
}

int sl_store_job_claim(struct sl_store *st, struct sl_store_job *out)
{
    int rc;

    lock(st);
    rc = tx_begin(st);
    if (rc == 0) {
        rc = job_claim(st, out);
        if (rc == 0) {
            rc = tx_commit(st);
            if (rc < 0) {
                sl_store_job_finish(out);
            }
        } else {
            tx_rollback(st);
        }
    }
    unlock(st);
    return rc;
}

int sl_store_job_set_run(struct sl_store *st, const char *id, const char *env_json,
                         const char *sandbox_id)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    lock(st);
    rc = stmt_get(st, ST_JOB_SET_RUN, &s);
    if (rc == 0) {
        bind_text(s, 1, id, &acc);
        bind_text(s, 2, env_json, &acc);
        bind_text(s, 3, sandbox_id, &acc);
        rc = acc == SQLITE_OK ? run(s) : acc;
        stmt_done(s);
        rc = rc == SQLITE_DONE ? 0 : db_error(st, rc, "job-set-run");
    }
    unlock(st);
    return rc;
}

int sl_store_job_end(struct sl_store *st, const char *id, const char *status,
                     const char *result_json, const char *error, const char *env_json,
                     const char *sandbox_id)
{
    char now[TIMESTAMP_SIZE];
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    now_rfc3339_ms(now);
    lock(st);
    rc = stmt_get(st, ST_JOB_FINISH, &s);
    if (rc == 0) {
        bind_text(s, 1, id, &acc);
        bind_text(s, 2, status, &acc);
        bind_text(s, 3, result_json, &acc);
        bind_text(s, 4, error, &acc);
        bind_text(s, 5, now, &acc);
        bind_text(s, 6, env_json, &acc);
        bind_text(s, 7, sandbox_id, &acc);
        rc = acc == SQLITE_OK ? run(s) : acc;
        stmt_done(s);
        if (rc == SQLITE_DONE) {
            rc = sqlite3_changes(st->db) == 1 ? 0 : SL_ENOTFOUND;
        } else {
            rc = db_error(st, rc, "job-end");
        }
    }
    unlock(st);
    return rc;
}

int sl_store_jobs_abandon(struct sl_store *st, const char *reason, size_t *n)
{
    char now[TIMESTAMP_SIZE];
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    now_rfc3339_ms(now);
    *n = 0;
    lock(st);
    rc = stmt_get(st, ST_JOB_ABANDON, &s);
    if (rc == 0) {
        bind_text(s, 1, reason, &acc);
        bind_text(s, 2, now, &acc);
        rc = acc == SQLITE_OK ? run(s) : acc;
        stmt_done(s);
        if (rc == SQLITE_DONE) {
            *n = (size_t)sqlite3_changes(st->db);
            rc = 0;
        } else {
            rc = db_error(st, rc, "job-abandon");
        }
    }
    unlock(st);
    return rc;
}

void sl_store_schedule_finish(struct sl_store_schedule *s)
{
    if (s == NULL) {
        return;
    }
    sl_free(s->name);
    sl_free(s->cron);
    sl_free(s->repos_json);
    sl_free(s->command);
    sl_free(s->env_key);
    memset(s, 0, sizeof(*s));
}

void sl_store_free_schedules(struct sl_store_schedule *v, size_t n)
{
    for (size_t i = 0; v != NULL && i < n; i++) {
        sl_store_schedule_finish(&v[i]);
    }
    sl_free(v);
}

static int64_t col_int_or(sqlite3_stmt *s, int i, int64_t none)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? none : sqlite3_column_int64(s, i);
}

static int read_schedule(struct sl_store *st, sqlite3_stmt *s, struct sl_store_schedule *out)
{
    int rc;

    memset(out, 0, sizeof(*out));
    rc = col_copy(st, s, 0, out->id, sizeof(out->id));
    if (rc == 0) {
        rc = col_copy(st, s, 1, out->owner_id, sizeof(out->owner_id));
    }
    if (rc == 0) {
        rc = col_dup_required(st, s, 2, &out->name);
    }
    if (rc == 0) {
        rc = col_dup_required(st, s, 3, &out->cron);
    }
    if (rc == 0) {
        rc = col_dup_required(st, s, 4, &out->repos_json);
    }
    if (rc == 0) {
        rc = col_dup_required(st, s, 5, &out->command);
    }
    if (rc == 0) {
        rc = col_dup(s, 6, &out->env_key);
    }
    if (rc == 0) {
        out->timeout_ms = sqlite3_column_int64(s, 7);
        out->enabled = sqlite3_column_int(s, 8) != 0;
        out->next_run = col_int_or(s, 9, -1);
        out->last_run = col_int_or(s, 10, -1);
        rc = col_copy(st, s, 11, out->created_at, sizeof(out->created_at));
    }
    if (rc == 0) {
        rc = col_copy(st, s, 12, out->updated_at, sizeof(out->updated_at));
    }
    if (rc < 0) {
        sl_store_schedule_finish(out);
    }
    return rc;
}

static int read_schedule_row(struct sl_store *st, sqlite3_stmt *s, void *row)
{
    return read_schedule(st, s, row);
}

static void free_schedule_rows(void *rows, size_t n)
{
    sl_store_free_schedules(rows, n);
}

static int read_schedules(struct sl_store *st, sqlite3_stmt *s, struct sl_store_schedule **out,
                          size_t *n)
{
    void *v = NULL;
    int rc = collect_rows(st, s, sizeof(**out), read_schedule_row, free_schedule_rows,
                          "schedule-list", &v, n);

    if (rc == 0) {
        *out = v;
    }
    return rc;
}

/* Binds parameters 3..10 of ST_SCHED_INSERT/UPDATE and the time as 11. */
static void bind_schedule(sqlite3_stmt *s, const struct sl_store_schedule *sc, int *acc)
{
    bind_text(s, 3, sc->name, acc);
    bind_text(s, 4, sc->cron, acc);
    bind_text(s, 5, sc->repos_json, acc);
    bind_text(s, 6, sc->command, acc);
    bind_text(s, 7, sc->env_key, acc);
    bind_int64(s, 8, sc->timeout_ms, acc);
    bind_int64(s, 9, sc->enabled ? 1 : 0, acc);
    bind_optional(s, 10, sc->next_run, acc);
    bind_text(s, 11, sc->updated_at, acc);
}

int sl_store_schedule_insert(struct sl_store *st, struct sl_store_schedule *sc)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_ENSURE(sc->name != NULL && sc->cron != NULL && sc->repos_json != NULL && sc->command != NULL,
              SL_EINVAL);
    SL_TRY(sl_uuid_v4(sc->id));
    now_rfc3339(sc->created_at);
    memcpy(sc->updated_at, sc->created_at, sizeof(sc->updated_at));
    sc->last_run = -1;
    lock(st);
    rc = stmt_get(st, ST_SCHED_INSERT, &s);
    if (rc == 0) {
        bind_text(s, 1, sc->id, &acc);
        bind_text(s, 2, sc->owner_id, &acc);
        bind_schedule(s, sc, &acc);
        rc = acc == SQLITE_OK ? run(s) : acc;
        stmt_done(s);
        rc = rc == SQLITE_DONE ? 0 : db_error(st, rc, "schedule-insert");
    }
    unlock(st);
    return rc;
}

int sl_store_schedule_replace(struct sl_store *st, struct sl_store_schedule *sc)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_ENSURE(sc->name != NULL && sc->cron != NULL && sc->repos_json != NULL && sc->command != NULL,
              SL_EINVAL);
    now_rfc3339(sc->updated_at);
    lock(st);
    rc = stmt_get(st, ST_SCHED_UPDATE, &s);
    if (rc == 0) {
        bind_text(s, 1, sc->id, &acc);
        bind_text(s, 2, sc->owner_id, &acc);
        bind_schedule(s, sc, &acc);
        rc = acc == SQLITE_OK ? run(s) : acc;
        stmt_done(s);
        if (rc == SQLITE_DONE) {
            rc = sqlite3_changes(st->db) == 1 ? 0 : SL_ENOTFOUND;
        } else {
            rc = db_error(st, rc, "schedule-update");
        }
    }
    unlock(st);
    return rc;
}

int sl_store_schedule_delete(struct sl_store *st, const char *id)
{
    int rc;

    lock(st);
    rc = delete_one(st, ST_SCHED_DELETE, id, NULL, "schedule-delete");
    unlock(st);
    return rc;
}

int sl_store_schedule_get(struct sl_store *st, const char *id, struct sl_store_schedule *out)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    lock(st);
    rc = stmt_get(st, ST_SCHED_GET, &s);
    if (rc == 0) {
        bind_text(s, 1, id, &acc);
        rc = acc == SQLITE_OK ? sqlite3_step(s) : acc;
        if (rc == SQLITE_ROW) {
            rc = read_schedule(st, s, out);
        } else {
            rc = rc == SQLITE_DONE ? SL_ENOTFOUND : db_error(st, rc, "schedule-get");
        }
        stmt_done(s);
    }
    unlock(st);
    return rc;
}

int sl_store_schedule_list(struct sl_store *st, const char *owner_id, size_t limit,
                           struct sl_store_schedule **out, size_t *n)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    lock(st);
    rc = stmt_get(st, ST_SCHED_LIST, &s);
    if (rc == 0) {
        bind_text(s, 1, owner_id, &acc);
        bind_int64(s, 2, (int64_t)limit, &acc);
        rc = acc == SQLITE_OK ? read_schedules(st, s, out, n) : db_error(st, acc, "sched-list");
        stmt_done(s);
    }
    unlock(st);
    return rc;
}

int sl_store_schedule_due(struct sl_store *st, int64_t now, size_t limit,
                          struct sl_store_schedule **out, size_t *n)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    lock(st);
    rc = stmt_get(st, ST_SCHED_DUE, &s);
    if (rc == 0) {
        bind_int64(s, 1, now, &acc);
        bind_int64(s, 2, (int64_t)limit, &acc);
        rc = acc == SQLITE_OK ? read_schedules(st, s, out, n) : db_error(st, acc, "sched-due");
        stmt_done(s);
    }
    unlock(st);
    return rc;
}

static int schedule_fire(struct sl_store *st, const char *id, int64_t due, int64_t now,
                         int64_t next, struct sl_store_job *v, size_t n)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(stmt_get(st, ST_SCHED_FIRED, &s));
    bind_text(s, 1, id, &acc);
    bind_int64(s, 2, due, &acc);
    bind_int64(s, 3, now, &acc);
    bind_optional(s, 4, next, &acc);
    rc = acc == SQLITE_OK ? run(s) : acc;
    stmt_done(s);
    if (rc != SQLITE_DONE) {
        return db_error(st, rc, "schedule-fired");
    }
    if (sqlite3_changes(st->db) != 1) {
        return SL_ENOTFOUND;
    }
    return insert_jobs(st, v, n);
}

int sl_store_schedule_fire(struct sl_store *st, const char *id, int64_t due, int64_t now,
                           int64_t next, struct sl_store_job *v, size_t n)
{
    int rc;

    lock(st);
    rc = tx_begin(st);
    if (rc == 0) {
        rc = schedule_fire(st, id, due, now, next, v, n);
        if (rc == 0) {
            rc = tx_commit(st);
        } else {
            tx_rollback(st);
        }
    }
    unlock(st);
    return rc;
}
