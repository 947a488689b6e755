/* SPDX-License-Identifier: Apache-2.0 */
/*
 * certs/mint.h - forges the leaf certificate the proxy shows a client for an intercepted host.
 *
 * A leaf names one host: a DNS name in a subjectAltName dNSName, or an IPv4/IPv6 literal in an
 * iPAddress entry. It carries what strict verifiers (OpenSSL's X509_STRICT, Python 3.13's
 * default context) demand: basicConstraints critical CA:FALSE, keyUsage critical
 * digitalSignature, extendedKeyUsage serverAuth, subject and authority key identifiers. Its
 * subject is CN=<host> when the host fits the 64-character limit of a CN, and empty otherwise
 * (the subjectAltName is then critical, RFC 5280 §4.2.1.6). It is valid from one day back (clocks
 * that lag) to at most SL_MINT_MAX_DAYS ahead, clamped inside the CA's own validity, with a random
 * 128-bit serial, signed with SHA-256 by the CA key.
 *
 * Every leaf of a minter shares one P-256 key, made when the minter is created: a new key per
 * host would cost more than the signature, and the key never leaves the process.
 *
 * A minter is immutable once created, so any number of threads may mint with it at once.
 *
 * Lifecycle: sl_minter_create() once at start -> sl_minter_mint() from any thread ->
 * sl_minter_destroy() after the last mint. Minted certificates and the leaf key are
 * reference-counted by OpenSSL and outlive the minter.
 */
#ifndef SL_CERTS_MINT_H
#define SL_CERTS_MINT_H

#include <stddef.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "base/err.h"
#include "certs/ca.h"

/* Longest DNS name accepted, in characters (RFC 1035 §2.3.4, without the trailing dot). */
#define SL_MINT_HOST_MAX 253
/* Longest host that also goes in the subject CN (ub-common-name, RFC 5280 appendix A). */
#define SL_MINT_CN_MAX 64
/* A leaf starts this many days before the moment it is minted... */
#define SL_MINT_BACKDATE_DAYS 1
/* ...and ends at most this many days after it. */
#define SL_MINT_MAX_DAYS 90

struct sl_minter; /* opaque */

/* Creates a minter that signs with `ca`, which must hold its key and have a subject key
 * identifier (leaves copy it into their authority key identifier). Generates the shared leaf key.
 * Borrows `ca`: the minter takes its own references to the CA certificate and key, so `ca` may be
 * destroyed afterwards. On success `*out` is owned by the caller; on failure nothing is allocated.
 * Returns 0, SL_EINVAL (no key, no subject key identifier), SL_ENOMEM or SL_ECRYPTO. */
SL_MUST_CHECK int sl_minter_create(const struct sl_ca *ca, struct sl_minter **out, char *err,
                                   size_t errlen);

/* Frees the minter. NULL is a no-op. */
void sl_minter_destroy(struct sl_minter *m);

/* The key every leaf certifies; borrowed, valid until sl_minter_destroy() (take a reference with
 * EVP_PKEY_up_ref() to keep it longer). */
EVP_PKEY *sl_minter_leaf_key(const struct sl_minter *m);

/* Mints a leaf for `host`, now. `host` is a normalised name: a lowercase DNS name (labels of 1-63
 * characters of a-z, 0-9 and '-', not starting or ending with '-', at most SL_MINT_HOST_MAX in
 * all, no trailing dot), a dotted-quad IPv4 address or an IPv6 address without brackets. Borrows
 * `host`. On success `*out` is a new certificate owned by the caller (X509_free()). Returns 0,
 * SL_EINVAL (host not acceptable, CA expired or not yet valid), SL_ENOMEM or SL_ECRYPTO. May be
 * called from any thread. */
SL_MUST_CHECK int sl_minter_mint(const struct sl_minter *m, const char *host, X509 **out, char *err,
                                 size_t errlen);

/* sl_minter_mint() as if the time were `now` (seconds since the epoch): for tests, and for
 * callers that read the clock once for many mints. */
SL_MUST_CHECK int sl_minter_mint_at(const struct sl_minter *m, const char *host, time_t now,
                                    X509 **out, char *err, size_t errlen);

#endif
