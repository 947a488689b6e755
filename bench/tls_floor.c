/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/tls_floor.c - what the cryptography of one intercepted TLS 1.3 handshake costs at the
 * least on this machine, through the same OpenSSL calls libssl makes. Prints numbers; passes or
 * fails nothing.
 *
 * Every handshake the proxy serves, resumed or not, makes a fresh X25519 key share and derives
 * the shared secret from the client's: clients offer only psk_dhe_ke resumption (curl, OpenSSL,
 * Chromium), so resumption never skips the key exchange. A full handshake also signs the
 * CertificateVerify with the leaf's P-256 key. Both run the TLS 1.3 key schedule, which
 * libssl computes with one EVP_KDF "TLS13-KDF" call per secret or key (fetch, context, params,
 * derive, free); KDF_PER_HANDSHAKE is how many such calls callgrind counted per handshake of the
 * proxy under `sluice-load --mode newconn` (2026-12-02, OpenSSL 3.0.19).
 *
 * Each figure is the median over BATCHES of the mean time per operation in the batch. The
 * floors are sums of medians: the CPU a handshake cannot go under with OpenSSL 3.0 on this core,
 * before the record layer, the ticket, the state machine, the kernel and the HTTP work.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include "base/log.h"

#define BATCHES           15
#define PER_BATCH         400
#define KDF_PER_BATCH     20000
#define KDF_PER_HANDSHAKE 21

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* A fresh key of `name` ("X25519"; "EC" takes `group`), as libssl makes a key share. */
static EVP_PKEY *keygen(const char *name, const char *group)
{
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_name(NULL, name, NULL);
    EVP_PKEY *k = NULL;

    if (c == NULL || EVP_PKEY_keygen_init(c) != 1
        || (group != NULL && EVP_PKEY_CTX_set_group_name(c, group) != 1)
        || EVP_PKEY_keygen(c, &k) != 1) {
        k = NULL;
    }
    EVP_PKEY_CTX_free(c);
    return k;
}

static int op_keygen(EVP_PKEY *own, EVP_PKEY *peer)
{
    EVP_PKEY *k = keygen("X25519", NULL);

    (void)own;
    (void)peer;
    EVP_PKEY_free(k);
    return k != NULL ? 0 : -1;
}

static int op_derive(EVP_PKEY *own, EVP_PKEY *peer)
{
    unsigned char secret[32];
    size_t len = sizeof(secret);
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, own, NULL);
    int ok = c != NULL && EVP_PKEY_derive_init(c) == 1 && EVP_PKEY_derive_set_peer(c, peer) == 1
             && EVP_PKEY_derive(c, secret, &len) == 1;

    EVP_PKEY_CTX_free(c);
    return ok ? 0 : -1;
}

/* A CertificateVerify: 64 spaces, the context string, a zero, the transcript hash. */
static int op_sign(EVP_PKEY *leaf, EVP_PKEY *peer)
{
    unsigned char tbs[130] = { 0 };
    unsigned char sig[80];
    size_t len = sizeof(sig);
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    int ok = m != NULL && EVP_DigestSignInit_ex(m, NULL, "SHA256", NULL, NULL, leaf, NULL) == 1
             && EVP_DigestSign(m, sig, &len, tbs, sizeof(tbs)) == 1;

    (void)peer;
    EVP_MD_CTX_free(m);
    return ok ? 0 : -1;
}

/* One HKDF-Expand-Label of the key schedule, made as libssl 3.0 makes it. */
static int op_kdf(EVP_PKEY *own, EVP_PKEY *peer)
{
    unsigned char secret[32] = { 1 };
    unsigned char hash[32] = { 2 };
    char digest[] = "SHA256";
    unsigned char prefix[] = "tls13 ";
    unsigned char label[] = "c hs traffic";
    unsigned char out[32];
    int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "TLS13-KDF", NULL);
    EVP_KDF_CTX *c = kdf != NULL ? EVP_KDF_CTX_new(kdf) : NULL;
    OSSL_PARAM params[7];
    OSSL_PARAM *p = params;
    int ok;

    (void)own;
    (void)peer;
    EVP_KDF_free(kdf);
    *p++ = OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode);
    *p++ = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0);
    *p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, secret, sizeof(secret));
    *p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_DATA, hash, sizeof(hash));
    *p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_PREFIX, prefix, sizeof(prefix) - 1);
    *p++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_LABEL, label, sizeof(label) - 1);
    *p = OSSL_PARAM_construct_end();
    ok = c != NULL && EVP_KDF_derive(c, out, sizeof(out), params) == 1;
    EVP_KDF_CTX_free(c);
    return ok ? 0 : -1;
}

/* The median over BATCHES of the mean µs of `op` in a batch of `n`; negative on a failure. */
static double measure(int (*op)(EVP_PKEY *, EVP_PKEY *), EVP_PKEY *a, EVP_PKEY *b, int n)
{
    double us[BATCHES];

    for (int i = 0; i < BATCHES; i++) {
        uint64_t t0 = now_ns();

        for (int j = 0; j < n; j++) {
            if (op(a, b) < 0) {
                return -1;
            }
        }
        us[i] = (double)(now_ns() - t0) / 1000.0 / n;
    }
    qsort(us, BATCHES, sizeof(us[0]), cmp_double);
    return us[BATCHES / 2];
}

int main(void)
{
    EVP_PKEY *own = keygen("X25519", NULL);
    EVP_PKEY *peer = keygen("X25519", NULL);
    EVP_PKEY *leaf = keygen("EC", "P-256");
    double gen;
    double derive;
    double sign;
    double kdf;
    int rc = 1;

    if (own == NULL || peer == NULL || leaf == NULL) {
        sl_eprintf("tls_floor: cannot make the keys");
        goto out;
    }
    gen = measure(op_keygen, own, peer, PER_BATCH);
    derive = measure(op_derive, own, peer, PER_BATCH);
    sign = measure(op_sign, leaf, peer, PER_BATCH);
    kdf = measure(op_kdf, own, peer, KDF_PER_BATCH);
    if (gen < 0 || derive < 0 || sign < 0 || kdf < 0) {
        sl_eprintf("tls_floor: an operation failed");
        goto out;
    }
    printf("X25519 key share: median %.1f us\n", gen);
    printf("X25519 derive: median %.1f us\n", derive);
    printf("P-256 CertificateVerify signature: median %.1f us\n", sign);
    printf("TLS13-KDF expand: median %.2f us (x%d per handshake)\n", kdf, KDF_PER_HANDSHAKE);
    printf("floor, resumed handshake: %.0f us\n", gen + derive + KDF_PER_HANDSHAKE * kdf);
    printf("floor, full handshake: %.0f us\n", gen + derive + sign + KDF_PER_HANDSHAKE * kdf);
    rc = 0;
out:
    EVP_PKEY_free(own);
    EVP_PKEY_free(peer);
    EVP_PKEY_free(leaf);
    return rc;
}
