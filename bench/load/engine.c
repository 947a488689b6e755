/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Each thread owns an epoll set, a TLS context (so sessions and SSL_new() never contend across
 * threads), a read buffer shared by its connections (a read is consumed before the next one),
 * and its counters; threads share only the window's edges and a few atomics. Epoll is
 * level-triggered with EPOLLIN always on and EPOLLOUT only while a write waits, so the steady
 * state of keep-alive costs one write and one read per request and no epoll_ctl.
 */
/* sched_setaffinity() and cpu_set_t, for --connect-cpu. */
#define _GNU_SOURCE 1
#include "bench/load/engine.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "base/mem.h"
#include "bench/load/resp.h"

/* Plaintext read per call; 64 KiB so that download mode reads whole TLS records (16 KiB). */
#define READ_BUF_BYTES ((size_t)64 * 1024)
#define EVENTS_MAX     256
/* Connections one thread opens at once (newconn mode excepted, whose N is its concurrency):
 * 10 000 idle connections started together would queue handshakes past SL_LOAD_STALL_MS. */
#define OPENING_MAX 128u
/* The longest epoll wait, so that a stop or the end of the window is seen promptly. */
#define POLL_MAX_MS 10
/* Unoffered sessions a thread keeps (newconn --resume); the oldest goes when a new one comes. */
#define SESSIONS_MAX 64

/* ---- connections -------------------------------------------------------------------------- */

enum conn_state {
    CS_WAIT = 0, /* no socket; connects at `deadline_ns` */
    CS_CONNECTING,
    CS_PROXY_SEND,
    CS_PROXY_RECV,
    CS_HANDSHAKE,
    CS_READY, /* connected, no request outstanding (rate and idle modes wait here) */
    CS_SENDING,
    CS_RECEIVING,
};

/* What went wrong, as the errors.* counter it goes to. */
enum conn_err {
    CE_NONE = 0,
    CE_CONNECT,
    CE_PROXY,
    CE_TLS,
    CE_HTTP,
    CE_TIMEOUT,
    CE_CLOSED,
};

struct shared;
struct worker;

struct conn {
    struct worker *w;
    int fd;
    SSL *ssl;
    enum conn_state state;
    /* Current epoll interest; EPOLLOUT is on only while a write or a connect is pending. */
    uint32_t events;
    bool want_write;
    /* Bytes of the outgoing request (or CONNECT) written so far. */
    size_t out_off;
    /* When the current request's latency starts (rate mode: its scheduled time). */
    uint64_t start_ns;
    /* When the current TCP connect started (newconn latency runs from here). */
    uint64_t conn_start_ns;
    /* Stall deadline while busy; connect time in CS_WAIT; 0 when nothing is due. */
    uint64_t deadline_ns;
    /* Response bytes of the current response so far. */
    uint64_t rx_bytes;
    /* Idle mode: this connection has been counted as established. */
    bool established;
    /* The current TLS handshake resumed a session. */
    bool resumed;
    /* Counted in the worker's `nopening` (connecting, CONNECT or handshake under way). */
    bool opening;
    struct sl_resp resp;
};

struct worker {
    struct shared *sh;
    pthread_t thread;
    int ep;
    SSL_CTX *ctx;
    /* Sessions the server gave this thread and no connection has offered yet (newconn
     * --resume), oldest first, owned: `nsessions` of them from `sessions[0]`. A TLS 1.3 session
     * is offered once: an OpenSSL client marks the one it resumed as used when its handshake
     * ends (RFC 8446 §C.4), so a session shared by the thread's connections would be dead for
     * every one that starts before the next ticket arrives. */
    SSL_SESSION *sessions[SESSIONS_MAX];
    size_t nsessions;
    struct conn *conns;
    size_t nconns;
    /* Connections opening now, and those due to open that wait for one of them to finish
     * (a ring of `nconns` slots: a connection is in it at most once). */
    size_t nopening;
    struct conn **openq;
    size_t oq_head;
    size_t oq_len;
    /* Rate mode: connections in CS_READY, a stack. */
    struct conn **ready;
    size_t nready;
    struct sl_sched sched;
    /* The earliest deadline_ns of any connection may be at or after this (a lower bound). */
    uint64_t next_wake_ns;
    char *rbuf;
    /* epoll_pwait2() works here (false after ENOSYS: then epoll_wait, to the millisecond). */
    bool have_pwait2;
    /* A mutable copy of the host for SNI: SSL_set_tlsext_host_name() casts to void *. */
    char sni[256];
    uint64_t requests;
    uint64_t bytes;
    uint64_t connects;
    uint64_t resumed;
    struct sl_load_errors errors;
    struct sl_hist hist;
};

_Static_assert(SL_LOAD_CPU_MAX < CPU_SETSIZE, "every --connect-cpu fits a cpu_set_t");

