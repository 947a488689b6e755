/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/sandbox_open.c - opening a sandbox (see sandbox.h, sl_sandboxes_open()): the
 * checks of the request, the entry in the snapshot and the wait for every proxy to hold it, the
 * image (pulled when the environment says `always` or the runtime lacks it, within the start
 * limit, its progress recorded for the list), the container's creation with its files, variables
 * and inner wall (a failure at any step removes what was made), and then, once the create has
 * answered, the clone of the repository from the git platform's remote in the background: the calls
 * that come meanwhile are parked (sandbox_calls.c) and go on when it ends; a failed clone is kept
 * and answered to every call.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "control/sandbox/sandbox.h"
#include "control/sandbox/sandbox_int.h"
#include "policy/placeholder.h"

#define ID_BYTES    8
#define TOKEN_BYTES 32
/* Exit codes of the clone script. */
#define CLONE_UNKNOWN_REF 42
/* The most of git's error output a failed clone keeps. */
#define CLONE_ERROR_MAX 400
/* SL_SANDBOX_CLONE_TIMEOUT_MS for a person. */
#define CLONE_LIMIT_TEXT "10 minutes"
_Static_assert(SL_SANDBOX_CLONE_TIMEOUT_MS == 600000u, "CLONE_LIMIT_TEXT says 10 minutes");

static void random_text(char *out, size_t cap, const char *prefix, size_t bytes, bool hex)
{
    unsigned char raw[TOKEN_BYTES];
    size_t plen = strlen(prefix);

    SL_BUG_ON(bytes > sizeof(raw) || plen >= cap);
    randombytes_buf(raw, bytes);
    memcpy(out, prefix, plen);
    if (hex) {
        SL_BUG_ON(plen + bytes * 2 + 1 > cap);
        (void)sodium_bin2hex(out + plen, cap - plen, raw, bytes);
    } else {
        SL_BUG_ON(plen + sodium_base64_ENCODED_LEN(bytes, sodium_base64_VARIANT_URLSAFE_NO_PADDING)
                  > cap);
        (void)sodium_bin2base64(out + plen, cap - plen, raw, bytes,
                                sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    }
    sodium_memzero(raw, sizeof(raw));
}

/* Now plus `lifetime_ms`, rounded up to the second: the proxy compares whole seconds, and a
 * credential must never expire before its lifetime is over. */
static int64_t expiry(uint64_t lifetime_ms)
{
    struct timespec ts;
    int64_t now_ms;

    (void)clock_gettime(CLOCK_REALTIME, &ts);
    now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    return (now_ms + (int64_t)lifetime_ms + 999) / 1000;
}

/* ---- creation ----------------------------------------------------------------------------- */

void sl__sandbox_create_failed(struct sl__sandbox *s, int status, const char *key, const char *text)
{
    sl_sandbox_reply_fn *reply = s->reply;
    void *arg = s->reply_arg;

    s->reply = NULL;
    sl_log(SL_LOG_WARN, 0, "msg=\"sandbox did not start\" sandbox=%s repo=%s status=%d why=\"%s\"",
           s->id, s->repo, status, text);
    if (s->wait.linked) {
        for (struct sl__sandbox_waiter **pp = &s->sb->waiters; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == &s->wait) {
                *pp = s->wait.next;
                break;
            }
        }
        s->wait.linked = false;
    }
    if (s->state != SL__SANDBOX_GONE) {
        /* Answer once the container is gone: nothing is left running when the caller hears. */
        sl__sandbox_remove_with(s, "creation failed", reply, arg, status,
                                sl__sandbox_message(key, text));
    } else if (reply != NULL) {
        reply(arg, status, sl__sandbox_message(key, text));
    }
}

