/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/proxy/test_tls.c - the sans-I/O TLS engine: two engines wired back to back in
 * memory, with a throwaway CA and leaves (tests/support/pki), and the tunnel sniffer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <uv.h>

#include "base/err.h"
#include "base/mem.h"
#include "proxy/tls.h"
#include "tests/support/pki.h"

/* The throwaway PKI, made once for the whole suite. */
static struct {
    struct sl_test_ca ca;
    /* A CA that clients do not trust. */
    struct sl_test_ca other_ca;
    /* One key for every leaf, as the proxy's minter does. */
    EVP_PKEY *leaf_key;
    /* DNS:a.sluice.test, IP:127.0.0.1, signed by `ca`. */
    X509 *leaf;
    /* DNS:b.sluice.test, signed by `ca`. */
    X509 *leaf_b;
    /* DNS:a.sluice.test, signed by `other_ca`. */
    X509 *leaf_unknown;
    /* DNS:a.sluice.test, signed by `ca`, expired yesterday. */
    X509 *leaf_expired;
    /* No subjectAltName; subject CN a.sluice.test; signed by `ca`. */
    X509 *leaf_cn_only;
    /* A client-facing context without a certificate. */
    SSL_CTX *server_ctx;
} pki;

static int pki_setup(void **state)
{
    char err[256];

    (void)state;
    assert_int_equal(sl_test_ca_init(&pki.ca, "sluice test CA"), 0);
    assert_int_equal(sl_test_ca_init(&pki.other_ca, "unknown CA"), 0);
    pki.leaf_key = sl_test_key_new();
    assert_non_null(pki.leaf_key);
    pki.leaf = sl_test_ca_issue(&pki.ca, pki.leaf_key, "a.sluice.test",
                                "DNS:a.sluice.test,IP:127.0.0.1", -3600, 86400);
    pki.leaf_b = sl_test_ca_issue(&pki.ca, pki.leaf_key, "b.sluice.test", "DNS:b.sluice.test",
                                  -3600, 86400);
    pki.leaf_unknown = sl_test_ca_issue(&pki.other_ca, pki.leaf_key, "a.sluice.test",
                                        "DNS:a.sluice.test", -3600, 86400);
    pki.leaf_expired = sl_test_ca_issue(&pki.ca, pki.leaf_key, "a.sluice.test", "DNS:a.sluice.test",
                                        -259200L, -86400L);
    pki.leaf_cn_only = sl_test_ca_issue(&pki.ca, pki.leaf_key, "a.sluice.test", "", -3600, 86400);
    assert_non_null(pki.leaf);
    assert_non_null(pki.leaf_b);
    assert_non_null(pki.leaf_unknown);
    assert_non_null(pki.leaf_expired);
    assert_non_null(pki.leaf_cn_only);
    assert_int_equal(sl_tls_server_ctx_new(&pki.server_ctx, err, sizeof(err)), 0);
    return 0;
}

static int pki_teardown(void **state)
{
    (void)state;
    SSL_CTX_free(pki.server_ctx);
    X509_free(pki.leaf_cn_only);
    X509_free(pki.leaf_expired);
    X509_free(pki.leaf_unknown);
    X509_free(pki.leaf_b);
    X509_free(pki.leaf);
    EVP_PKEY_free(pki.leaf_key);
    sl_test_ca_finish(&pki.other_ca);
    sl_test_ca_finish(&pki.ca);
    return 0;
}

/* A client context that trusts the test CA, with a session cache of `cache` entries (0: the
 * default size). */
static SSL_CTX *client_ctx_sized(size_t cache)
{
    SSL_CTX *ctx = NULL;
    char err[256];

    assert_int_equal(sl_tls_client_ctx_new(NULL, cache, &ctx, err, sizeof(err)), 0);
    assert_int_equal(sl_test_ca_trust(&pki.ca, ctx), 0);
    return ctx;
}

static SSL_CTX *client_ctx(void)
{
    return client_ctx_sized(0);
}

/* The server side's SNI callback: records what it saw and answers as told. */
struct sni_probe {
    int calls;
    bool saw_null;
    char seen[256];
    enum sl_tls_sni_verdict answer;
    /* Serve this leaf (NULL: pick by SNI, leaf_b for b.sluice.test, else leaf). */
    X509 *cert;
};

static enum sl_tls_sni_verdict probe_sni(struct sl_tls *t, const char *sni, void *arg)
{
    struct sni_probe *p = arg;
    X509 *leaf = p->cert;

    p->calls++;
    if (sni != NULL) {
        (void)snprintf(p->seen, sizeof(p->seen), "%s", sni);
    } else {
        p->saw_null = true;
    }
    if (p->answer != SL_TLS_SNI_OK) {
        return p->answer;
    }
    if (leaf == NULL) {
        leaf = sni != NULL && strcmp(sni, "b.sluice.test") == 0 ? pki.leaf_b : pki.leaf;
    }
    assert_int_equal(sl_tls_set_certificate(t, leaf, pki.leaf_key), 0);
    return SL_TLS_SNI_OK;
}

struct pair {
    struct sl_tls *c;
    struct sl_tls *s;
    struct sni_probe probe;
    /* The client context of pair_open_a(), freed by pair_close(). */
    SSL_CTX *own_ctx;
};

/* A client engine for host:port on `cctx` (its sessions under `scope`) and a server engine, with
 * output caps (0: the default) and the probe as the server's SNI callback. */
static void pair_open_scoped(struct pair *p, SSL_CTX *cctx, const char *scope, const char *host,
                             bool is_ip, uint16_t port, size_t client_cap, size_t server_cap)
{
    memset(p, 0, sizeof(*p));
    assert_int_equal(sl_tls_create_client(cctx, host, is_ip, port, scope, client_cap, &p->c), 0);
    assert_int_equal(sl_tls_create_server(pki.server_ctx, server_cap, &p->s), 0);
    sl_tls_set_sni_fn(p->s, probe_sni, &p->probe);
    assert_false(sl_tls_is_server(p->c));
    assert_true(sl_tls_is_server(p->s));
}

static void pair_open_capped(struct pair *p, SSL_CTX *cctx, const char *host, bool is_ip,
                             uint16_t port, size_t client_cap, size_t server_cap)
{
    pair_open_scoped(p, cctx, NULL, host, is_ip, port, client_cap, server_cap);
}

static void pair_open(struct pair *p, SSL_CTX *cctx, const char *host, bool is_ip, uint16_t port)
{
    pair_open_capped(p, cctx, host, is_ip, port, 0, 0);
}

/* The usual pair: a client of its own (client_ctx()) for a.sluice.test:443. */
static void pair_open_a(struct pair *p)
{
    SSL_CTX *cctx = client_ctx();

    pair_open(p, cctx, "a.sluice.test", false, 443);
    p->own_ctx = cctx;
}

static void pair_close(struct pair *p)
{
    sl_tls_destroy(p->c);
    sl_tls_destroy(p->s);
    SSL_CTX_free(p->own_ctx);
    p->c = NULL;
    p->s = NULL;
    p->own_ctx = NULL;
}

/* Moves pending ciphertext from `from` to `to`, at most `chunk` bytes per feed; with chunk 1,
 * one byte per call (a slow drip). Returns the bytes moved. Uses the zero-copy channel. */
static size_t move(struct sl_tls *from, struct sl_tls *to, size_t chunk)
{
    size_t moved = 0;

    for (;;) {
        struct sl_slice s = sl_tls_out_peek(from);
        size_t n = s.n < chunk ? s.n : chunk;
        int r;

        if (n == 0) {
            break;
        }
        r = sl_tls_feed(to, s.p, n);
        if (r <= 0) {
            break; /* ring full (drain it first) or receiver failed */
        }
        sl_tls_out_ack(from, (size_t)r);
        moved += (size_t)r;
        if (chunk == 1) {
            break;
        }
    }
    return moved;
}

/* The same with the copying channel. */
static size_t move_copy(struct sl_tls *from, struct sl_tls *to)
{
    uint8_t buf[1500];
    size_t moved = 0;
    size_t n;

    while ((n = sl_tls_out_copy(from, buf, sizeof(buf))) > 0) {
        assert_int_equal(sl_tls_feed(to, buf, n), (int)n);
        moved += n;
    }
    return moved;
}

struct hs {
    int c;
    int s;
};

/* Runs both handshakes, moving bytes between them, until both have finished, failed, or the
 * server waits for a certificate. */
