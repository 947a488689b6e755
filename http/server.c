/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http/server.c - the connections of http/server.h: accepting one, reading and parsing its
 * requests, the exchanges handed to the handler, the responses written back, timeouts and
 * lingering, TLS on the connections of a TLS listener (OpenSSL on memory BIOs, http/tls.h), and
 * the text they need (reason phrases, JSON strings, dates). The server itself and its listeners
 * are in http/server_listen.c.
 */
#include "http/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/err.h>
#include <uv.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/list.h"
#include "base/log.h"
#include "base/mem.h"
#include "http/server_int.h"

/* Bytes read from a socket at once; the parser consumes them before the next read. */
#define READ_BUF_BYTES 16384
/* Most bytes of a response head (status line and header lines) the server builds. */
#define RESPONSE_HEAD_MAX ((size_t)64 * 1024)
/* Error messages in JSON bodies are cut here (input bytes, before escaping). */
#define ERROR_MESSAGE_MAX ((size_t)1024)
/* After the last response of a connection the server shuts its write side and drains the
 * client's leftovers for at most this long and this many bytes, so that closing with unread
 * data (which makes the kernel send RST) does not destroy the response in flight. */
#define LINGER_MS        2000
#define LINGER_MAX_BYTES ((size_t)1024 * 1024)
/* Ciphertext read from a TLS connection's socket at once; it is fed to OpenSSL at once. */
#define TLS_RAW_BYTES 16384
/* Room for "[<IPv6 text>]:<port>". */
#define PEER_MAX 80
/* A chunked request body is charged to the body budget in steps of this many bytes (or what is
 * left of its own limit). */
#define CHUNKED_CHARGE_BYTES ((size_t)64 * 1024)

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
    /* The gate holds the exchange of a head whose body is not read yet: no reading, no
     * timer. */
    CONN_GATE,
    /* The response is being written: the idle timer bounds a client that does not read. */
    CONN_WRITING,
    /* The last response is written and the write side shut: drain until EOF or the timer. */
    CONN_LINGER,
    /* Handles are closing; the memory goes in the last close callback. */
    CONN_CLOSED,
};

struct sl__http_conn {
    /* Borrowed; the server outlives its connections. */
    struct sl_http_server *srv;
    /* Link in the server's list of open connections. */
    struct sl_list link;
    union sl__http_sock sock;
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
    /* conn_step() is running (a gate that proceeds at once must not start another). */
    bool stepping;
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
    /* The peer's address (TCP; `has_addr` false for a unix socket or when unknown), for the
     * limits per client address. */
    struct sockaddr_storage addr;
    bool has_addr;
    /* Under TLS (a connection of a TLS listener): the connection (owned), whether its
     * handshake is done, the bytes of handshake, alert and close_notify writes in flight, and
     * the ciphertext buffer reads go to (owned, TLS_RAW_BYTES); NULL in the clear. Decrypted
     * bytes go to `rbuf` only while it is empty and the state reads, as in the clear. */
    SSL *ssl;
    bool tls_ready;
    size_t tls_in_flight;
    uint8_t *tls_raw;
    uint8_t rbuf[READ_BUF_BYTES];
};

struct sl_http_exchange {
    /* The connection, or NULL once it is gone (then responding only frees the exchange). */
    struct sl__http_conn *conn;
    /* Handed to the handler (points into `head`, `arena`, `body`, `peer`). */
    struct sl_http_request req;
    /* The request head, copied into `arena`. */
    struct sl_h1_head head;
    struct sl_arena arena;
    /* The body, capped at cfg.body_max_bytes. */
    struct sl_buf body;
    /* Bytes of the server's body budget this request holds (its Content-Length, or what has
     * arrived of a chunked body); given back when it is answered or its connection goes. */
    size_t charged;
    /* The handler (or the gate) has the exchange. */
    bool dispatched;
    /* The gate has it: its body is not read yet. */
    bool gated;
    /* A response to HEAD: no body bytes. */
    bool head_only;
    /* The connection may serve another request after this one. */
    bool keep_alive;
    /* Loop time when the head was complete, for the request log line. */
    uint64_t start_ms;
    /* Header lines every answer of the exchange carries (sl_http_exchange_set_headers());
     * borrowed, NULL for none. */
    const char *const *extra;
    char peer[PEER_MAX];
};