static void create_done(struct sl__sandbox *s)
{
    sl_sandbox_reply_fn *reply = s->reply;
    void *arg = s->reply_arg;
    json_t *body;

    s->reply = NULL;
    s->state = SL__SANDBOX_READY;
    s->last_used = uv_now(s->sb->cfg.loop);
    sl_sandbox_spec_free(s->spec);
    s->spec = NULL;
    sl_log(SL_LOG_INFO, 0, "msg=\"sandbox ready\" sandbox=%s repo=%s container=%.12s ip=%s", s->id,
           s->repo, s->container, s->ip);
    body = json_pack("{s:s, s:s?, s:s?}", "id", s->id, "ref", s->ref, "environment", s->env_name);
    reply(arg, 201, body != NULL ? body : json_object());
}

/* The clone ended: `error` NULL when it succeeded, else why not (for the calls, which answer
 * 409 `the clone failed: ERROR`). The parked calls go on. */
static void clone_ended(struct sl__sandbox *s, const char *error)
{
    /* Idle from the clone's end, not from the create. */
    s->last_used = uv_now(s->sb->cfg.loop);
    if (error == NULL) {
        s->clone = SL__SANDBOX_CLONE_DONE;
        sl_log(SL_LOG_INFO, 0, "msg=\"sandbox cloned\" sandbox=%s repo=%s", s->id, s->repo);
    } else {
        s->clone = SL__SANDBOX_CLONE_FAILED;
        s->clone_error = sl_strdup(error);
        sl_log(SL_LOG_WARN, 0, "msg=\"sandbox clone failed\" sandbox=%s repo=%s why=\"%s\"", s->id,
               s->repo, error);
    }
    sl__sandbox_unpark(s);
}

static void on_cloned(void *arg, const struct sl_launcher_exec_result *r)
{
    struct sl__sandbox *s = arg;

    s->busy--;
    if (s->state == SL__SANDBOX_GONE) {
        /* Closed while it cloned: the parked calls hear so. */
        sl__sandbox_unpark(s);
    } else if (r->rc == 0 && r->exit_code == 0 && !r->deadline_passed) {
        clone_ended(s, NULL);
    } else if (r->rc == 0 && r->exit_code == CLONE_UNKNOWN_REF) {
        clone_ended(s, "unknown ref");
    } else if (r->deadline_passed || (r->rc == 0 && r->exit_code == 124)) {
        clone_ended(s, "it did not finish within " CLONE_LIMIT_TEXT);
    } else if (r->rc < 0) {
        clone_ended(s, r->err != NULL ? r->err : sl_strerror(r->rc));
    } else {
        /* git's own words, on one line, as exec output is answered (secrets redacted). */
        char *text =
                sl__sandbox_output_line(s, r->errout != NULL ? r->errout : "",
                                        r->errout != NULL ? r->errout_len : 0, CLONE_ERROR_MAX);
        char fallback[64];

        if (text == NULL || text[0] == '\0') {
            (void)snprintf(fallback, sizeof(fallback), "git exited with status %d", r->exit_code);
        }
        clone_ended(s, text != NULL && text[0] != '\0' ? text : fallback);
        sl_free(text);
    }
    sl__sandbox_unref(s);
}

/* Starts the clone of the repository into /workspace/repo: the runner with the clone limit, the
 * URL from the container's SLUICE_CLONE_URL, the ref from the exec's own environment. */
