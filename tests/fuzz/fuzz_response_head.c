/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_response_head.c - the proxy's response head path (sl_head_build_response() of
 * proxy/head.c, the code proxy/conn_forward.c runs on every upstream response head): parse the
 * upstream's responses with http/h1 as the proxy does, decide what the client gets, and re-parse
 * that.
 *
 * Input: byte 0 describes the request being answered (bit 0 HEAD, bit 1 a websocket upgrade,
 * bit 2 an HTTP/1.0 client, bit 3 the client's keep-alive, bit 4 the connection closes after
 * the exchange anyway); the rest is what the upstream sends: interim responses, then a final
 * one (and, on a kept-alive connection, more exchanges answering the same kind of request).
 *
 * Invariants, for every head the parser takes:
 *   - a 101 is refused exactly when no websocket was asked for; an interim response is skipped
 *     exactly for an HTTP/1.0 client; nothing is written then;
 *   - a relayed head re-parses with http/h1 (strict llhttp) as exactly one response head ending
 *     where the bytes end, HTTP/1.1, with the same status; its reason is plain (at most 128
 *     bytes of visible ASCII and spaces, no "sluice" in any case): the upstream's when that is
 *     plain, else the status's standard phrase; final exactly for >= 200 and 101;
 *   - no hop-by-hop header (Connection only as the proxy's own close / keep-alive / Upgrade,
 *     Upgrade only as `websocket` on a 101), no header the upstream listed in Connection unless
 *     the proxy writes it itself, the end-to-end headers in order and unchanged;
 *   - framing never ambiguous: at most one Content-Length, never with Transfer-Encoding, which
 *     is only ever `chunked`; a 1xx or 204 has neither; a response to HEAD and a 304 never get
 *     a Transfer-Encoding and keep exactly the upstream's Content-Length (if any); any other
 *     final response has a Content-Length equal to the upstream's length (0 without a body),
 *     or is chunked (exactly when the plan says so: a chunked or close-delimited upstream body,
 *     HTTP/1.1 client), or close-delimited (exactly when the plan says so: the same for an
 *     HTTP/1.0 client) and then says `Connection: close`;
 *   - the client's connection: a final head other than a 101 says `Connection: close` exactly
 *     when the plan closes, which it does whenever the caller asked, the client did not keep
 *     alive, the body is close-delimited, or a websocket upgrade was answered otherwise; the
 *     re-parsed keep-alive flag agrees; an HTTP/1.0 client kept alive is told so;
 *   - the head is at most the upstream's head plus the proxy's own additions (and a space after
 *     each header's colon).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/err.h"
#include "http/h1.h"
#include "http/server.h"
#include "proxy/head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_MAX (16u * 1024u)
#define HEADS_MAX 16

/* `s` is exactly `str`. */
/* At most 128 bytes of visible ASCII, spaces and tabs, without "sluice" in any letter case: a
 * reason phrase the proxy relays as the upstream sent it (written out here, not taken from
 * proxy/head.c, so that the oracle does not share a mistake). */
static bool reason_is_plain(const char *r)
{
    size_t n = strlen(r);

    if (n > 128) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)r[i];

        if (ch != ' ' && ch != '\t' && (ch <= 0x20 || ch >= 0x7f)) {
            return false;
        }
        if (i + 6 <= n && (r[i] | 0x20) == 's' && (r[i + 1] | 0x20) == 'l'
            && (r[i + 2] | 0x20) == 'u' && (r[i + 3] | 0x20) == 'i' && (r[i + 4] | 0x20) == 'c'
            && (r[i + 5] | 0x20) == 'e') {
            return false;
        }
    }
    return true;
}

static bool slice_is(struct sl_slice s, const char *str)
{
    return sl_slice_eq(s, sl_slice_str(str));
}

