/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/up.c - `sluice up` (docs/reference/cli.md §1, docs/up.md): the single-machine install.
 * Prepares the data directory (CA, encryption key, database, first admin), looks for a Docker
 * daemon and the default sandbox image, then runs `sluice control` and `sluice proxy` as supervised
 * children (cmd/supervise) until SIGINT or SIGTERM. Flags may come from --config (its [proxy]
 * section becomes proxy flags); once the control plane's /readyz answers, a Type=notify unit is
 * told READY=1 (base/notify).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "base/file.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/notify.h"
#include "certs/ca.h"
#include "cmd/cmd.h"
#include "cmd/opts.h"
#include "cmd/supervise.h"
#include "control/control.h"
#include "control/sandbox/sandbox.h"
#include "control/store/model.h"
#include "control/store/secrets.h"
#include "control/store/store.h"
#include "proxy/proxy.h"

#ifndef SLUICE_SOURCE_DIR
#define SLUICE_SOURCE_DIR "."
#endif

#define PATH_BYTES 4096
#define ERR_BYTES  512
/* The default sandbox image, and the repository whose missing tags the recipe makes. */
#define DEFAULT_IMAGE "sluice/sandbox:bookworm"
#define RECIPE_REPO   "sluice/sandbox:"
/* The environment variable naming the image recipe, and where it is by default. */
#define RECIPE_ENV     "SLUICE_IMAGE_RECIPE"
#define RECIPE_DEFAULT SLUICE_SOURCE_DIR "/tools/sandbox-image.sh"
/* Waits of the start-up (seconds) and of the stop (milliseconds). */
/* The redirect port the proxy is given, as text (docs/reference/proxy.md §4.12). */
#define TEXT_OF_(x)           #x
#define TEXT_OF(x)            TEXT_OF_(x)
#define TRANSPARENT_PORT_TEXT TEXT_OF(SL_PROXY_TRANSPARENT_PORT)

#define CONTROL_READY_S   30
#define GATEWAY_READY_S   30
#define PROXY_READY_S     15
#define READYZ_WAIT_S     60
#define CONTROL_STOP_MS   90000u
#define PROXY_STOP_MS     30000u
#define PROBE_TIMEOUT_S   2
#define PROBE_REPLY_BYTES 4096
/* The user the first run creates. */
#define ADMIN_NAME       "admin"
#define ADMIN_TOKEN_FILE "admin.token"
/* Most argument strings of one child. */
#define CHILD_ARGS_MAX 160

static const char usage[] =
        "usage: sluice up [--data DIR] [--proxy-listen ADDR:PORT] [--control-listen ADDR:PORT]\n"
        "                 [control flags] [-- proxy flags]\n"
        "\n"
        "The single-machine install: the proxy and the control plane as supervised child\n"
        "processes, the container network and its firewall when a Docker daemon answers.\n"
        "The first run creates the data directory (0700) with the CA (ca.pem, ca.key), the\n"
        "encryption key (encryption.key, only when $SLUICE_ENCRYPTION_KEY is unset), the\n"
        "database (sluice.db) and a first admin user, whose token is printed once and kept\n"
        "in DIR/admin.token (0600). Later runs reuse all of it.\n"
        "\n"
        "flags:\n"
        "  --data DIR                  data directory (default: $SLUICE_DATA, or ./var)\n"
        "  --proxy-listen ADDR:PORT    the proxy on this host (default 127.0.0.1:3128); with a\n"
        "                              Docker daemon it also listens on the container\n"
        "                              network's gateway, port --proxy-port\n"
        "  --control-listen ADDR:PORT  the API and the dashboard (default 127.0.0.1:8080)\n"
        "  --restart-backoff MS        the first wait before a dead child is restarted\n"
        "                              (default 500; doubles up to 30000 while it keeps dying,\n"
        "                              starts over once it ran 60 s)\n"
        "  --config FILE               read flags from FILE: its top and [up] section are up's,\n"
        "                              [control] the control flags below, [proxy] the proxy\n"
        "                              flags (before those after --); the command line wins\n"
        "\n"
        "control flags (passed on to `sluice control`; see sluice control --help):\n"
        "  --proxy-admin-socket PATH   another proxy to push snapshots to (repeatable; the\n"
        "                              supervised proxy's DIR/proxy.sock is always there)\n"
        "  --proxy-admin-url URL       a proxy on another machine to push snapshots to, over\n"
        "                              mutual TLS (repeatable), with --proxy-admin-cert FILE,\n"
        "                              --proxy-admin-key FILE, --proxy-admin-ca FILE and\n"
        "                              optionally --proxy-admin-crl FILE (sluice pki)\n"
        "  --docker-socket PATH        the Docker API socket (default /var/run/docker.sock)\n"
        "  --network NAME              the container network (default sluice0)\n"
        "  --proxy-port PORT           the proxy's port on the network's gateway (default 3128)\n"
        "  --subnet CIDR               the network's subnet (default 10.213.0.0/24)\n"
        "  --image NAME                the default sandbox image (default " DEFAULT_IMAGE ");\n"
        "                              a missing sluice/sandbox:TAG is built (or loaded from its\n"
        "                              cache) with the recipe " RECIPE_DEFAULT "\n"
        "                              ($" RECIPE_ENV " names another copy)\n"
        "  --git-url URL, --git-token TOKEN, --idle-timeout S, --sandbox-lifetime S,\n"
        "  --job-concurrency N, --log-level LEVEL, --transparent-port PORT\n"
        "                              as for sluice control\n"
        "  --launcher, --swarm-*       refused: sandboxes on a Docker Swarm need sluice control\n"
        "                              and proxies on the nodes (docs/scale.md)\n"
        "  --audit-log FILE            where the proxy writes its audit log and the dashboard\n"
        "                              tails it (default DIR/audit.log)\n"
        "\n"
        "proxy flags: everything after `--` goes to `sluice proxy` (see sluice proxy --help);\n"
        "up itself gives it --listen, --data, --admin-socket DIR/proxy.sock, --audit-log\n"
        "(DIR/audit.log or up's --audit-log) and --deny-upstream with the control plane's\n"
        "address.\n"
        "\n"
        "A child that dies is restarted after a back-off; one that exits 2 (bad arguments) is\n"
        "not, and up stops. SIGINT (Ctrl-C) or SIGTERM stops the control plane first (it\n"
        "removes the sandboxes and the firewall table), then the proxy; up exits 0. SIGHUP\n"
        "and SIGUSR1 are passed on to both children (reload; reopen the audit log).\n";

/* The control plane's flags that take one value, passed on as given (after the ones up
 * decides itself). */
