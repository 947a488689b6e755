/* SPDX-License-Identifier: Apache-2.0 */
#include "control/env/pusher.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "http/h1.h"

#define BACKOFF_MIN_MS 100u
#define BACKOFF_MAX_MS 2000u
#define BODY_MAX       (64u * 1024u)
#define READ_BYTES     4096u
#define PATH_BYTES     108u

/* A snapshot shared by the targets sending it. Loop thread only. */
struct doc {
    int refs;
    int64_t version;
    size_t n;
    uint8_t data[];
};

enum kind {
    KIND_NONE = 0,
    KIND_PUSH,
    KIND_STATUS,
};

struct target {
    struct sl_pusher *p;
    char path[PATH_BYTES];
    uv_pipe_t pipe;
    bool pipe_live;
    uv_connect_t creq;
    uv_write_t wreq;
    /* Deadline of the request in flight, or the back-off wait. */
    uv_timer_t timer;
    enum kind kind;
    /* The snapshot being pushed (a reference). */
    struct doc *doc;
    char head[256];
    struct sl_arena arena;
    struct sl_h1 resp;
    bool resp_live;
    int status;
    bool done;
    struct sl_buf body;
    uint8_t rbuf[READ_BYTES];
    /* What the proxy has; the newest version it refused (never resent). */
    int64_t acked;
    int64_t refused;
    bool unreachable;
    bool backing_off;
    uint64_t backoff_ms;
    char last_error[200];
    /* The proxy's audit log as its last status said (docs/reference/proxy.md §4.9): 1 healthy,
     * 0 not (with the reason), -1 no audit log or not known yet. */
    int audit_healthy;
    char audit_error[120];
};

struct sl_pusher {
    uv_loop_t *loop;
    struct sl_pusher_config cfg;
    struct target targets[SL_PUSHER_TARGETS_MAX];
    size_t n;
    struct doc *current;
    uv_timer_t poll;
    bool closing;
    int pending_closes;
    void (*closed)(void *arg);
    void *closed_arg;
};

static void start(struct target *t, enum kind kind);
static void kick(struct target *t);

static void doc_unref(struct doc *d)
{
    if (d != NULL && --d->refs == 0) {
        sl_free(d);
    }
}

/* Records "what: detail" (or just the detail) as the target's last error. */
static void set_error(struct target *t, const char *what, const char *detail)
{
    (void)snprintf(t->last_error, sizeof(t->last_error), "%s%s%s", what != NULL ? what : "",
                   what != NULL ? ": " : "", detail);
}

static void maybe_freed(struct sl_pusher *p)
{
    if (--p->pending_closes > 0) {
        return;
    }
    for (size_t i = 0; i < p->n; i++) {
        sl_buf_finish(&p->targets[i].body);
        sl_arena_finish(&p->targets[i].arena);
    }
    doc_unref(p->current);
    if (p->closed != NULL) {
        p->closed(p->closed_arg);
    }
    sl_free(p);
}

static void on_closed_handle(uv_handle_t *h)
{
    maybe_freed(h->data);
}

/* The request is over: record the outcome, then close the pipe. */
static void on_backoff(uv_timer_t *timer)
{
    struct target *t = timer->data;

    t->backing_off = false;
    kick(t);
}

static void schedule_retry(struct target *t)
{
    t->backing_off = true;
    t->backoff_ms = t->backoff_ms == 0 ? BACKOFF_MIN_MS : t->backoff_ms * 2;
    if (t->backoff_ms > BACKOFF_MAX_MS) {
        t->backoff_ms = BACKOFF_MAX_MS;
    }
    (void)uv_timer_start(&t->timer, on_backoff, t->backoff_ms, 0);
}

/* The version a proxy's status reports, and the state of its audit log. */
static int64_t status_version(struct target *t, const struct sl_buf *body)
{
    json_t *j = json_loadb((const char *)body->p, body->len, 0, NULL);
    json_t *v = j != NULL ? json_object_get(j, "version") : NULL;
    json_t *audit = j != NULL ? json_object_get(j, "audit") : NULL;
    json_t *healthy = json_object_get(audit, "healthy");
    const char *why = json_string_value(json_object_get(audit, "error"));
    int64_t version = v != NULL && json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;

    t->audit_healthy = json_is_boolean(healthy) ? json_is_true(healthy) : -1;
    (void)snprintf(t->audit_error, sizeof(t->audit_error), "%s",
                   t->audit_healthy == 0 && why != NULL ? why : "");
    json_decref(j);
    return version;
}

