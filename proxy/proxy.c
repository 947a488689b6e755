/* SPDX-License-Identifier: Apache-2.0 */
#include "proxy/proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/ssl.h>
#include <uv.h>

#include "base/buf.h"
#include "base/file.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/notify.h"
#include "certs/ca.h"
#include "certs/cache.h"
#include "certs/mint.h"
#include "http/server.h"
#include "policy/snapshot.h"
#include "proxy/addr.h"
#include "proxy/audit.h"
#include "proxy/dnsd.h"
#include "proxy/proxy_int.h"
#include "proxy/tls.h"
#include "proxy/upstream.h"
#include "proxy/worker.h"

#define ERR_BYTES           512
#define POLL_POLICY_MS      1000
#define DRAIN_CHECK_MS      100
#define TRIM_TICK_MS        500
#define LEASE_TICK_MS       250
#define TRIM_BURST          256u
#define STEER_TICK_MS       1000
#define STEER_TICKS         3
#define STEER_BUSY_PERMILLE 500u
#define STEER_MIN_ACCEPTS   64u
#define STEER_BACK_TICKS    5
#define WORKERS_MAX         64
#define DEFAULT_LISTEN      "127.0.0.1:3128"
#define UPSTREAM_SESSIONS   1024
/* Descriptors beyond two per connection: listeners, the admin socket and its clients, the
 * audit log, the resolver, the thread pool's pipes. */
#define FD_SLACK 256

_Static_assert(WORKERS_MAX <= SL__STEER_MAX, "every worker count can be steered by CPU");

void sl_proxy_config_init(struct sl_proxy_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->transparent_port = SL_PROXY_TRANSPARENT_PORT;
    cfg->max_connections = 10000;
    cfg->max_connections_per_client = 1000;
    cfg->header_timeout_s = 10;
    cfg->idle_timeout_s = 60;
    cfg->send_timeout_s = 300;
    cfg->upstream_timeout_s = 60;
    cfg->tls_handshake_timeout_s = 10;
    cfg->drain_s = 30;
    cfg->log_level = SL_LOG_INFO;
}

/* The main thread's state. */
struct proxy {
    const struct sl_proxy_config *cfg;
    /* What `cfg` points to: the configuration given, --max-connections fitted to the open
     * files limit when it was not given (fit_fd_limit()). */
    struct sl_proxy_config cfg_own;
    uv_loop_t loop;
    struct sl__shared shared;
    struct sl_ca *ca;
    struct sl_minter *minter;
    struct sl__worker *workers;
    unsigned n_workers;
    unsigned n_started;
    /* The loaded snapshot (a reference), NULL before the first. */
    struct sl_snapshot *snapshot;
    uv_signal_t sig_hup;
    uv_signal_t sig_usr1;
    uv_signal_t sig_term;
    uv_signal_t sig_int;
    uv_fs_poll_t policy_poll;
    bool policy_polling;
    uv_timer_t drain_timer;
    uint64_t drain_started_ms;
    /* Gives the allocator's free pages back after a burst of connections (see on_trim_tick). */
    uv_timer_t trim_timer;
    /* Connections opened (both sides) as of the last tick, and as of the last trim. */
    uint64_t trim_seen;
    uint64_t trim_done;
    /* The policy lease (--policy-lease): checked every second; when the control plane was last
     * heard from (the loop's clock, ms), and whether the lease ran out since the last push. */
    uv_timer_t lease_timer;
    uint64_t lease_heard_ms;
    bool lease_expired;
    /* While new connections are steered to workers by CPU (§4.8; worker 0's listeners say
     * whether they are), the check of on_steer_tick() runs every STEER_TICK_MS: when it last
     * ran (uv_hrtime()) and how many checks in a row found one worker taking the load. */
    uv_timer_t steer_timer;
    uint64_t steer_at_ns;
    unsigned steer_streak;
    /* Once the steering came off, the check runs on: the workers' `arrived_on` counts summed
     * by group as of the last check, and how many checks in a row found the new connections
     * spread over the CPUs. */
    uint64_t arrived_seen[SL__STEER_MAX];
    unsigned back_streak;
    struct sl_http_server *admin;
    /* The TLS context of --admin-listen, NULL without it. */
    struct sl_http_tls *admin_tls;
    /* The DNS responder (--dns-listen), NULL without one or once it closed; `dns_stats` keeps
     * its counts when it has (/metrics). */
    struct sl_dnsd *dnsd;
    struct sl_dnsd_stats dns_stats;
    bool stopping;
    /* The signal handlers and timer above are initialised. */
    bool handles_live;
    uint64_t started_ns;
    char admin_path[4096];
};

/*
 * Snapshots.
 */

static void publish(struct proxy *p, struct sl_snapshot *s)
{
    sl_snapshot_unref(p->snapshot);
    p->snapshot = s;
    /* A push is word from the control plane: the lease starts again. */
    p->lease_expired = false;
    p->lease_heard_ms = uv_now(&p->loop);
    for (unsigned i = 0; i < p->n_started; i++) {
        sl__worker_post_snapshot(&p->workers[i], sl_snapshot_ref(s));
    }
    if (p->dnsd != NULL) {
        sl_dnsd_set_snapshot(p->dnsd, s);
    }
    sl_log(SL_LOG_INFO, 0, "msg=\"policy loaded\" version=%lld environments=%zu clients=%zu",
           (long long)sl_snapshot_version(s), sl_snapshot_env_count(s),
           sl_snapshot_client_count(s));
}

/* The policy lease ran out: no snapshot any more, anywhere in the process, until the next push.
 * Fails closed: every request is then refused 503 no-policy and every relay and tunnel is
 * checked again (and closes). */
static void withdraw(struct proxy *p)
{
    sl_log(SL_LOG_ERROR, 0,
           "msg=\"policy lease ran out: no word from the control plane; every request is refused "
           "(503 no-policy) until it pushes again\" version=%lld lease_s=%u",
           (long long)sl_snapshot_version(p->snapshot), p->cfg->policy_lease_s);
    sl_snapshot_unref(p->snapshot);
    p->snapshot = NULL;
    p->lease_expired = true;
    for (unsigned i = 0; i < p->n_started; i++) {
        sl__worker_post_withdraw(&p->workers[i]);
    }
    if (p->dnsd != NULL) {
        sl_dnsd_set_snapshot(p->dnsd, NULL);
    }
}

static void on_lease_tick(uv_timer_t *t)
{
    struct proxy *p = t->data;

    if (p->snapshot != NULL
        && uv_now(&p->loop) - p->lease_heard_ms > (uint64_t)p->cfg->policy_lease_s * 1000u) {
        withdraw(p);
    }
}

static void log_errors(const char *origin, const struct sl_policy_errors *errs)
{
    for (size_t i = 0; i < errs->count; i++) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"invalid policy\" source=%s path=%s error=\"%s\"", origin,
               errs->items[i].path, errs->items[i].message);
    }
    if (errs->truncated) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"invalid policy: more errors not shown\" source=%s", origin);
    }
}

/* Reads a whole file (at most SL_SNAPSHOT_MAX_BYTES) into `out`. */
static int read_file(const char *path, struct sl_buf *out, char *err, size_t errlen)
{
    int rc = sl_file_read(path, out, err, errlen);

    if (rc == SL_ETOOBIG) {
        (void)snprintf(err, errlen, "%s is larger than %u bytes", path,
                       (unsigned)SL_SNAPSHOT_MAX_BYTES);
    }
    return rc == SL_ENOTFOUND ? SL_EIO : rc;
}

/* Loads --policy. At start a bad file stops the proxy; later it keeps the loaded policy. */
static int load_policy_file(struct proxy *p, bool at_start)
{
    char err[ERR_BYTES] = "";
    struct sl_policy_errors errs = { NULL, 0, false };
    struct sl_snapshot *s = NULL;
    struct sl_buf json;
    int rc;

    sl_buf_init(&json, SL_SNAPSHOT_MAX_BYTES);
    rc = read_file(p->cfg->policy_file, &json, err, sizeof(err));
    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"%s\" %s", err,
               at_start ? "" : "action=\"keeping the loaded policy\"");
        sl_buf_finish(&json);
        return rc;
    }
    if (p->snapshot != NULL && sl_snapshot_is_identical(p->snapshot, json.p, json.len)) {
        sl_buf_finish(&json);
        return 0;
    }
    rc = sl_snapshot_parse(json.p, json.len, &s, &errs);
    sl_buf_finish(&json);
    if (rc < 0) {
        log_errors(p->cfg->policy_file, &errs);
        sl_policy_errors_finish(&errs);
        if (!at_start) {
            sl_log(SL_LOG_ERROR, 0, "msg=\"policy file rejected; keeping version %lld\" file=%s",
                   p->snapshot != NULL ? (long long)sl_snapshot_version(p->snapshot) : 0LL,
                   p->cfg->policy_file);
        }
        return rc;
    }
    sl_policy_errors_finish(&errs);
    /* A file edit may keep its version; it may not go back behind what a push loaded. */
    if (p->snapshot != NULL && sl_snapshot_version(s) < sl_snapshot_version(p->snapshot)) {
        sl_log(SL_LOG_ERROR, 0,
               "msg=\"policy file rejected: version %lld is older than the loaded %lld\" file=%s",
               (long long)sl_snapshot_version(s), (long long)sl_snapshot_version(p->snapshot),
               p->cfg->policy_file);
        sl_snapshot_unref(s);
        return SL_EEXIST;
    }
    publish(p, s);
    return 0;
}