static struct hs drive(struct pair *p, size_t chunk, bool copy)
{
    struct hs rc = { SL_TLS_HS_WANT_IO, SL_TLS_HS_WANT_IO };

    for (long i = 0; i < 1000000; i++) {
        size_t moved;

        if (rc.c == SL_TLS_HS_WANT_IO) {
            rc.c = sl_tls_handshake(p->c);
        }
        if (rc.s == SL_TLS_HS_WANT_IO) {
            rc.s = sl_tls_handshake(p->s);
        }
        if (rc.s == SL_TLS_HS_WANT_CERT) {
            return rc;
        }
        if (copy) {
            moved = move_copy(p->c, p->s) + move_copy(p->s, p->c);
        } else {
            moved = move(p->c, p->s, chunk) + move(p->s, p->c, chunk);
        }
        if (moved == 0 && rc.c != SL_TLS_HS_WANT_IO && rc.s != SL_TLS_HS_WANT_IO) {
            return rc;
        }
        if (moved == 0 && rc.c == SL_TLS_HS_WANT_IO && rc.s == SL_TLS_HS_WANT_IO && i > 0) {
            return rc; /* stuck */
        }
    }
    fail_msg("handshake did not settle");
    return rc;
}

/* Runs both handshakes (drive()) and expects them to end as `want_c` and `want_s`. */
static void drive_to(struct pair *p, int want_c, int want_s)
{
    struct hs rc = drive(p, SIZE_MAX, false);

    assert_int_equal(rc.c, want_c);
    assert_int_equal(rc.s, want_s);
}

static void handshake_ok(struct pair *p)
{
    struct hs rc = drive(p, SIZE_MAX, false);

    assert_int_equal(rc.c, SL_TLS_HS_DONE);
    assert_int_equal(rc.s, SL_TLS_HS_DONE);
    assert_true(sl_tls_is_handshake_done(p->c));
    assert_true(sl_tls_is_handshake_done(p->s));
}

/* One direction of a transfer. */
struct stream {
    const uint8_t *data;
    size_t len;
    size_t sent;
    uint8_t *got;
    size_t recvd;
};

static void push(struct sl_tls *t, struct stream *st)
{
    int w;

    if (st->sent == st->len) {
        return;
    }
    w = sl_tls_write(t, st->data + st->sent, st->len - st->sent);
    assert_true(w >= 0);
    assert_true((size_t)w <= SL_TLS_WRITE_MAX);
    st->sent += (size_t)w;
}

static void pull(struct sl_tls *t, struct stream *st)
{
    for (;;) {
        uint8_t extra[16];
        int r;

        if (st->recvd < st->len) {
            r = sl_tls_read(t, st->got + st->recvd, st->len - st->recvd);
        } else {
            r = sl_tls_read(t, extra, sizeof(extra));
            assert_true(r <= 0); /* nothing beyond what was sent */
        }
        assert_true(r >= 0);
        if (r == 0) {
            return;
        }
        st->recvd += (size_t)r;
    }
}

/* Sends `up` from client to server and `down` back at the same time. */
static void exchange(struct pair *p, struct stream *up, struct stream *down, size_t chunk)
{
    for (long spins = 0; up->recvd < up->len || down->recvd < down->len; spins++) {
        assert_true(spins < 50000000);
        push(p->c, up);
        push(p->s, down);
        (void)move(p->c, p->s, chunk);
        (void)move(p->s, p->c, chunk);
        pull(p->s, up);
        pull(p->c, down);
    }
    assert_memory_equal(up->got, up->data, up->len);
    assert_memory_equal(down->got, down->data, down->len);
}

static void exchange_text(struct pair *p, const char *up_text, const char *down_text, size_t chunk)
{
    uint8_t up_got[4096];
    uint8_t down_got[4096];
    struct stream up = { (const uint8_t *)up_text, strlen(up_text), 0, up_got, 0 };
    struct stream down = { (const uint8_t *)down_text, strlen(down_text), 0, down_got, 0 };

    exchange(p, &up, &down, chunk);
}

static void handshake_completes_and_data_flows_both_ways(void **state)
{
    struct pair p;

    (void)state;
    pair_open_a(&p);
    assert_false(sl_tls_is_handshake_done(p.c));
    handshake_ok(&p);
    assert_int_equal(p.probe.calls, 1);
    assert_string_equal(p.probe.seen, "a.sluice.test");
    assert_string_equal(sl_tls_sni(p.s), "a.sluice.test");
    assert_null(sl_tls_sni(p.c));
    assert_string_equal(sl_tls_alpn(p.c), "http/1.1");
    assert_string_equal(sl_tls_alpn(p.s), "http/1.1");
    assert_string_equal(sl_tls_verify_error(p.c), "ok");
    assert_string_equal(sl_tls_error_text(p.c), "");
    assert_false(sl_tls_is_session_reused(p.c));
    exchange_text(&p, "GET / HTTP/1.1\r\nHost: a.sluice.test\r\n\r\n",
                  "HTTP/1.1 204 No Content\r\n\r\n", SIZE_MAX);
    pair_close(&p);
}

/* Calls into OpenSSL's allocator, counted from main() on (CRYPTO_set_mem_functions). */
static unsigned long crypto_allocs;
/* libc's allocator itself: sl_malloc's failure injection is for our own allocations, and
 * creation_survives_allocation_failures counts on OpenSSL's not failing with them. */
static void *(*const libc_malloc)(size_t) = malloc;
static void *(*const libc_realloc)(void *, size_t) = realloc;
static void (*const libc_free)(void *) = free;

static void *count_malloc(size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    crypto_allocs++;
    return libc_malloc(n);
}

static void *count_realloc(void *p, size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
    crypto_allocs++;
    return libc_realloc(p, n);
}

static void count_free(void *p, const char *file, int line)
{
    (void)file;
    (void)line;
    libc_free(p);
}

/* A connection is asked for input whenever its loop wakes it; with nothing fed, OpenSSL would
 * allocate its 16 KiB read buffer and free it again on every such call (SSL_MODE_RELEASE_BUFFERS).
 * The engine answers "nothing yet" without calling OpenSSL at all. */
static void reading_with_nothing_fed_allocates_nothing(void **state)
{
    struct pair p;
    uint8_t buf[512];
    unsigned long before;

    (void)state;
    pair_open_a(&p);
    handshake_ok(&p);
    exchange_text(&p, "GET / HTTP/1.1\r\nHost: a.sluice.test\r\n\r\n",
                  "HTTP/1.1 204 No Content\r\n\r\n", SIZE_MAX);
    before = crypto_allocs;
    for (int i = 0; i < 10; i++) {
        assert_int_equal(sl_tls_read(p.s, buf, sizeof(buf)), 0);
        assert_int_equal(sl_tls_read(p.c, buf, sizeof(buf)), 0);
    }
    assert_true(before > 0); /* the counting allocator is in place */
    assert_int_equal(crypto_allocs, before);
    /* And what arrives afterwards is still read. */
    exchange_text(&p, "GET /2 HTTP/1.1\r\nHost: a.sluice.test\r\n\r\n",
                  "HTTP/1.1 204 No Content\r\n\r\n", 7);
    pair_close(&p);
}

static void transfers_a_mebibyte_each_way_in_chunks(void **state)
{
    const size_t len = 1u << 20;
    uint8_t *up_data = sl_malloc(len);
    uint8_t *down_data = sl_malloc(len);
    uint8_t *up_got = sl_malloc(len);
    uint8_t *down_got = sl_malloc(len);
    SSL_CTX *cctx = client_ctx();
    struct pair p;

    (void)state;
    assert_non_null(up_data);
    assert_non_null(down_data);
    assert_non_null(up_got);
    assert_non_null(down_got);
    for (size_t i = 0; i < len; i++) {
        up_data[i] = (uint8_t)(i * 31 + 7);
        down_data[i] = (uint8_t)(i * 17 + (i >> 11));
    }
    /* Whole runs, then an odd chunk size so that the rings wrap at awkward places. */
    for (int round = 0; round < 2; round++) {
        struct stream up = { up_data, len, 0, up_got, 0 };
        struct stream down = { down_data, len, 0, down_got, 0 };

        pair_open(&p, cctx, "a.sluice.test", false, 443);
        handshake_ok(&p);
        exchange(&p, &up, &down, round == 0 ? SIZE_MAX : 1499);
        pair_close(&p);
    }
    SSL_CTX_free(cctx);
    sl_free(up_data);
    sl_free(down_data);
    sl_free(up_got);
    sl_free(down_got);
}

