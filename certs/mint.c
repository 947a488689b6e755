/* SPDX-License-Identifier: Apache-2.0 */
#include "certs/mint.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "base/mem.h"
#include "certs/certs_int.h"

#define SECONDS_PER_DAY 86400

struct sl_minter {
    /* The issuing certificate; our own reference. */
    X509 *ca_cert;
    /* The CA key that signs every leaf; our own reference. */
    EVP_PKEY *ca_key;
    /* The P-256 key every leaf certifies; owned (leaves that need it take their own reference). */
    EVP_PKEY *leaf_key;
};

enum host_kind {
    HOST_DNS = 0,
    HOST_IPV4,
    HOST_IPV6,
};

int sl_minter_create(const struct sl_ca *ca, struct sl_minter **out, char *err, size_t errlen)
{
    X509 *cert = sl_ca_cert(ca);
    EVP_PKEY *key = sl_ca_key(ca);
    struct sl_minter *m;

    if (key == NULL) {
        sl__certs_seterr(err, errlen, "cannot mint leaves: the CA was loaded without its key");
        return SL_EINVAL;
    }
    ERR_clear_error();
    if (X509_get0_subject_key_id(cert) == NULL) {
        sl__certs_seterr(err, errlen,
                         "cannot mint leaves: the CA certificate has no subject key identifier");
        return SL_EINVAL;
    }
    m = sl_calloc(1, sizeof(*m));
    if (m == NULL) {
        sl__certs_seterr(err, errlen, "cannot create the minter: out of memory");
        return SL_ENOMEM;
    }
    m->leaf_key = sl__certs_gen_p256();
    if (m->leaf_key == NULL) {
        sl__certs_seterr(err, errlen, "cannot generate the leaf key");
        sl_free(m);
        return SL_ECRYPTO;
    }
    if (X509_up_ref(cert) != 1) {
        goto fail_crypto;
    }
    m->ca_cert = cert;
    if (EVP_PKEY_up_ref(key) != 1) {
        goto fail_crypto;
    }
    m->ca_key = key;
    *out = m;
    return 0;
fail_crypto:
    sl__certs_seterr(err, errlen, "cannot create the minter");
    sl_minter_destroy(m);
    return SL_ECRYPTO;
}

void sl_minter_destroy(struct sl_minter *m)
{
    if (m == NULL) {
        return;
    }
    X509_free(m->ca_cert);
    EVP_PKEY_free(m->ca_key);
    EVP_PKEY_free(m->leaf_key);
    sl_free(m);
}

EVP_PKEY *sl_minter_leaf_key(const struct sl_minter *m)
{
    return m->leaf_key;
}

static bool is_ldh(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-';
}

/* docs/reference/proxy.md §4.3: labels of 1-63 of a-z 0-9 '-', not starting or ending with '-'.
 * Uppercase is refused rather than folded: callers normalise, and a second spelling would be a
 * second key. */
static bool is_dns_name(const char *host, size_t n)
{
    size_t label = 0;

    for (size_t i = 0; i < n; i++) {
        char ch = host[i];

        if (ch == '.') {
            if (label == 0 || host[i - 1] == '-') {
                return false;
            }
            label = 0;
            continue;
        }
        if (!is_ldh(ch) || (label == 0 && ch == '-') || ++label > 63) {
            return false;
        }
    }
    return label > 0 && host[n - 1] != '-';
}

/* Returns the kind of `host` and, for an IP literal, its bytes in `ip` (`*iplen` of them); or
 * SL_EINVAL. */
static int classify_host(const char *host, unsigned char ip[16], size_t *iplen)
{
    size_t n = strnlen(host, SL_MINT_HOST_MAX + 1);

    if (n == 0 || n > SL_MINT_HOST_MAX) {
        return SL_EINVAL;
    }
    /* inet_pton() takes exactly four decimal parts, never 0x7f.1 or 2130706433. */
    if (inet_pton(AF_INET, host, ip) == 1) {
        *iplen = 4;
        return HOST_IPV4;
    }
    if (strchr(host, ':') != NULL && inet_pton(AF_INET6, host, ip) == 1) {
        *iplen = 16;
        return HOST_IPV6;
    }
    return is_dns_name(host, n) ? HOST_DNS : SL_EINVAL;
}

