/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/certs/test_pki.c - the control channel's PKI (certs/pki.c): init, issue, revoke and
 * list in a scratch directory, each leaf checked as a TLS peer checks it (OpenSSL's verifier with
 * the CA, the CRL and the purpose), and the errors a person gets for bad input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "base/mem.h"
#include "certs/pki.h"
#include "tests/support/tmpdir.h"

struct fx {
    char root[256];
    char dir[300];
    char err[512];
};

static int setup(void **state)
{
    struct fx *f = sl_calloc(1, sizeof(*f));

    if (f == NULL || sl_test_tmpdir(f->root, sizeof(f->root), "sl-pki") < 0
        || sl_test_join(f->dir, sizeof(f->dir), f->root, "pki") < 0) {
        sl_free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;

    if (sl_test_rmtree(f->root) < 0) {
        sl_free(f);
        return -1;
    }
    sl_free(f);
    return 0;
}

static X509 *load_cert(const char *dir, const char *name)
{
    char path[512];
    FILE *fp;
    X509 *x;

    (void)snprintf(path, sizeof(path), "%s/%s", dir, name);
    fp = fopen(path, "r");
    if (fp == NULL) {
        return NULL;
    }
    x = PEM_read_X509(fp, NULL, NULL, NULL);
    (void)fclose(fp);
    return x;
}

static int file_mode(const char *dir, const char *name)
{
    char path[512];
    struct stat st;

    (void)snprintf(path, sizeof(path), "%s/%s", dir, name);
    return stat(path, &st) == 0 ? (int)(st.st_mode & 0777) : -1;
}

/* What OpenSSL's verifier says of `leaf` against the PKI's CA and CRL, for `purpose`. */
static int verify(const char *dir, X509 *leaf, int purpose, const char *host, const char *ip)
{
    char path[512];
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    X509_LOOKUP *lu = X509_STORE_add_lookup(store, X509_LOOKUP_file());
    int rc;

    (void)snprintf(path, sizeof(path), "%s/ca.pem", dir);
    assert_int_equal(X509_LOOKUP_load_file(lu, path, X509_FILETYPE_PEM), 1);
    (void)snprintf(path, sizeof(path), "%s/crl.pem", dir);
    assert_true(X509_load_crl_file(lu, path, X509_FILETYPE_PEM) >= 1);
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_X509_STRICT);
    assert_int_equal(X509_STORE_CTX_init(ctx, store, leaf, NULL), 1);
    X509_STORE_CTX_set_purpose(ctx, purpose);
    if (host != NULL) {
        X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(ctx), host, 0);
    }
    if (ip != NULL) {
        X509_VERIFY_PARAM_set1_ip_asc(X509_STORE_CTX_get0_param(ctx), ip);
    }
    rc = X509_verify_cert(ctx) == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return rc;
}

