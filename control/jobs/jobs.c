/* SPDX-License-Identifier: Apache-2.0 */
#include "control/jobs/jobs.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/text.h"
#include "control/env/environment.h"
#include "control/env/jbody.h"
#include "control/jobs/cron.h"

#define JOBS_PATH      "/api/v1/jobs"
#define SCHEDULES_PATH "/api/v1/schedules"
#define REF_MAX        255
#define NAME_MAX_BYTES 128
#define TIMEOUT_MAX_MS 86400000
/* The pool's timer: fills free workers and fires due schedules. */
#define TICK_MS 1000
/* Schedules fired per tick at most (the rest fire on the next tick). */
#define DUE_PER_TICK 50
#define ERR_BYTES    512
#define CRON_REQUIRED \
    "a 5-field cron expression is required (minute hour day-of-month month day-of-week)"

/* ---- small helpers ------------------------------------------------------------------------ */

static json_t *message(const char *fmt, ...) SL_PRINTF(1, 2);

static json_t *message(const char *fmt, ...)
{
    char text[512];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    return json_pack("{s:s}", "message", text);
}

/* Validation errors: {"message","errors":[{"field","message"}]}. */
struct verrs {
    json_t *list;
};

static void verr(struct verrs *v, const char *field, const char *fmt, ...) SL_PRINTF(3, 4);

static void verr(struct verrs *v, const char *field, const char *fmt, ...)
{
    char text[512];
    va_list ap;

    if (v->list == NULL) {
        v->list = json_array();
    }
    if (v->list == NULL || json_array_size(v->list) >= 100) {
        return;
    }
    va_start(ap, fmt);
    (void)vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    (void)json_array_append_new(v->list, json_pack("{s:s,s:s}", "field", field, "message", text));
}

static json_t *verrs_doc(struct verrs *v)
{
    json_t *first = json_array_get(v->list, 0);
    char text[700];

    (void)snprintf(text, sizeof(text), "invalid request: %s: %s",
                   json_string_value(json_object_get(first, "field")),
                   json_string_value(json_object_get(first, "message")));
    return json_pack("{s:s,s:o}", "message", text, "errors", v->list);
}

static bool is_uuid_shaped(const char *s)
{
    if (strlen(s) != SL_UUID_LEN) {
        return false;
    }
    for (size_t i = 0; i < SL_UUID_LEN; i++) {
        char c = s[i];
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;

        if (dash ? c != '-'
                 : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
            return false;
        }
    }
    return true;
}

/* A ref as a request may name it: 1-255 printable bytes without spaces, not starting with '-'
 * (the sandbox manager checks it again, and the git platform decides whether it exists). */
static bool is_ref(const char *s, size_t n)
{
    if (n == 0 || n > REF_MAX || s[0] == '-') {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c <= 0x20 || c == 0x7f) {
            return false;
        }
    }
    return true;
}

/* A schedule's name: 1-128 bytes without a control character nor an invisible or reordering one
 * (base/text.h). The name goes into the log line of each firing, which a newline or an escape
 * sequence in it would break or forge, and into the dashboard, where it must read as it is. */
static bool is_schedule_name(const char *s, size_t n)
{
    return n > 0 && n <= NAME_MAX_BYTES && strlen(s) == n && !sl_text_has_control(s, n, "")
           && !sl_text_has_invisible(s, n);
}

static void rfc3339(int64_t unix_s, char *out, size_t cap)
{
    time_t t = (time_t)unix_s;
    struct tm tm;

    if (gmtime_r(&t, &tm) == NULL || strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        (void)snprintf(out, cap, "1970-01-01T00:00:00Z");
    }
}

static bool is_status(const char *s)
{
    return strcmp(s, "queued") == 0 || strcmp(s, "running") == 0 || strcmp(s, "succeeded") == 0
           || strcmp(s, "failed") == 0 || strcmp(s, "error") == 0;
}

/* ---- request bodies ----------------------------------------------------------------------- */

/* What POST /jobs and a schedule's body share: repos, command, environment, timeoutMs. */
struct batch {
    /* Borrowed from the parsed body. */
    json_t *repos;
    const char *command;
    const char *env;
    int64_t timeout_ms;
};

/* Checks `repos` (an array of {"repo_id","ref"}) into `v`. */
static void check_repos(const json_t *repos, struct verrs *v)
{
    size_t i;
    json_t *item;

    if (!json_is_array(repos) || json_array_size(repos) == 0) {
        verr(v, "repos", "a non-empty array of {\"repo_id\",\"ref\"} is required");
        return;
    }
    if (json_array_size(repos) > SL_JOBS_MAX_REPOS) {
        verr(v, "repos", "at most %d repositories per request (got %zu)", SL_JOBS_MAX_REPOS,
             json_array_size(repos));
        return;
    }
    json_array_foreach(repos, i, item)
    {
        char field[64];
        const json_t *id = json_object_get(item, "repo_id");
        const json_t *ref = json_object_get(item, "ref");
        const char *key;
        json_t *value;

        if (!json_is_object(item)) {
            (void)snprintf(field, sizeof(field), "repos[%zu]", i);
            verr(v, field, "an object {\"repo_id\",\"ref\"} is required");
            continue;
        }
        json_object_foreach(item, key, value)
        {
            if (strcmp(key, "repo_id") != 0 && strcmp(key, "ref") != 0) {
                (void)snprintf(field, sizeof(field), "repos[%zu].%.32s", i, key);
                verr(v, field, "unknown field");
            }
        }
        (void)snprintf(field, sizeof(field), "repos[%zu].repo_id", i);
        if (!json_is_string(id)
            || !sl_env_repo_is_valid(json_string_value(id), json_string_length(id))) {
            verr(v, field, "a repository path like group/project is required");
        }
        (void)snprintf(field, sizeof(field), "repos[%zu].ref", i);
        if (ref != NULL && !json_is_null(ref)
            && (!json_is_string(ref) || strlen(json_string_value(ref)) != json_string_length(ref)
                || !is_ref(json_string_value(ref), json_string_length(ref)))) {
            verr(v, field, "a branch, tag or commit: 1-%d bytes, no spaces", REF_MAX);
        }
    }
}

/* Parses the fields shared by jobs and schedules; `extra` lists further allowed keys. */
static void parse_batch(json_t *root, const char *const *extra, size_t n_extra, struct batch *b,
                        struct verrs *v)
{
    const json_t *cmd = json_object_get(root, "command");
    const json_t *env = json_object_get(root, "environment");
    const json_t *tmo = json_object_get(root, "timeoutMs");
    const char *key;
    json_t *value;

