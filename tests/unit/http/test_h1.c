/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/http/test_h1.c - the HTTP/1.x message parser: events, framing, limits, and the same
 * result whichever way the bytes are split.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/mem.h"
#include "http/h1.h"

struct run {
    struct sl_arena arena;
    struct sl_h1 p;
    /* Events as text: H(method target) / H(status), B:<data>, E, U, and !<rc> for errors. */
    struct sl_buf log;
    /* Bytes consumed before an upgrade (where the raw protocol starts). */
    size_t upgrade_at;
    int rc;
};

static void run_start(struct run *r, enum sl_h1_kind kind, const struct sl_h1_limits *lim)
{
    sl_arena_init(&r->arena, 4096, 1 << 20);
    sl_h1_init(&r->p, kind, lim, &r->arena);
    sl_buf_init(&r->log, 1 << 20);
    /* Reserve the log up front so that allocation-failure sweeps fail only the parser. */
    {
        static const char room[4096];

        assert_int_equal(sl_buf_append(&r->log, room, sizeof(room)), 0);
        sl_buf_reset(&r->log);
    }
    r->upgrade_at = 0;
    r->rc = 0;
}

static void run_end(struct run *r)
{
    sl_h1_finish(&r->p);
    sl_arena_finish(&r->arena);
    sl_buf_finish(&r->log);
}

static void log_event(struct run *r, const struct sl_h1_event *ev)
{
    const struct sl_h1_head *h = sl_h1_head(&r->p);
    int rc = 0;

    switch (ev->type) {
    case SL_H1_EV_NONE:
        break;
    case SL_H1_EV_HEAD:
        if (h->method[0] != '\0') {
            rc = sl_buf_printf(&r->log, "H(%s %s) ", h->method, h->target);
        } else {
            rc = sl_buf_printf(&r->log, "H(%d) ", h->status);
        }
        break;
    case SL_H1_EV_BODY:
        rc = sl_buf_printf(&r->log, "B:%.*s ", (int)ev->body.n, (const char *)ev->body.p);
        break;
    case SL_H1_EV_END:
        rc = sl_buf_append_str(&r->log, "E ");
        break;
    case SL_H1_EV_UPGRADE:
        rc = sl_buf_append_str(&r->log, "U ");
        break;
    }
    assert_int_equal(rc, 0);
}

/* Feeds `in`, a whole head, to `p` in one call: every byte is taken and the event is the head,
 * which it returns. */
static const struct sl_h1_head *feed_head(struct sl_h1 *p, const char *in)
{
    struct sl_h1_event ev;

    assert_int_equal(sl_h1_feed(p, (const uint8_t *)in, strlen(in), &ev), (int)strlen(in));
    assert_int_equal(ev.type, SL_H1_EV_HEAD);
    return sl_h1_head(p);
}

/* Feeds `in` in pieces of at most `step` bytes, draining events, then signals EOF if `eof`. */
static void run_feed(struct run *r, const char *in, size_t n, size_t step, int eof)
{
    size_t off = 0;
    size_t total = 0;
    struct sl_h1_event ev;

    while (off < n) {
        size_t len = n - off < step ? n - off : step;
        size_t piece = 0;

        while (piece < len || (piece == len && len == 0)) {
            int used = sl_h1_feed(&r->p, (const uint8_t *)in + off + piece, len - piece, &ev);

            if (used < 0) {
                r->rc = used;
                assert_int_equal(sl_buf_printf(&r->log, "!%d", used), 0);
                return;
            }
            piece += (size_t)used;
            log_event(r, &ev);
            if (ev.type == SL_H1_EV_UPGRADE) {
                r->upgrade_at = total + piece;
                return;
            }
            if (ev.type == SL_H1_EV_NONE) {
                break;
            }
        }
        off += piece;
        total += piece;
        if (piece < len) {
            /* Events were owed; continue with the rest of this piece. */
            continue;
        }
    }
    /* Drain owed events (e.g. the END of a message without a body). */
    for (;;) {
        int used = sl_h1_feed(&r->p, NULL, 0, &ev);

        if (used < 0) {
            r->rc = used;
            assert_int_equal(sl_buf_printf(&r->log, "!%d", used), 0);
            return;
        }
        log_event(r, &ev);
        if (ev.type == SL_H1_EV_NONE || ev.type == SL_H1_EV_UPGRADE) {
            break;
        }
    }
    if (eof) {
        int rc = sl_h1_eof(&r->p, &ev);

        if (rc < 0) {
            r->rc = rc;
            assert_int_equal(sl_buf_printf(&r->log, "!%d", rc), 0);
            return;
        }
        log_event(r, &ev);
    }
}

