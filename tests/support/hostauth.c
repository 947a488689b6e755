/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/support/hostauth.c - host normal forms and Basic headers, as the policy/ fuzz targets
 * check them (see hostauth.h).
 */
#include "tests/support/hostauth.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"

bool sl_test_host_same(const struct sl_host *a, const struct sl_host *b)
{
    return a->kind == b->kind && a->len == b->len && memcmp(a->name, b->name, a->len + 1) == 0
           && memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

void sl_test_host_check(const struct sl_host *h, unsigned flags)
{
    static const uint8_t zero[16];
    char text[INET6_ADDRSTRLEN + 2];
    uint8_t addr[16];

    SL_BUG_ON(h->len == 0 || h->len > SL_HOST_NAME_MAX || strlen(h->name) != h->len);
    SL_BUG_ON(h->name[h->len - 1] == '.');
    switch (h->kind) {
    case SL_HOST_DNS:
        for (size_t i = 0; i < h->len; i++) {
            char c = h->name[i];

            SL_BUG_ON(!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-'
                        || (c == '*' && (flags & SL_HOST_GLOB) != 0)));
        }
        SL_BUG_ON(h->name[0] == '.');
        SL_BUG_ON(memcmp(h->addr, zero, sizeof(zero)) != 0);
        break;
    case SL_HOST_IPV4:
        SL_BUG_ON(inet_pton(AF_INET, h->name, addr) != 1 || memcmp(addr, h->addr, 4) != 0);
        SL_BUG_ON(inet_ntop(AF_INET, addr, text, sizeof(text)) == NULL
                  || strcmp(text, h->name) != 0);
        break;
    case SL_HOST_IPV6:
        SL_BUG_ON(h->name[0] != '[' || h->name[h->len - 1] != ']' || h->len - 2 >= sizeof(text));
        memcpy(text, h->name + 1, h->len - 2);
        text[h->len - 2] = '\0';
        SL_BUG_ON(inet_pton(AF_INET6, text, addr) != 1 || memcmp(addr, h->addr, 16) != 0);
        SL_BUG_ON(inet_ntop(AF_INET6, addr, text, sizeof(text)) == NULL
                  || strlen(text) != h->len - 2 || memcmp(text, h->name + 1, h->len - 2) != 0);
        break;
    }
}

void sl_test_authority_round_trip(const struct sl_host *h, uint16_t port, unsigned flags)
{
    char text[SL_HOST_NAME_MAX + 8];
    struct sl_host again;
    uint16_t port2 = 1;
    int n = port != 0 ? snprintf(text, sizeof(text), "%s:%u", h->name, (unsigned)port)
                      : snprintf(text, sizeof(text), "%s", h->name);

    SL_BUG_ON(n <= 0 || (size_t)n >= sizeof(text));
    SL_BUG_ON(sl_host_parse_authority(sl_slice_of(text, (size_t)n), flags, &again, &port2, NULL)
              != 0);
    SL_BUG_ON(!sl_test_host_same(h, &again) || port2 != port);
}

/* The base64 of one byte of "id:token", read at `i` of the concatenation. */
static uint8_t pair_byte(const char *id, size_t in, const char *token, size_t i)
{
    if (i < in) {
        return (uint8_t)id[i];
    }
    return i == in ? ':' : (uint8_t)token[i - in - 1];
}

size_t sl_test_basic_header(const char *id, const char *token, char *out, size_t cap)
{
    static const char alphabet[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t in = strlen(id);
    size_t n = in + 1 + strlen(token);
    size_t o = 6;

    SL_BUG_ON(cap < 6 + 4 * ((n + 2) / 3) + 1);
    memcpy(out, "Basic ", 6);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)pair_byte(id, in, token, i) << 16;

        w |= i + 1 < n ? (uint32_t)pair_byte(id, in, token, i + 1) << 8 : 0;
        w |= i + 2 < n ? pair_byte(id, in, token, i + 2) : 0;
        out[o++] = alphabet[(w >> 18) & 63];
        out[o++] = alphabet[(w >> 12) & 63];
        out[o++] = i + 1 < n ? alphabet[(w >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? alphabet[w & 63] : '=';
    }
    out[o] = '\0';
    return o;
}
