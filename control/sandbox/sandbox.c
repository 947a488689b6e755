/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/sandbox.c - the sandbox manager (see sandbox.h): the registry, creation with its
 * ordering against the proxy, calls, the sweep, and the snapshot client entries.
 */
#include "control/sandbox/sandbox.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/slice.h"
#include "control/env/environment.h"
#include "policy/url.h"

#define ID_BYTES       8
#define TOKEN_BYTES    32
#define ID_MAX         24
#define TOKEN_MAX      64
#define PATH_MAX_BYTES 4096
#define CLOSE_WAIT_MS  5000u
/* Time beyond the command's own limit (and the runner's 5 s grace) before an exec is
 * abandoned: the runner should have ended everything long before. */
#define EXEC_SLACK_MS 30000u
#define SWEEP_MS      1000u
/* Exit codes of the clone script. */
#define CLONE_UNKNOWN_REF 42
#define LABEL_SANDBOX     "sluice.sandbox"
#define LABEL_NETWORK     "sluice.network"

enum state {
    STATE_STARTING = 0,
    STATE_READY,
    STATE_CLOSING,
    STATE_GONE,
};

struct sl_sandboxes;

/* Waits until every proxy acknowledged a snapshot holding state generation `gen`. */
struct waiter {
    struct waiter *next;
    uint64_t gen;
    /* The first snapshot version holding `gen`, 0 until built. */
    int64_t version;
    /* uv_now() deadline. */
    uint64_t deadline;
    bool linked;
    void (*done)(struct waiter *w, bool acked);
};

struct sandbox {
    struct sandbox *next;
    struct sl_sandboxes *sb;
    int refs;
    enum state state;
    char id[ID_MAX];
    char token[TOKEN_MAX];
    char *owner_id;
    char *repo;
    char *ref;
    char *env_id;
    char *env_name;
    char *container;
    char ip[INET_ADDRSTRLEN];
    /* Wall-clock creation and expiry (Unix seconds), loop-clock deadlines and last use. */
    int64_t created_unix;
    int64_t expires_unix;
    uint64_t start_deadline;
    uint64_t last_used;
    /* Calls in flight: an exec counts as use until it returns. */
    int busy;
    /* A job's sandbox: outside the per-account limit. */
    bool job;
    char **secrets;
    size_t n_secrets;
    /* The create in progress: its spec and its answer. */
    struct sl_sandbox_spec *spec;
    sl_sandbox_reply_fn *reply;
    void *reply_arg;
    struct waiter wait;
};

struct sl_sandboxes {
    struct sl_sandboxes_config cfg;
    char network[64];
    char subnet[64];
    char gateway[INET_ADDRSTRLEN];
    char *ca_bundle;
    char *resolv_conf;
    char *git_base;
    char *git_token;
    char *git_rule_host;
    char *git_auth;
    uv_timer_t sweep;
    struct sandbox *list;
    struct waiter *waiters;
    uint64_t generation;
    uint64_t built_gen;
    int64_t built_version;
    int64_t acked;
    bool ready;
    bool closing;
    /* The launcher's close has been asked for (once). */
    bool shutting;
    char error[256];
    int pending_removes;
    void (*closed)(void *arg);
    void *closed_arg;

    /* The last SL_SANDBOX_RECENT closed sandboxes' ids and owners (a ring; `n_recent` counts
     * every close), so that their audit lines stay theirs after the close. */
    struct {
        char id[ID_MAX];
        char owner_id[40];
    } recent[SL_SANDBOX_RECENT];

    uint64_t n_recent;
};

/* ---- small helpers ------------------------------------------------------------------------ */

static void free_strv(char **v, size_t n, bool wipe)
{
    for (size_t i = 0; v != NULL && i < n; i++) {
        if (wipe && v[i] != NULL) {
            sodium_memzero(v[i], strlen(v[i]));
        }
        sl_free(v[i]);
    }
    sl_free(v);
}

void sl_sandbox_spec_free(struct sl_sandbox_spec *spec)
{
    if (spec == NULL) {
        return;
    }
    sl_free(spec->owner_id);
    sl_free(spec->owner_name);
    sl_free(spec->repo);
    sl_free(spec->ref);
    sl_free(spec->env_id);
    sl_free(spec->env_name);
    sl_free(spec->image);
    free_strv(spec->env, spec->n_env, true);
    free_strv(spec->secrets, spec->n_secrets, true);
    sl_free(spec);
}

static json_t *message(const char *key, const char *text)
{
    json_t *o = json_object();

    if (o != NULL) {
        (void)json_object_set_new(o, key, json_string(text));
    }
    return o;
}

static void reply_msg(sl_sandbox_reply_fn *reply, void *arg, int status, const char *text)
{
    reply(arg, status, message("message", text));
}

static void reply_err(sl_sandbox_reply_fn *reply, void *arg, int status, const char *text)
{
    reply(arg, status, message("error", text));
}

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

static void rfc3339(int64_t unix_s, char *out, size_t cap)
{
    time_t t = (time_t)unix_s;
    struct tm tm;

    if (gmtime_r(&t, &tm) == NULL || strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        (void)snprintf(out, cap, "1970-01-01T00:00:00Z");
    }
}

/* Appends `n` bytes as valid UTF-8: each byte that does not start a well-formed sequence
 * becomes U+FFFD (command output is arbitrary bytes; JSON strings are not). */
static int append_utf8(struct sl_buf *b, const unsigned char *p, size_t n)
{
    static const char repl[] = "\xEF\xBF\xBD";
    size_t i = 0;

    while (i < n) {
        unsigned char c = p[i];
        size_t len = 0;
        uint32_t cp = 0;
        uint32_t min = 0;

        if (c < 0x80) {
            len = 1;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2;
            cp = c & 0x1F;
            min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3;
            cp = c & 0x0F;
            min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4;
            cp = c & 0x07;
            min = 0x10000;
        }
        for (size_t k = 1; len > 1 && k < len; k++) {
            if (i + k >= n || (p[i + k] & 0xC0) != 0x80) {
                len = 0;
                break;
            }
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if (len > 1 && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) {
            len = 0;
        }
        if (len == 0) {
            SL_TRY(sl_buf_append(b, repl, 3));
            i++;
            continue;
        }
        SL_TRY(sl_buf_append(b, p + i, len));
        i += len;
    }
    return 0;
}

/* The first occurrence of `needle` (n bytes) in `hay` (m bytes), or NULL. */
static uint8_t *find_bytes(uint8_t *hay, size_t m, const char *needle, size_t n)
{
    for (size_t i = 0; n > 0 && i + n <= m; i++) {
        if (hay[i] == (uint8_t)needle[0] && memcmp(hay + i, needle, n) == 0) {
            return hay + i;
        }
    }
    return NULL;
}

/* Replaces every occurrence of each secret (4 bytes or longer) in `b` by "***". */
static int redact(struct sl_buf *b, char *const *secrets, size_t n_secrets)
{
    for (size_t k = 0; k < n_secrets; k++) {
        size_t sn = strlen(secrets[k]);
        size_t at = 0;

        if (sn < 4) {
            continue;
        }
        while (at + sn <= b->len) {
            uint8_t *hit = find_bytes(b->p + at, b->len - at, secrets[k], sn);
            size_t off;

            if (hit == NULL) {
                break;
            }
            off = (size_t)(hit - b->p);
            memcpy(b->p + off, "***", 3);
            memmove(b->p + off + 3, b->p + off + sn, b->len - off - sn);
            b->len -= sn - 3;
            at = off + 3;
        }
    }
    if (b->p != NULL) {
        b->p[b->len] = '\0';
    }
    return 0;
}

/* The longest secret of `s`: the launcher keeps this much more than the cap, so that a secret
 * crossing the cap is still seen whole by redact(). */
static size_t longest_secret(const struct sandbox *s)
{
    size_t max = 0;

    for (size_t i = 0; i < s->n_secrets; i++) {
        max = strlen(s->secrets[i]) > max ? strlen(s->secrets[i]) : max;
    }
    return max;
}

/* After the cut: drops a tail that is the start of a secret (the rest of it was cut off). */
static void drop_secret_prefix(struct sl_buf *b, char *const *secrets, size_t n_secrets)
{
    for (size_t k = 0; k < n_secrets; k++) {
        size_t sn = strlen(secrets[k]);

        for (size_t len = sn - (sn > 0); len > 0; len--) {
            if (len <= b->len && memcmp(b->p + b->len - len, secrets[k], len) == 0) {
                b->len -= len;
                break;
            }
        }
    }
}

/* Output of a command as a JSON string: redacted, cut to the cap (`*truncated` set when cut
 * here or by the launcher), valid UTF-8. */
static json_t *output_json(const struct sandbox *s, const char *p, size_t n, bool *truncated)
{
    struct sl_buf raw;
    struct sl_buf text;
    json_t *j = NULL;

    sl_buf_init(&raw, 2 * SL_SANDBOX_OUTPUT_MAX);
    sl_buf_init(&text, 6 * SL_SANDBOX_OUTPUT_MAX);
    if (sl_buf_append(&raw, p, n) == 0 && redact(&raw, s->secrets, s->n_secrets) == 0) {
        if (raw.len > SL_SANDBOX_OUTPUT_MAX) {
            raw.len = SL_SANDBOX_OUTPUT_MAX;
            *truncated = true;
        }
        if (*truncated) {
            drop_secret_prefix(&raw, s->secrets, s->n_secrets);
        }
    }
    if (raw.len <= SL_SANDBOX_OUTPUT_MAX
        && append_utf8(&text, (const unsigned char *)raw.p, raw.len) == 0) {
        j = json_stringn(text.p != NULL ? (const char *)text.p : "", text.len);
    }
    if (raw.p != NULL) {
        sodium_memzero(raw.p, raw.len);
    }
    sl_buf_finish(&raw);
    sl_buf_finish(&text);
    return j;
}

/* `/workspace/repo` joined with a relative path, or an absolute path as it is. Refuses NUL-
 * free but empty or oversized paths. */
static int full_path(const char *in, char *out, size_t cap)
{
    int n;

    if (in[0] == '/') {
        n = snprintf(out, cap, "%s", in);
    } else {
        n = snprintf(out, cap, "%s/%s", SL_SANDBOX_REPO_DIR, in);
    }
    return n > 0 && (size_t)n < cap ? 0 : SL_ETOOBIG;
}

/* A git ref as sandboxes accept it: what `git check-ref-format --allow-onelevel` takes, or a
 * commit id, and never something git could read as an option. */
static bool is_ref(const char *r)
{
    size_t n = strlen(r);

    if (n == 0 || n > 255 || r[0] == '-' || r[0] == '/' || r[n - 1] == '/' || r[n - 1] == '.'
        || strstr(r, "..") != NULL || strstr(r, "//") != NULL || strstr(r, "@{") != NULL
        || (n >= 5 && strcmp(r + n - 5, ".lock") == 0) || strcmp(r, "@") == 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)r[i];

        if (c <= 0x20 || c >= 0x7F || strchr("~^:?*[\\", c) != NULL) {
            return false;
        }
    }
    return true;
}

