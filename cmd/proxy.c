/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/proxy.c - `sluice proxy`: the flags of docs/reference/proxy.md §4.8, then proxy/proxy.c runs.
 */
#include "proxy/proxy.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "certs/cache.h"
#include "cmd/cmd.h"
#include "cmd/opts.h"

static const char usage[] =
        "usage: sluice proxy [flags]\n"
        "\n"
        "The data plane: an HTTP(S) forward proxy that intercepts TLS with certificates from its\n"
        "own CA, decides every request against the policy, injects credentials on the way out\n"
        "and logs every decision. Without a policy it refuses everything (503 no-policy).\n"
        "\n"
        "flags:\n"
        "  --listen ADDR:PORT        listen here (repeatable; default 127.0.0.1:3128;\n"
        "                            IPv6 as [::1]:3128)\n"
        "  --dns-listen ADDR:PORT    answer DNS here, every A query with ADDR (repeatable;\n"
        "                            IPv4, UDP and TCP; default none)\n"
        "  --transparent ADDR        intercept connections made to ADDR without a proxy:\n"
        "                            TLS on ADDR:443, HTTP on ADDR:80, and what the host's\n"
        "                            firewall redirects to ADDR:PORT (repeatable; IPv4)\n"
        "  --transparent-port PORT   that PORT (default 3129)\n"
        "  --workers N               worker threads (default: one per core)\n"
        "  --data DIR                data directory with ca.pem and ca.key (default:\n"
        "                            $SLUICE_DATA, or ./var); the admin socket defaults to\n"
        "                            DIR/proxy.sock\n"
        "  --ca-cert FILE --ca-key FILE   the CA, instead of --data\n"
        "  --policy FILE             the policy snapshot (reloaded on SIGHUP and on change)\n"
        "  --admin-socket PATH       the admin socket (unix, mode 0600)\n"
        "  --policy-lease S          drop a pushed snapshot and refuse everything (503\n"
        "                            no-policy) when the control plane has not polled or pushed\n"
        "                            for S seconds, until it pushes again (default: no lease)\n"
        "  --admin-listen ADDR:PORT  the admin routes over the network too, under mutual TLS\n"
        "                            (TLS 1.3, a client certificate required); needs:\n"
        "  --admin-cert FILE --admin-key FILE   this proxy's certificate and key\n"
        "                            (sluice pki issue DIR proxy NAME --ip ADDR)\n"
        "  --admin-client-ca FILE    the CA clients' certificates must chain to (DIR/ca.pem)\n"
        "  --admin-crl FILE          the revocation list (DIR/crl.pem), read again when it\n"
        "                            changes (optional)\n"
        "  --upstream-ca FILE        also trust these CAs for upstream servers\n"
        "  --resolve HOST:PORT:ADDR  pin a name to an address (repeatable)\n"
        "  --allow-upstream CIDR     let the proxy dial private addresses in CIDR (repeatable)\n"
        "  --deny-upstream ADDR[:PORT]  never dial this address (repeatable; wins over allows;\n"
        "                            a wildcard 0.0.0.0 or :: is every address of this host)\n"
        "  --audit-log FILE|-        one JSON line per decision (- for standard output)\n"
        "  --audit-failure deny|allow  while the audit log cannot be written: refuse what\n"
        "                            the policy allows (503 audit-unavailable; default) or\n"
        "                            serve it and count the lines held back\n"
        "  --max-connections N       beyond it new clients get 503 overloaded (default 10000)\n"
        "  --max-connections-per-client N   connections one client address may hold; beyond\n"
        "                            it its new ones get 503 client-overloaded (default 1000)\n"
        "  --header-timeout S        seconds for a request head to arrive (default 10)\n"
        "  --idle-timeout S          seconds a kept-alive connection may idle, or a response\n"
        "                            wait for its upstream's next bytes (default 60)\n"
        "  --send-timeout S          seconds a response may wait for a client that takes none\n"
        "                            of it (default 300)\n"
        "  --upstream-timeout S      seconds for an upstream to answer (default 60)\n"
        "  --handshake-timeout S     seconds for a tunnel's TLS handshake (default 10)\n"
        "  --cert-cache N            minted certificates kept, least recently used dropped\n"
        "                            first (default 10000)\n"
        "  --log-level LEVEL         error, warn, info (default), debug or trace\n"
        "  --config FILE             read these flags from FILE (its top and its [proxy]\n"
        "                            section; the command line wins)\n"
        "\n"
        "SIGHUP reloads --policy; SIGUSR1 reopens the audit log (log rotation); SIGTERM stops "
        "accepting, lets requests in flight finish and\n"
        "exits 0.\n";

/* The option strings, before they are checked and converted. */
struct raw {
    const char *listen[SL_PROXY_LISTEN_MAX];
    size_t n_listen;
    const char *transparent_port;
    const char *resolve[SL_PROXY_LIST_MAX];
    size_t n_resolve;
    const char *workers;
    const char *max_connections;
    const char *max_connections_per_client;
    const char *header_timeout;
    const char *idle_timeout;
    const char *send_timeout;
    const char *upstream_timeout;
    const char *handshake_timeout;
    const char *cert_cache;
    const char *policy_lease;
    const char *log_level;
    const char *data;
    const char *audit_failure;
};

