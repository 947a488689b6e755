/* SPDX-License-Identifier: Apache-2.0 */
#include "http/h1.h"

#include <string.h>

#include "base/mem.h"

const struct sl_h1_limits sl_h1_default_limits = { 64 * 1024, 256 };

/* The header array starts small and doubles up to the limit. */
#define HEADERS_INITIAL 16

static struct sl_h1 *parser_of(llhttp_t *l)
{
    return SL_CONTAINER_OF(l, struct sl_h1, _llhttp);
}

/* Records why parsing stopped; `rc` is what sl_h1_feed() will return. Returns -1 for llhttp. */
static int fail(struct sl_h1 *p, const char *why, int rc)
{
    p->_error = why;
    p->_rc = rc;
    return -1;
}

/* A request whose method is in and whose target is not yet: the span being received is the
 * target. */
static bool target_pending(const struct sl_h1 *p)
{
    return p->_kind == SL_H1_REQUEST && p->_head.method[0] != '\0' && p->_head.target[0] == '\0';
}

static int append_span(llhttp_t *l, const char *at, size_t n)
{
    struct sl_h1 *p = parser_of(l);
    int rc;

    if (p->_in_body) {
        /* Trailer fields: counted against the head limit, then dropped (docs/reference/proxy.md
         * §4.6 removes Trailer; nothing after the body is forwarded). */
        if (n > p->_limits.head_max_bytes - p->_head_bytes) {
            return fail(p, "trailer section too large", SL_ETOOBIG);
        }
        p->_head_bytes += n;
        return 0;
    }
    rc = sl_buf_append(&p->_span, at, n);
    if (rc == SL_ETOOBIG) {
        return fail(p, target_pending(p) ? "request target too long" : "message head too large",
                    SL_ETOOBIG);
    }
    if (rc < 0) {
        return fail(p, "out of memory", SL_ENOMEM);
    }
    return 0;
}

/* Moves the span into the arena as a NUL-terminated string and empties it. */
static int take_span(struct sl_h1 *p, struct sl_slice *out)
{
    char *s = sl_arena_strndup(p->_arena, sl_buf_cstr(&p->_span), p->_span.len);

    if (s == NULL) {
        return fail(p, "out of memory", SL_ENOMEM);
    }
    *out = sl_slice_of(s, p->_span.len);
    sl_buf_reset(&p->_span);
    return 0;
}

static int take_span_str(struct sl_h1 *p, const char **out)
{
    struct sl_slice s;

    if (take_span(p, &s) < 0) {
        return -1;
    }
    *out = (const char *)s.p;
    return 0;
}

static int on_message_begin(llhttp_t *l)
{
    struct sl_h1 *p = parser_of(l);

    p->_head = (struct sl_h1_head){ "", "",    0,     "",   0, 0, NULL, 0, SL_H1_BODY_NONE,
                                    0,  false, false, false };
    p->_headers_cap = 0;
    p->_in_body = false;
    p->_trailer_fields = 0;
    p->_ext_line = 0;
    p->_ext_msg = 0;
    p->_line_end = 0;
    p->_line_part = 0;
    sl_buf_reset(&p->_span);
    return 0;
}

/* The offset in the message head of `at`, a pointer into the current sl_h1_feed() call's data. */
static size_t head_off(const struct sl_h1 *p, const char *at)
{
    return p->_feed_off + (size_t)((const uint8_t *)at - p->_feed_data);
}

/* A request line's elements are separated by exactly one space (RFC 9112 §3): llhttp skips a
 * run of them, which a peer parsing on single spaces would read another way. Called with each
 * piece of the span of element `part`; at its first, `gap` is the bytes expected between the
 * last element's end and `at` (the space, and "HTTP/" before the version's digits). */
static int start_line(struct sl_h1 *p, char part, const char *at, size_t n, size_t gap,
                      const char *what)
{
    size_t off = head_off(p, at);

    if (p->_line_part != part) {
        p->_line_part = part;
        if (gap != 0 && off != p->_line_end + gap) {
            return fail(p, what, SL_EINVAL);
        }
    }
    p->_line_end = off + n;
    return 0;
}

