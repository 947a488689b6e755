/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/load/engine.h - the load engine of sluice-load: threads, each with its own epoll and
 * its share of the connections, driving HTTP/1.1 over TCP, optionally through an HTTP proxy
 * (CONNECT) and TLS with full certificate verification.
 *
 * Lifecycle: the caller fills a struct sl_load_config (see bench/load/main.c for the CLI that
 * does it) and calls sl_load_run(), which blocks for warmup + duration (or, in idle mode, until
 * every connection is established and then for the hold time), calls the hooks from the calling
 * thread at the edges of the measured window, and fills a struct sl_load_result. Every run is
 * bounded in time: a connection that makes no progress for SL_LOAD_STALL_MS counts as a timeout.
 */
#ifndef SL_BENCH_LOAD_ENGINE_H
#define SL_BENCH_LOAD_ENGINE_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/err.h"
#include "bench/load/stats.h"

/* A connection that makes no progress for this long is closed and counted as a timeout. */
#define SL_LOAD_STALL_MS 3000u
/* The pause before a connection that failed is opened again. */
#define SL_LOAD_BACKOFF_MS 20u

enum sl_load_mode {
    SL_LOAD_KEEPALIVE = 0,
    SL_LOAD_NEWCONN,
    SL_LOAD_RATE,
    SL_LOAD_DOWNLOAD,
    SL_LOAD_IDLE,
};

/* The largest CPU number --connect-cpu takes (glibc's cpu_set_t holds 1 024). */
#define SL_LOAD_CPU_MAX 1023

struct sl_load_config {
    enum sl_load_mode mode;
    /* https (TLS, verified against `cafiles` and `host`) or plain http. */
    bool tls;
    /* The URL's host (no brackets), borrowed; the name TLS verifies and sends as SNI. */
    const char *host;
    /* Where to dial: the proxy, --connect-to, or the host's resolved address. */
    struct sockaddr_storage dial;
    socklen_t dial_len;
    /* A proxy is dialled: TLS targets get `connect_req` (CONNECT) first, plain ones are sent
     * `request` in absolute form. */
    bool via_proxy;
    /* CA files to trust (borrowed, `ncafiles` of them); none: the system's default paths. */
    const char *const *cafiles;
    size_t ncafiles;
    /* The request, prebuilt, and the CONNECT request (via_proxy with tls only); borrowed. */
    const char *request;
    size_t request_len;
    const char *connect_req;
    size_t connect_len;
    /* The request has no response body (HEAD). */
    bool head_request;
    unsigned connections;
    unsigned threads;
    double warmup_s;
    double duration_s;
    /* Rate mode: total requests per second over all connections. */
    double rate;
    /* Idle mode: seconds to hold the established connections open. */
    double hold_s;
    /* Newconn mode: offer the last session (ticket or id) the server gave this thread. */
    bool resume;
    int expect_status;
    /* Stop the window after this many requests (0: no limit). */
    uint64_t max_requests;
    /* Open every connection from this CPU (-1: from wherever the thread runs): the thread
     * moves there for socket() and connect() and back, so that the kernel handles every SYN
     * on one CPU, as behind a network card with a single receive queue. */
    int connect_cpu;
};

struct sl_load_errors {
    uint64_t connect; /* TCP connect failed */
    uint64_t proxy;   /* the proxy refused the CONNECT, or broke it */
    uint64_t tls;     /* handshake (verification included) or TLS record failure */
    uint64_t http;    /* a response that cannot be parsed, or bytes nobody asked for */
    uint64_t status;  /* a complete response with another status than expect_status */
    uint64_t timeout; /* no progress for SL_LOAD_STALL_MS */
    uint64_t closed;  /* the peer closed or reset the connection before a response ended */
};

struct sl_load_result {
    /* The measured window as it actually elapsed (idle mode: the time to establish). */
    double seconds;
    /* Requests completed in the window with the expected status, and their response bytes
     * (head + body, plaintext). */
    uint64_t requests;
    uint64_t bytes;
    /* Newconn mode: connections that completed their request in the window, and how many of
     * them resumed a TLS session. */
    uint64_t connects;
    uint64_t resumed;
    /* Errors over the whole run, warmup included. */
    struct sl_load_errors errors;
    /* Idle mode: connections that completed their request and were held. */
    uint64_t established;
    /* Latency of every request counted in `requests`, in microseconds. */
    struct sl_hist latency;
};

/* Called from the thread that called sl_load_run(). */
typedef void sl_load_hook_fn(void *arg);
/* Idle mode: called once the connections are established (or the time to do so is up), with
 * how many are. */
typedef void sl_load_ready_fn(uint64_t established, void *arg);

struct sl_load_hooks {
    /* At the start and end of the measured window; idle mode: before the first connection and
     * once all are established. May be NULL. */
    sl_load_hook_fn *window_start;
    sl_load_hook_fn *window_end;
    sl_load_ready_fn *ready;
    void *arg;
};

/* Runs the load described by `cfg` (borrowed) and fills `*out` (caller storage). Returns 0, or
 * a negative code when the run could not start (SL_ENOMEM, SL_ECRYPTO for a CA file OpenSSL
 * cannot load, a negative errno for epoll or threads); `err` then says why. */
SL_MUST_CHECK int sl_load_run(const struct sl_load_config *cfg, const struct sl_load_hooks *hooks,
                              struct sl_load_result *out, char *err, size_t errlen);

#endif
