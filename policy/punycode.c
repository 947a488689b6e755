/* SPDX-License-Identifier: Apache-2.0 */
#include "policy/punycode.h"

#include <string.h>

/* Bootstring parameters for Punycode (RFC 3492 §5). */
#define BASE         36u
#define TMIN         1u
#define TMAX         26u
#define SKEW         38u
#define DAMP         700u
#define INITIAL_BIAS 72u
#define INITIAL_N    0x80u
#define DELIMITER    '-'
#define CODE_MAX     0x10FFFFu

/* The value of digit `c` (a-z 0-25, 0-9 26-35, either case), or BASE when it is none. */
static uint32_t digit_value(char c)
{
    if (c >= 'a' && c <= 'z') {
        return (uint32_t)(c - 'a');
    }
    if (c >= 'A' && c <= 'Z') {
        return (uint32_t)(c - 'A');
    }
    if (c >= '0' && c <= '9') {
        return (uint32_t)(c - '0') + 26u;
    }
    return BASE;
}

static char digit_char(uint32_t d)
{
    return (char)(d < 26u ? 'a' + d : '0' + (d - 26u));
}

/* RFC 3492 §6.1. */
static uint32_t adapt(uint32_t delta, uint32_t points, bool first)
{
    uint32_t k = 0;

    delta = first ? delta / DAMP : delta / 2u;
    delta += delta / points;
    while (delta > ((BASE - TMIN) * TMAX) / 2u) {
        delta /= BASE - TMIN;
        k += BASE;
    }
    return k + (BASE - TMIN + 1u) * delta / (delta + SKEW);
}

static uint32_t threshold(uint32_t k, uint32_t bias)
{
    return k <= bias ? TMIN : k >= bias + TMAX ? TMAX : k - bias;
}

int sl_punycode_decode(const char *in, size_t n, uint32_t *out, size_t cap, size_t *out_n)
{
    uint32_t code = INITIAL_N;
    uint32_t i = 0;
    uint32_t bias = INITIAL_BIAS;
    size_t basic = 0;
    size_t len = 0;
    size_t pos;

    *out_n = 0;
    /* The basic code points are those before the last delimiter (none without one). */
    for (size_t j = 0; j < n; j++) {
        if (in[j] == DELIMITER) {
            basic = j;
        }
    }
    if (basic > cap) {
        return SL_ETOOBIG;
    }
    for (size_t j = 0; j < basic; j++) {
        if ((unsigned char)in[j] >= INITIAL_N) {
            return SL_EINVAL;
        }
        out[len++] = (unsigned char)in[j];
    }
    pos = basic > 0 ? basic + 1 : 0;
    while (pos < n) {
        uint32_t old_i = i;
        uint32_t w = 1;

        /* One generalized variable-length integer (§3.3), added to i. */
        for (uint32_t k = BASE;; k += BASE) {
            uint32_t d;
            uint32_t t;

            if (pos >= n) {
                return SL_EINVAL;
            }
            d = digit_value(in[pos++]);
            if (d >= BASE || d > (UINT32_MAX - i) / w) {
                return SL_EINVAL;
            }
            i += d * w;
            t = threshold(k, bias);
            if (d < t) {
                break;
            }
            if (w > UINT32_MAX / (BASE - t)) {
                return SL_EINVAL;
            }
            w *= BASE - t;
        }
        bias = adapt(i - old_i, (uint32_t)len + 1u, old_i == 0);
        if (i / ((uint32_t)len + 1u) > CODE_MAX - code) {
            return SL_EINVAL;
        }
        code += i / ((uint32_t)len + 1u);
        i %= (uint32_t)len + 1u;
        if (code > CODE_MAX) {
            return SL_EINVAL;
        }
        if (len == cap) {
            return SL_ETOOBIG;
        }
        memmove(out + i + 1, out + i, (len - i) * sizeof(*out));
        out[i++] = code;
        len++;
    }
    *out_n = len;
    return 0;
}

/* Appends `c` to the output. */
static int put(char *out, size_t cap, size_t *len, char c)
{
    if (*len == cap) {
        return SL_ETOOBIG;
    }
    out[(*len)++] = c;
    return 0;
}

