/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/support/toyseal.c - the toy sealer (see toyseal.h).
 */
#include "tests/support/toyseal.h"

#include <stdio.h>
#include <string.h>

#include "base/err.h"

/* "k5a:" */
#define PREFIX_LEN 4

int sl_test_toy_seal(void *arg, const void *p, size_t n, struct sl_buf *out)
{
    struct sl_test_toy *t = arg;
    const uint8_t *b = p;

    t->seals++;
    if (t->broken) {
        return SL_ECRYPTO;
    }
    SL_TRY(sl_buf_printf(out, "k%02x:", t->key));
    for (size_t i = 0; i < n; i++) {
        SL_TRY(sl_buf_printf(out, "%02x", (unsigned)(b[i] ^ t->key)));
    }
    return 0;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

int sl_test_toy_open(void *arg, const char *sealed, size_t n, struct sl_buf *out)
{
    struct sl_test_toy *t = arg;
    char prefix[8];

    t->opens++;
    (void)snprintf(prefix, sizeof(prefix), "k%02x:", t->key);
    if (n < PREFIX_LEN || memcmp(sealed, prefix, PREFIX_LEN) != 0 || (n - PREFIX_LEN) % 2 != 0) {
        return SL_ECRYPTO;
    }
    for (size_t i = PREFIX_LEN; i < n; i += 2) {
        int hi = hex_value(sealed[i]);
        int lo = hex_value(sealed[i + 1]);
        uint8_t c;

        if (hi < 0 || lo < 0) {
            return SL_ECRYPTO;
        }
        c = (uint8_t)(((hi << 4) | lo) ^ t->key);
        SL_TRY(sl_buf_append(out, &c, 1));
    }
    return 0;
}
