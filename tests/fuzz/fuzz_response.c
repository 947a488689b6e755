/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_response.c - the upstream response path of the proxy: http/h1 in response
 * mode with the proxy's limits (sl_h1_default_limits, as proxy/conn_forward.c uses), over a stream
 * of responses on one kept-alive upstream connection, up to the upstream's close (sl_h1_eof).
 *
 * Input: byte 0 seeds the split points; byte 1 says which exchanges answer a HEAD request (bit
 * k for the k-th final response; sl_h1_expect_no_body() is called before each such exchange, as
 * proxy/conn_forward.c does once per request, interim 1xx responses included); the rest is the
 * stream.
 *
 * Invariants, not just "no crash":
 *   - the trace of events (each head's status, framing, length, keep-alive and upgrade flags;
 *     body byte counts and contents; ends; the final error code or close outcome) is the same
 *     whether the stream is fed whole, one byte at a time or in seed-derived pieces;
 *   - every head reported has a status of 100-599, HTTP/1.0 or 1.1, at most one Content-Length
 *     and never both Content-Length and Transfer-Encoding, Transfer-Encoding only as exactly
 *     `chunked` and never on HTTP/1.0;
 *   - framing: a response to HEAD (interim responses before it do not use that up), a 1xx, a
 *     204 and a 304 have no body; Content-Length framing has the header's value and then exactly
 *     that many body bytes; chunked framing has the header; a close-delimited body is never
 *     keep-alive and ends only at the close; 101 switches protocols and nothing is parsed after.
 */
#include <stdint.h>
#include <string.h>

#include "base/arena.h"
#include "base/err.h"
#include "http/h1.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_MAX 16384
#define TRACE_MAX 64
#define EXCHANGES 8

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
    int status;
    int body_kind;
    uint64_t content_length;
    bool keep_alive;
    bool upgrade;
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
static struct entry check_head(const struct sl_h1_head *h, bool head_request)
{
    const struct sl_h1_header *cl = sl_h1_find(h, "content-length");
    const struct sl_h1_header *te = sl_h1_find(h, "transfer-encoding");
    struct entry e = { T_HEAD, h->status, (int)h->body, 0, h->keep_alive, h->upgrade, 0, 0 };

    SL_BUG_ON(h->status < 100 || h->status > 599);
    SL_BUG_ON(h->version_major != 1 || h->version_minor > 1);
    SL_BUG_ON(count(h, "content-length") > 1 || count(h, "transfer-encoding") > 1);
    SL_BUG_ON(cl != NULL && te != NULL);
    SL_BUG_ON(te != NULL && (!sl_h1_name_is(te->value, "chunked") || h->version_minor == 0));
    if (head_request || h->status < 200 || h->status == 204 || h->status == 304) {
        SL_BUG_ON(h->body != SL_H1_BODY_NONE);
    }
    switch (h->body) {
    case SL_H1_BODY_LENGTH:
        SL_BUG_ON(cl == NULL || decimal(cl->value) != h->content_length);
        e.content_length = h->content_length;
        break;
    case SL_H1_BODY_CHUNKED:
        SL_BUG_ON(te == NULL);
        break;
    case SL_H1_BODY_CLOSE:
        SL_BUG_ON(h->keep_alive || cl != NULL || te != NULL || h->status == 101);
        break;
    case SL_H1_BODY_NONE:
        break;
    }
    SL_BUG_ON((h->status == 101) != h->upgrade);
    return e;
}

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

static void run(const uint8_t *m, size_t n, uint8_t head_mask, struct splitter *sp, struct trace *t)
{
    struct sl_arena arena;
    struct sl_h1 p;
    size_t pos = 0;
    size_t exchange = 0;
    bool head_request = (head_mask & 1) != 0;
    bool in_message = false;
    struct entry cur = { 0 };
    uint64_t body_seen = 0;
    struct sl_h1_event ev;
    int rc;

    t->n = 0;
    sl_arena_init(&arena, 1024, 1 << 20);
    sl_h1_init(&p, SL_H1_RESPONSE, NULL, &arena);
    if (head_request) {
        sl_h1_expect_no_body(&p);
    }
    while (pos < n) {
        size_t piece_end = pos + next_piece(sp, n - pos);

        for (;;) {
            int used = sl_h1_feed(&p, m + pos, piece_end - pos, &ev);

            if (used < 0) {
                SL_BUG_ON(used != SL_EINVAL && used != SL_ETOOBIG);
                (void)push(t, (struct entry){ T_ERROR, used, 0, 0, false, false, 0, 0 });
                goto out;
            }
            pos += (size_t)used;
            if (ev.type == SL_H1_EV_NONE) {
                SL_BUG_ON(pos != piece_end);
                break;
            }
            if (ev.type == SL_H1_EV_HEAD) {
                SL_BUG_ON(in_message);
                cur = check_head(sl_h1_head(&p), head_request);
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
                    && !push(t, (struct entry){ T_BODY, 0, 0, 0, false, false, 0,
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
                                             false, false, 0, 0 })) {
                    goto out;
                }
                if (ev.type == SL_H1_EV_UPGRADE) {
                    SL_BUG_ON(cur.status != 101);
                    SL_BUG_ON(sl_h1_feed(&p, m + pos, n - pos, &ev) >= 0);
                    goto out;
                }
                sl_arena_reset(&arena);
                if (cur.status >= 200) {
                    /* The exchange is over; the next response answers the next request. */
                    exchange++;
                    head_request = exchange < EXCHANGES && (head_mask >> exchange & 1) != 0;
                    if (head_request) {
                        sl_h1_expect_no_body(&p);
                    }
                }
            }
        }
    }
    /* The upstream closes. */
    rc = sl_h1_eof(&p, &ev);
    if (rc < 0) {
        (void)push(t, (struct entry){ T_EOF_ERROR, rc, 0, 0, false, false, 0, 0 });
    } else if (ev.type == SL_H1_EV_END) {
        SL_BUG_ON(!in_message || cur.body_kind != SL_H1_BODY_CLOSE);
        (void)push(t, (struct entry){ T_EOF_END, 0, 0, 0, false, false, 0, 0 });
    } else {
        SL_BUG_ON(ev.type != SL_H1_EV_NONE);
        (void)push(t, (struct entry){ T_EOF_NONE, 0, 0, 0, false, false, 0, 0 });
    }
out:
    sl_h1_finish(&p);
    sl_arena_finish(&arena);
}

static bool same_trace(const struct trace *a, const struct trace *b)
{
    if (a->n != b->n) {
        return false;
    }
    for (size_t i = 0; i < a->n; i++) {
        const struct entry *x = &a->e[i];
        const struct entry *y = &b->e[i];

        if (x->type != y->type || x->status != y->status || x->body_kind != y->body_kind
            || x->content_length != y->content_length || x->keep_alive != y->keep_alive
            || x->upgrade != y->upgrade || x->n != y->n || x->hash != y->hash) {
            return false;
        }
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct trace whole;
    static struct trace split;
    struct splitter sp;

    if (size < 2 || size - 2 > INPUT_MAX) {
        return 0;
    }
    sp = (struct splitter){ 0, 0 };
    run(data + 2, size - 2, data[1], &sp, &whole);
    for (unsigned mode = 1; mode <= 2; mode++) {
        sp = (struct splitter){ mode, data[0] };
        run(data + 2, size - 2, data[1], &sp, &split);
        SL_BUG_ON(!same_trace(&whole, &split));
    }
    return 0;
}