enum passed {
    PASS_DOCKER_SOCKET = 0,
    PASS_NETWORK,
    PASS_PROXY_PORT,
    PASS_SUBNET,
    PASS_IMAGE,
    PASS_GIT_URL,
    PASS_GIT_TOKEN,
    PASS_IDLE_TIMEOUT,
    PASS_SANDBOX_LIFETIME,
    PASS_LOG_LEVEL,
    PASS_JOB_CONCURRENCY,
    PASS_AUDIT_LOG,
    PASS_TRANSPARENT_PORT,
    PASS_PROXY_ADMIN_CERT,
    PASS_PROXY_ADMIN_KEY,
    PASS_PROXY_ADMIN_CA,
    PASS_PROXY_ADMIN_CRL,
    PASS_COUNT,
};

static const char *const passed_names[PASS_COUNT] = {
    "--docker-socket",
    "--network",
    "--proxy-port",
    "--subnet",
    "--image",
    "--git-url",
    "--git-token",
    "--idle-timeout",
    "--sandbox-lifetime",
    "--log-level",
    "--job-concurrency",
    "--audit-log",
    "--transparent-port",
    "--proxy-admin-cert",
    "--proxy-admin-key",
    "--proxy-admin-ca",
    "--proxy-admin-crl",
};

/* The flags of `sluice control` that up refuses: they put sandboxes on a cluster, while up runs
 * everything on this host (docs/scale.md). Taken, then refused with a message that says so. */
static const char *const cluster_names[] = {
    "--launcher",  "--swarm-manager", "--swarm-port",  "--swarm-ca",        "--swarm-cert",
    "--swarm-key", "--swarm-image",   "--swarm-proxy", "--swarm-encrypted",
};

struct up {
    /* Flags. */
    const char *data_flag;
    const char *proxy_listen;
    const char *control_listen;
    const char *control_listen_flag_misused;
    const char *backoff;
    const char *passed[PASS_COUNT];
    const char *cluster[SL_ARRAY_LEN(cluster_names)];
    const char *sockets[SL_CONTROL_SOCKETS_MAX];
    size_t n_sockets;
    const char *urls[SL_CONTROL_SOCKETS_MAX];
    size_t n_urls;
    char **proxy_args;
    int n_proxy_args;
    /* --config: the file, and the proxy arguments its [proxy] section makes ("--KEY=VALUE",
     * allocated) followed by those after `--`. */
    struct sl_conf *conf;
    char **merged_proxy_args;
    int n_merged;
    /* Derived. */
    char data[PATH_BYTES];
    char sock[PATH_BYTES + 16];
    char audit[PATH_BYTES + 16];
    char ca[PATH_BYTES + 16];
    char token_file[PATH_BYTES + 16];
    char gateway[INET_ADDRSTRLEN];
    char gateway_listen[INET_ADDRSTRLEN + 8];
    unsigned proxy_port;
    unsigned backoff_ms;
    bool docker;
    char docker_err[ERR_BYTES];
    bool gateway_up;
    /* The proxy also answers the containers' DNS on GATEWAY:53 and takes their connections made
     * without the proxy (GATEWAY:443, :80 and :TRANSPARENT_PORT): the gateway is up and its low
     * ports can be bound (docs/reference/cli.md §1.2). */
    bool transparent;
    char dns_listen[INET_ADDRSTRLEN + 8];
    /* The admin token when this run created it (printed once), else "". */
    char token[SL_TOKEN_SIZE];
    bool token_file_missing;
    /* $NOTIFY_SOCKET (a Type=notify unit), taken from the environment so that the children
     * do not see it; NULL outside systemd. */
    char *notify_socket;
    /* The children's argument vectors. */
    char *control_argv[CHILD_ARGS_MAX];
    char *proxy_argv[CHILD_ARGS_MAX];
};

/* exec takes `char *const[]` and never writes through it: borrowed strings go in as they are. */
static char *mut(const char *s)
{
    union {
        const char *c;
        char *m;
    } v = { .c = s };

    return v.m;
}

static const char *value_or(const char *v, const char *dflt)
{
    return v != NULL ? v : dflt;
}

/* ---- arguments -------------------------------------------------------------------------- */

static const char *const up_sections[] = { "up", "control", NULL };

/* Keys of [proxy] that up gives its proxy itself, and what to write instead. */
static const struct {
    const char *key;
    const char *instead;
} proxy_keys_of_up[] = {
    { "listen", "proxy-listen in [up]" },
    { "data", "data in [up]" },
    { "admin-socket", "nothing: up's proxy uses DIR/proxy.sock" },
    { "audit-log", "audit-log in [up]" },
    { "config", "nothing: a file cannot name another" },
};

/* Whether the proxy arguments after `--` give `--KEY`. */
static bool proxy_arg_given(const struct up *u, const char *key)
{
    size_t n = strlen(key);

    for (int i = 0; i < u->n_proxy_args; i++) {
        const char *a = u->proxy_args[i];

        if (strncmp(a, "--", 2) == 0 && strncmp(a + 2, key, n) == 0
            && (a[2 + n] == '\0' || a[2 + n] == '=')) {
            return true;
        }
    }
    return false;
}

/* The [proxy] section of --config as proxy arguments, before those after `--` (which win). */
static int merge_proxy_args(struct up *u)
{
    struct sl_conf_errors *errs;
    int n = 0;
    int rc = SL_CMD_OK;

    if (u->conf == NULL) {
        return SL_CMD_OK;
    }
    errs = sl_calloc(1, sizeof(*errs));
    u->merged_proxy_args = sl_calloc(u->conf->n + (size_t)u->n_proxy_args + 1, sizeof(char *));
    if (errs == NULL || u->merged_proxy_args == NULL) {
        sl_free(errs);
        sl_eprintf("up: out of memory");
        return SL_CMD_FAIL;
    }
    for (size_t i = 0; i < u->conf->n; i++) {
        const struct sl_conf_entry *e = &u->conf->entries[i];
        bool refused = false;
        size_t len;

        if (strcmp(e->section, "proxy") != 0) {
            continue;
        }
        for (size_t k = 0; k < SL_ARRAY_LEN(proxy_keys_of_up); k++) {
            if (strcmp(e->key, proxy_keys_of_up[k].key) == 0) {
                sl_conf_error_add(errs, e->line,
                                  "key '%s' in [proxy]: sluice up gives its proxy this itself; "
                                  "use %s",
                                  e->key, proxy_keys_of_up[k].instead);
                refused = true;
            }
        }
        if (refused || proxy_arg_given(u, e->key)) {
            continue;
        }
        len = strlen(e->key) + strlen(e->value) + 4;
        u->merged_proxy_args[n] = sl_malloc(len);
        if (u->merged_proxy_args[n] == NULL) {
            sl_conf_error_add(errs, 0, "out of memory");
            break;
        }
        (void)snprintf(u->merged_proxy_args[n], len, "--%s=%s", e->key, e->value);
        n++;
    }
    for (size_t i = 0; i < errs->n; i++) {
        sl_eprintf("up: %s:%u: %s", u->conf->path, errs->items[i].line, errs->items[i].message);
        rc = SL_CMD_USAGE;
    }
    sl_free(errs);
    u->n_merged = n;
    for (int i = 0; i < u->n_proxy_args; i++) {
        u->merged_proxy_args[n + i] = u->proxy_args[i];
    }
    u->proxy_args = u->merged_proxy_args;
    u->n_proxy_args += n;
    return rc;
}