static int convert(const struct raw *r, struct sl_proxy_config *cfg)
{
    static const char cmd[] = "proxy";
    const struct sl_opt_uint nums[] = {
        { "--workers", r->workers, 1, 64, &cfg->workers },
        { "--max-connections", r->max_connections, 1, 1000000, &cfg->max_connections },
        { "--max-connections-per-client", r->max_connections_per_client, 1, 1000000,
          &cfg->max_connections_per_client },
        { "--header-timeout", r->header_timeout, 1, 86400, &cfg->header_timeout_s },
        { "--idle-timeout", r->idle_timeout, 1, 86400, &cfg->idle_timeout_s },
        { "--send-timeout", r->send_timeout, 1, 86400, &cfg->send_timeout_s },
        { "--upstream-timeout", r->upstream_timeout, 1, 86400, &cfg->upstream_timeout_s },
        { "--handshake-timeout", r->handshake_timeout, 1, 86400, &cfg->tls_handshake_timeout_s },
        { "--cert-cache", r->cert_cache, 1, SL_LEAF_CACHE_MAX_CAPACITY, &cfg->cert_cache_entries },
        { "--policy-lease", r->policy_lease, 1, 86400, &cfg->policy_lease_s },
        { "--transparent-port", r->transparent_port, 1, 65535, &cfg->transparent_port },
    };
    char err[256];

    for (size_t i = 0; i < r->n_listen; i++) {
        cfg->listen[i] = r->listen[i];
    }
    cfg->n_listen = r->n_listen;
    cfg->max_connections_given = r->max_connections != NULL;
    for (size_t i = 0; i < r->n_resolve; i++) {
        if (sl_dns_pin_parse(r->resolve[i], &cfg->pins[i], err, sizeof(err)) < 0) {
            sl_eprintf("%s: %s", cmd, err);
            return SL_CMD_USAGE;
        }
    }
    cfg->n_pins = r->n_resolve;
    if (sl_opts_uints(cmd, nums, SL_ARRAY_LEN(nums)) != SL_CMD_OK
        || sl_opts_log_level(cmd, r->log_level, &cfg->log_level) != SL_CMD_OK) {
        return SL_CMD_USAGE;
    }
    if (cfg->transparent_port == 80 || cfg->transparent_port == 443) {
        sl_eprintf("%s: option '--transparent-port' cannot be %u: the transparent listeners "
                   "take 80 and 443 themselves",
                   cmd, cfg->transparent_port);
        return SL_CMD_USAGE;
    }
    if (r->audit_failure != NULL) {
        if (strcmp(r->audit_failure, "deny") != 0 && strcmp(r->audit_failure, "allow") != 0) {
            sl_eprintf("%s: option '--audit-failure' needs deny or allow, not '%s'", cmd,
                       r->audit_failure);
            return SL_CMD_USAGE;
        }
        cfg->audit_failure_allow = strcmp(r->audit_failure, "allow") == 0;
    }
    if (cfg->admin_listen != NULL
        && (cfg->admin_cert == NULL || cfg->admin_key == NULL || cfg->admin_client_ca == NULL)) {
        sl_eprintf("%s: --admin-listen needs --admin-cert, --admin-key and --admin-client-ca "
                   "(the admin routes are only served over mutual TLS)",
                   cmd);
        return SL_CMD_USAGE;
    }
    if (cfg->admin_listen == NULL
        && (cfg->admin_cert != NULL || cfg->admin_key != NULL || cfg->admin_client_ca != NULL
            || cfg->admin_crl != NULL)) {
        sl_eprintf("%s: --admin-cert, --admin-key, --admin-client-ca and --admin-crl go with "
                   "--admin-listen",
                   cmd);
        return SL_CMD_USAGE;
    }
    if (cfg->policy_lease_s > 0 && cfg->policy_file != NULL) {
        sl_eprintf("%s: --policy-lease is for snapshots the control plane pushes; --policy FILE "
                   "has no one to renew it",
                   cmd);
        return SL_CMD_USAGE;
    }
    if ((cfg->ca_cert == NULL) != (cfg->ca_key == NULL)) {
        sl_eprintf("%s: --ca-cert and --ca-key go together", cmd);
        return SL_CMD_USAGE;
    }
    if (cfg->ca_cert == NULL || r->data != NULL) {
        cfg->data_dir = sl_opts_data_dir(r->data);
    }
    return SL_CMD_OK;
}

static const char *const sections[] = { "proxy", NULL };

