/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/proxy/test_head.c - proxy/head: the target and refusal of a request head, the head the
 * proxy sends upstream, and what becomes of an upstream response head, byte for byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/mem.h"
#include "http/h1.h"
#include "policy/host.h"
#include "proxy/head.h"

struct fixture {
    struct sl_arena arena;
    struct sl_h1 p;
    /* Upstream responses. */
    struct sl_h1 rp;
    struct sl_host thost;
    struct sl_buf out;
};

static int setup(void **state)
{
    struct fixture *f = test_calloc(1, sizeof(*f));

    sl_arena_init(&f->arena, 4096, 1 << 20);
    sl_h1_init(&f->p, SL_H1_REQUEST, NULL, &f->arena);
    sl_h1_init(&f->rp, SL_H1_RESPONSE, NULL, &f->arena);
    sl_buf_init(&f->out, 1 << 16);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    sl_buf_finish(&f->out);
    sl_h1_finish(&f->p);
    sl_h1_finish(&f->rp);
    sl_arena_finish(&f->arena);
    test_free(f);
    return 0;
}

/* Parses the head `text` (complete, with its terminating empty line). */
static const struct sl_h1_head *parse(struct fixture *f, const char *text)
{
    struct sl_h1_event ev;
    int used = sl_h1_feed(&f->p, (const uint8_t *)text, strlen(text), &ev);

    assert_true(used > 0);
    assert_int_equal(ev.type, SL_H1_EV_HEAD);
    return sl_h1_head(&f->p);
}

/* Parses the response head `text` as the proxy does, answering a HEAD request when `is_head`. */
static const struct sl_h1_head *parse_response(struct fixture *f, const char *text, bool is_head)
{
    struct sl_h1_event ev;
    int used;

    sl_h1_finish(&f->rp);
    sl_h1_init(&f->rp, SL_H1_RESPONSE, NULL, &f->arena);
    if (is_head) {
        sl_h1_expect_no_body(&f->rp);
    }
    used = sl_h1_feed(&f->rp, (const uint8_t *)text, strlen(text), &ev);
    assert_true(used > 0);
    assert_int_equal(ev.type, SL_H1_EV_HEAD);
    return sl_h1_head(&f->rp);
}

/* Whether the built head holds `s`. */
static const void *memmem_str(const struct fixture *f, const char *s)
{
    size_t n = strlen(s);

    for (size_t i = 0; i + n <= f->out.len; i++) {
        if (memcmp(f->out.p + i, s, n) == 0) {
            return f->out.p + i;
        }
    }
    return NULL;
}

static void assert_out(const struct fixture *f, const char *want)
{
    assert_int_equal(f->out.len, strlen(want));
    assert_memory_equal(f->out.p, want, f->out.len);
}

static struct sl_head_ctx tunnel(struct fixture *f, const char *host, uint16_t port, bool tls)
{
    assert_int_equal(sl_host_normalize(sl_slice_str(host), 0, &f->thost, NULL), 0);
    return (struct sl_head_ctx){ true, tls, &f->thost, port, false };
}

static const struct sl_head_ctx absolute = { false, false, NULL, 0, false };

/* Resolves the request head `h` in `ctx` (it must succeed; the target in `t`), builds the head
 * sent upstream with the credential header `name: value` (NULL: none) and checks that it is
 * `want`. */
static void build_ok(struct fixture *f, const struct sl_h1_head *h, const struct sl_head_ctx *ctx,
                     const char *name, const char *value, const char *want,
                     struct sl_head_target *t)
{
    struct sl_head_refusal why;

    assert_int_equal(sl_head_resolve(h, ctx, &f->arena, t, &why), 0);
    assert_int_equal(sl_head_build(&f->out, h, t, name, value), 0);
    assert_out(f, want);
}

static void builds_an_intercepted_request_with_its_credential(void **state)
{
    struct fixture *f = *state;
    const struct sl_h1_head *h = parse(f, "POST /v1/x?a=b HTTP/1.1\r\n"
                                          "Host: api.example.com\r\n"
                                          "Authorization: Bearer client-own\r\n"
                                          "Connection: keep-alive, X-Hop\r\n"
                                          "X-Hop: 1\r\n"
                                          "Keep-Alive: timeout=5\r\n"
                                          "TE: trailers\r\n"
                                          "Accept: */*\r\n"
                                          "Content-Length: 3\r\n\r\n");
    struct sl_head_ctx ctx = tunnel(f, "API.example.com", 443, true);
    struct sl_head_target t;
    static const char want[] = "POST /v1/x?a=b HTTP/1.1\r\n"
                               "Host: api.example.com\r\n"
                               "Accept: */*\r\n"
                               "Authorization: Bearer s3cr3t\r\n"
                               "Content-Length: 3\r\n\r\n";

    build_ok(f, h, &ctx, "Authorization", "Bearer s3cr3t", want, &t);
    assert_string_equal(t.scheme, "https");
    assert_string_equal(t.host.name, "api.example.com");
    assert_int_equal(t.port, 443);
    assert_string_equal(t.target, "/v1/x?a=b");
    assert_false(t.websocket);
}