static void free_args(struct up *u)
{
    if (u->merged_proxy_args != NULL) {
        for (int i = 0; i < u->n_merged; i++) {
            sl_free(u->merged_proxy_args[i]);
        }
        sl_free(u->merged_proxy_args);
        u->merged_proxy_args = NULL;
    }
    sl_conf_destroy(u->conf);
    u->conf = NULL;
}

static int parse_args(struct up *u, int argc, char **argv, bool *help)
{
    int n_own = sl_sup_split_args(argc, argv);
    struct sl_opt opts[PASS_COUNT + SL_ARRAY_LEN(cluster_names) + 7];
    size_t n = 0;
    const char *pos[1];
    size_t n_pos = 0;
    int rc;

    opts[n++] = (struct sl_opt){ "--data", SL_OPT_VALUE, NULL, &u->data_flag, NULL, NULL, 0 };
    opts[n++] = (struct sl_opt){
        "--proxy-listen", SL_OPT_VALUE, NULL, &u->proxy_listen, NULL, NULL, 0
    };
    opts[n++] = (struct sl_opt){
        "--control-listen", SL_OPT_VALUE, NULL, &u->control_listen, NULL, NULL, 0
    };
    opts[n++] = (struct sl_opt){ "--listen", SL_OPT_VALUE, NULL, &u->control_listen_flag_misused,
                                 NULL,       NULL,         0 };
    opts[n++] =
            (struct sl_opt){ "--restart-backoff", SL_OPT_VALUE, NULL, &u->backoff, NULL, NULL, 0 };
    opts[n++] = (struct sl_opt){
        "--proxy-admin-socket",    SL_OPT_LIST, NULL, NULL, u->sockets, &u->n_sockets,
        SL_CONTROL_SOCKETS_MAX - 1
    };
    /* The control plane counts sockets and URLs together (its own check says so). */
    opts[n++] = (struct sl_opt){
        "--proxy-admin-url",       SL_OPT_LIST, NULL, NULL, u->urls, &u->n_urls,
        SL_CONTROL_SOCKETS_MAX - 1
    };
    for (size_t i = 0; i < PASS_COUNT; i++) {
        opts[n++] = (struct sl_opt){
            passed_names[i], SL_OPT_VALUE, NULL, &u->passed[i], NULL, NULL, 0
        };
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(cluster_names); i++) {
        opts[n++] = (struct sl_opt){
            cluster_names[i], SL_OPT_VALUE, NULL, &u->cluster[i], NULL, NULL, 0
        };
    }
    rc = sl_opts_parse_config("up", up_sections, n_own, argv, opts, n, pos, 0, &n_pos, help,
                              &u->conf);
    if (rc != SL_CMD_OK || *help) {
        return rc;
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(cluster_names); i++) {
        if (u->cluster[i] != NULL) {
            sl_eprintf("up: option '%s' is for `sluice control` on a Docker Swarm: `sluice up` "
                       "runs the proxy, the control plane and the sandboxes on this host "
                       "(docs/scale.md)",
                       cluster_names[i]);
            return SL_CMD_USAGE;
        }
    }
    if (n_own < argc) {
        u->proxy_args = argv + n_own + 1;
        u->n_proxy_args = argc - n_own - 1;
    }
    rc = merge_proxy_args(u);
    if (rc != SL_CMD_OK) {
        return rc;
    }
    if (u->control_listen_flag_misused != NULL) {
        sl_eprintf("up: unknown option '--listen': use --control-listen (the API) or "
                   "--proxy-listen (the proxy)");
        return SL_CMD_USAGE;
    }
    u->proxy_listen = value_or(u->proxy_listen, "127.0.0.1:3128");
    u->control_listen = value_or(u->control_listen, SL_CONTROL_DEFAULT_LISTEN);
    if (strrchr(u->proxy_listen, ':') == NULL || strrchr(u->control_listen, ':') == NULL) {
        sl_eprintf("up: options '--proxy-listen' and '--control-listen' need ADDR:PORT");
        return SL_CMD_USAGE;
    }
    u->backoff_ms = SL_SUP_BACKOFF_INITIAL_MS;
    if (u->backoff != NULL
        && sl_opts_uint("up", "--restart-backoff", u->backoff, 1, 600000, &u->backoff_ms) != 0) {
        return SL_CMD_USAGE;
    }
    u->proxy_port = SL_CONTROL_DEFAULT_PROXY_PORT;
    if (u->passed[PASS_PROXY_PORT] != NULL
        && sl_opts_uint("up", "--proxy-port", u->passed[PASS_PROXY_PORT], 1, 65535, &u->proxy_port)
                   != 0) {
        return SL_CMD_USAGE;
    }
    u->passed[PASS_DOCKER_SOCKET] =
            value_or(u->passed[PASS_DOCKER_SOCKET], SL_CONTROL_DEFAULT_DOCKER_SOCKET);
    u->passed[PASS_NETWORK] = value_or(u->passed[PASS_NETWORK], SL_CONTROL_DEFAULT_NETWORK);
    u->passed[PASS_SUBNET] = value_or(u->passed[PASS_SUBNET], SL_CONTROL_DEFAULT_SUBNET);
    u->passed[PASS_IMAGE] = value_or(u->passed[PASS_IMAGE], DEFAULT_IMAGE);
    if (sl_sandboxes_subnet_gateway(u->passed[PASS_SUBNET], u->gateway, sizeof(u->gateway)) < 0) {
        sl_eprintf("up: option '--subnet' needs an IPv4 network like 10.213.0.0/24 (prefix 8 to "
                   "29), not '%s'",
                   u->passed[PASS_SUBNET]);
        return SL_CMD_USAGE;
    }
    if (u->passed[PASS_AUDIT_LOG] != NULL && strcmp(u->passed[PASS_AUDIT_LOG], "-") == 0) {
        sl_eprintf("up: option '--audit-log' needs a file: the dashboard tails what the proxy "
                   "writes there (standard output is not a file it can read)");
        return SL_CMD_USAGE;
    }
    return SL_CMD_OK;
}

/* ---- the data directory ----------------------------------------------------------------- */

/* `path` made absolute against the current directory (the children and the printed summary
 * get it so). */