static void clone_repo(struct sl__sandbox *s)
{
    struct sl_sandboxes *sb = s->sb;
    static const char script[] =
            "cd " SL_SANDBOX_REPO_DIR " || exit 70\n"
            "git clone -q --no-checkout -- \"$SLUICE_CLONE_URL\" . || exit 71\n"
            "if [ -z \"${SLUICE_CLONE_REF:-}\" ]; then git checkout -q || exit 72; exit 0; fi\n"
            "if git rev-parse -q --verify \"refs/remotes/origin/$SLUICE_CLONE_REF^{commit}\" "
            ">/dev/null; then\n"
            "  git checkout -q -B \"$SLUICE_CLONE_REF\" \"origin/$SLUICE_CLONE_REF\" -- || exit "
            "73\n"
            "elif git rev-parse -q --verify \"$SLUICE_CLONE_REF^{commit}\" >/dev/null; then\n"
            "  git -c advice.detachedHead=false checkout -q \"$SLUICE_CLONE_REF\" -- || exit 74\n"
            "else exit 42; fi\n";
    char ref_env[300];
    char timeout[32];
    const char *argv[] = { SL_SANDBOX_RUNNER_PATH, "--timeout-ms", timeout, "-c", script };
    const char *env[] = { ref_env };
    struct sl_launcher_exec e = {
        .argv = argv,
        .argc = SL_ARRAY_LEN(argv),
        .env = env,
        .n_env = SL_ARRAY_LEN(env),
        .cwd = SL_SANDBOX_REPO_DIR,
        .max_stdout = 64 * 1024,
        .max_stderr = 64 * 1024,
        .deadline_ms = SL_SANDBOX_CLONE_TIMEOUT_MS + 5000 + SL__SANDBOX_EXEC_SLACK_MS,
    };

    (void)snprintf(timeout, sizeof(timeout), "%u", SL_SANDBOX_CLONE_TIMEOUT_MS);
    (void)snprintf(ref_env, sizeof(ref_env), "SLUICE_CLONE_REF=%s", s->ref != NULL ? s->ref : "");
    s->clone = SL__SANDBOX_CLONE_RUNNING;
    s->refs++;
    /* Use, while it runs: the idle sweep leaves the sandbox alone. */
    s->busy++;
    sb->cfg.launcher->ops->exec(sb->cfg.launcher, s->container, &e, on_cloned, s);
}

/* The removal of a container no sandbox keeps (its create was given up, or its record could
 * not be made): the manager's close waits for it. */
static void on_orphan_removed(void *arg, int rc, const char *err)
{
    struct sl_sandboxes *sb = arg;

    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0,
               "msg=\"cannot remove a container whose create was given up; a restart of the "
               "control plane removes it\" err=\"%s\"",
               err != NULL ? err : sl_strerror(rc));
    }
    sb->pending_removes--;
    sl__sandboxes_maybe_closed(sb);
}

static void remove_orphan(struct sl_sandboxes *sb, const char *id)
{
    sb->pending_removes++;
    sb->cfg.launcher->ops->remove(sb->cfg.launcher, id, on_orphan_removed, sb);
}

static void on_started(void *arg, int rc, const char *err, const char *id, const char *ip)
{
    struct sl__sandbox *s = arg;
    struct sl_sandboxes *sb = s->sb;

    if (rc == 0 && s->state == SL__SANDBOX_STARTING) {
        s->container = sl_strdup(id);
        s->running_since = uv_now(sb->cfg.loop);
        (void)snprintf(s->ip, sizeof(s->ip), "%s", ip != NULL ? ip : "");
        if (s->container == NULL) {
            /* Remove it right away: it has no record to be found by. */
            remove_orphan(sb, id);
        }
    } else if (rc == 0 && id != NULL) {
        /* Started after the create was given up: take it down again. */
        sl_free(s->container);
        s->container = sl_strdup(id);
        if (s->state == SL__SANDBOX_GONE) {
            remove_orphan(sb, id);
        }
    }
    sb->starting--;
    if (s->state != SL__SANDBOX_STARTING) {
        sl__sandbox_unref(s);
        /* The manager may be closing and waiting for this start (and its removal). */
        sl__sandboxes_maybe_closed(sb);
        return;
    }
    if (rc < 0 || s->container == NULL) {
        sl_log(SL_LOG_WARN, 0, "msg=\"sandbox container did not start\" sandbox=%s err=\"%s\"",
               s->id, err != NULL ? err : sl_strerror(rc));
        sl__sandbox_create_failed(s, 503, "message",
                                  "the sandbox container did not start; try again");
        sl__sandbox_unref(s);
        return;
    }
    /* The address tightens the entry: token and source address must both hold. */
    if (s->ip[0] != '\0') {
        sl__sandbox_changed(sb);
    }
    /* The ports the rules name may have changed while it started. */
    sl__sandbox_sync_wall(s);
    /* The container runs behind its wall: the clone starts in the background and the create
     * answers now. The clone is marked running first, so that a call the answer makes at once
     * (a job's exec) waits for it. */
    if (sl__sandbox_remote(sb) != NULL) {
        clone_repo(s);
    }
    create_done(s);
    sl__sandbox_unref(s);
}