struct shared {
    const struct sl_load_config *cfg;
    uint64_t window_start_ns;
    _Atomic uint64_t window_end_ns;
    atomic_bool stop;
    atomic_uint_fast64_t window_requests;
    atomic_uint_fast64_t established;
    /* Idle mode: `established` when the hold began (what the run reports). */
    uint64_t ready_established;
    /* cfg->connect_cpu >= 0: the CPUs the threads run on between connects, and the one CPU
     * they connect from. */
    cpu_set_t home;
    cpu_set_t connect_from;
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool in_window(const struct shared *sh, uint64_t t)
{
    if (sh->cfg->mode == SL_LOAD_IDLE) {
        return true;
    }
    return t >= sh->window_start_ns
           && t < atomic_load_explicit(&sh->window_end_ns, memory_order_relaxed);
}

static void arm(struct conn *c, uint64_t at_ns)
{
    c->deadline_ns = at_ns;
    if (at_ns != 0 && at_ns < c->w->next_wake_ns) {
        c->w->next_wake_ns = at_ns;
    }
}

static void progress(struct conn *c, uint64_t t)
{
    c->deadline_ns = t + SL_LOAD_STALL_MS * 1000000ull;
}

static int set_events(struct conn *c)
{
    uint32_t ev = EPOLLIN | (c->want_write ? EPOLLOUT : 0u);
    struct epoll_event e = { .events = ev, .data.ptr = c };

    if (ev == c->events) {
        return 0;
    }
    if (epoll_ctl(c->w->ep, EPOLL_CTL_MOD, c->fd, &e) == -1) {
        return -errno;
    }
    c->events = ev;
    return 0;
}

static void count_error(struct worker *w, enum conn_err e)
{
    switch (e) {
    case CE_NONE:
        break;
    case CE_CONNECT:
        w->errors.connect++;
        break;
    case CE_PROXY:
        w->errors.proxy++;
        break;
    case CE_TLS:
        w->errors.tls++;
        break;
    case CE_HTTP:
        w->errors.http++;
        break;
    case CE_TIMEOUT:
        w->errors.timeout++;
        break;
    case CE_CLOSED:
        w->errors.closed++;
        break;
    }
}

static void ready_remove(struct worker *w, struct conn *c)
{
    size_t i;

    for (i = 0; i < w->nready; i++) {
        if (w->ready[i] == c) {
            w->ready[i] = w->ready[--w->nready];
            return;
        }
    }
}

static void opening_done(struct conn *c)
{
    if (c->opening) {
        c->opening = false;
        c->w->nopening--;
    }
}

/* Closes the socket and schedules the next connect: at once after a clean close, after
 * SL_LOAD_BACKOFF_MS after an error. */
static void conn_reset(struct conn *c, enum conn_err e, uint64_t t)
{
    struct worker *w = c->w;

    count_error(w, e);
    opening_done(c);
    if (c->state == CS_READY) {
        ready_remove(w, c);
    }
    if (c->ssl != NULL) {
        if (e == CE_NONE && SSL_is_init_finished(c->ssl)) {
            /* A close_notify marks the session as cleanly ended, so it stays resumable. */
            ERR_clear_error();
            (void)SSL_shutdown(c->ssl);
        }
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    if (c->fd != -1) {
        (void)close(c->fd); /* also removes it from the epoll set */
        c->fd = -1;
    }
    ERR_clear_error();
    if (c->established) {
        c->established = false;
        atomic_fetch_sub(&w->sh->established, 1);
    }
    c->state = CS_WAIT;
    c->events = 0;
    c->want_write = false;
    arm(c, e == CE_NONE ? t : t + SL_LOAD_BACKOFF_MS * 1000000ull);
}

static int new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
    struct conn *c = SSL_get_app_data(ssl);
    struct worker *w;

    if (c == NULL || !c->w->sh->cfg->resume) {
        return 0;
    }
    w = c->w;
    if (w->nsessions == SESSIONS_MAX) {
        SSL_SESSION_free(w->sessions[0]);
        memmove(&w->sessions[0], &w->sessions[1], (SESSIONS_MAX - 1) * sizeof(w->sessions[0]));
        w->nsessions--;
    }
    w->sessions[w->nsessions++] = sess;
    return 1; /* we keep the reference */
}

/* The newest session of `w` not offered yet and still resumable (its reference), or NULL. */
static SSL_SESSION *take_session(struct worker *w)
{
    while (w->nsessions > 0) {
        SSL_SESSION *s = w->sessions[--w->nsessions];

        if (SSL_SESSION_is_resumable(s)) {
            return s;
        }
        SSL_SESSION_free(s);
    }
    return NULL;
}

static enum conn_err start_tls(struct conn *c)
{
    const struct sl_load_config *cfg = c->w->sh->cfg;
    struct in6_addr ip;

