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
 * The trace and the framing checks are tests/support/h1trace's (shared with fuzz_server); the
 * head checks and the HEAD exchanges are this target's.
 */
#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "http/h1.h"
#include "tests/support/h1trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_MAX 16384
#define EXCHANGES 8

/* Which exchanges answer a HEAD request (input byte 1) and where the stream is. */
struct exchanges {
    uint8_t head_mask;
    size_t exchange;
    bool head_request;
};

/* The head invariants of the file comment; returns the trace entry. */
static struct sl_test_trace_entry check_head(void *arg, const struct sl_h1_head *h)
{
    const struct exchanges *x = arg;
    const struct sl_h1_header *cl = sl_h1_find(h, "content-length");
    const struct sl_h1_header *te = sl_h1_find(h, "transfer-encoding");
    struct sl_test_trace_entry e = { .type = SL_TEST_TRACE_HEAD,
                                     .status = h->status,
                                     .body_kind = (int)h->body,
                                     .keep_alive = h->keep_alive,
                                     .upgrade = h->upgrade };

    SL_BUG_ON(h->status < 100 || h->status > 599);
    sl_test_h1_check_framing(h);
    if (x->head_request || h->status < 200 || h->status == 204 || h->status == 304) {
        SL_BUG_ON(h->body != SL_H1_BODY_NONE);
    }
    if (h->body == SL_H1_BODY_LENGTH) {
        e.content_length = h->content_length;
    }
    SL_BUG_ON(h->body == SL_H1_BODY_CLOSE
              && (h->keep_alive || cl != NULL || te != NULL || h->status == 101));
    SL_BUG_ON((h->status == 101) != h->upgrade);
    return e;
}

/* Before the first response and after each one: a final response ends its exchange, and the
 * next response answers the next request (a HEAD or not, as byte 1 says). */
static void next_exchange(void *arg, struct sl_h1 *p, const struct sl_test_trace_entry *done)
{
    struct exchanges *x = arg;

    if (done == NULL) {
        x->exchange = 0;
    } else if (done->status >= 200) {
        x->exchange++;
    } else {
        return;
    }
    x->head_request = x->exchange < EXCHANGES && (x->head_mask >> x->exchange & 1) != 0;
    if (x->head_request) {
        sl_h1_expect_no_body(p);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct exchanges x = { 0 };
    const struct sl_test_h1_driver d = {
        .kind = SL_H1_RESPONSE,
        .limits = NULL,
        .arena_chunk_bytes = 1024,
        .arena_cap_bytes = 1 << 20,
        .check_head = check_head,
        .next = next_exchange,
        .arg = &x,
        .eof_between_messages = false,
        .refusals_alike = false,
    };

    if (size < 2 || size - 2 > INPUT_MAX) {
        return 0;
    }
    x.head_mask = data[1];
    sl_test_h1_check_splits(&d, data + 2, size - 2, data[0]);
    return 0;
}