static int on_method(llhttp_t *l, const char *at, size_t n)
{
    struct sl_h1 *p = parser_of(l);

    (void)start_line(p, 'm', at, n, 0, NULL);
    return append_span(l, at, n);
}

static int on_url(llhttp_t *l, const char *at, size_t n)
{
    struct sl_h1 *p = parser_of(l);

    if (start_line(p, 't', at, n, 1, "request line: not one space between method and target") < 0) {
        return -1;
    }
    return append_span(l, at, n);
}

/* A request's version: its span is the digits ("1.1") after "HTTP/". (A status line with more
 * than one space before its code llhttp refuses itself; the reason phrase may hold spaces.) */
static int on_version(llhttp_t *l, const char *at, size_t n)
{
    struct sl_h1 *p = parser_of(l);

    if (p->_kind == SL_H1_RESPONSE) {
        return 0;
    }
    return start_line(p, 'v', at, n, 1 + 5,
                      "request line: not one space between target and version");
}

static int on_method_complete(llhttp_t *l)
{
    struct sl_h1 *p = parser_of(l);

    return take_span_str(p, &p->_head.method);
}

static int on_url_complete(llhttp_t *l)
{
    struct sl_h1 *p = parser_of(l);

    return take_span_str(p, &p->_head.target);
}

static int on_status_complete(llhttp_t *l)
{
    struct sl_h1 *p = parser_of(l);

    return take_span_str(p, &p->_head.reason);
}

static int on_header_field_complete(llhttp_t *l)
{
    struct sl_h1 *p = parser_of(l);

    if (p->_in_body) {
        /* A trailer field: dropped, but counted with the head's (the same line limit). */
        if (++p->_trailer_fields + p->_head.n_headers > p->_limits.headers_max) {
            return fail(p, "too many trailer fields", SL_ETOOBIG);
        }
        return 0;
    }
    return take_span(p, &p->_name);
}

static int add_header(struct sl_h1 *p, struct sl_slice value)
{
    struct sl_h1_head *h = &p->_head;

    if (h->n_headers == p->_headers_cap) {
        size_t cap = p->_headers_cap == 0 ? HEADERS_INITIAL : p->_headers_cap * 2;
        struct sl_h1_header *a;

        if (h->n_headers >= p->_limits.headers_max) {
            return fail(p, "too many header fields", SL_ETOOBIG);
        }
        if (cap > p->_limits.headers_max) {
            cap = p->_limits.headers_max;
        }
        a = sl_arena_alloc(p->_arena, cap * sizeof(*a));
        if (a == NULL) {
            return fail(p, "out of memory", SL_ENOMEM);
        }
        if (h->n_headers > 0) {
            memcpy(a, h->headers, h->n_headers * sizeof(*a));
        }
        h->headers = a;
        p->_headers_cap = cap;
    }
    h->headers[h->n_headers++] = (struct sl_h1_header){ p->_name, value };
    return 0;
}

static int on_header_value_complete(llhttp_t *l)
{
    struct sl_h1 *p = parser_of(l);
    struct sl_slice value;

    if (p->_in_body) {
        return 0;
    }
    if (take_span(p, &value) < 0) {
        return -1;
    }
    /* llhttp drops leading whitespace; trailing whitespace is not part of the value
     * (RFC 9110 §5.5). */
    while (value.n > 0 && (value.p[value.n - 1] == ' ' || value.p[value.n - 1] == '\t')) {
        value.n--;
    }
    return add_header(p, value);
}

static unsigned char ascii_lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + ('a' - 'A')) : c;
}

/* ASCII case-insensitive equality of a slice and a C string, stopping at the first difference
 * (most header names differ from the one sought at their first byte): called for every header
 * of every message, several times. */
static bool slice_eq_ci(struct sl_slice a, const char *s)
{
    const unsigned char *p = (const unsigned char *)a.p;
    const unsigned char *q = (const unsigned char *)s;
    size_t i;

    for (i = 0; i < a.n; i++) {
        if (q[i] == '\0' || ascii_lower(p[i]) != ascii_lower(q[i])) {
            return false;
        }
    }
    return q[i] == '\0';
}

