/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/store/store_jobs.c - jobs and schedules (store.h, "jobs and schedules";
 * docs/reference/api.md §5.5, docs/jobs.md): the queue a job is claimed from, its run and its end,
 * and the schedules whose runs insert jobs in the same transaction that moves them on.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "base/mem.h"
#include "control/store/secrets.h"
#include "control/store/store.h"
#include "control/store/store_int.h"

/* RFC 3339 UTC with milliseconds: 2026-11-30T01:02:03.456Z. */
static void now_rfc3339_ms(char out[SL__STORE_TIMESTAMP_SIZE])
{
    struct timespec ts;
    struct tm tm;
    unsigned ms;
    size_t n;

    if (clock_gettime(CLOCK_REALTIME, &ts) == -1 || gmtime_r(&ts.tv_sec, &tm) == NULL
        || (n = strftime(out, SL__STORE_TIMESTAMP_SIZE - 6, "%Y-%m-%dT%H:%M:%S", &tm)) == 0) {
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
    rc = sl__store_col_copy(st, s, 0, j->id, sizeof(j->id));
    if (rc == 0) {
        rc = sl__store_col_copy(st, s, 1, j->owner_id, sizeof(j->owner_id));
    }
    if (rc == 0) {
        rc = sl__store_col_copy(st, s, 2, j->schedule_id, sizeof(j->schedule_id));
    }
    if (rc == 0) {
        rc = sl__store_col_dup_required(st, s, 3, &j->repo);
    }
    if (rc == 0) {
        rc = sl__store_col_dup(s, 4, &j->ref);
    }
    if (rc == 0) {
        rc = sl__store_col_dup_required(st, s, 5, &j->command);
    }
    if (rc == 0) {
        rc = sl__store_col_dup(s, 6, &j->env_key);
    }
    if (rc == 0) {
        j->timeout_ms = sqlite3_column_int64(s, 7);
        rc = sl__store_col_copy(st, s, 8, j->status, sizeof(j->status));
    }
    if (rc == 0) {
        rc = sl__store_col_dup(s, 9, &j->env_json);
    }
    if (rc == 0) {
        rc = sl__store_col_dup(s, 10, &j->sandbox_id);
    }
    if (rc == 0) {
        rc = sl__store_col_dup(s, 11, &j->result_json);
    }
    if (rc == 0) {
        rc = sl__store_col_dup(s, 12, &j->error);
    }
    if (rc == 0) {
        rc = sl__store_col_copy(st, s, 13, j->created_at, sizeof(j->created_at));
    }
    if (rc == 0) {
        rc = sl__store_col_copy(st, s, 14, j->started_at, sizeof(j->started_at));
    }
    if (rc == 0) {
        rc = sl__store_col_copy(st, s, 15, j->finished_at, sizeof(j->finished_at));
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
    int rc = sl__store_collect_rows(st, s, sizeof(**out), read_job_row, free_job_rows, "job-list",
                                    &v, n);

    sl__store_stmt_done(s);
    if (rc == 0) {
        *out = v;
    }
    return rc;
}

/* Inserts the jobs inside the caller's transaction. */
static int insert_jobs(struct sl_store *st, struct sl_store_job *v, size_t n)
{
    sqlite3_stmt *s = NULL;

    SL_TRY(sl__store_stmt(st, SL__STMT_JOB_INSERT, &s));
    for (size_t i = 0; i < n; i++) {
        struct sl_store_job *j = &v[i];
        int acc = SQLITE_OK;

        SL_ENSURE(j->repo != NULL && j->command != NULL, SL_EINVAL);
        SL_TRY(sl_uuid_v4(j->id));
        now_rfc3339_ms(j->created_at);
        (void)snprintf(j->status, sizeof(j->status), "queued");
        sl__store_bind_text(s, 1, j->id, &acc);
        sl__store_bind_text(s, 2, j->owner_id, &acc);
        sl__store_bind_text(s, 3, j->schedule_id[0] != '\0' ? j->schedule_id : NULL, &acc);
        sl__store_bind_text(s, 4, j->repo, &acc);
        sl__store_bind_text(s, 5, j->ref, &acc);
        sl__store_bind_text(s, 6, j->command, &acc);
        sl__store_bind_text(s, 7, j->env_key, &acc);
        sl__store_bind_int64(s, 8, j->timeout_ms, &acc);
        sl__store_bind_text(s, 9, j->created_at, &acc);
        SL_TRY(sl__store_exec(st, s, acc, "job-insert"));
    }
    return 0;
}

int sl_store_jobs_insert(struct sl_store *st, struct sl_store_job *v, size_t n)
{
    int rc;

    sl__store_lock(st);
    rc = sl__store_tx_begin(st);
    if (rc == 0) {
        rc = sl__store_tx_end(st, insert_jobs(st, v, n));
    }
    sl__store_unlock(st);
    return rc;
}

static int job_get(struct sl_store *st, const char *id, struct sl_store_job *out)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;

    SL_TRY(sl__store_stmt(st, SL__STMT_JOB_GET, &s));
    sl__store_bind_text(s, 1, id, &acc);
    return sl__store_get_one(st, s, acc, read_job_row, out, "job-get");
}

int sl_store_job_get(struct sl_store *st, const char *id, struct sl_store_job *out)
{
    int rc;

    sl__store_lock(st);
    rc = job_get(st, id, out);
    sl__store_unlock(st);
    return rc;
}

int sl_store_job_list(struct sl_store *st, const char *owner_id, const char *status,
                      const char *schedule_id, size_t limit, struct sl_store_job **out, size_t *n)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    sl__store_lock(st);
    rc = sl__store_stmt(st, SL__STMT_JOB_LIST, &s);
    if (rc == 0) {
        sl__store_bind_text(s, 1, owner_id, &acc);
        sl__store_bind_text(s, 2, status, &acc);
        sl__store_bind_text(s, 3, schedule_id, &acc);
        sl__store_bind_int64(s, 4, (int64_t)limit, &acc);
        rc = acc == SQLITE_OK ? read_jobs(st, s, out, n) : sl__store_db_error(st, acc, "job-list");
        sl__store_stmt_done(s);
    }
    sl__store_unlock(st);
    return rc;
}

