/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/test_head.c - proxy/head: the target and refusal of a request head, and the head
 * the proxy sends upstream, byte for byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/arena.h"
#include "base/buf.h"
#include "http/h1.h"
#include "policy/host.h"
#include "proxy/head.h"

struct fixture {
    struct sl_arena arena;
    struct sl_h1 p;
    struct sl_host thost;
    struct sl_buf out;
};

static int setup(void **state)
{
    struct fixture *f = test_calloc(1, sizeof(*f));

    sl_arena_init(&f->arena, 4096, 1 << 20);
    sl_h1_init(&f->p, SL_H1_REQUEST, NULL, &f->arena);
    sl_buf_init(&f->out, 1 << 16);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    sl_buf_finish(&f->out);
    sl_h1_finish(&f->p);
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

static struct sl_head_ctx tunnel(struct fixture *f, const char *host, uint16_t port, bool tls)
{
    assert_int_equal(sl_host_normalize(sl_slice_str(host), 0, &f->thost, NULL), 0);
    return (struct sl_head_ctx){ true, tls, &f->thost, port };
}

static const struct sl_head_ctx absolute = { false, false, NULL, 0 };

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
    struct sl_head_refusal why;
    static const char want[] = "POST /v1/x?a=b HTTP/1.1\r\n"
                               "Host: api.example.com\r\n"
                               "Accept: */*\r\n"
                               "Authorization: Bearer s3cr3t\r\n"
                               "Content-Length: 3\r\n\r\n";

    assert_int_equal(sl_head_resolve(h, &ctx, &f->arena, &t, &why), 0);
    assert_string_equal(t.scheme, "https");
    assert_string_equal(t.host.name, "api.example.com");
    assert_int_equal(t.port, 443);
    assert_string_equal(t.target, "/v1/x?a=b");
    assert_false(t.websocket);
    assert_int_equal(sl_head_build(&f->out, h, &t, "Authorization", "Bearer s3cr3t"), 0);
    assert_int_equal(f->out.len, strlen(want));
    assert_memory_equal(f->out.p, want, f->out.len);
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
    struct sl_head_refusal why;
    static const char want[] = "GET /a%20b?q HTTP/1.1\r\n"
                               "Host: files.example.org:8080\r\n"
                               "Authorization: mine\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n";

    assert_int_equal(sl_head_resolve(h, &absolute, &f->arena, &t, &why), 0);
    assert_string_equal(t.scheme, "http");
    assert_int_equal(t.port, 8080);
    assert_string_equal(t.target, "/a%20b?q");
    /* No credential decided: the client's own end-to-end Authorization goes through. */
    assert_int_equal(sl_head_build(&f->out, h, &t, NULL, NULL), 0);
    assert_int_equal(f->out.len, strlen(want));
    assert_memory_equal(f->out.p, want, f->out.len);
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
    struct sl_head_refusal why;
    static const char want[] = "GET /ws HTTP/1.1\r\n"
                               "Host: ws.example.org:8443\r\n"
                               "Sec-WebSocket-Version: 13\r\n"
                               "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n";

    assert_int_equal(sl_head_resolve(h, &ctx, &f->arena, &t, &why), 0);
    assert_true(t.websocket);
    assert_int_equal(sl_head_build(&f->out, h, &t, NULL, NULL), 0);
    assert_int_equal(f->out.len, strlen(want));
    assert_memory_equal(f->out.p, want, f->out.len);
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
        { false, "GET http://a.example.com/ HTTP/1.1\r\nHost: b.example.com\r\n\r\n",
          SL_REASON_HOST_MISMATCH, true },
        { false, "GET http://a.example.com/ HTTP/1.1\r\nHost: a.example.com:81\r\n\r\n",
          SL_REASON_HOST_MISMATCH, true },
        { false, "GET http://a.example.com/ HTTP/1.1\r\nHost: a..b\r\n\r\n", SL_REASON_BAD_HOST,
          true },
        { true, "GET / HTTP/1.1\r\n\r\n", SL_REASON_BAD_REQUEST, true },
        { true, "GET / HTTP/1.1\r\nHost: other.example.com\r\n\r\n", SL_REASON_HOST_MISMATCH,
          true },
        { true, "GET http://api.example.com/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
          SL_REASON_HOST_MISMATCH, true },
        { true, "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n",
          SL_REASON_BAD_REQUEST, false },
        { true,
          "GET / HTTP/1.1\r\nHost: api.example.com\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n",
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

static void keeps_the_query_of_an_absolute_url_without_a_path(void **state)
{
    struct fixture *f = *state;
    const struct sl_h1_head *h =
            parse(f, "GET https://api.example.com?p=1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n");
    struct sl_head_ctx ctx = tunnel(f, "api.example.com", 443, true);
    struct sl_head_target t;
    struct sl_head_refusal why;
    static const char want[] = "GET /?p=1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n";

    assert_int_equal(sl_head_resolve(h, &ctx, &f->arena, &t, &why), 0);
    assert_string_equal(t.target, "/?p=1");
    assert_int_equal(sl_head_build(&f->out, h, &t, NULL, NULL), 0);
    assert_int_equal(f->out.len, strlen(want));
    assert_memory_equal(f->out.p, want, f->out.len);
}

static void takes_http_1_0_without_host_and_https_default_port(void **state)
{
    struct fixture *f = *state;
    const struct sl_h1_head *h = parse(f, "GET /old HTTP/1.0\r\n\r\n");
    struct sl_head_ctx ctx = tunnel(f, "api.example.com", 8443, true);
    struct sl_head_target t;
    struct sl_head_refusal why;
    static const char want[] = "GET /old HTTP/1.1\r\nHost: api.example.com:8443\r\n\r\n";

    assert_int_equal(sl_head_resolve(h, &ctx, &f->arena, &t, &why), 0);
    assert_int_equal(sl_head_build(&f->out, h, &t, NULL, NULL), 0);
    assert_int_equal(f->out.len, strlen(want));
    assert_memory_equal(f->out.p, want, f->out.len);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(builds_an_intercepted_request_with_its_credential, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(builds_an_absolute_form_request_in_origin_form, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(relays_a_websocket_upgrade_only, setup, teardown),
        cmocka_unit_test_setup_teardown(refuses_what_conn_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(keeps_the_query_of_an_absolute_url_without_a_path, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(takes_http_1_0_without_host_and_https_default_port, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
