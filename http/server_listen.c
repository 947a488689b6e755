/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http/server_listen.c - the server of http/server.h: its configuration, its listeners (TCP,
 * TCP under TLS and unix sockets, a spare handle to refuse connections beyond the limit), accepting
 * into a connection (http/server.c), and closing it all.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <uv.h>

#include "base/err.h"
#include "base/log.h"
#include "base/mem.h"
#include "http/server.h"
#include "http/server_int.h"

/* The kernel's queue of connections not accepted yet, per listener. */
#define LISTEN_BACKLOG 128

/* ---- Accepting: the listeners, and refusing beyond the limit ---- */

static void listener_accept(struct sl__http_listener *l);

static void on_spare_closed(uv_handle_t *h)
{
    struct sl__http_listener *l = SL_CONTAINER_OF(h, struct sl__http_listener, spare.handle);
    struct sl_http_server *srv = l->srv;

    l->spare_busy = false;
    srv->pending_closes--;
    if (l->stalled && l->state == SL__HTTP_LISTENER_OPEN) {
        l->stalled = false;
        listener_accept(l);
    }
    sl__http_server_maybe_finish(srv);
}

/* Accepts the pending connection only to answer the canned 503 and close it. */
static void listener_refuse(struct sl__http_listener *l)
{
    struct sl_http_server *srv = l->srv;
    uv_buf_t buf;
    int rc;

    if (l->spare_busy) {
        l->stalled = true; /* libuv stops polling until the connection is accepted */
        return;
    }
    rc = l->is_unix ? uv_pipe_init(srv->loop, &l->spare.pipe, 0)
                    : uv_tcp_init(srv->loop, &l->spare.tcp);
    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0, "http cannot refuse a connection err=%s", sl_strerror(rc));
        return;
    }
    l->spare_busy = true;
    srv->pending_closes++;
    /* A TLS client would take the canned answer for a broken handshake: it only gets the close. */
    if (uv_accept(&l->sock.stream, &l->spare.stream) == 0 && l->tls == NULL) {
        buf.base = srv->overload;
        buf.len = srv->overload_len;
        /* A fresh socket's send buffer takes this whole; a short write only cuts a 503. */
        (void)uv_try_write(&l->spare.stream, &buf, 1);
    }
    uv_close(&l->spare.handle, on_spare_closed);
}

static void listener_accept(struct sl__http_listener *l)
{
    struct sl_http_server *srv = l->srv;
    int rc;

    if (srv->n_conns >= srv->cfg.max_connections) {
        sl_log(SL_LOG_DEBUG, 0, "http connection refused: %zu connections open", srv->n_conns);
        listener_refuse(l);
        return;
    }
    rc = sl__http_conn_create(l);
    if (rc < 0) {
        sl_log(SL_LOG_WARN, 0, "http connection refused err=%s", sl_strerror(rc));
        listener_refuse(l);
    }
}

static void on_listener_connection(uv_stream_t *s, int status)
{
    struct sl__http_listener *l = SL_CONTAINER_OF(s, struct sl__http_listener, sock.stream);

    if (status < 0) {
        sl_log(SL_LOG_WARN, 0, "http accept failed err=%s", sl_strerror(status));
        return;
    }
    listener_accept(l);
}

/* ---- The server ---- */

static void on_anchor_closed(uv_handle_t *h);

/* Frees the server once it is closing and nothing it owns is open, then tells the owner. */
void sl__http_server_maybe_finish(struct sl_http_server *srv)
{
    sl_http_closed_fn *closed = srv->closed;
    void *arg = srv->closed_arg;

    if (srv->draining && srv->n_conns == 0) {
        /* The last answer in flight went out before the grace period ended. */
        srv->draining = false;
        uv_close((uv_handle_t *)&srv->anchor, on_anchor_closed);
        return;
    }
    if (!srv->closing || srv->pending_closes > 0 || srv->n_conns > 0) {
        return;
    }
    sl_free(srv);
    if (closed != NULL) {
        closed(arg);
    }
}

