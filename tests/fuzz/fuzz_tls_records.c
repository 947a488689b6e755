/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_tls_records.c - the record readers a passthrough tunnel's relay runs on bytes
 * both peers send while the hellos are guarded (proxy/tls.h, "Passthrough tunnels"): the span of
 * a ClientHello's records (sl_tls_hello_span, on the client's bytes, hostile) and the watch for a
 * HelloRetryRequest (sl_tls_watch_server, on the server's bytes, fed as they pass).
 *
 * Input: byte 0 seeds the piece sizes; the rest is the byte stream, read by both.
 *
 * Invariants, not just "no crash":
 *   - over growing prefixes the span reader needs more (0) until it has a span, the same for
 *     every longer prefix, within the prefix and ending where a handshake record ends, or a
 *     refusal (SL_EINVAL), kept for every longer prefix;
 *   - a record header is read the same from any prefix of at least 5 bytes, and never refused
 *     from fewer than 2;
 *   - the watch's verdict is the same whether the stream is fed whole, one byte at a time, or in
 *     pieces of seed-derived sizes, and it reads nothing once it has one (a verdict from a
 *     prefix is the verdict of the whole);
 *   - HRR only for a first handshake message of type server_hello(2) whose random is
 *     SHA-256("HelloRetryRequest"), checked with a reader written here for whole records.
 */
#include <stdint.h>
#include <string.h>

#include "base/err.h"
#include "proxy/tls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t hrr[32] = {
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
};

static void check_span(const uint8_t *p, size_t n)
{
    /* Over growing prefixes (every length up to 64, then sparser, and n): 0, then either 1 with
     * one span for good, or SL_EINVAL for good. */
    int seen = 0;
    size_t first_span = 0;

    for (size_t m = 0;; m += 1 + (m >> 6)) {
        size_t span = 0;
        int rc;

        m = m < n ? m : n;
        rc = sl_tls_hello_span(p, m, &span);
        SL_BUG_ON(rc != 0 && rc != 1 && rc != SL_EINVAL);
        SL_BUG_ON(seen != 0 && rc != seen);
        SL_BUG_ON(rc == 1 && seen == 1 && span != first_span);
        if (rc == 1 && seen == 0) {
            uint8_t type;
            size_t len;

            SL_BUG_ON(span < 5 + 4 || span > m);
            /* Whole handshake records, the last ending exactly at the span. */
            for (size_t off = 0; off < span;) {
                SL_BUG_ON(sl_tls_record_head(p + off, span - off, &type, &len) != 1);
                SL_BUG_ON(type != SL_TLS_CT_HANDSHAKE || len == 0);
                off += 5 + len;
                SL_BUG_ON(off > span);
            }
            first_span = span;
        }
        seen = rc;
        if (m == n) {
            break;
        }
    }
}

static void check_head(const uint8_t *p, size_t n)
{
    uint8_t type = 0;
    uint8_t type2 = 0;
    size_t len = 0;
    size_t len2 = 0;
    int rc = sl_tls_record_head(p, n, &type, &len);

    if (n < 2) {
        SL_BUG_ON(rc != 0);
    }
    if (n >= 5) {
        SL_BUG_ON(rc == 0);
        SL_BUG_ON(sl_tls_record_head(p, 5, &type2, &len2) != rc);
        SL_BUG_ON(rc == 1 && (type2 != type || len2 != len));
    }
}

/* The reference: whole records only, the first handshake message gathered across records. */
static enum sl_tls_watch_verdict reference(const uint8_t *p, size_t n)
{
    uint8_t msg[38];
    size_t got = 0;

    for (size_t off = 0; off + 2 <= n;) {
        size_t len;

        if (p[off + 1] != 3) {
            return SL_TLS_WATCH_OTHER;
        }
        if (off + 5 > n) {
            break;
        }
        len = ((size_t)p[off + 3] << 8) | p[off + 4];
        if (len > 16384 + 2048) {
            return SL_TLS_WATCH_OTHER;
        }
        if (p[off] != SL_TLS_CT_HANDSHAKE) {
            if (got > 0) {
                return SL_TLS_WATCH_OTHER;
            }
            off += 5 + len;
            continue;
        }
        for (size_t i = 0; i < len && off + 5 + i < n && got < sizeof(msg); i++) {
            msg[got++] = p[off + 5 + i];
        }
        if (got >= 1 && msg[0] != 2) {
            return SL_TLS_WATCH_OTHER;
        }
        if (got >= 4 && (((size_t)msg[1] << 16) | ((size_t)msg[2] << 8) | msg[3]) < 34) {
            return SL_TLS_WATCH_OTHER;
        }
        if (got == sizeof(msg)) {
            return memcmp(msg + 6, hrr, sizeof(hrr)) == 0 ? SL_TLS_WATCH_HRR : SL_TLS_WATCH_OTHER;
        }
        off += 5 + len;
    }
    return SL_TLS_WATCH_MORE;
}

/* Feeds `p` in pieces: 0 whole, 1 byte by byte, else seed-derived sizes. Stops at a verdict. */
static enum sl_tls_watch_verdict watch(const uint8_t *p, size_t n, unsigned mode, uint8_t seed)
{
    struct sl_tls_server_watch w;
    enum sl_tls_watch_verdict v = SL_TLS_WATCH_MORE;
    uint32_t x = seed * 2654435761u + 1u;

    memset(&w, 0, sizeof(w));
    for (size_t off = 0; off < n && v == SL_TLS_WATCH_MORE;) {
        size_t k = n - off;

        if (mode == 1) {
            k = 1;
        } else if (mode == 2) {
            x = x * 1103515245u + 12345u;
            k = 1 + (x >> 16) % 23;
            k = k < n - off ? k : n - off;
        }
        v = sl_tls_watch_server(&w, p + off, k);
        off += k;
    }
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum sl_tls_watch_verdict whole;

    if (size < 1) {
        return 0;
    }
    check_span(data + 1, size - 1);
    check_head(data + 1, size - 1);
    whole = watch(data + 1, size - 1, 0, data[0]);
    SL_BUG_ON(watch(data + 1, size - 1, 1, data[0]) != whole);
    SL_BUG_ON(watch(data + 1, size - 1, 2, data[0]) != whole);
    SL_BUG_ON(reference(data + 1, size - 1) != whole);
    return 0;
}
