/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/control.h - the control plane daemon (`sluice control`, docs/reference/api.md §5): opens
 * the data directory, the encryption key and sluice.db, serves the REST API (control/web/api) on
 * --listen and runs until SIGTERM or SIGINT, then stops gracefully (no new requests; requests in
 * flight finish their database work; the database is closed).
 *
 * Lifecycle: sl_control_config_init() -> set fields -> sl_control_run() (blocks until stopped).
 */
#ifndef SL_CONTROL_CONTROL_H
#define SL_CONTROL_CONTROL_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "base/log.h"

/* Most --proxy-admin-socket flags. */
#define SL_CONTROL_SOCKETS_MAX 16
/* Defaults of docs/reference/cli.md §1 and docs/reference/api.md §5. */
#define SL_CONTROL_DEFAULT_LISTEN           "127.0.0.1:8080"
#define SL_CONTROL_DEFAULT_DOCKER_SOCKET    "/var/run/docker.sock"
#define SL_CONTROL_DEFAULT_NETWORK          "sluice0"
#define SL_CONTROL_DEFAULT_SUBNET           "10.213.0.0/24"
#define SL_CONTROL_DEFAULT_PROXY_PORT       3128u
#define SL_CONTROL_DEFAULT_TRANSPARENT_PORT 3129u
/* Where the system's CA bundle is read from for the containers' bundle
 * (docs/reference/containers.md §5.4). */
#define SL_CONTROL_SYSTEM_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* Most --swarm-proxy flags. */
#define SL_CONTROL_SWARM_PROXIES_MAX  64
#define SL_CONTROL_DEFAULT_SWARM_PORT 2376u
/* The host name of a Swarm sandbox's proxy (its HTTP_PROXY; its hosts file names its node's
 * proxy). */
#define SL_CONTROL_SWARM_PROXY_NAME "sluice-proxy"

/* Where sandboxes run (--launcher). */
enum sl_control_launcher {
    /* One Docker daemon on this host (--docker-socket): the bridge network, the host's
     * nftables table, the resolv.conf, the proxy on the gateway. */
    SL_CONTROL_LAUNCHER_DOCKER = 0,
    /* A Docker Swarm (control/sandbox/swarm.h): an overlay network, a proxy per node. */
    SL_CONTROL_LAUNCHER_SWARM,
};

/* The Swarm launcher's settings (--swarm-*). Strings borrowed like the rest. */
struct sl_control_swarm {
    /* A manager's IPv4 address, and every engine's TLS port. */
    const char *manager;
    unsigned port;
    /* PEM files: the engines' CA, our client certificate and its key. */
    const char *ca;
    const char *cert;
    const char *key;
    /* The node image (tools/node-image.sh) on every node: the inner wall's helper. */
    const char *image;
    /* NODE_ADDR=PROXY_ADDR: each node and its proxy's address on the sandbox network. */
    const char *proxies[SL_CONTROL_SWARM_PROXIES_MAX];
    size_t n_proxies;
    /* The sandbox overlay must be encrypted (the default). */
    bool encrypted;
};

/* Every string is borrowed (from argv) and must outlive sl_control_run(). */
struct sl_control_config {
    /* ADDR:PORT of the REST API. */
    const char *listen;
    /* The data directory (created 0700 when missing): sluice.db, encryption.key. */
    const char *data_dir;
    /* Proxy admin sockets to push snapshots to. */
    const char *proxy_admin_sockets[SL_CONTROL_SOCKETS_MAX];
    size_t n_proxy_admin_sockets;
    /* Proxies on the network (`--proxy-admin-url https://HOST:PORT`), pushed to under mutual
     * TLS with `--proxy-admin-cert/-key` (the control plane's certificate), `--proxy-admin-ca`
     * (the CA of the proxies' certificates) and, optionally, `--proxy-admin-crl`. Sockets and
     * URLs together: at most SL_CONTROL_SOCKETS_MAX. */
    const char *proxy_admin_urls[SL_CONTROL_SOCKETS_MAX];
    size_t n_proxy_admin_urls;
    const char *proxy_admin_cert;
    const char *proxy_admin_key;
    const char *proxy_admin_ca;
    const char *proxy_admin_crl;
    /* Sandboxes (docs/reference/api.md §5.3, docs/reference/containers.md §5.4): enabled when at
     * least one proxy admin socket is given; the container runtime, network and firewall are set up
     * at start (a failure there is logged and reported by GET /api/v1/status; the API still serves
     * everything else). 0 takes the defaults. */
    const char *docker_socket;
    const char *network;
    unsigned proxy_port;
    /* The proxy's transparent listener on the gateway that the host's table redirects the ports
     * rules name to (docs/reference/containers.md §5.4). */
    unsigned transparent_port;
    const char *subnet;
    /* The default sandbox image; also the built-in base image of resolution (§5.2). */
    const char *image;
    const char *git_url;
    const char *git_token;
    unsigned idle_timeout_s;
    unsigned sandbox_lifetime_s;
    /* Jobs running at once (control/jobs/jobs); 0 takes the default (2). */
    unsigned job_concurrency;
    /* Where sandboxes run, and the Swarm's settings. */
    enum sl_control_launcher launcher;
    struct sl_control_swarm swarm;
    /* The proxy's audit log tailed by GET /api/v1/audit; NULL takes DIR/audit.log. */
    const char *audit_log;
    enum sl_log_level log_level;
};

/* Fills the defaults. */
void sl_control_config_init(struct sl_control_config *cfg);

/* Runs the daemon until SIGTERM/SIGINT. Returns 0 after a clean stop, or a negative code when
 * it could not start; the reason was printed with sl_eprintf() (one line for a person). */
SL_MUST_CHECK int sl_control_run(const struct sl_control_config *cfg);

#endif
