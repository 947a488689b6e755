/* SPDX-License-Identifier: Apache-2.0 */
#include "proxy/head.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "http/server.h"
#include "policy/placeholder.h"
#include "policy/url.h"

/* The longest reason phrase of an upstream's relayed as it is. */
#define REASON_MAX 128

static int refuse(struct sl_head_refusal *why, enum sl_reason reason, const char *detail)
{
    why->reason = reason;
    why->detail = detail;
    return SL_EINVAL;
}

static bool same_host(const struct sl_host *a, const struct sl_host *b)
{
    return a->len == b->len && memcmp(a->name, b->name, a->len) == 0;
}

/* Sets out->target to the origin form (path and query) of `url`, carved from `arena`: the
 * path of a URL without one is a static "/" that the query does not follow. */
static int origin_form(const struct sl_url *url, struct sl_arena *arena, struct sl_head_target *out,
                       struct sl_head_refusal *why)
{
    size_t n = url->path.n + url->query.n;
    char *t = sl_arena_alloc(arena, n + 1);

    if (t == NULL) {
        (void)refuse(why, SL_REASON_TOO_LARGE, NULL);
        return SL_ENOMEM;
    }
    memcpy(t, url->path.p, url->path.n);
    if (url->query.n > 0) {
        memcpy(t + url->path.n, url->query.p, url->query.n);
    }
    t[n] = '\0';
    out->target = t;
    return 0;
}

/* An absolute-form proxy request: the target names the host (docs/reference/proxy.md §4.3). */
static int target_absolute(const struct sl_h1_head *h, struct sl_arena *arena,
                           struct sl_head_target *out, struct sl_head_refusal *why)
{
    struct sl_url url;
    const char *bad = NULL;

    if (h->target[0] == '/' || strcmp(h->target, "*") == 0) {
        return refuse(why, SL_REASON_BAD_REQUEST,
                      "this is a proxy: send absolute-form requests (http://host/path) or CONNECT");
    }
    if (sl_url_parse(sl_slice_str(h->target), &url, &bad) < 0) {
        return refuse(why, SL_REASON_BAD_HOST, bad);
    }
    if (url.scheme != SL_URL_HTTP) {
        return refuse(why, SL_REASON_BAD_REQUEST, "https:// URLs go through CONNECT");
    }
    out->scheme = "http";
    out->host = url.host;
    out->port = url.port;
    out->has_host = true;
    return origin_form(&url, arena, out, why);
}

/* An origin-form target ("/path?query") has no fragment: what the policy and the audit log
 * see would not be what the origin gets (a server may take '#' literally). '*' is for OPTIONS
 * alone (RFC 9112 §3.2.4). */
static int origin_target_ok(const struct sl_h1_head *h, struct sl_head_refusal *why)
{
    if (h->target[0] == '/' && strchr(h->target, '#') != NULL) {
        return refuse(why, SL_REASON_BAD_REQUEST, "fragments ('#') are not allowed");
    }
    if (h->target[0] == '*' && (h->target[1] != '\0' || strcmp(h->method, "OPTIONS") != 0)) {
        return refuse(why, SL_REASON_BAD_REQUEST, "'*' is the target of OPTIONS alone");
    }
    return 0;
}

/* Inside a tunnel: the target must be origin-form (or absolute-form naming the tunnel). */
static int target_in_tunnel(const struct sl_h1_head *h, const struct sl_head_ctx *ctx,
                            struct sl_arena *arena, struct sl_head_target *out,
                            struct sl_head_refusal *why)
{
    out->host = *ctx->host;
    out->port = ctx->port;
    out->has_host = true;
    SL_TRY(origin_target_ok(h, why));
    if (h->target[0] == '/' || h->target[0] == '*') {
        out->target = h->target;
    } else {
        struct sl_url url;
        const char *bad = NULL;

        if (sl_url_parse(sl_slice_str(h->target), &url, &bad) < 0) {
            return refuse(why, SL_REASON_BAD_HOST, bad);
        }
        if (!same_host(&url.host, ctx->host) || url.port != ctx->port) {
            return refuse(why, SL_REASON_HOST_MISMATCH,
                          "the request names another host than the tunnel");
        }
        /* Not url.path.p alone: `https://host?q` has a static "/" for its path, and
         * forwarding that dropped the query. */
        SL_TRY(origin_form(&url, arena, out, why));
    }
    return 0;
}

