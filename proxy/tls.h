/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/tls.h - a sans-I/O TLS engine: OpenSSL behind four byte channels.
 *
 * The engine never sees a socket (docs/style.md §6). Its owner moves bytes through four channels,
 * as in BearSSL:
 *
 *   ciphertext in   sl_tls_feed()       bytes that arrived from the peer's transport
 *   ciphertext out  sl_tls_out_peek()   bytes to send to the peer, acknowledged with
 *                   sl_tls_out_ack()    sl_tls_out_ack() once sent (or sl_tls_out_copy())
 *   plaintext in    sl_tls_write()      application bytes to encrypt
 *   plaintext out   sl_tls_read()       decrypted application bytes
 *
 * Each direction of ciphertext waits in a buffer of the engine's own (OpenSSL reads and writes
 * it through a BIO method of ours), held only while bytes wait: an idle engine holds none. Both
 * are bounded: sl_tls_feed() accepts at most SL_TLS_IN_RING_BYTES of unread input, and
 * sl_tls_write() accepts nothing while more than the engine's output cap of ciphertext waits to
 * be sent (so at most the cap plus one record's expansion is ever pending by writes), and
 * sl_tls_read() reads nothing while that much waits: what a read makes by itself (a KeyUpdate
 * reply for each KeyUpdate that asks for one, an alert) adds at most what one input ring's
 * worth of records asks for. Two engines wired
 * back to back by a loop that moves bytes between them make a complete TLS connection, which is
 * how the unit tests run.
 *
 * The driving rule is simple: after every call that may make progress (handshake, read, write,
 * shutdown, feed), send whatever sl_tls_out_peek() shows, and feed whatever the transport
 * delivers. A call that returns 0 ("nothing yet") needs one of the two before it can progress.
 *
 * Lifecycle:
 *   sl_tls_create_server() or sl_tls_create_client()
 *     -> sl_tls_handshake() until it returns SL_TLS_HS_DONE (feeding and draining in between;
 *        a server may see SL_TLS_HS_WANT_CERT, see sl_tls_sni_fn)
 *     -> sl_tls_read() / sl_tls_write() in any order
 *     -> sl_tls_shutdown() (queues close_notify), drain the output, close the transport
 *     -> sl_tls_destroy().
 * An engine is used by one thread at a time (its connection's worker). The SSL_CTX objects built
 * here are shared by every worker and are safe to use from several threads at once.
 *
 * Results follow docs/style.md §4: progress is >0, "nothing yet" is 0, failure is negative. The
 * failure codes are:
 *   UV_EOF          the peer closed cleanly with close_notify (sl_tls_read() only);
 *   UV_ECONNRESET   the transport ended (sl_tls_feed_eof()) without close_notify: a truncated
 *                   stream, never to be mistaken for a complete one (after a read that ended
 *                   at a record boundary the engine can still write: below);
 *   SL_ECRYPTO      a TLS failure: a bad certificate, an alert, a protocol error (the OpenSSL
 *                   text is in sl_tls_error_text(), the verification verdict of a client engine
 *                   in sl_tls_verify_error());
 *   SL_EINVAL       the call is not valid in the engine's state (a contract violation);
 *   SL_ENOMEM       memory ran short.
 * After SL_ECRYPTO or UV_ECONNRESET the engine is failed: every later call returns the same
 * code. Its output may still hold an alert for the peer; sending it is optional. One exception:
 * when sl_tls_read() meets the end of the transport between two records, it returns
 * UV_ECONNRESET (on every later read) without failing the engine, so that a peer that shut only
 * its sending side still gets what is written to it (a half-close without close_notify).
 */
#ifndef SL_PROXY_TLS_H
#define SL_PROXY_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "base/err.h"
#include "base/slice.h"

struct sl_tls; /* opaque: one TLS connection, either side */

/* Ciphertext the input holds (17 KiB); sl_tls_feed() accepts at most this much between
 * drains. */
#define SL_TLS_IN_RING_BYTES 17408u
/* Output cap used when a create function is given 0 (16 KiB). */
#define SL_TLS_OUT_CAP_DEFAULT 16384u
/* Largest output cap a create function accepts (16 MiB). */
#define SL_TLS_OUT_CAP_MAX 16777216u
/* Most plaintext one sl_tls_write() call accepts (one TLS record). */
#define SL_TLS_WRITE_MAX 16384u
/* Session cache size of a client SSL_CTX built with 0. */
#define SL_TLS_SESSION_CACHE_DEFAULT 256u
/* Longest scope of a client engine's sessions (sl_tls_create_client()): a client id. */
#define SL_TLS_SCOPE_MAX 128u
/* Largest host name (DNS name or IP literal) a client engine accepts, in bytes. */
#define SL_TLS_HOST_MAX 253u

/* What sl_tls_handshake() returns when it has not failed. */
enum sl_tls_hs {
    /* Needs ciphertext from the peer, or the output drained; call again after either. */
    SL_TLS_HS_WANT_IO = 0,
    /* The handshake is complete: read and write may start. */
    SL_TLS_HS_DONE = 1,
    /* Server only: the SNI callback asked to resume later. Set a certificate with
     * sl_tls_set_certificate(), then call sl_tls_handshake() again. */
    SL_TLS_HS_WANT_CERT = 2,
};

/* What an sl_tls_sni_fn decides. */
enum sl_tls_sni_verdict {
    /* Go on with the certificate the engine has now (set in the callback, or the SSL_CTX's). */
    SL_TLS_SNI_OK = 0,
    /* Pause: sl_tls_handshake() returns SL_TLS_HS_WANT_CERT until a certificate is set. Lets
     * the caller mint a certificate off the event loop and resume the handshake afterwards. */
    SL_TLS_SNI_RETRY,
    /* Fail the handshake with an unrecognized_name alert (e.g. SNI differs from CONNECT host). */
    SL_TLS_SNI_REFUSE,
};

/* Called by a server engine once per handshake, from inside sl_tls_handshake(), when the
 * ClientHello has arrived and before a certificate is chosen. `sni` is the server name the
 * client sent (printable ASCII, as sent: not yet lower-cased or validated as a DNS name), or
 * NULL when it sent none (clients connecting to an IP literal). Borrowed: valid during the call
 * and afterwards through sl_tls_sni(). The callback may call sl_tls_set_certificate() on `t`,
 * and must not destroy `t`. */
typedef enum sl_tls_sni_verdict sl_tls_sni_fn(struct sl_tls *t, const char *sni, void *arg);

/* How the first bytes of a CONNECT tunnel look (sl_tls_sniff()). */
enum sl_tls_sniff_result {
    /* Too few bytes to tell; wait for more. */
    SL_TLS_SNIFF_NEED_MORE = 0,
    /* A TLS handshake record holding a ClientHello. */
    SL_TLS_SNIFF_TLS,
    /* An HTTP/1.x request line: a method token followed by a space. */
    SL_TLS_SNIFF_HTTP,
    /* Anything else (including SSLv2-format hellos): refuse it (`not-tls`). */
    SL_TLS_SNIFF_OTHER,
};

/*
 * SSL_CTX helpers. The contexts are plain OpenSSL objects: share them between workers, keep
 * them with SSL_CTX_up_ref() and release them with SSL_CTX_free().
 */

/* Builds the context for upstream (client) connections: TLS 1.2 or newer, peer verification
 * against the system trust store (SSL_CTX_set_default_verify_paths) plus, when
 * `extra_ca_file` is not NULL, the PEM certificates of that file (--upstream-ca); ALPN offers
 * only http/1.1; renegotiation is off. Sessions are cached in a table of the context keyed by
 * scope and "host:port" (sl_tls_create_client(); OpenSSL does not re-check the host name when
 * it resumes a session, so a session is only ever offered to the scope, host and port it was
 * made with), at most `session_cache_max`
 * entries (0: SL_TLS_SESSION_CACHE_DEFAULT), least recently used dropped first; TLS 1.3
 * tickets are used once. More trust anchors may be added to SSL_CTX_get_cert_store() before
 * the first connection. Borrows `extra_ca_file`. On success `*out` is a new context owned by the
 * caller; on failure `*out` is untouched and `err` names the cause. Returns 0, SL_EIO (the CA
 * file cannot be loaded), SL_ECRYPTO or SL_ENOMEM. */
SL_MUST_CHECK int sl_tls_client_ctx_new(const char *extra_ca_file, size_t session_cache_max,
                                        SSL_CTX **out, char *err, size_t errlen);

/* Builds the context for client-facing (server) connections, configured as by
 * sl_tls_server_ctx_configure(), without a certificate: engines get theirs from the SNI
 * callback. On success `*out` is a new context owned by the caller. Returns 0 or SL_ECRYPTO
 * (`err` says why). */
SL_MUST_CHECK int sl_tls_server_ctx_new(SSL_CTX **out, char *err, size_t errlen);

/* Applies the server settings to a context built elsewhere: TLS 1.2 or newer; for TLS 1.2 only
 * ECDHE suites with an AEAD (AES-GCM, ChaCha20-Poly1305: no CBC), TLS 1.3's three; no
 * renegotiation, the ALPN selection that picks http/1.1 and fails a handshake offering only
 * protocols the proxy does not speak with a no_application_protocol alert (a client offering no
 * ALPN is served), and the ClientHello hook that runs the engine's sl_tls_sni_fn. Borrows `ctx`;
 * call it before the context is shared. Returns 0 or SL_ECRYPTO. */
SL_MUST_CHECK int sl_tls_server_ctx_configure(SSL_CTX *ctx);

/*
 * Engines.
 */

/* Creates a server engine (the proxy's side of an intercepted client connection) on `ctx`,
 * which must have been built by sl_tls_server_ctx_new() or passed to
 * sl_tls_server_ctx_configure(). `out_cap_bytes` caps the pending output ciphertext
 * (0: SL_TLS_OUT_CAP_DEFAULT; at most SL_TLS_OUT_CAP_MAX). Takes its own reference to `ctx`.
 * On success `*out` is owned by the caller; on failure nothing was allocated and `*out` is
 * untouched. Returns 0, SL_EINVAL, SL_ENOMEM or SL_ECRYPTO. */
SL_MUST_CHECK int sl_tls_create_server(SSL_CTX *ctx, size_t out_cap_bytes, struct sl_tls **out);

/* Creates a client engine (an upstream connection) on `ctx`, built by sl_tls_client_ctx_new(),
 * to `host`:`port`. `host` is a normalised DNS name, or an IP literal (IPv6 without brackets)
 * when `host_is_ip` is true; the two must agree (SL_EINVAL otherwise). A DNS name is sent as SNI
 * and verified against the certificate's DNS names only (never its subject CN; a wildcard
 * covers one whole label); an IP literal is never sent as SNI and is
 * verified against the certificate's IP addresses. `scope` (NULL or "" for none, at most
 * SL_TLS_SCOPE_MAX bytes) says whose connection this is: a session is cached under the scope,
 * host and port it was made with, and offered only to a connection with the same three (the
 * proxy passes the client's id, so an upstream cannot link two clients' connections by their
 * sessions, and one client's TLS 1.2 session never spares another's connection a certificate
 * check). `out_cap_bytes` as for sl_tls_create_server(). Borrows `host` and `scope` (copied);
 * takes its own reference to `ctx`. Returns 0, SL_EINVAL, SL_ENOMEM or SL_ECRYPTO. */
SL_MUST_CHECK int sl_tls_create_client(SSL_CTX *ctx, const char *host, bool host_is_ip,
                                       uint16_t port, const char *scope, size_t out_cap_bytes,
                                       struct sl_tls **out);

/* Frees the engine, its buffers and its OpenSSL objects. Pending output is discarded: call
 * sl_tls_shutdown() and drain first for an orderly close. A client engine that completed its
 * handshake and never failed leaves its session resumable (RFC 5246 §7.2.1: a connection closed
 * without close_notify no longer invalidates the session). NULL is a no-op. */
void sl_tls_destroy(struct sl_tls *t);

/* Server engines: installs the callback that learns the SNI (NULL: none, the SSL_CTX's own
 * certificate is used). Borrows `arg`, which must outlive the handshake. */
void sl_tls_set_sni_fn(struct sl_tls *t, sl_tls_sni_fn *fn, void *arg);

/* Server engines: serves `leaf` with `key` on this connection. Callable before the handshake,
 * from the SNI callback, or after SL_TLS_HS_WANT_CERT (which it resolves). Borrows both; the
 * engine takes its own references. The certificate also names the session context: a session
 * issued under another certificate is not resumed. Returns 0, SL_EINVAL (client engine, or the
 * handshake is past the certificate) or SL_ECRYPTO (e.g. the key does not match the certificate).
 */
SL_MUST_CHECK int sl_tls_set_certificate(struct sl_tls *t, X509 *leaf, EVP_PKEY *key);

/* Advances the handshake. Returns SL_TLS_HS_DONE (also on every later call), SL_TLS_HS_WANT_IO,
 * SL_TLS_HS_WANT_CERT (server with an SNI callback that said SL_TLS_SNI_RETRY), or a failure
 * code (SL_ECRYPTO with the reason in sl_tls_error_text(), UV_ECONNRESET when the transport ended
 * first). May call the engine's sl_tls_sni_fn synchronously. A failed client handshake removes
 * the session it offered from the cache. */
SL_MUST_CHECK int sl_tls_handshake(struct sl_tls *t);

/* Ciphertext in: copies up to `n` bytes of `p` (borrowed) into the input. Returns the
 * number of bytes accepted (0 when the input is full: call sl_tls_handshake() or sl_tls_read()
 * to drain it, then feed the rest), or SL_EINVAL after sl_tls_feed_eof(), or the engine's
 * failure code. */
SL_MUST_CHECK int sl_tls_feed(struct sl_tls *t, const uint8_t *p, size_t n);

/* Tells the engine the transport delivered its last byte (a TCP FIN). Once the input is
 * drained, a read that has not seen close_notify returns UV_ECONNRESET (truncation), and an
 * unfinished handshake fails with it. Idempotent. */
void sl_tls_feed_eof(struct sl_tls *t);

/* Ciphertext out, without a copy: the pending output ({NULL, 0} when there is none), valid
 * until the next call on the engine (a write may move it). Acknowledge what was used with
 * sl_tls_out_ack(); a peek always starts at the oldest unacknowledged byte. */
struct sl_slice sl_tls_out_peek(struct sl_tls *t);

/* Drops the first `n` bytes of pending output (sent). `n` must not exceed sl_tls_out_pending(). */
void sl_tls_out_ack(struct sl_tls *t, size_t n);

/* Ciphertext out, with a copy: moves up to `cap` bytes of pending output into `buf` and
 * acknowledges them. Returns the number of bytes copied (0 when nothing is pending). */
size_t sl_tls_out_copy(struct sl_tls *t, uint8_t *buf, size_t cap);

/* Bytes of ciphertext waiting to be sent. */
size_t sl_tls_out_pending(const struct sl_tls *t);

/* Plaintext out: decrypts into `buf` (at most `cap` bytes; at most one record per call). Returns
 * the number of bytes (>0), 0 when nothing is available yet (feed more ciphertext, or drain the
 * output: OpenSSL may need to send, e.g. a KeyUpdate reply), UV_EOF once the peer sent
 * close_notify (also on every later call), UV_ECONNRESET for a stream cut short (between two
 * records: reading is over, writing is not; inside a record: the engine failed), SL_ECRYPTO,
 * or SL_EINVAL before the handshake is done. Keep calling until it returns 0: the input
 * may hold more. */
SL_MUST_CHECK int sl_tls_read(struct sl_tls *t, uint8_t *buf, size_t cap);

/* Plaintext in: encrypts up to `n` bytes of `p` (borrowed) into the output. Returns the number
 * of bytes accepted (>0; at most SL_TLS_WRITE_MAX per call), 0 while the output holds the cap or
 * more (drain it, then write the rest) or when `n` is 0, SL_EINVAL before the handshake is done
 * or after sl_tls_shutdown(), or the engine's failure code. The output never exceeds the cap by
 * more than one record. */
SL_MUST_CHECK int sl_tls_write(struct sl_tls *t, const uint8_t *p, size_t n);

/* Queues close_notify. Returns 1 once it is queued (drain the output, then close the
 * transport), 0 when the output holds the cap (drain it and call again), SL_EINVAL before the
 * handshake is done, or the engine's failure code. Writing is over after 1; reading may go on. */
SL_MUST_CHECK int sl_tls_shutdown(struct sl_tls *t);

/*
 * Accessors. The strings are borrowed from the engine and live as long as it does.
 */

bool sl_tls_is_server(const struct sl_tls *t);

bool sl_tls_is_handshake_done(const struct sl_tls *t);

/* True when the handshake resumed a session instead of running in full. */
bool sl_tls_is_session_reused(const struct sl_tls *t);

/* True once the engine failed (every call returns its failure code). */
bool sl_tls_is_failed(const struct sl_tls *t);

/* The protocol ALPN selected ("http/1.1"), or NULL when none was negotiated. */
const char *sl_tls_alpn(const struct sl_tls *t);

/* Server engines: the SNI the client sent, or NULL (none yet, or none sent). */
const char *sl_tls_sni(const struct sl_tls *t);

/* Server engines: whether the handshake was refused for its SNI by the engine itself, never
 * asking the SNI callback: an SNI holding a byte outside printable ASCII (NUL, a raw UTF-8 name:
 * no host can have it), or a second ClientHello, after a HelloRetryRequest, whose SNI is not
 * the first one's. */
bool sl_tls_sni_refused(const struct sl_tls *t);

/* Client engines: OpenSSL's verdict on the peer's certificate, e.g. "ok", "hostname mismatch",
 * "certificate has expired" (X509_verify_cert_error_string of SSL_get_verify_result). Meaningful
 * once the handshake is done or has failed; the text for the 502 body of `upstream-tls`. */
const char *sl_tls_verify_error(const struct sl_tls *t);

/* The OpenSSL error text of the engine's failure, or why its input was cut short ("" while
 * neither happened). */
const char *sl_tls_error_text(const struct sl_tls *t);

/* The fatal alert the peer ended the engine's handshake or session with (its description
 * number, RFC 8446 §6: 48 unknown_ca, 46 certificate_unknown, ...), or -1 when its failure was
 * not the peer's alert. */
int sl_tls_peer_alert(const struct sl_tls *t);

/*
 * Tunnel sniffing.
 */

/* Classifies the first `n` bytes of a tunnel (borrowed; any n, 0 included): a TLS handshake
 * record of version 3.x whose first message is a ClientHello, an HTTP request line (a method
 * token of at most 24 characters followed by a space), something else, or too short to tell.
 * Looks at no more than the first 25 bytes and never allocates. */
enum sl_tls_sniff_result sl_tls_sniff(const uint8_t *p, size_t n);

/*
 * Passthrough tunnels: the records around the hellos, read as they pass, without an engine
 * (proxy/conn_tls.c guards the ClientHello that a HelloRetryRequest asks for).
 */

/* RFC 8446 §5.1: the content types of TLS records. */
enum sl_tls_content_type {
    SL_TLS_CT_CHANGE_CIPHER_SPEC = 20,
    SL_TLS_CT_ALERT = 21,
    SL_TLS_CT_HANDSHAKE = 22,
    SL_TLS_CT_APPLICATION_DATA = 23,
};

/* Reads the header of the TLS record at the start of `p` (`n` bytes, borrowed): its content
 * type and the length of its body. Returns 1 when the 5 bytes have arrived, 0 when more are
 * needed, or SL_EINVAL when they are no record header (a version other than 3.x, a body longer
 * than a TLS 1.2 ciphertext, 2^14 + 2048 bytes, RFC 5246 §6.2.3). */
SL_MUST_CHECK int sl_tls_record_head(const uint8_t *p, size_t n, uint8_t *type, size_t *len);

/* The number of bytes at the start of `p` (`n`, borrowed) taken by the TLS records that carry
 * its first handshake message: records of content type handshake(22), each with a body of 1 to
 * 2^14 bytes, the message (its 4-byte header and its body) ending where a record ends (a
 * ClientHello shares no record with what follows it). Returns 1 with `*span` set once they have
 * all arrived, 0 when more bytes are needed, or SL_EINVAL when the bytes are no such records
 * (another content type or version, an empty or oversized record, a message ending inside a
 * record). Reads no byte beyond `n`. */
SL_MUST_CHECK int sl_tls_hello_span(const uint8_t *p, size_t n, size_t *span);

/* A server's first handshake message, watched as its bytes pass (sl_tls_watch_server()). Zeroed
 * to start. */
struct sl_tls_server_watch {
    /* The header of the record being read (`head_len` of its 5 bytes have come), then, once
     * it is whole, the bytes of its body still to come (`left`). */
    uint8_t head[5];
    uint8_t head_len;
    uint16_t left;
    /* The first bytes of the first handshake message: header, version and random. */
    uint8_t msg[38];
    uint8_t msg_len;
};

/* What sl_tls_watch_server() saw. */
enum sl_tls_watch_verdict {
    /* No handshake message yet: go on feeding. */
    SL_TLS_WATCH_MORE = 0,
    /* The first handshake message is a HelloRetryRequest (RFC 8446 §4.1.3: a ServerHello whose
     * random is SHA-256("HelloRetryRequest")): the client's next ClientHello follows. */
    SL_TLS_WATCH_HRR,
    /* It is any other message (a ServerHello: TLS 1.2, or TLS 1.3 without a retry), or the bytes
     * are no TLS records: no second ClientHello can be asked for. */
    SL_TLS_WATCH_OTHER,
};

/* Feeds the next `n` bytes a server sent (borrowed) to `w`. Records before the first handshake
 * message (an alert, a ChangeCipherSpec) are skipped; the message may be split over records.
 * Once the verdict is not SL_TLS_WATCH_MORE, stop feeding: what follows is not looked at.
 * Keeps no more than 43 bytes of state whatever the input. */
enum sl_tls_watch_verdict sl_tls_watch_server(struct sl_tls_server_watch *w, const uint8_t *p,
                                              size_t n);

#endif