static void survives_ciphertext_one_byte_at_a_time(void **state)
{
    struct pair p;
    struct hs rc;

    (void)state;
    pair_open_a(&p);
    rc = drive(&p, 1, false);
    assert_int_equal(rc.c, SL_TLS_HS_DONE);
    assert_int_equal(rc.s, SL_TLS_HS_DONE);
    exchange_text(&p, "ping over a slow drip", "pong over a slow drip", 1);
    pair_close(&p);
}

static void copying_channel_works_too(void **state)
{
    struct pair p;
    struct hs rc;

    (void)state;
    pair_open_a(&p);
    rc = drive(&p, SIZE_MAX, true);
    assert_int_equal(rc.c, SL_TLS_HS_DONE);
    assert_int_equal(rc.s, SL_TLS_HS_DONE);
    assert_int_equal(sl_tls_out_copy(p.c, NULL, 0), 0);
    exchange_text(&p, "up", "down", SIZE_MAX);
    pair_close(&p);
}

/* Serves `leaf` to a client for `host` and expects both handshakes to fail: the client's on
 * `verify_error`, the server's on the client's alert `alert` (sl_tls_peer_alert()). */
static void expect_rejected(const char *host, bool is_ip, X509 *leaf, const char *verify_error,
                            int alert)
{
    SSL_CTX *cctx = client_ctx();
    struct pair p;
    struct hs rc;

    pair_open(&p, cctx, host, is_ip, 443);
    p.probe.cert = leaf;
    rc = drive(&p, SIZE_MAX, false);
    assert_int_equal(rc.c, SL_ECRYPTO);
    assert_true(rc.s < 0);
    assert_string_equal(sl_tls_verify_error(p.c), verify_error);
    assert_non_null(strstr(sl_tls_error_text(p.c), "certificate verify failed"));
    assert_int_equal(sl_tls_peer_alert(p.c), -1);
    assert_int_equal(sl_tls_peer_alert(p.s), alert);
    assert_false(sl_tls_is_handshake_done(p.c));
    /* Failed engines stay failed. */
    assert_int_equal(sl_tls_handshake(p.c), SL_ECRYPTO);
    assert_int_equal(sl_tls_feed(p.c, (const uint8_t *)"x", 1), SL_ECRYPTO);
    pair_close(&p);
    SSL_CTX_free(cctx);
}

/* Leaves a client must refuse, with OpenSSL's verification error for each. */
static void client_rejects_leaves_it_must_not_trust(void **state)
{
    static const struct {
        const char *host;
        bool is_ip;
        X509 **leaf;
        const char *verify_error;
        int alert;
    } cases[] = {
        { "wrong.sluice.test", false, &pki.leaf, "hostname mismatch", SSL_AD_BAD_CERTIFICATE },
        { "127.0.0.2", true, &pki.leaf, "IP address mismatch", SSL_AD_BAD_CERTIFICATE },
        { "a.sluice.test", false, &pki.leaf_unknown, "unable to get local issuer certificate",
          SSL_AD_UNKNOWN_CA },
        { "a.sluice.test", false, &pki.leaf_expired, "certificate has expired",
          SSL_AD_CERTIFICATE_EXPIRED },
        /* RFC 6125 §6.4.4 allows falling back to the subject CN when there is no SAN; OpenSSL
         * does so by default. The proxy never does. */
        { "a.sluice.test", false, &pki.leaf_cn_only, "hostname mismatch", SSL_AD_BAD_CERTIFICATE },
    };

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(cases); i++) {
        expect_rejected(cases[i].host, cases[i].is_ip, *cases[i].leaf, cases[i].verify_error,
                        cases[i].alert);
    }
}

static void client_to_an_ip_sends_no_sni_and_checks_the_ip(void **state)
{
    SSL_CTX *cctx = client_ctx();
    struct pair p;

    (void)state;
    pair_open(&p, cctx, "127.0.0.1", true, 443);
    handshake_ok(&p);
    assert_int_equal(p.probe.calls, 1);
    assert_true(p.probe.saw_null);
    assert_null(sl_tls_sni(p.s));
    assert_string_equal(sl_tls_verify_error(p.c), "ok");
    pair_close(&p);
    SSL_CTX_free(cctx);
}

static void client_ctx_loads_an_extra_ca_file(void **state)
{
    char path[] = "/tmp/sluice-test-ca-XXXXXX";
    SSL_CTX *cctx = NULL;
    struct pair p;
    char err[512];
    FILE *f;
    int fd;

    (void)state;
    fd = mkstemp(path);
    assert_true(fd != -1);
    f = fdopen(fd, "w");
    assert_non_null(f);
    assert_int_equal(PEM_write_X509(f, pki.ca.cert), 1);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(sl_tls_client_ctx_new(path, 8, &cctx, err, sizeof(err)), 0);
    assert_int_equal(unlink(path), 0);
    pair_open(&p, cctx, "a.sluice.test", false, 443);
    handshake_ok(&p);
    pair_close(&p);
    SSL_CTX_free(cctx);

    cctx = NULL;
    assert_int_equal(sl_tls_client_ctx_new(path, 8, &cctx, err, sizeof(err)), SL_EIO);
    assert_null(cctx);
    assert_non_null(strstr(err, path));
    assert_int_equal(sl_tls_client_ctx_new(NULL, 1u << 30, &cctx, err, sizeof(err)), SL_EINVAL);
    assert_null(cctx);
}

/* Replaces the ALPN list a client context offers (`wire` NULL: offer none). */
static void offer_alpn(SSL_CTX *ctx, const char *wire, size_t len)
{
    assert_int_equal(SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)wire, (unsigned)len), 0);
}

/* What the server picks from the ALPN list a client offers (NULL: no extension). */
struct alpn_case {
    const char *offer;
    size_t len;
    /* The protocol both ends settle on; NULL: none. */
    const char *want;
    /* The handshake fails with a no_application_protocol alert instead. */
    bool fails;
};

static void alpn_is_http1_or_nothing(void **state)
{
    static const struct alpn_case cases[] = {
        /* h2 is offered too: the proxy speaks HTTP/1.1 to every client. */
        { "\x02h2\x08http/1.1", 12, "http/1.1", false },
        /* HTTP/1.0 is all the client speaks besides h2. */
        { "\x02h2\x08http/1.0", 12, "http/1.0", false },
        { "\x02h2", 3, NULL, true },
        /* No ALPN at all is served (as HTTP/1.x). */
        { NULL, 0, NULL, false },
    };

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(cases); i++) {
        const struct alpn_case *k = &cases[i];
        SSL_CTX *cctx = client_ctx();
        struct pair p;

        offer_alpn(cctx, k->offer, k->len);
        pair_open(&p, cctx, "a.sluice.test", false, 443);
        if (k->fails) {
            drive_to(&p, SL_ECRYPTO, SL_ECRYPTO);
            assert_non_null(strstr(sl_tls_error_text(p.s), "no application protocol"));
            assert_non_null(strstr(sl_tls_error_text(p.c), "no application protocol"));
            assert_null(sl_tls_alpn(p.c));
        } else if (k->want != NULL) {
            handshake_ok(&p);
            assert_string_equal(sl_tls_alpn(p.c), k->want);
            assert_string_equal(sl_tls_alpn(p.s), k->want);
        } else {
            handshake_ok(&p);
            assert_null(sl_tls_alpn(p.c));
            assert_null(sl_tls_alpn(p.s));
            exchange_text(&p, "GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 200 OK\r\n\r\n", SIZE_MAX);
        }
        pair_close(&p);
        SSL_CTX_free(cctx);
    }
}

static void sni_callback_can_defer_the_certificate(void **state)
{
    struct pair p;

    (void)state;
    pair_open_a(&p);
    p.probe.answer = SL_TLS_SNI_RETRY;
    drive_to(&p, SL_TLS_HS_WANT_IO, SL_TLS_HS_WANT_CERT);
    assert_int_equal(p.probe.calls, 1);
    assert_string_equal(sl_tls_sni(p.s), "a.sluice.test");
    /* Still waiting: no certificate yet, and the callback is not asked again. */
    assert_int_equal(sl_tls_handshake(p.s), SL_TLS_HS_WANT_CERT);
    /* (The certificate is minted off the loop here.) */
    assert_int_equal(sl_tls_set_certificate(p.s, pki.leaf, pki.leaf_key), 0);
    handshake_ok(&p);
    assert_int_equal(p.probe.calls, 1);
    assert_string_equal(sl_tls_verify_error(p.c), "ok");
    exchange_text(&p, "after", "the wait", SIZE_MAX);
    pair_close(&p);
}

