/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/store/store.c - the database itself: opening it (the file check, the schema version,
 * the integrity check, WAL mode), the migrations, the SQL of every cached statement and the rows
 * those return (which column is read into which member), the helpers of store_int.h
 * (statements, binders, transactions, columns, rows) and the snapshot version counter. The
 * tables' own functions are in the store_*.c files.
 */
#include "control/store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "base/log.h"
#include "base/mem.h"
#include "control/store/store_int.h"

/* Milliseconds a connection waits for another one's write sl__store_lock (docs/control-plane.md).
 */
#define BUSY_TIMEOUT_MS 5000
/* Milliseconds between attempts where SQLite does not wait by itself (see set_pragmas). */
#define RETRY_PAUSE_MS 10

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
    /* 1 -> 2: jobs and schedules (docs/reference/api.md §5.5, docs/jobs.md). `seq` orders jobs
     * (oldest runs first, lists show newest first); a job keeps its schedule's id after the
     * schedule is deleted, so that column has no reference. */
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
    /* 2 -> 3: who may do what (docs/reference/api.md §5.8, §5.9). Users can be disabled and
     * carry an email. A token gets an id (for its owner to revoke it), a name, a scope and an
     * expiry: the tokens of before keep working with what their user could do, so an admin's
     * get the admin scope, anyone else's write. Repositories of the local git platform and
     * their members' roles. */
    "ALTER TABLE users ADD COLUMN disabled INTEGER NOT NULL DEFAULT 0"
    "  CHECK (disabled IN (0, 1));"
    "ALTER TABLE users ADD COLUMN email TEXT;"
    "CREATE TABLE tokens_v3 ("
    "  id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),"
    "  hash BLOB NOT NULL UNIQUE CHECK (length(hash) = 32),"
    "  user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,"
    "  kind TEXT NOT NULL CHECK (kind IN ('api', 'sandbox')),"
    "  name TEXT NOT NULL DEFAULT '',"
    "  scope TEXT NOT NULL CHECK (scope IN ('read', 'write', 'admin')),"
    "  created_at TEXT NOT NULL,"
    "  expires_at TEXT);"
    "INSERT INTO tokens_v3 (id, hash, user_id, kind, name, scope, created_at)"
    "  SELECT 'tok_' || lower(hex(randomblob(8))), t.hash, t.user_id, t.kind, 'default',"
    "    CASE WHEN u.is_admin = 1 THEN 'admin' ELSE 'write' END, t.created_at"
    "  FROM tokens t JOIN users u ON u.id = t.user_id;"
    "DROP TABLE tokens;"
    "ALTER TABLE tokens_v3 RENAME TO tokens;"
    "CREATE INDEX tokens_user ON tokens (user_id);"
    "CREATE TABLE repos ("
    "  name TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),"
    "  visibility TEXT NOT NULL CHECK (visibility IN ('private', 'public')),"
    "  default_branch TEXT NOT NULL CHECK (default_branch <> ''),"
    "  protected_json TEXT NOT NULL DEFAULT '[]',"
    "  archived INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1)),"
    "  created_at TEXT NOT NULL,"
    "  updated_at TEXT NOT NULL);"
    "CREATE TABLE repo_members ("
    "  repo TEXT NOT NULL REFERENCES repos (name) ON DELETE CASCADE,"
    "  user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,"
    "  role TEXT NOT NULL CHECK (role IN ('read', 'write', 'admin')),"
    "  created_at TEXT NOT NULL,"
    "  updated_at TEXT NOT NULL,"
    "  PRIMARY KEY (repo, user_id));"
    "CREATE INDEX repo_members_user ON repo_members (user_id);",
    /* 3 -> 4: learn mode (docs/reference/api.md §5.1 observe): until when an environment lets
     * out, and records, what its policy would refuse. NULL: not in observe. */
    "ALTER TABLE environments ADD COLUMN observe_until INTEGER"
    "  CHECK (observe_until IS NULL OR observe_until > 0);",
    /* 4 -> 5: images from registries (docs/reference/api.md §5.1): each environment's pull
     * policy, and the registry's credentials ({"username","sealed"}, the password sealed like
     * a secret value; NULL for none). Existing environments pull when the image is missing. */
    "ALTER TABLE environments ADD COLUMN image_pull TEXT NOT NULL DEFAULT 'if-missing'"
    "  CHECK (image_pull IN ('if-missing', 'always'));"
    "ALTER TABLE environments ADD COLUMN registry_json TEXT;",
};

