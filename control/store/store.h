/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/store/store.h - the control plane's database (sluice.db, SQLite in WAL mode; the schema
 * is in docs/control-plane.md): users and their token hashes, environments with their repository
 * bindings, static clients, jobs and schedules, repositories and their members, and the snapshot
 * version counter.
 *
 * Lifecycle: sl_store_open() -> any of the functions below, from any thread -> sl_store_close().
 *
 * Threads: every function blocks on disk I/O and on a mutex that serialises the one SQLite
 * connection, so callers run them from thread-pool jobs (uv_queue_work), never on a loop
 * thread. Each change runs in one transaction (BEGIN IMMEDIATE): it happens whole or not at all,
 * and a refused change leaves the database as it was. Other processes may open the same file;
 * they wait for each other for up to 5 s (busy_timeout).
 *
 * Rows: the functions that return rows fill caller storage (control/store/model.h structs and the
 * structs below) with strings allocated by sl_malloc; the caller frees them with
 * sl_env_row_finish(), sl_user_finish(), sl_store_client_finish() or, for arrays, the
 * sl_store_free_*() functions. On error no row is filled and nothing needs freeing.
 *
 * Error contract (every int function):
 *   0             success;
 *   SL_ENOTFOUND  the row named by an id or name does not exist (or a row referenced by the new
 *                 one: the owner of an environment, the user of a token, the environment of a
 *                 client);
 *   SL_EEXIST     the change would break a uniqueness rule: a user name, a token hash, a static
 *                 client id, an environment id, an environment name within its scope and owner,
 *                 or a repository bound by another environment of the same scope and owner;
 *                 environment functions say which through `struct sl_store_conflict_info`;
 *   SL_EINVAL     the change is not allowed for this row or its fields are malformed: deleting
 *                 the default environment, making a user-scope environment the default,
 *                 deleting an environment that static clients use, a repository listed twice,
 *                 disabling or demoting the last enabled admin, a missing required field (the
 *                 conflict info says which, when it is one of these);
 *   SL_ENOMEM     an allocation failed;
 *   SL_EIO        SQLite failed (disk, lock timeout, corruption); the SQLite message is logged
 *                 where it happened. SQLITE_BUSY never surfaces otherwise.
 */
#ifndef SL_CONTROL_STORE_STORE_H
#define SL_CONTROL_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "control/store/model.h"

/* The schema version this build creates and understands. */
#define SL_STORE_SCHEMA_VERSION 5

struct sl_store; /* opaque */

/* Why an environment change was refused (see struct sl_store_conflict_info). */
enum sl_store_conflict {
    SL_STORE_CONFLICT_NONE = 0,
    /* SL_EEXIST: another environment of the same scope and owner has this name. */
    SL_STORE_CONFLICT_NAME,
    /* SL_EEXIST: `repo` is bound by another environment of the same scope and owner. */
    SL_STORE_CONFLICT_REPO,
    /* SL_EEXIST: an environment with this id exists already. */
    SL_STORE_CONFLICT_ID,
    /* SL_EINVAL: the row lists `repo` more than once. */
    SL_STORE_CONFLICT_REPO_TWICE,
    /* SL_EINVAL: the environment is the default: it cannot be deleted or moved out of global
     * scope until another one is made the default. */
    SL_STORE_CONFLICT_IS_DEFAULT,
    /* SL_EINVAL: only a global environment may be the default. */
    SL_STORE_CONFLICT_NOT_GLOBAL,
    /* SL_EINVAL: static clients still use the environment. */
    SL_STORE_CONFLICT_IN_USE,
};

/* What an environment change ran into. Caller storage: zero it before its first use; each call
 * that takes it frees what a previous call left and fills it anew on refusal. Free it with
 * sl_store_conflict_finish(). */
struct sl_store_conflict_info {
    enum sl_store_conflict kind;
    /* For NAME and REPO: the other environment's id and name (name owned; NULL otherwise). */
    char env_id[SL_UUID_LEN + 1];
    char *env_name;
    /* For REPO and REPO_TWICE: the repository. Owned; NULL otherwise. */
    char *repo;
};

/* Frees the owned members and zeroes the info. A zeroed info is fine. */
void sl_store_conflict_finish(struct sl_store_conflict_info *c);

enum sl_token_kind {
    SL_TOKEN_KIND_API = 0,
    SL_TOKEN_KIND_SANDBOX,
};

/* What an API token may do (docs/reference/api.md §5.8): read only reads; write does what its
 * user may; admin adds the admin actions, and only an admin's token may have it. Ordered. */
