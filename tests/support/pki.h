/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/support/pki.h - throwaway certificates for unit tests and fuzz targets, made in memory
 * with OpenSSL alone (not with the certs/ code under test): P-256 keys, a test CA and the leaves
 * it signs, any certificate shaped by hand to break one rule at a time, a server context serving
 * a leaf; and the interception CA of certs/ with its minter, for tests of what sits on top.
 *
 * Lifecycle: sl_test_ca_init() -> sl_test_ca_issue() / sl_test_ca_trust() -> sl_test_ca_finish().
 * Certificates and keys returned are new references the caller frees (X509_free,
 * EVP_PKEY_free). Nothing here asserts: a failure is a NULL or a negative return for the
 * caller to check (cmocka tests assert, fuzz targets SL_BUG_ON).
 */
#ifndef SL_TESTS_SUPPORT_PKI_H
#define SL_TESTS_SUPPORT_PKI_H

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "base/err.h"
#include "certs/mint.h"

/* A new P-256 key, or NULL. */
EVP_PKEY *sl_test_key_new(void);

/* What sl_test_cert_make() puts in a certificate (version 3, SHA-256 signature). The
 * extensions are in OpenSSL's configuration syntax ("critical,CA:TRUE", "DNS:a.test,IP:::1"),
 * added in the order of the fields, each left out when NULL. */
struct sl_test_cert_spec {
    /* The subject's key (borrowed); its public half goes in the certificate. */
    EVP_PKEY *key;
    /* The subject's commonName; NULL: an empty subject. */
    const char *cn;
    /* The signer (borrowed); NULL: self-signed with `key`. */
    X509 *issuer;
    EVP_PKEY *issuer_key;
    /* 0: the next number of a process-wide counter (1, 2, ...). */
    long serial;
    /* Validity, in seconds from now (negative: in the past). */
    long not_before_s;
    long not_after_s;
    const char *basic_constraints;
    const char *key_usage;
    const char *subject_key_id;
    const char *authority_key_id;
    const char *ext_key_usage;
    const char *subject_alt_name;
};

/* Makes and signs the certificate `s` describes. Returns a new reference, or NULL. */
X509 *sl_test_cert_make(const struct sl_test_cert_spec *s);

/* A test CA: a P-256 key and a self-signed certificate (basicConstraints critical CA:TRUE,
 * keyUsage critical keyCertSign and cRLSign, a subject key identifier), valid from an hour ago
 * for a day. Both owned. */
struct sl_test_ca {
    EVP_PKEY *key;
    X509 *cert;
};

/* Makes the CA named `cn` in caller storage. 0, or SL_ECRYPTO (nothing left to finish). */
SL_MUST_CHECK int sl_test_ca_init(struct sl_test_ca *ca, const char *cn);

/* Frees what sl_test_ca_init() made; a zeroed CA is a no-op. */
void sl_test_ca_finish(struct sl_test_ca *ca);

/* A TLS server leaf for `key` (borrowed) signed by `ca`: basicConstraints critical CA:FALSE,
 * keyUsage critical digitalSignature, both key identifiers, extendedKeyUsage serverAuth, subject
 * CN `cn`, subjectAltName `san` (an empty string: none, as old servers do), valid from
 * now+`not_before_s` to now+`not_after_s`. Returns a new reference, or NULL. */
X509 *sl_test_ca_issue(const struct sl_test_ca *ca, EVP_PKEY *key, const char *cn, const char *san,
                       long not_before_s, long not_after_s);

/* Adds the CA to the trust store of `ctx`. 0, or SL_ECRYPTO. */
SL_MUST_CHECK int sl_test_ca_trust(const struct sl_test_ca *ca, SSL_CTX *ctx);

/* Makes the server context `ctx` serve `cert` with `key` (both borrowed; the context takes its
 * own references) and checks that they match. 0, or SL_ECRYPTO. */
SL_MUST_CHECK int sl_test_ctx_serve(SSL_CTX *ctx, X509 *cert, EVP_PKEY *key);

/* A fresh interception CA (sl_ca_create(), in memory only) and its minter in `*out`; the minter
 * holds its own references, so the CA is not kept. 0, or the error of certs/, with its text in
 * `err`. */
SL_MUST_CHECK int sl_test_minter_create(struct sl_minter **out, char *err, size_t errlen);

#endif