    c->ssl = SSL_new(c->w->ctx);
    if (c->ssl == NULL) {
        return CE_TLS;
    }
    SSL_set_app_data(c->ssl, c);
    if (SSL_set_fd(c->ssl, c->fd) != 1 || SSL_set1_host(c->ssl, cfg->host) != 1) {
        return CE_TLS;
    }
    /* SNI carries names only (RFC 6066 §3), never an address literal. */
    if (inet_pton(AF_INET, cfg->host, &ip) != 1 && inet_pton(AF_INET6, cfg->host, &ip) != 1
        && SSL_set_tlsext_host_name(c->ssl, c->w->sni) != 1) {
        return CE_TLS;
    }
    if (cfg->resume) {
        SSL_SESSION *sess = take_session(c->w);
        int ok = sess == NULL || SSL_set_session(c->ssl, sess) == 1;

        SSL_SESSION_free(sess); /* SSL_set_session() took its own reference */
        if (!ok) {
            return CE_TLS;
        }
    }
    SSL_set_connect_state(c->ssl);
    return CE_NONE;
}

/* Starts a TCP connect. */
static enum conn_err conn_open(struct conn *c, uint64_t t)
{
    const struct sl_load_config *cfg = c->w->sh->cfg;
    struct epoll_event e = { .events = EPOLLIN | EPOLLOUT, .data.ptr = c };
    int one = 1;
    bool failed;

    c->conn_start_ns = t;
    c->fd = socket(cfg->dial.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd == -1) {
        return CE_CONNECT;
    }
    (void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* sl_load_run() tried both moves: they do not fail here. */
    if (cfg->connect_cpu >= 0) {
        (void)sched_setaffinity(0, sizeof(cpu_set_t), &c->w->sh->connect_from);
    }
    failed = connect(c->fd, (const struct sockaddr *)&cfg->dial, cfg->dial_len) == -1
             && errno != EINPROGRESS;
    if (cfg->connect_cpu >= 0) {
        (void)sched_setaffinity(0, sizeof(cpu_set_t), &c->w->sh->home);
    }
    if (failed) {
        return CE_CONNECT;
    }
    if (epoll_ctl(c->w->ep, EPOLL_CTL_ADD, c->fd, &e) == -1) {
        return CE_CONNECT;
    }
    c->events = e.events;
    c->want_write = true;
    c->state = CS_CONNECTING;
    progress(c, t);
    arm(c, c->deadline_ns);
    return CE_NONE;
}

/* I/O results: >0 bytes, IO_WAIT (try again on the next event), IO_EOF, or IO_ERR. */
enum {
    IO_WAIT = 0,
    IO_EOF = -1,
    IO_ERR = -2,
};

static long io_write(struct conn *c, const char *p, size_t n)
{
    ssize_t k;

    if (c->ssl != NULL) {
        int rc;

        ERR_clear_error();
        rc = SSL_write(c->ssl, p, (int)n);
        if (rc > 0) {
            c->want_write = false;
            return rc;
        }
        switch (SSL_get_error(c->ssl, rc)) {
        case SSL_ERROR_WANT_WRITE:
            c->want_write = true;
            return IO_WAIT;
        case SSL_ERROR_WANT_READ:
            c->want_write = false;
            return IO_WAIT;
        case SSL_ERROR_ZERO_RETURN:
            return IO_EOF;
        default:
            return IO_ERR;
        }
    }
    k = send(c->fd, p, n, MSG_NOSIGNAL);
    if (k >= 0) {
        c->want_write = false;
        return (long)k;
    }
    if (errno == EAGAIN) { /* EWOULDBLOCK is the same on Linux */
        c->want_write = true;
        return IO_WAIT;
    }
    return errno == EPIPE || errno == ECONNRESET ? IO_EOF : IO_ERR;
}

static long io_read(struct conn *c, char *p, size_t n)
{
    ssize_t k;

    if (c->ssl != NULL) {
        int rc;

        ERR_clear_error();
        rc = SSL_read(c->ssl, p, (int)n);
        if (rc > 0) {
            return rc;
        }
        switch (SSL_get_error(c->ssl, rc)) {
        case SSL_ERROR_WANT_READ:
            return IO_WAIT;
        case SSL_ERROR_WANT_WRITE:
            c->want_write = true;
            return IO_WAIT;
        case SSL_ERROR_ZERO_RETURN:
        case SSL_ERROR_SYSCALL: /* a reset: the peer is gone */
            return IO_EOF;
        default:
            return IO_ERR;
        }
    }
    k = recv(c->fd, p, n, 0);
    if (k > 0) {
        return (long)k;
    }
    if (k == 0) {
        return IO_EOF;
    }
    if (errno == EAGAIN) { /* EWOULDBLOCK is the same on Linux */
        return IO_WAIT;
    }
    return errno == ECONNRESET ? IO_EOF : IO_ERR;
}

static void begin_request(struct conn *c, uint64_t start_ns, uint64_t t)
{
    c->state = CS_SENDING;
    c->out_off = 0;
    c->start_ns = start_ns;
    c->rx_bytes = 0;
    sl_resp_reset(&c->resp, c->w->sh->cfg->head_request, false);
    progress(c, t);
}

/* The connection is up (TCP, CONNECT and TLS as configured): what each mode does next. */
static void on_connected(struct conn *c, uint64_t t)
{
    struct worker *w = c->w;

    opening_done(c);
    switch (w->sh->cfg->mode) {
    case SL_LOAD_KEEPALIVE:
    case SL_LOAD_DOWNLOAD:
    case SL_LOAD_IDLE:
        begin_request(c, t, t);
        break;
    case SL_LOAD_NEWCONN:
        begin_request(c, c->conn_start_ns, t);
        break;
    case SL_LOAD_RATE:
        c->state = CS_READY;
        c->deadline_ns = 0;
        w->ready[w->nready++] = c;
        break;
    }
}

/* A response ended: count it (in the window, with the expected status), then close, hold, or
 * send the next request, as the mode says. */
static void on_response(struct conn *c, uint64_t t)
{
    struct worker *w = c->w;
    struct shared *sh = w->sh;
    const struct sl_load_config *cfg = sh->cfg;
    uint64_t done = now_ns();

    if (c->resp.status != cfg->expect_status) {
        w->errors.status++;
    } else if (in_window(sh, done)) {
        w->requests++;
        sl_hist_record(&w->hist, sl_latency_us(c->start_ns, done));
        if (cfg->mode == SL_LOAD_NEWCONN) {
            w->connects++;
            w->resumed += c->resumed;
        }
        if (cfg->max_requests != 0
            && atomic_fetch_add(&sh->window_requests, 1) + 1 >= cfg->max_requests) {
            uint64_t end = atomic_load(&sh->window_end_ns);

            /* The window ends with this request, on whichever thread gets there first. */
            while (done + 1 < end
                   && !atomic_compare_exchange_weak(&sh->window_end_ns, &end, done + 1)) {
            }
            atomic_store(&sh->stop, true);
        }
    }
    if (c->resp.close || cfg->mode == SL_LOAD_NEWCONN) {
        conn_reset(c, CE_NONE, t);
        return;
    }
    switch (cfg->mode) {
    case SL_LOAD_KEEPALIVE:
    case SL_LOAD_DOWNLOAD:
        begin_request(c, done, t);
        break;
    case SL_LOAD_IDLE:
        c->state = CS_READY;
        c->deadline_ns = 0;
        if (!c->established && c->resp.status == cfg->expect_status) {
            c->established = true;
            atomic_fetch_add(&sh->established, 1);
        }
        break;
    case SL_LOAD_RATE:
        c->state = CS_READY;
        c->deadline_ns = 0;
        w->ready[w->nready++] = c;
        break;
    case SL_LOAD_NEWCONN:
        break;
    }
}

static enum conn_err step_connecting(struct conn *c, uint32_t events, uint64_t t)
{
    const struct sl_load_config *cfg = c->w->sh->cfg;
    int soerr = 0;
    socklen_t len = sizeof(soerr);

