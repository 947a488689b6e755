/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_url.c - the absolute-form URL parser and the authority parser of policy/ on
 * arbitrary bytes.
 *
 * Invariants, not just "no crash": an accepted host is in normal form (sl_host_is_valid), an
 * accepted port is 1-65535 (0 only for an authority without one), the path starts with '/',
 * path and query are views into the input (or the static "/"), and writing the URL out again as
 * scheme://host:port + path + query parses back to the same host, port, path and query. ASan
 * catches any read past the input, which the harness copies to an exact-size buffer.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "policy/host.h"
#include "policy/url.h"
#include "tests/support/hostauth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* True when the `n` bytes at `p` lie inside [data, data + size). Compared as integers: the
 * pointers may belong to different objects. */
static bool is_inside(const uint8_t *p, size_t n, const uint8_t *data, size_t size)
{
    uintptr_t a = (uintptr_t)p;
    uintptr_t lo = (uintptr_t)data;

    return a >= lo && a - lo <= size && n <= size - (size_t)(a - lo);
}

static void fuzz_authority(const uint8_t *data, size_t size, unsigned flags)
{
    struct sl_host h;
    uint16_t port = 1;

    if (sl_host_parse_authority(sl_slice_of(data, size), flags, &h, &port, NULL) != 0) {
        return;
    }
    SL_BUG_ON(h.len == 0 || h.len > SL_HOST_NAME_MAX || strlen(h.name) != h.len);
    if (flags == 0) {
        SL_BUG_ON(!sl_host_is_valid(&h));
    }
    /* A port of 0 means "none given"; an explicit one is 1-65535, so "host:0" must fail. */
    SL_BUG_ON(port != 0 && memchr(data, ':', size) == NULL);
    sl_test_authority_round_trip(&h, port, flags);
}

static bool is_visible(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] <= 0x20 || p[i] >= 0x7f) {
            return false;
        }
    }
    return true;
}

static void fuzz_url(const uint8_t *data, size_t size)
{
    struct sl_url u;
    struct sl_url again;
    char *text = NULL;
    size_t cap;
    int n;

    if (sl_url_parse(sl_slice_of(data, size), &u, NULL) != 0) {
        return;
    }
    SL_BUG_ON(!sl_host_is_valid(&u.host));
    SL_BUG_ON(u.port == 0 || (!u.port_given && u.port != (u.scheme == SL_URL_HTTPS ? 443 : 80)));
    SL_BUG_ON(u.path.n == 0 || u.path.p[0] != '/');
    SL_BUG_ON(memchr(u.path.p, '?', u.path.n) != NULL || memchr(u.path.p, '#', u.path.n) != NULL);
    /* The path is borrowed from the input, or it is the static "/" of a URL without one. */
    SL_BUG_ON(!is_inside(u.path.p, u.path.n, data, size) && u.path.n != 1);
    SL_BUG_ON(!is_visible(u.path.p, u.path.n));
    if (u.query.n > 0) {
        SL_BUG_ON(!is_inside(u.query.p, u.query.n, data, size));
        SL_BUG_ON(u.query.p[0] != '?' || memchr(u.query.p, '#', u.query.n) != NULL);
        SL_BUG_ON(!is_visible(u.query.p, u.query.n));
        /* The query follows the path when both come from the input. */
        SL_BUG_ON(is_inside(u.path.p, u.path.n, data, size) && u.query.p != u.path.p + u.path.n);
    }

    cap = 16 + u.host.len + 8 + u.path.n + u.query.n;
    text = sl_malloc(cap);
    if (text == NULL) {
        return;
    }
    n = snprintf(text, cap, "%s://%s:%u%.*s%.*s", sl_url_scheme_name(u.scheme), u.host.name,
                 (unsigned)u.port, (int)u.path.n, (const char *)u.path.p, (int)u.query.n,
                 u.query.n > 0 ? (const char *)u.query.p : "");
    SL_BUG_ON(n <= 0 || (size_t)n >= cap);
    SL_BUG_ON(sl_url_parse(sl_slice_of(text, (size_t)n), &again, NULL) != 0);
    SL_BUG_ON(!sl_test_host_same(&u.host, &again.host) || u.port != again.port
              || u.scheme != again.scheme);
    SL_BUG_ON(!again.port_given);
    SL_BUG_ON(again.path.n != u.path.n || memcmp(again.path.p, u.path.p, u.path.n) != 0);
    SL_BUG_ON(again.query.n != u.query.n
              || (u.query.n > 0 && memcmp(again.query.p, u.query.p, u.query.n) != 0));
    sl_free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy, so that ASan flags a read of even one byte past the input. */
    uint8_t *copy = sl_malloc(size > 0 ? size : 1);

    if (copy == NULL) {
        return 0;
    }
    if (size > 0) {
        memcpy(copy, data, size);
    }
    fuzz_url(copy, size);
    fuzz_authority(copy, size, 0);
    fuzz_authority(copy, size, SL_HOST_GLOB);
    sl_free(copy);
    return 0;
}
