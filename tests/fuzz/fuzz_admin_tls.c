/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_admin_tls.c - what a stranger can send to a proxy's --admin-listen port before
 * it has shown a certificate: bytes fed to a server connection of http/tls.h (mutual TLS 1.3, a
 * client certificate required, a CRL) through its memory BIOs, in pieces, the handshake stepped
 * after each, the output taken after each step as http/server.c does.
 *
 * Input: byte 0 seeds the split points; the rest is the client's stream.
 *
 * Invariants, not just "no crash":
 *   - no input completes the handshake (that takes a certificate of the test CA and its key);
 *   - once the handshake failed it stays failed, and a failed connection says why in words;
 *   - the ciphertext the server writes per step stays within one flight (its certificate
 *     chain, a CertificateRequest naming the CA, an alert): never more than 16 KiB.
 * The PKI is made once per process in a scratch directory under /tmp, removed at exit.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "base/buf.h"
#include "base/err.h"
#include "certs/pki.h"
#include "http/tls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_MAX  16384
#define FLIGHT_MAX 16384

static struct sl_http_tls *server;
/* The scratch directory and what is in it, for the exit. */
static char scratch[64];
static char serial[SL_PKI_SERIAL_HEX_MAX + 1];

static void remove_scratch(void)
{
    static const char *const files[] = { "pki/ca.pem", "pki/ca.key", "pki/crl.pem",
                                         "pki/proxy-p.pem", "pki/proxy-p.key" };
    char path[160];

    sl_http_tls_free(server);
    server = NULL;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        (void)snprintf(path, sizeof(path), "%s/%s", scratch, files[i]);
        (void)unlink(path);
    }
    (void)snprintf(path, sizeof(path), "%s/pki/issued/%s.pem", scratch, serial);
    (void)unlink(path);
    (void)snprintf(path, sizeof(path), "%s/pki/issued", scratch);
    (void)rmdir(path);
    (void)snprintf(path, sizeof(path), "%s/pki", scratch);
    (void)rmdir(path);
    (void)rmdir(scratch);
}

/* A PKI in a scratch directory, made once per process, and the server context over it. */
static void init_once(void)
{
    char pki[96];
    char cert[128];
    char key[128];
    char ca[128];
    char crl[128];
    char err[512];
    const char *ips[] = { "127.0.0.1" };
    struct sl_pki_request pr = { .kind = SL_PKI_PROXY, .name = "p", .ips = ips, .n_ips = 1 };
    struct sl_http_tls_files files;

    if (server != NULL) {
        return;
    }
    (void)snprintf(scratch, sizeof(scratch), "/tmp/sluice-fuzz-admin-tls-XXXXXX");
    SL_BUG_ON(mkdtemp(scratch) == NULL);
    (void)snprintf(pki, sizeof(pki), "%s/pki", scratch);
    SL_BUG_ON(sl_pki_init(pki, err, sizeof(err)) != 0);
    SL_BUG_ON(sl_pki_issue(pki, &pr, NULL, 0, serial, err, sizeof(err)) != 0);
    (void)snprintf(cert, sizeof(cert), "%s/proxy-p.pem", pki);
    (void)snprintf(key, sizeof(key), "%s/proxy-p.key", pki);
    (void)snprintf(ca, sizeof(ca), "%s/ca.pem", pki);
    (void)snprintf(crl, sizeof(crl), "%s/crl.pem", pki);
    files = (struct sl_http_tls_files){ .cert = cert, .key = key, .ca = ca, .crl = crl };
    SL_BUG_ON(sl_http_tls_create(&files, true, &server, err, sizeof(err)) != 0);
    SL_BUG_ON(atexit(remove_scratch) != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sl_buf out;
    char err[256];
    char why[160];
    SSL *ssl = NULL;
    uint32_t seed;
    size_t off = 1;
    bool failed = false;

    if (size < 1 || size > INPUT_MAX) {
        return 0;
    }
    init_once();
    seed = data[0] * 2654435761u + 1u;
    SL_BUG_ON(sl_http_tls_new(server, NULL, &ssl, err, sizeof(err)) != 0);
    sl_buf_init(&out, FLIGHT_MAX);
    while (off < size) {
        size_t n = 1 + (seed >> 16) % 700;
        int r;

        seed = seed * 1103515245u + 12345u;
        if (n > size - off) {
            n = size - off;
        }
        SL_BUG_ON(sl_http_tls_feed(ssl, data + off, n) != 0);
        off += n;
        r = SSL_do_handshake(ssl);
        SL_BUG_ON(r == 1);
        if (SSL_get_error(ssl, r) != SSL_ERROR_WANT_READ) {
            sl_http_tls_why(ssl, r, why, sizeof(why));
            SL_BUG_ON(why[0] == '\0');
            failed = true;
        }
        /* One flight per step, as http/server.c sends it. */
        sl_buf_reset(&out);
        SL_BUG_ON(sl_http_tls_take(ssl, &out) != 0);
        if (failed) {
            break;
        }
    }
    if (failed) {
        /* Failed for good: more bytes change nothing. */
        SL_BUG_ON(sl_http_tls_feed(ssl, "\x16\x03\x01\x00\x01\x01", 6) != 0);
        SL_BUG_ON(SSL_do_handshake(ssl) == 1);
    }
    ERR_clear_error();
    sl_buf_finish(&out);
    SSL_free(ssl);
    return 0;
}