/*
 * The admin socket (docs/reference/proxy.md §4.9).
 */

static uint64_t sum(struct proxy *p, size_t offset)
{
    uint64_t total = 0;

    for (unsigned i = 0; i < p->n_started; i++) {
        const atomic_uint_fast64_t *c =
                (const atomic_uint_fast64_t *)(const void *)((const char *)&p->workers[i].counters
                                                             + offset);

        total += atomic_load_explicit(c, memory_order_relaxed);
    }
    return total;
}

#define SUM(p, field) sum((p), offsetof(struct sl__counters, field))

/* The audit log's state in the status (docs/reference/proxy.md §4.9): `null` without one. */
static int status_audit(struct proxy *p, struct sl_buf *b)
{
    struct sl_audit_health h;

    if (p->shared.audit == NULL) {
        return sl_buf_append_str(b, ",\"audit\":null");
    }
    sl_audit_health(p->shared.audit, &h);
    SL_TRY(sl_buf_printf(b,
                         ",\"audit\":{\"healthy\":%s,\"failure_mode\":\"%s\","
                         "\"write_failures\":%llu,\"dropped\":%llu,\"pending_bytes\":%zu,"
                         "\"reopens\":%llu,\"error\":",
                         h.healthy ? "true" : "false",
                         p->cfg->audit_failure_allow ? "allow" : "deny",
                         (unsigned long long)h.write_failures, (unsigned long long)h.dropped,
                         h.pending_bytes, (unsigned long long)h.reopens));
    if (h.healthy) {
        return sl_buf_append_str(b, "\"\"}");
    }
    SL_TRY(sl_http_json_append_string(b, strerror(h.last_errno), strlen(strerror(h.last_errno))));
    return sl_buf_append_str(b, "}");
}

static void admin_status(struct proxy *p, struct sl_http_exchange *x,
                         const struct sl_http_request *req)
{
    struct sl_leaf_cache_stats cs;
    struct sl_buf b;
    int rc;

    (void)req;
    sl_leaf_cache_stats(p->shared.leaves, &cs);
    sl_buf_init(&b, 4096);
    rc = sl_buf_append_str(&b, "{\"version\":");
    if (rc == 0 && p->snapshot != NULL) {
        rc = sl_buf_printf(&b, "%lld", (long long)sl_snapshot_version(p->snapshot));
    } else if (rc == 0) {
        rc = sl_buf_append_str(&b, "null");
    }
    if (rc == 0 && p->cfg->policy_lease_s > 0) {
        rc = sl_buf_printf(&b, ",\"policy_lease\":{\"seconds\":%u,\"expired\":%s}",
                           p->cfg->policy_lease_s, p->lease_expired ? "true" : "false");
    } else if (rc == 0) {
        rc = sl_buf_append_str(&b, ",\"policy_lease\":null");
    }
    if (rc == 0) {
        rc = sl_buf_printf(
                &b,
                ",\"workers\":%u,\"connections\":%llu,\"uptime_s\":%.0f,"
                "\"requests\":{\"allowed\":%llu,\"denied\":%llu,\"failed\":%llu,\"challenged\":%"
                "llu},"
                "\"tls_handshakes\":%llu,\"certificates\":{\"hits\":%llu,\"misses\":%llu,"
                "\"mints\":%llu,\"entries\":%zu},\"upstream\":{\"connects\":%llu,\"reused\":%llu}",
                p->n_started, (unsigned long long)SUM(p, connections_open),
                (double)(uv_hrtime() - p->started_ns) / 1e9,
                (unsigned long long)SUM(p, requests_allowed),
                (unsigned long long)SUM(p, requests_denied),
                (unsigned long long)SUM(p, requests_failed),
                (unsigned long long)SUM(p, requests_challenged),
                (unsigned long long)SUM(p, tls_handshakes), (unsigned long long)cs.hits,
                (unsigned long long)cs.misses, (unsigned long long)cs.mints, cs.entries,
                (unsigned long long)SUM(p, upstream_connects),
                (unsigned long long)SUM(p, upstream_reused));
    }
    if (rc == 0) {
        rc = status_audit(p, &b);
    }
    if (rc == 0) {
        rc = sl_buf_append_str(&b, "}");
    }
    if (rc < 0) {
        sl_http_respond_error(x, 500, "cannot build the status");
    } else {
        sl_http_respond(x, 200, "application/json", b.p, b.len);
    }
    sl_buf_finish(&b);
}

/* The request latency histogram: buckets summed over the workers, then cumulated. */
static int metrics_latency(struct proxy *p, struct sl_buf *b)
{
    uint64_t total = 0;
    uint64_t sum_us = SUM(p, latency_sum_us);

    SL_TRY(sl_buf_append_str(b, "# HELP sluice_request_duration_seconds Time from a request's "
                                "head to its audit line (CONNECTs that open a tunnel "
                                "excluded).\n"
                                "# TYPE sluice_request_duration_seconds histogram\n"));
    for (size_t i = 0; i < SL__LATENCY_BUCKETS; i++) {
        total += sum(p, offsetof(struct sl__counters, latency) + i * sizeof(atomic_uint_fast64_t));
        if (i < SL__LATENCY_BUCKETS - 1) {
            /* %g spells the bounds as Prometheus clients do: "0.001", "2.5", "10". */
            SL_TRY(sl_buf_printf(b, "sluice_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
                                 (double)sl__latency_bounds_us[i] / 1e6,
                                 (unsigned long long)total));
        } else {
            SL_TRY(sl_buf_printf(b, "sluice_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n",
                                 (unsigned long long)total));
        }
    }
    return sl_buf_printf(b,
                         "sluice_request_duration_seconds_sum %llu.%06llu\n"
                         "sluice_request_duration_seconds_count %llu\n",
                         (unsigned long long)(sum_us / 1000000u),
                         (unsigned long long)(sum_us % 1000000u), (unsigned long long)total);
}

/* Connections and requests cut by a timer, by what they were waiting for. */
static int metrics_timeouts(struct proxy *p, struct sl_buf *b)
{
    static const char *const phases[SL__TIMEOUT_N] = { "header", "handshake", "upstream", "idle",
                                                       "send" };

    SL_TRY(sl_buf_append_str(b, "# HELP sluice_timeouts_total Connections and requests cut by "
                                "a timeout (docs/reference/proxy.md 4.10).\n"
                                "# TYPE sluice_timeouts_total counter\n"));
    for (size_t i = 0; i < SL__TIMEOUT_N; i++) {
        SL_TRY(sl_buf_printf(
                b, "sluice_timeouts_total{phase=\"%s\"} %llu\n", phases[i],
                (unsigned long long)sum(p, offsetof(struct sl__counters, timeouts)
                                                   + i * sizeof(atomic_uint_fast64_t))));
    }
    return 0;
}

/* Transfers cut short, by the side that cut them and why (the audit line's "aborted", §4.7). */
static int metrics_aborted(struct proxy *p, struct sl_buf *b)
{
    SL_TRY(sl_buf_append_str(b, "# HELP sluice_transfers_aborted_total Transfers cut short, by "
                                "side and cause (docs/reference/proxy.md 4.7).\n"
                                "# TYPE sluice_transfers_aborted_total counter\n"));
    for (int side = 0; side < SL__SIDE_N; side++) {
        for (int cause = SL__ABORT_NONE + 1; cause < SL__ABORT_N; cause++) {
            size_t at =
                    offsetof(struct sl__counters, aborted)
                    + ((size_t)side * SL__ABORT_N + (size_t)cause) * sizeof(atomic_uint_fast64_t);

            SL_TRY(sl_buf_printf(b,
                                 "sluice_transfers_aborted_total{side=\"%s\",cause=\"%s\"} %llu\n",
                                 sl__abort_side_name((enum sl__abort_side)side),
                                 sl__abort_cause_name((enum sl__abort_cause)cause),
                                 (unsigned long long)sum(p, at)));
        }
    }
    return 0;
}

/* Connections each worker accepted: how new connections spread over them (§4.8). */
static int metrics_workers(struct proxy *p, struct sl_buf *b)
{
    SL_TRY(sl_buf_printf(b,
                         "# HELP sluice_worker_steering 1 while new connections go to the worker "
                         "of the CPU they arrived on, 0 while the kernel spreads them by address "
                         "(docs/reference/proxy.md 4.8).\n"
                         "# TYPE sluice_worker_steering gauge\n"
                         "sluice_worker_steering %d\n",
                         p->n_started > 0 && sl__worker_steered(&p->workers[0]) ? 1 : 0));
    SL_TRY(sl_buf_append_str(b, "# HELP sluice_worker_connections_total Client connections "
                                "accepted, by worker (docs/reference/proxy.md 4.8).\n"
                                "# TYPE sluice_worker_connections_total counter\n"));
    for (unsigned i = 0; i < p->n_started; i++) {
        SL_TRY(sl_buf_printf(
                b, "sluice_worker_connections_total{worker=\"%u\"} %llu\n", i,
                (unsigned long long)atomic_load_explicit(
                        &p->workers[i].counters.connections_accepted, memory_order_relaxed)));
    }
    return 0;
}

