/* SPDX-License-Identifier: Apache-2.0 */
#include "certs/pki.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "base/buf.h"
#include "base/mem.h"
#include "base/time.h"
#include "certs/ca.h"
#include "certs/certs_int.h"

#define PATH_BYTES 4096
/* A leaf starts one day back, for clocks that lag (as minted leaves do, certs/mint.h). */
#define LEAF_BACKDATE_DAYS 1
/* Most leaves `pki list` reads. */
#define LIST_MAX 100000

static const char *kind_name(enum sl_pki_kind kind)
{
    switch (kind) {
    case SL_PKI_PROXY:
        return "proxy";
    case SL_PKI_ENGINE:
        return "engine";
    case SL_PKI_CONTROL:
    default:
        return "control";
    }
}

/* ---- Checks of what a person typed ---- */

static bool name_is_valid(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > SL_PKI_NAME_MAX || s[0] == '.' || s[0] == '-') {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.'
              || c == '_' || c == '-')) {
            return false;
        }
    }
    return true;
}

/* A DNS name: labels of 1-63 letters, digits and '-' (not at either end), 253 in all. */
static bool dns_is_valid(const char *s)
{
    size_t n = strlen(s);
    size_t label = 0;

    if (n == 0 || n > 253 || s[n - 1] == '.') {
        return false;
    }
    for (size_t i = 0; i <= n; i++) {
        char c = s[i];

        if (c == '.' || c == '\0') {
            if (label == 0 || label > 63 || s[i - 1] == '-') {
                return false;
            }
            label = 0;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
              || (c == '-' && label > 0))) {
            return false;
        }
        label++;
    }
    return true;
}