/* The command line (and --config) into `arg`, a struct sl_proxy_config (sl_opts_parse_fn). */
static int parse(int argc, char **argv, void *arg, bool *help, struct sl_conf **conf)
{
    struct sl_proxy_config *cfg = arg;
    struct raw r;
    const char *pos[1];
    size_t n_pos = 0;
    int rc;

    memset(&r, 0, sizeof(r));
    sl_proxy_config_init(cfg);
    {
        const struct sl_opt opts[] = {
            { "--listen", SL_OPT_LIST, NULL, NULL, r.listen, &r.n_listen, SL_PROXY_LISTEN_MAX },
            { "--dns-listen", SL_OPT_LIST, NULL, NULL, cfg->dns_listen, &cfg->n_dns_listen,
              SL_PROXY_DNS_LISTEN_MAX },
            { "--transparent", SL_OPT_LIST, NULL, NULL, cfg->transparent, &cfg->n_transparent,
              SL_PROXY_TRANSPARENT_MAX },
            { "--transparent-port", SL_OPT_VALUE, NULL, &r.transparent_port, NULL, NULL, 0 },
            { "--workers", SL_OPT_VALUE, NULL, &r.workers, NULL, NULL, 0 },
            { "--ca-cert", SL_OPT_VALUE, NULL, &cfg->ca_cert, NULL, NULL, 0 },
            { "--ca-key", SL_OPT_VALUE, NULL, &cfg->ca_key, NULL, NULL, 0 },
            { "--data", SL_OPT_VALUE, NULL, &r.data, NULL, NULL, 0 },
            { "--policy", SL_OPT_VALUE, NULL, &cfg->policy_file, NULL, NULL, 0 },
            { "--admin-socket", SL_OPT_VALUE, NULL, &cfg->admin_socket, NULL, NULL, 0 },
            { "--admin-listen", SL_OPT_VALUE, NULL, &cfg->admin_listen, NULL, NULL, 0 },
            { "--admin-cert", SL_OPT_VALUE, NULL, &cfg->admin_cert, NULL, NULL, 0 },
            { "--admin-key", SL_OPT_VALUE, NULL, &cfg->admin_key, NULL, NULL, 0 },
            { "--admin-client-ca", SL_OPT_VALUE, NULL, &cfg->admin_client_ca, NULL, NULL, 0 },
            { "--admin-crl", SL_OPT_VALUE, NULL, &cfg->admin_crl, NULL, NULL, 0 },
            { "--upstream-ca", SL_OPT_VALUE, NULL, &cfg->upstream_ca, NULL, NULL, 0 },
            { "--resolve", SL_OPT_LIST, NULL, NULL, r.resolve, &r.n_resolve, SL_PROXY_LIST_MAX },
            { "--allow-upstream", SL_OPT_LIST, NULL, NULL, cfg->allow_upstream,
              &cfg->n_allow_upstream, SL_PROXY_LIST_MAX },
            { "--deny-upstream", SL_OPT_LIST, NULL, NULL, cfg->deny_upstream, &cfg->n_deny_upstream,
              SL_PROXY_LIST_MAX },
            { "--audit-log", SL_OPT_VALUE, NULL, &cfg->audit_log, NULL, NULL, 0 },
            { "--audit-failure", SL_OPT_VALUE, NULL, &r.audit_failure, NULL, NULL, 0 },
            { "--max-connections", SL_OPT_VALUE, NULL, &r.max_connections, NULL, NULL, 0 },
            { "--max-connections-per-client", SL_OPT_VALUE, NULL, &r.max_connections_per_client,
              NULL, NULL, 0 },
            { "--header-timeout", SL_OPT_VALUE, NULL, &r.header_timeout, NULL, NULL, 0 },
            { "--idle-timeout", SL_OPT_VALUE, NULL, &r.idle_timeout, NULL, NULL, 0 },
            { "--send-timeout", SL_OPT_VALUE, NULL, &r.send_timeout, NULL, NULL, 0 },
            { "--upstream-timeout", SL_OPT_VALUE, NULL, &r.upstream_timeout, NULL, NULL, 0 },
            { "--handshake-timeout", SL_OPT_VALUE, NULL, &r.handshake_timeout, NULL, NULL, 0 },
            { "--cert-cache", SL_OPT_VALUE, NULL, &r.cert_cache, NULL, NULL, 0 },
            { "--policy-lease", SL_OPT_VALUE, NULL, &r.policy_lease, NULL, NULL, 0 },
            { "--log-level", SL_OPT_VALUE, NULL, &r.log_level, NULL, NULL, 0 },
        };

        rc = sl_opts_parse_config("proxy", sections, argc, argv, opts, SL_ARRAY_LEN(opts), pos, 0,
                                  &n_pos, help, conf);
    }
    if (rc != SL_CMD_OK || *help) {
        return rc;
    }
    return sl_opts_conf_hint("proxy", *conf, convert(&r, cfg));
}

static int start(void *cfg)
{
    int rc = sl_proxy_run(cfg);

    if (rc < 0) {
        sl_eprintf("proxy: could not start (%s); see the log lines above", sl_strerror(rc));
        return SL_CMD_FAIL;
    }
    return SL_CMD_OK;
}

int sl_cmd_proxy_check(int argc, char **argv)
{
    struct sl_proxy_config cfg;

    return sl_opts_daemon(argc, argv, &cfg, parse, NULL, usage);
}

int sl_cmd_proxy(int argc, char **argv)
{
    struct sl_proxy_config cfg;

    return sl_opts_daemon(argc, argv, &cfg, parse, start, usage);
}