/* The SQL of the cached statements (enum sl__store_stmt in store_int.h). */
static const char *const stmt_sql[SL__STMT_COUNT] = {
    [SL__STMT_BEGIN] = "BEGIN IMMEDIATE",
    [SL__STMT_COMMIT] = "COMMIT",
    [SL__STMT_ROLLBACK] = "ROLLBACK",
    [SL__STMT_USER_INSERT] = "INSERT INTO users (id, name, is_admin, created_at, email) "
                             "VALUES (?1, ?2, ?3, ?4, ?5)",
    [SL__STMT_USER_UPDATE] = "UPDATE users SET disabled = coalesce(?2, disabled), is_admin = "
                             "coalesce(?3, is_admin), "
                             "email = CASE WHEN ?4 THEN ?5 ELSE email END WHERE name = ?1",
    [SL__STMT_USER_ADMINS] = "SELECT count(*) FROM users WHERE is_admin = 1 AND disabled = 0",
    [SL__STMT_USER_BY_ID] = "SELECT " SL__STORE_USER_COLS " FROM users WHERE id = ?1",
    [SL__STMT_USER_BY_NAME] = "SELECT " SL__STORE_USER_COLS " FROM users WHERE name = ?1",
    /* lower() of SQLite folds ASCII only, as the rule of user names is ASCII case. */
    [SL__STMT_USER_BY_NAME_NOCASE] = "SELECT " SL__STORE_USER_COLS " FROM users "
                                     "WHERE lower(name) = lower(?1) ORDER BY name LIMIT 1",
    [SL__STMT_USER_LIST] = "SELECT " SL__STORE_USER_COLS " FROM users ORDER BY name",
    [SL__STMT_TOKEN_INSERT] =
            "INSERT INTO tokens (id, hash, user_id, kind, name, scope, created_at, expires_at) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [SL__STMT_TOKEN_FIND] = "SELECT t.hash, " SL__STORE_TOKEN_COLS ", " SL__STORE_USER_COLS_U
                            " FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = ?1",
    [SL__STMT_TOKEN_LIST] =
            "SELECT " SL__STORE_TOKEN_COLS " FROM tokens t "
            "WHERE t.user_id = ?1 AND t.kind = 'api' ORDER BY t.created_at, t.rowid",
    [SL__STMT_TOKEN_DELETE] = "DELETE FROM tokens WHERE hash = ?1",
    [SL__STMT_TOKEN_DELETE_ID] = "DELETE FROM tokens WHERE id = ?1 AND user_id = ?2",
    [SL__STMT_TOKEN_LIVE] = "SELECT count(*) FROM tokens WHERE user_id = ?1 AND kind = 'api' "
                            "AND (expires_at IS NULL OR expires_at > ?2)",
    [SL__STMT_ENV_INSERT] =
            "INSERT INTO environments (id, name, description, scope, owner_id, "
            "owner_key, is_default, base_image, cpus_centi, memory_bytes, network, "
            "env_json, egress_json, created_at, updated_at, image_pull, registry_json) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?14, ?15, ?16)",
    [SL__STMT_ENV_UPDATE] = "UPDATE environments SET name = ?2, description = ?3, scope = ?4, "
                            "owner_id = ?5, owner_key = ?6, base_image = ?8, cpus_centi = ?9, "
                            "memory_bytes = ?10, network = ?11, env_json = ?12, egress_json = ?13, "
                            "updated_at = ?14, image_pull = ?15, registry_json = ?16 WHERE id = ?1",
    [SL__STMT_ENV_DELETE] = "DELETE FROM environments WHERE id = ?1",
    [SL__STMT_ENV_BY_ID] = "SELECT " SL__STORE_ENV_COLS " FROM environments e WHERE e.id = ?1",
    [SL__STMT_ENV_BY_NAME] = "SELECT " SL__STORE_ENV_COLS " FROM environments e "
                             "WHERE e.scope = ?1 AND e.owner_key = ?2 AND e.name = ?3",
    [SL__STMT_ENV_BY_REPO] = "SELECT " SL__STORE_ENV_COLS " FROM env_repos r JOIN environments e "
                             "ON e.id = r.env_id WHERE r.scope = ?1 AND r.owner_key = ?2 "
                             "AND r.repo = ?3",
    [SL__STMT_ENV_LIST_VISIBLE] =
            "SELECT " SL__STORE_ENV_COLS " FROM environments e "
            "WHERE (e.scope = 'user' AND e.owner_key = ?1) OR e.scope = 'global' "
            "ORDER BY e.scope = 'global', e.name",
    [SL__STMT_ENV_LIST_ALL] = "SELECT " SL__STORE_ENV_COLS " FROM environments e "
                              "ORDER BY e.scope = 'global', e.owner_key, e.name",
    [SL__STMT_ENV_DEFAULT] =
            "SELECT " SL__STORE_ENV_COLS " FROM environments e WHERE e.is_default = 1",
    [SL__STMT_ENV_STATE] = "SELECT scope, is_default, created_at, observe_until FROM environments "
                           "WHERE id = ?1",
    [SL__STMT_ENV_NAME_HOLDER] = "SELECT id FROM environments "
                                 "WHERE scope = ?1 AND owner_key = ?2 AND name = ?3 AND id <> ?4",
    [SL__STMT_ENV_DEMOTE] = "UPDATE environments SET is_default = 0, updated_at = ?1 "
                            "WHERE is_default = 1",
    [SL__STMT_ENV_PROMOTE] =
            "UPDATE environments SET is_default = 1, updated_at = ?2 WHERE id = ?1",
    [SL__STMT_ENV_OBSERVE_SET] = "UPDATE environments SET observe_until = ?2 WHERE id = ?1",
    [SL__STMT_ENV_OBSERVE_DUE] = "SELECT " SL__STORE_ENV_COLS " FROM environments e "
                                 "WHERE e.observe_until IS NOT NULL AND e.observe_until <= ?1 "
                                 "ORDER BY e.observe_until, e.id",
    [SL__STMT_ENV_OBSERVE_END] = "UPDATE environments SET observe_until = NULL "
                                 "WHERE observe_until IS NOT NULL AND observe_until <= ?1",
    [SL__STMT_REPO_INSERT] = "INSERT INTO env_repos (env_id, scope, owner_key, repo) "
                             "VALUES (?1, ?2, ?3, ?4)",
    [SL__STMT_REPO_DELETE] = "DELETE FROM env_repos WHERE env_id = ?1",
    /* rowid order is insertion order: repositories read back in the order they were given. */
    [SL__STMT_REPO_LIST] = "SELECT repo FROM env_repos WHERE env_id = ?1 ORDER BY rowid",
    [SL__STMT_REPO_HOLDER] = "SELECT e.id, e.name FROM env_repos r JOIN environments e "
                             "ON e.id = r.env_id WHERE r.scope = ?1 AND r.owner_key = ?2 "
                             "AND r.repo = ?3 AND r.env_id <> ?4",
    [SL__STMT_CLIENT_INSERT] =
            "INSERT INTO clients (id, env_id, ip, cidr, token_sealed, created_at) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [SL__STMT_CLIENT_LIST] = "SELECT c.id, c.env_id, e.name, c.ip, c.cidr, c.token_sealed, "
                             "c.created_at FROM clients c JOIN environments e ON e.id = c.env_id "
                             "ORDER BY c.id",
    [SL__STMT_CLIENT_DELETE] = "DELETE FROM clients WHERE id = ?1",
    [SL__STMT_REPOSITORY_PUT] =
            "INSERT INTO repos (name, visibility, default_branch, protected_json, archived, "
            "created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6) "
            "ON CONFLICT (name) DO UPDATE SET visibility = excluded.visibility, "
            "default_branch = excluded.default_branch, protected_json = excluded.protected_json, "
            "archived = excluded.archived, updated_at = excluded.updated_at "
            "RETURNING created_at",
    [SL__STMT_REPOSITORY_GET] = "SELECT " SL__STORE_REPO_COLS " FROM repos r WHERE r.name = ?1",
    [SL__STMT_REPOSITORY_DELETE] = "DELETE FROM repos WHERE name = ?1",
    [SL__STMT_REPOSITORY_LIST] =
            "SELECT " SL__STORE_REPO_COLS " FROM repos r WHERE ?1 IS NULL "
            "OR r.visibility = 'public' OR EXISTS (SELECT 1 FROM repo_members m "
            "WHERE m.repo = r.name AND m.user_id = ?1) ORDER BY r.name",
    [SL__STMT_MEMBER_GET] = "SELECT role FROM repo_members WHERE repo = ?1 AND user_id = ?2",
    [SL__STMT_MEMBER_UPSERT] =
            "INSERT INTO repo_members (repo, user_id, role, created_at, updated_at) "
            "VALUES (?1, ?2, ?3, ?4, ?4) ON CONFLICT (repo, user_id) "
            "DO UPDATE SET role = excluded.role, updated_at = excluded.updated_at",
    [SL__STMT_MEMBER_DELETE] = "DELETE FROM repo_members WHERE repo = ?1 AND user_id = ?2",
    [SL__STMT_MEMBER_LIST] = "SELECT m.user_id, u.name, m.role FROM repo_members m "
                             "JOIN users u ON u.id = m.user_id WHERE m.repo = ?1 ORDER BY u.name",
    [SL__STMT_SNAPSHOT_NEXT] = "UPDATE meta SET value = CAST(value AS INTEGER) + 1 "
                               "WHERE key = 'snapshot_version' RETURNING CAST(value AS INTEGER)",
    [SL__STMT_JOB_INSERT] =
            "INSERT INTO jobs (id, owner_id, schedule_id, repo, ref, command, env_key, "
            "timeout_ms, status, created_at) "
            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'queued', ?9)",
    [SL__STMT_JOB_GET] = "SELECT " SL__STORE_JOB_COLS " FROM jobs WHERE id = ?1",
    [SL__STMT_JOB_LIST] =
            "SELECT " SL__STORE_JOB_COLS " FROM jobs WHERE (?1 IS NULL OR owner_id = ?1) "
            "AND (?2 IS NULL OR status = ?2) AND (?3 IS NULL OR schedule_id = ?3) "
            "ORDER BY seq DESC LIMIT ?4",
    [SL__STMT_JOB_NEXT] =
            "SELECT " SL__STORE_JOB_COLS " FROM jobs WHERE status = 'queued' ORDER BY seq LIMIT 1",
    [SL__STMT_JOB_START] = "UPDATE jobs SET status = 'running', started_at = ?2 "
                           "WHERE id = ?1 AND status = 'queued'",
    [SL__STMT_JOB_SET_RUN] = "UPDATE jobs SET env_json = coalesce(?2, env_json), "
                             "sandbox_id = coalesce(?3, sandbox_id) "
                             "WHERE id = ?1 AND status = 'running'",
    [SL__STMT_JOB_FINISH] =
            "UPDATE jobs SET status = ?2, result_json = ?3, error = ?4, "
            "finished_at = ?5, env_json = coalesce(?6, env_json), "
            "sandbox_id = coalesce(?7, sandbox_id) WHERE id = ?1 AND status = 'running'",
    [SL__STMT_JOB_ABANDON] = "UPDATE jobs SET status = 'error', error = ?1, finished_at = ?2 "
                             "WHERE status = 'running'",
    [SL__STMT_SCHED_INSERT] =
            "INSERT INTO schedules (id, owner_id, name, cron, repos_json, command, "
            "env_key, timeout_ms, enabled, next_run, last_run, created_at, "
            "updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL, ?11, "
            "?11)",
    [SL__STMT_SCHED_UPDATE] = "UPDATE schedules SET name = ?3, cron = ?4, repos_json = ?5, "
                              "command = ?6, env_key = ?7, timeout_ms = ?8, enabled = ?9, "
                              "next_run = ?10, updated_at = ?11 WHERE id = ?1 AND owner_id = ?2",
    [SL__STMT_SCHED_DELETE] = "DELETE FROM schedules WHERE id = ?1",
    [SL__STMT_SCHED_GET] = "SELECT " SL__STORE_SCHED_COLS " FROM schedules WHERE id = ?1",
    [SL__STMT_SCHED_LIST] =
            "SELECT " SL__STORE_SCHED_COLS " FROM schedules WHERE (?1 IS NULL OR owner_id = ?1) "
            "ORDER BY name, id LIMIT ?2",
    [SL__STMT_SCHED_DUE] = "SELECT " SL__STORE_SCHED_COLS " FROM schedules WHERE enabled = 1 "
                           "AND next_run <= ?1 ORDER BY next_run LIMIT ?2",
    [SL__STMT_SCHED_FIRED] = "UPDATE schedules SET last_run = ?3, next_run = ?4 "
                             "WHERE id = ?1 AND enabled = 1 AND next_run = ?2",
};

