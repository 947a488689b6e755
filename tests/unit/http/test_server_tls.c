/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/http/test_server_tls.c - the HTTP server's TLS listener (sl_http_server_listen_tls())
 * and the contexts of http/tls.h over real loopback: requests with a client certificate (kept
 * alive, pipelined, a body and an answer larger than every buffer on the way), and every way in
 * without one — no certificate, another CA's, a revoked one (revoked while the server runs: the
 * CRL is read again), a server certificate used as a client's, plain HTTP — ends without a byte
 * of HTTP; a client that stalls in the middle of its handshake is cut by the header timeout.
 *
 * The server runs on a loop in the main thread, a blocking OpenSSL client on a helper thread.
 * The client never asserts (cmocka cannot fail from another thread): it records what it saw and
 * stops the loop; the main thread asserts after joining it.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <uv.h>

#include "base/mem.h"
#include "certs/ca.h"
#include "certs/pki.h"
#include "http/server.h"
#include "http/tls.h"
#include "tests/support/tmpdir.h"

#define BIG_BYTES ((size_t)3 * 1024 * 1024)

struct fx {
    char root[128];
    char pki[192];
    char other[192];
    uv_loop_t loop;
    struct sl_http_server *srv;
    struct sl_http_tls *tls;
    int port;
    uv_async_t done;
    pthread_t thread;
    void (*client)(struct fx *f);
    /* Handler records (loop thread). */
    int calls;
    size_t last_body;
    /* Client records (client thread; read after the join). */
    int answers;
    bool handshake_failed;
    bool http_seen;
    char answer[256];
    size_t big_read;
    double cut_after_s;
    char note[256];
};

static const char *path_in(char *out, size_t cap, const char *dir, const char *name)
{
    (void)snprintf(out, cap, "%s/%s", dir, name);
    return out;
}

static void on_request(struct sl_http_exchange *x, const struct sl_http_request *req, void *arg)
{
    struct fx *f = arg;

    f->calls++;
    f->last_body = req->body.n;
    if (strcmp(req->path, "/big") == 0) {
        uint8_t *big = sl_malloc(BIG_BYTES);

        memset(big, 'b', BIG_BYTES);
        sl_http_respond(x, 200, "application/octet-stream", big, BIG_BYTES);
        sl_free(big);
        return;
    }
    {
        char body[64];
        int n = snprintf(body, sizeof(body), "{\"path\":\"%s\",\"body\":%zu}", req->path,
                         req->body.n);

        sl_http_respond(x, 200, "application/json", body, (size_t)n);
    }
}

static void on_done(uv_async_t *a)
{
    struct fx *f = a->data;

    sl_http_server_close(f->srv, NULL, NULL);
    uv_close((uv_handle_t *)&f->done, NULL);
}

static void *client_main(void *arg)
{
    struct fx *f = arg;

    f->client(f);
    (void)uv_async_send(&f->done);
    return NULL;
}