/* Applies the framing rules llhttp leaves to us and fills in the head's framing fields. */
static int check_framing(struct sl_h1 *p)
{
    llhttp_t *l = &p->_llhttp;
    struct sl_h1_head *h = &p->_head;
    size_t te = 0;
    size_t host = 0;

    h->version_major = llhttp_get_http_major(l);
    h->version_minor = llhttp_get_http_minor(l);
    if (h->version_major != 1 || h->version_minor > 1) {
        return fail(p, "unsupported HTTP version", SL_EINVAL);
    }
    for (size_t i = 0; i < h->n_headers; i++) {
        const struct sl_h1_header *f = &h->headers[i];

        if (sl_h1_name_is(f->name, "transfer-encoding")) {
            te++;
            if (!slice_eq_ci(f->value, "chunked")) {
                return fail(p, "Transfer-Encoding other than chunked", SL_EINVAL);
            }
        } else if (sl_h1_name_is(f->name, "host")) {
            host++;
        } else if (p->_kind == SL_H1_REQUEST && sl_h1_name_is(f->name, "expect")) {
            h->expect_continue = slice_eq_ci(f->value, "100-continue");
        }
    }
    if (te > 1) {
        return fail(p, "more than one Transfer-Encoding header", SL_EINVAL);
    }
    if (te > 0 && h->version_minor == 0) {
        return fail(p, "Transfer-Encoding on HTTP/1.0", SL_EINVAL);
    }
    if (te > 0 && (l->flags & F_CHUNKED) == 0) {
        /* We read "chunked" (the value trimmed of its whitespace) where llhttp did not (a tab
         * after it, say): it would frame the message otherwise. Refused, not guessed. */
        return fail(p, "Transfer-Encoding other than chunked", SL_EINVAL);
    }
    if (host > 1) {
        return fail(p, "more than one Host header", SL_EINVAL);
    }
    if (p->_kind == SL_H1_RESPONSE) {
        h->status = llhttp_get_status_code(l);
        /* llhttp takes any three digits; RFC 9110 §15 defines 100-599 only. */
        if (h->status < 100 || h->status > 599) {
            return fail(p, "invalid status code", SL_EINVAL);
        }
    }
    h->keep_alive = llhttp_should_keep_alive(l) != 0;
    h->upgrade = l->upgrade != 0;
    if (p->_kind == SL_H1_RESPONSE && h->status == 101 && !h->upgrade) {
        /* llhttp treats a 101 without `Upgrade` and `Connection: upgrade` as an interim
         * response and goes on parsing HTTP, while the client it is relayed to switches
         * protocols: the two ends would disagree about every byte that follows. */
        return fail(p, "101 Switching Protocols without an upgrade", SL_EINVAL);
    }
    if (p->_kind == SL_H1_REQUEST && llhttp_get_method(l) == HTTP_CONNECT
        && (te > 0 || ((l->flags & F_CONTENT_LENGTH) != 0 && l->content_length > 0))) {
        /* RFC 9110 §9.3.6: a CONNECT request has no content. llhttp switches protocols right
         * after the head whatever its framing says, so the "body" would reach the tunnel. */
        return fail(p, "a CONNECT request has no body", SL_EINVAL);
    }
    if ((p->_kind == SL_H1_RESPONSE
         && (p->_no_body || h->status < 200 || h->status == 204 || h->status == 304))
        || (p->_kind == SL_H1_REQUEST && llhttp_get_method(l) == HTTP_CONNECT)) {
        h->body = SL_H1_BODY_NONE;
    } else if ((l->flags & F_CHUNKED) != 0) {
        h->body = SL_H1_BODY_CHUNKED;
    } else if ((l->flags & F_CONTENT_LENGTH) != 0) {
        h->body = SL_H1_BODY_LENGTH;
        h->content_length = l->content_length;
    } else if (p->_kind == SL_H1_RESPONSE && !h->upgrade) {
        h->body = SL_H1_BODY_CLOSE;
        h->keep_alive = false;
    } else {
        h->body = SL_H1_BODY_NONE;
    }
    if (p->_kind == SL_H1_RESPONSE && p->_no_body && h->status >= 200) {
        /* llhttp learns that a response to HEAD has no body only from on_headers_complete's
         * return value, after llhttp_should_keep_alive() above: without a length it took the
         * response for close-delimited, never keep-alive (and the upstream was never pooled).
         * Its own rule without the end-of-stream part (RFC 9112 §9.3). */
        h->keep_alive = h->version_minor == 1 ? (l->flags & F_CONNECTION_CLOSE) == 0
                                              : (l->flags & F_CONNECTION_KEEP_ALIVE) != 0;
    }
    if ((l->flags & F_CONNECTION_CLOSE) != 0) {
        /* "close" ends the connection whatever else Connection lists (RFC 9112 §9.6); llhttp
         * lets an HTTP/1.0 "keep-alive" beside it win. */
        h->keep_alive = false;
    }
    return 0;
}