void sl__store_now(char out[SL__STORE_TIMESTAMP_SIZE])
{
    struct timespec ts;
    struct tm tm;

    if (clock_gettime(CLOCK_REALTIME, &ts) == -1 || gmtime_r(&ts.tv_sec, &tm) == NULL
        || strftime(out, SL__STORE_TIMESTAMP_SIZE, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        memcpy(out, "1970-01-01T00:00:00Z", sizeof("1970-01-01T00:00:00Z"));
    }
}

void sl__store_lock(struct sl_store *st)
{
    SL_BUG_ON(pthread_mutex_lock(&st->lock) != 0);
}

void sl__store_unlock(struct sl_store *st)
{
    SL_BUG_ON(pthread_mutex_unlock(&st->lock) != 0);
}

int sl__store_release(struct sl_store *st, int rc)
{
    sl__store_unlock(st);
    return rc;
}

bool sl__store_is_terminated(const char *s, size_t cap)
{
    return memchr(s, '\0', cap) != NULL;
}

int sl__store_db_error(struct sl_store *st, int rc, const char *what)
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

void sl__store_stmt_done(sqlite3_stmt *s)
{
    (void)sqlite3_reset(s);
    (void)sqlite3_clear_bindings(s);
}

int sl__store_stmt(struct sl_store *st, enum sl__store_stmt id, sqlite3_stmt **out)
{
    int rc;

    if (st->stmts[id] == NULL) {
        rc = sqlite3_prepare_v3(st->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &st->stmts[id],
                                NULL);
        if (rc != SQLITE_OK) {
            st->stmts[id] = NULL;
            return sl__store_db_error(st, rc, "prepare");
        }
    }
    *out = st->stmts[id];
    return 0;
}

/* The sticky binders: see store_int.h. */
void sl__store_bind_text(sqlite3_stmt *s, int i, const char *v, int *acc)
{
    if (*acc == SQLITE_OK) {
        *acc = v == NULL ? sqlite3_bind_null(s, i) : sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
    }
}

void sl__store_bind_int64(sqlite3_stmt *s, int i, int64_t v, int *acc)
{
    if (*acc == SQLITE_OK) {
        *acc = sqlite3_bind_int64(s, i, v);
    }
}

void sl__store_bind_optional(sqlite3_stmt *s, int i, int64_t v, int *acc)
{
    if (*acc == SQLITE_OK) {
        *acc = v == -1 ? sqlite3_bind_null(s, i) : sqlite3_bind_int64(s, i, v);
    }
}

void sl__store_bind_hash(sqlite3_stmt *s, int i, const uint8_t hash[32], int *acc)
{
    if (*acc == SQLITE_OK) {
        *acc = sqlite3_bind_blob(s, i, hash, 32, SQLITE_STATIC);
    }
}

int sl__store_run(sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);

    sl__store_stmt_done(s);
    return rc;
}

