/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/env/test_pusher.c - snapshot delivery to proxy admin sockets: delivery,
 * replacement by newer snapshots, a proxy that is down then up, a proxy that restarted (and lost
 * its policy), refusals that must not be retried, and closing with a request in flight. The "proxy"
 * is an http/server on a unix socket in a temporary directory, on the same loop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <uv.h>

#include "control/env/pusher.h"
#include "http/server.h"

struct fake {
    uv_loop_t *loop;
    struct sl_http_server *srv;
    char path[128];
    /* What the fake proxy has loaded (0: none), and the answer it gives to PUTs. */
    int64_t version;
    int put_status;
    int puts;
    int gets;
};

static void on_request(struct sl_http_exchange *x, const struct sl_http_request *req, void *arg)
{
    struct fake *f = arg;
    char body[64];
    int n;

    if (strcmp(req->method, "PUT") == 0 && strcmp(req->path, "/v1/snapshot") == 0) {
        json_t *j = json_loadb((const char *)req->body.p, req->body.n, 0, NULL);

        f->puts++;
        if (f->put_status != 200) {
            sl_http_respond_error(x, f->put_status, "refused by the test");
            json_decref(j);
            return;
        }
        f->version = (int64_t)json_integer_value(json_object_get(j, "version"));
        json_decref(j);
        n = snprintf(body, sizeof(body), "{\"version\":%lld}", (long long)f->version);
        sl_http_respond(x, 200, "application/json", body, (size_t)n);
        return;
    }
    if (strcmp(req->method, "GET") == 0 && strcmp(req->path, "/v1/status") == 0) {
        f->gets++;
        if (f->version == 0) {
            n = snprintf(body, sizeof(body), "{\"version\":null}");
        } else {
            n = snprintf(body, sizeof(body), "{\"version\":%lld}", (long long)f->version);
        }
        sl_http_respond(x, 200, "application/json", body, (size_t)n);
        return;
    }
    sl_http_respond_error(x, 404, "no");
}

static void fake_start(struct fake *f)
{
    char err[256];

    assert_int_equal(sl_http_server_create(f->loop, NULL, on_request, f, &f->srv), 0);
    assert_int_equal(sl_http_server_listen_unix(f->srv, f->path, 0600, err, sizeof(err)), 0);
}

static void fake_stop(struct fake *f)
{
    sl_http_server_close(f->srv, NULL, NULL);
    f->srv = NULL;
}

struct world {
    uv_loop_t loop;
    char dir[64];
    struct fake fake;
    struct sl_pusher *p;
    /* What the acked callback reported last, and how often it ran. */
    int64_t acked_by_all;
    int acked_calls;
};

static void on_acked(void *arg, int64_t v)
{
    struct world *w = arg;

    w->acked_by_all = v;
    w->acked_calls++;
}

static void setup_world(struct world *w)
{
    const char *sockets[1];
    struct sl_pusher_config cfg = { sockets, 1, 100, 1000, on_acked, NULL };

    memset(w, 0, sizeof(*w));
    cfg.acked_arg = w;
    assert_int_equal(uv_loop_init(&w->loop), 0);
    (void)snprintf(w->dir, sizeof(w->dir), "/tmp/sluice-push-XXXXXX");
    assert_non_null(mkdtemp(w->dir));
    (void)snprintf(w->fake.path, sizeof(w->fake.path), "%s/proxy.sock", w->dir);
    w->fake.loop = &w->loop;
    w->fake.put_status = 200;
    sockets[0] = w->fake.path;
    assert_int_equal(sl_pusher_create(&w->loop, &cfg, &w->p), 0);
}

static void on_pusher_closed(void *arg)
{
    *(int *)arg = 1;
}

