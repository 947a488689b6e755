/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/control.c - `sluice control`: the flags of docs/reference/cli.md §1.4, then control/control.c
 * runs.
 */
#include "control/control.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "cmd/cmd.h"
#include "cmd/opts.h"

static const char usage[] =
        "usage: sluice control [flags]\n"
        "\n"
        "The control plane: the REST API of environments, static clients, resolution and\n"
        "sandboxes (HTTP/1.1 JSON, bearer tokens from `sluice user add`), over the database\n"
        "DIR/sluice.db.\n"
        "The encryption key comes from $SLUICE_ENCRYPTION_KEY, else DIR/encryption.key.\n"
        "\n"
        "flags:\n"
        "  --listen ADDR:PORT          the API address (default 127.0.0.1:8080)\n"
        "  --data DIR                  data directory (default: $SLUICE_DATA, or ./var)\n"
        "  --proxy-admin-socket PATH   a proxy's admin socket to push snapshots to (repeatable)\n"
        "  --proxy-admin-url https://HOST:PORT   a proxy on the network (its --admin-listen) to\n"
        "                              push to under mutual TLS (repeatable; 16 proxies at\n"
        "                              most, sockets and URLs together); needs:\n"
        "  --proxy-admin-cert FILE --proxy-admin-key FILE   the control plane's certificate\n"
        "                              and key (sluice pki issue DIR control NAME)\n"
        "  --proxy-admin-ca FILE       the CA of the proxies' certificates (DIR/ca.pem)\n"
        "  --proxy-admin-crl FILE      the revocation list (DIR/crl.pem), read again when it\n"
        "                              changes (optional)\n"
        "  --log-level LEVEL           error, warn, info (default), debug or trace\n"
        "  --audit-log FILE            the proxy's audit log the dashboard tails\n"
        "                              (default DIR/audit.log)\n"
        "  --config FILE               read these flags from FILE (its top and its [control]\n"
        "                              section; the command line wins)\n"
        "\n"
        "sandboxes (on when a --proxy-admin-socket is given; needs root for the firewall, a\n"
        "Docker daemon and DIR/ca.pem):\n"
        "  --docker-socket PATH        the Docker API socket (default /var/run/docker.sock)\n"
        "  --network NAME              the container network (default sluice0)\n"
        "  --proxy-port PORT           the proxy's port on the network's gateway (default 3128)\n"
        "  --transparent-port PORT     the proxy's transparent listener on the gateway that ports\n"
        "                              rules name are redirected to (default 3129)\n"
        "  --subnet CIDR               the container network's subnet (default 10.213.0.0/24)\n"
        "  --image NAME                the default sandbox image, when no environment names one\n"
        "                              (default sluice/sandbox:bookworm)\n"
        "  --git-url URL               the git platform (https://HOST[:PORT][/PREFIX]) sandboxes\n"
        "                              clone OWNER/REPO.git from, through the proxy\n"
        "  --git-token TOKEN           its token, injected by the proxy, never in a sandbox\n"
        "  --idle-timeout S            close a sandbox idle this long (default 1800)\n"
        "  --sandbox-lifetime S        close a sandbox this long after its start (default 86400)\n"
        "  --job-concurrency N         jobs (POST /api/v1/jobs, schedules) running at once, each\n"
        "                              in its own sandbox (1-64, default 2)\n"
        "  --launcher docker|swarm     where sandboxes run (default docker: this host's daemon)\n"
        "\n"
        "a Docker Swarm (--launcher swarm; --network is an overlay, --subnet its subnet, a\n"
        "proxy on each node at --proxy-port; no host firewall, resolv.conf or transparent\n"
        "redirect):\n"
        "  --swarm-manager ADDR        a manager node's IPv4 address\n"
        "  --swarm-port PORT           every engine's TLS port (default 2376)\n"
        "  --swarm-ca FILE             the CA of the engines' server certificates (PEM)\n"
        "  --swarm-cert FILE           our client certificate (PEM) ...\n"
        "  --swarm-key FILE            ... and its key\n"
        "  --swarm-image IMAGE         the node image (tools/node-image.sh) on every node: the\n"
        "                              inner wall's helper\n"
        "  --swarm-proxy NODE=PROXY    a node's address and its proxy's on the overlay\n"
        "                              (repeatable; sandboxes go to these nodes only)\n"
        "  --swarm-encrypted on|off    the overlay must be encrypted (default on; off accepts an\n"
        "                              unencrypted one)\n"
        "\n"
        "SIGUSR1 is taken (log rotation: the control plane keeps no log file open); SIGTERM or\n"
        "SIGINT stops it gracefully (exit 0).\n";