int sl__store_exec(struct sl_store *st, sqlite3_stmt *s, int acc, const char *what)
{
    int rc = acc == SQLITE_OK ? sl__store_run(s) : acc;

    sl__store_stmt_done(s);
    return rc == SQLITE_DONE ? 0 : sl__store_db_error(st, rc, what);
}

/* Runs a cached statement with no parameters; returns 0 or an sl_err. */
static int run_plain(struct sl_store *st, enum sl__store_stmt id, const char *what)
{
    sqlite3_stmt *s = NULL;
    int rc;

    SL_TRY(sl__store_stmt(st, id, &s));
    rc = sl__store_run(s);
    if (rc != SQLITE_DONE) {
        return sl__store_db_error(st, rc, what);
    }
    return 0;
}

int sl__store_tx_begin(struct sl_store *st)
{
    return run_plain(st, SL__STMT_BEGIN, "begin");
}

static void tx_rollback(struct sl_store *st)
{
    /* A failed COMMIT or an I/O error may have ended the transaction already. */
    if (!sqlite3_get_autocommit(st->db)) {
        (void)run_plain(st, SL__STMT_ROLLBACK, "rollback");
    }
}

static int tx_commit(struct sl_store *st)
{
    int rc = run_plain(st, SL__STMT_COMMIT, "commit");

    if (rc < 0) {
        tx_rollback(st);
    }
    return rc;
}

int sl__store_tx_end(struct sl_store *st, int rc)
{
    if (rc == 0) {
        return tx_commit(st);
    }
    tx_rollback(st);
    return rc;
}

int sl__store_change_begin(struct sl_store *st)
{
    int rc;

    sl__store_lock(st);
    rc = sl__store_tx_begin(st);
    if (rc < 0) {
        sl__store_unlock(st);
    }
    return rc;
}

int sl__store_change_end(struct sl_store *st, int rc)
{
    return sl__store_release(st, sl__store_tx_end(st, rc));
}

/* ---- reading columns ---- */