/* ---- registry ----------------------------------------------------------------------------- */

static struct sandbox *find(const struct sl_sandboxes *sb, const char *id)
{
    for (struct sandbox *s = sb->list; s != NULL; s = s->next) {
        if (strcmp(s->id, id) == 0 && s->state != STATE_GONE) {
            return s;
        }
    }
    return NULL;
}

static void sandbox_unref(struct sandbox *s)
{
    if (--s->refs > 0) {
        return;
    }
    sodium_memzero(s->token, sizeof(s->token));
    sl_free(s->owner_id);
    sl_free(s->repo);
    sl_free(s->ref);
    sl_free(s->env_id);
    sl_free(s->env_name);
    sl_free(s->container);
    free_strv(s->secrets, s->n_secrets, true);
    sl_sandbox_spec_free(s->spec);
    sl_free(s);
}

static void unlink_sandbox(struct sl_sandboxes *sb, struct sandbox *s)
{
    size_t slot = (size_t)(sb->n_recent++ % SL_SANDBOX_RECENT);

    (void)snprintf(sb->recent[slot].id, sizeof(sb->recent[slot].id), "%s", s->id);
    (void)snprintf(sb->recent[slot].owner_id, sizeof(sb->recent[slot].owner_id), "%s",
                   s->owner_id != NULL ? s->owner_id : "");
    for (struct sandbox **pp = &sb->list; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            s->next = NULL;
            return;
        }
    }
}

static void changed(struct sl_sandboxes *sb)
{
    sb->generation++;
    if (sb->cfg.changed != NULL && !sb->closing) {
        sb->cfg.changed(sb->cfg.changed_arg);
    }
}

/* ---- waiting for the proxies -------------------------------------------------------------- */

static void waiter_fire(struct sl_sandboxes *sb, struct waiter *w, bool acked)
{
    for (struct waiter **pp = &sb->waiters; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    w->linked = false;
    w->next = NULL;
    w->done(w, acked);
}

static void check_waiters(struct sl_sandboxes *sb)
{
    bool again = true;

    while (again) {
        again = false;
        for (struct waiter *w = sb->waiters; w != NULL; w = w->next) {
            if (w->version == 0 && sb->built_gen >= w->gen && sb->built_version > 0) {
                w->version = sb->built_version;
            }
            if (w->version != 0 && sb->acked >= w->version) {
                waiter_fire(sb, w, true);
                again = true;
                break;
            }
        }
    }
}

/* Waits for the current generation (call after changed()). */
static void wait_for_proxies(struct sl_sandboxes *sb, struct waiter *w, uint64_t timeout_ms,
                             void (*done)(struct waiter *w, bool acked))
{
    w->gen = sb->generation;
    w->version = 0;
    w->deadline = uv_now(sb->cfg.loop) + timeout_ms;
    w->done = done;
    w->linked = true;
    w->next = sb->waiters;
    sb->waiters = w;
    check_waiters(sb);
}

void sl_sandboxes_built(struct sl_sandboxes *sb, uint64_t generation, int64_t version)
{
    if (generation >= sb->built_gen) {
        sb->built_gen = generation;
        sb->built_version = version;
    }
    check_waiters(sb);
}

void sl_sandboxes_acked(struct sl_sandboxes *sb, int64_t version)
{
    sb->acked = version;
    check_waiters(sb);
}

/* ---- removal ------------------------------------------------------------------------------ */

struct removal {
    struct sl_sandboxes *sb;
    struct sandbox *s;
    sl_sandbox_reply_fn *reply;
    void *arg;
    /* The answer to give once the container is gone, instead of 204 (a failed create's); the
     * removal's own failure is then only logged. */
    int status;
    json_t *body;
    struct waiter wait;
    bool removed;
    bool acked;
    int pending;
    char err[200];
};

static void maybe_closed(struct sl_sandboxes *sb);

static void removal_step(struct removal *r)
{
    struct sl_sandboxes *sb = r->sb;

    if (--r->pending > 0) {
        return;
    }
    if (r->reply == NULL) {
        json_decref(r->body);
    } else if (r->status != 0) {
        r->reply(r->arg, r->status, r->body);
    } else if (r->reply != NULL) {
        if (r->removed) {
            r->reply(r->arg, 204, json_null());
        } else {
            reply_msg(r->reply, r->arg, 502, r->err);
        }
    }
    sandbox_unref(r->s);
    sl_free(r);
    sb->pending_removes--;
    maybe_closed(sb);
}

static void on_removed(void *arg, int rc, const char *err)
{
    struct removal *r = arg;

    r->removed = rc == 0;
    if (rc < 0) {
        (void)snprintf(r->err, sizeof(r->err), "the container could not be removed: %s",
                       err != NULL ? err : sl_strerror(rc));
        sl_log(SL_LOG_ERROR, 0, "msg=\"cannot remove a sandbox container\" sandbox=%s err=\"%s\"",
               r->s->id, err != NULL ? err : sl_strerror(rc));
    }
    removal_step(r);
}

static void on_removal_acked(struct waiter *w, bool acked)
{
    struct removal *r = SL_CONTAINER_OF(w, struct removal, wait);

    r->acked = acked;
    if (!acked) {
        sl_log(SL_LOG_WARN, 0,
               "msg=\"a proxy has not acknowledged a closed sandbox's removal yet\" sandbox=%s",
               r->s->id);
    }
    removal_step(r);
}

/* Takes `s` out: its entry leaves the snapshot and its container is removed. `reply` (may be
 * NULL) gets `body` with `status` once the container is gone, or, when `body` is NULL, 204 once
 * both happened (the proxies' acknowledgement is awaited up to 5 s). Takes `body`. */
static void remove_sandbox_with(struct sandbox *s, const char *why, sl_sandbox_reply_fn *reply,
                                void *arg, int status, json_t *body)
{
    struct sl_sandboxes *sb = s->sb;
    struct removal *r = sl_calloc(1, sizeof(*r));

    SL_BUG_ON(s->state == STATE_GONE);
    sl_log(SL_LOG_INFO, 0, "msg=\"sandbox closed\" sandbox=%s repo=%s why=\"%s\"", s->id, s->repo,
           why);
    s->state = STATE_GONE;
    unlink_sandbox(sb, s);
    changed(sb);
    if (r == NULL) {
        /* The entry is gone from the next snapshot; the container stays until a restart. */
        sl_log(SL_LOG_ERROR, 0, "msg=\"out of memory removing a sandbox\" sandbox=%s", s->id);
        if (reply == NULL) {
            json_decref(body);
        } else if (status != 0) {
            reply(arg, status, body);
        } else if (reply != NULL) {
            reply_msg(reply, arg, 503, "out of memory");
        }
        sandbox_unref(s);
        return;
    }
    r->sb = sb;
    r->s = s;
    r->reply = reply;
    r->arg = arg;
    r->status = status;
    r->body = body;
    r->removed = true;
    r->pending = 1;
    sb->pending_removes++;
    if (s->container != NULL) {
        r->pending++;
        sb->cfg.launcher->ops->remove(sb->cfg.launcher, s->container, on_removed, r);
    }
    if (reply != NULL && status == 0 && !sb->closing) {
        r->pending++;
        wait_for_proxies(sb, &r->wait, CLOSE_WAIT_MS, on_removal_acked);
    }
    removal_step(r);
}

static void remove_sandbox(struct sandbox *s, const char *why, sl_sandbox_reply_fn *reply,
                           void *arg)
{
    remove_sandbox_with(s, why, reply, arg, 0, NULL);
}

/* ---- creation ----------------------------------------------------------------------------- */

static void create_failed(struct sandbox *s, int status, const char *key, const char *text)
{
    sl_sandbox_reply_fn *reply = s->reply;
    void *arg = s->reply_arg;

    s->reply = NULL;
    sl_log(SL_LOG_WARN, 0, "msg=\"sandbox did not start\" sandbox=%s repo=%s status=%d why=\"%s\"",
           s->id, s->repo, status, text);
    if (s->wait.linked) {
        for (struct waiter **pp = &s->sb->waiters; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == &s->wait) {
                *pp = s->wait.next;
                break;
            }
        }
        s->wait.linked = false;
    }
    if (s->state != STATE_GONE) {
        /* Answer once the container is gone: nothing is left running when the caller hears. */
        remove_sandbox_with(s, "creation failed", reply, arg, status, message(key, text));
    } else if (reply != NULL) {
        reply(arg, status, message(key, text));
    }
}

