/* SPDX-License-Identifier: Apache-2.0 */
#include "http/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "base/mem.h"

#define PATH_BYTES 4096

struct sl_http_tls {
    SSL_CTX *ctx;
    bool server;
    char ca[PATH_BYTES];
    char crl[PATH_BYTES];
    bool has_crl;
    /* The store new connections verify with (CA and CRL), and what the CRL file was when it
     * was read. */
    X509_STORE *store;
    struct stat crl_seen;
};

/* The kinds sl_http_tls_files.peer_kind may name. The context's app data points at one of
 * these (or is NULL): SSL objects may outlive the sl_http_tls, never these strings. Not const
 * only because app data is a void *; never written. */
static char kinds[][8] = { "proxy", "engine", "control" };

/* A write of ciphertext with its own bytes. */
struct flight {
    uv_write_t req;
    size_t *in_flight;
    size_t n;
    uint8_t data[];
};

/* "what (openssl: reason)" into `err`; empties the error queue. */
static void seterr(char *err, size_t errlen, const char *what, const char *path)
{
    unsigned long e = ERR_peek_last_error();
    const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;

    if (errlen > 0) {
        (void)snprintf(err, errlen, "%s %s%s%s%s", what, path, reason != NULL ? " (openssl: " : "",
                       reason != NULL ? reason : "", reason != NULL ? ")" : "");
    }
    ERR_clear_error();
}

/* A store with the CA and, when there is one, the CRL (which the CA must have signed). */
static int build_store(struct sl_http_tls *t, X509_STORE **out, char *err, size_t errlen)
{
    X509_STORE *store = X509_STORE_new();
    X509_LOOKUP *lu = store != NULL ? X509_STORE_add_lookup(store, X509_LOOKUP_file()) : NULL;

    ERR_clear_error();
    if (lu == NULL) {
        X509_STORE_free(store);
        seterr(err, errlen, "out of memory loading", t->ca);
        return SL_ENOMEM;
    }
    if (X509_LOOKUP_load_file(lu, t->ca, X509_FILETYPE_PEM) != 1) {
        X509_STORE_free(store);
        seterr(err, errlen, "cannot load the CA", t->ca);
        return SL_EINVAL;
    }
    if (t->has_crl) {
        STACK_OF(X509_OBJECT) * objs;
        bool signed_by_ca = false;

        if (X509_load_crl_file(lu, t->crl, X509_FILETYPE_PEM) < 1) {
            X509_STORE_free(store);
            seterr(err, errlen, "cannot load the CRL", t->crl);
            return SL_EINVAL;
        }
        /* The CRL must be the CA's: a CRL of another CA would silently check nothing. */
        objs = X509_STORE_get0_objects(store);
        for (int i = 0; i < sk_X509_OBJECT_num(objs); i++) {
            X509_CRL *crl = X509_OBJECT_get0_X509_CRL(sk_X509_OBJECT_value(objs, i));

            for (int j = 0; crl != NULL && j < sk_X509_OBJECT_num(objs); j++) {
                X509 *ca = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objs, j));

                if (ca != NULL && X509_CRL_verify(crl, X509_get0_pubkey(ca)) == 1) {
                    signed_by_ca = true;
                }
            }
        }
        if (!signed_by_ca) {
            X509_STORE_free(store);
            ERR_clear_error();
            (void)snprintf(err, errlen, "the CRL %s is not signed by the CA %s", t->crl, t->ca);
            return SL_EINVAL;
        }
        X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
    }
    *out = store;
    return 0;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size
           && a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Reads the CRL again when its file changed since it was read. */
static int refresh_store(struct sl_http_tls *t, char *err, size_t errlen)
{
    struct stat st;
    X509_STORE *store = NULL;

    if (!t->has_crl) {
        return 0;
    }
    if (stat(t->crl, &st) == -1) {
        (void)snprintf(err, errlen, "cannot read the CRL %s: %s", t->crl, strerror(errno));
        return SL_EIO;
    }
    if (t->store != NULL && same_file(&st, &t->crl_seen)) {
        return 0;
    }
    SL_TRY(build_store(t, &store, err, errlen));
    X509_STORE_free(t->store);
    t->store = store;
    t->crl_seen = st;
    return 0;
}

static int load_own(SSL_CTX *ctx, const struct sl_http_tls_files *f, char *err, size_t errlen)
{
    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(ctx, f->cert) != 1) {
        seterr(err, errlen, "cannot load the certificate", f->cert);
        return SL_EINVAL;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, f->key, SSL_FILETYPE_PEM) != 1) {
        seterr(err, errlen, "cannot load the private key", f->key);
        return SL_EINVAL;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        seterr(err, errlen, "the private key does not match the certificate", f->cert);
        return SL_EINVAL;
    }
    return 0;
}

/* The leaf's kind, when it names one (its subject's OUs), against the one asked for: true when
 * it names none or names that one. */
