/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/store/test_store.c - the control plane's database: creating, reopening,
 * upgrading (a database of sluice 0.1.0 among them) and refusing files; users, their changes and
 * their tokens with scopes; environments with their names, repositories and the default; static
 * clients; repositories and their members; the snapshot counter; concurrent writers; allocation
 * failures.
 */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>
#include <sqlite3.h>

#include "base/err.h"
#include "base/mem.h"
#include "control/store/model.h"
#include "control/store/secrets.h"
#include "control/store/store.h"
#include "tests/support/tmpdir.h"

struct fixture {
    char dir[64];
    char path[PATH_MAX];
    struct sl_store *st;
    /* Made by add_alice_and_bob(). */
    struct sl_user alice;
    struct sl_user bob;
};

static int setup(void **state)
{
    struct fixture *f = sl_calloc(1, sizeof(*f));

    assert_non_null(f);
    assert_int_equal(sl_test_tmpdir(f->dir, sizeof(f->dir), "sl-store"), 0);
    assert_int_equal(sl_test_join(f->path, sizeof(f->path), f->dir, "sluice.db"), 0);
    *state = f;
    return 0;
}

/* Opens the fixture's database; the test closes it or teardown does. */
static struct sl_store *open_store(struct fixture *f)
{
    char err[512] = "";
    int rc = sl_store_open(f->path, &f->st, err, sizeof(err));

    if (rc != 0) {
        fail_msg("open: %s (%s)", sl_strerror(rc), err);
    }
    return f->st;
}

static void close_store(struct fixture *f)
{
    sl_store_close(f->st);
    f->st = NULL;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    sl_user_finish(&f->alice);
    sl_user_finish(&f->bob);
    sl_store_close(f->st);
    assert_int_equal(sl_test_rmtree(f->dir), 0);
    sl_free(f);
    return 0;
}

/* Runs SQL on the file with a plain SQLite connection, as another program would. */
static void raw_sql(const char *path, const char *sql)
{
    sqlite3 *db = NULL;

    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    }
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

/* The first column of the first row of `sql`, as an integer. */
static int64_t raw_int(const char *path, const char *sql)
{
    sqlite3_stmt *s = NULL;
    sqlite3 *db = NULL;
    int64_t v;

    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    v = sqlite3_column_int64(s, 0);
    assert_int_equal(sqlite3_finalize(s), SQLITE_OK);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
    return v;
}

/* Reads a whole (small) file. */
static size_t slurp(const char *path, uint8_t *buf, size_t cap)
{
    int fd = open(path, O_RDONLY);
    ssize_t n;

    assert_int_not_equal(fd, -1);
    n = read(fd, buf, cap);
    assert_true(n >= 0 && (size_t)n < cap);
    assert_int_equal(close(fd), 0);
    return (size_t)n;
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

    assert_int_not_equal(fd, -1);
    assert_int_equal(write(fd, p, n), (ssize_t)n);
    assert_int_equal(close(fd), 0);
}

static bool exists(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0;
}

/* Asserts that opening `f->path` is refused with SL_EINVAL, a message naming the file and
 * containing `expect`, and that the file is byte for byte as it was. */
static void assert_refused_untouched(struct fixture *f, const char *expect)
{
    static uint8_t before[1 << 20];
    static uint8_t after[1 << 20];
    struct sl_store *st = NULL;
    char err[512] = "";
    char wal[PATH_MAX + 8];
    size_t n_before = slurp(f->path, before, sizeof(before));
    size_t n_after;

    assert_int_equal(sl_store_open(f->path, &st, err, sizeof(err)), SL_EINVAL);
    assert_null(st);
    if (strstr(err, f->path) == NULL || strstr(err, expect) == NULL) {
        fail_msg("message \"%s\" lacks the path or \"%s\"", err, expect);
    }
    n_after = slurp(f->path, after, sizeof(after));
    assert_int_equal(n_before, n_after);
    assert_memory_equal(before, after, n_before);
    (void)snprintf(wal, sizeof(wal), "%s-wal", f->path);
    assert_false(exists(wal));
}

static void fresh_database_has_the_schema_version_and_wal(void **state)
{
    struct fixture *f = *state;
    struct stat st;

    open_store(f);
    close_store(f);
    assert_int_equal(raw_int(f->path, "SELECT version FROM schema_version"),
                     SL_STORE_SCHEMA_VERSION);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM schema_version"), 1);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM pragma_journal_mode "
                                      "WHERE journal_mode = 'wal'"),
                     1);
    assert_int_equal(raw_int(f->path, "SELECT value FROM meta WHERE key = 'snapshot_version'"), 0);
    /* The database holds sealed secrets and token hashes: owner only. */
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 077, 0);
}

static void reopening_keeps_the_data(void **state)
{
    struct fixture *f = *state;
    struct sl_user u = { 0 };
    struct sl_user again = { 0 };

    assert_int_equal(sl_store_user_create(open_store(f), "alice", true, NULL, &u), 0);
    close_store(f);
    assert_int_equal(sl_store_user_get_by_name(open_store(f), "alice", &again), 0);
    assert_string_equal(again.id, u.id);
    assert_true(again.is_admin);
    assert_string_equal(again.created_at, u.created_at);
    sl_user_finish(&u);
    sl_user_finish(&again);
}

static void newer_schema_is_refused_with_the_message(void **state)
{
    struct fixture *f = *state;
    char want[128];

    open_store(f);
    close_store(f);
    raw_sql(f->path, "PRAGMA journal_mode = DELETE; UPDATE schema_version SET version = 99");
    (void)snprintf(want, sizeof(want),
                   "has schema version 99; this sluice knows %d: upgrade sluice",
                   SL_STORE_SCHEMA_VERSION);
    assert_refused_untouched(f, want);
}

/* Takes a database of this build back to schema version 2 (before users could be disabled,
 * tokens had scopes, repositories were registered and environments had observe, a pull policy
 * and registry credentials), as far as an older schema needs; downgrade_to_v3() and
 * downgrade_to_v4() are its first steps. */
static void downgrade_to_v4(const char *path)
{
    raw_sql(path, "ALTER TABLE environments DROP COLUMN image_pull;"
                  "ALTER TABLE environments DROP COLUMN registry_json;"
                  "UPDATE schema_version SET version = 4");
}

static void downgrade_to_v3(const char *path)
{
    downgrade_to_v4(path);
    raw_sql(path, "ALTER TABLE environments DROP COLUMN observe_until;"
                  "UPDATE schema_version SET version = 3");
}

static void downgrade_to_v2(const char *path)
{
    downgrade_to_v3(path);
    raw_sql(path, "DROP TABLE repo_members; DROP TABLE repos;"
                  "ALTER TABLE users DROP COLUMN disabled; ALTER TABLE users DROP COLUMN email;"
                  "CREATE TABLE tokens_v2 ("
                  "  hash BLOB PRIMARY KEY NOT NULL CHECK (length(hash) = 32),"
                  "  user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,"
                  "  kind TEXT NOT NULL CHECK (kind IN ('api', 'sandbox')),"
                  "  created_at TEXT NOT NULL);"
                  "INSERT INTO tokens_v2 SELECT hash, user_id, kind, created_at FROM tokens;"
                  "DROP TABLE tokens; ALTER TABLE tokens_v2 RENAME TO tokens;"
                  "CREATE INDEX tokens_user ON tokens (user_id);"
                  "UPDATE schema_version SET version = 2");
}

/* A version 1 database (before jobs and schedules) is upgraded in place and keeps its data. */
static void version_1_database_is_upgraded(void **state)
{
    struct fixture *f = *state;
    struct sl_user u = { 0 };
    struct sl_user again = { 0 };
    struct sl_store_job job = { 0 };
    struct sl_store_job got = { 0 };

    assert_int_equal(sl_store_user_create(open_store(f), "alice", false, NULL, &u), 0);
    close_store(f);
    downgrade_to_v2(f->path);
    raw_sql(f->path,
            "DROP TABLE jobs; DROP TABLE schedules; UPDATE schema_version SET version = 1");
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM sqlite_schema WHERE name = 'jobs'"), 0);
    assert_int_equal(sl_store_user_get_by_name(open_store(f), "alice", &again), 0);
    assert_string_equal(again.id, u.id);
    (void)snprintf(job.owner_id, sizeof(job.owner_id), "%s", u.id);
    job.repo = sl_strdup("acme/widget");
    job.command = sl_strdup("make test");
    assert_int_equal(sl_store_jobs_insert(f->st, &job, 1), 0);
    assert_int_equal(sl_store_job_claim(f->st, &got), 0);
    assert_string_equal(got.id, job.id);
    assert_string_equal(got.status, "running");
    close_store(f);
    assert_int_equal(raw_int(f->path, "SELECT version FROM schema_version"),
                     SL_STORE_SCHEMA_VERSION);
    sl_store_job_finish(&job);
    sl_store_job_finish(&got);
    sl_user_finish(&u);
    sl_user_finish(&again);
}

/* Jobs leave the queue oldest first; a restart's sweep ends the running ones; the end of a job
 * is written once. */
