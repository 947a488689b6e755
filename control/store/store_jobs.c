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
    if (j != NULL) {
        sl__store_free_cols(&sl__store_job_rows, j);
    }
}

void sl_store_free_jobs(struct sl_store_job *v, size_t n)
{
    sl__store_free_rows(&sl__store_job_rows, v, n);
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
    SL_TRY(sl__store_change_begin(st));
    return sl__store_change_end(st, insert_jobs(st, v, n));
}

int sl_store_job_get(struct sl_store *st, const char *id, struct sl_store_job *out)
{
    return sl__store_locked_get(st, SL__STMT_JOB_GET, id, &sl__store_job_rows, out, "job-get");
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
        rc = sl__store_list(st, s, acc, &sl__store_job_rows, "job-list", out, n);
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
    SL_TRY(sl__store_get_one(st, s, SQLITE_OK, &sl__store_job_rows, &j, "job-next"));
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

/* Runs the UPDATE `id` of jobs with the texts `v` (`n` of them; NULL binds NULL) as its
 * parameters 1 ..; `*changed` gets the number of jobs it changed. */
static int update_jobs(struct sl_store *st, enum sl__store_stmt id, const char *const *v, size_t n,
                       const char *what, size_t *changed)
{
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;
    int rc;

    sl__store_lock(st);
    rc = sl__store_stmt(st, id, &s);
    if (rc == 0) {
        for (size_t i = 0; i < n; i++) {
            sl__store_bind_text(s, (int)i + 1, v[i], &acc);
        }
        rc = sl__store_exec(st, s, acc, what);
    }
    if (rc == 0) {
        *changed = (size_t)sqlite3_changes(st->db);
    }
    sl__store_unlock(st);
    return rc;
}

int sl_store_job_set_run(struct sl_store *st, const char *id, const char *env_json,
                         const char *sandbox_id)
{
    const char *const v[] = { id, env_json, sandbox_id };
    size_t changed;

    return update_jobs(st, SL__STMT_JOB_SET_RUN, v, SL_ARRAY_LEN(v), "job-set-run", &changed);
}

int sl_store_job_end(struct sl_store *st, const char *id, const char *status,
                     const char *result_json, const char *error, const char *env_json,
                     const char *sandbox_id)
{
    char now[SL__STORE_TIMESTAMP_SIZE];
    const char *const v[] = { id, status, result_json, error, now, env_json, sandbox_id };
    size_t changed = 0;

    now_rfc3339_ms(now);
    SL_TRY(update_jobs(st, SL__STMT_JOB_FINISH, v, SL_ARRAY_LEN(v), "job-end", &changed));
    return changed == 1 ? 0 : SL_ENOTFOUND;
}

int sl_store_jobs_abandon(struct sl_store *st, const char *reason, size_t *n)
{
    char now[SL__STORE_TIMESTAMP_SIZE];
    const char *const v[] = { reason, now };

    now_rfc3339_ms(now);
    *n = 0;
    return update_jobs(st, SL__STMT_JOB_ABANDON, v, SL_ARRAY_LEN(v), "job-abandon", n);
}

void sl_store_schedule_finish(struct sl_store_schedule *s)
{
    if (s != NULL) {
        sl__store_free_cols(&sl__store_schedule_rows, s);
    }
}

void sl_store_free_schedules(struct sl_store_schedule *v, size_t n)
{
    sl__store_free_rows(&sl__store_schedule_rows, v, n);
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
    return sl__store_locked_delete(st, SL__STMT_SCHED_DELETE, id, NULL, NULL, "schedule-delete");
}

int sl_store_schedule_get(struct sl_store *st, const char *id, struct sl_store_schedule *out)
{
    return sl__store_locked_get(st, SL__STMT_SCHED_GET, id, &sl__store_schedule_rows, out,
                                "schedule-get");
}

/* At most `limit` schedules of SL__STMT_SCHED_LIST (of `owner_id`, NULL: everyone's) or of
 * SL__STMT_SCHED_DUE (due at `now`). */
static int list_schedules(struct sl_store *st, enum sl__store_stmt id, const char *owner_id,
                          int64_t now, size_t limit, struct sl_store_schedule **out, size_t *n)
{
    bool due = id == SL__STMT_SCHED_DUE;
    sqlite3_stmt *s = NULL;
    int acc = SQLITE_OK;

    SL_TRY(sl__store_stmt(st, id, &s));
    if (due) {
        sl__store_bind_int64(s, 1, now, &acc);
    } else {
        sl__store_bind_text(s, 1, owner_id, &acc);
    }
    sl__store_bind_int64(s, 2, (int64_t)limit, &acc);
    if (acc != SQLITE_OK) {
        sl__store_stmt_done(s);
        return sl__store_db_error(st, acc, due ? "sched-due" : "sched-list");
    }
    return sl__store_list(st, s, SQLITE_OK, &sl__store_schedule_rows, "schedule-list", out, n);
}

int sl_store_schedule_list(struct sl_store *st, const char *owner_id, size_t limit,
                           struct sl_store_schedule **out, size_t *n)
{
    sl__store_lock(st);
    return sl__store_release(st,
                             list_schedules(st, SL__STMT_SCHED_LIST, owner_id, 0, limit, out, n));
}

int sl_store_schedule_due(struct sl_store *st, int64_t now, size_t limit,
                          struct sl_store_schedule **out, size_t *n)
{
    sl__store_lock(st);
    return sl__store_release(st, list_schedules(st, SL__STMT_SCHED_DUE, NULL, now, limit, out, n));
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
    SL_TRY(sl__store_change_begin(st));
    return sl__store_change_end(st, schedule_fire(st, id, due, now, next, v, n));
}