static void init_issue_verify_revoke_list(void **state)
{
    struct fx *f = *state;
    const char *ips[] = { "127.0.0.1", "::1" };
    const char *dns[] = { "proxy1.example" };
    struct sl_pki_request pr = {
        .kind = SL_PKI_PROXY, .name = "p1", .ips = ips, .n_ips = 2, .dns = dns, .n_dns = 1
    };
    struct sl_pki_request cr = { .kind = SL_PKI_CONTROL, .name = "cp", .days = 30 };
    char cert[512];
    char serial_p[SL_PKI_SERIAL_HEX_MAX + 1];
    char serial_c[SL_PKI_SERIAL_HEX_MAX + 1];
    char revoked[SL_PKI_SERIAL_HEX_MAX + 1];
    struct sl_pki_entry *v = NULL;
    size_t n = 0;
    X509 *p;
    X509 *c;

    assert_int_equal(sl_pki_init(f->dir, f->err, sizeof(f->err)), 0);
    assert_int_equal(file_mode(f->dir, "ca.key"), 0600);
    assert_int_equal(file_mode(f->dir, "crl.pem"), 0644);
    assert_int_equal(
            sl_pki_issue(f->dir, &pr, cert, sizeof(cert), serial_p, f->err, sizeof(f->err)), 0);
    assert_non_null(strstr(cert, "proxy-p1.pem"));
    assert_int_equal(file_mode(f->dir, "proxy-p1.key"), 0600);
    assert_int_equal(sl_pki_issue(f->dir, &cr, NULL, 0, serial_c, f->err, sizeof(f->err)), 0);
    assert_string_not_equal(serial_p, serial_c);

    p = load_cert(f->dir, "proxy-p1.pem");
    c = load_cert(f->dir, "control-cp.pem");
    assert_non_null(p);
    assert_non_null(c);
    /* The proxy's leaf is a server for its addresses and name, never a client. */
    assert_int_equal(verify(f->dir, p, X509_PURPOSE_SSL_SERVER, NULL, "127.0.0.1"), X509_V_OK);
    assert_int_equal(verify(f->dir, p, X509_PURPOSE_SSL_SERVER, NULL, "::1"), X509_V_OK);
    assert_int_equal(verify(f->dir, p, X509_PURPOSE_SSL_SERVER, "proxy1.example", NULL), X509_V_OK);
    assert_int_equal(verify(f->dir, p, X509_PURPOSE_SSL_SERVER, NULL, "127.0.0.2"),
                     X509_V_ERR_IP_ADDRESS_MISMATCH);
    assert_int_equal(verify(f->dir, p, X509_PURPOSE_SSL_CLIENT, NULL, NULL),
                     X509_V_ERR_INVALID_PURPOSE);
    /* The control plane's is a client and nothing else. */
    assert_int_equal(verify(f->dir, c, X509_PURPOSE_SSL_CLIENT, NULL, NULL), X509_V_OK);
    assert_int_equal(verify(f->dir, c, X509_PURPOSE_SSL_SERVER, NULL, NULL),
                     X509_V_ERR_INVALID_PURPOSE);
    /* 30 days, give or take the day it starts back. */
    assert_true(X509_cmp_time(X509_get0_notAfter(c), &(time_t){ time(NULL) + 29 * 86400 }) > 0);
    assert_true(X509_cmp_time(X509_get0_notAfter(c), &(time_t){ time(NULL) + 31 * 86400 }) < 0);

    /* Revoked by file: the CRL now refuses it, the other one still passes. */
    (void)snprintf(cert, sizeof(cert), "%s/proxy-p1.pem", f->dir);
    assert_int_equal(sl_pki_revoke(f->dir, cert, revoked, f->err, sizeof(f->err)), 0);
    assert_string_equal(revoked, serial_p);
    assert_int_equal(verify(f->dir, p, X509_PURPOSE_SSL_SERVER, NULL, "127.0.0.1"),
                     X509_V_ERR_CERT_REVOKED);
    assert_int_equal(verify(f->dir, c, X509_PURPOSE_SSL_CLIENT, NULL, NULL), X509_V_OK);
    assert_int_equal(sl_pki_revoke(f->dir, cert, NULL, f->err, sizeof(f->err)), SL_EEXIST);
    assert_non_null(strstr(f->err, "revoked already"));

    assert_int_equal(sl_pki_list(f->dir, &v, &n, f->err, sizeof(f->err)), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[0].kind, "control");
    assert_string_equal(v[0].name, "cp");
    assert_string_equal(v[0].serial, serial_c);
    assert_false(v[0].revoked);
    assert_string_equal(v[1].kind, "proxy");
    assert_string_equal(v[1].serial, serial_p);
    assert_true(v[1].revoked);
    sl_free(v);

    /* Revoked by serial, lower case with colons as some tools print it. */
    {
        char typed[64] = "";
        size_t o = 0;

        for (size_t i = 0; serial_c[i] != '\0'; i++) {
            if (i > 0 && i % 2 == 0) {
                typed[o++] = ':';
            }
            typed[o++] = (char)(serial_c[i] >= 'A' ? serial_c[i] + 32 : serial_c[i]);
        }
        assert_int_equal(sl_pki_revoke(f->dir, typed, NULL, f->err, sizeof(f->err)), 0);
    }
    assert_int_equal(verify(f->dir, c, X509_PURPOSE_SSL_CLIENT, NULL, NULL),
                     X509_V_ERR_CERT_REVOKED);
    X509_free(p);
    X509_free(c);
}

/* A Swarm node's engine: a server for the node's address (what dockerd --tlsverify shows the
 * control plane), never a client, listed under its own kind. */
static void engine_leaf_is_a_server(void **state)
{
    struct fx *f = *state;
    const char *ips[] = { "10.213.200.11" };
    struct sl_pki_request er = { .kind = SL_PKI_ENGINE, .name = "n1", .ips = ips, .n_ips = 1 };
    char cert[512];
    struct sl_pki_entry *v = NULL;
    size_t n = 0;
    X509 *e;

    assert_int_equal(sl_pki_init(f->dir, f->err, sizeof(f->err)), 0);
    assert_int_equal(sl_pki_issue(f->dir, &er, cert, sizeof(cert), NULL, f->err, sizeof(f->err)),
                     0);
    assert_non_null(strstr(cert, "engine-n1.pem"));
    assert_int_equal(file_mode(f->dir, "engine-n1.key"), 0600);
    e = load_cert(f->dir, "engine-n1.pem");
    assert_non_null(e);
    assert_int_equal(verify(f->dir, e, X509_PURPOSE_SSL_SERVER, NULL, "10.213.200.11"), X509_V_OK);
    assert_int_equal(verify(f->dir, e, X509_PURPOSE_SSL_SERVER, NULL, "10.213.200.12"),
                     X509_V_ERR_IP_ADDRESS_MISMATCH);
    assert_int_equal(verify(f->dir, e, X509_PURPOSE_SSL_CLIENT, NULL, NULL),
                     X509_V_ERR_INVALID_PURPOSE);
    assert_int_equal(sl_pki_list(f->dir, &v, &n, f->err, sizeof(f->err)), 0);
    assert_int_equal(n, 1);
    assert_string_equal(v[0].kind, "engine");
    assert_string_equal(v[0].name, "n1");
    sl_free(v);
    X509_free(e);
}