/* The audit log's alarm: healthy or not, failed writes, what waits for the disk. */
static int metrics_audit(struct proxy *p, struct sl_buf *b)
{
    struct sl_audit_health h;

    sl_audit_health(p->shared.audit, &h);
    return sl_buf_printf(b,
                         "# HELP sluice_audit_healthy 1 while the audit log takes every line, 0 "
                         "from a failed write until the held lines are written.\n"
                         "# TYPE sluice_audit_healthy gauge\nsluice_audit_healthy %d\n"
                         "# TYPE sluice_audit_write_failures_total counter\n"
                         "sluice_audit_write_failures_total %llu\n"
                         "# TYPE sluice_audit_pending_bytes gauge\n"
                         "sluice_audit_pending_bytes %zu\n"
                         "# TYPE sluice_audit_reopens_total counter\n"
                         "sluice_audit_reopens_total %llu\n",
                         h.healthy ? 1 : 0, (unsigned long long)h.write_failures, h.pending_bytes,
                         (unsigned long long)h.reopens);
}

/* The DNS responder's answers by rcode, and what got none (zeros without --dns-listen). */
static int metrics_dns(struct proxy *p, struct sl_buf *b)
{
    static const enum sl_dnsd_rcode rcodes[] = { SL_DNSD_NOERROR, SL_DNSD_FORMERR, SL_DNSD_NOTIMP,
                                                 SL_DNSD_REFUSED };
    struct sl_dnsd_stats st = p->dns_stats;

    if (p->dnsd != NULL) {
        sl_dnsd_stats(p->dnsd, &st);
    }
    SL_TRY(sl_buf_append_str(b, "# HELP sluice_dns_queries_total DNS queries answered by "
                                "--dns-listen, by response code.\n"
                                "# TYPE sluice_dns_queries_total counter\n"));
    for (size_t i = 0; i < SL_ARRAY_LEN(rcodes); i++) {
        SL_TRY(sl_buf_printf(b, "sluice_dns_queries_total{rcode=\"%s\"} %llu\n",
                             sl_dnsd_rcode_name(rcodes[i]),
                             (unsigned long long)st.answered[rcodes[i]]));
    }
    return sl_buf_printf(b,
                         "# TYPE sluice_dns_dropped_total counter\nsluice_dns_dropped_total %llu\n",
                         (unsigned long long)st.dropped);
}

/* Prometheus text format 0.0.4. */
static int metrics_text(struct proxy *p, struct sl_buf *b)
{
    struct sl_leaf_cache_stats cs;

    sl_leaf_cache_stats(p->shared.leaves, &cs);
    SL_TRY(sl_buf_append_str(b, "# HELP sluice_requests_total Requests and refusals decided.\n"
                                "# TYPE sluice_requests_total counter\n"));
    SL_TRY(sl_buf_printf(b, "sluice_requests_total{decision=\"allow\",reason=\"\"} %llu\n",
                         (unsigned long long)SUM(p, requests_allowed)));
    /* The 407s that ask a client for its credentials (docs/reference/proxy.md §4.7): not
     * refusals, so counted apart from the no-identity denials. */
    SL_TRY(sl_buf_printf(b,
                         "sluice_requests_total{decision=\"challenge\",reason=\"no-identity\"} "
                         "%llu\n",
                         (unsigned long long)SUM(p, requests_challenged)));
    for (int r = SL_REASON_NO_POLICY; r <= SL_REASON_LAST; r++) {
        SL_TRY(sl_buf_printf(
                b, "sluice_requests_total{decision=\"deny\",reason=\"%s\"} %llu\n",
                sl_reason_code((enum sl_reason)r),
                (unsigned long long)sum(p, offsetof(struct sl__counters, denied_by_reason)
                                                   + (size_t)r * sizeof(atomic_uint_fast64_t))));
        SL_TRY(sl_buf_printf(
                b, "sluice_requests_total{decision=\"error\",reason=\"%s\"} %llu\n",
                sl_reason_code((enum sl_reason)r),
                (unsigned long long)sum(p, offsetof(struct sl__counters, failed_by_reason)
                                                   + (size_t)r * sizeof(atomic_uint_fast64_t))));
    }
    SL_TRY(sl_buf_printf(
            b,
            "# TYPE sluice_connections_open gauge\nsluice_connections_open %llu\n"
            "# TYPE sluice_connections_total counter\nsluice_connections_total %llu\n"
            "# TYPE sluice_connections_refused_total counter\n"
            "sluice_connections_refused_total{reason=\"overloaded\"} %llu\n"
            "sluice_connections_refused_total{reason=\"client-overloaded\"} %llu\n"
            "sluice_connections_refused_total{reason=\"out-of-memory\"} %llu\n"
            "# TYPE sluice_connections_refused_unanswered_total counter\n"
            "sluice_connections_refused_unanswered_total %llu\n"
            "# TYPE sluice_connections_refusing gauge\nsluice_connections_refusing %u\n"
            "# TYPE sluice_tls_handshakes_total counter\nsluice_tls_handshakes_total %llu\n"
            "# TYPE sluice_tls_handshake_failures_total counter\n"
            "sluice_tls_handshake_failures_total %llu\n"
            "# TYPE sluice_tls_certificate_refusals_total counter\n"
            "sluice_tls_certificate_refusals_total %llu\n"
            "# TYPE sluice_certificate_cache_hits_total counter\n"
            "sluice_certificate_cache_hits_total %llu\n"
            "# TYPE sluice_certificate_cache_misses_total counter\n"
            "sluice_certificate_cache_misses_total %llu\n"
            "# TYPE sluice_certificates_minted_total counter\n"
            "sluice_certificates_minted_total %llu\n"
            "# TYPE sluice_certificate_cache_evictions_total counter\n"
            "sluice_certificate_cache_evictions_total %llu\n"
            "# TYPE sluice_certificate_cache_entries gauge\n"
            "sluice_certificate_cache_entries %zu\n"
            "# TYPE sluice_certificate_cache_capacity gauge\n"
            "sluice_certificate_cache_capacity %zu\n"
            "# TYPE sluice_upstream_connections_total counter\n"
            "sluice_upstream_connections_total %llu\n"
            "# TYPE sluice_upstream_reused_total counter\nsluice_upstream_reused_total %llu\n"
            "# TYPE sluice_bytes_total counter\nsluice_bytes_total{direction=\"up\"} %llu\n"
            "sluice_bytes_total{direction=\"down\"} %llu\n"
            "# TYPE sluice_audit_dropped_total counter\nsluice_audit_dropped_total %llu\n"
            "# TYPE sluice_policy_version gauge\nsluice_policy_version %lld\n",
            (unsigned long long)SUM(p, connections_open),
            (unsigned long long)SUM(p, connections_accepted),
            (unsigned long long)SUM(p, connections_refused),
            (unsigned long long)SUM(p, connections_refused_client),
            (unsigned long long)SUM(p, connections_refused_memory),
            (unsigned long long)SUM(p, connections_refused_unanswered),
            (unsigned)atomic_load(&p->shared.refusing), (unsigned long long)SUM(p, tls_handshakes),
            (unsigned long long)SUM(p, tls_handshake_failures),
            (unsigned long long)SUM(p, tls_certificate_refusals), (unsigned long long)cs.hits,
            (unsigned long long)cs.misses, (unsigned long long)cs.mints,
            (unsigned long long)cs.evictions, cs.entries, cs.capacity,
            (unsigned long long)SUM(p, upstream_connects),
            (unsigned long long)SUM(p, upstream_reused), (unsigned long long)SUM(p, bytes_up),
            (unsigned long long)SUM(p, bytes_down),
            (unsigned long long)(p->shared.audit != NULL ? sl_audit_dropped(p->shared.audit) : 0),
            p->snapshot != NULL ? (long long)sl_snapshot_version(p->snapshot) : 0LL));
    SL_TRY(metrics_timeouts(p, b));
    SL_TRY(metrics_aborted(p, b));
    SL_TRY(metrics_workers(p, b));
    SL_TRY(metrics_audit(p, b));
    SL_TRY(metrics_dns(p, b));
    return metrics_latency(p, b);
}

static void admin_metrics(struct proxy *p, struct sl_http_exchange *x,
                          const struct sl_http_request *req)
{
    struct sl_buf b;

    (void)req;
    sl_buf_init(&b, 1 << 20);
    if (metrics_text(p, &b) < 0) {
        sl_http_respond_error(x, 500, "cannot build the metrics");
    } else {
        sl_http_respond(x, 200, "text/plain; version=0.0.4", b.p, b.len);
    }
    sl_buf_finish(&b);
}