enum sl_token_scope {
    SL_TOKEN_SCOPE_READ = 0,
    SL_TOKEN_SCOPE_WRITE,
    SL_TOKEN_SCOPE_ADMIN,
};

/* Size of a token id ("tok_" and 16 hex digits) with its terminator. */
#define SL_STORE_TOKEN_ID_SIZE 24

/* A token's record; never the token, which only its hash stands for. */
struct sl_store_token {
    /* "tok_" and 16 hex digits; the store makes it when it is "" on insert. */
    char id[SL_STORE_TOKEN_ID_SIZE];
    char user_id[SL_UUID_LEN + 1];
    enum sl_token_kind kind;
    enum sl_token_scope scope;
    /* What its owner called it (1-128 bytes); owned. */
    char *name;
    /* RFC 3339 UTC; created_at is set by the store, expires_at "" for a token without end. */
    char created_at[32];
    char expires_at[32];
};

/* Frees the owned members and zeroes the token. A zeroed one is fine. */
void sl_store_token_finish(struct sl_store_token *t);
/* Finishes `n` tokens and frees the array. NULL is fine. */
void sl_store_free_tokens(struct sl_store_token *v, size_t n);

/* The name of a scope ("read", "write", "admin"), and back (false for another text). */
const char *sl_token_scope_name(enum sl_token_scope scope);
bool sl_token_scope_parse(const char *text, enum sl_token_scope *out);

/* A static client (docs/reference/api.md §5.1b): a host that sluice did not launch, admitted by
 * address or by token. */
struct sl_store_client {
    /* The client's name, chosen by the admin. Owned. */
    char *id;
    /* The environment's id. */
    char env_id[SL_UUID_LEN + 1];
    /* The environment's name: filled when read, ignored when created. Owned. */
    char *env_name;
    /* An address, a CIDR block and a sealed token (control/store/secrets); each NULL when absent;
     * at least one is present. Owned. */
    char *ip;
    char *cidr;
    char *token_sealed;
    /* RFC 3339 UTC; filled by the store. */
    char created_at[32];
};

/* Frees the owned members and zeroes the client. A zeroed one is fine. */
void sl_store_client_finish(struct sl_store_client *c);

/*
 * Opens the database at `path` (borrowed), creating it (mode 0600) when the file does not exist
 * or is empty, and upgrading an older schema in one transaction. Refuses, with a message in
 * `err` that names the file, and without writing a byte to it:
 *   - a file that is not an SQLite database, or is corrupt (SL_EINVAL);
 *   - an SQLite database without sluice's schema_version table but with other tables
 *     (SL_EINVAL);
 *   - a database with a newer schema (SL_EINVAL; "PATH has schema version N; this sluice knows
 *     M: upgrade sluice").
 * Other results: SL_EIO (cannot open or write it), SL_ENOMEM. On success `*out` is owned by
 * the caller (sl_store_close); on failure it is untouched.
 */
SL_MUST_CHECK int sl_store_open(const char *path, struct sl_store **out, char *err, size_t errlen);

/* Finishes cached statements and closes the connection. No call may be running. NULL is fine. */
void sl_store_close(struct sl_store *st);

/* ---- users and tokens ---- */

/*
 * Creates a user named `name` (borrowed) with a new random id, enabled, with `email` (borrowed;
 * NULL for none). On success fills `*out` (caller finishes it). SL_EEXIST when the name is
 * taken ignoring ASCII case (`Alice` when `alice` exists): `*out` then holds the user who has it
 * (the caller finishes it; its name is NULL when another process took the name at that moment).
 * SL_EINVAL when the name is empty. Lookups by name stay exact; a database that holds two names
 * differing only in case (written before this rule) keeps both.
 */
SL_MUST_CHECK int sl_store_user_create(struct sl_store *st, const char *name, bool is_admin,
                                       const char *email, struct sl_user *out);

/* Fills `*out` with the user with this id or name. SL_ENOTFOUND when there is none. */
SL_MUST_CHECK int sl_store_user_get(struct sl_store *st, const char *id, struct sl_user *out);
SL_MUST_CHECK int sl_store_user_get_by_name(struct sl_store *st, const char *name,
                                            struct sl_user *out);

/* Every user, ordered by name. `*out` is a new array of `*n` users (NULL when there are none);
 * free it with sl_store_free_users(). */
SL_MUST_CHECK int sl_store_user_list(struct sl_store *st, struct sl_user **out, size_t *n);