static void on_anchor_closed(uv_handle_t *h)
{
    struct sl_http_server *srv = SL_CONTAINER_OF(h, struct sl_http_server, anchor);

    srv->pending_closes--;
    sl__http_server_maybe_finish(srv);
}

static void on_listener_closed(uv_handle_t *h)
{
    struct sl__http_listener *l = SL_CONTAINER_OF(h, struct sl__http_listener, sock.handle);
    struct sl_http_server *srv = l->srv;

    l->state = SL__HTTP_LISTENER_FREE;
    srv->pending_closes--;
    sl__http_server_maybe_finish(srv);
}

/* libuv removes a unix socket's file when its listener closes. */
static void listener_close(struct sl__http_listener *l)
{
    if (l->state != SL__HTTP_LISTENER_OPEN) {
        return;
    }
    l->state = SL__HTTP_LISTENER_CLOSING;
    l->stalled = false;
    uv_close(&l->sock.handle, on_listener_closed);
}

static struct sl__http_listener *listener_slot(struct sl_http_server *srv, bool is_unix)
{
    for (size_t i = 0; i < SL_ARRAY_LEN(srv->listeners); i++) {
        struct sl__http_listener *l = &srv->listeners[i];

        if (l->state == SL__HTTP_LISTENER_FREE && !l->spare_busy) {
            l->srv = srv;
            l->is_unix = is_unix;
            l->tls = NULL;
            l->stalled = false;
            return l;
        }
    }
    return NULL;
}

/* Marks a slot whose handle was just initialised as open (its close is owed from now on). */
static void listener_opened(struct sl__http_listener *l)
{
    l->state = SL__HTTP_LISTENER_OPEN;
    l->srv->pending_closes++;
}

static bool error_key_is_valid(const char *key)
{
    size_t n = strlen(key);

    if (n == 0 || n > SL_HTTP_ERROR_KEY_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)key[i];

        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
              || ch == '_' || ch == '-' || ch == '.')) {
            return false;
        }
    }
    return true;
}

/* Applies defaults to `cfg` (a copy) and checks it. */
static int resolve_config(struct sl_http_server *srv, const struct sl_http_server_config *cfg)
{
    struct sl_http_server_config *c = &srv->cfg;

    *c = cfg != NULL ? *cfg : (struct sl_http_server_config){ 0 };
    if (c->body_max_bytes == 0) {
        c->body_max_bytes = SL_HTTP_DEFAULT_BODY_MAX_BYTES;
    }
    if (c->head_limits.head_max_bytes == 0) {
        c->head_limits.head_max_bytes = sl_h1_default_limits.head_max_bytes;
    }
    if (c->head_limits.headers_max == 0) {
        c->head_limits.headers_max = sl_h1_default_limits.headers_max;
    }
    if (c->header_timeout_ms == 0) {
        c->header_timeout_ms = SL_HTTP_DEFAULT_HEADER_TIMEOUT_MS;
    }
    if (c->idle_timeout_ms == 0) {
        c->idle_timeout_ms = SL_HTTP_DEFAULT_IDLE_TIMEOUT_MS;
    }
    if (c->max_connections == 0) {
        c->max_connections = SL_HTTP_DEFAULT_MAX_CONNECTIONS;
    }
    if (c->peer_max_connections == 0) {
        c->peer_max_connections = SL_HTTP_DEFAULT_PEER_CONNECTIONS;
    }
    if (c->bodies_max_bytes == 0) {
        c->bodies_max_bytes = SL_HTTP_DEFAULT_BODIES_MAX_BYTES;
    }
    if (c->peer_bodies_max_bytes == 0) {
        c->peer_bodies_max_bytes = c->body_max_bytes;
    }
    if (c->error_key == NULL) {
        c->error_key = SL_HTTP_DEFAULT_ERROR_KEY;
    }
    /* Bounds that keep the arithmetic below far from overflow. */
    SL_ENSURE(error_key_is_valid(c->error_key), SL_EINVAL);
    SL_ENSURE(c->head_limits.head_max_bytes <= SIZE_MAX / 8, SL_EINVAL);
    SL_ENSURE(c->head_limits.headers_max <= SIZE_MAX / 8 / sizeof(struct sl_h1_header) / 4,
              SL_EINVAL);
    SL_ENSURE(c->body_max_bytes < SIZE_MAX, SL_EINVAL);
    memcpy(srv->error_key_buf, c->error_key, strlen(c->error_key) + 1);
    c->error_key = srv->error_key_buf;
    /* Head strings with their terminators, the header array (doubling in the parser's arena),
     * and what chunk ends waste. */
    srv->arena_max_bytes = 3 * c->head_limits.head_max_bytes
                           + 4 * c->head_limits.headers_max * sizeof(struct sl_h1_header)
                           + 4 * SL__HTTP_ARENA_CHUNK_BYTES;
    return 0;
}

