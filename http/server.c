/* SPDX-License-Identifier: Apache-2.0 */
#include "http/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"

/* Bytes read from a socket at once; the parser consumes them before the next read. */
#define READ_BUF_BYTES 16384
/* Most bytes of a response head (status line and header lines) the server builds. */
#define RESPONSE_HEAD_MAX ((size_t)64 * 1024)
/* Error messages in JSON bodies are cut here (input bytes, before escaping). */
#define ERROR_MESSAGE_MAX ((size_t)1024)
/* After the last response of a connection the server shuts its write side and drains the
 * client's leftovers for at most this long and this many bytes, so that closing with unread
 * data (which makes the kernel send RST) does not destroy the response in flight. */
#define LINGER_MS         2000
#define LINGER_MAX_BYTES  ((size_t)1024 * 1024)
#define LISTEN_BACKLOG    128
#define ARENA_CHUNK_BYTES ((size_t)4096)
/* Room for "[<IPv6 text>]:<port>". */
#define PEER_MAX 80

union sock {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
};

enum listener_state {
    LISTENER_FREE = 0,
    LISTENER_OPEN,
    LISTENER_CLOSING,
};

/* One listening socket; embedded in the server. */
struct listener {
    /* The owner; set when the slot is first used. */
    struct sl_http_server *srv;
    enum listener_state state;
    bool is_unix;
    /* The listening handle; initialised while state != LISTENER_FREE. */
    union sock sock;
    /* A handle to accept a connection into only to refuse it (over the connection limit, or
     * out of memory). Busy from the accept until its close callback; while it is busy,
     * another connection to refuse leaves the listener stalled (libuv stops polling it until
     * the pending connection is accepted), and the close callback accepts it. */
    union sock spare;
    bool spare_busy;
    bool stalled;
};

struct sl_http_server {
    /* Borrowed; outlives the server. */
    uv_loop_t *loop;
    sl_http_handler_fn *handler;
    void *arg;
    /* Configuration with every default applied; `error_key` points at `error_key_buf`. */
    struct sl_http_server_config cfg;
    char error_key_buf[SL_HTTP_ERROR_KEY_MAX + 1];
    /* Cap on each request arena (the parser's and each exchange's), from the head limits. */
    size_t arena_max_bytes;
    /* The canned response for refused connections (libuv needs a non-const buffer). */
    char overload[512];
    size_t overload_len;
    struct listener listeners[SL_HTTP_SERVER_LISTENERS_MAX];
    /* An idle handle that makes the end of sl_http_server_close() always asynchronous, even
     * for a server that never listened. Never started. */
    uv_timer_t anchor;
    /* Server-owned handles (anchor, listeners, busy spares) whose close callback is owed. */
    unsigned pending_closes;
    /* Open connections (each owns itself; unlinked in its last close callback). */
    struct http_conn *conns;
    size_t n_conns;
    /* Last connection id handed out. */
    uint64_t next_id;
    /* Local port of the most recent TCP listener, or -1. */
    int tcp_port;
    bool closing;
    sl_http_closed_fn *closed;
    void *closed_arg;
};

/* What a connection waits for. Only conn_set_state() assigns `state`; it re-arms the timer. */
enum conn_state {
    /* Between requests with nothing buffered: the idle timer runs. */
    CONN_IDLE = 0,
    /* Receiving a head: the header timer runs (not re-armed by progress). */
    CONN_HEAD,
    /* Receiving a body: the idle timer runs and is re-armed by every read. */
    CONN_BODY,
    /* The handler holds the exchange: no reading, no timer. */
    CONN_HANDLING,
    /* The response is being written: the idle timer bounds a client that does not read. */
    CONN_WRITING,
    /* The last response is written and the write side shut: drain until EOF or the timer. */
    CONN_LINGER,
    /* Handles are closing; the memory goes in the last close callback. */
    CONN_CLOSED,
};

struct http_conn {
    /* Borrowed; the server outlives its connections. */
    struct sl_http_server *srv;
    struct http_conn *prev;
    struct http_conn *next;
    union sock sock;
    uv_timer_t timer;
    uv_write_t write_req;
    uv_write_t continue_req;
    uv_shutdown_t shutdown_req;
    /* Handles (sock, timer) whose close callback is owed; the last one frees the conn. */
    unsigned pending_closes;
    enum conn_state state;
    uint64_t id;
    bool is_unix;
    /* A read is active on `sock`. */
    bool reading;
    /* The client shut its write side. */
    bool eof;
    /* Bytes of the current head have arrived (decides 408 or a silent close on timeout). */
    bool partial;
    /* The connection ends after the response being written. */
    bool close_after;
    /* `continue_req` is in flight. */
    bool continue_pending;
    /* Bytes drained while lingering. */
    size_t linger_bytes;
    /* Head strings of the message being parsed; reset after each message. */
    struct sl_arena arena;
    struct sl_h1 parser;
    /* The request being received (owned, not yet dispatched) or handled (dispatched: the
     * handler owns it and `x->conn` points back here). NULL between requests. */
    struct sl_http_exchange *x;
    /* The response being written (head and body); owned, freed by its write callback. */
    struct sl_buf out;
    /* Received bytes; rbuf[rpos, rlen) are not parsed yet. */
    size_t rpos;
    size_t rlen;
    char peer[PEER_MAX];
    uint8_t rbuf[READ_BUF_BYTES];
};

struct sl_http_exchange {
    /* The connection, or NULL once it is gone (then responding only frees the exchange). */
    struct http_conn *conn;
    /* Handed to the handler (points into `head`, `arena`, `body`, `peer`). */
    struct sl_http_request req;
    /* The request head, copied into `arena`. */
    struct sl_h1_head head;
    struct sl_arena arena;
    /* The body, capped at cfg.body_max_bytes. */
    struct sl_buf body;
    /* The handler has the exchange. */
    bool dispatched;
    /* A response to HEAD: no body bytes. */
    bool head_only;
    /* The connection may serve another request after this one. */
    bool keep_alive;
    /* Loop time when the head was complete, for the request log line. */
    uint64_t start_ms;
    char peer[PEER_MAX];
};