/* Finishes `n` users and frees the array. NULL is fine. */
void sl_store_free_users(struct sl_user *v, size_t n);

/* A change to a user: each `set_*` says whether its field changes. */
struct sl_store_user_change {
    bool set_disabled;
    bool disabled;
    bool set_admin;
    bool is_admin;
    bool set_email;
    /* NULL clears it. Borrowed. */
    const char *email;
};

/*
 * Applies `ch` to the user `name` in one transaction, then fills `*out` (may be NULL) with the
 * user as changed. SL_ENOTFOUND when there is no such user; SL_EINVAL when the change would
 * leave no enabled admin (the last one cannot be disabled or demoted), nothing written.
 */
SL_MUST_CHECK int sl_store_user_update(struct sl_store *st, const char *name,
                                       const struct sl_store_user_change *ch, struct sl_user *out);

/*
 * Records the hash (control/store/secrets sl_token_hash) of a token: `t` gives user_id, kind,
 * scope, name (NULL is "") and expires_at; an empty `t->id` gets a new one; id and created_at are
 * written back. SL_EEXIST when the hash (or the id) is known already; SL_ENOTFOUND when the user
 * does not exist.
 */
SL_MUST_CHECK int sl_store_token_add(struct sl_store *st, const uint8_t hash[32],
                                     struct sl_store_token *t);

/* sl_store_token_add() of an API token, unless its user holds `max_live` live API tokens (not
 * expired) already: then SL_ETOOBIG, nothing written. The count and the insert are one
 * transaction. */
SL_MUST_CHECK int sl_store_token_add_capped(struct sl_store *st, const uint8_t hash[32],
                                            struct sl_store_token *t, size_t max_live);

/*
 * Finds the user who holds the token with this hash; the stored hash is compared in constant
 * time. Fills `*out` and `*tok` (may be NULL; the caller finishes it). SL_ENOTFOUND when no token
 * has this hash. Expiry is the caller's to judge.
 */
SL_MUST_CHECK int sl_store_token_find_user(struct sl_store *st, const uint8_t hash[32],
                                           struct sl_user *out, struct sl_store_token *tok);

/* The API tokens of `user_id`, oldest first. Free the array with sl_store_free_tokens(). */
SL_MUST_CHECK int sl_store_token_list(struct sl_store *st, const char *user_id,
                                      struct sl_store_token **out, size_t *n);

/* Forgets a token. SL_ENOTFOUND when no token has this hash. */
SL_MUST_CHECK int sl_store_token_delete(struct sl_store *st, const uint8_t hash[32]);

/* Forgets the token `id` of `user_id`. SL_ENOTFOUND when that user has no token of that id. */
SL_MUST_CHECK int sl_store_token_delete_id(struct sl_store *st, const char *user_id,
                                           const char *id);

/* ---- environments ----
 *
 * Rules the store enforces on a row it writes: `name` and `env_json` present and `name`
 * non-empty; user scope has an `owner_id` (an existing user), global scope has none;
 * `cpus_centi` and `memory_bytes` are -1 (inherit) or positive; `egress_json` is NULL when the
 * network is off; each repository is a non-empty string, listed once; only a global row may be
 * the default. Validation of the JSON and of the other fields belongs to the API.
 * `conflict` may be NULL; when it is not (zeroed or filled by an earlier call), it is reset and
 * then filled on refusal.
 */

/*
 * Inserts `r` and its repositories. An empty `r->id` gets a new random id; `created_at` and
 * `updated_at` are set to now; all three are written back to `r`. When `r->is_default` is set
 * the row becomes the default and the previous default is demoted, in the same transaction.
 */
SL_MUST_CHECK int sl_store_env_insert(struct sl_store *st, struct sl_env_row *r,
                                      struct sl_store_conflict_info *conflict);

/*
 * Replaces the environment `r->id`: every field but `id`, `created_at`, `is_default` (which
 * only sl_store_env_set_default changes) and `observe_until` (only sl_store_env_set_observe and
 * the end of observes change it), and the whole list of repositories. Writes the stored
 * `is_default`, `created_at`, `observe_until` and the new `updated_at` back to `r`. SL_ENOTFOUND
 * when no such environment exists.
 */
SL_MUST_CHECK int sl_store_env_replace(struct sl_store *st, struct sl_env_row *r,
                                       struct sl_store_conflict_info *conflict);

/* Deletes an environment and its repository bindings. SL_ENOTFOUND; SL_EINVAL with IS_DEFAULT
 * or IN_USE. */