    memset(b, 0, sizeof(*b));
    json_object_foreach(root, key, value)
    {
        bool known = strcmp(key, "repos") == 0 || strcmp(key, "command") == 0
                     || strcmp(key, "environment") == 0 || strcmp(key, "timeoutMs") == 0;

        for (size_t i = 0; !known && i < n_extra; i++) {
            known = strcmp(key, extra[i]) == 0;
        }
        if (!known) {
            char field[64];

            (void)snprintf(field, sizeof(field), "%.60s", key);
            verr(v, field, "unknown field");
        }
    }
    b->repos = json_object_get(root, "repos");
    check_repos(b->repos, v);
    if (!json_is_string(cmd) || json_string_length(cmd) == 0) {
        verr(v, "command", "a non-empty string is required");
    } else if (json_string_length(cmd) > SL_JOBS_COMMAND_MAX) {
        verr(v, "command", "at most %d bytes (got %zu)", SL_JOBS_COMMAND_MAX,
             json_string_length(cmd));
    } else if (strlen(json_string_value(cmd)) != json_string_length(cmd)) {
        verr(v, "command", "must not contain NUL bytes");
    } else {
        b->command = json_string_value(cmd);
    }
    if (env != NULL && !json_is_null(env)) {
        if (!json_is_string(env) || json_string_length(env) == 0
            || json_string_length(env) > 1024) {
            verr(v, "environment", "an environment id or name (a string) or null");
        } else {
            b->env = json_string_value(env);
        }
    }
    if (tmo != NULL && !json_is_null(tmo)) {
        if (!json_is_integer(tmo) || json_integer_value(tmo) < 1
            || json_integer_value(tmo) > TIMEOUT_MAX_MS) {
            verr(v, "timeoutMs", "an integer from 1 to %d (24 hours)", TIMEOUT_MAX_MS);
        } else {
            b->timeout_ms = json_integer_value(tmo);
        }
    }
}

/* Parses the body as a JSON object (sl_jbody_parse()); answers 400 itself, naming the problem. */
static json_t *parse_body(const struct sl_jobs_http *rq, int *status, json_t **doc)
{
    char why[SL_JBODY_MSG_MAX];
    json_t *root = NULL;
    int rc = sl_jbody_parse(rq->body, rq->body_len, 0, &root, why, sizeof(why));

    if (rc == SL_EINVAL) {
        *status = 400;
        *doc = message("%s", why);
    } else if (rc < 0) {
        *status = 503;
        *doc = message("out of memory");
    }
    return root;
}

/* Looks up the batch's environment; answers 404 (as resolution does) when not visible. */
static bool find_batch_env(const struct sl_jobs_http *rq, const struct batch *b,
                           char id[SL_UUID_LEN + 1], int *status, json_t **doc)
{
    char *name = NULL;
    int rc;

    id[0] = '\0';
    if (b->env == NULL) {
        return true;
    }
    rc = rq->find_env(rq->arg, b->env, id, &name);
    sl_free(name);
    if (rc == SL_ENOTFOUND) {
        *status = 404;
        *doc = message("no environment '%s'", b->env);
        return false;
    }
    if (rc < 0) {
        *status = rc == SL_ENOMEM ? 503 : 500;
        *doc = message("internal error; see the control plane's log");
        sl_log(SL_LOG_ERROR, 0, "msg=\"looking up an environment failed\" err=%s", sl_strerror(rc));
        return false;
    }
    return true;
}

/* Fills `n` jobs (caller storage, zeroed) from a batch. Strings owned by the jobs. */
static int fill_jobs(const char *owner_id, const char *schedule_id, json_t *repos,
                     const char *command, const char *env_id, int64_t timeout_ms,
                     struct sl_store_job *v)
{
    size_t i;
    json_t *item;

    json_array_foreach(repos, i, item)
    {
        const char *ref = json_string_value(json_object_get(item, "ref"));

        (void)snprintf(v[i].owner_id, sizeof(v[i].owner_id), "%s", owner_id);
        (void)snprintf(v[i].schedule_id, sizeof(v[i].schedule_id), "%s",
                       schedule_id != NULL ? schedule_id : "");
        v[i].repo = sl_strdup(json_string_value(json_object_get(item, "repo_id")));
        v[i].ref = ref != NULL ? sl_strdup(ref) : NULL;
        v[i].command = sl_strdup(command);
        v[i].env_key = env_id != NULL && env_id[0] != '\0' ? sl_strdup(env_id) : NULL;
        v[i].timeout_ms = timeout_ms;
        if (v[i].repo == NULL || (ref != NULL && v[i].ref == NULL) || v[i].command == NULL
            || (env_id != NULL && env_id[0] != '\0' && v[i].env_key == NULL)) {
            return SL_ENOMEM;
        }
    }
    return 0;
}

/* ---- rendering ---------------------------------------------------------------------------- */

/* The API form of a job. `full`: with the command's output (GET by id); a list leaves both
 * output streams out (each may be 1 MiB). */
static json_t *job_json(const struct sl_store_job *j, bool full)
{
    json_t *env = j->env_json != NULL ? json_loads(j->env_json, 0, NULL) : NULL;
    json_t *res = j->result_json != NULL ? json_loads(j->result_json, 0, NULL) : NULL;

    if (res != NULL && !full) {
        (void)json_object_del(res, "stdout");
        (void)json_object_del(res, "stderr");
    }
    return json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s?, s:o*, s:s?, s:o*, s:s?, s:s, s:s?, s:s?, "
                     "s:s?, s:o}",
                     "id", j->id, "status", j->status, "repo_id", j->repo, "ref", j->ref, "command",
                     j->command, "environment_requested", j->env_key, "environment",
                     env != NULL ? env : json_null(), "sandbox_id", j->sandbox_id, "result",
                     res != NULL ? res : json_null(), "error", j->error, "created_at",
                     j->created_at, "started_at", j->started_at[0] != '\0' ? j->started_at : NULL,
                     "finished_at", j->finished_at[0] != '\0' ? j->finished_at : NULL,
                     "schedule_id", j->schedule_id[0] != '\0' ? j->schedule_id : NULL, "timeoutMs",
                     j->timeout_ms > 0 ? json_integer(j->timeout_ms) : json_null());
}

/* How many next runs an answer lists. */
#define NEXT_RUNS 5

/* The runs of `cron` from `first` on (`first` itself, then each one after the last), at most
 * NEXT_RUNS, in RFC 3339 UTC; empty when `first` is -1 (disabled, or never). */
static json_t *next_runs_json(const struct sl_cron *cron, int64_t first)
{
    json_t *arr = json_array();
    int64_t t = first;

    for (int i = 0; arr != NULL && t >= 0 && i < NEXT_RUNS; i++) {
        char text[32];

        rfc3339(t, text, sizeof(text));
        (void)json_array_append_new(arr, json_string(text));
        t = sl_cron_next(cron, t);
    }
    return arr;
}