static const char *col_name(sqlite3_stmt *s, int i)
{
    const char *name = sqlite3_column_name(s, i);

    return name == NULL ? "?" : name;
}

int sl__store_col_copy(struct sl_store *st, sqlite3_stmt *s, int i, char *dst, size_t cap)
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

int sl__store_col_dup(sqlite3_stmt *s, int i, char **out)
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

int sl__store_col_dup_required(struct sl_store *st, sqlite3_stmt *s, int i, char **out)
{
    SL_TRY(sl__store_col_dup(s, i, out));
    if (*out == NULL) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"database value missing\" file=%s column=%s", st->path,
               col_name(s, i));
        return SL_EIO;
    }
    return 0;
}

bool sl__store_col_is(sqlite3_stmt *s, int i, const char *text)
{
    const unsigned char *t = sqlite3_column_text(s, i);

    return t != NULL && strcmp((const char *)t, text) == 0;
}

int sl__store_grow(void *array, size_t *cap, size_t len, size_t size)
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

/* ---- rows ---- */

int sl__store_read_cols(struct sl_store *st, sqlite3_stmt *s, int first,
                        const struct sl__store_rows *kind, void *row)
{
    int rc = 0;

    memset(row, 0, kind->size);
    for (size_t i = 0; rc == 0 && i < kind->n_cols; i++) {
        const struct sl__store_col *c = &kind->cols[i];
        char *member = (char *)row + c->offset;
        int col = first + (int)i;
        char *text = NULL;
        int64_t v = 0;
        bool flag;

        switch (c->kind) {
        case SL__STORE_COL_TEXT:
            rc = sl__store_col_copy(st, s, col, member, c->size);
            break;
        case SL__STORE_COL_DUP:
            rc = sl__store_col_dup(s, col, &text);
            memcpy(member, &text, sizeof(text));
            break;
        case SL__STORE_COL_DUP_REQUIRED:
            rc = sl__store_col_dup_required(st, s, col, &text);
            memcpy(member, &text, sizeof(text));
            break;
        case SL__STORE_COL_OPTIONAL:
            v = sqlite3_column_type(s, col) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, col);
            memcpy(member, &v, sizeof(v));
            break;
        case SL__STORE_COL_INT64:
            v = sqlite3_column_int64(s, col);
            memcpy(member, &v, sizeof(v));
            break;
        case SL__STORE_COL_FLAG:
            flag = sqlite3_column_int(s, col) != 0;
            memcpy(member, &flag, sizeof(flag));
            break;
        case SL__STORE_COL_OWN:
            break;
        }
    }
    if (rc < 0) {
        sl__store_free_cols(kind, row);
    }
    return rc;
}

void sl__store_free_cols(const struct sl__store_rows *kind, void *row)
{
    for (size_t i = 0; i < kind->n_cols; i++) {
        const struct sl__store_col *c = &kind->cols[i];
        char *text;

        if (c->kind == SL__STORE_COL_DUP || c->kind == SL__STORE_COL_DUP_REQUIRED) {
            memcpy(&text, (char *)row + c->offset, sizeof(text));
            sl_free(text);
        }
    }
    memset(row, 0, kind->size);
}

int sl__store_read_row(struct sl_store *st, sqlite3_stmt *s, int first,
                       const struct sl__store_rows *kind, void *row)
{
    return kind->read != NULL ? kind->read(st, s, first, row)
                              : sl__store_read_cols(st, s, first, kind, row);
}

void sl__store_free_rows(const struct sl__store_rows *kind, void *rows, size_t n)
{
    if (rows == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        void *row = (uint8_t *)rows + i * kind->size;

        if (kind->finish != NULL) {
            kind->finish(row);
        } else {
            sl__store_free_cols(kind, row);
        }
    }
    sl_free(rows);
}

int sl__store_get_one(struct sl_store *st, sqlite3_stmt *s, int acc,
                      const struct sl__store_rows *kind, void *row, const char *what)
{
    int rc = acc == SQLITE_OK ? sqlite3_step(s) : acc;

    if (rc == SQLITE_ROW) {
        rc = sl__store_read_row(st, s, 0, kind, row);
    } else {
        rc = rc == SQLITE_DONE ? SL_ENOTFOUND : sl__store_db_error(st, rc, what);
    }
    sl__store_stmt_done(s);
    return rc;
}

int sl__store_get_by(struct sl_store *st, enum sl__store_stmt id, const char *key,
                     const struct sl__store_rows *kind, void *row, const char *what)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;

    SL_TRY(sl__store_stmt(st, id, &s));
    sl__store_bind_text(s, 1, key, &acc);
    return sl__store_get_one(st, s, acc, kind, row, what);
}

/* The rows of sl__store_list(), the statement bound and not yet stepped. */
static int collect_rows(struct sl_store *st, sqlite3_stmt *s, const struct sl__store_rows *kind,
                        const char *what, void *out, size_t *n)
{
    uint8_t *v = NULL;
    size_t len = 0;
    size_t cap = 0;
    int rc;

    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        rc = sl__store_grow(&v, &cap, len, kind->size);
        if (rc == 0) {
            rc = sl__store_read_row(st, s, 0, kind, v + len * kind->size);
        }
        if (rc < 0) {
            sl__store_free_rows(kind, v, len);
            return rc;
        }
        len++;
    }
    if (rc != SQLITE_DONE) {
        sl__store_free_rows(kind, v, len);
        return sl__store_db_error(st, rc, what);
    }
    memcpy(out, &v, sizeof(v));
    *n = len;
    return 0;
}