/* Options whose config field has a default are parsed here first (the option parser refuses a
 * value it finds already set as "given twice"). */
struct raw {
    const char *docker_socket;
    const char *network;
    const char *subnet;
    const char *proxy_port;
    const char *transparent_port;
    const char *idle_timeout;
    const char *sandbox_lifetime;
    const char *job_concurrency;
    const char *log_level;
    const char *data;
    const char *listen;
    const char *launcher;
    const char *swarm_port;
    const char *swarm_encrypted;
};

static bool is_ipv4_text(const char *s, size_t n)
{
    char buf[INET_ADDRSTRLEN];
    struct in_addr a;

    if (n == 0 || n >= sizeof(buf)) {
        return false;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    return inet_pton(AF_INET, buf, &a) == 1;
}

/* The --launcher and --swarm-* flags. */
static int convert_swarm(const struct raw *r, struct sl_control_config *cfg)
{
    static const char cmd[] = "control";
    struct sl_control_swarm *sw = &cfg->swarm;
    const struct sl_opt_uint nums[] = {
        { "--swarm-port", r->swarm_port, 1, 65535, &sw->port },
    };

    if (sl_opts_uints(cmd, nums, SL_ARRAY_LEN(nums)) != SL_CMD_OK) {
        return SL_CMD_USAGE;
    }
    if (r->launcher != NULL && strcmp(r->launcher, "docker") != 0
        && strcmp(r->launcher, "swarm") != 0) {
        sl_eprintf("%s: option '--launcher' is docker or swarm, not '%s'", cmd, r->launcher);
        return SL_CMD_USAGE;
    }
    if (r->swarm_encrypted != NULL && strcmp(r->swarm_encrypted, "on") != 0
        && strcmp(r->swarm_encrypted, "off") != 0) {
        sl_eprintf("%s: option '--swarm-encrypted' is on or off, not '%s'", cmd,
                   r->swarm_encrypted);
        return SL_CMD_USAGE;
    }
    sw->encrypted = r->swarm_encrypted == NULL || strcmp(r->swarm_encrypted, "on") == 0;
    if (r->launcher == NULL || strcmp(r->launcher, "docker") == 0) {
        if (sw->manager != NULL || sw->n_proxies > 0) {
            sl_eprintf("%s: --swarm-manager and --swarm-proxy need --launcher swarm", cmd);
            return SL_CMD_USAGE;
        }
        return SL_CMD_OK;
    }
    cfg->launcher = SL_CONTROL_LAUNCHER_SWARM;
    if (sw->manager == NULL || !is_ipv4_text(sw->manager, strlen(sw->manager)) || sw->ca == NULL
        || sw->cert == NULL || sw->key == NULL || sw->image == NULL || sw->n_proxies == 0) {
        sl_eprintf("%s: --launcher swarm needs --swarm-manager (an IPv4 address), --swarm-ca, "
                   "--swarm-cert, --swarm-key, --swarm-image and at least one --swarm-proxy",
                   cmd);
        return SL_CMD_USAGE;
    }
    for (size_t i = 0; i < sw->n_proxies; i++) {
        const char *eq = strchr(sw->proxies[i], '=');

        if (eq == NULL || !is_ipv4_text(sw->proxies[i], (size_t)(eq - sw->proxies[i]))
            || !is_ipv4_text(eq + 1, strlen(eq + 1))) {
            sl_eprintf("%s: option '--swarm-proxy' needs NODE_ADDRESS=PROXY_ADDRESS (two IPv4 "
                       "addresses), not '%s'",
                       cmd, sw->proxies[i]);
            return SL_CMD_USAGE;
        }
    }
    return SL_CMD_OK;
}

static bool is_cidr_text(const char *s)
{
    const char *slash = strchr(s, '/');

    return slash != NULL && slash != s && slash[1] != '\0'
           && strspn(slash + 1, "0123456789") == strlen(slash + 1);
}

static int convert(const struct raw *r, struct sl_control_config *cfg)
{
    static const char cmd[] = "control";
    const struct sl_opt_uint nums[] = {
        { "--proxy-port", r->proxy_port, 1, 65535, &cfg->proxy_port },
        { "--transparent-port", r->transparent_port, 1, 65535, &cfg->transparent_port },
        { "--idle-timeout", r->idle_timeout, 1, 31536000, &cfg->idle_timeout_s },
        { "--sandbox-lifetime", r->sandbox_lifetime, 1, 31536000, &cfg->sandbox_lifetime_s },
        { "--job-concurrency", r->job_concurrency, 1, 64, &cfg->job_concurrency },
    };

    if (sl_opts_uints(cmd, nums, SL_ARRAY_LEN(nums)) != SL_CMD_OK
        || sl_opts_log_level(cmd, r->log_level, &cfg->log_level) != SL_CMD_OK) {
        return SL_CMD_USAGE;
    }
    if (r->docker_socket != NULL) {
        cfg->docker_socket = r->docker_socket;
    }
    if (r->network != NULL) {
        cfg->network = r->network;
    }
    if (r->subnet != NULL) {
        cfg->subnet = r->subnet;
    }
    if (cfg->subnet != NULL && !is_cidr_text(cfg->subnet)) {
        sl_eprintf("%s: option '--subnet' needs a CIDR block like 10.77.0.0/16, not '%s'", cmd,
                   cfg->subnet);
        return SL_CMD_USAGE;
    }
    if (r->listen != NULL) {
        if (r->listen[0] == '\0' || strrchr(r->listen, ':') == NULL) {
            sl_eprintf("%s: option '--listen' needs ADDR:PORT, not '%s'", cmd, r->listen);
            return SL_CMD_USAGE;
        }
        cfg->listen = r->listen;
    }
    if ((cfg->network != NULL && cfg->network[0] == '\0')
        || (cfg->image != NULL && cfg->image[0] == '\0')
        || (cfg->docker_socket != NULL && cfg->docker_socket[0] == '\0')
        || (cfg->audit_log != NULL && cfg->audit_log[0] == '\0')) {
        sl_eprintf("%s: --network, --image, --docker-socket and --audit-log need a value", cmd);
        return SL_CMD_USAGE;
    }
    if (cfg->n_proxy_admin_urls > 0
        && (cfg->proxy_admin_cert == NULL || cfg->proxy_admin_key == NULL
            || cfg->proxy_admin_ca == NULL)) {
        sl_eprintf("%s: --proxy-admin-url needs --proxy-admin-cert, --proxy-admin-key and "
                   "--proxy-admin-ca (proxies on the network are only reached over mutual TLS)",
                   cmd);
        return SL_CMD_USAGE;
    }
    if (cfg->n_proxy_admin_urls == 0
        && (cfg->proxy_admin_cert != NULL || cfg->proxy_admin_key != NULL
            || cfg->proxy_admin_ca != NULL || cfg->proxy_admin_crl != NULL)) {
        sl_eprintf("%s: --proxy-admin-cert, --proxy-admin-key, --proxy-admin-ca and "
                   "--proxy-admin-crl go with --proxy-admin-url",
                   cmd);
        return SL_CMD_USAGE;
    }
    if (cfg->n_proxy_admin_sockets + cfg->n_proxy_admin_urls > SL_CONTROL_SOCKETS_MAX) {
        sl_eprintf("%s: at most %d proxies (--proxy-admin-socket and --proxy-admin-url "
                   "together)",
                   cmd, SL_CONTROL_SOCKETS_MAX);
        return SL_CMD_USAGE;
    }
    cfg->data_dir = sl_opts_data_dir(r->data);
    return convert_swarm(r, cfg);
}

static const char *const sections[] = { "control", NULL };

/* The command line (and --config) into `arg`, a struct sl_control_config (sl_opts_parse_fn). */
static int parse(int argc, char **argv, void *arg, bool *help, struct sl_conf **conf)
{
    struct sl_control_config *cfg = arg;
    struct raw r;
    const char *pos[1];
    size_t n_pos = 0;
    int rc;

    memset(&r, 0, sizeof(r));
    sl_control_config_init(cfg);
    {
        const struct sl_opt opts[] = {
            { "--listen", SL_OPT_VALUE, NULL, &r.listen, NULL, NULL, 0 },
            { "--data", SL_OPT_VALUE, NULL, &r.data, NULL, NULL, 0 },
            { "--proxy-admin-socket", SL_OPT_LIST, NULL, NULL, cfg->proxy_admin_sockets,
              &cfg->n_proxy_admin_sockets, SL_CONTROL_SOCKETS_MAX },
            { "--proxy-admin-url", SL_OPT_LIST, NULL, NULL, cfg->proxy_admin_urls,
              &cfg->n_proxy_admin_urls, SL_CONTROL_SOCKETS_MAX },
            { "--proxy-admin-cert", SL_OPT_VALUE, NULL, &cfg->proxy_admin_cert, NULL, NULL, 0 },
            { "--proxy-admin-key", SL_OPT_VALUE, NULL, &cfg->proxy_admin_key, NULL, NULL, 0 },
            { "--proxy-admin-ca", SL_OPT_VALUE, NULL, &cfg->proxy_admin_ca, NULL, NULL, 0 },
            { "--proxy-admin-crl", SL_OPT_VALUE, NULL, &cfg->proxy_admin_crl, NULL, NULL, 0 },
            { "--docker-socket", SL_OPT_VALUE, NULL, &r.docker_socket, NULL, NULL, 0 },
            { "--network", SL_OPT_VALUE, NULL, &r.network, NULL, NULL, 0 },
            { "--proxy-port", SL_OPT_VALUE, NULL, &r.proxy_port, NULL, NULL, 0 },
            { "--transparent-port", SL_OPT_VALUE, NULL, &r.transparent_port, NULL, NULL, 0 },
            { "--subnet", SL_OPT_VALUE, NULL, &r.subnet, NULL, NULL, 0 },
            { "--image", SL_OPT_VALUE, NULL, &cfg->image, NULL, NULL, 0 },
            { "--git-url", SL_OPT_VALUE, NULL, &cfg->git_url, NULL, NULL, 0 },
            { "--git-token", SL_OPT_VALUE, NULL, &cfg->git_token, NULL, NULL, 0 },
            { "--idle-timeout", SL_OPT_VALUE, NULL, &r.idle_timeout, NULL, NULL, 0 },
            { "--sandbox-lifetime", SL_OPT_VALUE, NULL, &r.sandbox_lifetime, NULL, NULL, 0 },
            { "--job-concurrency", SL_OPT_VALUE, NULL, &r.job_concurrency, NULL, NULL, 0 },
            { "--log-level", SL_OPT_VALUE, NULL, &r.log_level, NULL, NULL, 0 },
            { "--audit-log", SL_OPT_VALUE, NULL, &cfg->audit_log, NULL, NULL, 0 },
            { "--launcher", SL_OPT_VALUE, NULL, &r.launcher, NULL, NULL, 0 },
            { "--swarm-manager", SL_OPT_VALUE, NULL, &cfg->swarm.manager, NULL, NULL, 0 },
            { "--swarm-port", SL_OPT_VALUE, NULL, &r.swarm_port, NULL, NULL, 0 },
            { "--swarm-ca", SL_OPT_VALUE, NULL, &cfg->swarm.ca, NULL, NULL, 0 },
            { "--swarm-cert", SL_OPT_VALUE, NULL, &cfg->swarm.cert, NULL, NULL, 0 },
            { "--swarm-key", SL_OPT_VALUE, NULL, &cfg->swarm.key, NULL, NULL, 0 },
            { "--swarm-image", SL_OPT_VALUE, NULL, &cfg->swarm.image, NULL, NULL, 0 },
            { "--swarm-proxy", SL_OPT_LIST, NULL, NULL, cfg->swarm.proxies, &cfg->swarm.n_proxies,
              SL_CONTROL_SWARM_PROXIES_MAX },
            { "--swarm-encrypted", SL_OPT_VALUE, NULL, &r.swarm_encrypted, NULL, NULL, 0 },
        };

        rc = sl_opts_parse_config("control", sections, argc, argv, opts, SL_ARRAY_LEN(opts), pos, 0,
                                  &n_pos, help, conf);
    }
    if (rc != SL_CMD_OK || *help) {
        return rc;
    }
    return sl_opts_conf_hint("control", *conf, convert(&r, cfg));
}

static int start(void *cfg)
{
    return sl_control_run(cfg) < 0 ? SL_CMD_FAIL : SL_CMD_OK;
}

int sl_cmd_control_check(int argc, char **argv)
{
    struct sl_control_config cfg;

    return sl_opts_daemon(argc, argv, &cfg, parse, NULL, usage);
}

int sl_cmd_control(int argc, char **argv)
{
    struct sl_control_config cfg;

    return sl_opts_daemon(argc, argv, &cfg, parse, start, usage);
}
