/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_dnsd.c - the DNS responder's query reader and answer writer (proxy/dnsd.h)
 * on hostile datagrams, as a sandbox sends them to --dns-listen over UDP or TCP.
 *
 * Invariants, not just "no crash": no answer only for fewer than 12 bytes or a response (QR
 * set); an answer is 12 to 512 bytes, echoes the id, the opcode and RD, sets QR, AA and RA,
 * carries the rcode the reader chose and counts exactly what it holds; the question it echoes
 * is the query's own bytes, whose name is whole (a zero label within 255 bytes, no pointer),
 * written as printable text of at most 253 characters; an A answer (A, class IN, NOERROR only)
 * ends with one record pointing at the question, TTL 5, the listener's address; and the
 * answer's question, read again as a query, reads the same (name, type, class, rcode).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/err.h"
#include "proxy/dnsd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

/* The name at the start of `q`, `n` bytes: its wire length, 0 when malformed. */
static size_t name_wire(const uint8_t *q, size_t n)
{
    size_t off = 0;

    while (off < n && q[off] != 0) {
        SL_BUG_ON(q[off] > 63);
        off += 1u + q[off];
    }
    SL_BUG_ON(off >= n);
    return off + 1;
}

static void check_question(const struct sl_dnsd_query *q)
{
    size_t wire = name_wire(q->question, q->question_len);

    SL_BUG_ON(wire + 4 != q->question_len || wire > 255);
    SL_BUG_ON(q->qtype != get16(q->question + wire) || q->qclass != get16(q->question + wire + 2));
    SL_BUG_ON(q->name_len == 0 || q->name_len > 253 || strlen(q->name) != q->name_len);
    for (size_t i = 0; i < q->name_len; i++) {
        SL_BUG_ON(q->name[i] < 0x21 || q->name[i] > 0x7e);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t addr[4] = { 10, 213, 0, 1 };
    uint8_t out[SL_DNSD_ANSWER_MAX];
    uint8_t again[SL_DNSD_ANSWER_MAX];
    struct sl_dnsd_query q;
    struct sl_dnsd_query r;
    size_t qlen;
    int n;

    if (size > SL_DNSD_QUERY_MAX) {
        size = SL_DNSD_QUERY_MAX;
    }
    if (!sl_dnsd_parse(data, size, &q)) {
        SL_BUG_ON(size >= 12 && (data[2] & 0x80) == 0);
        return 0;
    }
    SL_BUG_ON(size < 12 || (data[2] & 0x80) != 0);
    n = sl_dnsd_answer(&q, addr, out, sizeof(out));
    SL_BUG_ON(n < 12 || n > SL_DNSD_ANSWER_MAX);
    /* Too small a buffer is refused, never written past. */
    SL_BUG_ON(sl_dnsd_answer(&q, addr, again, (size_t)n - 1) != SL_ETOOBIG);
    SL_BUG_ON(get16(out) != get16(data));
    SL_BUG_ON((out[2] & 0x80) == 0 || (out[2] >> 3 & 0xf) != (data[2] >> 3 & 0xf)
              || (out[2] & 0x04) == 0 || (out[2] & 0x01) != (data[2] & 0x01) || (out[3] & 0x80) == 0
              || (out[3] & 0x70) != 0 || (out[3] & 0xf) != q.rcode);
    SL_BUG_ON(q.rcode != SL_DNSD_NOERROR && q.rcode != SL_DNSD_FORMERR && q.rcode != SL_DNSD_NOTIMP
              && q.rcode != SL_DNSD_REFUSED);
    SL_BUG_ON(get16(out + 4) != (q.has_question ? 1 : 0) || get16(out + 6) != (q.answer_a ? 1 : 0)
              || get16(out + 8) != 0 || get16(out + 10) != 0);
    SL_BUG_ON(q.answer_a
              && (q.rcode != SL_DNSD_NOERROR || q.qtype != 1 || q.qclass != 1 || !q.has_question));
    SL_BUG_ON(q.rcode == SL_DNSD_NOERROR
              && (!q.has_question || q.qclass != 1 || (q.qtype != 1 && q.qtype != 28)));
    if (!q.has_question) {
        SL_BUG_ON(n != 12 || q.rcode == SL_DNSD_NOERROR || q.rcode == SL_DNSD_REFUSED);
        return 0;
    }
    check_question(&q);
    SL_BUG_ON(q.question != data + 12 || memcmp(out + 12, data + 12, q.question_len) != 0);
    qlen = 12 + q.question_len;
    if (q.answer_a) {
        static const uint8_t rr[12] = { 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, SL_DNSD_TTL_S, 0, 4 };

        SL_BUG_ON((size_t)n != qlen + 16 || memcmp(out + qlen, rr, sizeof(rr)) != 0
                  || memcmp(out + qlen + 12, addr, 4) != 0);
    } else {
        SL_BUG_ON((size_t)n != qlen);
    }
    /* The answer's header and question, made a query again, read the same. */
    memcpy(again, out, qlen);
    again[2] &= 0x79; /* QR and AA off */
    again[3] = 0;
    again[6] = again[7] = 0;
    SL_BUG_ON(!sl_dnsd_parse(again, qlen, &r));
    SL_BUG_ON(r.rcode != q.rcode || !r.has_question || r.qtype != q.qtype || r.qclass != q.qclass
              || r.name_len != q.name_len || strcmp(r.name, q.name) != 0
              || r.name_plain != q.name_plain || r.answer_a != q.answer_a);
    return 0;
}