static void create_done(struct sandbox *s)
{
    sl_sandbox_reply_fn *reply = s->reply;
    void *arg = s->reply_arg;
    json_t *body;

    s->reply = NULL;
    s->state = STATE_READY;
    s->last_used = uv_now(s->sb->cfg.loop);
    sl_sandbox_spec_free(s->spec);
    s->spec = NULL;
    sl_log(SL_LOG_INFO, 0, "msg=\"sandbox ready\" sandbox=%s repo=%s container=%.12s ip=%s", s->id,
           s->repo, s->container, s->ip);
    body = json_pack("{s:s, s:s?, s:s?}", "id", s->id, "ref", s->ref, "environment", s->env_name);
    reply(arg, 201, body != NULL ? body : json_object());
}

static void on_cloned(void *arg, const struct sl_launcher_exec_result *r)
{
    struct sandbox *s = arg;

    if (s->state != STATE_STARTING) {
        sandbox_unref(s);
        return;
    }
    if (r->rc == 0 && r->exit_code == 0) {
        create_done(s);
    } else if (r->rc == 0 && r->exit_code == CLONE_UNKNOWN_REF) {
        create_failed(s, 422, "message", "unknown ref");
    } else {
        char text[512];

        (void)snprintf(text, sizeof(text), "the repository could not be cloned: %.*s",
                       (int)(r->errout_len > 300 ? 300 : r->errout_len),
                       r->errout != NULL ? r->errout : "");
        if (r->rc < 0) {
            (void)snprintf(text, sizeof(text), "the repository could not be cloned: %s",
                           r->err != NULL ? r->err : sl_strerror(r->rc));
        }
        create_failed(s, 502, "message", text);
    }
    sandbox_unref(s);
}

static void clone_repo(struct sandbox *s)
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
    char url_env[PATH_MAX_BYTES];
    char ref_env[300];
    char timeout[32];
    uint64_t now = uv_now(sb->cfg.loop);
    uint64_t left = s->start_deadline > now + 1000 ? s->start_deadline - now : 1000;
    const char *argv[] = { SL_SANDBOX_RUNNER_PATH, "--timeout-ms", timeout, "-c", script };
    const char *env[] = { url_env, ref_env };
    struct sl_launcher_exec e = {
        .argv = argv,
        .argc = SL_ARRAY_LEN(argv),
        .env = env,
        .n_env = SL_ARRAY_LEN(env),
        .cwd = SL_SANDBOX_REPO_DIR,
        .max_stdout = 64 * 1024,
        .max_stderr = 64 * 1024,
        .deadline_ms = left + EXEC_SLACK_MS,
    };

    (void)snprintf(timeout, sizeof(timeout), "%llu", (unsigned long long)left);
    (void)snprintf(url_env, sizeof(url_env), "SLUICE_CLONE_URL=%s/%s.git", sb->git_base, s->repo);
    (void)snprintf(ref_env, sizeof(ref_env), "SLUICE_CLONE_REF=%s", s->ref != NULL ? s->ref : "");
    s->refs++;
    sb->cfg.launcher->ops->exec(sb->cfg.launcher, s->container, &e, on_cloned, s);
}

static void on_orphan_removed(void *arg, int rc, const char *err)
{
    (void)arg;
    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0,
               "msg=\"cannot remove a container whose create was given up; a restart of the "
               "control plane removes it\" err=\"%s\"",
               err != NULL ? err : sl_strerror(rc));
    }
}

static void on_started(void *arg, int rc, const char *err, const char *id, const char *ip)
{
    struct sandbox *s = arg;
    struct sl_sandboxes *sb = s->sb;

    if (rc == 0 && s->state == STATE_STARTING) {
        s->container = sl_strdup(id);
        (void)snprintf(s->ip, sizeof(s->ip), "%s", ip != NULL ? ip : "");
        if (s->container == NULL) {
            /* Remove it right away: it has no record to be found by. */
            sb->cfg.launcher->ops->remove(sb->cfg.launcher, id, on_orphan_removed, NULL);
        }
    } else if (rc == 0 && id != NULL) {
        /* Started after the create was given up: take it down again. */
        sl_free(s->container);
        s->container = sl_strdup(id);
        if (s->container != NULL && s->state == STATE_GONE) {
            sb->cfg.launcher->ops->remove(sb->cfg.launcher, s->container, on_orphan_removed, NULL);
        }
    }
    if (s->state != STATE_STARTING) {
        sandbox_unref(s);
        return;
    }
    if (rc < 0 || s->container == NULL) {
        sl_log(SL_LOG_WARN, 0, "msg=\"sandbox container did not start\" sandbox=%s err=\"%s\"",
               s->id, err != NULL ? err : sl_strerror(rc));
        create_failed(s, 503, "message", "the sandbox container did not start; try again");
        sandbox_unref(s);
        return;
    }
    /* The address tightens the entry: token and source address must both hold. */
    if (s->ip[0] != '\0') {
        changed(sb);
    }
    if (sb->git_base != NULL) {
        clone_repo(s);
    } else {
        create_done(s);
    }
    sandbox_unref(s);
}