/* Every spelling of the credential's name the client sends is dropped: letter case, and '_' for
 * '-' (CGI, WSGI and PHP read X_Api_Key as X-Api-Key); a longer or shorter name is kept. */
static void drops_every_spelling_of_the_credential_header(void **state)
{
    struct fixture *f = *state;
    const struct sl_h1_head *h = parse(f, "GET / HTTP/1.1\r\n"
                                          "Host: api.example.com\r\n"
                                          "X-Api-Key: c1\r\n"
                                          "x-api-key: c2\r\n"
                                          "X_Api_Key: c3\r\n"
                                          "x_api-KEY: c4\r\n"
                                          "X-Api-Keys: kept\r\n"
                                          "X-Api-Ke: kept\r\n\r\n");
    struct sl_head_ctx ctx = tunnel(f, "api.example.com", 443, true);
    struct sl_head_target t;
    static const char want[] = "GET / HTTP/1.1\r\n"
                               "Host: api.example.com\r\n"
                               "X-Api-Keys: kept\r\n"
                               "X-Api-Ke: kept\r\n"
                               "X-Api-Key: s3cr3t\r\n\r\n";

    build_ok(f, h, &ctx, "X-Api-Key", "s3cr3t", want, &t);
}

/* A placeholder credential: the placeholder is replaced in its header only (every header of
 * that name, Basic decoded and encoded again), nothing is injected, other headers go as sent
 * (the connection refused the request before when one held a placeholder of the client). */
static void replaces_a_placeholder_in_its_header_only(void **state)
{
    struct fixture *f = *state;
    const struct sl_placeholder ph = { "OPENAI_API_KEY",
                                       "sluice-ph-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2",
                                       "api.example.com", "Authorization", "sk-real" };
    const struct sl_h1_head *h = parse(
            f, "GET /v1/models HTTP/1.1\r\n"
               "Host: api.example.com\r\n"
               "authorization: Bearer sluice-ph-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2\r\n"
               "X-Other: sluice-ph-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2\r\n"
               "Authorization: Basic "
               "dXNlcjpzbHVpY2UtcGgtYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhMg==\r\n"
               "\r\n");
    struct sl_head_ctx ctx = tunnel(f, "api.example.com", 443, true);
    struct sl_head_target t;
    struct sl_head_refusal why;
    unsigned swapped = 0;
    static const char want[] = "GET /v1/models HTTP/1.1\r\n"
                               "Host: api.example.com\r\n"
                               "authorization: Bearer sk-real\r\n"
                               "X-Other: sluice-ph-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2\r\n"
                               "Authorization: Basic dXNlcjpzay1yZWFs\r\n\r\n";

    assert_int_equal(sl_head_resolve(h, &ctx, &f->arena, &t, &why), 0);
    assert_int_equal(sl_head_build_swap(&f->out, h, &t, NULL, NULL, &ph, &swapped), 0);
    assert_out(f, want);
    assert_int_equal(swapped, 2);
    /* Without the placeholder: the head as sl_head_build() writes it. */
    assert_int_equal(sl_head_build_swap(&f->out, h, &t, NULL, NULL, NULL, NULL), 0);
    assert_non_null(memmem_str(f, "Bearer sluice-ph-"));
}

/* A head that cannot be built for lack of memory (each of its allocations failed in turn) is
 * the proxy's failure, 503 out-of-memory; only one that outgrows the buffer is 431 too-large. */