    if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) == 0) {
        return CE_NONE;
    }
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == -1 || soerr != 0) {
        return CE_CONNECT;
    }
    progress(c, t);
    c->out_off = 0;
    if (cfg->via_proxy && cfg->tls) {
        c->state = CS_PROXY_SEND;
        sl_resp_reset(&c->resp, true, true);
    } else if (cfg->tls) {
        c->state = CS_HANDSHAKE;
        return start_tls(c);
    } else {
        on_connected(c, t);
    }
    return CE_NONE;
}

static enum conn_err step_handshake(struct conn *c, uint64_t t)
{
    int rc;

    ERR_clear_error();
    rc = SSL_do_handshake(c->ssl);
    if (rc == 1) {
        c->resumed = SSL_session_reused(c->ssl) == 1;
        progress(c, t);
        on_connected(c, t);
        return CE_NONE;
    }
    switch (SSL_get_error(c->ssl, rc)) {
    case SSL_ERROR_WANT_READ:
        c->want_write = false;
        return CE_NONE;
    case SSL_ERROR_WANT_WRITE:
        c->want_write = true;
        return CE_NONE;
    default:
        return CE_TLS;
    }
}

/* Writes the rest of `p` (n bytes). Returns 1 when all is written, 0 to wait, or an error. */
static int write_out(struct conn *c, const char *p, size_t n, uint64_t t, enum conn_err *e)
{
    while (c->out_off < n) {
        long k = io_write(c, p + c->out_off, n - c->out_off);

        if (k == IO_WAIT) {
            return 0;
        }
        if (k < 0) {
            *e = k == IO_EOF || c->ssl == NULL ? CE_CLOSED : CE_TLS;
            return -1;
        }
        c->out_off += (size_t)k;
        progress(c, t);
    }
    return 1;
}

static enum conn_err step_proxy_recv(struct conn *c, uint64_t t)
{
    struct worker *w = c->w;

    for (;;) {
        long k = io_read(c, w->rbuf, READ_BUF_BYTES);
        size_t used;
        int rc;

        if (k == IO_WAIT) {
            return CE_NONE;
        }
        if (k < 0) {
            return CE_PROXY;
        }
        progress(c, t);
        rc = sl_resp_feed(&c->resp, w->rbuf, (size_t)k, &used);
        if (rc < 0 || (rc == 1 && (used != (size_t)k || c->resp.status != 200))) {
            return CE_PROXY;
        }
        if (rc == 1) {
            c->state = CS_HANDSHAKE;
            return start_tls(c);
        }
    }
}