static int job_claim(struct sl_store *st, struct sl_store_job *out)
{
    sqlite3_stmt *s = NULL;
    struct sl_store_job j;
    int acc = SQLITE_OK;
    int rc;

    SL_TRY(sl__store_stmt(st, SL__STMT_JOB_NEXT, &s));
    SL_TRY(sl__store_get_one(st, s, SQLITE_OK, read_job_row, &j, "job-next"));
    now_rfc3339_ms(j.started_at);
    (void)snprintf(j.status, sizeof(j.status), "running");
    rc = sl__store_stmt(st, SL__STMT_JOB_START, &s);
    if (rc == 0) {
        sl__store_bind_text(s, 1, j.id, &acc);
        sl__store_bind_text(s, 2, j.started_at, &acc);
        rc = sl__store_exec(st, s, acc, "job-start");
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

    sl__store_lock(st);
    rc = sl__store_tx_begin(st);
    if (rc == 0) {
        int claimed = job_claim(st, out);

        rc = sl__store_tx_end(st, claimed);
        if (claimed == 0 && rc < 0) {
            sl_store_job_finish(out);
        }
    }
    sl__store_unlock(st);
    return rc;
}

int sl_store_job_set_run(struct sl_store *st, const char *id, const char *env_json,
                         const char *sandbox_id)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    sl__store_lock(st);
    rc = sl__store_stmt(st, SL__STMT_JOB_SET_RUN, &s);
    if (rc == 0) {
        sl__store_bind_text(s, 1, id, &acc);
        sl__store_bind_text(s, 2, env_json, &acc);
        sl__store_bind_text(s, 3, sandbox_id, &acc);
        rc = sl__store_exec(st, s, acc, "job-set-run");
    }
    sl__store_unlock(st);
    return rc;
}

int sl_store_job_end(struct sl_store *st, const char *id, const char *status,
                     const char *result_json, const char *error, const char *env_json,
                     const char *sandbox_id)
{
    char now[SL__STORE_TIMESTAMP_SIZE];
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    now_rfc3339_ms(now);
    sl__store_lock(st);
    rc = sl__store_stmt(st, SL__STMT_JOB_FINISH, &s);
    if (rc == 0) {
        sl__store_bind_text(s, 1, id, &acc);
        sl__store_bind_text(s, 2, status, &acc);
        sl__store_bind_text(s, 3, result_json, &acc);
        sl__store_bind_text(s, 4, error, &acc);
        sl__store_bind_text(s, 5, now, &acc);
        sl__store_bind_text(s, 6, env_json, &acc);
        sl__store_bind_text(s, 7, sandbox_id, &acc);
        rc = sl__store_exec(st, s, acc, "job-end");
        if (rc == 0 && sqlite3_changes(st->db) != 1) {
            rc = SL_ENOTFOUND;
        }
    }
    sl__store_unlock(st);
    return rc;
}