static void sni_callback_can_refuse(void **state)
{
    struct pair p;

    (void)state;
    pair_open_a(&p);
    p.probe.answer = SL_TLS_SNI_REFUSE;
    drive_to(&p, SL_ECRYPTO, SL_ECRYPTO);
    assert_string_equal(sl_tls_error_text(p.s), "server name refused");
    assert_non_null(strstr(sl_tls_error_text(p.c), "unrecognized name"));
    /* The server refused on its own; the client failed on the server's alert. */
    assert_int_equal(sl_tls_peer_alert(p.s), -1);
    assert_int_equal(sl_tls_peer_alert(p.c), SSL_AD_UNRECOGNIZED_NAME);
    pair_close(&p);
}

static bool connect_and_check_reuse(SSL_CTX *cctx, const char *scope, const char *host,
                                    uint16_t port);

/* A session issued under one certificate is never resumed under another: the server answers the
 * offered session with a full handshake, which the client then verifies (and here refuses: the
 * other certificate does not name the host). Without the per-certificate session context the
 * server would resume, no certificate would be sent, and the handshake would succeed. */
static void session_is_not_resumed_under_another_certificate(void **state)
{
    for (int v = 0; v < 2; v++) {
        SSL_CTX *cctx = client_ctx();
        struct pair p;
        struct hs rc;

        (void)state;
        if (v == 1) {
            assert_int_equal(SSL_CTX_set_max_proto_version(cctx, TLS1_2_VERSION), 1);
        }
        assert_false(connect_and_check_reuse(cctx, NULL, "a.sluice.test", 443));
        assert_true(connect_and_check_reuse(cctx, NULL, "a.sluice.test", 443));
        pair_open(&p, cctx, "a.sluice.test", false, 443);
        p.probe.cert = pki.leaf_b;
        rc = drive(&p, SIZE_MAX, false);
        assert_int_equal(rc.c, SL_ECRYPTO);
        assert_false(sl_tls_is_session_reused(p.s));
        assert_non_null(strstr(sl_tls_error_text(p.c), "certificate verify failed"));
        pair_close(&p);
        SSL_CTX_free(cctx);
    }
}

/* Runs a full connection to host:port, reading after the handshake so that TLS 1.3 tickets
 * reach the client; returns whether the session was resumed. */
static bool connect_and_check_reuse(SSL_CTX *cctx, const char *scope, const char *host,
                                    uint16_t port)
{
    struct pair p;
    bool reused;

    pair_open_scoped(&p, cctx, scope, host, false, port, 0, 0);
    handshake_ok(&p);
    reused = sl_tls_is_session_reused(p.c);
    assert_false(sl_tls_is_session_reused(p.s) != reused);
    exchange_text(&p, "hello", "world", SIZE_MAX);
    pair_close(&p);
    return reused;
}

/* One connection of a resumption script: where to, and whether its session is resumed. */
struct reuse_step {
    const char *scope;
    const char *host;
    uint16_t port;
    bool reused;
};

/* Connects as the steps say, one after the other on `cctx`, and checks each resumption. */
static void expect_reuse(SSL_CTX *cctx, const struct reuse_step *steps, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        bool reused = connect_and_check_reuse(cctx, steps[i].scope, steps[i].host, steps[i].port);

        if (reused != steps[i].reused) {
            fail_msg("connection %zu (scope %s) to %s:%u: resumed %d, want %d", i,
                     steps[i].scope != NULL ? steps[i].scope : "none", steps[i].host,
                     (unsigned)steps[i].port, reused, steps[i].reused);
        }
    }
}

/* Resumption scripts: a client context (TLS 1.3 or capped at 1.2; a session cache of the
 * default size or of `cache` entries) connects as the steps say. */
static void sessions_resume_only_where_they_were_made(void **state)
{
    static const struct {
        bool tls12;
        size_t cache;
        struct reuse_step steps[6];
    } scripts[] = {
        /* Only for the same host and port; the resumed connection brings fresh tickets along. */
        { false,
          0,
          { { NULL, "a.sluice.test", 443, false },
            { NULL, "a.sluice.test", 443, true },
            { NULL, "b.sluice.test", 443, false },
            { NULL, "a.sluice.test", 8443, false },
            { NULL, "a.sluice.test", 443, true },
            { NULL, "b.sluice.test", 443, true } } },
        /* A TLS 1.2 session stays cached after use. */
        { true,
          0,
          { { NULL, "a.sluice.test", 443, false },
            { NULL, "a.sluice.test", 443, true },
            { NULL, "a.sluice.test", 443, true },
            { NULL, "a.sluice.test", 444, false },
            { NULL, "b.sluice.test", 443, false } } },
        /* Only within the scope it was made in (the proxy's client): another client's first
         * connection runs in full, then each resumes its own; no scope is a scope of its own. */
        { false,
          0,
          { { "sb_a", "a.sluice.test", 443, false },
            { "sb_b", "a.sluice.test", 443, false },
            { "sb_a", "a.sluice.test", 443, true },
            { "sb_b", "a.sluice.test", 443, true },
            { NULL, "a.sluice.test", 443, false },
            { "sb_a", "b.sluice.test", 443, false } } },
        /* Also a TLS 1.2 session, which stays cached after use and skips the certificate. */
        { true,
          0,
          { { "sb_a", "a.sluice.test", 443, false },
            { "sb_b", "a.sluice.test", 443, false },
            { "sb_a", "a.sluice.test", 443, true },
            { "sb_a b", "a.sluice.test", 443, false },
            { "sb_a", "a.sluice.test", 443, true } } },
        /* The cache stays within its size: b evicts a. */
        { false,
          1,
          { { NULL, "a.sluice.test", 443, false },
            { NULL, "b.sluice.test", 443, false },
            { NULL, "a.sluice.test", 443, false },
            { NULL, "a.sluice.test", 443, true } } },
    };

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(scripts); i++) {
        SSL_CTX *cctx = client_ctx_sized(scripts[i].cache);
        size_t n = 0;

        if (scripts[i].tls12) {
            assert_int_equal(SSL_CTX_set_max_proto_version(cctx, TLS1_2_VERSION), 1);
        }
        while (n < SL_ARRAY_LEN(scripts[i].steps) && scripts[i].steps[n].host != NULL) {
            n++;
        }
        expect_reuse(cctx, scripts[i].steps, n);
        SSL_CTX_free(cctx);
    }
}

/* Connects a TLS 1.2 client limited to `suites` (OpenSSL names) to the client-facing context;
 * returns the server's handshake result. */
static int tls12_server_result(const char *suites)
{
    SSL_CTX *cctx = client_ctx();
    struct pair p;
    struct hs rc;

    assert_int_equal(SSL_CTX_set_max_proto_version(cctx, TLS1_2_VERSION), 1);
    assert_int_equal(SSL_CTX_set_cipher_list(cctx, suites), 1);
    pair_open(&p, cctx, "a.sluice.test", false, 443);
    rc = drive(&p, SIZE_MAX, false);
    if (rc.s < 0) {
        assert_int_equal(rc.c, SL_ECRYPTO);
        assert_non_null(strstr(sl_tls_error_text(p.s), "no shared cipher"));
    } else {
        assert_int_equal(rc.c, SL_TLS_HS_DONE);
    }
    pair_close(&p);
    SSL_CTX_free(cctx);
    return rc.s;
}

/* The client-facing side speaks TLS 1.2 only with ECDHE and an AEAD: a client that offers
 * nothing but CBC suites (each alone, then all of them) is refused with a handshake failure,
 * and each AEAD suite alone is served. */
static void server_refuses_a_tls12_client_offering_only_cbc(void **state)
{
    static const char *const cbc[] = {
        "ECDHE-ECDSA-AES128-SHA",
        "ECDHE-ECDSA-AES256-SHA",
        "ECDHE-ECDSA-AES128-SHA256",
        "ECDHE-ECDSA-AES256-SHA384",
        "ECDHE-RSA-AES128-SHA",
        "ECDHE-RSA-AES256-SHA384",
        "AES128-SHA",
        "AES256-GCM-SHA384",
        "ECDHE-ECDSA-CAMELLIA128-SHA256",
        "ALL:!AESGCM:!CHACHA20:@SECLEVEL=0",
    };
    static const char *const aead[] = {
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cbc) / sizeof(cbc[0]); i++) {
        if (tls12_server_result(cbc[i]) != SL_ECRYPTO) {
            fail_msg("a TLS 1.2 client offering only %s was served", cbc[i]);
        }
    }
    for (size_t i = 0; i < sizeof(aead) / sizeof(aead[0]); i++) {
        if (tls12_server_result(aead[i]) != SL_TLS_HS_DONE) {
            fail_msg("a TLS 1.2 client offering %s was refused", aead[i]);
        }
    }
}

