/* SPDX-License-Identifier: Apache-2.0 */
#include "control/env/pusher.h"

#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <jansson.h>
#include <openssl/err.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "http/h1.h"
#include "policy/url.h"

#define BACKOFF_MIN_MS 100u
#define BACKOFF_MAX_MS 2000u
/* The default of sl_pusher_config.start_grace_ms: under `sluice up` the control plane starts
 * pushing while the proxy it started beside it is still coming up. */
#define START_GRACE_MS 10000u
#define BODY_MAX       (64u * 1024u)
#define READ_BYTES     4096u
#define PATH_BYTES     108u
/* Room for "https://" + a host of SL_HOST_NAME_MAX + ":65535". */
#define URL_BYTES 300u

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
    /* The socket path, or the URL as given (for status and logs). */
    char path[URL_BYTES];
    /* A URL target: the host its certificate must name (IPv6 without brackets), the port. */
    bool is_url;
    char host[SL_HOST_NAME_MAX + 1];
    char port[8];
    int port_n;

    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_pipe_t pipe;
        uv_tcp_t tcp;
    } sock;

    /* `sock` is initialised (its close is owed). */
    bool pipe_live;
    /* A URL's host name is being resolved (the request's own state, before `sock`). */
    uv_getaddrinfo_t gai;
    bool resolving;
    /* Under TLS: the connection, whether its handshake is done, the bytes of handshake writes
     * in flight, the request's ciphertext (being written) and decrypted answer bytes. */
    SSL *ssl;
    bool tls_ready;
    size_t tls_in_flight;
    struct sl_buf tls_out;
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
    /* It answered once; its being unreachable was warned about (until it answers again). */
    bool reached;
    bool warned;
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
    struct sl_http_tls *tls;
    uv_timer_t poll;
    /* uv_now() when it was created. */
    uint64_t started_ms;
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
    (void)snprintf(t->last_error, sizeof(t->last_error), "%.40s%s%.150s", what != NULL ? what : "",
                   what != NULL ? ": " : "", detail);
}

static void maybe_freed(struct sl_pusher *p)
{
    if (--p->pending_closes > 0) {
        return;
    }
    for (size_t i = 0; i < p->n; i++) {
        sl_buf_finish(&p->targets[i].body);
        sl_buf_finish(&p->targets[i].tls_out);
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
        if (!t->warned
            && (t->reached || uv_now(p->loop) - p->started_ms >= p->cfg.start_grace_ms)) {
            sl_log(SL_LOG_WARN, 0,
                   "msg=\"proxy admin %s unreachable; retrying\" target=%s "
                   "err=\"%s\"",
                   t->is_url ? "URL" : "socket", t->path, t->last_error);
            t->warned = true;
        } else if (!t->unreachable) {
            sl_log(SL_LOG_DEBUG, 0,
                   "msg=\"proxy admin %s not reachable yet (starting?); retrying\" target=%s "
                   "err=\"%s\"",
                   t->is_url ? "URL" : "socket", t->path, t->last_error);
        }
        t->unreachable = true;
        if (t->kind == KIND_PUSH) {
            schedule_retry(t);
        }
        return;
    }
    if (t->warned) {
        sl_log(SL_LOG_INFO, 0, "msg=\"proxy admin %s reachable again\" target=%s",
               t->is_url ? "URL" : "socket", t->path);
    }
    t->unreachable = false;
    t->reached = true;
    t->warned = false;
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
        sl_log(SL_LOG_DEBUG, 0, "msg=\"snapshot delivered\" target=%s version=%lld", t->path,
               (long long)t->acked);
        notify_acked(p);
        return;
    }
    /* 409 or another 4xx: resending the same bytes cannot help. */
    t->refused = t->doc->version;
    (void)snprintf(t->last_error, sizeof(t->last_error), "the proxy answered %d: %.*s", t->status,
                   (int)(t->body.len > 150 ? 150 : t->body.len), sl_buf_cstr(&t->body));
    sl_log(SL_LOG_ERROR, 0, "msg=\"proxy refused the snapshot\" target=%s version=%lld status=%d",
           t->path, (long long)t->doc->version, t->status);
}

