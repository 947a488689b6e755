/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/hash.h - a keyed hash for tables whose keys come from peers.
 *
 * Host names, client ids and the like are chosen by whoever sends them; with an unkeyed hash
 * a client could pick names that all land in one bucket and turn lookups linear. SipHash-2-4
 * (Aumasson and Bernstein) with a random key per table prevents that.
 */
#ifndef SL_BASE_HASH_H
#define SL_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define SL_HASH_KEY_BYTES 16

/* SipHash-2-4 of `n` bytes at `data` under `key`. */
uint64_t sl_siphash24(const uint8_t key[SL_HASH_KEY_BYTES], const void *data, size_t n);

/* Fills `key` with random bytes from the kernel (getrandom(2)). Returns 0 or a negative errno. */
SL_MUST_CHECK int sl_hash_key_random(uint8_t key[SL_HASH_KEY_BYTES]);

#endif
