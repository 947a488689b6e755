/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/support/hostauth.h - what the fuzz targets of policy/ (fuzz_host, fuzz_authority,
 * fuzz_url, fuzz_auth) check the same way: the normal form of a host, two hosts being the same,
 * an authority written out and parsed again, and a Proxy-Authorization Basic header written from an
 * id and a token to be parsed again. A failed check is an SL_BUG_ON abort, which is what a fuzz
 * target reports.
 */
#ifndef SL_TESTS_SUPPORT_HOSTAUTH_H
#define SL_TESTS_SUPPORT_HOSTAUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/host.h"

/* The same kind, text and address. */
bool sl_test_host_same(const struct sl_host *a, const struct sl_host *b);

/* Aborts unless `h` is in normal form: 1-253 characters, no trailing dot; a DNS name made of
 * [a-z0-9.-] (and '*' when `flags` has SL_HOST_GLOB) without a leading dot and with an
 * all-zero address; an IPv4 or a bracketed IPv6 literal that inet_pton() reads as its address
 * and inet_ntop() writes back unchanged. */
void sl_test_host_check(const struct sl_host *h, unsigned flags);

/* Aborts unless "`h`:`port`" (just the host when `port` is 0) parses back with
 * sl_host_parse_authority() under `flags` to the same host and port. */
void sl_test_authority_round_trip(const struct sl_host *h, uint16_t port, unsigned flags);

/* Writes "Basic " and the base64 (RFC 4648, padded) of "`id`:`token`" to `out` (`cap` bytes).
 * Returns the length; aborts when it does not fit. */
size_t sl_test_basic_header(const char *id, const char *token, char *out, size_t cap);

#endif