static int on_headers_complete(llhttp_t *l)
{
    struct sl_h1 *p = parser_of(l);
    bool skip_body;

    if (check_framing(p) < 0) {
        return -1;
    }
    /* A response without a body by our rules (HEAD, 1xx, 204, 304) must have none for llhttp
     * either: llhttp reads a chunked or Content-Length body after a 1xx, which would then be
     * relayed after an interim head. */
    skip_body = p->_kind == SL_H1_RESPONSE && p->_head.body == SL_H1_BODY_NONE;
    p->_in_body = true;
    /* An interim (1xx) response is not the answer: the final response that follows still
     * answers the HEAD request and has no body (RFC 9110 §15.2). */
    if (p->_kind == SL_H1_REQUEST || p->_head.status >= 200) {
        p->_no_body = false;
    }
    p->_ev = SL_H1_EV_HEAD;
    /* Returning 1 tells llhttp the message has no body; it cannot also pause, so the end of
     * the message is reported on the next call (see on_message_complete). */
    return skip_body ? 1 : HPE_PAUSED;
}

static int on_body(llhttp_t *l, const char *at, size_t n)
{
    struct sl_h1 *p = parser_of(l);

    if (n == 0) {
        /* llhttp flushes an empty span at the end of some buffers; it is not an event. */
        return 0;
    }
    p->_ev = SL_H1_EV_BODY;
    p->_ev_body = sl_slice_of(at, n);
    return HPE_PAUSED;
}

/* Chunk extension bytes (names and values, in spans): counted against their caps, not kept. */
static int on_chunk_extension(llhttp_t *l, const char *at, size_t n)
{
    struct sl_h1 *p = parser_of(l);

    (void)at;
    p->_ext_line += n;
    p->_ext_msg += n;
    if (p->_ext_line > SL_H1_CHUNK_EXT_LINE_MAX) {
        return fail(p, "chunk extensions too long (more than 4 KiB on a chunk-size line)",
                    SL_ETOOBIG);
    }
    if (p->_ext_msg > SL_H1_CHUNK_EXT_MSG_MAX) {
        return fail(p, "chunk extensions too long (more than 64 KiB in a message)", SL_ETOOBIG);
    }
    return 0;
}

/* A chunk-size line is complete (its extensions included): the next one starts afresh. */
static int on_chunk_header(llhttp_t *l)
{
    parser_of(l)->_ext_line = 0;
    return 0;
}

static int on_message_complete(llhttp_t *l)
{
    struct sl_h1 *p = parser_of(l);
    enum sl_h1_event_type type = l->upgrade ? SL_H1_EV_UPGRADE : SL_H1_EV_END;

    p->_in_body = false;
    if (type == SL_H1_EV_UPGRADE) {
        p->_upgraded = true;
    }
    if (p->_ev == SL_H1_EV_HEAD) {
        p->_end_pending = true;
        p->_pending = type;
    } else {
        p->_ev = type;
    }
    return HPE_PAUSED;
}