static enum conn_err step_receiving(struct conn *c, uint64_t t)
{
    struct worker *w = c->w;

    for (;;) {
        long k = io_read(c, w->rbuf, READ_BUF_BYTES);
        size_t used;
        int rc;

        if (k == IO_WAIT) {
            return CE_NONE;
        }
        if (k == IO_EOF && sl_resp_ends_at_close(&c->resp)) {
            on_response(c, t);
            if (c->state != CS_WAIT) {
                conn_reset(c, CE_NONE, t);
            }
            return CE_NONE;
        }
        if (k < 0) {
            return k == IO_EOF || c->ssl == NULL ? CE_CLOSED : CE_TLS;
        }
        c->rx_bytes += (uint64_t)k;
        if (in_window(w->sh, t)) {
            w->bytes += (uint64_t)k;
        }
        progress(c, t);
        rc = sl_resp_feed(&c->resp, w->rbuf, (size_t)k, &used);
        if (rc < 0 || (rc == 1 && used != (size_t)k)) {
            return CE_HTTP;
        }
        if (rc == 1) {
            on_response(c, t);
            return CE_NONE;
        }
    }
}

/* Advances `c` as far as the data allows after `events` (0 when called for another reason). */
static enum conn_err conn_step(struct conn *c, uint32_t events, uint64_t t)
{
    const struct sl_load_config *cfg = c->w->sh->cfg;
    enum conn_err e = CE_NONE;
    enum conn_state before;

    do {
        before = c->state;
        switch (c->state) {
        case CS_WAIT:
            return CE_NONE;
        case CS_CONNECTING:
            e = step_connecting(c, events, t);
            break;
        case CS_PROXY_SEND:
            if (write_out(c, cfg->connect_req, cfg->connect_len, t, &e) == 1) {
                c->state = CS_PROXY_RECV;
            } else if (e != CE_NONE) {
                e = CE_PROXY;
            }
            break;
        case CS_PROXY_RECV:
            e = step_proxy_recv(c, t);
            break;
        case CS_HANDSHAKE:
            e = step_handshake(c, t);
            break;
        case CS_READY: {
            long k = io_read(c, c->w->rbuf, READ_BUF_BYTES);

            if (k > 0) {
                e = CE_HTTP; /* bytes nobody asked for */
            } else if (k < 0) {
                e = CE_CLOSED;
            }
            break;
        }
        case CS_SENDING:
            if (write_out(c, cfg->request, cfg->request_len, t, &e) == 1) {
                /* The answer cannot be there yet: wait for EPOLLIN rather than spend a read
                 * that is sure to find nothing (one syscall less per request). */
                c->state = CS_RECEIVING;
                before = CS_RECEIVING;
            }
            break;
        case CS_RECEIVING:
            e = step_receiving(c, t);
            break;
        }
        if (e != CE_NONE) {
            return e;
        }
    } while (c->state != before && c->state != CS_WAIT);
    if (c->state != CS_WAIT) {
        if (c->deadline_ns != 0) {
            arm(c, c->deadline_ns);
        }
        if (set_events(c) < 0) {
            return CE_CLOSED;
        }
    }
    return CE_NONE;
}

static void open_now(struct conn *c, uint64_t t)
{
    enum conn_err e = conn_open(c, t);

    if (e != CE_NONE) {
        conn_reset(c, e, t);
        return;
    }
    c->opening = true;
    c->w->nopening++;
}

/* True when `c` may start opening now; otherwise it is queued until an opening finishes. */
static bool may_open(struct worker *w, struct conn *c)
{
    size_t slot = w->oq_head + w->oq_len;

    if (w->sh->cfg->mode == SL_LOAD_NEWCONN || w->nopening < OPENING_MAX) {
        return true;
    }
    if (slot >= w->nconns) {
        slot -= w->nconns;
    }
    w->openq[slot] = c;
    w->oq_len++;
    c->deadline_ns = 0;
    return false;
}

/* Opens queued and due connections, and times out the stalled ones. */
static void run_timers(struct worker *w, uint64_t t)
{
    uint64_t next = UINT64_MAX;
    size_t i;

    while (w->oq_len > 0 && w->nopening < OPENING_MAX) {
        struct conn *c = w->openq[w->oq_head];

        w->oq_head = w->oq_head + 1 == w->nconns ? 0 : w->oq_head + 1;
        w->oq_len--;
        open_now(c, t);
    }
    if (t < w->next_wake_ns) {
        return;
    }
    w->next_wake_ns = UINT64_MAX;
    for (i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];

        if (c->deadline_ns != 0 && c->deadline_ns <= t) {
            if (c->state != CS_WAIT) {
                conn_reset(c, CE_TIMEOUT, t);
            } else if (may_open(w, c)) {
                open_now(c, t);
            }
        }
        if (c->deadline_ns != 0 && c->deadline_ns < next) {
            next = c->deadline_ns;
        }
    }
    w->next_wake_ns = next;
}

