/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http/server.h - a small HTTP/1.1 server on one libuv loop, for the proxy's admin socket
 * (docs/reference/proxy.md §4.9) and the control plane's REST API (docs/reference/api.md §5).
 *
 * The server listens on TCP addresses (in the clear, or under mutual TLS: http/tls.h) and unix
 * sockets, parses requests with http/h1 (strict,
 * origin-form targets only), buffers each request body whole in a capped buffer, and hands every
 * complete request to one handler as an exchange. The handler answers with sl_http_respond*()
 * exactly once, either before it returns or later from any callback on the same loop.
 *
 * Each connection serves one request at a time: while a request waits for its handler or its
 * response is being written, the connection neither parses nor reads, so pipelined requests wait
 * in the socket and the write queue holds at most one response. Every limit is bounded and
 * configurable (struct sl_http_server_config); errors the server answers itself carry a JSON
 * body {"<error_key>":"<text>"} and Cache-Control: no-store. Before the handler, the server
 * refuses with 400 an HTTP/1.1 request without Host (RFC 9112 §3.2) and a request with more than
 * one Host, Authorization, Content-Type, Content-Length or Origin field, and with 501 a method
 * the parser does not know.
 *
 * Lifecycle: sl_http_server_create() -> sl_http_server_listen_tcp()/_tls()/_unix() -> requests run
 * on the loop -> sl_http_server_close() (idempotent) stops accepting, closes every connection and
 * calls `closed` once all memory and handles of the server are released (sl_http_server_drain()
 * first answers the requests the handler holds). The loop must not be closed before then.
 *
 * Exchange ownership (the one rule an asynchronous handler must follow):
 *   - The server creates an exchange for every complete request and passes it to the handler.
 *     From then on the handler holds it; the exchange and everything its request view points to
 *     stay valid until the handler calls sl_http_respond*() on it, which frees it. Call exactly
 *     one of the sl_http_respond*() functions exactly once per exchange.
 *   - If the connection is closed before the answer, the exchange stays valid and is marked
 *     gone (sl_http_exchange_is_gone()); the handler still must call sl_http_respond*(), which
 *     then drops the response and frees the exchange. This holds even after the server itself
 *     has been freed: a gone exchange no longer refers to the server or its loop.
 *   - The server does not read from a connection whose request is with the handler (that is
 *     the backpressure), so a client that disconnects meanwhile is noticed only when the
 *     response is written (the write fails or the next read sees the close); what marks an
 *     exchange gone is the server closing the connection, i.e. sl_http_server_close() (or the
 *     end of a drain's grace period).
 *   - So a handler that starts asynchronous work keeps the exchange pointer in that work's state
 *     and responds when the work completes, whatever happened to the client meanwhile.
 *
 * Threading: every function must be called on the loop's thread. The process must ignore
 * SIGPIPE (libuv writes to sockets with write(2)).
 */
#ifndef SL_HTTP_SERVER_H
#define SL_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/slice.h"
#include "http/h1.h"
#include "http/tls.h"

struct sl_http_server;   /* opaque */
struct sl_http_exchange; /* opaque */

/* Default limits (docs/reference/proxy.md §4.10 and docs/reference/api.md §5). */
#define SL_HTTP_DEFAULT_BODY_MAX_BYTES    ((size_t)64 * 1024 * 1024)
#define SL_HTTP_DEFAULT_HEADER_TIMEOUT_MS 10000
#define SL_HTTP_DEFAULT_IDLE_TIMEOUT_MS   60000
#define SL_HTTP_DEFAULT_MAX_CONNECTIONS   1024
#define SL_HTTP_DEFAULT_BODIES_MAX_BYTES  ((size_t)256 * 1024 * 1024)
#define SL_HTTP_DEFAULT_PEER_CONNECTIONS  128
#define SL_HTTP_DEFAULT_ERROR_KEY         "message"
/* Longest accepted error key, in bytes. */
#define SL_HTTP_ERROR_KEY_MAX 32
/* Most listeners (TCP and unix together) one server may hold. */
#define SL_HTTP_SERVER_LISTENERS_MAX 4

struct sl_http_request;

/* Called once per complete request, on the loop thread (and as the config's `gate`, once per
 * head that announces a body). `x` is handed to the handler (see the
 * ownership rule above); `req` is the same as sl_http_exchange_request(x). The handler may
 * respond before returning, respond later, or close the server. */
typedef void sl_http_handler_fn(struct sl_http_exchange *x, const struct sl_http_request *req,
                                void *arg);

/* Every field may be left 0 (or NULL) to take its default. */
struct sl_http_server_config {
    /* Most bytes of a request body (after chunked decoding); beyond it the server answers 413
     * and closes the connection, without reading the rest. Default 64 MiB. */
    size_t body_max_bytes;
    /* Head limits; each field 0 takes its sl_h1_default_limits value. Beyond them: 431. */
    struct sl_h1_limits head_limits;
    /* Time from the start of a request (the accept, or its first byte on a kept-alive
     * connection) until its head is complete, in ms; then 408 and close. Default 10 s. */
    uint64_t header_timeout_ms;
    /* How long a kept-alive connection may sit between requests (then a silent close), a body
     * may go without progress (then 408), and a response may take to be written to a client
     * that does not read (then close), in ms. Default 60 s. A request held by its handler has
     * no timeout: the handler owns that time. */
    uint64_t idle_timeout_ms;
    /* Most connections open at once; a connection beyond it gets a canned 503 and is closed
     * at once. Default 1024. */
    size_t max_connections;
    /* Most connections open at once from one client address (TCP; unix socket peers are not
     * counted); one beyond it gets a 503 and is closed (under TLS: closed). Default 128: above
     * the MCP endpoint's 64 tool calls at once, which answer their own JSON-RPC error. */
    size_t peer_max_connections;
    /* Most bytes of request bodies the server holds at once, over all connections (a
     * Content-Length counts whole from the head on, a chunked body in steps of 64 KiB as it
     * arrives, until the request is answered or its connection closes), and the most from one
     * client address (TCP). A request that would go beyond either gets 503 and its connection
     * is closed, without reading the rest. Defaults 256 MiB and body_max_bytes. So clients,
     * with a token or not, cannot make the server hold more than that. */
    size_t bodies_max_bytes;
    size_t peer_bodies_max_bytes;
    /* The key of the JSON error bodies the server writes itself and sl_http_respond_error()
     * writes: "message" for the REST API (the default), "error" for the admin socket. Copied;
     * 1 to SL_HTTP_ERROR_KEY_MAX letters, digits, '_', '-' or '.' (else SL_EINVAL). */
    const char *error_key;
    /* Optional: the gate of request bodies. For a request whose head announces a body (a
     * Content-Length over 0, or chunked), called on the loop with the server's `arg` once the
     * head is complete and within the body limit, before any byte of the body is read, charged
     * to the budgets above or invited with `100 Continue`; `req->body` is empty then. It must
     * answer, at once or later, with sl_http_proceed() (the body is read, then the handler
     * gets the request as any other) or with one of sl_http_respond*() (that answer goes out
     * and the connection is closed after it: the body is never read). So a server can refuse
     * who may not send bodies before they cost it anything. NULL: every body is read. */
    sl_http_handler_fn *gate;
};

/* One request as the handler sees it. Every pointer is owned by the exchange and valid until
 * sl_http_respond*() is called on it. */
struct sl_http_request {
    /* Method name as sent, e.g. "GET" (llhttp accepts only known methods). */
    const char *method;
    /* Path of the origin-form target, before any '?'; not percent-decoded. Starts with '/'. */
    const char *path;
    /* Raw query string after the first '?', without the '?'; "" when there is none. */
    const char *query;
    /* The whole head: version, headers in arrival order (see sl_h1_find()), framing. */
    const struct sl_h1_head *head;
    /* The whole body (chunked framing removed). `body.p` is never NULL and is followed by a
     * NUL byte that `body.n` does not count, so a JSON text can be read as a C string. */
    struct sl_slice body;
    /* The peer for log lines: "127.0.0.1:40112", "[::1]:40112" or "unix". */
    const char *peer;
    /* The connection's id in log lines (conn=N). */
    uint64_t conn_id;
};

/* The gate (sl_http_server_config.gate) lets the body of the request of `x` in: the server
 * reads it, then calls the handler with the same exchange. When the connection went away
 * while the gate held it, frees the exchange. */
void sl_http_proceed(struct sl_http_exchange *x);

/* Called once by sl_http_server_close() when the server has released everything. */
typedef void sl_http_closed_fn(void *arg);

/* Creates a server on `loop` (borrowed; it must outlive the server) that passes every request
 * to `handler` with `arg`. `cfg` is copied; NULL takes every default. The server listens
 * nowhere until sl_http_server_listen_*(). Returns 0 and sets `*out`, or SL_EINVAL (bad
 * config), SL_ENOMEM, or a UV_E* code; on failure nothing was allocated and `*out` is untouched.
 * Free the server with sl_http_server_close(). */
SL_MUST_CHECK int sl_http_server_create(uv_loop_t *loop, const struct sl_http_server_config *cfg,
                                        sl_http_handler_fn *handler, void *arg,
                                        struct sl_http_server **out);

/* Listens on `addr_port`, an IP literal and a port: "127.0.0.1:8080", "[::1]:0" (port 0 picks
 * a free port, see sl_http_server_port()). Host names are not resolved. Returns 0, or an error
 * (SL_EINVAL for a malformed address, SL_ETOOBIG when the server has its most listeners, a
 * UV_E* code from bind/listen) with a sentence for a person in `err` (`errlen` bytes, may be
 * 0). Synchronous; call at startup. */
SL_MUST_CHECK int sl_http_server_listen_tcp(struct sl_http_server *srv, const char *addr_port,
                                            char *err, size_t errlen);

/* sl_http_server_listen_tcp() under TLS: every connection first completes a handshake with the
 * context `tls` (a server context of http/tls.h, borrowed: it must outlive the server), which
 * requires and verifies the client's certificate; a handshake that fails or does not complete
 * within the header timeout closes the connection without a byte of HTTP. Requests then run as
 * on any listener. */
SL_MUST_CHECK int sl_http_server_listen_tls(struct sl_http_server *srv, const char *addr_port,
                                            struct sl_http_tls *tls, char *err, size_t errlen);

/* Listens on the unix socket `path`, whose file gets permission bits `mode` (e.g. 0600) before
 * the socket accepts anything: it is bound under the umask ~mode (the process umask is changed
 * for the duration of the bind(2), so call this at startup, before other threads create files).
 * An existing socket file is replaced only when nothing listens on it; a live socket gives
 * UV_EADDRINUSE and any other existing file SL_EEXIST, and both are left alone. libuv removes
 * the socket file (by its path) when the listener closes with the server. Returns 0
 * or an error as sl_http_server_listen_tcp() does (SL_EINVAL also for a path too long for a
 * socket address or a mode outside 0777). */
SL_MUST_CHECK int sl_http_server_listen_unix(struct sl_http_server *srv, const char *path, int mode,
                                             char *err, size_t errlen);

/* The local port of the most recent TCP listener (useful after binding port 0), or SL_ENOTFOUND
 * when the server has none. */
SL_MUST_CHECK int sl_http_server_port(const struct sl_http_server *srv);

/* Connections currently open (for status pages and metrics). */
size_t sl_http_server_connections(const struct sl_http_server *srv);

/* Stops accepting, closes every listener and connection (requests waiting for their handler
 * become gone exchanges, responses being written are cut), and calls `closed(arg)` (NULL for
 * none) once every handle has closed and the server's memory is freed; `srv` is invalid from
 * then on. Never calls `closed` synchronously. Idempotent: later calls do nothing (their
 * callback is not called), except during a drain, which they end at once. Safe from inside the
 * handler. */
void sl_http_server_close(struct sl_http_server *srv, sl_http_closed_fn *closed, void *arg);

/* The graceful close: stops accepting and closes every listener, and every connection whose
 * request is not with the handler (idle ones, heads and bodies still arriving, heads held by
 * the gate: none of them was acted on). A request with the handler is still answered, with
 * Connection: close, and a response being written is finished; each such connection then ends
 * as after any last answer. Once the last one has gone, or after `grace_ms` (the rest are then
 * closed, their exchanges gone), `closed(arg)` is called as by sl_http_server_close(). Does
 * nothing on a server already closing. */
void sl_http_server_drain(struct sl_http_server *srv, uint64_t grace_ms, sl_http_closed_fn *closed,
                          void *arg);

/* The request of `x`; valid until `x` is responded to. */
const struct sl_http_request *sl_http_exchange_request(const struct sl_http_exchange *x);

/* Header lines every answer of `x` carries, whichever sl_http_respond*() gives it
 * (sl_http_respond_error() included): `headers` is a NULL-terminated array of "Name: value"
 * strings (borrowed: it must stay valid until `x` is answered, so static in practice; NULL for
 * none), checked as those of sl_http_respond_headers() (a bad one turns the answer into a 500
 * without them). Call before answering; a later call replaces an earlier one. */
void sl_http_exchange_set_headers(struct sl_http_exchange *x, const char *const *headers);

/* True when the connection of `x` has gone away; a response would be dropped. */
bool sl_http_exchange_is_gone(const struct sl_http_exchange *x);

/* Answers `x` with `status` (200-599), a Content-Type (NULL for none) and `len` bytes of
 * `body` (borrowed, copied before the call returns; may be NULL when `len` is 0), and frees
 * `x`. The server adds Date, Server: sluice, Content-Length (not for 204 and 304, which never
 * carry a body) and Connection: close when the connection ends after this response; a response
 * to HEAD carries the Content-Length of `body` but not its bytes. A status outside 200-599
 * becomes a 500. Never fails from the caller's view: when the response cannot be built (out of
 * memory) the connection is closed. Never calls the handler synchronously. */
void sl_http_respond(struct sl_http_exchange *x, int status, const char *content_type,
                     const void *body, size_t len);

/* As sl_http_respond(), with extra header lines: `headers` is a NULL-terminated array of
 * "Name: value" strings (borrowed; NULL for none). Content-Length, Transfer-Encoding and
 * Connection are the server's; a line naming them, or a line that is not a valid field (a name
 * of token characters, a colon, a value without CR or LF), turns the response into a 500 and is
 * logged, so that a handler bug never produces ambiguous framing. */
void sl_http_respond_headers(struct sl_http_exchange *x, int status, const char *const *headers,
                             const char *content_type, const void *body, size_t len);

/* Answers `x` with `status` and the JSON body {"<error_key>":"<message>"} (Content-Type
 * application/json), `message` escaped by sl_http_json_append_string() and cut at 1024 bytes. */
void sl_http_respond_error(struct sl_http_exchange *x, int status, const char *message);

/* The reason phrase of `status` ("OK", "Not Found", ...), or "" for a code without a common
 * one. Never NULL. */
const char *sl_http_reason(int status);

/* True when the `n` bytes at `p` are valid UTF-8 (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF); NUL bytes count as valid. */
bool sl_http_utf8_valid(const void *p, size_t n);

/* Appends `n` bytes of `s` to `b` as a quoted JSON string (RFC 8259): '"', '\' and control
 * characters are escaped, and bytes that are not valid UTF-8 become U+FFFD, so that the output
 * is valid JSON whatever the input. Returns 0, SL_ETOOBIG past the buffer's cap, or SL_ENOMEM;
 * on error the buffer may hold a prefix of the string. */
SL_MUST_CHECK int sl_http_json_append_string(struct sl_buf *b, const char *s, size_t n);

#endif