/* A PKI with a proxy (server) and two control (client) certificates, and another PKI. */
static int setup(void **state)
{
    struct fx *f = sl_calloc(1, sizeof(*f));
    const char *ips[] = { "127.0.0.1" };
    struct sl_pki_request pr = { .kind = SL_PKI_PROXY, .name = "p", .ips = ips, .n_ips = 1 };
    struct sl_pki_request c1 = { .kind = SL_PKI_CONTROL, .name = "c1" };
    struct sl_pki_request c2 = { .kind = SL_PKI_CONTROL, .name = "c2" };
    char err[512];

    if (f == NULL || sl_test_tmpdir(f->root, sizeof(f->root), "sl-srvtls") < 0) {
        return -1;
    }
    (void)path_in(f->pki, sizeof(f->pki), f->root, "pki");
    (void)path_in(f->other, sizeof(f->other), f->root, "other");
    if (sl_pki_init(f->pki, err, sizeof(err)) < 0
        || sl_pki_issue(f->pki, &pr, NULL, 0, NULL, err, sizeof(err)) < 0
        || sl_pki_issue(f->pki, &c1, NULL, 0, NULL, err, sizeof(err)) < 0
        || sl_pki_issue(f->pki, &c2, NULL, 0, NULL, err, sizeof(err)) < 0
        || sl_pki_init(f->other, err, sizeof(err)) < 0
        || sl_pki_issue(f->other, &c1, NULL, 0, NULL, err, sizeof(err)) < 0) {
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    int rc = sl_test_rmtree(f->root);

    sl_free(f);
    return rc;
}

/* Writes `dir`/`name`.pem and .key: a client certificate (clientAuth) from the PKI's CA whose
 * organizational unit is `ou` (NULL: none) — what `sluice pki` never issues, so the kind check
 * is seen on its own. */
static void issue_client(const char *dir, const char *name, const char *ou)
{
    char path[256];
    char file[64];
    char err[256];
    struct sl_ca *ca = NULL;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_NAME *subject = X509_get_subject_name(x);
    X509V3_CTX v3;
    X509_EXTENSION *eku;
    FILE *out;

    assert_int_equal(sl_ca_load_dir(dir, true, &ca, err, sizeof(err)), 0);
    assert_non_null(key);
    assert_non_null(x);
    assert_int_equal(X509_set_version(x, 2), 1);
    assert_int_equal(ASN1_INTEGER_set(X509_get_serialNumber(x), 4242), 1);
    assert_int_equal(X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_ASC,
                                                (const unsigned char *)"sluice", -1, -1, 0),
                     1);
    if (ou != NULL) {
        assert_int_equal(X509_NAME_add_entry_by_txt(subject, "OU", MBSTRING_ASC,
                                                    (const unsigned char *)ou, -1, -1, 0),
                         1);
    }
    assert_int_equal(X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                                                (const unsigned char *)name, -1, -1, 0),
                     1);
    assert_int_equal(X509_set_issuer_name(x, X509_get_subject_name(sl_ca_cert(ca))), 1);
    assert_non_null(X509_gmtime_adj(X509_getm_notBefore(x), -3600));
    assert_non_null(X509_gmtime_adj(X509_getm_notAfter(x), 3600));
    assert_int_equal(X509_set_pubkey(x, key), 1);
    X509V3_set_ctx(&v3, sl_ca_cert(ca), x, NULL, NULL, 0);
    eku = X509V3_EXT_conf_nid(NULL, &v3, NID_ext_key_usage, "clientAuth");
    assert_non_null(eku);
    assert_int_equal(X509_add_ext(x, eku, -1), 1);
    X509_EXTENSION_free(eku);
    assert_true(X509_sign(x, sl_ca_key(ca), EVP_sha256()) > 0);
    (void)snprintf(file, sizeof(file), "%s.pem", name);
    out = fopen(path_in(path, sizeof(path), dir, file), "w");
    assert_non_null(out);
    assert_int_equal(PEM_write_X509(out, x), 1);
    assert_int_equal(fclose(out), 0);
    (void)snprintf(file, sizeof(file), "%s.key", name);
    out = fopen(path_in(path, sizeof(path), dir, file), "w");
    assert_non_null(out);
    assert_int_equal(PEM_write_PrivateKey(out, key, NULL, NULL, 0, NULL, NULL), 1);
    assert_int_equal(fclose(out), 0);
    X509_free(x);
    EVP_PKEY_free(key);
    sl_ca_destroy(ca);
}

/* Starts the server with a 300 ms header timeout, runs `client` against it, joins. */
static void run(struct fx *f, void (*client)(struct fx *f))
{
    char cert[256];
    char key[256];
    char ca[256];
    char crl[256];
    char err[512];
    struct sl_http_server_config cfg = { .header_timeout_ms = 300,
                                         .body_max_bytes = 4 * BIG_BYTES };
    struct sl_http_tls_files files = {
        .cert = path_in(cert, sizeof(cert), f->pki, "proxy-p.pem"),
        .key = path_in(key, sizeof(key), f->pki, "proxy-p.key"),
        .ca = path_in(ca, sizeof(ca), f->pki, "ca.pem"),
        .crl = path_in(crl, sizeof(crl), f->pki, "crl.pem"),
        .peer_kind = "control",
    };

    f->client = client;
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(sl_http_tls_create(&files, true, &f->tls, err, sizeof(err)), 0);
    assert_int_equal(sl_http_server_create(&f->loop, &cfg, on_request, f, &f->srv), 0);
    assert_int_equal(sl_http_server_listen_tls(f->srv, "127.0.0.1:0", f->tls, err, sizeof(err)), 0);
    f->port = sl_http_server_port(f->srv);
    assert_int_equal(uv_async_init(&f->loop, &f->done, on_done), 0);
    f->done.data = f;
    assert_int_equal(pthread_create(&f->thread, NULL, client_main, f), 0);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(pthread_join(f->thread, NULL), 0);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    sl_http_tls_free(f->tls);
    f->tls = NULL;
}

