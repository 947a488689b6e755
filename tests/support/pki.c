/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/support/pki.c - throwaway certificates made in memory (see pki.h).
 */
#include "tests/support/pki.h"

#include <stdbool.h>

#include <openssl/evp.h>
#include <openssl/x509v3.h>

#include "certs/ca.h"

#define HOUR 3600L
#define DAY  86400L

/* Serial numbers of certificates made without one: unique in the process. */
static long next_serial = 1;

EVP_PKEY *sl_test_key_new(void)
{
    return EVP_EC_gen("P-256");
}

static bool add_ext(X509 *x, X509V3_CTX *v3, int nid, const char *value)
{
    X509_EXTENSION *ext;
    bool ok;

    if (value == NULL) {
        return true;
    }
    ext = X509V3_EXT_conf_nid(NULL, v3, nid, value);
    if (ext == NULL) {
        return false;
    }
    ok = X509_add_ext(x, ext, -1) == 1;
    X509_EXTENSION_free(ext);
    return ok;
}

X509 *sl_test_cert_make(const struct sl_test_cert_spec *s)
{
    X509 *x = X509_new();
    X509 *issuer;
    X509_NAME *name;
    X509V3_CTX v3;

    if (x == NULL) {
        return NULL;
    }
    issuer = s->issuer != NULL ? s->issuer : x;
    name = X509_get_subject_name(x);
    if (X509_set_version(x, X509_VERSION_3) != 1
        || ASN1_INTEGER_set(X509_get_serialNumber(x), s->serial != 0 ? s->serial : next_serial++)
                   != 1
        || X509_gmtime_adj(X509_getm_notBefore(x), s->not_before_s) == NULL
        || X509_gmtime_adj(X509_getm_notAfter(x), s->not_after_s) == NULL
        || X509_set_pubkey(x, s->key) != 1) {
        goto fail;
    }
    if (s->cn != NULL
        && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)s->cn, -1,
                                      -1, 0)
                   != 1) {
        goto fail;
    }
    if (X509_set_issuer_name(x, X509_get_subject_name(issuer)) != 1) {
        goto fail;
    }
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
    if (!add_ext(x, &v3, NID_basic_constraints, s->basic_constraints)
        || !add_ext(x, &v3, NID_key_usage, s->key_usage)
        || !add_ext(x, &v3, NID_subject_key_identifier, s->subject_key_id)
        || !add_ext(x, &v3, NID_authority_key_identifier, s->authority_key_id)
        || !add_ext(x, &v3, NID_ext_key_usage, s->ext_key_usage)
        || !add_ext(x, &v3, NID_subject_alt_name, s->subject_alt_name)) {
        goto fail;
    }
    if (X509_sign(x, s->issuer_key != NULL ? s->issuer_key : s->key, EVP_sha256()) <= 0) {
        goto fail;
    }
    return x;
fail:
    X509_free(x);
    return NULL;
}

int sl_test_ca_init(struct sl_test_ca *ca, const char *cn)
{
    struct sl_test_cert_spec spec = {
        .cn = cn,
        .not_before_s = -HOUR,
        .not_after_s = DAY,
        .basic_constraints = "critical,CA:TRUE",
        .key_usage = "critical,keyCertSign,cRLSign",
        .subject_key_id = "hash",
    };

    ca->cert = NULL;
    ca->key = sl_test_key_new();
    if (ca->key == NULL) {
        return SL_ECRYPTO;
    }
    spec.key = ca->key;
    ca->cert = sl_test_cert_make(&spec);
    if (ca->cert == NULL) {
        EVP_PKEY_free(ca->key);
        ca->key = NULL;
        return SL_ECRYPTO;
    }
    return 0;
}

void sl_test_ca_finish(struct sl_test_ca *ca)
{
    X509_free(ca->cert);
    EVP_PKEY_free(ca->key);
    ca->cert = NULL;
    ca->key = NULL;
}

X509 *sl_test_ca_issue(const struct sl_test_ca *ca, EVP_PKEY *key, const char *cn, const char *san,
                       long not_before_s, long not_after_s)
{
    const struct sl_test_cert_spec spec = {
        .key = key,
        .cn = cn,
        .issuer = ca->cert,
        .issuer_key = ca->key,
        .not_before_s = not_before_s,
        .not_after_s = not_after_s,
        .basic_constraints = "critical,CA:FALSE",
        .key_usage = "critical,digitalSignature",
        .subject_key_id = "hash",
        .authority_key_id = "keyid:always",
        .ext_key_usage = "serverAuth",
        .subject_alt_name = san != NULL && san[0] != '\0' ? san : NULL,
    };

    return sl_test_cert_make(&spec);
}

int sl_test_ca_trust(const struct sl_test_ca *ca, SSL_CTX *ctx)
{
    return X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca->cert) == 1 ? 0 : SL_ECRYPTO;
}

int sl_test_ctx_serve(SSL_CTX *ctx, X509 *cert, EVP_PKEY *key)
{
    if (SSL_CTX_use_certificate(ctx, cert) != 1 || SSL_CTX_use_PrivateKey(ctx, key) != 1
        || SSL_CTX_check_private_key(ctx) != 1) {
        return SL_ECRYPTO;
    }
    return 0;
}

int sl_test_minter_create(struct sl_minter **out, char *err, size_t errlen)
{
    struct sl_ca *ca = NULL;
    int rc;

    SL_TRY(sl_ca_create(&ca, err, errlen));
    rc = sl_minter_create(ca, out, err, errlen);
    sl_ca_destroy(ca);
    return rc;
}
