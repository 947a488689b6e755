/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http/tls.h - mutual TLS for the control channel (docs/reference/proxy.md §4.9): the proxy's
 * admin listener on the network (http/server.h, sl_http_server_listen_tls()) and the control
 * plane's pushes to it (control/env/pusher.c).
 *
 * A context holds one side's certificate and key, the CA the peer's certificate must chain to
 * and, optionally, a CRL file. TLS 1.3 only; a peer certificate is always required and verified
 * against the CA and, with a CRL, against the CRL (X509_V_FLAG_CRL_CHECK). The CRL is read
 * again when its file changes (size, mtime or inode, checked by each sl_http_tls_new()), so a
 * revocation takes effect with the next connection, without a restart; a CRL that cannot be
 * read or that the CA did not sign fails the new connection (never an unchecked one). The
 * verifier checks the purpose as OpenSSL's TLS code does: a server's certificate needs
 * serverAuth, a client's clientAuth; and, when asked, the kind `sluice pki` wrote into it
 * (peer_kind below). No session tickets, no resumption, no renegotiation.
 *
 * Connections are SSL objects on two memory BIOs: the owner feeds what its socket delivered
 * (sl_http_tls_feed()), runs OpenSSL's calls, and sends what waits in the output
 * (sl_http_tls_take() into its own buffer, or sl_http_tls_send() as one uv_write of its own).
 * The owner bounds the input by reading only while it can use the bytes, and the output by what
 * it writes; nothing here blocks.
 *
 * Lifecycle: sl_http_tls_create() at start-up (reads the files; blocking) -> sl_http_tls_new()
 * per connection, on one loop thread -> SSL_free() each connection -> sl_http_tls_free() (SSL
 * objects keep their own references and may outlive it).
 */
#ifndef SL_HTTP_TLS_H
#define SL_HTTP_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>
#include <uv.h>

#include "base/buf.h"
#include "base/err.h"

/* Most ciphertext bytes sl_http_tls_send() keeps in flight per `in_flight` counter: beyond
 * it the peer is not reading what the handshake or alerts need, and the call fails. */
#define SL_HTTP_TLS_FLIGHT_MAX ((size_t)64 * 1024)

struct sl_http_tls; /* opaque */

/* The files of one side (paths borrowed during create). */
struct sl_http_tls_files {
    /* This side's certificate (PEM; intermediates may follow) and its private key. */
    const char *cert;
    const char *key;
    /* The CA (PEM) that must have issued the peer's certificate. */
    const char *ca;
    /* The CRL (PEM) of that CA, or NULL for none. */
    const char *crl;
    /* The kind the peer's certificate must be when it names one, or NULL: `sluice pki`
     * (certs/pki.h) writes a certificate's kind as its subject's organizational unit (proxy,
     * engine, control), so a leaf with an OU other than this one is refused (an engine's
     * certificate for a node's address does not pass as that node's proxy). A leaf without an OU
     * (another PKI's) is not checked for it. One of "proxy", "engine", "control". */
    const char *peer_kind;
};

/* Builds a server (`server`) or client context from `f`, checking every file now. Returns 0,
 * or SL_EINVAL/SL_EIO/SL_ECRYPTO/SL_ENOMEM with `err` naming the file and the problem. */
SL_MUST_CHECK int sl_http_tls_create(const struct sl_http_tls_files *f, bool server,
                                     struct sl_http_tls **out, char *err, size_t errlen);

/* Frees `t` (NULL: nothing). */
void sl_http_tls_free(struct sl_http_tls *t);

/* A new connection of `t` on memory BIOs, verifying with the newest CA and CRL. A client gives
 * `host`, the DNS name or IP literal (IPv6 without brackets) the server's certificate must
 * carry (also sent as SNI when it is a name); a server gives NULL. Returns 0 and `*out` (the
 * caller SSL_free()s it), or a negative code with `err` saying why (the CRL unreadable). */
SL_MUST_CHECK int sl_http_tls_new(struct sl_http_tls *t, const char *host, SSL **out, char *err,
                                  size_t errlen);

/* Gives `n` bytes of ciphertext from the peer to `ssl`. 0 or SL_ENOMEM. */
SL_MUST_CHECK int sl_http_tls_feed(SSL *ssl, const void *p, size_t n);

/* True when `ssl` holds input not yet read: decrypted bytes or ciphertext. */
bool sl_http_tls_has_input(SSL *ssl);

/* Appends every byte of ciphertext waiting in `ssl`'s output to `b`. 0, SL_ETOOBIG (cap of
 * `b`) or SL_ENOMEM. */
SL_MUST_CHECK int sl_http_tls_take(SSL *ssl, struct sl_buf *b);

/* Writes every byte waiting in `ssl`'s output to `s` as one uv_write of its own memory (nothing
 * when none waits). `*in_flight` counts the bytes written but not completed; it must stay valid
 * until the write's callback (libuv runs it, with UV_ECANCELED if need be, before the stream's
 * close callback). Returns 0, SL_ETOOBIG (more than SL_HTTP_TLS_FLIGHT_MAX would be in flight),
 * SL_ENOMEM or a UV_E* code. */
SL_MUST_CHECK int sl_http_tls_send(SSL *ssl, uv_stream_t *s, size_t *in_flight);

/* Why the OpenSSL call on `ssl` that returned `ret` failed, for a person, e.g. "certificate
 * verify failed: certificate revoked" or "the peer sent alert certificate required" (the
 * thread's OpenSSL error queue is emptied). */
void sl_http_tls_why(SSL *ssl, int ret, char *out, size_t n);

/* The subject of the peer's certificate on one line ("O=sluice, OU=control, CN=cp"), or "".
 */
void sl_http_tls_peer(SSL *ssl, char *out, size_t n);

#endif
