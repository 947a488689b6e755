/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/proxy.h - the data plane daemon (`sluice proxy`, docs/reference/proxy.md §4).
 *
 * The main thread loads the CA, the upstream trust and the first policy, starts `workers`
 * threads (each with its own libuv loop and its own SO_REUSEPORT listener per address, the
 * transparent ones of docs/reference/proxy.md §4.12 included), and then serves the admin
 * socket (and the same routes over mutual TLS with --admin-listen), the DNS responder
 * (--dns-listen, proxy/dnsd.h), SIGHUP reloads and policy-file changes. New snapshots are handed to
 * every worker and the DNS responder; each request is decided against the newest one.
 *
 * SIGUSR1 reopens the audit log (after a rotation). SIGTERM or SIGINT: the listeners and the
 * DNS responder close, requests in flight get `drain_s` seconds to finish, then everything
 * closes and sl_proxy_run() returns 0.
 */
#ifndef SL_PROXY_PROXY_H
#define SL_PROXY_PROXY_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/log.h"
#include "proxy/dns.h"

#define SL_PROXY_LISTEN_MAX      16
#define SL_PROXY_LIST_MAX        256
#define SL_PROXY_DNS_LISTEN_MAX  16
#define SL_PROXY_TRANSPARENT_MAX 16
/* The port of the transparent listener for connections the host's table redirected, when
 * --transparent-port does not say (docs/reference/proxy.md §4.12). */
#define SL_PROXY_TRANSPARENT_PORT 3129

/* Everything `sluice proxy` is told on its command line. Strings are borrowed (argv). */
struct sl_proxy_config {
    /* `--listen ADDR:PORT` (repeatable); default 127.0.0.1:3128. */
    const char *listen[SL_PROXY_LISTEN_MAX];
    size_t n_listen;
    /* `--dns-listen ADDR:PORT` (repeatable, IPv4): the DNS responder (proxy/dnsd.h); none by
     * default. */
    const char *dns_listen[SL_PROXY_DNS_LISTEN_MAX];
    size_t n_dns_listen;
    /* `--transparent ADDR` (repeatable, IPv4): transparent listeners on ADDR:443, ADDR:80 and
     * ADDR:`transparent_port` (docs/reference/proxy.md §4.12); none by default. */
    const char *transparent[SL_PROXY_TRANSPARENT_MAX];
    size_t n_transparent;
    /* `--transparent-port PORT`: SL_PROXY_TRANSPARENT_PORT by default; never 80 or 443. */
    unsigned transparent_port;
    /* Worker threads; 0 means one per core. */
    unsigned workers;
    /* CA files (`--ca-cert/--ca-key`, or `--data DIR` with ca.pem/ca.key). */
    const char *ca_cert;
    const char *ca_key;
    const char *data_dir;
    /* `--policy FILE`, or NULL (then only the admin socket can load one). */
    const char *policy_file;
    /* `--admin-socket PATH`, or NULL (default DATA/proxy.sock when --data is given). */
    const char *admin_socket;
    /* `--admin-listen ADDR:PORT`, or NULL: the admin routes over mutual TLS (http/tls.h) with
     * `--admin-cert`/`--admin-key` (this proxy's), `--admin-client-ca` (the CA of the control
     * plane's certificate) and, optionally, `--admin-crl` (read again when it changes). */
    const char *admin_listen;
    const char *admin_cert;
    const char *admin_key;
    const char *admin_client_ca;
    const char *admin_crl;
    /* `--upstream-ca FILE`, or NULL. */
    const char *upstream_ca;
    /* `--resolve HOST:PORT:ADDR`, parsed. */
    struct sl_dns_pin pins[SL_PROXY_LIST_MAX];
    size_t n_pins;
    /* `--allow-upstream CIDR` and `--deny-upstream ADDR[:PORT]`. */
    const char *allow_upstream[SL_PROXY_LIST_MAX];
    size_t n_allow_upstream;
    const char *deny_upstream[SL_PROXY_LIST_MAX];
    size_t n_deny_upstream;
    /* `--audit-log FILE|-`, or NULL for none. */
    const char *audit_log;
    /* `--audit-failure deny|allow`: while the audit log cannot be written, refuse the requests
     * the policy allows (503 audit-unavailable; the default) or serve them. */
    bool audit_failure_allow;
    /* `--max-connections N` (default 10 000), timeouts in seconds (defaults docs/reference/proxy.md
     * §4.10). */
    unsigned max_connections;
    /* `--max-connections` was given. When it was not and the hard open-files limit cannot hold
     * the default, the proxy lowers it to what the limit holds (docs/reference/proxy.md §4.8). */
    bool max_connections_given;
    /* `--max-connections-per-client N` (default 1 000): client connections one source address
     * may hold at once; beyond it its new ones get 503 client-overloaded. */
    unsigned max_connections_per_client;
    unsigned header_timeout_s;
    unsigned idle_timeout_s;
    unsigned send_timeout_s;
    unsigned upstream_timeout_s;
    unsigned tls_handshake_timeout_s;
    /* `--policy-lease S`: a snapshot pushed through the admin interface stays in force only while
     * the control plane keeps in touch (a GET /v1/status or PUT /v1/snapshot at least every S
     * seconds); past that the proxy drops it and refuses everything (503 no-policy) until the
     * next push. 0 (the default): no lease. Not with `policy_file`. */
    unsigned policy_lease_s;
    /* `--cert-cache N`: minted leaves kept (certs/cache.h); 0 means the cache's default. */
    unsigned cert_cache_entries;
    /* Seconds requests in flight get after SIGTERM. */
    unsigned drain_s;
    enum sl_log_level log_level;
};

/* Fills in the defaults of docs/reference/proxy.md §4.8 and §4.10. */
void sl_proxy_config_init(struct sl_proxy_config *cfg);

/* Runs the proxy until SIGTERM/SIGINT. Returns 0 after a clean stop, or a negative code when
 * it could not start (the reason is logged, naming the file or address at fault). */
SL_MUST_CHECK int sl_proxy_run(const struct sl_proxy_config *cfg);

#endif
