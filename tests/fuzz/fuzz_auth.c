/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_auth.c - the Proxy-Authorization Basic parser of policy/auth on arbitrary
 * bytes, with buffers of the full size and with small ones.
 *
 * Invariants, not just "no crash": an accepted pair is two NUL-terminated, non-empty strings of
 * visible ASCII that fit their caps, the id has no ':', a pair accepted under small caps is the
 * one accepted under large caps, and "Basic " + base64(id:token) parses back to the same pair.
 * sl_auth_equal is reflexive and symmetric on what was parsed.
 */
#include <stdint.h>
#include <string.h>

#include "base/err.h"
#include "base/mem.h"
#include "policy/auth.h"
#include "tests/support/hostauth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Caps of the small run: the first input byte picks them, so the fuzzer reaches the limit. */
#define SMALL_ID_CAP_MAX    9
#define SMALL_TOKEN_CAP_MAX 17

/* Checks a pair that the parser accepted into buffers of `id_cap` and `token_cap` bytes. */
static void check_pair(const char *id, size_t id_cap, const char *token, size_t token_cap)
{
    size_t in = strnlen(id, id_cap);
    size_t tn = strnlen(token, token_cap);

    SL_BUG_ON(in == id_cap || tn == token_cap);
    SL_BUG_ON(in == 0 || tn == 0 || in > SL_AUTH_ID_MAX || tn > SL_AUTH_TOKEN_MAX);
    SL_BUG_ON(strchr(id, ':') != NULL);
    for (size_t i = 0; i < in; i++) {
        SL_BUG_ON(id[i] <= 0x20 || id[i] >= 0x7f);
    }
    for (size_t i = 0; i < tn; i++) {
        SL_BUG_ON(token[i] <= 0x20 || token[i] >= 0x7f);
    }
}

static void check_equal(const char *token, const char *id)
{
    size_t tn = strlen(token);
    size_t in = strlen(id);
    char flipped[SL_AUTH_TOKEN_MAX + 1];
    struct sl_slice t = sl_slice_of(token, tn);
    struct sl_slice f;
    struct sl_slice i = sl_slice_of(id, in);

    SL_BUG_ON(!sl_auth_equal(t, t));
    memcpy(flipped, token, tn + 1);
    flipped[tn - 1] = (char)(flipped[tn - 1] ^ 1);
    f = sl_slice_of(flipped, tn);
    SL_BUG_ON(sl_auth_equal(t, f) || sl_auth_equal(f, t));
    SL_BUG_ON(sl_auth_equal(t, i) != sl_auth_equal(i, t));
    SL_BUG_ON(sl_auth_equal(t, i) != (tn == in && memcmp(token, id, tn) == 0));
    /* A proper prefix is never equal, in either direction. */
    SL_BUG_ON(sl_auth_equal(sl_slice_of(token, tn - 1), t)
              || sl_auth_equal(t, sl_slice_of(token, tn - 1)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char id[SL_AUTH_ID_MAX + 1];
    char token[SL_AUTH_TOKEN_MAX + 1];
    char id2[SL_AUTH_ID_MAX + 1];
    char token2[SL_AUTH_TOKEN_MAX + 1];
    char small_id[SMALL_ID_CAP_MAX];
    char small_token[SMALL_TOKEN_CAP_MAX];
    char header[6 + 4 * ((SL_AUTH_ID_MAX + SL_AUTH_TOKEN_MAX + 2 + 2) / 3) + 1];
    size_t small_id_cap = 1 + (size > 0 ? data[0] % SMALL_ID_CAP_MAX : 0);
    size_t small_token_cap = 1 + (size > 1 ? data[1] % SMALL_TOKEN_CAP_MAX : 0);
    uint8_t *copy = sl_malloc(size > 0 ? size : 1);
    bool big_ok;
    bool small_ok;

    if (copy == NULL) {
        return 0;
    }
    /* An exact-size copy, so that ASan flags a read of even one byte past the input. */
    if (size > 0) {
        memcpy(copy, data, size);
    }
    if (small_id_cap > sizeof(small_id)) {
        small_id_cap = sizeof(small_id);
    }
    if (small_token_cap > sizeof(small_token)) {
        small_token_cap = sizeof(small_token);
    }
    big_ok =
            sl_auth_parse_basic(sl_slice_of(copy, size), id, sizeof(id), token, sizeof(token)) == 0;
    small_ok = sl_auth_parse_basic(sl_slice_of(copy, size), small_id, small_id_cap, small_token,
                                   small_token_cap)
               == 0;
    sl_free(copy);
    if (small_ok) {
        check_pair(small_id, small_id_cap, small_token, small_token_cap);
        /* Smaller buffers never accept what larger ones refuse, nor read it differently. */
        SL_BUG_ON(!big_ok);
        SL_BUG_ON(strcmp(small_id, id) != 0 || strcmp(small_token, token) != 0);
    }
    if (!big_ok) {
        return 0;
    }
    check_pair(id, sizeof(id), token, sizeof(token));
    check_equal(token, id);

    (void)sl_test_basic_header(id, token, header, sizeof(header));
    SL_BUG_ON(sl_auth_parse_basic(sl_slice_str(header), id2, sizeof(id2), token2, sizeof(token2))
              != 0);
    SL_BUG_ON(strcmp(id, id2) != 0 || strcmp(token, token2) != 0);
    return 0;
}