static void a_head_it_cannot_build_for_lack_of_memory_is_503_out_of_memory(void **state)
{
    struct fixture *f = *state;
    const struct sl_h1_head *h = parse(f, "GET /v1/models HTTP/1.1\r\n"
                                          "Host: api.example.com\r\n"
                                          "User-Agent: a-client-with-a-rather-long-name/1.0\r\n"
                                          "Accept: */*\r\n\r\n");
    struct sl_head_ctx ctx = tunnel(f, "api.example.com", 443, true);
    struct sl_head_target t;
    struct sl_head_refusal why;
    struct sl_buf small;
    int failed = 0;
    int rc;

    assert_int_equal(sl_head_resolve(h, &ctx, &f->arena, &t, &why), 0);
    for (long n = 1; n < 64; n++) {
        long failures;

        sl_buf_finish(&f->out);
        sl_mem_fail_after(n);
        rc = sl_head_build(&f->out, h, &t, "Authorization", "Bearer sk-real");
        failures = sl_mem_failures();
        sl_mem_fail_after(0);
        if (failures == 0) {
            assert_int_equal(rc, 0);
            break;
        }
        assert_int_equal(rc, SL_ENOMEM);
        sl_head_build_refusal(rc, &why);
        assert_int_equal(why.reason, SL_REASON_OUT_OF_MEMORY);
        assert_string_equal(sl_reason_code(why.reason), "out-of-memory");
        assert_int_equal(sl_reason_status(why.reason), 503);
        assert_string_equal(why.detail, "the proxy ran out of memory building the request head");
        failed++;
    }
    assert_true(failed > 0);
    assert_non_null(memmem_str(f, "Authorization: Bearer sk-real\r\n"));

    sl_buf_init(&small, 64);
    rc = sl_head_build(&small, h, &t, "Authorization", "Bearer sk-real");
    sl_buf_finish(&small);
    assert_int_equal(rc, SL_ETOOBIG);
    sl_head_build_refusal(rc, &why);
    assert_int_equal(why.reason, SL_REASON_TOO_LARGE);
    assert_int_equal(sl_reason_status(why.reason), 431);
    assert_string_equal(why.detail, "the request head is too large");
}

static void builds_an_absolute_form_request_in_origin_form(void **state)
{
    struct fixture *f = *state;
    const struct sl_h1_head *h = parse(f, "GET http://Files.Example.org:8080/a%20b?q HTTP/1.1\r\n"
                                          "Host: files.example.org:8080\r\n"
                                          "Proxy-Authorization: Basic Yzp0\r\n"
                                          "Proxy-Connection: keep-alive\r\n"
                                          "Authorization: mine\r\n"
                                          "Transfer-Encoding: chunked\r\n\r\n");
    struct sl_head_target t;
    static const char want[] = "GET /a%20b?q HTTP/1.1\r\n"
                               "Host: files.example.org:8080\r\n"
                               "Authorization: mine\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n";

    /* No credential decided: the client's own end-to-end Authorization goes through. */
    build_ok(f, h, &absolute, NULL, NULL, want, &t);
    assert_string_equal(t.scheme, "http");
    assert_int_equal(t.port, 8080);
    assert_string_equal(t.target, "/a%20b?q");
}

/* RFC 9112 §3.2.2: the Host of an absolute-form request is ignored, and the URL's own goes
 * upstream (Node's http.request through a proxy sends the proxy's address there). */
static void ignores_the_host_header_of_an_absolute_form_request(void **state)
{
    struct fixture *f = *state;
    const struct sl_h1_head *h = parse(f, "GET http://files.example.org:8080/x HTTP/1.1\r\n"
                                          "Host: 127.0.0.1:3128\r\n"
                                          "Accept: */*\r\n\r\n");
    struct sl_head_target t;
    static const char want[] = "GET /x HTTP/1.1\r\n"
                               "Host: files.example.org:8080\r\n"
                               "Accept: */*\r\n\r\n";

    build_ok(f, h, &absolute, NULL, NULL, want, &t);
    assert_int_equal(t.port, 8080);
    assert_string_equal(t.host.name, "files.example.org");
}

static void relays_a_websocket_upgrade_only(void **state)
{
    struct fixture *f = *state;
    const struct sl_h1_head *h = parse(f, "GET /ws HTTP/1.1\r\n"
                                          "Host: ws.example.org:8443\r\n"
                                          "Connection: Upgrade\r\n"
                                          "Upgrade: websocket\r\n"
                                          "Sec-WebSocket-Version: 13\r\n\r\n");
    struct sl_head_ctx ctx = tunnel(f, "ws.example.org", 8443, true);
    struct sl_head_target t;
    static const char want[] = "GET /ws HTTP/1.1\r\n"
                               "Host: ws.example.org:8443\r\n"
                               "Sec-WebSocket-Version: 13\r\n"
                               "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n";

    build_ok(f, h, &ctx, NULL, NULL, want, &t);
    assert_true(t.websocket);
}

/* An h2c offer (curl --http2 on http:// URLs) is ignored as a server that does not speak h2c
 * ignores it: forwarded in HTTP/1.1 without Upgrade, HTTP2-Settings and Connection. */