/* Rate mode: hands every request that is due to a free connection. A request that is due
 * while none is free waits, and its latency still counts from when it was due. */
static void dispatch(struct worker *w, uint64_t t)
{
    while (w->nready > 0 && sl_sched_is_due(&w->sched, t)) {
        struct conn *c = w->ready[--w->nready];
        enum conn_err e;

        begin_request(c, sl_sched_take(&w->sched), t);
        e = conn_step(c, 0, t);
        if (e != CE_NONE) {
            conn_reset(c, e, t);
        }
    }
}

/* How long the next epoll wait may last, in nanoseconds: until the next timer or scheduled
 * request, at most POLL_MAX_MS. */
static uint64_t poll_timeout_ns(const struct worker *w, uint64_t t)
{
    uint64_t wake = w->next_wake_ns;

    if (w->sh->cfg->mode == SL_LOAD_RATE && w->nready > 0) {
        uint64_t due = sl_sched_next_ns(&w->sched);

        if (due < wake) {
            wake = due;
        }
    }
    if (wake <= t) {
        return 0;
    }
    if (wake - t >= (uint64_t)POLL_MAX_MS * 1000000u) {
        return (uint64_t)POLL_MAX_MS * 1000000u;
    }
    return wake - t;
}

/* epoll_wait with a nanosecond timeout. Rate mode sends requests at their scheduled times, and
 * a millisecond timeout would make each one up to 1 ms late (and, since it is timed from its
 * schedule, add that to its latency): epoll_pwait2 (Linux 5.11) waits to the microsecond. */
static int wait_events(struct worker *w, struct epoll_event *evs, uint64_t timeout_ns)
{
    if (w->have_pwait2) {
        struct timespec ts = { .tv_sec = (time_t)(timeout_ns / 1000000000u),
                               .tv_nsec = (long)(timeout_ns % 1000000000u) };
        int n = epoll_pwait2(w->ep, evs, EVENTS_MAX, &ts, NULL);

        if (n != -1 || errno != ENOSYS) {
            return n;
        }
        w->have_pwait2 = false;
    }
    return epoll_wait(w->ep, evs, EVENTS_MAX, (int)((timeout_ns + 999999u) / 1000000u));
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct shared *sh = w->sh;
    struct epoll_event evs[EVENTS_MAX];
    uint64_t t = now_ns();
    size_t i;

    for (i = 0; i < w->nconns; i++) {
        arm(&w->conns[i], t);
    }
    while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
        int n;
        int k;

        t = now_ns();
        if (t >= atomic_load_explicit(&sh->window_end_ns, memory_order_relaxed)) {
            break;
        }
        run_timers(w, t);
        if (sh->cfg->mode == SL_LOAD_RATE) {
            dispatch(w, t);
        }
        n = wait_events(w, evs, poll_timeout_ns(w, t));
        if (n == -1) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        t = now_ns();
        for (k = 0; k < n; k++) {
            struct conn *c = evs[k].data.ptr;
            enum conn_err e;

            /* An event of a socket closed earlier in this batch: its connection waits for a
             * timer now, and reconnects only on the next turn, so nothing else can be here. */
            if (c->state == CS_WAIT) {
                continue;
            }
            e = conn_step(c, evs[k].events, t);
            if (e != CE_NONE) {
                conn_reset(c, e, t);
            }
        }
    }
    /* A request still stalled at the end is a stuck connection: it counts as a timeout. */
    t = now_ns();
    for (i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];

        if (c->state != CS_WAIT && c->state != CS_READY && c->deadline_ns != 0
            && c->deadline_ns - SL_LOAD_STALL_MS * 1000000ull + 1000000000ull <= t) {
            w->errors.timeout++;
        }
        if (c->ssl != NULL) {
            SSL_free(c->ssl);
            c->ssl = NULL;
        }
        if (c->fd != -1) {
            (void)close(c->fd);
            c->fd = -1;
        }
    }
    return NULL;
}

static void set_err(char *err, size_t errlen, const char *what, const char *detail)
{
    if (errlen > 0) {
        (void)snprintf(err, errlen, "%s%s%s", what, detail != NULL ? ": " : "",
                       detail != NULL ? detail : "");
    }
}