int sl_punycode_encode(const uint32_t *in, size_t n, char *out, size_t cap, size_t *out_n)
{
    uint32_t code = INITIAL_N;
    uint32_t delta = 0;
    uint32_t bias = INITIAL_BIAS;
    size_t handled = 0;
    size_t basic;
    size_t len = 0;

    *out_n = 0;
    for (size_t j = 0; j < n; j++) {
        if (in[j] > CODE_MAX) {
            return SL_EINVAL;
        }
        if (in[j] < INITIAL_N) {
            SL_TRY(put(out, cap, &len, (char)in[j]));
        }
    }
    handled = basic = len;
    if (basic > 0) {
        SL_TRY(put(out, cap, &len, DELIMITER));
    }
    while (handled < n) {
        uint32_t next = UINT32_MAX;

        /* The smallest code point not handled yet. */
        for (size_t j = 0; j < n; j++) {
            if (in[j] >= code && in[j] < next) {
                next = in[j];
            }
        }
        if (next - code > (UINT32_MAX - delta) / ((uint32_t)handled + 1u)) {
            return SL_ETOOBIG;
        }
        delta += (next - code) * ((uint32_t)handled + 1u);
        code = next;
        for (size_t j = 0; j < n; j++) {
            if (in[j] < code) {
                if (delta == UINT32_MAX) {
                    return SL_ETOOBIG;
                }
                delta++;
            } else if (in[j] == code) {
                uint32_t q = delta;

                for (uint32_t k = BASE;; k += BASE) {
                    uint32_t t = threshold(k, bias);

                    if (q < t) {
                        break;
                    }
                    SL_TRY(put(out, cap, &len, digit_char(t + (q - t) % (BASE - t))));
                    q = (q - t) / (BASE - t);
                }
                SL_TRY(put(out, cap, &len, digit_char(q)));
                bias = adapt(delta, (uint32_t)handled + 1u, handled == basic);
                delta = 0;
                handled++;
            }
        }
        delta++;
        code++;
    }
    *out_n = len;
    return 0;
}

static bool refuse(const char **why, const char *msg)
{
    if (why != NULL) {
        *why = msg;
    }
    return false;
}

/* A code point a U-label may not have whatever the tables say: a control (C0, DEL, C1), a
 * surrogate, a noncharacter. */
static bool never_in_a_label(uint32_t c)
{
    return c < 0x20u || (c >= 0x7Fu && c <= 0x9Fu) || (c >= 0xD800u && c <= 0xDFFFu)
           || (c >= 0xFDD0u && c <= 0xFDEFu) || (c & 0xFFFEu) == 0xFFFEu;
}

bool sl_punycode_alabel_ok(const char *s, size_t n, const char **why)
{
    uint32_t u[SL_PUNYCODE_LABEL_MAX];
    char again[SL_PUNYCODE_LABEL_MAX];
    size_t un = 0;
    size_t an = 0;
    bool wide = false;

    if (n < 4 || memcmp(s, "xn--", 4) != 0) {
        return refuse(why, "an xn-- label without its xn-- prefix");
    }
    if (n == 4 || sl_punycode_decode(s + 4, n - 4, u, SL_PUNYCODE_LABEL_MAX, &un) != 0 || un == 0) {
        return refuse(why, "an xn-- label that is not valid Punycode (RFC 3492)");
    }
    for (size_t i = 0; i < un; i++) {
        if (never_in_a_label(u[i])) {
            return refuse(why,
                          "an xn-- label that decodes to a control character or a noncharacter");
        }
        wide = wide || u[i] >= 0x80u;
    }
    if (!wide) {
        return refuse(why,
                      "an xn-- label that decodes to ASCII only (an A-label stands for a non-ASCII "
                      "label)");
    }
    if (u[0] == '-' || u[un - 1] == '-') {
        return refuse(why, "an xn-- label that decodes to a label starting or ending with '-'");
    }
    if (un >= 4 && u[2] == '-' && u[3] == '-') {
        return refuse(why,
                      "an xn-- label that decodes to a label with '--' in its third and fourth "
                      "places");
    }
    /* RFC 5891 §5.4: the U-label must encode back to the very A-label. */
    if (sl_punycode_encode(u, un, again, sizeof(again), &an) != 0 || an != n - 4
        || memcmp(again, s + 4, an) != 0) {
        return refuse(why, "an xn-- label that does not encode back to itself (IDNA2008: not the "
                           "A-label of its U-label)");
    }
    return true;
}