/* The client engine still meets CBC: an upstream chooses its suite, and the one with the
 * largest record expansion must fit the input ring. */
static void tls12_cbc_bulk_transfer_stays_within_the_ring(void **state)
{
    const size_t len = 300000;
    uint8_t *up_data = sl_malloc(len);
    uint8_t *down_data = sl_malloc(len);
    uint8_t *up_got = sl_malloc(len);
    uint8_t *down_got = sl_malloc(len);
    SSL_CTX *cctx = client_ctx();
    SSL_CTX *sctx = SSL_CTX_new(TLS_server_method());
    struct stream up = { up_data, len, 0, up_got, 0 };
    struct stream down = { down_data, len, 0, down_got, 0 };
    struct pair p;

    (void)state;
    assert_non_null(up_data);
    assert_non_null(down_data);
    assert_non_null(up_got);
    assert_non_null(down_got);
    memset(up_data, 'u', len);
    memset(down_data, 'd', len);
    /* The suite with the largest record expansion an upstream can pick, served here by a
     * context that allows it (the proxy's own client-facing side does not). */
    assert_non_null(sctx);
    assert_int_equal(sl_tls_server_ctx_configure(sctx), 0);
    assert_int_equal(SSL_CTX_set_cipher_list(sctx, "ECDHE-ECDSA-AES256-SHA384"), 1);
    assert_int_equal(SSL_CTX_set_max_proto_version(cctx, TLS1_2_VERSION), 1);
    assert_int_equal(SSL_CTX_set_cipher_list(cctx, "ECDHE-ECDSA-AES256-SHA384"), 1);
    memset(&p, 0, sizeof(p));
    assert_int_equal(sl_tls_create_client(cctx, "a.sluice.test", false, 443, NULL, 1000, &p.c), 0);
    assert_int_equal(sl_tls_create_server(sctx, 7000, &p.s), 0);
    sl_tls_set_sni_fn(p.s, probe_sni, &p.probe);
    handshake_ok(&p);
    exchange(&p, &up, &down, 4093);
    assert_true(sl_tls_out_pending(p.c) == 0);
    pair_close(&p);
    SSL_CTX_free(cctx);
    SSL_CTX_free(sctx);
    sl_free(up_data);
    sl_free(down_data);
    sl_free(up_got);
    sl_free(down_got);
}

static void write_cap_holds_back_until_drained(void **state)
{
    const size_t cap = 4096;
    static uint8_t data[65536];
    uint8_t got[sizeof(data)];
    SSL_CTX *cctx = client_ctx();
    size_t sent = 0;
    size_t recvd = 0;
    struct pair p;
    int w;

    (void)state;
    memset(data, 'z', sizeof(data));
    pair_open_capped(&p, cctx, "a.sluice.test", false, 443, cap, 0);
    handshake_ok(&p);
    assert_int_equal(sl_tls_out_pending(p.c), 0);
    /* Nothing drains the client's output: writes stop once the cap is reached. */
    while ((w = sl_tls_write(p.c, data + sent, sizeof(data) - sent)) > 0) {
        assert_true((size_t)w <= cap);
        sent += (size_t)w;
    }
    assert_int_equal(w, 0);
    assert_true(sent >= cap - 64 && sent <= cap);
    assert_true(sl_tls_out_pending(p.c) >= cap);
    assert_true(sl_tls_out_pending(p.c) <= cap + 256);
    assert_int_equal(sl_tls_write(p.c, data, 1), 0);
    /* Drain it into the server; writing resumes. */
    (void)move(p.c, p.s, SIZE_MAX);
    assert_int_equal(sl_tls_out_pending(p.c), 0);
    w = sl_tls_write(p.c, data + sent, sizeof(data) - sent);
    assert_true(w > 0);
    sent += (size_t)w;
    (void)move(p.c, p.s, SIZE_MAX);
    while ((w = sl_tls_read(p.s, got + recvd, sizeof(got) - recvd)) > 0) {
        recvd += (size_t)w;
    }
    assert_int_equal(w, 0);
    assert_int_equal(recvd, sent);
    assert_memory_equal(got, data, recvd);
    pair_close(&p);
    SSL_CTX_free(cctx);
}

/* Moves what the raw client wrote (its write BIO) into `held`, then as much of `held` as the
 * engine takes. Returns the bytes fed. */
static size_t ku_feed(BIO *wb, uint8_t *held, size_t *held_len, size_t cap, struct sl_tls *s)
{
    size_t fed = 0;
    int n;

    while (*held_len < cap && (n = BIO_read(wb, held + *held_len, (int)(cap - *held_len))) > 0) {
        *held_len += (size_t)n;
    }
    while (*held_len > 0) {
        int r = sl_tls_feed(s, held, *held_len);

        if (r <= 0) {
            break;
        }
        memmove(held, held + r, *held_len - (size_t)r);
        *held_len -= (size_t)r;
        fed += (size_t)r;
    }
    return fed;
}

/* Moves the engine's output into the raw client's read BIO. */
static void ku_drain(struct sl_tls *s, BIO *rb)
{
    struct sl_slice o;

    while ((o = sl_tls_out_peek(s)).n > 0) {
        assert_int_equal(BIO_write(rb, o.p, (int)o.n), (int)o.n);
        sl_tls_out_ack(s, o.n);
    }
}

/* A TLS 1.3 peer that sends KeyUpdate(update_requested) after KeyUpdate and reads none of the
 * KeyUpdates they ask for: the engine stops reading it once its output holds the cap and one
 * record, instead of queueing one reply per request without a bound; once the peer reads,
 * reading goes on and every request is answered. */
static void keyupdate_replies_wait_for_a_peer_that_does_not_read(void **state)
{
    const int count = 20000;
    const size_t cap = 1 << 20;
    const size_t bound = SL_TLS_OUT_CAP_DEFAULT + SL_TLS_WRITE_MAX + 256 + SL_TLS_IN_RING_BYTES;
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    BIO *rb = BIO_new(BIO_s_mem());
    BIO *wb = BIO_new(BIO_s_mem());
    uint8_t *held = sl_malloc(cap);
    size_t held_len = 0;
    struct sni_probe probe = { 0 };
    struct sl_tls *s = NULL;
    uint8_t buf[256];
    /* A mutable copy: the SSL_set_tlsext_host_name() macro casts its argument to void *. */
    char sni[] = "a.sluice.test";
    SSL *c;
    int sent = 0;
    int hs = SL_TLS_HS_WANT_IO;
    bool stalled = false;

    (void)state;
    assert_non_null(cctx);
    assert_non_null(held);
    assert_int_equal(SSL_CTX_set_min_proto_version(cctx, TLS1_3_VERSION), 1);
    c = SSL_new(cctx);
    assert_non_null(c);
    SSL_set_bio(c, rb, wb);
    SSL_set_connect_state(c);
    assert_int_equal(SSL_set_tlsext_host_name(c, sni), 1);
    assert_int_equal(sl_tls_create_server(pki.server_ctx, 0, &s), 0);
    sl_tls_set_sni_fn(s, probe_sni, &probe);
    for (int i = 0; i < 100 && (hs != SL_TLS_HS_DONE || SSL_is_init_finished(c) != 1); i++) {
        (void)SSL_do_handshake(c);
        (void)ku_feed(wb, held, &held_len, cap, s);
        hs = sl_tls_handshake(s);
        ku_drain(s, rb);
    }
    assert_int_equal(hs, SL_TLS_HS_DONE);
    assert_int_equal(SSL_is_init_finished(c), 1);
    assert_int_equal(sl_tls_read(s, buf, sizeof(buf)), 0);
    ku_drain(s, rb);
    /* The flood; nothing the engine writes is taken. */
    while (sent < count) {
        assert_int_equal(SSL_key_update(c, SSL_KEY_UPDATE_REQUESTED), 1);
        assert_int_equal(SSL_do_handshake(c), 1);
        sent++;
        (void)ku_feed(wb, held, &held_len, cap, s);
        assert_int_equal(sl_tls_read(s, buf, sizeof(buf)), 0);
        assert_true(sl_tls_out_pending(s) <= bound);
        if (held_len > 0) {
            stalled = true; /* the engine takes no more input */
        }
    }
    assert_true(stalled);
    /* The peer reads: every request is answered in the end, and the connection still works. */
    for (int i = 0; i < 10000 && (held_len > 0 || sl_tls_out_pending(s) > 0); i++) {
        ku_drain(s, rb);
        assert_int_equal(SSL_read(c, buf, sizeof(buf)), -1);
        (void)ku_feed(wb, held, &held_len, cap, s);
        assert_int_equal(sl_tls_read(s, buf, sizeof(buf)), 0);
        assert_true(sl_tls_out_pending(s) <= bound);
    }
    assert_int_equal(held_len, 0);
    assert_int_equal(SSL_write(c, "ping", 4), 4);
    (void)ku_feed(wb, held, &held_len, cap, s);
    assert_int_equal(sl_tls_read(s, buf, sizeof(buf)), 4);
    assert_memory_equal(buf, "ping", 4);
    assert_int_equal(sl_tls_write(s, (const uint8_t *)"pong", 4), 4);
    ku_drain(s, rb);
    assert_int_equal(SSL_read(c, buf, sizeof(buf)), 4);
    assert_memory_equal(buf, "pong", 4);
    sl_tls_destroy(s);
    SSL_free(c);
    SSL_CTX_free(cctx);
    sl_free(held);
}