int64_t sl_pusher_acked_by_all(const struct sl_pusher *p)
{
    int64_t min = INT64_MAX;

    for (size_t i = 0; i < p->n; i++) {
        if (p->targets[i].acked < min) {
            min = p->targets[i].acked;
        }
    }
    return p->n == 0 ? 0 : min;
}

static void notify_acked(struct sl_pusher *p)
{
    if (p->cfg.on_acked != NULL && !p->closing) {
        p->cfg.on_acked(p->cfg.acked_arg, sl_pusher_acked_by_all(p));
    }
}

static void record(struct target *t, bool ok)
{
    struct sl_pusher *p = t->p;

    if (!ok) {
        if (!t->unreachable) {
            sl_log(SL_LOG_WARN, 0,
                   "msg=\"proxy admin socket unreachable; retrying\" socket=%s "
                   "err=\"%s\"",
                   t->path, t->last_error);
        }
        t->unreachable = true;
        if (t->kind == KIND_PUSH) {
            schedule_retry(t);
        }
        return;
    }
    if (t->unreachable) {
        sl_log(SL_LOG_INFO, 0, "msg=\"proxy admin socket reachable again\" socket=%s", t->path);
    }
    t->unreachable = false;
    t->backoff_ms = 0;
    /* A refusal of the current snapshot stays on record until a newer one is delivered. */
    if (p->current == NULL || t->refused != p->current->version) {
        t->last_error[0] = '\0';
    }
    if (t->kind == KIND_STATUS) {
        t->acked = status_version(t, &t->body);
        notify_acked(p);
        return;
    }
    if (t->status == 200) {
        t->acked = t->doc->version;
        sl_log(SL_LOG_DEBUG, 0, "msg=\"snapshot delivered\" socket=%s version=%lld", t->path,
               (long long)t->acked);
        notify_acked(p);
        return;
    }
    /* 409 or another 4xx: resending the same bytes cannot help. */
    t->refused = t->doc->version;
    (void)snprintf(t->last_error, sizeof(t->last_error), "the proxy answered %d: %.*s", t->status,
                   (int)(t->body.len > 150 ? 150 : t->body.len), sl_buf_cstr(&t->body));
    sl_log(SL_LOG_ERROR, 0, "msg=\"proxy refused the snapshot\" socket=%s version=%lld status=%d",
           t->path, (long long)t->doc->version, t->status);
}

static void on_pipe_closed(uv_handle_t *h)
{
    struct target *t = h->data;

    t->pipe_live = false;
    t->kind = KIND_NONE;
    doc_unref(t->doc);
    t->doc = NULL;
    if (t->p->closing) {
        maybe_freed(t->p);
        return;
    }
    kick(t);
}

static void finish(struct target *t, bool ok)
{
    if (t->done) {
        return;
    }
    t->done = true;
    (void)uv_timer_stop(&t->timer);
    if (ok && t->kind == KIND_PUSH && t->status >= 500) {
        (void)snprintf(t->last_error, sizeof(t->last_error), "the proxy answered %d", t->status);
        ok = false;
    }
    record(t, ok);
    if (t->resp_live) {
        sl_h1_finish(&t->resp);
        t->resp_live = false;
    }
    sl_arena_reset(&t->arena);
    sl_buf_reset(&t->body);
    uv_close((uv_handle_t *)&t->pipe, on_pipe_closed);
}

