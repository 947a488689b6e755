/* SPDX-License-Identifier: Apache-2.0 */
#include "proxy/upstream.h"

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"
#include "proxy/addr.h"
#include "proxy/dns.h"
#include "proxy/proxy_int.h"

/* Idle connections a worker keeps to one place (host, port, scheme). A burst of requests to one
 * host opens as many connections as it has requests in flight; keeping them all after the burst
 * would hold ~20 KiB each (TLS state, the peer's certificates) for a concurrency that may not
 * come back, while 32 per worker cover the steady state of many busy clients. */
#define IDLE_PER_PLACE 32u
/* How long an idle connection is kept at most (SL_UPSTREAM_IDLE_MAX of them per worker). */
#define IDLE_LIMIT_MS 30000u
/* Ciphertext an upstream engine may hold before writes wait: one record (see proxy/conn_tls.c). */
#define TLS_OUT_CAP ((size_t)SL_TLS_OUT_CAP_DEFAULT)

enum phase {
    PHASE_RESOLVE = 0,
    PHASE_CONNECT,
    PHASE_HANDSHAKE,
    PHASE_DONE,
};

struct sl_upstream {
    struct sl_stream stream;
    /* Dial timeout while dialing, idle timeout while pooled. */
    uv_timer_t timer;
    struct sl__worker *w;
    enum sl_upstream_state state;
    enum phase phase;
    struct sl_host host;
    uint16_t port;
    bool tls;
    /* The client the connection goes for ("" for none): it is pooled for that client alone. */
    char client[SL_AUTH_ID_MAX + 1];
    /* The owner's callback; NULL while pooled. */
    sl_upstream_event_fn *fn;
    void *arg;
    struct sl_dns_req *rreq;
    struct sl_addrs addrs;
    /* Next address to try. */
    size_t next;
    uv_connect_t creq;
    /* The last connect error and the last refused address class, for the failure detail. */
    int connect_error;
    enum sl_addr_verdict refused;
    enum sl_reason reason;
    const char *detail;
    char detail_buf[512];
    bool reused;
    /* In the worker's pool, linked by idle_link. */
    bool idle;
    struct sl_list idle_link;
    /* The stream is initialised (its handle must be closed). */
    bool stream_live;
    /* The stream of a failed attempt is closing; it holds one extra count in pending_closes,
     * and the next address is tried once it has closed (unless the upstream closes first). */
    bool retrying;
    /* Inside sl_upstream_open(): no callbacks. */
    bool opening;
    bool closing;
    int pending_closes;
};

/* A client's id scopes its upstream TLS sessions (sl_tls_create_client()). */
_Static_assert(SL_AUTH_ID_MAX <= SL_TLS_SCOPE_MAX, "a client id fits a TLS session scope");

static void try_next(struct sl_upstream *u);

static void notify(struct sl_upstream *u)
{
    if (u->fn != NULL && !u->opening && !u->closing) {
        u->fn(u, u->arg);
    }
}

static void fail(struct sl_upstream *u, enum sl_reason reason, const char *detail)
{
    if (u->state == SL_UPSTREAM_FAILED) {
        return;
    }
    u->state = SL_UPSTREAM_FAILED;
    u->reason = reason;
    u->detail = detail;
    (void)uv_timer_stop(&u->timer);
    if (u->rreq != NULL) {
        sl_dns_cancel(u->rreq);
        u->rreq = NULL;
    }
    notify(u);
}

static void ready(struct sl_upstream *u)
{
    u->phase = PHASE_DONE;
    u->state = SL_UPSTREAM_READY;
    (void)uv_timer_stop(&u->timer);
    notify(u);
}

static void pool_remove(struct sl_upstream *u)
{
    struct sl__worker *w = u->w;

    if (!u->idle) {
        return;
    }
    sl_list_remove(&u->idle_link);
    u->idle = false;
    w->n_idle--;
}

static void on_handle_closed(struct sl_upstream *u)
{
    if (--u->pending_closes == 0) {
        sl_free(u);
    }
}

static void on_timer_closed(uv_handle_t *h)
{
    on_handle_closed(h->data);
}

static void on_stream_closed(struct sl_stream *s, void *arg)
{
    struct sl_upstream *u = arg;

    (void)s;
    u->stream_live = false;
    if (u->retrying) {
        /* A failed connect attempt was closed: its extra count goes, and the stream's own slot
         * is kept for the next attempt on a fresh handle. If the owner closed the upstream
         * meanwhile, there is no next attempt and the slot goes too. */
        u->retrying = false;
        u->pending_closes--;
        if (u->closing) {
            on_handle_closed(u);
            return;
        }
        try_next(u);
        return;
    }
    on_handle_closed(u);
}

