/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/jobs/jobs.h - jobs and scheduled jobs (docs/reference/api.md §5.5, docs/jobs.md).
 *
 * A job runs one command in a fresh sandbox for one repository: POST /api/v1/jobs makes one
 * queued job per repository of the batch, persisted in sluice.db (control/store/store). The pool on
 * the control plane's loop runs at most `concurrency` of them at a time, oldest first: claim
 * (queued -> running) and prepare the sandbox (resolution, values opened) on the thread pool,
 * then open the sandbox, exec the command and close the sandbox through control/sandbox/sandbox,
 * and record the result (succeeded, failed with the exit code, or error with the reason) on the
 * thread pool again. A schedule (cron, control/jobs/cron) makes ordinary jobs when it is due; a
 * timer on the loop checks once a second.
 *
 * Two halves:
 *   - sl_jobs_http(): the REST routes /api/v1/jobs and /api/v1/schedules, run inside an API
 *     thread-pool job (blocking store calls are fine there). Submitting a job needs, for every
 *     repository of the batch, what a sandbox needs (control/git/gitplat.h
 *     sl_gitplat_may_use()); its run checks it again for its owner, so a schedule's jobs are
 *     checked when they run;
 *   - struct sl_jobs: the pool and the schedule timer, on the loop.
 *
 * Restarts: sl_jobs_start() first marks jobs left `running` by an earlier process `error`
 * ("the control plane restarted while the job was running"); queued jobs then run as usual.
 * On a stop, jobs in flight are left as they are in the database (running), so the next start
 * marks them the same way.
 *
 * Threads: sl_jobs_http() on a thread-pool thread; everything else on the loop's thread.
 * Lifecycle: sl_jobs_create() -> sl_jobs_start() -> sl_jobs_kick()... -> sl_jobs_stop()
 * -> the loop runs dry -> sl_jobs_destroy().
 */
#ifndef SL_CONTROL_JOBS_JOBS_H
#define SL_CONTROL_JOBS_JOBS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>
#include <uv.h>

#include "base/err.h"
#include "control/git/gitplat.h"
#include "control/sandbox/sandbox.h"
#include "control/store/model.h"
#include "control/store/store.h"

/* Bounds of a request. */
#define SL_JOBS_MAX_REPOS       100
#define SL_JOBS_COMMAND_MAX     16384
#define SL_JOBS_LIST_DEFAULT    100
#define SL_JOBS_LIST_MAX        500
#define SL_JOBS_SCHEDULES_MAX   1000
#define SL_JOBS_DEFAULT_WORKERS 2u
#define SL_JOBS_MAX_WORKERS     64u
/* The reason given to jobs cut off by a restart. */
#define SL_JOBS_RESTART_REASON "the control plane restarted while the job was running"

/* ---- the REST half (thread pool) ---- */

/* Finds the environment `key` (an id or a name) among those the caller sees: 0 with `id` and
 * `*name` (owned) filled, SL_ENOTFOUND, or another failure. */
typedef int sl_jobs_find_env_fn(void *arg, const char *key, char id[SL_UUID_LEN + 1], char **name);
/* Decodes query parameter `key` into `out`: 0, SL_ENOTFOUND or SL_EINVAL. */
typedef int sl_jobs_query_fn(const char *query, const char *key, char *out, size_t cap);

struct sl_jobs_http {
    struct sl_store *store;
    /* Who may run jobs in which repository (borrowed). */
    struct sl_gitplat *git;
    const struct sl_user *user;
    /* The caller's token may write (scope write or admin). */
    bool token_writes;
    /* The caller's account is an admin's, whether or not this token acts as one (`user`'s
     * is_admin says that). */
    bool account_admin;
    /* Sandboxes are on: without them a valid submission is refused with 503 (`why_off`). */
    bool sandboxes_on;
    const char *why_off;
    const char *method;
    /* The whole path, /api/v1/jobs... or /api/v1/schedules... */
    const char *path;
    const char *query;
    const void *body;
    size_t body_len;
    sl_jobs_find_env_fn *find_env;
    sl_jobs_query_fn *query_get;
    void *arg;
};

/* True when `path` is one of the routes above. */
bool sl_jobs_http_matches(const char *path);

/* Answers one request: `*status` and `*doc` (a new reference; NULL for 204) and `*kick` set
 * when jobs were queued (the caller calls sl_jobs_kick() on the loop). */
void sl_jobs_http(const struct sl_jobs_http *rq, int *status, json_t **doc, bool *kick);

/* ---- the pool (loop) ---- */

struct sl_jobs; /* opaque */

/* Prepares a job's sandbox off the loop (control/web/api's sl_api_prepare_sandbox): resolution as
 * the owner `user_id`, the environment `envkey` (NULL resolves). Returns 0 with `*spec` and
 * `*env` ({"id","name","matched_by"}), or an error with its text in `err`. */
typedef int sl_jobs_prepare_fn(void *arg, const char *user_id, const char *repo, const char *ref,
                               const char *envkey, struct sl_sandbox_spec **spec, json_t **env,
                               char *err, size_t errlen);

struct sl_jobs_config {
    /* Borrowed; must outlive the pool. */
    uv_loop_t *loop;
    struct sl_store *store;
    /* NULL when sandboxes are off: jobs stay queued. */
    struct sl_sandboxes *sandboxes;
    /* Jobs running at once (1..SL_JOBS_MAX_WORKERS); 0 takes SL_JOBS_DEFAULT_WORKERS. */
    unsigned concurrency;
    sl_jobs_prepare_fn *prepare;
    void *prepare_arg;
};

/* Returns 0 or SL_ENOMEM / SL_EINVAL (a concurrency out of range). */
SL_MUST_CHECK int sl_jobs_create(const struct sl_jobs_config *cfg, struct sl_jobs **out);

/* Marks jobs of an earlier process `error`, then starts the pool and the schedule timer. */
void sl_jobs_start(struct sl_jobs *j);

/* New jobs were queued: fill free workers. */
void sl_jobs_kick(struct sl_jobs *j);

/* Starts nothing more and forgets the sandbox manager (it is closing); work in flight ends on
 * its own without recording (the next start marks those jobs). */
void sl_jobs_stop(struct sl_jobs *j);

/* Frees the pool once the loop has run dry after sl_jobs_stop(). NULL is fine. */
void sl_jobs_destroy(struct sl_jobs *j);

#endif