static void conn_step(struct http_conn *c);
static void conn_close(struct http_conn *c);
static void listener_accept(struct listener *l);
static void on_conn_timer(uv_timer_t *t);
static void server_maybe_finish(struct sl_http_server *srv);

static void set_err(char *err, size_t errlen, const char *fmt, ...) SL_PRINTF(3, 4);

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || errlen == 0) {
        return;
    }
    va_start(ap, fmt);
    (void)vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- Small helpers: reasons, JSON, dates, log escaping ---- */

static const struct {
    int status;
    const char *reason;
} reasons[] = {
    { 100, "Continue" },
    { 200, "OK" },
    { 201, "Created" },
    { 202, "Accepted" },
    { 204, "No Content" },
    { 301, "Moved Permanently" },
    { 302, "Found" },
    { 303, "See Other" },
    { 304, "Not Modified" },
    { 307, "Temporary Redirect" },
    { 308, "Permanent Redirect" },
    { 400, "Bad Request" },
    { 401, "Unauthorized" },
    { 403, "Forbidden" },
    { 404, "Not Found" },
    { 405, "Method Not Allowed" },
    { 406, "Not Acceptable" },
    { 408, "Request Timeout" },
    { 409, "Conflict" },
    { 410, "Gone" },
    { 411, "Length Required" },
    { 412, "Precondition Failed" },
    { 413, "Content Too Large" },
    { 414, "URI Too Long" },
    { 415, "Unsupported Media Type" },
    { 416, "Range Not Satisfiable" },
    { 417, "Expectation Failed" },
    { 421, "Misdirected Request" },
    { 422, "Unprocessable Content" },
    { 426, "Upgrade Required" },
    { 428, "Precondition Required" },
    { 429, "Too Many Requests" },
    { 431, "Request Header Fields Too Large" },
    { 500, "Internal Server Error" },
    { 501, "Not Implemented" },
    { 502, "Bad Gateway" },
    { 503, "Service Unavailable" },
    { 504, "Gateway Timeout" },
    { 505, "HTTP Version Not Supported" },
};

const char *sl_http_reason(int status)
{
    for (size_t i = 0; i < SL_ARRAY_LEN(reasons); i++) {
        if (reasons[i].status == status) {
            return reasons[i].reason;
        }
    }
    return "";
}

/* Length of the valid UTF-8 sequence (RFC 3629 §4) at `p`, or 0 when it is not one. */
static size_t utf8_len(const uint8_t *p, size_t n)
{
    uint8_t lo = 0x80;
    uint8_t hi = 0xbf;
    size_t len;

    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        len = 2;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        len = 3;
        lo = p[0] == 0xe0 ? 0xa0 : 0x80; /* no overlong forms */
        hi = p[0] == 0xed ? 0x9f : 0xbf; /* no surrogates */
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        len = 4;
        lo = p[0] == 0xf0 ? 0x90 : 0x80;
        hi = p[0] == 0xf4 ? 0x8f : 0xbf; /* nothing above U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || p[1] < lo || p[1] > hi) {
        return 0;
    }
    for (size_t i = 2; i < len; i++) {
        if (p[i] < 0x80 || p[i] > 0xbf) {
            return 0;
        }
    }
    return len;
}

/* The escape for an ASCII byte that JSON (or a log reader) must not see raw, or NULL. */
static const char *json_escape_of(uint8_t ch, char tmp[8])
{
    switch (ch) {
    case '"':
        return "\\\"";
    case '\\':
        return "\\\\";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    case '\b':
        return "\\b";
    case '\f':
        return "\\f";
    default:
        break;
    }
    if (ch < 0x20 || ch == 0x7f) {
        (void)snprintf(tmp, 8, "\\u%04x", (unsigned)ch);
        return tmp;
    }
    return NULL;
}

int sl_http_json_append_string(struct sl_buf *b, const char *s, size_t n)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t run = 0; /* start of the bytes not yet appended, which need no escape */
    size_t i = 0;

    SL_TRY(sl_buf_append(b, "\"", 1));
    while (i < n) {
        char tmp[8];
        const char *esc = NULL;
        size_t len = 1;

        if (p[i] < 0x80) {
            esc = json_escape_of(p[i], tmp);
        } else {
            len = utf8_len(p + i, n - i);
            if (len == 0) {
                esc = "\\ufffd";
                len = 1;
            }
        }
        if (esc != NULL) {
            SL_TRY(sl_buf_append(b, p + run, i - run));
            SL_TRY(sl_buf_append_str(b, esc));
            run = i + len;
        }
        i += len;
    }
    SL_TRY(sl_buf_append(b, p + run, i - run));
    return sl_buf_append(b, "\"", 1);
}

/* Appends {"<key>":"<message>"} to `b`. */
static int append_error_body(struct sl_buf *b, const char *key, const char *message)
{
    size_t n = strlen(message);

    if (n > ERROR_MESSAGE_MAX) {
        n = ERROR_MESSAGE_MAX;
    }
    SL_TRY(sl_buf_printf(b, "{\"%s\":", key)); /* the key is checked at create: no escapes */
    SL_TRY(sl_http_json_append_string(b, message, n));
    return sl_buf_append(b, "}", 1);
}

