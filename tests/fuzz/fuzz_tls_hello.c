/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_tls_hello.c - the first bytes of an intercepted tunnel, as a hostile client
 * sends them: the sniffer that tells TLS from plain HTTP from garbage (sl_tls_sniff), then the
 * server engine's handshake with its ClientHello hook reading the SNI. Invariants: the sniffer
 * only ever changes its mind from NEED_MORE (a longer prefix never contradicts a verdict), the
 * SNI the hook sees is printable ASCII, and the engine fails cleanly on anything it refuses.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <openssl/ssl.h>

#include "base/err.h"
#include "certs/mint.h"
#include "proxy/tls.h"
#include "tests/support/pki.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static SSL_CTX *server_ctx;
static X509 *leaf;
static EVP_PKEY *leaf_key;

static void init_once(void)
{
    struct sl_minter *m = NULL;
    char err[256];

    if (server_ctx != NULL) {
        return;
    }
    SL_BUG_ON(sl_test_minter_create(&m, err, sizeof(err)) != 0);
    SL_BUG_ON(sl_minter_mint(m, "fuzz.sluice.test", &leaf, err, sizeof(err)) != 0);
    leaf_key = sl_minter_leaf_key(m);
    SL_BUG_ON(EVP_PKEY_up_ref(leaf_key) != 1);
    sl_minter_destroy(m);
    SL_BUG_ON(sl_tls_server_ctx_new(&server_ctx, err, sizeof(err)) != 0);
}

static enum sl_tls_sni_verdict on_sni(struct sl_tls *t, const char *sni, void *arg)
{
    (void)arg;
    if (sni != NULL) {
        for (const char *p = sni; *p != '\0'; p++) {
            SL_BUG_ON(*p < 0x21 || *p > 0x7e);
        }
    }
    return sl_tls_set_certificate(t, leaf, leaf_key) == 0 ? SL_TLS_SNI_OK : SL_TLS_SNI_REFUSE;
}

static void check_sniffer(const uint8_t *data, size_t size)
{
    enum sl_tls_sniff_result first = SL_TLS_SNIFF_NEED_MORE;

    for (size_t n = 0; n <= size && n <= 64; n++) {
        enum sl_tls_sniff_result r = sl_tls_sniff(data, n);

        if (first == SL_TLS_SNIFF_NEED_MORE) {
            first = r;
        } else {
            SL_BUG_ON(r != first);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sl_tls *t = NULL;
    size_t off = 0;
    uint8_t out[4096];

    init_once();
    check_sniffer(data, size);
    if (sl_tls_create_server(server_ctx, 0, &t) != 0) {
        return 0;
    }
    sl_tls_set_sni_fn(t, on_sni, NULL);
    for (int rounds = 0; rounds < 64; rounds++) {
        int fed = off < size ? sl_tls_feed(t, data + off, size - off) : 0;
        int rc;

        if (fed < 0) {
            break;
        }
        off += (size_t)fed;
        if (off == size) {
            sl_tls_feed_eof(t);
        }
        rc = sl_tls_handshake(t);
        while (sl_tls_out_copy(t, out, sizeof(out)) > 0) {
        }
        if (rc < 0 || rc == SL_TLS_HS_DONE || (fed == 0 && off == size)) {
            break;
        }
    }
    sl_tls_destroy(t);
    return 0;
}
