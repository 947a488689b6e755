/* SPDX-License-Identifier: Apache-2.0 */
/*
 * certs/certs_int.h - helpers shared by the files of certs/ and by its unit test, nobody else.
 *
 * The X.509 and file helpers are defined in certs/ca.c (the CA is built first and with the same
 * tools as the leaves and the control channel's PKI, certs/pki.c); the hash is defined in
 * certs/cache.c, its only user.
 */
#ifndef SL_CERTS_CERTS_INT_H
#define SL_CERTS_CERTS_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "base/err.h"
#include "certs/ca.h"

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

/* sl_ca_create() with the subject "O=sluice, CN=sluice <what> CA <8 hex digits>" (`what` is a
 * constant of ours: "interception", "control channel"). Same results. */
SL_MUST_CHECK int sl__certs_ca_create(const char *what, struct sl_ca **out, char *err,
                                      size_t errlen);

/* Reads the PEM certificate (into `*cert`, `key` NULL) or private key (into `*key`, `cert` NULL)
 * at `path` (at most SL_CA_FILE_MAX_BYTES; an encrypted key is refused). Returns 0, SL_EIO,
 * SL_EINVAL, SL_ETOOBIG or SL_ENOMEM with `err` naming the file. */
SL_MUST_CHECK int sl__certs_load_pem(const char *path, X509 **cert, EVP_PKEY **key, char *err,
                                     size_t errlen);

/* `dir`/`name` into `out`; SL_ETOOBIG when it does not fit. */
SL_MUST_CHECK int sl__certs_join_path(char *out, size_t outlen, const char *dir, const char *name);

/* Makes `dir` (0700) unless it is a directory already. 0 or SL_EIO with `err`. */
SL_MUST_CHECK int sl__certs_ensure_dir(const char *dir, char *err, size_t errlen);

/* 0 when nothing is at `path`; SL_EEXIST ("... exists already") or SL_EIO with `err`. */
SL_MUST_CHECK int sl__certs_check_absent(const char *path, char *err, size_t errlen);

/* Writes `n` bytes to `path` in the directory `dir` as a whole: a temporary file with exactly
 * `mode`, synced, renamed over `path`, then `dir` synced. 0 or SL_EIO with `err`. */
SL_MUST_CHECK int sl__certs_write_atomic(const char *dir, const char *path, mode_t mode,
                                         const void *p, size_t n, char *err, size_t errlen);

/* `key` in PEM (PKCS#8, unencrypted) in a memory BIO that wipes its bytes when freed, or NULL. */
BIO *sl__certs_key_pem(EVP_PKEY *key);

#endif
