/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/proxy/test_peers.c - connections per client address (proxy/peers.h): the cap per
 * address, other addresses unaffected, a release gives the slot back, IPv4 and its IPv4-mapped
 * IPv6 form are one address, the port is ignored, a table full of addresses refuses rather than
 * grows, backward-shift deletion keeps every address reachable (many addresses taken and
 * released in an interleaved order), and threads taking and releasing at once end at zero.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "proxy/peers.h"

static struct sockaddr_storage v4(const char *ip, uint16_t port)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;

    memset(&ss, 0, sizeof(ss));
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    assert_int_equal(inet_pton(AF_INET, ip, &in->sin_addr), 1);
    return ss;
}

static struct sockaddr_storage v6(const char *ip, uint16_t port)
{
    struct sockaddr_storage ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

    memset(&ss, 0, sizeof(ss));
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    assert_int_equal(inet_pton(AF_INET6, ip, &in6->sin6_addr), 1);
    return ss;
}

#define SA(ss) ((const struct sockaddr *)&(ss))

static void caps_each_address_alone(void **state)
{
    struct sl_peers *t = NULL;
    struct sockaddr_storage a = v4("127.0.0.1", 1000);
    struct sockaddr_storage a2 = v4("127.0.0.1", 2000);
    struct sockaddr_storage b = v4("127.0.0.2", 1000);

    (void)state;
    assert_int_equal(sl_peers_new(100, 3, &t), 0);
    for (int i = 0; i < 3; i++) {
        assert_true(sl_peers_take(t, i == 1 ? SA(a2) : SA(a)));
    }
    assert_int_equal(sl_peers_count(t, SA(a)), 3);
    /* The fourth, from any port of that address: refused, and nothing taken. */
    assert_false(sl_peers_take(t, SA(a)));
    assert_false(sl_peers_take(t, SA(a2)));
    assert_int_equal(sl_peers_count(t, SA(a)), 3);
    /* Another address is unaffected. */
    assert_true(sl_peers_take(t, SA(b)));
    assert_int_equal(sl_peers_count(t, SA(b)), 1);
    assert_int_equal(sl_peers_addresses(t), 2);
    /* One closes: the address can connect again, once. */
    sl_peers_release(t, SA(a2));
    assert_int_equal(sl_peers_count(t, SA(a)), 2);
    assert_true(sl_peers_take(t, SA(a)));
    assert_false(sl_peers_take(t, SA(a)));
    for (int i = 0; i < 3; i++) {
        sl_peers_release(t, SA(a));
    }
    sl_peers_release(t, SA(b));
    assert_int_equal(sl_peers_count(t, SA(a)), 0);
    assert_int_equal(sl_peers_addresses(t), 0);
    /* A release of an address that holds nothing changes nothing. */
    sl_peers_release(t, SA(a));
    assert_int_equal(sl_peers_addresses(t), 0);
    sl_peers_free(t);
}

static void ipv4_mapped_ipv6_is_the_ipv4_address(void **state)
{
    struct sl_peers *t = NULL;
    struct sockaddr_storage a = v4("10.213.0.5", 1);
    struct sockaddr_storage mapped = v6("::ffff:10.213.0.5", 2);
    struct sockaddr_storage other6 = v6("fd00::5", 3);
    struct sockaddr_storage compat = v6("::10.213.0.5", 4);

    (void)state;
    assert_int_equal(sl_peers_new(10, 2, &t), 0);
    assert_true(sl_peers_take(t, SA(a)));
    assert_true(sl_peers_take(t, SA(mapped)));
    assert_int_equal(sl_peers_count(t, SA(a)), 2);
    assert_false(sl_peers_take(t, SA(a)));
    assert_false(sl_peers_take(t, SA(mapped)));
    /* IPv6 addresses of their own, the deprecated IPv4-compatible form included. */
    assert_true(sl_peers_take(t, SA(other6)));
    assert_true(sl_peers_take(t, SA(compat)));
    assert_int_equal(sl_peers_addresses(t), 3);
    sl_peers_release(t, SA(mapped));
    assert_int_equal(sl_peers_count(t, SA(a)), 1);
    sl_peers_release(t, SA(a));
    sl_peers_release(t, SA(other6));
    sl_peers_release(t, SA(compat));
    assert_int_equal(sl_peers_addresses(t), 0);
    sl_peers_free(t);
}

static void refuses_other_families_and_bad_sizes(void **state)
{
    struct sl_peers *t = NULL;
    struct sockaddr_storage un;

    (void)state;
    assert_int_equal(sl_peers_new(0, 1, &t), SL_EINVAL);
    assert_null(t);
    assert_int_equal(sl_peers_new(1, 0, &t), SL_EINVAL);
    assert_null(t);
    assert_int_equal(sl_peers_new(1, 1, &t), 0);
    memset(&un, 0, sizeof(un));
    un.ss_family = AF_UNIX;
    assert_false(sl_peers_take(t, SA(un)));
    assert_int_equal(sl_peers_addresses(t), 0);
    sl_peers_free(t);
    sl_peers_free(NULL);
}