static const llhttp_settings_t settings = {
    .on_message_begin = on_message_begin,
    .on_method = on_method,
    .on_url = on_url,
    .on_version = on_version,
    .on_status = append_span,
    .on_header_field = append_span,
    .on_header_value = append_span,
    .on_method_complete = on_method_complete,
    .on_url_complete = on_url_complete,
    .on_status_complete = on_status_complete,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_chunk_extension_name = on_chunk_extension,
    .on_chunk_extension_value = on_chunk_extension,
    .on_chunk_header = on_chunk_header,
    .on_message_complete = on_message_complete,
};

void sl_h1_init(struct sl_h1 *p, enum sl_h1_kind kind, const struct sl_h1_limits *limits,
                struct sl_arena *arena)
{
    memset(p, 0, sizeof(*p));
    p->_kind = kind;
    p->_limits = limits != NULL ? *limits : sl_h1_default_limits;
    p->_arena = arena;
    sl_buf_init(&p->_span, p->_limits.head_max_bytes);
    llhttp_init(&p->_llhttp, kind == SL_H1_REQUEST ? HTTP_REQUEST : HTTP_RESPONSE, &settings);
}

void sl_h1_finish(struct sl_h1 *p)
{
    sl_buf_finish(&p->_span);
}

void sl_h1_expect_no_body(struct sl_h1 *p)
{
    p->_no_body = true;
}

bool sl_h1_in_message(const struct sl_h1 *p)
{
    /* Head bytes are counted from a message's first byte and reset as its end is reported. */
    return p->_head_bytes > 0 || p->_in_body;
}

const struct sl_h1_head *sl_h1_head(const struct sl_h1 *p)
{
    return &p->_head;
}

const char *sl_h1_error(const struct sl_h1 *p)
{
    if (p->_error != NULL) {
        return p->_error;
    }
    if (p->_llhttp.reason != NULL) {
        return p->_llhttp.reason;
    }
    return "malformed message";
}