static int build_overload_response(struct sl_http_server *srv)
{
    char body[96];
    int n = snprintf(body, sizeof(body), "{\"%s\":\"too many connections\"}", srv->cfg.error_key);
    int m;

    SL_ENSURE(n > 0 && (size_t)n < sizeof(body), SL_EINVAL);
    m = snprintf(srv->overload, sizeof(srv->overload),
                 "HTTP/1.1 503 Service Unavailable\r\nServer: sluice\r\n"
                 "Content-Type: application/json\r\nContent-Length: %d\r\n"
                 "Connection: close\r\n\r\n%s",
                 n, body);
    SL_ENSURE(m > 0 && (size_t)m < sizeof(srv->overload), SL_EINVAL);
    srv->overload_len = (size_t)m;
    return 0;
}

int sl_http_server_create(uv_loop_t *loop, const struct sl_http_server_config *cfg,
                          sl_http_handler_fn *handler, void *arg, struct sl_http_server **out)
{
    struct sl_http_server *srv;
    int rc;

    SL_ENSURE(loop != NULL && handler != NULL && out != NULL, SL_EINVAL);
    srv = sl_calloc(1, sizeof(*srv));
    SL_ENSURE(srv != NULL, SL_ENOMEM);
    srv->loop = loop;
    srv->handler = handler;
    srv->arg = arg;
    srv->tcp_port = -1;
    sl_list_init(&srv->conns);
    rc = resolve_config(srv, cfg);
    if (rc == 0) {
        rc = build_overload_response(srv);
    }
    if (rc == 0) {
        rc = uv_timer_init(loop, &srv->anchor);
    }
    if (rc < 0) {
        sl_free(srv);
        return rc;
    }
    srv->pending_closes = 1;
    *out = srv;
    return 0;
}

/* Parses "a.b.c.d:port" or "[v6]:port" (IP literals only) into `ss`. */
static int parse_addr_port(const char *s, struct sockaddr_storage *ss)
{
    char host[64];
    const char *port_s;
    const char *h = s;
    size_t hlen;
    unsigned long port = 0;
    size_t digits = 0;

    if (s[0] == '[') {
        const char *end = strchr(s, ']');

        SL_ENSURE(end != NULL && end[1] == ':', SL_EINVAL);
        h = s + 1;
        hlen = (size_t)(end - h);
        port_s = end + 2;
    } else {
        const char *colon = strrchr(s, ':');

        SL_ENSURE(colon != NULL, SL_EINVAL);
        hlen = (size_t)(colon - s);
        SL_ENSURE(memchr(s, ':', hlen) == NULL, SL_EINVAL); /* IPv6 needs brackets */
        port_s = colon + 1;
    }
    SL_ENSURE(hlen > 0 && hlen < sizeof(host), SL_EINVAL);
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    for (; port_s[digits] >= '0' && port_s[digits] <= '9' && digits < 6; digits++) {
        port = port * 10 + (unsigned long)(port_s[digits] - '0');
    }
    SL_ENSURE(digits > 0 && port_s[digits] == '\0' && port <= 65535, SL_EINVAL);
    memset(ss, 0, sizeof(*ss));
    if (s[0] == '[') {
        SL_ENSURE(uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) == 0, SL_EINVAL);
    } else {
        SL_ENSURE(uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) == 0, SL_EINVAL);
    }
    return 0;
}

/* Completes a listener whose handle was bound with the result `bind_rc`: listens, or closes the
 * listener again and says why in `err`, naming `where`. */
