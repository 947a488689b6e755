/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/head.h - the request head path of an intercepted connection, without I/O: from a
 * parsed request head and what the connection knows (inside a tunnel or not, its CONNECT host
 * and port, TLS or not) to the request's target and the refusal it earns (sl_head_resolve()),
 * then, once policy has decided, to the head the proxy sends upstream (sl_head_build()).
 *
 * proxy/conn.c runs CONNECT heads, identity (Proxy-Authorization) and the policy decision
 * itself; everything here is a pure function of its arguments, so it can be fuzzed as is.
 */
#ifndef SL_PROXY_HEAD_H
#define SL_PROXY_HEAD_H

#include <stdbool.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/err.h"
#include "http/h1.h"
#include "policy/decision.h"
#include "policy/host.h"

/* Where a request head arrived. */
struct sl_head_ctx {
    /* True inside a CONNECT tunnel (origin-form requests), false for a request to the proxy
     * itself (absolute-form `http://` requests). */
    bool tunnel;
    /* Tunnel only: the tunnel's TLS is intercepted (https), else it carries plain HTTP. */
    bool tls;
    /* Tunnel only: the CONNECT host and port. Borrowed. */
    const struct sl_host *host;
    uint16_t port;
};

/* What sl_head_resolve() found, filled as far as it got (the audit line of a refusal names
 * what was known). */
struct sl_head_target {
    /* "http" or "https"; static. */
    const char *scheme;
    /* The host and port the request goes to; valid when `has_host`. */
    bool has_host;
    struct sl_host host;
    uint16_t port;
    /* Origin-form target (path and query, or `*` for OPTIONS), NUL-terminated; borrowed from
     * the head or carved from the arena given to sl_head_resolve(). NULL until known. */
    const char *target;
    /* The request asks for a websocket upgrade (the only one relayed). */
    bool websocket;
};

/* Why a head is refused before any policy decision. */
struct sl_head_refusal {
    enum sl_reason reason;
    /* A static phrase for the client, or NULL for the reason's own text. */
    const char *detail;
};

/* Resolves the target of a non-CONNECT request head `h` arriving in `ctx` (a CONNECT head is
 * refused here: outside a tunnel the caller handles it before). In order: CONNECT inside a
 * tunnel; the target (origin-form, or absolute-form naming the tunnel, inside one;
 * absolute-form `http://` outside); the Host header, which must name the same host and port
 * (required on HTTP/1.1 inside a tunnel); an upgrade other than a bodiless websocket one.
 * `out` is filled as far as the checks got; `arena` (borrowed) holds a target that had to be
 * rebuilt. Returns 0, or SL_EINVAL with `*why` set (SL_ENOMEM too when the arena is full,
 * with reason too-large). */
SL_MUST_CHECK int sl_head_resolve(const struct sl_h1_head *h, const struct sl_head_ctx *ctx,
                                  struct sl_arena *arena, struct sl_head_target *out,
                                  struct sl_head_refusal *why);

/* Writes into `b` (reset first) the head sent upstream for `h` resolved as `t`: the request
 * line `METHOD target HTTP/1.1`, one Host naming t's host (and port unless the scheme's
 * default), the end-to-end headers of `h` in order (hop-by-hop ones, those listed in
 * Connection, Host, the framing headers and `credential_header` dropped), then
 * `credential_header: credential_value` when `credential_header` is not NULL (from the
 * decision), the websocket upgrade headers when `t->websocket`, and the body framing of `h`
 * (Content-Length, or Transfer-Encoding: chunked). Returns 0, or SL_ETOOBIG / SL_ENOMEM from
 * `b` (the head is then incomplete). */
SL_MUST_CHECK int sl_head_build(struct sl_buf *b, const struct sl_h1_head *h,
                                const struct sl_head_target *t, const char *credential_header,
                                const char *credential_value);

/* True for the headers the proxy never forwards as received (RFC 9110 §7.6.1 hop-by-hop ones,
 * Proxy-Authorization and Proxy-Authenticate, and those it writes itself: Host and the
 * framing headers). */
bool sl_head_is_hop_by_hop(struct sl_slice name);

/* True when `name` is listed in any Connection header of `h` (RFC 9110 §7.6.1). */
bool sl_head_is_listed_in_connection(const struct sl_h1_head *h, struct sl_slice name);

/* Copies the end-to-end headers of `h` into `b`, minus `skip` (a header name, or NULL). */
SL_MUST_CHECK int sl_head_put_headers(struct sl_buf *b, const struct sl_h1_head *h,
                                      const char *skip);

#endif