/* Body events for one input depend on the split; merge adjacent B: entries for comparison. */
static void merge_bodies(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    int in_body = 0;

    for (size_t i = 0; in[i] != '\0' && o + 1 < cap; i++) {
        if (in[i] == 'B' && in[i + 1] == ':' && (i == 0 || in[i - 1] == ' ')) {
            if (in_body && o > 0 && out[o - 1] == ' ') {
                o--;
                i += 1;
                continue;
            }
            in_body = 1;
        } else if ((in[i] == 'E' || in[i] == 'H' || in[i] == 'U' || in[i] == '!')
                   && (i == 0 || in[i - 1] == ' ')) {
            in_body = 0;
        }
        out[o++] = in[i];
    }
    out[o] = '\0';
}

/* Parses `in` whole and at every split size, checks the merged event log equals `want`. */
static void expect_events(enum sl_h1_kind kind, const char *in, int eof, const char *want)
{
    size_t n = strlen(in);

    for (size_t step = 1; step <= n + 1; step++) {
        struct run r;
        char merged[4096];

        run_start(&r, kind, NULL);
        run_feed(&r, in, n, step, eof);
        merge_bodies(sl_buf_cstr(&r.log), merged, sizeof(merged));
        if (strcmp(merged, want) != 0) {
            fail_msg("step %zu: got '%s', want '%s' (error: %s)", step, merged, want,
                     sl_h1_error(&r.p));
        }
        run_end(&r);
    }
}

static void parses_a_simple_request_and_its_fields(void **state)
{
    static const char in[] = "GET /a?b=1 HTTP/1.1\r\nHost: a.example\r\nX-Pad:  v  \r\n"
                             "x-pad: w\r\n\r\n";
    struct run r;
    const struct sl_h1_head *h;
    const struct sl_h1_header *f;
    struct sl_h1_event ev;

    (void)state;
    run_start(&r, SL_H1_REQUEST, NULL);
    h = feed_head(&r.p, in);
    assert_string_equal(h->method, "GET");
    assert_string_equal(h->target, "/a?b=1");
    assert_int_equal(h->version_major, 1);
    assert_int_equal(h->version_minor, 1);
    assert_int_equal(h->n_headers, 3);
    assert_int_equal(h->body, SL_H1_BODY_NONE);
    assert_true(h->keep_alive);
    assert_false(h->upgrade);
    f = sl_h1_find(h, "x-pad");
    assert_non_null(f);
    assert_int_equal(f->value.n, 1);
    assert_memory_equal(f->value.p, "v", 1);
    assert_null(sl_h1_find(h, "cookie"));
    assert_int_equal(sl_h1_count(h, "X-PAD"), 2);
    assert_int_equal(sl_h1_count(h, "host"), 1);
    assert_int_equal(sl_h1_count(h, "cookie"), 0);
    assert_int_equal(sl_h1_feed(&r.p, NULL, 0, &ev), 0);
    assert_int_equal(ev.type, SL_H1_EV_END);
    run_end(&r);
}

static void reports_events_the_same_way_at_every_split(void **state)
{
    (void)state;
    expect_events(SL_H1_REQUEST,
                  "POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n"
                  "GET /next HTTP/1.1\r\nHost: a\r\n\r\n",
                  0, "H(POST /u) B:abcde E H(GET /next) E ");
    expect_events(SL_H1_REQUEST,
                  "PUT /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
                  "HEAD /h HTTP/1.0\r\n\r\n",
                  0, "H(PUT /x) B:hello E H(HEAD /h) E ");
    expect_events(SL_H1_RESPONSE,
                  "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                  "HTTP/1.1 204 No Content\r\n\r\n"
                  "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n"
                  "HTTP/1.1 200 OK\r\n\r\nuntil close",
                  1, "H(200) B:ok E H(204) E H(304) E H(200) B:until close E ");
}

static void drops_trailers_after_a_chunked_body(void **state)
{
    (void)state;
    expect_events(SL_H1_REQUEST,
                  "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "1\r\nx\r\n0\r\nX-Trailer: t\r\n\r\n",
                  0, "H(POST /) B:x E ");
}

