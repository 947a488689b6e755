/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_host.c - the hostile-input parsers of policy/: host normalisation, the
 * authority and URL parsers and the Proxy-Authorization Basic parser.
 *
 * Invariants, not just "no crash": a normal form is at most 253 characters, made of
 * [a-z0-9.-] (plus '*' for patterns) or a canonical IP literal, and normalising it again gives
 * it back unchanged; a pattern sl_host_check_pattern() accepts has at most one '*', at the end
 * of its first label right before a dot, and every xn-- label of it decodes and encodes back to
 * itself; whatever the authority, URL and Basic parsers accept survives being written out and
 * parsed again.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "policy/auth.h"
#include "policy/host.h"
#include "policy/punycode.h"
#include "policy/url.h"
#include "tests/support/hostauth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The rules of sl_host_check_pattern(), checked the other way round. */
static void check_pattern(const struct sl_host *h)
{
    const char *star;
    const char *dot;

    if (sl_host_check_pattern(h, NULL) != 0) {
        return;
    }
    star = memchr(h->name, '*', h->len);
    dot = memchr(h->name, '.', h->len);
    if (star != NULL) {
        SL_BUG_ON(dot == NULL || star + 1 != dot || strchr(star + 1, '*') != NULL);
    }
    for (size_t start = 0; start < h->len;) {
        const char *end = memchr(h->name + start, '.', h->len - start);
        size_t n = end != NULL ? (size_t)(end - (h->name + start)) : h->len - start;

        if (n >= 4 && memcmp(h->name + start, "xn--", 4) == 0) {
            uint32_t u[SL_PUNYCODE_LABEL_MAX];
            char back[SL_PUNYCODE_LABEL_MAX];
            size_t un = 0;
            size_t bn = 0;

            SL_BUG_ON(sl_punycode_decode(h->name + start + 4, n - 4, u, SL_ARRAY_LEN(u), &un) != 0);
            SL_BUG_ON(sl_punycode_encode(u, un, back, sizeof(back), &bn) != 0);
            SL_BUG_ON(bn != n - 4 || memcmp(back, h->name + start + 4, bn) != 0);
        }
        start += n + 1;
    }
}

static void fuzz_normalize(const uint8_t *data, size_t size)
{
    struct sl_host h;
    struct sl_host again;
    struct sl_host glob;

    if (sl_host_normalize(sl_slice_of(data, size), 0, &h, NULL) == 0) {
        sl_test_host_check(&h, 0);
        SL_BUG_ON(sl_host_normalize(sl_slice_of(h.name, h.len), 0, &again, NULL) != 0);
        SL_BUG_ON(!sl_test_host_same(&h, &again));
        SL_BUG_ON(!sl_host_is_valid(&h));
        /* A host is also a valid pattern, with the same normal form. */
        SL_BUG_ON(sl_host_normalize(sl_slice_of(data, size), SL_HOST_GLOB, &glob, NULL) != 0);
        SL_BUG_ON(!sl_test_host_same(&h, &glob));
    }
    if (sl_host_normalize(sl_slice_of(data, size), SL_HOST_GLOB, &glob, NULL) == 0) {
        sl_test_host_check(&glob, SL_HOST_GLOB);
        SL_BUG_ON(sl_host_normalize(sl_slice_of(glob.name, glob.len), SL_HOST_GLOB, &again, NULL)
                  != 0);
        SL_BUG_ON(!sl_test_host_same(&glob, &again));
        SL_BUG_ON(glob.kind != SL_HOST_DNS && memchr(data, '*', size) != NULL);
        check_pattern(&glob);
    }
}

static void fuzz_authority(const uint8_t *data, size_t size)
{
    struct sl_host h;
    uint16_t port = 1;

    if (sl_host_parse_authority(sl_slice_of(data, size), 0, &h, &port, NULL) != 0) {
        return;
    }
    sl_test_host_check(&h, 0);
    sl_test_authority_round_trip(&h, port, 0);
}

static void fuzz_url(const uint8_t *data, size_t size)
{
    struct sl_url u;
    struct sl_url again;
    char text[SL_HOST_NAME_MAX + 64];
    int n;

    if (sl_url_parse(sl_slice_of(data, size), &u, NULL) != 0) {
        return;
    }
    sl_test_host_check(&u.host, 0);
    SL_BUG_ON(u.port == 0 || (!u.port_given && u.port != (u.scheme == SL_URL_HTTPS ? 443 : 80)));
    SL_BUG_ON(u.path.n == 0 || u.path.p[0] != '/' || memchr(u.path.p, '?', u.path.n) != NULL);
    SL_BUG_ON(u.query.n > 0 && u.query.p[0] != '?');
    SL_BUG_ON(memchr(u.path.p, '#', u.path.n) != NULL
              || (u.query.n > 0 && memchr(u.query.p, '#', u.query.n) != NULL));
    n = snprintf(text, sizeof(text), "%s://%s:%u", sl_url_scheme_name(u.scheme), u.host.name,
                 (unsigned)u.port);
    SL_BUG_ON(n <= 0 || (size_t)n >= sizeof(text));
    SL_BUG_ON(sl_url_parse(sl_slice_of(text, (size_t)n), &again, NULL) != 0);
    SL_BUG_ON(!sl_test_host_same(&u.host, &again.host) || u.port != again.port
              || u.scheme != again.scheme);
}

static void fuzz_basic(const uint8_t *data, size_t size)
{
    char id[SL_AUTH_ID_MAX + 1];
    char token[SL_AUTH_TOKEN_MAX + 1];
    char id2[SL_AUTH_ID_MAX + 1];
    char token2[SL_AUTH_TOKEN_MAX + 1];
    char header[6 + 4 * (SL_AUTH_ID_MAX + SL_AUTH_TOKEN_MAX + 2) / 3 + 8];

    if (sl_auth_parse_basic(sl_slice_of(data, size), id, sizeof(id), token, sizeof(token)) != 0) {
        return;
    }
    SL_BUG_ON(id[0] == '\0' || token[0] == '\0' || strchr(id, ':') != NULL);
    SL_BUG_ON(!sl_auth_equal(sl_slice_str(token), sl_slice_str(token)));
    (void)sl_test_basic_header(id, token, header, sizeof(header));
    SL_BUG_ON(sl_auth_parse_basic(sl_slice_str(header), id2, sizeof(id2), token2, sizeof(token2))
              != 0);
    SL_BUG_ON(strcmp(id, id2) != 0 || strcmp(token, token2) != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_normalize(data, size);
    fuzz_authority(data, size);
    fuzz_url(data, size);
    fuzz_basic(data, size);
    return 0;
}