/* IMF-fixdate (RFC 9110 §5.6.7), without the locale strftime() would use for names. */
static void format_date(char *out, size_t cap)
{
    static const char days[7][4] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
    static const char months[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
    time_t now = time(NULL);
    struct tm tm;

    if (gmtime_r(&now, &tm) == NULL || tm.tm_wday < 0 || tm.tm_wday > 6 || tm.tm_mon < 0
        || tm.tm_mon > 11) {
        (void)snprintf(out, cap, "Thu, 01 Jan 1970 00:00:00 GMT");
        return;
    }
    (void)snprintf(out, cap, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday], tm.tm_mday,
                   months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* Copies at most cap-1 bytes of a peer-supplied string for a log line: bytes outside printable
 * ASCII, quotes and backslashes become '?', and a cut string ends in "...". */
static void log_escape(char *out, size_t cap, const char *s)
{
    size_t o = 0;

    for (size_t i = 0; s[i] != '\0'; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (o + 4 >= cap) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\') {
            ch = '?';
        }
        out[o++] = (char)ch;
    }
    out[o] = '\0';
}

/* ---- Exchanges ---- */

static void exchange_free(struct sl_http_exchange *x)
{
    sl_arena_finish(&x->arena);
    sl_buf_finish(&x->body);
    sl_free(x);
}

static int copy_headers(struct sl_http_exchange *x, const struct sl_h1_head *h)
{
    struct sl_h1_header *a;

    x->head.headers = NULL;
    x->head.n_headers = 0;
    if (h->n_headers == 0) {
        return 0;
    }
    if (h->n_headers > SIZE_MAX / sizeof(*a)) {
        return SL_ENOMEM;
    }
    a = sl_arena_alloc(&x->arena, h->n_headers * sizeof(*a));
    if (a == NULL) {
        return SL_ENOMEM;
    }
    for (size_t i = 0; i < h->n_headers; i++) {
        const struct sl_h1_header *f = &h->headers[i];
        char *name = sl_arena_strndup(&x->arena, (const char *)f->name.p, f->name.n);
        char *value = sl_arena_strndup(&x->arena, (const char *)f->value.p, f->value.n);

        if (name == NULL || value == NULL) {
            return SL_ENOMEM;
        }
        a[i].name = sl_slice_of(name, f->name.n);
        a[i].value = sl_slice_of(value, f->value.n);
    }
    x->head.headers = a;
    x->head.n_headers = h->n_headers;
    return 0;
}

/* Copies the head `h` (whose target is origin-form) into a new exchange of `c`. */
static int exchange_create(struct http_conn *c, const struct sl_h1_head *h,
                           struct sl_http_exchange **out)
{
    struct sl_http_server *srv = c->srv;
    struct sl_http_exchange *x = sl_calloc(1, sizeof(*x));
    const char *q = strchr(h->target, '?');
    size_t path_len = q != NULL ? (size_t)(q - h->target) : strlen(h->target);
    char *method;
    char *target;
    char *path;

    if (x == NULL) {
        return SL_ENOMEM;
    }
    sl_arena_init(&x->arena, ARENA_CHUNK_BYTES, srv->arena_max_bytes);
    sl_buf_init(&x->body, srv->cfg.body_max_bytes);
    x->head = *h;
    x->head.reason = "";
    method = sl_arena_strndup(&x->arena, h->method, strlen(h->method));
    target = sl_arena_strndup(&x->arena, h->target, strlen(h->target));
    path = sl_arena_strndup(&x->arena, h->target, path_len);
    if (method == NULL || target == NULL || path == NULL || copy_headers(x, h) < 0) {
        exchange_free(x);
        return SL_ENOMEM;
    }
    x->head.method = method;
    x->head.target = target;
    memcpy(x->peer, c->peer, sizeof(x->peer));
    x->head_only = strcmp(method, "HEAD") == 0;
    /* HTTP/1.0 always closes (even with Connection: keep-alive), and so does a request that
     * asked for an upgrade: the server never switches, and the parser stops after it. */
    x->keep_alive = h->keep_alive && !h->upgrade && h->version_minor == 1;
    x->conn = c;
    x->req = (struct sl_http_request){
        .method = method,
        .path = path,
        .query = q != NULL ? target + path_len + 1 : "",
        .head = &x->head,
        .body = sl_slice_of("", 0),
        .peer = x->peer,
        .conn_id = c->id,
    };
    *out = x;
    return 0;
}

const struct sl_http_request *sl_http_exchange_request(const struct sl_http_exchange *x)
{
    return &x->req;
}

bool sl_http_exchange_is_gone(const struct sl_http_exchange *x)
{
    return x->conn == NULL;
}

/* ---- Connections: state, timers, reading ---- */

static void conn_set_state(struct http_conn *c, enum conn_state s)
{
    const struct sl_http_server_config *cfg = &c->srv->cfg;
    uint64_t ms = 0;

    c->state = s;
    switch (s) {
    case CONN_IDLE:
    case CONN_BODY:
    case CONN_WRITING:
        ms = cfg->idle_timeout_ms;
        break;
    case CONN_HEAD:
        ms = cfg->header_timeout_ms;
        break;
    case CONN_LINGER:
        ms = cfg->idle_timeout_ms < LINGER_MS ? cfg->idle_timeout_ms : LINGER_MS;
        break;
    case CONN_HANDLING:
        break;
    case CONN_CLOSED:
        return; /* the timer is closing with the connection */
    }
    if (ms > 0) {
        (void)uv_timer_start(&c->timer, on_conn_timer, ms, 0);
    } else {
        (void)uv_timer_stop(&c->timer);
    }
}

static bool state_reads(enum conn_state s)
{
    switch (s) {
    case CONN_IDLE:
    case CONN_HEAD:
    case CONN_BODY:
    case CONN_LINGER:
        return true;
    case CONN_HANDLING:
    case CONN_WRITING:
    case CONN_CLOSED:
        return false;
    }
    return false;
}

static void on_conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct http_conn *c = SL_CONTAINER_OF(h, struct http_conn, sock.handle);

    (void)suggested;
    /* Reading runs only once everything received is parsed, so this is normally the whole
     * buffer; a zero-length buffer makes libuv report UV_ENOBUFS, which closes. */
    buf->base = (char *)c->rbuf + c->rlen;
    buf->len = sizeof(c->rbuf) - c->rlen;
}