/* More addresses than the table was made for: refused (never grown), and room again once one
 * leaves. */
static void a_full_table_refuses_new_addresses(void **state)
{
    struct sl_peers *t = NULL;
    struct sockaddr_storage ss;
    char ip[32];
    unsigned taken = 0;

    (void)state;
    assert_int_equal(sl_peers_new(10, 1, &t), 0);
    for (unsigned i = 0; i < 100; i++) {
        (void)snprintf(ip, sizeof(ip), "10.0.%u.%u", i / 200, i % 200 + 1);
        ss = v4(ip, 1);
        taken += sl_peers_take(t, SA(ss));
    }
    /* At least the 10 it was made for, at most half its entries. */
    assert_true(taken >= 10 && taken < 100);
    assert_int_equal(sl_peers_addresses(t), taken);
    ss = v4("10.9.9.9", 1);
    assert_false(sl_peers_take(t, SA(ss)));
    ss = v4("10.0.0.1", 1);
    sl_peers_release(t, SA(ss));
    ss = v4("10.9.9.9", 1);
    assert_true(sl_peers_take(t, SA(ss)));
    sl_peers_free(t);
}

/* Many addresses, taken and released in an interleaved order: every count stays right through
 * the backward shifts of deletion. */
static void deletion_keeps_every_address_reachable(void **state)
{
    enum {
        N = 4000
    };
    struct sl_peers *t = NULL;
    static struct sockaddr_storage addrs[N];
    char ip[64];

    (void)state;
    assert_int_equal(sl_peers_new(N, 1000, &t), 0);
    for (unsigned i = 0; i < N; i++) {
        if (i % 2 == 0) {
            (void)snprintf(ip, sizeof(ip), "10.%u.%u.%u", i >> 16, (i >> 8) & 255, i & 255);
            addrs[i] = v4(ip, 1);
        } else {
            (void)snprintf(ip, sizeof(ip), "fd00::%x", i);
            addrs[i] = v6(ip, 1);
        }
        for (unsigned k = 0; k <= i % 3; k++) {
            assert_true(sl_peers_take(t, SA(addrs[i])));
        }
    }
    assert_int_equal(sl_peers_addresses(t), N);
    for (unsigned round = 0; round < 3; round++) {
        for (unsigned i = round; i < N; i += 3) {
            while (sl_peers_count(t, SA(addrs[i])) > 0) {
                sl_peers_release(t, SA(addrs[i]));
            }
        }
        for (unsigned i = 0; i < N; i++) {
            unsigned want = i % 3 <= round ? 0 : i % 3 + 1;

            assert_int_equal(sl_peers_count(t, SA(addrs[i])), want);
        }
    }
    assert_int_equal(sl_peers_addresses(t), 0);
    sl_peers_free(t);
}

struct worker_arg {
    struct sl_peers *t;
    unsigned id;
};

static void *churn(void *arg)
{
    const struct worker_arg *w = arg;
    struct sockaddr_storage a[4];
    char ip[32];

    for (unsigned i = 0; i < 4; i++) {
        (void)snprintf(ip, sizeof(ip), "127.0.%u.%u", w->id, i + 1);
        a[i] = v4(ip, 1);
    }
    for (unsigned n = 0; n < 20000; n++) {
        struct sockaddr_storage *s = &a[n % 4];
        struct sockaddr_storage shared = v4("127.0.0.1", 9);

        if (sl_peers_take(w->t, SA(*s))) {
            sl_peers_release(w->t, SA(*s));
        }
        if (sl_peers_take(w->t, SA(shared))) {
            sl_peers_release(w->t, SA(shared));
        }
    }
    return NULL;
}

static void threads_end_at_zero(void **state)
{
    struct sl_peers *t = NULL;
    pthread_t th[4];
    struct worker_arg args[4];
    struct sockaddr_storage shared = v4("127.0.0.1", 9);

    (void)state;
    assert_int_equal(sl_peers_new(64, 2, &t), 0);
    for (unsigned i = 0; i < 4; i++) {
        args[i] = (struct worker_arg){ t, i + 1 };
        assert_int_equal(pthread_create(&th[i], NULL, churn, &args[i]), 0);
    }
    for (unsigned i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
    }
    assert_int_equal(sl_peers_addresses(t), 0);
    assert_int_equal(sl_peers_count(t, SA(shared)), 0);
    sl_peers_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(caps_each_address_alone),
        cmocka_unit_test(ipv4_mapped_ipv6_is_the_ipv4_address),
        cmocka_unit_test(refuses_other_families_and_bad_sizes),
        cmocka_unit_test(a_full_table_refuses_new_addresses),
        cmocka_unit_test(deletion_keeps_every_address_reachable),
        cmocka_unit_test(threads_end_at_zero),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