static int absolute(char *out, size_t cap, const char *path, const char *what)
{
    char cwd[PATH_BYTES];
    int n;

    if (path[0] == '/') {
        n = snprintf(out, cap, "%s", path);
    } else if (getcwd(cwd, sizeof(cwd)) == NULL) {
        sl_eprintf("up: cannot tell the current directory (for %s): %s", what, strerror(errno));
        return SL_EIO;
    } else {
        while (path[0] == '.' && path[1] == '/') {
            path += 2;
        }
        n = snprintf(out, cap, "%s/%s", strcmp(cwd, "/") == 0 ? "" : cwd, path);
    }
    if (n < 0 || n >= (int)cap) {
        sl_eprintf("up: the path of %s is too long", what);
        return SL_EINVAL;
    }
    return 0;
}

static int join(char *out, size_t cap, const char *dir, const char *name)
{
    if (snprintf(out, cap, "%s/%s", dir, name) >= (int)cap) {
        sl_eprintf("up: the data directory's path is too long");
        return SL_EINVAL;
    }
    return 0;
}

static bool file_exists(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0;
}

static int prepare_dir(struct up *u)
{
    const char *dir = sl_opts_data_dir(u->data_flag);
    char err[ERR_BYTES];

    if (sl_file_ensure_dir(dir, "the data directory", err, sizeof(err)) < 0) {
        sl_eprintf("up: %s", err);
        return SL_EIO;
    }
    /* Absolute: the children, Docker's bind mounts and the printed paths need it. */
    SL_TRY(absolute(u->data, sizeof(u->data), dir, "the data directory"));
    /* "var/" would print as "var//ca.pem". */
    for (size_t len = strlen(u->data); len > 1 && u->data[len - 1] == '/'; len--) {
        u->data[len - 1] = '\0';
    }
    SL_TRY(join(u->sock, sizeof(u->sock), u->data, "proxy.sock"));
    if (u->passed[PASS_AUDIT_LOG] == NULL) {
        SL_TRY(join(u->audit, sizeof(u->audit), u->data, "audit.log"));
    } else {
        SL_TRY(absolute(u->audit, sizeof(u->audit), u->passed[PASS_AUDIT_LOG], "'--audit-log'"));
        /* One file: the proxy writes it, the control plane tails it for the dashboard. */
        u->passed[PASS_AUDIT_LOG] = u->audit;
    }
    SL_TRY(join(u->ca, sizeof(u->ca), u->data, SL_CA_CERT_FILE));
    SL_TRY(join(u->token_file, sizeof(u->token_file), u->data, ADMIN_TOKEN_FILE));
    return 0;
}

/* The CA, as `sluice ca init` makes it, when there is none; else checks the one there. */
static int prepare_ca(const struct up *u)
{
    char err[ERR_BYTES] = "";
    struct sl_ca *ca = NULL;
    int rc;

    if (file_exists(u->ca)) {
        rc = sl_ca_load_dir(u->data, true, &ca, err, sizeof(err));
        sl_ca_destroy(ca);
        if (rc < 0) {
            sl_eprintf("up: the CA in %s: %s", u->data, err);
        }
        return rc;
    }
    rc = sl_ca_create(&ca, err, sizeof(err));
    if (rc == 0) {
        rc = sl_ca_write(ca, u->data, false, err, sizeof(err));
    }
    sl_ca_destroy(ca);
    if (rc < 0) {
        sl_eprintf("up: cannot create the CA in %s: %s", u->data, err);
        return rc;
    }
    sl_log(SL_LOG_INFO, 0, "msg=\"created the CA\" cert=%s", u->ca);
    return 0;
}

/* The encryption key: from the environment, else the key file, else a new key file. */
static int prepare_key(const struct up *u)
{
    struct sl_secrets *s = NULL;
    enum sl_secrets_source source = SL_SECRETS_SOURCE_ENV;
    char path[PATH_BYTES + 32];
    char err[ERR_BYTES] = "";
    int rc = sl_secrets_load(u->data, &s, &source, err, sizeof(err));

    if (rc == SL_ENOTFOUND) {
        SL_TRY(join(path, sizeof(path), u->data, SL_SECRETS_KEY_FILE));
        rc = sl_secrets_generate_key_file(path, err, sizeof(err));
        if (rc < 0) {
            sl_eprintf("up: cannot create the encryption key: %s", err);
            return rc;
        }
        sl_eprintf("warning: %s is unset, so a new encryption key was written to %s (mode "
                   "0600). It seals every secret in the database: keep a copy elsewhere, or "
                   "better, provide the key yourself in %s (base64 of 32 random bytes)",
                   SL_SECRETS_KEY_ENV, path, SL_SECRETS_KEY_ENV);
        rc = sl_secrets_load(u->data, &s, &source, err, sizeof(err));
    }
    if (rc < 0) {
        sl_eprintf("up: %s", err);
        return rc;
    }
    sl_secrets_destroy(s);
    return 0;
}