/* ---- The client (helper thread) ---- */

static int dial(struct fx *f)
{
    struct sockaddr_in sa;
    struct timeval tv = { .tv_sec = 5 };
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)f->port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        (void)close(fd);
        return -1;
    }
    return fd;
}

/* A client connection showing `dir`/`name`.pem (NULL: no certificate), trusting f's CA. */
static SSL *tls_dial(struct fx *f, const char *dir, const char *name, SSL_CTX **ctx_out)
{
    char path[256];
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl;
    int fd;

    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    (void)SSL_CTX_load_verify_file(ctx, path_in(path, sizeof(path), f->pki, "ca.pem"));
    if (name != NULL) {
        char file[64];

        (void)snprintf(file, sizeof(file), "%s.pem", name);
        (void)SSL_CTX_use_certificate_file(ctx, path_in(path, sizeof(path), dir, file),
                                           SSL_FILETYPE_PEM);
        (void)snprintf(file, sizeof(file), "%s.key", name);
        (void)SSL_CTX_use_PrivateKey_file(ctx, path_in(path, sizeof(path), dir, file),
                                          SSL_FILETYPE_PEM);
    }
    fd = dial(f);
    ssl = SSL_new(ctx);
    (void)SSL_set_fd(ssl, fd);
    (void)X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), "127.0.0.1");
    *ctx_out = ctx;
    if (fd < 0 || SSL_connect(ssl) != 1) {
        f->handshake_failed = true;
    }
    return ssl;
}

static void tls_close(SSL *ssl, SSL_CTX *ctx)
{
    int fd = SSL_get_fd(ssl);

    SSL_free(ssl);
    SSL_CTX_free(ctx);
    if (fd >= 0) {
        (void)close(fd);
    }
    ERR_clear_error();
}

static bool write_all(SSL *ssl, const void *p, size_t n)
{
    size_t w = 0;

    while (n > 0) {
        if (SSL_write_ex(ssl, p, n, &w) != 1) {
            return false;
        }
        p = (const char *)p + w;
        n -= w;
    }
    return true;
}

/* Reads one answer with a Content-Length body; its head and the start of its body go to
 * f->answer, its body length to `*body`. False at EOF or on an error before one. */
static bool read_answer(struct fx *f, SSL *ssl, size_t *body)
{
    char head[4096];
    size_t n = 0;
    size_t len = 0;
    const char *cl;
    const char *end;

    while ((end = n > 0 ? strstr(head, "\r\n\r\n") : NULL) == NULL) {
        size_t got = 0;

        if (n + 1 >= sizeof(head) || SSL_read_ex(ssl, head + n, 1, &got) != 1) {
            return false;
        }
        n += got;
        head[n] = '\0';
    }
    f->http_seen = true;
    cl = strstr(head, "Content-Length: ");
    len = cl != NULL ? (size_t)strtoull(cl + 16, NULL, 10) : 0;
    (void)snprintf(f->answer, sizeof(f->answer), "%.200s", head);
    *body = 0;
    while (*body < len) {
        char buf[16384];
        size_t want = len - *body < sizeof(buf) ? len - *body : sizeof(buf);
        size_t got = 0;

        if (SSL_read_ex(ssl, buf, want, &got) != 1) {
            return false;
        }
        if (*body == 0) {
            size_t at = strlen(f->answer);

            (void)snprintf(f->answer + at, sizeof(f->answer) - at, "%.*s", (int)got, buf);
        }
        *body += got;
    }
    return true;
}

static void client_requests(struct fx *f)
{
    SSL_CTX *ctx;
    SSL *ssl = tls_dial(f, f->pki, "control-c1", &ctx);
    static const char two[] =
            "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n";
    char *big = sl_malloc(BIG_BYTES);
    char head[128];
    size_t body = 0;
    int n;

    if (f->handshake_failed) {
        goto out;
    }
    /* Two pipelined requests in one write. */
    if (!write_all(ssl, two, sizeof(two) - 1)) {
        goto out;
    }
    for (int i = 0; i < 2; i++) {
        if (!read_answer(f, ssl, &body)) {
            goto out;
        }
        f->answers++;
    }
    /* A body larger than every buffer of the server, then an answer as large. */
    memset(big, 'a', BIG_BYTES);
    n = snprintf(head, sizeof(head), "PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
                 BIG_BYTES);
    if (!write_all(ssl, head, (size_t)n) || !write_all(ssl, big, BIG_BYTES)
        || !read_answer(f, ssl, &body)) {
        goto out;
    }
    f->answers++;
    n = snprintf(head, sizeof(head), "GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    if (!write_all(ssl, head, (size_t)n) || !read_answer(f, ssl, &body)) {
        goto out;
    }
    f->answers++;
    f->big_read = body;
out:
    sl_free(big);
    tls_close(ssl, ctx);
}