static void admin_snapshot(struct proxy *p, struct sl_http_exchange *x,
                           const struct sl_http_request *req)
{
    struct sl_policy_errors errs = { NULL, 0, false };
    struct sl_snapshot *s = NULL;
    struct sl_buf b;
    int rc;

    if (p->snapshot != NULL && sl_snapshot_is_identical(p->snapshot, req->body.p, req->body.n)) {
        char ok[64];
        int n = snprintf(ok, sizeof(ok), "{\"version\":%lld}",
                         (long long)sl_snapshot_version(p->snapshot));

        sl_http_respond(x, 200, "application/json", ok, (size_t)n);
        return;
    }
    rc = sl_snapshot_parse(req->body.p, req->body.n, &s, &errs);
    if (rc < 0) {
        sl_buf_init(&b, 8192);
        if (errs.count > 0) {
            if (sl_buf_append_str(&b, "{\"error\":") < 0
                || sl_http_json_append_string(&b, errs.items[0].message,
                                              strlen(errs.items[0].message))
                           < 0
                || sl_buf_append_str(&b, ",\"path\":") < 0
                || sl_http_json_append_string(&b, errs.items[0].path, strlen(errs.items[0].path))
                           < 0
                || sl_buf_append_str(&b, "}") < 0) {
                sl_buf_reset(&b);
            }
        }
        log_errors("admin socket", &errs);
        if (b.len > 0) {
            sl_http_respond(x, rc == SL_ENOMEM ? 503 : 400, "application/json", b.p, b.len);
        } else {
            sl_http_respond_error(x, rc == SL_ENOMEM ? 503 : 400, sl_strerror(rc));
        }
        sl_buf_finish(&b);
        sl_policy_errors_finish(&errs);
        return;
    }
    sl_policy_errors_finish(&errs);
    if (p->snapshot != NULL && sl_snapshot_version(s) <= sl_snapshot_version(p->snapshot)) {
        char msg[160];

        (void)snprintf(msg, sizeof(msg), "version %lld is not newer than the loaded version %lld",
                       (long long)sl_snapshot_version(s),
                       (long long)sl_snapshot_version(p->snapshot));
        sl_snapshot_unref(s);
        sl_http_respond_error(x, 409, msg);
        return;
    }
    publish(p, s);
    {
        char ok[64];
        int n = snprintf(ok, sizeof(ok), "{\"version\":%lld}", (long long)sl_snapshot_version(s));

        sl_http_respond(x, 200, "application/json", ok, (size_t)n);
    }
}

typedef void admin_fn(struct proxy *p, struct sl_http_exchange *x,
                      const struct sl_http_request *req);

/* The admin socket's endpoints: a path, the one method it takes (GET also answers HEAD), and
 * what a 405 tells a client that used another. */
static const struct {
    const char *path;
    const char *method;
    admin_fn *fn;
    const char *use;
} admin_routes[] = {
    { "/v1/snapshot", "PUT", admin_snapshot, "use PUT with the snapshot as the body" },
    { "/v1/status", "GET", admin_status, "use GET" },
    { "/metrics", "GET", admin_metrics, "use GET" },
};

static void on_admin_request(struct sl_http_exchange *x, const struct sl_http_request *req,
                             void *arg)
{
    struct proxy *p = arg;

    /* The control plane's poll and its pushes renew the policy lease; /metrics does not (a
     * scraper is not the control plane). */
    if (strcmp(req->path, "/v1/status") == 0 || strcmp(req->path, "/v1/snapshot") == 0) {
        p->lease_heard_ms = uv_now(&p->loop);
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(admin_routes); i++) {
        const char *method = admin_routes[i].method;

        if (strcmp(req->path, admin_routes[i].path) != 0) {
            continue;
        }
        if (strcmp(req->method, method) != 0
            && !(strcmp(method, "GET") == 0 && strcmp(req->method, "HEAD") == 0)) {
            sl_http_respond_error(x, 405, admin_routes[i].use);
            return;
        }
        admin_routes[i].fn(p, x, req);
        return;
    }
    sl_http_respond_error(
            x, 404, "no such endpoint (try GET /v1/status, GET /metrics or PUT /v1/snapshot)");
}

/*
 * Startup and shutdown.
 */

static int join_path(char *out, size_t cap, const char *dir, const char *file)
{
    int n = snprintf(out, cap, "%s/%s", dir, file);

    return n < 0 || (size_t)n >= cap ? SL_ETOOBIG : 0;
}

static int setup_tls(struct proxy *p)
{
    const struct sl_proxy_config *cfg = p->cfg;
    struct sl_leaf_cache_config cc = { .capacity = cfg->cert_cache_entries };
    char cert[4096];
    char key[4096];
    char err[ERR_BYTES] = "";
    int rc;

    if (cfg->ca_cert != NULL || cfg->ca_key != NULL) {
        if (cfg->ca_cert == NULL || cfg->ca_key == NULL) {
            sl_log(SL_LOG_ERROR, 0, "msg=\"--ca-cert and --ca-key go together\"");
            return SL_EINVAL;
        }
        rc = snprintf(cert, sizeof(cert), "%s", cfg->ca_cert) < 0 ? SL_EINVAL : 0;
        rc = rc == 0 && snprintf(key, sizeof(key), "%s", cfg->ca_key) < 0 ? SL_EINVAL : rc;
    } else if (cfg->data_dir != NULL) {
        rc = join_path(cert, sizeof(cert), cfg->data_dir, SL_CA_CERT_FILE);
        if (rc == 0) {
            rc = join_path(key, sizeof(key), cfg->data_dir, SL_CA_KEY_FILE);
        }
    } else {
        sl_log(SL_LOG_ERROR, 0,
               "msg=\"no CA: give --data DIR (with ca.pem and ca.key, see "
               "sluice ca init) or --ca-cert FILE --ca-key FILE\"");
        return SL_EINVAL;
    }
    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"CA path too long\"");
        return rc;
    }
    rc = sl_ca_load(cert, key, &p->ca, err, sizeof(err));
    if (rc == 0) {
        rc = sl_minter_create(p->ca, &p->minter, err, sizeof(err));
    }
    if (rc == 0) {
        rc = sl_leaf_cache_create(p->minter, &cc, &p->shared.leaves);
        if (rc < 0) {
            (void)snprintf(err, sizeof(err), "cannot create the certificate cache: %s",
                           sl_strerror(rc));
        }
    }
    if (rc == 0) {
        rc = sl_tls_server_ctx_new(&p->shared.server_ctx, err, sizeof(err));
    }
    if (rc == 0) {
        rc = sl_tls_client_ctx_new(cfg->upstream_ca, UPSTREAM_SESSIONS, &p->shared.client_ctx, err,
                                   sizeof(err));
    }
    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"%s\"", err);
    }
    return rc;
}

static bool is_unspecified(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET) {
        return ((const struct sockaddr_in *)(const void *)ss)->sin_addr.s_addr == htonl(INADDR_ANY);
    }
    return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr);
}

/* Denies every address of `family` (AF_UNSPEC: both) the host's interfaces have now, on `port`
 * (0: any port), to the dialler. `what` names the option for an error message. */
static int deny_interfaces(struct proxy *p, int family, uint16_t port, const char *what, char *err,
                           size_t errlen)
{
    uv_interface_address_t *ifs = NULL;
    int n = 0;
    int rc = uv_interface_addresses(&ifs, &n);

    if (rc < 0) {
        (void)snprintf(err, errlen, "cannot list the interface addresses for %s: %s", what,
                       uv_strerror(rc));
        return rc;
    }
    for (int i = 0; rc == 0 && i < n; i++) {
        int f = ifs[i].address.address4.sin_family;
        char addr[INET6_ADDRSTRLEN];
        char entry[INET6_ADDRSTRLEN + 16];

        if (family != AF_UNSPEC && f != family) {
            continue;
        }
        if (f == AF_INET) {
            rc = uv_ip4_name(&ifs[i].address.address4, addr, sizeof(addr));
        } else {
            rc = uv_ip6_name(&ifs[i].address.address6, addr, sizeof(addr));
        }
        /* A link-local address carries no zone here; the class check refuses those. */
        if (rc < 0 || strchr(addr, '%') != NULL) {
            rc = 0;
            continue;
        }
        if (port == 0) {
            (void)snprintf(entry, sizeof(entry), "%s", addr);
        } else if (f == AF_INET) {
            (void)snprintf(entry, sizeof(entry), "%s:%u", addr, (unsigned)port);
        } else {
            (void)snprintf(entry, sizeof(entry), "[%s]:%u", addr, (unsigned)port);
        }
        rc = sl_addr_policy_add_deny(p->shared.addrs, entry, err, errlen);
    }
    uv_free_interface_addresses(ifs, n);
    return rc;
}

/* Denies one listen address to the dialler. A wildcard (0.0.0.0, ::) listens on every
 * interface, so it is denied as a wildcard (every loopback address, proxy/addr.h) and every
 * address of that family the host has now is denied with the port. */
static int deny_own_address(struct proxy *p, const struct sockaddr_storage *ss, const char *flag,
                            const char *text, char *err, size_t errlen)
{
    char what[160];
    uint16_t port;

    if (!is_unspecified(ss)) {
        return sl_addr_policy_add_deny(p->shared.addrs, text, err, errlen);
    }
    port = ss->ss_family == AF_INET
                   ? ntohs(((const struct sockaddr_in *)(const void *)ss)->sin_port)
                   : ntohs(((const struct sockaddr_in6 *)(const void *)ss)->sin6_port);
    (void)snprintf(what, sizeof(what), ss->ss_family == AF_INET ? "0.0.0.0:%u" : "[::]:%u",
                   (unsigned)port);
    SL_TRY(sl_addr_policy_add_deny(p->shared.addrs, what, err, errlen));
    (void)snprintf(what, sizeof(what), "%s %s", flag, text);
    return deny_interfaces(p, ss->ss_family, port, what, err, errlen);
}