/* A plain HTTP request to a transparent listener: the client resolved the host to the proxy
 * and sent the request as to the host itself, so the Host header is what names it, and the
 * port is the one the connection was made to (docs/reference/proxy.md §4.12). */
static int target_transparent(const struct sl_h1_head *h, const struct sl_head_ctx *ctx,
                              struct sl_arena *arena, struct sl_head_target *out,
                              struct sl_head_refusal *why)
{
    const struct sl_h1_header *f = sl_h1_find(h, "host");
    const char *bad = NULL;
    struct sl_url url;
    uint16_t port = 0;

    out->port = ctx->port;
    if (f == NULL) {
        return refuse(why, SL_REASON_BAD_REQUEST,
                      "a request sent without a proxy needs a Host header naming its host");
    }
    if (sl_host_parse_authority(f->value, 0, &out->host, &port, NULL) < 0) {
        return refuse(why, SL_REASON_BAD_HOST, "malformed Host header");
    }
    out->has_host = true;
    if (port != 0 && port != ctx->port) {
        return refuse(why, SL_REASON_HOST_MISMATCH,
                      "the Host header names another port than the connection's");
    }
    SL_TRY(origin_target_ok(h, why));
    if (h->target[0] == '/' || h->target[0] == '*') {
        out->target = h->target;
        return 0;
    }
    if (sl_url_parse(sl_slice_str(h->target), &url, &bad) < 0) {
        return refuse(why, SL_REASON_BAD_HOST, bad);
    }
    if (url.scheme != SL_URL_HTTP || !same_host(&url.host, &out->host) || url.port != ctx->port) {
        return refuse(why, SL_REASON_HOST_MISMATCH,
                      "the request names another host than its Host header");
    }
    return origin_form(&url, arena, out, why);
}

/* Checks that the Host header (if any; `required` says whether it must be there) names the
 * request's host and port (docs/reference/proxy.md §4.3). */
static int host_header_matches(const struct sl_h1_head *h, const struct sl_head_target *t,
                               bool required, struct sl_head_refusal *why)
{
    const struct sl_h1_header *f = sl_h1_find(h, "host");
    uint16_t default_port = strcmp(t->scheme, "https") == 0 ? 443 : 80;
    struct sl_host host;
    uint16_t port = 0;

    if (f == NULL) {
        if (required) {
            return refuse(why, SL_REASON_BAD_REQUEST, "an HTTP/1.1 request needs a Host header");
        }
        return 0;
    }
    if (sl_host_parse_authority(f->value, 0, &host, &port, NULL) < 0) {
        return refuse(why, SL_REASON_BAD_HOST, "malformed Host header");
    }
    if (port == 0) {
        port = default_port;
    }
    if (!same_host(&host, &t->host) || port != t->port) {
        return refuse(why, SL_REASON_HOST_MISMATCH,
                      "the Host header names another host than the request");
    }
    return 0;
}

/* The Host header of an absolute-form request, when there is one, must be a host[:port]; what it
 * names does not count: a proxy ignores it (RFC 9112 §3.2.2) and writes the URL's own upstream
 * (§4.6), so the policy and the origin both see the URL's host. Node's http.request through a
 * proxy sends the proxy's address there. */
static int host_header_well_formed(const struct sl_h1_head *h, struct sl_head_refusal *why)
{
    const struct sl_h1_header *f = sl_h1_find(h, "host");
    struct sl_host host;
    uint16_t port = 0;

    if (f != NULL && sl_host_parse_authority(f->value, 0, &host, &port, NULL) < 0) {
        return refuse(why, SL_REASON_BAD_HOST, "malformed Host header");
    }
    return 0;
}

int sl_head_connect_host(const struct sl_h1_head *h, const struct sl_host *host, uint16_t port,
                         struct sl_slice *other, struct sl_head_refusal *why)
{
    const struct sl_h1_header *f = sl_h1_find(h, "host");
    struct sl_host named;
    uint16_t named_port = 0;

    *why = (struct sl_head_refusal){ SL_REASON_NONE, NULL };
    *other = sl_slice_of(NULL, 0);
    if (f == NULL) {
        return 0;
    }
    if (sl_host_parse_authority(f->value, 0, &named, &named_port, NULL) < 0) {
        return refuse(why, SL_REASON_BAD_HOST, "malformed Host header");
    }
    /* A Host without a port is taken to mean the CONNECT's (clients differ in sending it). */
    if (!same_host(&named, host) || (named_port != 0 && named_port != port)) {
        *other = f->value;
    }
    return 0;
}

