/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/support/h1trace.c - the trace oracle of the HTTP/1.x fuzz targets (see h1trace.h).
 */
#include "tests/support/h1trace.h"

#include "base/arena.h"
#include "base/err.h"

/* The seeded pieces of sl_test_h1_check_splits(): 1..97 bytes. */
#define SEEDED_PIECE_MAX 97

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME  0x100000001b3ull

size_t sl_test_split_next(struct sl_test_splitter *s, size_t left)
{
    size_t n;

    switch (s->mode) {
    case SL_TEST_SPLIT_WHOLE:
        return left;
    case SL_TEST_SPLIT_BYTES:
        return left > 0 ? 1 : 0;
    case SL_TEST_SPLIT_SEEDED:
        break;
    }
    s->state = s->state * 1103515245u + 12345u;
    n = 1 + (s->state >> 16) % s->max;
    return n < left ? n : left;
}

size_t sl_test_h1_count(const struct sl_h1_head *h, const char *name)
{
    size_t n = 0;

    for (size_t i = 0; i < h->n_headers; i++) {
        n += sl_h1_name_is(h->headers[i].name, name);
    }
    return n;
}

uint64_t sl_test_decimal(struct sl_slice s)
{
    uint64_t v = 0;

    for (size_t i = 0; i < s.n; i++) {
        SL_BUG_ON(s.p[i] < '0' || s.p[i] > '9');
        v = v * 10 + (uint64_t)(s.p[i] - '0');
    }
    return v;
}

void sl_test_h1_check_framing(const struct sl_h1_head *h)
{
    const struct sl_h1_header *cl = sl_h1_find(h, "content-length");
    const struct sl_h1_header *te = sl_h1_find(h, "transfer-encoding");

    SL_BUG_ON(h->version_major != 1 || h->version_minor > 1);
    SL_BUG_ON(sl_test_h1_count(h, "content-length") > 1
              || sl_test_h1_count(h, "transfer-encoding") > 1);
    SL_BUG_ON(cl != NULL && te != NULL);
    SL_BUG_ON(te != NULL && (!sl_h1_name_is(te->value, "chunked") || h->version_minor == 0));
    SL_BUG_ON(h->body == SL_H1_BODY_LENGTH
              && (cl == NULL || sl_test_decimal(cl->value) != h->content_length));
    SL_BUG_ON(h->body == SL_H1_BODY_CHUNKED && te == NULL);
}

void sl_test_h1_check_no_hop_headers(const struct sl_h1_head *h)
{
    static const char *const never[] = { "proxy-authorization",
                                         "proxy-authenticate",
                                         "proxy-connection",
                                         "keep-alive",
                                         "te",
                                         "trailer" };

    for (size_t i = 0; i < SL_ARRAY_LEN(never); i++) {
        SL_BUG_ON(sl_test_h1_count(h, never[i]) != 0);
    }
}

static bool push(struct sl_test_trace *t, struct sl_test_trace_entry e)
{
    if (t->n == SL_TEST_TRACE_MAX) {
        return false;
    }
    t->e[t->n++] = e;
    return true;
}

static bool push_type(struct sl_test_trace *t, enum sl_test_trace_type type, int status)
{
    return push(t, (struct sl_test_trace_entry){ .type = type, .status = status });
}

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * FNV_PRIME;
    }
    return h;
}

void sl_test_h1_trace(const struct sl_test_h1_driver *d, const uint8_t *m, size_t n,
                      struct sl_test_splitter *sp, struct sl_test_trace *t)
{
    struct sl_arena arena;
    struct sl_h1 p;
    size_t pos = 0;
    bool in_message = false;
    struct sl_test_trace_entry cur = { 0 };
    uint64_t body_seen = 0;
    struct sl_h1_event ev;
    int rc;