/* A cron expression in words (control/jobs/cron.h sl_cron_words()), or JSON null when the
 * stored text no longer parses. */
static json_t *cron_text_json(const char *expr, struct sl_cron *cron)
{
    char err[256];
    char words[SL_CRON_WORDS_MAX];

    if (sl_cron_parse(expr, cron, err, sizeof(err)) < 0) {
        return json_null();
    }
    sl_cron_words(cron, words, sizeof(words));
    return json_string(words);
}

static json_t *schedule_json(const struct sl_jobs_http *rq, const struct sl_store_schedule *s)
{
    struct sl_cron cron;
    json_t *text = cron_text_json(s->cron, &cron);
    json_t *runs =
            json_is_string(text) && s->enabled ? next_runs_json(&cron, s->next_run) : json_array();
    char next[32] = "";
    char last[32] = "";
    json_t *repos = json_loads(s->repos_json, 0, NULL);
    json_t *env = json_null();

    if (s->next_run >= 0) {
        rfc3339(s->next_run, next, sizeof(next));
    }
    if (s->last_run >= 0) {
        rfc3339(s->last_run, last, sizeof(last));
    }
    if (s->env_key != NULL) {
        struct sl_env_row row;

        memset(&row, 0, sizeof(row));
        if (sl_store_env_get(rq->store, s->env_key, &row) == 0) {
            /* Another user's environment is private, also to admins (docs/reference/api.md
             * §5.1): its id, never its name. */
            bool seen = row.scope == SL_SCOPE_GLOBAL || strcmp(row.owner_id, rq->user->id) == 0;

            env = json_pack("{s:s,s:s?}", "id", row.id, "name", seen ? row.name : NULL);
        } else {
            /* Deleted since: runs will fail with "no environment". */
            env = json_pack("{s:s,s:n}", "id", s->env_key, "name");
        }
        sl_env_row_finish(&row);
    }
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:s, s:o*, s:o, s:b, s:s?, s:o, s:s?, s:s, "
                     "s:s}",
                     "id", s->id, "owner_id", s->owner_id, "name", s->name, "cron", s->cron,
                     "cron_text", text, "repos", repos != NULL ? repos : json_array(), "command",
                     s->command, "environment", env, "timeoutMs",
                     s->timeout_ms > 0 ? json_integer(s->timeout_ms) : json_null(), "enabled",
                     s->enabled, "next_run_at", next[0] != '\0' ? next : NULL, "next_runs",
                     runs != NULL ? runs : json_array(), "last_run_at",
                     last[0] != '\0' ? last : NULL, "created_at", s->created_at, "updated_at",
                     s->updated_at);
}

static void internal(int rc, const char *what, int *status, json_t **doc)
{
    sl_log(SL_LOG_ERROR, 0, "msg=\"API request failed\" during=\"%s\" err=%s", what,
           sl_strerror(rc));
    *status = rc == SL_ENOMEM ? 503 : 500;
    *doc = message("internal error; see the control plane's log");
}

/* The caller may run sandboxes in every repository of the batch (control/git/gitplat.h);
 * answers the first refusal ({"message","repo"}) itself. */
static bool may_use_all(const struct sl_jobs_http *rq, json_t *repos, int *status, json_t **doc)
{
    struct sl_gitplat_caller who = { rq->user->id, rq->user->is_admin, rq->token_writes };
    struct sl_gitplat_verdict v;
    size_t i;
    json_t *item;

    json_array_foreach(repos, i, item)
    {
        const char *repo = json_string_value(json_object_get(item, "repo_id"));
        int rc = sl_gitplat_may_use(rq->git, repo, &who, &v);

        if (rc < 0) {
            internal(rc, "checking a repository's roles", status, doc);
            return false;
        }
        if (v.status != 0) {
            *status = v.status;
            *doc = json_pack("{s:s, s:s}", "message", v.message, "repo", repo);
            return false;
        }
    }
    return true;
}

/* ---- /api/v1/jobs ------------------------------------------------------------------------- */

static void jobs_create(const struct sl_jobs_http *rq, int *status, json_t **doc, bool *kick)
{
    struct verrs v = { NULL };
    struct batch b;
    struct sl_store_job *jobs = NULL;
    char env_id[SL_UUID_LEN + 1];
    json_t *root = parse_body(rq, status, doc);
    json_t *ids;
    json_t *items;
    size_t n = 0;
    int rc;

    if (root == NULL) {
        return;
    }
    parse_batch(root, NULL, 0, &b, &v);
    if (v.list != NULL) {
        *status = 422;
        *doc = verrs_doc(&v);
        goto out;
    }
    if (!find_batch_env(rq, &b, env_id, status, doc) || !may_use_all(rq, b.repos, status, doc)) {
        goto out;
    }
    if (!rq->sandboxes_on) {
        *status = 503;
        *doc = message("%s", rq->why_off != NULL ? rq->why_off : "sandboxes are not enabled");
        goto out;
    }
    n = json_array_size(b.repos);
    jobs = sl_calloc(n, sizeof(*jobs));
    rc = jobs != NULL ? 0 : SL_ENOMEM;
    if (rc == 0) {
        rc = fill_jobs(rq->user->id, NULL, b.repos, b.command, env_id, b.timeout_ms, jobs);
    }
    if (rc == 0) {
        rc = sl_store_jobs_insert(rq->store, jobs, n);
    }
    if (rc < 0) {
        internal(rc, "queueing jobs", status, doc);
        goto out;
    }
    *kick = true;
    ids = json_array();
    items = json_array();
    for (size_t i = 0; i < n; i++) {
        (void)json_array_append_new(ids, json_string(jobs[i].id));
        (void)json_array_append_new(items, job_json(&jobs[i], false));
    }
    *status = 201;
    *doc = json_pack("{s:o,s:o}", "job_ids", ids, "jobs", items);
    sl_log(SL_LOG_INFO, 0, "msg=\"jobs queued\" n=%zu owner=%s env=%s", n, rq->user->name,
           env_id[0] != '\0' ? env_id : "-");
out:
    sl_store_free_jobs(jobs, n);
    json_decref(root);
}