static void close_notify_is_told_from_truncation(void **state)
{
    SSL_CTX *cctx = client_ctx();
    uint8_t buf[64];
    struct pair p;
    int r;

    (void)state;
    /* Clean close: close_notify arrives, reads report UV_EOF for good. */
    pair_open(&p, cctx, "a.sluice.test", false, 443);
    handshake_ok(&p);
    exchange_text(&p, "bye", "bye", SIZE_MAX);
    assert_int_equal(sl_tls_shutdown(p.c), 1);
    assert_int_equal(sl_tls_shutdown(p.c), 1);
    assert_int_equal(sl_tls_write(p.c, (const uint8_t *)"late", 4), SL_EINVAL);
    (void)move(p.c, p.s, SIZE_MAX);
    assert_int_equal(sl_tls_read(p.s, buf, sizeof(buf)), UV_EOF);
    assert_int_equal(sl_tls_read(p.s, buf, sizeof(buf)), UV_EOF);
    /* The server answers with its own close_notify. */
    assert_int_equal(sl_tls_shutdown(p.s), 1);
    (void)move(p.s, p.c, SIZE_MAX);
    assert_int_equal(sl_tls_read(p.c, buf, sizeof(buf)), UV_EOF);
    assert_string_equal(sl_tls_error_text(p.s), "");
    pair_close(&p);

    /* Truncation: the transport ends without close_notify after some data. */
    pair_open(&p, cctx, "a.sluice.test", false, 443);
    handshake_ok(&p);
    assert_int_equal(sl_tls_write(p.c, (const uint8_t *)"partial", 7), 7);
    (void)move(p.c, p.s, SIZE_MAX);
    sl_tls_feed_eof(p.s);
    sl_tls_feed_eof(p.s);
    assert_int_equal(sl_tls_feed(p.s, (const uint8_t *)"x", 1), SL_EINVAL);
    r = sl_tls_read(p.s, buf, sizeof(buf));
    assert_int_equal(r, 7);
    assert_memory_equal(buf, "partial", 7);
    assert_int_equal(sl_tls_read(p.s, buf, sizeof(buf)), UV_ECONNRESET);
    assert_int_equal(sl_tls_read(p.s, buf, sizeof(buf)), UV_ECONNRESET);
    assert_string_not_equal(sl_tls_error_text(p.s), "");
    /* Cut between two records: the peer shut only its sending side, and still reads what is
     * written to it (a half-close without close_notify), close_notify included. */
    assert_int_equal(sl_tls_write(p.s, (const uint8_t *)"answer", 6), 6);
    (void)move(p.s, p.c, SIZE_MAX);
    r = sl_tls_read(p.c, buf, sizeof(buf));
    assert_int_equal(r, 6);
    assert_memory_equal(buf, "answer", 6);
    assert_int_equal(sl_tls_shutdown(p.s), 1);
    (void)move(p.s, p.c, SIZE_MAX);
    assert_int_equal(sl_tls_read(p.c, buf, sizeof(buf)), UV_EOF);
    pair_close(&p);

    /* Cut inside a record: the engine fails, writing included. */
    pair_open(&p, cctx, "a.sluice.test", false, 443);
    handshake_ok(&p);
    assert_int_equal(sl_tls_write(p.c, (const uint8_t *)"partial", 7), 7);
    {
        struct sl_slice rec = sl_tls_out_peek(p.c);

        assert_true(rec.n > 10);
        assert_int_equal(sl_tls_feed(p.s, rec.p, rec.n - 3), (int)(rec.n - 3));
        sl_tls_out_ack(p.c, rec.n);
    }
    sl_tls_feed_eof(p.s);
    assert_int_equal(sl_tls_read(p.s, buf, sizeof(buf)), UV_ECONNRESET);
    assert_int_equal(sl_tls_write(p.s, (const uint8_t *)"answer", 6), UV_ECONNRESET);
    assert_string_not_equal(sl_tls_error_text(p.s), "");
    pair_close(&p);

    /* A handshake cut short fails the same way. */
    pair_open(&p, cctx, "a.sluice.test", false, 443);
    assert_int_equal(sl_tls_handshake(p.c), SL_TLS_HS_WANT_IO);
    sl_tls_feed_eof(p.c);
    assert_int_equal(sl_tls_handshake(p.c), UV_ECONNRESET);
    pair_close(&p);
    SSL_CTX_free(cctx);
}

static void feed_accepts_only_what_fits_and_garbage_fails(void **state)
{
    static uint8_t junk[SL_TLS_IN_RING_BYTES + 100];
    struct sl_tls *s = NULL;

    (void)state;
    memset(junk, 'Q', sizeof(junk));
    assert_int_equal(sl_tls_create_server(pki.server_ctx, 0, &s), 0);
    assert_int_equal(sl_tls_feed(s, junk, sizeof(junk)), SL_TLS_IN_RING_BYTES);
    assert_int_equal(sl_tls_feed(s, junk, sizeof(junk)), 0);
    assert_int_equal(sl_tls_feed(s, junk, 0), 0);
    assert_int_equal(sl_tls_handshake(s), SL_ECRYPTO);
    assert_string_not_equal(sl_tls_error_text(s), "");
    sl_tls_destroy(s);
}

static void rejects_calls_out_of_order_and_bad_arguments(void **state)
{
    SSL_CTX *cctx = client_ctx();
    struct sl_tls *t = NULL;
    uint8_t buf[8];

    (void)state;
    assert_int_equal(sl_tls_create_client(cctx, "1.2.3.4", false, 443, NULL, 0, &t), SL_EINVAL);
    assert_int_equal(sl_tls_create_client(cctx, "a.sluice.test", true, 443, NULL, 0, &t),
                     SL_EINVAL);
    assert_int_equal(sl_tls_create_client(cctx, "a.sluice.test", false, 0, NULL, 0, &t), SL_EINVAL);
    assert_int_equal(sl_tls_create_client(cctx, "", false, 443, NULL, 0, &t), SL_EINVAL);
    assert_int_equal(sl_tls_create_client(cctx, "a b", false, 443, NULL, 0, &t), SL_EINVAL);
    {
        char scope[SL_TLS_SCOPE_MAX + 2];

        memset(scope, 's', sizeof(scope) - 1);
        scope[sizeof(scope) - 1] = '\0';
        assert_int_equal(sl_tls_create_client(cctx, "a.sluice.test", false, 443, scope, 0, &t),
                         SL_EINVAL);
        scope[SL_TLS_SCOPE_MAX] = '\0';
        assert_int_equal(sl_tls_create_client(cctx, "a.sluice.test", false, 443, scope, 0, &t), 0);
        sl_tls_destroy(t);
        t = NULL;
    }
    assert_int_equal(sl_tls_create_client(cctx, "a.sluice.test", false, 443, NULL,
                                          SL_TLS_OUT_CAP_MAX + 1, &t),
                     SL_EINVAL);
    assert_int_equal(sl_tls_create_server(NULL, 0, &t), SL_EINVAL);
    assert_null(t);
    assert_int_equal(sl_tls_create_client(cctx, "::1", true, 443, NULL, 0, &t), 0);
    assert_int_equal(sl_tls_read(t, buf, sizeof(buf)), SL_EINVAL);
    assert_int_equal(sl_tls_write(t, buf, sizeof(buf)), SL_EINVAL);
    assert_int_equal(sl_tls_shutdown(t), SL_EINVAL);
    assert_int_equal(sl_tls_set_certificate(t, pki.leaf, pki.leaf_key), SL_EINVAL);
    sl_tls_destroy(t);
    sl_tls_destroy(NULL);

    assert_int_equal(sl_tls_create_server(pki.server_ctx, 0, &t), 0);
    assert_int_equal(sl_tls_set_certificate(t, pki.leaf, pki.other_ca.key), SL_ECRYPTO);
    assert_string_not_equal(sl_tls_error_text(t), "");
    assert_int_equal(sl_tls_set_certificate(t, pki.leaf, pki.leaf_key), 0);
    sl_tls_destroy(t);
    SSL_CTX_free(cctx);
}