/* Adds one --deny-upstream entry. A wildcard (0.0.0.0 or ::, with a port or not: `sluice up`
 * passes the control plane's listen address, which may be one) stands for every address of
 * the host, so it is also expanded into the interface addresses; :: into both families, as
 * a listener there may take IPv4 too. */
static int deny_upstream(struct proxy *p, const char *entry, char *err, size_t errlen)
{
    static const unsigned char zero[16] = { 0 };
    unsigned char bytes[16] = { 0 };
    char host[INET6_ADDRSTRLEN] = "";
    const char *start = entry;
    const char *port = NULL;
    const char *close = NULL;
    char what[160];
    int family = AF_INET;
    size_t len;

    SL_TRY(sl_addr_policy_add_deny(p->shared.addrs, entry, err, errlen));
    /* The entry is well formed by now: "[v6]", "[v6]:port", "v6", "v4" or "v4:port". */
    if (entry[0] == '[') {
        close = strchr(entry, ']');
    }
    if (close != NULL) {
        start = entry + 1;
        len = (size_t)(close - start);
        port = close[1] == ':' ? close + 2 : NULL;
        family = AF_INET6;
    } else if (strchr(entry, ':') != strrchr(entry, ':')) {
        len = strlen(entry);
        family = AF_INET6;
    } else {
        port = strchr(entry, ':');
        len = port != NULL ? (size_t)(port - entry) : strlen(entry);
        port = port != NULL ? port + 1 : NULL;
    }
    if (len >= sizeof(host)) {
        return 0;
    }
    memcpy(host, start, len);
    host[len] = '\0';
    if (inet_pton(family, host, bytes) != 1 || memcmp(bytes, zero, sizeof(zero)) != 0) {
        return 0;
    }
    (void)snprintf(what, sizeof(what), "--deny-upstream %s", entry);
    return deny_interfaces(p, family == AF_INET ? AF_INET : AF_UNSPEC,
                           port != NULL ? (uint16_t)strtoul(port, NULL, 10) : 0, what, err, errlen);
}

/* Parses an IPv4 address of this host given to `flag` (not 0.0.0.0: a transparent listener or
 * the DNS responder answers for one address) with `port`, into `out`. */
static int parse_own_ipv4(const char *flag, const char *text, uint16_t port,
                          struct sockaddr_storage *out, char *err, size_t errlen)
{
    struct sockaddr_in *sin = (struct sockaddr_in *)(void *)out;

    memset(out, 0, sizeof(*out));
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    if (inet_pton(AF_INET, text, &sin->sin_addr) != 1
        || sin->sin_addr.s_addr == htonl(INADDR_ANY)) {
        (void)snprintf(err, errlen, "%s %s: expected an IPv4 address of this host (not 0.0.0.0)",
                       flag, text);
        return SL_EINVAL;
    }
    return 0;
}

static bool same_listen_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family) {
        return false;
    }
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const struct sockaddr_in *)(const void *)a;
        const struct sockaddr_in *y = (const struct sockaddr_in *)(const void *)b;

        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    {
        const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)(const void *)a;
        const struct sockaddr_in6 *y = (const struct sockaddr_in6 *)(const void *)b;

        return x->sin6_port == y->sin6_port
               && memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
    }
}

/* Adds one listening address of `kind` (text: `text`, for messages), denied to the dialler:
 * the proxy never dials itself (docs/reference/proxy.md §4.4). Two listeners on one address and
 * port would share its connections (SO_REUSEPORT): refused. */
static int add_listen(struct proxy *p, struct sl__listen *listens, size_t *n,
                      const struct sockaddr_storage *ss, enum sl__listen_kind kind,
                      const char *text, char *err, size_t errlen)
{
    char entry[INET6_ADDRSTRLEN + 16];
    char addr[INET6_ADDRSTRLEN] = "";

    for (size_t i = 0; i < *n; i++) {
        if (same_listen_addr(&listens[i].addr, ss)) {
            (void)snprintf(err, errlen, "%s: that address and port are listened on twice", text);
            return SL_EINVAL;
        }
    }
    if (kind != SL__LISTEN_PROXY) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)(const void *)ss;

        (void)inet_ntop(AF_INET, &sin->sin_addr, addr, sizeof(addr));
        (void)snprintf(entry, sizeof(entry), "%s:%u", addr, (unsigned)ntohs(sin->sin_port));
        text = entry;
    }
    SL_TRY(deny_own_address(p, ss, "--listen", text, err, errlen));
    listens[*n].addr = *ss;
    listens[*n].kind = kind;
    (*n)++;
    return 0;
}

/* The transparent listeners of one --transparent address: 443 and 80, and the redirect port. */
static int add_transparent(struct proxy *p, const char *text, struct sl__listen *listens, size_t *n,
                           char *err, size_t errlen)
{
    static const uint16_t direct[] = { 443, 80 };
    struct sockaddr_storage ss;

    for (size_t k = 0; k < SL_ARRAY_LEN(direct); k++) {
        SL_TRY(parse_own_ipv4("--transparent", text, direct[k], &ss, err, errlen));
        SL_TRY(add_listen(p, listens, n, &ss, SL__LISTEN_TRANSPARENT, text, err, errlen));
    }
    SL_TRY(parse_own_ipv4("--transparent", text, (uint16_t)p->cfg->transparent_port, &ss, err,
                          errlen));
    return add_listen(p, listens, n, &ss, SL__LISTEN_REDIRECT, text, err, errlen);
}

/* The DNS responder's addresses (--dns-listen): IPv4 addresses of this host, with their port. */
static int setup_dns_addresses(struct proxy *p, struct sockaddr_in *dns, char *err, size_t errlen)
{
    const struct sl_proxy_config *cfg = p->cfg;

    for (size_t i = 0; i < cfg->n_dns_listen; i++) {
        struct sockaddr_storage ss;
        const struct sockaddr_in *sin = (const struct sockaddr_in *)(const void *)&ss;

        SL_TRY(sl__listen_addr_parse(cfg->dns_listen[i], &ss, err, errlen));
        if (ss.ss_family != AF_INET || sin->sin_addr.s_addr == htonl(INADDR_ANY)) {
            (void)snprintf(err, errlen,
                           "--dns-listen %s: expected IPv4:PORT, an address of this host (not "
                           "0.0.0.0): an A query is answered with it",
                           cfg->dns_listen[i]);
            return SL_EINVAL;
        }
        for (size_t k = 0; k < i; k++) {
            if (dns[k].sin_port == sin->sin_port
                && dns[k].sin_addr.s_addr == sin->sin_addr.s_addr) {
                (void)snprintf(err, errlen, "--dns-listen %s: given twice", cfg->dns_listen[i]);
                return SL_EINVAL;
            }
        }
        dns[i] = *sin;
    }
    return 0;
}

static int setup_addresses(struct proxy *p, struct sl__listen *listens, size_t *n_listens,
                           struct sockaddr_in *dns)
{
    const struct sl_proxy_config *cfg = p->cfg;
    char err[ERR_BYTES] = "";
    int rc = sl_addr_policy_create(&p->shared.addrs);

    for (size_t i = 0; rc == 0 && i < cfg->n_allow_upstream; i++) {
        rc = sl_addr_policy_add_allow(p->shared.addrs, cfg->allow_upstream[i], err, sizeof(err));
    }
    for (size_t i = 0; rc == 0 && i < cfg->n_deny_upstream; i++) {
        rc = deny_upstream(p, cfg->deny_upstream[i], err, sizeof(err));
    }
    *n_listens = 0;
    for (size_t i = 0; rc == 0 && i < (cfg->n_listen > 0 ? cfg->n_listen : 1); i++) {
        const char *l = cfg->n_listen > 0 ? cfg->listen[i] : DEFAULT_LISTEN;
        struct sockaddr_storage ss;

        rc = sl__listen_addr_parse(l, &ss, err, sizeof(err));
        if (rc == 0) {
            rc = add_listen(p, listens, n_listens, &ss, SL__LISTEN_PROXY, l, err, sizeof(err));
        }
    }
    for (size_t i = 0; rc == 0 && i < cfg->n_transparent; i++) {
        rc = add_transparent(p, cfg->transparent[i], listens, n_listens, err, sizeof(err));
    }
    if (rc == 0) {
        rc = setup_dns_addresses(p, dns, err, sizeof(err));
    }
    for (size_t i = 0; rc == 0 && i < cfg->n_dns_listen; i++) {
        /* Nor does it dial its own DNS responder. */
        rc = sl_addr_policy_add_deny(p->shared.addrs, cfg->dns_listen[i], err, sizeof(err));
    }
    if (rc == 0 && cfg->admin_listen != NULL) {
        struct sockaddr_storage ss;
        char ignored[ERR_BYTES];

        /* Nor its own admin listener: a client let out to that address would hold the admin
         * server's connections (the control plane's pushes and lease renewals wait behind
         * them). An address that does not parse here (port 0, bound at random later) is left
         * to the admin server, which refuses what it cannot listen on. */
        if (sl__listen_addr_parse(cfg->admin_listen, &ss, ignored, sizeof(ignored)) == 0) {
            rc = deny_own_address(p, &ss, "--admin-listen", cfg->admin_listen, err, sizeof(err));
        }
    }
    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"%s\"", err[0] != '\0' ? err : sl_strerror(rc));
    }
    return rc;
}