SL_MUST_CHECK int sl_store_env_delete(struct sl_store *st, const char *id,
                                      struct sl_store_conflict_info *conflict);

/* Fills `*out` with the environment with this id. SL_ENOTFOUND when there is none. */
SL_MUST_CHECK int sl_store_env_get(struct sl_store *st, const char *id, struct sl_env_row *out);

/* Fills `*out` with the environment called `name` in `scope` (owned by `owner_id` for user
 * scope; ignored for global). SL_ENOTFOUND when there is none. */
SL_MUST_CHECK int sl_store_env_get_by_name(struct sl_store *st, enum sl_scope scope,
                                           const char *owner_id, const char *name,
                                           struct sl_env_row *out);

/* Fills `*out` with the environment of `scope` (and `owner_id`) that binds `repo`.
 * SL_ENOTFOUND when none does. */
SL_MUST_CHECK int sl_store_env_find_by_repo(struct sl_store *st, enum sl_scope scope,
                                            const char *owner_id, const char *repo,
                                            struct sl_env_row *out);

/*
 * The environments `user_id` may see: theirs (user scope) first, then every global one, each
 * group ordered by name (byte order). `user_id` NULL lists the global ones only. `*out` is a new
 * array of `*n` rows (NULL when there are none); free it with sl_store_free_envs().
 */
SL_MUST_CHECK int sl_store_env_list_visible(struct sl_store *st, const char *user_id,
                                            struct sl_env_row **out, size_t *n);

/* Every environment (for the snapshot compiler), ordered by scope, owner and name. */
SL_MUST_CHECK int sl_store_env_list_all(struct sl_store *st, struct sl_env_row **out, size_t *n);

/* Finishes `n` rows and frees the array. NULL is fine. */
void sl_store_free_envs(struct sl_env_row *v, size_t n);

/* Makes the environment `id` the global default and demotes the previous one, in one
 * transaction. SL_ENOTFOUND; SL_EINVAL with NOT_GLOBAL. Making the default the default is 0. */
SL_MUST_CHECK int sl_store_env_set_default(struct sl_store *st, const char *id,
                                           struct sl_store_conflict_info *conflict);

/* Fills `*out` with the global default environment. SL_ENOTFOUND when there is none. */
SL_MUST_CHECK int sl_store_env_get_default(struct sl_store *st, struct sl_env_row *out);

/* Puts the environment `id` in observe until `until` (Unix seconds; docs/reference/api.md §5.1,
 * learn mode), or ends it (`until` <= 0). Only this changes `observe_until`, and it leaves
 * `updated_at` alone (the environment's policy is not changed). SL_ENOTFOUND when there is no
 * such environment. */
SL_MUST_CHECK int sl_store_env_set_observe(struct sl_store *st, const char *id, int64_t until);

/* Ends every observe whose deadline is `now` (Unix seconds) or earlier, in one transaction:
 * `*out` is a new array of the `*n` environments it ended, as they were (their
 * `observe_until` set), for the log; free it with sl_store_free_envs(). */
SL_MUST_CHECK int sl_store_env_end_observes(struct sl_store *st, int64_t now,
                                            struct sl_env_row **out, size_t *n);

/* ---- static clients ---- */

/* Creates the static client `c` (its `env_name` is ignored; `created_at` is set and written
 * back). SL_EEXIST when the id is taken; SL_ENOTFOUND when the environment does not exist;
 * SL_EINVAL when the id is empty or none of ip, cidr and token_sealed is given. */
SL_MUST_CHECK int sl_store_client_create(struct sl_store *st, struct sl_store_client *c);

/* Every static client, ordered by id. Free the array with sl_store_free_clients(). */
SL_MUST_CHECK int sl_store_client_list(struct sl_store *st, struct sl_store_client **out,
                                       size_t *n);

/* Deletes a static client. SL_ENOTFOUND when there is none with this id. */
SL_MUST_CHECK int sl_store_client_delete(struct sl_store *st, const char *id);

/* Finishes `n` clients and frees the array. NULL is fine. */
void sl_store_free_clients(struct sl_store_client *v, size_t n);

/* ---- jobs and schedules (docs/reference/api.md §5.5, docs/jobs.md) ---- */

/* A job: one command in a fresh sandbox for one repository. Strings owned (sl_malloc); free
 * with sl_store_job_finish(). */