static void jobs_list(const struct sl_jobs_http *rq, int *status, json_t **doc)
{
    char st[32] = "";
    char sched[64] = "";
    char limit_text[16] = "";
    unsigned long limit = SL_JOBS_LIST_DEFAULT;
    struct sl_store_job *v = NULL;
    struct verrs e = { NULL };
    size_t n = 0;
    json_t *arr;
    int rc;

    rc = rq->query_get(rq->query, "status", st, sizeof(st));
    if (rc == SL_EINVAL || (rc == 0 && !is_status(st))) {
        verr(&e, "status", "one of queued, running, succeeded, failed, error");
    }
    rc = rq->query_get(rq->query, "schedule_id", sched, sizeof(sched));
    if (rc == SL_EINVAL || (rc == 0 && !is_uuid_shaped(sched))) {
        verr(&e, "schedule_id", "a schedule id");
    }
    rc = rq->query_get(rq->query, "limit", limit_text, sizeof(limit_text));
    if (rc == 0) {
        char *end = NULL;

        /* Digits only: strtoul() would also take leading white space and a sign. */
        limit = limit_text[0] >= '0' && limit_text[0] <= '9' ? strtoul(limit_text, &end, 10) : 0;
        if (end == limit_text || end == NULL || *end != '\0' || limit < 1
            || limit > SL_JOBS_LIST_MAX) {
            verr(&e, "limit", "an integer from 1 to %d", SL_JOBS_LIST_MAX);
        }
    } else if (rc == SL_EINVAL) {
        verr(&e, "limit", "an integer from 1 to %d", SL_JOBS_LIST_MAX);
    }
    if (e.list != NULL) {
        *status = 422;
        *doc = verrs_doc(&e);
        return;
    }
    rc = sl_store_job_list(rq->store, rq->user->is_admin ? NULL : rq->user->id,
                           st[0] != '\0' ? st : NULL, sched[0] != '\0' ? sched : NULL, limit, &v,
                           &n);
    if (rc < 0) {
        internal(rc, "listing jobs", status, doc);
        return;
    }
    arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        (void)json_array_append_new(arr, job_json(&v[i], false));
    }
    sl_store_free_jobs(v, n);
    *status = 200;
    *doc = json_pack("{s:o}", "jobs", arr);
}

static void route_jobs(const struct sl_jobs_http *rq, const char *tail, int *status, json_t **doc,
                       bool *kick)
{
    const char *m = rq->method;
    struct sl_store_job j;
    int rc;

    if (*tail == '\0') {
        if (strcmp(m, "POST") == 0) {
            jobs_create(rq, status, doc, kick);
        } else if (strcmp(m, "GET") == 0) {
            jobs_list(rq, status, doc);
        } else {
            *status = 405;
            *doc = message("use GET or POST");
        }
        return;
    }
    tail++;
    if (!is_uuid_shaped(tail)) {
        *status = 404;
        *doc = message("job not found");
        return;
    }
    if (strcmp(m, "GET") != 0) {
        *status = 405;
        *doc = message("use GET");
        return;
    }
    memset(&j, 0, sizeof(j));
    rc = sl_store_job_get(rq->store, tail, &j);
    if (rc == SL_ENOTFOUND) {
        *status = 404;
        *doc = message("job not found");
    } else if (rc < 0) {
        internal(rc, "reading a job", status, doc);
    } else if (!rq->user->is_admin && strcmp(j.owner_id, rq->user->id) != 0) {
        /* As sandboxes answer: the job exists, and it is someone else's. */
        *status = 403;
        *doc = message("not your job");
    } else {
        *status = 200;
        *doc = job_json(&j, true);
    }
    sl_store_job_finish(&j);
}

/* ---- /api/v1/schedules -------------------------------------------------------------------- */

/* Parses a POST/PUT body into `s` (owned strings). Answers 4xx itself. `pinned`: for an admin's
 * PUT of someone else's schedule, the id of the environment it is pinned to (NULL else): that
 * id is kept as it is, unlooked-up, since the owner's private environment is not the admin's
 * to see. `cur_repos`: for a PUT, the repositories the schedule has now (stored normal form);
 * NULL for a POST. */
static bool parse_schedule(const struct sl_jobs_http *rq, const char *pinned, const char *cur_repos,
                           struct sl_store_schedule *s, int *status, json_t **doc)
{
    static const char *const extra[] = { "name", "cron", "enabled" };
    struct verrs v = { NULL };
    struct batch b;
    struct sl_cron cron;
    char err[256];
    char env_id[SL_UUID_LEN + 1];
    json_t *root = parse_body(rq, status, doc);
    const json_t *name;
    const json_t *expr;
    const json_t *enabled;
    json_t *repos = NULL;
    size_t i;
    json_t *item;
    bool ok = false;

    if (root == NULL) {
        return false;
    }
    parse_batch(root, extra, SL_ARRAY_LEN(extra), &b, &v);
    name = json_object_get(root, "name");
    expr = json_object_get(root, "cron");
    enabled = json_object_get(root, "enabled");
    if (!json_is_string(name)
        || !is_schedule_name(json_string_value(name), json_string_length(name))) {
        verr(&v, "name",
             "a name of 1-%d bytes without control, invisible or reordering characters is "
             "required",
             NAME_MAX_BYTES);
    }
    if (!json_is_string(expr)) {
        verr(&v, "cron", "%s", CRON_REQUIRED);
    } else if (strlen(json_string_value(expr)) != json_string_length(expr)
               || sl_cron_parse(json_string_value(expr), &cron, err, sizeof(err)) < 0) {
        if (strlen(json_string_value(expr)) != json_string_length(expr)) {
            (void)snprintf(err, sizeof(err), "must not contain NUL bytes");
        }
        verr(&v, "cron", "%s", err);
    }
    if (enabled != NULL && !json_is_boolean(enabled)) {
        verr(&v, "enabled", "true or false");
    }
    if (v.list != NULL) {
        *status = 422;
        *doc = verrs_doc(&v);
        goto out;
    }
    if (pinned != NULL && b.env != NULL && strcmp(b.env, pinned) == 0) {
        (void)snprintf(env_id, sizeof(env_id), "%s", pinned);
    } else if (!find_batch_env(rq, &b, env_id, status, doc)) {
        goto out;
    }
    /* Stored in a normal form: {"repo_id","ref"} with ref null when absent. */
    repos = json_array();
    json_array_foreach(b.repos, i, item)
    {
        const json_t *ref = json_object_get(item, "ref");

        (void)json_array_append_new(repos, json_pack("{s:O,s:O}", "repo_id",
                                                     json_object_get(item, "repo_id"), "ref",
                                                     json_is_string(ref) ? ref : json_null()));
    }
    s->repos_json = json_dumps(repos, JSON_COMPACT);
    if (s->repos_json == NULL) {
        internal(SL_ENOMEM, "parsing a schedule", status, doc);
        goto out;
    }
    /* The repositories it is saved with need what POST /jobs needs from the caller (a
     * repository not registered, or one the caller cannot see, is the same 404 naming it), so
     * that a schedule whose every run would fail is refused when it is saved, as a job is. A PUT
     * that keeps them is not checked again (an admin may still pause or rename a schedule whose
     * repository went away); its jobs check them when they run. And its jobs run as the
     * owner's account can act (a schedule has no token), so an admin's token that does not act
     * as an admin (scope write) would make a schedule that runs where the token itself may not:
     * saving it needs what POST /jobs needs from that token, whatever changed. */
    if ((cur_repos == NULL || strcmp(cur_repos, s->repos_json) != 0
         || (rq->account_admin && !rq->user->is_admin))
        && !may_use_all(rq, b.repos, status, doc)) {
        goto out;
    }
    s->name = sl_strdup(json_string_value(name));
    s->cron = sl_strdup(json_string_value(expr));
    s->command = sl_strdup(b.command);
    s->env_key = env_id[0] != '\0' ? sl_strdup(env_id) : NULL;
    s->timeout_ms = b.timeout_ms;
    s->enabled = enabled == NULL || json_is_true(enabled);
    s->next_run = s->enabled ? sl_cron_next(&cron, (int64_t)time(NULL)) : -1;
    if (s->name == NULL || s->cron == NULL || s->command == NULL
        || (env_id[0] != '\0' && s->env_key == NULL)) {
        internal(SL_ENOMEM, "parsing a schedule", status, doc);
        goto out;
    }
    ok = true;
out:
    json_decref(repos);
    json_decref(root);
    return ok;
}