static void on_policy_changed(uv_fs_poll_t *h, int status, const uv_stat_t *prev,
                              const uv_stat_t *curr)
{
    struct proxy *p = h->data;

    (void)prev;
    (void)curr;
    if (status < 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"cannot watch the policy file\" file=%s err=%s",
               p->cfg->policy_file, uv_strerror(status));
        return;
    }
    (void)load_policy_file(p, false);
}

/* The DNS responder stops answering; its counts stay for /metrics. */
static void close_dnsd(struct proxy *p)
{
    if (p->dnsd != NULL) {
        sl_dnsd_stats(p->dnsd, &p->dns_stats);
        sl_dnsd_close(p->dnsd);
        p->dnsd = NULL;
    }
}

static void close_main_handles(struct proxy *p)
{
    close_dnsd(p);
    if (!p->handles_live) {
        return;
    }
    p->handles_live = false;
    uv_close((uv_handle_t *)&p->sig_hup, NULL);
    uv_close((uv_handle_t *)&p->sig_usr1, NULL);
    /* Closing the handle gave SIGUSR1 its default action (the end of the process) back. */
    (void)signal(SIGUSR1, SIG_IGN);
    uv_close((uv_handle_t *)&p->sig_term, NULL);
    uv_close((uv_handle_t *)&p->sig_int, NULL);
    if (p->policy_polling) {
        uv_close((uv_handle_t *)&p->policy_poll, NULL);
    }
    uv_close((uv_handle_t *)&p->drain_timer, NULL);
    uv_close((uv_handle_t *)&p->trim_timer, NULL);
    uv_close((uv_handle_t *)&p->lease_timer, NULL);
    uv_close((uv_handle_t *)&p->steer_timer, NULL);
    if (p->admin != NULL) {
        sl_http_server_close(p->admin, NULL, NULL);
        p->admin = NULL;
    }
}

static void on_drain_tick(uv_timer_t *t)
{
    struct proxy *p = t->data;
    uint64_t open = 0;

    for (unsigned i = 0; i < p->n_started; i++) {
        open += sl__worker_open_connections(&p->workers[i]);
    }
    if (open > 0 && uv_now(&p->loop) - p->drain_started_ms < (uint64_t)p->cfg->drain_s * 1000u) {
        return;
    }
    if (open > 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"drain time over; closing connections\" open=%llu",
               (unsigned long long)open);
    }
    (void)uv_timer_stop(t);
    for (unsigned i = 0; i < p->n_started; i++) {
        sl__worker_post_stop(&p->workers[i]);
    }
    close_main_handles(p);
}

/*
 * A burst of new connections leaves the allocator's heaps full of holes: each TLS handshake's
 * transient memory (records, key shares, certificate messages) was freed between the long-lived
 * objects of its neighbours, and glibc returns only the top of a heap by itself. Once at least
 * TRIM_BURST connections were opened since the last trim and the count then stood still for a
 * whole tick, malloc_trim() hands the free pages inside the heaps back to the kernel (madvise;
 * the address space stays). It runs on the main thread, never on a worker's loop, and only
 * after a real burst: a trim walks every heap, so steady traffic with a few new connections
 * now and then never pays for one.
 */
static void on_trim_tick(uv_timer_t *t)
{
    struct proxy *p = t->data;
    uint64_t seen = SUM(p, connections_accepted) + SUM(p, upstream_connects);

    if (seen != p->trim_seen) {
        p->trim_seen = seen;
        return;
    }
    if (seen - p->trim_done >= TRIM_BURST) {
        p->trim_done = seen;
        (void)malloc_trim(0);
    }
}

/*
 * The way off steering by CPU, and back (docs/reference/proxy.md §4.8, --workers). Steering
 * pays when connections arrive on the CPUs of the threads that opened them (loopback, veth):
 * they spread over the workers as those threads spread over the CPUs. When they all arrive on
 * one CPU (a network card with a single receive queue, say), one worker takes every connection
 * while the others idle. Every STEER_TICK_MS the main thread compares the workers. When
 * STEER_TICKS checks in a row find that one worker was busy for at least STEER_BUSY_PERMILLE
 * of the time, took at least 1.5 times its fair share of at least STEER_MIN_ACCEPTS new
 * connections, and another worker was busy for under a quarter of that, the program comes off
 * the listening groups: from then on the kernel spreads connections by their addresses, as it
 * does without steering. An info line says so.
 *
 * Then the workers count the CPUs their new connections arrive on (`steer_watch`), and the
 * check goes on: when STEER_BACK_TICKS checks in a row find at least STEER_MIN_ACCEPTS new
 * connections of which no worker's CPUs took over 1.25 times their fair share, the program
 * goes back on, and another info line says so. The two thresholds differ so that a load at the
 * edge does not switch it every few seconds.
 *
 * steer_look() reads worker `w`'s CPU time and accepted connections, and returns through `busy`
 * and `took` how much of each came since the last look (no time when the kernel cannot give
 * it: the last reading then stays the base of the next).
 */
static void steer_look(struct sl__worker *w, uint64_t *busy, uint64_t *took)
{
    uint64_t cpu = sl__worker_cpu_ns(w);
    uint64_t accepted =
            atomic_load_explicit(&w->counters.connections_accepted, memory_order_relaxed);

    *busy = 0;
    if (cpu >= w->steer_cpu_ns) {
        *busy = cpu - w->steer_cpu_ns;
        w->steer_cpu_ns = cpu;
    }
    *took = accepted - w->steer_accepted;
    w->steer_accepted = accepted;
}

/* The base of the next check while steered: now, every worker's CPU time and accepts. */
static void steer_rebase(struct proxy *p)
{
    uint64_t busy;
    uint64_t took;

    p->steer_at_ns = uv_hrtime();
    p->steer_streak = 0;
    for (unsigned i = 0; i < p->n_started; i++) {
        steer_look(&p->workers[i], &busy, &took);
    }
}

/* The new connections since the last look, by the group of CPUs whose connections the steering
 * would send to one worker: returns their number, and through `most` and `group` the largest
 * group's. */
static uint64_t arrivals_look(struct proxy *p, uint64_t *most, unsigned *group)
{
    unsigned n = p->shared.steer_workers;
    uint64_t total = 0;

    *most = 0;
    *group = 0;
    for (unsigned k = 0; k < n && k < SL__STEER_MAX; k++) {
        uint64_t seen = 0;

        for (unsigned i = 0; i < p->n_started; i++) {
            seen += atomic_load_explicit(&p->workers[i].arrived_on[k], memory_order_relaxed);
        }
        total += seen - p->arrived_seen[k];
        if (seen - p->arrived_seen[k] > *most) {
            *most = seen - p->arrived_seen[k];
            *group = k;
        }
        p->arrived_seen[k] = seen;
    }
    return total;
}

static void check_steer_back(struct proxy *p)
{
    unsigned n = p->shared.steer_workers;
    uint64_t most;
    unsigned group;
    uint64_t total = arrivals_look(p, &most, &group);
    bool spread = total >= STEER_MIN_ACCEPTS && most * n * 4u <= total * 5u;

    p->back_streak = spread ? p->back_streak + 1 : 0;
    sl_log(SL_LOG_DEBUG, 0,
           "msg=\"steering check\" steering=off largest_group=%u took=%llu of=%llu spread=%s",
           group, (unsigned long long)most, (unsigned long long)total, spread ? "yes" : "no");
    if (p->back_streak < STEER_BACK_TICKS) {
        return;
    }
    atomic_store_explicit(&p->shared.steer_watch, false, memory_order_relaxed);
    if (!sl__worker_steer(&p->workers[0])) {
        /* The kernel refused it (logged): the spread by address stays for good. */
        (void)uv_timer_stop(&p->steer_timer);
        return;
    }
    steer_rebase(p);
    sl_log(SL_LOG_INFO, 0,
           "msg=\"new connections arrive on several CPUs again: each goes to the worker of its "
           "CPU from now on\" largest_group=%u took=%llu of=%llu checks=%u",
           group, (unsigned long long)most, (unsigned long long)total, p->back_streak);
}

