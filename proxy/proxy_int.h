/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/proxy_int.h - what the files of proxy/ share: the read-only state every worker uses,
 * the worker itself, and the counters.
 *
 * Threading: `struct sl_proxy_shared` is built by the main thread before the workers start
 * and never changes afterwards (its OpenSSL contexts and the leaf cache are thread-safe).
 * A `struct sl_worker` belongs to its thread: only that thread touches it, except the mailbox
 * (`mail_*`, under `mail_lock`) and the counters (atomics, written by the worker, read by the
 * main thread).
 */
#ifndef SL_PROXY_PROXY_INT_H
#define SL_PROXY_PROXY_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <openssl/ssl.h>
#include <uv.h>

#include "base/list.h"
#include "certs/cache.h"
#include "policy/decision.h"
#include "policy/snapshot.h"
#include "proxy/addr.h"
#include "proxy/audit.h"
#include "proxy/dns.h"
#include "proxy/peers.h"
#include "proxy/proxy.h"

/* Buckets of the request latency histogram, +Inf included. */
#define SL__LATENCY_BUCKETS 13

/* Who cut a transfer short (the audit line's "aborted"), docs/reference/proxy.md §4.7. */
enum sl__abort_side {
    SL__SIDE_CLIENT = 0,
    SL__SIDE_UPSTREAM,
    /* A relay that idled: neither side sent anything. */
    SL__SIDE_BOTH,
    SL__SIDE_N,
};

/* Why a transfer was cut short. */
enum sl__abort_cause {
    /* Not cut: the transfer ended as its framing said (or is still going). */
    SL__ABORT_NONE = 0,
    /* The client took no bytes for the send timeout. */
    SL__ABORT_SEND_TIMEOUT,
    /* The upstream sent nothing for the idle timeout (or a relay carried nothing). */
    SL__ABORT_IDLE_TIMEOUT,
    /* The side's connection failed: a reset, a broken pipe, a TLS failure. */
    SL__ABORT_RESET,
    /* The side closed its connection in the middle of a message (a request body, a response
     * body shorter than its framing said, a close-delimited TLS body without close_notify). */
    SL__ABORT_CLOSED,
    /* The side's message turned malformed after its head was passed on. */
    SL__ABORT_MALFORMED,
    /* The proxy could not allocate what the transfer needed next. */
    SL__ABORT_OUT_OF_MEMORY,
    SL__ABORT_N,
};

/* Their names in the audit line and in sluice_transfers_aborted_total; the cause's is NULL for
 * SL__ABORT_NONE. */
const char *sl__abort_side_name(enum sl__abort_side side);
const char *sl__abort_cause_name(enum sl__abort_cause cause);

/* The reason for a failed step whose error is `rc`: out-of-memory for SL_ENOMEM (the proxy's
 * own failure, never to be read as the client's or the upstream's), `otherwise` for the rest. */
static inline enum sl_reason sl__failure_reason(int rc, enum sl_reason otherwise)
{
    return rc == SL_ENOMEM ? SL_REASON_OUT_OF_MEMORY : otherwise;
}

/* What a connection's timer cut short (docs/reference/proxy.md §4.10), for sluice_timeouts_total.
 */
enum sl__timeout {
    /* A request head that did not arrive in time (408, or a silent connection closed). */
    SL__TIMEOUT_HEADER = 0,
    /* A tunnel whose first bytes or TLS handshake did not arrive in time. */
    SL__TIMEOUT_HANDSHAKE,
    /* An upstream that did not answer in time (504). */
    SL__TIMEOUT_UPSTREAM,
    /* A connection idle too long: kept alive between requests, a response body whose upstream
     * sent nothing more, a relay with no traffic. */
    SL__TIMEOUT_IDLE,
    /* A client that took none of the bytes waiting for it (it stopped reading). */
    SL__TIMEOUT_SEND,
    SL__TIMEOUT_N,
};