/* One GENERAL_NAME built by hand rather than from "DNS:<host>" text, so that no byte of the
 * host is ever parsed as configuration syntax. */
static int add_san(X509 *x, const char *host, int kind, const unsigned char *ip, size_t iplen,
                   bool critical)
{
    GENERAL_NAMES *names = NULL;
    GENERAL_NAME *gn = NULL;
    ASN1_STRING *s = NULL;
    int rc = SL_ECRYPTO;

    names = GENERAL_NAMES_new();
    gn = GENERAL_NAME_new();
    s = kind == HOST_DNS ? ASN1_IA5STRING_new() : ASN1_OCTET_STRING_new();
    if (names == NULL || gn == NULL || s == NULL) {
        goto out;
    }
    if (kind == HOST_DNS) {
        if (ASN1_STRING_set(s, host, -1) != 1) {
            goto out;
        }
        GENERAL_NAME_set0_value(gn, GEN_DNS, s);
    } else {
        if (ASN1_STRING_set(s, ip, (int)iplen) != 1) {
            goto out;
        }
        GENERAL_NAME_set0_value(gn, GEN_IPADD, s);
    }
    s = NULL; /* owned by gn */
    if (sk_GENERAL_NAME_push(names, gn) <= 0) {
        goto out;
    }
    gn = NULL; /* owned by names */
    if (X509_add1_ext_i2d(x, NID_subject_alt_name, names, critical ? 1 : 0, X509V3_ADD_DEFAULT)
        == 1) {
        rc = 0;
    }
out:
    ASN1_STRING_free(s);
    GENERAL_NAME_free(gn);
    GENERAL_NAMES_free(names);
    return rc;
}

/* From one day back to SL_MINT_MAX_DAYS ahead, cut to the CA's validity. */
static int set_validity(X509 *x, X509 *ca, time_t now, char *err, size_t errlen)
{
    const ASN1_TIME *ca_from = X509_get0_notBefore(ca);
    const ASN1_TIME *ca_to = X509_get0_notAfter(ca);
    time_t from = now - (time_t)SL_MINT_BACKDATE_DAYS * SECONDS_PER_DAY;
    time_t to = now + (time_t)SL_MINT_MAX_DAYS * SECONDS_PER_DAY;
    int c_from = ASN1_TIME_cmp_time_t(ca_from, now);
    int c_to = ASN1_TIME_cmp_time_t(ca_to, now);
    bool ok;

    if (c_from == -2 || c_to == -2) {
        sl__certs_seterr(err, errlen, "cannot read the validity of the CA certificate");
        return SL_ECRYPTO;
    }
    if (c_from > 0) {
        sl__certs_seterr(err, errlen, "cannot mint: the CA certificate is not valid yet");
        return SL_EINVAL;
    }
    if (c_to < 0) {
        sl__certs_seterr(err, errlen, "cannot mint: the CA certificate has expired");
        return SL_EINVAL;
    }
    if (ASN1_TIME_cmp_time_t(ca_from, from) > 0) {
        ok = X509_set1_notBefore(x, ca_from) == 1;
    } else {
        ok = ASN1_TIME_set(X509_getm_notBefore(x), from) != NULL;
    }
    if (ok && ASN1_TIME_cmp_time_t(ca_to, to) < 0) {
        ok = X509_set1_notAfter(x, ca_to) == 1;
    } else if (ok) {
        ok = ASN1_TIME_set(X509_getm_notAfter(x), to) != NULL;
    }
    if (!ok) {
        sl__certs_seterr(err, errlen, "cannot set the validity of a leaf");
        return SL_ECRYPTO;
    }
    return 0;
}