static void on_conn_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Reads exactly when the state wants bytes and every byte received so far is parsed: a
 * connection never takes more from the socket than it has room to parse (backpressure). */
static void conn_update_reading(struct http_conn *c)
{
    bool want = state_reads(c->state) && !c->eof && c->rlen == 0;
    int rc;

    if (c->state == CONN_CLOSED || want == c->reading) {
        return;
    }
    if (want) {
        rc = uv_read_start(&c->sock.stream, on_conn_alloc, on_conn_read);
        if (rc < 0) {
            sl_log(SL_LOG_DEBUG, c->id, "http read failed err=%s", sl_strerror(rc));
            conn_close(c);
            return;
        }
    } else {
        (void)uv_read_stop(&c->sock.stream);
    }
    c->reading = want;
}

static void conn_release(struct http_conn *c)
{
    struct sl_http_server *srv = c->srv;

    if (--c->pending_closes > 0) {
        return;
    }
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        srv->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    srv->n_conns--;
    sl_h1_finish(&c->parser);
    sl_arena_finish(&c->arena);
    sl_buf_finish(&c->out);
    sl_free(c);
    server_maybe_finish(srv);
}

static void on_conn_sock_closed(uv_handle_t *h)
{
    conn_release(SL_CONTAINER_OF(h, struct http_conn, sock.handle));
}

static void on_conn_timer_closed(uv_handle_t *h)
{
    conn_release(SL_CONTAINER_OF(h, struct http_conn, timer));
}

/* Closes the connection (idempotent). Memory goes in the last close callback; pending write
 * and shutdown callbacks run before it with UV_ECANCELED. A dispatched exchange becomes gone
 * and stays with its handler; one still being received is freed here. */
static void conn_close(struct http_conn *c)
{
    if (c->state == CONN_CLOSED) {
        return;
    }
    conn_set_state(c, CONN_CLOSED);
    if (c->x != NULL) {
        if (c->x->dispatched) {
            c->x->conn = NULL;
        } else {
            exchange_free(c->x);
        }
        c->x = NULL;
    }
    c->reading = false;
    uv_close(&c->sock.handle, on_conn_sock_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_timer_closed);
}

static void on_conn_shutdown(uv_shutdown_t *req, int status)
{
    struct http_conn *c = SL_CONTAINER_OF(req, struct http_conn, shutdown_req);

    if (status < 0) {
        conn_close(c);
    }
}

/* Ends the connection after its last response: shut the write side (FIN), then drain what the
 * client still sends until its EOF or the linger timer, and close. */
static void conn_linger(struct http_conn *c)
{
    int rc;

    if (c->eof) {
        conn_close(c);
        return;
    }
    rc = uv_shutdown(&c->shutdown_req, &c->sock.stream, on_conn_shutdown);
    if (rc < 0) {
        conn_close(c);
        return;
    }
    c->rpos = 0;
    c->rlen = 0; /* pipelined requests after the last one are never answered */
    conn_set_state(c, CONN_LINGER);
    conn_update_reading(c);
}

static void on_response_written(uv_write_t *req, int status)
{
    struct http_conn *c = SL_CONTAINER_OF(req, struct http_conn, write_req);

    sl_buf_finish(&c->out);
    if (c->state == CONN_CLOSED) {
        return;
    }
    if (status < 0) {
        sl_log(SL_LOG_DEBUG, c->id, "http write failed err=%s", sl_strerror(status));
        conn_close(c);
        return;
    }
    if (c->close_after) {
        conn_linger(c);
        return;
    }
    c->partial = c->rpos < c->rlen;
    conn_set_state(c, c->partial ? CONN_HEAD : CONN_IDLE);
    conn_step(c);
}

static void on_continue_written(uv_write_t *req, int status)
{
    struct http_conn *c = SL_CONTAINER_OF(req, struct http_conn, continue_req);

    c->continue_pending = false;
    if (status < 0) {
        conn_close(c);
    }
}

/* The interim response of RFC 9110 §10.1.1. libuv wants a non-const buffer; nothing writes
 * to it. */
static char continue_line[] = "HTTP/1.1 100 Continue\r\n\r\n";

static int send_continue(struct http_conn *c)
{
    uv_buf_t buf;
    int rc;

    if (c->continue_pending) {
        return 0;
    }
    buf.base = continue_line;
    buf.len = sizeof(continue_line) - 1;
    rc = uv_write(&c->continue_req, &c->sock.stream, &buf, 1, on_continue_written);
    if (rc < 0) {
        conn_close(c);
        return rc;
    }
    c->continue_pending = true;
    return 0;
}

/* ---- Responses ---- */

static int build_head(struct sl_buf *b, int status, const char *const *headers,
                      const char *content_type, size_t len, bool close)
{
    char date[40];

    format_date(date, sizeof(date));
    SL_TRY(sl_buf_printf(b, "HTTP/1.1 %d %s\r\nDate: %s\r\nServer: sluice\r\n", status,
                         sl_http_reason(status), date));
    if (content_type != NULL) {
        SL_TRY(sl_buf_printf(b, "Content-Type: %s\r\n", content_type));
    }
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++) {
        SL_TRY(sl_buf_printf(b, "%s\r\n", headers[i]));
    }
    /* RFC 9110 §8.6: never in a 204; a 304 would have to state the length of the 200. */
    if (status != 204 && status != 304) {
        SL_TRY(sl_buf_printf(b, "Content-Length: %zu\r\n", len));
    }
    if (close) {
        SL_TRY(sl_buf_append_str(b, "Connection: close\r\n"));
    }
    return sl_buf_append(b, "\r\n", 2);
}

/* Builds the response in `c->out` and starts writing it; the connection goes to WRITING, or
 * is closed when the response cannot be built or written. */