int sl_store_jobs_abandon(struct sl_store *st, const char *reason, size_t *n)
{
    char now[SL__STORE_TIMESTAMP_SIZE];
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    now_rfc3339_ms(now);
    *n = 0;
    sl__store_lock(st);
    rc = sl__store_stmt(st, SL__STMT_JOB_ABANDON, &s);
    if (rc == 0) {
        sl__store_bind_text(s, 1, reason, &acc);
        sl__store_bind_text(s, 2, now, &acc);
        rc = sl__store_exec(st, s, acc, "job-abandon");
        if (rc == 0) {
            *n = (size_t)sqlite3_changes(st->db);
        }
    }
    sl__store_unlock(st);
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
    rc = sl__store_col_copy(st, s, 0, out->id, sizeof(out->id));
    if (rc == 0) {
        rc = sl__store_col_copy(st, s, 1, out->owner_id, sizeof(out->owner_id));
    }
    if (rc == 0) {
        rc = sl__store_col_dup_required(st, s, 2, &out->name);
    }
    if (rc == 0) {
        rc = sl__store_col_dup_required(st, s, 3, &out->cron);
    }
    if (rc == 0) {
        rc = sl__store_col_dup_required(st, s, 4, &out->repos_json);
    }
    if (rc == 0) {
        rc = sl__store_col_dup_required(st, s, 5, &out->command);
    }
    if (rc == 0) {
        rc = sl__store_col_dup(s, 6, &out->env_key);
    }
    if (rc == 0) {
        out->timeout_ms = sqlite3_column_int64(s, 7);
        out->enabled = sqlite3_column_int(s, 8) != 0;
        out->next_run = col_int_or(s, 9, -1);
        out->last_run = col_int_or(s, 10, -1);
        rc = sl__store_col_copy(st, s, 11, out->created_at, sizeof(out->created_at));
    }
    if (rc == 0) {
        rc = sl__store_col_copy(st, s, 12, out->updated_at, sizeof(out->updated_at));
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
    int rc = sl__store_collect_rows(st, s, sizeof(**out), read_schedule_row, free_schedule_rows,
                                    "schedule-list", &v, n);

    if (rc == 0) {
        *out = v;
    }
    return rc;
}

/* Binds parameters 3..10 of SL__STMT_SCHED_INSERT/UPDATE and the time as 11. */
static void bind_schedule(sqlite3_stmt *s, const struct sl_store_schedule *sc, int *acc)
{
    sl__store_bind_text(s, 3, sc->name, acc);
    sl__store_bind_text(s, 4, sc->cron, acc);
    sl__store_bind_text(s, 5, sc->repos_json, acc);
    sl__store_bind_text(s, 6, sc->command, acc);
    sl__store_bind_text(s, 7, sc->env_key, acc);
    sl__store_bind_int64(s, 8, sc->timeout_ms, acc);
    sl__store_bind_int64(s, 9, sc->enabled ? 1 : 0, acc);
    sl__store_bind_optional(s, 10, sc->next_run, acc);
    sl__store_bind_text(s, 11, sc->updated_at, acc);
}

static bool schedule_is_complete(const struct sl_store_schedule *sc)
{
    return sc->name != NULL && sc->cron != NULL && sc->repos_json != NULL && sc->command != NULL;
}

/* The INSERT or UPDATE (by id and owner: SL_ENOTFOUND when it changed nothing) `id` of `sc`,
 * its times already set. */
static int write_schedule(struct sl_store *st, const struct sl_store_schedule *sc,
                          enum sl__store_stmt id, const char *what)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    sl__store_lock(st);
    rc = sl__store_stmt(st, id, &s);
    if (rc == 0) {
        sl__store_bind_text(s, 1, sc->id, &acc);
        sl__store_bind_text(s, 2, sc->owner_id, &acc);
        bind_schedule(s, sc, &acc);
        rc = sl__store_exec(st, s, acc, what);
    }
    if (rc == 0 && id == SL__STMT_SCHED_UPDATE && sqlite3_changes(st->db) != 1) {
        rc = SL_ENOTFOUND;
    }
    sl__store_unlock(st);
    return rc;
}