static void conn_step(struct sl__http_conn *c);
static void conn_advance(struct sl__http_conn *c);
static void conn_close(struct sl__http_conn *c);
static int tls_flush(struct sl__http_conn *c);
static int tls_encrypt_out(struct sl__http_conn *c);
static void tls_on_read(struct sl__http_conn *c, size_t n);
static void on_conn_timer(uv_timer_t *t);

/* ---- Small helpers: reasons, JSON, dates, log escaping ---- */

static const struct {
    int status;
    const char *reason;
} reasons[] = {
    { 100, "Continue" },
    { 101, "Switching Protocols" },
    { 102, "Processing" },
    { 103, "Early Hints" },
    { 200, "OK" },
    { 201, "Created" },
    { 202, "Accepted" },
    { 203, "Non-Authoritative Information" },
    { 204, "No Content" },
    { 205, "Reset Content" },
    { 206, "Partial Content" },
    { 207, "Multi-Status" },
    { 300, "Multiple Choices" },
    { 301, "Moved Permanently" },
    { 302, "Found" },
    { 303, "See Other" },
    { 304, "Not Modified" },
    { 307, "Temporary Redirect" },
    { 308, "Permanent Redirect" },
    { 400, "Bad Request" },
    { 401, "Unauthorized" },
    { 402, "Payment Required" },
    { 403, "Forbidden" },
    { 404, "Not Found" },
    { 405, "Method Not Allowed" },
    { 406, "Not Acceptable" },
    { 407, "Proxy Authentication Required" },
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
    { 423, "Locked" },
    { 424, "Failed Dependency" },
    { 425, "Too Early" },
    { 426, "Upgrade Required" },
    { 428, "Precondition Required" },
    { 429, "Too Many Requests" },
    { 431, "Request Header Fields Too Large" },
    { 451, "Unavailable For Legal Reasons" },
    { 500, "Internal Server Error" },
    { 501, "Not Implemented" },
    { 502, "Bad Gateway" },
    { 503, "Service Unavailable" },
    { 504, "Gateway Timeout" },
    { 505, "HTTP Version Not Supported" },
    { 507, "Insufficient Storage" },
    { 511, "Network Authentication Required" },
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

bool sl_http_utf8_valid(const void *p, size_t n)
{
    const uint8_t *s = p;
    size_t i = 0;

    while (i < n) {
        size_t len = s[i] < 0x80 ? 1 : utf8_len(s + i, n - i);

        if (len == 0) {
            return false;
        }
        i += len;
    }
    return true;
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

/* ---- Limits per client address ---- */

/* Whether `a` and `b` come from the same client address (ports aside). */
static bool same_addr(const struct sl__http_conn *a, const struct sl__http_conn *b)
{
    const struct sockaddr_storage *x = &a->addr;
    const struct sockaddr_storage *y = &b->addr;

    if (!a->has_addr || !b->has_addr || x->ss_family != y->ss_family) {
        return false;
    }
    if (x->ss_family == AF_INET) {
        return ((const struct sockaddr_in *)(const void *)x)->sin_addr.s_addr
               == ((const struct sockaddr_in *)(const void *)y)->sin_addr.s_addr;
    }
    return memcmp(&((const struct sockaddr_in6 *)(const void *)x)->sin6_addr,
                  &((const struct sockaddr_in6 *)(const void *)y)->sin6_addr,
                  sizeof(struct in6_addr))
           == 0;
}

/* The open connections from `c`'s client address, `c` included (at most max_connections:
 * the scan is bounded). */
static size_t peer_connections(const struct sl__http_conn *c)
{
    size_t n = 0;

    for (struct sl_list *l = c->srv->conns.next; l != &c->srv->conns; l = l->next) {
        n += same_addr(SL_CONTAINER_OF(l, struct sl__http_conn, link), c);
    }
    return n;
}

/* The body bytes the requests from `c`'s client address hold, `c`'s own included. */
static size_t peer_body_bytes(const struct sl__http_conn *c)
{
    size_t n = 0;

    for (struct sl_list *l = c->srv->conns.next; l != &c->srv->conns; l = l->next) {
        const struct sl__http_conn *o = SL_CONTAINER_OF(l, struct sl__http_conn, link);

        if (o->x != NULL && same_addr(o, c)) {
            n += o->x->charged;
        }
    }
    return n;
}

static int conn_fail(struct sl__http_conn *c, int status, const char *why);

/* Charges `n` more body bytes to the request being received on `c`, or refuses it (503, the
 * connection closed) when the server, or its client address, would hold more than allowed. */
static int body_charge(struct sl__http_conn *c, size_t n)
{
    struct sl_http_server *srv = c->srv;

    if (n > srv->cfg.bodies_max_bytes - srv->body_bytes) {
        return conn_fail(c, 503, "the server holds as many request bodies as it takes; try again");
    }
    if (c->has_addr) {
        size_t held = peer_body_bytes(c);

        if (held > srv->cfg.peer_bodies_max_bytes || n > srv->cfg.peer_bodies_max_bytes - held) {
            return conn_fail(c, 503,
                             "this client address has as many request bodies in flight as "
                             "it may; try again");
        }
    }
    srv->body_bytes += n;
    c->x->charged += n;
    return 0;
}

/* ---- Exchanges ---- */

static void exchange_free(struct sl_http_exchange *x)
{
    sl_arena_finish(&x->arena);
    sl_buf_finish(&x->body);
    sl_free(x);
}

/* Gives back what `x` holds of the server's body budget. */
static void body_uncharge(struct sl_http_server *srv, struct sl_http_exchange *x)
{
    SL_BUG_ON(srv->body_bytes < x->charged);
    srv->body_bytes -= x->charged;
    x->charged = 0;
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
static int exchange_create(struct sl__http_conn *c, const struct sl_h1_head *h,
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
    sl_arena_init(&x->arena, SL__HTTP_ARENA_CHUNK_BYTES, srv->arena_max_bytes);
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

void sl_http_exchange_set_headers(struct sl_http_exchange *x, const char *const *headers)
{
    x->extra = headers;
}

bool sl_http_exchange_is_gone(const struct sl_http_exchange *x)
{
    return x->conn == NULL;
}

/* ---- Connections: state, timers, reading ---- */

static void conn_set_state(struct sl__http_conn *c, enum conn_state s)
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
    case CONN_GATE:
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
    case CONN_GATE:
    case CONN_WRITING:
    case CONN_CLOSED:
        return false;
    }
    return false;
}

static void on_conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct sl__http_conn *c = SL_CONTAINER_OF(h, struct sl__http_conn, sock.handle);

    (void)suggested;
    if (c->ssl != NULL) {
        buf->base = (char *)c->tls_raw;
        buf->len = TLS_RAW_BYTES;
        return;
    }
    /* Reading runs only once everything received is parsed, so this is normally the whole
     * buffer; a zero-length buffer makes libuv report UV_ENOBUFS, which closes. */
    buf->base = (char *)c->rbuf + c->rlen;
    buf->len = sizeof(c->rbuf) - c->rlen;
}

static void on_conn_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Reads exactly when the state wants bytes and every byte received so far is parsed: a
 * connection never takes more from the socket than it has room to parse (backpressure). */
static void conn_update_reading(struct sl__http_conn *c)
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

static void conn_release(struct sl__http_conn *c)
{
    struct sl_http_server *srv = c->srv;

    if (--c->pending_closes > 0) {
        return;
    }
    sl_list_remove(&c->link);
    srv->n_conns--;
    SSL_free(c->ssl);
    sl_free(c->tls_raw);
    sl_h1_finish(&c->parser);
    sl_arena_finish(&c->arena);
    sl_buf_finish(&c->out);
    sl_free(c);
    sl__http_server_maybe_finish(srv);
}

static void on_conn_sock_closed(uv_handle_t *h)
{
    conn_release(SL_CONTAINER_OF(h, struct sl__http_conn, sock.handle));
}

static void on_conn_timer_closed(uv_handle_t *h)
{
    conn_release(SL_CONTAINER_OF(h, struct sl__http_conn, timer));
}

/* Closes the connection (idempotent). Memory goes in the last close callback; pending write
 * and shutdown callbacks run before it with UV_ECANCELED. A dispatched exchange becomes gone
 * and stays with its handler; one still being received is freed here. */
static void conn_close(struct sl__http_conn *c)
{
    if (c->state == CONN_CLOSED) {
        return;
    }
    conn_set_state(c, CONN_CLOSED);
    if (c->x != NULL) {
        body_uncharge(c->srv, c->x);
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
    struct sl__http_conn *c = SL_CONTAINER_OF(req, struct sl__http_conn, shutdown_req);

    if (status < 0) {
        conn_close(c);
    }
}

/* Ends the connection after its last response: shut the write side (FIN), then drain what the
 * client still sends until its EOF or the linger timer, and close. */
static void conn_linger(struct sl__http_conn *c)
{
    int rc;

    if (c->eof) {
        conn_close(c);
        return;
    }
    /* Under TLS the end is said with close_notify first, so the client knows the answer was
     * not cut. */
    if (c->ssl != NULL && (SSL_shutdown(c->ssl) < 0 || tls_flush(c) < 0)) {
        ERR_clear_error();
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
    struct sl__http_conn *c = SL_CONTAINER_OF(req, struct sl__http_conn, write_req);

    sl_buf_finish(&c->out);
    if (c->state == CONN_CLOSED) {
        return;
    }
    if (status < 0) {
        sl_log(SL_LOG_DEBUG, c->id, "http write failed err=%s", sl_strerror(status));
        conn_close(c);
        return;
    }
    /* A draining server ends each connection after the answer it was writing. */
    if (c->close_after || c->srv->closing) {
        conn_linger(c);
        return;
    }
    c->partial = c->rpos < c->rlen;
    conn_set_state(c, c->partial ? CONN_HEAD : CONN_IDLE);
    conn_advance(c);
}

static void on_continue_written(uv_write_t *req, int status)
{
    struct sl__http_conn *c = SL_CONTAINER_OF(req, struct sl__http_conn, continue_req);

    c->continue_pending = false;
    if (status < 0) {
        conn_close(c);
    }
}

/* The interim response of RFC 9110 §10.1.1. libuv wants a non-const buffer; nothing writes
 * to it. */
static char continue_line[] = "HTTP/1.1 100 Continue\r\n\r\n";

static int send_continue(struct sl__http_conn *c)
{
    uv_buf_t buf;
    int rc;

    if (c->continue_pending) {
        return 0;
    }
    if (c->ssl != NULL) {
        size_t n = 0;

        if (SSL_write_ex(c->ssl, continue_line, sizeof(continue_line) - 1, &n) != 1
            || tls_flush(c) < 0) {
            ERR_clear_error();
            conn_close(c);
            return SL_EIO;
        }
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
                      const char *const *extra, const char *content_type, size_t len, bool close)
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
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
        SL_TRY(sl_buf_printf(b, "%s\r\n", extra[i]));
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
static void queue_response(struct sl__http_conn *c, int status, const char *const *headers,
                           const char *const *extra, const char *content_type, const void *body,
                           size_t len, bool head_only)
{
    size_t send = head_only || status == 204 || status == 304 ? 0 : len;
    uv_buf_t buf;
    int rc = SL_ETOOBIG;

    SL_BUG_ON(c->out.p != NULL);
    if (send <= SIZE_MAX - RESPONSE_HEAD_MAX) {
        sl_buf_init(&c->out, RESPONSE_HEAD_MAX + send);
        rc = build_head(&c->out, status, headers, extra, content_type, len, c->close_after);
    }
    if (rc == 0 && send > 0) {
        rc = sl_buf_append(&c->out, body, send);
    }
    if (rc == 0 && c->ssl != NULL) {
        rc = tls_encrypt_out(c);
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

/* Answers with a JSON error body and the connection's current close decision. It carries
 * Cache-Control: no-store (an error is about one request), X-Content-Type-Options: nosniff (a
 * browser reads it as the JSON it says it is) and no line of an exchange (which may be what was
 * refused). */
static void queue_error(struct sl__http_conn *c, int status, const char *message)
{
    static const char *const no_store[] = { "Cache-Control: no-store",
                                            "X-Content-Type-Options: nosniff", NULL };

    struct sl_buf b;
    int rc;

    sl_buf_init(&b, 16 * ERROR_MESSAGE_MAX);
    rc = append_error_body(&b, c->srv->cfg.error_key, message);
    if (rc < 0) {
        sl_buf_finish(&b);
        conn_close(c);
        return;
    }
    queue_response(c, status, no_store, NULL, "application/json", b.p, b.len, false);
    sl_buf_finish(&b);
}

/* Refuses the request being received with a server-generated error and ends the connection
 * after it: the rest of the input is never parsed. Always returns SL_EINVAL. */
static int conn_fail(struct sl__http_conn *c, int status, const char *why)
{
    sl_log(SL_LOG_DEBUG, c->id, "http refused peer=%s status=%d err=\"%s\"", c->peer, status, why);
    if (c->x != NULL) {
        body_uncharge(c->srv, c->x);
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

static const char *check_response(int status, const char *const *headers, const char *const *extra,
                                  const char *content_type, const void *body, size_t len)
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
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
        if (!header_line_is_valid(extra[i])) {
            return "invalid or reserved header line of the exchange";
        }
    }
    return NULL;
}

static void log_request(const struct sl__http_conn *c, const struct sl_http_exchange *x, int status,
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
    struct sl__http_conn *c = x->conn;
    const char *why;

    if (c == NULL) {
        sl_log(SL_LOG_DEBUG, x->req.conn_id, "http response dropped: connection gone status=%d",
               status);
        exchange_free(x);
        return;
    }
    SL_BUG_ON(c->x != x || (c->state != CONN_HANDLING && c->state != CONN_GATE));
    body_uncharge(c->srv, x);
    c->x = NULL;
    /* An answer of the gate leaves the body unread: nothing after it could be parsed. */
    c->close_after = c->close_after || !x->keep_alive || c->eof || x->gated;
    why = check_response(status, headers, x->extra, content_type, body, len);
    if (why != NULL) {
        sl_log(SL_LOG_ERROR, c->id, "http handler response refused status=%d err=\"%s\"", status,
               why);
        log_request(c, x, 500, 0);
        queue_error(c, 500, "internal error");
    } else {
        log_request(c, x, status, len);
        queue_response(c, status, headers, x->extra, content_type, body, len, x->head_only);
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

/* The fields a request may carry once at most: which one a handler would read is not for a
 * client to make ambiguous (more than one Host is the parser's refusal, and so is more than one
 * Content-Length that differ). */
static const char *const single_fields[] = { "Authorization", "Content-Type", "Content-Length",
                                             "Origin" };

static int start_body(struct sl__http_conn *c);

static int on_head(struct sl__http_conn *c)
{
    const struct sl_h1_head *h = sl_h1_head(&c->parser);
    int rc;

    /* Origin-form only (RFC 9112 §3.2.1): absolute-form is for proxies, authority-form for
     * CONNECT, asterisk-form for OPTIONS of the whole server; none has a meaning here. */
    if (h->target[0] != '/') {
        return conn_fail(c, 400, "request target must be an absolute path");
    }
    /* RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without Host. */
    if (h->version_minor == 1 && sl_h1_count(h, "host") == 0) {
        return conn_fail(c, 400, "an HTTP/1.1 request needs a Host header");
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(single_fields); i++) {
        if (sl_h1_count(h, single_fields[i]) > 1) {
            char why[64];

            (void)snprintf(why, sizeof(why), "more than one %s header", single_fields[i]);
            return conn_fail(c, 400, why);
        }
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
    if (c->srv->cfg.gate != NULL && h->body != SL_H1_BODY_NONE
        && !(h->body == SL_H1_BODY_LENGTH && h->content_length == 0)) {
        c->x->dispatched = true;
        c->x->gated = true;
        conn_set_state(c, CONN_GATE);
        c->srv->cfg.gate(c->x, &c->x->req, c->srv->arg);
        return 0;
    }
    return start_body(c);
}

/* The head is in and its body may come: charged, invited (`100 Continue`), then read. */
static int start_body(struct sl__http_conn *c)
{
    const struct sl_h1_head *h = &c->x->head;

    if (h->body == SL_H1_BODY_LENGTH) {
        SL_TRY(body_charge(c, (size_t)h->content_length));
    }
    conn_set_state(c, CONN_BODY);
    if (h->expect_continue && h->version_minor == 1 && h->body != SL_H1_BODY_NONE
        && !(h->body == SL_H1_BODY_LENGTH && h->content_length == 0)) {
        SL_TRY(send_continue(c));
    }
    return 0;
}

void sl_http_proceed(struct sl_http_exchange *x)
{
    struct sl__http_conn *c = x->conn;

    if (c == NULL) {
        exchange_free(x);
        return;
    }
    SL_BUG_ON(c->x != x || c->state != CONN_GATE || !x->gated);
    x->dispatched = false;
    x->gated = false;
    if (start_body(c) < 0) {
        return; /* answered (503) or closed */
    }
    if (!c->stepping) {
        conn_step(c);
    }
}

static int on_body(struct sl__http_conn *c, struct sl_slice data)
{
    int rc;

    /* A Content-Length was charged whole with the head; a chunked body as it comes, once it
     * is known to fit the request's own limit (413 says more than the budget's 503), in steps
     * of CHUNKED_CHARGE_BYTES: the budget per address is a scan of the connections, not to be
     * made for every one-byte chunk. */
    if (c->x->head.body != SL_H1_BODY_LENGTH) {
        size_t max = c->srv->cfg.body_max_bytes;
        size_t need = c->x->body.len + data.n;

        if (data.n > max - c->x->body.len) {
            return conn_fail(c, 413, "request body too large");
        }
        if (need > c->x->charged) {
            size_t step = need - c->x->charged;

            if (step < CHUNKED_CHARGE_BYTES) {
                step = max - c->x->charged < CHUNKED_CHARGE_BYTES ? max - c->x->charged
                                                                  : CHUNKED_CHARGE_BYTES;
            }
            SL_TRY(body_charge(c, step));
        }
    }
    rc = sl_buf_append(&c->x->body, data.p, data.n);

    if (rc == SL_ETOOBIG) {
        return conn_fail(c, 413, "request body too large");
    }
    if (rc < 0) {
        return conn_fail(c, 503, "out of memory");
    }
    return 0;
}

static void dispatch(struct sl__http_conn *c)
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

static void fail_parse(struct sl__http_conn *c, int rc)
{
    if (rc == SL_ETOOBIG) {
        (void)conn_fail(c, sl_h1_error_target_too_long(&c->parser) ? 414 : 431,
                        sl_h1_error(&c->parser));
    } else if (rc == SL_ENOMEM) {
        (void)conn_fail(c, 503, "out of memory");
    } else if (sl_h1_error_in_method(&c->parser)) {
        /* RFC 9110 §15.6.2: a method the server does not know (any known to the parser reaches
         * the handler, which answers 405 where its route lacks it). */
        (void)conn_fail(c, 501, "method not implemented");
    } else {
        (void)conn_fail(c, 400, sl_h1_error(&c->parser));
    }
}

/* Every byte received is parsed; decides what the client's EOF means. */
static void on_input_drained(struct sl__http_conn *c)
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
 * bytes, for the gate, for the handler, or for a write. Called from libuv callbacks only. */
static void conn_step_events(struct sl__http_conn *c)
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

static void conn_step(struct sl__http_conn *c)
{
    /* The connection's memory goes in a close callback, never during the step. */
    c->stepping = true;
    conn_step_events(c);
    c->stepping = false;
}

static void on_conn_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct sl__http_conn *c = SL_CONTAINER_OF(s, struct sl__http_conn, sock.stream);

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
    if (c->ssl != NULL) {
        tls_on_read(c, (size_t)nread);
        return;
    }
    c->rlen += (size_t)nread;
    if (c->state == CONN_BODY) {
        conn_set_state(c, CONN_BODY); /* progress re-arms the body timer */
    }
    conn_step(c);
}

static void on_conn_timer(uv_timer_t *t)
{
    struct sl__http_conn *c = SL_CONTAINER_OF(t, struct sl__http_conn, timer);

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
    case CONN_GATE:
    case CONN_CLOSED:
        break;
    }
}

/* ---- TLS: the handshake, decrypting into `rbuf`, encrypting the answers ---- */

/* Sends whatever OpenSSL wrote (handshake messages, alerts, close_notify). */
static int tls_flush(struct sl__http_conn *c)
{
    int rc = sl_http_tls_send(c->ssl, &c->sock.stream, &c->tls_in_flight);

    if (rc < 0) {
        sl_log(SL_LOG_DEBUG, c->id, "http tls write failed peer=%s err=%s", c->peer,
               sl_strerror(rc));
    }
    return rc;
}

/* Replaces the plaintext response in `c->out` with its ciphertext (after any output OpenSSL
 * had waiting, which must go first). */
static int tls_encrypt_out(struct sl__http_conn *c)
{
    struct sl_buf ct;
    size_t n = 0;
    int rc = 0;

    if (c->out.len > 0 && SSL_write_ex(c->ssl, c->out.p, c->out.len, &n) != 1) {
        ERR_clear_error();
        return SL_ECRYPTO;
    }
    /* Each record adds at most 22 bytes of framing to up to 16 KiB. */
    sl_buf_init(&ct, c->out.len + c->out.len / 256 + 4096 + SL_HTTP_TLS_FLIGHT_MAX);
    rc = sl_http_tls_take(c->ssl, &ct);
    if (rc < 0) {
        sl_buf_finish(&ct);
        return rc;
    }
    sl_buf_finish(&c->out);
    c->out = ct;
    return 0;
}

/* Moves the handshake on; 1 once done, 0 while it needs the peer, -1 when the connection was
 * closed (a failed handshake: logged). */
static int tls_handshake(struct sl__http_conn *c)
{
    char why[160];
    char who[160];
    int r = SSL_do_handshake(c->ssl);

    if (tls_flush(c) < 0) {
        ERR_clear_error();
        conn_close(c);
        return -1;
    }
    if (r == 1) {
        c->tls_ready = true;
        sl_http_tls_peer(c->ssl, who, sizeof(who));
        sl_log(SL_LOG_DEBUG, c->id, "http tls peer=%s client=\"%s\"", c->peer, who);
        return 1;
    }
    if (SSL_get_error(c->ssl, r) == SSL_ERROR_WANT_READ) {
        return 0;
    }
    sl_http_tls_why(c->ssl, r, why, sizeof(why));
    sl_log(SL_LOG_INFO, c->id, "msg=\"tls handshake refused\" peer=%s err=\"%s\"", c->peer, why);
    conn_close(c);
    return -1;
}

/* Decrypts into the empty `rbuf`: >0 bytes, 0 none yet (or the peer's close_notify: `eof`
 * set), -1 when the connection was closed. */
static int tls_decrypt(struct sl__http_conn *c)
{
    char why[160];
    size_t n = 0;
    int r = SSL_read_ex(c->ssl, c->rbuf, sizeof(c->rbuf), &n);
    int e;

    if (r == 1) {
        c->rlen = n;
        return n > 0 ? 1 : 0;
    }
    e = SSL_get_error(c->ssl, r);
    /* A key update asks for an answer. */
    if (tls_flush(c) < 0) {
        conn_close(c);
        return -1;
    }
    if (e == SSL_ERROR_WANT_READ) {
        return 0;
    }
    if (e == SSL_ERROR_ZERO_RETURN) {
        c->eof = true;
        return 0;
    }
    sl_http_tls_why(c->ssl, r, why, sizeof(why));
    sl_log(SL_LOG_DEBUG, c->id, "http tls read failed peer=%s err=\"%s\"", c->peer, why);
    conn_close(c);
    return -1;
}

/* Under TLS, steps through every record OpenSSL holds while the connection wants bytes and
 * has room for them: the socket is read only once nothing complete is held, so the ciphertext
 * waiting is at most one read. */
static void tls_pump(struct sl__http_conn *c)
{
    while (c->ssl != NULL && c->tls_ready && state_reads(c->state) && c->state != CONN_LINGER
           && c->rlen == 0 && !c->eof && sl_http_tls_has_input(c->ssl)) {
        int got = tls_decrypt(c);

        if (got < 0) {
            return;
        }
        if (got == 0 && !c->eof) {
            break;
        }
        if (c->state == CONN_BODY) {
            conn_set_state(c, CONN_BODY); /* progress re-arms the body timer */
        }
        conn_step(c);
    }
}

/* conn_step(), then what TLS holds (tls_pump()). */
static void conn_advance(struct sl__http_conn *c)
{
    conn_step(c);
    tls_pump(c);
}

static void tls_on_read(struct sl__http_conn *c, size_t n)
{
    if (sl_http_tls_feed(c->ssl, c->tls_raw, n) < 0) {
        conn_close(c);
        return;
    }
    if (!c->tls_ready && tls_handshake(c) <= 0) {
        return;
    }
    tls_pump(c);
}

static int tls_start(struct sl__http_conn *c, struct sl_http_tls *tls)
{
    char err[256];
    int rc;

    c->tls_raw = sl_malloc(TLS_RAW_BYTES);
    if (c->tls_raw == NULL) {
        return SL_ENOMEM;
    }
    rc = sl_http_tls_new(tls, NULL, &c->ssl, err, sizeof(err));
    if (rc < 0) {
        sl_log(SL_LOG_WARN, c->id, "msg=\"tls connection refused\" peer=%s err=\"%s\"", c->peer,
               err);
    }
    return rc;
}

/* ---- Accepting: a new connection ---- */

static void describe_peer(struct sl__http_conn *c)
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
    c->addr = ss;
    c->has_addr = ss.ss_family == AF_INET || ss.ss_family == AF_INET6;
    if (ss.ss_family == AF_INET6) {
        (void)snprintf(c->peer, sizeof(c->peer), "[%s]:%u", ip,
                       (unsigned)ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
    } else {
        (void)snprintf(c->peer, sizeof(c->peer), "%s:%u", ip,
                       (unsigned)ntohs(((struct sockaddr_in *)&ss)->sin_port));
    }
}

static void conn_link(struct sl__http_conn *c)
{
    struct sl_http_server *srv = c->srv;

    sl_list_push_front(&srv->conns, &c->link);
    srv->n_conns++;
}

/* Accepts the pending connection of `l` into a new connection. Returns 0 when the pending
 * connection was taken (served, or closed at once), or a negative code when it was not
 * touched and the caller must refuse it. */
int sl__http_conn_create(struct sl__http_listener *l)
{
    struct sl_http_server *srv = l->srv;
    struct sl__http_conn *c = sl_calloc(1, sizeof(*c));
    /* The open connections from its address, this one included (0 without an address). */
    size_t from_addr;
    int rc;

    if (c == NULL) {
        return SL_ENOMEM;
    }
    c->srv = srv;
    c->is_unix = l->is_unix;
    sl_arena_init(&c->arena, SL__HTTP_ARENA_CHUNK_BYTES, srv->arena_max_bytes);
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
    from_addr = c->has_addr ? peer_connections(c) : 0;
    if (from_addr > srv->cfg.peer_max_connections) {
        sl_log(SL_LOG_DEBUG, c->id, "http connection refused peer=%s: %zu from its address",
               c->peer, from_addr - 1);
        if (l->tls != NULL) {
            /* A TLS client would take an answer in the clear for a broken handshake. */
            conn_close(c);
            return 0;
        }
        conn_set_state(c, CONN_HEAD);
        (void)conn_fail(c, 503, "too many connections from this address");
        return 0;
    }
    if (l->tls != NULL && tls_start(c, l->tls) < 0) {
        conn_close(c);
        return 0;
    }
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

void sl__http_conns_close(struct sl_http_server *srv)
{
    /* conn_close() never frees synchronously, so the list stays intact while walking it. */
    for (struct sl_list *l = srv->conns.next; l != &srv->conns; l = l->next) {
        conn_close(SL_CONTAINER_OF(l, struct sl__http_conn, link));
    }
}

size_t sl__http_conns_drain(struct sl_http_server *srv)
{
    size_t kept = 0;

    for (struct sl_list *l = srv->conns.next; l != &srv->conns; l = l->next) {
        struct sl__http_conn *c = SL_CONTAINER_OF(l, struct sl__http_conn, link);

        if (c->state == CONN_HANDLING) {
            /* The answer says Connection: close and the connection ends after it. */
            c->close_after = true;
            kept++;
        } else if (c->state == CONN_WRITING) {
            kept++; /* on_response_written() ends it */
        } else {
            /* Nothing was asked of the handler (a gated exchange is marked gone). */
            conn_close(c);
        }
    }
    return kept;
}