static void ignores_an_h2c_offer(void **state)
{
    struct fixture *f = *state;
    const struct sl_h1_head *h = parse(f, "GET http://files.example.org/x HTTP/1.1\r\n"
                                          "Host: files.example.org\r\n"
                                          "Connection: Upgrade, HTTP2-Settings\r\n"
                                          "Upgrade: h2c\r\n"
                                          "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"
                                          "Accept: */*\r\n\r\n");
    struct sl_head_target t;
    static const char want[] = "GET /x HTTP/1.1\r\n"
                               "Host: files.example.org\r\n"
                               "Accept: */*\r\n\r\n";

    build_ok(f, h, &absolute, NULL, NULL, want, &t);
    assert_false(t.websocket);
    assert_true(t.upgrade_ignored);
}

/* A plain request to a transparent listener (docs/reference/proxy.md §4.12): the Host header
 * names the host, the connection the port; an absolute-form target must agree with both. */
static void resolves_a_transparent_request_by_its_host_header(void **state)
{
    static const struct {
        const char *head;
        enum sl_reason reason;
    } refused[] = {
        { "GET / HTTP/1.0\r\n\r\n", SL_REASON_BAD_REQUEST },
        { "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", SL_REASON_BAD_HOST },
        { "GET / HTTP/1.1\r\nHost: files.example.org:8081\r\n\r\n", SL_REASON_HOST_MISMATCH },
        { "GET http://other.example.org:8080/ HTTP/1.1\r\nHost: files.example.org\r\n\r\n",
          SL_REASON_HOST_MISMATCH },
        { "GET http://files.example.org/ HTTP/1.1\r\nHost: files.example.org\r\n\r\n",
          SL_REASON_HOST_MISMATCH },
        { "GET https://files.example.org:8080/ HTTP/1.1\r\nHost: files.example.org\r\n\r\n",
          SL_REASON_HOST_MISMATCH },
        { "GET /a#b HTTP/1.1\r\nHost: files.example.org\r\n\r\n", SL_REASON_BAD_REQUEST },
        { "DELETE * HTTP/1.1\r\nHost: files.example.org\r\n\r\n", SL_REASON_BAD_REQUEST },
        { "GET http://u@files.example.org:8080/ HTTP/1.1\r\nHost: files.example.org\r\n\r\n",
          SL_REASON_BAD_HOST },
    };
    struct fixture *f = *state;
    const struct sl_head_ctx ctx = { false, false, NULL, 8080, true };
    const struct sl_h1_head *h = parse(f, "GET /a?b HTTP/1.0\r\n"
                                          "Host: Files.Example.org\r\n"
                                          "Proxy-Authorization: Basic Yzp0\r\n\r\n");
    struct sl_head_target t;
    struct sl_head_refusal why;
    static const char want[] = "GET /a?b HTTP/1.1\r\n"
                               "Host: files.example.org:8080\r\n\r\n";

    /* A Host without a port: the connection's (a client that left out a port it should have
     * named is still sent where it connected). */
    build_ok(f, h, &ctx, NULL, NULL, want, &t);
    assert_string_equal(t.scheme, "http");
    assert_string_equal(t.host.name, "files.example.org");
    assert_int_equal(t.port, 8080);
    assert_string_equal(t.target, "/a?b");
    teardown(state);
    setup(state);
    f = *state;
    h = parse(
            f,
            "GET http://files.example.org:8080/x HTTP/1.1\r\nHost: files.example.org:8080\r\n\r\n");
    build_ok(f, h, &ctx, NULL, NULL, "GET /x HTTP/1.1\r\nHost: files.example.org:8080\r\n\r\n", &t);
    for (size_t i = 0; i < SL_ARRAY_LEN(refused); i++) {
        teardown(state);
        setup(state);
        f = *state;
        h = parse(f, refused[i].head);
        assert_int_equal(sl_head_resolve(h, &ctx, &f->arena, &t, &why), SL_EINVAL);
        if (why.reason != refused[i].reason) {
            fail_msg("row %zu: reason %s, want %s", i, sl_reason_code(why.reason),
                     sl_reason_code(refused[i].reason));
        }
    }
}

struct refusal_row {
    bool in_tunnel;
    const char *head;
    enum sl_reason reason;
    /* The host is known to the audit line of the refusal. */
    bool has_host;
};