int sl_head_resolve(const struct sl_h1_head *h, const struct sl_head_ctx *ctx,
                    struct sl_arena *arena, struct sl_head_target *out, struct sl_head_refusal *why)
{
    *out = (struct sl_head_target){ .scheme = ctx->tunnel && ctx->tls ? "https" : "http" };
    *why = (struct sl_head_refusal){ SL_REASON_NONE, NULL };
    if (strcmp(h->method, "CONNECT") == 0) {
        return refuse(why, SL_REASON_BAD_REQUEST,
                      ctx->tunnel ? "CONNECT inside a tunnel" : "CONNECT is not forwarded");
    }
    if (ctx->tunnel) {
        SL_TRY(target_in_tunnel(h, ctx, arena, out, why));
        SL_TRY(host_header_matches(h, out, h->version_minor == 1, why));
    } else if (ctx->transparent) {
        SL_TRY(target_transparent(h, ctx, arena, out, why));
    } else {
        SL_TRY(target_absolute(h, arena, out, why));
        SL_TRY(host_header_well_formed(h, why));
    }
    if (h->upgrade) {
        const struct sl_h1_header *u = sl_h1_find(h, "upgrade");

        if (u != NULL && sl_h1_list_has(u->value, "h2c")
            && !sl_h1_list_has(u->value, "websocket")) {
            /* curl --http2 and other clients offer h2c on every plain request and go on in
             * HTTP/1.1 when the server ignores the offer (RFC 9113 §3.1), as origins that do
             * not speak h2c do. The proxy does not relay h2c: it ignores the offer too (the
             * Upgrade header and what Connection names are not forwarded, §4.6). */
            out->upgrade_ignored = true;
            return 0;
        }
        if (u == NULL || !sl_h1_list_has(u->value, "websocket")) {
            return refuse(
                    why, SL_REASON_BAD_REQUEST,
                    "only Upgrade: websocket is relayed (an h2c offer is ignored, others refused)");
        }
        if (h->body != SL_H1_BODY_NONE) {
            return refuse(why, SL_REASON_BAD_REQUEST, "an upgrade request carries no body");
        }
        out->websocket = true;
    }
    return 0;
}

bool sl_head_is_hop_by_hop(struct sl_slice name)
{
    /* By length first: every header of every message passes here, and most names are not of a
     * length any of these has. */
    switch (name.n) {
    case 2:
        return sl_h1_name_is(name, "te");
    case 4:
        return sl_h1_name_is(name, "host");
    case 7:
        return sl_h1_name_is(name, "trailer") || sl_h1_name_is(name, "upgrade");
    case 10:
        return sl_h1_name_is(name, "connection") || sl_h1_name_is(name, "keep-alive");
    case 14:
        return sl_h1_name_is(name, "content-length");
    case 15:
        return sl_h1_name_is(name, "x-sluice-reason");
    case 16:
        return sl_h1_name_is(name, "proxy-connection");
    case 17:
        return sl_h1_name_is(name, "transfer-encoding");
    case 18:
        return sl_h1_name_is(name, "proxy-authenticate");
    case 19:
        return sl_h1_name_is(name, "proxy-authorization");
    default:
        return false;
    }
}

bool sl_head_is_listed_in_connection(const struct sl_h1_head *h, struct sl_slice name)
{
    char token[64];

    if (name.n >= sizeof(token)) {
        return false;
    }
    memcpy(token, name.p, name.n);
    token[name.n] = '\0';
    for (size_t i = 0; i < h->n_headers; i++) {
        if (sl_h1_name_is(h->headers[i].name, "connection")
            && sl_h1_list_has(h->headers[i].value, token)) {
            return true;
        }
    }
    return false;
}

/* sl_head_put_headers(), with `ph`'s placeholder replaced by its secret in the values of its
 * header (`ph` NULL: nothing replaced); `*swapped` counts the replacements. */
/* True when `name` is `skip` in any letter case, '-' and '_' counted the same: CGI, WSGI and
 * PHP read both X-Api-Key and X_Api_Key as HTTP_X_API_KEY, so a client's X_Api_Key could
 * shadow an injected X-Api-Key at such an origin. */