void sl_upstream_close(struct sl_upstream *u)
{
    if (u == NULL || u->closing) {
        return;
    }
    u->closing = true;
    pool_remove(u);
    if (u->rreq != NULL) {
        sl_dns_cancel(u->rreq);
        u->rreq = NULL;
    }
    (void)uv_timer_stop(&u->timer);
    uv_close((uv_handle_t *)&u->timer, on_timer_closed);
    if (u->stream_live) {
        sl_stream_close(&u->stream, on_stream_closed);
    } else if (u->pending_closes == 2) {
        /* Only the timer was open (the stream's slot was counted for it). */
        u->pending_closes--;
    }
}

static void on_stream_event(struct sl_stream *s, void *arg)
{
    struct sl_upstream *u = arg;
    int rc;

    (void)s;
    if (u->closing) {
        return;
    }
    if (u->idle) {
        /* An idle upstream has nothing to say: a close, an error or unasked bytes end it. */
        if (sl_stream_peek(&u->stream).n > 0 || sl_stream_in_status(&u->stream) != 0
            || sl_stream_error(&u->stream) != 0) {
            sl_upstream_close(u);
        }
        return;
    }
    if (u->phase != PHASE_HANDSHAKE) {
        notify(u);
        return;
    }
    rc = sl_stream_handshake(&u->stream);
    if (rc == SL_TLS_HS_DONE) {
        sl__count(&u->w->counters.upstream_connects, 1);
        ready(u);
    } else if (rc < 0) {
        struct sl_tls *t = sl_stream_tls(&u->stream);
        const char *verify = t != NULL ? sl_tls_verify_error(t) : NULL;
        const char *why = t != NULL ? sl_tls_error_text(t) : "";

        if (verify != NULL && strcmp(verify, "ok") != 0) {
            (void)snprintf(u->detail_buf, sizeof(u->detail_buf), "certificate verify failed: %s",
                           verify);
        } else if (rc == UV_ECONNRESET || rc == UV_EOF) {
            (void)snprintf(u->detail_buf, sizeof(u->detail_buf),
                           "the upstream closed the connection during the TLS handshake");
        } else {
            (void)snprintf(u->detail_buf, sizeof(u->detail_buf), "TLS handshake failed: %s",
                           why[0] != '\0' ? why : sl_strerror(rc));
        }
        fail(u, sl__failure_reason(rc, SL_REASON_UPSTREAM_TLS), u->detail_buf);
    }
}

/* The connect to the current address failed with `rc`: the handle of a failed connect cannot
 * be reused, so it is closed, and its close callback tries the next address. */
static void connect_failed(struct sl_upstream *u, int rc)
{
    u->connect_error = rc;
    u->next++;
    u->pending_closes++;
    u->retrying = true;
    sl_stream_close(&u->stream, on_stream_closed);
}

static void on_connect(uv_connect_t *req, int status)
{
    struct sl_upstream *u = req->data;
    const struct sl__shared *sh = u->w->shared;
    struct sl_tls *t = NULL;
    char name[SL_HOST_NAME_MAX + 1];
    int rc;

    if (u->closing || u->state == SL_UPSTREAM_FAILED) {
        return;
    }
    if (status < 0) {
        connect_failed(u, status);
        return;
    }
    rc = sl_stream_start(&u->stream);
    if (rc < 0) {
        u->connect_error = rc;
        fail(u, SL_REASON_UPSTREAM_UNREACHABLE, uv_strerror(rc));
        return;
    }
    if (!u->tls) {
        sl__count(&u->w->counters.upstream_connects, 1);
        ready(u);
        return;
    }
    /* Certificates name IPv6 addresses without brackets. */
    if (u->host.kind == SL_HOST_IPV6) {
        memcpy(name, u->host.name + 1, u->host.len - 2);
        name[u->host.len - 2] = '\0';
    } else {
        memcpy(name, u->host.name, u->host.len + 1);
    }
    rc = sl_tls_create_client(sh->client_ctx, name, u->host.kind != SL_HOST_DNS, u->port, u->client,
                              TLS_OUT_CAP, &t);
    if (rc == 0) {
        rc = sl_stream_set_tls(&u->stream, t);
    }
    if (rc < 0) {
        fail(u, sl__failure_reason(rc, SL_REASON_UPSTREAM_TLS), "cannot start TLS");
        return;
    }
    u->phase = PHASE_HANDSHAKE;
    sl_stream_want_read(&u->stream, true);
    on_stream_event(&u->stream, u);
}

