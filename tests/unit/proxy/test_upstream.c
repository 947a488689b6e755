/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/proxy/test_upstream.c - proxy/upstream: the life of one upstream connection on a real
 * loop, against loopback only (a port that refuses connections). A minimal worker (loop,
 * shared configuration, address policy) stands in for proxy/worker.c.
 */
#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "base/slice.h"
#include "policy/host.h"
#include "proxy/addr.h"
#include "proxy/proxy_int.h"
#include "proxy/upstream.h"

struct fixture {
    struct sl_proxy_config cfg;
    struct sl__shared shared;
    struct sl__worker w;
    /* Bound to 127.0.0.1 but not listening: connections to its port are refused. */
    int refusing_fd;
    uint16_t refusing_port;
};

static struct fixture the_fixture;

static int setup(void **state)
{
    struct fixture *f = &the_fixture;
    struct sockaddr_in sin = { 0 };
    socklen_t len = sizeof(sin);
    char err[128];

    memset(f, 0, sizeof(*f));
    f->cfg.upstream_timeout_s = 5;
    f->cfg.idle_timeout_s = 5;
    f->shared.cfg = &f->cfg;
    assert_int_equal(sl_addr_policy_create(&f->shared.addrs), 0);
    assert_int_equal(sl_addr_policy_add_allow(f->shared.addrs, "127.0.0.0/8", err, sizeof(err)), 0);
    f->w.shared = &f->shared;
    sl_list_init(&f->w.idle);
    assert_int_equal(uv_loop_init(&f->w.loop), 0);
    f->refusing_fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(f->refusing_fd != -1);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(f->refusing_fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(getsockname(f->refusing_fd, (struct sockaddr *)&sin, &len), 0);
    f->refusing_port = ntohs(sin.sin_port);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(uv_loop_close(&f->w.loop), 0);
    (void)close(f->refusing_fd);
    sl_addr_policy_destroy(f->shared.addrs);
    return 0;
}

struct run {
    struct sl_upstream *u;
    uv_check_t check;
    int events;
    bool closed;
};

static void on_event(struct sl_upstream *u, void *arg)
{
    struct run *r = arg;

    (void)u;
    r->events++;
}

/* The check phase comes after the connect callback of the same loop iteration and before its
 * close callbacks: the owner closes the upstream just as a failed attempt is being closed. */
static void on_check(uv_check_t *h)
{
    struct run *r = h->data;

    if (!r->closed) {
        sl_upstream_close(r->u);
        r->closed = true;
    }
    (void)uv_check_stop(h);
    uv_close((uv_handle_t *)h, NULL);
}

static void open_and_close_during_retry(struct fixture *f)
{
    struct run r = { 0 };
    struct sl_host host;

    assert_int_equal(sl_host_normalize(sl_slice_str("127.0.0.1"), 0, &host, NULL), 0);
    assert_int_equal(uv_check_init(&f->w.loop, &r.check), 0);
    r.check.data = &r;
    assert_int_equal(uv_check_start(&r.check, on_check), 0);
    assert_int_equal(
            sl_upstream_open(&f->w, &host, f->refusing_port, false, "c", on_event, &r, &r.u), 0);
    assert_int_equal(uv_run(&f->w.loop, UV_RUN_DEFAULT), 0);
    assert_true(r.closed);
    /* Closed by its owner: never a callback after that. */
    assert_int_equal(r.events, 0);
}

/* A refused connect closes that attempt's handle before the next address is tried; an owner
 * that closes the upstream in between must still get it freed (it once stayed allocated). */
static void close_while_a_failed_attempt_closes_frees_everything(void **state)
{
    struct fixture *f = *state;
    struct mallinfo2 before;
    struct mallinfo2 after;

    open_and_close_during_retry(f); /* warms up libuv and libc */
    before = mallinfo2();
    for (int i = 0; i < 32; i++) {
        open_and_close_during_retry(f);
    }
    after = mallinfo2();
    /* A leak of even one upstream per round would be 32 of them (each well over 1 KiB). */
    assert_true(after.uordblks <= before.uordblks + 4096);
}

/* The ordinary path: every address refused -> FAILED upstream-unreachable, one callback. */
static void refused_connect_fails_unreachable(void **state)
{
    struct fixture *f = *state;
    struct run r = { 0 };
    struct sl_host host;
    const char *detail = NULL;

    assert_int_equal(sl_host_normalize(sl_slice_str("127.0.0.1"), 0, &host, NULL), 0);
    assert_int_equal(
            sl_upstream_open(&f->w, &host, f->refusing_port, false, "c", on_event, &r, &r.u), 0);
    for (int i = 0; i < 100 && sl_upstream_state(r.u) == SL_UPSTREAM_DIALING; i++) {
        (void)uv_run(&f->w.loop, UV_RUN_ONCE);
    }
    assert_int_equal(sl_upstream_state(r.u), SL_UPSTREAM_FAILED);
    assert_int_equal(sl_upstream_failure(r.u, &detail), SL_REASON_UPSTREAM_UNREACHABLE);
    assert_non_null(strstr(detail, "connect failed"));
    assert_int_equal(r.events, 1);
    sl_upstream_close(r.u);
    assert_int_equal(uv_run(&f->w.loop, UV_RUN_DEFAULT), 0);
}

/* A listener on 127.0.0.1 that accepts and holds every connection (the pool's peer). */
struct holder {
    uv_tcp_t server;
    uv_tcp_t server2;
    uv_tcp_t peers[80];
    int n;
};

static void on_peer_closed(uv_handle_t *h)
{
    (void)h;
}

static void on_connection(uv_stream_t *server, int status)
{
    struct holder *h = server->data;

    assert_int_equal(status, 0);
    assert_true(h->n < (int)(sizeof(h->peers) / sizeof(h->peers[0])));
    assert_int_equal(uv_tcp_init(server->loop, &h->peers[h->n]), 0);
    assert_int_equal(uv_accept(server, (uv_stream_t *)&h->peers[h->n]), 0);
    h->n++;
}

struct ready {
    int ready;
    int failed;
};

static void on_ready_event(struct sl_upstream *u, void *arg)
{
    struct ready *r = arg;

    if (sl_upstream_state(u) == SL_UPSTREAM_READY) {
        r->ready++;
    } else if (sl_upstream_state(u) == SL_UPSTREAM_FAILED) {
        r->failed++;
    }
}

/* A burst of 40 connections to one place, all given back clean: the pool keeps 32 of them
 * (each idle one holds its TLS state and the peer's certificates) and closes the rest; another
 * place still gets its own; sl_upstream_open_new() never takes from the pool. */
static void pool_keeps_at_most_32_per_place(void **state)
{
    struct fixture *f = *state;
    struct holder h = { 0 };
    struct sockaddr_in sin = { 0 };
    struct sockaddr_in sin2 = { 0 };
    int len = (int)sizeof(sin);
    struct sl_upstream *u[40];
    struct sl_upstream *other;
    struct ready r = { 0 };
    struct sl_host host;
    struct sl_host host2;

    assert_int_equal(uv_tcp_init(&f->w.loop, &h.server), 0);
    h.server.data = &h;
    assert_int_equal(uv_ip4_addr("127.0.0.1", 0, &sin), 0);
    assert_int_equal(uv_tcp_bind(&h.server, (struct sockaddr *)&sin, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&h.server, 128, on_connection), 0);
    assert_int_equal(uv_tcp_getsockname(&h.server, (struct sockaddr *)&sin, &len), 0);
    assert_int_equal(uv_tcp_init(&f->w.loop, &h.server2), 0);
    h.server2.data = &h;
    assert_int_equal(uv_ip4_addr("127.0.0.2", 0, &sin2), 0);
    assert_int_equal(uv_tcp_bind(&h.server2, (struct sockaddr *)&sin2, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&h.server2, 128, on_connection), 0);
    len = (int)sizeof(sin2);
    assert_int_equal(uv_tcp_getsockname(&h.server2, (struct sockaddr *)&sin2, &len), 0);
    assert_int_equal(sl_host_normalize(sl_slice_str("127.0.0.1"), 0, &host, NULL), 0);
    assert_int_equal(sl_host_normalize(sl_slice_str("127.0.0.2"), 0, &host2, NULL), 0);
    for (int i = 0; i < 40; i++) {
        assert_int_equal(sl_upstream_open(&f->w, &host, ntohs(sin.sin_port), false, "client-a",
                                          on_ready_event, &r, &u[i]),
                         0);
    }
    for (int i = 0; i < 2000 && (r.ready + r.failed < 40 || h.n < 40); i++) {
        (void)uv_run(&f->w.loop, UV_RUN_ONCE);
    }
    assert_int_equal(r.ready, 40);
    for (int i = 0; i < 40; i++) {
        sl_upstream_release(u[i], true);
    }
    assert_int_equal(f->w.n_idle, 32);
    /* The next one to the same place comes from the pool. */
    assert_int_equal(sl_upstream_open(&f->w, &host, ntohs(sin.sin_port), false, "client-a",
                                      on_ready_event, &r, &other),
                     0);
    assert_true(sl_upstream_is_reused(other));
    assert_int_equal(f->w.n_idle, 31);
    sl_upstream_release(other, true);
    /* Another client never gets them: it dials its own, pooled apart (a place of its own). */
    r.ready = 0;
    assert_int_equal(sl_upstream_open(&f->w, &host, ntohs(sin.sin_port), false, "client-b",
                                      on_ready_event, &r, &other),
                     0);
    assert_false(sl_upstream_is_reused(other));
    assert_int_equal(f->w.n_idle, 32);
    for (int i = 0; i < 2000 && r.ready + r.failed < 1; i++) {
        (void)uv_run(&f->w.loop, UV_RUN_ONCE);
    }
    assert_int_equal(r.ready, 1);
    sl_upstream_release(other, true);
    assert_int_equal(f->w.n_idle, 33);
    /* Another place is not limited by the first one's share. */
    r.ready = 0;
    assert_int_equal(sl_upstream_open(&f->w, &host2, ntohs(sin2.sin_port), false, "client-a",
                                      on_ready_event, &r, &other),
                     0);
    for (int i = 0; i < 2000 && r.ready + r.failed < 1; i++) {
        (void)uv_run(&f->w.loop, UV_RUN_ONCE);
    }
    assert_int_equal(r.ready, 1);
    sl_upstream_release(other, true);
    assert_int_equal(f->w.n_idle, 34);
    /* sl_upstream_open_new() dials a new one even though the pool has some for the place (a
     * request sent again after a pooled one closed unanswered), and leaves those pooled. */
    r.ready = 0;
    assert_int_equal(sl_upstream_open_new(&f->w, &host, ntohs(sin.sin_port), false, "client-a",
                                          on_ready_event, &r, &other),
                     0);
    assert_false(sl_upstream_is_reused(other));
    assert_int_equal(f->w.n_idle, 34);
    for (int i = 0; i < 2000 && r.ready + r.failed < 1; i++) {
        (void)uv_run(&f->w.loop, UV_RUN_ONCE);
    }
    assert_int_equal(r.ready, 1);
    sl_upstream_close(other);
    sl_upstream_pool_close(&f->w);
    assert_int_equal(f->w.n_idle, 0);
    for (int i = 0; i < h.n; i++) {
        uv_close((uv_handle_t *)&h.peers[i], on_peer_closed);
    }
    uv_close((uv_handle_t *)&h.server, on_peer_closed);
    uv_close((uv_handle_t *)&h.server2, on_peer_closed);
    assert_int_equal(uv_run(&f->w.loop, UV_RUN_DEFAULT), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(refused_connect_fails_unreachable, setup, teardown),
        cmocka_unit_test_setup_teardown(pool_keeps_at_most_32_per_place, setup, teardown),
        cmocka_unit_test_setup_teardown(close_while_a_failed_attempt_closes_frees_everything, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
