/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_chunked.c - the chunked decoder of http/h1 (through its pull-event API) and
 * the chunked re-encoding the proxy applies to what it decoded.
 *
 * Input: byte 0 seeds the split points, byte 1 picks the direction (bit 0: a response) and the
 * largest piece (bits 1-6); the rest is the chunked body that follows a fixed head
 * (`POST / HTTP/1.1` or `HTTP/1.1 200 OK`, with `Transfer-Encoding: chunked`).
 *
 * Invariants, not just "no crash":
 *   - the outcome (message end and where, error and which code, or waiting for more) and the
 *     decoded body bytes are the same whether the message is fed whole, one byte at a time, or
 *     in pieces of seed-derived sizes (one exception: an oversized trailer or chunk extension
 *     that also has a grammar error may give SL_ETOOBIG or SL_EINVAL depending on the pieces);
 *   - chunk extensions are capped (SL_H1_CHUNK_EXT_LINE_MAX per chunk-size line): a body whose
 *     first line is a size, ';' and a name of more letters than that is SL_ETOOBIG, whole and
 *     in pieces;
 *   - against a reference decoder written from RFC 9112 §7.1 for the plain grammar (hex size,
 *     CRLF, data, CRLF; last chunk; `name: value` trailers, fewer than the line limit): a body
 *     in that grammar is accepted,
 *     ends exactly after its last CRLF and decodes to the reference's bytes (trailers dropped),
 *     a truncated one waits for more with the bytes so far delivered, and a size line not
 *     starting with a hex digit, a size beyond 64 bits, or chunk data not followed by CRLF is
 *     refused (SL_EINVAL); chunk extensions and odd whitespace are left to llhttp, checked only
 *     for consistency;
 *   - round trip: the decoded body re-encoded with the framing proxy/conn_forward.c writes
 *     (sl_h1_chunk_header(), data, SL_H1_CHUNK_END, then SL_H1_CHUNK_LAST), one chunk per body
 *     event as the proxy does and as a single chunk, decodes back to the same bytes and ends
 *     exactly at the end of the encoding;
 *   - each chunk header is the size in lower-case hex without leading zeros, then CRLF, never
 *     longer than SL_H1_CHUNK_HEADER_MAX, and is refused (0) when the room is one byte short.
 */
#include <stdint.h>
#include <string.h>

#include "base/arena.h"
#include "base/err.h"
#include "http/h1.h"
#include "tests/support/h1trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_MAX   8192
#define MESSAGE_MAX (INPUT_MAX + 128)
/* Trailer bytes the reference still calls plain; far below the head limit used here. */
#define TRAILER_MAX 1000