/* Connects to the next allowed address, or fails when none is left. */
static void try_next(struct sl_upstream *u)
{
    const struct sl__shared *sh = u->w->shared;
    int rc;

    if (u->closing || u->state == SL_UPSTREAM_FAILED) {
        return;
    }
    u->phase = PHASE_CONNECT;
    while (u->next < u->addrs.n) {
        const struct sockaddr *sa = (const struct sockaddr *)&u->addrs.a[u->next];
        enum sl_addr_verdict v = sl_addr_check(sh->addrs, sa);

        if (v != SL_ADDR_ALLOWED) {
            u->refused = v;
            u->next++;
            continue;
        }
        rc = sl_stream_init(&u->w->loop, &u->stream, on_stream_event, u);
        if (rc < 0) {
            fail(u, SL_REASON_UPSTREAM_UNREACHABLE, sl_strerror(rc));
            return;
        }
        u->stream_live = true;
        u->creq.data = u;
        rc = uv_tcp_connect(&u->creq, sl_stream_tcp(&u->stream), sa, on_connect);
        if (rc == 0) {
            return;
        }
        connect_failed(u, rc);
        return;
    }
    if (u->connect_error != 0) {
        (void)snprintf(u->detail_buf, sizeof(u->detail_buf), "connect failed: %s",
                       uv_strerror(u->connect_error));
        fail(u, SL_REASON_UPSTREAM_UNREACHABLE, u->detail_buf);
    } else if (u->refused != SL_ADDR_ALLOWED) {
        (void)snprintf(u->detail_buf, sizeof(u->detail_buf), "the address is %s",
                       sl_addr_verdict_name(u->refused));
        fail(u, SL_REASON_PRIVATE_ADDRESS, u->detail_buf);
    } else {
        fail(u, SL_REASON_DNS, "no address");
    }
}

static void on_resolved(void *arg, int status, const struct sl_addrs *addrs)
{
    struct sl_upstream *u = arg;

    u->rreq = NULL;
    if (status < 0) {
        (void)snprintf(u->detail_buf, sizeof(u->detail_buf), "cannot resolve %s: %s", u->host.name,
                       sl_strerror(status));
        fail(u, SL_REASON_DNS, u->detail_buf);
        return;
    }
    u->addrs = *addrs;
    try_next(u);
}

static void on_timer(uv_timer_t *t)
{
    struct sl_upstream *u = t->data;

    if (u->idle) {
        sl_upstream_close(u);
        return;
    }
    sl__count(&u->w->counters.timeouts[SL__TIMEOUT_UPSTREAM], 1);
    fail(u, SL_REASON_UPSTREAM_TIMEOUT, "the upstream did not answer in time");
}

/* Whether `u` goes to the place (host name, port, TLS or not) for `client`: only such a
 * connection may carry that client's request there. */
static bool at_place(const struct sl_upstream *u, const struct sl_host *host, uint16_t port,
                     bool tls, const char *client)
{
    return u->port == port && u->tls == tls && u->host.len == host->len
           && memcmp(u->host.name, host->name, host->len) == 0 && strcmp(u->client, client) == 0;
}

/* An idle connection to the same place, taken out of the pool; NULL when there is none. */
static struct sl_upstream *pool_take(struct sl__worker *w, const struct sl_host *host,
                                     uint16_t port, bool tls, const char *client)
{
    for (struct sl_list *l = w->idle.next; l != &w->idle; l = l->next) {
        struct sl_upstream *u = SL_CONTAINER_OF(l, struct sl_upstream, idle_link);

        if (at_place(u, host, port, tls, client)) {
            pool_remove(u);
            (void)uv_timer_stop(&u->timer);
            return u;
        }
    }
    return NULL;
}

static void set_literal(struct sl_upstream *u)
{
    struct sockaddr_storage *ss = &u->addrs.a[0];

    memset(ss, 0, sizeof(*ss));
    if (u->host.kind == SL_HOST_IPV4) {
        struct sockaddr_in *in = (struct sockaddr_in *)(void *)ss;

        in->sin_family = AF_INET;
        in->sin_port = htons(u->port);
        memcpy(&in->sin_addr, u->host.addr, 4);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)(void *)ss;

        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(u->port);
        memcpy(&in6->sin6_addr, u->host.addr, 16);
    }
    u->addrs.n = 1;
}

/* sl_upstream_open(), from the pool when `pooled`, else always a new connection. */
static int open_upstream(struct sl__worker *w, const struct sl_host *host, uint16_t port, bool tls,
                         const char *owner, bool pooled, sl_upstream_event_fn *fn, void *arg,
                         struct sl_upstream **out)
{
    const char *client = owner != NULL ? owner : "";
    struct sl_upstream *u;
    int rc;

    SL_ENSURE(strlen(client) <= SL_AUTH_ID_MAX, SL_EINVAL);
    u = pooled ? pool_take(w, host, port, tls, client) : NULL;