/* Is the variable `kv` (`NAME=value`, `eq` its '=') one the sandbox gets a placeholder in? The
 * placeholder wins: an inherited variable of that name may hold the very secret. */
static bool is_placeholder_env(const struct sl__sandbox *s, const char *kv, const char *eq)
{
    for (size_t i = 0; eq != NULL && i < s->n_placeholders; i++) {
        if ((size_t)(eq - kv) == strlen(s->ph_env[i])
            && strncmp(kv, s->ph_env[i], (size_t)(eq - kv)) == 0) {
            return true;
        }
    }
    return false;
}

/* Gives `s` a new random placeholder in each variable of the environment's placeholder
 * credentials (policy/placeholder.h): different per sandbox and per variable. Returns 0 or
 * SL_ENOMEM. */
static int make_placeholders(struct sl__sandbox *s, const struct sl_sandbox_spec *spec)
{
    uint8_t raw[SL_PLACEHOLDER_RAW_BYTES];
    char text[SL_PLACEHOLDER_LEN + 1];

    if (spec->n_placeholder_envs == 0) {
        return 0;
    }
    s->ph_env = sl_calloc(spec->n_placeholder_envs, sizeof(char *));
    s->ph_value = sl_calloc(spec->n_placeholder_envs, sizeof(char *));
    SL_ENSURE(s->ph_env != NULL && s->ph_value != NULL, SL_ENOMEM);
    for (size_t i = 0; i < spec->n_placeholder_envs; i++) {
        randombytes_buf(raw, sizeof(raw));
        sl_placeholder_format(raw, text);
        s->ph_env[i] = sl_strdup(spec->placeholder_envs[i]);
        s->ph_value[i] = sl_strdup(text);
        s->n_placeholders++;
        SL_ENSURE(s->ph_env[i] != NULL && s->ph_value[i] != NULL, SL_ENOMEM);
    }
    return 0;
}

