/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/support/toyseal.h - a reversible stand-in for the encryption key of control/secrets,
 * for tests and fuzz targets of what seals through a struct sl_env_sealer (environments,
 * resolution): a value sealed under key K is "k<K as two hex digits>:" and then the hex of each
 * byte XOR K. Opening checks the prefix, so a value sealed under another key does not open,
 * and the sealed text is printable ASCII. A toy counts its calls and can be told to fail every
 * seal.
 *
 * The functions have the shapes of sl_seal_fn and sl_open_fn (control/environment.h) without
 * including it, so that this library needs base/ only:
 *   static struct sl_test_toy toy = { .key = 0x5a };
 *   static const struct sl_env_sealer sealer = { sl_test_toy_seal, sl_test_toy_open, &toy };
 */
#ifndef SL_TESTS_SUPPORT_TOYSEAL_H
#define SL_TESTS_SUPPORT_TOYSEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

struct sl_test_toy {
    uint8_t key;
    /* Every seal fails with SL_ECRYPTO. */
    bool broken;
    /* Seals and opens so far (unsigned: a long fuzz run wraps them around). */
    unsigned long seals;
    unsigned long opens;
};

/* Seals `n` bytes at `p` under the toy `arg` (a struct sl_test_toy) into `out`. 0, SL_ECRYPTO
 * when the toy is broken, or `out`'s error. */
int sl_test_toy_seal(void *arg, const void *p, size_t n, struct sl_buf *out);

/* Opens `n` bytes of sealed text into `out`. 0, SL_ECRYPTO when it was not sealed under this
 * toy's key (or is not toy text at all), or `out`'s error. */
int sl_test_toy_open(void *arg, const char *sealed, size_t n, struct sl_buf *out);

#endif
