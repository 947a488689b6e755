/* SPDX-License-Identifier: Apache-2.0 */
/* SO_REUSEPORT is a Linux/BSD extension that _POSIX_C_SOURCE alone hides. */
#define _DEFAULT_SOURCE 1

#include "proxy/worker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "policy/host.h"
#include "proxy/conn.h"
#include "proxy/stream.h"
#include "proxy/upstream.h"

#define BACKLOG 1024

int sl__listen_addr_parse(const char *s, struct sockaddr_storage *out, char *err, size_t errlen)
{
    struct sl_host host;
    uint16_t port = 0;
    const char *why = NULL;

    memset(out, 0, sizeof(*out));
    if (sl_host_parse_authority(sl_slice_str(s), 0, &host, &port, &why) < 0 || port == 0
        || host.kind == SL_HOST_DNS) {
        (void)snprintf(err, errlen, "--listen %s: expected IPv4:PORT or [IPv6]:PORT%s%s", s,
                       why != NULL ? ": " : "", why != NULL ? why : "");
        return SL_EINVAL;
    }
    if (host.kind == SL_HOST_IPV4) {
        struct sockaddr_in *in = (struct sockaddr_in *)(void *)out;

        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        memcpy(&in->sin_addr, host.addr, 4);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)(void *)out;

        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        memcpy(&in6->sin6_addr, host.addr, 16);
    }
    return 0;
}

/* A listening socket of our own: libuv 1.44 cannot set SO_REUSEPORT itself. */
static int open_listener(const struct sockaddr_storage *ss, char *err, size_t errlen)
{
    int one = 1;
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    socklen_t len =
            ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    char text[INET6_ADDRSTRLEN] = "";
    int e;

    if (fd == -1) {
        e = errno;
        (void)snprintf(err, errlen, "cannot create a socket: %s", strerror(e));
        return -e;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1
        || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) == -1
        || (ss->ss_family == AF_INET6
            && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) == -1)
        || bind(fd, (const struct sockaddr *)ss, len) == -1 || listen(fd, BACKLOG) == -1) {
        e = errno;
        if (ss->ss_family == AF_INET) {
            (void)inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)ss)->sin_addr,
                            text, sizeof(text));
        } else {
            (void)inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr,
                            text, sizeof(text));
        }
        (void)snprintf(err, errlen, "cannot listen on %s port %u: %s", text,
                       (unsigned)ntohs(((const struct sockaddr_in *)(const void *)ss)->sin_port),
                       strerror(e));
        close(fd);
        return -e;
    }
    return fd;
}

/* Steers the connections of the SO_REUSEPORT group that `fd` belongs to: each goes to the
 * socket whose index in the group (the order the workers opened theirs) is the number of the
 * CPU its SYN was handled on, modulo `n`. On loopback and veth that is the CPU the connecting
 * thread ran on, so one client thread's connections meet one worker: fewer cross-CPU wake-ups
 * and cache misses than a spread by address hash (bench/README.md). False when the kernel
 * refuses the program (the group then keeps its hash). */
static bool steer_by_cpu(int fd, unsigned n)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_AD_OFF + SKF_AD_CPU)),
        BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, n),
        BPF_STMT(BPF_RET | BPF_A, 0),
    };
    struct sock_fprog prog = { (unsigned short)(sizeof(code) / sizeof(code[0])), code };

    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) == 0;
}

static void on_connection(uv_stream_t *server, int status)
{
    struct sl__worker *w = server->data;

    if (status < 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"accept failed\" err=%s", uv_strerror(status));
        return;
    }
    sl__conn_accept(w, SL_CONTAINER_OF(server, struct sl__listener, tcp));
}

static void on_listener_closed(uv_handle_t *h)
{
    (void)h;
}

static void close_listeners(struct sl__worker *w)
{
    for (size_t i = 0; i < w->n_listeners; i++) {
        if (!uv_is_closing((uv_handle_t *)&w->listeners[i].tcp)) {
            uv_close((uv_handle_t *)&w->listeners[i].tcp, on_listener_closed);
        }
    }
}

