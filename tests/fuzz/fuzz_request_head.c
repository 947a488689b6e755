/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_request_head.c - the proxy's request head path (proxy/head.c, the code
 * proxy/conn.c runs): parse with http/h1 as the proxy does, resolve the target, decide under a
 * fixed snapshot, re-serialise the head sent upstream.
 *
 * Input: byte 0 picks the tunnel of the intercepted context (bits 0-1: api.example.com:443 over
 * TLS, api.example.com:80 plain, ws.example.org:8443 over TLS, [2001:db8::1]:443 over TLS); the
 * rest is a request head, parsed with the proxy's limits. Each head is run in that tunnel, as
 * an absolute-form request to the proxy, and as a plain request to a transparent listener on
 * the tunnel's port.
 *
 * Invariants, for every head the parser takes:
 *   - a CONNECT is refused; a refusal names a reason sl_head_resolve() may give;
 *   - an accepted head names a host (the tunnel's, inside one; its Host header's, transparent:
 *     on the connection's port, which a port in the Host header repeats) and an origin-form
 *     target: the request's own inside a tunnel (and transparent), the path and query of its URL
 *     in absolute-form;
 *   - a credential is decided only over TLS;
 *   - the head built for upstream re-parses with http/h1 (strict llhttp) as exactly one request
 *     head ending where the bytes end (and the message too when it has no body), with the same
 *     method, the resolved target, the same body framing, exactly one Host naming the decided
 *     host (and port unless the scheme's default), at most one of Content-Length and
 *     Transfer-Encoding; the credential header exactly once with the snapshot's value when the
 *     decision carries one, else as often as the client sent it end to end; no hop-by-hop
 *     header (Connection and Upgrade only as the websocket pair the proxy writes itself, no
 *     header the client listed in Connection unless the proxy writes it itself); its length
 *     bounded by the input head's plus the proxy's own additions.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/err.h"
#include "http/h1.h"
#include "policy/decision.h"
#include "policy/host.h"
#include "policy/snapshot.h"
#include "policy/url.h"
#include "proxy/head.h"
#include "tests/support/h1trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_MAX  (16u * 1024u)
#define CRED_NAME  "Authorization"
#define CRED_VALUE "Bearer s3cr3t-f0r-api"

static const char policy[] =
        "{\"version\": 1, \"environments\": {\"e\": {\"default\": \"deny\", \"rules\": ["
        "{\"host\": \"api.example.com\", \"credential\": {\"header\": \"" CRED_NAME
        "\", \"value\": \"" CRED_VALUE "\"}},"
        "{\"host\": \"*.example.org\", \"methods\": [\"GET\", \"HEAD\", \"POST\"]},"
        "{\"host\": \"[2001:db8::1]\"}"
        "]}}, \"clients\": [{\"id\": \"c\", \"ip\": \"10.1.0.1\", \"environment\": \"e\"}]}";

struct tunnel {
    const char *host;
    uint16_t port;
    bool tls;
};

static const struct tunnel tunnels[] = {
    { "api.example.com", 443, true },
    { "api.example.com", 80, false },
    { "ws.example.org", 8443, true },
    { "[2001:db8::1]", 443, true },
};

static struct sl_snapshot *snap;
static const struct sl_client *client;

static void setup(void)
{
    struct sockaddr_in src = { .sin_family = AF_INET };

    if (snap != NULL) {
        return;
    }
    SL_BUG_ON(sl_snapshot_parse(policy, strlen(policy), &snap, NULL) != 0);
    SL_BUG_ON(inet_pton(AF_INET, "10.1.0.1", &src.sin_addr) != 1);
    client = sl_policy_identify(snap, NULL, NULL, (const struct sockaddr *)&src);
    SL_BUG_ON(client == NULL);
}

/* `s` is exactly `str`. */
static bool slice_is(struct sl_slice s, const char *str)
{
    return sl_slice_eq(s, sl_slice_str(str));
}

/* What an accepted head's target must be: the request's own inside a tunnel (origin-form, or
 * the path and query of an absolute-form one), the URL's path and query outside. */
static void check_target(const struct sl_h1_head *h, const struct sl_head_ctx *ctx,
                         const struct sl_head_target *t)
{
    struct sl_url url;
    size_t n;

    SL_BUG_ON(!t->has_host || t->target == NULL || t->port == 0);
    SL_BUG_ON(t->target[0] != '/'
              && !(strcmp(t->target, "*") == 0 && (ctx->tunnel || ctx->transparent)));
    if (ctx->tunnel) {
        SL_BUG_ON(t->host.len != ctx->host->len || strcmp(t->host.name, ctx->host->name) != 0);
        SL_BUG_ON(t->port != ctx->port);
        SL_BUG_ON(strcmp(t->scheme, ctx->tls ? "https" : "http") != 0);
        if (h->target[0] == '/' || h->target[0] == '*') {
            SL_BUG_ON(strcmp(t->target, h->target) != 0);
            return;
        }
    } else if (ctx->transparent) {
        const struct sl_h1_header *f = sl_h1_find(h, "host");
        struct sl_host named;
        uint16_t named_port = 0;

        SL_BUG_ON(f == NULL
                  || sl_host_parse_authority(f->value, 0, &named, &named_port, NULL) != 0);
        SL_BUG_ON(named.len != t->host.len || strcmp(named.name, t->host.name) != 0);
        SL_BUG_ON(t->port != ctx->port || (named_port != 0 && named_port != ctx->port));
        SL_BUG_ON(strcmp(t->scheme, "http") != 0);
        if (h->target[0] == '/' || h->target[0] == '*') {
            SL_BUG_ON(strcmp(t->target, h->target) != 0);
            return;
        }
    } else {
        SL_BUG_ON(strcmp(t->scheme, "http") != 0);
    }
    SL_BUG_ON(sl_url_parse(sl_slice_str(h->target), &url, NULL) != 0);
    SL_BUG_ON(url.host.len != t->host.len || strcmp(url.host.name, t->host.name) != 0);
    SL_BUG_ON(url.port != t->port);
    n = strlen(t->target);
    SL_BUG_ON(n != url.path.n + url.query.n);
    SL_BUG_ON(memcmp(t->target, url.path.p, url.path.n) != 0);
    SL_BUG_ON(memcmp(t->target + url.path.n, url.query.p, url.query.n) != 0);
}

/* Re-parses the head built for upstream and checks it against the input head `h`. */
static void check_output(const struct sl_h1_head *h, size_t in_bytes,
                         const struct sl_head_target *t, const struct sl_decision *d,
                         const struct sl_buf *out)
{
    /* The proxy may add a few headers to a head that had the most the parser takes. */
    static const struct sl_h1_limits relaxed = { 2 * INPUT_MAX, 256 + 8 };
    const char *cred = d->credential_header;
    uint16_t default_port = strcmp(t->scheme, "https") == 0 ? 443 : 80;
    char host[SL_HOST_NAME_MAX + 8];
    struct sl_arena arena;
    struct sl_h1 p;
    struct sl_h1_event ev;
    const struct sl_h1_head *o;
    const struct sl_h1_header *f;
    size_t bound;
    int used;

    bound = in_bytes + h->n_headers + 512 + (cred != NULL ? strlen(cred) + strlen(CRED_VALUE) : 0);
    SL_BUG_ON(out->len > bound);

    sl_arena_init(&arena, 4096, 1 << 22);
    sl_h1_init(&p, SL_H1_REQUEST, &relaxed, &arena);
    used = sl_h1_feed(&p, out->p, out->len, &ev);
    SL_BUG_ON(used < 0 || ev.type != SL_H1_EV_HEAD || (size_t)used != out->len);
    o = sl_h1_head(&p);
    SL_BUG_ON(strcmp(o->method, h->method) != 0 || strcmp(o->target, t->target) != 0);
    SL_BUG_ON(o->version_major != 1 || o->version_minor != 1);
    SL_BUG_ON(o->body != h->body);
    SL_BUG_ON(o->body == SL_H1_BODY_LENGTH && o->content_length != h->content_length);
    if (h->body == SL_H1_BODY_NONE) {
        used = sl_h1_feed(&p, NULL, 0, &ev);
        SL_BUG_ON(used != 0);
        SL_BUG_ON(ev.type != (t->websocket ? SL_H1_EV_UPGRADE : SL_H1_EV_END));
    }
    SL_BUG_ON(t->websocket != o->upgrade);

    /* Host. */
    SL_BUG_ON(sl_h1_count(o, "host") != 1);
    if (t->port != default_port) {
        SL_BUG_ON(snprintf(host, sizeof(host), "%s:%u", t->host.name, (unsigned)t->port) <= 0);
    } else {
        SL_BUG_ON(snprintf(host, sizeof(host), "%s", t->host.name) <= 0);
    }
    SL_BUG_ON(!slice_is(sl_h1_find(o, "host")->value, host));

    /* Framing. */
    SL_BUG_ON(sl_h1_count(o, "content-length") + sl_h1_count(o, "transfer-encoding") > 1);

    /* The credential. */
    if (cred != NULL) {
        SL_BUG_ON(strcmp(cred, CRED_NAME) != 0 || strcmp(t->scheme, "https") != 0);
        SL_BUG_ON(sl_h1_count(o, cred) != 1);
        f = sl_h1_find(o, cred);
        SL_BUG_ON(!slice_is(f->value, CRED_VALUE));
    } else {
        size_t sent = 0;

        for (size_t i = 0; i < h->n_headers; i++) {
            sent += sl_h1_name_is(h->headers[i].name, CRED_NAME)
                    && !sl_head_is_listed_in_connection(h, h->headers[i].name);
        }
        SL_BUG_ON(sl_h1_count(o, CRED_NAME) != sent);
    }

    /* Hop-by-hop headers. */
    sl_test_h1_check_no_hop_headers(o);
    SL_BUG_ON(sl_h1_count(o, "connection") != (t->websocket ? 1u : 0u));
    SL_BUG_ON(sl_h1_count(o, "upgrade") != (t->websocket ? 1u : 0u));
    if (t->websocket) {
        SL_BUG_ON(!slice_is(sl_h1_find(o, "connection")->value, "Upgrade"));
        SL_BUG_ON(!slice_is(sl_h1_find(o, "upgrade")->value, "websocket"));
    }
    for (size_t i = 0; i < o->n_headers; i++) {
        struct sl_slice name = o->headers[i].name;
        bool own = sl_h1_name_is(name, "host") || sl_h1_name_is(name, "content-length")
                   || sl_h1_name_is(name, "transfer-encoding") || sl_h1_name_is(name, "connection")
                   || sl_h1_name_is(name, "upgrade") || (cred != NULL && sl_h1_name_is(name, cred));

        SL_BUG_ON(!own && sl_head_is_listed_in_connection(h, name));
    }
    sl_h1_finish(&p);
    sl_arena_finish(&arena);
}

static void run(const struct sl_h1_head *h, size_t in_bytes, const struct sl_head_ctx *ctx,
                struct sl_arena *arena)
{
    struct sl_head_target t;
    struct sl_head_refusal why;
    struct sl_decision d;
    struct sl_request_view v;
    struct sl_buf out;
    int rc = sl_head_resolve(h, ctx, arena, &t, &why);

    if (strcmp(h->method, "CONNECT") == 0) {
        SL_BUG_ON(rc != SL_EINVAL || why.reason != SL_REASON_BAD_REQUEST);
        return;
    }
    if (rc < 0) {
        SL_BUG_ON(rc != SL_EINVAL && rc != SL_ENOMEM);
        SL_BUG_ON(why.reason != SL_REASON_BAD_REQUEST && why.reason != SL_REASON_BAD_HOST
                  && why.reason != SL_REASON_HOST_MISMATCH && why.reason != SL_REASON_TOO_LARGE);
        return;
    }
    check_target(h, ctx, &t);
    SL_BUG_ON(t.websocket && h->body != SL_H1_BODY_NONE);

    v = (struct sl_request_view){ &t.host, t.port, h->method, ctx->tunnel && ctx->tls, t.target };
    sl_policy_decide(snap, client, &v, 1800000000, &d);
    SL_BUG_ON(d.credential_header != NULL && (!d.allow || !v.tls));
    SL_BUG_ON(d.allow && d.reason != SL_REASON_NONE);

    sl_buf_init(&out, 4 * INPUT_MAX);
    SL_BUG_ON(sl_head_build(&out, h, &t, d.credential_header, d.credential_value) != 0);
    check_output(h, in_bytes, &t, &d, &out);
    sl_buf_finish(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct tunnel *tu;
    struct sl_host thost;
    struct sl_arena arena;
    struct sl_h1 p;
    struct sl_h1_event ev;
    size_t pos = 1;
    int used;

    if (size < 1 || size - 1 > INPUT_MAX) {
        return 0;
    }
    setup();
    tu = &tunnels[data[0] & 3];
    SL_BUG_ON(sl_host_normalize(sl_slice_str(tu->host), 0, &thost, NULL) != 0);

    sl_arena_init(&arena, 4096, 1 << 22);
    sl_h1_init(&p, SL_H1_REQUEST, NULL, &arena);
    do {
        used = sl_h1_feed(&p, data + pos, size - pos, &ev);
        if (used < 0) {
            goto out;
        }
        pos += (size_t)used;
    } while (ev.type != SL_H1_EV_HEAD && ev.type != SL_H1_EV_NONE);
    if (ev.type == SL_H1_EV_HEAD) {
        const struct sl_h1_head *h = sl_h1_head(&p);
        struct sl_head_ctx in_tunnel = { true, tu->tls, &thost, tu->port, false };
        struct sl_head_ctx absolute = { false, false, NULL, 0, false };
        struct sl_head_ctx transparent = { false, false, NULL, tu->port, true };

        run(h, pos - 1, &in_tunnel, &arena);
        run(h, pos - 1, &absolute, &arena);
        run(h, pos - 1, &transparent, &arena);
    }
out:
    sl_h1_finish(&p);
    sl_arena_finish(&arena);
    return 0;
}