static bool ip_is_valid(const char *s)
{
    unsigned char a[16];

    return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

static int check_request(const struct sl_pki_request *r, char *err, size_t errlen)
{
    if (!name_is_valid(r->name)) {
        sl__certs_seterr(err, errlen,
                         "invalid name \"%.80s\": 1-%d letters, digits, '.', '_' or '-', not "
                         "starting with '.' or '-'",
                         r->name, SL_PKI_NAME_MAX);
        return SL_EINVAL;
    }
    if (r->days > SL_PKI_DAYS_MAX) {
        sl__certs_seterr(err, errlen, "invalid validity %u days: at most %d", r->days,
                         SL_PKI_DAYS_MAX);
        return SL_EINVAL;
    }
    if (r->n_ips + r->n_dns > SL_PKI_SAN_MAX) {
        sl__certs_seterr(err, errlen, "too many --ip and --dns: at most %d in all", SL_PKI_SAN_MAX);
        return SL_EINVAL;
    }
    if (r->kind == SL_PKI_CONTROL && r->n_ips + r->n_dns > 0) {
        sl__certs_seterr(err, errlen,
                         "--ip and --dns are for proxy and engine certificates; the control "
                         "plane's names nobody dials");
        return SL_EINVAL;
    }
    if (r->kind == SL_PKI_ENGINE && r->n_ips + r->n_dns == 0) {
        sl__certs_seterr(err, errlen,
                         "an engine certificate needs at least one --ip or --dns: the address "
                         "the control plane dials (the node's address, its Status.Addr)");
        return SL_EINVAL;
    }
    if (r->kind == SL_PKI_PROXY && r->n_ips + r->n_dns == 0) {
        sl__certs_seterr(err, errlen,
                         "a proxy certificate needs at least one --ip or --dns: the address the "
                         "control plane dials (the host of its --proxy-admin-url)");
        return SL_EINVAL;
    }
    for (size_t i = 0; i < r->n_ips; i++) {
        if (!ip_is_valid(r->ips[i])) {
            sl__certs_seterr(err, errlen, "invalid --ip \"%.80s\": not an IPv4 or IPv6 address",
                             r->ips[i]);
            return SL_EINVAL;
        }
    }
    for (size_t i = 0; i < r->n_dns; i++) {
        if (!dns_is_valid(r->dns[i])) {
            sl__certs_seterr(err, errlen, "invalid --dns \"%.80s\": not a DNS name", r->dns[i]);
            return SL_EINVAL;
        }
    }
    return 0;
}

/* ---- Serials ---- */

/* The serial of `x` in uppercase hex without leading zeros. */
static int serial_hex(const ASN1_INTEGER *serial, char out[SL_PKI_SERIAL_HEX_MAX + 1])
{
    BIGNUM *bn = ASN1_INTEGER_to_BN(serial, NULL);
    char *hex = bn != NULL ? BN_bn2hex(bn) : NULL;
    int rc = SL_ECRYPTO;

    if (hex != NULL && strlen(hex) <= SL_PKI_SERIAL_HEX_MAX && hex[0] != '-') {
        memcpy(out, hex, strlen(hex) + 1);
        rc = 0;
    }
    OPENSSL_free(hex);
    BN_free(bn);
    return rc;
}

/* A serial as a person types it: hex digits, colons allowed, any case. */
static ASN1_INTEGER *parse_serial(const char *s)
{
    char hex[SL_PKI_SERIAL_HEX_MAX + 1];
    size_t n = 0;
    BIGNUM *bn = NULL;
    ASN1_INTEGER *out = NULL;

    for (const char *p = s; *p != '\0'; p++) {
        if (*p == ':') {
            continue;
        }
        if (n >= SL_PKI_SERIAL_HEX_MAX
            || !((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')
                 || (*p >= 'A' && *p <= 'F'))) {
            return NULL;
        }
        hex[n++] = *p;
    }
    hex[n] = '\0';
    if (n == 0 || BN_hex2bn(&bn, hex) != (int)n) {
        BN_free(bn);
        return NULL;
    }
    out = BN_to_ASN1_INTEGER(bn, NULL);
    BN_free(bn);
    return out;
}

/* ---- The CRL ---- */

static int crl_path(const char *dir, char out[PATH_BYTES], char *err, size_t errlen)
{
    if (sl__certs_join_path(out, PATH_BYTES, dir, SL_PKI_CRL_FILE) < 0) {
        sl__certs_seterr(err, errlen, "the directory name %.80s... is too long", dir);
        return SL_ETOOBIG;
    }
    return 0;
}

/* Loads `dir`/crl.pem and checks that the CA signed it. */
static int load_crl(const char *dir, const struct sl_ca *ca, X509_CRL **out, char *err,
                    size_t errlen)
{
    char path[PATH_BYTES];
    X509_CRL *crl;
    BIO *bio;

    SL_TRY(crl_path(dir, path, err, errlen));
    ERR_clear_error();
    bio = BIO_new_file(path, "r");
    if (bio == NULL) {
        sl__certs_seterr(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return SL_EIO;
    }
    crl = PEM_read_bio_X509_CRL(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (crl == NULL) {
        sl__certs_seterr(err, errlen, "%s: no valid PEM CRL found", path);
        return SL_EINVAL;
    }
    if (X509_CRL_verify(crl, X509_get0_pubkey(sl_ca_cert(ca))) != 1) {
        sl__certs_seterr(err, errlen, "%s: not signed by the CA of %s", path, dir);
        X509_CRL_free(crl);
        return SL_EINVAL;
    }
    *out = crl;
    return 0;
}

/* The CRL number after `old`'s (1 without one). */
static ASN1_INTEGER *next_crl_number(const X509_CRL *old)
{
    ASN1_INTEGER *n = old != NULL ? X509_CRL_get_ext_d2i(old, NID_crl_number, NULL, NULL) : NULL;
    BIGNUM *bn = n != NULL ? ASN1_INTEGER_to_BN(n, NULL) : BN_new();
    ASN1_INTEGER *out = NULL;

    if (bn != NULL && BN_add_word(bn, 1) == 1) {
        out = BN_to_ASN1_INTEGER(bn, NULL);
    }
    BN_free(bn);
    ASN1_INTEGER_free(n);
    return out;
}

static int build_crl(X509_CRL *crl, const struct sl_ca *ca, X509_CRL *old, ASN1_INTEGER *revoke,
                     time_t now)
{
    X509 *cacert = sl_ca_cert(ca);
    STACK_OF(X509_REVOKED) *prev = old != NULL ? X509_CRL_get_REVOKED(old) : NULL;
    ASN1_TIME *t = X509_time_adj_ex(NULL, 0, 0, &now);
    ASN1_INTEGER *number = next_crl_number(old);
    X509_EXTENSION *aki = NULL;
    X509V3_CTX ctx;
    int rc = SL_ECRYPTO;

    if (t == NULL || number == NULL) {
        goto out;
    }
    if (X509_CRL_set_version(crl, X509_CRL_VERSION_2) != 1
        || X509_CRL_set_issuer_name(crl, X509_get_subject_name(cacert)) != 1
        || X509_CRL_set1_lastUpdate(crl, t) != 1
        || X509_CRL_set1_nextUpdate(crl, X509_get0_notAfter(cacert)) != 1) {
        goto out;
    }
    for (int i = 0; i < sk_X509_REVOKED_num(prev); i++) {
        X509_REVOKED *r = X509_REVOKED_dup(sk_X509_REVOKED_value(prev, i));

        if (r == NULL || X509_CRL_add0_revoked(crl, r) != 1) {
            X509_REVOKED_free(r);
            goto out;
        }
    }
    if (revoke != NULL) {
        X509_REVOKED *r = X509_REVOKED_new();

        if (r == NULL || X509_REVOKED_set_serialNumber(r, revoke) != 1
            || X509_REVOKED_set_revocationDate(r, t) != 1 || X509_CRL_add0_revoked(crl, r) != 1) {
            X509_REVOKED_free(r);
            goto out;
        }
    }
    X509V3_set_ctx(&ctx, cacert, NULL, NULL, crl, 0);
    aki = X509V3_EXT_conf_nid(NULL, &ctx, NID_authority_key_identifier, "keyid:always");
    if (aki == NULL || X509_CRL_add_ext(crl, aki, -1) != 1
        || X509_CRL_add1_ext_i2d(crl, NID_crl_number, number, 0, 0) != 1 || X509_CRL_sort(crl) != 1
        || X509_CRL_sign(crl, sl_ca_key(ca), EVP_sha256()) <= 0) {
        goto out;
    }
    rc = 0;
out:
    X509_EXTENSION_free(aki);
    ASN1_INTEGER_free(number);
    ASN1_TIME_free(t);
    return rc;
}

/* Signs a new CRL holding `old`'s entries (NULL: none) and `revoke` (NULL: none) and writes it
 * over `dir`/crl.pem. */
static int write_crl(const char *dir, const struct sl_ca *ca, X509_CRL *old, ASN1_INTEGER *revoke,
                     char *err, size_t errlen)
{
    char path[PATH_BYTES];
    X509_CRL *crl = X509_CRL_new();
    BIO *bio = BIO_new(BIO_s_mem());
    char *data = NULL;
    long n = 0;
    int rc;

    rc = crl_path(dir, path, err, errlen);
    if (rc == 0 && (crl == NULL || bio == NULL)) {
        rc = SL_ENOMEM;
        sl__certs_seterr(err, errlen, "cannot build the CRL: out of memory");
    }
    if (rc == 0) {
        ERR_clear_error();
        rc = build_crl(crl, ca, old, revoke, time(NULL));
        if (rc == 0 && PEM_write_bio_X509_CRL(bio, crl) == 1) {
            n = BIO_get_mem_data(bio, &data);
        }
        if (rc < 0 || n <= 0 || data == NULL) {
            sl__certs_seterr(err, errlen, "cannot sign the CRL %s", path);
            rc = SL_ECRYPTO;
        }
    }
    if (rc == 0) {
        rc = sl__certs_write_atomic(dir, path, 0644, data, (size_t)n, err, errlen);
    }
    BIO_free(bio);
    X509_CRL_free(crl);
    return rc;
}

/* ---- init ---- */

static int issued_dir(const char *dir, char out[PATH_BYTES], char *err, size_t errlen)
{
    if (sl__certs_join_path(out, PATH_BYTES, dir, SL_PKI_ISSUED_DIR) < 0) {
        sl__certs_seterr(err, errlen, "the directory name %.80s... is too long", dir);
        return SL_ETOOBIG;
    }
    return 0;
}

int sl_pki_init(const char *dir, char *err, size_t errlen)
{
    char issued[PATH_BYTES];
    struct sl_ca *ca = NULL;
    int rc;

    SL_TRY(issued_dir(dir, issued, err, errlen));
    rc = sl__certs_ca_create("control channel", &ca, err, errlen);
    if (rc == 0) {
        rc = sl_ca_write(ca, dir, false, err, errlen);
    }
    if (rc == 0) {
        rc = sl__certs_ensure_dir(issued, err, errlen);
    }
    if (rc == 0) {
        rc = write_crl(dir, ca, NULL, NULL, err, errlen);
    }
    sl_ca_destroy(ca);
    return rc;
}

/* ---- issue ---- */

static int add_name(X509_NAME *n, const char *field, const char *value)
{
    return X509_NAME_add_entry_by_txt(n, field, MBSTRING_ASC, (const unsigned char *)value, -1, -1,
                                      0)
                           == 1
                   ? 0
                   : SL_ECRYPTO;
}

static int push_general_name(GENERAL_NAMES *gens, int type, const char *value)
{
    GENERAL_NAME *g = GENERAL_NAME_new();
    ASN1_STRING *s = NULL;

    if (g == NULL) {
        return SL_ENOMEM;
    }
    if (type == GEN_IPADD) {
        s = a2i_IPADDRESS(value);
    } else {
        s = ASN1_IA5STRING_new();
        if (s != NULL && ASN1_STRING_set(s, value, (int)strlen(value)) != 1) {
            ASN1_STRING_free(s);
            s = NULL;
        }
    }
    if (s == NULL) {
        GENERAL_NAME_free(g);
        return SL_ECRYPTO;
    }
    GENERAL_NAME_set0_value(g, type, s);
    if (sk_GENERAL_NAME_push(gens, g) <= 0) {
        GENERAL_NAME_free(g);
        return SL_ENOMEM;
    }
    return 0;
}

static int add_san(X509 *x, const struct sl_pki_request *r)
{
    GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
    int rc = gens != NULL ? 0 : SL_ENOMEM;

    for (size_t i = 0; rc == 0 && i < r->n_ips; i++) {
        rc = push_general_name(gens, GEN_IPADD, r->ips[i]);
    }
    for (size_t i = 0; rc == 0 && i < r->n_dns; i++) {
        rc = push_general_name(gens, GEN_DNS, r->dns[i]);
    }
    if (rc == 0 && X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0, X509V3_ADD_DEFAULT) != 1) {
        rc = SL_ECRYPTO;
    }
    GENERAL_NAMES_free(gens);
    return rc;
}

static int build_leaf(X509 *x, EVP_PKEY *key, const struct sl_ca *ca,
                      const struct sl_pki_request *r, time_t now)
{
    X509 *cacert = sl_ca_cert(ca);
    X509_NAME *name = X509_get_subject_name(x);
    unsigned days = r->days != 0 ? r->days : SL_PKI_DAYS_DEFAULT;

    SL_ENSURE(X509_set_version(x, X509_VERSION_3) == 1, SL_ECRYPTO);
    SL_TRY(sl__certs_set_serial(x));
    SL_TRY(add_name(name, "O", "sluice"));
    SL_TRY(add_name(name, "OU", kind_name(r->kind)));
    SL_TRY(add_name(name, "CN", r->name));
    SL_ENSURE(X509_set_issuer_name(x, X509_get_subject_name(cacert)) == 1, SL_ECRYPTO);
    SL_ENSURE(X509_time_adj_ex(X509_getm_notBefore(x), -LEAF_BACKDATE_DAYS, 0, &now) != NULL,
              SL_ECRYPTO);
    SL_ENSURE(X509_time_adj_ex(X509_getm_notAfter(x), (int)days, 0, &now) != NULL, SL_ECRYPTO);
    if (ASN1_TIME_compare(X509_get0_notAfter(x), X509_get0_notAfter(cacert)) > 0) {
        SL_ENSURE(X509_set1_notAfter(x, X509_get0_notAfter(cacert)) == 1, SL_ECRYPTO);
    }
    SL_ENSURE(X509_set_pubkey(x, key) == 1, SL_ECRYPTO);
    SL_TRY(sl__certs_add_ext(cacert, x, NID_basic_constraints, "critical,CA:FALSE"));
    SL_TRY(sl__certs_add_ext(cacert, x, NID_key_usage, "critical,digitalSignature"));
    SL_TRY(sl__certs_add_ext(cacert, x, NID_ext_key_usage,
                             r->kind == SL_PKI_CONTROL ? "clientAuth" : "serverAuth"));
    SL_TRY(sl__certs_add_ext(cacert, x, NID_subject_key_identifier, "hash"));
    SL_TRY(sl__certs_add_ext(cacert, x, NID_authority_key_identifier, "keyid:always"));
    if (r->kind != SL_PKI_CONTROL) {
        SL_TRY(add_san(x, r));
    }
    SL_ENSURE(X509_sign(x, sl_ca_key(ca), EVP_sha256()) > 0, SL_ECRYPTO);
    return 0;
}

/* `x` in PEM into `b`. */
static int cert_pem(X509 *x, struct sl_buf *b)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *data = NULL;
    long n = 0;
    int rc = SL_ECRYPTO;

    if (bio == NULL) {
        return SL_ENOMEM;
    }
    if (PEM_write_bio_X509(bio, x) == 1) {
        n = BIO_get_mem_data(bio, &data);
    }
    if (n > 0 && data != NULL) {
        rc = sl_buf_append(b, data, (size_t)n);
    }
    BIO_free(bio);
    return rc;
}

/* Writes the key, the certificate and the issued/ copy of a new leaf. */
static int write_leaf(const char *dir, const char *cert_path, const char *key_path, X509 *x,
                      EVP_PKEY *key, const char *serial, char *err, size_t errlen)
{
    char issued[PATH_BYTES];
    char copy[PATH_BYTES];
    char file[SL_PKI_SERIAL_HEX_MAX + 8];
    struct sl_buf pem;
    BIO *kbio = sl__certs_key_pem(key);
    char *kdata = NULL;
    long klen = kbio != NULL ? BIO_get_mem_data(kbio, &kdata) : 0;
    int rc;

    sl_buf_init(&pem, SL_CA_FILE_MAX_BYTES);
    (void)snprintf(file, sizeof(file), "%s.pem", serial);
    rc = issued_dir(dir, issued, err, errlen);
    if (rc == 0 && sl__certs_join_path(copy, sizeof(copy), issued, file) < 0) {
        sl__certs_seterr(err, errlen, "the directory name %.80s... is too long", dir);
        rc = SL_ETOOBIG;
    }
    if (rc == 0 && (cert_pem(x, &pem) < 0 || klen <= 0 || kdata == NULL)) {
        sl__certs_seterr(err, errlen, "cannot encode the certificate %s", cert_path);
        rc = SL_ECRYPTO;
    }
    if (rc == 0) {
        rc = sl__certs_ensure_dir(issued, err, errlen);
    }
    /* The record first: a leaf that exists anywhere is one `pki list` shows and `pki revoke`
     * finds. */
    if (rc == 0) {
        rc = sl__certs_write_atomic(issued, copy, 0644, pem.p, pem.len, err, errlen);
    }
    if (rc == 0) {
        rc = sl__certs_write_atomic(dir, key_path, 0600, kdata, (size_t)klen, err, errlen);
    }
    if (rc == 0) {
        rc = sl__certs_write_atomic(dir, cert_path, 0644, pem.p, pem.len, err, errlen);
    }
    BIO_free(kbio);
    sl_buf_finish(&pem);
    return rc;
}

static int leaf_paths(const char *dir, const struct sl_pki_request *r, char cert[PATH_BYTES],
                      char key[PATH_BYTES], char *err, size_t errlen)
{
    char base[SL_PKI_NAME_MAX + 16];

    (void)snprintf(base, sizeof(base), "%s-%s.pem", kind_name(r->kind), r->name);
    if (sl__certs_join_path(cert, PATH_BYTES, dir, base) < 0) {
        goto too_long;
    }
    (void)snprintf(base, sizeof(base), "%s-%s.key", kind_name(r->kind), r->name);
    if (sl__certs_join_path(key, PATH_BYTES, dir, base) < 0) {
        goto too_long;
    }
    return 0;
too_long:
    sl__certs_seterr(err, errlen, "the directory name %.80s... is too long", dir);
    return SL_ETOOBIG;
}

int sl_pki_issue(const char *dir, const struct sl_pki_request *req, char *out_cert, size_t cert_len,
                 char *serial, char *err, size_t errlen)
{
    char cert_path[PATH_BYTES];
    char key_path[PATH_BYTES];
    char hex[SL_PKI_SERIAL_HEX_MAX + 1];
    struct sl_ca *ca = NULL;
    EVP_PKEY *key = NULL;
    X509 *x = NULL;
    int rc;

    SL_TRY(check_request(req, err, errlen));
    SL_TRY(leaf_paths(dir, req, cert_path, key_path, err, errlen));
    if (!req->force) {
        SL_TRY(sl__certs_check_absent(cert_path, err, errlen));
        SL_TRY(sl__certs_check_absent(key_path, err, errlen));
    }
    SL_TRY(sl_ca_load_dir(dir, true, &ca, err, errlen));
    ERR_clear_error();
    key = sl__certs_gen_p256();
    x = X509_new();
    if (key == NULL || x == NULL) {
        sl__certs_seterr(err, errlen, "cannot generate a key for %s", cert_path);
        rc = SL_ECRYPTO;
        goto out;
    }
    rc = build_leaf(x, key, ca, req, time(NULL));
    if (rc == 0) {
        rc = serial_hex(X509_get0_serialNumber(x), hex);
    }
    if (rc < 0) {
        sl__certs_seterr(err, errlen, "cannot build the certificate %s", cert_path);
        goto out;
    }
    rc = write_leaf(dir, cert_path, key_path, x, key, hex, err, errlen);
    if (rc == 0 && out_cert != NULL) {
        (void)snprintf(out_cert, cert_len, "%s", cert_path);
    }
    if (rc == 0 && serial != NULL) {
        memcpy(serial, hex, strlen(hex) + 1);
    }
out:
    X509_free(x);
    EVP_PKEY_free(key);
    sl_ca_destroy(ca);
    return rc;
}

/* ---- revoke ---- */

/* The serial of the certificate file `path`, which the CA must have signed. */
static int serial_of_file(const char *path, const struct sl_ca *ca, ASN1_INTEGER **out, char *err,
                          size_t errlen)
{
    X509 *x = NULL;
    int rc;

    SL_TRY(sl__certs_load_pem(path, &x, NULL, err, errlen));
    ERR_clear_error();
    if (X509_check_issued(sl_ca_cert(ca), x) != X509_V_OK
        || X509_verify(x, X509_get0_pubkey(sl_ca_cert(ca))) != 1) {
        sl__certs_seterr(err, errlen, "%s: not a certificate of this CA", path);
        rc = SL_EINVAL;
    } else {
        *out = ASN1_INTEGER_dup(X509_get0_serialNumber(x));
        rc = *out != NULL ? 0 : SL_ENOMEM;
    }
    X509_free(x);
    return rc;
}

/* The serial `what` names, when it is one of a leaf in issued/. */
static int serial_of_text(const char *dir, const char *what, ASN1_INTEGER **out, char *err,
                          size_t errlen)
{
    char hex[SL_PKI_SERIAL_HEX_MAX + 1];
    char issued[PATH_BYTES];
    char file[SL_PKI_SERIAL_HEX_MAX + 8];
    char path[PATH_BYTES];
    struct stat st;
    ASN1_INTEGER *serial = parse_serial(what);

    if (serial == NULL || serial_hex(serial, hex) < 0) {
        ASN1_INTEGER_free(serial);
        sl__certs_seterr(err, errlen,
                         "\"%.80s\" is neither a certificate file nor a serial number in hex",
                         what);
        return SL_EINVAL;
    }
    (void)snprintf(file, sizeof(file), "%s.pem", hex);
    if (issued_dir(dir, issued, err, errlen) < 0
        || sl__certs_join_path(path, sizeof(path), issued, file) < 0) {
        ASN1_INTEGER_free(serial);
        return SL_ETOOBIG;
    }
    if (stat(path, &st) == -1) {
        ASN1_INTEGER_free(serial);
        sl__certs_seterr(err, errlen, "no certificate with serial %s was issued from %s", hex, dir);
        return SL_ENOTFOUND;
    }
    *out = serial;
    return 0;
}

int sl_pki_revoke(const char *dir, const char *what, char *serial, char *err, size_t errlen)
{
    char hex[SL_PKI_SERIAL_HEX_MAX + 1];
    struct sl_ca *ca = NULL;
    X509_CRL *crl = NULL;
    X509_REVOKED *seen = NULL;
    ASN1_INTEGER *s = NULL;
    struct stat st;
    int rc;

    SL_TRY(sl_ca_load_dir(dir, true, &ca, err, errlen));
    rc = load_crl(dir, ca, &crl, err, errlen);
    if (rc == 0) {
        rc = stat(what, &st) == 0 && S_ISREG(st.st_mode)
                     ? serial_of_file(what, ca, &s, err, errlen)
                     : serial_of_text(dir, what, &s, err, errlen);
    }
    if (rc == 0 && serial_hex(s, hex) < 0) {
        sl__certs_seterr(err, errlen, "%s: the serial cannot be read", what);
        rc = SL_ECRYPTO;
    }
    if (rc == 0 && X509_CRL_get0_by_serial(crl, &seen, s) == 1) {
        sl__certs_seterr(err, errlen, "the certificate with serial %s is revoked already", hex);
        rc = SL_EEXIST;
    }
    if (rc == 0) {
        rc = write_crl(dir, ca, crl, s, err, errlen);
    }
    if (rc == 0 && serial != NULL) {
        memcpy(serial, hex, strlen(hex) + 1);
    }
    ASN1_INTEGER_free(s);
    X509_CRL_free(crl);
    sl_ca_destroy(ca);
    return rc;
}

/* ---- list ---- */

static void name_field(X509 *x, int nid, char *out, size_t cap)
{
    int n = X509_NAME_get_text_by_NID(X509_get_subject_name(x), nid, out, (int)cap);

    if (n < 0) {
        out[0] = '\0';
    }
}

static int entry_of(X509 *x, X509_CRL *crl, struct sl_pki_entry *e)
{
    struct tm tm;
    X509_REVOKED *seen = NULL;

    memset(e, 0, sizeof(*e));
    SL_TRY(serial_hex(X509_get0_serialNumber(x), e->serial));
    name_field(x, NID_organizationalUnitName, e->kind, sizeof(e->kind));
    name_field(x, NID_commonName, e->name, sizeof(e->name));
    SL_ENSURE(ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) == 1, SL_ECRYPTO);
    e->not_after =
            (time_t)(sl_time_days_from_civil(tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday) * 86400
                     + tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec);
    e->revoked = X509_CRL_get0_by_serial(crl, &seen, X509_get_serialNumber(x)) == 1;
    return 0;
}

static int entry_cmp(const void *a, const void *b)
{
    const struct sl_pki_entry *x = a;
    const struct sl_pki_entry *y = b;
    int c = strcmp(x->kind, y->kind);

    if (c == 0) {
        c = strcmp(x->name, y->name);
    }
    if (c == 0) {
        c = x->not_after < y->not_after ? -1 : x->not_after > y->not_after;
    }
    return c != 0 ? c : strcmp(x->serial, y->serial);
}

static bool is_pem_name(const char *n)
{
    size_t len = strlen(n);

    return len > 4 && n[0] != '.' && strcmp(n + len - 4, ".pem") == 0;
}

int sl_pki_list(const char *dir, struct sl_pki_entry **out, size_t *n, char *err, size_t errlen)
{
    char issued[PATH_BYTES];
    char path[PATH_BYTES];
    struct sl_ca *ca = NULL;
    X509_CRL *crl = NULL;
    struct sl_pki_entry *v = NULL;
    size_t len = 0;
    size_t cap = 0;
    DIR *d = NULL;
    struct dirent *de;
    int rc;

    *out = NULL;
    *n = 0;
    SL_TRY(issued_dir(dir, issued, err, errlen));
    SL_TRY(sl_ca_load_dir(dir, false, &ca, err, errlen));
    rc = load_crl(dir, ca, &crl, err, errlen);
    if (rc == 0) {
        d = opendir(issued);
        if (d == NULL) {
            sl__certs_seterr(err, errlen, "cannot read %s: %s", issued, strerror(errno));
            rc = SL_EIO;
        }
    }
    while (rc == 0 && (de = readdir(d)) != NULL) {
        X509 *x = NULL;

        if (!is_pem_name(de->d_name)) {
            continue;
        }
        if (len == cap) {
            size_t ncap = cap == 0 ? 16 : cap * 2;
            struct sl_pki_entry *nv = ncap <= LIST_MAX ? sl_realloc(v, ncap * sizeof(*v)) : NULL;

            if (nv == NULL) {
                sl__certs_seterr(err, errlen, "%s: too many certificates", issued);
                rc = SL_ENOMEM;
                break;
            }
            v = nv;
            cap = ncap;
        }
        if (sl__certs_join_path(path, sizeof(path), issued, de->d_name) < 0) {
            continue;
        }
        rc = sl__certs_load_pem(path, &x, NULL, err, errlen);
        if (rc == 0 && entry_of(x, crl, &v[len]) < 0) {
            sl__certs_seterr(err, errlen, "%s: cannot read the certificate", path);
            rc = SL_EINVAL;
        }
        X509_free(x);
        if (rc == 0) {
            len++;
        }
    }
    if (d != NULL) {
        (void)closedir(d);
    }
    X509_CRL_free(crl);
    sl_ca_destroy(ca);
    if (rc < 0) {
        sl_free(v);
        return rc;
    }
    if (len > 1) {
        qsort(v, len, sizeof(*v), entry_cmp);
    }
    *out = v;
    *n = len;
    return 0;
}