static bool is_skipped(struct sl_slice name, const char *skip)
{
    size_t i = 0;

    for (; i < name.n && skip[i] != '\0'; i++) {
        char a = (char)tolower((unsigned char)name.p[i]);
        char c = (char)tolower((unsigned char)skip[i]);

        if (a != c && !((a == '-' || a == '_') && (c == '-' || c == '_'))) {
            return false;
        }
    }
    return i == name.n && skip[i] == '\0';
}

static int put_headers(struct sl_buf *b, const struct sl_h1_head *h, const char *skip,
                       const struct sl_placeholder *ph, unsigned *swapped)
{
    /* The names a Connection header lists are looked up only when there is one. */
    bool has_connection = sl_h1_find(h, "connection") != NULL;

    for (size_t i = 0; i < h->n_headers; i++) {
        const struct sl_h1_header *f = &h->headers[i];

        if (sl_head_is_hop_by_hop(f->name)
            || (has_connection && sl_head_is_listed_in_connection(h, f->name))
            || (skip != NULL && is_skipped(f->name, skip))) {
            continue;
        }
        SL_TRY(sl_buf_append(b, f->name.p, f->name.n));
        SL_TRY(sl_buf_append(b, ": ", 2));
        if (ph != NULL && sl_h1_name_is(f->name, ph->header)) {
            SL_TRY(sl_placeholder_replace(b, f->value, ph, swapped));
        } else {
            SL_TRY(sl_buf_append(b, f->value.p, f->value.n));
        }
        SL_TRY(sl_buf_append(b, "\r\n", 2));
    }
    return 0;
}

int sl_head_put_headers(struct sl_buf *b, const struct sl_h1_head *h, const char *skip)
{
    return put_headers(b, h, skip, NULL, NULL);
}

static int put_content_length(struct sl_buf *b, uint64_t n)
{
    SL_TRY(sl_buf_append_str(b, "Content-Length: "));
    SL_TRY(sl_buf_append_u64(b, n));
    return sl_buf_append(b, "\r\n", 2);
}

void sl_head_build_refusal(int rc, struct sl_head_refusal *why)
{
    if (rc == SL_ENOMEM) {
        *why = (struct sl_head_refusal){ SL_REASON_OUT_OF_MEMORY,
                                         "the proxy ran out of memory building the request head" };
        return;
    }
    *why = (struct sl_head_refusal){ SL_REASON_TOO_LARGE, "the request head is too large" };
}

int sl_head_build(struct sl_buf *b, const struct sl_h1_head *h, const struct sl_head_target *t,
                  const char *credential_header, const char *credential_value)
{
    return sl_head_build_swap(b, h, t, credential_header, credential_value, NULL, NULL);
}

int sl_head_build_swap(struct sl_buf *b, const struct sl_h1_head *h, const struct sl_head_target *t,
                       const char *credential_header, const char *credential_value,
                       const struct sl_placeholder *ph, unsigned *swapped)
{
    uint16_t default_port = strcmp(t->scheme, "https") == 0 ? 443 : 80;

    sl_buf_reset(b);
    SL_TRY(sl_buf_append_str(b, h->method));
    SL_TRY(sl_buf_append(b, " ", 1));
    SL_TRY(sl_buf_append_str(b, t->target));
    SL_TRY(sl_buf_append_str(b, " HTTP/1.1\r\nHost: "));
    SL_TRY(sl_buf_append_str(b, t->host.name));
    if (t->port != default_port) {
        SL_TRY(sl_buf_append(b, ":", 1));
        SL_TRY(sl_buf_append_u64(b, t->port));
    }
    SL_TRY(sl_buf_append(b, "\r\n", 2));
    SL_TRY(put_headers(b, h, credential_header, ph, swapped));
    if (credential_header != NULL) {
        SL_TRY(sl_buf_append_str(b, credential_header));
        SL_TRY(sl_buf_append(b, ": ", 2));
        SL_TRY(sl_buf_append_str(b, credential_value));
        SL_TRY(sl_buf_append(b, "\r\n", 2));
    }
    if (t->websocket) {
        SL_TRY(sl_buf_append_str(b, "Connection: Upgrade\r\nUpgrade: websocket\r\n"));
    }
    switch (h->body) {
    case SL_H1_BODY_LENGTH:
        SL_TRY(put_content_length(b, h->content_length));
        break;
    case SL_H1_BODY_CHUNKED:
        SL_TRY(sl_buf_append_str(b, "Transfer-Encoding: chunked\r\n"));
        break;
    case SL_H1_BODY_NONE:
    case SL_H1_BODY_CLOSE:
        break;
    }
    return sl_buf_append_str(b, "\r\n");
}