static void on_steer_tick(uv_timer_t *t)
{
    struct proxy *p = t->data;
    uint64_t busy[WORKERS_MAX];
    uint64_t took[WORKERS_MAX];
    uint64_t now = uv_hrtime();
    uint64_t dt = now - p->steer_at_ns;
    uint64_t total = 0;
    uint64_t cold = UINT64_MAX;
    unsigned hot = 0;
    uint64_t most;
    unsigned group;
    bool skewed;

    SL_BUG_ON(p->n_started > WORKERS_MAX);
    if (!sl__worker_steered(&p->workers[0])) {
        check_steer_back(p);
        return;
    }
    p->steer_at_ns = now;
    for (unsigned i = 0; i < p->n_started; i++) {
        steer_look(&p->workers[i], &busy[i], &took[i]);
        total += took[i];
        if (busy[i] > busy[hot]) {
            hot = i;
        }
    }
    for (unsigned i = 0; i < p->n_started; i++) {
        if (i != hot && busy[i] < cold) {
            cold = busy[i];
        }
    }
    skewed = p->n_started > 1 && dt > 0 && total >= STEER_MIN_ACCEPTS
             && busy[hot] * 1000u >= dt * STEER_BUSY_PERMILLE && cold * 4u < busy[hot]
             && took[hot] * p->n_started * 2u >= total * 3u;
    p->steer_streak = skewed ? p->steer_streak + 1 : 0;
    sl_log(SL_LOG_DEBUG, 0,
           "msg=\"steering check\" busiest=%u busy_pct=%llu least_busy_pct=%llu took=%llu of=%llu "
           "skewed=%s",
           hot, (unsigned long long)(dt > 0 ? busy[hot] * 100u / dt : 0),
           (unsigned long long)(dt > 0 ? cold * 100u / dt : 0), (unsigned long long)took[hot],
           (unsigned long long)total, skewed ? "yes" : "no");
    if (p->steer_streak < STEER_TICKS) {
        return;
    }
    sl__worker_unsteer(&p->workers[0]);
    if (sl__worker_steered(&p->workers[0])) {
        /* The kernel refused (logged): the steering stays, unchecked. */
        (void)uv_timer_stop(&p->steer_timer);
        return;
    }
    /* From now on the workers count where connections arrive; this look is the base. */
    (void)arrivals_look(p, &most, &group);
    p->back_streak = 0;
    atomic_store_explicit(&p->shared.steer_watch, true, memory_order_relaxed);
    sl_log(SL_LOG_INFO, 0,
           "msg=\"new connections arrive on one CPU: the kernel spreads them over the workers "
           "by address from now on\" worker=%u busy_pct=%llu took=%llu of=%llu checks=%u",
           hot, (unsigned long long)(busy[hot] * 100u / dt), (unsigned long long)took[hot],
           (unsigned long long)total, p->steer_streak);
}

static void begin_stop(struct proxy *p, const char *why)
{
    if (p->stopping) {
        return;
    }
    p->stopping = true;
    /* Worker 0's listeners close with the drain: the steering check must not touch them. */
    if (p->handles_live) {
        (void)uv_timer_stop(&p->steer_timer);
    }
    sl_log(SL_LOG_INFO, 0,
           "msg=\"stopping: no new connections; finishing requests in flight\" "
           "signal=%s drain_s=%u",
           why, p->cfg->drain_s);
    for (unsigned i = 0; i < p->n_started; i++) {
        sl__worker_post_drain(&p->workers[i]);
    }
    /* Like the listeners: no new query is answered. */
    close_dnsd(p);
    if (p->policy_polling) {
        (void)uv_fs_poll_stop(&p->policy_poll);
    }
    p->drain_started_ms = uv_now(&p->loop);
    (void)uv_timer_start(&p->drain_timer, on_drain_tick, DRAIN_CHECK_MS, DRAIN_CHECK_MS);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct proxy *p = h->data;

    if (signum == SIGHUP) {
        if (p->cfg->policy_file != NULL) {
            sl_log(SL_LOG_INFO, 0, "msg=\"SIGHUP: reloading the policy\" file=%s",
                   p->cfg->policy_file);
            (void)load_policy_file(p, false);
        }
        return;
    }
    if (signum == SIGUSR1) {
        /* Log rotation (docs/reference/proxy.md §4.8): the writer reopens between two lines. */
        if (p->shared.audit != NULL) {
            sl_log(SL_LOG_INFO, 0, "msg=\"SIGUSR1: reopening the audit log\"");
            sl_audit_reopen(p->shared.audit);
        }
        return;
    }
    begin_stop(p, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

static int start_dnsd(struct proxy *p, const struct sockaddr_in *dns)
{
    char err[ERR_BYTES] = "";
    int rc;

    if (p->cfg->n_dns_listen == 0) {
        return 0;
    }
    rc = sl_dnsd_start(&p->loop, dns, p->cfg->n_dns_listen, p->shared.audit, &p->dnsd, err,
                       sizeof(err));
    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"%s\"", err);
        return rc;
    }
    sl_dnsd_set_snapshot(p->dnsd, p->snapshot);
    return 0;
}

static int start_main_handles(struct proxy *p)
{
    const struct sl_proxy_config *cfg = p->cfg;
    struct sl_http_server_config ac = { .error_key = "error" };
    char err[ERR_BYTES] = "";
    int rc;

    /* These fail only on invalid arguments. */
    SL_BUG_ON(uv_signal_init(&p->loop, &p->sig_hup) != 0);
    SL_BUG_ON(uv_signal_init(&p->loop, &p->sig_usr1) != 0);
    SL_BUG_ON(uv_signal_init(&p->loop, &p->sig_term) != 0);
    SL_BUG_ON(uv_signal_init(&p->loop, &p->sig_int) != 0);
    SL_BUG_ON(uv_timer_init(&p->loop, &p->drain_timer) != 0);
    SL_BUG_ON(uv_timer_init(&p->loop, &p->trim_timer) != 0);
    SL_BUG_ON(uv_timer_init(&p->loop, &p->lease_timer) != 0);
    SL_BUG_ON(uv_timer_init(&p->loop, &p->steer_timer) != 0);
    p->handles_live = true;
    p->steer_timer.data = p;
    if (p->n_started > 0 && sl__worker_steered(&p->workers[0])) {
        steer_rebase(p);
        (void)uv_timer_start(&p->steer_timer, on_steer_tick, STEER_TICK_MS, STEER_TICK_MS);
    }
    p->trim_timer.data = p;
    (void)uv_timer_start(&p->trim_timer, on_trim_tick, TRIM_TICK_MS, TRIM_TICK_MS);
    p->lease_timer.data = p;
    if (p->cfg->policy_lease_s > 0) {
        (void)uv_timer_start(&p->lease_timer, on_lease_tick, LEASE_TICK_MS, LEASE_TICK_MS);
    }
    p->sig_hup.data = p;
    p->sig_usr1.data = p;
    p->sig_term.data = p;
    p->sig_int.data = p;
    p->drain_timer.data = p;
    (void)uv_signal_start(&p->sig_hup, on_signal, SIGHUP);
    (void)uv_signal_start(&p->sig_usr1, on_signal, SIGUSR1);
    (void)uv_signal_start(&p->sig_term, on_signal, SIGTERM);
    (void)uv_signal_start(&p->sig_int, on_signal, SIGINT);
    if (cfg->policy_file != NULL) {
        rc = uv_fs_poll_init(&p->loop, &p->policy_poll);
        if (rc == 0) {
            p->policy_poll.data = p;
            p->policy_polling = true;
            rc = uv_fs_poll_start(&p->policy_poll, on_policy_changed, cfg->policy_file,
                                  POLL_POLICY_MS);
        }
        if (rc < 0) {
            sl_log(SL_LOG_ERROR, 0, "msg=\"cannot watch the policy file\" file=%s err=%s",
                   cfg->policy_file, uv_strerror(rc));
            return rc;
        }
    }
    if (cfg->admin_socket != NULL) {
        rc = snprintf(p->admin_path, sizeof(p->admin_path), "%s", cfg->admin_socket) < 0 ? SL_EINVAL
                                                                                         : 0;
    } else if (cfg->data_dir != NULL) {
        rc = join_path(p->admin_path, sizeof(p->admin_path), cfg->data_dir, "proxy.sock");
    } else {
        p->admin_path[0] = '\0';
        rc = 0;
    }
    if (rc < 0 || (p->admin_path[0] == '\0' && cfg->admin_listen == NULL)) {
        return rc;
    }
    rc = sl_http_server_create(&p->loop, &ac, on_admin_request, p, &p->admin);
    if (rc == 0 && p->admin_path[0] != '\0') {
        rc = sl_http_server_listen_unix(p->admin, p->admin_path, 0600, err, sizeof(err));
        if (rc < 0) {
            sl_log(SL_LOG_ERROR, 0, "msg=\"cannot open the admin socket: %s\"", err);
        }
    }
    if (rc == 0 && cfg->admin_listen != NULL) {
        rc = sl_http_server_listen_tls(p->admin, cfg->admin_listen, p->admin_tls, err, sizeof(err));
        if (rc < 0) {
            sl_log(SL_LOG_ERROR, 0, "msg=\"cannot open the admin listener: %s\"", err);
        }
    }
    return rc;
}

/* The TLS context of --admin-listen (docs/reference/proxy.md §4.9), read before anything
 * starts: a missing or unreadable file stops the proxy here. */