/* The container's environment (SPEC §5.4); strings in `store`. */
static int container_env(struct sandbox *s, struct sl_buf *store, size_t *offsets, size_t cap,
                         size_t *n)
{
    static const char *const reserved[] = { "HTTP_PROXY",     "HTTPS_PROXY",
                                            "http_proxy",     "https_proxy",
                                            "NO_PROXY",       "no_proxy",
                                            "SSL_CERT_FILE",  "REQUESTS_CA_BUNDLE",
                                            "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
                                            "GIT_SSL_CAINFO", "CI",
                                            "SLUICE",         "SLUICE_SANDBOX",
                                            "SLUICE_REF" };
    static const char *const ca_vars[] = { "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                                           "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO" };
    static const char *const proxy_vars[] = { "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
                                              "https_proxy" };
    struct sl_sandboxes *sb = s->sb;
    const struct sl_sandbox_spec *spec = s->spec;

    *n = 0;
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
        bool skip = false;

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
    for (size_t k = 0; k < SL_ARRAY_LEN(proxy_vars); k++) {
        PUT("%s=http://%s:%s@%s:%u", proxy_vars[k], s->id, s->token, sb->gateway,
            sb->cfg.proxy_port);
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
#undef PUT
    return 0;
}

static void launch(struct sandbox *s)
{
    enum {
        ENV_MAX = 160
    };
    struct sl_sandboxes *sb = s->sb;
    struct sl_buf store;
    size_t offsets[ENV_MAX];
    const char *env[ENV_MAX];
    size_t n_env = 0;
    char name[ID_MAX + 16];
    const struct sl_launcher_label labels[] = {
        { LABEL_SANDBOX, s->id },   { LABEL_NETWORK, sb->network }, { "sluice.owner", s->owner_id },
        { "sluice.repo", s->repo }, { "sluice.managed", "1" },
    };
    const struct sl_launcher_file files[] = {
        { SL_SANDBOX_CA_PATH, sb->ca_bundle, sb->cfg.ca_bundle_len, 0644 },
        { SL_SANDBOX_RUNNER_PATH, sb->cfg.runner, sb->cfg.runner_len, 0755 },
    };
    const char *dirs[] = { SL_SANDBOX_REPO_DIR };
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
    };
    int rc;

    (void)snprintf(name, sizeof(name), "sluice-%s", s->id);
    sl_buf_init(&store, 256 * 1024);
    rc = container_env(s, &store, offsets, ENV_MAX, &n_env);
    if (rc < 0) {
        if (store.p != NULL) {
            sodium_memzero(store.p, store.len);
        }
        sl_buf_finish(&store);
        create_failed(s, 500, "message", "the sandbox's environment is too large");
        return;
    }
    for (size_t i = 0; i < n_env; i++) {
        env[i] = (const char *)store.p + offsets[i];
    }
    spec.n_env = n_env;
    s->refs++;
    sb->cfg.launcher->ops->create_and_start(sb->cfg.launcher, &spec, on_started, s);
    sodium_memzero(store.p, store.len);
    sl_buf_finish(&store);
}

static void on_entry_acked(struct waiter *w, bool acked)
{
    struct sandbox *s = SL_CONTAINER_OF(w, struct sandbox, wait);

    if (!acked) {
        create_failed(s, 503, "message", "the sandbox container did not start; try again");
        return;
    }
    launch(s);
}

void sl_sandboxes_open(struct sl_sandboxes *sb, struct sl_sandbox_spec *spec,
                       sl_sandbox_reply_fn *reply, void *arg)
{
    struct sandbox *s;
    size_t open = 0;
    int64_t now = (int64_t)time(NULL);

    if (!sb->ready || sb->closing) {
        char text[400];

        (void)snprintf(text, sizeof(text), "sandboxes are not available: %s",
                       sb->error[0] != '\0' ? sb->error : "the container network is not ready");
        sl_sandbox_spec_free(spec);
        reply_msg(reply, arg, 503, text);
        return;
    }
    if (spec->ref != NULL && !is_ref(spec->ref)) {
        sl_sandbox_spec_free(spec);
        reply_msg(reply, arg, 422, "unknown ref");
        return;
    }
    for (struct sandbox *o = sb->list; o != NULL; o = o->next) {
        if (o->state != STATE_GONE && !o->job && strcmp(o->owner_id, spec->owner_id) == 0
            && strcmp(o->repo, spec->repo) == 0) {
            open++;
        }
    }
    if (!spec->job && open >= SL_SANDBOX_MAX_OPEN_PER_REPO) {
        sl_sandbox_spec_free(spec);
        reply_msg(reply, arg, 429,
                  "you have 5 open sandboxes in this repository, the most allowed; close one "
                  "first");
        return;
    }
    s = sl_calloc(1, sizeof(*s));
    if (s == NULL) {
        sl_sandbox_spec_free(spec);
        reply_msg(reply, arg, 503, "out of memory");
        return;
    }
    s->sb = sb;
    s->refs = 1;
    s->state = STATE_STARTING;
    random_text(s->id, sizeof(s->id), "sb_", ID_BYTES, true);
    random_text(s->token, sizeof(s->token), "sbt_", TOKEN_BYTES, false);
    s->owner_id = sl_strdup(spec->owner_id);
    s->repo = sl_strdup(spec->repo);
    s->ref = spec->ref != NULL ? sl_strdup(spec->ref) : NULL;
    s->env_id = spec->env_id != NULL ? sl_strdup(spec->env_id) : NULL;
    s->env_name = spec->env_name != NULL ? sl_strdup(spec->env_name) : NULL;
    s->job = spec->job;
    s->created_unix = now;
    s->expires_unix = expiry(sb->cfg.lifetime_ms);
    s->start_deadline = uv_now(sb->cfg.loop) + sb->cfg.start_timeout_ms;
    s->secrets = sl_calloc(spec->n_secrets + 3, sizeof(char *));
    s->spec = spec;
    s->reply = reply;
    s->reply_arg = arg;
    if (s->owner_id == NULL || s->repo == NULL || (spec->ref != NULL && s->ref == NULL)
        || (spec->env_id != NULL && s->env_id == NULL)
        || (spec->env_name != NULL && s->env_name == NULL) || s->secrets == NULL) {
        s->reply = NULL;
        sandbox_unref(s);
        reply_msg(reply, arg, 503, "out of memory");
        return;
    }
    /* What command output must never show: the proxy token, the environment's secrets, the
     * git platform's token in both forms. */
    s->secrets[s->n_secrets++] = sl_strdup(s->token);
    for (size_t i = 0; i < spec->n_secrets; i++) {
        s->secrets[s->n_secrets++] = sl_strdup(spec->secrets[i]);
    }
    if (sb->git_token != NULL) {
        s->secrets[s->n_secrets++] = sl_strdup(sb->git_token);
        s->secrets[s->n_secrets++] = sl_strdup(sb->git_auth + strlen("Basic "));
    }
    for (size_t i = 0; i < s->n_secrets; i++) {
        if (s->secrets[i] == NULL) {
            s->reply = NULL;
            sandbox_unref(s);
            reply_msg(reply, arg, 503, "out of memory");
            return;
        }
    }
    s->next = sb->list;
    sb->list = s;
    sl_log(SL_LOG_INFO, 0, "msg=\"sandbox starting\" sandbox=%s repo=%s ref=%s env=%s owner=%s",
           s->id, s->repo, s->ref != NULL ? s->ref : "-", s->env_id != NULL ? s->env_id : "-",
           spec->owner_name);
    changed(sb);
    wait_for_proxies(sb, &s->wait, sb->cfg.start_timeout_ms, on_entry_acked);
}

/* ---- calls -------------------------------------------------------------------------------- */

struct call {
    struct sl_sandboxes *sb;
    struct sandbox *s;
    sl_sandbox_reply_fn *reply;
    void *arg;
    char path[PATH_MAX_BYTES];
    char *cmd;
    char **env;
    size_t n_env;
    uint64_t timeout_ms;
    uint64_t t0;
    unsigned char *data;
    size_t len;
    unsigned mode;
};

static void call_free(struct call *c)
{
    c->s->busy--;
    c->s->last_used = uv_now(c->sb->cfg.loop);
    sandbox_unref(c->s);
    sl_free(c->cmd);
    free_strv(c->env, c->n_env, true);
    if (c->data != NULL) {
        sodium_memzero(c->data, c->len);
    }
    sl_free(c->data);
    sl_free(c);
}

/* A launcher failure as an answer: the sandbox closed meanwhile, or the runtime failed. */
static void reply_launcher_error(struct call *c, int rc, const char *err)
{
    char text[400];

    if (c->s->state == STATE_GONE || rc == SL_ECANCELED) {
        reply_msg(c->reply, c->arg, 409, "the sandbox was closed");
        return;
    }
    (void)snprintf(text, sizeof(text), "the container runtime failed: %s",
                   err != NULL ? err : sl_strerror(rc));
    reply_msg(c->reply, c->arg, 502, text);
}

static void on_exec_done(void *arg, const struct sl_launcher_exec_result *r)
{
    struct call *c = arg;
    uint64_t took = uv_now(c->sb->cfg.loop) - c->t0;
    json_t *body;
    json_t *out;
    json_t *err;
    bool timed_out;
    bool out_cut;
    bool err_cut;

    if (r->rc < 0) {
        reply_launcher_error(c, r->rc, r->err);
        call_free(c);
        return;
    }
    timed_out = r->deadline_passed || (r->exit_code == 124 && took + 50 >= c->timeout_ms);
    out_cut = r->out_truncated;
    err_cut = r->err_truncated;
    out = output_json(c->s, r->out, r->out_len, &out_cut);
    err = output_json(c->s, r->errout, r->errout_len, &err_cut);
    body = json_pack("{s:i, s:o*, s:o*, s:b, s:b, s:I}", "exitCode", timed_out ? 124 : r->exit_code,
                     "stdout", out, "stderr", err, "timedOut", timed_out, "truncated",
                     out_cut || err_cut, "durationMs", (json_int_t)took);
    if (body == NULL) {
        reply_msg(c->reply, c->arg, 500, "the command's result could not be encoded");
    } else {
        c->reply(c->arg, 200, body);
    }
    call_free(c);
}

static void run_exec(struct call *c)
{
    struct sl_sandboxes *sb = c->sb;
    char timeout[32];
    const char *argv[] = { SL_SANDBOX_RUNNER_PATH, "--timeout-ms", timeout, "-c", c->cmd };
    struct sl_launcher_exec e = {
        .argv = argv,
        .argc = SL_ARRAY_LEN(argv),
        .env = (const char *const *)c->env,
        .n_env = c->n_env,
        .cwd = c->path,
        .max_stdout = SL_SANDBOX_OUTPUT_MAX + longest_secret(c->s),
        .max_stderr = SL_SANDBOX_OUTPUT_MAX + longest_secret(c->s),
        .deadline_ms = c->timeout_ms + 5000 + EXEC_SLACK_MS,
    };

    (void)snprintf(timeout, sizeof(timeout), "%llu", (unsigned long long)c->timeout_ms);
    c->t0 = uv_now(sb->cfg.loop);
    sb->cfg.launcher->ops->exec(sb->cfg.launcher, c->s->container, &e, on_exec_done, c);
}

static void on_cwd_stat(void *arg, int rc, const char *err, bool is_dir, uint64_t size)
{
    struct call *c = arg;
    char text[PATH_MAX_BYTES + 64];

    (void)size;
    if (rc == SL_ENOTFOUND || (rc == 0 && !is_dir)) {
        (void)snprintf(text, sizeof(text), "cwd %s: %s",
                       rc == 0 ? "is not a directory" : "does not exist", c->path);
        reply_err(c->reply, c->arg, 400, text);
        call_free(c);
        return;
    }
    if (rc < 0) {
        reply_launcher_error(c, rc, err);
        call_free(c);
        return;
    }
    run_exec(c);
}

static void start_exec(struct call *c, json_t *body)
{
    const json_t *cmd = json_object_get(body, "cmd");
    const json_t *cwd = json_object_get(body, "cwd");
    json_t *env = json_object_get(body, "env");
    const json_t *timeout = json_object_get(body, "timeoutMs");
    const char *key;
    json_t *value;

    if (!json_is_string(cmd) || json_string_length(cmd) == 0) {
        reply_err(c->reply, c->arg, 400, "cmd is required");
        goto fail;
    }
    if (strlen(json_string_value(cmd)) != json_string_length(cmd)) {
        reply_err(c->reply, c->arg, 400, "cmd must not contain NUL bytes");
        goto fail;
    }
    if (cwd != NULL && !json_is_null(cwd)
        && (!json_is_string(cwd) || json_string_length(cwd) == 0
            || strlen(json_string_value(cwd)) != json_string_length(cwd))) {
        reply_err(c->reply, c->arg, 400, "cwd must be a non-empty string");
        goto fail;
    }
    if (full_path(json_is_string(cwd) ? json_string_value(cwd) : ".", c->path, sizeof(c->path))
        < 0) {
        reply_err(c->reply, c->arg, 400, "cwd is too long");
        goto fail;
    }
    if (!json_is_string(cwd)) {
        (void)snprintf(c->path, sizeof(c->path), "%s", SL_SANDBOX_REPO_DIR);
    }
    if (timeout != NULL && !json_is_null(timeout)) {
        if (!json_is_integer(timeout) || json_integer_value(timeout) < 1
            || json_integer_value(timeout) > 86400000) {
            reply_err(c->reply, c->arg, 400,
                      "timeoutMs must be an integer from 1 to 86400000 (24 hours)");
            goto fail;
        }
        c->timeout_ms = (uint64_t)json_integer_value(timeout);
    } else {
        c->timeout_ms = SL_SANDBOX_DEFAULT_TIMEOUT_MS;
    }
    if (env != NULL && !json_is_null(env)) {
        size_t i = 0;

        if (!json_is_object(env) || json_object_size(env) > 100) {
            reply_err(c->reply, c->arg, 400, "env must be an object of at most 100 strings");
            goto fail;
        }
        c->env = sl_calloc(json_object_size(env) + 1, sizeof(char *));
        if (c->env == NULL) {
            reply_msg(c->reply, c->arg, 503, "out of memory");
            goto fail;
        }
        json_object_foreach(env, key, value)
        {
            char text[200];
            size_t n;

            if (!sl_env_name_is_valid(key, strlen(key)) || !json_is_string(value)
                || strlen(json_string_value(value)) != json_string_length(value)) {
                (void)snprintf(text, sizeof(text),
                               "env.%.64s: names are shell identifiers and values strings", key);
                reply_err(c->reply, c->arg, 400, text);
                goto fail;
            }
            n = strlen(key) + 1 + json_string_length(value) + 1;
            c->env[i] = sl_malloc(n);
            if (c->env[i] == NULL) {
                reply_msg(c->reply, c->arg, 503, "out of memory");
                goto fail;
            }
            (void)snprintf(c->env[i], n, "%s=%s", key, json_string_value(value));
            c->n_env = ++i;
        }
    }
    c->cmd = sl_strdup(json_string_value(cmd));
    if (c->cmd == NULL) {
        reply_msg(c->reply, c->arg, 503, "out of memory");
        goto fail;
    }
    c->sb->cfg.launcher->ops->stat(c->sb->cfg.launcher, c->s->container, c->path, on_cwd_stat, c);
    return;
fail:
    call_free(c);
}

static void on_read(void *arg, int rc, const char *err, const void *data, size_t len)
{
    struct call *c = arg;
    char text[PATH_MAX_BYTES + 64];
    char *b64;
    size_t cap;
    json_t *body;

    if (rc == SL_ENOTFOUND) {
        (void)snprintf(text, sizeof(text), "not found: %s", c->path);
        reply_err(c->reply, c->arg, 404, text);
    } else if (rc == SL_EISDIR) {
        reply_err(c->reply, c->arg, 400, "path is a directory");
    } else if (rc == SL_ETOOBIG) {
        reply_err(c->reply, c->arg, 413, "file too large");
    } else if (rc == SL_ENOTFILE) {
        (void)snprintf(text, sizeof(text), "not a regular file: %s", c->path);
        reply_err(c->reply, c->arg, 400, text);
    } else if (rc < 0) {
        reply_launcher_error(c, rc, err);
    } else {
        cap = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
        b64 = sl_malloc(cap);
        if (b64 == NULL) {
            reply_msg(c->reply, c->arg, 503, "out of memory");
        } else {
            (void)sodium_bin2base64(b64, cap, data, len, sodium_base64_VARIANT_ORIGINAL);
            body = json_pack("{s:s, s:I, s:s}", "path", c->path, "size", (json_int_t)len, "content",
                             b64);
            sl_free(b64);
            if (body == NULL) {
                reply_msg(c->reply, c->arg, 503, "out of memory");
            } else {
                c->reply(c->arg, 200, body);
            }
        }
    }
    call_free(c);
}

static bool take_path(struct call *c, const json_t *body)
{
    const json_t *path = json_object_get(body, "path");

    if (!json_is_string(path) || json_string_length(path) == 0) {
        reply_err(c->reply, c->arg, 400, "path is required");
        return false;
    }
    if (strlen(json_string_value(path)) != json_string_length(path)
        || full_path(json_string_value(path), c->path, sizeof(c->path)) < 0) {
        reply_err(c->reply, c->arg, 400, "path is not a valid path");
        return false;
    }
    return true;
}

static void start_read(struct call *c, const json_t *body)
{
    if (!take_path(c, body)) {
        call_free(c);
        return;
    }
    c->sb->cfg.launcher->ops->read_file(c->sb->cfg.launcher, c->s->container, c->path,
                                        SL_SANDBOX_FILE_MAX, on_read, c);
}

static void on_written(void *arg, int rc, const char *err)
{
    struct call *c = arg;
    json_t *body;

    if (rc == SL_EISDIR) {
        reply_err(c->reply, c->arg, 400, "path is a directory");
    } else if (rc == SL_ENOTFOUND) {
        reply_err(c->reply, c->arg, 400, "the parent directory could not be created");
    } else if (rc < 0) {
        reply_launcher_error(c, rc, err);
    } else {
        body = json_pack("{s:b, s:s, s:I}", "ok", 1, "path", c->path, "size", (json_int_t)c->len);
        if (body == NULL) {
            reply_msg(c->reply, c->arg, 503, "out of memory");
        } else {
            c->reply(c->arg, 200, body);
        }
    }
    call_free(c);
}

static void on_parent_made(void *arg, const struct sl_launcher_exec_result *r)
{
    struct call *c = arg;

    if (r->rc < 0) {
        reply_launcher_error(c, r->rc, r->err);
        call_free(c);
        return;
    }
    if (r->exit_code != 0) {
        char text[400];

        (void)snprintf(text, sizeof(text), "the parent directory could not be created: %.*s",
                       (int)(r->errout_len > 200 ? 200 : r->errout_len),
                       r->errout != NULL ? r->errout : "");
        reply_err(c->reply, c->arg, 400, text);
        call_free(c);
        return;
    }
    c->sb->cfg.launcher->ops->write_file(c->sb->cfg.launcher, c->s->container, c->path, c->data,
                                         c->len, c->mode, on_written, c);
}

static void start_write(struct call *c, const json_t *body)
{
    const json_t *content = json_object_get(body, "content");
    const json_t *mode = json_object_get(body, "mode");
    char dir[PATH_MAX_BYTES];
    char *slash;
    const char *argv[] = { "mkdir", "-p", "--", dir };
    struct sl_launcher_exec e = {
        .argv = argv,
        .argc = SL_ARRAY_LEN(argv),
        .max_stdout = 4096,
        .max_stderr = 4096,
        .deadline_ms = 60000,
    };
    size_t cap;

    if (!take_path(c, body)) {
        goto fail;
    }
    if (!json_is_string(content)) {
        reply_err(c->reply, c->arg, 400, "content is required (base64)");
        goto fail;
    }
    c->mode = 0644;
    if (mode != NULL && !json_is_null(mode)) {
        if (!json_is_integer(mode) || json_integer_value(mode) < 0
            || json_integer_value(mode) > 07777) {
            reply_err(c->reply, c->arg, 400, "mode must be an integer from 0 to 4095 (07777)");
            goto fail;
        }
        c->mode = (unsigned)json_integer_value(mode);
    }
    cap = json_string_length(content) / 4 * 3 + 3;
    c->data = sl_malloc(cap + 1);
    if (c->data == NULL) {
        reply_msg(c->reply, c->arg, 503, "out of memory");
        goto fail;
    }
    if (sodium_base642bin(c->data, cap, json_string_value(content), json_string_length(content),
                          " \r\n", &c->len, NULL, sodium_base64_VARIANT_ORIGINAL)
        != 0) {
        reply_err(c->reply, c->arg, 400, "content is not valid base64");
        goto fail;
    }
    if (c->len > SL_SANDBOX_FILE_MAX) {
        reply_err(c->reply, c->arg, 413, "file too large");
        goto fail;
    }
    (void)snprintf(dir, sizeof(dir), "%s", c->path);
    slash = strrchr(dir, '/');
    if (slash == NULL || slash[1] == '\0') {
        reply_err(c->reply, c->arg, 400, "path is a directory");
        goto fail;
    }
    if (slash == dir) {
        slash[1] = '\0';
    } else {
        *slash = '\0';
    }
    c->sb->cfg.launcher->ops->exec(c->sb->cfg.launcher, c->s->container, &e, on_parent_made, c);
    return;
fail:
    call_free(c);
}

void sl_sandboxes_call(struct sl_sandboxes *sb, const struct sl_sandbox_caller *caller,
                       const char *repo, const char *id, const char *action, json_t *body,
                       sl_sandbox_reply_fn *reply, void *arg)
{
    struct sandbox *s = find(sb, id);
    struct call *c;
    bool known = strcmp(action, "exec") == 0 || strcmp(action, "read") == 0
                 || strcmp(action, "write") == 0 || strcmp(action, "close") == 0;

    if (s == NULL || strcmp(s->repo, repo) != 0) {
        reply_msg(reply, arg, 404, "sandbox not found");
        return;
    }
    if (!caller->is_admin && strcmp(s->owner_id, caller->user_id) != 0) {
        reply_msg(reply, arg, 403, "not your sandbox");
        return;
    }
    if (!known) {
        reply_msg(reply, arg, 404, "unknown sandbox action");
        return;
    }
    if (s->state == STATE_STARTING) {
        reply_msg(reply, arg, 409, "the sandbox is still starting");
        return;
    }
    if (s->state != STATE_READY || sb->closing) {
        reply_msg(reply, arg, 409, "the sandbox is closing");
        return;
    }
    s->last_used = uv_now(sb->cfg.loop);
    if (strcmp(action, "close") == 0) {
        remove_sandbox(s, "closed by its user", reply, arg);
        return;
    }
    if (body != NULL && !json_is_object(body)) {
        reply_err(reply, arg, 400, "the body must be a JSON object");
        return;
    }
    c = sl_calloc(1, sizeof(*c));
    if (c == NULL) {
        reply_msg(reply, arg, 503, "out of memory");
        return;
    }
    c->sb = sb;
    c->s = s;
    c->reply = reply;
    c->arg = arg;
    s->refs++;
    s->busy++;
    if (strcmp(action, "exec") == 0) {
        start_exec(c, body);
    } else if (strcmp(action, "read") == 0) {
        start_read(c, body);
    } else {
        start_write(c, body);
    }
}

json_t *sl_sandboxes_list(const struct sl_sandboxes *sb, const struct sl_sandbox_caller *caller,
                          const char *repo)
{
    json_t *arr = json_array();

    for (const struct sandbox *s = sb->list; arr != NULL && s != NULL; s = s->next) {
        char created[32];
        char expires[32];

        if (s->state == STATE_GONE || (repo != NULL && strcmp(s->repo, repo) != 0)
            || strcmp(s->owner_id, caller->user_id) != 0) {
            continue;
        }
        rfc3339(s->created_unix, created, sizeof(created));
        rfc3339(s->expires_unix, expires, sizeof(expires));
        (void)json_array_append_new(arr, json_pack("{s:s, s:s, s:s?, s:s?, s:s, s:s, s:s}", "id",
                                                   s->id, "repo", s->repo, "ref", s->ref,
                                                   "environment", s->env_name, "status",
                                                   s->state == STATE_READY ? "ready" : "starting",
                                                   "created_at", created, "expires_at", expires));
    }
    return arr;
}

json_t *sl_sandboxes_owners(const struct sl_sandboxes *sb)
{
    json_t *ids = json_object();
    uint64_t n = sb->n_recent < SL_SANDBOX_RECENT ? sb->n_recent : SL_SANDBOX_RECENT;

    /* Closed ones first: an id reused by an open sandbox (never, ids are random) would take
     * the open one's owner. */
    for (uint64_t i = 0; ids != NULL && i < n; i++) {
        if (json_object_set_new(ids, sb->recent[i].id, json_string(sb->recent[i].owner_id)) < 0) {
            json_decref(ids);
            ids = NULL;
        }
    }
    for (const struct sandbox *s = sb->list; ids != NULL && s != NULL; s = s->next) {
        if (s->owner_id != NULL && json_object_set_new(ids, s->id, json_string(s->owner_id)) < 0) {
            json_decref(ids);
            ids = NULL;
        }
    }
    return ids;
}

bool sl_sandboxes_is_token(const struct sl_sandboxes *sb, const char *token)
{
    size_t n = strlen(token);
    bool hit = false;

    for (const struct sandbox *s = sb->list; s != NULL; s = s->next) {
        if (strlen(s->token) == n && sodium_memcmp(s->token, token, n) == 0) {
            hit = true;
        }
    }
    return hit;
}

/* ---- the sweep ---------------------------------------------------------------------------- */

static void on_sweep(uv_timer_t *t)
{
    struct sl_sandboxes *sb = t->data;
    uint64_t now = uv_now(sb->cfg.loop);
    int64_t wall = (int64_t)time(NULL);
    bool again = true;

    while (again) {
        again = false;
        for (struct waiter *w = sb->waiters; w != NULL; w = w->next) {
            if (now >= w->deadline) {
                waiter_fire(sb, w, false);
                again = true;
                break;
            }
        }
    }
    again = true;
    while (again) {
        again = false;
        for (struct sandbox *s = sb->list; s != NULL; s = s->next) {
            if (s->state == STATE_STARTING && now >= s->start_deadline && s->reply != NULL) {
                create_failed(s, 503, "message", "the sandbox container did not start; try again");
                again = true;
                break;
            }
            if (s->state != STATE_READY || s->busy > 0) {
                continue;
            }
            if (wall >= s->expires_unix) {
                remove_sandbox(s, "its lifetime ended", NULL, NULL);
                again = true;
                break;
            }
            if (now - s->last_used >= sb->cfg.idle_timeout_ms) {
                remove_sandbox(s, "idle", NULL, NULL);
                again = true;
                break;
            }
        }
    }
}

/* ---- snapshot entries --------------------------------------------------------------------- */

struct clients_mem {
    struct sl_snapshot_build_client *items;
    struct sl_snapshot_build_rule rule;
    char **strs;
    size_t n_strs;
};

static const char *keep(struct clients_mem *m, const char *s, bool *ok)
{
    char *copy = s != NULL ? sl_strdup(s) : NULL;

    if (s != NULL && copy == NULL) {
        *ok = false;
    }
    if (copy != NULL) {
        m->strs[m->n_strs++] = copy;
    }
    return copy;
}

int sl_sandboxes_clients(const struct sl_sandboxes *sb, struct sl_sandbox_clients *out)
{
    struct clients_mem *m;
    size_t n = 0;
    bool ok = true;

    memset(out, 0, sizeof(*out));
    out->generation = sb->generation;
    for (const struct sandbox *s = sb->list; s != NULL; s = s->next) {
        n += s->state != STATE_GONE;
    }
    if (n == 0) {
        return 0;
    }
    m = sl_calloc(1, sizeof(*m));
    if (m == NULL) {
        return SL_ENOMEM;
    }
    m->items = sl_calloc(n, sizeof(*m->items));
    m->strs = sl_calloc(n * 6 + 2, sizeof(char *));
    out->_mem = m;
    if (m->items == NULL || m->strs == NULL) {
        sl_sandbox_clients_free(out);
        return SL_ENOMEM;
    }
    if (sb->git_rule_host != NULL) {
        m->rule.host = keep(m, sb->git_rule_host, &ok);
        m->rule.header = "Authorization";
        m->rule.value = keep(m, sb->git_auth, &ok);
    }
    for (const struct sandbox *s = sb->list; s != NULL; s = s->next) {
        struct sl_snapshot_build_client *c = &m->items[out->n];
        char expires[32];

        if (s->state == STATE_GONE) {
            continue;
        }
        rfc3339(s->expires_unix, expires, sizeof(expires));
        c->id = keep(m, s->id, &ok);
        c->env_id = keep(m, s->env_id != NULL ? s->env_id : SL_SNAPSHOT_OFFLINE_ENV, &ok);
        c->token = keep(m, s->token, &ok);
        c->ip = s->ip[0] != '\0' ? keep(m, s->ip, &ok) : NULL;
        c->expires_at = keep(m, expires, &ok);
        if (sb->git_rule_host != NULL) {
            c->rules = &m->rule;
            c->n_rules = 1;
        }
        out->n++;
    }
    out->items = m->items;
    if (!ok) {
        sl_sandbox_clients_free(out);
        return SL_ENOMEM;
    }
    return 0;
}

void sl_sandbox_clients_free(struct sl_sandbox_clients *c)
{
    struct clients_mem *m = c->_mem;

    if (m != NULL) {
        free_strv(m->strs, m->n_strs, true);
        sl_free(m->items);
        sl_free(m);
    }
    memset(c, 0, sizeof(*c));
}

/* ---- start, status, close ----------------------------------------------------------------- */

static void maybe_closed(struct sl_sandboxes *sb);

/* The start sequence failed: say why (status and log) and end it. */
static void fail_start(struct sl_sandboxes *sb, const char *what, const char *err)
{
    (void)snprintf(sb->error, sizeof(sb->error), "%s: %s", what, err != NULL ? err : "failed");
    sl_log(SL_LOG_ERROR, 0, "msg=\"sandboxes are not available\" err=\"%s\"", sb->error);
    sb->pending_removes--;
    maybe_closed(sb);
}

static void on_leftover_removed(void *arg, int rc, const char *err)
{
    struct sl_sandboxes *sb = arg;

    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"cannot remove a leftover sandbox container\" err=\"%s\"",
               err != NULL ? err : sl_strerror(rc));
    }
    if (--sb->pending_removes == 0 && !sb->closing) {
        sb->ready = true;
        sl_log(SL_LOG_INFO, 0, "msg=\"sandboxes ready\" network=%s gateway=%s", sb->network,
               sb->gateway);
    }
    maybe_closed(sb);
}