static int ctx_new(const struct sl_load_config *cfg, SSL_CTX **out, char *err, size_t errlen)
{
    static const unsigned char alpn[] = "\x08http/1.1";
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    size_t i;

    if (ctx == NULL) {
        set_err(err, errlen, "cannot create a TLS context", NULL);
        return SL_ECRYPTO;
    }
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1
        || SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1) != 0) {
        set_err(err, errlen, "cannot configure the TLS context", NULL);
        goto fail_free;
    }
    /* Verification is always on: the chain against the CAs, the name by SSL_set1_host(). */
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    for (i = 0; i < cfg->ncafiles; i++) {
        if (SSL_CTX_load_verify_locations(ctx, cfg->cafiles[i], NULL) != 1) {
            set_err(err, errlen, "cannot load CA file", cfg->cafiles[i]);
            goto fail_free;
        }
    }
    if (cfg->ncafiles == 0 && SSL_CTX_set_default_verify_paths(ctx) != 1) {
        set_err(err, errlen, "cannot load the system's CA certificates", NULL);
        goto fail_free;
    }
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (cfg->mode == SL_LOAD_IDLE) {
        SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    }
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
    if (cfg->resume) {
        SSL_CTX_set_session_cache_mode(ctx,
                                       SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(ctx, new_session_cb);
    } else {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    }
    *out = ctx;
    return 0;

fail_free:
    ERR_clear_error();
    SSL_CTX_free(ctx);
    return SL_ECRYPTO;
}

static void worker_finish(struct worker *w)
{
    while (w->nsessions > 0) {
        SSL_SESSION_free(w->sessions[--w->nsessions]);
    }
    SSL_CTX_free(w->ctx);
    if (w->ep != -1) {
        (void)close(w->ep);
    }
    sl_free(w->conns);
    sl_free(w->ready);
    sl_free(w->openq);
    sl_free(w->rbuf);
}

/* Sets up worker `w` for `nconns` connections (caller storage, zeroed); in rate mode its first
 * request is due at `sched_ns`. */
static int worker_init(struct worker *w, struct shared *sh, size_t nconns, uint64_t sched_ns,
                       char *err, size_t errlen)
{
    const struct sl_load_config *cfg = sh->cfg;
    size_t i;

    w->sh = sh;
    w->ep = -1;
    w->nconns = nconns;
    w->next_wake_ns = UINT64_MAX;
    w->have_pwait2 = true;
    sl_hist_init(&w->hist);
    if (strlen(cfg->host) >= sizeof(w->sni)) {
        set_err(err, errlen, "host name too long", cfg->host);
        return SL_EINVAL;
    }
    memcpy(w->sni, cfg->host, strlen(cfg->host) + 1);
    if (cfg->tls) {
        SL_TRY(ctx_new(cfg, &w->ctx, err, errlen));
    }
    w->ep = epoll_create1(EPOLL_CLOEXEC);
    if (w->ep == -1) {
        set_err(err, errlen, "epoll_create1", strerror(errno));
        return -errno;
    }
    w->conns = sl_calloc(nconns, sizeof(*w->conns));
    w->ready = sl_calloc(nconns, sizeof(struct conn *));
    w->openq = sl_calloc(nconns, sizeof(struct conn *));
    w->rbuf = sl_malloc(READ_BUF_BYTES);
    if (w->conns == NULL || w->ready == NULL || w->openq == NULL || w->rbuf == NULL) {
        set_err(err, errlen, "out of memory", NULL);
        return SL_ENOMEM;
    }
    for (i = 0; i < nconns; i++) {
        w->conns[i].w = w;
        w->conns[i].fd = -1;
    }
    if (cfg->mode == SL_LOAD_RATE) {
        sl_sched_init(&w->sched, sched_ns, cfg->rate * (double)nconns / (double)cfg->connections);
    }
    return 0;
}

/* Sleeps until `at_ns` or until the run is stopped. */
static void sleep_until(struct shared *sh, uint64_t at_ns)
{
    for (;;) {
        uint64_t t = now_ns();
        uint64_t step;
        struct timespec ts;

        if (t >= at_ns || atomic_load(&sh->stop)) {
            return;
        }
        step = at_ns - t;
        if (step > 5000000u) {
            step = 5000000u;
        }
        ts.tv_sec = 0;
        ts.tv_nsec = (long)step;
        (void)nanosleep(&ts, NULL);
    }
}

static void call_hook(sl_load_hook_fn *fn, void *arg)
{
    if (fn != NULL) {
        fn(arg);
    }
}

static uint64_t secs_to_ns(double s)
{
    return s <= 0.0 ? 0 : (uint64_t)(s * 1e9);
}

static void merge(struct sl_load_result *out, const struct worker *w)
{
    out->requests += w->requests;
    out->bytes += w->bytes;
    out->connects += w->connects;
    out->resumed += w->resumed;
    out->errors.connect += w->errors.connect;
    out->errors.proxy += w->errors.proxy;
    out->errors.tls += w->errors.tls;
    out->errors.http += w->errors.http;
    out->errors.status += w->errors.status;
    out->errors.timeout += w->errors.timeout;
    out->errors.closed += w->errors.closed;
    sl_hist_merge(&out->latency, &w->hist);
}

/* Drives the run from the calling thread once the workers are going; returns the window's
 * length in seconds. */