static bool slices_equal(struct sl_slice a, struct sl_slice b)
{
    return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

/* The headers the proxy writes itself on a response. */
static bool is_own(struct sl_slice name)
{
    return sl_h1_name_is(name, "connection") || sl_h1_name_is(name, "upgrade")
           || sl_h1_name_is(name, "content-length") || sl_h1_name_is(name, "transfer-encoding");
}

/* The end-to-end headers of `in` appear in `o`, in order and unchanged, and nothing else but the
 * proxy's own. */
static void check_end_to_end(const struct sl_h1_head *in, const struct sl_h1_head *o)
{
    size_t j = 0;

    for (size_t i = 0; i < in->n_headers; i++) {
        const struct sl_h1_header *f = &in->headers[i];

        if (sl_head_is_hop_by_hop(f->name) || sl_head_is_listed_in_connection(in, f->name)) {
            continue;
        }
        while (j < o->n_headers && is_own(o->headers[j].name)) {
            j++;
        }
        SL_BUG_ON(j >= o->n_headers);
        SL_BUG_ON(!slices_equal(o->headers[j].name, f->name));
        SL_BUG_ON(!slices_equal(o->headers[j].value, f->value));
        j++;
    }
    for (; j < o->n_headers; j++) {
        SL_BUG_ON(!is_own(o->headers[j].name));
    }
}

static void check_framing(const struct sl_h1_head *in, const struct sl_h1_head *o,
                          const struct sl_head_resp_ctx *ctx, const struct sl_head_resp_plan *plan)
{
    const struct sl_h1_header *cl = sl_h1_find(o, "content-length");
    const struct sl_h1_header *te = sl_h1_find(o, "transfer-encoding");
    const struct sl_h1_header *in_cl = sl_h1_find(in, "content-length");
    char want[32];

    SL_BUG_ON(sl_h1_count(o, "content-length") > 1 || sl_h1_count(o, "transfer-encoding") > 1);
    SL_BUG_ON(cl != NULL && te != NULL);
    SL_BUG_ON(te != NULL && !slice_is(te->value, "chunked"));
    if (in->status < 200 || in->status == 204) {
        SL_BUG_ON(cl != NULL || te != NULL || plan->chunked || plan->close_delimited);
        return;
    }
    if (ctx->is_head || in->status == 304) {
        SL_BUG_ON(te != NULL || plan->chunked || plan->close_delimited);
        SL_BUG_ON((cl != NULL) != (in_cl != NULL));
        SL_BUG_ON(cl != NULL && !slices_equal(cl->value, in_cl->value));
        SL_BUG_ON(o->body != SL_H1_BODY_NONE);
        return;
    }
    switch (in->body) {
    case SL_H1_BODY_NONE:
    case SL_H1_BODY_LENGTH:
        SL_BUG_ON(cl == NULL || plan->chunked || plan->close_delimited);
        SL_BUG_ON(snprintf(want, sizeof(want), "%llu",
                           (unsigned long long)(in->body == SL_H1_BODY_LENGTH ? in->content_length
                                                                              : 0))
                  <= 0);
        SL_BUG_ON(!slice_is(cl->value, want));
        SL_BUG_ON(o->body == SL_H1_BODY_CHUNKED || o->body == SL_H1_BODY_CLOSE);
        break;
    case SL_H1_BODY_CHUNKED:
    case SL_H1_BODY_CLOSE:
        SL_BUG_ON(cl != NULL);
        SL_BUG_ON(plan->chunked == ctx->client_http10
                  || plan->close_delimited != ctx->client_http10);
        SL_BUG_ON((te != NULL) != plan->chunked);
        SL_BUG_ON(o->body != (plan->chunked ? SL_H1_BODY_CHUNKED : SL_H1_BODY_CLOSE));
        break;
    }
}

static void check_connection(const struct sl_h1_head *in, const struct sl_h1_head *o,
                             const struct sl_head_resp_ctx *ctx,
                             const struct sl_head_resp_plan *plan)
{
    const struct sl_h1_header *conn = sl_h1_find(o, "connection");
    const struct sl_h1_header *up = sl_h1_find(o, "upgrade");
    bool must_close = ctx->close_after || (ctx->websocket && in->status != 101);

    SL_BUG_ON(sl_h1_count(o, "connection") > 1 || sl_h1_count(o, "upgrade") > 1);
    SL_BUG_ON(must_close && !plan->close_after);
    if (in->status == 101) {
        SL_BUG_ON(conn == NULL || !slice_is(conn->value, "Upgrade"));
        SL_BUG_ON(up == NULL || !slice_is(up->value, "websocket"));
        SL_BUG_ON(!o->upgrade);
        return;
    }
    SL_BUG_ON(up != NULL);
    if (in->status < 200) {
        SL_BUG_ON(conn != NULL);
        return;
    }
    must_close = must_close || !ctx->client_keep_alive || plan->close_delimited;
    SL_BUG_ON(plan->close_after != must_close);
    if (plan->close_after) {
        SL_BUG_ON(conn == NULL || !slice_is(conn->value, "close"));
        SL_BUG_ON(o->keep_alive);
    } else {
        SL_BUG_ON(!o->keep_alive);
        SL_BUG_ON(ctx->client_http10 ? conn == NULL || !slice_is(conn->value, "keep-alive")
                                     : conn != NULL);
    }
}

/* Runs one upstream head `in` through the proxy's response path and checks what comes out. */
static void run(const struct sl_h1_head *in, size_t in_bytes, const struct sl_head_resp_ctx *ctx)
{
    static const struct sl_h1_limits relaxed = { 2 * INPUT_MAX, 256 + 8 };
    static const char *const never[] = {
        "proxy-connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
        "trailer",          "host"
    };
    struct sl_head_resp_plan plan;
    struct sl_buf out;
    struct sl_arena arena;
    struct sl_h1 p;
    struct sl_h1_event ev;
    const struct sl_h1_head *o;
    int used;

    sl_buf_init(&out, 4 * INPUT_MAX);
    SL_BUG_ON(sl_head_build_response(&out, in, ctx, &plan) != 0);
    SL_BUG_ON(plan.close_after < ctx->close_after);
    if (in->status == 101 && !ctx->websocket) {
        SL_BUG_ON(plan.verdict != SL_HEAD_RESP_REFUSE || out.len != 0);
        goto done;
    }
    if (in->status < 200 && in->status != 101 && ctx->client_http10) {
        SL_BUG_ON(plan.verdict != SL_HEAD_RESP_SKIP || out.len != 0);
        goto done;
    }
    SL_BUG_ON(plan.verdict != SL_HEAD_RESP_RELAY);
    SL_BUG_ON(plan.final != (in->status >= 200 || in->status == 101));
    /* `Name:value` comes out as `Name: value`. */
    SL_BUG_ON(out.len > in_bytes + 2 * in->n_headers + 128);

    sl_arena_init(&arena, 4096, 1 << 22);
    sl_h1_init(&p, SL_H1_RESPONSE, &relaxed, &arena);
    if (ctx->is_head) {
        sl_h1_expect_no_body(&p);
    }
    used = sl_h1_feed(&p, out.p, out.len, &ev);
    SL_BUG_ON(used < 0 || ev.type != SL_H1_EV_HEAD || (size_t)used != out.len);
    o = sl_h1_head(&p);
    SL_BUG_ON(o->status != in->status || !reason_is_plain(o->reason));
    SL_BUG_ON(reason_is_plain(in->reason) ? strcmp(o->reason, in->reason) != 0
                                          : strcmp(o->reason, sl_http_reason(in->status)) != 0);
    SL_BUG_ON(o->version_major != 1 || o->version_minor != 1);
    for (size_t i = 0; i < SL_ARRAY_LEN(never); i++) {
        SL_BUG_ON(sl_h1_count(o, never[i]) != 0);
    }
    check_end_to_end(in, o);
    check_framing(in, o, ctx, &plan);
    check_connection(in, o, ctx, &plan);
    if (in->status == 101) {
        used = sl_h1_feed(&p, NULL, 0, &ev);
        SL_BUG_ON(used != 0 || ev.type != SL_H1_EV_UPGRADE);
    }
    sl_h1_finish(&p);
    sl_arena_finish(&arena);
done:
    sl_buf_finish(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sl_head_resp_ctx ctx;
    struct sl_arena arena;
    struct sl_h1 p;
    size_t pos = 1;
    size_t head_start = 1;
    int heads = 0;

    if (size < 1 || size - 1 > INPUT_MAX) {
        return 0;
    }
    ctx = (struct sl_head_resp_ctx){ .is_head = (data[0] & 1) != 0,
                                     .websocket = (data[0] & 2) != 0,
                                     .client_http10 = (data[0] & 4) != 0,
                                     .client_keep_alive = (data[0] & 8) != 0,
                                     .close_after = (data[0] & 16) != 0 };
    sl_arena_init(&arena, 4096, 1 << 22);
    sl_h1_init(&p, SL_H1_RESPONSE, NULL, &arena);
    if (ctx.is_head) {
        sl_h1_expect_no_body(&p);
    }
    while (heads < HEADS_MAX) {
        struct sl_h1_event ev;
        int used = sl_h1_feed(&p, data + pos, size - pos, &ev);

        if (used < 0) {
            break;
        }
        pos += (size_t)used;
        if (ev.type == SL_H1_EV_NONE || ev.type == SL_H1_EV_UPGRADE) {
            break;
        }
        if (ev.type == SL_H1_EV_HEAD) {
            const struct sl_h1_head *h = sl_h1_head(&p);

            run(h, pos - head_start, &ctx);
            heads++;
        } else if (ev.type == SL_H1_EV_END) {
            head_start = pos;
            /* The next exchange on this upstream answers the same kind of request; a HEAD
             * request's no-body holds once per final response, as proxy/conn_forward.c sets it. */
            if (ctx.is_head && sl_h1_head(&p)->status >= 200) {
                sl_h1_expect_no_body(&p);
            }
        }
    }
    sl_h1_finish(&p);
    sl_arena_finish(&arena);
    return 0;
}