/* Counters of one worker. Written by that worker only (relaxed), read by anyone. */
struct sl__counters {
    atomic_uint_fast64_t connections_accepted;
    atomic_uint_fast64_t connections_open;
    /* Connections refused at the accept: over --max-connections (overloaded), and from an
     * address holding --max-connections-per-client already (client-overloaded). */
    atomic_uint_fast64_t connections_refused;
    atomic_uint_fast64_t connections_refused_client;
    /* Of those, the ones closed at once without their 503 (SL__REFUSING_MAX were answering). */
    atomic_uint_fast64_t connections_refused_unanswered;
    /* New connections closed at the accept for want of memory (sl__conn_accept()). */
    atomic_uint_fast64_t connections_refused_memory;
    atomic_uint_fast64_t requests_allowed;
    atomic_uint_fast64_t requests_denied;
    /* 407s for a proxy request without Proxy-Authorization: challenges, not refusals (they are
     * in neither requests_denied nor denied_by_reason). */
    atomic_uint_fast64_t requests_challenged;
    /* Refusals that are decisions ("decision":"deny"), by reason (index: enum sl_reason). */
    atomic_uint_fast64_t denied_by_reason[SL_REASON_LAST + 1];
    /* Refusals that are failures ("decision":"error": an upstream that failed, no policy,
     * overload, no audit log), in all and by reason; in neither requests_denied nor
     * denied_by_reason. */
    atomic_uint_fast64_t requests_failed;
    atomic_uint_fast64_t failed_by_reason[SL_REASON_LAST + 1];
    atomic_uint_fast64_t tls_handshakes;
    atomic_uint_fast64_t tls_handshake_failures;
    /* Of those, the ones the client ended with an alert about the proxy's certificate. */
    atomic_uint_fast64_t tls_certificate_refusals;
    atomic_uint_fast64_t upstream_connects;
    atomic_uint_fast64_t upstream_reused;
    atomic_uint_fast64_t bytes_up;
    atomic_uint_fast64_t bytes_down;
    /* Connections or requests cut by a timer (index: enum sl__timeout). */
    atomic_uint_fast64_t timeouts[SL__TIMEOUT_N];
    /* Transfers cut short (sluice_transfers_aborted_total), by side and cause. */
    atomic_uint_fast64_t aborted[SL__SIDE_N][SL__ABORT_N];
    /* Request latency histogram (docs/reference/proxy.md §4.9): audited requests and refusals by
     * duration, one count per bucket (not cumulative; the renderer cumulates), bucket i holding the
     * durations in (sl__latency_bounds_us[i - 1], sl__latency_bounds_us[i]] and the last one the
     * rest
     * (+Inf). A CONNECT that opens a tunnel is not counted: its duration is the tunnel's life,
     * not a request latency. The histogram's count is the sum of the buckets, so a scrape
     * always shows +Inf equal to the count. */
    atomic_uint_fast64_t latency[SL__LATENCY_BUCKETS];
    /* The durations of the requests counted in `latency`, in microseconds. */
    atomic_uint_fast64_t latency_sum_us;
};

/* True when `reason` is a refusal of the policy's own (the audit line's and the metrics'
 * "deny", the refusal body's "denied"); the other reasons are failures ("error", "failed"):
 * docs/reference/proxy.md §4.5. Defined in conn_refuse.c. */
bool sl__reason_is_policy(enum sl_reason reason);

/* Upper bounds of the latency buckets but the last (+Inf), in microseconds, ascending:
 * 0.001 s to 10 s, the Prometheus client defaults plus 0.001. */
extern const uint64_t sl__latency_bounds_us[SL__LATENCY_BUCKETS - 1];

