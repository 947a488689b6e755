/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/http/test_server.c - the HTTP/1.1 server over real loopback and unix sockets.
 *
 * Each test runs the server on a fresh loop in the main thread and a blocking client on a
 * helper thread. The client never asserts (cmocka cannot fail from another thread): it
 * records its first failed check, signals the loop to close the server when it is done, and
 * the main thread asserts everything after the loop has ended and the thread is joined.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/mem.h"
#include "http/server.h"
#include "tests/support/tmpdir.h"

#define SEEN_MAX     16
#define CL_BUF_BYTES ((size_t)128 * 1024)
/* A response larger than loopback socket buffers can hold, for the client that never reads. */
#define BIG_BYTES ((size_t)16 * 1024 * 1024)

struct fx {
    uv_loop_t loop;
    struct sl_http_server *srv;
    int port;
    uv_async_t done;
    atomic_bool signalled;
    pthread_t thread;
    void (*client)(struct fx *f);
    /* Loop thread (handler) records; read by the main thread after the loop ends. */
    int calls;
    uint64_t conn_ids[SEEN_MAX];
    char last_method[16];
    char last_path[256];
    char last_query[256];
    char last_peer[96];
    char last_body[4096];
    size_t last_body_len;
    int async_done;
    int async_gone;
    int gate_calls;
    int closed_calls;
    /* When not 0, the end of the client drains the server with this grace period instead of
     * closing it. */
    uint64_t drain_ms;
    /* With drain_ms: sl_http_server_close() right after the drain (which ends it). */
    bool close_in_drain;
    /* Client thread records; read by the main thread after the join. */
    char why[512];
    int results[8];
    char dir[64];
    char sock_path[128];
};

static struct fx the_fx;
static char big_body[BIG_BYTES];

/* ---- Loop side: the test handler ---- */

struct later {
    uv_timer_t timer;
    struct sl_http_exchange *x;
    struct fx *f;
};

static void on_later_closed(uv_handle_t *h)
{
    sl_free(SL_CONTAINER_OF(h, struct later, timer));
}

static void on_later(uv_timer_t *t)
{
    struct later *l = SL_CONTAINER_OF(t, struct later, timer);

    l->f->async_gone += sl_http_exchange_is_gone(l->x) ? 1 : 0;
    l->f->async_done++;
    sl_http_respond(l->x, 200, "text/plain", "later", 5);
    uv_close((uv_handle_t *)&l->timer, on_later_closed);
}

static void respond_later(struct fx *f, struct sl_http_exchange *x, uint64_t ms)
{
    struct later *l = sl_malloc(sizeof(*l));

    if (l == NULL) {
        sl_http_respond_error(x, 503, "out of memory");
        return;
    }
    l->x = x;
    l->f = f;
    (void)uv_timer_init(&f->loop, &l->timer);
    (void)uv_timer_start(&l->timer, on_later, ms, 0);
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    (void)snprintf(dst, cap, "%s", src);
}

static void record(struct fx *f, const struct sl_http_request *req)
{
    if (f->calls < SEEN_MAX) {
        f->conn_ids[f->calls] = req->conn_id;
    }
    f->calls++;
    copy_str(f->last_method, sizeof(f->last_method), req->method);
    copy_str(f->last_path, sizeof(f->last_path), req->path);
    copy_str(f->last_query, sizeof(f->last_query), req->query);
    copy_str(f->last_peer, sizeof(f->last_peer), req->peer);
    f->last_body_len = req->body.n;
    memcpy(f->last_body, req->body.p,
           req->body.n < sizeof(f->last_body) ? req->body.n : sizeof(f->last_body));
}

static void handler(struct sl_http_exchange *x, const struct sl_http_request *req, void *arg)
{
    static const char *const extra[] = { "X-Test: yes", "Cache-Control: no-store", NULL };
    static const char *const reserved[] = { "Content-Length: 99", NULL };
    struct fx *f = arg;
    const char *p = req->path;
    char text[64];

    assert_ptr_equal(sl_http_exchange_request(x), req);
    record(f, req);
    if (strcmp(p, "/echo") == 0) {
        sl_http_respond(x, 200, "application/octet-stream", req->body.p, req->body.n);
    } else if (strcmp(p, "/async") == 0) {
        respond_later(f, x, 50);
    } else if (strcmp(p, "/async-slow") == 0) {
        respond_later(f, x, 300);
    } else if (strcmp(p, "/async-3s") == 0) {
        respond_later(f, x, 3000);
    } else if (strcmp(p, "/headers") == 0) {
        sl_http_respond_headers(x, 201, extra, "text/plain", "made", 4);
    } else if (strcmp(p, "/reserved") == 0) {
        sl_http_respond_headers(x, 200, reserved, "text/plain", "oops", 4);
    } else if (strcmp(p, "/every") == 0) {
        static const char *const every[] = { "X-Every: 1", "Cache-Control: no-store", NULL };

        sl_http_exchange_set_headers(x, every);
        if (strcmp(req->query, "error") == 0) {
            sl_http_respond_error(x, 409, "taken");
        } else {
            sl_http_respond_headers(x, 201, extra, "text/plain", "made", 4);
        }
    } else if (strcmp(p, "/every-bad") == 0) {
        static const char *const bad[] = { "Connection: keep-alive", NULL };

        sl_http_exchange_set_headers(x, bad);
        sl_http_respond(x, 200, "text/plain", "oops", 4);
    } else if (strcmp(p, "/error") == 0) {
        sl_http_respond_error(x, 404, "no \"such\" thing\n\x01\xff");
    } else if (strcmp(p, "/nocontent") == 0) {
        sl_http_respond(x, 204, NULL, NULL, 0);
    } else if (strcmp(p, "/big") == 0) {
        sl_http_respond(x, 200, "application/octet-stream", big_body, sizeof(big_body));
    } else if (strcmp(p, "/count") == 0) {
        (void)snprintf(text, sizeof(text), "%zu", sl_http_server_connections(f->srv));
        sl_http_respond(x, 200, "text/plain", text, strlen(text));
    } else {
        sl_http_respond(x, 200, "text/plain", p, strlen(p));
    }
}

/* ---- Loop side: the fixture ---- */

static void on_server_closed(void *arg)
{
    struct fx *f = arg;

    f->closed_calls++;
    f->srv = NULL;
}

static void on_done(uv_async_t *a)
{
    struct fx *f = SL_CONTAINER_OF(a, struct fx, done);

    uv_close((uv_handle_t *)a, NULL);
    if (f->drain_ms > 0) {
        sl_http_server_drain(f->srv, f->drain_ms, on_server_closed, f);
        sl_http_server_drain(f->srv, f->drain_ms, on_server_closed, f); /* idempotent */
        if (f->close_in_drain) {
            sl_http_server_close(f->srv, on_server_closed, f);
        }
        return;
    }
    sl_http_server_close(f->srv, on_server_closed, f);
    sl_http_server_close(f->srv, on_server_closed, f); /* idempotent */
}

static void fx_init(struct fx *f, const struct sl_http_server_config *cfg)
{
    char err[256];

    memset(f, 0, sizeof(*f));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(sl_http_server_create(&f->loop, cfg, handler, f, &f->srv), 0);
    assert_int_equal(sl_http_server_port(f->srv), SL_ENOTFOUND);
    if (sl_http_server_listen_tcp(f->srv, "127.0.0.1:0", err, sizeof(err)) != 0) {
        fail_msg("listen: %s", err);
    }
    f->port = sl_http_server_port(f->srv);
    assert_true(f->port > 0);
}

/* Client side: asks the loop to close the server (once). */
static void fx_signal(struct fx *f)
{
    if (!atomic_exchange(&f->signalled, true)) {
        (void)uv_async_send(&f->done);
    }
}

static void *client_main(void *arg)
{
    struct fx *f = arg;

    f->client(f);
    fx_signal(f);
    return NULL;
}