static void serves_requests_with_a_client_certificate(void **state)
{
    struct fx *f = *state;

    run(f, client_requests);
    assert_false(f->handshake_failed);
    assert_int_equal(f->answers, 4);
    assert_int_equal(f->calls, 4);
    assert_int_equal(f->big_read, BIG_BYTES);
    assert_true(f->last_body == 0); /* the last request was the GET */
}

/* Tries one request as `name` of `dir` (NULL: no certificate); records what came back. */
static void try_as(struct fx *f, const char *dir, const char *name)
{
    SSL_CTX *ctx;
    SSL *ssl = tls_dial(f, dir, name, &ctx);
    static const char get[] = "GET /x HTTP/1.1\r\nHost: x\r\n\r\n";
    size_t body = 0;

    /* In TLS 1.3 the client is done before the server has judged its certificate: the
     * refusal arrives as an alert instead of the answer. */
    if (!f->handshake_failed && write_all(ssl, get, sizeof(get) - 1)
        && read_answer(f, ssl, &body)) {
        f->answers++;
    }
    tls_close(ssl, ctx);
}

static void client_without_certificate(struct fx *f)
{
    try_as(f, NULL, NULL);
}

static void client_of_another_ca(struct fx *f)
{
    try_as(f, f->other, "control-c1");
}

static void client_with_a_server_certificate(struct fx *f)
{
    try_as(f, f->pki, "proxy-p");
}

static void refuses_a_client_without_a_valid_certificate(void **state)
{
    struct fx *f = *state;
    void (*clients[])(struct fx *) = { client_without_certificate, client_of_another_ca,
                                       client_with_a_server_certificate };

    for (size_t i = 0; i < sizeof(clients) / sizeof(clients[0]); i++) {
        f->answers = 0;
        f->http_seen = false;
        run(f, clients[i]);
        assert_int_equal(f->answers, 0);
        assert_false(f->http_seen);
        assert_int_equal(f->calls, 0);
    }
}

static void client_of_another_kind(struct fx *f)
{
    try_as(f, f->pki, "odd-engine");
}

static void client_of_no_kind(struct fx *f)
{
    try_as(f, f->pki, "odd-none");
}

/* The server wants a `control` certificate: one whose OU names another kind is refused even
 * with clientAuth from the right CA; one that names no kind (another PKI's way) is served. */
static void checks_the_client_certificate_kind(void **state)
{
    struct fx *f = *state;

    issue_client(f->pki, "odd-engine", "engine");
    issue_client(f->pki, "odd-none", NULL);
    f->answers = 0;
    run(f, client_of_another_kind);
    assert_int_equal(f->answers, 0);
    assert_false(f->http_seen);
    assert_int_equal(f->calls, 0);
    f->handshake_failed = false;
    run(f, client_of_no_kind);
    assert_int_equal(f->answers, 1);
    assert_int_equal(f->calls, 1);
}

/* c2 is served, revoked while the server runs, then refused; c1 still served. */
static void client_revoked_meanwhile(struct fx *f)
{
    char cert[256];
    char err[512];

    try_as(f, f->pki, "control-c2");
    if (f->answers != 1) {
        (void)snprintf(f->note, sizeof(f->note), "c2 not served before its revocation");
        return;
    }
    /* A new mtime even on a file system that keeps whole seconds. */
    (void)nanosleep(&(struct timespec){ .tv_sec = 1, .tv_nsec = 100 * 1000 * 1000 }, NULL);
    if (sl_pki_revoke(f->pki, path_in(cert, sizeof(cert), f->pki, "control-c2.pem"), NULL, err,
                      sizeof(err))
        < 0) {
        (void)snprintf(f->note, sizeof(f->note), "revoke: %.200s", err);
        return;
    }
    f->http_seen = false;
    try_as(f, f->pki, "control-c2");
    if (f->answers != 1 || f->http_seen) {
        (void)snprintf(f->note, sizeof(f->note), "c2 served after its revocation");
        return;
    }
    try_as(f, f->pki, "control-c1");
}

