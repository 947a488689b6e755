/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/head.h - the head paths of an intercepted connection, without I/O.
 *
 * Requests: from a parsed request head and what the connection knows (inside a tunnel or not,
 * its CONNECT host and port, TLS or not) to the request's target and the refusal it earns
 * (sl_head_resolve()), then, once policy has decided, to the head the proxy sends upstream
 * (sl_head_build()).
 *
 * Responses: from a parsed upstream response head and what the client asked for (HEAD, a
 * websocket upgrade, its HTTP version and keep-alive) to what the client gets
 * (sl_head_build_response()): the head relayed, an interim response dropped, or a refusal; and
 * how its body is framed and whether the connection ends after it.
 *
 * The connection (proxy/conn.c and its rooms) runs CONNECT heads, identity (Proxy-Authorization),
 * the policy decision and all I/O itself; everything here is a pure function of its arguments, so
 * it can be fuzzed as is.
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
#include "policy/placeholder.h"

/* Where a request head arrived. */
struct sl_head_ctx {
    /* True inside a CONNECT tunnel (origin-form requests), false for a request to the proxy
     * itself (absolute-form `http://` requests). */
    bool tunnel;
    /* Tunnel only: the tunnel's TLS is intercepted (https), else it carries plain HTTP. */
    bool tls;
    /* Tunnel only: the CONNECT host and port. Borrowed. Outside a tunnel with `transparent`,
     * `port` is the port the connection was made to. */
    const struct sl_host *host;
    uint16_t port;
    /* Outside a tunnel: a plain HTTP request to a transparent listener (docs/reference/proxy.md
     * §4.12), sent to the host it names rather than to a proxy: origin-form (or absolute-form
     * naming the same host and port), its Host header required and naming the host, the port
     * the connection's. */
    bool transparent;
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
    /* The request offers an upgrade to h2c (and not to websocket): the offer is ignored, as
     * RFC 9113 §3.1 lets a server do, and the request goes on as HTTP/1.1 without it. The
     * request parser takes nothing after an upgrade request, so its connection ends after the
     * response. */
    bool upgrade_ignored;
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
 * (required on HTTP/1.1 inside a tunnel); an upgrade other than a bodiless websocket one
 * (an h2c offer is not refused but ignored: `upgrade_ignored`). A
 * transparent request: the Host header first (required: bad-request; no host[:port]:
 * bad-host; another port than ctx->port: host-mismatch), then the target (origin-form, or an
 * `http://` URL naming that host and port: host-mismatch otherwise).
 * `out` is filled as far as the checks got; `arena` (borrowed) holds a target that had to be
 * rebuilt. Returns 0, or SL_EINVAL with `*why` set (SL_ENOMEM too when the arena is full,
 * with reason too-large). */
SL_MUST_CHECK int sl_head_resolve(const struct sl_h1_head *h, const struct sl_head_ctx *ctx,
                                  struct sl_arena *arena, struct sl_head_target *out,
                                  struct sl_head_refusal *why);

/* Looks at the Host header of a CONNECT to `host`:`port` (docs/reference/proxy.md §4.1). RFC 9110
 * §7.2 has a client send the target's authority, but some send the proxy's own (Node's
 * documented CONNECT pattern): the tunnel goes to the CONNECT target whatever the header says, so
 * a Host naming another host, or another port, is not refused; `*other` is then set to its value
 * (borrowed from `h`), for the audit line. Absent (HTTP/1.0), or naming the same host (a port
 * omitted being the CONNECT's): `*other` is {NULL, 0}. Returns 0, or SL_EINVAL with `why` set
 * (bad-host) for a value that is no host[:port] at all. */
SL_MUST_CHECK int sl_head_connect_host(const struct sl_h1_head *h, const struct sl_host *host,
                                       uint16_t port, struct sl_slice *other,
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

/* The refusal for `rc`, a failure of sl_head_build() or sl_head_build_swap()
 * (docs/reference/proxy.md §4.5): SL_ENOMEM is out-of-memory (503: the proxy's failure, not the
 * request's); anything else (SL_ETOOBIG: the head grew past what the proxy writes, its additions
 * and replaced placeholders included) too-large (431). */
void sl_head_build_refusal(int rc, struct sl_head_refusal *why);

/* sl_head_build(), and the placeholder `ph` (policy/placeholder.h; NULL: none) replaced by its
 * secret in the values of its header, as sl_placeholder_replace() does; `*swapped` (when `ph`
 * is not NULL) is increased by the replacements made. The secret is then in `b`, as an injected
 * credential is. */
SL_MUST_CHECK int sl_head_build_swap(struct sl_buf *b, const struct sl_h1_head *h,
                                     const struct sl_head_target *t, const char *credential_header,
                                     const char *credential_value, const struct sl_placeholder *ph,
                                     unsigned *swapped);

/* What the client's request said, for the response relayed to it. */
struct sl_head_resp_ctx {
    /* The request was HEAD: the response has no body whatever its head says. */
    bool is_head;
    /* The request asked for a websocket upgrade (sl_head_target.websocket). */
    bool websocket;
    /* The client spoke HTTP/1.0. */
    bool client_http10;
    /* The client's request lets its connection carry another one. */
    bool client_keep_alive;
    /* The connection ends after this exchange whatever the response says (the proxy drains,
     * the rest of the request cannot be read, ...). */
    bool close_after;
};

/* What becomes of an upstream response head. */
enum sl_head_resp_verdict {
    /* The head to send the client is in the buffer. */
    SL_HEAD_RESP_RELAY = 0,
    /* An interim (1xx) response an HTTP/1.0 client does not get (RFC 9110 §15.2): nothing is
     * sent; the final response follows. */
    SL_HEAD_RESP_SKIP,
    /* A 101 the request did not ask for: the client gets a 502 instead. */
    SL_HEAD_RESP_REFUSE,
};

/* How the client's response goes out (for SL_HEAD_RESP_RELAY). */
struct sl_head_resp_plan {
    enum sl_head_resp_verdict verdict;
    /* The head is the final one (status >= 200, or the 101 of a websocket): it is the
     * exchange's status. False for an interim response; more heads follow. */
    bool final;
    /* The body is re-framed as chunked (a chunked or close-delimited upstream body for an
     * HTTP/1.1 client). */
    bool chunked;
    /* The body ends when the connection closes (a chunked or close-delimited upstream body for
     * an HTTP/1.0 client). */
    bool close_delimited;
    /* The client's connection closes after this exchange; a final head other than a 101 then
     * says `Connection: close`. Set on every verdict: it is ctx->close_after, or more. */
    bool close_after;
};

/* Decides what the client gets for the upstream response head `h` (parsed with the proxy's
 * strict parser, sl_h1_expect_no_body() already applied for a HEAD request) answering a request
 * described by `ctx`, and writes that head into `b` (reset first) when it is relayed:
 *   - a 101 without a websocket request is refused; a websocket request answered otherwise
 *     closes the connection after the response;
 *   - an interim response to an HTTP/1.0 client is skipped; other interim responses get their
 *     end-to-end headers and no framing;
 *   - a 101 gets its end-to-end headers and `Connection: Upgrade`, `Upgrade: websocket`;
 *   - a final head is `HTTP/1.1 <status> <reason>` (the upstream's reason when it is at most
 *     128 bytes of visible ASCII and spaces not naming "sluice", else the standard phrase of
 *     sl_http_reason()), the end-to-end headers of `h` in order
 *     (sl_head_put_headers()), then the framing: none for a 204 and for 1xx; for a response
 *     to HEAD and for 304 the upstream's Content-Length when it had one (it describes the
 *     representation); otherwise Content-Length (the upstream's length, or 0 for no body), or
 *     `Transfer-Encoding: chunked` (HTTP/1.1 client), or nothing and a close-delimited body
 *     (HTTP/1.0 client); then `Connection: close` when the connection ends after it, or
 *     `Connection: keep-alive` for an HTTP/1.0 client whose connection goes on.
 * `*plan` is always filled. Returns 0, or SL_ETOOBIG / SL_ENOMEM from `b` (the head is then
 * incomplete; `*plan` still says the verdict). */
SL_MUST_CHECK int sl_head_build_response(struct sl_buf *b, const struct sl_h1_head *h,
                                         const struct sl_head_resp_ctx *ctx,
                                         struct sl_head_resp_plan *plan);

/* True for the headers the proxy never forwards as received (RFC 9110 §7.6.1 hop-by-hop ones,
 * Proxy-Authorization and Proxy-Authenticate, and those it writes itself: Host, the framing
 * headers and X-Sluice-Reason, so that an upstream cannot dress its response up as a refusal
 * of the proxy's). */
bool sl_head_is_hop_by_hop(struct sl_slice name);

/* True when `name` is listed in any Connection header of `h` (RFC 9110 §7.6.1). */
bool sl_head_is_listed_in_connection(const struct sl_h1_head *h, struct sl_slice name);

/* Copies the end-to-end headers of `h` into `b`, minus `skip` (a header name: in any letter case,
 * `-` and `_` counted the same; or NULL). */
SL_MUST_CHECK int sl_head_put_headers(struct sl_buf *b, const struct sl_h1_head *h,
                                      const char *skip);

#endif