static void jobs_queue_in_order_and_end_once(void **state)
{
    struct fixture *f = *state;
    struct sl_user u = { 0 };
    struct sl_store_job v[3];
    struct sl_store_job got = { 0 };
    struct sl_store_job *list = NULL;
    size_t n = 0;

    memset(v, 0, sizeof(v));
    assert_int_equal(sl_store_user_create(open_store(f), "alice", false, NULL, &u), 0);
    for (size_t i = 0; i < 3; i++) {
        (void)snprintf(v[i].owner_id, sizeof(v[i].owner_id), "%s", u.id);
        v[i].repo = sl_strdup(i == 0 ? "a/one" : i == 1 ? "a/two" : "a/three");
        v[i].command = sl_strdup("true");
    }
    assert_int_equal(sl_store_jobs_insert(f->st, v, 3), 0);
    assert_int_equal(sl_store_job_claim(f->st, &got), 0);
    assert_string_equal(got.id, v[0].id);
    assert_int_equal(
            sl_store_job_end(f->st, got.id, "failed", "{\"exitCode\":2}", NULL, NULL, "sb_1"), 0);
    /* Ended already: not running any more. */
    assert_int_equal(sl_store_job_end(f->st, got.id, "succeeded", NULL, NULL, NULL, NULL),
                     SL_ENOTFOUND);
    sl_store_job_finish(&got);
    assert_int_equal(sl_store_job_claim(f->st, &got), 0);
    assert_string_equal(got.id, v[1].id);
    sl_store_job_finish(&got);
    assert_int_equal(sl_store_jobs_abandon(f->st, "restarted", &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(sl_store_job_get(f->st, v[1].id, &got), 0);
    assert_string_equal(got.status, "error");
    assert_string_equal(got.error, "restarted");
    assert_true(got.finished_at[0] != '\0');
    sl_store_job_finish(&got);
    assert_int_equal(sl_store_job_get(f->st, v[0].id, &got), 0);
    assert_string_equal(got.status, "failed");
    assert_string_equal(got.result_json, "{\"exitCode\":2}");
    assert_string_equal(got.sandbox_id, "sb_1");
    sl_store_job_finish(&got);
    /* Newest first; filtered by status. */
    assert_int_equal(sl_store_job_list(f->st, u.id, NULL, NULL, 10, &list, &n), 0);
    assert_int_equal(n, 3);
    assert_string_equal(list[0].id, v[2].id);
    assert_string_equal(list[0].status, "queued");
    sl_store_free_jobs(list, n);
    assert_int_equal(sl_store_job_list(f->st, NULL, "error", NULL, 10, &list, &n), 0);
    assert_int_equal(n, 1);
    sl_store_free_jobs(list, n);
    for (size_t i = 0; i < 3; i++) {
        sl_store_job_finish(&v[i]);
    }
    sl_user_finish(&u);
}

/* A schedule fires only from the next_run it was read with: a second firing of the same run,
 * or one after a change, writes nothing. */
static void schedules_fire_once_per_run(void **state)
{
    struct fixture *f = *state;
    struct sl_user u = { 0 };
    struct sl_store_schedule s = { 0 };
    struct sl_store_schedule got = { 0 };
    struct sl_store_schedule *due = NULL;
    struct sl_store_job job = { 0 };
    struct sl_store_job *list = NULL;
    size_t n = 0;

    assert_int_equal(sl_store_user_create(open_store(f), "alice", false, NULL, &u), 0);
    (void)snprintf(s.owner_id, sizeof(s.owner_id), "%s", u.id);
    s.name = sl_strdup("nightly");
    s.cron = sl_strdup("* * * * *");
    s.repos_json = sl_strdup("[{\"repo_id\":\"a/one\",\"ref\":null}]");
    s.command = sl_strdup("true");
    s.enabled = true;
    s.next_run = 600;
    assert_int_equal(sl_store_schedule_insert(f->st, &s), 0);
    assert_int_equal(sl_store_schedule_due(f->st, 599, 10, &due, &n), 0);
    assert_int_equal(n, 0);
    sl_store_free_schedules(due, n);
    assert_int_equal(sl_store_schedule_due(f->st, 600, 10, &due, &n), 0);
    assert_int_equal(n, 1);
    sl_store_free_schedules(due, n);
    (void)snprintf(job.owner_id, sizeof(job.owner_id), "%s", u.id);
    (void)snprintf(job.schedule_id, sizeof(job.schedule_id), "%s", s.id);
    job.repo = sl_strdup("a/one");
    job.command = sl_strdup("true");
    assert_int_equal(sl_store_schedule_fire(f->st, s.id, 599, 610, 660, &job, 1), SL_ENOTFOUND);
    assert_int_equal(sl_store_schedule_fire(f->st, s.id, 600, 610, 660, &job, 1), 0);
    assert_int_equal(sl_store_schedule_fire(f->st, s.id, 600, 611, 660, &job, 1), SL_ENOTFOUND);
    assert_int_equal(sl_store_schedule_get(f->st, s.id, &got), 0);
    assert_int_equal(got.last_run, 610);
    assert_int_equal(got.next_run, 660);
    sl_store_schedule_finish(&got);
    assert_int_equal(sl_store_job_list(f->st, NULL, NULL, s.id, 10, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].schedule_id, s.id);
    sl_store_free_jobs(list, n);
    /* Disabled: never due, and a firing read before the change writes nothing. */
    s.enabled = false;
    s.next_run = -1;
    assert_int_equal(sl_store_schedule_replace(f->st, &s), 0);
    assert_int_equal(sl_store_schedule_fire(f->st, s.id, 660, 670, 720, &job, 1), SL_ENOTFOUND);
    assert_int_equal(sl_store_schedule_due(f->st, 100000, 10, &due, &n), 0);
    assert_int_equal(n, 0);
    sl_store_free_schedules(due, n);
    assert_int_equal(sl_store_schedule_delete(f->st, s.id), 0);
    assert_int_equal(sl_store_schedule_get(f->st, s.id, &got), SL_ENOTFOUND);
    sl_store_job_finish(&job);
    sl_store_schedule_finish(&s);
    sl_user_finish(&u);
}

static void random_bytes_file_is_refused_and_left_alone(void **state)
{
    struct fixture *f = *state;
    uint8_t junk[8192];

    randombytes_buf(junk, sizeof(junk));
    write_bytes(f->path, junk, sizeof(junk));
    assert_refused_untouched(f, "not a sluice database");

    /* The SQLite header followed by garbage: a corrupt database. The bytes after the magic
     * make the page size invalid and the journal mode "rollback", so that SQLite deterministically
     * refuses it instead of looking for a WAL file. */
    memcpy(junk, "SQLite format 3", 16);
    junk[16] = 0x00;
    junk[17] = 0x03;
    junk[18] = 0x01;
    junk[19] = 0x01;
    write_bytes(f->path, junk, sizeof(junk));
    assert_refused_untouched(f, "corrupt");

    /* Shorter than the header. */
    write_bytes(f->path, "SQLite", 6);
    assert_refused_untouched(f, "not a sluice database");
}

static void foreign_sqlite_database_is_refused_and_left_alone(void **state)
{
    struct fixture *f = *state;

    raw_sql(f->path, "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);"
                     "INSERT INTO customers (name) VALUES ('acme'), ('globex');");
    assert_refused_untouched(f, "not a sluice database");
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM customers"), 2);
}

/* Records a token of `user_id` (its hash) and fills `*t` with its record. */
static void add_token(struct sl_store *st, const uint8_t hash[SL_TOKEN_HASH_BYTES],
                      const char *user_id, enum sl_token_kind kind, enum sl_token_scope scope,
                      const char *expires_at, struct sl_store_token *t)
{
    memset(t, 0, sizeof(*t));
    (void)snprintf(t->user_id, sizeof(t->user_id), "%s", user_id);
    (void)snprintf(t->expires_at, sizeof(t->expires_at), "%s", expires_at);
    t->kind = kind;
    t->scope = scope;
    t->name = sl_strdup("laptop");
    assert_non_null(t->name);
    assert_int_equal(sl_store_token_add(st, hash, t), 0);
}

/* A database written before names were unique ignoring case may hold `Carol` and `carol`: it
 * opens, each is found by its own name, and a third spelling is refused. */
static void names_differing_in_case_from_before_still_work(void **state)
{
    struct fixture *f = *state;
    struct sl_store *st = open_store(f);
    struct sl_user u = { 0 };

    assert_int_equal(sl_store_user_create(st, "carol", false, NULL, &u), 0);
    sl_user_finish(&u);
    close_store(f);
    raw_sql(f->path, "INSERT INTO users (id, name, is_admin, created_at) VALUES "
                     "('00000000-0000-4000-8000-0000000ca201', 'Carol', 0, "
                     "'2026-01-01T00:00:00Z')");
    st = open_store(f);
    assert_int_equal(sl_store_user_get_by_name(st, "Carol", &u), 0);
    assert_string_equal(u.id, "00000000-0000-4000-8000-0000000ca201");
    sl_user_finish(&u);
    assert_int_equal(sl_store_user_get_by_name(st, "carol", &u), 0);
    assert_string_not_equal(u.id, "00000000-0000-4000-8000-0000000ca201");
    sl_user_finish(&u);
    assert_int_equal(sl_store_user_create(st, "CAROL", false, NULL, &u), SL_EEXIST);
    assert_non_null(u.name);
    sl_user_finish(&u);
}

/* sl_store_token_add_capped(): the live API tokens of a user count (not the expired ones, not
 * sandbox tokens, not another user's); at the cap nothing is written. */
static void live_tokens_are_capped_per_user(void **state)
{
    struct fixture *f = *state;
    struct sl_store *st = open_store(f);
    struct sl_user a = { 0 };
    struct sl_user b = { 0 };
    struct sl_user u = { 0 };
    struct sl_store_token t;
    struct sl_store_token *v = NULL;
    uint8_t hash[SL_TOKEN_HASH_BYTES];
    size_t n = 0;

    assert_int_equal(sl_store_user_create(st, "a", false, NULL, &a), 0);
    assert_int_equal(sl_store_user_create(st, "b", false, NULL, &b), 0);
    for (int i = 0; i < 5; i++) {
        char text[32];

        (void)snprintf(text, sizeof(text), "sl_cap_%d", i);
        assert_int_equal(sl_token_hash(text, hash), 0);
        memset(&t, 0, sizeof(t));
        (void)snprintf(t.user_id, sizeof(t.user_id), "%s", a.id);
        t.kind = SL_TOKEN_KIND_API;
        /* One expired, one that expires later: only the expired one does not count. */
        (void)snprintf(t.expires_at, sizeof(t.expires_at), "%s",
                       i == 0 ? "2001-01-01T00:00:00Z" : (i == 1 ? "2999-01-01T00:00:00Z" : ""));
        assert_int_equal(sl_store_token_add_capped(st, hash, &t, 4), 0);
    }
    /* A sandbox token of a, and b's, do not count. */
    assert_int_equal(sl_token_hash("sl_cap_sandbox", hash), 0);
    add_token(st, hash, a.id, SL_TOKEN_KIND_SANDBOX, SL_TOKEN_SCOPE_WRITE, "", &t);
    sl_store_token_finish(&t);
    assert_int_equal(sl_token_hash("sl_cap_b", hash), 0);
    memset(&t, 0, sizeof(t));
    (void)snprintf(t.user_id, sizeof(t.user_id), "%s", b.id);
    t.kind = SL_TOKEN_KIND_API;
    assert_int_equal(sl_store_token_add_capped(st, hash, &t, 4), 0);
    /* a holds 4 live ones: the fifth is refused, nothing written. */
    assert_int_equal(sl_token_hash("sl_cap_over", hash), 0);
    memset(&t, 0, sizeof(t));
    (void)snprintf(t.user_id, sizeof(t.user_id), "%s", a.id);
    t.kind = SL_TOKEN_KIND_API;
    assert_int_equal(sl_store_token_add_capped(st, hash, &t, 4), SL_ETOOBIG);
    assert_int_equal(sl_store_token_list(st, a.id, &v, &n), 0);
    assert_int_equal(n, 5);
    sl_store_free_tokens(v, n);
    assert_int_equal(sl_store_token_find_user(st, hash, &u, NULL), SL_ENOTFOUND);
    assert_int_equal(sl_store_token_add_capped(st, hash, &t, 5), 0);
    sl_user_finish(&a);
    sl_user_finish(&b);
}

static void users_are_unique_by_name_and_found_by_token(void **state)
{
    struct fixture *f = *state;
    struct sl_store *st = open_store(f);
    struct sl_user alice = { 0 };
    struct sl_user bob = { 0 };
    struct sl_user u = { 0 };
    struct sl_user *all = NULL;
    struct sl_store_token t = { 0 };
    struct sl_store_token t2 = { 0 };
    struct sl_store_token found = { 0 };
    char token[SL_TOKEN_SIZE];
    uint8_t hash[SL_TOKEN_HASH_BYTES];
    uint8_t other[SL_TOKEN_HASH_BYTES];
    size_t n = 0;

    assert_int_equal(sl_store_user_create(st, "bob", false, NULL, &bob), 0);
    assert_int_equal(sl_store_user_create(st, "alice", true, NULL, &alice), 0);
    assert_int_equal(strlen(alice.id), SL_UUID_LEN);
    assert_string_not_equal(alice.id, bob.id);
    assert_int_equal(sl_store_user_create(st, "alice", false, NULL, &u), SL_EEXIST);
    assert_string_equal(u.name, "alice");
    sl_user_finish(&u);
    /* Taken ignoring ASCII case: `u` says by whom. */
    assert_int_equal(sl_store_user_create(st, "ALICE", false, NULL, &u), SL_EEXIST);
    assert_string_equal(u.name, "alice");
    assert_string_equal(u.id, alice.id);
    sl_user_finish(&u);
    assert_int_equal(sl_store_user_create(st, "Bob", false, NULL, &u), SL_EEXIST);
    assert_string_equal(u.name, "bob");
    sl_user_finish(&u);
    assert_int_equal(sl_store_user_create(st, "", false, NULL, &u), SL_EINVAL);

    assert_int_equal(sl_store_user_get(st, bob.id, &u), 0);
    assert_string_equal(u.name, "bob");
    assert_false(u.is_admin);
    sl_user_finish(&u);
    assert_int_equal(sl_store_user_get_by_name(st, "alice", &u), 0);
    assert_string_equal(u.id, alice.id);
    assert_true(u.is_admin);
    sl_user_finish(&u);
    assert_int_equal(sl_store_user_get(st, "no-such-id", &u), SL_ENOTFOUND);
    assert_int_equal(sl_store_user_get_by_name(st, "carol", &u), SL_ENOTFOUND);

    assert_int_equal(sl_store_user_list(st, &all, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(all[0].name, "alice");
    assert_string_equal(all[1].name, "bob");
    sl_store_free_users(all, n);

    assert_int_equal(sl_token_new(token), 0);
    assert_int_equal(sl_token_hash(token, hash), 0);
    add_token(st, hash, alice.id, SL_TOKEN_KIND_SANDBOX, SL_TOKEN_SCOPE_WRITE, "", &t);
    assert_int_equal(strlen(t.id), 20);
    assert_memory_equal(t.id, "tok_", 4);
    /* The same hash twice, or a token of nobody, is refused. */
    memset(&t2, 0, sizeof(t2));
    (void)snprintf(t2.user_id, sizeof(t2.user_id), "%s", bob.id);
    assert_int_equal(sl_store_token_add(st, hash, &t2), SL_EEXIST);
    assert_int_equal(sl_token_hash("sl_other", other), 0);
    memset(&t2, 0, sizeof(t2));
    (void)snprintf(t2.user_id, sizeof(t2.user_id), "no-such-user");
    assert_int_equal(sl_store_token_add(st, other, &t2), SL_ENOTFOUND);
    assert_int_equal(sl_store_token_find_user(st, hash, &u, &found), 0);
    assert_string_equal(u.name, "alice");
    assert_int_equal(found.kind, SL_TOKEN_KIND_SANDBOX);
    assert_int_equal(found.scope, SL_TOKEN_SCOPE_WRITE);
    assert_string_equal(found.id, t.id);
    assert_string_equal(found.expires_at, "");
    sl_user_finish(&u);
    sl_store_token_finish(&found);
    assert_int_equal(sl_store_token_find_user(st, other, &u, NULL), SL_ENOTFOUND);
    assert_int_equal(sl_store_token_delete(st, hash), 0);
    assert_int_equal(sl_store_token_delete(st, hash), SL_ENOTFOUND);
    assert_int_equal(sl_store_token_find_user(st, hash, &u, NULL), SL_ENOTFOUND);
    sl_store_token_finish(&t);

    sl_user_finish(&alice);
    sl_user_finish(&bob);
}

/* A row with owned strings, for the store to write; sl_env_row_finish() frees it. */
static void make_env(struct sl_env_row *r, enum sl_scope scope, const char *owner, const char *name,
                     const char *const *repos, size_t n_repos)
{
    memset(r, 0, sizeof(*r));
    r->scope = scope;
    if (owner != NULL) {
        (void)snprintf(r->owner_id, sizeof(r->owner_id), "%s", owner);
    }
    r->name = sl_strdup(name);
    r->description = sl_strdup("");
    r->base_image = sl_strdup("python:3.12-slim");
    r->cpus_centi = 150;
    r->memory_bytes = 2LL << 30;
    r->network = true;
    r->env_json = sl_strdup("[]");
    r->egress_json = sl_strdup("{\"default\":\"deny\",\"rules\":[]}");
    assert_true(r->name && r->description && r->base_image && r->env_json && r->egress_json);
    r->n_repos = n_repos;
    if (n_repos > 0) {
        r->repos = sl_calloc(n_repos, sizeof(*r->repos));
        assert_non_null(r->repos);
        for (size_t i = 0; i < n_repos; i++) {
            r->repos[i] = sl_strdup(repos[i]);
            assert_non_null(r->repos[i]);
        }
    }
}

/* Inserts a row made by make_env() and returns its new id in `id`. */
static int insert_env(struct sl_store *st, enum sl_scope scope, const char *owner, const char *name,
                      const char *const *repos, size_t n_repos, char id[SL_UUID_LEN + 1],
                      struct sl_store_conflict_info *c)
{
    struct sl_env_row r;
    int rc;

    make_env(&r, scope, owner, name, repos, n_repos);
    rc = sl_store_env_insert(st, &r, c);
    if (id != NULL) {
        memcpy(id, r.id, SL_UUID_LEN + 1);
    }
    sl_env_row_finish(&r);
    return rc;
}

static void replace_repos(struct sl_env_row *r, const char *const *repos, size_t n)
{
    for (size_t i = 0; i < r->n_repos; i++) {
        sl_free(r->repos[i]);
    }
    sl_free(r->repos);
    r->repos = n == 0 ? NULL : sl_calloc(n, sizeof(*r->repos));
    for (size_t i = 0; i < n; i++) {
        r->repos[i] = sl_strdup(repos[i]);
        assert_non_null(r->repos[i]);
    }
    r->n_repos = n;
}

/* The refusal reported in `c`: its kind, and the other environment's id and name and the
 * repository where given (NULL: not checked). */
static void expect_conflict(const struct sl_store_conflict_info *c, enum sl_store_conflict kind,
                            const char *env_id, const char *env_name, const char *repo)
{
    assert_int_equal(c->kind, kind);
    if (env_id != NULL) {
        assert_string_equal(c->env_id, env_id);
    }
    if (env_name != NULL) {
        assert_string_equal(c->env_name, env_name);
    }
    if (repo != NULL) {
        assert_string_equal(c->repo, repo);
    }
}

/* The users "alice" and "bob" (neither an admin), for the environment tests. */
/* Creates the users alice and bob (the fixture's, finished by teardown) in the open store. */
static void add_alice_and_bob(struct fixture *f)
{
    assert_int_equal(sl_store_user_create(f->st, "alice", false, NULL, &f->alice), 0);
    assert_int_equal(sl_store_user_create(f->st, "bob", false, NULL, &f->bob), 0);
}

static void environments_are_inserted_and_read_back(void **state)
{
    static const char *const repos[] = { "acme/website", "group/sub/repo" };
    struct fixture *f = *state;
    struct sl_store *st = open_store(f);
    struct sl_user alice = { 0 };
    struct sl_env_row r;
    struct sl_env_row got = { 0 };

    assert_int_equal(sl_store_user_create(st, "alice", false, NULL, &alice), 0);
    make_env(&r, SL_SCOPE_USER, alice.id, "ci-python", repos, 2);
    sl_free(r.egress_json);
    r.egress_json = NULL;
    r.network = false;
    r.memory_bytes = -1;
    assert_int_equal(sl_store_env_insert(st, &r, NULL), 0);
    assert_int_equal(strlen(r.id), SL_UUID_LEN);
    assert_int_equal(strlen(r.created_at), 20);
    assert_string_equal(r.created_at, r.updated_at);

    assert_int_equal(sl_store_env_get(st, r.id, &got), 0);
    assert_string_equal(got.name, "ci-python");
    assert_int_equal(got.scope, SL_SCOPE_USER);
    assert_string_equal(got.owner_id, alice.id);
    assert_false(got.is_default);
    assert_string_equal(got.base_image, "python:3.12-slim");
    assert_int_equal(got.cpus_centi, 150);
    assert_int_equal(got.memory_bytes, -1);
    assert_false(got.network);
    assert_string_equal(got.env_json, "[]");
    assert_null(got.egress_json);
    assert_false(got.image_pull_always);
    assert_null(got.registry_json);
    assert_int_equal(got.n_repos, 2);
    assert_string_equal(got.repos[0], "acme/website");
    assert_string_equal(got.repos[1], "group/sub/repo");
    sl_env_row_finish(&got);

    assert_int_equal(sl_store_env_get_by_name(st, SL_SCOPE_USER, alice.id, "ci-python", &got), 0);
    assert_string_equal(got.id, r.id);
    sl_env_row_finish(&got);
    assert_int_equal(sl_store_env_get_by_name(st, SL_SCOPE_GLOBAL, NULL, "ci-python", &got),
                     SL_ENOTFOUND);
    assert_int_equal(sl_store_env_get(st, "no-such-id", &got), SL_ENOTFOUND);
    assert_int_equal(sl_store_env_find_by_repo(st, SL_SCOPE_USER, alice.id, "group/sub/repo", &got),
                     0);
    assert_string_equal(got.id, r.id);
    sl_env_row_finish(&got);

    sl_env_row_finish(&r);
    sl_user_finish(&alice);
}

/* Observe (learn mode): set and ended by its own calls only, never by a replace; the deadline
 * sweep ends those due, once, and says which; a version 3 database gets the column, empty. */
static void observe_is_set_apart_and_ends_at_its_deadline(void **state)
{
    struct fixture *f = *state;
    struct sl_store *st = open_store(f);
    struct sl_env_row a;
    struct sl_env_row b;
    struct sl_env_row got = { 0 };
    struct sl_env_row *ended = NULL;
    size_t n = 0;

    make_env(&a, SL_SCOPE_GLOBAL, NULL, "a", NULL, 0);
    make_env(&b, SL_SCOPE_GLOBAL, NULL, "b", NULL, 0);
    assert_int_equal(sl_store_env_insert(st, &a, NULL), 0);
    assert_int_equal(sl_store_env_insert(st, &b, NULL), 0);
    assert_int_equal(sl_store_env_get(st, a.id, &got), 0);
    assert_int_equal(got.observe_until, -1);
    sl_env_row_finish(&got);
    /* A replace writes the stored state back: not in observe. */
    a.observe_until = 77;
    assert_int_equal(sl_store_env_replace(st, &a, NULL), 0);
    assert_int_equal(a.observe_until, -1);
    assert_int_equal(sl_store_env_set_observe(st, a.id, 1000), 0);
    assert_int_equal(sl_store_env_set_observe(st, b.id, 2000), 0);
    assert_int_equal(sl_store_env_set_observe(st, "00000000-0000-4000-8000-000000000000", 5),
                     SL_ENOTFOUND);
    /* A replace (a PUT) keeps it: the column is not the request's. */
    a.observe_until = -1;
    assert_int_equal(sl_store_env_replace(st, &a, NULL), 0);
    /* ... and writes it back, so that the PUT's answer shows the deadline. */
    assert_int_equal(a.observe_until, 1000);
    assert_int_equal(sl_store_env_get(st, a.id, &got), 0);
    assert_int_equal(got.observe_until, 1000);
    assert_string_equal(got.updated_at, a.updated_at);
    sl_env_row_finish(&got);
    assert_int_equal(sl_store_env_end_observes(st, 999, &ended, &n), 0);
    assert_int_equal(n, 0);
    assert_null(ended);
    assert_int_equal(sl_store_env_end_observes(st, 1500, &ended, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(ended[0].id, a.id);
    assert_int_equal(ended[0].observe_until, 1000);
    sl_store_free_envs(ended, n);
    assert_int_equal(sl_store_env_end_observes(st, 1500, &ended, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(sl_store_env_get(st, a.id, &got), 0);
    assert_int_equal(got.observe_until, -1);
    sl_env_row_finish(&got);
    /* Ended by hand. */
    assert_int_equal(sl_store_env_set_observe(st, b.id, 0), 0);
    assert_int_equal(sl_store_env_get(st, b.id, &got), 0);
    assert_int_equal(got.observe_until, -1);
    sl_env_row_finish(&got);
    assert_int_equal(sl_store_env_set_observe(st, b.id, 3000), 0);
    close_store(f);
    downgrade_to_v3(f->path);
    assert_int_equal(sl_store_env_get(open_store(f), b.id, &got), 0);
    assert_int_equal(got.observe_until, -1);
    assert_int_equal(raw_int(f->path, "SELECT version FROM schema_version"),
                     SL_STORE_SCHEMA_VERSION);
    sl_env_row_finish(&got);
    sl_env_row_finish(&a);
    sl_env_row_finish(&b);
}

static void environments_are_replaced_whole_and_deleted(void **state)
{
    static const char *const repos[] = { "acme/website", "group/sub/repo" };
    static const char *const repos2[] = { "acme/api" };
    struct fixture *f = *state;
    struct sl_store *st = open_store(f);
    struct sl_user alice = { 0 };
    struct sl_env_row r;
    struct sl_env_row got = { 0 };

    assert_int_equal(sl_store_user_create(st, "alice", false, NULL, &alice), 0);
    make_env(&r, SL_SCOPE_USER, alice.id, "ci-python", repos, 2);
    assert_int_equal(sl_store_env_insert(st, &r, NULL), 0);
    sl_free(r.egress_json);
    r.egress_json = NULL;

    /* Replace: every field and the whole repository list. */
    sl_free(r.name);
    r.name = sl_strdup("ci-python-3");
    sl_free(r.description);
    r.description = sl_strdup("for CI");
    r.cpus_centi = -1;
    r.memory_bytes = 512LL << 20;
    r.network = true;
    r.egress_json = sl_strdup("{}");
    r.image_pull_always = true;
    r.registry_json = sl_strdup("{\"username\":\"bob\",\"sealed\":\"c2VhbGVk\"}");
    replace_repos(&r, repos2, 1);
    assert_int_equal(sl_store_env_replace(st, &r, NULL), 0);
    assert_int_equal(sl_store_env_get(st, r.id, &got), 0);
    assert_true(got.image_pull_always);
    assert_string_equal(got.registry_json, "{\"username\":\"bob\",\"sealed\":\"c2VhbGVk\"}");
    assert_string_equal(got.name, "ci-python-3");
    assert_string_equal(got.description, "for CI");
    assert_int_equal(got.cpus_centi, -1);
    assert_int_equal(got.memory_bytes, 512LL << 20);
    assert_true(got.network);
    assert_string_equal(got.egress_json, "{}");
    assert_int_equal(got.n_repos, 1);
    assert_string_equal(got.repos[0], "acme/api");
    assert_string_equal(got.created_at, r.created_at);
    sl_env_row_finish(&got);
    assert_int_equal(sl_store_env_find_by_repo(st, SL_SCOPE_USER, alice.id, "acme/website", &got),
                     SL_ENOTFOUND);

    /* Rules the store keeps: no egress with the network off, owner iff user scope. */
    r.network = false;
    assert_int_equal(sl_store_env_replace(st, &r, NULL), SL_EINVAL);
    r.network = true;
    r.scope = SL_SCOPE_GLOBAL;
    assert_int_equal(sl_store_env_replace(st, &r, NULL), SL_EINVAL);
    r.scope = SL_SCOPE_USER;
    r.cpus_centi = 0;
    assert_int_equal(sl_store_env_replace(st, &r, NULL), SL_EINVAL);
    r.cpus_centi = -1;

    assert_int_equal(sl_store_env_delete(st, r.id, NULL), 0);
    assert_int_equal(sl_store_env_get(st, r.id, &got), SL_ENOTFOUND);
    assert_int_equal(sl_store_env_delete(st, r.id, NULL), SL_ENOTFOUND);
    assert_int_equal(sl_store_env_replace(st, &r, NULL), SL_ENOTFOUND);

    /* An owner that does not exist. */
    assert_int_equal(insert_env(st, SL_SCOPE_USER, "no-such-user", "x", NULL, 0, NULL, NULL),
                     SL_ENOTFOUND);
    sl_env_row_finish(&r);
    sl_user_finish(&alice);
}

static void visible_environments_are_hers_then_global_by_name(void **state)
{
    struct fixture *f = *state;
    struct sl_store *st = open_store(f);
    struct sl_env_row *list = NULL;
    size_t n = 0;

    add_alice_and_bob(f);
    assert_int_equal(insert_env(st, SL_SCOPE_USER, f->alice.id, "ci-python", NULL, 0, NULL, NULL),
                     0);
    assert_int_equal(insert_env(st, SL_SCOPE_GLOBAL, NULL, "base", NULL, 0, NULL, NULL), 0);
    assert_int_equal(insert_env(st, SL_SCOPE_GLOBAL, NULL, "aardvark", NULL, 0, NULL, NULL), 0);
    assert_int_equal(insert_env(st, SL_SCOPE_USER, f->alice.id, "zeta", NULL, 0, NULL, NULL), 0);
    assert_int_equal(insert_env(st, SL_SCOPE_USER, f->bob.id, "bobs", NULL, 0, NULL, NULL), 0);
    assert_int_equal(sl_store_env_list_visible(st, f->alice.id, &list, &n), 0);
    assert_int_equal(n, 4);
    assert_string_equal(list[0].name, "ci-python");
    assert_string_equal(list[1].name, "zeta");
    assert_string_equal(list[2].name, "aardvark");
    assert_string_equal(list[3].name, "base");
    sl_store_free_envs(list, n);
    assert_int_equal(sl_store_env_list_visible(st, NULL, &list, &n), 0);
    assert_int_equal(n, 2);
    sl_store_free_envs(list, n);
    assert_int_equal(sl_store_env_list_all(st, &list, &n), 0);
    assert_int_equal(n, 5);
    sl_store_free_envs(list, n);
}

static void environment_names_are_unique_per_scope_and_owner(void **state)
{
    struct fixture *f = *state;
    struct sl_store *st = open_store(f);
    struct sl_store_conflict_info c = { 0 };
    struct sl_env_row r = { 0 };
    char first[SL_UUID_LEN + 1];
    char global[SL_UUID_LEN + 1];
    char other[SL_UUID_LEN + 1];

    add_alice_and_bob(f);
    assert_int_equal(insert_env(st, SL_SCOPE_USER, f->alice.id, "ci", NULL, 0, first, &c), 0);
    assert_int_equal(c.kind, SL_STORE_CONFLICT_NONE);
    assert_int_equal(insert_env(st, SL_SCOPE_USER, f->alice.id, "ci", NULL, 0, NULL, &c),
                     SL_EEXIST);
    expect_conflict(&c, SL_STORE_CONFLICT_NAME, first, "ci", NULL);
    /* The same name elsewhere: another user's scope, and global. */
    assert_int_equal(insert_env(st, SL_SCOPE_USER, f->bob.id, "ci", NULL, 0, NULL, &c), 0);
    assert_int_equal(c.kind, SL_STORE_CONFLICT_NONE);
    assert_int_equal(insert_env(st, SL_SCOPE_GLOBAL, NULL, "ci", NULL, 0, global, &c), 0);
    assert_int_equal(insert_env(st, SL_SCOPE_GLOBAL, NULL, "ci", NULL, 0, NULL, &c), SL_EEXIST);
    expect_conflict(&c, SL_STORE_CONFLICT_NAME, global, NULL, NULL);

    /* Renaming onto a taken name. */
    assert_int_equal(insert_env(st, SL_SCOPE_USER, f->alice.id, "other", NULL, 0, other, &c), 0);
    assert_int_equal(sl_store_env_get(st, other, &r), 0);
    sl_free(r.name);
    r.name = sl_strdup("ci");
    assert_int_equal(sl_store_env_replace(st, &r, &c), SL_EEXIST);
    expect_conflict(&c, SL_STORE_CONFLICT_NAME, first, NULL, NULL);
    /* Keeping its own name is no conflict. */
    sl_free(r.name);
    r.name = sl_strdup("other");
    assert_int_equal(sl_store_env_replace(st, &r, &c), 0);
    assert_int_equal(c.kind, SL_STORE_CONFLICT_NONE);

    /* A given id that is taken. */
    sl_env_row_finish(&r);
    make_env(&r, SL_SCOPE_USER, f->alice.id, "fresh", NULL, 0);
    memcpy(r.id, first, sizeof(r.id));
    assert_int_equal(sl_store_env_insert(st, &r, &c), SL_EEXIST);
    assert_int_equal(c.kind, SL_STORE_CONFLICT_ID);

    sl_env_row_finish(&r);
    sl_store_conflict_finish(&c);
}

static void one_default_at_a_time_and_it_cannot_be_deleted(void **state)
{
    struct fixture *f = *state;
    struct sl_store *st = open_store(f);
    struct sl_store_conflict_info c = { 0 };
    struct sl_user alice = { 0 };
    struct sl_env_row r = { 0 };
    char g1[SL_UUID_LEN + 1];
    char g2[SL_UUID_LEN + 1];
    char u1[SL_UUID_LEN + 1];

    assert_int_equal(sl_store_user_create(st, "alice", false, NULL, &alice), 0);
    assert_int_equal(insert_env(st, SL_SCOPE_GLOBAL, NULL, "g1", NULL, 0, g1, NULL), 0);
    assert_int_equal(insert_env(st, SL_SCOPE_GLOBAL, NULL, "g2", NULL, 0, g2, NULL), 0);
    assert_int_equal(insert_env(st, SL_SCOPE_USER, alice.id, "u1", NULL, 0, u1, NULL), 0);
    assert_int_equal(sl_store_env_get_default(st, &r), SL_ENOTFOUND);

    assert_int_equal(sl_store_env_set_default(st, g1, &c), 0);
    assert_int_equal(sl_store_env_get_default(st, &r), 0);
    assert_string_equal(r.id, g1);
    assert_true(r.is_default);
    sl_env_row_finish(&r);
    assert_int_equal(sl_store_env_set_default(st, g1, &c), 0);

    assert_int_equal(sl_store_env_set_default(st, g2, &c), 0);
    assert_int_equal(sl_store_env_get_default(st, &r), 0);
    assert_string_equal(r.id, g2);
    sl_env_row_finish(&r);
    assert_int_equal(sl_store_env_get(st, g1, &r), 0);
    assert_false(r.is_default);
    sl_env_row_finish(&r);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM environments WHERE is_default = 1"), 1);

    assert_int_equal(sl_store_env_set_default(st, u1, &c), SL_EINVAL);
    assert_int_equal(c.kind, SL_STORE_CONFLICT_NOT_GLOBAL);
    assert_int_equal(sl_store_env_set_default(st, "no-such-id", &c), SL_ENOTFOUND);

    assert_int_equal(sl_store_env_delete(st, g2, &c), SL_EINVAL);
    assert_int_equal(c.kind, SL_STORE_CONFLICT_IS_DEFAULT);
    assert_int_equal(sl_store_env_get(st, g2, &r), 0);
    /* Nor may it move to user scope; a replace keeps is_default as stored. */
    r.scope = SL_SCOPE_USER;
    memcpy(r.owner_id, alice.id, sizeof(r.owner_id));
    assert_int_equal(sl_store_env_replace(st, &r, &c), SL_EINVAL);
    assert_int_equal(c.kind, SL_STORE_CONFLICT_IS_DEFAULT);
    r.scope = SL_SCOPE_GLOBAL;
    r.owner_id[0] = '\0';
    r.is_default = false;
    assert_int_equal(sl_store_env_replace(st, &r, &c), 0);
    assert_true(r.is_default);
    sl_env_row_finish(&r);

    /* Inserting a default demotes the previous one in the same transaction. */
    make_env(&r, SL_SCOPE_GLOBAL, NULL, "g3", NULL, 0);
    r.is_default = true;
    assert_int_equal(sl_store_env_insert(st, &r, &c), 0);
    sl_env_row_finish(&r);
    assert_int_equal(sl_store_env_get_default(st, &r), 0);
    assert_string_equal(r.name, "g3");
    sl_env_row_finish(&r);
    make_env(&r, SL_SCOPE_USER, alice.id, "u2", NULL, 0);
    r.is_default = true;
    assert_int_equal(sl_store_env_insert(st, &r, &c), SL_EINVAL);
    assert_int_equal(c.kind, SL_STORE_CONFLICT_NOT_GLOBAL);
    sl_env_row_finish(&r);

    /* Once another is the default, the old one may go. */
    assert_int_equal(sl_store_env_delete(st, g2, &c), 0);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM environments WHERE is_default = 1"), 1);
    sl_store_conflict_finish(&c);
    sl_user_finish(&alice);
}

static void repository_bindings_conflict_within_scope_and_owner_only(void **state)
{
    static const char *const web[] = { "acme/web" };
    static const char *const web_and_api[] = { "acme/api", "acme/web" };
    static const char *const twice[] = { "acme/x", "acme/x" };
    struct fixture *f = *state;
    struct sl_store *st = open_store(f);
    struct sl_store_conflict_info c = { 0 };
    struct sl_env_row r = { 0 };
    char a[SL_UUID_LEN + 1];
    char g[SL_UUID_LEN + 1];
    char b[SL_UUID_LEN + 1];

    add_alice_and_bob(f);
    assert_int_equal(insert_env(st, SL_SCOPE_USER, f->alice.id, "A", web, 1, a, &c), 0);

    /* Another of alice's environments: refused, naming A; nothing of B was written. */
    assert_int_equal(insert_env(st, SL_SCOPE_USER, f->alice.id, "B", web_and_api, 2, NULL, &c),
                     SL_EEXIST);
    expect_conflict(&c, SL_STORE_CONFLICT_REPO, a, "A", "acme/web");
    assert_int_equal(sl_store_env_get_by_name(st, SL_SCOPE_USER, f->alice.id, "B", &r),
                     SL_ENOTFOUND);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM env_repos WHERE repo = 'acme/api'"), 0);

    /* Bob's scope and the global scope may each bind it once. */
    assert_int_equal(insert_env(st, SL_SCOPE_USER, f->bob.id, "B", web, 1, b, &c), 0);
    assert_int_equal(insert_env(st, SL_SCOPE_GLOBAL, NULL, "G", web, 1, g, &c), 0);
    assert_int_equal(insert_env(st, SL_SCOPE_GLOBAL, NULL, "G2", web, 1, NULL, &c), SL_EEXIST);
    expect_conflict(&c, SL_STORE_CONFLICT_REPO, g, "G", NULL);

    assert_int_equal(sl_store_env_find_by_repo(st, SL_SCOPE_GLOBAL, NULL, "acme/web", &r), 0);
    assert_string_equal(r.id, g);
    sl_env_row_finish(&r);
    assert_int_equal(sl_store_env_find_by_repo(st, SL_SCOPE_USER, f->bob.id, "acme/web", &r), 0);
    assert_string_equal(r.id, b);
    sl_env_row_finish(&r);

    /* A row that lists a repository twice. */
    assert_int_equal(insert_env(st, SL_SCOPE_USER, f->alice.id, "T", twice, 2, NULL, &c),
                     SL_EINVAL);
    expect_conflict(&c, SL_STORE_CONFLICT_REPO_TWICE, NULL, NULL, "acme/x");

    /* Replacing A with its own repository and a new one is fine. */
    assert_int_equal(sl_store_env_get(st, a, &r), 0);
    replace_repos(&r, web_and_api, 2);
    assert_int_equal(sl_store_env_replace(st, &r, &c), 0);
    sl_env_row_finish(&r);

    /* Deleting A frees its repositories (ON DELETE CASCADE). */
    assert_int_equal(sl_store_env_delete(st, a, &c), 0);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM env_repos WHERE env_id IN "
                                      "(SELECT id FROM environments WHERE name = 'A')"),
                     0);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM env_repos"), 2);
    assert_int_equal(insert_env(st, SL_SCOPE_USER, f->alice.id, "B", web_and_api, 2, NULL, &c), 0);

    sl_store_conflict_finish(&c);
}

/* A replace refused at its last repository leaves the row as it was: name, fields and
 * repositories (the update and the unbinding had run, and were rolled back). */
static void refused_replace_leaves_the_row_as_it_was(void **state)
{
    static const char *const web[] = { "acme/web" };
    static const char *const mine[] = { "acme/mine" };
    static const char *const new_and_web[] = { "acme/new", "acme/web" };
    struct fixture *f = *state;
    struct sl_store *st = open_store(f);
    struct sl_store_conflict_info c = { 0 };
    struct sl_user alice = { 0 };
    struct sl_env_row r = { 0 };
    char a[SL_UUID_LEN + 1];

    assert_int_equal(sl_store_user_create(st, "alice", false, NULL, &alice), 0);
    assert_int_equal(insert_env(st, SL_SCOPE_USER, alice.id, "A", web, 1, a, &c), 0);
    assert_int_equal(insert_env(st, SL_SCOPE_USER, alice.id, "C", mine, 1, NULL, &c), 0);
    assert_int_equal(sl_store_env_get_by_name(st, SL_SCOPE_USER, alice.id, "C", &r), 0);
    sl_free(r.name);
    r.name = sl_strdup("C2");
    r.cpus_centi = 400;
    replace_repos(&r, new_and_web, 2);
    assert_int_equal(sl_store_env_replace(st, &r, &c), SL_EEXIST);
    expect_conflict(&c, SL_STORE_CONFLICT_REPO, a, NULL, NULL);
    sl_env_row_finish(&r);

    assert_int_equal(sl_store_env_get_by_name(st, SL_SCOPE_USER, alice.id, "C", &r), 0);
    assert_int_equal(r.cpus_centi, 150);
    assert_int_equal(r.n_repos, 1);
    assert_string_equal(r.repos[0], "acme/mine");
    sl_env_row_finish(&r);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM env_repos WHERE repo = 'acme/new'"), 0);
    sl_store_conflict_finish(&c);
    sl_user_finish(&alice);
}

static void static_clients_are_created_listed_and_deleted(void **state)
{
    struct fixture *f = *state;
    struct sl_store *st = open_store(f);
    struct sl_store_conflict_info c = { 0 };
    struct sl_store_client cl = { 0 };
    struct sl_store_client *list = NULL;
    char env[SL_UUID_LEN + 1];
    size_t n = 0;

    assert_int_equal(insert_env(st, SL_SCOPE_GLOBAL, NULL, "ci-python", NULL, 0, env, NULL), 0);
    cl.id = sl_strdup("ci-runners");
    cl.cidr = sl_strdup("10.20.0.0/16");
    memcpy(cl.env_id, env, sizeof(cl.env_id));
    assert_int_equal(sl_store_client_create(st, &cl), 0);
    assert_int_equal(strlen(cl.created_at), 20);
    assert_int_equal(sl_store_client_create(st, &cl), SL_EEXIST);
    sl_store_client_finish(&cl);

    cl.id = sl_strdup("build-host");
    cl.token_sealed = sl_strdup("c2VhbGVk");
    cl.ip = sl_strdup("192.0.2.7");
    memcpy(cl.env_id, env, sizeof(cl.env_id));
    assert_int_equal(sl_store_client_create(st, &cl), 0);
    memcpy(cl.env_id, "no-such-env", sizeof("no-such-env"));
    sl_free(cl.id);
    cl.id = sl_strdup("orphan");
    assert_int_equal(sl_store_client_create(st, &cl), SL_ENOTFOUND);
    sl_store_client_finish(&cl);

    cl.id = sl_strdup("nothing");
    memcpy(cl.env_id, env, sizeof(cl.env_id));
    assert_int_equal(sl_store_client_create(st, &cl), SL_EINVAL);
    sl_store_client_finish(&cl);

    assert_int_equal(sl_store_client_list(st, &list, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(list[0].id, "build-host");
    assert_string_equal(list[0].env_name, "ci-python");
    assert_string_equal(list[0].ip, "192.0.2.7");
    assert_null(list[0].cidr);
    assert_string_equal(list[0].token_sealed, "c2VhbGVk");
    assert_string_equal(list[1].id, "ci-runners");
    assert_string_equal(list[1].cidr, "10.20.0.0/16");
    assert_null(list[1].ip);
    assert_null(list[1].token_sealed);
    sl_store_free_clients(list, n);

    /* An environment in use by clients stays (ON DELETE RESTRICT). */
    assert_int_equal(sl_store_env_delete(st, env, &c), SL_EINVAL);
    assert_int_equal(c.kind, SL_STORE_CONFLICT_IN_USE);
    assert_int_equal(sl_store_client_delete(st, "ci-runners"), 0);
    assert_int_equal(sl_store_client_delete(st, "ci-runners"), SL_ENOTFOUND);
    assert_int_equal(sl_store_client_delete(st, "build-host"), 0);
    assert_int_equal(sl_store_client_list(st, &list, &n), 0);
    assert_int_equal(n, 0);
    assert_null(list);
    assert_int_equal(sl_store_env_delete(st, env, &c), 0);
    sl_store_conflict_finish(&c);
}

static void snapshot_version_strictly_increases_across_reopen(void **state)
{
    struct fixture *f = *state;
    int64_t v = 0;

    assert_int_equal(sl_store_next_snapshot_version(open_store(f), &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(sl_store_next_snapshot_version(f->st, &v), 0);
    assert_int_equal(v, 2);
    close_store(f);
    assert_int_equal(sl_store_next_snapshot_version(open_store(f), &v), 0);
    assert_int_equal(v, 3);
}

/* ---- concurrency ---- */

#define THREADS         8
#define ENVS_PER_THREAD 20

struct worker {
    struct fixture *f;
    /* Shared store, or NULL: the worker opens its own connection. */
    struct sl_store *shared;
    int index;
    /* Results, checked by the main thread (cmocka asserts are not thread-safe). */
    int failures;
    int64_t versions[ENVS_PER_THREAD];
    char user_id[SL_UUID_LEN + 1];
    char global_id[SL_UUID_LEN + 1];
};

static int worker_env(struct worker *w, struct sl_store *st, int i)
{
    char name[32];
    char r1[48];
    char r2[48];
    char r3[48];
    struct sl_env_row r = { 0 };
    int rc;

    (void)snprintf(name, sizeof(name), "t%d-e%d", w->index, i);
    (void)snprintf(r1, sizeof(r1), "t%d/r%d-a", w->index, i);
    (void)snprintf(r2, sizeof(r2), "t%d/r%d-b", w->index, i);
    (void)snprintf(r3, sizeof(r3), "t%d/r%d-c", w->index, i);
    r.scope = SL_SCOPE_USER;
    memcpy(r.owner_id, w->user_id, sizeof(r.owner_id));
    r.name = sl_strdup(name);
    r.env_json = sl_strdup("[]");
    r.cpus_centi = -1;
    r.memory_bytes = -1;
    r.repos = sl_calloc(2, sizeof(*r.repos));
    if (r.name == NULL || r.env_json == NULL || r.repos == NULL) {
        sl_env_row_finish(&r);
        return SL_ENOMEM;
    }
    r.repos[0] = sl_strdup(r1);
    r.repos[1] = sl_strdup(r2);
    r.n_repos = 2;
    rc = sl_store_env_insert(st, &r, NULL);
    if (rc == 0) {
        /* Update: one repository replaced by another, a description added. */
        sl_free(r.repos[1]);
        r.repos[1] = sl_strdup(r3);
        r.description = sl_strdup("updated");
        rc = sl_store_env_replace(st, &r, NULL);
    }
    if (rc == 0) {
        rc = sl_store_env_set_default(st, w->global_id, NULL);
    }
    if (rc == 0) {
        rc = sl_store_next_snapshot_version(st, &w->versions[i]);
    }
    sl_env_row_finish(&r);
    return rc;
}

static void *worker_run(void *arg)
{
    struct worker *w = arg;
    struct sl_store *st = w->shared;
    char err[256];

    if (st == NULL && sl_store_open(w->f->path, &st, err, sizeof(err)) != 0) {
        w->failures++;
        return NULL;
    }
    for (int i = 0; i < ENVS_PER_THREAD; i++) {
        if (worker_env(w, st, i) != 0) {
            w->failures++;
        }
    }
    if (w->shared == NULL) {
        sl_store_close(st);
    }
    return NULL;
}

static int cmp_version(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a;
    int64_t y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* Runs THREADS workers and checks that every change landed whole. */
static void run_workers(struct fixture *f, bool shared)
{
    static struct worker w[THREADS];
    static int64_t all[THREADS * ENVS_PER_THREAD];
    pthread_t tid[THREADS];
    struct sl_env_row *list = NULL;
    struct sl_user u = { 0 };
    struct sl_store *st;
    size_t n = 0;
    char name[32];

    st = open_store(f);
    for (int t = 0; t < THREADS; t++) {
        memset(&w[t], 0, sizeof(w[t]));
        w[t].f = f;
        w[t].shared = shared ? st : NULL;
        w[t].index = t;
        (void)snprintf(name, sizeof(name), "user-%d", t);
        assert_int_equal(sl_store_user_create(st, name, false, NULL, &u), 0);
        memcpy(w[t].user_id, u.id, sizeof(u.id));
        sl_user_finish(&u);
        (void)snprintf(name, sizeof(name), "global-%d", t);
        assert_int_equal(insert_env(st, SL_SCOPE_GLOBAL, NULL, name, NULL, 0, w[t].global_id, NULL),
                         0);
    }
    if (!shared) {
        close_store(f);
    }
    for (int t = 0; t < THREADS; t++) {
        assert_int_equal(pthread_create(&tid[t], NULL, worker_run, &w[t]), 0);
    }
    /* Every thread is joined before any assertion can leave this frame. */
    for (int t = 0; t < THREADS; t++) {
        assert_int_equal(pthread_join(tid[t], NULL), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        assert_int_equal(w[t].failures, 0);
        memcpy(&all[(size_t)t * ENVS_PER_THREAD], w[t].versions, sizeof(w[t].versions));
    }
    qsort(all, SL_ARRAY_LEN(all), sizeof(all[0]), cmp_version);
    for (size_t i = 0; i < SL_ARRAY_LEN(all); i++) {
        assert_int_equal(all[i], (int64_t)i + 1);
    }

    st = shared ? st : open_store(f);
    assert_int_equal(sl_store_env_list_all(st, &list, &n), 0);
    assert_int_equal(n, THREADS * ENVS_PER_THREAD + THREADS);
    for (size_t i = 0; i < n; i++) {
        if (list[i].scope == SL_SCOPE_USER) {
            assert_string_equal(list[i].description, "updated");
            assert_int_equal(list[i].n_repos, 2);
            assert_non_null(strstr(list[i].repos[0], "-a"));
            assert_non_null(strstr(list[i].repos[1], "-c"));
        }
    }
    sl_store_free_envs(list, n);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM env_repos"),
                     THREADS * ENVS_PER_THREAD * 2);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM environments WHERE is_default = 1"), 1);
}

static void concurrent_writers_on_one_store_end_consistent(void **state)
{
    run_workers(*state, true);
}

static void concurrent_writers_on_their_own_connections_end_consistent(void **state)
{
    run_workers(*state, false);
}

struct opener {
    const char *path;
    int rc;
    char err[256];
};

static void *opener_run(void *arg)
{
    struct opener *o = arg;
    struct sl_store *st = NULL;
    int64_t v;

    o->rc = sl_store_open(o->path, &st, o->err, sizeof(o->err));
    if (o->rc == 0) {
        o->rc = sl_store_next_snapshot_version(st, &v);
        sl_store_close(st);
    }
    return NULL;
}

static void first_opens_racing_on_a_new_file_create_the_schema_once(void **state)
{
    struct fixture *f = *state;
    struct opener o[THREADS];
    pthread_t tid[THREADS];

    for (int t = 0; t < THREADS; t++) {
        o[t].path = f->path;
        o[t].rc = -1;
        o[t].err[0] = '\0';
        assert_int_equal(pthread_create(&tid[t], NULL, opener_run, &o[t]), 0);
    }
    /* Every thread is joined before any assertion can leave this frame. */
    for (int t = 0; t < THREADS; t++) {
        assert_int_equal(pthread_join(tid[t], NULL), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        if (o[t].rc != 0) {
            fail_msg("opener %d: %s (%s)", t, sl_strerror(o[t].rc), o[t].err);
        }
    }
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM schema_version"), 1);
    assert_int_equal(raw_int(f->path, "SELECT value FROM meta WHERE key = 'snapshot_version'"),
                     THREADS);
}

/* ---- allocation failures ---- */

static void read_paths_survive_allocation_failures(void **state)
{
    static const char *const repos[] = { "acme/a", "acme/b", "acme/c" };
    struct fixture *f = *state;
    struct sl_store *st = open_store(f);
    struct sl_env_row *list = (struct sl_env_row *)&list;
    struct sl_user *users = (struct sl_user *)&users;
    struct sl_env_row row = { 0 };
    struct sl_user alice = { 0 };
    size_t n = 12345;
    long fails = 0;
    int rc;

    assert_int_equal(sl_store_user_create(st, "alice", false, NULL, &alice), 0);
    for (int i = 0; i < 5; i++) {
        char name[16];

        (void)snprintf(name, sizeof(name), "env-%d", i);
        assert_int_equal(insert_env(st, i % 2 ? SL_SCOPE_GLOBAL : SL_SCOPE_USER,
                                    i % 2 ? NULL : alice.id, name, &repos[i % 3], 1, NULL, NULL),
                         0);
    }
    for (long k = 1;; k++) {
        sl_mem_fail_after(k);
        rc = sl_store_env_list_visible(st, alice.id, &list, &n);
        fails = sl_mem_failures();
        sl_mem_fail_after(0);
        if (rc == 0) {
            assert_int_equal(fails, 0);
            break;
        }
        assert_int_equal(rc, SL_ENOMEM);
        /* Untouched on failure. */
        assert_ptr_equal(list, (struct sl_env_row *)&list);
        assert_int_equal(n, 12345);
    }
    assert_int_equal(n, 5);
    sl_store_free_envs(list, n);

    for (long k = 1;; k++) {
        sl_mem_fail_after(k);
        rc = sl_store_env_get_by_name(st, SL_SCOPE_USER, alice.id, "env-0", &row);
        sl_mem_fail_after(0);
        if (rc == 0) {
            break;
        }
        assert_int_equal(rc, SL_ENOMEM);
        assert_null(row.name);
    }
    assert_string_equal(row.repos[0], "acme/a");
    sl_env_row_finish(&row);

    for (long k = 1;; k++) {
        sl_mem_fail_after(k);
        rc = sl_store_user_list(st, &users, &n);
        sl_mem_fail_after(0);
        if (rc == 0) {
            break;
        }
        assert_int_equal(rc, SL_ENOMEM);
    }
    assert_int_equal(n, 1);
    sl_store_free_users(users, n);
    sl_user_finish(&alice);
}

static void opening_survives_allocation_failures(void **state)
{
    struct fixture *f = *state;
    struct sl_store *st = NULL;
    char err[256];
    int rc;

    for (long k = 1;; k++) {
        sl_mem_fail_after(k);
        rc = sl_store_open(f->path, &st, err, sizeof(err));
        sl_mem_fail_after(0);
        if (rc == 0) {
            break;
        }
        assert_int_equal(rc, SL_ENOMEM);
        assert_null(st);
    }
    sl_store_close(st);
}

/* The database sluice 0.1.0 wrote (schema version 2, tests/data/upgrade/v0.1.0/README) opens,
 * is upgraded in one go and keeps its users, environments, static clients and schedules; the
 * tokens it held still find their users, an admin's with the admin scope, alice's with write. */
static void database_of_0_1_0_is_upgraded(void **state)
{
    static const char *const tokens[] = { "sl_GbpGfwTVKd5Mlcd3pT41afOP2-kFuoWC1p8DvzwKlcY",
                                          "sl_rLKXUilsv8GncAVP3l0HDXqWXzlfknoOBYqrm-HLlRM" };
    struct fixture *f = *state;
    const char *data = getenv("SLUICE_TEST_DATA");
    char src[PATH_MAX];
    uint8_t buf[256 * 1024];
    uint8_t hash[SL_TOKEN_HASH_BYTES];
    struct sl_user u = { 0 };
    struct sl_store_token t = { 0 };
    struct sl_env_row *envs = NULL;
    struct sl_store_client *clients = NULL;
    struct sl_store_schedule *scheds = NULL;
    struct sl_store_repo *repos = NULL;
    size_t n = 0;

    assert_non_null(data);
    assert_int_equal(sl_test_join(src, sizeof(src), data, "upgrade/v0.1.0/sluice.db"), 0);
    write_bytes(f->path, buf, slurp(src, buf, sizeof(buf)));
    assert_int_equal(raw_int(f->path, "SELECT version FROM schema_version"), 2);
    open_store(f);
    for (size_t i = 0; i < SL_ARRAY_LEN(tokens); i++) {
        assert_int_equal(sl_token_hash(tokens[i], hash), 0);
        assert_int_equal(sl_store_token_find_user(f->st, hash, &u, &t), 0);
        assert_string_equal(u.name, i == 0 ? "admin" : "alice");
        assert_int_equal(u.is_admin, i == 0);
        assert_false(u.disabled);
        assert_null(u.email);
        assert_int_equal(t.scope, i == 0 ? SL_TOKEN_SCOPE_ADMIN : SL_TOKEN_SCOPE_WRITE);
        assert_int_equal(t.kind, SL_TOKEN_KIND_API);
        assert_string_equal(t.name, "default");
        assert_int_equal(strlen(t.id), 20);
        assert_string_equal(t.expires_at, "");
        sl_user_finish(&u);
        sl_store_token_finish(&t);
    }
    assert_int_equal(sl_store_env_list_all(f->st, &envs, &n), 0);
    assert_int_equal(n, 3);
    sl_store_free_envs(envs, n);
    assert_int_equal(sl_store_client_list(f->st, &clients, &n), 0);
    assert_int_equal(n, 2);
    sl_store_free_clients(clients, n);
    assert_int_equal(sl_store_schedule_list(f->st, NULL, 10, &scheds, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(scheds[0].name, "nightly");
    sl_store_free_schedules(scheds, n);
    assert_int_equal(sl_store_repo_list(f->st, NULL, &repos, &n), 0);
    assert_int_equal(n, 0);
    close_store(f);
    assert_int_equal(raw_int(f->path, "SELECT version FROM schema_version"),
                     SL_STORE_SCHEMA_VERSION);
    assert_int_equal(raw_int(f->path, "SELECT count(DISTINCT id) FROM tokens"), 2);
}

/* Tokens carry a scope, a name and an expiry; their owner lists them (API tokens only, never a
 * hash) and revokes one by id, never another user's. */
static void tokens_are_listed_and_revoked_by_id(void **state)
{
    struct fixture *f = *state;
    struct sl_store *st = open_store(f);
    struct sl_store_token a1 = { 0 };
    struct sl_store_token a2 = { 0 };
    struct sl_store_token sb = { 0 };
    struct sl_store_token b1 = { 0 };
    struct sl_store_token *v = NULL;
    uint8_t h[4][SL_TOKEN_HASH_BYTES];
    size_t n = 0;

    add_alice_and_bob(f);
    for (int i = 0; i < 4; i++) {
        char text[16];

        (void)snprintf(text, sizeof(text), "sl_t%d", i);
        assert_int_equal(sl_token_hash(text, h[i]), 0);
    }
    add_token(st, h[0], f->alice.id, SL_TOKEN_KIND_API, SL_TOKEN_SCOPE_READ, "2030-01-01T00:00:00Z",
              &a1);
    add_token(st, h[1], f->alice.id, SL_TOKEN_KIND_API, SL_TOKEN_SCOPE_WRITE, "", &a2);
    add_token(st, h[2], f->alice.id, SL_TOKEN_KIND_SANDBOX, SL_TOKEN_SCOPE_WRITE, "", &sb);
    add_token(st, h[3], f->bob.id, SL_TOKEN_KIND_API, SL_TOKEN_SCOPE_ADMIN, "", &b1);
    assert_int_equal(sl_store_token_list(st, f->alice.id, &v, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[0].id, a1.id);
    assert_int_equal(v[0].scope, SL_TOKEN_SCOPE_READ);
    assert_string_equal(v[0].expires_at, "2030-01-01T00:00:00Z");
    assert_string_equal(v[0].name, "laptop");
    assert_string_equal(v[1].id, a2.id);
    assert_int_equal(v[1].scope, SL_TOKEN_SCOPE_WRITE);
    sl_store_free_tokens(v, n);
    /* Bob cannot revoke alice's token; alice can, once. */
    assert_int_equal(sl_store_token_delete_id(st, f->bob.id, a1.id), SL_ENOTFOUND);
    assert_int_equal(sl_store_token_delete_id(st, f->alice.id, a1.id), 0);
    assert_int_equal(sl_store_token_delete_id(st, f->alice.id, a1.id), SL_ENOTFOUND);
    assert_int_equal(sl_store_token_find_user(st, h[0], &f->alice, NULL), SL_ENOTFOUND);
    assert_int_equal(sl_store_token_list(st, f->alice.id, &v, &n), 0);
    assert_int_equal(n, 1);
    sl_store_free_tokens(v, n);
    assert_string_equal(sl_token_scope_name(SL_TOKEN_SCOPE_ADMIN), "admin");
    sl_store_token_finish(&a1);
    sl_store_token_finish(&a2);
    sl_store_token_finish(&sb);
    sl_store_token_finish(&b1);
}

/* Disabling, enabling, admin and email changes; the last enabled admin can be neither disabled
 * nor demoted, and a refused change writes nothing. */
static void users_are_changed_and_an_enabled_admin_stays(void **state)
{
    struct fixture *f = *state;
    struct sl_store *st = open_store(f);
    struct sl_user root = { 0 };
    struct sl_user u = { 0 };
    struct sl_store_user_change off = { .set_disabled = true, .disabled = true };
    struct sl_store_user_change on = { .set_disabled = true, .disabled = false };
    struct sl_store_user_change demote = { .set_admin = true, .is_admin = false };
    struct sl_store_user_change promote = { .set_admin = true, .is_admin = true };
    struct sl_store_user_change mail = { .set_email = true, .email = "a@example.com" };
    struct sl_store_user_change nomail = { .set_email = true, .email = NULL };

    assert_int_equal(sl_store_user_create(st, "root", true, "root@example.com", &root), 0);
    assert_string_equal(root.email, "root@example.com");
    assert_int_equal(sl_store_user_create(st, "alice", false, NULL, &u), 0);
    sl_user_finish(&u);
    assert_int_equal(sl_store_user_update(st, "root", &off, NULL), SL_EINVAL);
    assert_int_equal(sl_store_user_update(st, "root", &demote, NULL), SL_EINVAL);
    assert_int_equal(sl_store_user_get_by_name(st, "root", &u), 0);
    assert_true(u.is_admin);
    assert_false(u.disabled);
    sl_user_finish(&u);
    assert_int_equal(sl_store_user_update(st, "nobody", &off, NULL), SL_ENOTFOUND);
    assert_int_equal(sl_store_user_update(st, "alice", &off, &u), 0);
    assert_true(u.disabled);
    sl_user_finish(&u);
    /* A disabled admin does not count: alice must be enabled and an admin for root to go. */
    assert_int_equal(sl_store_user_update(st, "alice", &promote, NULL), 0);
    assert_int_equal(sl_store_user_update(st, "root", &off, NULL), SL_EINVAL);
    assert_int_equal(sl_store_user_update(st, "alice", &on, NULL), 0);
    assert_int_equal(sl_store_user_update(st, "root", &off, &u), 0);
    assert_true(u.disabled && u.is_admin);
    sl_user_finish(&u);
    assert_int_equal(sl_store_user_update(st, "alice", &demote, NULL), SL_EINVAL);
    assert_int_equal(sl_store_user_update(st, "alice", &mail, &u), 0);
    assert_string_equal(u.email, "a@example.com");
    assert_true(u.is_admin);
    sl_user_finish(&u);
    assert_int_equal(sl_store_user_update(st, "alice", &nomail, &u), 0);
    assert_null(u.email);
    sl_user_finish(&u);
    sl_user_finish(&root);
}

static void put_repo(struct sl_store *st, const char *name, bool is_public, bool *created)
{
    struct sl_store_repo r = { 0 };

    r.name = sl_strdup(name);
    r.default_branch = sl_strdup("main");
    r.protected_json = sl_strdup("[\"release/*\"]");
    r.is_public = is_public;
    assert_non_null(r.protected_json);
    assert_int_equal(sl_store_repo_put(st, &r, created), 0);
    assert_string_not_equal(r.created_at, "");
    sl_store_repo_finish(&r);
}

/* Repositories are registered, replaced and listed by what a user sees; members get, change and
 * lose roles; deleting a repository or a user takes its memberships along. */
static void repositories_and_their_members(void **state)
{
    struct fixture *f = *state;
    struct sl_store *st = open_store(f);
    struct sl_store_repo r = { 0 };
    struct sl_store_repo *v = NULL;
    struct sl_store_member *m = NULL;
    enum sl_repo_role role = SL_REPO_ROLE_ADMIN;
    bool created = false;
    size_t n = 0;

    add_alice_and_bob(f);
    put_repo(st, "acme/site", false, &created);
    assert_true(created);
    put_repo(st, "acme/site", false, &created);
    assert_false(created);
    put_repo(st, "acme/open", true, NULL);
    put_repo(st, "acme/other", false, NULL);
    assert_int_equal(sl_store_repo_get(st, "acme/site", &r), 0);
    assert_string_equal(r.default_branch, "main");
    assert_string_equal(r.protected_json, "[\"release/*\"]");
    assert_false(r.is_public);
    assert_false(r.archived);
    sl_store_repo_finish(&r);
    assert_int_equal(sl_store_repo_get(st, "acme/none", &r), SL_ENOTFOUND);

    assert_int_equal(sl_store_member_put(st, "acme/site", f->alice.id, SL_REPO_ROLE_WRITE, &role),
                     0);
    assert_int_equal(role, SL_REPO_ROLE_NONE);
    assert_int_equal(sl_store_member_put(st, "acme/site", f->alice.id, SL_REPO_ROLE_READ, &role),
                     0);
    assert_int_equal(role, SL_REPO_ROLE_WRITE);
    assert_int_equal(sl_store_member_put(st, "acme/site", f->bob.id, SL_REPO_ROLE_ADMIN, NULL), 0);
    assert_int_equal(sl_store_member_put(st, "acme/none", f->bob.id, SL_REPO_ROLE_READ, NULL),
                     SL_ENOTFOUND);
    assert_int_equal(sl_store_member_put(st, "acme/site", "no-such-user", SL_REPO_ROLE_READ, NULL),
                     SL_ENOTFOUND);
    assert_int_equal(sl_store_member_put(st, "acme/site", f->bob.id, SL_REPO_ROLE_NONE, NULL),
                     SL_EINVAL);
    assert_int_equal(sl_store_member_role(st, "acme/site", f->alice.id, &role), 0);
    assert_int_equal(role, SL_REPO_ROLE_READ);
    assert_int_equal(sl_store_member_role(st, "acme/other", f->alice.id, &role), 0);
    assert_int_equal(role, SL_REPO_ROLE_NONE);
    assert_int_equal(sl_store_member_list(st, "acme/site", &m, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(m[0].user_name, "alice");
    assert_int_equal(m[0].role, SL_REPO_ROLE_READ);
    assert_string_equal(m[1].user_name, "bob");
    assert_int_equal(m[1].role, SL_REPO_ROLE_ADMIN);
    sl_store_free_members(m, n);

    /* What alice sees: the public one and hers; everyone's: all three, by name. */
    assert_int_equal(sl_store_repo_list(st, f->alice.id, &v, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[0].name, "acme/open");
    assert_string_equal(v[1].name, "acme/site");
    sl_store_free_repos(v, n);
    assert_int_equal(sl_store_repo_list(st, NULL, &v, &n), 0);
    assert_int_equal(n, 3);
    sl_store_free_repos(v, n);

    assert_int_equal(sl_store_member_delete(st, "acme/site", f->alice.id), 0);
    assert_int_equal(sl_store_member_delete(st, "acme/site", f->alice.id), SL_ENOTFOUND);
    assert_int_equal(sl_store_repo_delete(st, "acme/site"), 0);
    assert_int_equal(sl_store_repo_delete(st, "acme/site"), SL_ENOTFOUND);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM repo_members"), 0);
    assert_int_equal(sl_store_member_put(st, "acme/other", f->bob.id, SL_REPO_ROLE_READ, NULL), 0);
    raw_sql(f->path, "PRAGMA foreign_keys = ON; DELETE FROM users WHERE name = 'bob'");
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM repo_members"), 0);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(fresh_database_has_the_schema_version_and_wal),
        T(reopening_keeps_the_data),
        T(version_1_database_is_upgraded),
        T(jobs_queue_in_order_and_end_once),
        T(schedules_fire_once_per_run),
        T(newer_schema_is_refused_with_the_message),
        T(random_bytes_file_is_refused_and_left_alone),
        T(foreign_sqlite_database_is_refused_and_left_alone),
        T(users_are_unique_by_name_and_found_by_token),
        T(names_differing_in_case_from_before_still_work),
        T(live_tokens_are_capped_per_user),
        T(database_of_0_1_0_is_upgraded),
        T(tokens_are_listed_and_revoked_by_id),
        T(users_are_changed_and_an_enabled_admin_stays),
        T(repositories_and_their_members),
        T(environments_are_inserted_and_read_back),
        T(environments_are_replaced_whole_and_deleted),
        T(observe_is_set_apart_and_ends_at_its_deadline),
        T(visible_environments_are_hers_then_global_by_name),
        T(environment_names_are_unique_per_scope_and_owner),
        T(one_default_at_a_time_and_it_cannot_be_deleted),
        T(repository_bindings_conflict_within_scope_and_owner_only),
        T(refused_replace_leaves_the_row_as_it_was),
        T(static_clients_are_created_listed_and_deleted),
        T(snapshot_version_strictly_increases_across_reopen),
        T(concurrent_writers_on_one_store_end_consistent),
        T(concurrent_writers_on_their_own_connections_end_consistent),
        T(first_opens_racing_on_a_new_file_create_the_schema_once),
        T(read_paths_survive_allocation_failures),
        T(opening_survives_allocation_failures),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