static void fx_run(struct fx *f, void (*client)(struct fx *f))
{
    f->client = client;
    assert_int_equal(uv_async_init(&f->loop, &f->done, on_done), 0);
    assert_int_equal(pthread_create(&f->thread, NULL, client_main, f), 0);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(pthread_join(f->thread, NULL), 0);
    assert_int_equal(f->closed_calls, 1);
    assert_null(f->srv);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    if (f->why[0] != '\0') {
        fail_msg("client: %s", f->why);
    }
}

/* One case: a server with `cfg` (NULL: the defaults), `client` run against it on its own
 * thread, and the number of requests the handler must have seen. */
static void fx_case(const struct sl_http_server_config *cfg, void (*client)(struct fx *f),
                    int calls)
{
    fx_init(&the_fx, cfg);
    fx_run(&the_fx, client);
    assert_int_equal(the_fx.calls, calls);
}

/* ---- Client side: a small blocking HTTP client ---- */

#define CHECK(f, cond)                         \
    do {                                       \
        if (!(cond)) {                         \
            client_fail((f), __LINE__, #cond); \
            return;                            \
        }                                      \
    } while (0)

static void client_fail(struct fx *f, int line, const char *what)
{
    if (f->why[0] == '\0') {
        (void)snprintf(f->why, sizeof(f->why), "line %d: %s", line, what);
    }
}

struct cl {
    int fd;
    size_t len;
    char buf[CL_BUF_BYTES + 1];
};

struct resp {
    int status;
    char head[8192];
    char body[CL_BUF_BYTES];
    size_t body_len;
};

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

static long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void cl_set_timeout(int fd)
{
    struct timeval tv = { 5, 0 };

    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static bool cl_connect(struct cl *c, int port, int rcvbuf)
{
    struct sockaddr_in sa;

    c->len = 0;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd == -1) {
        return false;
    }
    cl_set_timeout(c->fd);
    if (rcvbuf > 0) {
        (void)setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    }
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
}

static bool cl_connect_unix(struct cl *c, const char *path)
{
    struct sockaddr_un sa;

    c->len = 0;
    c->fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (c->fd == -1) {
        return false;
    }
    cl_set_timeout(c->fd);
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    return connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
}

static void cl_close(struct cl *c)
{
    if (c->fd != -1) {
        (void)close(c->fd);
        c->fd = -1;
    }
}

static bool cl_send_n(struct cl *c, const void *p, size_t n)
{
    const char *s = p;

    while (n > 0) {
        ssize_t w = send(c->fd, s, n, 0);

        if (w <= 0) {
            return false;
        }
        s += w;
        n -= (size_t)w;
    }
    return true;
}

static bool cl_send(struct cl *c, const char *s)
{
    return cl_send_n(c, s, strlen(s));
}

/* Receives more bytes: >0 bytes, 0 at EOF, -1 on error or timeout. */
static ssize_t cl_fill(struct cl *c)
{
    ssize_t n;

    if (c->len >= CL_BUF_BYTES) {
        return -1;
    }
    n = recv(c->fd, c->buf + c->len, CL_BUF_BYTES - c->len, 0);
    if (n > 0) {
        c->len += (size_t)n;
    }
    c->buf[c->len] = '\0';
    return n;
}

/* The value of header `name` in `r`, copied to `out`, or NULL. */
static const char *resp_header(const struct resp *r, const char *name, char *out, size_t cap)
{
    const char *line = strstr(r->head, "\r\n");
    size_t n = strlen(name);

    while (line != NULL && line[2] != '\r' && line[2] != '\0') {
        const char *start = line + 2;
        const char *end = strstr(start, "\r\n");

        if (strncasecmp(start, name, n) == 0 && start[n] == ':') {
            const char *v = start + n + 1;
            size_t len;

            while (*v == ' ') {
                v++;
            }
            len = end != NULL ? (size_t)(end - v) : strlen(v);
            if (len >= cap) {
                len = cap - 1;
            }
            memcpy(out, v, len);
            out[len] = '\0';
            return out;
        }
        line = end;
    }
    return NULL;
}

/* Reads one response. 0, or -1 when the connection closed or timed out first. */
static int cl_response(struct cl *c, struct resp *r, bool head_only)
{
    char *end;
    size_t head_len;
    size_t need = 0;
    char v[32];

    memset(r->head, 0, sizeof(r->head));
    r->status = 0;
    r->body_len = 0;
    r->body[0] = '\0';
    while ((end = strstr(c->buf, "\r\n\r\n")) == NULL) {
        if (cl_fill(c) <= 0) {
            return -1;
        }
    }
    head_len = (size_t)(end + 4 - c->buf);
    if (head_len >= sizeof(r->head) || strncmp(c->buf, "HTTP/1.1 ", 9) != 0) {
        return -1;
    }
    memcpy(r->head, c->buf, head_len);
    r->status = (int)strtol(r->head + 9, NULL, 10);
    if (!head_only && r->status >= 200 && r->status != 204 && r->status != 304
        && resp_header(r, "content-length", v, sizeof(v)) != NULL) {
        need = (size_t)strtoul(v, NULL, 10);
    }
    if (need >= sizeof(r->body)) {
        return -1;
    }
    while (c->len < head_len + need) {
        if (cl_fill(c) <= 0) {
            return -1;
        }
    }
    memcpy(r->body, c->buf + head_len, need);
    r->body[need] = '\0';
    r->body_len = need;
    memmove(c->buf, c->buf + head_len + need, c->len - head_len - need + 1);
    c->len -= head_len + need;
    return 0;
}

/* True when the server closes the connection (EOF or reset) without sending anything more. */
static bool cl_closed(struct cl *c)
{
    for (;;) {
        ssize_t n;

        if (c->len > 0) {
            return false;
        }
        n = cl_fill(c);
        if (n == 0) {
            return true;
        }
        if (n < 0) {
            return errno == ECONNRESET;
        }
    }
}

static bool json_error_is(const struct resp *r, const char *key)
{
    char v[64];
    char prefix[48];

    (void)snprintf(prefix, sizeof(prefix), "{\"%s\":\"", key);
    return resp_header(r, "content-type", v, sizeof(v)) != NULL
           && strcmp(v, "application/json") == 0 && strncmp(r->body, prefix, strlen(prefix)) == 0
           && r->body[r->body_len - 1] == '}';
}

static struct cl cl_shot;

/* One request on a fresh connection; expects `status`, then (when `closes`) the close. */
static bool one_shot(struct fx *f, const char *req, int status, bool closes, struct resp *r)
{
    struct cl *c = &cl_shot;
    bool ok;

    ok = cl_connect(c, f->port, 0) && cl_send(c, req) && cl_response(c, r, false) == 0
         && r->status == status && (!closes || cl_closed(c));
    cl_close(c);
    return ok;
}

/* Client scratch space (one client thread at a time). */
static struct cl cl_a;
static struct cl cl_b;
static struct cl cl_c;
static struct resp resp_a;
static struct resp resp_b;

/* ---- Tests ---- */

static void client_simple_get(struct fx *f)
{
    struct cl *c = &cl_a;
    struct resp *r = &resp_a;
    char v[64];

    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "GET /hello?x=1&y HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(f, cl_response(c, r, false) == 0);
    CHECK(f, r->status == 200);
    CHECK(f, strcmp(r->body, "/hello") == 0);
    CHECK(f, strncmp(r->head, "HTTP/1.1 200 OK\r\n", 17) == 0);
    CHECK(f, resp_header(r, "content-length", v, sizeof(v)) && strcmp(v, "6") == 0);
    CHECK(f, resp_header(r, "content-type", v, sizeof(v)) && strcmp(v, "text/plain") == 0);
    CHECK(f, resp_header(r, "server", v, sizeof(v)) && strcmp(v, "sluice") == 0);
    CHECK(f,
          resp_header(r, "date", v, sizeof(v)) && strlen(v) == 29 && strcmp(v + 25, " GMT") == 0);
    CHECK(f, resp_header(r, "connection", v, sizeof(v)) == NULL);
    cl_close(c);
}

static void serves_a_simple_get(void **state)
{
    struct fx *f = &the_fx;

    (void)state;
    fx_case(NULL, client_simple_get, 1);
    assert_string_equal(f->last_method, "GET");
    assert_string_equal(f->last_path, "/hello");
    assert_string_equal(f->last_query, "x=1&y");
    assert_int_equal(f->last_body_len, 0);
    assert_true(strncmp(f->last_peer, "127.0.0.1:", 10) == 0);
}

static void client_bodies(struct fx *f)
{
    static const char *const chunks[] = { "POST /echo HTTP/1.1\r\nHost: t\r\n",
                                          "Transfer-Encoding: chunked\r\n\r\n5\r\nhel",
                                          "lo\r\n6\r\n world\r\n", "0\r\n\r\n" };
    struct cl *c = &cl_a;
    struct resp *r = &resp_a;

    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello"));
    sleep_ms(20);
    CHECK(f, cl_send(c, " there"));
    CHECK(f, cl_response(c, r, false) == 0);
    CHECK(f, r->status == 200 && strcmp(r->body, "hello there") == 0);
    for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
        CHECK(f, cl_send(c, chunks[i]));
        sleep_ms(10);
    }
    CHECK(f, cl_response(c, r, false) == 0);
    CHECK(f, r->status == 200 && strcmp(r->body, "hello world") == 0);
    cl_close(c);
}