static void creation_survives_allocation_failures(void **state)
{
    SSL_CTX *cctx = NULL;
    struct sl_tls *t = NULL;
    char err[256];
    int rc;

    (void)state;
    for (long n = 1;; n++) {
        sl_mem_fail_after(n);
        rc = sl_tls_client_ctx_new(NULL, 4, &cctx, err, sizeof(err));
        sl_mem_fail_after(0);
        if (rc == 0) {
            break;
        }
        assert_int_equal(rc, SL_ENOMEM);
        assert_null(cctx);
    }
    for (long n = 1;; n++) {
        sl_mem_fail_after(n);
        rc = sl_tls_create_client(cctx, "a.sluice.test", false, 443, NULL, 0, &t);
        sl_mem_fail_after(0);
        if (rc == 0) {
            break;
        }
        assert_int_equal(rc, SL_ENOMEM);
        assert_null(t);
    }
    sl_tls_destroy(t);
    SSL_CTX_free(cctx);
}

/* The first flight of a fresh client engine: a real ClientHello. */
static size_t client_hello(uint8_t *buf, size_t cap)
{
    SSL_CTX *cctx = client_ctx();
    struct sl_tls *c = NULL;
    size_t n;

    assert_int_equal(sl_tls_create_client(cctx, "a.sluice.test", false, 443, NULL, 0, &c), 0);
    assert_int_equal(sl_tls_handshake(c), SL_TLS_HS_WANT_IO);
    n = sl_tls_out_copy(c, buf, cap);
    sl_tls_destroy(c);
    SSL_CTX_free(cctx);
    return n;
}

/* A byte string that may hold NULs. */
struct bytes {
    const char *p;
    size_t n;
};

#define BYTES(s)           \
    {                      \
        (s), sizeof(s) - 1 \
    }

static void sniff_classifies_the_first_bytes_of_a_tunnel(void **state)
{
    static const struct bytes http[] = { BYTES("GET / HTTP/1.1\r\n"),
                                         BYTES("CONNECT x:443 HTTP/1.1\r\n"),
                                         BYTES("M-SEARCH * HTTP/1.1\r\n"),
                                         BYTES("ABCDEFGHIJKLMNOPQRSTUVWX / HTTP/1.1\r\n") };
    static const struct bytes other[] = { BYTES(" GET /"),
                                          BYTES("GET\r\n"),
                                          BYTES("GE\tT"),
                                          BYTES("ABCDEFGHIJKLMNOPQRSTUVWXY "),
                                          BYTES("\0GET "),
                                          BYTES("\x80\x2e\x01\x03\x01"),
                                          BYTES("\x16\x02\x01"),
                                          BYTES("\x16\x03\x05"),
                                          BYTES("\x16\x03\x01\x40\x01\x01"),
                                          BYTES("\x16\x03\x01\x00\x03\x01"),
                                          BYTES("\x16\x03\x01\x01\x00\x02"),
                                          BYTES("\x17\x03\x03\x00\x10"),
                                          BYTES("{\"json\": 1}"),
                                          BYTES("\xff\xfe") };
    static const struct bytes short_[] = { BYTES(""),
                                           BYTES("G"),
                                           BYTES("GE"),
                                           BYTES("GET"),
                                           BYTES("M-SEARCH"),
                                           BYTES("\x16"),
                                           BYTES("\x16\x03"),
                                           BYTES("\x16\x03\x01"),
                                           BYTES("\x16\x03\x01\x02"),
                                           BYTES("\x16\x03\x01\x02\x00") };
    uint8_t hello[4096];
    uint8_t rnd[32];
    uint64_t x = 0x9e3779b97f4a7c15u;
    size_t n = client_hello(hello, sizeof(hello));

    (void)state;
    assert_true(n > 6);
    assert_int_equal(sl_tls_sniff(hello, n), SL_TLS_SNIFF_TLS);
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(sl_tls_sniff(hello, i), SL_TLS_SNIFF_NEED_MORE);
    }
    for (size_t i = 6; i <= n; i++) {
        assert_int_equal(sl_tls_sniff(hello, i), SL_TLS_SNIFF_TLS);
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(http); i++) {
        assert_int_equal(sl_tls_sniff((const uint8_t *)http[i].p, http[i].n), SL_TLS_SNIFF_HTTP);
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(other); i++) {
        assert_int_equal(sl_tls_sniff((const uint8_t *)other[i].p, other[i].n), SL_TLS_SNIFF_OTHER);
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(short_); i++) {
        assert_int_equal(sl_tls_sniff((const uint8_t *)short_[i].p, short_[i].n),
                         SL_TLS_SNIFF_NEED_MORE);
    }
    /* Random bytes: whatever the verdict, it must be one the bytes justify. */
    for (int round = 0; round < 100000; round++) {
        enum sl_tls_sniff_result v;

        for (size_t i = 0; i < sizeof(rnd); i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            rnd[i] = (uint8_t)x;
        }
        v = sl_tls_sniff(rnd, sizeof(rnd));
        assert_int_not_equal(v, SL_TLS_SNIFF_NEED_MORE);
        if (v == SL_TLS_SNIFF_TLS) {
            assert_true(rnd[0] == 0x16 && rnd[1] == 3 && rnd[2] <= 4 && rnd[5] == 1);
        }
        if (v == SL_TLS_SNIFF_HTTP) {
            assert_non_null(memchr(rnd + 1, ' ', 24));
            assert_true(rnd[0] != ' ' && rnd[0] != 0x16);
        }
    }
}

/* The bytes waiting in `b` (a memory BIO), appended to out[*n..cap). */
static void drain_bio(BIO *b, uint8_t *out, size_t *n, size_t cap)
{
    int r;

    while ((r = BIO_read(b, out + *n, (int)(cap - *n))) > 0) {
        *n += (size_t)r;
    }
}

/* A real OpenSSL client (key share for X25519 only, groups X25519 and P-256, SNI
 * a.sluice.test) and server offering `server_groups`: the client's ClientHello in ch[0..*chn),
 * the server's first flight in flight[0..*fn). */
static void first_flights(const char *server_groups, uint8_t *ch, size_t *chn, uint8_t *flight,
                          size_t *fn, size_t cap)
{
    /* Mutable copies: the SSL_CTX_set1_groups_list() and SSL_set_tlsext_host_name() macros cast
     * their argument to char * and void *. */
    char sgroups[32];
    char cgroups[] = "X25519:P-256";
    SSL_CTX *sctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    char sni[] = "a.sluice.test";
    BIO *c_in = BIO_new(BIO_s_mem());
    BIO *c_out = BIO_new(BIO_s_mem());
    BIO *s_in = BIO_new(BIO_s_mem());
    BIO *s_out = BIO_new(BIO_s_mem());
    SSL *c;
    SSL *s;

    assert_non_null(sctx);
    assert_non_null(cctx);
    assert_int_equal(SSL_CTX_use_certificate(sctx, pki.leaf), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(sctx, pki.leaf_key), 1);
    assert_true(strlen(server_groups) < sizeof(sgroups));
    memcpy(sgroups, server_groups, strlen(server_groups) + 1);
    assert_int_equal(SSL_CTX_set1_groups_list(sctx, sgroups), 1);
    assert_int_equal(SSL_CTX_set1_groups_list(cctx, cgroups), 1);
    c = SSL_new(cctx);
    s = SSL_new(sctx);
    assert_non_null(c);
    assert_non_null(s);
    SSL_set_bio(c, c_in, c_out);
    SSL_set_bio(s, s_in, s_out);
    SSL_set_connect_state(c);
    SSL_set_accept_state(s);
    assert_int_equal(SSL_set_tlsext_host_name(c, sni), 1);
    assert_int_equal(SSL_do_handshake(c), -1);
    *chn = 0;
    drain_bio(c_out, ch, chn, cap);
    assert_true(*chn > 0);
    assert_int_equal(BIO_write(s_in, ch, (int)*chn), (int)*chn);
    (void)SSL_do_handshake(s);
    *fn = 0;
    drain_bio(s_out, flight, fn, cap);
    assert_true(*fn > 0);
    SSL_free(c);
    SSL_free(s);
    SSL_CTX_free(cctx);
    SSL_CTX_free(sctx);
}