static const char req_head[] = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
static const char resp_head[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

static const struct sl_h1_limits limits = { 4096, 32 };

enum outcome {
    O_END,
    O_ERROR,
    O_WAIT,
    O_UNKNOWN
};

struct result {
    enum outcome outcome;
    /* O_END: bytes of the message consumed up to the end; O_ERROR: the code. */
    size_t end;
    int rc;
    uint8_t body[MESSAGE_MAX];
    size_t body_n;
    /* Length of each body event, for the re-encoding (at most one per input byte). */
    size_t events[MESSAGE_MAX];
    size_t n_events;
};

static int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

static bool tchar(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
           || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Header names llhttp gives meaning to wherever they appear; in a trailer, left to llhttp.
 * Prefixes count too when the name may still be arriving (`complete` false). */
static bool framing_name(const uint8_t *p, size_t n, bool complete)
{
    static const char *const names[] = { "content-length",   "transfer-encoding", "connection",
                                         "proxy-connection", "upgrade",           "keep-alive" };

    for (size_t k = 0; k < SL_ARRAY_LEN(names); k++) {
        size_t kn = strlen(names[k]);
        size_t i = 0;

        while (i < n && i < kn && (p[i] | 0x20) == (uint8_t)names[k][i]) {
            i++;
        }
        if (i == n && (!complete || i == kn)) {
            return true;
        }
    }
    return false;
}

/* The reference decoder of the file comment, over the body `b` alone. O_END's `end` counts
 * from the start of `b`. */
static void reference(const uint8_t *b, size_t n, struct result *r)
{
    size_t i = 0;
    size_t trailer = 0;
    size_t fields = 0;

    r->body_n = 0;
    r->rc = SL_EINVAL;
    for (;;) {
        uint64_t size = 0;

        if (i == n) {
            r->outcome = O_WAIT;
            return;
        }
        if (hexval(b[i]) < 0) {
            r->outcome = O_ERROR;
            return;
        }
        while (i < n && hexval(b[i]) >= 0) {
            if (size > UINT64_MAX >> 4) {
                r->outcome = O_ERROR;
                return;
            }
            size = size << 4 | (uint64_t)hexval(b[i]);
            i++;
        }
        if (i == n) {
            r->outcome = O_WAIT;
            return;
        }
        if (b[i] != '\r' || (i + 1 < n && b[i + 1] != '\n')) {
            r->outcome = O_UNKNOWN; /* extensions, whitespace, a lone CR */
            return;
        }
        if (i + 1 == n) {
            r->outcome = O_WAIT;
            return;
        }
        i += 2;
        if (size == 0) {
            break;
        }
        if (n - i < size) {
            memcpy(r->body + r->body_n, b + i, n - i);
            r->body_n += n - i;
            r->outcome = O_WAIT;
            return;
        }
        memcpy(r->body + r->body_n, b + i, (size_t)size);
        r->body_n += (size_t)size;
        i += (size_t)size;
        if (i == n || (b[i] == '\r' && i + 1 == n)) {
            r->outcome = O_WAIT;
            return;
        }
        if (b[i] != '\r' || b[i + 1] != '\n') {
            r->outcome = O_ERROR;
            return;
        }
        i += 2;
    }
    /* Trailers: `token ":" *SP *VCHAR CRLF`, then an empty line. */
    for (;;) {
        size_t start = i;

        if (i == n) {
            r->outcome = O_WAIT;
            return;
        }
        if (b[i] == '\r') {
            if (i + 1 == n) {
                r->outcome = O_WAIT;
                return;
            }
            r->outcome = b[i + 1] == '\n' ? O_END : O_UNKNOWN;
            r->end = i + 2;
            return;
        }
        while (i < n && tchar(b[i])) {
            i++;
        }
        if ((i < n && (i == start || b[i] != ':')) || framing_name(b + start, i - start, i < n)) {
            r->outcome = O_UNKNOWN;
            return;
        }
        i += i < n;
        while (i < n && b[i] == ' ') {
            i++;
        }
        while (i < n && b[i] > 0x20 && b[i] < 0x7f) {
            i++;
        }
        if (i < n && b[i] != '\r') {
            r->outcome = O_UNKNOWN;
            return;
        }
        if (i + 1 < n && b[i + 1] != '\n') {
            r->outcome = O_UNKNOWN;
            return;
        }
        trailer += i - start + 2;
        /* The parser counts trailer fields with the head's (limits.headers_max lines in all;
         * the heads above have one or two): past that it refuses, left unchecked here. */
        if (trailer > TRAILER_MAX || ++fields > limits.headers_max - 2) {
            r->outcome = O_UNKNOWN;
            return;
        }
        if (i + 1 >= n) {
            r->outcome = O_WAIT;
            return;
        }
        i += 2;
    }
}

/* Feeds `m` (head + body) to a fresh parser in pieces; fills `r` (O_END's `end` counts from the
 * start of `m`). */
static void run(enum sl_h1_kind kind, const uint8_t *m, size_t n, struct sl_test_splitter *sp,
                struct result *r)
{
    struct sl_arena arena;
    struct sl_h1 p;
    size_t pos = 0;
    size_t heads = 0;

    r->body_n = 0;
    r->n_events = 0;
    r->rc = 0;
    r->outcome = O_WAIT;
    sl_arena_init(&arena, 1024, 1 << 20);
    sl_h1_init(&p, kind, &limits, &arena);
    while (pos < n) {
        size_t piece_end = pos + sl_test_split_next(sp, n - pos);
        bool done = false;

        while (!done) {
            struct sl_h1_event ev;
            size_t len = piece_end - pos;
            int used = sl_h1_feed(&p, m + pos, len, &ev);

            if (used < 0) {
                r->outcome = O_ERROR;
                r->rc = used;
                goto out;
            }
            SL_BUG_ON((size_t)used > len);
            pos += (size_t)used;
            switch (ev.type) {
            case SL_H1_EV_NONE:
                SL_BUG_ON(pos != piece_end);
                done = true;
                break;
            case SL_H1_EV_HEAD:
                heads++;
                SL_BUG_ON(heads != 1 || sl_h1_head(&p)->body != SL_H1_BODY_CHUNKED);
                break;
            case SL_H1_EV_BODY:
                SL_BUG_ON(heads != 1 || ev.body.n == 0);
                SL_BUG_ON(ev.body.p < m + pos - (size_t)used || ev.body.p + ev.body.n > m + pos);
                memcpy(r->body + r->body_n, ev.body.p, ev.body.n);
                r->body_n += ev.body.n;
                r->events[r->n_events++] = ev.body.n;
                break;
            case SL_H1_EV_END:
                SL_BUG_ON(heads != 1);
                r->outcome = O_END;
                r->end = pos;
                goto out;
            case SL_H1_EV_UPGRADE:
                SL_BUG_ON(true);
                break;
            }
        }
    }
out:
    if (r->outcome == O_WAIT) {
        struct sl_h1_event ev;

        /* The peer closing now truncates the message. */
        SL_BUG_ON(sl_h1_eof(&p, &ev) != SL_EINVAL);
    }
    sl_h1_finish(&p);
    sl_arena_finish(&arena);
}

static bool same_result(const struct result *a, const struct result *b)
{
    if (a->outcome != b->outcome || a->body_n != b->body_n
        || memcmp(a->body, b->body, a->body_n) != 0) {
        return false;
    }
    if (a->outcome == O_ERROR && a->rc != b->rc) {
        /* A grammar error past the trailer or chunk extension limit is seen first when llhttp
         * gets the whole span at once (it reports a span only when the span ends), the limit
         * first when it arrives in pieces: both refuse the message, as 400 or 431. */
        return a->rc == SL_ETOOBIG || b->rc == SL_ETOOBIG;
    }
    return a->outcome != O_END || a->end == b->end;
}

/* Checks the `w` bytes sl_h1_chunk_header() wrote at `h` for a chunk of `len` bytes: the
 * shortest lower-case hex spelling of `len`, CRLF, and nothing written into a buffer one byte
 * too small. */
static void check_chunk_header(const uint8_t *h, size_t w, uint64_t len)
{
    char small[SL_H1_CHUNK_HEADER_MAX];
    uint64_t v = 0;

    SL_BUG_ON(len == 0 || w < 3 || w > SL_H1_CHUNK_HEADER_MAX);
    SL_BUG_ON(h[0] == '0' || h[w - 2] != '\r' || h[w - 1] != '\n');
    for (size_t i = 0; i + 2 < w; i++) {
        SL_BUG_ON(hexval(h[i]) < 0 || (h[i] >= 'A' && h[i] <= 'F') || v > UINT64_MAX >> 4);
        v = v << 4 | (uint64_t)hexval(h[i]);
    }
    SL_BUG_ON(v != len);
    SL_BUG_ON(sl_h1_chunk_header(small, w - 1, len) != 0);
}

/* Re-encodes `r`'s body (per event, as proxy/conn_forward.c does, or as one chunk) after `head` and
 * checks that it decodes back to the same bytes, ending exactly at the end. */
static void round_trip(enum sl_h1_kind kind, const char *head, const struct result *r,
                       bool one_chunk)
{
    static uint8_t enc[MESSAGE_MAX * 4 + 256];
    static struct result again;
    struct sl_test_splitter whole = { SL_TEST_SPLIT_WHOLE, 0, 1 };
    size_t hn = strlen(head);
    size_t n = hn;
    size_t off = 0;

    memcpy(enc, head, hn);
    for (size_t e = 0; e < (one_chunk ? (r->body_n > 0 ? 1u : 0u) : r->n_events); e++) {
        size_t len = one_chunk ? r->body_n : r->events[e];
        size_t w = sl_h1_chunk_header((char *)enc + n, SL_H1_CHUNK_HEADER_MAX, len);

        check_chunk_header(enc + n, w, len);
        n += w;
        memcpy(enc + n, r->body + off, len);
        n += len;
        off += len;
        memcpy(enc + n, SL_H1_CHUNK_END, SL_H1_CHUNK_END_LEN);
        n += SL_H1_CHUNK_END_LEN;
    }
    memcpy(enc + n, SL_H1_CHUNK_LAST, SL_H1_CHUNK_LAST_LEN);
    n += SL_H1_CHUNK_LAST_LEN;
    run(kind, enc, n, &whole, &again);
    SL_BUG_ON(again.outcome != O_END || again.end != n);
    SL_BUG_ON(again.body_n != r->body_n || memcmp(again.body, r->body, r->body_n) != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t m[MESSAGE_MAX];
    static struct result whole;
    static struct result split;
    static struct result ref;
    enum sl_h1_kind kind;
    const char *head;
    size_t hn;
    size_t n;
    struct sl_test_splitter sp;

    if (size < 2 || size - 2 > INPUT_MAX) {
        return 0;
    }
    kind = (data[1] & 1) != 0 ? SL_H1_RESPONSE : SL_H1_REQUEST;
    head = kind == SL_H1_RESPONSE ? resp_head : req_head;
    hn = strlen(head);
    memcpy(m, head, hn);
    memcpy(m + hn, data + 2, size - 2);
    n = hn + size - 2;

    if (size >= 10) {
        /* The framing of any 64-bit size, not only those a body here can reach. */
        uint8_t h[SL_H1_CHUNK_HEADER_MAX];
        uint64_t len = 0;

        for (size_t i = 2; i < 10; i++) {
            len = len << 8 | data[i];
        }
        len >>= data[0] & 63;
        if (len != 0) {
            check_chunk_header(h, sl_h1_chunk_header((char *)h, sizeof(h), len), len);
        }
    }

    sp = (struct sl_test_splitter){ SL_TEST_SPLIT_WHOLE, 0, 1 };
    run(kind, m, n, &sp, &whole);
    for (unsigned mode = SL_TEST_SPLIT_BYTES; mode <= SL_TEST_SPLIT_SEEDED; mode++) {
        sp = (struct sl_test_splitter){ (enum sl_test_split)mode, data[0],
                                        (size_t)(data[1] >> 1) + 1 };
        run(kind, m, n, &sp, &split);
        SL_BUG_ON(!same_result(&whole, &split));
    }
    SL_BUG_ON(whole.outcome == O_ERROR && whole.rc != SL_EINVAL && whole.rc != SL_ETOOBIG);

    {
        /* A first size line `HEX;name` with a name longer than the cap: refused as too large. */
        const uint8_t *b = m + hn;
        size_t bn = n - hn;
        size_t i = 0;
        size_t letters = 0;

        while (i < bn && hexval(b[i]) >= 0) {
            i++;
        }
        if (i > 0 && i <= 15 && i < bn && b[i] == ';') {
            for (i++; i < bn && b[i] >= 'a' && b[i] <= 'z'; i++) {
                letters++;
            }
            if (letters > SL_H1_CHUNK_EXT_LINE_MAX) {
                SL_BUG_ON(whole.outcome != O_ERROR || whole.rc != SL_ETOOBIG);
            }
        }
    }
    reference(m + hn, n - hn, &ref);
    switch (ref.outcome) {
    case O_END:
        SL_BUG_ON(whole.outcome != O_END || whole.end != hn + ref.end);
        SL_BUG_ON(whole.body_n != ref.body_n || memcmp(whole.body, ref.body, ref.body_n) != 0);
        break;
    case O_WAIT:
        SL_BUG_ON(whole.outcome != O_WAIT);
        SL_BUG_ON(whole.body_n != ref.body_n || memcmp(whole.body, ref.body, ref.body_n) != 0);
        break;
    case O_ERROR:
        SL_BUG_ON(whole.outcome != O_ERROR || whole.rc != SL_EINVAL);
        break;
    case O_UNKNOWN:
        break;
    }
    if (whole.outcome == O_END) {
        round_trip(kind, head, &whole, false);
        round_trip(kind, head, &whole, true);
    }
    return 0;
}