static int listen_after_bind(struct sl__http_listener *l, int bind_rc, const char *where, char *err,
                             size_t errlen)
{
    int rc = bind_rc;

    if (rc == 0) {
        rc = uv_listen(&l->sock.stream, LISTEN_BACKLOG, on_listener_connection);
    }
    if (rc < 0) {
        sl_errf(err, errlen, "cannot listen on %s: %s", where, uv_strerror(rc));
        listener_close(l);
    }
    return rc;
}

static void record_tcp_port(struct sl__http_listener *l)
{
    struct sockaddr_storage ss;
    int len = (int)sizeof(ss);

    if (uv_tcp_getsockname(&l->sock.tcp, (struct sockaddr *)&ss, &len) != 0) {
        return;
    }
    if (ss.ss_family == AF_INET6) {
        l->srv->tcp_port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    } else {
        l->srv->tcp_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    }
}

static int listen_tcp(struct sl_http_server *srv, const char *addr_port, struct sl_http_tls *tls,
                      char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    struct sl__http_listener *l;
    int rc;

    if (srv->closing) {
        sl_errf(err, errlen, "the server is closing");
        return SL_EINVAL;
    }
    if (parse_addr_port(addr_port, &ss) < 0) {
        sl_errf(err, errlen, "invalid listen address \"%s\" (want IP:PORT or [IPv6]:PORT)",
                addr_port);
        return SL_EINVAL;
    }
    l = listener_slot(srv, false);
    if (l == NULL) {
        sl_errf(err, errlen, "too many listeners");
        return SL_ETOOBIG;
    }
    l->tls = tls;
    rc = uv_tcp_init_ex(srv->loop, &l->sock.tcp, ss.ss_family);
    if (rc < 0) {
        sl_errf(err, errlen, "cannot listen on %s: %s", addr_port, uv_strerror(rc));
        return rc;
    }
    listener_opened(l);
    rc = uv_tcp_bind(&l->sock.tcp, (const struct sockaddr *)&ss, 0);
    SL_TRY(listen_after_bind(l, rc, addr_port, err, errlen));
    record_tcp_port(l);
    return 0;
}

int sl_http_server_listen_tcp(struct sl_http_server *srv, const char *addr_port, char *err,
                              size_t errlen)
{
    return listen_tcp(srv, addr_port, NULL, err, errlen);
}

int sl_http_server_listen_tls(struct sl_http_server *srv, const char *addr_port,
                              struct sl_http_tls *tls, char *err, size_t errlen)
{
    if (tls == NULL) {
        sl_errf(err, errlen, "no TLS context for %s", addr_port);
        return SL_EINVAL;
    }
    return listen_tcp(srv, addr_port, tls, err, errlen);
}

/* 1 when a server accepts connections on the unix socket `path`, 0 when none does (a stale
 * file), or a negative error. Never blocks: the probe socket is non-blocking. */
static int unix_socket_is_live(const char *path)
{
    struct sockaddr_un sa;
    int fd;
    int rc;
    int saved;

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path) + 1); /* length checked by the caller */
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd == -1) {
        return -errno;
    }
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) == -1 || fcntl(fd, F_SETFL, O_NONBLOCK) == -1) {
        saved = errno;
        (void)close(fd);
        return -saved;
    }
    rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    saved = errno;
    (void)close(fd);
    if (rc == 0 || saved == EAGAIN || saved == EINPROGRESS) {
        return 1; /* accepted, or a full backlog: someone listens */
    }
    if (saved == ECONNREFUSED || saved == ENOENT) {
        return 0;
    }
    return -saved;
}