/* Writes the token to the token file, 0600, never over an existing one. */
static int write_token_file(const struct up *u)
{
    int fd = open(u->token_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    size_t n = strlen(u->token);
    bool ok;

    if (fd == -1) {
        sl_eprintf("up: cannot create %s: %s", u->token_file, strerror(errno));
        return SL_EIO;
    }
    ok = write(fd, u->token, n) == (ssize_t)n && write(fd, "\n", 1) == 1;
    ok = fsync(fd) == 0 && ok;
    ok = close(fd) == 0 && ok;
    if (!ok) {
        sl_eprintf("up: cannot write %s", u->token_file);
        (void)unlink(u->token_file);
        return SL_EIO;
    }
    return 0;
}

/* The database, and the first admin with its token file. */
static int prepare_db(struct up *u)
{
    struct sl_store *st = NULL;
    struct sl_user user;
    char path[PATH_BYTES + 32];
    char err[ERR_BYTES] = "";
    int rc;

    SL_TRY(join(path, sizeof(path), u->data, "sluice.db"));
    rc = sl_store_open(path, &st, err, sizeof(err));
    if (rc < 0) {
        sl_eprintf("up: %s", err);
        return rc;
    }
    memset(&user, 0, sizeof(user));
    if (file_exists(u->token_file)) {
        rc = 0;
    } else if ((rc = sl_store_user_get_by_name(st, ADMIN_NAME, &user)) == 0) {
        /* An earlier run made it, and its token file is gone: no new token behind the
         * operator's back. */
        u->token_file_missing = true;
    } else if (rc == SL_ENOTFOUND) {
        char taken[ERR_BYTES] = "";

        rc = sl_cmd_user_create(st, ADMIN_NAME, true, NULL, u->token, taken, sizeof(taken));
        if (rc == SL_EEXIST) {
            /* User names are unique ignoring case: a user made by hand (`Admin`) holds the
             * name. up starts without a token of its own, as when its token file is gone. */
            sl_eprintf("warning: no admin user \"" ADMIN_NAME "\" was created: the user "
                       "\"%s\" holds the name (user names are unique ignoring case)",
                       taken);
            u->token_file_missing = true;
            rc = 0;
        } else if (rc < 0) {
            sl_eprintf("up: cannot create the admin user: %s", sl_strerror(rc));
        } else {
            rc = write_token_file(u);
        }
    } else {
        sl_eprintf("up: cannot read the users: %s", sl_strerror(rc));
    }
    sl_user_finish(&user);
    sl_store_close(st);
    return rc;
}

/* ---- probes (bounded, blocking: up's own process runs no loop) --------------------------- */

static void set_timeouts(int fd)
{
    struct timeval tv = { .tv_sec = PROBE_TIMEOUT_S, .tv_usec = 0 };

    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Sends a GET of `path` on the connected `fd` and returns the response's status (or -1). */
static int http_get_status(int fd, const char *path)
{
    char req[600];
    char reply[PROBE_REPLY_BYTES];
    size_t got = 0;
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
    int status = -1;

    set_timeouts(fd);
    if (n < 0 || n >= (int)sizeof(req) || write(fd, req, (size_t)n) != n) {
        return -1;
    }
    while (got < sizeof(reply) - 1) {
        ssize_t r = read(fd, reply + got, sizeof(reply) - 1 - got);

        if (r <= 0) {
            break;
        }
        got += (size_t)r;
        if (memchr(reply, '\n', got) != NULL) {
            break;
        }
    }
    reply[got] = '\0';
    if (got >= 12 && strncmp(reply, "HTTP/1.", 7) == 0 && reply[8] == ' ') {
        status = (reply[9] - '0') * 100 + (reply[10] - '0') * 10 + (reply[11] - '0');
    }
    return status;
}

/* GET `path` from the Docker API at `sock`: its status, or -1 with `err` set. */
static int docker_get(const char *sock, const char *path, char *err, size_t errlen)
{
    struct sockaddr_un sa;
    int fd;
    int status;

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if (strlen(sock) >= sizeof(sa.sun_path)) {
        (void)snprintf(err, errlen, "the socket path is too long");
        return -1;
    }
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        (void)snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    set_timeouts(fd);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1) {
        (void)snprintf(err, errlen, "connect: %s", strerror(errno));
        (void)close(fd);
        return -1;
    }
    status = http_get_status(fd, path);
    (void)close(fd);
    if (status < 0) {
        (void)snprintf(err, errlen, "no HTTP answer within %d s", PROBE_TIMEOUT_S);
    }
    return status;
}

/* Splits "ADDR:PORT" / "[V6]:PORT" and connects to it. Returns the socket or -1. */
static int tcp_connect(const char *addr_port)
{
    char host[256];
    const char *colon = strrchr(addr_port, ':');
    const char *h = addr_port;
    size_t hn;
    struct addrinfo hints;
    struct addrinfo *ai = NULL;
    int fd = -1;

    if (colon == NULL) {
        return -1;
    }
    hn = (size_t)(colon - addr_port);
    if (hn >= 2 && h[0] == '[' && h[hn - 1] == ']') {
        h++;
        hn -= 2;
    }
    if (hn >= sizeof(host)) {
        return -1;
    }
    memcpy(host, h, hn);
    host[hn] = '\0';
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) {
        return -1;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd != -1) {
        set_timeouts(fd);
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == -1) {
            (void)close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    return fd;
}

static bool port_open(const char *addr_port)
{
    int fd = tcp_connect(addr_port);

    if (fd == -1) {
        return false;
    }
    (void)close(fd);
    return true;
}

/* GET `path` of the control plane answers 200. */
static bool control_answers(const struct up *u, const char *path)
{
    int fd = tcp_connect(u->control_listen);
    int status;

    if (fd == -1) {
        return false;
    }
    status = http_get_status(fd, path);
    (void)close(fd);
    return status == 200;
}

static bool control_healthy(const struct up *u)
{
    return control_answers(u, "/healthz");
}

/* The gateway exists on this host once its address can be bound. */
static bool gateway_present(const struct up *u)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok;

    if (fd == -1) {
        return false;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    ok = inet_pton(AF_INET, u->gateway, &sa.sin_addr) == 1
         && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    (void)close(fd);
    return ok;
}

/* Whether the proxy can take the gateway's DNS and transparent ports: a TCP bind of GATEWAY:53
 * is tried and released. Without CAP_NET_BIND_SERVICE (EACCES), or with something else there
 * (EADDRINUSE), `why` says so and the proxy goes without them. */
static bool gateway_low_ports(const struct up *u, char *why, size_t cap)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    bool ok;

    if (fd == -1) {
        (void)snprintf(why, cap, "%s", strerror(errno));
        return false;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(53);
    /* As the proxy's listeners do: a socket of the last run in TIME_WAIT is no obstacle. */
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    ok = inet_pton(AF_INET, u->gateway, &sa.sin_addr) == 1
         && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    if (!ok) {
        (void)snprintf(why, cap, "%s", strerror(errno));
    }
    (void)close(fd);
    return ok;
}

/* The gateway is up: the proxy answers the containers' DNS there and intercepts what they send
 * without the proxy, unless the proxy arguments already say where, or the ports are out of
 * reach (then a warning: explicit HTTP(S)_PROXY traffic still works, and names do not resolve). */
static void choose_transparent(struct up *u)
{
    char why[ERR_BYTES] = "";

    u->transparent = false;
    if (proxy_arg_given(u, "dns-listen") || proxy_arg_given(u, "transparent")) {
        return;
    }
    if (!gateway_low_ports(u, why, sizeof(why))) {
        sl_eprintf("warning: cannot listen on %s:53 (%s; the proxy needs CAP_NET_BIND_SERVICE): "
                   "containers get no DNS and no transparent interception, only HTTP(S)_PROXY",
                   u->gateway, why);
        return;
    }
    (void)snprintf(u->dns_listen, sizeof(u->dns_listen), "%s:53", u->gateway);
    u->transparent = true;
}

/* ---- Docker and the image ----------------------------------------------------------------- */

static void probe_docker(struct up *u)
{
    char err[ERR_BYTES] = "";
    int status = docker_get(u->passed[PASS_DOCKER_SOCKET], "/_ping", err, sizeof(err));

    u->docker = status == 200;
    if (!u->docker) {
        if (status > 0) {
            (void)snprintf(err, sizeof(err), "/_ping answered %d", status);
        }
        (void)snprintf(u->docker_err, sizeof(u->docker_err), "%s", err);
    }
}

/* Runs the image recipe; returns its exit status (or -1). */
static int run_recipe(const struct up *u, const char *recipe)
{
    char host[PATH_BYTES + 16];
    pid_t pid;
    int status = 0;

    (void)snprintf(host, sizeof(host), "unix://%s", u->passed[PASS_DOCKER_SOCKET]);
    pid = fork();
    if (pid == -1) {
        return -1;
    }
    if (pid == 0) {
        char *argv[] = { mut("bash"), mut(recipe), mut("--image"), mut(u->passed[PASS_IMAGE]),
                         NULL };

        /* Its progress lines belong with the logs, not the summary. */
        if (dup2(STDERR_FILENO, STDOUT_FILENO) == -1 || setenv("DOCKER_HOST", host, 1) != 0) {
            _exit(127);
        }
        (void)execvp("bash", argv);
        _exit(127);
    }
    while (waitpid(pid, &status, 0) == -1) {
        if (errno != EINTR) {
            return -1;
        }
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The default image: present, else built or loaded by the recipe (only for sluice/sandbox:
 * tags, which are the recipe's; another name is the operator's to provide). Never fatal. */
static void ensure_image(const struct up *u)
{
    const char *image = u->passed[PASS_IMAGE];
    const char *recipe = getenv(RECIPE_ENV);
    char path[PATH_BYTES + 64];
    char err[ERR_BYTES] = "";
    int status;

    if (snprintf(path, sizeof(path), "/images/%s/json", image) >= (int)sizeof(path)
        || strpbrk(image, " ?#%") != NULL) {
        sl_eprintf("warning: the image name '%s' is not one Docker can have", image);
        return;
    }
    status = docker_get(u->passed[PASS_DOCKER_SOCKET], path, err, sizeof(err));
    if (status == 200) {
        return;
    }
    if (status != 404) {
        sl_eprintf("warning: cannot tell whether the image %s exists (%s)", image,
                   status > 0 ? "Docker answered an error" : err);
        return;
    }
    if (strncmp(image, RECIPE_REPO, strlen(RECIPE_REPO)) != 0) {
        sl_eprintf("warning: the sandbox image %s is missing: sandboxes that use it will not "
                   "start until it exists",
                   image);
        return;
    }
    if (recipe == NULL || recipe[0] == '\0') {
        recipe = RECIPE_DEFAULT;
    }
    if (!file_exists(recipe)) {
        sl_eprintf("warning: the sandbox image %s is missing and its recipe %s is not here "
                   "(set %s to tools/sandbox-image.sh of a sluice source tree): sandboxes "
                   "will not start until the image exists",
                   image, recipe, RECIPE_ENV);
        return;
    }
    sl_eprintf("the sandbox image %s is missing: building it (or loading it from its cache) "
               "with %s",
               image, recipe);
    status = run_recipe(u, recipe);
    if (status != 0) {
        sl_eprintf("warning: %s failed (status %d): sandboxes will not start until %s exists",
                   recipe, status, image);
    }
}

/* ---- the children's arguments ------------------------------------------------------------- */

struct argv_builder {
    char **v;
    size_t n;
    bool full;
};

static void add_arg(struct argv_builder *b, const char *s)
{
    if (b->n + 1 >= CHILD_ARGS_MAX) {
        b->full = true;
        return;
    }
    b->v[b->n++] = mut(s);
    b->v[b->n] = NULL;
}

/* add_arg() of an option and its value. */
static void add_opt(struct argv_builder *b, const char *name, const char *value)
{
    add_arg(b, name);
    add_arg(b, value);
}

static int build_argvs(struct up *u)
{
    struct argv_builder c = { u->control_argv, 0, false };
    struct argv_builder p = { u->proxy_argv, 0, false };

    add_arg(&c, "sluice");
    add_arg(&c, "control");
    add_opt(&c, "--listen", u->control_listen);
    add_opt(&c, "--data", u->data);
    add_opt(&c, "--proxy-admin-socket", u->sock);
    for (size_t i = 0; i < u->n_sockets; i++) {
        add_opt(&c, "--proxy-admin-socket", u->sockets[i]);
    }
    for (size_t i = 0; i < u->n_urls; i++) {
        add_opt(&c, "--proxy-admin-url", u->urls[i]);
    }
    for (size_t i = 0; i < PASS_COUNT; i++) {
        if (u->passed[i] != NULL) {
            add_opt(&c, passed_names[i], u->passed[i]);
        }
    }

    add_arg(&p, "sluice");
    add_arg(&p, "proxy");
    add_opt(&p, "--listen", u->proxy_listen);
    if (u->gateway_up) {
        add_opt(&p, "--listen", u->gateway_listen);
    }
    if (u->transparent) {
        /* docs/reference/proxy.md §4.12: the containers' resolver, and clients that ignore
         * HTTP(S)_PROXY. */
        add_opt(&p, "--dns-listen", u->dns_listen);
        add_opt(&p, "--transparent", u->gateway);
        if (!proxy_arg_given(u, "transparent-port")) {
            /* The port the walls redirect the named ports to (control's --transparent-port). */
            add_opt(&p, "--transparent-port",
                    value_or(u->passed[PASS_TRANSPARENT_PORT], TRANSPARENT_PORT_TEXT));
        }
    }
    add_opt(&p, "--data", u->data);
    add_opt(&p, "--admin-socket", u->sock);
    add_opt(&p, "--audit-log", u->audit);
    /* docs/reference/proxy.md §4.4: the proxy never dials the control plane for a client. */
    add_opt(&p, "--deny-upstream", u->control_listen);
    for (int i = 0; i < u->n_proxy_args; i++) {
        add_arg(&p, u->proxy_args[i]);
    }
    if (c.full || p.full) {
        sl_eprintf("up: too many arguments (at most %d per child)", CHILD_ARGS_MAX - 1);
        return SL_EINVAL;
    }
    return 0;
}

/* ---- start-up waits ----------------------------------------------------------------------- */

typedef bool ready_fn(const struct up *u);

/* Polls `ready` every 100 ms for up to `secs` while `c` runs and no stop signal came. */
static bool wait_ready(struct sl_sup *s, struct sl_sup_child *c, const struct up *u,
                       ready_fn *ready, unsigned secs)
{
    uint64_t until = sl_sup_now_ms() + (uint64_t)secs * 1000u;

    while (sl_sup_now_ms() < until) {
        if (ready(u)) {
            return true;
        }
        sl_sup_poll(s, 100);
        if (s->stop_signal != 0 || c->pid == 0) {
            return false;
        }
    }
    return ready(u);
}

/* GET /readyz answers 200 (docs/reference/api.md §5.7): every proxy has the newest snapshot and
 * the sandboxes are up or not needed. */
static bool control_ready(const struct up *u)
{
    return control_answers(u, "/readyz");
}

static bool proxy_ready(const struct up *u)
{
    return port_open(u->proxy_listen) && (!u->gateway_up || port_open(u->gateway_listen));
}

/* ---- output ------------------------------------------------------------------------------- */

static void print_example(const struct up *u)
{
    const char *image = u->passed[PASS_IMAGE];

    printf("Try it (copy and paste into a shell on this machine):\n"
           "----8<---- example\n"
           "TOKEN=$(cat %s)\n"
           "API=http://%s/api/v1\n"
           "# an environment whose sandboxes may reach example.com and nothing else\n"
           "curl -sS -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/json' \\\n"
           "  -d '{\"name\":\"example\",\"base_image\":\"%s\",\"network\":\"on\","
           "\"egress\":{\"default\":\"deny\",\"rules\":[{\"host\":\"example.com\"}]}}' \\\n"
           "  \"$API/environments\"; echo\n",
           u->token_file, u->control_listen, image);
    if (!u->docker) {
        printf("curl -sS -H \"Authorization: Bearer $TOKEN\" \"$API/environments\"; echo\n"
               "----8<---- end of example\n"
               "(Sandboxes need a Docker daemon: with one running, restart sluice up for the "
               "rest of the example.)\n");
        return;
    }
    printf("# the repository demo/hello, registered with you as its admin (a sandbox needs write\n"
           "# access to a registered repository)\n"
           "curl -sS -X PUT -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: "
           "application/json' "
           "\\\n"
           "  -d '{\"visibility\":\"private\",\"default_branch\":\"main\"}' "
           "\"$API/repos/demo/hello\"; echo\n"
           "curl -sS -X PUT -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: "
           "application/json' "
           "\\\n"
           "  -d '{\"role\":\"admin\"}' \"$API/repos/demo/hello/members/" ADMIN_NAME "\"; echo\n");
    printf("# a sandbox for the repository demo/hello, in that environment\n"
           "SB=$(curl -sS -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/json' "
           "\\\n"
           "  -d '{\"ref\":\"main\",\"environment\":\"example\"}' "
           "\"$API/repos/demo/hello/sandboxes\" \\\n"
           "  | sed -n 's/.*\"id\":\"\\([^\"]*\\)\".*/\\1/p')\n"
           "echo \"sandbox: $SB\"\n"
           "# curl inside it: through the proxy, which lets example.com through\n"
           "curl -sS -H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/json' \\\n"
           "  -d '{\"cmd\":\"curl -sS https://example.com/\"}' "
           "\"$API/repos/demo/hello/sandboxes/$SB/exec\"; echo\n"
           "# close it (the container goes away)\n"
           "curl -sS -X POST -H \"Authorization: Bearer $TOKEN\" "
           "\"$API/repos/demo/hello/sandboxes/$SB/close\"\n"
           "----8<---- end of example\n");
}

static void print_summary(const struct up *u)
{
    printf("\nsluice is up.\n\n");
    printf("  dashboard    http://%s/dashboard/\n", u->control_listen);
    printf("  API          http://%s/api/v1/\n", u->control_listen);
    if (u->gateway_up) {
        printf("  proxy        %s (this host), %s (containers on network %s)\n", u->proxy_listen,
               u->gateway_listen, u->passed[PASS_NETWORK]);
    } else {
        printf("  proxy        %s (this host)\n", u->proxy_listen);
    }
    printf("  CA           %s (clients of the proxy trust this certificate)\n", u->ca);
    if (u->token[0] != '\0') {
        printf("  admin token  %s\n", u->token);
        printf("               shown once; kept in %s (mode 0600)\n", u->token_file);
    } else if (u->token_file_missing) {
        printf("  admin token  none (%s does not exist); make another admin with\n"
               "               sluice user add NAME --admin --data %s\n",
               u->token_file, u->data);
    } else {
        printf("  admin token  in %s (created by the first run)\n", u->token_file);
    }
    printf("  data         %s (audit log: %s)\n", u->data, u->audit);
    if (u->docker && u->gateway_up) {
        printf("  containers   network %s, gateway %s, image %s\n", u->passed[PASS_NETWORK],
               u->gateway, u->passed[PASS_IMAGE]);
    } else if (u->docker) {
        printf("  containers   NOT AVAILABLE: the network %s did not come up (see the control "
               "plane's log above); sandbox calls answer 503\n",
               u->passed[PASS_NETWORK]);
    } else {
        printf("  containers   NOT AVAILABLE: no Docker daemon answers on %s (%s).\n"
               "               Sandbox calls answer 503; environments and the rest of the API "
               "work.\n",
               u->passed[PASS_DOCKER_SOCKET], u->docker_err);
    }
    printf("\n");
    print_example(u);
    printf("\nCtrl-C stops everything (the sandboxes and the firewall rules are removed).\n\n");
    (void)fflush(stdout);
}

/* ---- run ---------------------------------------------------------------------------------- */

struct run {
    struct sl_sup s;
    struct sl_sup_child control;
    struct sl_sup_child proxy;
};

/* A start-up wait for `c` ended without success: SL_CMD_OK when a stop signal ended it, else
 * SL_CMD_FAIL after saying why (`timeout` describes the timeout). */
static int start_failed(const struct run *r, const struct sl_sup_child *c, const char *what,
                        const char *timeout)
{
    if (r->s.stop_signal != 0) {
        return SL_CMD_OK;
    }
    if (c->pid == 0) {
        sl_eprintf("up: the %s exited while starting (its log is above)", what);
    } else {
        sl_eprintf("up: the %s %s (its log is above)", what, timeout);
    }
    return SL_CMD_FAIL;
}

/* The control plane first: it creates the network and the firewall table the proxy's gateway
 * address lives on (tests/support/sandbox.sh starts them in this order too). Returns
 * SL_CMD_OK with both running, or the exit status up ends with (the caller stops what runs). */
static int start_children(struct up *u, struct run *r)
{
    char text[160];

    if (build_argvs(u) < 0 || sl_sup_start(&r->s, &r->control) < 0) {
        sl_eprintf("up: cannot start the control plane");
        return SL_CMD_FAIL;
    }
    (void)snprintf(text, sizeof(text), "did not answer http://%s/healthz within %d s",
                   u->control_listen, CONTROL_READY_S);
    if (!wait_ready(&r->s, &r->control, u, control_healthy, CONTROL_READY_S)) {
        return start_failed(r, &r->control, "control plane", text);
    }
    if (u->docker) {
        (void)snprintf(u->gateway_listen, sizeof(u->gateway_listen), "%s:%u", u->gateway,
                       u->proxy_port);
        u->gateway_up = wait_ready(&r->s, &r->control, u, gateway_present, GATEWAY_READY_S);
        if (r->s.stop_signal != 0 || r->control.pid == 0) {
            return start_failed(r, &r->control, "control plane", "");
        }
        if (!u->gateway_up) {
            sl_eprintf("warning: the container network's gateway %s did not appear within %d s; "
                       "the proxy listens on %s only",
                       u->gateway, GATEWAY_READY_S, u->proxy_listen);
        } else {
            choose_transparent(u);
        }
    }
    if (build_argvs(u) < 0 || sl_sup_start(&r->s, &r->proxy) < 0) {
        sl_eprintf("up: cannot start the proxy");
        return SL_CMD_FAIL;
    }
    (void)snprintf(text, sizeof(text), "does not accept on %s%s%s within %d s", u->proxy_listen,
                   u->gateway_up ? " and " : "", u->gateway_up ? u->gateway_listen : "",
                   PROXY_READY_S);
    if (!wait_ready(&r->s, &r->proxy, u, proxy_ready, PROXY_READY_S)) {
        return start_failed(r, &r->proxy, "proxy", text);
    }
    /* Never fatal: a sandbox network that does not come up leaves the rest working. */
    if (!wait_ready(&r->s, &r->control, u, control_ready, READYZ_WAIT_S)) {
        if (r->s.stop_signal != 0 || r->control.pid == 0) {
            return start_failed(r, &r->control, "control plane", "");
        }
        sl_eprintf("warning: http://%s/readyz did not answer 200 within %d s (see what it "
                   "names); going on",
                   u->control_listen, READYZ_WAIT_S);
        (void)sl_notify(u->notify_socket, "READY=1\nSTATUS=running, but /readyz says not ready");
        return SL_CMD_OK;
    }
    (void)sl_notify(u->notify_socket, "READY=1\nSTATUS=ready");
    return SL_CMD_OK;
}

/* Control first: its SIGTERM removes the sandboxes (their entries leave the proxy's snapshot,
 * so the proxy is still needed) and then the firewall table. Returns the exit status. */
static int stop_children(struct run *r, int exit_code)
{
    r->s.restarting = false;
    if (r->s.stop_signal != 0) {
        sl_log(SL_LOG_INFO, 0, "msg=\"stopping\" signal=%s",
               r->s.stop_signal == SIGTERM ? "SIGTERM" : "SIGINT");
    }
    if (sl_sup_stop(&r->s, &r->control, CONTROL_STOP_MS) != 0 && exit_code == SL_CMD_OK
        && r->s.stop_signal != 0) {
        sl_eprintf("up: the control plane did not stop cleanly");
        exit_code = SL_CMD_FAIL;
    }
    if (sl_sup_stop(&r->s, &r->proxy, PROXY_STOP_MS) != 0 && exit_code == SL_CMD_OK
        && r->s.stop_signal != 0) {
        sl_eprintf("up: the proxy did not stop cleanly");
        exit_code = SL_CMD_FAIL;
    }
    if (exit_code == SL_CMD_OK) {
        sl_log(SL_LOG_INFO, 0, "msg=\"stopped\"");
    }
    return exit_code;
}

static int supervise(struct up *u)
{
    struct run r;
    int rc;
    int exit_code;

    memset(&r, 0, sizeof(r));
    r.control = (struct sl_sup_child){ .name = "control",
                                       .argv = u->control_argv,
                                       .fatal_status = SL_CMD_USAGE };
    r.proxy = (struct sl_sup_child){ .name = "proxy",
                                     .argv = u->proxy_argv,
                                     .fatal_status = SL_CMD_USAGE };
    rc = sl_sup_init(&r.s);
    if (rc < 0) {
        sl_eprintf("up: cannot block signals: %s", strerror(-rc));
        return SL_CMD_FAIL;
    }
    r.s.initial_ms = u->backoff_ms;
    exit_code = start_children(u, &r);
    if (exit_code == SL_CMD_OK && r.s.stop_signal == 0) {
        print_summary(u);
    }
    sodium_memzero(u->token, sizeof(u->token));
    while (exit_code == SL_CMD_OK && r.s.stop_signal == 0) {
        sl_sup_poll(&r.s, 1000);
        if (r.control.failed || r.proxy.failed) {
            sl_eprintf("up: the %s exited with bad arguments; stopping",
                       r.control.failed ? "control plane" : "proxy");
            exit_code = SL_CMD_FAIL;
        }
        sl_sup_restart_due(&r.s);
    }
    exit_code = stop_children(&r, exit_code);
    sl_sup_finish(&r.s);
    return exit_code;
}

/* Capability `bit` among the effective ones: CAP_NET_ADMIN (12) for the firewall table,
 * CAP_SYS_ADMIN (21) to enter a container's network namespace for its inner wall; with
 * CAP_DAC_READ_SEARCH and CAP_NET_BIND_SERVICE (the proxy's low ports, choose_transparent())
 * all the packaged sluice.service gives its user (docs/install.md). */
static bool has_cap(unsigned bit)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long caps = 0;
    bool found = false;

    if (f == NULL) {
        return false;
    }
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        found = sscanf(line, "CapEff: %llx", &caps) == 1;
    }
    (void)fclose(f);
    return found && (caps & (1ull << bit)) != 0;
}

/* `sluice up`, or with `run` false only its flags checked (--help then prints nothing). */
static int up_command(int argc, char **argv, bool run)
{
    struct up *u = sl_calloc(1, sizeof(*u));
    bool help = false;
    int rc;

    if (u == NULL) {
        sl_eprintf("up: out of memory");
        return SL_CMD_FAIL;
    }
    rc = parse_args(u, argc, argv, &help);
    if (!run || rc != SL_CMD_OK || help) {
        if (run && help) {
            (void)fputs(usage, stdout);
        } else if (run && u->conf != NULL) {
            sl_eprintf("up: the value may come from %s: `sluice config check %s` names its line",
                       u->conf->path, u->conf->path);
        }
        free_args(u);
        sl_free(u);
        return rc;
    }
    if (prepare_dir(u) < 0 || prepare_ca(u) < 0 || prepare_key(u) < 0 || prepare_db(u) < 0) {
        sodium_memzero(u->token, sizeof(u->token));
        free_args(u);
        sl_free(u);
        return SL_CMD_FAIL;
    }
    if (geteuid() != 0 && !has_cap(12)) {
        sl_eprintf("warning: neither root nor CAP_NET_ADMIN: the control plane cannot install "
                   "the firewall table, so sandboxes will be off");
    } else if (geteuid() != 0 && !has_cap(21)) {
        sl_eprintf("warning: neither root nor CAP_SYS_ADMIN: the control plane cannot put the "
                   "inner wall into a container's network namespace, so every sandbox will "
                   "fail to start");
    }
    /* Only up speaks to systemd (NotifyAccess=main); its children must not. */
    if (getenv("NOTIFY_SOCKET") != NULL) {
        u->notify_socket = sl_strdup(getenv("NOTIFY_SOCKET"));
        (void)unsetenv("NOTIFY_SOCKET");
    }
    probe_docker(u);
    if (u->docker) {
        ensure_image(u);
    } else {
        sl_eprintf("no Docker daemon answers on %s (%s): sandboxes are off (their API answers "
                   "503); environments and the rest of the API work",
                   u->passed[PASS_DOCKER_SOCKET], u->docker_err);
    }
    rc = supervise(u);
    free_args(u);
    sl_free(u->notify_socket);
    sl_free(u);
    return rc;
}

int sl_cmd_up_check(int argc, char **argv)
{
    return up_command(argc, argv, false);
}

int sl_cmd_up(int argc, char **argv)
{
    return up_command(argc, argv, true);
}
