/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/test_resolve.c - the worker's DNS resolver (proxy/dns.h): --resolve pins, getaddrinfo
 * off the loop, the cache, shared lookups and cancellation. Only `localhost` is ever resolved (from
 * /etc/hosts), so no test depends on a DNS server.
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

static void answers_pins_at_once(void **state)
{
    struct sl_dns_pin pin;
    struct sl_dns_config cfg = { &pin, 1, 0, 0, 0 };
    struct sl_dns *r = NULL;
    struct sl_dns_req *q = NULL;
    struct sl_addrs addrs;
    struct answer a = { 0, 0, { 0 } };
    char err[256];
    uv_loop_t loop;

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(sl_dns_pin_parse("pinned.example:8443:127.0.0.9", &pin, err, sizeof(err)), 0);
    assert_int_equal(sl_dns_create(&loop, &cfg, &r), 0);
    assert_int_equal(sl_dns_lookup(r, "pinned.example", 8443, &addrs, on_answer, &a, &q), 1);
    assert_int_equal(addrs.n, 1);
    assert_int_equal(port_of(&addrs.a[0]), 8443);
    assert_int_equal(a.calls, 0);
    sl_dns_close(r);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void resolves_off_the_loop_then_caches(void **state)
{
    struct sl_dns *r = NULL;
    struct sl_dns_req *q1 = NULL;
    struct sl_dns_req *q2 = NULL;
    struct sl_dns_stats st;
    struct sl_addrs addrs;
    struct answer a1 = { 0, 0, { 0 } };
    struct answer a2 = { 0, 0, { 0 } };
    uv_loop_t loop;

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(sl_dns_create(&loop, NULL, &r), 0);
    /* Two lookups before the answer: one getaddrinfo, both called back, never synchronously. */
    assert_int_equal(sl_dns_lookup(r, "localhost", 80, &addrs, on_answer, &a1, &q1), 0);
    assert_int_equal(sl_dns_lookup(r, "localhost", 443, &addrs, on_answer, &a2, &q2), 0);
    assert_int_equal(a1.calls + a2.calls, 0);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(a1.calls, 1);
    assert_int_equal(a2.calls, 1);
    assert_int_equal(a1.status, 0);
    assert_true(a1.addrs.n >= 1);
    for (size_t i = 0; i < a1.addrs.n; i++) {
        assert_true(is_loopback(&a1.addrs.a[i]));
        assert_int_equal(port_of(&a1.addrs.a[i]), 80);
    }
    assert_int_equal(port_of(&a2.addrs.a[0]), 443);
    /* The third is a cache hit, with its own port. */
    assert_int_equal(sl_dns_lookup(r, "localhost", 8080, &addrs, on_answer, &a1, &q1), 1);
    assert_int_equal(port_of(&addrs.a[0]), 8080);
    sl_dns_stats(r, &st);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 2);
    sl_dns_close(r);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void never_calls_a_cancelled_lookup_back(void **state)
{
    struct sl_dns *r = NULL;
    struct sl_dns_req *q1 = NULL;
    struct sl_dns_req *q2 = NULL;
    struct sl_addrs addrs;
    struct answer a1 = { 0, 0, { 0 } };
    struct answer a2 = { 0, 0, { 0 } };
    uv_loop_t loop;

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(sl_dns_create(&loop, NULL, &r), 0);
    assert_int_equal(sl_dns_lookup(r, "localhost", 80, &addrs, on_answer, &a1, &q1), 0);
    assert_int_equal(sl_dns_lookup(r, "localhost", 80, &addrs, on_answer, &a2, &q2), 0);
    sl_dns_cancel(q1);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(a1.calls, 0);
    assert_int_equal(a2.calls, 1);
    sl_dns_close(r);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void closes_with_a_lookup_in_flight(void **state)
{
    struct sl_dns *r = NULL;
    struct sl_dns_req *q = NULL;
    struct sl_addrs addrs;
    struct answer a = { 0, 0, { 0 } };
    uv_loop_t loop;

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(sl_dns_create(&loop, NULL, &r), 0);
    assert_int_equal(sl_dns_lookup(r, "localhost", 80, &addrs, on_answer, &a, &q), 0);
    sl_dns_close(r);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(a.calls, 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void refuses_names_that_are_not_names(void **state)
{
    struct sl_dns *r = NULL;
    struct sl_dns_req *q = NULL;
    struct sl_addrs addrs;
    struct answer a = { 0, 0, { 0 } };
    char long_name[300];
    uv_loop_t loop;

    (void)state;
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(sl_dns_create(&loop, NULL, &r), 0);
    assert_true(sl_dns_lookup(r, "", 80, &addrs, on_answer, &a, &q) < 0);
    assert_true(sl_dns_lookup(r, long_name, 80, &addrs, on_answer, &a, &q) < 0);
    sl_dns_close(r);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
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