struct sl_store_job {
    char id[SL_UUID_LEN + 1];
    char owner_id[SL_UUID_LEN + 1];
    /* The schedule that made it; "" when submitted through the API. */
    char schedule_id[SL_UUID_LEN + 1];
    char *repo;
    /* NULL for the default branch. */
    char *ref;
    char *command;
    /* The environment's id chosen at submission (applies to every repository of the batch);
     * NULL resolves per repository when the job runs. */
    char *env_key;
    /* 0 for the sandbox default. */
    int64_t timeout_ms;
    /* queued, running, succeeded, failed or error. */
    char status[16];
    /* JSON texts, NULL until known: {"id","name","matched_by"} and the exec result. */
    char *env_json;
    char *sandbox_id;
    char *result_json;
    /* Why the job could not run (status error). */
    char *error;
    /* RFC 3339 UTC with milliseconds; "" until it happened. */
    char created_at[32];
    char started_at[32];
    char finished_at[32];
};

/* Frees the owned members and zeroes the job. A zeroed one is fine. */
void sl_store_job_finish(struct sl_store_job *j);
/* Finishes `n` jobs and frees the array. NULL is fine. */
void sl_store_free_jobs(struct sl_store_job *v, size_t n);

/* Inserts `n` queued jobs in one transaction; each gets a new id and created_at, written back.
 * Only id, owner_id, schedule_id, repo, ref, command, env_key and timeout_ms are read. */
SL_MUST_CHECK int sl_store_jobs_insert(struct sl_store *st, struct sl_store_job *v, size_t n);

/* Fills `*out` with the job `id`. SL_ENOTFOUND when there is none. */
SL_MUST_CHECK int sl_store_job_get(struct sl_store *st, const char *id, struct sl_store_job *out);

/* Jobs, newest first, at most `limit`: of `owner_id` (NULL: everyone's), in `status` (NULL:
 * any), of `schedule_id` (NULL: any). Free the array with sl_store_free_jobs(). */
SL_MUST_CHECK int sl_store_job_list(struct sl_store *st, const char *owner_id, const char *status,
                                    const char *schedule_id, size_t limit,
                                    struct sl_store_job **out, size_t *n);

/* Takes the oldest queued job: marks it running (started_at now) and fills `*out`, in one
 * transaction. SL_ENOTFOUND when none is queued. */
SL_MUST_CHECK int sl_store_job_claim(struct sl_store *st, struct sl_store_job *out);

/* Records the environment used and the sandbox of a running job (either may be NULL: the
 * stored value stays). A job that is not running is left alone (0). */
SL_MUST_CHECK int sl_store_job_set_run(struct sl_store *st, const char *id, const char *env_json,
                                       const char *sandbox_id);

/* Ends a running job: `status` succeeded, failed or error, with its result and error text
 * (each may be NULL), and env_json/sandbox_id when given. SL_ENOTFOUND when the job is not
 * running. */
SL_MUST_CHECK int sl_store_job_end(struct sl_store *st, const char *id, const char *status,
                                   const char *result_json, const char *error, const char *env_json,
                                   const char *sandbox_id);

/* Marks every running job `error` with `reason` (at start: they were cut off by a restart).
 * `*n` gets how many. */
SL_MUST_CHECK int sl_store_jobs_abandon(struct sl_store *st, const char *reason, size_t *n);

/* A schedule: a cron expression that makes jobs. Strings owned; sl_store_schedule_finish(). */
struct sl_store_schedule {
    char id[SL_UUID_LEN + 1];
    char owner_id[SL_UUID_LEN + 1];
    char *name;
    char *cron;
    /* JSON array of {"repo_id","ref"}. */
    char *repos_json;
    char *command;
    /* The pinned environment's id; NULL resolves per repository on each run. */
    char *env_key;
    int64_t timeout_ms;
    bool enabled;
    /* Unix seconds; -1 when none (disabled, never ran). */
    int64_t next_run;
    int64_t last_run;
    char created_at[32];
    char updated_at[32];
};

void sl_store_schedule_finish(struct sl_store_schedule *s);
void sl_store_free_schedules(struct sl_store_schedule *v, size_t n);

/* Inserts `s` with a new id; created_at/updated_at set and written back. */
SL_MUST_CHECK int sl_store_schedule_insert(struct sl_store *st, struct sl_store_schedule *s);
/* Replaces every field of schedule `s->id` (of `s->owner_id`) but its id, owner, last_run and
 * created_at; updated_at written back. SL_ENOTFOUND when there is none. */