/* An upstream's reason phrase goes to the client as it is when it is short, visible ASCII and
 * spaces, and does not name sluice: npm and pip show little of an answer but its status line,
 * so an upstream must not dress its answer up as the proxy's refusal ("403 Forbidden (sluice:
 * host-not-allowed)"), nor send control bytes or a 60 KB line through. */
static bool reason_is_clean(const char *r)
{
    static const char name[] = "sluice";
    size_t n = strlen(r);

    if (n > REASON_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)r[i];

        if (!(ch == ' ' || ch == '\t' || (ch > 0x20 && ch < 0x7f))) {
            return false;
        }
        if (i + sizeof(name) - 1 <= n && strncasecmp(r + i, name, sizeof(name) - 1) == 0) {
            return false;
        }
    }
    return true;
}

/* The framing of a final response other than a 101. */
static int put_response_framing(struct sl_buf *b, const struct sl_h1_head *h,
                                const struct sl_head_resp_ctx *ctx, struct sl_head_resp_plan *plan)
{
    bool bodyless = ctx->is_head || h->status == 204 || h->status == 304;

    if (bodyless) {
        /* A response to HEAD, and 304, describe the representation: keep its length. */
        const struct sl_h1_header *cl = sl_h1_find(h, "content-length");

        if (cl != NULL && h->status != 204) {
            SL_TRY(sl_buf_append_str(b, "Content-Length: "));
            SL_TRY(sl_buf_append(b, cl->value.p, cl->value.n));
            SL_TRY(sl_buf_append_str(b, "\r\n"));
        }
    } else if (h->body == SL_H1_BODY_LENGTH) {
        SL_TRY(put_content_length(b, h->content_length));
    } else if (h->body == SL_H1_BODY_NONE) {
        SL_TRY(sl_buf_append_str(b, "Content-Length: 0\r\n"));
    } else if (ctx->client_http10) {
        /* Chunked or close-delimited upstream: an HTTP/1.0 client gets a close-delimited
         * body. */
        plan->close_delimited = true;
    } else {
        plan->chunked = true;
        SL_TRY(sl_buf_append_str(b, "Transfer-Encoding: chunked\r\n"));
    }
    return 0;
}

int sl_head_build_response(struct sl_buf *b, const struct sl_h1_head *h,
                           const struct sl_head_resp_ctx *ctx, struct sl_head_resp_plan *plan)
{
    sl_buf_reset(b);
    *plan = (struct sl_head_resp_plan){ .verdict = SL_HEAD_RESP_RELAY,
                                        .close_after = ctx->close_after };
    if (h->status == 101 && !ctx->websocket) {
        plan->verdict = SL_HEAD_RESP_REFUSE;
        return 0;
    }
    if (ctx->websocket && h->status != 101) {
        /* The upgrade was refused; the request parser already treated it as granted, so the
         * connection ends with this response. */
        plan->close_after = true;
    }
    if (h->status < 200 && h->status != 101 && ctx->client_http10) {
        plan->verdict = SL_HEAD_RESP_SKIP;
        return 0;
    }
    plan->final = h->status >= 200 || h->status == 101;
    SL_TRY(sl_buf_append_str(b, "HTTP/1.1 "));
    SL_TRY(sl_buf_append_u64(b, (uint64_t)h->status));
    SL_TRY(sl_buf_append(b, " ", 1));
    SL_TRY(sl_buf_append_str(b,
                             reason_is_clean(h->reason) ? h->reason : sl_http_reason(h->status)));
    SL_TRY(sl_buf_append(b, "\r\n", 2));
    SL_TRY(sl_head_put_headers(b, h, NULL));
    if (h->status == 101) {
        return sl_buf_append_str(b, "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
    }
    if (h->status < 200) {
        return sl_buf_append_str(b, "\r\n");
    }
    SL_TRY(put_response_framing(b, h, ctx, plan));
    if (plan->close_delimited || plan->close_after || !ctx->client_keep_alive) {
        plan->close_after = true;
        SL_TRY(sl_buf_append_str(b, "Connection: close\r\n"));
    } else if (ctx->client_http10) {
        SL_TRY(sl_buf_append_str(b, "Connection: keep-alive\r\n"));
    }
    return sl_buf_append_str(b, "\r\n");
}