static double supervise(struct shared *sh, const struct sl_load_hooks *hooks, uint64_t t0)
{
    const struct sl_load_config *cfg = sh->cfg;
    uint64_t end;

    if (cfg->mode == SL_LOAD_IDLE) {
        uint64_t deadline = t0 + secs_to_ns(cfg->warmup_s + cfg->duration_s);
        uint64_t established;

        while (now_ns() < deadline && atomic_load(&sh->established) < cfg->connections) {
            sleep_until(sh, now_ns() + 2000000u);
        }
        end = now_ns();
        call_hook(hooks->window_end, hooks->arg);
        established = atomic_load(&sh->established);
        sh->ready_established = established;
        if (hooks->ready != NULL) {
            hooks->ready(established, hooks->arg);
        }
        sleep_until(sh, now_ns() + secs_to_ns(cfg->hold_s));
        atomic_store(&sh->stop, true);
        return (double)(end - t0) / 1e9;
    }
    sleep_until(sh, sh->window_start_ns);
    call_hook(hooks->window_start, hooks->arg);
    sleep_until(sh, atomic_load(&sh->window_end_ns));
    call_hook(hooks->window_end, hooks->arg);
    atomic_store(&sh->stop, true);
    end = atomic_load(&sh->window_end_ns);
    return (double)(end - sh->window_start_ns) / 1e9;
}

int sl_load_run(const struct sl_load_config *cfg, const struct sl_load_hooks *hooks,
                struct sl_load_result *out, char *err, size_t errlen)
{
    struct shared sh;
    struct worker *ws = NULL;
    unsigned nthreads = cfg->threads;
    unsigned started = 0;
    uint64_t t0;
    double seconds;
    unsigned i;
    int rc = 0;

    SL_ENSURE(cfg->connections > 0 && nthreads > 0, SL_EINVAL);
    if (nthreads > cfg->connections) {
        nthreads = cfg->connections;
    }
    memset(out, 0, sizeof(*out));
    sl_hist_init(&out->latency);
    memset(&sh, 0, sizeof(sh));
    sh.cfg = cfg;
    atomic_init(&sh.stop, false);
    atomic_init(&sh.window_requests, 0);
    atomic_init(&sh.established, 0);
    if (cfg->connect_cpu >= 0) {
        /* The threads inherit this thread's CPUs; try the move there and back once. */
        SL_ENSURE(cfg->connect_cpu <= SL_LOAD_CPU_MAX, SL_EINVAL);
        CPU_ZERO(&sh.connect_from);
        CPU_SET((size_t)cfg->connect_cpu, &sh.connect_from);
        if (sched_getaffinity(0, sizeof(cpu_set_t), &sh.home) == -1
            || sched_setaffinity(0, sizeof(cpu_set_t), &sh.connect_from) == -1
            || sched_setaffinity(0, sizeof(cpu_set_t), &sh.home) == -1) {
            char what[64];

            (void)snprintf(what, sizeof(what), "--connect-cpu %d: cannot run there",
                           cfg->connect_cpu);
            set_err(err, errlen, what, strerror(errno));
            return SL_EINVAL;
        }
    }
    ws = sl_calloc(nthreads, sizeof(*ws));
    if (ws == NULL) {
        set_err(err, errlen, "out of memory", NULL);
        return SL_ENOMEM;
    }
    if (cfg->mode == SL_LOAD_IDLE) {
        call_hook(hooks->window_start, hooks->arg);
    }
    t0 = now_ns();
    sh.window_start_ns = t0 + secs_to_ns(cfg->warmup_s);
    atomic_init(&sh.window_end_ns, cfg->mode == SL_LOAD_IDLE
                                           ? UINT64_MAX
                                           : sh.window_start_ns + secs_to_ns(cfg->duration_s));
    for (i = 0; i < nthreads; i++) {
        size_t n = cfg->connections / nthreads + (i < cfg->connections % nthreads ? 1 : 0);
        /* Rate mode: thread i starts i requests' spacing later, so the threads' schedules
         * interleave instead of firing together. */
        uint64_t start = cfg->mode == SL_LOAD_RATE ? t0 + secs_to_ns((double)i / cfg->rate) : t0;

        rc = worker_init(&ws[i], &sh, n, start, err, errlen);
        if (rc < 0) {
            nthreads = i + 1;
            goto fail_workers;
        }
    }
    for (i = 0; i < nthreads; i++) {
        rc = pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]);
        if (rc != 0) {
            set_err(err, errlen, "pthread_create", strerror(rc));
            rc = -rc;
            atomic_store(&sh.stop, true);
            goto fail_join;
        }
        started++;
    }
    seconds = supervise(&sh, hooks, t0);
    for (i = 0; i < started; i++) {
        (void)pthread_join(ws[i].thread, NULL);
        merge(out, &ws[i]);
    }
    out->seconds = seconds;
    out->established = sh.ready_established;
    for (i = 0; i < nthreads; i++) {
        worker_finish(&ws[i]);
    }
    sl_free(ws);
    return 0;

fail_join:
    for (i = 0; i < started; i++) {
        (void)pthread_join(ws[i].thread, NULL);
    }
fail_workers:
    for (i = 0; i < nthreads; i++) {
        worker_finish(&ws[i]);
    }
    sl_free(ws);
    return rc;
}
