/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/proxy/test_dns.c - the worker's DNS resolver (proxy/dns.h): --resolve pins,
 * getaddrinfo off the loop, the cache, shared lookups and cancellation. Only `localhost` is ever
 * resolved (from /etc/hosts), so no test depends on a DNS server.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "proxy/dns.h"

static uint16_t port_of(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        return ntohs(((const struct sockaddr_in *)(const void *)ss)->sin_port);
    }
    return ntohs(((const struct sockaddr_in6 *)(const void *)ss)->sin6_port);
}

static bool is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        return (ntohl(((const struct sockaddr_in *)(const void *)ss)->sin_addr.s_addr) >> 24)
               == 127;
    }
    return ss->ss_family == AF_INET6
           && IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr);
}

static void parses_pins_strictly(void **state)
{
    struct sl_dns_pin pin;
    char err[256];

    (void)state;
    assert_int_equal(sl_dns_pin_parse("A.Example.COM:443:127.0.0.1", &pin, err, sizeof(err)), 0);
    assert_string_equal(pin.host, "a.example.com");
    assert_int_equal(pin.port, 443);
    assert_int_equal(pin.addr.ss_family, AF_INET);
    assert_int_equal(port_of(&pin.addr), 443);
    assert_int_equal(sl_dns_pin_parse("v6.example:8443:[::1]", &pin, err, sizeof(err)), 0);
    assert_int_equal(pin.addr.ss_family, AF_INET6);
    assert_int_equal(sl_dns_pin_parse("v6.example:8443:::1", &pin, err, sizeof(err)), 0);
    assert_int_equal(pin.addr.ss_family, AF_INET6);

    assert_true(sl_dns_pin_parse("a.example:443", &pin, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "HOST:PORT:ADDR"));
    assert_true(sl_dns_pin_parse("a.example:0:127.0.0.1", &pin, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "port"));
    assert_true(sl_dns_pin_parse("a.example:443:localhost", &pin, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "ADDR"));
    assert_true(sl_dns_pin_parse("a b:443:127.0.0.1", &pin, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "host"));
    assert_true(sl_dns_pin_parse("10.0.0.1:443:127.0.0.1", &pin, err, sizeof(err)) < 0);
}

struct answer {
    int calls;
    int status;
    struct sl_addrs addrs;
};

static void on_answer(void *arg, int status, const struct sl_addrs *addrs)
{
    struct answer *a = arg;

    a->calls++;
    a->status = status;
    if (addrs != NULL) {
        a->addrs = *addrs;
    }
}

/* A loop and a resolver on it, with room for two lookups: their requests and answers, and the
 * addresses of the last one answered at once. */
struct world {
    uv_loop_t loop;
    struct sl_dns *r;
    struct sl_dns_req *q[2];
    struct answer a[2];
    struct sl_addrs addrs;
};

static void open_world(struct world *w, const struct sl_dns_config *cfg)
{
    memset(w, 0, sizeof(*w));
    assert_int_equal(uv_loop_init(&w->loop), 0);
    assert_int_equal(sl_dns_create(&w->loop, cfg, &w->r), 0);
}

/* Lookup `k` (0 or 1) of host:port; returns what sl_dns_lookup() returns. */
static int lookup(struct world *w, size_t k, const char *host, uint16_t port)
{
    return sl_dns_lookup(w->r, host, port, &w->addrs, on_answer, &w->a[k], &w->q[k]);
}

/* Closes the resolver; its handles and lookups are gone when the loop has run dry. */
static void close_world(struct world *w)
{
    sl_dns_close(w->r);
    assert_int_equal(uv_run(&w->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&w->loop), 0);
}

static void answers_pins_at_once(void **state)
{
    struct sl_dns_pin pin;
    struct sl_dns_config cfg = { &pin, 1, 0, 0, 0 };
    char err[256];
    struct world w;

    (void)state;
    assert_int_equal(sl_dns_pin_parse("pinned.example:8443:127.0.0.9", &pin, err, sizeof(err)), 0);
    open_world(&w, &cfg);
    assert_int_equal(lookup(&w, 0, "pinned.example", 8443), 1);
    assert_int_equal(w.addrs.n, 1);
    assert_int_equal(port_of(&w.addrs.a[0]), 8443);
    assert_int_equal(w.a[0].calls, 0);
    close_world(&w);
}

static void resolves_off_the_loop_then_caches(void **state)
{
    struct sl_dns_stats st;
    struct world w;

    (void)state;
    open_world(&w, NULL);
    /* Two lookups before the answer: one getaddrinfo, both called back, never synchronously. */
    assert_int_equal(lookup(&w, 0, "localhost", 80), 0);
    assert_int_equal(lookup(&w, 1, "localhost", 443), 0);
    assert_int_equal(w.a[0].calls + w.a[1].calls, 0);
    assert_int_equal(uv_run(&w.loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(w.a[0].calls, 1);
    assert_int_equal(w.a[1].calls, 1);
    assert_int_equal(w.a[0].status, 0);
    assert_true(w.a[0].addrs.n >= 1);
    for (size_t i = 0; i < w.a[0].addrs.n; i++) {
        assert_true(is_loopback(&w.a[0].addrs.a[i]));
        assert_int_equal(port_of(&w.a[0].addrs.a[i]), 80);
    }
    assert_int_equal(port_of(&w.a[1].addrs.a[0]), 443);
    /* The third is a cache hit, with its own port. */
    assert_int_equal(lookup(&w, 0, "localhost", 8080), 1);
    assert_int_equal(port_of(&w.addrs.a[0]), 8080);
    sl_dns_stats(w.r, &st);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 2);
    close_world(&w);
}

static void never_calls_a_cancelled_lookup_back(void **state)
{
    struct world w;

    (void)state;
    open_world(&w, NULL);
    assert_int_equal(lookup(&w, 0, "localhost", 80), 0);
    assert_int_equal(lookup(&w, 1, "localhost", 80), 0);
    sl_dns_cancel(w.q[0]);
    assert_int_equal(uv_run(&w.loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(w.a[0].calls, 0);
    assert_int_equal(w.a[1].calls, 1);
    close_world(&w);
}

static void closes_with_a_lookup_in_flight(void **state)
{
    struct world w;

    (void)state;
    open_world(&w, NULL);
    assert_int_equal(lookup(&w, 0, "localhost", 80), 0);
    close_world(&w);
    assert_int_equal(w.a[0].calls, 0);
}

static void refuses_names_that_are_not_names(void **state)
{
    char long_name[300];
    struct world w;

    (void)state;
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    open_world(&w, NULL);
    assert_true(lookup(&w, 0, "", 80) < 0);
    assert_true(lookup(&w, 0, long_name, 80) < 0);
    close_world(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_pins_strictly),
        cmocka_unit_test(answers_pins_at_once),
        cmocka_unit_test(resolves_off_the_loop_then_caches),
        cmocka_unit_test(never_calls_a_cancelled_lookup_back),
        cmocka_unit_test(closes_with_a_lookup_in_flight),
        cmocka_unit_test(refuses_names_that_are_not_names),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