static void on_listed(void *arg, int rc, const char *err, const struct sl_launcher_entry *entries,
                      size_t n)
{
    struct sl_sandboxes *sb = arg;

    if (rc < 0) {
        fail_start(sb, "cannot list containers", err);
        return;
    }
    for (size_t i = 0; i < n && !sb->closing; i++) {
        bool ours = false;

        for (size_t k = 0; k < entries[i].n_labels; k++) {
            if (strcmp(entries[i].labels[k].key, LABEL_NETWORK) == 0
                && strcmp(entries[i].labels[k].value, sb->network) == 0) {
                ours = true;
            }
        }
        if (!ours) {
            continue;
        }
        sl_log(SL_LOG_WARN, 0,
               "msg=\"removing a sandbox container left by an earlier run\" container=%.12s "
               "name=%s",
               entries[i].id, entries[i].name);
        sb->pending_removes++;
        sb->cfg.launcher->ops->remove(sb->cfg.launcher, entries[i].id, on_leftover_removed, sb);
    }
    /* The list's own count. */
    on_leftover_removed(sb, 0, NULL);
}

static void on_network(void *arg, int rc, const char *err)
{
    struct sl_sandboxes *sb = arg;

    if (rc < 0) {
        fail_start(sb, "cannot set up the sandbox network", err);
        return;
    }
    sb->cfg.launcher->ops->list(sb->cfg.launcher, LABEL_SANDBOX, on_listed, sb);
}