static void teardown_world(struct world *w)
{
    int closed = 0;

    sl_pusher_close(w->p, on_pusher_closed, &closed);
    if (w->fake.srv != NULL) {
        fake_stop(&w->fake);
    }
    assert_int_equal(uv_run(&w->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(closed, 1);
    assert_int_equal(uv_loop_close(&w->loop), 0);
    (void)unlink(w->fake.path);
    (void)rmdir(w->dir);
}

static void on_tick(uv_timer_t *t)
{
    (void)t;
}

/* Runs the loop for `ms` milliseconds. */
static void run_for(struct world *w, uint64_t ms)
{
    uv_timer_t t;
    uint64_t until;

    assert_int_equal(uv_timer_init(&w->loop, &t), 0);
    uv_update_time(&w->loop);
    until = uv_now(&w->loop) + ms;
    (void)uv_timer_start(&t, on_tick, 10, 10);
    while (uv_now(&w->loop) < until) {
        (void)uv_run(&w->loop, UV_RUN_ONCE);
    }
    uv_close((uv_handle_t *)&t, NULL);
    (void)uv_run(&w->loop, UV_RUN_NOWAIT);
}

static int64_t acked(struct world *w)
{
    struct sl_pusher_target_status st;

    sl_pusher_target(w->p, 0, &st);
    return st.acked_version;
}

static void delivers_the_newest_snapshot(void **state)
{
    struct world w;

    (void)state;
    setup_world(&w);
    fake_start(&w.fake);
    assert_int_equal(sl_pusher_push(w.p, 1, "{\"version\":1}", 13), 0);
    assert_int_equal(sl_pusher_push(w.p, 2, "{\"version\":2}", 13), 0);
    assert_int_equal(sl_pusher_push(w.p, 2, "{\"version\":2}", 13), SL_EEXIST);
    run_for(&w, 400);
    assert_int_equal(w.fake.version, 2);
    assert_int_equal(acked(&w), 2);
    assert_int_equal(sl_pusher_acked_by_all(w.p), 2);
    assert_int_equal(w.acked_by_all, 2);
    assert_true(w.acked_calls >= 1);
    assert_int_equal(sl_pusher_version(w.p), 2);
    /* At most one PUT per version: 1 may have gone before 2 replaced it. */
    assert_true(w.fake.puts >= 1 && w.fake.puts <= 2);
    teardown_world(&w);
}

static void retries_a_proxy_that_was_down(void **state)
{
    struct sl_pusher_target_status st;
    struct world w;

    (void)state;
    setup_world(&w);
    assert_int_equal(sl_pusher_push(w.p, 7, "{\"version\":7}", 13), 0);
    run_for(&w, 300);
    sl_pusher_target(w.p, 0, &st);
    assert_true(st.unreachable);
    assert_true(st.last_error[0] != '\0');
    fake_start(&w.fake);
    /* Back-off is capped at 2 s; the status poll also notices. */
    run_for(&w, 2500);
    assert_int_equal(w.fake.version, 7);
    sl_pusher_target(w.p, 0, &st);
    assert_false(st.unreachable);
    teardown_world(&w);
}

static void redelivers_to_a_restarted_proxy_within_a_second(void **state)
{
    struct world w;

    (void)state;
    setup_world(&w);
    fake_start(&w.fake);
    assert_int_equal(sl_pusher_push(w.p, 3, "{\"version\":3}", 13), 0);
    run_for(&w, 300);
    assert_int_equal(w.fake.version, 3);
    /* The proxy restarts: it has no policy any more. */
    fake_stop(&w.fake);
    run_for(&w, 50);
    w.fake.version = 0;
    fake_start(&w.fake);
    run_for(&w, 1000);
    assert_int_equal(w.fake.version, 3);
    teardown_world(&w);
}

static void does_not_retry_a_refused_snapshot(void **state)
{
    struct sl_pusher_target_status st;
    struct world w;

    (void)state;
    setup_world(&w);
    w.fake.put_status = 409;
    fake_start(&w.fake);
    assert_int_equal(sl_pusher_push(w.p, 4, "{\"version\":4}", 13), 0);
    run_for(&w, 800);
    assert_int_equal(w.fake.puts, 1);
    sl_pusher_target(w.p, 0, &st);
    assert_non_null(strstr(st.last_error, "409"));
    /* A newer snapshot is tried again. */
    w.fake.put_status = 200;
    assert_int_equal(sl_pusher_push(w.p, 5, "{\"version\":5}", 13), 0);
    run_for(&w, 300);
    assert_int_equal(w.fake.version, 5);
    teardown_world(&w);
}

static void closes_with_a_request_in_flight(void **state)
{
    struct world w;

    (void)state;
    setup_world(&w);
    fake_start(&w.fake);
    assert_int_equal(sl_pusher_push(w.p, 1, "{\"version\":1}", 13), 0);
    /* No loop turn: the connect is pending when the pusher closes. */
    teardown_world(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(delivers_the_newest_snapshot),
        cmocka_unit_test(retries_a_proxy_that_was_down),
        cmocka_unit_test(redelivers_to_a_restarted_proxy_within_a_second),
        cmocka_unit_test(does_not_retry_a_refused_snapshot),
        cmocka_unit_test(closes_with_a_request_in_flight),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
