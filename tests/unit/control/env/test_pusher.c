/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/env/test_pusher.c - snapshot delivery to proxy admin sockets and admin URLs:
 * delivery, replacement by newer snapshots, a proxy that is down then up, a proxy that restarted
 * (and lost its policy), refusals that must not be retried, and closing with a request in flight
 * — each for a unix socket and for an https:// URL under mutual TLS; then what only TLS has: a
 * proxy certificate that is revoked or names another host gets nothing (its status says why), a
 * proxy that revoked the control plane's certificate refuses it, a URL with a host name. The
 * "proxy" is an http/server on the same loop: on a unix socket in a temporary directory, or on a
 * TLS listener of 127.0.0.1 with certificates of a PKI made there (certs/pki.h). The log warns
 * of a proxy that went away, or never answered within the start grace, not of one still starting.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
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

#include "certs/pki.h"
#include "control/env/pusher.h"
#include "http/server.h"
#include "http/tls.h"
#include "tests/support/tmpdir.h"

struct fake {
    uv_loop_t *loop;
    struct sl_http_server *srv;
    char path[128];
    /* A TLS listener at 127.0.0.1:`port` with `tls` instead of the socket when `tls` is set. */
    struct sl_http_tls *tls;
    int port;
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
    if (f->tls != NULL) {
        char addr[64];

        (void)snprintf(addr, sizeof(addr), "127.0.0.1:%d", f->port);
        assert_int_equal(sl_http_server_listen_tls(f->srv, addr, f->tls, err, sizeof(err)), 0);
        f->port = sl_http_server_port(f->srv);
        return;
    }
    assert_int_equal(sl_http_server_listen_unix(f->srv, f->path, 0600, err, sizeof(err)), 0);
}

static void fake_stop(struct fake *f)
{
    sl_http_server_close(f->srv, NULL, NULL);
    f->srv = NULL;
}

/* What a test runs against: the proxy on a socket, or at a URL with these certificates. */
struct mode {
    bool tls;
    /* The proxy's certificate names (ip or dns); the URL's host. */
    const char *proxy_ip;
    const char *proxy_dns;
    const char *url_host;
    /* Revoke the proxy's certificate (the pusher's CRL) or the control plane's (the proxy's)
     * before anything runs. */
    bool revoke_proxy;
    bool revoke_control;
    /* The proxy serves an `engine` certificate (for the same address) instead of a `proxy`
     * one. */
    bool engine_cert;
};

static struct mode by_socket = { .tls = false };
/* The pushers' start_grace_ms (0: the default). */
static uint64_t start_grace_ms;
static struct mode by_url = { .tls = true, .proxy_ip = "127.0.0.1", .url_host = "127.0.0.1" };