static void on_ping(void *arg, int rc, const char *err)
{
    struct sl_sandboxes *sb = arg;
    struct sl_launcher_network net = { sb->network, sb->network, sb->subnet, sb->gateway };

    if (rc < 0) {
        fail_start(sb, "the container runtime does not answer", err);
        return;
    }
    sb->cfg.launcher->ops->ensure_network(sb->cfg.launcher, &net, on_network, sb);
}

void sl_sandboxes_start(struct sl_sandboxes *sb)
{
    /* The start sequence counts as one pending removal until it is done. */
    sb->pending_removes++;
    sb->cfg.launcher->ops->ping(sb->cfg.launcher, on_ping, sb);
}

bool sl_sandboxes_is_ready(const struct sl_sandboxes *sb)
{
    return sb->ready && !sb->closing;
}

const char *sl_sandboxes_gateway(const struct sl_sandboxes *sb)
{
    return sb->gateway;
}

void sl_sandboxes_status(const struct sl_sandboxes *sb, json_t *doc)
{
    size_t open = 0;

    for (const struct sandbox *s = sb->list; s != NULL; s = s->next) {
        open += s->state != STATE_GONE;
    }
    (void)json_object_set_new(doc, "sandboxes",
                              json_pack("{s:b, s:s, s:s, s:I, s:s}", "ready", sb->ready, "network",
                                        sb->network, "gateway", sb->gateway, "open",
                                        (json_int_t)open, "error", sb->error));
}

