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
 * The trace and the framing checks are tests/support/h1trace's (shared with fuzz_response); the
 * head checks and the server's limits are this target's.
 */
#include <stdint.h>
#include <string.h>

#include "base/err.h"
#include "http/h1.h"
#include "tests/support/h1trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_MAX 16384

/* http/server_int.h: SL__HTTP_ARENA_CHUNK_BYTES, and the cap resolve_config() computes
 * (http/server_listen.c). */
#define SERVER_ARENA_CHUNK 4096u

/* The head invariants of the file comment; returns the trace entry. */
static struct sl_test_trace_entry check_head(void *arg, const struct sl_h1_head *h)
{
    const struct sl_h1_limits *lim = arg;
    const struct sl_h1_header *cl = sl_h1_find(h, "content-length");
    const struct sl_h1_header *te = sl_h1_find(h, "transfer-encoding");
    const struct sl_h1_header *expect = NULL;
    struct sl_test_trace_entry e = { .type = SL_TEST_TRACE_HEAD,
                                     .body_kind = (int)h->body,
                                     .keep_alive = h->keep_alive,
                                     .upgrade = h->upgrade,
                                     .expect_continue = h->expect_continue };
    size_t tn = strlen(h->target);

    SL_BUG_ON(h->method == NULL || h->method[0] == '\0' || tn == 0);
    for (size_t i = 0; i < tn; i++) {
        SL_BUG_ON((uint8_t)h->target[i] <= 0x20 || (uint8_t)h->target[i] >= 0x7f);
    }
    e.status = (int)(strlen(h->method) * 1000003u + tn) & 0x7fffffff;
    sl_test_h1_check_framing(h);
    SL_BUG_ON(h->n_headers > lim->headers_max);
    SL_BUG_ON(sl_test_h1_count(h, "host") > 1);
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
    /* A request body is never close-delimited. */
    SL_BUG_ON(h->body == SL_H1_BODY_CLOSE);
    if (h->body == SL_H1_BODY_LENGTH) {
        e.content_length = h->content_length;
    }
    SL_BUG_ON(h->body == SL_H1_BODY_NONE
              && (te != NULL || (cl != NULL && sl_test_decimal(cl->value) != 0 && !h->upgrade)));
    return e;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sl_h1_limits lim = sl_h1_default_limits;
    struct sl_test_h1_driver d = {
        .kind = SL_H1_REQUEST,
        .limits = &lim,
        .arena_chunk_bytes = SERVER_ARENA_CHUNK,
        .check_head = check_head,
        .next = NULL,
        .arg = &lim,
        .eof_between_messages = true,
        .refusals_alike = true,
    };

    if (size < 4 || size - 4 > INPUT_MAX) {
        return 0;
    }
    if ((data[1] & 1) != 0) {
        lim.head_max_bytes = 256 + 64 * (size_t)data[2];
        lim.headers_max = 1 + (size_t)data[3] % 300;
    }
    /* The server's own arena bound for these limits. */
    d.arena_cap_bytes = 3 * lim.head_max_bytes + 4 * lim.headers_max * sizeof(struct sl_h1_header)
                        + 4 * SERVER_ARENA_CHUNK;
    sl_test_h1_check_splits(&d, data + 4, size - 4, data[0]);
    return 0;
}
