/* SPDX-License-Identifier: Apache-2.0 */
#include "policy/auth.h"

#include <stdint.h>
#include <string.h>

/* The decoded `id:token` is at most 128 + 1 + 256 bytes; its base64 at most 4 * ceil(385 / 3). */
#define DECODED_MAX (SL_AUTH_ID_MAX + 1 + SL_AUTH_TOKEN_MAX)
#define ENCODED_MAX ((size_t)4 * ((DECODED_MAX + 2) / 3))

static bool is_ows(uint8_t c)
{
    return c == ' ' || c == '\t';
}

/* 0-63, or -1 for a byte outside the RFC 4648 §4 alphabet. */
static int b64_value(uint8_t c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == '+') {
        return 62;
    }
    if (c == '/') {
        return 63;
    }
    return -1;
}

/* Strict decoding: a multiple of 4 characters, '=' only as one or two final pad characters, and
 * the bits that the padding leaves over must be zero (so every value has one encoding). */
int sl_auth_base64_decode(struct sl_slice in, uint8_t *out, size_t cap, size_t *out_n)
{
    size_t pad = 0;
    size_t n = 0;

    if (in.n == 0 || in.n % 4 != 0) {
        return SL_EINVAL;
    }
    if (in.p[in.n - 1] == '=') {
        pad = in.p[in.n - 2] == '=' ? 2 : 1;
    }
    for (size_t i = 0; i < in.n; i += 4) {
        int v[4];
        uint32_t w = 0;
        size_t real = (i + 4 == in.n) ? 4 - pad : 4;

        for (size_t j = 0; j < 4; j++) {
            v[j] = j < real ? b64_value(in.p[i + j]) : 0;
            if (v[j] < 0) {
                return SL_EINVAL;
            }
            w = w << 6 | (uint32_t)v[j];
        }
        if ((real == 3 && (w & 0xff) != 0) || (real == 2 && (w & 0xffff) != 0)) {
            return SL_EINVAL;
        }
        for (size_t j = 0; j + 1 < real; j++) {
            if (n == cap) {
                return SL_ETOOBIG;
            }
            out[n++] = (uint8_t)(w >> (16 - 8 * j));
        }
    }
    *out_n = n;
    return 0;
}

static int copy_part(const uint8_t *p, size_t n, char *dst, size_t cap)
{
    if (n == 0) {
        return SL_EINVAL;
    }
    if (n >= cap) {
        return SL_ETOOBIG;
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i] <= 0x20 || p[i] >= 0x7f) {
            return SL_EINVAL;
        }
    }
    memcpy(dst, p, n);
    dst[n] = '\0';
    return 0;
}

int sl_auth_parse_basic(struct sl_slice value, char *id, size_t id_cap, char *token,
                        size_t token_cap)
{
    static const char scheme[] = "basic";
    uint8_t decoded[DECODED_MAX];
    const uint8_t *p = value.p;
    size_t n = value.n;
    size_t dn = 0;
    const uint8_t *colon;

    while (n > 0 && is_ows(p[0])) {
        p++;
        n--;
    }
    while (n > 0 && is_ows(p[n - 1])) {
        n--;
    }
    /* RFC 9110 §11.4: credentials = auth-scheme [ 1*SP token68 ]. */
    if (n <= 5 || p[5] != ' ') {
        return SL_EINVAL;
    }
    for (size_t i = 0; i < 5; i++) {
        if ((p[i] | 0x20) != (uint8_t)scheme[i]) {
            return SL_EINVAL;
        }
    }
    p += 5;
    n -= 5;
    while (n > 0 && p[0] == ' ') {
        p++;
        n--;
    }
    if (n > ENCODED_MAX) {
        return SL_ETOOBIG;
    }
    SL_TRY(sl_auth_base64_decode(sl_slice_of(p, n), decoded, sizeof(decoded), &dn));
    colon = memchr(decoded, ':', dn);
    if (colon == NULL) {
        return SL_EINVAL;
    }
    SL_TRY(copy_part(decoded, (size_t)(colon - decoded), id, id_cap));
    return copy_part(colon + 1, dn - (size_t)(colon - decoded) - 1, token, token_cap);
}

bool sl_auth_equal(struct sl_slice a, struct sl_slice b)
{
    /* volatile keeps the compiler from turning the loop into an early-exit memcmp. */
    volatile uint8_t diff = (uint8_t)(a.n != b.n);

    for (size_t i = 0; i < b.n; i++) {
        uint8_t x = i < a.n ? a.p[i] : 0;

        diff = (uint8_t)(diff | (x ^ b.p[i]));
    }
    return diff == 0;
}