static void refuses_what_conn_refuses(void **state)
{
    static const struct refusal_row rows[] = {
        { false, "GET /x HTTP/1.1\r\nHost: a.example.com\r\n\r\n", SL_REASON_BAD_REQUEST, false },
        { false, "OPTIONS * HTTP/1.1\r\nHost: a.example.com\r\n\r\n", SL_REASON_BAD_REQUEST,
          false },
        { false, "GET https://a.example.com/ HTTP/1.1\r\nHost: a.example.com\r\n\r\n",
          SL_REASON_BAD_REQUEST, false },
        { false, "GET http://a.example.com/ HTTP/1.1\r\nHost: a..b\r\n\r\n", SL_REASON_BAD_HOST,
          true },
        { true, "GET / HTTP/1.1\r\n\r\n", SL_REASON_BAD_REQUEST, true },
        { true, "GET / HTTP/1.1\r\nHost: other.example.com\r\n\r\n", SL_REASON_HOST_MISMATCH,
          true },
        { true, "GET http://api.example.com/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
          SL_REASON_HOST_MISMATCH, true },
        { true, "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n",
          SL_REASON_BAD_REQUEST, false },
        /* What the origin would get must be what the policy saw: no fragment in origin-form,
         * '*' for OPTIONS alone, and an absolute URL that does not parse is the URL's fault,
         * not another host's. */
        { true, "GET /a#x?service=git-receive-pack HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
          SL_REASON_BAD_REQUEST, true },
        { true, "GET * HTTP/1.1\r\nHost: api.example.com\r\n\r\n", SL_REASON_BAD_REQUEST, true },
        { true, "OPTIONS *x HTTP/1.1\r\nHost: api.example.com\r\n\r\n", SL_REASON_BAD_REQUEST,
          true },
        { true, "GET https://api.example.com/t#f HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
          SL_REASON_BAD_HOST, true },
        { true, "GET https://u@api.example.com/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
          SL_REASON_BAD_HOST, true },
        { true, "GET ftp://api.example.com/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
          SL_REASON_BAD_HOST, true },
        { true, "GET https:///x HTTP/1.1\r\nHost: api.example.com\r\n\r\n", SL_REASON_BAD_HOST,
          true },
        { true,
          "GET / HTTP/1.1\r\nHost: api.example.com\r\nConnection: Upgrade\r\nUpgrade: "
          "foo/2\r\n\r\n",
          SL_REASON_BAD_REQUEST, true },
    };

    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct fixture *f = *state;
        const struct sl_h1_head *h = parse(f, rows[i].head);
        struct sl_head_ctx ctx =
                rows[i].in_tunnel ? tunnel(f, "api.example.com", 443, true) : absolute;
        struct sl_head_target t;
        struct sl_head_refusal why;

        print_message("row %zu\n", i);
        assert_int_equal(sl_head_resolve(h, &ctx, &f->arena, &t, &why), SL_EINVAL);
        assert_int_equal(why.reason, rows[i].reason);
        assert_int_equal(t.has_host, rows[i].has_host);
        teardown(state);
        setup(state);
    }
}

/* A WebSocket upgrade with a body is refused for its body, and says so. */
static void names_the_body_of_an_upgrade_request(void **state)
{
    struct fixture *f = *state;
    const struct sl_h1_head *h = parse(f, "GET /ws HTTP/1.1\r\nHost: api.example.com\r\n"
                                          "Connection: Upgrade\r\nUpgrade: websocket\r\n"
                                          "Content-Length: 1\r\n\r\nx");
    struct sl_head_ctx ctx = tunnel(f, "api.example.com", 443, true);
    struct sl_head_target t;
    struct sl_head_refusal why;

    assert_int_equal(sl_head_resolve(h, &ctx, &f->arena, &t, &why), SL_EINVAL);
    assert_int_equal(why.reason, SL_REASON_BAD_REQUEST);
    assert_string_equal(why.detail, "an upgrade request carries no body");
}

static void a_connect_host_header_naming_another_host_is_noted(void **state)
{
    static const struct {
        const char *head;
        int rc;
        enum sl_reason reason;
        /* The value noted as naming another host, or NULL. */
        const char *other;
    } rows[] = {
        { "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n", 0,
          SL_REASON_NONE, NULL },
        { "CONNECT api.example.com:443 HTTP/1.1\r\nHost: API.Example.com\r\n\r\n", 0,
          SL_REASON_NONE, NULL },
        { "CONNECT api.example.com:443 HTTP/1.0\r\n\r\n", 0, SL_REASON_NONE, NULL },
        /* The proxy's own address, as Node's http.request({method:'CONNECT'}) sends it. */
        { "CONNECT api.example.com:443 HTTP/1.1\r\nHost: 127.0.0.1:3128\r\n\r\n", 0, SL_REASON_NONE,
          "127.0.0.1:3128" },
        { "CONNECT api.example.com:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n", 0,
          SL_REASON_NONE, "evil.example:443" },
        { "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:8443\r\n\r\n", 0,
          SL_REASON_NONE, "api.example.com:8443" },
        { "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api..example.com\r\n\r\n", SL_EINVAL,
          SL_REASON_BAD_HOST, NULL },
    };

    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct fixture *f = *state;
        const struct sl_h1_head *h = parse(f, rows[i].head);
        struct sl_host host;
        struct sl_head_refusal why;
        struct sl_slice other;

        print_message("row %zu\n", i);
        assert_int_equal(sl_host_normalize(sl_slice_str("api.example.com"), 0, &host, NULL), 0);
        assert_int_equal(sl_head_connect_host(h, &host, 443, &other, &why), rows[i].rc);
        assert_int_equal(why.reason, rows[i].reason);
        if (rows[i].other == NULL) {
            assert_null(other.p);
        } else {
            assert_int_equal(other.n, strlen(rows[i].other));
            assert_memory_equal(other.p, rows[i].other, other.n);
        }
        teardown(state);
        setup(state);
    }
}