static void on_wake(uv_async_t *a)
{
    struct sl__worker *w = a->data;
    struct sl_snapshot *snap;
    bool withdraw;
    bool drain;
    bool stop;

    pthread_mutex_lock(&w->mail_lock);
    snap = w->mail_snapshot;
    w->mail_snapshot = NULL;
    withdraw = w->mail_withdraw;
    w->mail_withdraw = false;
    drain = w->mail_drain;
    stop = w->mail_stop;
    pthread_mutex_unlock(&w->mail_lock);
    if (snap != NULL || (withdraw && w->snapshot != NULL)) {
        sl_snapshot_unref(w->snapshot);
        w->snapshot = snap;
        sl__conn_policy_changed(w);
    }
    if ((drain || stop) && !w->draining) {
        w->draining = true;
        close_listeners(w);
        sl_upstream_pool_close(w);
        sl__conn_drain_all(w);
    }
    if (stop) {
        sl__conn_close_all(w);
        sl_upstream_pool_close(w);
        sl_dns_close(w->dns);
        w->dns = NULL;
        uv_close((uv_handle_t *)&w->wake, NULL);
        uv_close((uv_handle_t *)&w->resume, NULL);
    }
}

int sl__worker_init(struct sl__worker *w, unsigned index, struct sl__shared *sh,
                    const struct sl__listen *listens, size_t n_listens, char *err, size_t errlen)
{
    const struct sl_proxy_config *cfg = sh->cfg;
    struct sl_dns_config dns_cfg = { cfg->pins, cfg->n_pins, 0, 0, 0 };
    int rc;

    memset(w, 0, sizeof(*w));
    sl_list_init(&w->idle);
    w->index = index;
    w->shared = sh;
    rc = uv_loop_init(&w->loop);
    if (rc < 0) {
        (void)snprintf(err, errlen, "cannot create an event loop: %s", uv_strerror(rc));
        return rc;
    }
    pthread_mutex_init(&w->mail_lock, NULL);
    rc = uv_async_init(&w->loop, &w->wake, on_wake);
    if (rc == 0) {
        w->wake.data = w;
        rc = uv_idle_init(&w->loop, &w->resume);
        w->resume.data = w;
    }
    if (rc == 0) {
        rc = sl_dns_create(&w->loop, &dns_cfg, &w->dns);
    }
    SL_BUG_ON(n_listens > SL__LISTENERS_MAX);
    for (size_t i = 0; rc == 0 && i < n_listens; i++) {
        struct sl__listener *l = &w->listeners[i];
        int fd = open_listener(&listens[i].addr, err, errlen);

        if (fd < 0) {
            rc = fd;
            break;
        }
        /* The first worker's socket starts each group; the program stays with the group as
         * the others join it. */
        if (index == 0 && sh->steer_workers > 1) {
            l->steered = steer_by_cpu(fd, sh->steer_workers);
            l->steerable = l->steered;
            if (!l->steered) {
                sl_log(SL_LOG_INFO, 0,
                       "msg=\"connections are spread over the workers by address, not by CPU\" "
                       "err=\"%s\"",
                       strerror(errno));
            }
        }
        rc = uv_tcp_init(&w->loop, &l->tcp);
        if (rc < 0) {
            close(fd);
            break;
        }
        l->tcp.data = w;
        l->fd = fd;
        l->kind = listens[i].kind;
        l->port = ntohs(((const struct sockaddr_in *)(const void *)&listens[i].addr)->sin_port);
        w->n_listeners++;
        rc = uv_tcp_open(&l->tcp, fd);
        if (rc == 0) {
            rc = uv_listen((uv_stream_t *)&l->tcp, BACKLOG, on_connection);
        }
        if (rc < 0) {
            (void)snprintf(err, errlen, "cannot listen: %s", uv_strerror(rc));
        }
    }
    if (rc < 0) {
        close_listeners(w);
        sl_dns_close(w->dns);
        w->dns = NULL;
        if (!uv_is_closing((uv_handle_t *)&w->wake) && w->wake.loop != NULL) {
            uv_close((uv_handle_t *)&w->wake, NULL);
        }
        if (!uv_is_closing((uv_handle_t *)&w->resume) && w->resume.loop != NULL) {
            uv_close((uv_handle_t *)&w->resume, NULL);
        }
        (void)uv_run(&w->loop, UV_RUN_DEFAULT);
        (void)uv_loop_close(&w->loop);
        pthread_mutex_destroy(&w->mail_lock);
        if (err[0] == '\0') {
            (void)snprintf(err, errlen, "cannot start a worker: %s", sl_strerror(rc));
        }
        return rc;
    }
    return 0;
}

static void worker_main(void *arg)
{
    struct sl__worker *w = arg;

    (void)uv_run(&w->loop, UV_RUN_DEFAULT);
    sl_stream_pool_drain();
}

