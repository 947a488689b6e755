/* SPDX-License-Identifier: Apache-2.0 */
/*
 * certs/certs_int.h - helpers shared by the files of certs/ and by its unit test, nobody else.
 *
 * The X.509 helpers are defined in certs/ca.c (the CA is built first and with the same tools as
 * the leaves); the hash is defined in certs/cache.c, its only user.
 */
#ifndef SL_CERTS_CERTS_INT_H
#define SL_CERTS_CERTS_INT_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "base/err.h"

/* Writes the message of `fmt` into `err` (nothing when errlen is 0), followed by the reason of
 * the newest OpenSSL error of this thread when there is one, then empties this thread's OpenSSL
 * error queue so that the next operation starts clean. `err` is always NUL-terminated. */
void sl__certs_seterr(char *err, size_t errlen, const char *fmt, ...) SL_PRINTF(3, 4);

/* Returns a new ECDSA P-256 key (the caller owns it), or NULL with the OpenSSL error queued. */
SL_MUST_CHECK EVP_PKEY *sl__certs_gen_p256(void);

/* Gives `x` a random, positive 128-bit serial number (RFC 5280 §4.1.2.2 allows 20 octets).
 * Returns 0, or SL_ECRYPTO when the random generator or OpenSSL fails. */
SL_MUST_CHECK int sl__certs_set_serial(X509 *x);

/* Adds extension `nid` to `x`, written in OpenSSL's configuration syntax `value` (a constant of
 * ours, never input). `issuer` is the issuing certificate, for the authority key identifier;
 * `x` itself when self-signed. `x` needs its public key already (subject key identifier).
 * Borrows both certificates. Returns 0 or SL_ECRYPTO. */
SL_MUST_CHECK int sl__certs_add_ext(X509 *issuer, X509 *x, int nid, const char *value);

#endif