static void on_sweep_closed(uv_handle_t *h)
{
    struct sl_sandboxes *sb = h->data;
    void (*closed)(void *) = sb->closed;
    void *arg = sb->closed_arg;

    if (sb->git_token != NULL) {
        sodium_memzero(sb->git_token, strlen(sb->git_token));
    }
    if (sb->git_auth != NULL) {
        sodium_memzero(sb->git_auth, strlen(sb->git_auth));
    }
    sl_free(sb->ca_bundle);
    sl_free(sb->resolv_conf);
    sl_free(sb->git_base);
    sl_free(sb->git_token);
    sl_free(sb->git_rule_host);
    sl_free(sb->git_auth);
    sl_free(sb);
    if (closed != NULL) {
        closed(arg);
    }
}

static void on_launcher_closed(void *arg)
{
    struct sl_sandboxes *sb = arg;

    uv_close((uv_handle_t *)&sb->sweep, on_sweep_closed);
}

static void maybe_closed(struct sl_sandboxes *sb)
{
    if (!sb->closing || sb->shutting || sb->pending_removes > 0 || sb->list != NULL) {
        return;
    }
    sb->shutting = true;
    sb->cfg.launcher->ops->close(sb->cfg.launcher, on_launcher_closed, sb);
}

void sl_sandboxes_close(struct sl_sandboxes *sb, void (*closed)(void *arg), void *arg)
{
    if (sb->closing) {
        return;
    }
    sb->closing = true;
    sb->ready = false;
    sb->closed = closed;
    sb->closed_arg = arg;
    (void)uv_timer_stop(&sb->sweep);
    while (sb->waiters != NULL) {
        waiter_fire(sb, sb->waiters, false);
    }
    while (sb->list != NULL) {
        struct sandbox *s = sb->list;

        if (s->reply != NULL) {
            create_failed(s, 503, "message", "the control plane is stopping");
        } else {
            remove_sandbox(s, "the control plane is stopping", NULL, NULL);
        }
    }
    maybe_closed(sb);
}