static void delivers_length_and_chunked_bodies_whole(void **state)
{
    struct fx *f = &the_fx;

    (void)state;
    fx_case(NULL, client_bodies, 2);
    assert_string_equal(f->last_method, "POST");
    assert_int_equal(f->last_body_len, 11);
    assert_memory_equal(f->last_body, "hello world", 11);
}

static void client_body_over_limit(struct fx *f)
{
    struct cl *c = &cl_a;
    struct resp *r = &resp_a;
    char chunk[700];

    /* Refused from Content-Length alone: the body is never sent. */
    CHECK(f, one_shot(f, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n", 413,
                      true, r));
    CHECK(f, json_error_is(r, "message"));
    CHECK(f, strstr(r->head, "Connection: close\r\n") != NULL);
    /* Chunked: refused as soon as the decoded data passes the cap. */
    memset(chunk, 'a', sizeof(chunk));
    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"));
    CHECK(f, cl_send(c, "2bc\r\n") && cl_send_n(c, chunk, sizeof(chunk)) && cl_send(c, "\r\n"));
    CHECK(f, cl_send(c, "2bc\r\n") && cl_send_n(c, chunk, sizeof(chunk)) && cl_send(c, "\r\n"));
    CHECK(f, cl_response(c, r, false) == 0);
    CHECK(f, r->status == 413);
    CHECK(f, cl_closed(c));
    cl_close(c);
}

static void refuses_a_body_over_the_limit_with_413(void **state)
{
    struct sl_http_server_config cfg = { .body_max_bytes = 1024 };

    (void)state;
    fx_case(&cfg, client_body_over_limit, 0);
}

static void client_head_over_limit(struct fx *f)
{
    struct resp *r = &resp_a;
    char req[4096];
    char pad[2001];

    memset(pad, 'p', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    (void)snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: t\r\nX-Pad: %s\r\n\r\n", pad);
    CHECK(f, one_shot(f, req, 431, true, r));
    CHECK(f, json_error_is(r, "message"));
    /* A request target over the limit alone is a request line too long: 414, named. */
    (void)snprintf(req, sizeof(req), "GET /%s HTTP/1.1\r\nHost: t\r\n\r\n", pad);
    CHECK(f, one_shot(f, req, 414, true, r));
    CHECK(f, json_error_is(r, "message") && strstr(r->body, "request target too long") != NULL);
    /* Too many header lines is the same refusal. */
    CHECK(f, one_shot(f, "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n", 431,
                      true, r));
}

static void refuses_a_head_over_the_limit_with_431_or_414(void **state)
{
    struct sl_http_server_config cfg = { .head_limits = { 1024, 4 } };

    (void)state;
    fx_case(&cfg, client_head_over_limit, 0);
}

static void client_garbage(struct fx *f)
{
    static const char *const bad[] = {
        "\x01\x02 nonsense\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        "GET / HTTP/1.1\nHost: t\n\n",
        "GET / HTTP/1.1\r\nHost: t\r\n folded\r\n\r\n",
        "GET / HTTP/2.0\r\nHost: t\r\n\r\n",
        "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
        "GET /a b HTTP/1.1\r\n\r\n",
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    };
    struct resp *r = &resp_a;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (!one_shot(f, bad[i], 400, true, r) || !json_error_is(r, "error")) {
            (void)snprintf(f->why, sizeof(f->why), "input %zu: status %d body %.200s", i, r->status,
                           r->body);
            return;
        }
    }
    /* A NUL byte in a header value. */
    {
        static const char nul[] = "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n";
        struct cl *c = &cl_a;

        CHECK(f, cl_connect(c, f->port, 0));
        CHECK(f, cl_send_n(c, nul, sizeof(nul) - 1));
        CHECK(f, cl_response(c, r, false) == 0 && r->status == 400);
        CHECK(f, cl_closed(c));
        cl_close(c);
    }
}

static void answers_garbage_with_a_json_400(void **state)
{
    struct sl_http_server_config cfg = { .error_key = "error" };

    (void)state;
    fx_case(&cfg, client_garbage, 0);
}

static void client_non_origin_targets(struct fx *f)
{
    struct resp *r = &resp_a;

    CHECK(f, one_shot(f, "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", 400, true,
                      r));
    CHECK(f, json_error_is(r, "message"));
    CHECK(f, one_shot(f, "OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n", 400, true, r));
    CHECK(f, one_shot(f, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 400,
                      true, r));
}