static void on_deadline(uv_timer_t *timer)
{
    struct target *t = timer->data;

    set_error(t, NULL, "no answer in time");
    finish(t, false);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct target *t = h->data;

    (void)suggested;
    buf->base = (char *)t->rbuf;
    buf->len = sizeof(t->rbuf);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct target *t = s->data;
    size_t off = 0;

    (void)buf;
    if (t->done) {
        return;
    }
    if (nread < 0) {
        struct sl_h1_event ev;

        if (nread == UV_EOF && sl_h1_eof(&t->resp, &ev) == 0 && ev.type == SL_H1_EV_END) {
            finish(t, true);
            return;
        }
        set_error(t, NULL,
                  nread == UV_EOF ? "connection closed before the answer"
                                  : uv_strerror((int)nread));
        finish(t, false);
        return;
    }
    /* Events until the parser wants more input: an END can follow the last body bytes
     * without consuming anything. */
    for (;;) {
        struct sl_h1_event ev;
        int used = sl_h1_feed(&t->resp, t->rbuf + off, (size_t)nread - off, &ev);

        if (used < 0) {
            set_error(t, "malformed answer", sl_h1_error(&t->resp));
            finish(t, false);
            return;
        }
        off += (size_t)used;
        if (ev.type == SL_H1_EV_HEAD) {
            t->status = sl_h1_head(&t->resp)->status;
        } else if (ev.type == SL_H1_EV_BODY) {
            if (sl_buf_append(&t->body, ev.body.p, ev.body.n) < 0) {
                set_error(t, NULL, "answer too large");
                finish(t, false);
                return;
            }
        } else if (ev.type == SL_H1_EV_END || ev.type == SL_H1_EV_UPGRADE) {
            finish(t, true);
            return;
        } else if (off >= (size_t)nread) {
            break;
        }
    }
}

static void on_written(uv_write_t *req, int status)
{
    struct target *t = req->data;

    if (status < 0 && !t->done) {
        set_error(t, NULL, uv_strerror(status));
        finish(t, false);
    }
}