int sl_store_schedule_insert(struct sl_store *st, struct sl_store_schedule *sc)
{
    SL_ENSURE(schedule_is_complete(sc), SL_EINVAL);
    SL_TRY(sl_uuid_v4(sc->id));
    sl__store_now(sc->created_at);
    memcpy(sc->updated_at, sc->created_at, sizeof(sc->updated_at));
    sc->last_run = -1;
    return write_schedule(st, sc, SL__STMT_SCHED_INSERT, "schedule-insert");
}

int sl_store_schedule_replace(struct sl_store *st, struct sl_store_schedule *sc)
{
    SL_ENSURE(schedule_is_complete(sc), SL_EINVAL);
    sl__store_now(sc->updated_at);
    return write_schedule(st, sc, SL__STMT_SCHED_UPDATE, "schedule-update");
}

int sl_store_schedule_delete(struct sl_store *st, const char *id)
{
    int rc;

    sl__store_lock(st);
    rc = sl__store_delete_one(st, SL__STMT_SCHED_DELETE, id, NULL, "schedule-delete");
    sl__store_unlock(st);
    return rc;
}

int sl_store_schedule_get(struct sl_store *st, const char *id, struct sl_store_schedule *out)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    sl__store_lock(st);
    rc = sl__store_stmt(st, SL__STMT_SCHED_GET, &s);
    if (rc == 0) {
        sl__store_bind_text(s, 1, id, &acc);
        rc = sl__store_get_one(st, s, acc, read_schedule_row, out, "schedule-get");
    }
    sl__store_unlock(st);
    return rc;
}

int sl_store_schedule_list(struct sl_store *st, const char *owner_id, size_t limit,
                           struct sl_store_schedule **out, size_t *n)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    sl__store_lock(st);
    rc = sl__store_stmt(st, SL__STMT_SCHED_LIST, &s);
    if (rc == 0) {
        sl__store_bind_text(s, 1, owner_id, &acc);
        sl__store_bind_int64(s, 2, (int64_t)limit, &acc);
        rc = acc == SQLITE_OK ? read_schedules(st, s, out, n)
                              : sl__store_db_error(st, acc, "sched-list");
        sl__store_stmt_done(s);
    }
    sl__store_unlock(st);
    return rc;
}

int sl_store_schedule_due(struct sl_store *st, int64_t now, size_t limit,
                          struct sl_store_schedule **out, size_t *n)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    sl__store_lock(st);
    rc = sl__store_stmt(st, SL__STMT_SCHED_DUE, &s);
    if (rc == 0) {
        sl__store_bind_int64(s, 1, now, &acc);
        sl__store_bind_int64(s, 2, (int64_t)limit, &acc);
        rc = acc == SQLITE_OK ? read_schedules(st, s, out, n)
                              : sl__store_db_error(st, acc, "sched-due");
        sl__store_stmt_done(s);
    }
    sl__store_unlock(st);
    return rc;
}

static int schedule_fire(struct sl_store *st, const char *id, int64_t due, int64_t now,
                         int64_t next, struct sl_store_job *v, size_t n)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;

    SL_TRY(sl__store_stmt(st, SL__STMT_SCHED_FIRED, &s));
    sl__store_bind_text(s, 1, id, &acc);
    sl__store_bind_int64(s, 2, due, &acc);
    sl__store_bind_int64(s, 3, now, &acc);
    sl__store_bind_optional(s, 4, next, &acc);
    SL_TRY(sl__store_exec(st, s, acc, "schedule-fired"));
    if (sqlite3_changes(st->db) != 1) {
        return SL_ENOTFOUND;
    }
    return insert_jobs(st, v, n);
}

int sl_store_schedule_fire(struct sl_store *st, const char *id, int64_t due, int64_t now,
                           int64_t next, struct sl_store_job *v, size_t n)
{
    int rc;

    sl__store_lock(st);
    rc = sl__store_tx_begin(st);
    if (rc == 0) {
        rc = sl__store_tx_end(st, schedule_fire(st, id, due, now, next, v, n));
    }
    sl__store_unlock(st);
    return rc;
}