/* A character of a token (RFC 9110 §5.6.2). */
static bool is_tchar(uint8_t c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
           || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int failed_rc(struct sl_h1 *p)
{
    p->_failed = true;
    return p->_rc < 0 ? p->_rc : SL_EINVAL;
}

/* Reports an owed SL_H1_EV_END / SL_H1_EV_UPGRADE, if any. */
static bool take_pending(struct sl_h1 *p, struct sl_h1_event *ev)
{
    if (!p->_end_pending) {
        return false;
    }
    p->_end_pending = false;
    ev->type = p->_pending;
    p->_head_bytes = 0;
    return true;
}

int sl_h1_feed(struct sl_h1 *p, const uint8_t *data, size_t n, struct sl_h1_event *ev)
{
    bool in_head;
    size_t give = n;
    size_t used;
    llhttp_errno_t err;

    *ev = (struct sl_h1_event){ SL_H1_EV_NONE, { NULL, 0 } };
    if (take_pending(p, ev)) {
        return 0;
    }
    if (p->_failed) {
        return SL_EINVAL;
    }
    if (p->_upgraded) {
        p->_error = "message after a protocol switch";
        return SL_EINVAL;
    }
    if (data == NULL) {
        /* An empty slice. llhttp still needs the call (it finishes a message it paused in),
         * but an empty call in the middle of a body moves its span start to `data`: a NULL
         * there would stay the start of the next body span, whatever buffer that arrives in. */
        static const uint8_t none[1];

        SL_BUG_ON(n != 0);
        data = none;
    }
    in_head = !p->_in_body;
    if (in_head && give > p->_limits.head_max_bytes - p->_head_bytes + 1) {
        /* Never hand llhttp more head than the limit allows: the work per call stays bounded
         * and the overflow is caught below. */
        give = p->_limits.head_max_bytes - p->_head_bytes + 1;
    }
    p->_ev = SL_H1_EV_NONE;
    p->_feed_data = data;
    p->_feed_off = p->_head_bytes;
    err = llhttp_execute(&p->_llhttp, (const char *)data, give);
    switch (err) {
    case HPE_OK:
        used = give;
        break;
    case HPE_PAUSED:
        used = (size_t)((const uint8_t *)llhttp_get_error_pos(&p->_llhttp) - data);
        llhttp_resume(&p->_llhttp);
        break;
    default:
        if (err == HPE_INVALID_METHOD) {
            const char *at = llhttp_get_error_pos(&p->_llhttp);

            p->_unknown_method = at != NULL && at >= (const char *)data
                                 && at < (const char *)data + give && is_tchar((uint8_t)*at);
        }
        return failed_rc(p);
    }
    if (in_head) {
        p->_head_bytes += used;
        if (p->_head_bytes > p->_limits.head_max_bytes) {
            (void)fail(p, target_pending(p) ? "request target too long" : "message head too large",
                       SL_ETOOBIG);
            return failed_rc(p);
        }
    }
    ev->type = p->_ev;
    if (p->_ev == SL_H1_EV_BODY) {
        ev->body = p->_ev_body;
    } else if (p->_ev == SL_H1_EV_END || p->_ev == SL_H1_EV_UPGRADE) {
        p->_head_bytes = 0;
    }
    return (int)used;
}

int sl_h1_eof(struct sl_h1 *p, struct sl_h1_event *ev)
{
    llhttp_errno_t err;

    *ev = (struct sl_h1_event){ SL_H1_EV_NONE, { NULL, 0 } };
    if (take_pending(p, ev)) {
        return 0;
    }
    if (p->_failed || p->_upgraded) {
        return p->_failed ? SL_EINVAL : 0;
    }
    p->_ev = SL_H1_EV_NONE;
    err = llhttp_finish(&p->_llhttp);
    if (err != HPE_OK && err != HPE_PAUSED) {
        p->_error = "connection closed in the middle of a message";
        p->_failed = true;
        return SL_EINVAL;
    }
    ev->type = p->_ev;
    return 0;
}

bool sl_h1_error_in_target(const struct sl_h1 *p)
{
    return p->_failed && p->_error == NULL && llhttp_get_errno(&p->_llhttp) == HPE_INVALID_URL;
}

bool sl_h1_error_target_too_long(const struct sl_h1 *p)
{
    return p->_failed && p->_rc == SL_ETOOBIG && target_pending(p);
}

bool sl_h1_error_in_method(const struct sl_h1 *p)
{
    return p->_failed && p->_error == NULL && p->_unknown_method
           && llhttp_get_errno(&p->_llhttp) == HPE_INVALID_METHOD;
}

bool sl_h1_name_is(struct sl_slice name, const char *s)
{
    return slice_eq_ci(name, s);
}

const struct sl_h1_header *sl_h1_find(const struct sl_h1_head *h, const char *name)
{
    for (size_t i = 0; i < h->n_headers; i++) {
        if (sl_h1_name_is(h->headers[i].name, name)) {
            return &h->headers[i];
        }
    }
    return NULL;
}

size_t sl_h1_count(const struct sl_h1_head *h, const char *name)
{
    size_t n = 0;

    for (size_t i = 0; i < h->n_headers; i++) {
        n += sl_h1_name_is(h->headers[i].name, name);
    }
    return n;
}

bool sl_h1_list_has(struct sl_slice value, const char *token)
{
    size_t i = 0;

    while (i < value.n) {
        size_t start;
        size_t end;

        while (i < value.n && (value.p[i] == ' ' || value.p[i] == '\t' || value.p[i] == ',')) {
            i++;
        }
        start = i;
        while (i < value.n && value.p[i] != ',') {
            i++;
        }
        end = i;
        while (end > start && (value.p[end - 1] == ' ' || value.p[end - 1] == '\t')) {
            end--;
        }
        if (end > start && slice_eq_ci(sl_slice_of(value.p + start, end - start), token)) {
            return true;
        }
    }
    return false;
}

size_t sl_h1_chunk_header(char *buf, size_t cap, uint64_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t digits = 0;
    size_t n;

    if (len == 0) {
        return 0;
    }
    for (uint64_t v = len; v != 0; v >>= 4) {
        digits++;
    }
    n = digits + 2;
    if (n > cap) {
        return 0;
    }
    for (size_t i = digits; i > 0; i--) {
        buf[i - 1] = hex[len & 0xf];
        len >>= 4;
    }
    buf[digits] = '\r';
    buf[digits + 1] = '\n';
    return n;
}