/* A body split over two buffers at different addresses, with an empty slice (NULL, 0) fed in
 * between, as a stream with nothing new to read gives it: the second span starts in the
 * second buffer. (An empty call with NULL once left llhttp's span start at NULL, and the next
 * span came out as (NULL, end - NULL).) */
static void an_empty_feed_between_buffers_keeps_the_body_span(void **state)
{
    static const char first[] = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n01234";
    static const char second[] = "56789";
    char *a = sl_malloc(sizeof(first));
    char *b = sl_malloc(sizeof(second));
    struct sl_h1_event ev;
    struct run r;
    size_t off = 0;
    int n;

    (void)state;
    assert_non_null(a);
    assert_non_null(b);
    memcpy(a, first, sizeof(first));
    memcpy(b, second, sizeof(second));
    run_start(&r, SL_H1_REQUEST, NULL);
    while (off < sizeof(first) - 1) {
        n = sl_h1_feed(&r.p, (const uint8_t *)a + off, sizeof(first) - 1 - off, &ev);
        assert_true(n >= 0);
        off += (size_t)n;
    }
    assert_int_equal(ev.type, SL_H1_EV_BODY);
    assert_int_equal(sl_h1_feed(&r.p, NULL, 0, &ev), 0);
    assert_int_equal(ev.type, SL_H1_EV_NONE);
    n = sl_h1_feed(&r.p, (const uint8_t *)b, sizeof(second) - 1, &ev);
    assert_int_equal(ev.type, SL_H1_EV_BODY);
    assert_ptr_equal(ev.body.p, (const uint8_t *)b);
    assert_int_equal(ev.body.n, 5);
    assert_memory_equal(ev.body.p, "56789", 5);
    run_end(&r);
    sl_free(a);
    sl_free(b);
}

static void reports_connect_as_an_upgrade_leaving_the_tunnel_bytes(void **state)
{
    static const char in[] = "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n"
                             "\x16\x03\x01\x02\x00";
    struct run r;

    (void)state;
    for (size_t step = 1; step <= sizeof(in); step++) {
        run_start(&r, SL_H1_REQUEST, NULL);
        run_feed(&r, in, sizeof(in) - 1, step, 0);
        assert_string_equal(sl_buf_cstr(&r.log), "H(CONNECT a.example:443) U ");
        assert_int_equal(r.upgrade_at, sizeof(in) - 1 - 5);
        assert_true(sl_h1_head(&r.p)->upgrade);
        run_end(&r);
    }
}

static void reports_switching_protocols_as_an_upgrade(void **state)
{
    (void)state;
    expect_events(
            SL_H1_RESPONSE,
            "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
            0, "H(101) U ");
}

