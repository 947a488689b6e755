/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/sandbox_calls.c - the calls into an open sandbox (see sandbox.h,
 * sl_sandboxes_call()): exec through the runner, read and write a file, and the output of a
 * command made safe to answer (valid UTF-8, the sandbox's secrets redacted). A call that comes
 * while the repository is being cloned is parked until the clone ends; after a failed clone
 * every call is answered 409 `the clone failed: ...`.
 */
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "base/buf.h"
#include "base/mem.h"
#include "control/env/environment.h"
#include "control/sandbox/sandbox.h"
#include "control/sandbox/sandbox_int.h"

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
static size_t longest_secret(const struct sl__sandbox *s)
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
static json_t *output_json(const struct sl__sandbox *s, const char *p, size_t n, bool *truncated)
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

char *sl__sandbox_output_line(const struct sl__sandbox *s, const char *p, size_t n, size_t max)
{
    struct sl_buf raw;
    struct sl_buf text;
    char *line = NULL;

    sl_buf_init(&raw, n + 1);
    sl_buf_init(&text, 3 * max + 1);
    if (sl_buf_append(&raw, p, n) == 0 && redact(&raw, s->secrets, s->n_secrets) == 0) {
        if (raw.len > max) {
            raw.len = max;
            drop_secret_prefix(&raw, s->secrets, s->n_secrets);
        }
        for (size_t i = 0; i < raw.len; i++) {
            raw.p[i] = raw.p[i] < 0x20 || raw.p[i] == 0x7F ? ' ' : raw.p[i];
        }
        while (raw.len > 0 && raw.p[raw.len - 1] == ' ') {
            raw.len--;
        }
        if (append_utf8(&text, raw.p, raw.len) == 0) {
            line = sl_strndup(text.p != NULL ? (const char *)text.p : "", text.len);
        }
    }
    if (raw.p != NULL) {
        sodium_memzero(raw.p, raw.len);
    }
    sl_buf_finish(&raw);
    sl_buf_finish(&text);
    return line;
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

struct call {
    struct sl_sandboxes *sb;
    struct sl__sandbox *s;
    sl_sandbox_reply_fn *reply;
    void *arg;
    char path[SL__SANDBOX_PATH_MAX];
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
    sl__sandbox_unref(c->s);
    sl_free(c->cmd);
    sl__sandbox_free_strv(c->env, c->n_env, true);
    if (c->data != NULL) {
        sodium_memzero(c->data, c->len);
    }
    sl_free(c->data);
    sl_free(c);
}

/* The answer of a call whose sandbox was closed while it ran or waited: 503 when the whole
 * control plane is stopping (the caller may try again once it is back), else 409. */
static void reply_closed(const struct sl_sandboxes *sb, sl_sandbox_reply_fn *reply, void *arg)
{
    if (sb->closing) {
        sl__sandbox_reply_msg(reply, arg, 503, "the control plane is stopping");
    } else {
        sl__sandbox_reply_msg(reply, arg, 409, "the sandbox was closed");
    }
}

/* A launcher failure as an answer: the sandbox closed meanwhile (then also when the launcher
 * reported success: an exec's result is then the kill of its container), or the runtime
 * failed. */
static void reply_launcher_error(struct call *c, int rc, const char *err)
{
    char text[400];

    if (c->s->state == SL__SANDBOX_GONE || rc == SL_ECANCELED) {
        reply_closed(c->sb, c->reply, c->arg);
        return;
    }
    (void)snprintf(text, sizeof(text), "the container runtime failed: %s",
                   err != NULL ? err : sl_strerror(rc));
    sl__sandbox_reply_msg(c->reply, c->arg, 502, text);
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

    if (r->rc < 0 || c->s->state == SL__SANDBOX_GONE) {
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
        sl__sandbox_reply_msg(c->reply, c->arg, 500, "the command's result could not be encoded");
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
        .deadline_ms = c->timeout_ms + 5000 + SL__SANDBOX_EXEC_SLACK_MS,
    };

    (void)snprintf(timeout, sizeof(timeout), "%llu", (unsigned long long)c->timeout_ms);
    c->t0 = uv_now(sb->cfg.loop);
    sb->cfg.launcher->ops->exec(sb->cfg.launcher, c->s->container, &e, on_exec_done, c);
}

static void on_cwd_stat(void *arg, int rc, const char *err, bool is_dir, uint64_t size)
{
    struct call *c = arg;
    char text[SL__SANDBOX_PATH_MAX + 64];

    (void)size;
    if (rc == SL_ENOTFOUND || (rc == 0 && !is_dir)) {
        (void)snprintf(text, sizeof(text), "cwd %s: %s",
                       rc == 0 ? "is not a directory" : "does not exist", c->path);
        sl__sandbox_reply_err(c->reply, c->arg, 400, text);
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
        sl__sandbox_reply_err(c->reply, c->arg, 400, "cmd is required");
        goto fail;
    }
    if (strlen(json_string_value(cmd)) != json_string_length(cmd)) {
        sl__sandbox_reply_err(c->reply, c->arg, 400, "cmd must not contain NUL bytes");
        goto fail;
    }
    if (cwd != NULL && !json_is_null(cwd)
        && (!json_is_string(cwd) || json_string_length(cwd) == 0
            || strlen(json_string_value(cwd)) != json_string_length(cwd))) {
        sl__sandbox_reply_err(c->reply, c->arg, 400, "cwd must be a non-empty string");
        goto fail;
    }
    if (full_path(json_is_string(cwd) ? json_string_value(cwd) : ".", c->path, sizeof(c->path))
        < 0) {
        sl__sandbox_reply_err(c->reply, c->arg, 400, "cwd is too long");
        goto fail;
    }
    if (!json_is_string(cwd)) {
        (void)snprintf(c->path, sizeof(c->path), "%s", SL_SANDBOX_REPO_DIR);
    }
    if (timeout != NULL && !json_is_null(timeout)) {
        if (!json_is_integer(timeout) || json_integer_value(timeout) < 1
            || json_integer_value(timeout) > 86400000) {
            sl__sandbox_reply_err(c->reply, c->arg, 400,
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
            sl__sandbox_reply_err(c->reply, c->arg, 400,
                                  "env must be an object of at most 100 strings");
            goto fail;
        }
        c->env = sl_calloc(json_object_size(env) + 1, sizeof(char *));
        if (c->env == NULL) {
            sl__sandbox_reply_msg(c->reply, c->arg, 503, "out of memory");
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
                sl__sandbox_reply_err(c->reply, c->arg, 400, text);
                goto fail;
            }
            n = strlen(key) + 1 + json_string_length(value) + 1;
            c->env[i] = sl_malloc(n);
            if (c->env[i] == NULL) {
                sl__sandbox_reply_msg(c->reply, c->arg, 503, "out of memory");
                goto fail;
            }
            (void)snprintf(c->env[i], n, "%s=%s", key, json_string_value(value));
            c->n_env = ++i;
        }
    }
    c->cmd = sl_strdup(json_string_value(cmd));
    if (c->cmd == NULL) {
        sl__sandbox_reply_msg(c->reply, c->arg, 503, "out of memory");
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
    char text[SL__SANDBOX_PATH_MAX + 64];
    char *b64;
    size_t cap;
    json_t *body;

    if (rc == SL_ENOTFOUND) {
        (void)snprintf(text, sizeof(text), "not found: %s", c->path);
        sl__sandbox_reply_err(c->reply, c->arg, 404, text);
    } else if (rc == SL_EISDIR) {
        sl__sandbox_reply_err(c->reply, c->arg, 400, "path is a directory");
    } else if (rc == SL_ETOOBIG) {
        sl__sandbox_reply_err(c->reply, c->arg, 413, "file too large");
    } else if (rc == SL_ENOTFILE) {
        (void)snprintf(text, sizeof(text), "not a regular file: %s", c->path);
        sl__sandbox_reply_err(c->reply, c->arg, 400, text);
    } else if (rc < 0) {
        reply_launcher_error(c, rc, err);
    } else {
        cap = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
        b64 = sl_malloc(cap);
        if (b64 == NULL) {
            sl__sandbox_reply_msg(c->reply, c->arg, 503, "out of memory");
        } else {
            (void)sodium_bin2base64(b64, cap, data, len, sodium_base64_VARIANT_ORIGINAL);
            body = json_pack("{s:s, s:I, s:s}", "path", c->path, "size", (json_int_t)len, "content",
                             b64);
            sl_free(b64);
            if (body == NULL) {
                sl__sandbox_reply_msg(c->reply, c->arg, 503, "out of memory");
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
        sl__sandbox_reply_err(c->reply, c->arg, 400, "path is required");
        return false;
    }
    if (strlen(json_string_value(path)) != json_string_length(path)
        || full_path(json_string_value(path), c->path, sizeof(c->path)) < 0
        || !sl_launcher_path_ok(c->path)) {
        sl__sandbox_reply_err(c->reply, c->arg, 400, "path is not a valid path");
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
        sl__sandbox_reply_err(c->reply, c->arg, 400, "path is a directory");
    } else if (rc == SL_ENOTFOUND) {
        sl__sandbox_reply_err(c->reply, c->arg, 400, "the parent directory could not be created");
    } else if (rc < 0) {
        reply_launcher_error(c, rc, err);
    } else {
        body = json_pack("{s:b, s:s, s:I}", "ok", 1, "path", c->path, "size", (json_int_t)c->len);
        if (body == NULL) {
            sl__sandbox_reply_msg(c->reply, c->arg, 503, "out of memory");
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
        sl__sandbox_reply_err(c->reply, c->arg, 400, text);
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
    char dir[SL__SANDBOX_PATH_MAX];
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
        sl__sandbox_reply_err(c->reply, c->arg, 400, "content is required (base64)");
        goto fail;
    }
    c->mode = 0644;
    if (mode != NULL && !json_is_null(mode)) {
        if (!json_is_integer(mode) || json_integer_value(mode) < 0
            || json_integer_value(mode) > 07777) {
            sl__sandbox_reply_err(c->reply, c->arg, 400,
                                  "mode must be an integer from 0 to 4095 (07777)");
            goto fail;
        }
        c->mode = (unsigned)json_integer_value(mode);
    }
    cap = json_string_length(content) / 4 * 3 + 3;
    c->data = sl_malloc(cap + 1);
    if (c->data == NULL) {
        sl__sandbox_reply_msg(c->reply, c->arg, 503, "out of memory");
        goto fail;
    }
    if (sodium_base642bin(c->data, cap, json_string_value(content), json_string_length(content),
                          " \r\n", &c->len, NULL, sodium_base64_VARIANT_ORIGINAL)
        != 0) {
        sl__sandbox_reply_err(c->reply, c->arg, 400, "content is not valid base64");
        goto fail;
    }
    if (c->len > SL_SANDBOX_FILE_MAX) {
        sl__sandbox_reply_err(c->reply, c->arg, 413, "file too large");
        goto fail;
    }
    (void)snprintf(dir, sizeof(dir), "%s", c->path);
    slash = strrchr(dir, '/');
    if (slash == NULL || slash[1] == '\0') {
        sl__sandbox_reply_err(c->reply, c->arg, 400, "path is a directory");
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

/* Runs exec, read or write on `s` (ready, its clone over). */
static void dispatch(struct sl__sandbox *s, const char *action, json_t *body,
                     sl_sandbox_reply_fn *reply, void *arg)
{
    struct sl_sandboxes *sb = s->sb;
    struct call *c;

    if (s->clone == SL__SANDBOX_CLONE_FAILED) {
        /* Every call hears why: git's reason is valid UTF-8 of any length (clone_ended()). */
        json_t *msg = json_pack("{s:s+}", "message", "the clone failed: ",
                                s->clone_error != NULL ? s->clone_error : "out of memory");

        reply(arg, 409, msg != NULL ? msg : json_object());
        return;
    }
    if (body != NULL && !json_is_object(body)) {
        sl__sandbox_reply_err(reply, arg, 400, "the body must be a JSON object");
        return;
    }
    c = sl_calloc(1, sizeof(*c));
    if (c == NULL) {
        sl__sandbox_reply_msg(reply, arg, 503, "out of memory");
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

/* Parks a call until the clone of `s` ends. It counts as use meanwhile. */
static void park(struct sl__sandbox *s, const char *action, json_t *body,
                 sl_sandbox_reply_fn *reply, void *arg)
{
    struct sl__sandbox_parked *p = sl_calloc(1, sizeof(*p));

    if (p == NULL) {
        sl__sandbox_reply_msg(reply, arg, 503, "out of memory");
        return;
    }
    (void)snprintf(p->action, sizeof(p->action), "%s", action);
    p->body = json_incref(body);
    p->reply = reply;
    p->arg = arg;
    *s->parked_tail = p;
    s->parked_tail = &p->next;
    s->refs++;
    s->busy++;
}

void sl__sandbox_unpark(struct sl__sandbox *s)
{
    struct sl__sandbox_parked *p = s->parked;

    s->parked = NULL;
    s->parked_tail = &s->parked;
    while (p != NULL) {
        struct sl__sandbox_parked *next = p->next;

        s->busy--;
        s->last_used = uv_now(s->sb->cfg.loop);
        if (s->state != SL__SANDBOX_READY || s->sb->closing) {
            reply_closed(s->sb, p->reply, p->arg);
        } else {
            dispatch(s, p->action, p->body, p->reply, p->arg);
        }
        json_decref(p->body);
        sl_free(p);
        sl__sandbox_unref(s);
        p = next;
    }
}

void sl_sandboxes_call(struct sl_sandboxes *sb, const struct sl_sandbox_caller *caller,
                       const char *repo, const char *id, const char *action, json_t *body,
                       sl_sandbox_reply_fn *reply, void *arg)
{
    struct sl__sandbox *s = sl__sandbox_find(sb, id);
    bool known = strcmp(action, "exec") == 0 || strcmp(action, "read") == 0
                 || strcmp(action, "write") == 0 || strcmp(action, "close") == 0;

    if (s == NULL || strcmp(s->repo, repo) != 0) {
        sl__sandbox_reply_msg(reply, arg, 404, "sandbox not found");
        return;
    }
    if (!caller->any_sandbox && strcmp(s->owner_id, caller->user_id) != 0) {
        sl__sandbox_reply_msg(reply, arg, 403, "not your sandbox");
        return;
    }
    if (!known) {
        sl__sandbox_reply_msg(reply, arg, 404, "unknown sandbox action");
        return;
    }
    if (s->state == SL__SANDBOX_STARTING) {
        sl__sandbox_reply_msg(reply, arg, 409, "the sandbox is still starting");
        return;
    }
    if (s->state != SL__SANDBOX_READY || sb->closing) {
        sl__sandbox_reply_msg(reply, arg, 409, "the sandbox is closing");
        return;
    }
    s->last_used = uv_now(sb->cfg.loop);
    if (strcmp(action, "close") == 0) {
        sl__sandbox_remove(s, "closed by its user", reply, arg);
        return;
    }
    if (s->clone == SL__SANDBOX_CLONE_RUNNING) {
        park(s, action, body, reply, arg);
        return;
    }
    dispatch(s, action, body, reply, arg);
}
