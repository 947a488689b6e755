/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_server.c - the request path of http/server (the admin socket and the REST
 * API): http/h1 in request mode with the server's limits and the server's own arena bound, over
 * a stream of pipelined requests on one connection, up to the client's close.
 *
 * http/server cannot be driven without a socket (it owns its libuv streams and exposes no memory
 * transport), so this target drives the same parser the way its conn_step() does: one event per
 * sl_h1_feed(), the arena reset after each request, the head limits of struct
 * sl_http_server_config (defaults, or small ones from the input) and the arena cap that
 * resolve_config() computes from them, mirrored here.
 *
 * Input: byte 0 seeds the split points; byte 1 bit 0 picks custom limits, bytes 2-3 give them
 * (head bytes 256 + 64 * b2, header lines 1 + b3 % 300); the rest is the stream.
 *
 * Invariants, not just "no crash":
 *   - the trace of events (each head's method, target length, framing, length, keep-alive,
 *     upgrade and Expect flags; body byte counts and contents; ends; the error code or close
 *     outcome) is the same whether the stream is fed whole, one byte at a time or in pieces;
 *   - the server's arena bound is enough: no SL_ENOMEM for any head within the limits;
 *   - every head reported has a method, a target of visible ASCII, HTTP/1.0 or 1.1, at most
 *     the configured header lines, at most one Host and one Content-Length, never both
 *     Content-Length and Transfer-Encoding, Transfer-Encoding only as exactly `chunked` and
 *     never on HTTP/1.0; a request body is never close-delimited; Content-Length framing has the
 *     header's value and then exactly that many body bytes; `Connection: close` is never
 *     keep-alive; `expect_continue` is the last Expect header being `100-continue`; CONNECT is an
 *     upgrade and nothing is parsed after an upgrade.
 */
#include <stdint.h>
#include <string.h>

#include "base/arena.h"
#include "base/err.h"
#include "http/h1.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_MAX 16384
#define TRACE_MAX 64

/* http/server_int.h: SL__HTTP_ARENA_CHUNK_BYTES, and the cap resolve_config() computes
 * (http/server_listen.c). */
#define SERVER_ARENA_CHUNK 4096u

enum {
    T_HEAD = 1,
    T_BODY,
    T_END,
    T_UPGRADE,
    T_ERROR,
    T_EOF_END,
    T_EOF_NONE,
    T_EOF_ERROR,
    T_WAIT
};

struct entry {
    int type;
    /* T_HEAD: a hash of the method and the target length; T_ERROR: the code. */
    int status;
    int body_kind;
    uint64_t content_length;
    bool keep_alive;
    bool upgrade;
    bool expect_continue;
    /* T_BODY: bytes and FNV-1a of the bytes, summed over consecutive body events. */
    uint64_t n;
    uint64_t hash;
};

struct trace {
    struct entry e[TRACE_MAX];
    size_t n;
};

struct splitter {
    unsigned mode;
    uint32_t state;
};

static size_t next_piece(struct splitter *s, size_t left)
{
    size_t n;

    if (s->mode == 0) {
        return left;
    }
    if (s->mode == 1) {
        return 1;
    }
    s->state = s->state * 1103515245u + 12345u;
    n = 1 + (s->state >> 16) % 97;
    return n < left ? n : left;
}

static bool push(struct trace *t, struct entry e)
{
    if (t->n == TRACE_MAX) {
        return false;
    }
    t->e[t->n++] = e;
    return true;
}

static size_t count(const struct sl_h1_head *h, const char *name)
{
    size_t n = 0;

    for (size_t i = 0; i < h->n_headers; i++) {
        n += sl_h1_name_is(h->headers[i].name, name);
    }
    return n;
}

static uint64_t decimal(struct sl_slice s)
{
    uint64_t v = 0;

    for (size_t i = 0; i < s.n; i++) {
        SL_BUG_ON(s.p[i] < '0' || s.p[i] > '9');
        v = v * 10 + (uint64_t)(s.p[i] - '0');
    }
    return v;
}