/* Makes `path` free for bind(2): nothing there, or a stale socket (removed). */
static int clear_unix_path(const char *path, char *err, size_t errlen)
{
    struct stat st;
    int rc;

    if (lstat(path, &st) == -1) {
        if (errno == ENOENT) {
            return 0;
        }
        rc = -errno;
        sl_errf(err, errlen, "cannot inspect %s: %s", path, uv_strerror(rc));
        return rc;
    }
    if (!S_ISSOCK(st.st_mode)) {
        sl_errf(err, errlen, "%s exists and is not a socket; not replacing it", path);
        return SL_EEXIST;
    }
    rc = unix_socket_is_live(path);
    if (rc != 0) {
        if (rc > 0) {
            rc = UV_EADDRINUSE;
        }
        sl_errf(err, errlen, "%s: %s", path,
                rc == UV_EADDRINUSE ? "another server listens on it" : uv_strerror(rc));
        return rc;
    }
    if (unlink(path) == -1 && errno != ENOENT) {
        rc = -errno;
        sl_errf(err, errlen, "cannot remove the stale socket %s: %s", path, uv_strerror(rc));
        return rc;
    }
    return 0;
}

int sl_http_server_listen_unix(struct sl_http_server *srv, const char *path, int mode, char *err,
                               size_t errlen)
{
    struct sockaddr_un sa;
    struct sl__http_listener *l;
    mode_t old;
    int rc;

    if (srv->closing || mode < 0 || (mode & ~0777) != 0 || path[0] == '\0'
        || strlen(path) >= sizeof(sa.sun_path)) {
        sl_errf(err, errlen, "cannot listen on %s: invalid path, mode or state", path);
        return SL_EINVAL;
    }
    SL_TRY(clear_unix_path(path, err, errlen));
    l = listener_slot(srv, true);
    if (l == NULL) {
        sl_errf(err, errlen, "too many listeners");
        return SL_ETOOBIG;
    }
    rc = uv_pipe_init(srv->loop, &l->sock.pipe, 0);
    if (rc < 0) {
        sl_errf(err, errlen, "cannot listen on %s: %s", path, uv_strerror(rc));
        return rc;
    }
    listener_opened(l);
    /* bind(2) creates the file with 0777 & ~umask: with this umask it never exists with
     * wider permissions than `mode`, not even for a moment. */
    old = umask((mode_t)(~mode & 0777));
    rc = uv_pipe_bind(&l->sock.pipe, path);
    (void)umask(old);
    return listen_after_bind(l, rc, path, err, errlen);
}

int sl_http_server_port(const struct sl_http_server *srv)
{
    return srv->tcp_port >= 0 ? srv->tcp_port : SL_ENOTFOUND;
}

size_t sl_http_server_connections(const struct sl_http_server *srv)
{
    return srv->n_conns;
}

/* Closes every connection still open (their exchanges are marked gone) and the anchor: the
 * server is freed once their handles have closed. */
static void close_now(struct sl_http_server *srv)
{
    srv->draining = false;
    sl__http_conns_close(srv);
    uv_close((uv_handle_t *)&srv->anchor, on_anchor_closed);
}

static void on_grace_over(uv_timer_t *t)
{
    struct sl_http_server *srv = SL_CONTAINER_OF(t, struct sl_http_server, anchor);

    sl_log(SL_LOG_WARN, 0,
           "msg=\"requests still in flight when the grace period ended; their connections are "
           "closed\" connections=%zu",
           srv->n_conns);
    close_now(srv);
}

static void begin_close(struct sl_http_server *srv, sl_http_closed_fn *closed, void *arg)
{
    srv->closing = true;
    srv->closed = closed;
    srv->closed_arg = arg;
    for (size_t i = 0; i < SL_ARRAY_LEN(srv->listeners); i++) {
        listener_close(&srv->listeners[i]);
    }
}

void sl_http_server_close(struct sl_http_server *srv, sl_http_closed_fn *closed, void *arg)
{
    if (srv->closing) {
        if (srv->draining) {
            close_now(srv); /* ends the drain at once */
        }
        return;
    }
    begin_close(srv, closed, arg);
    close_now(srv);
}

void sl_http_server_drain(struct sl_http_server *srv, uint64_t grace_ms, sl_http_closed_fn *closed,
                          void *arg)
{
    if (srv->closing) {
        return;
    }
    begin_close(srv, closed, arg);
    if (sl__http_conns_drain(srv) == 0 || grace_ms == 0) {
        close_now(srv);
        return;
    }
    srv->draining = true;
    (void)uv_timer_start(&srv->anchor, on_grace_over, grace_ms, 0);
}