static void queue_response(struct http_conn *c, int status, const char *const *headers,
                           const char *content_type, const void *body, size_t len, bool head_only)
{
    size_t send = head_only || status == 204 || status == 304 ? 0 : len;
    uv_buf_t buf;
    int rc = SL_ETOOBIG;

    SL_BUG_ON(c->out.p != NULL);
    if (send <= SIZE_MAX - RESPONSE_HEAD_MAX) {
        sl_buf_init(&c->out, RESPONSE_HEAD_MAX + send);
        rc = build_head(&c->out, status, headers, content_type, len, c->close_after);
    }
    if (rc == 0 && send > 0) {
        rc = sl_buf_append(&c->out, body, send);
    }
    if (rc == 0) {
        buf.base = (char *)c->out.p;
        buf.len = c->out.len;
        rc = uv_write(&c->write_req, &c->sock.stream, &buf, 1, on_response_written);
    }
    if (rc < 0) {
        sl_log(SL_LOG_WARN, c->id, "http response failed status=%d err=%s", status,
               sl_strerror(rc));
        sl_buf_finish(&c->out);
        conn_close(c);
        return;
    }
    conn_set_state(c, CONN_WRITING);
    conn_update_reading(c);
}

/* Answers with a JSON error body and the connection's current close decision. */
static void queue_error(struct http_conn *c, int status, const char *message)
{
    struct sl_buf b;
    int rc;

    sl_buf_init(&b, 16 * ERROR_MESSAGE_MAX);
    rc = append_error_body(&b, c->srv->cfg.error_key, message);
    if (rc < 0) {
        sl_buf_finish(&b);
        conn_close(c);
        return;
    }
    queue_response(c, status, NULL, "application/json", b.p, b.len, false);
    sl_buf_finish(&b);
}

/* Refuses the request being received with a server-generated error and ends the connection
 * after it: the rest of the input is never parsed. Always returns SL_EINVAL. */
static int conn_fail(struct http_conn *c, int status, const char *why)
{
    sl_log(SL_LOG_DEBUG, c->id, "http refused peer=%s status=%d err=\"%s\"", c->peer, status, why);
    if (c->x != NULL) {
        exchange_free(c->x);
        c->x = NULL;
    }
    c->close_after = true;
    c->rpos = 0;
    c->rlen = 0;
    queue_error(c, status, why);
    return SL_EINVAL;
}

/* A field line a handler may add: a token name (RFC 9110 §5.6.2), a colon, and a value
 * without CR or LF; not one of the fields that frame the message. */
static bool header_line_is_valid(const char *line)
{
    static const char *const reserved[] = { "content-length", "transfer-encoding", "connection" };
    static const char tchar[] = "!#$%&'*+-.^_`|~";
    size_t n = 0;

    while (line[n] != '\0' && line[n] != ':') {
        unsigned char ch = (unsigned char)line[n];

        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
              || strchr(tchar, ch) != NULL)) {
            return false;
        }
        n++;
    }
    if (n == 0 || line[n] != ':' || strpbrk(line + n, "\r\n") != NULL) {
        return false;
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(reserved); i++) {
        if (strlen(reserved[i]) == n && strncasecmp(line, reserved[i], n) == 0) {
            return false;
        }
    }
    return true;
}

static const char *check_response(int status, const char *const *headers, const char *content_type,
                                  const void *body, size_t len)
{
    if (status < 200 || status > 599) {
        return "status out of range";
    }
    if (body == NULL && len > 0) {
        return "body is NULL";
    }
    if (content_type != NULL
        && (content_type[0] == '\0' || strpbrk(content_type, "\r\n") != NULL)) {
        return "invalid content type";
    }
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++) {
        if (!header_line_is_valid(headers[i])) {
            return "invalid or reserved header line";
        }
    }
    return NULL;
}

static void log_request(const struct http_conn *c, const struct sl_http_exchange *x, int status,
                        size_t len)
{
    char path[128];

    if (!sl_log_enabled(SL_LOG_DEBUG)) {
        return;
    }
    /* The query is left out: it may carry tokens. */
    log_escape(path, sizeof(path), x->req.path);
    sl_log(SL_LOG_DEBUG, c->id, "http peer=%s method=%s path=\"%s\" status=%d bytes=%zu ms=%llu",
           x->peer, x->req.method, path, status, len,
           (unsigned long long)(uv_now(c->srv->loop) - x->start_ms));
}

void sl_http_respond_headers(struct sl_http_exchange *x, int status, const char *const *headers,
                             const char *content_type, const void *body, size_t len)
{
    struct http_conn *c = x->conn;
    const char *why;

    if (c == NULL) {
        sl_log(SL_LOG_DEBUG, x->req.conn_id, "http response dropped: connection gone status=%d",
               status);
        exchange_free(x);
        return;
    }
    SL_BUG_ON(c->x != x || c->state != CONN_HANDLING);
    c->x = NULL;
    c->close_after = c->close_after || !x->keep_alive || c->eof;
    why = check_response(status, headers, content_type, body, len);
    if (why != NULL) {
        sl_log(SL_LOG_ERROR, c->id, "http handler response refused status=%d err=\"%s\"", status,
               why);
        log_request(c, x, 500, 0);
        queue_error(c, 500, "internal error");
    } else {
        log_request(c, x, status, len);
        queue_response(c, status, headers, content_type, body, len, x->head_only);
    }
    exchange_free(x);
}

void sl_http_respond(struct sl_http_exchange *x, int status, const char *content_type,
                     const void *body, size_t len)
{
    sl_http_respond_headers(x, status, NULL, content_type, body, len);
}

void sl_http_respond_error(struct sl_http_exchange *x, int status, const char *message)
{
    struct sl_buf b;

    if (x->conn == NULL) {
        sl_http_respond(x, status, NULL, NULL, 0); /* dropped */
        return;
    }
    sl_buf_init(&b, 16 * ERROR_MESSAGE_MAX);
    if (append_error_body(&b, x->conn->srv->cfg.error_key, message) < 0) {
        sl_buf_reset(&b);
    }
    sl_http_respond(x, status, "application/json", sl_buf_cstr(&b), b.len);
    sl_buf_finish(&b);
}