/* The head invariants of the file comment; returns the trace entry. */
static struct entry check_head(const struct sl_h1_head *h, const struct sl_h1_limits *lim)
{
    const struct sl_h1_header *cl = sl_h1_find(h, "content-length");
    const struct sl_h1_header *te = sl_h1_find(h, "transfer-encoding");
    const struct sl_h1_header *expect = NULL;
    struct entry e = { T_HEAD, 0, (int)h->body, 0, h->keep_alive, h->upgrade, h->expect_continue,
                       0,      0 };
    size_t tn = strlen(h->target);

    SL_BUG_ON(h->method == NULL || h->method[0] == '\0' || tn == 0);
    for (size_t i = 0; i < tn; i++) {
        SL_BUG_ON((uint8_t)h->target[i] <= 0x20 || (uint8_t)h->target[i] >= 0x7f);
    }
    e.status = (int)(strlen(h->method) * 1000003u + tn) & 0x7fffffff;
    SL_BUG_ON(h->version_major != 1 || h->version_minor > 1);
    SL_BUG_ON(h->n_headers > lim->headers_max);
    SL_BUG_ON(count(h, "host") > 1);
    SL_BUG_ON(count(h, "content-length") > 1 || count(h, "transfer-encoding") > 1);
    SL_BUG_ON(cl != NULL && te != NULL);
    SL_BUG_ON(te != NULL && (!sl_h1_name_is(te->value, "chunked") || h->version_minor == 0));
    for (size_t i = 0; i < h->n_headers; i++) {
        const struct sl_h1_header *f = &h->headers[i];

        if (sl_h1_name_is(f->name, "expect")) {
            expect = f;
        }
        if (sl_h1_name_is(f->name, "connection") && sl_h1_list_has(f->value, "close")) {
            SL_BUG_ON(h->keep_alive);
        }
    }
    SL_BUG_ON(h->expect_continue
              != (expect != NULL && sl_h1_name_is(expect->value, "100-continue")));
    SL_BUG_ON(strcmp(h->method, "CONNECT") == 0 && (!h->upgrade || h->body != SL_H1_BODY_NONE));
    switch (h->body) {
    case SL_H1_BODY_LENGTH:
        SL_BUG_ON(cl == NULL || decimal(cl->value) != h->content_length);
        e.content_length = h->content_length;
        break;
    case SL_H1_BODY_CHUNKED:
        SL_BUG_ON(te == NULL);
        break;
    case SL_H1_BODY_CLOSE:
        SL_BUG_ON(true);
        break;
    case SL_H1_BODY_NONE:
        SL_BUG_ON(te != NULL || (cl != NULL && decimal(cl->value) != 0 && !h->upgrade));
        break;
    }
    return e;
}

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

static void run(const uint8_t *m, size_t n, const struct sl_h1_limits *lim, struct splitter *sp,
                struct trace *t)
{
    struct sl_arena arena;
    struct sl_h1 p;
    size_t pos = 0;
    bool in_message = false;
    struct entry cur = { 0 };
    uint64_t body_seen = 0;
    struct sl_h1_event ev;
    int rc;