static int build_leaf(const struct sl_minter *m, X509 *x, const char *host, int kind,
                      const unsigned char *ip, size_t iplen)
{
    bool has_cn = strlen(host) <= SL_MINT_CN_MAX;

    SL_ENSURE(X509_set_version(x, X509_VERSION_3) == 1, SL_ECRYPTO);
    SL_TRY(sl__certs_set_serial(x));
    if (has_cn) {
        SL_ENSURE(X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                                             (const unsigned char *)host, -1, -1, 0)
                          == 1,
                  SL_ECRYPTO);
    }
    SL_ENSURE(X509_set_issuer_name(x, X509_get_subject_name(m->ca_cert)) == 1, SL_ECRYPTO);
    SL_ENSURE(X509_set_pubkey(x, m->leaf_key) == 1, SL_ECRYPTO);
    SL_TRY(sl__certs_add_ext(m->ca_cert, x, NID_basic_constraints, "critical,CA:FALSE"));
    SL_TRY(sl__certs_add_ext(m->ca_cert, x, NID_key_usage, "critical,digitalSignature"));
    SL_TRY(sl__certs_add_ext(m->ca_cert, x, NID_ext_key_usage, "serverAuth"));
    SL_TRY(sl__certs_add_ext(m->ca_cert, x, NID_subject_key_identifier, "hash"));
    SL_TRY(sl__certs_add_ext(m->ca_cert, x, NID_authority_key_identifier, "keyid:always"));
    SL_TRY(add_san(x, host, kind, ip, iplen, !has_cn));
    SL_ENSURE(X509_sign(x, m->ca_key, EVP_sha256()) > 0, SL_ECRYPTO);
    return 0;
}

/* Replaces `*x` by the certificate read back from its own DER. A certificate built in memory
 * has no saved encoding, so OpenSSL encodes all of it again each time it is serialised, twice
 * in every handshake that sends it (2.5 % of a full handshake's instructions); one read from
 * DER keeps the bytes of its signed part and copies them. Then computes OpenSSL's cache of
 * decoded extensions, while this thread is the only owner: threads that later share the
 * certificate only read it. */
static int reload_from_der(X509 **x)
{
    unsigned char *der = NULL;
    const unsigned char *p;
    X509 *y;
    int n;

    n = i2d_X509(*x, &der);
    if (n <= 0) {
        return SL_ECRYPTO;
    }
    p = der;
    y = d2i_X509(NULL, &p, n);
    OPENSSL_free(der);
    if (y == NULL) {
        return SL_ECRYPTO;
    }
    (void)X509_check_purpose(y, -1, 0);
    X509_free(*x);
    *x = y;
    return 0;
}

int sl_minter_mint_at(const struct sl_minter *m, const char *host, time_t now, X509 **out,
                      char *err, size_t errlen)
{
    unsigned char ip[16];
    size_t iplen = 0;
    X509 *x;
    int kind;
    int rc;

    kind = classify_host(host, ip, &iplen);
    if (kind < 0) {
        /* The host is not echoed: it may hold any byte a client sent. */
        sl__certs_seterr(err, errlen,
                         "cannot mint: the host is not a lowercase DNS name or an IP literal");
        return SL_EINVAL;
    }
    ERR_clear_error();
    x = X509_new();
    if (x == NULL) {
        sl__certs_seterr(err, errlen, "cannot mint a certificate for %s: out of memory", host);
        return SL_ENOMEM;
    }
    rc = set_validity(x, m->ca_cert, now, err, errlen);
    if (rc < 0) {
        goto fail;
    }
    rc = build_leaf(m, x, host, kind, ip, iplen);
    if (rc == 0) {
        rc = reload_from_der(&x);
    }
    if (rc < 0) {
        sl__certs_seterr(err, errlen, "cannot mint a certificate for %s", host);
        goto fail;
    }
    *out = x;
    return 0;
fail:
    X509_free(x);
    return rc;
}

int sl_minter_mint(const struct sl_minter *m, const char *host, X509 **out, char *err,
                   size_t errlen)
{
    return sl_minter_mint_at(m, host, time(NULL), out, err, errlen);
}