int sl__store_list(struct sl_store *st, sqlite3_stmt *s, int acc, const struct sl__store_rows *kind,
                   const char *what, void *out, size_t *n)
{
    int rc = acc == SQLITE_OK ? collect_rows(st, s, kind, what, out, n)
                              : sl__store_db_error(st, acc, what);

    sl__store_stmt_done(s);
    return rc;
}

static int list_by(struct sl_store *st, enum sl__store_stmt id, const char *key,
                   const struct sl__store_rows *kind, const char *what, void *out, size_t *n)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;

    SL_TRY(sl__store_stmt(st, id, &s));
    if (key != NULL) {
        sl__store_bind_text(s, 1, key, &acc);
    }
    return sl__store_list(st, s, acc, kind, what, out, n);
}

int sl__store_delete_one(struct sl_store *st, enum sl__store_stmt id, const char *key,
                         const char *key2, const uint8_t *hash, const char *what)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;

    SL_TRY(sl__store_stmt(st, id, &s));
    if (hash != NULL) {
        sl__store_bind_hash(s, 1, hash, &acc);
    } else {
        sl__store_bind_text(s, 1, key, &acc);
    }
    if (key2 != NULL) {
        sl__store_bind_text(s, 2, key2, &acc);
    }
    SL_TRY(sl__store_exec(st, s, acc, what));
    return sqlite3_changes(st->db) == 0 ? SL_ENOTFOUND : 0;
}

/* ---- whole operations ---- */

int sl__store_locked_get(struct sl_store *st, enum sl__store_stmt id, const char *key,
                         const struct sl__store_rows *kind, void *row, const char *what)
{
    sl__store_lock(st);
    return sl__store_release(st, sl__store_get_by(st, id, key, kind, row, what));
}

int sl__store_locked_list(struct sl_store *st, enum sl__store_stmt id, const char *key,
                          const struct sl__store_rows *kind, const char *what, void *out, size_t *n)
{
    sl__store_lock(st);
    return sl__store_release(st, list_by(st, id, key, kind, what, out, n));
}

int sl__store_locked_delete(struct sl_store *st, enum sl__store_stmt id, const char *key,
                            const char *key2, const uint8_t *hash, const char *what)
{
    sl__store_lock(st);
    return sl__store_release(st, sl__store_delete_one(st, id, key, key2, hash, what));
}

/* ---- the rows the statements return ---- */

/* The columns of SL__STORE_USER_COLS. */
static const struct sl__store_col user_cols[] = {
    SL__STORE_COL(TEXT, struct sl_user, id),
    SL__STORE_COL(DUP_REQUIRED, struct sl_user, name),
    SL__STORE_COL(FLAG, struct sl_user, is_admin),
    SL__STORE_COL(FLAG, struct sl_user, disabled),
    SL__STORE_COL(DUP, struct sl_user, email),
    SL__STORE_COL(TEXT, struct sl_user, created_at),
};

static void finish_user(void *row)
{
    sl_user_finish(row);
}

const struct sl__store_rows sl__store_user_rows = {
    .size = sizeof(struct sl_user),
    .cols = user_cols,
    .n_cols = SL_ARRAY_LEN(user_cols),
    .finish = finish_user,
};

/* The columns of SL__STORE_TOKEN_COLS; kind and scope by read_token(). */
static const struct sl__store_col token_cols[] = {
    SL__STORE_COL(TEXT, struct sl_store_token, id),
    SL__STORE_COL(TEXT, struct sl_store_token, user_id),
    SL__STORE_COL(OWN, struct sl_store_token, kind),
    SL__STORE_COL(OWN, struct sl_store_token, scope),
    SL__STORE_COL(DUP_REQUIRED, struct sl_store_token, name),
    SL__STORE_COL(TEXT, struct sl_store_token, created_at),
    SL__STORE_COL(TEXT, struct sl_store_token, expires_at),
};

/* A scope the schema does not allow cannot be there; read as the least one. */
static int read_token(struct sl_store *st, sqlite3_stmt *s, int first, void *row)
{
    struct sl_store_token *t = row;
    const unsigned char *scope;

    SL_TRY(sl__store_read_cols(st, s, first, &sl__store_token_rows, t));
    t->kind = sl__store_col_is(s, first + 2, "sandbox") ? SL_TOKEN_KIND_SANDBOX : SL_TOKEN_KIND_API;
    scope = sqlite3_column_text(s, first + 3);
    if (scope == NULL || !sl_token_scope_parse((const char *)scope, &t->scope)) {
        t->scope = SL_TOKEN_SCOPE_READ;
    }
    return 0;
}

const struct sl__store_rows sl__store_token_rows = {
    .size = sizeof(struct sl_store_token),
    .cols = token_cols,
    .n_cols = SL_ARRAY_LEN(token_cols),
    .read = read_token,
};

/* The columns of SL__STORE_ENV_COLS; scope, network and image_pull by read_env(). */
static const struct sl__store_col env_cols[] = {
    SL__STORE_COL(TEXT, struct sl_env_row, id),
    SL__STORE_COL(DUP_REQUIRED, struct sl_env_row, name),
    SL__STORE_COL(DUP_REQUIRED, struct sl_env_row, description),
    SL__STORE_COL(OWN, struct sl_env_row, scope),
    SL__STORE_COL(TEXT, struct sl_env_row, owner_id),
    SL__STORE_COL(FLAG, struct sl_env_row, is_default),
    SL__STORE_COL(DUP, struct sl_env_row, base_image),
    SL__STORE_COL(OPTIONAL, struct sl_env_row, cpus_centi),
    SL__STORE_COL(OPTIONAL, struct sl_env_row, memory_bytes),
    SL__STORE_COL(OWN, struct sl_env_row, network),
    SL__STORE_COL(DUP_REQUIRED, struct sl_env_row, env_json),
    SL__STORE_COL(DUP, struct sl_env_row, egress_json),
    SL__STORE_COL(TEXT, struct sl_env_row, created_at),
    SL__STORE_COL(TEXT, struct sl_env_row, updated_at),
    SL__STORE_COL(OPTIONAL, struct sl_env_row, observe_until),
    SL__STORE_COL(OWN, struct sl_env_row, image_pull_always),
    SL__STORE_COL(DUP, struct sl_env_row, registry_json),
};