static void schedules_create(const struct sl_jobs_http *rq, int *status, json_t **doc)
{
    struct sl_store_schedule s;
    int rc;

    memset(&s, 0, sizeof(s));
    if (parse_schedule(rq, NULL, NULL, &s, status, doc)) {
        (void)snprintf(s.owner_id, sizeof(s.owner_id), "%s", rq->user->id);
        rc = sl_store_schedule_insert(rq->store, &s);
        if (rc < 0) {
            internal(rc, "creating a schedule", status, doc);
        } else {
            *status = 201;
            *doc = schedule_json(rq, &s);
        }
    }
    sl_store_schedule_finish(&s);
}

static void schedules_list(const struct sl_jobs_http *rq, int *status, json_t **doc)
{
    struct sl_store_schedule *v = NULL;
    size_t n = 0;
    json_t *arr;
    int rc = sl_store_schedule_list(rq->store, rq->user->is_admin ? NULL : rq->user->id,
                                    SL_JOBS_SCHEDULES_MAX, &v, &n);

    if (rc < 0) {
        internal(rc, "listing schedules", status, doc);
        return;
    }
    arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        (void)json_array_append_new(arr, schedule_json(rq, &v[i]));
    }
    sl_store_free_schedules(v, n);
    *status = 200;
    *doc = json_pack("{s:o}", "schedules", arr);
}

/* Whether `a` and `b` run the same thing with the same secrets: the same repositories (in the
 * stored normal form), command and pinned environment (or none). The name, cron, enabled and
 * time limit may differ. */
static bool same_run(const struct sl_store_schedule *a, const struct sl_store_schedule *b)
{
    return strcmp(a->repos_json, b->repos_json) == 0 && strcmp(a->command, b->command) == 0
           && (a->env_key == NULL) == (b->env_key == NULL)
           && (a->env_key == NULL || strcmp(a->env_key, b->env_key) == 0);
}

static void schedule_one(const struct sl_jobs_http *rq, const char *id, int *status, json_t **doc)
{
    const char *m = rq->method;
    struct sl_store_schedule cur;
    struct sl_store_schedule next;
    bool owner;
    int rc;

    memset(&cur, 0, sizeof(cur));
    memset(&next, 0, sizeof(next));
    if (strcmp(m, "GET") != 0 && strcmp(m, "PUT") != 0 && strcmp(m, "DELETE") != 0) {
        *status = 405;
        *doc = message("use GET, PUT or DELETE");
        return;
    }
    rc = is_uuid_shaped(id) ? sl_store_schedule_get(rq->store, id, &cur) : SL_ENOTFOUND;
    if (rc == SL_ENOTFOUND) {
        *status = 404;
        *doc = message("no schedule '%.64s'", id);
        return;
    }
    if (rc < 0) {
        internal(rc, "reading a schedule", status, doc);
        return;
    }
    owner = strcmp(cur.owner_id, rq->user->id) == 0;
    if (!rq->user->is_admin && !owner) {
        *status = 403;
        *doc = message("not your schedule");
    } else if (strcmp(m, "GET") == 0) {
        *status = 200;
        *doc = schedule_json(rq, &cur);
    } else if (strcmp(m, "DELETE") == 0) {
        rc = sl_store_schedule_delete(rq->store, cur.id);
        if (rc < 0 && rc != SL_ENOTFOUND) {
            internal(rc, "deleting a schedule", status, doc);
        } else {
            *status = 204;
            *doc = NULL;
        }
    } else if (!parse_schedule(rq, owner ? NULL : cur.env_key, cur.repos_json, &next, status,
                               doc)) {
        /* Answered. */
    } else if (!owner && !same_run(&cur, &next)) {
        /* Its jobs run as the owner, with the owner's environments and their secrets: an admin
         * who could change the command would run theirs with them. */
        *status = 403;
        *doc = message("only the schedule's owner can change what it runs (repos, command, "
                       "environment)");
    } else {
        memcpy(next.id, cur.id, sizeof(next.id));
        memcpy(next.owner_id, cur.owner_id, sizeof(next.owner_id));
        rc = sl_store_schedule_replace(rq->store, &next);
        if (rc == SL_ENOTFOUND) {
            *status = 404;
            *doc = message("no schedule '%.64s'", id);
        } else if (rc < 0) {
            internal(rc, "replacing a schedule", status, doc);
        } else {
            next.last_run = cur.last_run;
            memcpy(next.created_at, cur.created_at, sizeof(next.created_at));
            *status = 200;
            *doc = schedule_json(rq, &next);
        }
    }
    sl_store_schedule_finish(&cur);
    sl_store_schedule_finish(&next);
}

/* GET /api/v1/schedules/preview?cron=EXPR: the expression in words and its next runs from now,
 * or the 422 a POST with that cron would answer. */