/* ---- creation of the manager -------------------------------------------------------------- */

int sl_sandboxes_subnet_gateway(const char *cidr, char *gateway, size_t cap)
{
    char addr[INET_ADDRSTRLEN];
    const char *slash = cidr != NULL ? strchr(cidr, '/') : NULL;
    struct in_addr a;
    char *end = NULL;
    long bits;
    uint32_t host;

    if (slash == NULL || (size_t)(slash - cidr) >= sizeof(addr)) {
        return SL_EINVAL;
    }
    memcpy(addr, cidr, (size_t)(slash - cidr));
    addr[slash - cidr] = '\0';
    /* Digits only: strtol would also take a sign or leading blanks. */
    if (slash[1] < '0' || slash[1] > '9') {
        return SL_EINVAL;
    }
    bits = strtol(slash + 1, &end, 10);
    if (inet_pton(AF_INET, addr, &a) != 1 || *end != '\0' || bits < 8 || bits > 29) {
        return SL_EINVAL;
    }
    host = ntohl(a.s_addr);
    if ((host & ~(0xFFFFFFFFu << (32 - bits))) != 0) {
        return SL_EINVAL;
    }
    a.s_addr = htonl(host + 1);
    return inet_ntop(AF_INET, &a, gateway, (socklen_t)cap) != NULL ? 0 : SL_EINVAL;
}

static bool is_network_name(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 15) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')
              || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_' || s[i] == '.')) {
            return false;
        }
    }
    return s[0] != '-' && s[0] != '.';
}

/* --git-url: https only (the credential is injected over TLS only); the rule's host. */
static int parse_git(struct sl_sandboxes *sb, const char *url, const char *token, char *err,
                     size_t errlen)
{
    struct sl_url u;
    const char *why = NULL;
    size_t n = strlen(url);
    char plain[512];
    size_t cap;

    while (n > 0 && url[n - 1] == '/') {
        n--;
    }
    if (sl_url_parse(sl_slice_of(url, n), &u, &why) < 0) {
        (void)snprintf(err, errlen, "--git-url: bad URL: %s", why != NULL ? why : "malformed");
        return SL_EINVAL;
    }
    if (u.scheme != SL_URL_HTTPS || u.query.n > 0) {
        (void)snprintf(err, errlen,
                       "--git-url: an https:// URL without a query is required "
                       "(the proxy injects the token over TLS only)");
        return SL_EINVAL;
    }
    if (token == NULL || token[0] == '\0' || strpbrk(token, "\r\n") != NULL
        || strlen(token) > 300) {
        (void)snprintf(err, errlen, "--git-token: a token (one line) is required with --git-url");
        return SL_EINVAL;
    }
    sb->git_base = sl_strndup(url, n);
    sb->git_token = sl_strdup(token);
    sb->git_rule_host = sl_malloc(SL_HOST_NAME_MAX + 8);
    (void)snprintf(plain, sizeof(plain), "x-access-token:%s", token);
    cap = strlen("Basic ")
          + sodium_base64_ENCODED_LEN(strlen(plain), sodium_base64_VARIANT_ORIGINAL);
    sb->git_auth = sl_malloc(cap);
    if (sb->git_base == NULL || sb->git_token == NULL || sb->git_rule_host == NULL
        || sb->git_auth == NULL) {
        sodium_memzero(plain, sizeof(plain));
        return SL_ENOMEM;
    }
    if (u.port_given && u.port != 443) {
        (void)snprintf(sb->git_rule_host, SL_HOST_NAME_MAX + 8, "%s:%u", u.host.name,
                       (unsigned)u.port);
    } else {
        (void)snprintf(sb->git_rule_host, SL_HOST_NAME_MAX + 8, "%s", u.host.name);
    }
    memcpy(sb->git_auth, "Basic ", 6);
    (void)sodium_bin2base64(sb->git_auth + 6, cap - 6, (const unsigned char *)plain, strlen(plain),
                            sodium_base64_VARIANT_ORIGINAL);
    sodium_memzero(plain, sizeof(plain));
    return 0;
}

int sl_sandboxes_create(const struct sl_sandboxes_config *cfg, struct sl_sandboxes **out, char *err,
                        size_t errlen)
{
    struct sl_sandboxes *sb;
    int rc = 0;

    if (cfg->network == NULL || !is_network_name(cfg->network)) {
        (void)snprintf(err, errlen,
                       "--network: 1 to 15 letters, digits, '-', '_' or '.' (it names the "
                       "bridge interface too)");
        return SL_EINVAL;
    }
    if (cfg->proxy_port == 0 || cfg->proxy_port > 65535) {
        (void)snprintf(err, errlen, "--proxy-port: a port from 1 to 65535 is required");
        return SL_EINVAL;
    }
    if ((cfg->git_url == NULL) != (cfg->git_token == NULL)) {
        (void)snprintf(err, errlen, "--git-url and --git-token go together");
        return SL_EINVAL;
    }
    sb = sl_calloc(1, sizeof(*sb));
    if (sb == NULL) {
        return SL_ENOMEM;
    }
    sb->cfg = *cfg;
    (void)snprintf(sb->network, sizeof(sb->network), "%s", cfg->network);
    (void)snprintf(sb->subnet, sizeof(sb->subnet), "%s", cfg->subnet);
    if (cfg->subnet == NULL || strlen(cfg->subnet) >= sizeof(sb->subnet)
        || sl_sandboxes_subnet_gateway(cfg->subnet, sb->gateway, sizeof(sb->gateway)) < 0) {
        (void)snprintf(err, errlen,
                       "--subnet: an IPv4 network like 10.213.0.0/24 (prefix 8 to 29, host "
                       "bits zero) is required");
        rc = SL_EINVAL;
    }
    if (rc == 0 && cfg->git_url != NULL) {
        rc = parse_git(sb, cfg->git_url, cfg->git_token, err, errlen);
    }
    if (rc == 0) {
        sb->ca_bundle = sl_malloc(cfg->ca_bundle_len + 1);
        sb->resolv_conf = cfg->resolv_conf != NULL ? sl_strdup(cfg->resolv_conf) : NULL;
        if (sb->ca_bundle == NULL || (cfg->resolv_conf != NULL && sb->resolv_conf == NULL)) {
            rc = SL_ENOMEM;
        } else {
            memcpy(sb->ca_bundle, cfg->ca_bundle, cfg->ca_bundle_len);
        }
    }
    if (rc < 0) {
        sl_free(sb->ca_bundle);
        sl_free(sb->resolv_conf);
        sl_free(sb->git_base);
        sl_free(sb->git_token);
        sl_free(sb->git_rule_host);
        sl_free(sb->git_auth);
        sl_free(sb);
        return rc;
    }
    sb->cfg.network = sb->network;
    sb->cfg.subnet = sb->subnet;
    sb->cfg.ca_bundle = sb->ca_bundle;
    sb->cfg.resolv_conf = sb->resolv_conf;
    sb->cfg.git_url = sb->git_base;
    sb->cfg.git_token = sb->git_token;
    if (sb->cfg.idle_timeout_ms == 0) {
        sb->cfg.idle_timeout_ms = (uint64_t)SL_SANDBOX_DEFAULT_IDLE_S * 1000;
    }
    if (sb->cfg.lifetime_ms == 0) {
        sb->cfg.lifetime_ms = (uint64_t)SL_SANDBOX_DEFAULT_LIFETIME_S * 1000;
    }
    if (sb->cfg.start_timeout_ms == 0) {
        sb->cfg.start_timeout_ms = SL_SANDBOX_START_TIMEOUT_MS;
    }
    SL_BUG_ON(uv_timer_init(cfg->loop, &sb->sweep) != 0);
    sb->sweep.data = sb;
    (void)uv_timer_start(&sb->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
    *out = sb;
    return 0;
}