static bool kind_matches(X509 *leaf, const char *want)
{
    const X509_NAME *name = X509_get_subject_name(leaf);
    bool named = false;
    int i = -1;

    while ((i = X509_NAME_get_index_by_NID(name, NID_organizationalUnitName, i)) >= 0) {
        const ASN1_STRING *v = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
        size_t n = strlen(want);

        named = true;
        if (v != NULL && (size_t)ASN1_STRING_length(v) == n
            && memcmp(ASN1_STRING_get0_data(v), want, n) == 0) {
            return true;
        }
    }
    return !named;
}

/* OpenSSL's verdict on each certificate of the chain, and then ours on the leaf's kind. */
static int on_verify(int ok, X509_STORE_CTX *x)
{
    SSL *ssl = X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
    const char *kind = ssl != NULL ? SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)) : NULL;

    if (!ok || X509_STORE_CTX_get_error_depth(x) != 0 || kind == NULL) {
        return ok;
    }
    if (!kind_matches(X509_STORE_CTX_get_current_cert(x), kind)) {
        X509_STORE_CTX_set_error(x, X509_V_ERR_APPLICATION_VERIFICATION);
        return 0;
    }
    return 1;
}

static int build_ctx(struct sl_http_tls *t, const struct sl_http_tls_files *f, char *err,
                     size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(t->server ? TLS_server_method() : TLS_client_method());

    if (ctx == NULL) {
        seterr(err, errlen, "cannot create a TLS context for", f->cert);
        return SL_ENOMEM;
    }
    t->ctx = ctx;
    for (size_t i = 0; f->peer_kind != NULL && i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (strcmp(f->peer_kind, kinds[i]) == 0) {
            (void)SSL_CTX_set_app_data(ctx, kinds[i]);
        }
    }
    if (f->peer_kind != NULL && SSL_CTX_get_app_data(ctx) == NULL) {
        (void)snprintf(err, errlen, "unknown certificate kind %.32s (proxy, engine or control)",
                       f->peer_kind);
        return SL_EINVAL;
    }
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1) {
        seterr(err, errlen, "cannot require TLS 1.3 for", f->cert);
        return SL_ECRYPTO;
    }
    (void)SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
    (void)SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SL_TRY(load_own(ctx, f, err, errlen));
    if (t->server) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(f->ca);

        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, on_verify);
        (void)SSL_CTX_set_num_tickets(ctx, 0);
        /* The CertificateRequest names the CA, so a client with several keys picks ours. */
        if (names == NULL) {
            seterr(err, errlen, "cannot load the CA", f->ca);
            return SL_EINVAL;
        }
        SSL_CTX_set_client_CA_list(ctx, names);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, on_verify);
    }
    return 0;
}