/* The container's environment (docs/reference/containers.md §5.4); strings in `store`. */
static int container_env(struct sl__sandbox *s, struct sl_buf *store, size_t *offsets, size_t cap,
                         size_t *n)
{
    static const char *const reserved[] = {
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
        "NO_PROXY",
        "no_proxy",
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO",
        "CI",
        "SLUICE",
        "SLUICE_SANDBOX",
        "SLUICE_REF",
        "SLUICE_REPO",
        "SLUICE_CLONE_URL",
        "SLUICE_API_URL",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
    };
    static const char *const ca_vars[] = { "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                                           "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO" };
    static const char *const proxy_vars[] = { "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
                                              "https_proxy" };
    struct sl_sandboxes *sb = s->sb;
    const struct sl_sandbox_spec *spec = s->spec;
    char url[SL__SANDBOX_PATH_MAX];

    *n = 0;
    url[0] = '\0';
    /* The repository's clone URL at the git platform: no credential in it (the proxy puts the
     * platform's on the repository's paths). */
    if (sl__sandbox_remote(sb) != NULL) {
        SL_TRY(sl_git_clone_url(sl__sandbox_remote(sb), s->repo, url, sizeof(url)));
    }
#define PUT(...)                                   \
    do {                                           \
        if (*n >= cap) {                           \
            return SL_ETOOBIG;                     \
        }                                          \
        offsets[(*n)++] = store->len;              \
        SL_TRY(sl_buf_printf(store, __VA_ARGS__)); \
        SL_TRY(sl_buf_append(store, "", 1));       \
    } while (0)
    for (size_t i = 0; i < spec->n_env; i++) {
        const char *eq = strchr(spec->env[i], '=');
        bool skip = is_placeholder_env(s, spec->env[i], eq);

        for (size_t k = 0; eq != NULL && k < SL_ARRAY_LEN(reserved); k++) {
            if ((size_t)(eq - spec->env[i]) == strlen(reserved[k])
                && strncmp(spec->env[i], reserved[k], strlen(reserved[k])) == 0) {
                skip = true;
            }
        }
        if (skip) {
            sl_log(SL_LOG_WARN, 0,
                   "msg=\"an environment variable sluice sets itself was ignored\" sandbox=%s "
                   "name=%.*s",
                   s->id, (int)(eq - spec->env[i]), spec->env[i]);
            continue;
        }
        PUT("%s", spec->env[i]);
    }
    for (size_t i = 0; i < s->n_placeholders; i++) {
        PUT("%s=%s", s->ph_env[i], s->ph_value[i]);
    }
    for (size_t k = 0; k < SL_ARRAY_LEN(proxy_vars); k++) {
        PUT("%s=http://%s:%s@%s:%u", proxy_vars[k], s->id, s->token,
            sb->proxy_name != NULL ? sb->proxy_name : sb->gateway, sb->cfg.proxy_port);
    }
    PUT("NO_PROXY=");
    PUT("no_proxy=");
    for (size_t k = 0; k < SL_ARRAY_LEN(ca_vars); k++) {
        PUT("%s=%s", ca_vars[k], SL_SANDBOX_CA_PATH);
    }
    PUT("CI=true");
    PUT("SLUICE=true");
    PUT("SLUICE_SANDBOX=true");
    PUT("SLUICE_REF=%s", s->ref != NULL ? s->ref : "");
    PUT("SLUICE_REPO=%s", s->repo);
    PUT("SLUICE_CLONE_URL=%s", url);
    PUT("SLUICE_API_URL=%s", sb->cfg.api_url != NULL ? sb->cfg.api_url : "");
    /* Commits made inside carry the creator: their email, else a noreply address. */
    PUT("GIT_AUTHOR_NAME=%s", spec->owner_name);
    PUT("GIT_COMMITTER_NAME=%s", spec->owner_name);
    if (spec->owner_email != NULL) {
        PUT("GIT_AUTHOR_EMAIL=%s", spec->owner_email);
        PUT("GIT_COMMITTER_EMAIL=%s", spec->owner_email);
    } else {
        PUT("GIT_AUTHOR_EMAIL=%s@" SL_SANDBOX_NOREPLY_DOMAIN, spec->owner_name);
        PUT("GIT_COMMITTER_EMAIL=%s@" SL_SANDBOX_NOREPLY_DOMAIN, spec->owner_name);
    }
#undef PUT
    return 0;
}

static void launch(struct sl__sandbox *s)
{
    enum {
        /* Two environments' variables (the chosen one's and the default's), the placeholders
         * and what sluice sets. */
        ENV_MAX = 360
    };
    struct sl_sandboxes *sb = s->sb;
    struct sl_buf store;
    size_t offsets[ENV_MAX];
    const char *env[ENV_MAX];
    size_t n_env = 0;
    char name[SL__SANDBOX_ID_MAX + 16];
    const struct sl_launcher_label labels[] = {
        { SL__SANDBOX_LABEL, s->id },    { SL__SANDBOX_LABEL_NETWORK, sb->network },
        { "sluice.owner", s->owner_id }, { "sluice.repo", s->repo },
        { "sluice.managed", "1" },
    };
    const struct sl_launcher_file files[] = {
        { SL_SANDBOX_CA_PATH, sb->ca_bundle, sb->cfg.ca_bundle_len, 0644 },
        { SL_SANDBOX_RUNNER_PATH, sb->cfg.runner, sb->cfg.runner_len, 0755 },
    };
    const char *dirs[] = { SL_SANDBOX_REPO_DIR };
    /* The container's own process is our runner, waiting: nothing of the image runs before the
     * inner wall is in place (the launcher installs it after the start). */
    const char *cmd[] = { SL_SANDBOX_RUNNER_PATH, "--idle" };
    struct sl__sandbox_egress egress;
    struct sl_launcher_container spec = {
        .name = name,
        .image = s->spec->image,
        .network = sb->network,
        .env = env,
        .labels = labels,
        .n_labels = SL_ARRAY_LEN(labels),
        .cpus_centi = s->spec->cpus_centi > 0 ? s->spec->cpus_centi : 0,
        .memory_bytes = s->spec->memory_bytes > 0 ? s->spec->memory_bytes : 0,
        .resolv_conf = sb->resolv_conf,
        .files = files,
        .n_files = SL_ARRAY_LEN(files),
        .dirs = dirs,
        .n_dirs = SL_ARRAY_LEN(dirs),
        .cmd = cmd,
        .n_cmd = SL_ARRAY_LEN(cmd),
        .egress = &egress.e,
        .proxy_name = sb->proxy_name,
        .proxy_dns = true,
        .snapshot_version = s->wait.version,
    };
    int rc;

    if (sl__sandbox_egress_init(sb, &egress) < 0) {
        sl__sandbox_create_failed(s, 503, "message", "out of memory");
        return;
    }
    s->wall_gen = sb->ports_gen;
    (void)snprintf(name, sizeof(name), "sluice-%s", s->id);
    sl_buf_init(&store, 256 * 1024);
    rc = container_env(s, &store, offsets, ENV_MAX, &n_env);
    if (rc < 0) {
        if (store.p != NULL) {
            sodium_memzero(store.p, store.len);
        }
        sl_buf_finish(&store);
        sl__sandbox_egress_finish(&egress);
        sl__sandbox_create_failed(s, 500, "message", "the sandbox's environment is too large");
        return;
    }
    for (size_t i = 0; i < n_env; i++) {
        env[i] = (const char *)store.p + offsets[i];
    }
    spec.n_env = n_env;
    s->refs++;
    sb->starting++;
    sb->cfg.launcher->ops->create_and_start(sb->cfg.launcher, &spec, on_started, s);
    sodium_memzero(store.p, store.len);
    sl_buf_finish(&store);
    sl__sandbox_egress_finish(&egress);
}

/* ---- the image ---------------------------------------------------------------------------- */

void sl__sandbox_pull_timed_out(struct sl__sandbox *s)
{
    char text[400];

    (void)snprintf(text, sizeof(text), "pulling %s did not finish within the start limit",
                   s->spec->image);
    sl__sandbox_create_failed(s, 504, "message", text);
}

static void on_pull_progress(void *arg, const struct sl_launcher_pull_progress *p)
{
    struct sl__sandbox *s = arg;

    s->pull = *p;
}

static void on_pulled(void *arg, int rc, enum sl_launcher_pull_failure why, const char *err)
{
    struct sl__sandbox *s = arg;
    int status;

    s->pulling = false;
    if (s->state != SL__SANDBOX_STARTING || s->reply == NULL) {
        sl__sandbox_unref(s);
        return;
    }
    if (rc == 0) {
        sl_log(SL_LOG_INFO, 0, "msg=\"image pulled\" sandbox=%s image=%s layers=%zu bytes=%" PRIu64,
               s->id, s->spec->image, s->pull.layers, s->pull.bytes_done);
        launch(s);
        sl__sandbox_unref(s);
        return;
    }
    sl_log(SL_LOG_WARN, 0, "msg=\"image pull failed\" sandbox=%s image=%s err=\"%s\"", s->id,
           s->spec->image, err != NULL ? err : sl_strerror(rc));
    switch (why) {
    case SL_LAUNCHER_PULL_NOT_FOUND:
    case SL_LAUNCHER_PULL_AUTH:
        status = 424;
        break;
    case SL_LAUNCHER_PULL_UNREACHABLE:
    case SL_LAUNCHER_PULL_FAILED:
        status = 502;
        break;
    case SL_LAUNCHER_PULL_DEADLINE:
        sl__sandbox_pull_timed_out(s);
        sl__sandbox_unref(s);
        return;
    case SL_LAUNCHER_PULL_RUNTIME:
    case SL_LAUNCHER_PULL_OK:
    default:
        sl__sandbox_create_failed(s, 503, "message",
                                  "the sandbox container did not start; try again");
        sl__sandbox_unref(s);
        return;
    }
    sl__sandbox_create_failed(s, status, "message", err != NULL ? err : "image pull failed");
    sl__sandbox_unref(s);
}

/* Pulls the image within what is left of the start limit; the sandbox shows `pulling`. */
static void pull(struct sl__sandbox *s)
{
    struct sl_sandboxes *sb = s->sb;
    uint64_t now = uv_now(sb->cfg.loop);
    struct sl_launcher_pull p = {
        .image = s->spec->image,
        .username = s->spec->registry_username,
        .password = s->spec->registry_password,
        .deadline_ms = s->start_deadline > now ? s->start_deadline - now : 1,
    };

    sl_log(SL_LOG_INFO, 0, "msg=\"pulling image\" sandbox=%s image=%s credentials=%s", s->id,
           s->spec->image, p.username != NULL ? "yes" : "no");
    s->pulling = true;
    memset(&s->pull, 0, sizeof(s->pull));
    s->refs++;
    sb->cfg.launcher->ops->pull_image(sb->cfg.launcher, &p, on_pull_progress, on_pulled, s);
}

static void on_has_image(void *arg, int rc, const char *err)
{
    struct sl__sandbox *s = arg;

    if (s->state != SL__SANDBOX_STARTING || s->reply == NULL) {
        sl__sandbox_unref(s);
        return;
    }
    if (rc == 0) {
        launch(s);
    } else if (rc == SL_ENOTFOUND) {
        pull(s);
    } else {
        sl_log(SL_LOG_WARN, 0, "msg=\"cannot look the image up\" sandbox=%s image=%s err=\"%s\"",
               s->id, s->spec->image, err != NULL ? err : sl_strerror(rc));
        sl__sandbox_create_failed(s, 503, "message",
                                  "the sandbox container did not start; try again");
    }
    sl__sandbox_unref(s);
}

static void on_entry_acked(struct sl__sandbox_waiter *w, bool acked)
{
    struct sl__sandbox *s = SL_CONTAINER_OF(w, struct sl__sandbox, wait);
    struct sl_sandboxes *sb = s->sb;

    if (!acked) {
        sl__sandbox_create_failed(s, 503, "message",
                                  "the sandbox container did not start; try again");
        return;
    }
    /* The image: pulled every time with `always`, else only when the runtime lacks it. */
    if (s->spec->image_pull_always) {
        pull(s);
        return;
    }
    s->refs++;
    sb->cfg.launcher->ops->has_image(sb->cfg.launcher, s->spec->image, on_has_image, s);
}

void sl_sandboxes_open(struct sl_sandboxes *sb, struct sl_sandbox_spec *spec,
                       sl_sandbox_reply_fn *reply, void *arg)
{
    struct sl__sandbox *s;
    size_t open = 0;
    int64_t now = (int64_t)time(NULL);

    if (!sb->ready || sb->closing) {
        char text[400];

        (void)snprintf(text, sizeof(text), "sandboxes are not available: %s",
                       sb->error[0] != '\0' ? sb->error : "the container network is not ready");
        sl_sandbox_spec_free(spec);
        sl__sandbox_reply_msg(reply, arg, 503, text);
        return;
    }
    if (spec->ref != NULL && !sl_git_ref_is_valid(spec->ref)) {
        sl_sandbox_spec_free(spec);
        sl__sandbox_reply_msg(reply, arg, 422, "unknown ref");
        return;
    }
    for (struct sl__sandbox *o = sb->list; o != NULL; o = o->next) {
        if (o->state != SL__SANDBOX_GONE && !o->job && strcmp(o->owner_id, spec->owner_id) == 0
            && strcmp(o->repo, spec->repo) == 0) {
            open++;
        }
    }
    if (!spec->job && open >= SL_SANDBOX_MAX_OPEN_PER_REPO) {
        sl_sandbox_spec_free(spec);
        sl__sandbox_reply_msg(
                reply, arg, 429,
                "you have 5 open sandboxes in this repository, the most allowed; close one "
                "first");
        return;
    }
    s = sl_calloc(1, sizeof(*s));
    if (s == NULL) {
        sl_sandbox_spec_free(spec);
        sl__sandbox_reply_msg(reply, arg, 503, "out of memory");
        return;
    }
    s->sb = sb;
    s->refs = 1;
    s->state = SL__SANDBOX_STARTING;
    random_text(s->id, sizeof(s->id), "sb_", ID_BYTES, true);
    random_text(s->token, sizeof(s->token), "sbt_", TOKEN_BYTES, false);
    s->owner_id = sl_strdup(spec->owner_id);
    s->repo = sl_strdup(spec->repo);
    s->role = spec->role;
    /* The sandbox owns the credential from now on (its removal revokes it). */
    s->cred = spec->git_cred;
    memset(&spec->git_cred, 0, sizeof(spec->git_cred));
    s->ref = spec->ref != NULL ? sl_strdup(spec->ref) : NULL;
    s->env_id = spec->env_id != NULL ? sl_strdup(spec->env_id) : NULL;
    s->env_name = spec->env_name != NULL ? sl_strdup(spec->env_name) : NULL;
    s->job = spec->job;
    s->created_unix = now;
    s->expires_unix = expiry(sb->cfg.lifetime_ms);
    s->start_deadline = uv_now(sb->cfg.loop) + sb->cfg.start_timeout_ms;
    s->secrets = sl_calloc(spec->n_secrets + 1 + SL_ARRAY_LEN(s->cred.redact), sizeof(char *));
    s->spec = spec;
    s->reply = reply;
    s->reply_arg = arg;
    s->parked_tail = &s->parked;
    if (s->owner_id == NULL || s->repo == NULL || (spec->ref != NULL && s->ref == NULL)
        || (spec->env_id != NULL && s->env_id == NULL)
        || (spec->env_name != NULL && s->env_name == NULL) || s->secrets == NULL) {
        s->reply = NULL;
        sl__sandbox_unref(s);
        sl__sandbox_reply_msg(reply, arg, 503, "out of memory");
        return;
    }
    /* What command output must never show: the proxy token, the environment's secrets, the
     * git credential in every form the platform names. */
    s->secrets[s->n_secrets++] = sl_strdup(s->token);
    for (size_t i = 0; i < spec->n_secrets; i++) {
        s->secrets[s->n_secrets++] = sl_strdup(spec->secrets[i]);
    }
    for (size_t i = 0; i < s->cred.n_redact && i < SL_ARRAY_LEN(s->cred.redact); i++) {
        s->secrets[s->n_secrets++] = sl_strdup(s->cred.redact[i]);
    }
    for (size_t i = 0; i < s->n_secrets; i++) {
        if (s->secrets[i] == NULL) {
            s->reply = NULL;
            sl__sandbox_unref(s);
            sl__sandbox_reply_msg(reply, arg, 503, "out of memory");
            return;
        }
    }
    if (make_placeholders(s, spec) < 0) {
        s->reply = NULL;
        sl__sandbox_unref(s);
        sl__sandbox_reply_msg(reply, arg, 503, "out of memory");
        return;
    }
    s->next = sb->list;
    sb->list = s;
    sl_log(SL_LOG_INFO, 0, "msg=\"sandbox starting\" sandbox=%s repo=%s ref=%s env=%s owner=%s",
           s->id, s->repo, s->ref != NULL ? s->ref : "-", s->env_id != NULL ? s->env_id : "-",
           spec->owner_name);
    sl__sandbox_changed(sb);
    sl__sandbox_wait_for_proxies(sb, &s->wait, true, sb->cfg.start_timeout_ms, on_entry_acked);
}
