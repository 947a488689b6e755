/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/upstream.h - a connection from the proxy to an upstream server, and the worker's pool
 * of idle ones.
 *
 * sl_upstream_open() hands back a connection to (host, port, TLS or not) for one client: an
 * idle one from the pool that went there for the same client when there is one, otherwise a
 * new one that dials on its own. The pool never hands one client's connection to another: an
 * upstream that sends bytes after a response (or authenticates the connection, as NTLM does)
 * would otherwise answer one client's request with what was meant for another's.
 *   1. addresses: the IP literal itself, or the resolver's answer (proxy/dns.h);
 *   2. every address is judged by the address policy (proxy/addr.h) before it is tried, and
 *      the connection goes to the first allowed one that answers; the address checked is the
 *      address dialled;
 *   3. under TLS, the handshake verifies the chain (system store plus --upstream-ca) and the
 *      host name, with SNI, TLS 1.2 or newer (proxy/tls.h).
 * Progress is reported through one event callback; the owner then looks at
 * sl_upstream_state(). A failure carries the reason code of docs/reference/proxy.md §4.5 and a
 * detail for the refusal's body (the verification error, the refused address class).
 *
 * Ownership: the owner (a client connection) holds the upstream from open until it calls
 * sl_upstream_release() (back to the pool if it is clean, else closed) or sl_upstream_close().
 * Neither ever calls the owner's callback again. Idle connections belong to the worker's pool,
 * which closes them after the idle timeout, when the upstream closes them, or when they send
 * anything unasked.
 */
#ifndef SL_PROXY_UPSTREAM_H
#define SL_PROXY_UPSTREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "policy/auth.h"
#include "policy/decision.h"
#include "policy/host.h"
#include "proxy/stream.h"

/* Idle upstream connections one worker keeps at most (docs/reference/proxy.md §4.10): each holds
 * a descriptor that no client connection accounts for. */
#define SL_UPSTREAM_IDLE_MAX 128u

struct sl__worker;
struct sl_upstream; /* opaque */

enum sl_upstream_state {
    /* Resolving, connecting or in the TLS handshake. */
    SL_UPSTREAM_DIALING = 0,
    /* Connected (and verified): the stream is the owner's to use. */
    SL_UPSTREAM_READY,
    /* The dial failed: see sl_upstream_failure(). Close it. */
    SL_UPSTREAM_FAILED,
};

typedef void sl_upstream_event_fn(struct sl_upstream *u, void *arg);

/* Gets a connection for `host`:`port`, under TLS when `tls`, for the client `owner` (its id,
 * at most SL_AUTH_ID_MAX bytes; NULL or "" for none: such connections pool only among
 * themselves). `host` and `owner` are borrowed (copied).
 * `fn(u, arg)` is called, never synchronously, whenever the state changes or the stream has
 * news. Returns 0 with `*out` set (READY at once when it came from the pool), or a negative
 * code (out of memory) with nothing allocated. */
SL_MUST_CHECK int sl_upstream_open(struct sl__worker *w, const struct sl_host *host, uint16_t port,
                                   bool tls, const char *owner, sl_upstream_event_fn *fn, void *arg,
                                   struct sl_upstream **out);

/* As sl_upstream_open(), but always a new connection: the pool is not looked at (a request sent
 * again because the pooled connection it went on closed unanswered: another pooled one may be
 * just as stale; a passthrough tunnel, whose TLS starts on a clean stream). */
SL_MUST_CHECK int sl_upstream_open_new(struct sl__worker *w, const struct sl_host *host,
                                       uint16_t port, bool tls, const char *owner,
                                       sl_upstream_event_fn *fn, void *arg,
                                       struct sl_upstream **out);

enum sl_upstream_state sl_upstream_state(const struct sl_upstream *u);

/* For a FAILED upstream: the reason code, and a static or upstream-owned detail text (valid
 * until sl_upstream_close()). */
enum sl_reason sl_upstream_failure(const struct sl_upstream *u, const char **detail);

/* True when this connection came from the pool (it has served a request before). */
bool sl_upstream_is_reused(const struct sl_upstream *u);

/* The stream, for I/O once READY. Borrowed. */
struct sl_stream *sl_upstream_stream(struct sl_upstream *u);

/* Gives the connection back: pooled when it is READY, flushed, has no unread input and
 * `reusable` is true (the response was complete and well framed); closed otherwise. */
void sl_upstream_release(struct sl_upstream *u, bool reusable);

/* Closes the connection. */
void sl_upstream_close(struct sl_upstream *u);

/* Closes every idle connection of the worker's pool (shutdown). */
void sl_upstream_pool_close(struct sl__worker *w);

#endif