static void bad_input_is_named(void **state)
{
    struct fx *f = *state;
    const char *bad_ip[] = { "300.1.1.1" };
    const char *bad_dns[] = { "-x.example" };
    const char *ok_ip[] = { "10.0.0.1" };
    struct sl_pki_request r = { .kind = SL_PKI_PROXY, .name = "p", .ips = ok_ip, .n_ips = 1 };
    char other[300];

    /* Nothing there yet: the CA file is named. */
    assert_int_equal(sl_pki_issue(f->dir, &r, NULL, 0, NULL, f->err, sizeof(f->err)), SL_EIO);
    assert_non_null(strstr(f->err, "ca.pem"));
    assert_int_equal(sl_pki_init(f->dir, f->err, sizeof(f->err)), 0);
    assert_int_equal(sl_pki_init(f->dir, f->err, sizeof(f->err)), SL_EEXIST);

    r.name = "../p";
    assert_int_equal(sl_pki_issue(f->dir, &r, NULL, 0, NULL, f->err, sizeof(f->err)), SL_EINVAL);
    assert_non_null(strstr(f->err, "invalid name"));
    r.name = "p";
    r.ips = bad_ip;
    assert_int_equal(sl_pki_issue(f->dir, &r, NULL, 0, NULL, f->err, sizeof(f->err)), SL_EINVAL);
    assert_non_null(strstr(f->err, "300.1.1.1"));
    r.n_ips = 0;
    r.dns = bad_dns;
    r.n_dns = 1;
    assert_int_equal(sl_pki_issue(f->dir, &r, NULL, 0, NULL, f->err, sizeof(f->err)), SL_EINVAL);
    assert_non_null(strstr(f->err, "-x.example"));
    r.n_dns = 0;
    assert_int_equal(sl_pki_issue(f->dir, &r, NULL, 0, NULL, f->err, sizeof(f->err)), SL_EINVAL);
    assert_non_null(strstr(f->err, "at least one --ip or --dns"));
    r.ips = ok_ip;
    r.n_ips = 1;
    r.days = SL_PKI_DAYS_MAX + 1;
    assert_int_equal(sl_pki_issue(f->dir, &r, NULL, 0, NULL, f->err, sizeof(f->err)), SL_EINVAL);
    r.days = 0;
    assert_int_equal(sl_pki_issue(f->dir, &r, NULL, 0, NULL, f->err, sizeof(f->err)), 0);
    assert_int_equal(sl_pki_issue(f->dir, &r, NULL, 0, NULL, f->err, sizeof(f->err)), SL_EEXIST);
    r.force = true;
    assert_int_equal(sl_pki_issue(f->dir, &r, NULL, 0, NULL, f->err, sizeof(f->err)), 0);
    {
        struct sl_pki_request c = { .kind = SL_PKI_CONTROL, .name = "c", .ips = ok_ip, .n_ips = 1 };
        struct sl_pki_request e = { .kind = SL_PKI_ENGINE, .name = "n1" };

        assert_int_equal(sl_pki_issue(f->dir, &c, NULL, 0, NULL, f->err, sizeof(f->err)),
                         SL_EINVAL);
        /* An engine, like a proxy, is dialled: it needs an address or a name. */
        assert_int_equal(sl_pki_issue(f->dir, &e, NULL, 0, NULL, f->err, sizeof(f->err)),
                         SL_EINVAL);
        assert_non_null(strstr(f->err, "engine certificate needs at least one --ip or --dns"));
    }

    assert_int_equal(sl_pki_revoke(f->dir, "not-hex", NULL, f->err, sizeof(f->err)), SL_EINVAL);
    assert_int_equal(sl_pki_revoke(f->dir, "ABCDEF", NULL, f->err, sizeof(f->err)), SL_ENOTFOUND);
    assert_non_null(strstr(f->err, "ABCDEF"));

    /* A certificate of another PKI is not this one's to revoke. */
    assert_int_equal(sl_test_join(other, sizeof(other), f->root, "other"), 0);
    assert_int_equal(sl_pki_init(other, f->err, sizeof(f->err)), 0);
    assert_int_equal(sl_pki_issue(other, &r, NULL, 0, NULL, f->err, sizeof(f->err)), 0);
    (void)snprintf(other + strlen(other), sizeof(other) - strlen(other), "/proxy-p.pem");
    assert_int_equal(sl_pki_revoke(f->dir, other, NULL, f->err, sizeof(f->err)), SL_EINVAL);
    assert_non_null(strstr(f->err, "not a certificate of this CA"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(init_issue_verify_revoke_list, setup, teardown),
        cmocka_unit_test_setup_teardown(engine_leaf_is_a_server, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_input_is_named, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