/* Feeds `p` to a fresh watch `step` bytes at a time; returns the verdict. */
static enum sl_tls_watch_verdict watch_in_steps(const uint8_t *p, size_t n, size_t step)
{
    struct sl_tls_server_watch w;
    enum sl_tls_watch_verdict v = SL_TLS_WATCH_MORE;

    memset(&w, 0, sizeof(w));
    for (size_t off = 0; off < n && v == SL_TLS_WATCH_MORE; off += step) {
        v = sl_tls_watch_server(&w, p + off, n - off < step ? n - off : step);
    }
    return v;
}

/* Passthrough tunnels' record readers (proxy/conn_tls.c guards the hellos with them): a real
 * server offering P-256 only answers a client's X25519 key share with a HelloRetryRequest, seen
 * whole and byte by byte; one offering X25519 answers with a ServerHello. A ClientHello's span
 * is its records, split or not; trailing bytes in its last record or another record type
 * inside it are refused. */
static void passthrough_records_tell_a_retry_and_a_hello_span(void **state)
{
    enum {
        CAP = 16384
    };

    uint8_t *ch = sl_malloc(CAP);
    uint8_t *flight = sl_malloc(CAP);
    uint8_t *split = sl_malloc(CAP + 64);
    size_t chn = 0;
    size_t fn = 0;
    size_t span = 0;
    size_t body;

    (void)state;
    assert_non_null(ch);
    assert_non_null(flight);
    assert_non_null(split);
    first_flights("P-256", ch, &chn, flight, &fn, CAP);
    assert_int_equal(sl_tls_hello_span(ch, chn, &span), 1);
    assert_int_equal(span, chn);
    for (size_t n = 0; n < chn; n++) {
        assert_int_equal(sl_tls_hello_span(ch, n, &span), 0);
    }
    assert_int_equal(watch_in_steps(flight, fn, fn), SL_TLS_WATCH_HRR);
    assert_int_equal(watch_in_steps(flight, fn, 1), SL_TLS_WATCH_HRR);
    assert_int_equal(watch_in_steps(flight, fn, 7), SL_TLS_WATCH_HRR);
    /* The same retry behind a warning alert, its message cut over two records. */
    body = (size_t)flight[3] << 8 | flight[4];
    assert_true(body > 40 && 5 + body <= fn);
    memcpy(split, "\x15\x03\x03\x00\x02\x01\x70", 7);
    memcpy(split + 7, flight, 5);
    split[7 + 3] = 0;
    split[7 + 4] = 20;
    memcpy(split + 12, flight + 5, 20);
    memcpy(split + 32, flight, 5);
    split[32 + 3] = (uint8_t)((body - 20) >> 8);
    split[32 + 4] = (uint8_t)(body - 20);
    memcpy(split + 37, flight + 25, body - 20);
    assert_int_equal(watch_in_steps(split, 37 + body - 20, 3), SL_TLS_WATCH_HRR);
    /* ... but a ChangeCipherSpec inside the message: no ServerHello to trust. */
    memcpy(split + 32, "\x14\x03\x03\x00\x01\x01", 6);
    assert_int_equal(watch_in_steps(split, 38, 1), SL_TLS_WATCH_OTHER);

    first_flights("X25519:P-256", ch, &chn, flight, &fn, CAP);
    assert_int_equal(watch_in_steps(flight, fn, fn), SL_TLS_WATCH_OTHER);
    assert_int_equal(watch_in_steps(flight, fn, 1), SL_TLS_WATCH_OTHER);
    assert_int_equal(watch_in_steps(flight, 30, 30), SL_TLS_WATCH_MORE);
    assert_int_equal(watch_in_steps((const uint8_t *)"HTTP/1.1 400", 12, 1), SL_TLS_WATCH_OTHER);

    /* The ClientHello over three records: the span covers them all. */
    body = (size_t)ch[3] << 8 | ch[4];
    assert_int_equal(body + 5, chn);
    memcpy(split, ch, 5);
    split[3] = 0;
    split[4] = 2;
    memcpy(split + 5, ch + 5, 2);
    memcpy(split + 7, ch, 5);
    split[7 + 3] = 0;
    split[7 + 4] = 10;
    memcpy(split + 12, ch + 7, 10);
    memcpy(split + 22, ch, 5);
    split[22 + 3] = (uint8_t)((body - 12) >> 8);
    split[22 + 4] = (uint8_t)(body - 12);
    memcpy(split + 27, ch + 17, body - 12);
    assert_int_equal(sl_tls_hello_span(split, 27 + body - 12 + 6, &span), 1);
    assert_int_equal(span, 27 + body - 12);
    assert_int_equal(sl_tls_hello_span(split, 26, &span), 0);
    /* A ChangeCipherSpec between its records. */
    memcpy(split + 7, "\x14\x03\x03\x00\x01\x01", 6);
    assert_int_equal(sl_tls_hello_span(split, 13, &span), SL_EINVAL);
    /* Bytes after it in its last record. */
    memcpy(split, ch, chn);
    split[4] = (uint8_t)(split[4] + 4);
    split[3] = (uint8_t)(split[3] + (split[4] < 4));
    memcpy(split + chn, "\x01\x00\x00\x00", 4);
    assert_int_equal(sl_tls_hello_span(split, chn + 4, &span), SL_EINVAL);
    /* An empty record, a version other than 3.x. */
    assert_int_equal(sl_tls_hello_span((const uint8_t *)"\x16\x03\x01\x00\x00", 5, &span),
                     SL_EINVAL);
    assert_int_equal(sl_tls_hello_span((const uint8_t *)"\x16\x02", 2, &span), SL_EINVAL);
    sl_free(ch);
    sl_free(flight);
    sl_free(split);
}

int main(void)
{
    /* Before OpenSSL allocates anything (it refuses afterwards). */
    if (CRYPTO_set_mem_functions(count_malloc, count_realloc, count_free) != 1) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(handshake_completes_and_data_flows_both_ways),
        cmocka_unit_test(reading_with_nothing_fed_allocates_nothing),
        cmocka_unit_test(transfers_a_mebibyte_each_way_in_chunks),
        cmocka_unit_test(survives_ciphertext_one_byte_at_a_time),
        cmocka_unit_test(copying_channel_works_too),
        cmocka_unit_test(client_rejects_leaves_it_must_not_trust),
        cmocka_unit_test(client_to_an_ip_sends_no_sni_and_checks_the_ip),
        cmocka_unit_test(client_ctx_loads_an_extra_ca_file),
        cmocka_unit_test(alpn_is_http1_or_nothing),
        cmocka_unit_test(sni_callback_can_defer_the_certificate),
        cmocka_unit_test(sni_callback_can_refuse),
        cmocka_unit_test(session_is_not_resumed_under_another_certificate),
        cmocka_unit_test(sessions_resume_only_where_they_were_made),
        cmocka_unit_test(server_refuses_a_tls12_client_offering_only_cbc),
        cmocka_unit_test(tls12_cbc_bulk_transfer_stays_within_the_ring),
        cmocka_unit_test(write_cap_holds_back_until_drained),
        cmocka_unit_test(keyupdate_replies_wait_for_a_peer_that_does_not_read),
        cmocka_unit_test(close_notify_is_told_from_truncation),
        cmocka_unit_test(feed_accepts_only_what_fits_and_garbage_fails),
        cmocka_unit_test(rejects_calls_out_of_order_and_bad_arguments),
        cmocka_unit_test(creation_survives_allocation_failures),
        cmocka_unit_test(sniff_classifies_the_first_bytes_of_a_tunnel),
        cmocka_unit_test(passthrough_records_tell_a_retry_and_a_hello_span),
    };

    return cmocka_run_group_tests(tests, pki_setup, pki_teardown);
}
