/* SPDX-License-Identifier: Apache-2.0 */
/*
 * certs/ca.h - the interception CA: create one, write it to a data directory, load it back.
 *
 * The CA is what containers and clients trust so that the proxy can stand in for the hosts they
 * reach (docs/reference/cli.md §1, docs/reference/data.md §2): an ECDSA P-256 key and a self-signed
 * certificate with basicConstraints critical CA:TRUE, pathlen:0 (it signs leaves, never other CAs),
 * keyUsage critical keyCertSign, cRLSign, a subject key identifier, a random 128-bit serial and ten
 * years of validity. Its subject "O=sluice, CN=sluice interception CA <8 hex digits>" tells two
 * installs apart. The certificate starts two days in the past, so that clients whose clock lags
 * accept it and leaves (which start one day back, certs/mint.h) fit inside it.
 *
 * On disk it is two PEM files in one directory: SL_CA_CERT_FILE (mode 0644) and SL_CA_KEY_FILE
 * (mode 0600, unencrypted PKCS#8). A loaded CA may have no key: `sluice ca show` and clients
 * need the certificate alone.
 *
 * An sl_ca is immutable once built, so any thread may read it. Functions that can fail take
 * `char *err, size_t errlen`, a caller buffer that receives one line naming the file and the
 * problem (errlen may be 0 to ignore it).
 *
 * Lifecycle: sl_ca_create() or sl_ca_load() -> sl_ca_write(), sl_ca_cert_pem(),
 * sl_minter_create() ... -> sl_ca_destroy().
 */
#ifndef SL_CERTS_CA_H
#define SL_CERTS_CA_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "base/buf.h"
#include "base/err.h"

/* File names inside a data directory (docs/reference/data.md §2). */
#define SL_CA_CERT_FILE "ca.pem"
#define SL_CA_KEY_FILE  "ca.key"

/* Largest CA file read, in bytes; a PEM certificate or key is a few hundred bytes. */
#define SL_CA_FILE_MAX_BYTES ((size_t)1024 * 1024)

struct sl_ca; /* opaque */

/* Makes a new CA (key and self-signed certificate) in memory. On success `*out` is owned by the
 * caller; on failure nothing is allocated and `*out` is untouched. Returns 0, SL_ENOMEM or
 * SL_ECRYPTO. */
SL_MUST_CHECK int sl_ca_create(struct sl_ca **out, char *err, size_t errlen);

/* Loads the CA certificate from the PEM file `cert_path` (the first certificate in it) and, when
 * `key_path` is not NULL, its private key from the PEM file `key_path` (the two paths may name one
 * file holding both). Checks that the certificate is a CA (basicConstraints CA:TRUE, and a
 * keyUsage, if any, that allows keyCertSign) and that the key belongs to it; encrypted keys are
 * refused rather than prompting for a password. Borrows the paths. On success `*out` is owned by
 * the caller; on failure nothing is allocated, `*out` is untouched and `err` names the file.
 * Returns 0, SL_EIO (missing or unreadable file), SL_EINVAL (malformed, not a CA, key does not
 * match), SL_ETOOBIG (file over SL_CA_FILE_MAX_BYTES) or SL_ENOMEM. */
SL_MUST_CHECK int sl_ca_load(const char *cert_path, const char *key_path, struct sl_ca **out,
                             char *err, size_t errlen);

/* sl_ca_load() of `dir`/SL_CA_CERT_FILE and, when `with_key`, `dir`/SL_CA_KEY_FILE. */
SL_MUST_CHECK int sl_ca_load_dir(const char *dir, bool with_key, struct sl_ca **out, char *err,
                                 size_t errlen);

/* Writes the CA into `dir` as SL_CA_KEY_FILE (0600) and SL_CA_CERT_FILE (0644), whatever the
 * umask. Creates `dir` (0700) when it is missing; its parent must exist. Without `force`, refuses
 * with SL_EEXIST (and `err` names the file) when either file exists already. Each file is
 * written whole to a temporary file in `dir` that has its final mode from the start, synced,
 * renamed over the final name, and the directory is synced last: a crash leaves the old file or
 * the new one, never a torn or world-readable key. The key is renamed into place first; the two
 * renames together are not atomic. Borrows `ca` and `dir`. Returns 0, SL_EEXIST, SL_EINVAL (a CA
 * without key, an empty `dir`), SL_ETOOBIG (path too long), SL_EIO or SL_ECRYPTO. */
SL_MUST_CHECK int sl_ca_write(const struct sl_ca *ca, const char *dir, bool force, char *err,
                              size_t errlen);

/* Appends the certificate in PEM form to `out`. Returns 0, SL_ENOMEM, SL_ETOOBIG (cap of `out`)
 * or SL_ECRYPTO. */
SL_MUST_CHECK int sl_ca_cert_pem(const struct sl_ca *ca, struct sl_buf *out);

/* Appends the certificate's subject on one line ("O=sluice, CN=...") to `out`. Same results as
 * sl_ca_cert_pem(). */
SL_MUST_CHECK int sl_ca_subject(const struct sl_ca *ca, struct sl_buf *out);

/* The certificate; borrowed, valid until sl_ca_destroy(). Never NULL. Callers must not change it
 * (OpenSSL's API takes non-const pointers where it only reads). */
X509 *sl_ca_cert(const struct sl_ca *ca);

/* The private key; borrowed like sl_ca_cert(). NULL when the CA was loaded without its key. */
EVP_PKEY *sl_ca_key(const struct sl_ca *ca);

/* Frees the CA. NULL is a no-op. References taken with X509_up_ref()/EVP_PKEY_up_ref() (the
 * minter's, for one) stay valid. */
void sl_ca_destroy(struct sl_ca *ca);

#endif