    t->n = 0;
    sl_arena_init(&arena, SERVER_ARENA_CHUNK,
                  3 * lim->head_max_bytes + 4 * lim->headers_max * sizeof(struct sl_h1_header)
                          + 4 * SERVER_ARENA_CHUNK);
    sl_h1_init(&p, SL_H1_REQUEST, lim, &arena);
    while (pos < n) {
        size_t piece_end = pos + next_piece(sp, n - pos);

        for (;;) {
            int used = sl_h1_feed(&p, m + pos, piece_end - pos, &ev);

            if (used < 0) {
                /* SL_ENOMEM would be a 503 for a request within the limits. */
                SL_BUG_ON(used != SL_EINVAL && used != SL_ETOOBIG);
                (void)push(t, (struct entry){ T_ERROR, used, 0, 0, false, false, false, 0, 0 });
                goto out;
            }
            pos += (size_t)used;
            if (ev.type == SL_H1_EV_NONE) {
                SL_BUG_ON(pos != piece_end);
                break;
            }
            if (ev.type == SL_H1_EV_HEAD) {
                SL_BUG_ON(in_message);
                cur = check_head(sl_h1_head(&p), lim);
                in_message = true;
                body_seen = 0;
                if (!push(t, cur)) {
                    goto out;
                }
            } else if (ev.type == SL_H1_EV_BODY) {
                struct entry *last = &t->e[t->n - 1];

                SL_BUG_ON(!in_message || cur.body_kind == SL_H1_BODY_NONE || ev.body.n == 0);
                body_seen += ev.body.n;
                SL_BUG_ON(cur.body_kind == SL_H1_BODY_LENGTH && body_seen > cur.content_length);
                /* Consecutive body events fold into one entry: pieces differ by split. */
                if (last->type != T_BODY
                    && !push(t, (struct entry){ T_BODY, 0, 0, 0, false, false, false, 0,
                                                0xcbf29ce484222325ull })) {
                    goto out;
                }
                last = &t->e[t->n - 1];
                last->n += ev.body.n;
                last->hash = fnv(last->hash, ev.body.p, ev.body.n);
            } else {
                SL_BUG_ON(!in_message);
                SL_BUG_ON(cur.body_kind == SL_H1_BODY_LENGTH && body_seen != cur.content_length);
                SL_BUG_ON(cur.body_kind == SL_H1_BODY_CLOSE);
                in_message = false;
                if (!push(t, (struct entry){ ev.type == SL_H1_EV_END ? T_END : T_UPGRADE, 0, 0, 0,
                                             false, false, false, 0, 0 })) {
                    goto out;
                }
                if (ev.type == SL_H1_EV_UPGRADE) {
                    SL_BUG_ON(!cur.upgrade);
                    SL_BUG_ON(sl_h1_feed(&p, m + pos, n - pos, &ev) >= 0);
                    goto out;
                }
                /* As dispatch() does. */
                sl_arena_reset(&arena);
            }
        }
    }
    /* The upstream closes. */
    rc = sl_h1_eof(&p, &ev);
    if (rc < 0) {
        (void)push(t, (struct entry){ T_EOF_ERROR, rc, 0, 0, false, false, false, 0, 0 });
    } else {
        /* A request is never close-delimited. */
        SL_BUG_ON(ev.type != SL_H1_EV_NONE || in_message);
        (void)push(t, (struct entry){ T_EOF_NONE, 0, 0, 0, false, false, false, 0, 0 });
    }
out:
    sl_h1_finish(&p);
    sl_arena_finish(&arena);
}

/* Both refusals, one of them the size limit: a grammar error past a limit (in a chunked body's
 * trailer) is seen first when llhttp gets the whole span at once (it reports a span when it
 * ends), the limit first when the span arrives in pieces; either way the request is refused and
 * the connection closed, as 400 or 431 (fuzz_chunked makes the same allowance). */
static bool same_refusal(const struct entry *x, const struct entry *y)
{
    return x->type == T_ERROR && y->type == T_ERROR
           && (x->status == SL_ETOOBIG || y->status == SL_ETOOBIG)
           && (x->status == SL_EINVAL || y->status == SL_EINVAL);
}

static bool same_trace(const struct trace *a, const struct trace *b)
{
    if (a->n != b->n) {
        return false;
    }
    for (size_t i = 0; i < a->n; i++) {
        const struct entry *x = &a->e[i];
        const struct entry *y = &b->e[i];

        if (i + 1 == a->n && same_refusal(x, y)) {
            continue;
        }

        if (x->type != y->type || x->status != y->status || x->body_kind != y->body_kind
            || x->content_length != y->content_length || x->keep_alive != y->keep_alive
            || x->upgrade != y->upgrade || x->expect_continue != y->expect_continue || x->n != y->n
            || x->hash != y->hash) {
            return false;
        }
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct trace whole;
    static struct trace split;
    struct sl_h1_limits lim = sl_h1_default_limits;
    struct splitter sp;

    if (size < 4 || size - 4 > INPUT_MAX) {
        return 0;
    }
    if ((data[1] & 1) != 0) {
        lim.head_max_bytes = 256 + 64 * (size_t)data[2];
        lim.headers_max = 1 + (size_t)data[3] % 300;
    }
    sp = (struct splitter){ 0, 0 };
    run(data + 4, size - 4, &lim, &sp, &whole);
    for (unsigned mode = 1; mode <= 2; mode++) {
        sp = (struct splitter){ mode, data[0] };
        run(data + 4, size - 4, &lim, &sp, &split);
        SL_BUG_ON(!same_trace(&whole, &split));
    }
    return 0;
}