static void on_connect(uv_connect_t *req, int status)
{
    struct target *t = req->data;
    uv_buf_t bufs[2];
    unsigned nbufs = 1;
    int n;
    int rc;

    if (t->done) {
        return;
    }
    if (status < 0) {
        set_error(t, NULL, uv_strerror(status));
        finish(t, false);
        return;
    }
    if (t->kind == KIND_PUSH) {
        n = snprintf(t->head, sizeof(t->head),
                     "PUT /v1/snapshot HTTP/1.1\r\nHost: sluice-proxy\r\nContent-Type: "
                     "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                     t->doc->n);
        bufs[1] = uv_buf_init((char *)t->doc->data, (unsigned int)t->doc->n);
        nbufs = 2;
    } else {
        n = snprintf(t->head, sizeof(t->head),
                     "GET /v1/status HTTP/1.1\r\nHost: sluice-proxy\r\nConnection: close\r\n\r\n");
    }
    bufs[0] = uv_buf_init(t->head, (unsigned int)n);
    t->wreq.data = t;
    rc = uv_write(&t->wreq, (uv_stream_t *)&t->pipe, bufs, nbufs, on_written);
    if (rc == 0) {
        rc = uv_read_start((uv_stream_t *)&t->pipe, on_alloc, on_read);
    }
    if (rc < 0) {
        set_error(t, NULL, uv_strerror(rc));
        finish(t, false);
    }
}

static void start(struct target *t, enum kind kind)
{
    struct sl_pusher *p = t->p;
    int rc = uv_pipe_init(p->loop, &t->pipe, 0);

    if (rc < 0) {
        set_error(t, NULL, uv_strerror(rc));
        t->unreachable = true;
        return;
    }
    t->pipe.data = t;
    t->pipe_live = true;
    t->kind = kind;
    t->done = false;
    t->status = 0;
    if (kind == KIND_PUSH) {
        t->doc = p->current;
        t->doc->refs++;
    }
    sl_h1_init(&t->resp, SL_H1_RESPONSE, NULL, &t->arena);
    t->resp_live = true;
    t->creq.data = t;
    uv_pipe_connect(&t->creq, &t->pipe, t->path, on_connect);
    (void)uv_timer_start(&t->timer, on_deadline, p->cfg.request_timeout_ms, 0);
}

/* Sends the current snapshot when this proxy does not have it and nothing else is going on. */
static void kick(struct target *t)
{
    struct sl_pusher *p = t->p;

    if (p->closing || t->kind != KIND_NONE || t->pipe_live || t->backing_off
        || p->current == NULL) {
        return;
    }
    if (p->current->version > t->acked && p->current->version != t->refused) {
        start(t, KIND_PUSH);
    }
}

static void on_poll(uv_timer_t *timer)
{
    struct sl_pusher *p = timer->data;

    for (size_t i = 0; i < p->n; i++) {
        struct target *t = &p->targets[i];

        if (t->kind == KIND_NONE && !t->pipe_live && !t->backing_off) {
            start(t, KIND_STATUS);
        }
    }
}

int sl_pusher_create(uv_loop_t *loop, const struct sl_pusher_config *cfg, struct sl_pusher **out)
{
    struct sl_pusher *p;

    if (cfg->n_sockets > SL_PUSHER_TARGETS_MAX) {
        return SL_ETOOBIG;
    }
    for (size_t i = 0; i < cfg->n_sockets; i++) {
        if (strlen(cfg->sockets[i]) >= PATH_BYTES) {
            return SL_EINVAL;
        }
    }
    p = sl_calloc(1, sizeof(*p));
    if (p == NULL) {
        return SL_ENOMEM;
    }
    p->loop = loop;
    p->cfg = *cfg;
    p->cfg.sockets = NULL;
    if (p->cfg.check_ms == 0) {
        p->cfg.check_ms = 500;
    }
    if (p->cfg.request_timeout_ms == 0) {
        p->cfg.request_timeout_ms = 5000;
    }
    p->n = cfg->n_sockets;
    SL_BUG_ON(uv_timer_init(loop, &p->poll) != 0);
    p->poll.data = p;
    for (size_t i = 0; i < p->n; i++) {
        struct target *t = &p->targets[i];

        t->p = p;
        t->audit_healthy = -1;
        memcpy(t->path, cfg->sockets[i], strlen(cfg->sockets[i]) + 1);
        SL_BUG_ON(uv_timer_init(loop, &t->timer) != 0);
        t->timer.data = t;
        sl_arena_init(&t->arena, 2048, 64u * 1024u);
        sl_buf_init(&t->body, BODY_MAX);
    }
    (void)uv_timer_start(&p->poll, on_poll, p->cfg.check_ms, p->cfg.check_ms);
    *out = p;
    return 0;
}

int sl_pusher_push(struct sl_pusher *p, int64_t version, const void *json, size_t n)
{
    struct doc *d;

    if (p->current != NULL && version <= p->current->version) {
        return SL_EEXIST;
    }
    d = sl_malloc(sizeof(*d) + n);
    if (d == NULL) {
        return SL_ENOMEM;
    }
    d->refs = 1;
    d->version = version;
    d->n = n;
    memcpy(d->data, json, n);
    doc_unref(p->current);
    p->current = d;
    for (size_t i = 0; i < p->n; i++) {
        struct target *t = &p->targets[i];

        /* A newer snapshot is worth trying at once, back-off or not. */
        if (t->backing_off) {
            (void)uv_timer_stop(&t->timer);
            t->backing_off = false;
        }
        kick(t);
    }
    return 0;
}

int64_t sl_pusher_version(const struct sl_pusher *p)
{
    return p->current != NULL ? p->current->version : 0;
}

size_t sl_pusher_targets(const struct sl_pusher *p)
{
    return p->n;
}

void sl_pusher_target(const struct sl_pusher *p, size_t i, struct sl_pusher_target_status *out)
{
    const struct target *t = &p->targets[i];

    out->socket = t->path;
    out->acked_version = t->acked;
    out->unreachable = t->unreachable;
    out->last_error = t->last_error;
    out->audit_healthy = t->audit_healthy;
    out->audit_error = t->audit_error;
}

void sl_pusher_close(struct sl_pusher *p, void (*closed)(void *arg), void *arg)
{
    if (p->closing) {
        return;
    }
    p->closing = true;
    p->closed = closed;
    p->closed_arg = arg;
    p->pending_closes = 1;
    p->poll.data = p;
    uv_close((uv_handle_t *)&p->poll, on_closed_handle);
    for (size_t i = 0; i < p->n; i++) {
        struct target *t = &p->targets[i];

        p->pending_closes++;
        t->timer.data = p;
        uv_close((uv_handle_t *)&t->timer, on_closed_handle);
        if (t->pipe_live) {
            p->pending_closes++;
            t->done = true;
            if (t->resp_live) {
                sl_h1_finish(&t->resp);
                t->resp_live = false;
            }
            if (!uv_is_closing((uv_handle_t *)&t->pipe)) {
                uv_close((uv_handle_t *)&t->pipe, on_pipe_closed);
            }
        }
    }
}