int sl_http_tls_create(const struct sl_http_tls_files *f, bool server, struct sl_http_tls **out,
                       char *err, size_t errlen)
{
    struct sl_http_tls *t;
    int rc;

    if (f->cert == NULL || f->key == NULL || f->ca == NULL) {
        (void)snprintf(err, errlen, "a certificate, its key and a CA are all needed");
        return SL_EINVAL;
    }
    if (strlen(f->ca) >= PATH_BYTES || (f->crl != NULL && strlen(f->crl) >= PATH_BYTES)) {
        (void)snprintf(err, errlen, "a path is too long");
        return SL_EINVAL;
    }
    t = sl_calloc(1, sizeof(*t));
    if (t == NULL) {
        (void)snprintf(err, errlen, "out of memory");
        return SL_ENOMEM;
    }
    t->server = server;
    memcpy(t->ca, f->ca, strlen(f->ca) + 1);
    if (f->crl != NULL) {
        memcpy(t->crl, f->crl, strlen(f->crl) + 1);
        t->has_crl = true;
    }
    rc = build_ctx(t, f, err, errlen);
    if (rc == 0) {
        rc = t->has_crl ? refresh_store(t, err, errlen) : build_store(t, &t->store, err, errlen);
    }
    if (rc < 0) {
        sl_http_tls_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void sl_http_tls_free(struct sl_http_tls *t)
{
    if (t == NULL) {
        return;
    }
    X509_STORE_free(t->store);
    SSL_CTX_free(t->ctx);
    sl_free(t);
}

static bool is_ip_literal(const char *host)
{
    unsigned char a[16];

    return inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
}

int sl_http_tls_new(struct sl_http_tls *t, const char *host, SSL **out, char *err, size_t errlen)
{
    SSL *ssl;
    BIO *rbio;
    BIO *wbio;
    int ok = 1;

    SL_TRY(refresh_store(t, err, errlen));
    ERR_clear_error();
    ssl = SSL_new(t->ctx);
    rbio = BIO_new(BIO_s_mem());
    wbio = BIO_new(BIO_s_mem());
    if (ssl == NULL || rbio == NULL || wbio == NULL) {
        SSL_free(ssl);
        BIO_free(rbio);
        BIO_free(wbio);
        (void)snprintf(err, errlen, "out of memory");
        return SL_ENOMEM;
    }
    /* An empty memory BIO says "retry" instead of EOF: the end is the owner's to report. */
    BIO_set_mem_eof_return(rbio, -1);
    SSL_set_bio(ssl, rbio, wbio);
    ok = SSL_set1_verify_cert_store(ssl, t->store) == 1;
    if (ok && t->has_crl) {
        ok = X509_VERIFY_PARAM_set_flags(SSL_get0_param(ssl), X509_V_FLAG_CRL_CHECK) == 1;
    }
    if (ok && t->server) {
        SSL_set_accept_state(ssl);
    } else if (ok) {
        SSL_set_connect_state(ssl);
        if (host == NULL || host[0] == '\0') {
            ok = 0;
        } else if (is_ip_literal(host)) {
            ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1;
        } else {
            /* A mutable copy: the SSL_set_tlsext_host_name() macro casts its argument to
             * void *. */
            char name[256];

            (void)snprintf(name, sizeof(name), "%s", host);
            ok = strlen(host) < sizeof(name) && SSL_set1_host(ssl, host) == 1
                 && SSL_set_tlsext_host_name(ssl, name) == 1;
        }
    }
    if (!ok) {
        SSL_free(ssl);
        seterr(err, errlen, "cannot set up TLS for", host != NULL ? host : "a connection");
        return SL_ECRYPTO;
    }
    *out = ssl;
    return 0;
}

int sl_http_tls_feed(SSL *ssl, const void *p, size_t n)
{
    size_t done = 0;

    if (n == 0) {
        return 0;
    }
    if (BIO_write_ex(SSL_get_rbio(ssl), p, n, &done) != 1 || done != n) {
        ERR_clear_error();
        return SL_ENOMEM;
    }
    return 0;
}

bool sl_http_tls_has_input(SSL *ssl)
{
    return SSL_pending(ssl) > 0 || BIO_ctrl_pending(SSL_get_rbio(ssl)) > 0;
}

int sl_http_tls_take(SSL *ssl, struct sl_buf *b)
{
    BIO *w = SSL_get_wbio(ssl);
    char *data = NULL;
    long n = BIO_get_mem_data(w, &data);

    if (n <= 0) {
        return 0;
    }
    SL_TRY(sl_buf_append(b, data, (size_t)n));
    (void)BIO_reset(w);
    return 0;
}

static void on_flight_written(uv_write_t *req, int status)
{
    struct flight *f = SL_CONTAINER_OF(req, struct flight, req);

    (void)status; /* a failed write shows on the stream's next read or write */
    *f->in_flight -= f->n;
    sl_free(f);
}

int sl_http_tls_send(SSL *ssl, uv_stream_t *s, size_t *in_flight)
{
    BIO *w = SSL_get_wbio(ssl);
    char *data = NULL;
    long n = BIO_get_mem_data(w, &data);
    struct flight *f;
    uv_buf_t buf;
    int rc;

    if (n <= 0) {
        return 0;
    }
    if ((size_t)n > SL_HTTP_TLS_FLIGHT_MAX - *in_flight) {
        return SL_ETOOBIG;
    }
    f = sl_malloc(sizeof(*f) + (size_t)n);
    if (f == NULL) {
        return SL_ENOMEM;
    }
    memcpy(f->data, data, (size_t)n);
    (void)BIO_reset(w);
    f->n = (size_t)n;
    f->in_flight = in_flight;
    buf = uv_buf_init((char *)f->data, (unsigned int)n);
    rc = uv_write(&f->req, s, &buf, 1, on_flight_written);
    if (rc < 0) {
        sl_free(f);
        return rc;
    }
    *in_flight += f->n;
    return 0;
}

void sl_http_tls_why(SSL *ssl, int ret, char *out, size_t n)
{
    int e = SSL_get_error(ssl, ret);
    unsigned long code = ERR_peek_last_error();
    const char *reason = code != 0 ? ERR_reason_error_string(code) : NULL;
    long verify = SSL_get_verify_result(ssl);
    const char *kind = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));

    if (verify == X509_V_ERR_APPLICATION_VERIFICATION && kind != NULL) {
        (void)snprintf(out, n,
                       "certificate verify failed: not a %s certificate (its organizational "
                       "unit names another kind)",
                       kind);
    } else if (verify != X509_V_OK) {
        (void)snprintf(out, n, "certificate verify failed: %s",
                       X509_verify_cert_error_string(verify));
    } else if (reason != NULL) {
        (void)snprintf(out, n, "%s", reason);
    } else if (e == SSL_ERROR_ZERO_RETURN) {
        (void)snprintf(out, n, "the peer closed the TLS connection");
    } else {
        (void)snprintf(out, n, "TLS error %d", e);
    }
    ERR_clear_error();
}

void sl_http_tls_peer(SSL *ssl, char *out, size_t n)
{
    X509 *peer = SSL_get0_peer_certificate(ssl);
    BIO *bio = peer != NULL ? BIO_new(BIO_s_mem()) : NULL;
    char *data = NULL;
    long len = 0;

    out[0] = '\0';
    if (bio != NULL
        && X509_NAME_print_ex(bio, X509_get_subject_name(peer), 0,
                              XN_FLAG_ONELINE & ~XN_FLAG_SPC_EQ)
                   >= 0) {
        len = BIO_get_mem_data(bio, &data);
    }
    if (len > 0 && data != NULL) {
        (void)snprintf(out, n, "%.*s", (int)len, data);
    }
    BIO_free(bio);
}