    t->n = 0;
    sl_arena_init(&arena, d->arena_chunk_bytes, d->arena_cap_bytes);
    sl_h1_init(&p, d->kind, d->limits, &arena);
    if (d->next != NULL) {
        d->next(d->arg, &p, NULL);
    }
    while (pos < n) {
        size_t piece_end = pos + sl_test_split_next(sp, n - pos);

        for (;;) {
            int used = sl_h1_feed(&p, m + pos, piece_end - pos, &ev);

            if (used < 0) {
                /* SL_ENOMEM would be a 503 for a message within the limits. */
                SL_BUG_ON(used != SL_EINVAL && used != SL_ETOOBIG);
                (void)push_type(t, SL_TEST_TRACE_ERROR, used);
                goto out;
            }
            pos += (size_t)used;
            if (ev.type == SL_H1_EV_NONE) {
                SL_BUG_ON(pos != piece_end);
                break;
            }
            if (ev.type == SL_H1_EV_HEAD) {
                SL_BUG_ON(in_message);
                cur = d->check_head(d->arg, sl_h1_head(&p));
                in_message = true;
                body_seen = 0;
                if (!push(t, cur)) {
                    goto out;
                }
            } else if (ev.type == SL_H1_EV_BODY) {
                struct sl_test_trace_entry *last = &t->e[t->n - 1];

                SL_BUG_ON(!in_message || cur.body_kind == SL_H1_BODY_NONE || ev.body.n == 0);
                body_seen += ev.body.n;
                SL_BUG_ON(cur.body_kind == SL_H1_BODY_LENGTH && body_seen > cur.content_length);
                /* Consecutive body events fold into one entry: pieces differ by split. */
                if (last->type != SL_TEST_TRACE_BODY
                    && !push(t, (struct sl_test_trace_entry){ .type = SL_TEST_TRACE_BODY,
                                                              .hash = FNV_OFFSET })) {
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
                if (!push_type(t,
                               ev.type == SL_H1_EV_END ? SL_TEST_TRACE_END : SL_TEST_TRACE_UPGRADE,
                               0)) {
                    goto out;
                }
                if (ev.type == SL_H1_EV_UPGRADE) {
                    SL_BUG_ON(!cur.upgrade);
                    SL_BUG_ON(sl_h1_feed(&p, m + pos, n - pos, &ev) >= 0);
                    goto out;
                }
                /* As the proxy and the server do once a message has ended. */
                sl_arena_reset(&arena);
                if (d->next != NULL) {
                    d->next(d->arg, &p, &cur);
                }
            }
        }
    }
    /* The peer closes. */
    rc = sl_h1_eof(&p, &ev);
    if (rc < 0) {
        (void)push_type(t, SL_TEST_TRACE_EOF_ERROR, rc);
    } else if (ev.type == SL_H1_EV_END) {
        SL_BUG_ON(!in_message || cur.body_kind != SL_H1_BODY_CLOSE);
        (void)push_type(t, SL_TEST_TRACE_EOF_END, 0);
    } else {
        SL_BUG_ON(ev.type != SL_H1_EV_NONE);
        SL_BUG_ON(d->eof_between_messages && in_message);
        (void)push_type(t, SL_TEST_TRACE_EOF_NONE, 0);
    }
out:
    sl_h1_finish(&p);
    sl_arena_finish(&arena);
}

/* Both refusals, one of them the size limit (see `refusals_alike`). */
static bool same_refusal(const struct sl_test_trace_entry *x, const struct sl_test_trace_entry *y)
{
    return x->type == SL_TEST_TRACE_ERROR && y->type == SL_TEST_TRACE_ERROR
           && (x->status == SL_ETOOBIG || y->status == SL_ETOOBIG)
           && (x->status == SL_EINVAL || y->status == SL_EINVAL);
}

bool sl_test_trace_same(const struct sl_test_trace *a, const struct sl_test_trace *b,
                        bool refusals_alike)
{
    if (a->n != b->n) {
        return false;
    }
    for (size_t i = 0; i < a->n; i++) {
        const struct sl_test_trace_entry *x = &a->e[i];
        const struct sl_test_trace_entry *y = &b->e[i];

        if (refusals_alike && i + 1 == a->n && same_refusal(x, y)) {
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

void sl_test_h1_check_splits(const struct sl_test_h1_driver *d, const uint8_t *m, size_t n,
                             uint8_t seed)
{
    static struct sl_test_trace whole;
    static struct sl_test_trace split;
    struct sl_test_splitter sp = { SL_TEST_SPLIT_WHOLE, 0, SEEDED_PIECE_MAX };

    sl_test_h1_trace(d, m, n, &sp, &whole);
    for (unsigned mode = SL_TEST_SPLIT_BYTES; mode <= SL_TEST_SPLIT_SEEDED; mode++) {
        sp = (struct sl_test_splitter){ (enum sl_test_split)mode, seed, SEEDED_PIECE_MAX };
        sl_test_h1_trace(d, m, n, &sp, &split);
        SL_BUG_ON(!sl_test_trace_same(&whole, &split, d->refusals_alike));
    }
}