static void skips_the_body_of_a_response_to_head(void **state)
{
    static const char in[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
                             "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nz";
    struct run r;

    (void)state;
    run_start(&r, SL_H1_RESPONSE, NULL);
    sl_h1_expect_no_body(&r.p);
    run_feed(&r, in, sizeof(in) - 1, sizeof(in), 0);
    assert_string_equal(sl_buf_cstr(&r.log), "H(200) E H(200) B:z E ");
    run_end(&r);
}

/* A response to HEAD has no body whatever its head says: without a length it is not
 * close-delimited, and keep-alive follows the version and Connection only. */
static void keeps_alive_after_a_response_to_head_without_a_length(void **state)
{
    static const struct {
        const char *in;
        bool keep_alive;
    } rows[] = {
        { "HTTP/1.1 200 OK\r\n\r\n", true },
        { "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", true },
        { "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", false },
        { "HTTP/1.0 200 OK\r\n\r\n", false },
        { "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n", true },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct sl_arena arena;
        struct sl_h1 p;
        const struct sl_h1_head *h;

        sl_arena_init(&arena, 4096, 1 << 16);
        sl_h1_init(&p, SL_H1_RESPONSE, NULL, &arena);
        sl_h1_expect_no_body(&p);
        print_message("row %zu\n", i);
        h = feed_head(&p, rows[i].in);
        assert_int_equal(h->body, SL_H1_BODY_NONE);
        assert_int_equal(h->keep_alive, rows[i].keep_alive);
        sl_h1_finish(&p);
        sl_arena_finish(&arena);
    }
}

/* "close" in Connection ends the connection whatever else is listed, in either version. */
static void connection_close_wins_over_keep_alive(void **state)
{
    static const char *const rows[] = {
        "GET / HTTP/1.0\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n",
        "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct run r;

        run_start(&r, SL_H1_REQUEST, NULL);
        print_message("row %zu\n", i);
        assert_false(feed_head(&r.p, rows[i])->keep_alive);
        run_end(&r);
    }
}

static void flags_expect_continue_and_http_1_0_close(void **state)
{
    static const char in[] = "POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n";
    struct run r;
    const struct sl_h1_head *h;

    (void)state;
    run_start(&r, SL_H1_REQUEST, NULL);
    h = feed_head(&r.p, in);
    assert_true(h->expect_continue);
    assert_false(h->keep_alive);
    assert_int_equal(h->body, SL_H1_BODY_LENGTH);
    assert_int_equal(h->content_length, 1);
    run_end(&r);
}

struct bad_case {
    const char *name;
    enum sl_h1_kind kind;
    const char *input;
    int rc;
};

static const struct bad_case bad_cases[] = {
    { "two spaces before the target", SL_H1_REQUEST, "GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
      SL_EINVAL },
    { "two spaces before the version", SL_H1_REQUEST, "GET http://a/  HTTP/1.1\r\nHost: a\r\n\r\n",
      SL_EINVAL },
    { "two spaces each side, second request", SL_H1_REQUEST,
      "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET  /  HTTP/1.1\r\nHost: a\r\n\r\n", SL_EINVAL },
    { "two spaces before the status", SL_H1_RESPONSE, "HTTP/1.1  200 OK\r\n\r\n", SL_EINVAL },
    { "obs-fold", SL_H1_REQUEST, "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n", SL_EINVAL },
    { "empty header name", SL_H1_REQUEST, "GET / HTTP/1.1\r\n: x\r\n\r\n", SL_EINVAL },
    { "bare LF", SL_H1_REQUEST, "GET / HTTP/1.1\r\nHost: a\nX: 1\r\n\r\n", SL_EINVAL },
    { "bare CR", SL_H1_REQUEST, "GET / HTTP/1.1\r\nHost: a\rX: 1\r\n\r\n", SL_EINVAL },
    { "CL and TE", SL_H1_REQUEST,
      "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", SL_EINVAL },
    { "duplicate CL", SL_H1_REQUEST,
      "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", SL_EINVAL },
    { "TE gzip, chunked", SL_H1_REQUEST,
      "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", SL_EINVAL },
    { "TE chunked twice", SL_H1_REQUEST,
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
      SL_EINVAL },
    { "TE on HTTP/1.0", SL_H1_REQUEST, "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
      SL_EINVAL },
    { "two Host headers", SL_H1_REQUEST, "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
      SL_EINVAL },
    { "bad chunk size", SL_H1_REQUEST,
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n", SL_EINVAL },
    { "chunk without CRLF", SL_H1_REQUEST,
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab", SL_EINVAL },
    { "HTTP/2.0 request line", SL_H1_REQUEST, "GET / HTTP/2.0\r\n\r\n", SL_EINVAL },
    { "response TE chunked and a tab", SL_H1_RESPONSE,
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\t\t\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
      SL_EINVAL },
    { "request TE chunked and a tab", SL_H1_REQUEST,
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\t\r\n\r\n0\r\n\r\n", SL_EINVAL },
    { "response TE not chunked", SL_H1_RESPONSE,
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n", SL_EINVAL },
    { "response obs-fold", SL_H1_RESPONSE, "HTTP/1.1 200 OK\r\nX: 1\r\n\t2\r\n\r\n", SL_EINVAL },
    { "response status 024", SL_H1_RESPONSE, "HTTP/1.1 024 No\r\n\r\n", SL_EINVAL },
    { "response status 600", SL_H1_RESPONSE, "HTTP/1.1 600 No\r\n\r\n", SL_EINVAL },
    { "response negative CL", SL_H1_RESPONSE, "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
      SL_EINVAL },
};

static void rejects_ambiguous_framing_whole_and_split(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const struct bad_case *c = &bad_cases[i];
        size_t n = strlen(c->input);

        for (size_t step = 1; step <= n; step++) {
            struct run r;

            run_start(&r, c->kind, NULL);
            run_feed(&r, c->input, n, step, 0);
            if (r.rc != c->rc) {
                fail_msg("%s (step %zu): rc %d, log '%s'", c->name, step, r.rc,
                         sl_buf_cstr(&r.log));
            }
            assert_true(strlen(sl_h1_error(&r.p)) > 0);
            run_end(&r);
        }
    }
}

static void refuses_a_head_over_the_limit(void **state)
{
    struct sl_h1_limits lim = { 1024, 8 };
    char in[2048];
    struct run r;
    int n;

    (void)state;
    memset(in, 0, sizeof(in));
    n = snprintf(in, sizeof(in), "GET / HTTP/1.1\r\nX-Big: %01000d\r\n\r\n", 7);
    assert_true(n > 1024);
    run_start(&r, SL_H1_REQUEST, &lim);
    run_feed(&r, in, (size_t)n, (size_t)n, 0);
    assert_int_equal(r.rc, SL_ETOOBIG);

    /* Its headers were too large, not its target: 431 for the servers, not 414. */
    assert_false(sl_h1_error_target_too_long(&r.p));
    run_end(&r);

    /* A target over the limit alone, in one piece or a byte at a time: the request line is too
     * long (414), named as such. */
    n = snprintf(in, sizeof(in), "GET /%01100d HTTP/1.1\r\n\r\n", 7);
    const size_t steps[] = { (size_t)n, 1 };
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        run_start(&r, SL_H1_REQUEST, &lim);
        run_feed(&r, in, (size_t)n, steps[i], 0);
        assert_int_equal(r.rc, SL_ETOOBIG);
        assert_true(sl_h1_error_target_too_long(&r.p));
        assert_string_equal(sl_h1_error(&r.p), "request target too long");
        run_end(&r);
    }

    /* Exactly at the limit passes. */
    n = snprintf(in, sizeof(in), "GET / HTTP/1.1\r\nX: %0*d\r\n\r\n", 1024 - 23, 7);
    assert_int_equal(n, 1024);
    run_start(&r, SL_H1_REQUEST, &lim);
    run_feed(&r, in, (size_t)n, 1, 0);
    assert_string_equal(sl_buf_cstr(&r.log), "H(GET /) E ");
    run_end(&r);
}

static void refuses_too_many_headers(void **state)
{
    struct sl_h1_limits lim = { 4096, 4 };
    static const char ok[] = "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n";
    static const char bad[] = "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n";
    struct run r;

    (void)state;
    run_start(&r, SL_H1_REQUEST, &lim);
    run_feed(&r, ok, sizeof(ok) - 1, 7, 0);
    assert_string_equal(sl_buf_cstr(&r.log), "H(GET /) E ");
    run_end(&r);
    run_start(&r, SL_H1_REQUEST, &lim);
    run_feed(&r, bad, sizeof(bad) - 1, 7, 0);
    assert_int_equal(r.rc, SL_ETOOBIG);
    run_end(&r);
}

/* Trailer fields count against the same line limit as the head's: 2 headers + 2 trailers fit
 * 4 lines, one more trailer does not (its bytes alone were capped before, not its lines). */
static void refuses_too_many_trailer_fields(void **state)
{
    struct sl_h1_limits lim = { 4096, 4 };
    static const char ok[] = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "1\r\nx\r\n0\r\nT1: 1\r\nT2: 2\r\n\r\n";
    static const char bad[] = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "1\r\nx\r\n0\r\nT1: 1\r\nT2: 2\r\nT3: 3\r\n\r\n";
    struct run r;

    (void)state;
    run_start(&r, SL_H1_REQUEST, &lim);
    run_feed(&r, ok, sizeof(ok) - 1, 7, 0);
    assert_int_equal(r.rc, 0);
    assert_string_equal(sl_buf_cstr(&r.log), "H(POST /) B:x E ");
    /* The count starts again with the next message. */
    run_feed(&r, ok, sizeof(ok) - 1, 5, 0);
    assert_int_equal(r.rc, 0);
    run_end(&r);
    run_start(&r, SL_H1_REQUEST, &lim);
    run_feed(&r, bad, sizeof(bad) - 1, 7, 0);
    assert_int_equal(r.rc, SL_ETOOBIG);
    run_end(&r);
}

/* A chunked message: `head`, then `lines` chunks of "1;" + an extension of `ext` bytes (a name
 * of `ext` letters) + data "x", then the last chunk. Returns the text, heap-owned. */
static char *ext_message(const char *head, size_t lines, size_t ext)
{
    size_t cap = strlen(head) + lines * (ext + 16) + 16;
    char *m = sl_malloc(cap);
    size_t o;

    assert_non_null(m);
    o = (size_t)snprintf(m, cap, "%s", head);
    for (size_t i = 0; i < lines; i++) {
        m[o++] = '1';
        m[o++] = ';';
        memset(m + o, 'e', ext);
        o += ext;
        memcpy(m + o, "\r\nx\r\n", 5);
        o += 5;
    }
    memcpy(m + o, "0\r\n\r\n", 6);
    return m;
}

static void caps_chunk_extensions(void **state)
{
    static const struct {
        const char *name;
        size_t lines;
        size_t ext;
        int rc;
    } rows[] = {
        /* Per chunk-size line: 4 KiB of extension bytes pass, one more is too large. */
        { "one line at the cap", 1, SL_H1_CHUNK_EXT_LINE_MAX, 0 },
        { "one line over the cap", 1, SL_H1_CHUNK_EXT_LINE_MAX + 1, SL_ETOOBIG },
        /* Per message: 16 lines of 4 KiB make 64 KiB, a 17th is too many. */
        { "64 KiB in a message", 16, SL_H1_CHUNK_EXT_LINE_MAX, 0 },
        { "over 64 KiB in a message", 17, SL_H1_CHUNK_EXT_LINE_MAX, SL_ETOOBIG },
        { "many short ones", 2048, 16, 0 },
        { "2048 lines of 8 KiB (16.8 MB)", 2048, 8192, SL_ETOOBIG },
    };

    static const char *const heads[2] = {
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
    };
    static const size_t steps[] = { 1, 7, 4096, SIZE_MAX };

    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        for (size_t k = 0; k < 2; k++) {
            char *m = ext_message(heads[k], rows[i].lines, rows[i].ext);
            size_t n = strlen(m);

            for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
                struct run r;

                if (steps[s] == 1 && n > 200000) {
                    continue; /* byte by byte, the 16.8 MB message would take minutes */
                }
                run_start(&r, k == 0 ? SL_H1_REQUEST : SL_H1_RESPONSE, NULL);
                run_feed(&r, m, n, steps[s] > n ? n : steps[s], 0);
                if (r.rc != rows[i].rc) {
                    fail_msg("%s (%s, step %zu): rc %d, error '%s'", rows[i].name,
                             k == 0 ? "request" : "response", steps[s], r.rc, sl_h1_error(&r.p));
                }
                if (rows[i].rc == SL_ETOOBIG) {
                    assert_non_null(strstr(sl_h1_error(&r.p), "chunk extensions too long"));
                }
                run_end(&r);
            }
            sl_free(m);
        }
    }
}

static void reports_a_truncated_body_at_eof(void **state)
{
    static const char in[] = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort";
    struct run r;

    (void)state;
    run_start(&r, SL_H1_RESPONSE, NULL);
    run_feed(&r, in, sizeof(in) - 1, 4, 1);
    assert_int_equal(r.rc, SL_EINVAL);
    assert_string_equal(sl_h1_error(&r.p), "connection closed in the middle of a message");
    run_end(&r);
}

/* sl_h1_in_message(): true from a message's first byte to its end, false between messages (an
 * interim response's end included), so that a close there is told from a response cut short. */
static void says_whether_a_message_has_begun(void **state)
{
    static const char in[] = "HTTP/1.1 100 Continue\r\n\r\n"
                             "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    struct run r;
    struct sl_h1_event ev;
    size_t off = 1;

    (void)state;
    run_start(&r, SL_H1_RESPONSE, NULL);
    assert_false(sl_h1_in_message(&r.p));
    assert_int_equal(sl_h1_feed(&r.p, (const uint8_t *)in, 1, &ev), 1);
    assert_int_equal(ev.type, SL_H1_EV_NONE);
    assert_true(sl_h1_in_message(&r.p));
    /* Each event, then "in" or "out" of a message after it. */
    for (int calls = 0; calls < 20; calls++) {
        int used = sl_h1_feed(&r.p, (const uint8_t *)in + off, sizeof(in) - 1 - off, &ev);

        assert_true(used >= 0);
        off += (size_t)used;
        if (ev.type == SL_H1_EV_NONE) {
            break;
        }
        log_event(&r, &ev);
        assert_int_equal(sl_buf_append_str(&r.log, sl_h1_in_message(&r.p) ? "in " : "out "), 0);
    }
    assert_int_equal(off, sizeof(in) - 1);
    assert_string_equal(sl_buf_cstr(&r.log), "H(100) in E out H(200) in B:ok in E out ");
    /* The peer closes between messages: nothing owed, nothing begun. */
    assert_int_equal(sl_h1_eof(&r.p, &ev), 0);
    assert_int_equal(ev.type, SL_H1_EV_NONE);
    assert_false(sl_h1_in_message(&r.p));
    run_end(&r);
}

static void refuses_bytes_after_an_upgrade(void **state)
{
    static const char in[] = "CONNECT a:443 HTTP/1.1\r\n\r\n";
    struct run r;
    struct sl_h1_event ev;

    (void)state;
    run_start(&r, SL_H1_REQUEST, NULL);
    run_feed(&r, in, sizeof(in) - 1, 100, 0);
    assert_string_equal(sl_buf_cstr(&r.log), "H(CONNECT a:443) U ");
    assert_int_equal(sl_h1_feed(&r.p, (const uint8_t *)"x", 1, &ev), SL_EINVAL);
    run_end(&r);
}

static void survives_every_allocation_failure(void **state)
{
    static const char in[] = "POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
                             "A: 1\r\nB: 2\r\nC: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    (void)state;
    for (long n = 1; n < 200; n++) {
        struct run r;

        run_start(&r, SL_H1_REQUEST, NULL);
        sl_mem_fail_after(n);
        run_feed(&r, in, sizeof(in) - 1, 5, 0);
        sl_mem_fail_after(0);
        if (r.rc == 0) {
            char merged[256];

            merge_bodies(sl_buf_cstr(&r.log), merged, sizeof(merged));
            assert_string_equal(merged, "H(POST /p) B:abc E ");
            run_end(&r);
            return;
        }
        assert_true(r.rc == SL_ENOMEM || r.rc == SL_ETOOBIG);
        run_end(&r);
    }
    fail_msg("parse never succeeded");
}

static void says_when_the_target_was_the_problem(void **state)
{
    static const char bad_target[] = "CONNECT ex\xc3\xa4mple.com:443 HTTP/1.1\r\n\r\n";
    static const char bad_header[] = "GET / HTTP/1.1\r\nX: 1\r\n 2\r\n\r\n";
    struct run r;

    (void)state;
    run_start(&r, SL_H1_REQUEST, NULL);
    run_feed(&r, bad_target, sizeof(bad_target) - 1, 7, 0);
    assert_int_equal(r.rc, SL_EINVAL);
    assert_true(sl_h1_error_in_target(&r.p));
    run_end(&r);
    run_start(&r, SL_H1_REQUEST, NULL);
    run_feed(&r, bad_header, sizeof(bad_header) - 1, 7, 0);
    assert_int_equal(r.rc, SL_EINVAL);
    assert_false(sl_h1_error_in_target(&r.p));
    run_end(&r);
}

static void finds_tokens_in_lists(void **state)
{
    (void)state;
    assert_true(sl_h1_list_has(sl_slice_str("keep-alive, Upgrade"), "upgrade"));
    assert_true(sl_h1_list_has(sl_slice_str(" close "), "close"));
    assert_false(sl_h1_list_has(sl_slice_str("closed, x"), "close"));
    assert_false(sl_h1_list_has(sl_slice_str(""), "close"));
    assert_true(sl_h1_list_has(sl_slice_str(",,a,,b ,"), "b"));
}

static void writes_chunk_framing(void **state)
{
    char buf[SL_H1_CHUNK_HEADER_MAX + 1];

    (void)state;
    assert_int_equal(sl_h1_chunk_header(buf, sizeof(buf), 1), 3);
    assert_memory_equal(buf, "1\r\n", 3);
    assert_int_equal(sl_h1_chunk_header(buf, sizeof(buf), 0xabc), 5);
    assert_memory_equal(buf, "abc\r\n", 5);
    assert_int_equal(sl_h1_chunk_header(buf, sizeof(buf), 0x10), 4);
    assert_memory_equal(buf, "10\r\n", 4);
    assert_int_equal(sl_h1_chunk_header(buf, SL_H1_CHUNK_HEADER_MAX, UINT64_MAX),
                     SL_H1_CHUNK_HEADER_MAX);
    assert_memory_equal(buf, "ffffffffffffffff\r\n", SL_H1_CHUNK_HEADER_MAX);
    /* An empty chunk would end the body; a buffer one byte short gets nothing. */
    assert_int_equal(sl_h1_chunk_header(buf, sizeof(buf), 0), 0);
    assert_int_equal(sl_h1_chunk_header(buf, 4, 0x100), 0);
    assert_int_equal(sl_h1_chunk_header(buf, 5, 0x100), 5);
    assert_int_equal(strlen(SL_H1_CHUNK_END), SL_H1_CHUNK_END_LEN);
    assert_int_equal(strlen(SL_H1_CHUNK_LAST), SL_H1_CHUNK_LAST_LEN);
}

static void parses_its_own_chunk_framing(void **state)
{
    static const char head[] = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    uint8_t m[512];
    uint8_t body[64];
    size_t n = strlen(head);
    size_t body_n = 0;
    size_t pos = 0;
    struct sl_arena arena;
    struct sl_h1 p;
    bool ended = false;

    (void)state;
    memcpy(m, head, n);
    for (size_t len = 1; len <= 17; len += 8) {
        n += sl_h1_chunk_header((char *)m + n, SL_H1_CHUNK_HEADER_MAX, len);
        memset(m + n, 'a' + (int)len, len);
        n += len;
        memcpy(m + n, SL_H1_CHUNK_END, SL_H1_CHUNK_END_LEN);
        n += SL_H1_CHUNK_END_LEN;
    }
    memcpy(m + n, SL_H1_CHUNK_LAST, SL_H1_CHUNK_LAST_LEN);
    n += SL_H1_CHUNK_LAST_LEN;

    sl_arena_init(&arena, 1024, 1 << 16);
    sl_h1_init(&p, SL_H1_REQUEST, NULL, &arena);
    while (!ended) {
        struct sl_h1_event ev;
        int used = sl_h1_feed(&p, m + pos, n - pos, &ev);

        assert_true(used >= 0);
        pos += (size_t)used;
        if (ev.type == SL_H1_EV_BODY) {
            assert_true(body_n + ev.body.n <= sizeof(body));
            memcpy(body + body_n, ev.body.p, ev.body.n);
            body_n += ev.body.n;
        }
        ended = ev.type == SL_H1_EV_END;
        assert_true(ended || ev.type == SL_H1_EV_HEAD || ev.type == SL_H1_EV_BODY);
    }
    assert_int_equal(pos, n);
    assert_int_equal(body_n, 1 + 9 + 17);
    assert_memory_equal(body, "b", 1);
    assert_memory_equal(body + 1, "jjjjjjjjj", 9);
    assert_memory_equal(body + 10, "rrrrrrrrrrrrrrrrr", 17);
    sl_h1_finish(&p);
    sl_arena_finish(&arena);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_a_simple_request_and_its_fields),
        cmocka_unit_test(reports_events_the_same_way_at_every_split),
        cmocka_unit_test(drops_trailers_after_a_chunked_body),
        cmocka_unit_test(an_empty_feed_between_buffers_keeps_the_body_span),
        cmocka_unit_test(reports_connect_as_an_upgrade_leaving_the_tunnel_bytes),
        cmocka_unit_test(reports_switching_protocols_as_an_upgrade),
        cmocka_unit_test(skips_the_body_of_a_response_to_head),
        cmocka_unit_test(keeps_alive_after_a_response_to_head_without_a_length),
        cmocka_unit_test(flags_expect_continue_and_http_1_0_close),
        cmocka_unit_test(connection_close_wins_over_keep_alive),
        cmocka_unit_test(rejects_ambiguous_framing_whole_and_split),
        cmocka_unit_test(refuses_a_head_over_the_limit),
        cmocka_unit_test(refuses_too_many_headers),
        cmocka_unit_test(refuses_too_many_trailer_fields),
        cmocka_unit_test(caps_chunk_extensions),
        cmocka_unit_test(reports_a_truncated_body_at_eof),
        cmocka_unit_test(says_whether_a_message_has_begun),
        cmocka_unit_test(refuses_bytes_after_an_upgrade),
        cmocka_unit_test(survives_every_allocation_failure),
        cmocka_unit_test(says_when_the_target_was_the_problem),
        cmocka_unit_test(finds_tokens_in_lists),
        cmocka_unit_test(writes_chunk_framing),
        cmocka_unit_test(parses_its_own_chunk_framing),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