static void client_http_rules(struct fx *f)
{
    static const char *const repeated[] = { "Host", "Authorization", "Content-Type", "Origin" };
    struct resp *r = &resp_a;
    char req[256];

    /* RFC 9112 §3.2: HTTP/1.1 needs Host; HTTP/1.0 does not. */
    CHECK(f, one_shot(f, "GET /x HTTP/1.1\r\n\r\n", 400, true, r));
    CHECK(f, json_error_is(r, "message") && strstr(r->body, "needs a Host header") != NULL);
    CHECK(f, strstr(r->head, "\r\nCache-Control: no-store\r\n") != NULL);
    CHECK(f, one_shot(f, "GET /x HTTP/1.0\r\n\r\n", 200, true, r));
    for (size_t i = 0; i < SL_ARRAY_LEN(repeated); i++) {
        (void)snprintf(req, sizeof(req), "GET /x HTTP/1.1\r\nHost: t\r\n%s: a\r\n%s: a\r\n\r\n",
                       repeated[i], repeated[i]);
        CHECK(f, one_shot(f, req, 400, true, r));
        (void)snprintf(req, sizeof(req), "more than one %s header", repeated[i]);
        CHECK(f, strstr(r->body, req) != NULL);
    }
    CHECK(f, one_shot(f,
                      "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n"
                      "Content-Length: 1\r\n\r\nab",
                      400, true, r));
    /* A method no one knows is 501, with our words; one llhttp knows reaches the handler. */
    CHECK(f, one_shot(f, "FOO /x HTTP/1.1\r\nHost: t\r\n\r\n", 501, true, r));
    CHECK(f, strcmp(r->body, "{\"message\":\"method not implemented\"}") == 0);
    CHECK(f, one_shot(f, "get /x HTTP/1.1\r\nHost: t\r\n\r\n", 501, true, r));
    CHECK(f, one_shot(f, "PROPFIND /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 200, true,
                      r));
    /* The lines of the exchange are on every answer it gets. */
    CHECK(f,
          one_shot(f, "GET /every HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 201, true, r));
    CHECK(f, strstr(r->head, "\r\nX-Test: yes\r\n") != NULL
                     && strstr(r->head, "\r\nX-Every: 1\r\n") != NULL);
    CHECK(f, one_shot(f, "GET /every?error HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 409,
                      true, r));
    CHECK(f, strstr(r->head, "\r\nX-Every: 1\r\n") != NULL && json_error_is(r, "message"));
    CHECK(f, one_shot(f, "GET /every-bad HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 500,
                      true, r));
    CHECK(f, strstr(r->head, "keep-alive") == NULL);
}

static void refuses_what_http_forbids_and_adds_the_exchanges_lines(void **state)
{
    (void)state;
    fx_case(NULL, client_http_rules, 5);
}

static void refuses_targets_other_than_origin_form(void **state)
{
    (void)state;
    fx_case(NULL, client_non_origin_targets, 0);
}

static void client_keep_alive(struct fx *f)
{
    struct cl *c = &cl_a;
    struct resp *r = &resp_a;

    CHECK(f, cl_connect(c, f->port, 0));
    for (int i = 0; i < 3; i++) {
        char req[64];
        char want[16];

        (void)snprintf(req, sizeof(req), "GET /r%d HTTP/1.1\r\nHost: t\r\n\r\n", i);
        (void)snprintf(want, sizeof(want), "/r%d", i);
        CHECK(f, cl_send(c, req));
        CHECK(f, cl_response(c, r, false) == 0);
        CHECK(f, r->status == 200 && strcmp(r->body, want) == 0);
    }
    /* HTTP/1.0 closes after its response. */
    CHECK(f, cl_send(c, "GET /last HTTP/1.0\r\n\r\n"));
    CHECK(f, cl_response(c, r, false) == 0 && r->status == 200);
    CHECK(f, strstr(r->head, "Connection: close\r\n") != NULL);
    CHECK(f, cl_closed(c));
    cl_close(c);
    /* So does Connection: close. */
    CHECK(f, one_shot(f, "GET /c HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 200, true, r));
}

static void keeps_a_connection_alive_for_several_requests(void **state)
{
    struct fx *f = &the_fx;

    (void)state;
    fx_case(NULL, client_keep_alive, 5);
    assert_true(f->conn_ids[0] == f->conn_ids[1] && f->conn_ids[1] == f->conn_ids[2]
                && f->conn_ids[2] == f->conn_ids[3]);
    assert_true(f->conn_ids[4] != f->conn_ids[0]);
}

static void client_pipelining(struct fx *f)
{
    struct cl *c = &cl_a;
    struct resp *r = &resp_a;

    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n"
                        "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nxyz"
                        "GET /b HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(f, cl_response(c, r, false) == 0 && strcmp(r->body, "/a") == 0);
    CHECK(f, cl_response(c, r, false) == 0 && strcmp(r->body, "xyz") == 0);
    CHECK(f, cl_response(c, r, false) == 0 && strcmp(r->body, "/b") == 0);
    /* Pipelined after a close: never answered. */
    CHECK(f, cl_send(c, "GET /c HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\nGET /d "
                        "HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(f, cl_response(c, r, false) == 0 && strcmp(r->body, "/c") == 0);
    CHECK(f, cl_closed(c));
    cl_close(c);
    /* An upgrade is never granted: a plain answer, then the connection ends. */
    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\n\r\n\x81\x00"));
    CHECK(f, cl_response(c, r, false) == 0 && strcmp(r->body, "/ws") == 0);
    CHECK(f, strstr(r->head, "Connection: close\r\n") != NULL);
    CHECK(f, cl_closed(c));
    cl_close(c);
}

static void answers_pipelined_requests_in_order(void **state)
{
    (void)state;
    fx_case(NULL, client_pipelining, 5);
}

static void client_async(struct fx *f)
{
    struct cl *a = &cl_a;
    struct cl *b = &cl_b;
    struct resp *r = &resp_a;
    long t0 = now_ms();

    CHECK(f, cl_connect(a, f->port, 0) && cl_connect(b, f->port, 0));
    CHECK(f,
          cl_send(a,
                  "GET /async HTTP/1.1\r\nHost: t\r\n\r\nGET /after HTTP/1.1\r\nHost: t\r\n\r\n"));
    /* Another connection is served while the first waits for its handler. */
    CHECK(f, cl_send(b, "GET /other HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(f, cl_response(b, r, false) == 0 && strcmp(r->body, "/other") == 0);
    CHECK(f, cl_response(a, r, false) == 0 && strcmp(r->body, "later") == 0);
    CHECK(f, now_ms() - t0 >= 40);
    CHECK(f, cl_response(a, r, false) == 0 && strcmp(r->body, "/after") == 0);
    cl_close(a);
    cl_close(b);
}

static void answers_asynchronously_from_a_timer(void **state)
{
    struct fx *f = &the_fx;

    (void)state;
    fx_case(NULL, client_async, 3);
    assert_int_equal(f->async_done, 1);
    assert_int_equal(f->async_gone, 0);
}

static void client_leaves_early(struct fx *f)
{
    struct cl *a = &cl_a;
    struct linger lg = { 1, 0 };

    /* A plain close (FIN) and a reset (RST) before the answer. */
    CHECK(f, cl_connect(a, f->port, 0));
    CHECK(f, cl_send(a, "GET /async HTTP/1.1\r\nHost: t\r\n\r\n"));
    sleep_ms(10);
    cl_close(a);
    CHECK(f, cl_connect(a, f->port, 0));
    CHECK(f, cl_send(a, "GET /async HTTP/1.1\r\nHost: t\r\n\r\n"));
    sleep_ms(10);
    (void)setsockopt(a->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    cl_close(a);
    sleep_ms(250);
}

static void survives_a_client_leaving_before_an_async_answer(void **state)
{
    struct fx *f = &the_fx;

    (void)state;
    fx_case(NULL, client_leaves_early, 2);
    assert_int_equal(f->async_done, 2);
}

static void client_expect_continue(struct fx *f)
{
    struct cl *c = &cl_a;
    struct resp *r = &resp_a;

    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
                        "Expect: 100-continue\r\n\r\n"));
    CHECK(f, cl_response(c, r, false) == 0);
    CHECK(f, r->status == 100 && strcmp(r->head, "HTTP/1.1 100 Continue\r\n\r\n") == 0);
    CHECK(f, cl_send(c, "hello"));
    CHECK(f, cl_response(c, r, false) == 0 && r->status == 200);
    CHECK(f, strcmp(r->body, "hello") == 0);
    cl_close(c);
    /* Over the limit: 413 instead of 100. */
    CHECK(f, one_shot(f,
                      "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n"
                      "Expect: 100-continue\r\n\r\n",
                      413, true, r));
}

static void sends_100_continue_before_reading_the_body(void **state)
{
    struct sl_http_server_config cfg = { .body_max_bytes = 1024 };

    (void)state;
    fx_case(&cfg, client_expect_continue, 1);
}

/* ---- the gate of request bodies ---- */

static void on_gate_later(uv_timer_t *t)
{
    struct later *l = SL_CONTAINER_OF(t, struct later, timer);

    l->f->async_gone += sl_http_exchange_is_gone(l->x) ? 1 : 0;
    l->f->async_done++;
    sl_http_proceed(l->x);
    uv_close((uv_handle_t *)&l->timer, on_later_closed);
}

/* By the path: /gate-refuse is answered 401 by the gate, /gate-later let in 50 ms later,
 * anything else let in at once. Sees no body. */
static void gate(struct sl_http_exchange *x, const struct sl_http_request *req, void *arg)
{
    struct fx *f = arg;
    struct later *l;

    assert_int_equal(req->body.n, 0);
    f->gate_calls++;
    if (strcmp(req->path, "/gate-refuse") == 0) {
        sl_http_respond_error(x, 401, "who are you");
    } else if (strcmp(req->path, "/gate-later") == 0) {
        l = sl_malloc(sizeof(*l));
        assert_non_null(l);
        l->x = x;
        l->f = f;
        (void)uv_timer_init(&f->loop, &l->timer);
        (void)uv_timer_start(&l->timer, on_gate_later, 50, 0);
    } else {
        sl_http_proceed(x);
    }
}

static void client_gated(struct fx *f)
{
    struct cl *c = &cl_a;
    struct resp *r = &resp_a;

    /* Refused by the gate: no 100 Continue, the 401 at once, the connection closed without
     * waiting for the 1 MiB announced. */
    CHECK(f, one_shot(f,
                      "POST /gate-refuse HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n"
                      "Expect: 100-continue\r\n\r\n",
                      401, true, r));
    CHECK(f, json_error_is(r, "message") && strstr(r->body, "who are you") != NULL);
    /* Let in later: then 100 Continue, the body read, the handler called; the connection
     * stays for a request without a body, which the gate never sees. */
    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "POST /gate-later HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n"
                        "Expect: 100-continue\r\n\r\n"));
    CHECK(f, cl_response(c, r, false) == 0 && r->status == 100);
    CHECK(f, cl_send(c, "hello"));
    CHECK(f, cl_response(c, r, false) == 0 && r->status == 200);
    CHECK(f, strcmp(r->body, "/gate-later") == 0);
    CHECK(f, cl_send(c, "GET /plain HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(f, cl_response(c, r, false) == 0 && r->status == 200);
    /* A body sent with the head (no Expect), a chunked one, let in at once. */
    CHECK(f, cl_send(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc"));
    CHECK(f, cl_response(c, r, false) == 0 && r->status == 200 && strcmp(r->body, "abc") == 0);
    CHECK(f, cl_send(c, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "2\r\nxy\r\n0\r\n\r\n"));
    CHECK(f, cl_response(c, r, false) == 0 && r->status == 200 && strcmp(r->body, "xy") == 0);
    cl_close(c);
    /* The server closes while the gate holds a request (the client returns 20 ms after its
     * head): the gate's answer 30 ms later finds it gone. */
    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "POST /gate-later HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\n"));
    sleep_ms(20);
    cl_close(c);
}

static void the_gate_sees_heads_with_a_body_before_any_byte_of_it(void **state)
{
    struct sl_http_server_config cfg = { .gate = gate };
    struct fx *f = &the_fx;

    (void)state;
    /* The handler: /gate-later, /plain, /echo twice; the gate: all but /plain. */
    fx_case(&cfg, client_gated, 4);
    assert_int_equal(f->gate_calls, 5);
    assert_int_equal(f->async_done, 2);
    assert_int_equal(f->async_gone, 1);
}

static void client_head(struct fx *f)
{
    struct cl *c = &cl_a;
    struct resp *r = &resp_a;
    char v[32];

    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "HEAD /hello HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(f, cl_response(c, r, true) == 0 && r->status == 200);
    CHECK(f, resp_header(r, "content-length", v, sizeof(v)) && strcmp(v, "6") == 0);
    /* Had body bytes been sent, they would now be taken for the next response. */
    CHECK(f, cl_send(c, "GET /next HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(f, cl_response(c, r, false) == 0 && strcmp(r->body, "/next") == 0);
    cl_close(c);
}

static void answers_head_without_a_body(void **state)
{
    (void)state;
    fx_case(NULL, client_head, 2);
}

static void client_slow_head(struct fx *f)
{
    struct cl *c = &cl_a;
    struct resp *r = &resp_a;
    long t0 = now_ms();
    long dt;

    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "GET /slow HTTP/1.1\r\nHo"));
    CHECK(f, cl_response(c, r, false) == 0);
    dt = now_ms() - t0;
    CHECK(f, r->status == 408 && json_error_is(r, "message"));
    CHECK(f, dt >= 150 && dt < 3000);
    CHECK(f, cl_closed(c));
    cl_close(c);
    /* A connection that never sends a byte is closed silently. */
    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_closed(c));
    cl_close(c);
    /* A kept-alive connection is closed silently after the idle timeout. */
    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "GET /x HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(f, cl_response(c, r, false) == 0 && r->status == 200);
    t0 = now_ms();
    CHECK(f, cl_closed(c));
    CHECK(f, now_ms() - t0 >= 250);
    cl_close(c);
    /* A body that stops coming gets 408. */
    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc"));
    CHECK(f, cl_response(c, r, false) == 0 && r->status == 408);
    CHECK(f, cl_closed(c));
    cl_close(c);
}

static void times_out_slow_heads_idle_connections_and_stalled_bodies(void **state)
{
    struct sl_http_server_config cfg = { .header_timeout_ms = 200, .idle_timeout_ms = 300 };

    (void)state;
    fx_case(&cfg, client_slow_head, 1);
}

static void client_slow_reader(struct fx *f)
{
    struct cl *a = &cl_a;
    struct resp *r = &resp_a;

    /* Asks for a large response and never reads it. */
    CHECK(f, cl_connect(a, f->port, 4096));
    CHECK(f, cl_send(a, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n"));
    sleep_ms(900);
    /* Only this new connection is left: the stuck one was closed. */
    CHECK(f, one_shot(f, "GET /count HTTP/1.1\r\nHost: t\r\n\r\n", 200, false, r));
    CHECK(f, strcmp(r->body, "1") == 0);
    cl_close(a);
}

static void closes_a_client_that_does_not_read(void **state)
{
    struct sl_http_server_config cfg = { .idle_timeout_ms = 300 };

    (void)state;
    fx_case(&cfg, client_slow_reader, 2);
}

/* Two connections are served, a third gets a 503 saying `message` (or, if it raced the close,
 * just the close), and there is room again once one closes. */
static void two_then_refused(struct fx *f, const char *message)
{
    struct cl *a = &cl_a;
    struct cl *b = &cl_b;
    struct cl *c = &cl_c;
    struct resp *r = &resp_a;

    CHECK(f, cl_connect(a, f->port, 0) && cl_connect(b, f->port, 0));
    CHECK(f, cl_send(a, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n") && cl_response(a, r, false) == 0);
    CHECK(f, cl_send(b, "GET /b HTTP/1.1\r\nHost: t\r\n\r\n") && cl_response(b, r, false) == 0);
    CHECK(f, cl_connect(c, f->port, 0));
    if (cl_response(c, r, false) == 0) {
        CHECK(f, r->status == 503 && json_error_is(r, "message"));
        CHECK(f, strstr(r->body, message) != NULL);
        CHECK(f, cl_closed(c));
    }
    cl_close(c);
    cl_close(a);
    sleep_ms(100);
    CHECK(f, one_shot(f, "GET /count HTTP/1.1\r\nHost: t\r\n\r\n", 200, false, &resp_b));
    CHECK(f, strcmp(resp_b.body, "2") == 0);
    cl_close(b);
}

static void client_max_connections(struct fx *f)
{
    two_then_refused(f, "too many connections");
}

static void refuses_connections_over_the_limit(void **state)
{
    struct sl_http_server_config cfg = { .max_connections = 2 };

    (void)state;
    fx_case(&cfg, client_max_connections, 3);
}

static void client_body_budget_per_address(struct fx *f)
{
    static char xs[600];
    struct cl *a = &cl_a;
    struct cl *b = &cl_b;
    struct cl *c = &cl_c;
    struct resp *r = &resp_a;

    memset(xs, 'x', sizeof(xs));
    /* a holds 500 bytes of the address's 600 from its head on, with 100 sent. */
    CHECK(f, cl_connect(a, f->port, 0));
    CHECK(f, cl_send(a, "POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 500\r\n\r\n"));
    CHECK(f, cl_send_n(a, xs, 100));
    sleep_ms(100);
    /* 200 more from the same address: refused before a byte of its body is read. */
    CHECK(f, cl_connect(b, f->port, 0));
    CHECK(f, cl_send(b, "POST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 200\r\n\r\n"));
    CHECK(f, cl_response(b, r, false) == 0 && r->status == 503 && json_error_is(r, "message"));
    CHECK(f, strstr(r->body, "this client address has as many request bodies") != NULL);
    CHECK(f, cl_closed(b));
    cl_close(b);
    /* A chunked body is charged in steps of 64 KiB (its own limit is 64 MiB here): its first
     * byte does not fit the 100 bytes the address (and the server) has left. */
    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f,
          cl_send(c,
                  "POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n"));
    CHECK(f, cl_response(c, r, false) == 0 && r->status == 503);
    CHECK(f, strstr(r->body, "request bodies") != NULL);
    CHECK(f, cl_closed(c));
    cl_close(c);
    /* a completes; once answered, its bytes are given back. */
    CHECK(f, cl_send_n(a, xs, 400));
    CHECK(f, cl_response(a, r, false) == 0 && r->status == 200 && strcmp(r->body, "/a") == 0);
    cl_close(a);
    CHECK(f, one_shot(f,
                      "POST /d HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nConnection: close\r\n"
                      "\r\nxxxxx",
                      200, true, &resp_b));
}

static void client_body_budget_of_the_server(struct fx *f)
{
    static char xs[400];
    struct cl *a = &cl_a;
    struct cl *b = &cl_b;
    struct resp *r = &resp_a;

    memset(xs, 'x', sizeof(xs));
    CHECK(f, cl_connect(a, f->port, 0));
    CHECK(f, cl_send(a, "POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 400\r\n\r\n"));
    sleep_ms(100);
    CHECK(f, cl_connect(b, f->port, 0));
    CHECK(f, cl_send(b, "POST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 101\r\n\r\n"));
    CHECK(f, cl_response(b, r, false) == 0 && r->status == 503);
    CHECK(f, strstr(r->body, "the server holds as many request bodies") != NULL);
    CHECK(f, cl_closed(b));
    cl_close(b);
    CHECK(f, cl_send_n(a, xs, 400));
    CHECK(f, cl_response(a, r, false) == 0 && r->status == 200);
    /* The client leaving with its body half sent gives its bytes back too. */
    CHECK(f, cl_send(a, "POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 400\r\n\r\nxx"));
    sleep_ms(100);
    cl_close(a);
    sleep_ms(100);
    CHECK(f, cl_connect(b, f->port, 0));
    CHECK(f, cl_send(b, "POST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 400\r\n\r\n"));
    CHECK(f, cl_send_n(b, xs, 400));
    CHECK(f, cl_response(b, r, false) == 0 && r->status == 200);
    cl_close(b);
}

static void client_chunked_in_steps(struct fx *f)
{
    static char xs[1000];
    struct cl *a = &cl_a;
    struct cl *b = &cl_b;
    struct resp *r = &resp_a;

    memset(xs, 'x', sizeof(xs));
    /* One byte of a chunked body holds a step of the address's 100 KiB: 64 KiB. */
    CHECK(f, cl_connect(a, f->port, 0));
    CHECK(f,
          cl_send(a,
                  "POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n"));
    sleep_ms(100);
    /* 40 KiB more from the address do not fit; 30 KiB do. */
    CHECK(f, one_shot(f, "POST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 40960\r\n\r\n", 503, true,
                      r));
    CHECK(f, cl_connect(b, f->port, 0));
    CHECK(f, cl_send(b, "POST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 30000\r\n\r\n"));
    for (int i = 0; i < 30; i++) {
        CHECK(f, cl_send_n(b, xs, sizeof(xs)));
    }
    CHECK(f, cl_response(b, r, false) == 0 && r->status == 200 && strcmp(r->body, "/b") == 0);
    cl_close(b);
    /* The chunked body ends well within its step. */
    CHECK(f, cl_send(a, "0\r\n\r\n"));
    CHECK(f, cl_response(a, r, false) == 0 && r->status == 200 && strcmp(r->body, "/a") == 0);
    cl_close(a);
}

static void holds_no_more_request_bodies_than_allowed(void **state)
{
    struct sl_http_server_config per_address = { .bodies_max_bytes = 1000,
                                                 .peer_bodies_max_bytes = 600 };
    struct sl_http_server_config server = { .bodies_max_bytes = 500,
                                            .peer_bodies_max_bytes = 10000 };
    struct sl_http_server_config steps = { .peer_bodies_max_bytes = 100 * 1024 };

    (void)state;
    fx_case(&per_address, client_body_budget_per_address, 2);
    fx_case(&server, client_body_budget_of_the_server, 2);
    fx_case(&steps, client_chunked_in_steps, 2);
}

static void client_peer_connections(struct fx *f)
{
    two_then_refused(f, "too many connections from this address");
}

static void refuses_connections_over_the_limit_per_address(void **state)
{
    struct sl_http_server_config cfg = { .peer_max_connections = 2 };

    (void)state;
    fx_case(&cfg, client_peer_connections, 3);
}

static void client_unix(struct fx *f)
{
    struct cl *c = &cl_a;
    struct resp *r = &resp_a;

    CHECK(f, cl_connect_unix(c, f->sock_path));
    CHECK(f, cl_send(c, "PUT /v1/snapshot HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n"
                        "\r\n{}"));
    CHECK(f, cl_response(c, r, false) == 0 && r->status == 200);
    CHECK(f, strcmp(r->body, "/v1/snapshot") == 0);
    cl_close(c);
}

static void make_stale_socket(const char *path)
{
    struct sockaddr_un sa;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);

    assert_true(fd != -1);
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(close(fd), 0);
}

static void listens_on_a_unix_socket_with_its_mode(void **state)
{
    struct fx *f = &the_fx;
    char file[160];
    char longp[200];
    char err[256];
    struct stat st;

    (void)state;
    fx_init(f, NULL);
    copy_str(f->dir, sizeof(f->dir), "/tmp/sl-srv-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    (void)snprintf(f->sock_path, sizeof(f->sock_path), "%.60s/admin.sock", f->dir);
    (void)snprintf(file, sizeof(file), "%.60s/file", f->dir);
    /* A regular file is never replaced. */
    assert_int_equal(sl_test_write_text(file, ""), 0);
    assert_int_equal(sl_http_server_listen_unix(f->srv, file, 0600, err, sizeof(err)), SL_EEXIST);
    assert_non_null(strstr(err, "not a socket"));
    assert_int_equal(lstat(file, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    /* Bad arguments. */
    memset(longp, 'a', sizeof(longp) - 1);
    longp[sizeof(longp) - 1] = '\0';
    assert_int_equal(sl_http_server_listen_unix(f->srv, longp, 0600, err, sizeof(err)), SL_EINVAL);
    assert_int_equal(sl_http_server_listen_unix(f->srv, f->sock_path, 04600, NULL, 0), SL_EINVAL);
    /* A stale socket file is replaced, and the new one has exactly the mode asked for. */
    make_stale_socket(f->sock_path);
    if (sl_http_server_listen_unix(f->srv, f->sock_path, 0600, err, sizeof(err)) != 0) {
        fail_msg("listen_unix: %s", err);
    }
    assert_int_equal(lstat(f->sock_path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    /* A live one is not. */
    assert_int_equal(sl_http_server_listen_unix(f->srv, f->sock_path, 0600, err, sizeof(err)),
                     UV_EADDRINUSE);
    fx_run(f, client_unix);
    assert_string_equal(f->last_peer, "unix");
    assert_string_equal(f->last_method, "PUT");
    /* The socket file goes with the server. */
    assert_int_equal(lstat(f->sock_path, &st), -1);
    assert_int_equal(unlink(file), 0);
    assert_int_equal(rmdir(f->dir), 0);
}

/* Three connections when the server is closed or drained (f->drain_ms): one idle after an
 * answer, one with half a head, one whose request the handler holds (answered after 300 ms). */
static void client_close_with_open_connections(struct fx *f)
{
    struct cl *a = &cl_a;
    struct cl *b = &cl_b;
    struct cl *c = &cl_c;
    struct resp *r = &resp_a;
    struct cl d;
    char v[32];

    CHECK(f, cl_connect(a, f->port, 0) && cl_connect(b, f->port, 0) && cl_connect(c, f->port, 0));
    CHECK(f, cl_send(a, "GET /a HTTP/1.1\r\nHost: t\r\n\r\n") && cl_response(a, r, false) == 0);
    CHECK(f, cl_send(b, "GET /b HTTP/1.1\r\nHo"));
    CHECK(f, cl_send(c, "GET /async-slow HTTP/1.1\r\nHost: t\r\n\r\n"));
    sleep_ms(100);
    fx_signal(f);
    /* The idle connection and the unfinished head are closed at once... */
    CHECK(f, cl_closed(a));
    CHECK(f, cl_closed(b));
    /* ... nothing new is accepted ... */
    d.fd = -1;
    CHECK(f, !cl_connect(&d, f->port, 0));
    cl_close(&d);
    if (f->drain_ms > 0) {
        /* ... and a drain answers the request with the handler, then ends it... */
        CHECK(f, cl_response(c, r, false) == 0 && r->status == 200);
        CHECK(f, strcmp(r->body, "later") == 0);
        CHECK(f, resp_header(r, "connection", v, sizeof(v)) != NULL && strcmp(v, "close") == 0);
    }
    /* ... where a close ends it without an answer. */
    CHECK(f, cl_closed(c));
    cl_close(a);
    cl_close(b);
    cl_close(c);
}

static void closes_with_open_connections_and_frees_everything(void **state)
{
    struct fx *f = &the_fx;

    (void)state;
    fx_case(NULL, client_close_with_open_connections, 2);
    /* The async answer came after the server was gone and was dropped. */
    assert_int_equal(f->async_done, 1);
    assert_int_equal(f->async_gone, 1);
}

/* One drain case: `client` against a server drained with `drain_ms` (then closed at once with
 * `close_in_drain`); the handler saw `calls` requests and its one late answer found the
 * exchange gone or not. */
static void drain_case(uint64_t drain_ms, bool close_in_drain, void (*client)(struct fx *f),
                       int calls, int gone)
{
    struct fx *f = &the_fx;

    fx_init(f, NULL);
    f->drain_ms = drain_ms;
    f->close_in_drain = close_in_drain;
    fx_run(f, client);
    assert_int_equal(f->calls, calls);
    assert_int_equal(f->async_done, 1);
    assert_int_equal(f->async_gone, gone);
}

static void drain_answers_requests_in_flight_and_closes_the_rest(void **state)
{
    (void)state;
    drain_case(5000, false, client_close_with_open_connections, 2, 0);
}

static void client_drain_grace_over(struct fx *f)
{
    struct cl *c = &cl_c;
    long t0;

    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "GET /async-3s HTTP/1.1\r\nHost: t\r\n\r\n"));
    sleep_ms(50);
    t0 = now_ms();
    fx_signal(f);
    /* The handler answers after 3 s; the grace period is 100 ms: no answer, only the end. */
    CHECK(f, cl_closed(c));
    CHECK(f, now_ms() - t0 < 2500);
    cl_close(c);
}

static void drain_cuts_what_outlasts_the_grace_period(void **state)
{
    (void)state;
    /* The answer came after the server was gone and was dropped. */
    drain_case(100, false, client_drain_grace_over, 1, 1);
}

static void a_close_ends_a_drain_at_once(void **state)
{
    (void)state;
    /* The same client: its connection ends long before the answer (3 s) or the grace (60 s). */
    drain_case(60000, true, client_drain_grace_over, 1, 1);
}

static void client_half_close(struct fx *f)
{
    struct cl *c = &cl_a;
    struct resp *r = &resp_a;

    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "GET /half HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(f, shutdown(c->fd, SHUT_WR) == 0);
    CHECK(f, cl_response(c, r, false) == 0 && r->status == 200);
    CHECK(f, strcmp(r->body, "/half") == 0);
    CHECK(f, cl_closed(c));
    cl_close(c);
    /* The same with an asynchronous handler. */
    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "GET /async HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(f, shutdown(c->fd, SHUT_WR) == 0);
    CHECK(f, cl_response(c, r, false) == 0 && strcmp(r->body, "later") == 0);
    CHECK(f, cl_closed(c));
    cl_close(c);
    /* A head cut by the half-close is not answered. */
    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "GET /cut HTTP/1.1\r\nHo"));
    CHECK(f, shutdown(c->fd, SHUT_WR) == 0);
    CHECK(f, cl_closed(c));
    cl_close(c);
}

static void answers_a_client_that_half_closed(void **state)
{
    (void)state;
    fx_case(NULL, client_half_close, 2);
}

static void client_response_shapes(struct fx *f)
{
    struct cl *c = &cl_a;
    struct resp *r = &resp_a;
    char v[64];

    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "GET /headers HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(f, cl_response(c, r, false) == 0 && r->status == 201);
    CHECK(f, strncmp(r->head, "HTTP/1.1 201 Created\r\n", 22) == 0);
    CHECK(f, resp_header(r, "x-test", v, sizeof(v)) && strcmp(v, "yes") == 0);
    CHECK(f, resp_header(r, "cache-control", v, sizeof(v)) && strcmp(v, "no-store") == 0);
    CHECK(f, strcmp(r->body, "made") == 0);
    /* A handler adding a framing header gets a 500 instead; the connection lives on. */
    CHECK(f, cl_send(c, "GET /reserved HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(f, cl_response(c, r, false) == 0 && r->status == 500);
    CHECK(f, json_error_is(r, "message") && strstr(r->head, "Content-Length: 99") == NULL);
    CHECK(f, cl_send(c, "GET /error HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(f, cl_response(c, r, false) == 0 && r->status == 404);
    CHECK(f, strcmp(r->body, "{\"message\":\"no \\\"such\\\" thing\\n\\u0001\\ufffd\"}") == 0);
    CHECK(f, cl_send(c, "DELETE /nocontent HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(f, cl_response(c, r, false) == 0 && r->status == 204);
    CHECK(f, resp_header(r, "content-length", v, sizeof(v)) == NULL);
    CHECK(f, cl_send(c, "GET /last HTTP/1.1\r\nHost: t\r\n\r\n"));
    CHECK(f, cl_response(c, r, false) == 0 && strcmp(r->body, "/last") == 0);
    cl_close(c);
}

static void shapes_handler_responses(void **state)
{
    (void)state;
    fx_case(NULL, client_response_shapes, 5);
}

static void on_closed_count(void *arg)
{
    (*(int *)arg)++;
}

static void refuses_bad_listen_addresses_and_configs(void **state)
{
    static const char *const bad[] = { "localhost:80", "1.2.3.4",    "1.2.3.4:99999", "::1:80",
                                       "[::1]80",      "1.2.3.4:8a", ":80",           "1.2.3.4:",
                                       "[::1:80",      "1.2.3:80",   "[1.2.3.4]:80" };
    struct sl_http_server_config cfg = { .error_key = "bad key" };
    struct sl_http_server *srv = NULL;
    uv_loop_t loop;
    char err[256];
    int closed = 0;
    int rc;

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(sl_http_server_create(&loop, &cfg, handler, NULL, &srv), SL_EINVAL);
    assert_null(srv);
    sl_mem_fail_after(1);
    assert_int_equal(sl_http_server_create(&loop, NULL, handler, NULL, &srv), SL_ENOMEM);
    sl_mem_fail_after(0);
    assert_int_equal(sl_http_server_create(&loop, NULL, handler, NULL, &srv), 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        if (sl_http_server_listen_tcp(srv, bad[i], err, sizeof(err)) != SL_EINVAL) {
            fail_msg("accepted %s", bad[i]);
        }
        assert_non_null(strstr(err, "invalid listen address"));
    }
    /* IPv6 may be missing in a container; the address itself must parse. */
    rc = sl_http_server_listen_tcp(srv, "[::1]:0", err, sizeof(err));
    assert_true(rc != SL_EINVAL);
    for (int i = 0; i <= SL_HTTP_SERVER_LISTENERS_MAX; i++) {
        rc = sl_http_server_listen_tcp(srv, "127.0.0.1:0", err, sizeof(err));
        if (rc != 0) {
            break;
        }
    }
    assert_int_equal(rc, SL_ETOOBIG);
    sl_http_server_close(srv, on_closed_count, &closed);
    assert_int_equal(closed, 0); /* never synchronously */
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(closed, 1);
    /* A server that never listened closes as well. */
    assert_int_equal(sl_http_server_create(&loop, NULL, handler, NULL, &srv), 0);
    sl_http_server_close(srv, on_closed_count, &closed);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(closed, 2);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void expect_json(const char *in, size_t n, const char *want)
{
    struct sl_buf b;

    sl_buf_init(&b, 1024);
    assert_int_equal(sl_http_json_append_string(&b, in, n), 0);
    assert_string_equal(sl_buf_cstr(&b), want);
    sl_buf_finish(&b);
}

static void escapes_json_strings_whatever_the_input(void **state)
{
    struct sl_buf b;

    (void)state;
    expect_json("plain", 5, "\"plain\"");
    expect_json("", 0, "\"\"");
    expect_json("q\"b\\s/", 6, "\"q\\\"b\\\\s/\"");
    expect_json("\n\r\t\b\f\x01\x1f\x7f", 8, "\"\\n\\r\\t\\b\\f\\u0001\\u001f\\u007f\"");
    expect_json("a\0b", 3, "\"a\\u0000b\"");
    expect_json("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9,
                "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
    expect_json("\xc0\x80", 2, "\"\\ufffd\\ufffd\"");                       /* overlong */
    expect_json("\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\"");            /* surrogate */
    expect_json("x\xe2\x82", 3, "\"x\\ufffd\\ufffd\"");                     /* truncated */
    expect_json("\xf4\x90\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* > U+10FFFF */
    expect_json("\xff", 1, "\"\\ufffd\"");
    sl_buf_init(&b, 4);
    assert_int_equal(sl_http_json_append_string(&b, "abcdef", 6), SL_ETOOBIG);
    sl_buf_finish(&b);
}

static void names_status_codes(void **state)
{
    (void)state;
    assert_string_equal(sl_http_reason(200), "OK");
    assert_string_equal(sl_http_reason(404), "Not Found");
    assert_string_equal(sl_http_reason(413), "Content Too Large");
    assert_string_equal(sl_http_reason(431), "Request Header Fields Too Large");
    assert_string_equal(sl_http_reason(503), "Service Unavailable");
    assert_string_equal(sl_http_reason(299), "");
    assert_string_equal(sl_http_reason(-1), "");
}

/* Deterministic xorshift, so a failure replays. */
static uint32_t next_rand(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void client_random_input(struct fx *f)
{
    static const char seed_req[] = "POST /echo?a=b HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n"
                                   "Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n"
                                   "4\r\nbody\r\n0\r\n\r\nGET / HTTP/1.0\r\n\r\n";
    static const char alphabet[] = "GET /HTP1.\r\n:; \t0123456789aAzZ-_?#%\x00\x7f\xff";
    struct cl *c = &cl_a;
    uint32_t rs = 0x5eed1234;
    char in[256];
    ssize_t got;

    for (int i = 0; i < 300; i++) {
        size_t n = next_rand(&rs) % sizeof(in);

        if (i % 2 == 0) {
            /* A valid request with a few bytes changed, cut at a random length. */
            n = n % sizeof(seed_req);
            memcpy(in, seed_req, n);
            for (int k = 0; n > 0 && k < 3; k++) {
                in[next_rand(&rs) % n] = alphabet[next_rand(&rs) % (sizeof(alphabet) - 1)];
            }
        } else {
            for (size_t k = 0; k < n; k++) {
                in[k] = alphabet[next_rand(&rs) % (sizeof(alphabet) - 1)];
            }
        }
        CHECK(f, cl_connect(c, f->port, 0));
        CHECK(f, cl_send_n(c, in, n));
        CHECK(f, shutdown(c->fd, SHUT_WR) == 0);
        /* Whatever the answers, the server ends the connection. */
        do {
            c->len = 0;
            got = cl_fill(c);
        } while (got > 0);
        CHECK(f, got == 0 || errno == ECONNRESET);
        cl_close(c);
    }
}

static void survives_random_input(void **state)
{
    struct sl_http_server_config cfg = { .header_timeout_ms = 500, .idle_timeout_ms = 500 };
    struct fx *f = &the_fx;

    (void)state;
    fx_init(f, &cfg);
    fx_run(f, client_random_input);
}

static void client_sweep(struct fx *f)
{
    struct cl *c = &cl_a;
    struct resp *r = &resp_a;

    f->results[0] = 0;
    CHECK(f, cl_connect(c, f->port, 0));
    CHECK(f, cl_send(c, "POST /echo?q HTTP/1.1\r\nHost: t\r\nX-A: 1\r\nX-B: 2\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"));
    if (cl_response(c, r, false) == 0) {
        CHECK(f, (r->status == 200 && strcmp(r->body, "abc") == 0) || r->status >= 500);
        f->results[0] = r->status;
    }
    cl_close(c);
}

static void survives_every_allocation_failure(void **state)
{
    struct fx *f = &the_fx;

    (void)state;
    for (long n = 1; n < 400; n++) {
        long failures;

        fx_init(f, NULL);
        sl_mem_fail_after(n);
        fx_run(f, client_sweep);
        failures = sl_mem_failures();
        sl_mem_fail_after(0);
        if (failures == 0) {
            assert_int_equal(f->results[0], 200);
            return;
        }
    }
    fail_msg("the request never succeeded");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(serves_a_simple_get),
        cmocka_unit_test(delivers_length_and_chunked_bodies_whole),
        cmocka_unit_test(refuses_a_body_over_the_limit_with_413),
        cmocka_unit_test(refuses_a_head_over_the_limit_with_431_or_414),
        cmocka_unit_test(answers_garbage_with_a_json_400),
        cmocka_unit_test(refuses_targets_other_than_origin_form),
        cmocka_unit_test(refuses_what_http_forbids_and_adds_the_exchanges_lines),
        cmocka_unit_test(keeps_a_connection_alive_for_several_requests),
        cmocka_unit_test(answers_pipelined_requests_in_order),
        cmocka_unit_test(answers_asynchronously_from_a_timer),
        cmocka_unit_test(survives_a_client_leaving_before_an_async_answer),
        cmocka_unit_test(sends_100_continue_before_reading_the_body),
        cmocka_unit_test(the_gate_sees_heads_with_a_body_before_any_byte_of_it),
        cmocka_unit_test(answers_head_without_a_body),
        cmocka_unit_test(times_out_slow_heads_idle_connections_and_stalled_bodies),
        cmocka_unit_test(closes_a_client_that_does_not_read),
        cmocka_unit_test(refuses_connections_over_the_limit),
        cmocka_unit_test(refuses_connections_over_the_limit_per_address),
        cmocka_unit_test(holds_no_more_request_bodies_than_allowed),
        cmocka_unit_test(listens_on_a_unix_socket_with_its_mode),
        cmocka_unit_test(closes_with_open_connections_and_frees_everything),
        cmocka_unit_test(answers_a_client_that_half_closed),
        cmocka_unit_test(shapes_handler_responses),
        cmocka_unit_test(drain_answers_requests_in_flight_and_closes_the_rest),
        cmocka_unit_test(drain_cuts_what_outlasts_the_grace_period),
        cmocka_unit_test(a_close_ends_a_drain_at_once),
        cmocka_unit_test(refuses_bad_listen_addresses_and_configs),
        cmocka_unit_test(escapes_json_strings_whatever_the_input),
        cmocka_unit_test(names_status_codes),
        cmocka_unit_test(survives_random_input),
        cmocka_unit_test(survives_every_allocation_failure),
    };

    /* A write to a peer that has gone would otherwise kill the process (see server.h). */
    (void)signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