static void schedules_preview(const struct sl_jobs_http *rq, int *status, json_t **doc)
{
    /* Room for a value longer than the limit, so that sl_cron_parse() says "longer than". */
    char expr[SL_CRON_TEXT_MAX * 2];
    char err[256];
    struct verrs v = { NULL };
    struct sl_cron cron;
    char words[SL_CRON_WORDS_MAX];
    int rc;

    if (strcmp(rq->method, "GET") != 0) {
        *status = 405;
        *doc = message("use GET");
        return;
    }
    rc = rq->query_get(rq->query, "cron", expr, sizeof(expr));
    if (rc == SL_ENOTFOUND) {
        verr(&v, "cron", "%s", CRON_REQUIRED);
    } else if (rc < 0) {
        verr(&v, "cron", "longer than %d bytes, a NUL byte or a bad %%-escape", SL_CRON_TEXT_MAX);
    } else if (sl_cron_parse(expr, &cron, err, sizeof(err)) < 0) {
        verr(&v, "cron", "%s", err);
    }
    if (v.list != NULL) {
        *status = 422;
        *doc = verrs_doc(&v);
        return;
    }
    sl_cron_words(&cron, words, sizeof(words));
    *status = 200;
    *doc = json_pack("{s:s,s:s,s:o}", "cron", expr, "cron_text", words, "next_runs",
                     next_runs_json(&cron, sl_cron_next(&cron, (int64_t)time(NULL))));
}

static void route_schedules(const struct sl_jobs_http *rq, const char *tail, int *status,
                            json_t **doc)
{
    if (*tail == '\0') {
        if (strcmp(rq->method, "POST") == 0) {
            schedules_create(rq, status, doc);
        } else if (strcmp(rq->method, "GET") == 0) {
            schedules_list(rq, status, doc);
        } else {
            *status = 405;
            *doc = message("use GET or POST");
        }
        return;
    }
    /* Schedule ids are UUIDs: "preview" is never one. */
    if (strcmp(tail, "/preview") == 0) {
        schedules_preview(rq, status, doc);
        return;
    }
    schedule_one(rq, tail + 1, status, doc);
}

bool sl_jobs_http_matches(const char *path)
{
    size_t nj = strlen(JOBS_PATH);
    size_t ns = strlen(SCHEDULES_PATH);

    return (strncmp(path, JOBS_PATH, nj) == 0 && (path[nj] == '\0' || path[nj] == '/'))
           || (strncmp(path, SCHEDULES_PATH, ns) == 0 && (path[ns] == '\0' || path[ns] == '/'));
}

void sl_jobs_http(const struct sl_jobs_http *rq, int *status, json_t **doc, bool *kick)
{
    const char *p = rq->path;
    size_t nj = strlen(JOBS_PATH);
    size_t ns = strlen(SCHEDULES_PATH);

    *status = 500;
    *doc = NULL;
    *kick = false;
    if (strncmp(p, JOBS_PATH, nj) == 0 && (p[nj] == '\0' || p[nj] == '/')) {
        if (strcmp(p + nj, "/") == 0 || (p[nj] == '/' && strchr(p + nj + 1, '/') != NULL)) {
            *status = 404;
            *doc = message("no such resource");
            return;
        }
        route_jobs(rq, p + nj, status, doc, kick);
    } else if (strncmp(p, SCHEDULES_PATH, ns) == 0 && (p[ns] == '\0' || p[ns] == '/')) {
        if (strcmp(p + ns, "/") == 0 || (p[ns] == '/' && strchr(p + ns + 1, '/') != NULL)) {
            *status = 404;
            *doc = message("no such resource");
            return;
        }
        route_schedules(rq, p + ns, status, doc);
    } else {
        *status = 404;
        *doc = message("no such resource");
    }
}

/* ---- the pool ----------------------------------------------------------------------------- */

struct sl_jobs {
    struct sl_jobs_config cfg;
    uv_timer_t tick;
    /* Workers busy (a claim on the pool, or a job in flight). */
    unsigned active;
    /* The last claim found no queued job: do not ask again until a kick. */
    bool idle;
    /* The restart sweep is done: claims may start. */
    bool started;
    /* A schedule check is on the thread pool. */
    bool checking;
    bool stopping;
    bool tick_open;
};

/* One job through its steps. */
struct run {
    uv_work_t work;
    struct sl_jobs *pool;
    /* Filled by the claim; rc SL_ENOTFOUND when none was queued. */
    int rc;
    struct sl_store_job job;
    struct sl_sandbox_spec *spec;
    /* {"id","name","matched_by"} text once resolved. */
    char *env_json;
    char sandbox_id[80];
    /* The outcome to record. */
    const char *status;
    char *result_json;
    char error[ERR_BYTES];
};

static void fill(struct sl_jobs *j);

static void run_free(struct run *r)
{
    sl_store_job_finish(&r->job);
    sl_sandbox_spec_free(r->spec);
    sl_free(r->env_json);
    sl_free(r->result_json);
    sl_free(r);
}

/* The worker is free again. */
static void run_done(struct run *r)
{
    struct sl_jobs *j = r->pool;

    run_free(r);
    j->active--;
    fill(j);
}

static void on_recorded(uv_work_t *w, int status)
{
    struct run *r = SL_CONTAINER_OF(w, struct run, work);

    (void)status;
    run_done(r);
}

static void on_record(uv_work_t *w)
{
    struct run *r = SL_CONTAINER_OF(w, struct run, work);
    int rc = sl_store_job_end(r->pool->cfg.store, r->job.id, r->status, r->result_json,
                              r->error[0] != '\0' ? r->error : NULL, r->env_json,
                              r->sandbox_id[0] != '\0' ? r->sandbox_id : NULL);

    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"cannot record a job's result\" job=%s err=%s", r->job.id,
               sl_strerror(rc));
    }
}

/* Records the outcome (r->status, result, error) on the thread pool, then frees the worker. */
static void record(struct run *r)
{
    sl_log(SL_LOG_INFO, 0, "msg=\"job finished\" job=%s repo=%s status=%s sandbox=%s%s%s%s",
           r->job.id, r->job.repo, r->status, r->sandbox_id[0] != '\0' ? r->sandbox_id : "-",
           r->error[0] != '\0' ? " error=\"" : "", r->error, r->error[0] != '\0' ? "\"" : "");
    if (uv_queue_work(r->pool->cfg.loop, &r->work, on_record, on_recorded) < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"cannot queue a job's result\" job=%s", r->job.id);
        run_done(r);
    }
}

static void set_error_from(struct run *r, const char *what, int status, const json_t *body)
{
    const char *text = json_string_value(json_object_get(body, "message"));

    if (text == NULL) {
        text = json_string_value(json_object_get(body, "error"));
    }
    r->status = "error";
    (void)snprintf(r->error, sizeof(r->error), "%s: %s (%d)", what,
                   text != NULL ? text : "no reason given", status);
}

/* Stopping: leave the job `running` in the database; the next start marks it. */
static bool abandon_if_stopping(struct run *r)
{
    if (!r->pool->stopping) {
        return false;
    }
    sl_log(SL_LOG_INFO, 0, "msg=\"job cut off by the stop\" job=%s", r->job.id);
    run_done(r);
    return true;
}