SL_MUST_CHECK int sl_store_schedule_replace(struct sl_store *st, struct sl_store_schedule *s);
SL_MUST_CHECK int sl_store_schedule_delete(struct sl_store *st, const char *id);
SL_MUST_CHECK int sl_store_schedule_get(struct sl_store *st, const char *id,
                                        struct sl_store_schedule *out);
/* Schedules of `owner_id` (NULL: all), by name, at most `limit`. */
SL_MUST_CHECK int sl_store_schedule_list(struct sl_store *st, const char *owner_id, size_t limit,
                                         struct sl_store_schedule **out, size_t *n);
/* Enabled schedules whose next_run <= `now`, at most `limit`. */
SL_MUST_CHECK int sl_store_schedule_due(struct sl_store *st, int64_t now, size_t limit,
                                        struct sl_store_schedule **out, size_t *n);
/* One run of schedule `id`, in one transaction: when it is still enabled with next_run ==
 * `due` (nobody changed it meanwhile), inserts the `n` jobs and sets last_run = `now`,
 * next_run = `next`. SL_ENOTFOUND when the schedule changed (nothing written). */
SL_MUST_CHECK int sl_store_schedule_fire(struct sl_store *st, const char *id, int64_t due,
                                         int64_t now, int64_t next, struct sl_store_job *v,
                                         size_t n);

/* ---- repositories and their members (docs/reference/api.md §5.9) ---- */

/* A repository registered with the local git platform. Strings owned; sl_store_repo_finish(). */
struct sl_store_repo {
    /* `owner/name`. */
    char *name;
    bool is_public;
    char *default_branch;
    /* The protected branch globs as a JSON array of strings, as the API validated them. */
    char *protected_json;
    bool archived;
    /* RFC 3339 UTC, set by the store. */
    char created_at[32];
    char updated_at[32];
};

void sl_store_repo_finish(struct sl_store_repo *r);
void sl_store_free_repos(struct sl_store_repo *v, size_t n);

/* Inserts `r`, or replaces every field of the repository of that name but its creation time;
 * created_at and updated_at are written back, and `*created` (may be NULL) says which. */
SL_MUST_CHECK int sl_store_repo_put(struct sl_store *st, struct sl_store_repo *r, bool *created);

/* Fills `*out` with the repository `name`. SL_ENOTFOUND when there is none. */
SL_MUST_CHECK int sl_store_repo_get(struct sl_store *st, const char *name,
                                    struct sl_store_repo *out);

/* Deletes the repository `name` and its members. SL_ENOTFOUND when there is none. */
SL_MUST_CHECK int sl_store_repo_delete(struct sl_store *st, const char *name);

/* The repositories `user_id` sees (the public ones and those they are a member of; every one
 * when `user_id` is NULL), by name. Free the array with sl_store_free_repos(). */
SL_MUST_CHECK int sl_store_repo_list(struct sl_store *st, const char *user_id,
                                     struct sl_store_repo **out, size_t *n);

/* A member of a repository. */
struct sl_store_member {
    char user_id[SL_UUID_LEN + 1];
    /* Owned. */
    char *user_name;
    enum sl_repo_role role;
};

void sl_store_free_members(struct sl_store_member *v, size_t n);

/* Gives `user_id` the role `role` (READ, WRITE or ADMIN) in `repo`; `*previous` (may be NULL)
 * gets the role they had (NONE when they were no member). SL_ENOTFOUND when the repository or
 * the user does not exist; SL_EINVAL for NONE. */
SL_MUST_CHECK int sl_store_member_put(struct sl_store *st, const char *repo, const char *user_id,
                                      enum sl_repo_role role, enum sl_repo_role *previous);

/* The role of `user_id` in `repo` as a member: SL_REPO_ROLE_NONE when they are none (or the
 * repository does not exist). */
SL_MUST_CHECK int sl_store_member_role(struct sl_store *st, const char *repo, const char *user_id,
                                       enum sl_repo_role *out);

/* Takes `user_id` out of `repo`. SL_ENOTFOUND when they were no member. */
SL_MUST_CHECK int sl_store_member_delete(struct sl_store *st, const char *repo,
                                         const char *user_id);

/* The members of `repo`, by user name. Free with sl_store_free_members(). */
SL_MUST_CHECK int sl_store_member_list(struct sl_store *st, const char *repo,
                                       struct sl_store_member **out, size_t *n);

/* ---- meta ---- */

/* Increments the stored snapshot version and returns the new value in `*out` (1 for the first
 * call on a new database). Strictly increasing, never reused, across restarts. */
SL_MUST_CHECK int sl_store_next_snapshot_version(struct sl_store *st, int64_t *out);

#endif