static int setup_admin_tls(struct proxy *p)
{
    const struct sl_proxy_config *cfg = p->cfg;
    const struct sl_http_tls_files files = {
        .cert = cfg->admin_cert,
        .key = cfg->admin_key,
        .ca = cfg->admin_client_ca,
        .crl = cfg->admin_crl,
        .peer_kind = "control",
    };
    char err[ERR_BYTES] = "";
    int rc;

    if (cfg->admin_listen == NULL) {
        return 0;
    }
    if (files.cert == NULL || files.key == NULL || files.ca == NULL) {
        sl_log(SL_LOG_ERROR, 0,
               "msg=\"--admin-listen needs --admin-cert, --admin-key and --admin-client-ca\"");
        return SL_EINVAL;
    }
    rc = sl_http_tls_create(&files, true, &p->admin_tls, err, sizeof(err));
    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"cannot set up the admin listener's TLS: %s\"", err);
    }
    return rc;
}

static unsigned worker_count(const struct sl_proxy_config *cfg)
{
    unsigned n = cfg->workers;

    if (n == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);

        n = cores > 0 ? (unsigned)cores : 1;
    }
    return n > WORKERS_MAX ? WORKERS_MAX : n;
}

/* Descriptors `n` connections need with `workers` workers: two each, the refusals being
 * answered, each worker's idle upstream pool (whose connections no client holds) and slack. */
static rlim_t fds_needed(unsigned n, unsigned workers)
{
    return (rlim_t)n * 2u + SL__REFUSING_MAX + (rlim_t)workers * SL_UPSTREAM_IDLE_MAX + FD_SLACK;
}

/* Each connection takes two descriptors (client and upstream), each refusal being answered one
 * (SL__REFUSING_MAX at most: the others are closed at once), and each idle pooled upstream
 * connection one (SL_UPSTREAM_IDLE_MAX per worker). A soft RLIMIT_NOFILE below that
 * (1024 is a common default) would make accept() fail with EMFILE long before
 * --max-connections answers 503 overloaded: a few hundred idle clients would lock everyone
 * else out. So the soft limit is raised as far as needed, up to the hard limit. When even that
 * is short: without --max-connections, the default is lowered to what the limit holds (so that
 * the clients beyond get their 503, as designed, and nothing needs saying but an info line: a
 * hard limit of 20 000 holds 9 680 with 2 workers); a --max-connections that was given is kept, and
 * the log warns that the limit cannot hold it. */
static void fit_fd_limit(struct sl_proxy_config *cfg)
{
    struct rlimit rl;
    unsigned workers = worker_count(cfg);
    rlim_t want = fds_needed(cfg->max_connections, workers);
    rlim_t holds;

    if (getrlimit(RLIMIT_NOFILE, &rl) == -1) {
        return;
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        rlim_t old = rl.rlim_cur;

        rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
        if (setrlimit(RLIMIT_NOFILE, &rl) == -1) {
            rl.rlim_cur = old;
        }
        sl_log(SL_LOG_DEBUG, 0, "msg=\"open files limit raised\" from=%llu to=%llu",
               (unsigned long long)old, (unsigned long long)rl.rlim_cur);
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want) {
        return;
    }
    holds = rl.rlim_cur > fds_needed(0, workers) ? (rl.rlim_cur - fds_needed(0, workers)) / 2u : 0;
    if (!cfg->max_connections_given && holds > 0) {
        sl_log(SL_LOG_INFO, 0,
               "msg=\"no --max-connections given: the default lowered to what the open files "
               "limit holds (503 overloaded beyond)\" max_connections=%llu limit=%llu",
               (unsigned long long)holds, (unsigned long long)rl.rlim_cur);
        cfg->max_connections = (unsigned)holds;
        return;
    }
    sl_log(SL_LOG_WARN, 0,
           "msg=\"the open files limit is lower than --max-connections needs; clients "
           "beyond it fail to connect instead of getting 503 overloaded\" limit=%llu "
           "needed=%llu",
           (unsigned long long)rl.rlim_cur, (unsigned long long)want);
}

static void teardown(struct proxy *p)
{
    for (unsigned i = 0; i < p->n_started; i++) {
        sl__worker_join(&p->workers[i]);
    }
    sl_free(p->workers);
    sl_snapshot_unref(p->snapshot);
    sl_audit_close(p->shared.audit);
    sl_leaf_cache_destroy(p->shared.leaves);
    sl_minter_destroy(p->minter);
    sl_ca_destroy(p->ca);
    SSL_CTX_free(p->shared.server_ctx);
    SSL_CTX_free(p->shared.client_ctx);
    sl_addr_policy_destroy(p->shared.addrs);
    /* After the workers: their connections gave their slots back as they were freed. */
    sl_peers_free(p->shared.peers);
    (void)uv_run(&p->loop, UV_RUN_DEFAULT);
    /* The admin server borrowed it; it is gone with the loop's last handles. */
    sl_http_tls_free(p->admin_tls);
    if (uv_loop_close(&p->loop) != 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"main loop closed with handles open\"");
    }
}

int sl_proxy_run(const struct sl_proxy_config *cfg)
{
    struct sl__listen listens[SL__LISTENERS_MAX];
    struct sockaddr_in dns[SL_PROXY_DNS_LISTEN_MAX];
    struct proxy *p;
    size_t n_listens = 0;
    char err[ERR_BYTES] = "";
    int rc;

    sl_log_set_level(cfg->log_level);
    p = sl_calloc(1, sizeof(*p));
    if (p == NULL) {
        return SL_ENOMEM;
    }
    p->cfg_own = *cfg;
    fit_fd_limit(&p->cfg_own);
    cfg = &p->cfg_own;
    p->cfg = cfg;
    p->shared.cfg = cfg;
    p->started_ns = uv_hrtime();
    rc = uv_loop_init(&p->loop);
    if (rc < 0) {
        sl_free(p);
        return rc;
    }
    rc = sl_peers_new(cfg->max_connections, cfg->max_connections_per_client, &p->shared.peers);
    if (rc < 0) {
        sl_log(SL_LOG_ERROR, 0, "msg=\"cannot create the table of connections per client: %s\"",
               sl_strerror(rc));
    }
    if (rc == 0) {
        rc = setup_tls(p);
    }
    if (rc == 0) {
        rc = setup_admin_tls(p);
    }
    if (rc == 0) {
        rc = setup_addresses(p, listens, &n_listens, dns);
    }
    if (rc == 0 && cfg->audit_log != NULL) {
        rc = sl_audit_open(cfg->audit_log, 0, &p->shared.audit, err, sizeof(err));
        if (rc < 0) {
            sl_log(SL_LOG_ERROR, 0, "msg=\"%s\"", err);
        }
    }
    if (rc == 0 && cfg->policy_file != NULL) {
        rc = load_policy_file(p, true);
    }
    if (rc == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);

        p->n_workers = worker_count(cfg);
        /* By CPU only when every worker has a CPU of its own to take connections from: with
         * more workers than CPUs, the surplus would never get one. */
        p->shared.steer_workers =
                p->n_workers > 1 && cores >= (long)p->n_workers ? p->n_workers : 0;
        p->workers = sl_calloc(p->n_workers, sizeof(*p->workers));
        rc = p->workers == NULL ? SL_ENOMEM : 0;
    }
    for (unsigned i = 0; rc == 0 && i < p->n_workers; i++) {
        rc = sl__worker_init(&p->workers[i], i, &p->shared, listens, n_listens, err, sizeof(err));
        if (rc < 0) {
            sl_log(SL_LOG_ERROR, 0, "msg=\"%s\"", err);
            break;
        }
        if (p->snapshot != NULL) {
            p->workers[i].snapshot = sl_snapshot_ref(p->snapshot);
        }
        rc = sl__worker_start(&p->workers[i]);
        if (rc < 0) {
            sl_log(SL_LOG_ERROR, 0, "msg=\"cannot start a worker thread: %s\"", uv_strerror(rc));
            break;
        }
        p->n_started++;
    }
    if (rc == 0) {
        rc = start_main_handles(p);
    }
    if (rc == 0) {
        rc = start_dnsd(p, dns);
    }
    if (rc < 0) {
        for (unsigned i = 0; i < p->n_started; i++) {
            sl__worker_post_stop(&p->workers[i]);
        }
        if (!p->stopping) {
            p->stopping = true;
            close_main_handles(p);
        }
        teardown(p);
        sl_free(p);
        return rc;
    }
    sl_log(SL_LOG_INFO, 0,
           "msg=\"proxy started\" listen=%s workers=%u policy=%s admin=%s admin_listen=%s "
           "transparent=%s dns=%s",
           cfg->n_listen > 0 ? cfg->listen[0] : DEFAULT_LISTEN, p->n_started,
           p->snapshot != NULL ? "loaded" : "none (every request gets 503 no-policy)",
           p->admin_path[0] != '\0' ? p->admin_path : "none",
           cfg->admin_listen != NULL ? cfg->admin_listen : "none",
           cfg->n_transparent > 0 ? cfg->transparent[0] : "none",
           cfg->n_dns_listen > 0 ? cfg->dns_listen[0] : "none");
    /* A Type=notify unit (the packaged sluice-proxy.service) is started once every listener
     * accepts. */
    (void)sl_notify(getenv("NOTIFY_SOCKET"), "READY=1\nSTATUS=accepting connections");
    (void)uv_run(&p->loop, UV_RUN_DEFAULT);
    teardown(p);
    sl_free(p);
    sl_log(SL_LOG_INFO, 0, "msg=\"proxy stopped\"");
    return 0;
}