static void on_closed(void *arg, int status, json_t *body)
{
    struct run *r = arg;

    if (status != 204) {
        sl_log(SL_LOG_WARN, 0, "msg=\"closing a job's sandbox failed\" job=%s sandbox=%s status=%d",
               r->job.id, r->sandbox_id, status);
    }
    json_decref(body);
    if (r->pool->stopping && r->result_json == NULL) {
        (void)abandon_if_stopping(r);
        return;
    }
    record(r);
}

static void close_sandbox(struct run *r)
{
    struct sl_sandbox_caller caller = { r->job.owner_id, false };

    sl_sandboxes_call(r->pool->cfg.sandboxes, &caller, r->job.repo, r->sandbox_id, "close", NULL,
                      on_closed, r);
}

static void on_exec(void *arg, int status, json_t *body)
{
    struct run *r = arg;

    if (abandon_if_stopping(r)) {
        json_decref(body);
        return;
    }
    if (status == 200 && json_is_integer(json_object_get(body, "exitCode"))) {
        r->status =
                json_integer_value(json_object_get(body, "exitCode")) == 0 ? "succeeded" : "failed";
        r->result_json = json_dumps(body, JSON_COMPACT);
        if (r->result_json == NULL) {
            r->status = "error";
            (void)snprintf(r->error, sizeof(r->error), "the result could not be encoded");
        }
    } else {
        set_error_from(r, "the command could not run", status, body);
    }
    json_decref(body);
    close_sandbox(r);
}

/* Notes a running job's sandbox in the database (GET shows it while the job runs). */
struct note {
    uv_work_t work;
    struct sl_store *store;
    char job_id[SL_UUID_LEN + 1];
    char sandbox_id[80];
};

static void on_note(uv_work_t *w)
{
    struct note *n = SL_CONTAINER_OF(w, struct note, work);
    int rc = sl_store_job_set_run(n->store, n->job_id, NULL, n->sandbox_id);

    if (rc < 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"cannot record a job's sandbox\" job=%s err=%s", n->job_id,
               sl_strerror(rc));
    }
}

static void on_noted(uv_work_t *w, int status)
{
    (void)status;
    sl_free(SL_CONTAINER_OF(w, struct note, work));
}

/* Best effort: the end of the job records the sandbox id in any case. */
static void note_sandbox(struct run *r)
{
    struct note *n = sl_calloc(1, sizeof(*n));

    if (n == NULL) {
        return;
    }
    n->store = r->pool->cfg.store;
    memcpy(n->job_id, r->job.id, sizeof(n->job_id));
    memcpy(n->sandbox_id, r->sandbox_id, sizeof(n->sandbox_id));
    if (uv_queue_work(r->pool->cfg.loop, &n->work, on_note, on_noted) < 0) {
        sl_free(n);
    }
}

static void on_opened(void *arg, int status, json_t *body)
{
    struct run *r = arg;
    const char *id = json_string_value(json_object_get(body, "id"));
    struct sl_sandbox_caller caller = { r->job.owner_id, false };
    json_t *req;

    /* The manager took the spec. */
    r->spec = NULL;
    if (abandon_if_stopping(r)) {
        json_decref(body);
        return;
    }
    if (status != 201 || id == NULL || strlen(id) >= sizeof(r->sandbox_id)) {
        set_error_from(r, "the sandbox did not start", status, body);
        json_decref(body);
        record(r);
        return;
    }
    (void)snprintf(r->sandbox_id, sizeof(r->sandbox_id), "%s", id);
    json_decref(body);
    sl_log(SL_LOG_INFO, 0, "msg=\"job running\" job=%s repo=%s sandbox=%s", r->job.id, r->job.repo,
           r->sandbox_id);
    note_sandbox(r);
    req = r->job.timeout_ms > 0 ? json_pack("{s:s,s:I}", "cmd", r->job.command, "timeoutMs",
                                            (json_int_t)r->job.timeout_ms)
                                : json_pack("{s:s}", "cmd", r->job.command);
    if (req == NULL) {
        r->status = "error";
        (void)snprintf(r->error, sizeof(r->error), "out of memory");
        close_sandbox(r);
        return;
    }
    sl_sandboxes_call(r->pool->cfg.sandboxes, &caller, r->job.repo, r->sandbox_id, "exec", req,
                      on_exec, r);
    json_decref(req);
}

/* Thread pool: take the oldest queued job and prepare its sandbox. */
static void on_claim(uv_work_t *w)
{
    struct run *r = SL_CONTAINER_OF(w, struct run, work);
    struct sl_jobs *j = r->pool;
    json_t *env = NULL;
    int rc;

    r->rc = sl_store_job_claim(j->cfg.store, &r->job);
    if (r->rc < 0) {
        return;
    }
    rc = j->cfg.prepare(j->cfg.prepare_arg, r->job.owner_id, r->job.repo, r->job.ref,
                        r->job.env_key, &r->spec, &env, r->error, sizeof(r->error));
    if (rc < 0) {
        r->status = "error";
        return;
    }
    r->env_json = json_dumps(env, JSON_COMPACT);
    json_decref(env);
    rc = sl_store_job_set_run(j->cfg.store, r->job.id, r->env_json, NULL);
    if (rc < 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"cannot record a job's environment\" job=%s err=%s", r->job.id,
               sl_strerror(rc));
    }
}

static void on_claimed(uv_work_t *w, int status)
{
    struct run *r = SL_CONTAINER_OF(w, struct run, work);
    struct sl_jobs *j = r->pool;
    struct sl_sandbox_spec *spec;

    (void)status;
    if (r->rc == SL_ENOTFOUND) {
        j->idle = true;
        run_done(r);
        return;
    }
    if (r->rc < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"cannot claim a job\" err=%s", sl_strerror(r->rc));
        run_done(r);
        return;
    }
    if (abandon_if_stopping(r)) {
        return;
    }
    if (r->spec == NULL) {
        /* Could not prepare: the reason is in r->error. */
        record(r);
        return;
    }
    sl_log(SL_LOG_INFO, 0, "msg=\"job starting\" job=%s repo=%s ref=%s", r->job.id, r->job.repo,
           r->job.ref != NULL ? r->job.ref : "-");
    spec = r->spec;
    sl_sandboxes_open(j->cfg.sandboxes, spec, on_opened, r);
}

/* Starts claims while workers are free, jobs may be queued and sandboxes are ready. */
static void fill(struct sl_jobs *j)
{
    while (!j->stopping && j->started && !j->idle && j->active < j->cfg.concurrency
           && j->cfg.sandboxes != NULL && sl_sandboxes_is_ready(j->cfg.sandboxes)) {
        struct run *r = sl_calloc(1, sizeof(*r));

        if (r == NULL) {
            return;
        }
        r->pool = j;
        if (uv_queue_work(j->cfg.loop, &r->work, on_claim, on_claimed) < 0) {
            sl_free(r);
            return;
        }
        j->active++;
    }
}