uint64_t sl__worker_cpu_ns(const struct sl__worker *w)
{
    clockid_t id;
    struct timespec ts;

    if (pthread_getcpuclockid(w->thread, &id) != 0 || clock_gettime(id, &ts) != 0) {
        return 0;
    }
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool sl__worker_steered(const struct sl__worker *w)
{
    for (size_t i = 0; i < w->n_listeners; i++) {
        if (w->listeners[i].steered) {
            return true;
        }
    }
    return false;
}

void sl__worker_unsteer(struct sl__worker *w)
{
    for (size_t i = 0; i < w->n_listeners; i++) {
        struct sl__listener *l = &w->listeners[i];
        int zero = 0;

        if (!l->steered) {
            continue;
        }
        if (setsockopt(l->fd, SOL_SOCKET, SO_DETACH_REUSEPORT_BPF, &zero, sizeof(zero)) == 0) {
            l->steered = false;
            continue;
        }
        sl_log(SL_LOG_WARN, 0,
               "msg=\"cannot take the steering program off a listening socket\" port=%u "
               "err=\"%s\"",
               (unsigned)l->port, strerror(errno));
    }
}

void sl__worker_note_arrival(struct sl__worker *w, int fd)
{
    int cpu = -1;
    socklen_t len = sizeof(cpu);
    unsigned n = w->shared->steer_workers;

    if (n == 0 || n > SL__STEER_MAX || getsockopt(fd, SOL_SOCKET, SO_INCOMING_CPU, &cpu, &len) != 0
        || cpu < 0) {
        return;
    }
    sl__count(&w->arrived_on[(unsigned)cpu % n], 1);
}

bool sl__worker_steer(struct sl__worker *w)
{
    bool any = false;

    for (size_t i = 0; i < w->n_listeners; i++) {
        struct sl__listener *l = &w->listeners[i];

        if (!l->steerable || l->steered) {
            continue;
        }
        if (steer_by_cpu(l->fd, w->shared->steer_workers)) {
            l->steered = true;
            any = true;
            continue;
        }
        sl_log(SL_LOG_WARN, 0,
               "msg=\"cannot put the steering program back on a listening socket\" port=%u "
               "err=\"%s\"",
               (unsigned)l->port, strerror(errno));
    }
    return any;
}

int sl__worker_start(struct sl__worker *w)
{
    return uv_thread_create(&w->thread, worker_main, w);
}

void sl__worker_post_snapshot(struct sl__worker *w, struct sl_snapshot *s)
{
    pthread_mutex_lock(&w->mail_lock);
    sl_snapshot_unref(w->mail_snapshot);
    w->mail_snapshot = s;
    w->mail_withdraw = false;
    pthread_mutex_unlock(&w->mail_lock);
    (void)uv_async_send(&w->wake);
}

void sl__worker_post_withdraw(struct sl__worker *w)
{
    pthread_mutex_lock(&w->mail_lock);
    sl_snapshot_unref(w->mail_snapshot);
    w->mail_snapshot = NULL;
    w->mail_withdraw = true;
    pthread_mutex_unlock(&w->mail_lock);
    (void)uv_async_send(&w->wake);
}

void sl__worker_post_drain(struct sl__worker *w)
{
    pthread_mutex_lock(&w->mail_lock);
    w->mail_drain = true;
    pthread_mutex_unlock(&w->mail_lock);
    (void)uv_async_send(&w->wake);
}

void sl__worker_post_stop(struct sl__worker *w)
{
    pthread_mutex_lock(&w->mail_lock);
    w->mail_stop = true;
    pthread_mutex_unlock(&w->mail_lock);
    (void)uv_async_send(&w->wake);
}

void sl__worker_join(struct sl__worker *w)
{
    int rc;

    (void)uv_thread_join(&w->thread);
    rc = uv_loop_close(&w->loop);
    if (rc != 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"worker loop closed with handles open\" worker=%u", w->index);
    }
    sl_snapshot_unref(w->snapshot);
    sl_snapshot_unref(w->mail_snapshot);
    w->snapshot = NULL;
    w->mail_snapshot = NULL;
    pthread_mutex_destroy(&w->mail_lock);
}

uint64_t sl__worker_open_connections(struct sl__worker *w)
{
    return atomic_load_explicit(&w->counters.connections_open, memory_order_relaxed);
}