/* Reads the repositories of `r->id` into `r` (a second query: the row is read already). */
static int read_env_repos(struct sl_store *st, struct sl_env_row *r)
{
    size_t cap = 0;
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(sl__store_stmt(st, SL__STMT_REPO_LIST, &s));
    sl__store_bind_text(s, 1, r->id, &acc);
    if (acc != SQLITE_OK) {
        rc = sl__store_db_error(st, acc, "repo-list");
        goto done;
    }
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        rc = sl__store_grow(&r->repos, &cap, r->n_repos, sizeof(*r->repos));
        if (rc == 0) {
            rc = sl__store_col_dup_required(st, s, 0, &r->repos[r->n_repos]);
        }
        if (rc < 0) {
            goto done;
        }
        r->n_repos++;
    }
    rc = rc == SQLITE_DONE ? 0 : sl__store_db_error(st, rc, "repo-list");
done:
    sl__store_stmt_done(s);
    return rc;
}

static int read_env(struct sl_store *st, sqlite3_stmt *s, int first, void *row)
{
    struct sl_env_row *r = row;
    int rc;

    SL_TRY(sl__store_read_cols(st, s, first, &sl__store_env_rows, r));
    r->scope = sl__store_col_is(s, first + 3, "global") ? SL_SCOPE_GLOBAL : SL_SCOPE_USER;
    r->network = sl__store_col_is(s, first + 9, "on");
    r->image_pull_always = sl__store_col_is(s, first + 15, "always");
    rc = read_env_repos(st, r);
    if (rc < 0) {
        sl_env_row_finish(r);
    }
    return rc;
}

static void finish_env(void *row)
{
    sl_env_row_finish(row);
}

const struct sl__store_rows sl__store_env_rows = {
    .size = sizeof(struct sl_env_row),
    .cols = env_cols,
    .n_cols = SL_ARRAY_LEN(env_cols),
    .read = read_env,
    .finish = finish_env,
};

/* The columns of SL__STMT_CLIENT_LIST. */
static const struct sl__store_col client_cols[] = {
    SL__STORE_COL(DUP_REQUIRED, struct sl_store_client, id),
    SL__STORE_COL(TEXT, struct sl_store_client, env_id),
    SL__STORE_COL(DUP_REQUIRED, struct sl_store_client, env_name),
    SL__STORE_COL(DUP, struct sl_store_client, ip),
    SL__STORE_COL(DUP, struct sl_store_client, cidr),
    SL__STORE_COL(DUP, struct sl_store_client, token_sealed),
    SL__STORE_COL(TEXT, struct sl_store_client, created_at),
};

const struct sl__store_rows sl__store_client_rows = {
    .size = sizeof(struct sl_store_client),
    .cols = client_cols,
    .n_cols = SL_ARRAY_LEN(client_cols),
};

/* The columns of SL__STORE_JOB_COLS. */
static const struct sl__store_col job_cols[] = {
    SL__STORE_COL(TEXT, struct sl_store_job, id),
    SL__STORE_COL(TEXT, struct sl_store_job, owner_id),
    SL__STORE_COL(TEXT, struct sl_store_job, schedule_id),
    SL__STORE_COL(DUP_REQUIRED, struct sl_store_job, repo),
    SL__STORE_COL(DUP, struct sl_store_job, ref),
    SL__STORE_COL(DUP_REQUIRED, struct sl_store_job, command),
    SL__STORE_COL(DUP, struct sl_store_job, env_key),
    SL__STORE_COL(INT64, struct sl_store_job, timeout_ms),
    SL__STORE_COL(TEXT, struct sl_store_job, status),
    SL__STORE_COL(DUP, struct sl_store_job, env_json),
    SL__STORE_COL(DUP, struct sl_store_job, sandbox_id),
    SL__STORE_COL(DUP, struct sl_store_job, result_json),
    SL__STORE_COL(DUP, struct sl_store_job, error),
    SL__STORE_COL(TEXT, struct sl_store_job, created_at),
    SL__STORE_COL(TEXT, struct sl_store_job, started_at),
    SL__STORE_COL(TEXT, struct sl_store_job, finished_at),
};

const struct sl__store_rows sl__store_job_rows = {
    .size = sizeof(struct sl_store_job),
    .cols = job_cols,
    .n_cols = SL_ARRAY_LEN(job_cols),
};

/* The columns of SL__STORE_SCHED_COLS. */
static const struct sl__store_col schedule_cols[] = {
    SL__STORE_COL(TEXT, struct sl_store_schedule, id),
    SL__STORE_COL(TEXT, struct sl_store_schedule, owner_id),
    SL__STORE_COL(DUP_REQUIRED, struct sl_store_schedule, name),
    SL__STORE_COL(DUP_REQUIRED, struct sl_store_schedule, cron),
    SL__STORE_COL(DUP_REQUIRED, struct sl_store_schedule, repos_json),
    SL__STORE_COL(DUP_REQUIRED, struct sl_store_schedule, command),
    SL__STORE_COL(DUP, struct sl_store_schedule, env_key),
    SL__STORE_COL(INT64, struct sl_store_schedule, timeout_ms),
    SL__STORE_COL(FLAG, struct sl_store_schedule, enabled),
    SL__STORE_COL(OPTIONAL, struct sl_store_schedule, next_run),
    SL__STORE_COL(OPTIONAL, struct sl_store_schedule, last_run),
    SL__STORE_COL(TEXT, struct sl_store_schedule, created_at),
    SL__STORE_COL(TEXT, struct sl_store_schedule, updated_at),
};

