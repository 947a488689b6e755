/* SPDX-License-Identifier: Apache-2.0 */
#include "policy/placeholder.h"

#include <string.h>

#include "policy/auth.h"

static const char base32[] = "abcdefghijklmnopqrstuvwxyz234567";
static const char base64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Decoded bytes of the longest Basic value looked into. */
#define BASIC_DECODED_MAX (SL_PLACEHOLDER_BASIC_MAX / 4 * 3)

static bool is_base32(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= '2' && c <= '7');
}

bool sl_placeholder_is_valid(const char *s, size_t n)
{
    if (n != SL_PLACEHOLDER_LEN
        || memcmp(s, SL_PLACEHOLDER_PREFIX, SL_PLACEHOLDER_PREFIX_LEN) != 0) {
        return false;
    }
    for (size_t i = SL_PLACEHOLDER_PREFIX_LEN; i < n; i++) {
        if (!is_base32((uint8_t)s[i])) {
            return false;
        }
    }
    return true;
}

void sl_placeholder_format(const uint8_t raw[SL_PLACEHOLDER_RAW_BYTES],
                           char out[SL_PLACEHOLDER_LEN + 1])
{
    char *p = out + SL_PLACEHOLDER_PREFIX_LEN;

    memcpy(out, SL_PLACEHOLDER_PREFIX, SL_PLACEHOLDER_PREFIX_LEN);
    /* Five bytes make eight characters; 25 bytes, 40 of them, with nothing left over. */
    for (size_t i = 0; i < SL_PLACEHOLDER_RAW_BYTES; i += 5) {
        uint64_t w = 0;

        for (size_t j = 0; j < 5; j++) {
            w = w << 8 | raw[i + j];
        }
        for (int k = 7; k >= 0; k--) {
            *p++ = base32[(w >> (5 * k)) & 31];
        }
    }
    *p = '\0';
}

bool sl_placeholder_env_ok(const char *s, size_t n)
{
    if (n == 0 || n > SL_PLACEHOLDER_ENV_MAX || (s[0] >= '0' && s[0] <= '9')) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
              || c == '_')) {
            return false;
        }
    }
    return true;
}

/* The next placeholder-shaped text in p[0 .. n) at or after `from`: its offset, or n. */
static size_t next_shape(const uint8_t *p, size_t n, size_t from)
{
    while (from + SL_PLACEHOLDER_LEN <= n) {
        const uint8_t *s = memchr(p + from, 's', n - from - SL_PLACEHOLDER_LEN + 1);
        size_t at;
        bool ok;

        if (s == NULL) {
            return n;
        }
        at = (size_t)(s - p);
        ok = memcmp(s, SL_PLACEHOLDER_PREFIX, SL_PLACEHOLDER_PREFIX_LEN) == 0;
        for (size_t i = SL_PLACEHOLDER_PREFIX_LEN; ok && i < SL_PLACEHOLDER_LEN; i++) {
            ok = is_base32(s[i]);
        }
        if (ok) {
            return at;
        }
        from = at + 1;
    }
    return n;
}

/* The placeholder of `set` spelt at `s` (SL_PLACEHOLDER_LEN bytes), or NULL. */
static const struct sl_placeholder *which(const struct sl_placeholder *set, size_t n,
                                          const uint8_t *s)
{
    for (size_t i = 0; i < n; i++) {
        if (memcmp(set[i].value, s, SL_PLACEHOLDER_LEN) == 0) {
            return &set[i];
        }
    }
    return NULL;
}

static const struct sl_placeholder *scan_raw(const struct sl_placeholder *set, size_t n,
                                             struct sl_slice s, const struct sl_placeholder *except)
{
    for (size_t at = next_shape(s.p, s.n, 0); at < s.n; at = next_shape(s.p, s.n, at + 1)) {
        const struct sl_placeholder *ph = which(set, n, s.p + at);

        if (ph != NULL && ph != except) {
            return ph;
        }
    }
    return NULL;
}

/* When `s` is `Basic <base64>` (the scheme in any case, spaces around and between), sets
 * `*b64` to its base64 and returns true. */
static bool basic_part(struct sl_slice s, struct sl_slice *b64)
{
    static const char scheme[] = "basic";
    const uint8_t *p = s.p;
    size_t n = s.n;

    while (n > 0 && (p[0] == ' ' || p[0] == '\t')) {
        p++;
        n--;
    }
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) {
        n--;
    }
    if (n <= 6 || p[5] != ' ') {
        return false;
    }
    for (size_t i = 0; i < 5; i++) {
        if ((p[i] | 0x20) != (uint8_t)scheme[i]) {
            return false;
        }
    }
    p += 5;
    n -= 5;
    while (n > 0 && p[0] == ' ') {
        p++;
        n--;
    }
    if (n == 0 || n > SL_PLACEHOLDER_BASIC_MAX) {
        return false;
    }
    *b64 = sl_slice_of(p, n);
    return true;
}

/* Decodes the Basic value `s` into `out` (BASIC_DECODED_MAX bytes). Returns its length, or -1
 * when `s` is no Basic value this module reads. */