/* The request's connection is gone (or never was): the target is free again. */
static void after_close(struct target *t)
{
    t->kind = KIND_NONE;
    doc_unref(t->doc);
    t->doc = NULL;
    if (t->p->closing) {
        maybe_freed(t->p);
        return;
    }
    kick(t);
}

static void on_pipe_closed(uv_handle_t *h)
{
    struct target *t = h->data;

    t->pipe_live = false;
    SSL_free(t->ssl);
    t->ssl = NULL;
    t->tls_ready = false;
    after_close(t);
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
    if (t->pipe_live) {
        uv_close(&t->sock.handle, on_pipe_closed);
    } else if (t->resolving) {
        (void)uv_cancel((uv_req_t *)&t->gai); /* on_resolved() ends it */
    } else {
        after_close(t);
    }
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

/* Parses `n` bytes of the answer; true when the request is over (finish() was called). */
static bool parse_answer(struct target *t, const uint8_t *data, size_t n)
{
    size_t off = 0;

    /* Events until the parser wants more input: an END can follow the last body bytes
     * without consuming anything. */
    for (;;) {
        struct sl_h1_event ev;
        int used = sl_h1_feed(&t->resp, data + off, n - off, &ev);

        if (used < 0) {
            set_error(t, "malformed answer", sl_h1_error(&t->resp));
            finish(t, false);
            return true;
        }
        off += (size_t)used;
        if (ev.type == SL_H1_EV_HEAD) {
            t->status = sl_h1_head(&t->resp)->status;
        } else if (ev.type == SL_H1_EV_BODY) {
            if (sl_buf_append(&t->body, ev.body.p, ev.body.n) < 0) {
                set_error(t, NULL, "answer too large");
                finish(t, false);
                return true;
            }
        } else if (ev.type == SL_H1_EV_END || ev.type == SL_H1_EV_UPGRADE) {
            finish(t, true);
            return true;
        } else if (off >= n) {
            return false;
        }
    }
}

static void on_eof(struct target *t, ssize_t nread)
{
    struct sl_h1_event ev;

    if (nread == UV_EOF && sl_h1_eof(&t->resp, &ev) == 0 && ev.type == SL_H1_EV_END) {
        finish(t, true);
        return;
    }
    set_error(t, NULL,
              nread == UV_EOF ? "connection closed before the answer" : uv_strerror((int)nread));
    finish(t, false);
}

static void send_request(struct target *t);

/* A TLS failure: the reason is the target's last error. */
static void tls_failed(struct target *t, const char *what, int ret)
{
    char why[160];

    sl_http_tls_why(t->ssl, ret, why, sizeof(why));
    set_error(t, what, why);
    finish(t, false);
}

/* Moves the handshake on and sends the request once it is done; false when finished. */
static bool tls_handshake(struct target *t)
{
    int r = SSL_do_handshake(t->ssl);
    int rc = sl_http_tls_send(t->ssl, &t->sock.stream, &t->tls_in_flight);

    if (r != 1 && SSL_get_error(t->ssl, r) != SSL_ERROR_WANT_READ) {
        tls_failed(t, "TLS handshake", r);
        return false;
    }
    if (rc < 0) {
        ERR_clear_error();
        set_error(t, "TLS handshake", sl_strerror(rc));
        finish(t, false);
        return false;
    }
    if (r == 1) {
        t->tls_ready = true;
        send_request(t);
    }
    return !t->done;
}

/* Ciphertext arrived: the handshake, then the answer's bytes. */
static void tls_input(struct target *t, size_t n)
{
    if (sl_http_tls_feed(t->ssl, t->rbuf, n) < 0) {
        set_error(t, NULL, "out of memory");
        finish(t, false);
        return;
    }
    if (!t->tls_ready && !tls_handshake(t)) {
        return;
    }
    while (t->tls_ready && !t->done) {
        uint8_t plain[READ_BYTES];
        size_t got = 0;
        int r = SSL_read_ex(t->ssl, plain, sizeof(plain), &got);

        if (r == 1) {
            if (parse_answer(t, plain, got)) {
                return;
            }
            continue;
        }
        if (SSL_get_error(t->ssl, r) == SSL_ERROR_WANT_READ) {
            return;
        }
        if (SSL_get_error(t->ssl, r) == SSL_ERROR_ZERO_RETURN) {
            on_eof(t, UV_EOF);
            return;
        }
        /* In TLS 1.3 the proxy judges our certificate after our side of the handshake is
         * done: its refusal arrives here, as an alert. */
        tls_failed(t, "the proxy ended TLS", r);
        return;
    }
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct target *t = s->data;

    (void)buf;
    if (t->done || nread == 0) {
        return;
    }
    if (nread < 0) {
        on_eof(t, nread);
        return;
    }
    if (t->ssl != NULL) {
        tls_input(t, (size_t)nread);
        return;
    }
    (void)parse_answer(t, t->rbuf, (size_t)nread);
}

static void on_written(uv_write_t *req, int status)
{
    struct target *t = req->data;

    if (status < 0 && !t->done) {
        set_error(t, NULL, uv_strerror(status));
        finish(t, false);
    }
}

/* Writes the request: in the clear, or encrypted into `tls_out` (after the handshake). */
static void send_request(struct target *t)
{
    uv_buf_t bufs[2];
    unsigned nbufs = 1;
    int n;
    int rc = 0;

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
    if (t->ssl != NULL) {
        size_t w = 0;

        for (unsigned i = 0; rc == 0 && i < nbufs; i++) {
            if (bufs[i].len > 0 && SSL_write_ex(t->ssl, bufs[i].base, bufs[i].len, &w) != 1) {
                ERR_clear_error();
                rc = SL_ECRYPTO;
            }
        }
        sl_buf_reset(&t->tls_out);
        if (rc == 0) {
            rc = sl_http_tls_take(t->ssl, &t->tls_out);
        }
        bufs[0] = uv_buf_init((char *)t->tls_out.p, (unsigned int)t->tls_out.len);
        nbufs = 1;
    }
    t->wreq.data = t;
    if (rc == 0) {
        rc = uv_write(&t->wreq, &t->sock.stream, bufs, nbufs, on_written);
    }
    if (rc < 0) {
        set_error(t, NULL, sl_strerror(rc));
        finish(t, false);
    }
}

static void on_connect(uv_connect_t *req, int status)
{
    struct target *t = req->data;
    char err[256];
    int rc;

    if (t->done) {
        return;
    }
    if (status < 0) {
        set_error(t, NULL, uv_strerror(status));
        finish(t, false);
        return;
    }
    rc = uv_read_start(&t->sock.stream, on_alloc, on_read);
    if (rc < 0) {
        set_error(t, NULL, uv_strerror(rc));
        finish(t, false);
        return;
    }
    if (!t->is_url) {
        send_request(t);
        return;
    }
    rc = sl_http_tls_new(t->p->tls, t->host, &t->ssl, err, sizeof(err));
    if (rc < 0) {
        set_error(t, "TLS", err);
        finish(t, false);
        return;
    }
    (void)tls_handshake(t);
}

/* Connects to `addr` (a URL's host) over TCP. */
static void connect_tcp(struct target *t, const struct sockaddr *addr)
{
    int rc = uv_tcp_init(t->p->loop, &t->sock.tcp);

    if (rc < 0) {
        set_error(t, NULL, uv_strerror(rc));
        finish(t, false);
        return;
    }
    t->sock.handle.data = t;
    t->pipe_live = true;
    t->creq.data = t;
    rc = uv_tcp_connect(&t->creq, &t->sock.tcp, addr, on_connect);
    if (rc < 0) {
        set_error(t, NULL, uv_strerror(rc));
        finish(t, false);
    }
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct target *t = req->data;

    t->resolving = false;
    if (t->p->closing) {
        uv_freeaddrinfo(res);
        maybe_freed(t->p);
        return;
    }
    if (t->done) {
        /* The deadline passed meanwhile: finish() recorded it. */
        uv_freeaddrinfo(res);
        after_close(t);
        return;
    }
    if (status < 0 || res == NULL) {
        uv_freeaddrinfo(res);
        set_error(t, "cannot resolve the host", status < 0 ? uv_strerror(status) : "no address");
        finish(t, false);
        return;
    }
    connect_tcp(t, res->ai_addr);
    uv_freeaddrinfo(res);
}

/* Dials a URL's host: an IP literal at once, a name after resolving it off the loop. */
static void dial_url(struct target *t)
{
    struct sockaddr_storage ss;
    struct addrinfo hints;
    int rc;

    memset(&ss, 0, sizeof(ss));
    if (uv_ip4_addr(t->host, t->port_n, (struct sockaddr_in *)&ss) == 0
        || uv_ip6_addr(t->host, t->port_n, (struct sockaddr_in6 *)&ss) == 0) {
        connect_tcp(t, (const struct sockaddr *)&ss);
        return;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    t->gai.data = t;
    rc = uv_getaddrinfo(t->p->loop, &t->gai, on_resolved, t->host, t->port, &hints);
    if (rc < 0) {
        set_error(t, "cannot resolve the host", uv_strerror(rc));
        finish(t, false);
        return;
    }
    t->resolving = true;
}

static void start(struct target *t, enum kind kind)
{
    struct sl_pusher *p = t->p;
    int rc = 0;

    if (!t->is_url) {
        rc = uv_pipe_init(p->loop, &t->sock.pipe, 0);
    }
    if (rc < 0) {
        set_error(t, NULL, uv_strerror(rc));
        t->unreachable = true;
        return;
    }
    t->kind = kind;
    t->done = false;
    t->status = 0;
    t->tls_ready = false;
    if (kind == KIND_PUSH) {
        t->doc = p->current;
        t->doc->refs++;
    }
    sl_h1_init(&t->resp, SL_H1_RESPONSE, NULL, &t->arena);
    t->resp_live = true;
    (void)uv_timer_start(&t->timer, on_deadline, p->cfg.request_timeout_ms, 0);
    if (t->is_url) {
        dial_url(t);
        return;
    }
    t->sock.handle.data = t;
    t->pipe_live = true;
    t->creq.data = t;
    uv_pipe_connect(&t->creq, &t->sock.pipe, t->path, on_connect);
}

/* Sends the current snapshot when this proxy does not have it and nothing else is going on. */
static void kick(struct target *t)
{
    struct sl_pusher *p = t->p;

    if (p->closing || t->kind != KIND_NONE || t->pipe_live || t->resolving || t->backing_off
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

        if (t->kind == KIND_NONE && !t->pipe_live && !t->resolving && !t->backing_off) {
            start(t, KIND_STATUS);
        }
    }
}

/* Checks `url` (https://HOST:PORT, nothing after it) and fills the target's host and port. */
static int parse_url(struct target *t, const char *url, char *err, size_t errlen)
{
    struct sl_url u;
    const char *why = NULL;

    if (strlen(url) >= URL_BYTES || sl_url_parse(sl_slice_str(url), &u, &why) < 0) {
        sl_errf(err, errlen, "bad proxy admin URL \"%.100s\": %s", url,
                why != NULL ? why : "too long");
        return SL_EINVAL;
    }
    if (u.scheme != SL_URL_HTTPS || !u.port_given || u.query.n > 0
        || !(u.path.n == 1 && ((const char *)u.path.p)[0] == '/')) {
        sl_errf(err, errlen, "bad proxy admin URL \"%.100s\": want https://HOST:PORT", url);
        return SL_EINVAL;
    }
    if (u.host.kind == SL_HOST_IPV6) {
        (void)snprintf(t->host, sizeof(t->host), "%.*s", (int)u.host.len - 2, u.host.name + 1);
    } else {
        (void)snprintf(t->host, sizeof(t->host), "%s", u.host.name);
    }
    (void)snprintf(t->port, sizeof(t->port), "%u", (unsigned)u.port);
    t->port_n = u.port;
    (void)snprintf(t->path, sizeof(t->path), "%s", url);
    t->is_url = true;
    return 0;
}

int sl_pusher_create(uv_loop_t *loop, const struct sl_pusher_config *cfg, struct sl_pusher **out,
                     char *err, size_t errlen)
{
    struct target parsed[SL_PUSHER_TARGETS_MAX];
    struct sl_pusher *p;
    size_t n = cfg->n_sockets + cfg->n_urls;

    if (cfg->n_sockets > SL_PUSHER_TARGETS_MAX || cfg->n_urls > SL_PUSHER_TARGETS_MAX
        || n > SL_PUSHER_TARGETS_MAX) {
        sl_errf(err, errlen, "too many proxies: at most %d admin sockets and URLs together",
                SL_PUSHER_TARGETS_MAX);
        return SL_ETOOBIG;
    }
    if (cfg->n_urls > 0 && cfg->tls == NULL) {
        sl_errf(err, errlen, "proxy admin URLs need the control plane's certificate, key and CA");
        return SL_EINVAL;
    }
    memset(parsed, 0, sizeof(parsed));
    for (size_t i = 0; i < cfg->n_sockets; i++) {
        if (strlen(cfg->sockets[i]) >= PATH_BYTES) {
            sl_errf(err, errlen, "proxy admin socket path too long: %.100s", cfg->sockets[i]);
            return SL_EINVAL;
        }
        memcpy(parsed[i].path, cfg->sockets[i], strlen(cfg->sockets[i]) + 1);
    }
    for (size_t i = 0; i < cfg->n_urls; i++) {
        SL_TRY(parse_url(&parsed[cfg->n_sockets + i], cfg->urls[i], err, errlen));
    }
    p = sl_calloc(1, sizeof(*p));
    if (p == NULL) {
        sl_errf(err, errlen, "out of memory");
        return SL_ENOMEM;
    }
    p->loop = loop;
    uv_update_time(loop);
    p->started_ms = uv_now(loop);
    p->cfg = *cfg;
    p->cfg.sockets = NULL;
    p->cfg.urls = NULL;
    p->tls = cfg->tls;
    if (p->cfg.check_ms == 0) {
        p->cfg.check_ms = 500;
    }
    if (p->cfg.request_timeout_ms == 0) {
        p->cfg.request_timeout_ms = 5000;
    }
    if (p->cfg.start_grace_ms == 0) {
        p->cfg.start_grace_ms = START_GRACE_MS;
    }
    p->n = n;
    SL_BUG_ON(uv_timer_init(loop, &p->poll) != 0);
    p->poll.data = p;
    for (size_t i = 0; i < p->n; i++) {
        struct target *t = &p->targets[i];

        t->p = p;
        t->audit_healthy = -1;
        memcpy(t->path, parsed[i].path, sizeof(t->path));
        memcpy(t->host, parsed[i].host, sizeof(t->host));
        memcpy(t->port, parsed[i].port, sizeof(t->port));
        t->port_n = parsed[i].port_n;
        t->is_url = parsed[i].is_url;
        SL_BUG_ON(uv_timer_init(loop, &t->timer) != 0);
        t->timer.data = t;
        sl_arena_init(&t->arena, 2048, 64u * 1024u);
        sl_buf_init(&t->body, BODY_MAX);
        sl_buf_init(&t->tls_out, SIZE_MAX);
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

    out->socket = t->is_url ? NULL : t->path;
    out->url = t->is_url ? t->path : NULL;
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
        if (t->pipe_live || t->resolving) {
            p->pending_closes++;
            t->done = true;
            if (t->resp_live) {
                sl_h1_finish(&t->resp);
                t->resp_live = false;
            }
            if (t->resolving) {
                (void)uv_cancel((uv_req_t *)&t->gai); /* on_resolved() counts it closed */
            } else if (!uv_is_closing(&t->sock.handle)) {
                uv_close(&t->sock.handle, on_pipe_closed);
            }
        }
    }
}