static inline void sl__count(atomic_uint_fast64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* Connections refused at the accept (overloaded, client-overloaded) that are answered their 503
 * at once, over all workers (docs/reference/proxy.md §4.10). A refused connection holds no slot
 * of --max-connections; while this many are answering, the next refused one is closed at once
 * without an answer. Fixed: it bounds what a flood of refused connections costs (this many
 * descriptors and connections' memory), whatever --max-connections says. */
#define SL__REFUSING_MAX 128u

struct sl__shared {
    const struct sl_proxy_config *cfg;
    /* Client-facing TLS (no certificate: engines get one per host) and upstream TLS. */
    SSL_CTX *server_ctx;
    SSL_CTX *client_ctx;
    struct sl_leaf_cache *leaves;
    struct sl_addr_policy *addrs;
    /* NULL when no audit log was asked for. */
    struct sl_audit *audit;
    /* Connections over all workers that hold a slot of cfg->max_connections: every accepted
     * connection but those refused at the accept (overloaded, client-overloaded). */
    atomic_uint connections;
    /* Connections refused at the accept whose 503 goes out or lingers (LINGER_MS), over all
     * workers, against SL__REFUSING_MAX. */
    atomic_uint refusing;
    /* Connections per client address, against cfg->max_connections_per_client: a connection
     * takes a slot once it is within max_connections, so at most that many addresses hold
     * one. */
    struct sl_peers *peers;
    /* Workers that new connections are steered to by the CPU their SYN arrived on (the CPU's
     * number modulo this), or 0: the kernel spreads them by their addresses
     * (docs/reference/proxy.md §4.8, --workers). At most SL__STEER_MAX. */
    unsigned steer_workers;
    /* Set by the main thread while the steering is off after it had been on: each worker then
     * counts the CPUs its new connections arrived on (struct sl__worker's `arrived_on`), for
     * the check that turns it back on (proxy.c on_steer_tick()). */
    atomic_bool steer_watch;
};

/* The most workers that new connections are steered to by CPU. */
#define SL__STEER_MAX 64

struct sl__conn;
struct sl_upstream;

/* What a listener takes (docs/reference/proxy.md §4.12). */
enum sl__listen_kind {
    /* --listen: the proxy protocol (CONNECT, absolute-form requests). */
    SL__LISTEN_PROXY = 0,
    /* --transparent ADDR, ports 443 and 80: connections made straight to the address; the port
     * they were made to is the listener's. */
    SL__LISTEN_TRANSPARENT,
    /* --transparent ADDR, port --transparent-port: connections the host's table redirected
     * there; the port they were made to is their original destination's (SO_ORIGINAL_DST). */
    SL__LISTEN_REDIRECT,
};

/* One address to listen on, and what it takes. */
struct sl__listen {
    struct sockaddr_storage addr;
    enum sl__listen_kind kind;
};

/* Listening sockets of a worker: the --listen addresses and three per --transparent one. */
#define SL__LISTENERS_MAX (SL_PROXY_LISTEN_MAX + 3 * SL_PROXY_TRANSPARENT_MAX)

/* A worker's listener: the socket (and its descriptor, which other threads may read), what it
 * takes and its port (host order); `steerable`: the kernel took the steering program for the
 * socket's group at the start, and `steered`: the group carries it now (worker 0 only, worker.c
 * steer_by_cpu(); the main thread takes it off and puts it back). */
struct sl__listener {
    uv_tcp_t tcp;
    int fd;
    enum sl__listen_kind kind;
    uint16_t port;
    bool steerable;
    bool steered;
    /* Takes a new connection the worker has no memory for, to close it at once: libuv stops
     * watching a listener while the connection it accepted waits for uv_accept(), so one not
     * taken would stop this listener for good (sl__conn_accept()). Busy until it is closed;
     * `waiting`: a connection waits for it meanwhile. */
    uv_tcp_t spare;
    bool spare_busy;
    bool waiting;
};

struct sl__worker {
    uv_loop_t loop;
    uv_thread_t thread;
    unsigned index;
    struct sl__shared *shared;
    /* One listener per --listen address, then three per --transparent address. */
    struct sl__listener listeners[SL__LISTENERS_MAX];
    size_t n_listeners;
    /* Wakes the loop for mail. */
    uv_async_t wake;
    /* Runs, on the loop's next turn, the connections whose step stopped at its pass bound
     * with work left (conn.c starts and stops it; `resume_list` holds them, `resuming` the
     * rest of the batch its callback is running). Active only while the list is not empty. */
    uv_idle_t resume;
    struct sl__conn *resume_list;
    struct sl__conn *resuming;
    /* The newest snapshot this worker has (a reference), or NULL before the first. */
    struct sl_snapshot *snapshot;
    struct sl_dns *dns;
    /* Open client connections, for draining at shutdown. */
    struct sl__conn *conns;
    size_t n_conns;
    /* Idle upstream connections (struct sl_upstream's idle_link), newest first, and their
     * number. */
    struct sl_list idle;
    size_t n_idle;
    /* Draining: listeners closed, connections finish their request and close. */
    bool draining;
    struct sl__counters counters;
    /* Mailbox from the main thread, under mail_lock: a newer snapshot (a reference), or none
     * at all any more (`mail_withdraw`: the policy lease ran out), and a request to drain or to
     * stop. */
    pthread_mutex_t mail_lock;
    struct sl_snapshot *mail_snapshot;
    bool mail_withdraw;
    bool mail_drain;
    bool mail_stop;
    /* The main thread's last look at this worker for the steering check (proxy.c
     * on_steer_tick()): its thread's CPU time in ns and the connections it had accepted. Only
     * the main thread touches them. */
    uint64_t steer_cpu_ns;
    uint64_t steer_accepted;
    /* While the shared `steer_watch` is set: the connections this worker accepted by the CPU
     * they arrived on (SO_INCOMING_CPU), modulo the shared `steer_workers`. */
    atomic_uint_fast64_t arrived_on[SL__STEER_MAX];
    /* The last info line about a client that refused the proxy's certificate (conn_tls.c;
     * the loop's clock, ms, 0 for none yet), and the refusals since then without a line. */
    uint64_t cert_refused_logged_ms;
    uint64_t cert_refused_unlogged;
};

#endif