void sl_jobs_kick(struct sl_jobs *j)
{
    if (j == NULL) {
        return;
    }
    j->idle = false;
    fill(j);
}

/* ---- schedules ---------------------------------------------------------------------------- */

struct check {
    uv_work_t work;
    struct sl_jobs *pool;
    size_t fired;
};

/* One due schedule: its jobs and its next time, in one transaction. */
static int fire_one(struct sl_store *st, const struct sl_store_schedule *s, int64_t now)
{
    struct sl_cron cron;
    struct sl_store_job *v = NULL;
    char err[256];
    json_t *repos = json_loads(s->repos_json, 0, NULL);
    size_t n = json_array_size(repos);
    int64_t next = -1;
    int rc;

    if (sl_cron_parse(s->cron, &cron, err, sizeof(err)) == 0) {
        next = sl_cron_next(&cron, now);
    }
    rc = n > 0 ? 0 : SL_EIO;
    if (rc == 0) {
        v = sl_calloc(n, sizeof(*v));
        rc = v != NULL ? 0 : SL_ENOMEM;
    }
    if (rc == 0) {
        rc = fill_jobs(s->owner_id, s->id, repos, s->command, s->env_key, s->timeout_ms, v);
    }
    if (rc == 0) {
        rc = sl_store_schedule_fire(st, s->id, s->next_run, now, next, v, n);
    } else {
        /* A damaged row: move it on rather than retry every second. */
        int moved = sl_store_schedule_fire(st, s->id, s->next_run, now, next, NULL, 0);

        if (moved < 0 && moved != SL_ENOTFOUND) {
            sl_log(SL_LOG_ERROR, 0, "msg=\"cannot move a schedule on\" schedule=%s err=%s", s->id,
                   sl_strerror(moved));
        }
    }
    if (rc == 0) {
        sl_log(SL_LOG_INFO, 0, "msg=\"schedule fired\" schedule=%s name=\"%.64s\" jobs=%zu", s->id,
               s->name, n);
    } else if (rc != SL_ENOTFOUND) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"schedule did not fire\" schedule=%s err=%s", s->id,
               sl_strerror(rc));
    }
    sl_store_free_jobs(v, n);
    json_decref(repos);
    return rc;
}

static void on_check(uv_work_t *w)
{
    struct check *c = SL_CONTAINER_OF(w, struct check, work);
    struct sl_store_schedule *v = NULL;
    int64_t now = (int64_t)time(NULL);
    size_t n = 0;
    int rc = sl_store_schedule_due(c->pool->cfg.store, now, DUE_PER_TICK, &v, &n);

    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"cannot read due schedules\" err=%s", sl_strerror(rc));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (fire_one(c->pool->cfg.store, &v[i], now) == 0) {
            c->fired++;
        }
    }
    sl_store_free_schedules(v, n);
}

static void on_checked(uv_work_t *w, int status)
{
    struct check *c = SL_CONTAINER_OF(w, struct check, work);
    struct sl_jobs *j = c->pool;

    (void)status;
    j->checking = false;
    if (c->fired > 0) {
        sl_jobs_kick(j);
    }
    sl_free(c);
}

static void on_tick(uv_timer_t *t)
{
    struct sl_jobs *j = t->data;
    struct check *c;

    if (j->stopping || !j->started) {
        return;
    }
    /* Sandboxes may have become ready since the last claim gave up. */
    fill(j);
    if (j->checking) {
        return;
    }
    c = sl_calloc(1, sizeof(*c));
    if (c == NULL) {
        return;
    }
    c->pool = j;
    if (uv_queue_work(j->cfg.loop, &c->work, on_check, on_checked) < 0) {
        sl_free(c);
        return;
    }
    j->checking = true;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

struct sweep {
    uv_work_t work;
    struct sl_jobs *pool;
    size_t n;
    int rc;
};

static void on_sweep(uv_work_t *w)
{
    struct sweep *s = SL_CONTAINER_OF(w, struct sweep, work);

    s->rc = sl_store_jobs_abandon(s->pool->cfg.store, SL_JOBS_RESTART_REASON, &s->n);
}

static void on_swept(uv_work_t *w, int status)
{
    struct sweep *s = SL_CONTAINER_OF(w, struct sweep, work);
    struct sl_jobs *j = s->pool;

    (void)status;
    if (s->rc < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"cannot mark interrupted jobs\" err=%s", sl_strerror(s->rc));
    } else if (s->n > 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"jobs interrupted by a restart marked error\" n=%zu", s->n);
    }
    sl_free(s);
    if (j->stopping) {
        return;
    }
    j->started = true;
    fill(j);
}

int sl_jobs_create(const struct sl_jobs_config *cfg, struct sl_jobs **out)
{
    struct sl_jobs *j;

    SL_ENSURE(cfg->concurrency <= SL_JOBS_MAX_WORKERS, SL_EINVAL);
    j = sl_calloc(1, sizeof(*j));
    if (j == NULL) {
        return SL_ENOMEM;
    }
    j->cfg = *cfg;
    if (j->cfg.concurrency == 0) {
        j->cfg.concurrency = SL_JOBS_DEFAULT_WORKERS;
    }
    *out = j;
    return 0;
}

void sl_jobs_start(struct sl_jobs *j)
{
    struct sweep *s = sl_calloc(1, sizeof(*s));

    SL_BUG_ON(uv_timer_init(j->cfg.loop, &j->tick) != 0);
    j->tick.data = j;
    j->tick_open = true;
    (void)uv_timer_start(&j->tick, on_tick, TICK_MS, TICK_MS);
    if (s == NULL) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"jobs are off\" err=%s", sl_strerror(SL_ENOMEM));
        return;
    }
    s->pool = j;
    if (uv_queue_work(j->cfg.loop, &s->work, on_sweep, on_swept) < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"jobs are off: cannot queue the restart sweep\"");
        sl_free(s);
    }
    sl_log(SL_LOG_INFO, 0, "msg=\"job pool starting\" concurrency=%u", j->cfg.concurrency);
}

void sl_jobs_stop(struct sl_jobs *j)
{
    if (j == NULL || j->stopping) {
        return;
    }
    j->stopping = true;
    if (j->tick_open) {
        uv_close((uv_handle_t *)&j->tick, NULL);
        j->tick_open = false;
    }
}

void sl_jobs_destroy(struct sl_jobs *j)
{
    sl_free(j);
}