/* ---- Connections: the request stepper ---- */

static int on_head(struct http_conn *c)
{
    const struct sl_h1_head *h = sl_h1_head(&c->parser);
    int rc;

    /* Origin-form only (RFC 9112 §3.2.1): absolute-form is for proxies, authority-form for
     * CONNECT, asterisk-form for OPTIONS of the whole server; none has a meaning here. */
    if (h->target[0] != '/') {
        return conn_fail(c, 400, "request target must be an absolute path");
    }
    rc = exchange_create(c, h, &c->x);
    if (rc < 0) {
        return conn_fail(c, 503, "out of memory");
    }
    c->x->start_ms = uv_now(c->srv->loop);
    c->partial = false;
    if (h->body == SL_H1_BODY_LENGTH && h->content_length > c->srv->cfg.body_max_bytes) {
        return conn_fail(c, 413, "request body too large");
    }
    conn_set_state(c, CONN_BODY);
    if (h->expect_continue && h->version_minor == 1 && h->body != SL_H1_BODY_NONE
        && !(h->body == SL_H1_BODY_LENGTH && h->content_length == 0)) {
        SL_TRY(send_continue(c));
    }
    return 0;
}

static int on_body(struct http_conn *c, struct sl_slice data)
{
    int rc = sl_buf_append(&c->x->body, data.p, data.n);

    if (rc == SL_ETOOBIG) {
        return conn_fail(c, 413, "request body too large");
    }
    if (rc < 0) {
        return conn_fail(c, 503, "out of memory");
    }
    return 0;
}

static void dispatch(struct http_conn *c)
{
    struct sl_http_exchange *x = c->x;
    struct sl_http_server *srv = c->srv;

    /* The exchange has its own copy of the head; the parser's is no longer needed. */
    sl_arena_reset(&c->arena);
    x->req.body = sl_slice_of(sl_buf_cstr(&x->body), x->body.len);
    x->dispatched = true;
    conn_set_state(c, CONN_HANDLING);
    srv->handler(x, &x->req, srv->arg);
}

static void fail_parse(struct http_conn *c, int rc)
{
    if (rc == SL_ETOOBIG) {
        (void)conn_fail(c, 431, sl_h1_error(&c->parser));
    } else if (rc == SL_ENOMEM) {
        (void)conn_fail(c, 503, "out of memory");
    } else {
        (void)conn_fail(c, 400, sl_h1_error(&c->parser));
    }
}

/* Every byte received is parsed; decides what the client's EOF means. */
static void on_input_drained(struct http_conn *c)
{
    if (!c->eof) {
        return;
    }
    if (c->state == CONN_BODY || c->partial) {
        sl_log(SL_LOG_DEBUG, c->id, "http peer=%s closed in the middle of a request", c->peer);
    }
    conn_close(c);
}

/* Parses what has been received, one event at a time, until the connection has to wait: for
 * bytes, for the handler, or for a write. Called from libuv callbacks only. */
static void conn_step(struct http_conn *c)
{
    while (c->state == CONN_IDLE || c->state == CONN_HEAD || c->state == CONN_BODY) {
        struct sl_h1_event ev;
        int n;

        if (c->state == CONN_IDLE) {
            if (c->rpos == c->rlen) {
                on_input_drained(c);
                break;
            }
            c->partial = true;
            conn_set_state(c, CONN_HEAD);
        }
        n = sl_h1_feed(&c->parser, c->rbuf + c->rpos, c->rlen - c->rpos, &ev);
        if (n < 0) {
            fail_parse(c, n);
            return;
        }
        if (n > 0 && c->state == CONN_HEAD) {
            c->partial = true;
        }
        c->rpos += (size_t)n;
        if (c->rpos == c->rlen) {
            c->rpos = 0;
            c->rlen = 0;
        }
        switch (ev.type) {
        case SL_H1_EV_NONE:
            if (c->rlen > 0 && n > 0) {
                continue;
            }
            if (c->rlen > 0) {
                /* The parser took nothing and reported nothing: never spin on it. */
                (void)conn_fail(c, 400, "malformed request");
                return;
            }
            on_input_drained(c);
            goto out;
        case SL_H1_EV_HEAD:
            if (on_head(c) < 0) {
                return;
            }
            break;
        case SL_H1_EV_BODY:
            if (on_body(c, ev.body) < 0) {
                return;
            }
            break;
        case SL_H1_EV_END:
        case SL_H1_EV_UPGRADE:
            dispatch(c);
            break;
        }
    }
out:
    conn_update_reading(c);
}

static void on_conn_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct http_conn *c = SL_CONTAINER_OF(s, struct http_conn, sock.stream);

    (void)buf;
    if (nread == 0) {
        return;
    }
    if (nread == UV_EOF) {
        c->eof = true;
        conn_update_reading(c);
        if (c->state == CONN_LINGER) {
            conn_close(c);
        } else {
            conn_step(c);
        }
        return;
    }
    if (nread < 0) {
        sl_log(SL_LOG_DEBUG, c->id, "http read failed peer=%s err=%s", c->peer,
               sl_strerror((int)nread));
        conn_close(c);
        return;
    }
    if (c->state == CONN_LINGER) {
        c->linger_bytes += (size_t)nread;
        if (c->linger_bytes > LINGER_MAX_BYTES) {
            conn_close(c);
        }
        return; /* discarded: rlen stays 0 */
    }
    c->rlen += (size_t)nread;
    if (c->state == CONN_BODY) {
        conn_set_state(c, CONN_BODY); /* progress re-arms the body timer */
    }
    conn_step(c);
}

