/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/control.c - the `sluice control` daemon: start-up checks, the loop, signals and a
 * graceful stop.
 */
#include "control/control.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>
#include <uv.h>

#include "base/log.h"
#include "base/mem.h"
#include "control/api.h"
#include "control/secrets.h"
#include "control/store.h"
#include "http/server.h"

#define ERR_BYTES  512
#define PATH_BYTES 4096

struct daemon {
    uv_loop_t loop;
    uv_signal_t sig_term;
    uv_signal_t sig_int;
    struct sl_http_server *server;
    struct sl_api api;
    bool stopping;
};

void sl_control_config_init(struct sl_control_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->listen = SL_CONTROL_DEFAULT_LISTEN;
    cfg->docker_socket = SL_CONTROL_DEFAULT_DOCKER_SOCKET;
    cfg->network = SL_CONTROL_DEFAULT_NETWORK;
    cfg->log_level = SL_LOG_INFO;
}

/* Creates the data directory (0700) when it is missing. */
static int ensure_data_dir(const char *dir)
{
    struct stat st;

    if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
        sl_eprintf("control: cannot create the data directory %s: %s", dir, strerror(errno));
        return SL_EIO;
    }
    if (stat(dir, &st) == -1 || !S_ISDIR(st.st_mode)) {
        sl_eprintf("control: the data directory %s is not a directory", dir);
        return SL_EIO;
    }
    return 0;
}

static int load_key(const char *dir, struct sl_secrets **out)
{
    char err[ERR_BYTES] = "";
    int rc = sl_secrets_load(dir, out, NULL, err, sizeof(err));

    if (rc == SL_ENOTFOUND) {
        sl_eprintf("control: no encryption key: set %s (base64 of 32 random bytes, e.g. "
                   "`openssl rand -base64 32`) or run `sluice up` once to create %s/%s",
                   SL_SECRETS_KEY_ENV, dir, SL_SECRETS_KEY_FILE);
    } else if (rc < 0) {
        sl_eprintf("control: %s", err);
    }
    return rc;
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct daemon *d = h->data;

    if (d->stopping) {
        return;
    }
    d->stopping = true;
    sl_log(SL_LOG_INFO, 0, "msg=\"stopping\" signal=%s pending=%zu",
           signum == SIGTERM ? "SIGTERM" : "SIGINT", sl_api_pending(&d->api));
    /* Requests in flight finish their database work and answer into gone exchanges; the loop
     * ends once the last job and handle are done. */
    sl_http_server_close(d->server, NULL, NULL);
    d->server = NULL;
    uv_close((uv_handle_t *)&d->sig_term, NULL);
    uv_close((uv_handle_t *)&d->sig_int, NULL);
}

static int serve(struct daemon *d, const struct sl_control_config *cfg)
{
    char err[ERR_BYTES] = "";
    int rc;

    rc = sl_http_server_create(&d->loop, NULL, sl_api_handle, &d->api, &d->server);
    if (rc < 0) {
        sl_eprintf("control: cannot create the HTTP server: %s", sl_strerror(rc));
        return rc;
    }
    rc = sl_http_server_listen_tcp(d->server, cfg->listen, err, sizeof(err));
    if (rc < 0) {
        sl_eprintf("control: --listen %s: %s", cfg->listen, err);
        sl_http_server_close(d->server, NULL, NULL);
        d->server = NULL;
        (void)uv_run(&d->loop, UV_RUN_DEFAULT);
        return rc;
    }
    SL_BUG_ON(uv_signal_init(&d->loop, &d->sig_term) != 0);
    SL_BUG_ON(uv_signal_init(&d->loop, &d->sig_int) != 0);
    d->sig_term.data = d;
    d->sig_int.data = d;
    (void)uv_signal_start(&d->sig_term, on_signal, SIGTERM);
    (void)uv_signal_start(&d->sig_int, on_signal, SIGINT);
    sl_log(SL_LOG_INFO, 0, "msg=\"control plane listening\" listen=%s data=%s", cfg->listen,
           cfg->data_dir);
    if (cfg->n_proxy_admin_sockets > 0) {
        /* The snapshot compiler (control/snapshot) is not in the tree yet: nothing to push. */
        sl_log(SL_LOG_WARN, 0,
               "msg=\"snapshot push is not built yet; proxies keep their own policy\" "
               "proxies=%zu",
               cfg->n_proxy_admin_sockets);
    }
    (void)uv_run(&d->loop, UV_RUN_DEFAULT);
    return 0;
}

int sl_control_run(const struct sl_control_config *cfg)
{
    struct daemon d;
    struct sl_secrets *secrets = NULL;
    struct sl_store *store = NULL;
    char path[PATH_BYTES];
    char err[ERR_BYTES] = "";
    int rc;

    memset(&d, 0, sizeof(d));
    sl_log_set_level(cfg->log_level);
    json_set_alloc_funcs(sl_malloc, sl_free);
    rc = ensure_data_dir(cfg->data_dir);
    if (rc < 0) {
        return rc;
    }
    rc = load_key(cfg->data_dir, &secrets);
    if (rc < 0) {
        return rc;
    }
    if (snprintf(path, sizeof(path), "%s/sluice.db", cfg->data_dir) >= (int)sizeof(path)) {
        sl_eprintf("control: the data directory's path is too long");
        rc = SL_EINVAL;
        goto out_secrets;
    }
    rc = sl_store_open(path, &store, err, sizeof(err));
    if (rc < 0) {
        sl_eprintf("control: %s", err);
        goto out_secrets;
    }
    rc = uv_loop_init(&d.loop);
    if (rc < 0) {
        sl_eprintf("control: cannot start the event loop: %s", uv_strerror(rc));
        goto out_store;
    }
    d.api.loop = &d.loop;
    d.api.store = store;
    d.api.secrets = secrets;
    d.api.default_image = cfg->image;
    sl_api_init(&d.api);
    rc = serve(&d, cfg);
    SL_BUG_ON(sl_api_pending(&d.api) != 0);
    if (uv_loop_close(&d.loop) != 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"the loop still had handles at exit\"");
    }
    sl_log(SL_LOG_INFO, 0, "msg=\"stopped\"");
out_store:
    sl_store_close(store);
out_secrets:
    sl_secrets_destroy(secrets);
    return rc;
}
