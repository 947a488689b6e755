/* SPDX-License-Identifier: Apache-2.0 */
#include "base/hash.h"

#include <errno.h>
#include <sys/random.h>

static uint64_t rotl64(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

static uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

static void sip_round(uint64_t v[4])
{
    v[0] += v[1];
    v[1] = rotl64(v[1], 13) ^ v[0];
    v[0] = rotl64(v[0], 32);
    v[2] += v[3];
    v[3] = rotl64(v[3], 16) ^ v[2];
    v[0] += v[3];
    v[3] = rotl64(v[3], 21) ^ v[0];
    v[2] += v[1];
    v[1] = rotl64(v[1], 17) ^ v[2];
    v[2] = rotl64(v[2], 32);
}

uint64_t sl_siphash24(const uint8_t key[SL_HASH_KEY_BYTES], const void *data, size_t n)
{
    const uint8_t *p = data;
    uint64_t k0 = load_le64(key);
    uint64_t k1 = load_le64(key + 8);
    uint64_t v[4] = { k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL,
                      k0 ^ 0x6c7967656e657261ULL, k1 ^ 0x7465646279746573ULL };
    uint64_t last = (uint64_t)n << 56;
    size_t i = 0;

    for (; n - i >= 8; i += 8) {
        uint64_t m = load_le64(p + i);

        v[3] ^= m;
        sip_round(v);
        sip_round(v);
        v[0] ^= m;
    }
    for (size_t j = 0; i + j < n; j++) {
        last |= (uint64_t)p[i + j] << (8 * j);
    }
    v[3] ^= last;
    sip_round(v);
    sip_round(v);
    v[0] ^= last;
    v[2] ^= 0xff;
    for (int r = 0; r < 4; r++) {
        sip_round(v);
    }
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

int sl_hash_key_random(uint8_t key[SL_HASH_KEY_BYTES])
{
    size_t got = 0;

    while (got < SL_HASH_KEY_BYTES) {
        ssize_t n = getrandom(key + got, SL_HASH_KEY_BYTES - got, 0);

        if (n == -1) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        got += (size_t)n;
    }
    return 0;
}