struct world {
    uv_loop_t loop;
    char dir[64];
    struct fake fake;
    struct sl_pusher *p;
    struct sl_http_tls *client_tls;
    char url[128];
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

static void on_tick(uv_timer_t *t);
static void run_for(struct world *w, uint64_t ms);

/* `dir`/`name` into `out`. */
static const char *in_dir(char *out, size_t cap, const char *dir, const char *name)
{
    (void)snprintf(out, cap, "%s/%s", dir, name);
    return out;
}

/* A PKI in `w->dir`/pki with a proxy and a control certificate, and both sides' contexts. */
static void setup_tls(struct world *w, const struct mode *m)
{
    char pki[128];
    char cert[192];
    char key[192];
    char ca[192];
    char crl[192];
    char err[512];
    const char *ips[1] = { m->proxy_ip };
    const char *dns[1] = { m->proxy_dns };
    struct sl_pki_request pr = { .kind = m->engine_cert ? SL_PKI_ENGINE : SL_PKI_PROXY,
                                 .name = "p1",
                                 .ips = ips,
                                 .n_ips = m->proxy_ip != NULL,
                                 .dns = dns,
                                 .n_dns = m->proxy_dns != NULL };
    struct sl_pki_request cr = { .kind = SL_PKI_CONTROL, .name = "cp" };
    struct sl_http_tls_files sf;
    struct sl_http_tls_files cf;

    (void)in_dir(pki, sizeof(pki), w->dir, "pki");
    assert_int_equal(sl_pki_init(pki, err, sizeof(err)), 0);
    assert_int_equal(sl_pki_issue(pki, &pr, NULL, 0, NULL, err, sizeof(err)), 0);
    assert_int_equal(sl_pki_issue(pki, &cr, NULL, 0, NULL, err, sizeof(err)), 0);
    if (m->revoke_proxy) {
        assert_int_equal(sl_pki_revoke(pki, in_dir(cert, sizeof(cert), pki, "proxy-p1.pem"), NULL,
                                       err, sizeof(err)),
                         0);
    }
    if (m->revoke_control) {
        assert_int_equal(sl_pki_revoke(pki, in_dir(cert, sizeof(cert), pki, "control-cp.pem"), NULL,
                                       err, sizeof(err)),
                         0);
    }
    (void)in_dir(ca, sizeof(ca), pki, "ca.pem");
    (void)in_dir(crl, sizeof(crl), pki, "crl.pem");
    /* As the daemons set them up (proxy/proxy.c, control/control.c): each wants the other's
     * kind. */
    sf = (struct sl_http_tls_files){
        .cert = in_dir(cert, sizeof(cert), pki, m->engine_cert ? "engine-p1.pem" : "proxy-p1.pem"),
        .key = in_dir(key, sizeof(key), pki, m->engine_cert ? "engine-p1.key" : "proxy-p1.key"),
        .ca = ca,
        .crl = crl,
        .peer_kind = "control"
    };
    assert_int_equal(sl_http_tls_create(&sf, true, &w->fake.tls, err, sizeof(err)), 0);
    cf = (struct sl_http_tls_files){ .cert = in_dir(cert, sizeof(cert), pki, "control-cp.pem"),
                                     .key = in_dir(key, sizeof(key), pki, "control-cp.key"),
                                     .ca = ca,
                                     .crl = crl,
                                     .peer_kind = "proxy" };
    assert_int_equal(sl_http_tls_create(&cf, false, &w->client_tls, err, sizeof(err)), 0);
    /* A free port for the proxy, kept across its restarts. */
    fake_start(&w->fake);
    fake_stop(&w->fake);
    run_for(w, 20);
    (void)snprintf(w->url, sizeof(w->url), "https://%s:%d", m->url_host, w->fake.port);
}

static void setup_world_mode(struct world *w, const struct mode *m)
{
    const char *sockets[1];
    const char *urls[1];
    struct sl_pusher_config cfg = { sockets, 1, 100, 1000, on_acked, NULL, NULL, 0, NULL, 0 };
    char err[256];

    memset(w, 0, sizeof(*w));
    cfg.acked_arg = w;
    cfg.start_grace_ms = start_grace_ms;
    assert_int_equal(uv_loop_init(&w->loop), 0);
    (void)snprintf(w->dir, sizeof(w->dir), "/tmp/sluice-push-XXXXXX");
    assert_non_null(mkdtemp(w->dir));
    (void)snprintf(w->fake.path, sizeof(w->fake.path), "%s/proxy.sock", w->dir);
    w->fake.loop = &w->loop;
    w->fake.put_status = 200;
    sockets[0] = w->fake.path;
    if (m->tls) {
        setup_tls(w, m);
        urls[0] = w->url;
        cfg.n_sockets = 0;
        cfg.urls = urls;
        cfg.n_urls = 1;
        cfg.tls = w->client_tls;
    }
    assert_int_equal(sl_pusher_create(&w->loop, &cfg, &w->p, err, sizeof(err)), 0);
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
    sl_http_tls_free(w->client_tls);
    sl_http_tls_free(w->fake.tls);
    (void)unlink(w->fake.path);
    assert_int_equal(sl_test_rmtree(w->dir), 0);
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

    setup_world_mode(&w, *state);
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

    setup_world_mode(&w, *state);
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

/* Standard error (the log) goes to a file while captured. */
struct capture {
    char path[96];
    int saved;
};

static void capture_start(struct capture *c, const struct world *w)
{
    int fd;

    (void)snprintf(c->path, sizeof(c->path), "%s/stderr.log", w->dir);
    fd = open(c->path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    c->saved = dup(STDERR_FILENO);
    assert_true(c->saved >= 0);
    assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    (void)close(fd);
}

/* Lines of the capture so far that hold `what`. */
static int captured(const struct capture *c, const char *what)
{
    char line[1024];
    int n = 0;
    FILE *f = fopen(c->path, "r");

    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        n += strstr(line, what) != NULL;
    }
    (void)fclose(f);
    return n;
}

static void capture_stop(struct capture *c)
{
    assert_int_equal(dup2(c->saved, STDERR_FILENO), STDERR_FILENO);
    (void)close(c->saved);
    (void)unlink(c->path);
}

#define UNREACHABLE_WARNING " warn conn=0 msg=\"proxy admin "

/* A proxy started beside the control plane that comes up within the start grace is not warned
 * about; one that was reachable and goes away is, at once; and so is one that never answers,
 * once the grace is over. */
static void warns_of_an_outage_not_of_a_start(void **state)
{
    struct capture cap;
    struct world w;

    start_grace_ms = 1000;
    setup_world_mode(&w, *state);
    capture_start(&cap, &w);
    assert_int_equal(sl_pusher_push(w.p, 3, "{\"version\":3}", 13), 0);
    run_for(&w, 300);
    fake_start(&w.fake);
    run_for(&w, 2500);
    assert_int_equal(w.fake.version, 3);
    assert_int_equal(captured(&cap, UNREACHABLE_WARNING), 0);
    /* It goes away: warned at once (the status poll notices within 100 ms). */
    fake_stop(&w.fake);
    run_for(&w, 300);
    assert_int_equal(captured(&cap, UNREACHABLE_WARNING), 1);
    assert_int_equal(captured(&cap, "unreachable; retrying"), 1);
    capture_stop(&cap);
    teardown_world(&w);

    /* One that never answers: nothing within the grace, the warning after it. */
    setup_world_mode(&w, *state);
    capture_start(&cap, &w);
    assert_int_equal(sl_pusher_push(w.p, 1, "{\"version\":1}", 13), 0);
    run_for(&w, 600);
    assert_int_equal(captured(&cap, UNREACHABLE_WARNING), 0);
    run_for(&w, 1200);
    assert_int_equal(captured(&cap, "unreachable; retrying"), 1);
    capture_stop(&cap);
    teardown_world(&w);
    start_grace_ms = 0;
}

static void redelivers_to_a_restarted_proxy_within_a_second(void **state)
{
    struct world w;

    setup_world_mode(&w, *state);
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

    setup_world_mode(&w, *state);
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

    setup_world_mode(&w, *state);
    fake_start(&w.fake);
    assert_int_equal(sl_pusher_push(w.p, 1, "{\"version\":1}", 13), 0);
    /* No loop turn: the connect is pending when the pusher closes. */
    teardown_world(&w);
}

/* A proxy certificate that fails verification gets nothing: not a status poll, not a snapshot;
 * the target is unreachable and says why. */
static void refuses_a_proxy_certificate(const struct mode *m, const char *why)
{
    struct sl_pusher_target_status st;
    struct world w;

    setup_world_mode(&w, m);
    fake_start(&w.fake);
    assert_int_equal(sl_pusher_push(w.p, 1, "{\"version\":1}", 13), 0);
    run_for(&w, 700);
    assert_int_equal(w.fake.puts, 0);
    assert_int_equal(w.fake.gets, 0);
    sl_pusher_target(w.p, 0, &st);
    assert_null(st.socket);
    assert_string_equal(st.url, w.url);
    assert_true(st.unreachable);
    assert_int_equal(st.acked_version, 0);
    assert_non_null(strstr(st.last_error, why));
    assert_int_equal(sl_pusher_acked_by_all(w.p), 0);
    teardown_world(&w);
}

static void refuses_a_revoked_proxy_certificate(void **state)
{
    const struct mode m = {
        .tls = true, .proxy_ip = "127.0.0.1", .url_host = "127.0.0.1", .revoke_proxy = true
    };

    (void)state;
    refuses_a_proxy_certificate(&m, "certificate revoked");
}

static void refuses_a_proxy_certificate_for_another_host(void **state)
{
    const struct mode m = { .tls = true, .proxy_ip = "127.0.0.2", .url_host = "127.0.0.1" };

    (void)state;
    refuses_a_proxy_certificate(&m, "IP address mismatch");
}

/* A node's engine certificate names the node's address and serverAuth as its proxy's does:
 * its kind tells them apart. */
static void refuses_an_engine_certificate_as_a_proxy(void **state)
{
    const struct mode m = {
        .tls = true, .proxy_ip = "127.0.0.1", .url_host = "127.0.0.1", .engine_cert = true
    };

    (void)state;
    refuses_a_proxy_certificate(&m, "not a proxy certificate");
}

/* The proxy checks the control plane's certificate: revoked, the snapshot never lands. */
static void a_proxy_refuses_a_revoked_control_certificate(void **state)
{
    const struct mode m = {
        .tls = true, .proxy_ip = "127.0.0.1", .url_host = "127.0.0.1", .revoke_control = true
    };
    struct sl_pusher_target_status st;
    struct world w;

    (void)state;
    setup_world_mode(&w, &m);
    fake_start(&w.fake);
    assert_int_equal(sl_pusher_push(w.p, 1, "{\"version\":1}", 13), 0);
    run_for(&w, 700);
    assert_int_equal(w.fake.puts, 0);
    assert_int_equal(w.fake.version, 0);
    sl_pusher_target(w.p, 0, &st);
    assert_true(st.unreachable);
    assert_non_null(strstr(st.last_error, "revoked"));
    teardown_world(&w);
}

/* A host name is resolved and is what the certificate must name. */
static void delivers_to_a_url_with_a_host_name(void **state)
{
    const struct mode m = { .tls = true, .proxy_dns = "localhost", .url_host = "localhost" };
    struct world w;

    (void)state;
    setup_world_mode(&w, &m);
    fake_start(&w.fake);
    assert_int_equal(sl_pusher_push(w.p, 9, "{\"version\":9}", 13), 0);
    run_for(&w, 600);
    assert_int_equal(w.fake.version, 9);
    assert_int_equal(sl_pusher_acked_by_all(w.p), 9);
    teardown_world(&w);
}

/* Bad URLs and too many targets are refused at create, saying why. */
static void refuses_bad_urls(void **state)
{
    const char *bad[] = { "http://127.0.0.1:1", "https://127.0.0.1", "https://127.0.0.1:1/x",
                          "https://a@127.0.0.1:1", "127.0.0.1:1" };
    const char *many[SL_PUSHER_TARGETS_MAX];
    uv_loop_t loop;
    struct sl_pusher *p = NULL;
    char err[256];

    (void)state;
    assert_int_equal(uv_loop_init(&loop), 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct sl_pusher_config cfg = { .urls = &bad[i], .n_urls = 1, .tls = (void *)&loop };

        err[0] = '\0';
        assert_int_equal(sl_pusher_create(&loop, &cfg, &p, err, sizeof(err)), SL_EINVAL);
        assert_non_null(strstr(err, "bad proxy admin URL"));
    }
    {
        const char *ok = "https://127.0.0.1:1";
        struct sl_pusher_config cfg = { .urls = &ok, .n_urls = 1 };

        assert_int_equal(sl_pusher_create(&loop, &cfg, &p, err, sizeof(err)), SL_EINVAL);
    }
    for (size_t i = 0; i < SL_PUSHER_TARGETS_MAX; i++) {
        many[i] = "/tmp/x.sock";
    }
    {
        const char *ok = "https://127.0.0.1:1";
        struct sl_pusher_config cfg = { .sockets = many,
                                        .n_sockets = SL_PUSHER_TARGETS_MAX,
                                        .urls = &ok,
                                        .n_urls = 1,
                                        .tls = (void *)&loop };

        assert_int_equal(sl_pusher_create(&loop, &cfg, &p, err, sizeof(err)), SL_ETOOBIG);
        assert_non_null(strstr(err, "at most 16"));
    }
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(delivers_the_newest_snapshot, (void *)&by_socket),
        cmocka_unit_test_prestate(retries_a_proxy_that_was_down, (void *)&by_socket),
        cmocka_unit_test_prestate(warns_of_an_outage_not_of_a_start, (void *)&by_socket),
        cmocka_unit_test_prestate(redelivers_to_a_restarted_proxy_within_a_second,
                                  (void *)&by_socket),
        cmocka_unit_test_prestate(does_not_retry_a_refused_snapshot, (void *)&by_socket),
        cmocka_unit_test_prestate(closes_with_a_request_in_flight, (void *)&by_socket),
        cmocka_unit_test_prestate(delivers_the_newest_snapshot, (void *)&by_url),
        cmocka_unit_test_prestate(retries_a_proxy_that_was_down, (void *)&by_url),
        cmocka_unit_test_prestate(warns_of_an_outage_not_of_a_start, (void *)&by_url),
        cmocka_unit_test_prestate(redelivers_to_a_restarted_proxy_within_a_second, (void *)&by_url),
        cmocka_unit_test_prestate(does_not_retry_a_refused_snapshot, (void *)&by_url),
        cmocka_unit_test_prestate(closes_with_a_request_in_flight, (void *)&by_url),
        cmocka_unit_test(refuses_a_revoked_proxy_certificate),
        cmocka_unit_test(refuses_a_proxy_certificate_for_another_host),
        cmocka_unit_test(refuses_an_engine_certificate_as_a_proxy),
        cmocka_unit_test(a_proxy_refuses_a_revoked_control_certificate),
        cmocka_unit_test(delivers_to_a_url_with_a_host_name),
        cmocka_unit_test(refuses_bad_urls),
    };

    /* As the daemon does (http/server.h): a peer gone mid-write is an error, not the end. */
    (void)signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