static void on_conn_timer(uv_timer_t *t)
{
    struct http_conn *c = SL_CONTAINER_OF(t, struct http_conn, timer);

    switch (c->state) {
    case CONN_HEAD:
        if (c->partial) {
            (void)conn_fail(c, 408, "request head not received in time");
        } else {
            conn_close(c);
        }
        break;
    case CONN_BODY:
        (void)conn_fail(c, 408, "request body not received in time");
        break;
    case CONN_IDLE:
    case CONN_WRITING:
    case CONN_LINGER:
        sl_log(SL_LOG_DEBUG, c->id, "http timeout peer=%s", c->peer);
        conn_close(c);
        break;
    case CONN_HANDLING:
    case CONN_CLOSED:
        break;
    }
}

/* ---- Accepting ---- */

static void describe_peer(struct http_conn *c)
{
    struct sockaddr_storage ss;
    int len = (int)sizeof(ss);
    char ip[64];

    if (c->is_unix) {
        (void)snprintf(c->peer, sizeof(c->peer), "unix");
        return;
    }
    if (uv_tcp_getpeername(&c->sock.tcp, (struct sockaddr *)&ss, &len) != 0
        || uv_ip_name((struct sockaddr *)&ss, ip, sizeof(ip)) != 0) {
        (void)snprintf(c->peer, sizeof(c->peer), "unknown");
        return;
    }
    if (ss.ss_family == AF_INET6) {
        (void)snprintf(c->peer, sizeof(c->peer), "[%s]:%u", ip,
                       (unsigned)ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
    } else {
        (void)snprintf(c->peer, sizeof(c->peer), "%s:%u", ip,
                       (unsigned)ntohs(((struct sockaddr_in *)&ss)->sin_port));
    }
}

static void conn_link(struct http_conn *c)
{
    struct sl_http_server *srv = c->srv;

    c->prev = NULL;
    c->next = srv->conns;
    if (srv->conns != NULL) {
        srv->conns->prev = c;
    }
    srv->conns = c;
    srv->n_conns++;
}

/* Accepts the pending connection of `l` into a new connection. Returns 0 when the pending
 * connection was taken (served, or closed at once), or a negative code when it was not
 * touched and the caller must refuse it. */
static int conn_create(struct listener *l)
{
    struct sl_http_server *srv = l->srv;
    struct http_conn *c = sl_calloc(1, sizeof(*c));
    int rc;

    if (c == NULL) {
        return SL_ENOMEM;
    }
    c->srv = srv;
    c->is_unix = l->is_unix;
    sl_arena_init(&c->arena, ARENA_CHUNK_BYTES, srv->arena_max_bytes);
    sl_h1_init(&c->parser, SL_H1_REQUEST, &srv->cfg.head_limits, &c->arena);
    sl_buf_init(&c->out, 0);
    rc = c->is_unix ? uv_pipe_init(srv->loop, &c->sock.pipe, 0)
                    : uv_tcp_init(srv->loop, &c->sock.tcp);
    if (rc < 0) {
        goto fail_free;
    }
    rc = uv_timer_init(srv->loop, &c->timer);
    if (rc < 0) {
        goto fail_close_sock;
    }
    c->pending_closes = 2;
    c->id = ++srv->next_id;
    conn_link(c);
    rc = uv_accept(&l->sock.stream, &c->sock.stream);
    if (rc < 0) {
        sl_log(SL_LOG_WARN, c->id, "http accept failed err=%s", sl_strerror(rc));
        conn_close(c);
        return 0;
    }
    describe_peer(c);
    conn_set_state(c, CONN_HEAD);
    conn_update_reading(c);
    return 0;

fail_close_sock:
    c->pending_closes = 1;
    conn_set_state(c, CONN_CLOSED);
    conn_link(c);
    uv_close(&c->sock.handle, on_conn_sock_closed); /* frees c */
    return rc;
fail_free:
    sl_h1_finish(&c->parser);
    sl_free(c);
    return rc;
}

static void on_spare_closed(uv_handle_t *h)
{
    struct listener *l = SL_CONTAINER_OF(h, struct listener, spare.handle);
    struct sl_http_server *srv = l->srv;

    l->spare_busy = false;
    srv->pending_closes--;
    if (l->stalled && l->state == LISTENER_OPEN) {
        l->stalled = false;
        listener_accept(l);
    }
    server_maybe_finish(srv);
}

/* Accepts the pending connection only to answer the canned 503 and close it. */
static void listener_refuse(struct listener *l)
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
    if (uv_accept(&l->sock.stream, &l->spare.stream) == 0) {
        buf.base = srv->overload;
        buf.len = srv->overload_len;
        /* A fresh socket's send buffer takes this whole; a short write only cuts a 503. */
        (void)uv_try_write(&l->spare.stream, &buf, 1);
    }
    uv_close(&l->spare.handle, on_spare_closed);
}

static void listener_accept(struct listener *l)
{
    struct sl_http_server *srv = l->srv;
    int rc;

    if (srv->n_conns >= srv->cfg.max_connections) {
        sl_log(SL_LOG_DEBUG, 0, "http connection refused: %zu connections open", srv->n_conns);
        listener_refuse(l);
        return;
    }
    rc = conn_create(l);
    if (rc < 0) {
        sl_log(SL_LOG_WARN, 0, "http connection refused err=%s", sl_strerror(rc));
        listener_refuse(l);
    }
}

static void on_listener_connection(uv_stream_t *s, int status)
{
    struct listener *l = SL_CONTAINER_OF(s, struct listener, sock.stream);

    if (status < 0) {
        sl_log(SL_LOG_WARN, 0, "http accept failed err=%s", sl_strerror(status));
        return;
    }
    listener_accept(l);
}

/* ---- The server ---- */

/* Frees the server once it is closing and nothing it owns is open, then tells the owner. */
static void server_maybe_finish(struct sl_http_server *srv)
{
    sl_http_closed_fn *closed = srv->closed;
    void *arg = srv->closed_arg;

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
    server_maybe_finish(srv);
}

static void on_listener_closed(uv_handle_t *h)
{
    struct listener *l = SL_CONTAINER_OF(h, struct listener, sock.handle);
    struct sl_http_server *srv = l->srv;

    l->state = LISTENER_FREE;
    srv->pending_closes--;
    server_maybe_finish(srv);
}