const struct sl__store_rows sl__store_schedule_rows = {
    .size = sizeof(struct sl_store_schedule),
    .cols = schedule_cols,
    .n_cols = SL_ARRAY_LEN(schedule_cols),
};

/* The columns of SL__STORE_REPO_COLS; is_public by read_repo(). */
static const struct sl__store_col repo_cols[] = {
    SL__STORE_COL(DUP_REQUIRED, struct sl_store_repo, name),
    SL__STORE_COL(OWN, struct sl_store_repo, is_public),
    SL__STORE_COL(DUP_REQUIRED, struct sl_store_repo, default_branch),
    SL__STORE_COL(DUP_REQUIRED, struct sl_store_repo, protected_json),
    SL__STORE_COL(FLAG, struct sl_store_repo, archived),
    SL__STORE_COL(TEXT, struct sl_store_repo, created_at),
    SL__STORE_COL(TEXT, struct sl_store_repo, updated_at),
};

static int read_repo(struct sl_store *st, sqlite3_stmt *s, int first, void *row)
{
    struct sl_store_repo *r = row;

    SL_TRY(sl__store_read_cols(st, s, first, &sl__store_repo_rows, r));
    r->is_public = sl__store_col_is(s, first + 1, "public");
    return 0;
}

const struct sl__store_rows sl__store_repo_rows = {
    .size = sizeof(struct sl_store_repo),
    .cols = repo_cols,
    .n_cols = SL_ARRAY_LEN(repo_cols),
    .read = read_repo,
};

/* The columns of SL__STMT_MEMBER_LIST; the role by read_member(). */
static const struct sl__store_col member_cols[] = {
    SL__STORE_COL(TEXT, struct sl_store_member, user_id),
    SL__STORE_COL(DUP_REQUIRED, struct sl_store_member, user_name),
    SL__STORE_COL(OWN, struct sl_store_member, role),
};

/* A role the schema does not allow cannot be there; it grants nothing. */
static int read_member(struct sl_store *st, sqlite3_stmt *s, int first, void *row)
{
    struct sl_store_member *m = row;
    const unsigned char *role;

    SL_TRY(sl__store_read_cols(st, s, first, &sl__store_member_rows, m));
    role = sqlite3_column_text(s, first + 2);
    if (role == NULL || !sl_repo_role_parse((const char *)role, &m->role)) {
        m->role = SL_REPO_ROLE_NONE;
    }
    return 0;
}

const struct sl__store_rows sl__store_member_rows = {
    .size = sizeof(struct sl_store_member),
    .cols = member_cols,
    .n_cols = SL_ARRAY_LEN(member_cols),
    .read = read_member,
};

/* ---- meta ---- */

static int next_snapshot_version(struct sl_store *st, int64_t *out)
{
    sqlite3_stmt *s = NULL;
    int64_t v = 0;
    int rc;

    SL_TRY(sl__store_tx_begin(st));
    rc = sl__store_stmt(st, SL__STMT_SNAPSHOT_NEXT, &s);
    if (rc == 0) {
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            v = sqlite3_column_int64(s, 0);
            rc = sqlite3_step(s);
        }
        sl__store_stmt_done(s);
        if (rc == SQLITE_DONE && v <= 0) {
            sl_log(SL_LOG_ERROR, 0, "msg=\"database has no snapshot version\" file=%s", st->path);
            rc = SL_EIO;
        } else {
            rc = rc == SQLITE_DONE ? 0 : sl__store_db_error(st, rc, "snapshot-version");
        }
    }
    rc = sl__store_tx_end(st, rc);
    if (rc == 0) {
        *out = v;
    }
    return rc;
}

int sl_store_next_snapshot_version(struct sl_store *st, int64_t *out)
{
    sl__store_lock(st);
    return sl__store_release(st, next_snapshot_version(st, out));
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
        has_version =
                has_version
                || (sl__store_col_is(s, 0, "schema_version") && sl__store_col_is(s, 1, "table"));
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
    if (rc == SQLITE_ROW && sl__store_col_is(s, 1, "integer")) {
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

    if (rc == SQLITE_ROW && sl__store_col_is(s, 0, "ok")) {
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
 * rollback mode needs an exclusive lock, and when two connections that each hold a shared
 * sl__store_lock want it (two first opens of a new file), SQLite answers SQLITE_BUSY at once
 * instead of calling the busy handler, since waiting could deadlock. So the switch is retried here,
 * for as long as the busy timeout.
 */
static int set_pragmas(struct sl_store *st, char *err, size_t errlen)
{
    const struct timespec pause = { 0, RETRY_PAUSE_MS * 1000000L };
    sqlite3_stmt *s = NULL;
    bool wal = false;
    int rc;

    for (int waited_ms = 0;; waited_ms += RETRY_PAUSE_MS) {
        rc = query_first(st->db, "PRAGMA journal_mode = WAL", &s);
        wal = rc == SQLITE_ROW && sl__store_col_is(s, 0, "wal");
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
    for (size_t i = 0; i < SL__STMT_COUNT; i++) {
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