static void keeps_the_query_of_an_absolute_url_without_a_path(void **state)
{
    struct fixture *f = *state;
    const struct sl_h1_head *h =
            parse(f, "GET https://api.example.com?p=1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n");
    struct sl_head_ctx ctx = tunnel(f, "api.example.com", 443, true);
    struct sl_head_target t;
    static const char want[] = "GET /?p=1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n";

    build_ok(f, h, &ctx, NULL, NULL, want, &t);
    assert_string_equal(t.target, "/?p=1");
}

static void takes_http_1_0_without_host_and_https_default_port(void **state)
{
    struct fixture *f = *state;
    const struct sl_h1_head *h = parse(f, "GET /old HTTP/1.0\r\n\r\n");
    struct sl_head_ctx ctx = tunnel(f, "api.example.com", 8443, true);
    struct sl_head_target t;
    static const char want[] = "GET /old HTTP/1.1\r\nHost: api.example.com:8443\r\n\r\n";

    build_ok(f, h, &ctx, NULL, NULL, want, &t);
}

static const struct sl_head_resp_ctx client11 = { .client_keep_alive = true };
static const struct sl_head_resp_ctx client10 = { .client_http10 = true,
                                                  .client_keep_alive = true };

/* Every name of docs/reference/proxy.md §4.6 (plus the framing and Host the proxy writes itself,
 * and the refusal marker), in any case; nothing else, including names one letter away. */
static void knows_exactly_the_hop_by_hop_names(void **state)
{
    static const char *const hop[] = { "Connection",
                                       "proxy-connection",
                                       "KEEP-ALIVE",
                                       "Proxy-Authorization",
                                       "proxy-authenticate",
                                       "TE",
                                       "Trailer",
                                       "transfer-encoding",
                                       "Upgrade",
                                       "Content-Length",
                                       "host",
                                       "X-Sluice-Reason" };
    static const char *const end_to_end[] = { "t",
                                              "tE2",
                                              "hosts",
                                              "hos",
                                              "content-type",
                                              "trailers",
                                              "upgrade-",
                                              "keep-alivE1",
                                              "connectio",
                                              "proxy-connections",
                                              "x-sluice",
                                              "user-agent",
                                              "authorization",
                                              "accept",
                                              "transfer-encodin",
                                              "te ",
                                              "",
                                              "x-sluice-reasoN2",
                                              "proxy-authenticates" };

    (void)state;
    for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++) {
        if (!sl_head_is_hop_by_hop(sl_slice_str(hop[i]))) {
            fail_msg("'%s' is hop-by-hop", hop[i]);
        }
    }
    for (size_t i = 0; i < sizeof(end_to_end) / sizeof(end_to_end[0]); i++) {
        if (sl_head_is_hop_by_hop(sl_slice_str(end_to_end[i]))) {
            fail_msg("'%s' is not hop-by-hop", end_to_end[i]);
        }
    }
}