/* libuv removes a unix socket's file when its listener closes. */
static void listener_close(struct listener *l)
{
    if (l->state != LISTENER_OPEN) {
        return;
    }
    l->state = LISTENER_CLOSING;
    l->stalled = false;
    uv_close(&l->sock.handle, on_listener_closed);
}

static struct listener *listener_slot(struct sl_http_server *srv, bool is_unix)
{
    for (size_t i = 0; i < SL_ARRAY_LEN(srv->listeners); i++) {
        struct listener *l = &srv->listeners[i];

        if (l->state == LISTENER_FREE && !l->spare_busy) {
            l->srv = srv;
            l->is_unix = is_unix;
            l->stalled = false;
            return l;
        }
    }
    return NULL;
}

/* Marks a slot whose handle was just initialised as open (its close is owed from now on). */
static void listener_opened(struct listener *l)
{
    l->state = LISTENER_OPEN;
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
                           + 4 * ARENA_CHUNK_BYTES;
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

static void record_tcp_port(struct listener *l)
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

int sl_http_server_listen_tcp(struct sl_http_server *srv, const char *addr_port, char *err,
                              size_t errlen)
{
    struct sockaddr_storage ss;
    struct listener *l;
    int rc;

    if (srv->closing) {
        set_err(err, errlen, "the server is closing");
        return SL_EINVAL;
    }
    if (parse_addr_port(addr_port, &ss) < 0) {
        set_err(err, errlen, "invalid listen address \"%s\" (want IP:PORT or [IPv6]:PORT)",
                addr_port);
        return SL_EINVAL;
    }
    l = listener_slot(srv, false);
    if (l == NULL) {
        set_err(err, errlen, "too many listeners");
        return SL_ETOOBIG;
    }
    rc = uv_tcp_init_ex(srv->loop, &l->sock.tcp, ss.ss_family);
    if (rc < 0) {
        set_err(err, errlen, "cannot listen on %s: %s", addr_port, uv_strerror(rc));
        return rc;
    }
    listener_opened(l);
    rc = uv_tcp_bind(&l->sock.tcp, (const struct sockaddr *)&ss, 0);
    if (rc == 0) {
        rc = uv_listen(&l->sock.stream, LISTEN_BACKLOG, on_listener_connection);
    }
    if (rc < 0) {
        set_err(err, errlen, "cannot listen on %s: %s", addr_port, uv_strerror(rc));
        listener_close(l);
        return rc;
    }
    record_tcp_port(l);
    return 0;
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
        set_err(err, errlen, "cannot inspect %s: %s", path, uv_strerror(rc));
        return rc;
    }
    if (!S_ISSOCK(st.st_mode)) {
        set_err(err, errlen, "%s exists and is not a socket; not replacing it", path);
        return SL_EEXIST;
    }
    rc = unix_socket_is_live(path);
    if (rc != 0) {
        if (rc > 0) {
            rc = UV_EADDRINUSE;
        }
        set_err(err, errlen, "%s: %s", path,
                rc == UV_EADDRINUSE ? "another server listens on it" : uv_strerror(rc));
        return rc;
    }
    if (unlink(path) == -1 && errno != ENOENT) {
        rc = -errno;
        set_err(err, errlen, "cannot remove the stale socket %s: %s", path, uv_strerror(rc));
        return rc;
    }
    return 0;
}

int sl_http_server_listen_unix(struct sl_http_server *srv, const char *path, int mode, char *err,
                               size_t errlen)
{
    struct sockaddr_un sa;
    struct listener *l;
    mode_t old;
    int rc;

    if (srv->closing || mode < 0 || (mode & ~0777) != 0 || path[0] == '\0'
        || strlen(path) >= sizeof(sa.sun_path)) {
        set_err(err, errlen, "cannot listen on %s: invalid path, mode or state", path);
        return SL_EINVAL;
    }
    SL_TRY(clear_unix_path(path, err, errlen));
    l = listener_slot(srv, true);
    if (l == NULL) {
        set_err(err, errlen, "too many listeners");
        return SL_ETOOBIG;
    }
    rc = uv_pipe_init(srv->loop, &l->sock.pipe, 0);
    if (rc < 0) {
        set_err(err, errlen, "cannot listen on %s: %s", path, uv_strerror(rc));
        return rc;
    }
    listener_opened(l);
    /* bind(2) creates the file with 0777 & ~umask: with this umask it never exists with
     * wider permissions than `mode`, not even for a moment. */
    old = umask((mode_t)(~mode & 0777));
    rc = uv_pipe_bind(&l->sock.pipe, path);
    (void)umask(old);
    if (rc == 0) {
        rc = uv_listen(&l->sock.stream, LISTEN_BACKLOG, on_listener_connection);
    }
    if (rc < 0) {
        set_err(err, errlen, "cannot listen on %s: %s", path, uv_strerror(rc));
        listener_close(l);
        return rc;
    }
    return 0;
}

int sl_http_server_port(const struct sl_http_server *srv)
{
    return srv->tcp_port >= 0 ? srv->tcp_port : SL_ENOTFOUND;
}

size_t sl_http_server_connections(const struct sl_http_server *srv)
{
    return srv->n_conns;
}

void sl_http_server_close(struct sl_http_server *srv, sl_http_closed_fn *closed, void *arg)
{
    if (srv->closing) {
        return;
    }
    srv->closing = true;
    srv->closed = closed;
    srv->closed_arg = arg;
    for (size_t i = 0; i < SL_ARRAY_LEN(srv->listeners); i++) {
        listener_close(&srv->listeners[i]);
    }
    /* conn_close() never frees synchronously, so the list stays intact while walking it. */
    for (struct http_conn *c = srv->conns; c != NULL; c = c->next) {
        conn_close(c);
    }
    uv_close((uv_handle_t *)&srv->anchor, on_anchor_closed);
}