static void reads_the_crl_again_when_it_changes(void **state)
{
    struct fx *f = *state;

    run(f, client_revoked_meanwhile);
    assert_string_equal(f->note, "");
    assert_int_equal(f->answers, 2);
    assert_int_equal(f->calls, 2);
}

static void client_plain_http(struct fx *f)
{
    static const char get[] = "GET /x HTTP/1.1\r\nHost: x\r\n\r\n";
    char buf[256];
    int fd = dial(f);
    ssize_t n;

    if (fd < 0 || write(fd, get, sizeof(get) - 1) != (ssize_t)(sizeof(get) - 1)) {
        (void)snprintf(f->note, sizeof(f->note), "cannot send");
    }
    n = read(fd, buf, sizeof(buf) - 1);
    if (n > 0) {
        buf[n] = '\0';
        f->http_seen = strstr(buf, "HTTP/") != NULL;
    }
    (void)close(fd);
}

static void refuses_plain_http(void **state)
{
    struct fx *f = *state;

    run(f, client_plain_http);
    assert_string_equal(f->note, "");
    assert_false(f->http_seen);
    assert_int_equal(f->calls, 0);
}

/* Half a ClientHello, then nothing: the header timeout (300 ms) ends the connection. */
static void client_stalls_in_the_handshake(struct fx *f)
{
    static const uint8_t partial[] = { 0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc };
    struct timespec a;
    struct timespec b;
    char buf[64];
    int fd = dial(f);
    ssize_t n;

    (void)clock_gettime(CLOCK_MONOTONIC, &a);
    if (fd < 0 || write(fd, partial, sizeof(partial)) != (ssize_t)sizeof(partial)) {
        (void)snprintf(f->note, sizeof(f->note), "cannot send");
    }
    n = read(fd, buf, sizeof(buf));
    (void)clock_gettime(CLOCK_MONOTONIC, &b);
    f->cut_after_s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    if (n != 0) {
        (void)snprintf(f->note, sizeof(f->note), "read %zd instead of the close", n);
    }
    (void)close(fd);
}

static void cuts_a_client_that_stalls_in_the_handshake(void **state)
{
    struct fx *f = *state;

    run(f, client_stalls_in_the_handshake);
    assert_string_equal(f->note, "");
    assert_true(f->cut_after_s >= 0.25 && f->cut_after_s < 3.0);
    assert_int_equal(f->calls, 0);
}

/* Contexts refuse missing and mismatched files, naming them. */
static void contexts_check_their_files(void **state)
{
    struct fx *f = *state;
    char cert[256];
    char key[256];
    char ca[256];
    char crl[256];
    char err[512];
    struct sl_http_tls *t = NULL;
    struct sl_http_tls_files files = {
        .cert = path_in(cert, sizeof(cert), f->pki, "proxy-p.pem"),
        .key = path_in(key, sizeof(key), f->pki, "control-c1.key"),
        .ca = path_in(ca, sizeof(ca), f->pki, "ca.pem"),
    };

    assert_int_equal(sl_http_tls_create(&files, true, &t, err, sizeof(err)), SL_EINVAL);
    assert_non_null(strstr(err, "control-c1.key"));
    assert_non_null(strstr(err, "mismatch"));
    files.key = path_in(key, sizeof(key), f->pki, "proxy-p.key");
    files.crl = path_in(crl, sizeof(crl), f->root, "missing.pem");
    assert_int_equal(sl_http_tls_create(&files, true, &t, err, sizeof(err)), SL_EIO);
    assert_non_null(strstr(err, "missing.pem"));
    /* Another CA's CRL would check nothing: refused. */
    files.crl = path_in(crl, sizeof(crl), f->other, "crl.pem");
    assert_int_equal(sl_http_tls_create(&files, true, &t, err, sizeof(err)), SL_EINVAL);
    assert_non_null(strstr(err, "not signed by the CA"));
    files.crl = NULL;
    files.ca = NULL;
    assert_int_equal(sl_http_tls_create(&files, true, &t, err, sizeof(err)), SL_EINVAL);
    assert_null(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(serves_requests_with_a_client_certificate, setup, teardown),
        cmocka_unit_test_setup_teardown(refuses_a_client_without_a_valid_certificate, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(checks_the_client_certificate_kind, setup, teardown),
        cmocka_unit_test_setup_teardown(reads_the_crl_again_when_it_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(refuses_plain_http, setup, teardown),
        cmocka_unit_test_setup_teardown(cuts_a_client_that_stalls_in_the_handshake, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(contexts_check_their_files, setup, teardown),
    };

    (void)signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