    if (u != NULL) {
        u->fn = fn;
        u->arg = arg;
        u->reused = true;
        sl__count(&w->counters.upstream_reused, 1);
        *out = u;
        return 0;
    }
    u = sl_calloc(1, sizeof(*u));
    if (u == NULL) {
        return SL_ENOMEM;
    }
    u->w = w;
    u->host = *host;
    u->port = port;
    u->tls = tls;
    memcpy(u->client, client, strlen(client) + 1);
    u->fn = fn;
    u->arg = arg;
    u->refused = SL_ADDR_ALLOWED;
    rc = uv_timer_init(&w->loop, &u->timer);
    if (rc < 0) {
        sl_free(u);
        return rc;
    }
    u->timer.data = u;
    /* One slot for the timer, one for the stream (released if it never opens). */
    u->pending_closes = 2;
    u->opening = true;
    (void)uv_timer_start(&u->timer, on_timer, (uint64_t)w->shared->cfg->upstream_timeout_s * 1000u,
                         0);
    if (host->kind != SL_HOST_DNS) {
        set_literal(u);
        try_next(u);
    } else {
        rc = sl_dns_lookup(w->dns, host->name, port, &u->addrs, on_resolved, u, &u->rreq);
        if (rc == 1) {
            try_next(u);
        } else if (rc < 0) {
            (void)snprintf(u->detail_buf, sizeof(u->detail_buf), "cannot resolve %s: %s",
                           host->name, sl_strerror(rc));
            fail(u, SL_REASON_DNS, u->detail_buf);
        }
    }
    u->opening = false;
    *out = u;
    return 0;
}

int sl_upstream_open(struct sl__worker *w, const struct sl_host *host, uint16_t port, bool tls,
                     const char *owner, sl_upstream_event_fn *fn, void *arg,
                     struct sl_upstream **out)
{
    return open_upstream(w, host, port, tls, owner, true, fn, arg, out);
}

int sl_upstream_open_new(struct sl__worker *w, const struct sl_host *host, uint16_t port, bool tls,
                         const char *owner, sl_upstream_event_fn *fn, void *arg,
                         struct sl_upstream **out)
{
    return open_upstream(w, host, port, tls, owner, false, fn, arg, out);
}

enum sl_upstream_state sl_upstream_state(const struct sl_upstream *u)
{
    return u->state;
}

enum sl_reason sl_upstream_failure(const struct sl_upstream *u, const char **detail)
{
    *detail = u->detail != NULL ? u->detail : "";
    return u->reason;
}

bool sl_upstream_is_reused(const struct sl_upstream *u)
{
    return u->reused;
}

struct sl_stream *sl_upstream_stream(struct sl_upstream *u)
{
    return &u->stream;
}

/* Whether the pool already holds IDLE_PER_PLACE connections to where U goes. */
static bool place_is_full(const struct sl_upstream *u)
{
    unsigned n = 0;

    for (struct sl_list *l = u->w->idle.next; l != &u->w->idle; l = l->next) {
        const struct sl_upstream *v = SL_CONTAINER_OF(l, struct sl_upstream, idle_link);

        if (at_place(v, &u->host, u->port, u->tls, u->client) && ++n >= IDLE_PER_PLACE) {
            return true;
        }
    }
    return false;
}

void sl_upstream_release(struct sl_upstream *u, bool reusable)
{
    struct sl__worker *w;
    uint64_t idle_ms;

    if (u == NULL) {
        return;
    }
    w = u->w;
    if (!reusable || u->state != SL_UPSTREAM_READY || w->draining
        || w->n_idle >= SL_UPSTREAM_IDLE_MAX || !sl_stream_is_flushed(&u->stream)
        || sl_stream_peek(&u->stream).n > 0 || sl_stream_in_status(&u->stream) != 0
        || place_is_full(u)) {
        sl_upstream_close(u);
        return;
    }
    u->fn = NULL;
    u->arg = NULL;
    u->idle = true;
    sl_list_push_front(&w->idle, &u->idle_link);
    w->n_idle++;
    sl_stream_want_read(&u->stream, true);
    idle_ms = (uint64_t)w->shared->cfg->idle_timeout_s * 1000u;
    if (idle_ms > IDLE_LIMIT_MS) {
        idle_ms = IDLE_LIMIT_MS;
    }
    (void)uv_timer_start(&u->timer, on_timer, idle_ms, 0);
}

void sl_upstream_pool_close(struct sl__worker *w)
{
    while (!sl_list_empty(&w->idle)) {
        sl_upstream_close(SL_CONTAINER_OF(w->idle.next, struct sl_upstream, idle_link));
    }
}
