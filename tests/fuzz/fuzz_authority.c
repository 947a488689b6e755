/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_authority.c - the CONNECT authority and the Host header as the proxy compares
 * them (docs/reference/proxy.md §4.3): both go through sl_host_parse_authority(), a missing Host
 * port defaults to the scheme's, and the proxy then compares the normal forms as text (proxy/head.c
 * host_header_matches, a static function this target mirrors in `same_authority`).
 *
 * Input: `A\nB`: A is a CONNECT target, B a Host header value (B absent: A is used for both).
 *
 * Invariants, not just "no crash":
 *   - a normal form is at most 253 characters, has no uppercase letter and no trailing dot, is
 *     made of [a-z0-9.-] or is an IP literal that inet_pton/inet_ntop give back unchanged, and
 *     parsing `normal[:port]` again gives the same host and port (idempotent);
 *   - spelling variants the proxy must treat as the same authority are the same: A in
 *     uppercase, A with a trailing dot on a DNS name, A with its default port written out;
 *   - comparing normal forms as text is sound: two hosts with the same text have the same kind
 *     and address, and two IP hosts with the same address have the same text;
 *   - a Host header and an absolute-form URL agree: whatever authority sl_host_parse_authority()
 *     accepts (without '/', '?', '#', '@'), sl_url_parse() accepts as http://B/ and https://B/
 *     with the same host and the defaulted port, and refuses when it refuses.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "policy/host.h"
#include "policy/url.h"
#include "tests/support/hostauth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TEXT_MAX 1024

/* proxy/head.c's comparison: names as text, ports after defaulting. */
static bool same_authority(const struct sl_host *a, uint16_t a_port, const struct sl_host *b,
                           uint16_t b_port, uint16_t default_port)
{
    if (a_port == 0) {
        a_port = default_port;
    }
    if (b_port == 0) {
        b_port = default_port;
    }
    return a->len == b->len && memcmp(a->name, b->name, a->len) == 0 && a_port == b_port;
}

static int parse(const char *s, size_t n, struct sl_host *h, uint16_t *port)
{
    *port = 1;
    return sl_host_parse_authority(sl_slice_of(s, n), 0, h, port, NULL);
}

/* Normal form, idempotence and the spelling variants of one accepted authority `s`. */
static void check_accepted(const char *s, size_t n, const struct sl_host *h, uint16_t port)
{
    char text[TEXT_MAX + 16];
    struct sl_host again;
    uint16_t port2;
    size_t host_end;

    sl_test_host_check(h, 0);
    sl_test_authority_round_trip(h, port, 0);

    /* Uppercase. */
    for (size_t i = 0; i < n; i++) {
        text[i] = s[i] >= 'a' && s[i] <= 'z' ? (char)(s[i] - 'a' + 'A') : s[i];
    }
    SL_BUG_ON(parse(text, n, &again, &port2) != 0);
    SL_BUG_ON(!sl_test_host_same(h, &again) || port2 != port);

    /* The default port written out. */
    if (port == 0) {
        memcpy(text, s, n);
        memcpy(text + n, ":443", 4);
        SL_BUG_ON(parse(text, n + 4, &again, &port2) != 0);
        SL_BUG_ON(!sl_test_host_same(h, &again) || port2 != 443);
        SL_BUG_ON(!same_authority(h, port, &again, port2, 443));
        SL_BUG_ON(same_authority(h, port, &again, port2, 80));
    }

    /* A trailing dot on a DNS name (one that has none yet and room for it). */
    host_end = n;
    if (port != 0) {
        while (host_end > 0 && s[host_end - 1] != ':') {
            host_end--;
        }
        host_end--;
    }
    if (h->kind == SL_HOST_DNS && host_end > 0 && s[host_end - 1] != '.') {
        memcpy(text, s, host_end);
        text[host_end] = '.';
        memcpy(text + host_end + 1, s + host_end, n - host_end);
        SL_BUG_ON(parse(text, n + 1, &again, &port2) != 0);
        SL_BUG_ON(!sl_test_host_same(h, &again) || port2 != port);
    }
}

/* A Host header `b` against the absolute-form URLs built from it. */
static void check_url(const char *b, size_t n, bool ok, const struct sl_host *h, uint16_t port)
{
    static const char *const schemes[] = { "http://", "https://" };
    char text[TEXT_MAX + 16];

    if (n == 0 || memchr(b, '/', n) != NULL || memchr(b, '?', n) != NULL
        || memchr(b, '#', n) != NULL || memchr(b, '@', n) != NULL) {
        return;
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(schemes); i++) {
        size_t sn = strlen(schemes[i]);
        struct sl_url u;
        int rc;

        memcpy(text, schemes[i], sn);
        memcpy(text + sn, b, n);
        text[sn + n] = '/';
        rc = sl_url_parse(sl_slice_of(text, sn + n + 1), &u, NULL);
        SL_BUG_ON((rc == 0) != ok);
        if (rc == 0) {
            SL_BUG_ON(!sl_test_host_same(h, &u.host));
            SL_BUG_ON(u.port != (port != 0 ? port : i == 0 ? 80 : 443));
            SL_BUG_ON(u.port_given != (port != 0));
            SL_BUG_ON(u.path.n != 1 || u.path.p[0] != '/' || u.query.n != 0);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char buf[TEXT_MAX + 1];
    const char *a = buf;
    const char *b;
    const char *nl;
    size_t an;
    size_t bn;
    struct sl_host ha;
    struct sl_host hb;
    uint16_t pa;
    uint16_t pb;
    bool a_ok;
    bool b_ok;

    if (size > TEXT_MAX) {
        return 0;
    }
    memcpy(buf, data, size);
    nl = memchr(buf, '\n', size);
    if (nl != NULL) {
        an = (size_t)(nl - buf);
        b = nl + 1;
        bn = size - an - 1;
    } else {
        an = size;
        b = buf;
        bn = size;
    }
    a_ok = parse(a, an, &ha, &pa) == 0;
    b_ok = parse(b, bn, &hb, &pb) == 0;
    if (a_ok) {
        check_accepted(a, an, &ha, pa);
    }
    if (b_ok) {
        check_accepted(b, bn, &hb, pb);
    }
    check_url(b, bn, b_ok, &hb, pb);
    if (a_ok && b_ok) {
        bool same_text = ha.len == hb.len && memcmp(ha.name, hb.name, ha.len) == 0;

        /* Text equality is the proxy's equality; it must mean the same host. */
        SL_BUG_ON(same_text && !sl_test_host_same(&ha, &hb));
        SL_BUG_ON(ha.kind != SL_HOST_DNS && ha.kind == hb.kind
                  && memcmp(ha.addr, hb.addr, sizeof(ha.addr)) == 0 && !same_text);
        /* The comparison is symmetric and, for equal ports, the text equality. */
        SL_BUG_ON(same_authority(&ha, pa, &hb, pb, 443) != same_authority(&hb, pb, &ha, pa, 443));
        SL_BUG_ON(pa == pb && pa != 0 && same_authority(&ha, pa, &hb, pb, 80) != same_text);
    }
    return 0;
}