static void rechunks_a_response_without_its_hop_by_hop_headers(void **state)
{
    struct fixture *f = *state;
    const struct sl_h1_head *h = parse_response(f,
                                                "HTTP/1.1 200 OK\r\n"
                                                "Transfer-Encoding: chunked\r\n"
                                                "Connection: keep-alive, X-Hop\r\n"
                                                "X-Hop: 1\r\n"
                                                "Keep-Alive: timeout=5\r\n"
                                                "Proxy-Authenticate: Basic\r\n"
                                                "Trailer: X-T\r\n"
                                                "X-Sluice-Reason: host-not-allowed\r\n"
                                                "Content-Type: text/plain\r\n\r\n",
                                                false);
    struct sl_head_resp_plan plan;

    assert_int_equal(sl_head_build_response(&f->out, h, &client11, &plan), 0);
    assert_int_equal(plan.verdict, SL_HEAD_RESP_RELAY);
    assert_true(plan.final && plan.chunked);
    assert_false(plan.close_delimited || plan.close_after);
    assert_out(f, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n");
}

/* An upstream's reason phrase is relayed when it is plain; one that names sluice (an answer
 * dressed up as the proxy's refusal), carries control bytes or is over 128 bytes gets the
 * standard phrase of its status ("" for a status without one). */
static void relays_only_a_plain_reason_phrase(void **state)
{
    static const struct {
        const char *in;
        const char *want;
    } rows[] = {
        { "HTTP/1.1 200 Fine By Me\r\n", "HTTP/1.1 200 Fine By Me\r\n" },
        { "HTTP/1.1 403 Forbidden (sluice: host-not-allowed)\r\n", "HTTP/1.1 403 Forbidden\r\n" },
        { "HTTP/1.1 403 SLUICE says no\r\n", "HTTP/1.1 403 Forbidden\r\n" },
        { "HTTP/1.1 200 O\x01K\x7f\r\n", "HTTP/1.1 200 OK\r\n" },
        { "HTTP/1.1 299 \x7f\r\n", "HTTP/1.1 299 \r\n" },
    };

    char line[400];

    for (size_t i = 0; i < SL_ARRAY_LEN(rows); i++) {
        struct fixture *f = *state;
        struct sl_head_resp_plan plan;
        const struct sl_h1_head *h;
        char in[256];
        char want[256];

        (void)snprintf(in, sizeof(in), "%sContent-Length: 0\r\n\r\n", rows[i].in);
        (void)snprintf(want, sizeof(want), "%sContent-Length: 0\r\n\r\n", rows[i].want);
        h = parse_response(f, in, false);
        assert_int_equal(sl_head_build_response(&f->out, h, &client11, &plan), 0);
        assert_out(f, want);
        teardown(state);
        setup(state);
    }
    /* 129 bytes: too long. */
    {
        struct fixture *f = *state;
        struct sl_head_resp_plan plan;
        const struct sl_h1_head *h;

        (void)snprintf(line, sizeof(line), "HTTP/1.1 404 %0129d\r\nContent-Length: 0\r\n\r\n", 0);
        h = parse_response(f, line, false);
        assert_int_equal(sl_head_build_response(&f->out, h, &client11, &plan), 0);
        assert_out(f, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    }
}

static void gives_an_http_1_0_client_a_close_delimited_body_or_keep_alive(void **state)
{
    struct fixture *f = *state;
    const struct sl_h1_head *h =
            parse_response(f, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false);
    struct sl_head_resp_plan plan;

    assert_int_equal(sl_head_build_response(&f->out, h, &client10, &plan), 0);
    assert_true(plan.close_delimited && plan.close_after);
    assert_false(plan.chunked);
    assert_out(f, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");

    h = parse_response(f, "HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n\r\n", false);
    assert_int_equal(sl_head_build_response(&f->out, h, &client10, &plan), 0);
    assert_false(plan.close_delimited || plan.close_after || plan.chunked);
    assert_out(f, "HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n"
                  "Connection: keep-alive\r\n\r\n");
}

static void keeps_the_length_of_head_and_304_but_not_of_204(void **state)
{
    struct fixture *f = *state;
    struct sl_head_resp_ctx head = client11;
    struct sl_head_resp_plan plan;
    const struct sl_h1_head *h;

    head.is_head = true;
    h = parse_response(f, "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", true);
    assert_int_equal(sl_head_build_response(&f->out, h, &head, &plan), 0);
    assert_out(f, "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n");

    h = parse_response(f, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", true);
    assert_int_equal(sl_head_build_response(&f->out, h, &head, &plan), 0);
    assert_false(plan.chunked || plan.close_delimited);
    assert_out(f, "HTTP/1.1 200 OK\r\n\r\n");

    h = parse_response(f, "HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\nETag: x\r\n\r\n",
                       false);
    assert_int_equal(sl_head_build_response(&f->out, h, &client11, &plan), 0);
    assert_out(f, "HTTP/1.1 304 Not Modified\r\nETag: x\r\nContent-Length: 7\r\n\r\n");

    h = parse_response(f, "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", false);
    assert_int_equal(sl_head_build_response(&f->out, h, &client11, &plan), 0);
    assert_out(f, "HTTP/1.1 204 No Content\r\n\r\n");
}

static void relays_101_only_for_a_websocket_request(void **state)
{
    struct fixture *f = *state;
    static const char text[] = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
                               "Upgrade: websocket\r\nSec-WebSocket-Accept: abc\r\n\r\n";
    struct sl_head_resp_ctx ws = client11;
    struct sl_head_resp_plan plan;
    const struct sl_h1_head *h = parse_response(f, text, false);

    assert_int_equal(sl_head_build_response(&f->out, h, &client11, &plan), 0);
    assert_int_equal(plan.verdict, SL_HEAD_RESP_REFUSE);
    assert_int_equal(f->out.len, 0);

    ws.websocket = true;
    assert_int_equal(sl_head_build_response(&f->out, h, &ws, &plan), 0);
    assert_int_equal(plan.verdict, SL_HEAD_RESP_RELAY);
    assert_true(plan.final);
    assert_false(plan.close_after);
    assert_out(f, "HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: abc\r\n"
                  "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");

    /* A refused upgrade ends the connection: the request parser took it as granted. */
    h = parse_response(f, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", false);
    assert_int_equal(sl_head_build_response(&f->out, h, &ws, &plan), 0);
    assert_true(plan.close_after);
    assert_out(f, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

static void relays_interim_responses_to_http_1_1_only(void **state)
{
    struct fixture *f = *state;
    struct sl_head_resp_ctx closing = client11;
    struct sl_head_resp_plan plan;
    const struct sl_h1_head *h = parse_response(
            f, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\nConnection: close\r\n\r\n", false);

    closing.close_after = true;
    assert_int_equal(sl_head_build_response(&f->out, h, &closing, &plan), 0);
    assert_int_equal(plan.verdict, SL_HEAD_RESP_RELAY);
    assert_false(plan.final);
    assert_true(plan.close_after);
    assert_out(f, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n");

    assert_int_equal(sl_head_build_response(&f->out, h, &client10, &plan), 0);
    assert_int_equal(plan.verdict, SL_HEAD_RESP_SKIP);
    assert_int_equal(f->out.len, 0);
}

static void closes_when_asked_and_adds_length_zero_without_a_body(void **state)
{
    struct fixture *f = *state;
    struct sl_head_resp_ctx closing = client11;
    struct sl_head_resp_plan plan;
    const struct sl_h1_head *h = parse_response(f, "HTTP/1.0 200 OK\r\n\r\n", false);

    /* Close-delimited upstream, HTTP/1.1 client: re-chunked, the connection goes on. */
    assert_int_equal(sl_head_build_response(&f->out, h, &client11, &plan), 0);
    assert_true(plan.chunked);
    assert_out(f, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");

    h = parse_response(f, "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n", false);
    closing.client_keep_alive = false;
    assert_int_equal(sl_head_build_response(&f->out, h, &closing, &plan), 0);
    assert_true(plan.close_after);
    assert_out(f, "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(builds_an_intercepted_request_with_its_credential, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(drops_every_spelling_of_the_credential_header, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(replaces_a_placeholder_in_its_header_only, setup, teardown),
        cmocka_unit_test_setup_teardown(
                a_head_it_cannot_build_for_lack_of_memory_is_503_out_of_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(builds_an_absolute_form_request_in_origin_form, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(ignores_the_host_header_of_an_absolute_form_request, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(relays_a_websocket_upgrade_only, setup, teardown),
        cmocka_unit_test_setup_teardown(ignores_an_h2c_offer, setup, teardown),
        cmocka_unit_test_setup_teardown(resolves_a_transparent_request_by_its_host_header, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(refuses_what_conn_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(a_connect_host_header_naming_another_host_is_noted, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(keeps_the_query_of_an_absolute_url_without_a_path, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(takes_http_1_0_without_host_and_https_default_port, setup,
                                        teardown),
        cmocka_unit_test(knows_exactly_the_hop_by_hop_names),
        cmocka_unit_test_setup_teardown(relays_only_a_plain_reason_phrase, setup, teardown),
        cmocka_unit_test_setup_teardown(names_the_body_of_an_upgrade_request, setup, teardown),
        cmocka_unit_test_setup_teardown(rechunks_a_response_without_its_hop_by_hop_headers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
                gives_an_http_1_0_client_a_close_delimited_body_or_keep_alive, setup, teardown),
        cmocka_unit_test_setup_teardown(keeps_the_length_of_head_and_304_but_not_of_204, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(relays_101_only_for_a_websocket_request, setup, teardown),
        cmocka_unit_test_setup_teardown(relays_interim_responses_to_http_1_1_only, setup, teardown),
        cmocka_unit_test_setup_teardown(closes_when_asked_and_adds_length_zero_without_a_body,
                                        setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