static long basic_decode(struct sl_slice s, uint8_t *out)
{
    struct sl_slice b64;
    size_t dn = 0;

    if (!basic_part(s, &b64) || sl_auth_base64_decode(b64, out, BASIC_DECODED_MAX, &dn) != 0) {
        return -1;
    }
    return (long)dn;
}

const struct sl_placeholder *sl_placeholder_scan(const struct sl_placeholder *set, size_t n,
                                                 struct sl_slice s,
                                                 const struct sl_placeholder *except)
{
    uint8_t decoded[BASIC_DECODED_MAX];
    const struct sl_placeholder *ph;
    long dn;

    if (n == 0) {
        return NULL;
    }
    ph = scan_raw(set, n, s, except);
    if (ph != NULL) {
        return ph;
    }
    /* The base64 alphabet has no '-': a placeholder in a Basic value is only seen decoded. */
    dn = basic_decode(s, decoded);
    if (dn < 0) {
        return NULL;
    }
    return scan_raw(set, n, sl_slice_of(decoded, (size_t)dn), except);
}

/* Base64 written to a buffer three bytes at a time. */
struct b64_out {
    struct sl_buf *b;
    uint8_t q[3];
    size_t nq;
};

static int b64_flush(struct b64_out *o, bool last)
{
    char out[4];
    uint32_t w;

    if (o->nq == 0 || (o->nq < 3 && !last)) {
        return 0;
    }
    w = (uint32_t)o->q[0] << 16 | (uint32_t)(o->nq > 1 ? o->q[1] : 0) << 8
        | (uint32_t)(o->nq > 2 ? o->q[2] : 0);
    out[0] = base64[w >> 18 & 63];
    out[1] = base64[w >> 12 & 63];
    out[2] = o->nq > 1 ? base64[w >> 6 & 63] : '=';
    out[3] = o->nq > 2 ? base64[w & 63] : '=';
    o->nq = 0;
    return sl_buf_append(o->b, out, sizeof(out));
}

static int b64_put(struct b64_out *o, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        o->q[o->nq++] = p[i];
        SL_TRY(b64_flush(o, false));
    }
    return 0;
}

/* Writes p[0 .. n) through `put` with `ph` replaced by its secret; counts the replacements. */
typedef int put_fn(void *arg, const uint8_t *p, size_t n);

static int put_replaced(const uint8_t *p, size_t n, const struct sl_placeholder *ph, put_fn *put,
                        void *arg, unsigned *count)
{
    size_t done = 0;

    for (size_t at = next_shape(p, n, 0); at < n; at = next_shape(p, n, at + 1)) {
        if (memcmp(p + at, ph->value, SL_PLACEHOLDER_LEN) != 0) {
            continue;
        }
        SL_TRY(put(arg, p + done, at - done));
        SL_TRY(put(arg, (const uint8_t *)ph->secret, strlen(ph->secret)));
        (*count)++;
        done = at + SL_PLACEHOLDER_LEN;
        at = done - 1;
    }
    return put(arg, p + done, n - done);
}

static void wipe(void *p, size_t n)
{
    volatile uint8_t *v = p;

    for (size_t i = 0; i < n; i++) {
        v[i] = 0;
    }
}

static int put_plain(void *arg, const uint8_t *p, size_t n)
{
    return sl_buf_append(arg, p, n);
}

static int put_b64(void *arg, const uint8_t *p, size_t n)
{
    return b64_put(arg, p, n);
}

int sl_placeholder_replace(struct sl_buf *b, struct sl_slice value, const struct sl_placeholder *ph,
                           unsigned *count)
{
    uint8_t decoded[BASIC_DECODED_MAX];
    struct b64_out o = { b, { 0, 0, 0 }, 0 };
    unsigned found = 0;
    long dn = basic_decode(value, decoded);
    int rc;

    if (dn < 0 || scan_raw(ph, 1, sl_slice_of(decoded, (size_t)dn), NULL) == NULL) {
        return put_replaced(value.p, value.n, ph, put_plain, b, count);
    }
    SL_TRY(sl_buf_append_str(b, "Basic "));
    rc = put_replaced(decoded, (size_t)dn, ph, put_b64, &o, &found);
    if (rc == 0) {
        rc = b64_flush(&o, true);
    }
    *count += found;
    /* The last bytes of the secret may wait in the encoder's queue: no copy outlives the call. */
    wipe(o.q, sizeof(o.q));
    return rc;
}

bool sl_placeholder_seen(const char *s, size_t n)
{
    return next_shape((const uint8_t *)s, n, 0) < n;
}

void sl_placeholder_mask(char *s, size_t n)
{
    for (size_t at = next_shape((const uint8_t *)s, n, 0); at < n;
         at = next_shape((const uint8_t *)s, n, at + SL_PLACEHOLDER_LEN)) {
        memset(s + at + SL_PLACEHOLDER_PREFIX_LEN, '*', SL_PLACEHOLDER_RANDOM_LEN);
    }
}
